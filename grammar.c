/* grammar.c - constrained output: a GBNF grammar (llama.cpp's syntax and semantics) turned into a
 * mask over token ids for the sampler.
 *
 * The parser and its checks are grammar-parse.c (GBNF text -> checked rules of elements; after
 * them every prefix the matcher accepts can be completed, so generation never walks into a dead
 * end). Here, top to bottom:
 * 1. The intervals: the grammar's character classes over code point intervals.
 * 2. The matcher: a state is a set of stacks (llama.cpp's llama-grammar), each stack a chain of
 *    interned frames (position in a rule, the frame to return to), so a stack is one int and a
 *    set of stacks is one int (`sid`) once interned. Characters are matched by code point
 *    interval: the grammar's ranges cut [0, 0x110000) into intervals inside which every code
 *    point behaves the same, and the transition sid x interval -> sid is computed once and kept.
 *    Bytes drive it through a partial UTF-8 decoder, so a piece may end or begin inside a
 *    character (the interval of a partial character is often known from its lead byte alone).
 * 3. The mask: the vocabulary's piece bytes form a trie stored in preorder; the walk from the
 *    current state steps one byte per node and skips a whole subtree where the state dies. Masks
 *    are cached per state (states recur: every character of a JSON string leaves the same stack
 *    set), and end-of-generation ids are allowed exactly when the state accepts. */
#include "grammar.h"
#include "grammar-parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"
#include "util.h"

/* ================================ limits ==================================================== */

#define MAX_FRAMES (1 << 23) /* interned stack frames */
#define MAX_SETS (1 << 20)   /* interned stack sets */
#define MAX_SET_SIZE 65536   /* stacks in one set (a very ambiguous grammar) */
#define MASK_CACHE_SLOTS 256
#define MAX_DSTATES (1 << 17) /* byte-level states (a row of 256 transitions each) */
#define LOOP_MIN_ASCII 64     /* a state looping on >= 64/128 of the ASCII intervals is scanned */
enum { TOK_NONASCII = 1, TOK_BADUTF8 = 2 };
#define CP_END 0x110000u

/* ================================ the parsed grammar ======================================== */

typedef g3_gelem elem;
enum { E_END = G3_E_END, E_ALT = G3_E_ALT, E_REF = G3_E_REF, E_CHAR = G3_E_CHAR };
typedef g3_gparser parser;
typedef g3_grule prule;

/* ================================ the compiled grammar and its state ======================= */

/* A byte-level position of the matcher: the stack set, and a character in progress. */
typedef struct {
    int32_t sid;       /* stack set before the character in progress */
    int32_t pend;      /* rem > 0: the set after it if already known (>= 0), DEAD, or UNDECIDED */
    uint32_t val;      /* bits of the character so far */
    uint32_t vlo, vhi; /* code points the lead byte allows (overlong / surrogate bounds) */
    uint32_t rem;      /* continuation bytes still expected */
} bstate;

#define DEAD (-1)
#define UNKNOWN (-2)
#define UNDECIDED (-3)

/* A state of the byte-level automaton the mask walk runs: a whole stack set, or a character in
 * progress. When the character's interval is already known (pend >= 0) only the range of the
 * next continuation byte matters, so such states are shared by every prefix of the character. */
typedef struct {
    bstate b;         /* b.rem == 0: the set b.sid; else the character in progress */
    uint8_t lo2, hi2; /* pend >= 0: the bytes the next continuation byte may be */
} dstate;

typedef struct {
    uint8_t rem;  /* continuation bytes after this lead; 0 = not a lead byte */
    uint8_t bits; /* value bits of the lead */
    uint32_t vlo, vhi;
    int32_t iv; /* the interval of every character it can start, or -1 */
} lead_info;

struct gemma3_grammar {
    /* rules */
    elem *el;
    int n_el;
    int n_rules;
    int32_t *alt_first, *alt_count, *alts; /* alternatives of rule r: alts[alt_first[r] ..] */
    int root;
    /* character classes against code point intervals */
    uint32_t *bounds; /* [n_iv + 1] interval starts, bounds[n_iv] = CP_END */
    int n_iv;
    uint64_t *member; /* [n_cls][iv_words]: interval i is in class c */
    int n_cls, iv_words;
    int32_t ascii_iv[128];
    lead_info lead[256];

    /* frames: (pos, parent) interned; frame 0 is the empty stack (accept) */
    int32_t *fr_pos, *fr_parent;
    uint32_t *fr_stamp;
    int n_fr, cap_fr;
    int32_t *fr_hash;
    uint32_t fr_hash_mask;
    uint32_t stamp;

    /* stack sets: sorted frame ids, interned */
    int32_t *set_data;
    size_t n_set_data, cap_set_data;
    size_t *set_off;
    int32_t *set_len;
    int n_sets, cap_sets;
    int32_t *set_hash;
    uint32_t set_hash_mask;
    int32_t *trans; /* [n_sets][n_iv] next sid, UNKNOWN or DEAD */

    /* the byte-level automaton: dstates interned, a row of 256 next states each (UNKNOWN until
     * first needed) */
    dstate *ds;
    int32_t *drow;
    int n_ds, cap_ds;
    int32_t *ds_hash;
    uint32_t ds_hash_mask;
    int32_t *sid_ds; /* [cap_sets] the dstate of a whole set, -1 if none yet */

    /* scratch of one advance */
    int32_t *work, *out;
    int cap_work, cap_out;
    int n_out;

    /* vocabulary */
    int32_t n_vocab;
    char *pieces;      /* every piece's bytes back to back */
    size_t *piece_off; /* [n_vocab + 1]; piece_len < 0 = never allowed */
    int32_t *piece_len;
    int32_t *end_ids;
    int n_end;
    uint8_t *is_end; /* [n_vocab] */
    /* the trie of piece bytes in preorder */
    uint8_t *tn_byte;
    uint16_t *tn_depth;
    int32_t *tn_skip; /* index after the node's subtree */
    int32_t *tn_tok;  /* [n_tn + 1]: tokens of node i are tok_list[tn_tok[i] .. tn_tok[i+1]) */
    int32_t *tok_list;
    int n_tn;
    int max_depth;
    int32_t *walk; /* [max_depth + 2] dstate after each depth */
    /* per token, for states that loop on most characters (inside a JSON string): which ASCII
     * intervals its bytes hit (interval i -> bit min(i, 63)), and TOK_NONASCII / TOK_BADUTF8 */
    uint64_t *tok_ascii;
    uint8_t *tok_flags;
    int n_ascii_iv;

    /* masks */
    int words;                           /* (n_vocab + 31) / 32 */
    uint32_t *cache;                     /* [MASK_CACHE_SLOTS][words] */
    int32_t cache_key[MASK_CACHE_SLOTS]; /* dstate of each cached mask */
    int cache_used, cache_next, cache_off, scan_off;
    uint32_t *scratch_mask;

    /* the current state */
    int32_t start, cur; /* dstates */
    int finished;
    int failed; /* a limit was hit: the error is recorded */
    g3_grammar_stats stats;
};

/* ================================ 1. intervals ============================================= */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int iv_of(const gemma3_grammar *g, uint32_t cp) {
    int lo = 0, hi = g->n_iv - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (g->bounds[mid] <= cp)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Cuts [0, 0x110000) at every range edge; class membership per interval, set range by range
 * (a range covers a run of whole intervals) and flipped for a negated class. */
static int build_intervals(gemma3_grammar *g, const parser *P) {
    uint32_t *b = malloc(((size_t)P->n_rng * 2 + 4) * sizeof *b);
    if (!b) return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    int n = 0;
    b[n++] = 0;
    b[n++] = 0x80; /* ASCII apart: its intervals come from a table */
    b[n++] = CP_END;
    for (int i = 0; i < P->n_rng; i++) {
        b[n++] = P->rng[i].lo;
        b[n++] = P->rng[i].hi + 1;
    }
    qsort(b, (size_t)n, sizeof *b, cmp_u32);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (m == 0 || b[i] != b[m - 1]) b[m++] = b[i];
    g->bounds = b;
    g->n_iv = m - 1;
    g->n_cls = P->n_cls;
    g->iv_words = (g->n_iv + 63) / 64;
    g->member = calloc((size_t)(g->n_cls ? g->n_cls : 1) * (size_t)g->iv_words, sizeof *g->member);
    if (!g->member) return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    for (int k = 0; k < P->n_cls; k++) {
        uint64_t *row = g->member + (size_t)k * g->iv_words;
        const g3_char_class *c = &P->cls[k];
        for (int r = c->start; r < c->start + c->n; r++)
            for (int i = iv_of(g, P->rng[r].lo); i <= iv_of(g, P->rng[r].hi); i++)
                row[i / 64] |= 1ull << (i % 64);
        if (c->negated)
            for (int i = 0; i < g->n_iv; i++) row[i / 64] ^= 1ull << (i % 64);
    }
    return GEMMA3_OK;
}

/* ================================ 2. matcher ================================================ */

static uint32_t hash2(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) ^ (uint32_t)h;
}

static int fail_limit(gemma3_grammar *g, const char *what, long limit) {
    if (!g->failed)
        g3_error(GEMMA3_ERR_NOMEM, "grammar: more than %ld %s (the grammar is too ambiguous)",
                 limit, what);
    g->failed = 1;
    return DEAD;
}

/* The entry hashes of the frame, set and dstate indexes (g3_grammar_index), grown as they fill. */
static uint32_t frame_entry_hash(const void *ctx, int32_t f) {
    const gemma3_grammar *g = ctx;
    return hash2((uint32_t)g->fr_pos[f], (uint32_t)g->fr_parent[f]);
}

static int rehash_frames(gemma3_grammar *g, uint32_t size) {
    return g3_grammar_index(g, 1, g->n_fr, frame_entry_hash, NULL, size, &g->fr_hash, &g->fr_hash_mask);
}

/* The frame (pos, parent), interned. */
static int32_t frame(gemma3_grammar *g, int32_t pos, int32_t parent) {
    uint32_t j = hash2((uint32_t)pos, (uint32_t)parent) & g->fr_hash_mask;
    for (int32_t f; (f = g->fr_hash[j]) >= 0; j = (j + 1) & g->fr_hash_mask)
        if (g->fr_pos[f] == pos && g->fr_parent[f] == parent) return f;
    if (g->n_fr >= MAX_FRAMES) return fail_limit(g, "stack frames", MAX_FRAMES);
    if (g->n_fr == g->cap_fr) {
        int cap = g->cap_fr * 2;
        int32_t *p = realloc(g->fr_pos, (size_t)cap * sizeof *p);
        if (p) g->fr_pos = p;
        int32_t *q = realloc(g->fr_parent, (size_t)cap * sizeof *q);
        if (q) g->fr_parent = q;
        uint32_t *s = realloc(g->fr_stamp, (size_t)cap * sizeof *s);
        if (s) g->fr_stamp = s;
        if (!p || !q || !s) return fail_limit(g, "stack frames (out of memory)", g->cap_fr);
        g->cap_fr = cap;
    }
    int32_t f = g->n_fr++;
    g->fr_pos[f] = pos;
    g->fr_parent[f] = parent;
    g->fr_stamp[f] = 0;
    g->fr_hash[j] = f;
    if ((uint32_t)g->n_fr * 2 > g->fr_hash_mask + 1 && rehash_frames(g, (g->fr_hash_mask + 1) * 2))
        return fail_limit(g, "stack frames (out of memory)", g->n_fr);
    return f;
}

static int push_work(gemma3_grammar *g, int *n, int32_t f) {
    if (f < 0) return -1;
    if (g3_grammar_grow((void **)&g->work, &g->cap_work, *n + 1, sizeof *g->work)) return -1;
    g->work[(*n)++] = f;
    return 0;
}

/* Adds to out[] every character-topped stack (and the empty one) that frame f reaches without
 * consuming input: rule references expand into their alternatives (a reference last in its
 * alternative returns straight to the caller's caller), ends of alternatives pop. Frames seen in
 * this advance (stamp) are not expanded twice, which also ends cycles of tail calls. */
static int closure(gemma3_grammar *g, int32_t f0) {
    int nw = 0;
    if (push_work(g, &nw, f0)) return -1;
    while (nw > 0) {
        int32_t f = g->work[--nw];
        if (g->fr_stamp[f] == g->stamp) continue;
        g->fr_stamp[f] = g->stamp;
        const elem *e = f == 0 ? NULL : &g->el[g->fr_pos[f]];
        if (!e || e->type == E_CHAR) {
            if (g->n_out >= MAX_SET_SIZE) return fail_limit(g, "stacks in one state", MAX_SET_SIZE);
            if (g3_grammar_grow((void **)&g->out, &g->cap_out, g->n_out + 1, sizeof *g->out)) return -1;
            g->out[g->n_out++] = f;
        } else if (e->type == E_END || e->type == E_ALT) {
            if (push_work(g, &nw, g->fr_parent[f])) return -1;
        } else {
            int32_t pos = g->fr_pos[f], parent = g->fr_parent[f];
            int next = g->el[pos + 1].type;
            int32_t ret = next == E_END || next == E_ALT ? parent : frame(g, pos + 1, parent);
            if (ret < 0) return -1;
            int r = e->arg;
            for (int a = 0; a < g->alt_count[r]; a++)
                if (push_work(g, &nw, frame(g, g->alts[g->alt_first[r] + a], ret))) return -1;
        }
    }
    return 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static uint32_t hash_set(const int32_t *v, int n) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++) h = hash2(h, (uint32_t)v[i]);
    return h;
}

static uint32_t set_entry_hash(const void *ctx, int32_t id) {
    const gemma3_grammar *g = ctx;
    return hash_set(g->set_data + g->set_off[id], g->set_len[id]);
}

static int rehash_sets(gemma3_grammar *g, uint32_t size) {
    return g3_grammar_index(g, 0, g->n_sets, set_entry_hash, NULL, size, &g->set_hash,
                            &g->set_hash_mask);
}

/* The set out[0..n_out), sorted, interned; DEAD if empty. */
static int32_t intern_out(gemma3_grammar *g) {
    int n = g->n_out;
    if (n == 0) return DEAD;
    qsort(g->out, (size_t)n, sizeof *g->out, cmp_i32);
    uint32_t j = hash_set(g->out, n) & g->set_hash_mask;
    for (int32_t s; (s = g->set_hash[j]) >= 0; j = (j + 1) & g->set_hash_mask)
        if (g->set_len[s] == n && memcmp(g->set_data + g->set_off[s], g->out, (size_t)n * 4) == 0)
            return s;
    if (g->n_sets >= MAX_SETS) return fail_limit(g, "grammar states", MAX_SETS);
    if (g->n_sets == g->cap_sets) {
        int cap = g->cap_sets * 2;
        size_t *o = realloc(g->set_off, (size_t)cap * sizeof *o);
        if (o) g->set_off = o;
        int32_t *l = realloc(g->set_len, (size_t)cap * sizeof *l);
        if (l) g->set_len = l;
        int32_t *t = realloc(g->trans, (size_t)cap * (size_t)g->n_iv * sizeof *t);
        if (t) g->trans = t;
        int32_t *d = realloc(g->sid_ds, (size_t)cap * sizeof *d);
        if (d) g->sid_ds = d;
        if (!o || !l || !t || !d) return fail_limit(g, "grammar states (out of memory)", g->n_sets);
        g->cap_sets = cap;
    }
    if (g->n_set_data + (size_t)n > g->cap_set_data) {
        size_t cap = g->cap_set_data * 2;
        while (cap < g->n_set_data + (size_t)n) cap *= 2;
        int32_t *d = realloc(g->set_data, cap * sizeof *d);
        if (!d) return fail_limit(g, "grammar states (out of memory)", g->n_sets);
        g->set_data = d;
        g->cap_set_data = cap;
    }
    int32_t s = g->n_sets++;
    g->set_off[s] = g->n_set_data;
    g->set_len[s] = n;
    memcpy(g->set_data + g->n_set_data, g->out, (size_t)n * sizeof *g->out);
    g->n_set_data += (size_t)n;
    for (int i = 0; i < g->n_iv; i++) g->trans[(size_t)s * g->n_iv + i] = UNKNOWN;
    g->sid_ds[s] = -1;
    g->set_hash[j] = s;
    if ((uint32_t)g->n_sets * 2 > g->set_hash_mask + 1 &&
        rehash_sets(g, (g->set_hash_mask + 1) * 2))
        return fail_limit(g, "grammar states (out of memory)", g->n_sets);
    return s;
}

static int class_member(const gemma3_grammar *g, int k, int iv) {
    return (int)(g->member[(size_t)k * g->iv_words + iv / 64] >> (iv % 64) & 1);
}

/* The stack set after one character of interval iv from set sid. */
static int32_t advance(gemma3_grammar *g, int32_t sid, int iv) {
    if (g->failed) return DEAD;
    g->stamp++;
    if (g->stamp == 0) { /* wrapped: clear the stamps */
        memset(g->fr_stamp, 0, (size_t)g->n_fr * sizeof *g->fr_stamp);
        g->stamp = 1;
    }
    g->n_out = 0;
    int n = g->set_len[sid];
    for (int i = 0; i < n; i++) {
        int32_t f = g->set_data[g->set_off[sid] + (size_t)i]; /* re-read: closure may realloc */
        if (f == 0) continue;
        int32_t pos = g->fr_pos[f];
        if (!class_member(g, g->el[pos].arg, iv)) continue;
        int32_t next = g->el[pos + 1].type == E_END || g->el[pos + 1].type == E_ALT
                           ? g->fr_parent[f]
                           : frame(g, pos + 1, g->fr_parent[f]);
        if (next < 0 || closure(g, next)) {
            if (!g->failed) fail_limit(g, "stack frames (out of memory)", g->n_fr);
            return DEAD;
        }
    }
    return intern_out(g);
}

static inline int32_t trans(gemma3_grammar *g, int32_t sid, int iv) {
    int32_t t = g->trans[(size_t)sid * g->n_iv + iv];
    if (t != UNKNOWN) return t;
    t = advance(g, sid, iv);
    if (!g->failed) g->trans[(size_t)sid * g->n_iv + iv] = t;
    return t;
}

/* Is some interval in [a, z] alive from sid? */
static int any_alive(gemma3_grammar *g, int32_t sid, int a, int z) {
    for (int i = a; i <= z; i++)
        if (trans(g, sid, i) >= 0) return 1;
    return 0;
}

/* Feeds one byte; 1 alive, 0 dead. */
static inline int step(gemma3_grammar *g, bstate *s, unsigned b) {
    if (s->rem == 0) {
        if (b < 0x80) {
            int32_t n = trans(g, s->sid, g->ascii_iv[b]);
            if (n < 0) return 0;
            s->sid = n;
            return 1;
        }
        const lead_info *L = &g->lead[b];
        if (!L->rem) return 0;
        s->rem = L->rem;
        s->val = L->bits;
        s->vlo = L->vlo;
        s->vhi = L->vhi;
        if (L->iv >= 0) {
            s->pend = trans(g, s->sid, L->iv);
            return s->pend >= 0;
        }
        s->pend = UNDECIDED;
        return any_alive(g, s->sid, iv_of(g, L->vlo), iv_of(g, L->vhi));
    }
    if ((b & 0xC0) != 0x80) return 0;
    s->val = s->val << 6 | (b & 63u);
    s->rem--;
    uint32_t sh = 6 * s->rem;
    uint32_t lo = s->val << sh, hi = lo | ((1u << sh) - 1);
    if (lo < s->vlo) lo = s->vlo;
    if (hi > s->vhi) hi = s->vhi;
    if (lo > hi) return 0; /* overlong, surrogate or beyond U+10FFFF */
    if (s->rem == 0) {
        int32_t n = s->pend >= 0 ? s->pend : trans(g, s->sid, iv_of(g, s->val));
        if (n < 0) return 0;
        s->sid = n;
        return 1;
    }
    if (s->pend == UNDECIDED) {
        int a = iv_of(g, lo), z = iv_of(g, hi);
        if (a == z) {
            s->pend = trans(g, s->sid, a);
            return s->pend >= 0;
        }
        return any_alive(g, s->sid, a, z);
    }
    return 1;
}

/* ---- the byte-level automaton ------------------------------------------------------------- */

static uint32_t hash_dstate(const dstate *d) {
    uint32_t h = hash2((uint32_t)d->b.sid, (uint32_t)d->b.pend);
    h = hash2(h, d->b.val);
    h = hash2(h, d->b.vlo ^ d->b.vhi << 1);
    return hash2(h, d->b.rem | (uint32_t)d->lo2 << 8 | (uint32_t)d->hi2 << 16);
}

static int32_t dtrans_slow(gemma3_grammar *g, int32_t k, unsigned b);
static int same_dstate(const dstate *a, const dstate *b) {
    return a->b.sid == b->b.sid && a->b.pend == b->b.pend && a->b.val == b->b.val &&
           a->b.vlo == b->b.vlo && a->b.vhi == b->b.vhi && a->b.rem == b->b.rem &&
           a->lo2 == b->lo2 && a->hi2 == b->hi2;
}

static uint32_t ds_entry_hash(const void *ctx, int32_t id) {
    return hash_dstate(&((const gemma3_grammar *)ctx)->ds[id]);
}

static int rehash_ds(gemma3_grammar *g, uint32_t size) {
    return g3_grammar_index(g, 0, g->n_ds, ds_entry_hash, NULL, size, &g->ds_hash,
                            &g->ds_hash_mask);
}

/* The dstate d (fields not in use zero), interned. */
static int32_t intern_ds(gemma3_grammar *g, const dstate *d) {
    uint32_t j = hash_dstate(d) & g->ds_hash_mask;
    for (int32_t k; (k = g->ds_hash[j]) >= 0; j = (j + 1) & g->ds_hash_mask)
        if (same_dstate(&g->ds[k], d)) return k;
    if (g->n_ds >= MAX_DSTATES) return fail_limit(g, "byte-level states", MAX_DSTATES);
    if (g->n_ds == g->cap_ds) {
        int cap = g->cap_ds * 2;
        dstate *p = realloc(g->ds, (size_t)cap * sizeof *p);
        if (p) g->ds = p;
        int32_t *r = realloc(g->drow, (size_t)cap * 256 * sizeof *r);
        if (r) g->drow = r;
        if (!p || !r) return fail_limit(g, "byte-level states (out of memory)", g->n_ds);
        g->cap_ds = cap;
    }
    int32_t k = g->n_ds++;
    g->ds[k] = *d;
    for (int b = 0; b < 256; b++) g->drow[(size_t)k * 256 + b] = UNKNOWN;
    g->ds_hash[j] = k;
    if ((uint32_t)g->n_ds * 2 > g->ds_hash_mask + 1 && rehash_ds(g, (g->ds_hash_mask + 1) * 2))
        return fail_limit(g, "byte-level states (out of memory)", g->n_ds);
    return k;
}

static int32_t ds_of_sid(gemma3_grammar *g, int32_t sid) {
    if (g->sid_ds[sid] >= 0) return g->sid_ds[sid];
    dstate d;
    memset(&d, 0, sizeof d);
    d.b.sid = sid;
    int32_t k = intern_ds(g, &d);
    if (k >= 0) g->sid_ds[sid] = k;
    return k;
}

/* The dstate of a byte-level position after a step; lead: the lead byte just read, or 0. */
static int32_t ds_of_bstate(gemma3_grammar *g, const bstate *s, unsigned lead) {
    if (s->rem == 0) return ds_of_sid(g, s->sid);
    dstate d;
    memset(&d, 0, sizeof d);
    if (s->pend >= 0) { /* decided: only the next byte's range is left to check */
        d.b.sid = -1;
        d.b.pend = s->pend;
        d.b.rem = s->rem;
        d.lo2 = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
        d.hi2 = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
    } else {
        d.b = *s;
    }
    return intern_ds(g, &d);
}

/* The next dstate after byte b, computed (the walk looks drow up first). */
static int32_t dtrans_slow(gemma3_grammar *g, int32_t k, unsigned b) {
    dstate D = g->ds[k];
    int32_t t;
    if (D.b.rem > 0 && D.b.pend >= 0) {
        if (b < D.lo2 || b > D.hi2) {
            t = DEAD;
        } else if (D.b.rem == 1) {
            t = ds_of_sid(g, D.b.pend);
        } else {
            dstate n;
            memset(&n, 0, sizeof n);
            n.b.sid = -1;
            n.b.pend = D.b.pend;
            n.b.rem = D.b.rem - 1;
            n.lo2 = 0x80;
            n.hi2 = 0xBF;
            t = intern_ds(g, &n);
        }
    } else {
        bstate s = D.b;
        t = step(g, &s, b) ? ds_of_bstate(g, &s, D.b.rem == 0 ? b : 0) : DEAD;
    }
    if (g->failed) return DEAD;
    g->drow[(size_t)k * 256 + b] = t;
    return t;
}

static inline int32_t dtrans(gemma3_grammar *g, int32_t k, unsigned b) {
    int32_t t = g->drow[(size_t)k * 256 + b];
    return t != UNKNOWN ? t : dtrans_slow(g, k, b);
}

static int accepting(const gemma3_grammar *g, int32_t k) {
    const bstate *s = &g->ds[k].b;
    return s->rem == 0 && g->set_len[s->sid] > 0 && g->set_data[g->set_off[s->sid]] == 0;
}

/* The dstate after the bytes p[0..n) from k, DEAD if they do not continue the grammar. */
static int32_t feed_bytes(gemma3_grammar *g, int32_t k, const char *p, size_t n) {
    for (size_t i = 0; i < n && k >= 0; i++) k = dtrans(g, k, (unsigned char)p[i]);
    return k;
}

/* ================================ 3. vocabulary trie and masks ============================== */

typedef struct {
    const char *p;
    int32_t len, id;
} piece_ref;

static int cmp_piece(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    int c = memcmp(x->p, y->p, (size_t)(x->len < y->len ? x->len : y->len));
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Whether p[0..n) is UTF-8 that may stop inside its last character (the rules of step()). */
static int utf8_prefix_valid(const gemma3_grammar *g, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        const lead_info *L = &g->lead[p[i]];
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        if (!L->rem) return 0;
        uint32_t val = L->bits;
        size_t j = 1;
        for (; j <= L->rem && i + j < n; j++) {
            if ((p[i + j] & 0xC0) != 0x80) return 0;
            val = val << 6 | (p[i + j] & 63u);
            uint32_t sh = 6 * (L->rem - (uint32_t)j);
            uint32_t lo = val << sh, hi = lo | ((1u << sh) - 1);
            if (hi < L->vlo || lo > L->vhi) return 0;
        }
        i += j;
    }
    return 1;
}

/* The per-token features of the loop scan (see mask_by_scan). */
static int token_features(gemma3_grammar *g) {
    g->tok_ascii = calloc((size_t)g->n_vocab, sizeof *g->tok_ascii);
    g->tok_flags = calloc((size_t)g->n_vocab, 1);
    if (!g->tok_ascii || !g->tok_flags) return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    g->n_ascii_iv = g->ascii_iv[127] + 1;
    for (int32_t id = 0; id < g->n_vocab; id++) {
        const unsigned char *p = (const unsigned char *)g->pieces + g->piece_off[id];
        for (int32_t i = 0; i < g->piece_len[id]; i++) {
            if (p[i] < 0x80) {
                int iv = g->ascii_iv[p[i]];
                g->tok_ascii[id] |= 1ull << (iv < 63 ? iv : 63);
            } else {
                g->tok_flags[id] |= TOK_NONASCII;
            }
        }
        if (g->piece_len[id] > 0 && !utf8_prefix_valid(g, p, (size_t)g->piece_len[id]))
            g->tok_flags[id] |= TOK_BADUTF8;
    }
    return GEMMA3_OK;
}

/* Sorted pieces give the trie's nodes in preorder: each piece adds the nodes past its longest
 * common prefix with the previous one. */
static int build_trie(gemma3_grammar *g) {
    piece_ref *ids = malloc((size_t)g->n_vocab * sizeof *ids);
    if (!ids) return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    int n = 0;
    size_t total = 0;
    for (int32_t i = 0; i < g->n_vocab; i++)
        if (g->piece_len[i] > 0 && !g->is_end[i]) {
            ids[n++] = (piece_ref){g->pieces + g->piece_off[i], g->piece_len[i], i};
            total += (size_t)g->piece_len[i];
            if (g->piece_len[i] > g->max_depth) g->max_depth = g->piece_len[i];
        }
    qsort(ids, (size_t)n, sizeof *ids, cmp_piece);
    size_t cap = total + 1;
    g->tn_byte = malloc(cap);
    g->tn_depth = malloc(cap * sizeof *g->tn_depth);
    g->tn_skip = malloc(cap * sizeof *g->tn_skip);
    g->tn_tok = malloc((cap + 1) * sizeof *g->tn_tok);
    g->tok_list = malloc(((size_t)n + 1) * sizeof *g->tok_list);
    int32_t *path = malloc(((size_t)g->max_depth + 1) * sizeof *path);
    g->walk = malloc(((size_t)g->max_depth + 2) * sizeof *g->walk);
    if (!g->tn_byte || !g->tn_depth || !g->tn_skip || !g->tn_tok || !g->tok_list || !path ||
        !g->walk) {
        free(ids);
        free(path);
        return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory for the vocabulary trie");
    }
    int nn = 0, depth = 0, nt = 0;
    const char *prev = NULL;
    size_t prev_len = 0;
    for (int k = 0; k < n; k++) {
        int32_t id = ids[k].id;
        const char *p = ids[k].p;
        size_t len = (size_t)ids[k].len;
        size_t l = 0;
        while (prev && l < len && l < prev_len && p[l] == prev[l]) l++;
        while ((size_t)depth > l) g->tn_skip[path[--depth]] = nn; /* close finished subtrees */
        for (size_t d = l; d < len; d++) {
            g->tn_byte[nn] = (uint8_t)p[d];
            g->tn_depth[nn] = (uint16_t)d;
            g->tn_tok[nn] = nt;
            path[depth++] = nn++;
        }
        g->tok_list[nt++] = id; /* at node path[len-1]; later tokens of it follow in order */
        prev = p;
        prev_len = len;
    }
    while (depth > 0) g->tn_skip[path[--depth]] = nn;
    g->tn_tok[nn] = nt;
    g->n_tn = nn;
    free(path);
    free(ids);
    return token_features(g);
}

static void set_bit(uint32_t *m, int32_t id) { m[id >> 5] |= 1u << (id & 31); }

/* The ASCII intervals on which the whole-set dstate k loops (bit min(i, 63), bit 63 only if
 * every interval from 63 on loops), and whether every non-ASCII character loops too. */
static uint64_t loop_set(gemma3_grammar *g, int32_t k, int *nonascii_loops) {
    uint64_t L = 0;
    int hi_all = 1;
    for (int b = 0; b < 128; b++) {
        int iv = g->ascii_iv[b];
        if (b > 0 && iv == g->ascii_iv[b - 1]) continue;
        int loops = dtrans(g, k, (unsigned)b) == k;
        if (iv >= 63)
            hi_all &= loops;
        else if (loops)
            L |= 1ull << iv;
    }
    if (g->n_ascii_iv > 63 && hi_all) L |= 1ull << 63;
    *nonascii_loops = 1;
    for (unsigned b = 0xC2; b <= 0xF4 && *nonascii_loops; b++) {
        int32_t t = dtrans(g, k, b);
        *nonascii_loops = t >= 0 && g->ds[t].b.rem > 0 && g->ds[t].b.pend == g->ds[k].b.sid &&
                          g->sid_ds[g->ds[k].b.sid] == k;
    }
    return L;
}

/* Mask of a state that loops on most characters: a token made only of looping characters keeps
 * the state and is allowed (one test of its features); the others are fed byte by byte. */
static void mask_by_scan(gemma3_grammar *g, int32_t k, uint64_t L, uint32_t *mask) {
    memset(mask, 0, (size_t)g->words * sizeof *mask);
    for (int32_t id = 0; id < g->n_vocab; id++) {
        if (g->piece_len[id] <= 0 || g->is_end[id]) continue;
        if ((g->tok_ascii[id] & ~L) == 0 && !(g->tok_flags[id] & TOK_BADUTF8)) {
            set_bit(mask, id);
        } else if (feed_bytes(g, k, g->pieces + g->piece_off[id], (size_t)g->piece_len[id]) >= 0) {
            set_bit(mask, id);
        }
    }
    if (accepting(g, k))
        for (int i = 0; i < g->n_end; i++) set_bit(mask, g->end_ids[i]);
}

/* Walks the trie from dstate k0: the allowed ids into mask. One table lookup per node; a dead
 * node skips its subtree. */
static void walk_mask(gemma3_grammar *g, int32_t k0, uint32_t *mask) {
    memset(mask, 0, (size_t)g->words * sizeof *mask);
    int32_t *st = g->walk;
    st[0] = k0;
    const uint8_t *byte = g->tn_byte;
    const uint16_t *depth = g->tn_depth;
    const int32_t *skip = g->tn_skip, *tok = g->tn_tok, *list = g->tok_list;
    const int32_t *row = g->drow;
    int64_t visited = 0;
    for (int i = 0; i < g->n_tn;) {
        int32_t k = st[depth[i]];
        int32_t t = row[(size_t)k * 256 + byte[i]];
        visited++;
        if (t == UNKNOWN) {
            t = dtrans_slow(g, k, byte[i]);
            row = g->drow; /* may have moved */
        }
        if (t < 0) {
            i = skip[i];
            continue;
        }
        st[depth[i] + 1] = t;
        for (int32_t j = tok[i]; j < tok[i + 1]; j++) set_bit(mask, list[j]);
        i++;
    }
    g->stats.n_nodes += visited;
    if (accepting(g, k0))
        for (int i = 0; i < g->n_end; i++) set_bit(mask, g->end_ids[i]);
}

/* ================================ public API ================================================ */

static int compile(gemma3_grammar *g, const parser *P) {
    int rc = build_intervals(g, P);
    if (rc != GEMMA3_OK) return rc;
    g->n_rules = P->n_rules;
    g->root = P->root;
    long total = 1;
    int n_alts = 0;
    for (int r = 0; r < P->n_rules; r++) {
        total += P->rules[r].n_el;
        for (int i = 0; i < P->rules[r].n_el; i++)
            n_alts += P->rules[r].el[i].type != E_REF && P->rules[r].el[i].type != E_CHAR;
    }
    g->el = malloc((size_t)total * sizeof *g->el);
    g->alt_first = malloc((size_t)P->n_rules * sizeof *g->alt_first);
    g->alt_count = malloc((size_t)P->n_rules * sizeof *g->alt_count);
    g->alts = malloc((size_t)(n_alts + 1) * sizeof *g->alts);
    if (!g->el || !g->alt_first || !g->alt_count || !g->alts)
        return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    int n = 0, na = 0;
    g->el[n++] = (elem){E_END, 0}; /* position 0 is never a frame's position */
    for (int r = 0; r < P->n_rules; r++) {
        prule *R = &P->rules[r];
        g->alt_first[r] = na;
        g->alt_count[r] = 0;
        for (int i = 0; i < R->n_el; i++) {
            if (i == 0 || R->el[i - 1].type == E_ALT) {
                g->alts[na++] = n + i;
                g->alt_count[r]++;
            }
        }
        memcpy(g->el + n, R->el, (size_t)R->n_el * sizeof *R->el);
        n += R->n_el;
    }
    g->n_el = n;
    /* the byte tables */
    for (int b = 0; b < 128; b++) g->ascii_iv[b] = iv_of(g, (uint32_t)b);
    for (int b = 0x80; b < 256; b++) {
        lead_info *L = &g->lead[b];
        memset(L, 0, sizeof *L);
        L->iv = -1;
        if (b >= 0xC2 && b <= 0xDF) {
            L->rem = 1;
            L->bits = b & 31;
        } else if (b >= 0xE0 && b <= 0xEF) {
            L->rem = 2;
            L->bits = b & 15;
        } else if (b >= 0xF0 && b <= 0xF4) {
            L->rem = 3;
            L->bits = b & 7;
        } else {
            continue;
        }
        uint32_t sh = 6 * L->rem;
        L->vlo = (uint32_t)L->bits << sh;
        L->vhi = L->vlo | ((1u << sh) - 1);
        if (L->rem == 2 && L->vlo < 0x800) L->vlo = 0x800;
        if (b == 0xED) L->vhi = 0xD7FF;
        if (L->rem == 3 && L->vlo < 0x10000) L->vlo = 0x10000;
        if (L->vhi > 0x10FFFF) L->vhi = 0x10FFFF;
        int a = iv_of(g, L->vlo), z = iv_of(g, L->vhi);
        if (a == z) L->iv = a;
    }
    return GEMMA3_OK;
}

static int init_matcher(gemma3_grammar *g) {
    g->cap_fr = 1024;
    g->fr_pos = malloc((size_t)g->cap_fr * sizeof *g->fr_pos);
    g->fr_parent = malloc((size_t)g->cap_fr * sizeof *g->fr_parent);
    g->fr_stamp = calloc((size_t)g->cap_fr, sizeof *g->fr_stamp);
    g->cap_sets = 64;
    g->set_off = malloc((size_t)g->cap_sets * sizeof *g->set_off);
    g->set_len = malloc((size_t)g->cap_sets * sizeof *g->set_len);
    g->trans = malloc((size_t)g->cap_sets * (size_t)g->n_iv * sizeof *g->trans);
    g->cap_set_data = 1024;
    g->set_data = malloc(g->cap_set_data * sizeof *g->set_data);
    g->sid_ds = malloc((size_t)g->cap_sets * sizeof *g->sid_ds);
    g->cap_ds = 64;
    g->ds = malloc((size_t)g->cap_ds * sizeof *g->ds);
    g->drow = malloc((size_t)g->cap_ds * 256 * sizeof *g->drow);
    if (!g->fr_pos || !g->fr_parent || !g->fr_stamp || !g->set_off || !g->set_len || !g->trans ||
        !g->set_data || !g->sid_ds || !g->ds || !g->drow || rehash_frames(g, 2048) ||
        rehash_sets(g, 128) || rehash_ds(g, 128))
        return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    g->n_fr = 1; /* frame 0: the empty stack */
    g->fr_pos[0] = -1;
    g->fr_parent[0] = -1;
    g->fr_stamp[0] = 0;
    /* the start: root's alternatives over the empty stack */
    g->stamp++;
    g->n_out = 0;
    for (int a = 0; a < g->alt_count[g->root]; a++) {
        int32_t f = frame(g, g->alts[g->alt_first[g->root] + a], 0);
        if (f < 0 || closure(g, f))
            return g->failed ? GEMMA3_ERR_NOMEM
                             : g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    }
    int32_t sid = intern_out(g);
    if (sid < 0)
        return g->failed ? GEMMA3_ERR_NOMEM
                         : g3_error(GEMMA3_ERR_FORMAT, "grammar: empty start state");
    g->start = ds_of_sid(g, sid);
    if (g->start < 0) return GEMMA3_ERR_NOMEM;
    g->cur = g->start;
    return GEMMA3_OK;
}

void gemma3_grammar_free(gemma3_grammar *g) {
    if (!g) return;
    free(g->el);
    free(g->alt_first);
    free(g->alt_count);
    free(g->alts);
    free(g->bounds);
    free(g->member);
    free(g->fr_pos);
    free(g->fr_parent);
    free(g->fr_stamp);
    free(g->fr_hash);
    free(g->set_data);
    free(g->set_off);
    free(g->set_len);
    free(g->set_hash);
    free(g->trans);
    free(g->sid_ds);
    free(g->ds);
    free(g->drow);
    free(g->ds_hash);
    free(g->work);
    free(g->out);
    free(g->pieces);
    free(g->piece_off);
    free(g->piece_len);
    free(g->end_ids);
    free(g->is_end);
    free(g->tn_byte);
    free(g->tn_depth);
    free(g->tn_skip);
    free(g->tn_tok);
    free(g->tok_list);
    free(g->tok_ascii);
    free(g->tok_flags);
    free(g->walk);
    free(g->cache);
    free(g->scratch_mask);
    free(g);
}

/* The grammar alone (no vocabulary): parse, check, compile, start state. */
static int grammar_new(const char *text, size_t len, gemma3_grammar **out) {
    *out = NULL;
    gemma3_grammar *g = calloc(1, sizeof *g);
    if (!g) return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    parser P;
    int rc = g3_gparse(&P, text, len);
    if (rc == GEMMA3_OK) rc = compile(g, &P);
    g3_gparser_free(&P);
    if (rc == GEMMA3_OK) rc = init_matcher(g);
    if (rc != GEMMA3_OK) {
        gemma3_grammar_free(g);
        return rc;
    }
    *out = g;
    return GEMMA3_OK;
}

int gemma3_grammar_check(const char *text, size_t len) {
    if (!text) return g3_error(GEMMA3_ERR_ARG, "grammar: NULL text");
    gemma3_grammar *g;
    int rc = grammar_new(text, len, &g);
    gemma3_grammar_free(g);
    return rc;
}

static int copy_vocab(gemma3_grammar *g, const gemma3_grammar_vocab *v) {
    if (v->n_vocab < 1 || !v->piece || !v->piece_len || v->n_end < 0 || (v->n_end && !v->end_ids))
        return g3_error(GEMMA3_ERR_ARG, "grammar: bad vocabulary (n_vocab %d, n_end %d)",
                        (int)v->n_vocab, v->n_end);
    g->n_vocab = v->n_vocab;
    g->words = (v->n_vocab + 31) / 32;
    size_t total = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        if (v->piece_len[i] > 65535)
            return g3_error(GEMMA3_ERR_ARG, "grammar: piece %d is longer than 65535 bytes", (int)i);
        if (v->piece[i] && v->piece_len[i] > 0) total += (size_t)v->piece_len[i];
    }
    g->pieces = malloc(total + 1);
    g->piece_off = malloc(((size_t)v->n_vocab + 1) * sizeof *g->piece_off);
    g->piece_len = malloc((size_t)v->n_vocab * sizeof *g->piece_len);
    g->is_end = calloc((size_t)v->n_vocab, 1);
    g->end_ids = malloc(((size_t)v->n_end + 1) * sizeof *g->end_ids);
    g->cache = malloc((size_t)MASK_CACHE_SLOTS * (size_t)g->words * sizeof *g->cache);
    g->scratch_mask = malloc((size_t)g->words * sizeof *g->scratch_mask);
    if (!g->pieces || !g->piece_off || !g->piece_len || !g->is_end || !g->end_ids || !g->cache ||
        !g->scratch_mask)
        return g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory for a %d-token vocabulary",
                        (int)v->n_vocab);
    size_t off = 0;
    for (int32_t i = 0; i < v->n_vocab; i++) {
        g->piece_off[i] = off;
        g->piece_len[i] = v->piece[i] && v->piece_len[i] > 0 ? v->piece_len[i] : -1;
        if (g->piece_len[i] > 0) {
            memcpy(g->pieces + off, v->piece[i], (size_t)g->piece_len[i]);
            off += (size_t)g->piece_len[i];
        }
    }
    g->piece_off[v->n_vocab] = off;
    for (int i = 0; i < v->n_end; i++) {
        if (v->end_ids[i] < 0 || v->end_ids[i] >= v->n_vocab)
            return g3_error(GEMMA3_ERR_ARG, "grammar: end id %d out of range [0, %d)",
                            (int)v->end_ids[i], (int)v->n_vocab);
        if (!g->is_end[v->end_ids[i]]) g->end_ids[g->n_end++] = v->end_ids[i];
        g->is_end[v->end_ids[i]] = 1;
    }
    return GEMMA3_OK;
}

int gemma3_grammar_init(const char *text, size_t len, const gemma3_grammar_vocab *vocab,
                        gemma3_grammar **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "grammar: NULL out pointer");
    *out = NULL;
    if (!text || !vocab) return g3_error(GEMMA3_ERR_ARG, "grammar: NULL argument");
    gemma3_grammar *g;
    int rc = grammar_new(text, len, &g);
    if (rc != GEMMA3_OK) return rc;
    rc = copy_vocab(g, vocab);
    if (rc == GEMMA3_OK) rc = build_trie(g);
    if (rc == GEMMA3_OK) {
        const uint32_t *m = gemma3_grammar_mask(g);
        int any = 0;
        for (int w = 0; m && w < g->words && !any; w++) any = m[w] != 0;
        if (!m)
            rc = GEMMA3_ERR_NOMEM;
        else if (!any)
            rc = g3_error(GEMMA3_ERR_FORMAT,
                          "grammar: no token of the vocabulary can start the text it matches");
    }
    if (rc != GEMMA3_OK) {
        gemma3_grammar_free(g);
        return rc;
    }
    *out = g;
    return GEMMA3_OK;
}

int gemma3_grammar_init_tokenizer(const char *text, size_t len, const gemma3_tokenizer *tok,
                                  const int32_t *end_ids, int n_end, int32_t n_vocab,
                                  gemma3_grammar **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "grammar: NULL out pointer");
    *out = NULL;
    if (!tok) return g3_error(GEMMA3_ERR_ARG, "grammar: NULL tokenizer");
    int n_tok = gemma3_tokenizer_vocab_size(tok);
    int n = n_vocab > 0 ? n_vocab : n_tok; /* the sampler's ids: fewer or more than the pieces */
    const char **piece = calloc((size_t)n, sizeof *piece);
    int32_t *plen = calloc((size_t)n, sizeof *plen);
    char *buf = NULL;
    size_t cap = 0, used = 0;
    int rc = piece && plen ? GEMMA3_OK : g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    size_t *offs = rc == GEMMA3_OK ? malloc((size_t)n * sizeof *offs) : NULL;
    if (rc == GEMMA3_OK && !offs) rc = g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
    int32_t sot = gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_START_OF_TURN);
    for (int32_t i = 0; i < n && rc == GEMMA3_OK; i++) {
        int l = i < n_tok ? gemma3_tokenizer_token_bytes(tok, i, NULL, 0) : 0;
        plen[i] = l > 0 && i != sot ? l : 0;
        if (plen[i] == 0) continue;
        if (used + (size_t)l > cap) {
            size_t c = cap ? cap * 2 : 1 << 20;
            while (c < used + (size_t)l) c *= 2;
            char *p = realloc(buf, c);
            if (!p) {
                rc = g3_error(GEMMA3_ERR_NOMEM, "grammar: out of memory");
                break;
            }
            buf = p;
            cap = c;
        }
        gemma3_tokenizer_token_bytes(tok, i, buf + used, (size_t)l);
        offs[i] = used;
        used += (size_t)l;
    }
    if (rc == GEMMA3_OK) {
        for (int32_t i = 0; i < n; i++) piece[i] = plen[i] > 0 ? buf + offs[i] : NULL;
        gemma3_grammar_vocab v = {n, piece, plen, n_end, end_ids};
        rc = gemma3_grammar_init(text, len, &v, out);
    }
    free(offs);
    free(buf);
    free(piece);
    free(plen);
    return rc;
}

void gemma3_grammar_reset(gemma3_grammar *g) {
    if (!g) return;
    g->cur = g->start;
    g->finished = 0;
}

const uint32_t *gemma3_grammar_mask(gemma3_grammar *g) {
    if (!g) {
        g3_error(GEMMA3_ERR_ARG, "grammar: NULL grammar");
        return NULL;
    }
    g->stats.n_masks++;
    if (g->finished) { /* an end token was accepted: nothing may follow */
        memset(g->scratch_mask, 0, (size_t)g->words * sizeof *g->scratch_mask);
        return g->scratch_mask;
    }
    if (!g->cache_off)
        for (int i = 0; i < g->cache_used; i++)
            if (g->cache_key[i] == g->cur) {
                g->stats.n_cache_hits++;
                return g->cache + (size_t)i * g->words;
            }
    uint32_t *m = g->scratch_mask;
    int slot = -1;
    if (!g->cache_off) {
        slot = g->cache_used < MASK_CACHE_SLOTS ? g->cache_used++ : g->cache_next;
        g->cache_next = (slot + 1) % MASK_CACHE_SLOTS;
        m = g->cache + (size_t)slot * g->words;
        g->cache_key[slot] = DEAD; /* invalid until filled */
    }
    int nonascii_loops = 0;
    uint64_t L =
        g->ds[g->cur].b.rem == 0 && !g->scan_off ? loop_set(g, g->cur, &nonascii_loops) : 0;
    if (nonascii_loops && __builtin_popcountll(L) * 128 >= LOOP_MIN_ASCII * g->n_ascii_iv)
        mask_by_scan(g, g->cur, L, m);
    else
        walk_mask(g, g->cur, m);
    if (g->failed) return NULL;
    if (slot >= 0) g->cache_key[slot] = g->cur;
    return m;
}

int gemma3_grammar_allows(gemma3_grammar *g, int32_t id) {
    if (!g) return g3_error(GEMMA3_ERR_ARG, "grammar: NULL grammar");
    if (id < 0 || id >= g->n_vocab)
        return g3_error(GEMMA3_ERR_ARG, "grammar: token %d out of range [0, %d)", (int)id,
                        (int)g->n_vocab);
    if (g->finished) return 0;
    if (g->is_end[id]) return accepting(g, g->cur);
    if (g->piece_len[id] <= 0) return 0;
    int32_t k = feed_bytes(g, g->cur, g->pieces + g->piece_off[id], (size_t)g->piece_len[id]);
    return g->failed ? GEMMA3_ERR_NOMEM : k >= 0;
}

int gemma3_grammar_accept(gemma3_grammar *g, int32_t id) {
    int ok = gemma3_grammar_allows(g, id);
    if (ok < 0) return ok;
    if (!ok)
        return g3_error(GEMMA3_ERR_ARG, "grammar: token %d is not allowed here%s", (int)id,
                        g->finished ? " (the grammar has finished)" : "");
    if (g->is_end[id]) {
        g->finished = 1;
        return GEMMA3_OK;
    }
    g->cur = feed_bytes(g, g->cur, g->pieces + g->piece_off[id], (size_t)g->piece_len[id]);
    return GEMMA3_OK;
}

int gemma3_grammar_can_end(const gemma3_grammar *g) {
    return g && !g->finished && accepting(g, g->cur);
}

int gemma3_grammar_finished(const gemma3_grammar *g) { return g && g->finished; }

int32_t gemma3_grammar_sample(gemma3_grammar *g, gemma3_sampler *s, const float *logits,
                              int64_t position) {
    if (!g || !s || !logits) return g3_error(GEMMA3_ERR_ARG, "grammar sample: NULL argument");
    if (g->finished) return g3_error(GEMMA3_ERR_ARG, "grammar sample: the grammar has finished");
    if (gemma3_sampler_n_vocab(s) != g->n_vocab)
        return g3_error(GEMMA3_ERR_ARG, "grammar sample: the grammar covers %d ids, the sampler %d",
                        (int)g->n_vocab, gemma3_sampler_n_vocab(s));
    if (gemma3_sampler_mask_commutes(s)) { /* greedy: the unmasked argmax, if allowed, is it */
        int32_t t = gemma3_sampler_sample(s, logits, position);
        if (t < 0) return t;
        int ok = gemma3_grammar_allows(g, t);
        if (ok < 0) return ok;
        if (ok) return t;
    }
    const uint32_t *m = gemma3_grammar_mask(g);
    if (!m) return GEMMA3_ERR_NOMEM;
    int any = 0;
    for (int w = 0; w < g->words && !any; w++) any = m[w] != 0;
    if (!any)
        return g3_error(GEMMA3_ERR_ARG,
                        "grammar: no token of the vocabulary can continue the text");
    return gemma3_sampler_sample_masked(s, logits, position, m);
}

void g3_grammar_get_stats(const gemma3_grammar *g, g3_grammar_stats *out) {
    *out = g->stats;
    out->n_stack_nodes = g->n_fr;
    out->n_states = g->n_sets;
    out->n_trie_nodes = g->n_tn;
    out->n_intervals = g->n_iv;
}

void g3_grammar_set_mode(gemma3_grammar *g, int flags) {
    g->cache_off = !!(flags & G3_GRAMMAR_NO_CACHE);
    g->scan_off = !!(flags & G3_GRAMMAR_NO_SCAN);
    g->cache_used = g->cache_next = 0;
}

int g3_grammar_allows_bytes(gemma3_grammar *g, const char *p, size_t n) {
    if (g->finished) return 0;
    return feed_bytes(g, g->cur, p, n) >= 0;
}
