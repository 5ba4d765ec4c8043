/* tokenizer.c - SentencePiece BPE tokenizer: loading tokenizer.model (a serialized ModelProto,
 * read with protobuf.c), encode (normalizer, user-defined pieces, BPE by piece score, byte
 * fallback) and decode (whole and streaming). The chat format is in chat.c, UTF-8 in utf8.c.
 *
 * The reference is SentencePiece's BPE model plus the one thing Hugging Face tokenizers adds: with
 * GEMMA3_TOK_PARSE_SPECIAL the text of CONTROL and UNKNOWN pieces (<bos>, <eos>, <pad>, <unk>)
 * becomes their id. USER_DEFINED pieces (<start_of_turn>, whitespace runs, HTML tags...) are
 * always matched, longest first, and never merged with their neighbours. */
#include "tokenizer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protobuf.h"
#include "utf8.h"
#include "util.h"

/* ---- the model in memory --------------------------------------------------------------------- */

/* A hash-table slot carries what BPE needs to test a pair without touching the piece itself:
 * the piece's first 8 bytes (zero-padded), its length class, whether merges may produce it and
 * its score. Pieces of <= 8 bytes (nearly all merges) are found with one cache miss. */
typedef struct {
    uint64_t head;
    uint32_t meta;  /* SLOT_EMPTY, or id | len_class << 26 | mergeable << 30 */
    float score;
} hash_slot;

#define SLOT_EMPTY 0xFFFFFFFFu
#define SLOT_ID(meta) ((int32_t)((meta) & 0x3FFFFFFu))
#define SLOT_LEN(meta) (((meta) >> 26) & 15u) /* the length if <= 8, else 9 */
#define SLOT_MERGEABLE (1u << 30)
#define PAD 8 /* readable bytes after every key the hot path hashes (see load8) */

typedef struct {
    int32_t child;   /* first child node, -1 if none */
    int32_t sibling; /* next node with the same parent, -1 if none */
    int32_t id;      /* piece ending here, -1 if none */
    uint8_t byte;
} trie_node;

/* Everything encode needs about a piece, in one 16-byte record (one cache miss per lookup). */
typedef struct {
    uint32_t off;  /* offset of the piece's bytes in gemma3_tokenizer.text */
    uint32_t len;  /* their length */
    float score;
    uint8_t type;  /* enum g3_piece_type */
} piece_info;

struct gemma3_tokenizer {
    int32_t n_pieces;
    void *arena;       /* one block holding piece, ht and text (below); see arena_alloc */
    size_t arena_size;
    char *text;      /* every piece's bytes back to back, each followed by a NUL */
    piece_info *piece; /* [n_pieces] */

    hash_slot *ht;   /* [ht_mask + 1] open addressing, piece bytes -> id, load <= 1/2 */
    uint32_t ht_mask;

    /* Pieces matched in the text before BPE: USER_DEFINED always, CONTROL/UNKNOWN with
     * PARSE_SPECIAL. Node 0 is the root; its children are indexed directly by first byte. */
    trie_node *trie;
    int32_t n_trie;
    int32_t root_child[256];
    /* A cheap test before walking the trie: trie_short[b] = some trie piece of < 4 bytes starts
     * with b; otherwise the first 4 bytes must hit trie_bloom (a 32768-bit Bloom filter). Most
     * word starts ('▁' + letter) are rejected without a walk. */
    uint8_t trie_short[256];
    uint64_t trie_bloom[512];

    int32_t byte_piece[256];  /* id of <0xNN>, -1 when absent */
    int32_t ascii_piece[128]; /* id of the mergeable one-byte piece "c", -1 when absent */
    int32_t unk_id, bos_id, eos_id, pad_id;
    int add_bos; /* a prompt starts with <bos> (gemma3_tokenizer_add_bos) */
    int byte_fallback;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    int has_unused;  /* UNUSED pieces exist: merges into them are undone after BPE */
    /* joins_space[b]: some piece holds byte b right before a U+2581 that does not follow another
     * U+2581 (Gemma 3 has one: ">▁</"). BPE runs word by word, cutting before each '▁' except
     * after such a byte: no merge can cross the other cuts, so the result is the same. */
    uint8_t joins_space[256];
    char *unk_surface; /* decoded text of the unknown piece */
    size_t unk_surface_len;
};

static const char SPACE_SYMBOL[3] = {'\xE2', '\x96', '\x81'}; /* U+2581 */

static int mergeable(int type) {
    return type == G3_PIECE_NORMAL || type == G3_PIECE_USER_DEFINED || type == G3_PIECE_UNUSED;
}

/* The first min(n, 8) bytes of s as a zero-padded word. load8 reads 8 bytes whatever n is:
 * only for buffers with PAD bytes of slack (the piece text and the normalized input);
 * load8_safe is for anything else. */
static inline uint64_t load8(const char *s, size_t n) {
    uint64_t v;
    memcpy(&v, s, 8);
    return n >= 8 ? v : v & ((1ull << (8 * n)) - 1);
}

static inline uint64_t load8_safe(const char *s, size_t n) {
    uint64_t v = 0;
    memcpy(&v, s, n < 8 ? n : 8);
    return v;
}

/* A 32-bit multiply-xorshift hash of a key given its head word (pieces are mostly <= 8 bytes,
 * so usually one multiplication). */
static inline uint32_t hash_key(uint64_t head, const char *s, size_t n) {
    uint64_t h = (head ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4Full)) * 0xBF58476D1CE4E5B9ull;
    for (size_t i = 8; i < n; i += 8) {
        h ^= h >> 31;
        h = (h ^ load8_safe(s + i, n - i)) * 0x94D049BB133111EBull;
    }
    h ^= h >> 32;
    return (uint32_t)h;
}

static inline uint32_t len_class(size_t n) { return n <= 8 ? (uint32_t)n : 9u; }

/* The slot of the piece whose bytes are s[0..n) (head = its first 8 bytes), or NULL. */
static inline const hash_slot *find_slot(const gemma3_tokenizer *t, uint64_t head, const char *s,
                                         size_t n) {
    uint32_t lc = len_class(n);
    for (uint32_t i = hash_key(head, s, n) & t->ht_mask;; i = (i + 1) & t->ht_mask) {
        const hash_slot *sl = &t->ht[i];
        if (sl->meta == SLOT_EMPTY) return NULL;
        if (sl->head != head || SLOT_LEN(sl->meta) != lc) continue;
        if (n <= 8) return sl;
        const piece_info *pi = &t->piece[SLOT_ID(sl->meta)];
        if (pi->len == n && memcmp(t->text + pi->off, s, n) == 0) return sl;
    }
}

static inline void prefetch_slot(const gemma3_tokenizer *t, const char *s, size_t n) {
    __builtin_prefetch(&t->ht[hash_key(load8(s, n), s, n) & t->ht_mask]);
}

/* Id of any piece with exactly these bytes, or -1. */
static int32_t lookup(const gemma3_tokenizer *t, const char *s, size_t n) {
    const hash_slot *sl = find_slot(t, load8_safe(s, n), s, n);
    return sl ? SLOT_ID(sl->meta) : -1;
}

/* The same for BPE on padded buffers: only pieces that merges may produce. */
static inline const hash_slot *lookup_merge(const gemma3_tokenizer *t, const char *s, size_t n) {
    const hash_slot *sl = find_slot(t, load8(s, n), s, n);
    return sl && (sl->meta & SLOT_MERGEABLE) ? sl : NULL;
}

int32_t g3_tokenizer_piece_id(const gemma3_tokenizer *tok, const char *text, size_t len) {
    if (!tok || (!text && len)) return -1;
    return lookup(tok, text, len);
}

int g3_tokenizer_piece_type(const gemma3_tokenizer *tok, int32_t id) {
    return (tok && id >= 0 && id < tok->n_pieces) ? tok->piece[id].type : 0;
}

float g3_tokenizer_piece_score(const gemma3_tokenizer *tok, int32_t id) {
    return (tok && id >= 0 && id < tok->n_pieces) ? tok->piece[id].score : 0.0f;
}

/* The big tables live in one anonymous mapping populated up front (MAP_POPULATE): faulting its
 * pages in one at a time cost a third of the load time. Under AddressSanitizer they come from
 * malloc instead, so that reads past their end are caught. */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_MALLOC 1
#endif
#endif

static void *arena_alloc(size_t size) {
#ifdef ARENA_MALLOC
    return malloc(size);
#else
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
#endif
}

static void arena_free(void *p, size_t size) {
#ifdef ARENA_MALLOC
    (void)size;
    free(p);
#else
    if (p) munmap(p, size);
#endif
}

void gemma3_tokenizer_free(gemma3_tokenizer *tok) {
    if (!tok) return;
    arena_free(tok->arena, tok->arena_size);
    free(tok->trie);
    free(tok->unk_surface);
    free(tok);
}

int gemma3_tokenizer_vocab_size(const gemma3_tokenizer *tok) { return tok ? tok->n_pieces : 0; }

const char *gemma3_tokenizer_piece(const gemma3_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_pieces) return NULL;
    return tok->text + tok->piece[id].off;
}

/* ---- the SentencePiece model file ------------------------------------------------------------ */

/* tokenizer.model is a serialized sentencepiece.ModelProto (sentencepiece_model.proto). The field
 * numbers below are the ones of that schema this file reads; others are skipped. */
enum model_proto_field { MODEL_PIECES = 1, MODEL_TRAINER_SPEC = 2, MODEL_NORMALIZER_SPEC = 3 };

enum piece_field { PIECE_TEXT = 1, PIECE_SCORE = 2, PIECE_TYPE = 3 };

enum trainer_spec_field {
    TRAINER_MODEL_TYPE = 3,
    TRAINER_TREAT_WHITESPACE_AS_SUFFIX = 24,
    TRAINER_BYTE_FALLBACK = 35,
    TRAINER_UNK_ID = 40,
    TRAINER_BOS_ID = 41,
    TRAINER_EOS_ID = 42,
    TRAINER_PAD_ID = 43,
    TRAINER_UNK_SURFACE = 44,
};

enum normalizer_spec_field {
    NORMALIZER_NAME = 1,
    NORMALIZER_PRECOMPILED_CHARSMAP = 2,
    NORMALIZER_ADD_DUMMY_PREFIX = 3,
    NORMALIZER_REMOVE_EXTRA_WHITESPACES = 4,
    NORMALIZER_ESCAPE_WHITESPACES = 5,
};

/* TrainerSpec.ModelType; only BPE is implemented. */
enum model_type { MODEL_UNIGRAM = 1, MODEL_BPE = 2, MODEL_WORD = 3, MODEL_CHAR = 4 };

/* What tokenizer.c uses of TrainerSpec and NormalizerSpec, with the proto defaults. */
typedef struct {
    int64_t model_type; /* enum model_type */
    int64_t unk_id, bos_id, eos_id, pad_id;
    int64_t byte_fallback;
    int64_t treat_whitespace_as_suffix;
    const uint8_t *unk_surface;
    size_t unk_surface_len;
    int has_unk_surface;
    const uint8_t *norm_name;
    size_t norm_name_len;
    size_t charsmap_len;
    int64_t add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} model_specs;

static int read_trainer_spec(g3_pb_reader *r, model_specs *s) {
    for (;;) {
        uint32_t f;
        int w, rc = g3_pb_key(r, &f, &w);
        if (rc) return rc;
        if (!f) return GEMMA3_OK;
        switch (f) {
        case TRAINER_MODEL_TYPE: rc = g3_pb_int_field(r, f, w, "model_type", &s->model_type); break;
        case TRAINER_TREAT_WHITESPACE_AS_SUFFIX:
            rc = g3_pb_int_field(r, f, w, "treat_whitespace_as_suffix",
                                 &s->treat_whitespace_as_suffix);
            break;
        case TRAINER_BYTE_FALLBACK:
            rc = g3_pb_int_field(r, f, w, "byte_fallback", &s->byte_fallback);
            break;
        case TRAINER_UNK_ID: rc = g3_pb_int_field(r, f, w, "unk_id", &s->unk_id); break;
        case TRAINER_BOS_ID: rc = g3_pb_int_field(r, f, w, "bos_id", &s->bos_id); break;
        case TRAINER_EOS_ID: rc = g3_pb_int_field(r, f, w, "eos_id", &s->eos_id); break;
        case TRAINER_PAD_ID: rc = g3_pb_int_field(r, f, w, "pad_id", &s->pad_id); break;
        case TRAINER_UNK_SURFACE:
            rc = g3_pb_expect(r, f, w, G3_PB_LEN, "unk_surface");
            if (!rc) rc = g3_pb_bytes(r, &s->unk_surface, &s->unk_surface_len);
            s->has_unk_surface = 1;
            break;
        default: rc = g3_pb_skip(r, f, w); break;
        }
        if (rc) return rc;
    }
}

static int read_normalizer_spec(g3_pb_reader *r, model_specs *s) {
    for (;;) {
        uint32_t f;
        int w, rc = g3_pb_key(r, &f, &w);
        if (rc) return rc;
        if (!f) return GEMMA3_OK;
        const uint8_t *d;
        switch (f) {
        case NORMALIZER_NAME:
            rc = g3_pb_expect(r, f, w, G3_PB_LEN, "name");
            if (!rc) rc = g3_pb_bytes(r, &s->norm_name, &s->norm_name_len);
            break;
        case NORMALIZER_PRECOMPILED_CHARSMAP:
            rc = g3_pb_expect(r, f, w, G3_PB_LEN, "precompiled_charsmap");
            if (!rc) rc = g3_pb_bytes(r, &d, &s->charsmap_len);
            break;
        case NORMALIZER_ADD_DUMMY_PREFIX:
            rc = g3_pb_int_field(r, f, w, "add_dummy_prefix", &s->add_dummy_prefix);
            break;
        case NORMALIZER_REMOVE_EXTRA_WHITESPACES:
            rc = g3_pb_int_field(r, f, w, "remove_extra_whitespaces",
                                 &s->remove_extra_whitespaces);
            break;
        case NORMALIZER_ESCAPE_WHITESPACES:
            rc = g3_pb_int_field(r, f, w, "escape_whitespaces", &s->escape_whitespaces);
            break;
        default: rc = g3_pb_skip(r, f, w); break;
        }
        if (rc) return rc;
    }
}

/* Reads one SentencePiece message into slot id of the tables. */
static int read_piece(g3_pb_reader *r, gemma3_tokenizer *t, int32_t id, uint32_t *text_used) {
    const uint8_t *piece = NULL;
    size_t piece_len = 0;
    float score = 0.0f;
    int64_t type = G3_PIECE_NORMAL;
    for (;;) {
        uint32_t f;
        int w, rc = g3_pb_key(r, &f, &w);
        if (rc) return rc;
        if (!f) break;
        uint32_t bits = 0;
        switch (f) {
        case PIECE_TEXT:
            rc = g3_pb_expect(r, f, w, G3_PB_LEN, "piece");
            if (!rc) rc = g3_pb_bytes(r, &piece, &piece_len);
            break;
        case PIECE_SCORE:
            rc = g3_pb_expect(r, f, w, G3_PB_I32, "score");
            if (!rc) rc = g3_pb_fixed32(r, &bits);
            if (!rc) memcpy(&score, &bits, sizeof score);
            break;
        case PIECE_TYPE: rc = g3_pb_int_field(r, f, w, "type", &type); break;
        default: rc = g3_pb_skip(r, f, w); break;
        }
        if (rc) return rc;
    }
    if (!piece || piece_len == 0)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %d: empty piece text", r->label, (int)id);
    if (type < G3_PIECE_NORMAL || type > G3_PIECE_BYTE)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %d: bad type %lld (expected 1..6)", r->label,
                        (int)id, (long long)type);
    if (isnan(score))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %d: score is NaN", r->label, (int)id);
    memcpy(t->text + *text_used, piece, piece_len);
    t->text[*text_used + piece_len] = '\0';
    t->piece[id].off = *text_used;
    t->piece[id].len = (uint32_t)piece_len;
    t->piece[id].score = score;
    t->piece[id].type = (uint8_t)type;
    *text_used += (uint32_t)piece_len + 1;
    return GEMMA3_OK;
}

/* ---- building the lookup structures ---------------------------------------------------------- */

/* Hashes are computed in a first sequential pass so that the insertion pass can prefetch the
 * slot of a piece a few pieces ahead: the table (8 MB for Gemma) is otherwise a cache miss per
 * insertion, which dominated load time. Duplicate piece texts are refused, as SentencePiece does. */
static int build_hash(gemma3_tokenizer *t, const char *label) {
    uint32_t *hashes = malloc((size_t)t->n_pieces * sizeof *hashes);
    if (!hashes) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory (hash table)", label);
    memset(t->ht, 0xff, (t->ht_mask + 1) * sizeof *t->ht); /* meta SLOT_EMPTY */
    for (int32_t id = 0; id < t->n_pieces; id++) {
        const char *s = t->text + t->piece[id].off;
        hashes[id] = hash_key(load8(s, t->piece[id].len), s, t->piece[id].len);
    }
    enum { AHEAD = 16 };
    for (int32_t id = 0; id < t->n_pieces; id++) {
        if (id + AHEAD < t->n_pieces) __builtin_prefetch(&t->ht[hashes[id + AHEAD] & t->ht_mask], 1);
        const piece_info *pi = &t->piece[id];
        const char *s = t->text + pi->off;
        uint64_t head = load8(s, pi->len);
        uint32_t lc = len_class(pi->len);
        uint32_t i = hashes[id] & t->ht_mask;
        for (; t->ht[i].meta != SLOT_EMPTY; i = (i + 1) & t->ht_mask) {
            int32_t o = SLOT_ID(t->ht[i].meta);
            if (t->ht[i].head == head && SLOT_LEN(t->ht[i].meta) == lc &&
                t->piece[o].len == pi->len && memcmp(t->text + t->piece[o].off, s, pi->len) == 0) {
                free(hashes);
                return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %d '%.40s' duplicates piece %d",
                                label, (int)id, s, (int)o);
            }
        }
        t->ht[i].head = head;
        t->ht[i].meta = (uint32_t)id | lc << 26 | (mergeable(pi->type) ? SLOT_MERGEABLE : 0);
        t->ht[i].score = pi->score;
    }
    free(hashes);
    return GEMMA3_OK;
}

static inline uint32_t bloom_hash(const uint8_t *s) {
    uint32_t v;
    memcpy(&v, s, 4);
    return (v * 0x9E3779B1u) >> 17;
}

/* Could a trie piece start at s (n bytes left)? False means certainly not. */
static inline int may_match(const gemma3_tokenizer *t, const uint8_t *s, size_t n) {
    if (t->root_child[s[0]] < 0) return 0;
    if (t->trie_short[s[0]] || n < 4) return 1;
    uint32_t h = bloom_hash(s);
    return (int)((t->trie_bloom[h >> 6] >> (h & 63)) & 1);
}

static int build_trie(gemma3_tokenizer *t, const char *label) {
    size_t nodes = 1;
    for (int32_t id = 0; id < t->n_pieces; id++) {
        int ty = t->piece[id].type;
        if (ty == G3_PIECE_USER_DEFINED || ty == G3_PIECE_CONTROL || ty == G3_PIECE_UNKNOWN)
            nodes += t->piece[id].len;
    }
    if (nodes > INT32_MAX)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: user-defined pieces too long", label);
    t->trie = malloc(nodes * sizeof *t->trie);
    if (!t->trie) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory (trie)", label);
    t->trie[0] = (trie_node){-1, -1, -1, 0};
    t->n_trie = 1;
    for (int i = 0; i < 256; i++) t->root_child[i] = -1;
    for (int32_t id = 0; id < t->n_pieces; id++) {
        int ty = t->piece[id].type;
        if (ty != G3_PIECE_USER_DEFINED && ty != G3_PIECE_CONTROL && ty != G3_PIECE_UNKNOWN)
            continue;
        const uint8_t *s = (const uint8_t *)t->text + t->piece[id].off;
        int32_t node = 0;
        for (uint32_t k = 0; k < t->piece[id].len; k++) {
            int32_t c = k == 0 ? t->root_child[s[0]] : t->trie[node].child;
            while (c >= 0 && t->trie[c].byte != s[k]) c = t->trie[c].sibling;
            if (c < 0) {
                c = t->n_trie++;
                t->trie[c] = (trie_node){-1, -1, -1, s[k]};
                if (k == 0) {
                    t->root_child[s[0]] = c;
                } else {
                    t->trie[c].sibling = t->trie[node].child;
                    t->trie[node].child = c;
                }
            }
            node = c;
        }
        t->trie[node].id = id;
        if (t->piece[id].len < 4) {
            t->trie_short[s[0]] = 1;
        } else {
            uint32_t h = bloom_hash(s);
            t->trie_bloom[h >> 6] |= 1ull << (h & 63);
        }
    }
    return GEMMA3_OK;
}

/* Byte pieces must read "<0xNN>" (upper-case hex), as SentencePiece writes them. */
static int byte_piece_value(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    const char *hi = memchr(hex, s[3], 16), *lo = memchr(hex, s[4], 16);
    if (!hi || !lo || !s[3] || !s[4]) return -1;
    return (int)((hi - hex) * 16 + (lo - hex));
}

static void find_space_joins(gemma3_tokenizer *t) {
    for (int32_t id = 0; id < t->n_pieces; id++) {
        const char *s = t->text + t->piece[id].off;
        uint32_t n = t->piece[id].len;
        for (uint32_t k = 1; k + 3 <= n; k++) {
            if (memcmp(s + k, SPACE_SYMBOL, 3) != 0) continue;
            if (k < 3 || memcmp(s + k - 3, SPACE_SYMBOL, 3) != 0)
                t->joins_space[(unsigned char)s[k - 1]] = 1;
        }
    }
}

static int finish_model(gemma3_tokenizer *t, const model_specs *s, const char *label) {
    int rc = build_hash(t, label);
    if (!rc) rc = build_trie(t, label);
    if (rc) return rc;

    t->unk_id = -1;
    for (int i = 0; i < 256; i++) t->byte_piece[i] = -1;
    for (int32_t id = 0; id < t->n_pieces; id++) {
        int ty = t->piece[id].type;
        if (ty == G3_PIECE_UNKNOWN) {
            if (t->unk_id >= 0)
                return g3_error(GEMMA3_ERR_FORMAT, "%s: two UNKNOWN pieces (%d and %d)", label,
                                (int)t->unk_id, (int)id);
            t->unk_id = id;
        } else if (ty == G3_PIECE_BYTE) {
            int b = byte_piece_value(t->text + t->piece[id].off, t->piece[id].len);
            if (b < 0)
                return g3_error(GEMMA3_ERR_FORMAT, "%s: BYTE piece %d '%.20s' is not <0xNN>", label,
                                (int)id, t->text + t->piece[id].off);
            t->byte_piece[b] = id;
        } else if (ty == G3_PIECE_UNUSED) {
            t->has_unused = 1;
        }
    }
    if (t->unk_id < 0) return g3_error(GEMMA3_ERR_FORMAT, "%s: no UNKNOWN piece", label);
    t->byte_fallback = s->byte_fallback != 0;
    if (t->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (t->byte_piece[b] < 0)
                return g3_error(GEMMA3_ERR_FORMAT,
                                "%s: byte_fallback is set but piece <0x%02X> is missing", label, b);
    for (int c = 0; c < 128; c++) {
        char ch = (char)c;
        int32_t id = lookup(t, &ch, 1);
        t->ascii_piece[c] = (id >= 0 && mergeable(t->piece[id].type)) ? id : -1;
    }
    int64_t sid[3] = {s->bos_id, s->eos_id, s->pad_id};
    for (int i = 0; i < 3; i++)
        if (sid[i] < 0 || sid[i] >= t->n_pieces) sid[i] = -1;
    t->bos_id = (int32_t)sid[0];
    t->eos_id = (int32_t)sid[1];
    t->pad_id = (int32_t)sid[2];

    t->add_bos = 1; /* tokenizer.model has no such flag: Gemma's prompts start with <bos> */
    t->add_dummy_prefix = s->add_dummy_prefix != 0;
    t->remove_extra_whitespaces = s->remove_extra_whitespaces != 0;
    t->escape_whitespaces = s->escape_whitespaces != 0;
    find_space_joins(t);

    static const char default_surface[] = " \xE2\x81\x87 "; /* " ⁇ ", SentencePiece's default */
    const char *surf = s->has_unk_surface ? (const char *)s->unk_surface : default_surface;
    size_t surf_len = s->has_unk_surface ? s->unk_surface_len : sizeof default_surface - 1;
    t->unk_surface = malloc(surf_len + 1);
    if (!t->unk_surface) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    memcpy(t->unk_surface, surf, surf_len);
    t->unk_surface[surf_len] = '\0';
    t->unk_surface_len = surf_len;
    return GEMMA3_OK;
}

/* The first pass over the top-level message: counts the pieces and bounds their text bytes, and
 * reads the two specs. */
static int scan_model(const uint8_t *buf, size_t size, const char *label, model_specs *s,
                      size_t *n_pieces, size_t *text_bytes, int *seen_trainer) {
    g3_pb_reader top = g3_pb_message(buf, size, label, "ModelProto");
    for (;;) {
        uint32_t f;
        int w, rc = g3_pb_key(&top, &f, &w);
        if (rc) return rc;
        if (!f) return GEMMA3_OK;
        if (f != MODEL_PIECES && f != MODEL_TRAINER_SPEC && f != MODEL_NORMALIZER_SPEC) {
            rc = g3_pb_skip(&top, f, w);
            if (rc) return rc;
            continue;
        }
        static const char *names[] = {"", "pieces", "trainer_spec", "normalizer_spec"};
        const uint8_t *d;
        size_t n;
        rc = g3_pb_expect(&top, f, w, G3_PB_LEN, names[f]);
        if (!rc) rc = g3_pb_bytes(&top, &d, &n);
        if (rc) return rc;
        g3_pb_reader sub = g3_pb_message(d, n, label, names[f]);
        if (f == MODEL_PIECES) {
            (*n_pieces)++;
            *text_bytes += n + 1; /* the piece text is shorter than its message */
        } else if (f == MODEL_TRAINER_SPEC) {
            *seen_trainer = 1;
            rc = read_trainer_spec(&sub, s);
        } else {
            rc = read_normalizer_spec(&sub, s);
        }
        if (rc) return rc;
    }
}

/* Refuses, before anything is allocated, what this file does not implement. */
static int check_supported(const model_specs *s, size_t n_pieces, int seen_trainer,
                           const char *label) {
    static const char *model_types[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
    if (s->model_type != MODEL_BPE)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: model_type %s (%lld)%s: only BPE tokenizers are supported", label,
                        s->model_type >= MODEL_UNIGRAM && s->model_type <= MODEL_CHAR
                            ? model_types[s->model_type]
                            : "?",
                        (long long)s->model_type, seen_trainer ? "" : " (no trainer_spec)");
    if (s->treat_whitespace_as_suffix)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: treat_whitespace_as_suffix is not supported",
                        label);
    if (s->charsmap_len > 0 &&
        !(s->norm_name_len == 8 && memcmp(s->norm_name, "identity", 8) == 0))
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: normalizer '%.*s' with a precompiled charsmap is not supported", label,
                        (int)(s->norm_name_len > 40 ? 40 : s->norm_name_len),
                        s->norm_name ? (const char *)s->norm_name : "");
    if (n_pieces == 0) return g3_error(GEMMA3_ERR_FORMAT, "%s: no pieces", label);
    if (n_pieces > (1u << 26)) /* ids must fit hash_slot.meta */
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: %zu pieces (at most %u)", label, n_pieces,
                        1u << 26);
    return GEMMA3_OK;
}

/* A tokenizer with its arena carved into the piece table, the hash table (load <= 1/2) and the
 * piece text. On failure *out still gets the partly built tokenizer, for gemma3_tokenizer_free. */
static int alloc_tables(size_t n_pieces, size_t text_bytes, const char *label,
                        gemma3_tokenizer **out) {
    gemma3_tokenizer *t = *out = calloc(1, sizeof *t);
    if (!t) return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", label);
    t->n_pieces = (int32_t)n_pieces;
    size_t ht_size = 16;
    while (ht_size < 2 * n_pieces) ht_size *= 2;
    t->ht_mask = (uint32_t)(ht_size - 1);
    t->arena_size = n_pieces * sizeof *t->piece + ht_size * sizeof *t->ht + text_bytes + PAD;
    t->arena = arena_alloc(t->arena_size);
    if (!t->arena)
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory for %zu pieces", label, n_pieces);
    t->piece = t->arena;
    t->ht = (hash_slot *)(t->piece + n_pieces);
    t->text = (char *)(t->ht + ht_size);
    return GEMMA3_OK;
}

/* The second pass: copies every piece into the tables, in id order. */
static int read_pieces(const uint8_t *buf, size_t size, const char *label, gemma3_tokenizer *t) {
    g3_pb_reader top = g3_pb_message(buf, size, label, "ModelProto");
    uint32_t text_used = 0;
    int32_t id = 0;
    for (;;) {
        uint32_t f;
        int w, rc = g3_pb_key(&top, &f, &w);
        if (rc || !f) return rc;
        if (f == MODEL_PIECES) {
            const uint8_t *d;
            size_t n;
            rc = g3_pb_bytes(&top, &d, &n);
            g3_pb_reader sub = g3_pb_message(d, n, label, "pieces");
            if (!rc) rc = read_piece(&sub, t, id++, &text_used);
        } else {
            rc = g3_pb_skip(&top, f, w);
        }
        if (rc) return rc;
    }
}

/* Loading is two passes over the top-level message: the first counts the pieces and their bytes
 * and reads the two specs (refusing what we do not implement before allocating anything), the
 * second copies the pieces into flat arrays. */
int g3_tokenizer_load_buffer(const uint8_t *buf, size_t size, const char *label,
                             gemma3_tokenizer **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "tokenizer load: out is NULL");
    *out = NULL;
    if (!label) label = "<buffer>";
    if (!buf || size == 0) return g3_error(GEMMA3_ERR_FORMAT, "%s: empty tokenizer model", label);
    if (size > UINT32_MAX - 1)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: model larger than 4 GiB", label);

    model_specs s = {.model_type = MODEL_UNIGRAM, .unk_id = 0, .bos_id = 1, .eos_id = 2,
                     .pad_id = -1, .add_dummy_prefix = 1, .remove_extra_whitespaces = 1,
                     .escape_whitespaces = 1};
    size_t n_pieces = 0, text_bytes = 0;
    int seen_trainer = 0;
    int rc = scan_model(buf, size, label, &s, &n_pieces, &text_bytes, &seen_trainer);
    if (!rc) rc = check_supported(&s, n_pieces, seen_trainer, label);
    if (rc) return rc;
    gemma3_tokenizer *t = NULL;
    rc = alloc_tables(n_pieces, text_bytes, label, &t);
    if (!rc) rc = read_pieces(buf, size, label, t);
    if (!rc) rc = finish_model(t, &s, label);
    if (rc) {
        gemma3_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return GEMMA3_OK;
}

/* The same tables from pieces given as arrays (a GGUF's tokenizer.ggml.* metadata, converted to
 * SentencePiece's conventions by its caller); each piece is checked as read_piece checks it. */
int g3_tokenizer_from_pieces(const char *const *text, const size_t *len, const float *score,
                             const int32_t *type, size_t n_pieces, const g3_tokenizer_spec *spec,
                             const char *label, gemma3_tokenizer **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "tokenizer load: out is NULL");
    *out = NULL;
    model_specs s = {.model_type = MODEL_BPE, .bos_id = spec->bos_id, .eos_id = spec->eos_id,
                     .pad_id = spec->pad_id, .byte_fallback = spec->byte_fallback,
                     .add_dummy_prefix = spec->add_dummy_prefix,
                     .remove_extra_whitespaces = spec->remove_extra_whitespaces,
                     .escape_whitespaces = spec->escape_whitespaces};
    size_t text_bytes = 0;
    for (size_t i = 0; i < n_pieces; i++) {
        if (len[i] == 0 || len[i] > UINT32_MAX / 2)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %zu: %s piece text", label, i,
                            len[i] ? "overlong" : "empty");
        if (type[i] < G3_PIECE_NORMAL || type[i] > G3_PIECE_BYTE)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %zu: bad type %d (expected 1..6)", label,
                            i, (int)type[i]);
        if (isnan(score[i])) return g3_error(GEMMA3_ERR_FORMAT, "%s: piece %zu: score is NaN", label, i);
        text_bytes += len[i] + 1;
        if (text_bytes > UINT32_MAX / 2)
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: pieces hold more than 2 GiB of text", label);
    }
    int rc = check_supported(&s, n_pieces, 1, label);
    gemma3_tokenizer *t = NULL;
    if (!rc) rc = alloc_tables(n_pieces, text_bytes, label, &t);
    uint32_t used = 0;
    for (size_t i = 0; i < n_pieces && !rc; i++) {
        memcpy(t->text + used, text[i], len[i]);
        t->text[used + len[i]] = '\0';
        t->piece[i] = (piece_info){used, (uint32_t)len[i], score[i], (uint8_t)type[i]};
        used += (uint32_t)len[i] + 1;
    }
    if (!rc) rc = finish_model(t, &s, label);
    if (rc) {
        gemma3_tokenizer_free(t);
        return rc;
    }
    t->add_bos = spec->add_bos != 0;
    *out = t;
    return GEMMA3_OK;
}

int gemma3_tokenizer_add_bos(const gemma3_tokenizer *tok) { return tok ? tok->add_bos : 0; }

/* Read through g3_read_file_ex, as every input file is: it refuses directories and devices by
 * name; a file named on its own may be a stream (a FIFO, /dev/stdin: read to its end), one of a
 * checkpoint directory (regular_only) must be a regular file. Parsing copies what it keeps. */
static int load_file(const char *path, int regular_only, gemma3_tokenizer **out) {
    if (!out) return g3_error(GEMMA3_ERR_ARG, "tokenizer load: out is NULL");
    *out = NULL;
    if (!path) return g3_error(GEMMA3_ERR_ARG, "tokenizer load: path is NULL");
    char *buf;
    size_t size;
    int rc = g3_read_file_ex(path, G3_READ_MAX, regular_only, &buf, &size);
    if (rc) return rc;
    rc = g3_tokenizer_load_buffer((const uint8_t *)buf, size, path, out);
    free(buf);
    return rc;
}

int gemma3_tokenizer_load(const char *path, gemma3_tokenizer **out) { return load_file(path, 0, out); }

int g3_tokenizer_load_checkpoint_file(const char *path, gemma3_tokenizer **out) {
    return load_file(path, 1, out);
}

/* ---- encode ---------------------------------------------------------------------------------- */

typedef struct {
    int32_t prev, next; /* neighbours in the list, -1 at the ends */
    uint32_t start, len; /* bytes of the word; len 0 = merged into its left neighbour */
    int32_t id;         /* piece id of these bytes, -1 if none */
    int32_t node;       /* merge-tree node (only when the model has UNUSED pieces) */
} symbol;

typedef struct {
    float score;
    int32_t left;  /* symbol index of the left half */
    uint32_t size; /* bytes of the merged piece: a stale entry no longer adds up to it */
    int32_t id;
} merge_cand;

typedef struct {
    int32_t left, right; /* children, -1 for a leaf (one character) */
    uint32_t start, len;
    int32_t id;
} merge_node;

/* A word already encoded in this call: its bytes sit in the normalized text at `off`, its ids in
 * encoder.word_ids at `ids`. Real text repeats words (Zipf), so most words are found here. */
typedef struct {
    uint32_t hash;
    uint32_t len;
    size_t off;
    uint32_t ids, n_ids;
} cached_word;

enum { CACHE_MAX_WORD = 64 }; /* longer words are encoded every time */

/* Per-call scratch, grown to the longest word seen; freed at the end of the call. */
typedef struct {
    symbol *sym;
    merge_cand *heap;
    merge_node *nodes;
    int32_t *stack;
    size_t cap;        /* symbols */
    int32_t *word_ids; /* ids of cached words, then of the word being encoded */
    size_t n_word_ids, cap_word_ids;
    cached_word *cache; /* open addressing, load <= 1/2; NULL for short texts */
    uint32_t cache_mask, cache_used;
    const char *base;  /* the normalized text the cache offsets refer to */
    int32_t *ids;      /* output */
    int max_ids;
    int count;
} encoder;

static inline void emit(encoder *e, int32_t id) {
    if (e->count < e->max_ids) e->ids[e->count] = id;
    e->count++;
}

/* Room for n more word ids (a word of n bytes never gives more than n ids). */
static int reserve_word_ids(encoder *e, size_t n) {
    if (e->n_word_ids + n <= e->cap_word_ids) return GEMMA3_OK;
    size_t cap = e->cap_word_ids ? e->cap_word_ids : 1024;
    while (cap < e->n_word_ids + n) cap *= 2;
    int32_t *v = realloc(e->word_ids, cap * sizeof *v);
    if (!v) return g3_error(GEMMA3_ERR_NOMEM, "tokenizer encode: out of memory (%zu ids)", cap);
    e->word_ids = v;
    e->cap_word_ids = cap;
    return GEMMA3_OK;
}

static inline void push_id(encoder *e, int32_t id) { e->word_ids[e->n_word_ids++] = id; }

/* Symbol, heap and merge-tree room for a word of n bytes (at most n characters). */
static int grow(encoder *e, size_t n) {
    if (n <= e->cap) return GEMMA3_OK;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n) cap *= 2;
    symbol *sym = realloc(e->sym, cap * sizeof *sym);
    if (sym) e->sym = sym;
    merge_cand *heap = realloc(e->heap, 3 * cap * sizeof *heap);
    if (heap) e->heap = heap;
    merge_node *nodes = realloc(e->nodes, 2 * cap * sizeof *nodes);
    if (nodes) e->nodes = nodes;
    int32_t *stack = realloc(e->stack, 2 * cap * sizeof *stack);
    if (stack) e->stack = stack;
    if (!sym || !heap || !nodes || !stack)
        return g3_error(GEMMA3_ERR_NOMEM, "tokenizer encode: out of memory for a %zu-byte word", n);
    e->cap = cap;
    return GEMMA3_OK;
}

/* Max-heap on score; on equal scores the leftmost pair wins (SentencePiece's rule). */
static inline int cand_before(const merge_cand *a, const merge_cand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static inline void heap_push(merge_cand *h, int *n, merge_cand c) {
    int i = (*n)++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!cand_before(&c, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = c;
}

static inline merge_cand heap_pop(merge_cand *h, int *n) {
    merge_cand top = h[0], last = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_before(&h[c + 1], &h[c])) c++;
        if (!cand_before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

/* Queues the merge of symbols l and l.next if their concatenation is a mergeable piece. */
static inline void try_pair(const gemma3_tokenizer *t, encoder *e, const char *w, int *n_heap,
                            int32_t l) {
    const symbol *a = &e->sym[l];
    const symbol *b = &e->sym[a->next];
    uint32_t size = a->len + b->len;
    const hash_slot *sl = lookup_merge(t, w + a->start, size);
    if (sl) heap_push(e->heap, n_heap, (merge_cand){sl->score, l, size, SLOT_ID(sl->meta)});
}

static void emit_symbol(const gemma3_tokenizer *t, encoder *e, const char *w, uint32_t start,
                        uint32_t len, int32_t id) {
    if (id >= 0) {
        push_id(e, id);
    } else if (t->byte_fallback) {
        for (uint32_t i = 0; i < len; i++) push_id(e, t->byte_piece[(unsigned char)w[start + i]]);
    } else {
        push_id(e, t->unk_id);
    }
}

/* A merge that produced an UNUSED piece is undone: SentencePiece never outputs those, it splits
 * them back into the two halves that formed them (recursively). */
static void emit_tree(const gemma3_tokenizer *t, encoder *e, const char *w, int32_t root) {
    int32_t sp = 0;
    e->stack[sp++] = root;
    while (sp > 0) {
        const merge_node *nd = &e->nodes[e->stack[--sp]];
        if (nd->left >= 0 && nd->id >= 0 && t->piece[nd->id].type == G3_PIECE_UNUSED) {
            e->stack[sp++] = nd->right;
            e->stack[sp++] = nd->left;
        } else {
            emit_symbol(t, e, w, nd->start, nd->len, nd->id);
        }
    }
}

/* BPE over one word: start from its characters, then repeatedly merge the adjacent pair whose
 * concatenation is the highest-scoring piece (leftmost on ties). Candidates sit in a heap and are
 * checked lazily when popped (a pair whose halves changed no longer adds up to its size), so the
 * whole word costs O(n log n) hash lookups and heap operations. */
static int bpe_word(const gemma3_tokenizer *t, encoder *e, const char *w, size_t n) {
    int rc = reserve_word_ids(e, n);
    if (rc) return rc;
    if (n == 1 && (unsigned char)w[0] < 128) {
        emit_symbol(t, e, w, 0, 1, t->ascii_piece[(unsigned char)w[0]]);
        return GEMMA3_OK;
    }
    rc = grow(e, n);
    if (rc) return rc;
    symbol *sym = e->sym;
    int32_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t cl = g3_utf8_len((const unsigned char *)w + i, n - i);
        sym[m] = (symbol){m - 1, m + 1, (uint32_t)i, (uint32_t)cl, -1, m};
        if (cl > 1) prefetch_slot(t, w + i, cl);
        m++;
        i += cl;
    }
    sym[m - 1].next = -1;
    /* the table is 8 MB: start every miss of the first round of lookups before using any */
    for (int32_t k = 0; k + 1 < m; k++)
        prefetch_slot(t, w + sym[k].start, sym[k].len + sym[k + 1].len);
    for (int32_t k = 0; k < m; k++) {
        const char *c = w + sym[k].start;
        if (sym[k].len == 1 && (unsigned char)*c < 128) {
            sym[k].id = t->ascii_piece[(unsigned char)*c];
        } else {
            const hash_slot *sl = lookup_merge(t, c, sym[k].len);
            sym[k].id = sl ? SLOT_ID(sl->meta) : -1;
        }
    }
    int track = t->has_unused;
    int32_t n_nodes = 0;
    if (track) {
        for (int32_t k = 0; k < m; k++)
            e->nodes[k] = (merge_node){-1, -1, sym[k].start, sym[k].len, sym[k].id};
        n_nodes = m;
    }

    int n_heap = 0;
    for (int32_t k = 0; k + 1 < m; k++) try_pair(t, e, w, &n_heap, k);
    while (n_heap > 0) {
        merge_cand c = heap_pop(e->heap, &n_heap);
        symbol *l = &sym[c.left];
        if (l->len == 0 || l->next < 0) continue;
        symbol *r = &sym[l->next];
        if (l->len + r->len != c.size) continue; /* stale */
        if (track) {
            e->nodes[n_nodes] = (merge_node){l->node, r->node, l->start, c.size, c.id};
            l->node = n_nodes++;
        }
        l->len = c.size;
        l->id = c.id;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = c.left;
        r->len = 0;
        /* the two new neighbour pairs: start both table misses, then look them up */
        if (l->prev >= 0) prefetch_slot(t, w + sym[l->prev].start, sym[l->prev].len + l->len);
        if (l->next >= 0) prefetch_slot(t, w + l->start, l->len + sym[l->next].len);
        if (l->prev >= 0) try_pair(t, e, w, &n_heap, l->prev);
        if (l->next >= 0) try_pair(t, e, w, &n_heap, c.left);
    }
    for (int32_t k = 0; k >= 0; k = sym[k].next) {
        if (track)
            emit_tree(t, e, w, sym[k].node);
        else
            emit_symbol(t, e, w, sym[k].start, sym[k].len, sym[k].id);
    }
    return GEMMA3_OK;
}

/* Creates the word cache with room for about text_len / 8 words, or doubles it. */
static int cache_grow(encoder *e, size_t text_len) {
    uint32_t size = 256;
    if (e->cache) size = 2 * (e->cache_mask + 1);
    else
        while (size < 4096 && size < text_len / 4) size *= 2;
    cached_word *c = malloc(size * sizeof *c);
    if (!c) return g3_error(GEMMA3_ERR_NOMEM, "tokenizer encode: out of memory (word cache)");
    for (uint32_t i = 0; i < size; i++) c[i].len = 0;
    if (e->cache) {
        for (uint32_t i = 0; i <= e->cache_mask; i++) {
            if (!e->cache[i].len) continue;
            uint32_t j = e->cache[i].hash & (size - 1);
            while (c[j].len) j = (j + 1) & (size - 1);
            c[j] = e->cache[i];
        }
        free(e->cache);
    }
    e->cache = c;
    e->cache_mask = size - 1;
    return GEMMA3_OK;
}

/* One word through the cache: ids of a word seen before are copied, a new word runs BPE and
 * (if short) is remembered. */
static int encode_word(const gemma3_tokenizer *t, encoder *e, const char *w, size_t n) {
    if (n == 0) return GEMMA3_OK;
    uint32_t h = 0, slot = 0;
    int cacheable = e->cache && n <= CACHE_MAX_WORD;
    if (cacheable) {
        h = hash_key(load8(w, n), w, n);
        for (slot = h & e->cache_mask; e->cache[slot].len; slot = (slot + 1) & e->cache_mask) {
            const cached_word *c = &e->cache[slot];
            if (c->hash == h && c->len == n &&
                (n <= 8 ? load8(e->base + c->off, n) == load8(w, n)
                        : memcmp(e->base + c->off, w, n) == 0)) {
                for (uint32_t i = 0; i < c->n_ids; i++) emit(e, e->word_ids[c->ids + i]);
                return GEMMA3_OK;
            }
        }
    }
    size_t first = e->n_word_ids;
    int rc = bpe_word(t, e, w, n);
    if (rc) return rc;
    for (size_t i = first; i < e->n_word_ids; i++) emit(e, e->word_ids[i]);
    if (!cacheable || e->n_word_ids > UINT32_MAX) {
        e->n_word_ids = first;
        return GEMMA3_OK;
    }
    e->cache[slot] = (cached_word){h, (uint32_t)n, (size_t)(w - e->base), (uint32_t)first,
                                   (uint32_t)(e->n_word_ids - first)};
    if (++e->cache_used * 2 > e->cache_mask + 1) return cache_grow(e, 0);
    return GEMMA3_OK;
}

/* Text between two matched user-defined pieces, cut into words before each '▁' that follows
 * neither a '▁' nor a byte of joins_space: each word is an independent BPE problem. */
static int encode_segment(const gemma3_tokenizer *t, encoder *e, const char *s, size_t n) {
    size_t word = 0;
    for (size_t i = 1; i + 3 <= n; i++) {
        if (s[i] != SPACE_SYMBOL[0] || memcmp(s + i, SPACE_SYMBOL, 3) != 0) continue;
        if (t->joins_space[(unsigned char)s[i - 1]]) continue;
        if (i >= 3 && memcmp(s + i - 3, SPACE_SYMBOL, 3) == 0) continue;
        int rc = encode_word(t, e, s + word, i - word);
        if (rc) return rc;
        word = i;
        i += 2;
    }
    return encode_word(t, e, s + word, n - word);
}

/* Longest trie piece at s that may be matched (USER_DEFINED, or any with `special`); returns its
 * length and id, or 0. */
static size_t match_piece(const gemma3_tokenizer *t, const unsigned char *s, size_t n, int special,
                          int32_t *id) {
    size_t best = 0;
    int32_t node = t->root_child[s[0]];
    for (size_t i = 1; node >= 0; i++) {
        int32_t pid = t->trie[node].id;
        if (pid >= 0 && (special || t->piece[pid].type == G3_PIECE_USER_DEFINED)) {
            best = i;
            *id = pid;
        }
        if (i == n) break;
        int32_t c = t->trie[node].child;
        while (c >= 0 && t->trie[c].byte != s[i]) c = t->trie[c].sibling;
        node = c;
    }
    return best;
}

/* SentencePiece's normalizer without a charsmap: optionally drop leading/trailing spaces and
 * squeeze runs, optionally add one leading space, then spaces become U+2581. out has room for
 * 3 * len + 3 bytes. */
static size_t normalize(const gemma3_tokenizer *t, const char *text, size_t len, char *out) {
    const char *p = text, *end = text + len;
    if (t->remove_extra_whitespaces) {
        while (p < end && *p == ' ') p++;
        while (end > p && end[-1] == ' ') end--;
    }
    const char *space = t->escape_whitespaces ? SPACE_SYMBOL : " ";
    size_t space_len = t->escape_whitespaces ? 3 : 1, n = 0;
    if (t->add_dummy_prefix && p < end) {
        memcpy(out, space, space_len);
        n = space_len;
    }
    while (p < end) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        size_t run = (size_t)((sp ? sp : end) - p);
        memcpy(out + n, p, run);
        n += run;
        if (!sp) break;
        memcpy(out + n, space, space_len);
        n += space_len;
        p = sp + 1;
        if (t->remove_extra_whitespaces)
            while (p < end && *p == ' ') p++;
    }
    return n;
}

int gemma3_tokenizer_encode(const gemma3_tokenizer *tok, const char *text, size_t len, int flags,
                            int32_t *ids, int max_ids) {
    if (!tok) return g3_error(GEMMA3_ERR_ARG, "tokenizer encode: tokenizer is NULL");
    if (!text && len) return g3_error(GEMMA3_ERR_ARG, "tokenizer encode: text is NULL");
    if (max_ids < 0 || (!ids && max_ids > 0))
        return g3_error(GEMMA3_ERR_ARG, "tokenizer encode: bad output buffer (max_ids %d)", max_ids);
    if (flags & ~(GEMMA3_TOK_BOS | GEMMA3_TOK_PARSE_SPECIAL | GEMMA3_TOK_MARKERS_AS_TEXT))
        return g3_error(GEMMA3_ERR_ARG, "tokenizer encode: unknown flags 0x%x", (unsigned)flags);
    /* every byte gives at most one id, so the count fits an int */
    if (len > (size_t)(INT_MAX / 4))
        return g3_error(GEMMA3_ERR_ARG, "tokenizer encode: text of %zu bytes is too long", len);
    encoder e = {.ids = ids, .max_ids = max_ids};
    if (flags & GEMMA3_TOK_BOS) {
        if (tok->bos_id < 0)
            return g3_error(GEMMA3_ERR_UNSUPPORTED, "tokenizer encode: the model has no BOS piece");
        emit(&e, tok->bos_id);
    }
    if (len == 0) return e.count;
    char *norm = malloc(3 * len + 3 + PAD);
    if (!norm) return g3_error(GEMMA3_ERR_NOMEM, "tokenizer encode: out of memory (%zu bytes)", len);
    size_t n = normalize(tok, text, len, norm);
    e.base = norm;
    int rc = n > 4 * CACHE_MAX_WORD ? cache_grow(&e, n) : GEMMA3_OK;
    int special = (flags & GEMMA3_TOK_PARSE_SPECIAL) != 0;
    int as_text = (flags & GEMMA3_TOK_MARKERS_AS_TEXT) != 0;
    int32_t sot = gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_START_OF_TURN);
    int32_t eot = gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_END_OF_TURN);
    const unsigned char *u = (const unsigned char *)norm;
    size_t seg = 0;
    for (size_t i = 0; i < n && !rc;) {
        int32_t id;
        size_t m = may_match(tok, u + i, n - i) ? match_piece(tok, u + i, n - i, special, &id) : 0;
        if (m == 0) {
            i += g3_utf8_len(u + i, n - i);
            continue;
        }
        rc = encode_segment(tok, &e, norm + seg, i - seg);
        if (as_text && (id == sot || id == eot)) {
            /* the marker's text as text: its first byte and the rest apart, so that no merge
             * can rebuild the marker piece */
            if (!rc) rc = encode_segment(tok, &e, norm + i, 1);
            if (!rc) rc = encode_segment(tok, &e, norm + i + 1, m - 1);
        } else {
            emit(&e, id);
        }
        i += m;
        seg = i;
    }
    if (!rc) rc = encode_segment(tok, &e, norm + seg, n - seg);
    free(norm);
    free(e.sym);
    free(e.heap);
    free(e.nodes);
    free(e.stack);
    free(e.word_ids);
    free(e.cache);
    return rc ? rc : e.count;
}

/* ---- decode ---------------------------------------------------------------------------------- */

/* The text of one id through the decoder. Pieces are stored with U+2581 for spaces; the dummy
 * prefix space that encode added (add_dummy_prefix) is dropped at the start of the text. */
static void dec_piece(const gemma3_tokenizer *t, gemma3_decoder *d, int32_t id, g3_sink *o) {
    int ty = t->piece[id].type;
    if (ty == G3_PIECE_CONTROL) return;
    if (ty == G3_PIECE_BYTE) {
        int b = byte_piece_value(t->text + t->piece[id].off, t->piece[id].len);
        unsigned char c = (unsigned char)b;
        g3_utf8_push_byte(d, c, o);
        d->started = 1;
        return;
    }
    const char *s = ty == G3_PIECE_UNKNOWN ? t->unk_surface : t->text + t->piece[id].off;
    size_t n = ty == G3_PIECE_UNKNOWN ? t->unk_surface_len : t->piece[id].len;
    size_t i = 0;
    if (!d->started && t->add_dummy_prefix && ty != G3_PIECE_UNKNOWN) {
        if (n >= 3 && memcmp(s, SPACE_SYMBOL, 3) == 0) i = 3;
    }
    if (n > 0) d->started = 1;
    while (i < n) {
        if (s[i] == SPACE_SYMBOL[0] && n - i >= 3 && memcmp(s + i, SPACE_SYMBOL, 3) == 0) {
            g3_utf8_push_byte(d, ' ', o);
            i += 3;
        } else {
            g3_utf8_push_byte(d, (unsigned char)s[i], o);
            i++;
        }
    }
}

int gemma3_tokenizer_token_bytes(const gemma3_tokenizer *tok, int32_t id, char *buf, size_t cap) {
    if (!tok || id < 0 || id >= tok->n_pieces || (!buf && cap)) return -1;
    int ty = tok->piece[id].type;
    if (ty == G3_PIECE_CONTROL || ty == G3_PIECE_UNKNOWN) return -1;
    const char *s = tok->text + tok->piece[id].off;
    size_t n = tok->piece[id].len, o = 0;
    if (ty == G3_PIECE_BYTE) {
        if (cap > 0) buf[0] = (char)byte_piece_value(s, n);
        return 1;
    }
    for (size_t i = 0; i < n; o++) {
        int space = n - i >= 3 && memcmp(s + i, SPACE_SYMBOL, 3) == 0;
        if (o < cap) buf[o] = space ? ' ' : s[i];
        i += space ? 3 : 1;
    }
    return (int)o;
}

int gemma3_tokenizer_decode(const gemma3_tokenizer *tok, const int32_t *ids, int n_ids, char *buf,
                            size_t cap) {
    if (!tok || n_ids < 0 || (!ids && n_ids) || (!buf && cap))
        return g3_error(GEMMA3_ERR_ARG, "tokenizer decode: bad arguments");
    for (int i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= tok->n_pieces)
            return g3_error(GEMMA3_ERR_ARG, "tokenizer decode: id %d at %d out of range [0, %d)",
                            (int)ids[i], i, (int)tok->n_pieces);
    gemma3_decoder d = {0};
    g3_sink o = {buf, cap, 0};
    for (int i = 0; i < n_ids; i++) dec_piece(tok, &d, ids[i], &o);
    g3_utf8_flush(&d, &o);
    g3_sink_terminate(&o);
    if (o.n > INT_MAX) return g3_error(GEMMA3_ERR_ARG, "tokenizer decode: text longer than 2 GiB");
    return (int)o.n;
}

/* Streaming: the text is computed on a copy of the decoder first, so a too-small buffer is an
 * error that leaves the decoder untouched rather than a silently truncated stream. */
int gemma3_decoder_push(const gemma3_tokenizer *tok, gemma3_decoder *dec, int32_t id, char *out,
                        size_t cap) {
    if (!tok || !dec || !out || cap == 0)
        return g3_error(GEMMA3_ERR_ARG, "decoder push: bad arguments");
    if (id < 0 || id >= tok->n_pieces)
        return g3_error(GEMMA3_ERR_ARG, "decoder push: id %d out of range [0, %d)", (int)id,
                        (int)tok->n_pieces);
    if (dec->n_pending < 0 || dec->n_pending > 3)
        return g3_error(GEMMA3_ERR_ARG, "decoder push: decoder state is corrupt");
    gemma3_decoder trial = *dec;
    g3_sink count = {NULL, 0, 0};
    dec_piece(tok, &trial, id, &count);
    if (count.n + 1 > cap)
        return g3_error(GEMMA3_ERR_ARG, "decoder push: output needs %zu bytes, buffer has %zu",
                        count.n + 1, cap);
    g3_sink o = {out, cap, 0};
    dec_piece(tok, dec, id, &o);
    g3_sink_terminate(&o);
    return (int)o.n;
}

int gemma3_decoder_flush(gemma3_decoder *dec, char *out, size_t cap) {
    if (!dec || !out || cap < 4) return g3_error(GEMMA3_ERR_ARG, "decoder flush: bad arguments");
    g3_sink o = {out, cap, 0};
    g3_utf8_flush(dec, &o);
    g3_sink_terminate(&o);
    return (int)o.n;
}

/* ---- special ids ----------------------------------------------------------------------------- */

int32_t gemma3_tokenizer_special(const gemma3_tokenizer *tok, enum gemma3_special which) {
    if (!tok) return -1;
    switch (which) {
    case GEMMA3_SPECIAL_PAD: return tok->pad_id;
    case GEMMA3_SPECIAL_EOS: return tok->eos_id;
    case GEMMA3_SPECIAL_BOS: return tok->bos_id;
    case GEMMA3_SPECIAL_UNK: return tok->unk_id;
    case GEMMA3_SPECIAL_START_OF_TURN: return lookup(tok, "<start_of_turn>", 15);
    case GEMMA3_SPECIAL_END_OF_TURN: return lookup(tok, "<end_of_turn>", 13);
    }
    return -1;
}
