/* state.c - saved session state: the token ids, the position, the last logits and every layer's
 * KV cache, written so that a session of the same model and settings continues from it
 * bit-identically (gemma3_session_save / _load and their buffer variants, gemma3.h).
 *
 * Format, version 1. Header fields are little-endian u32/u64; the payload's arrays are the
 * session's own little-endian int32, f32 and bf16 values.
 *   header   "G3STATE\n", u32 version, u32 field count (17), the u64 fields of `fields` below
 *            (the model's and the session's fingerprint, then the saved n_ctx, position and
 *            sliding rows), u64 XXH64 of the header bytes before it
 *   payload  int32 tokens[pos]; f32 logits[vocab_size]; then per layer the K rows, then the V
 *            rows, of its last m positions in ascending position order (m = pos on a full layer,
 *            the sliding rows field on a sliding one: what its ring held, min(pos, W) at least,
 *            more with n_swa_extra), each row nKV*hd elements of the cache type
 *   trailer  u64 XXH64 of the payload
 *
 * Rows go in position order, not ring order: a session with another n_ctx or n_swa_extra has
 * a ring of another size, where position p lives in slot p % n_slots, whatever slot it occupied
 * when saved. It takes the last min(m, n_slots) rows: always the W - 1 the next query needs, as
 * pos must fit its n_ctx; the rows beyond W are what lets it cut the cache back (truncate).
 *
 * The model's fingerprint: the config's shape fields in clear (so a mismatch can be named), a
 * hash of the rest of the config (layer types, RoPE, norm epsilon, softcaps, tying), the
 * weight type, and a hash over every bound tensor in binding order (which is by name) of its
 * type, shape and sampled bytes: all of the norms, and of each matrix 4 KiB at its start,
 * middle and end. Hashing every weight byte would cost a pass over the whole checkpoint (8 GB
 * for a 4B model, seconds) on every save and load; the samples tell apart any two checkpoints
 * of one shape that were trained or generated separately (all bytes differ) at ~2 MB per load,
 * but not two that differ only inside one matrix (a local edit of a weight).
 *
 * Loading checks everything (magic, version, header checksum, fingerprint, position against
 * n_ctx, size, payload checksum, token ids) before it writes anything into the session. */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemma3.h"
#include "session-view.h"
#include "util.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "state.c writes the session's arrays as they are in memory: little-endian hosts only"
#endif

/* ==== XXH64 =================================================================================== */

#define P1 11400714785074694791ull
#define P2 14029467366897019727ull
#define P3 1609587929392839161ull
#define P4 9650029242287828579ull
#define P5 2870177450012600261ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t rd64(const void *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t rd32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t xxh_round(uint64_t acc, uint64_t input) {
    acc += input * P2;
    return rotl64(acc, 31) * P1;
}

static uint64_t xxh_merge(uint64_t h, uint64_t acc) {
    h ^= xxh_round(0, acc);
    return h * P1 + P4;
}

void g3_hash64_init(g3_hasher *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->seed = seed;
    h->acc[0] = seed + P1 + P2;
    h->acc[1] = seed + P2;
    h->acc[2] = seed;
    h->acc[3] = seed - P1;
}

static void consume_stripe(g3_hasher *h, const unsigned char *p) {
    for (int i = 0; i < 4; i++) h->acc[i] = xxh_round(h->acc[i], rd64(p + 8 * i));
}

void g3_hash64_update(g3_hasher *h, const void *data, size_t len) {
    const unsigned char *p = data;
    h->total += len;
    if (h->n_buf + len < 32) {
        if (len) memcpy(h->buf + h->n_buf, p, len);
        h->n_buf += len;
        return;
    }
    if (h->n_buf) {
        size_t fill = 32 - h->n_buf;
        memcpy(h->buf + h->n_buf, p, fill);
        consume_stripe(h, h->buf);
        p += fill;
        len -= fill;
        h->n_buf = 0;
    }
    for (; len >= 32; p += 32, len -= 32) consume_stripe(h, p);
    memcpy(h->buf, p, len);
    h->n_buf = len;
}

uint64_t g3_hash64_digest(const g3_hasher *h) {
    uint64_t d;
    if (h->total >= 32) {
        d = rotl64(h->acc[0], 1) + rotl64(h->acc[1], 7) + rotl64(h->acc[2], 12) + rotl64(h->acc[3], 18);
        for (int i = 0; i < 4; i++) d = xxh_merge(d, h->acc[i]);
    } else {
        d = h->seed + P5;
    }
    d += h->total;
    const unsigned char *p = h->buf;
    size_t n = h->n_buf;
    for (; n >= 8; p += 8, n -= 8) d = rotl64(d ^ xxh_round(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) {
        d = rotl64(d ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n > 0; p++, n--) d = rotl64(d ^ *p * P5, 11) * P1;
    d ^= d >> 33;
    d *= P2;
    d ^= d >> 29;
    d *= P3;
    d ^= d >> 32;
    return d;
}

uint64_t g3_hash64(const void *data, size_t len, uint64_t seed) {
    g3_hasher h;
    g3_hash64_init(&h, seed);
    g3_hash64_update(&h, data, len);
    return g3_hash64_digest(&h);
}

/* ==== fingerprint ============================================================================= */

enum field_kind { F_INT, F_HASH, F_WTYPE, F_KV };
/* A state file numbers weight types from 0 (BF16, then Q8_0, Q4_0: the order of quant.h's
 * table), as it did before the type table took the public enum's values, which start at 1. */
enum { STATE_WTYPE_BASE = GEMMA3_WEIGHTS_BF16 };
enum field_scope { OF_MODEL, OF_SESSION, OF_CONTENTS };

enum {
    FP_VOCAB, FP_HIDDEN, FP_INTER, FP_LAYERS, FP_HEADS, FP_KV_HEADS, FP_HEAD_DIM, FP_WINDOW,
    FP_MAX_POS, FP_CONFIG, FP_WTYPE, FP_WEIGHTS, FP_EXACT, FP_KV_TYPE, FP_N_CTX, FP_POS,
    FP_RING_ROWS, N_FIELDS
};
_Static_assert(N_FIELDS == G3_STATE_N_FIELDS, "state.h's field count");

static const struct field {
    const char *name;
    enum field_kind kind;
    enum field_scope scope;
} fields[N_FIELDS] = {
    [FP_VOCAB] = {"vocab_size", F_INT, OF_MODEL},
    [FP_HIDDEN] = {"hidden_size", F_INT, OF_MODEL},
    [FP_INTER] = {"intermediate_size", F_INT, OF_MODEL},
    [FP_LAYERS] = {"num_hidden_layers", F_INT, OF_MODEL},
    [FP_HEADS] = {"num_attention_heads", F_INT, OF_MODEL},
    [FP_KV_HEADS] = {"num_key_value_heads", F_INT, OF_MODEL},
    [FP_HEAD_DIM] = {"head_dim", F_INT, OF_MODEL},
    [FP_WINDOW] = {"sliding_window", F_INT, OF_MODEL},
    [FP_MAX_POS] = {"max_position_embeddings", F_INT, OF_MODEL},
    [FP_CONFIG] = {"config hash (layer types, RoPE, norm eps, softcaps, tying)", F_HASH, OF_MODEL},
    [FP_WTYPE] = {"weight type", F_WTYPE, OF_MODEL},
    [FP_WEIGHTS] = {"weights hash", F_HASH, OF_MODEL},
    [FP_EXACT] = {"exact mode", F_INT, OF_SESSION},
    [FP_KV_TYPE] = {"KV cache type", F_KV, OF_SESSION},
    [FP_N_CTX] = {"n_ctx", F_INT, OF_CONTENTS},
    [FP_POS] = {"position", F_INT, OF_CONTENTS},
    [FP_RING_ROWS] = {"sliding rows", F_INT, OF_CONTENTS},
};

static void hash_u64(g3_hasher *h, uint64_t v) { g3_hash64_update(h, &v, sizeof v); }

static void hash_f32(g3_hasher *h, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    hash_u64(h, u);
}

/* Everything in the config that shapes the forward pass besides the fields kept in clear. */
static uint64_t config_hash(const g3_config *c) {
    g3_hasher h;
    g3_hash64_init(&h, 0);
    const float knobs[] = {c->query_pre_attn_scalar, c->rms_norm_eps, c->rope_theta_full,
                           c->rope_factor_full, c->rope_theta_sliding, c->rope_factor_sliding,
                           c->attn_softcap, c->final_softcap};
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) hash_f32(&h, knobs[i]);
    hash_u64(&h, (uint64_t)c->tie_word_embeddings);
    g3_hash64_update(&h, c->layer_types, (size_t)c->n_layers);
    return g3_hash64_digest(&h);
}

#define SAMPLE_BYTES 4096

/* The bytes [offset, offset + n) of a matrix as its row layout holds them (whatever its layout
 * in memory: a state does not depend on it). */
static void hash_bytes(g3_hasher *h, g3_matrix m, int64_t n_in, size_t offset, size_t n) {
    if (m.layout != G3_LAYOUT_X8) {
        g3_hash64_update(h, (const char *)m.data + offset, n);
        return;
    }
    unsigned char buf[SAMPLE_BYTES];
    for (size_t done = 0; done < n; done += sizeof buf) {
        const size_t k = n - done < sizeof buf ? n - done : sizeof buf;
        g3_x8_read(m.type, m.data, n_in, offset + done, k, buf);
        g3_hash64_update(h, buf, k);
    }
}

/* A matrix's type and shape, and its bytes at the start, middle and end (all of a small one). */
static void hash_matrix(g3_hasher *h, g3_matrix m, int64_t rows, int64_t n_in) {
    hash_u64(h, (uint64_t)m.type);
    hash_u64(h, (uint64_t)rows);
    hash_u64(h, (uint64_t)n_in);
    size_t bytes = (size_t)rows * g3_wtype_row_bytes(m.type, n_in);
    if (bytes <= 3 * SAMPLE_BYTES) {
        hash_bytes(h, m, n_in, 0, bytes);
        return;
    }
    hash_bytes(h, m, n_in, 0, SAMPLE_BYTES);
    hash_bytes(h, m, n_in, bytes / 2 - SAMPLE_BYTES / 2, SAMPLE_BYTES);
    hash_bytes(h, m, n_in, bytes - SAMPLE_BYTES, SAMPLE_BYTES);
}

static void hash_norm(g3_hasher *h, const float *w, int n) {
    hash_u64(h, (uint64_t)n);
    g3_hash64_update(h, w, (size_t)n * sizeof *w);
}

static uint64_t weights_hash(const g3_config *c, const g3_weights *w) {
    const int64_t V = c->vocab_size, H = c->hidden_size, I = c->intermediate_size;
    const int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    g3_hasher h;
    g3_hash64_init(&h, 0);
    hash_matrix(&h, w->embed, V, H);
    hash_matrix(&h, w->lm_head, V, H);
    hash_norm(&h, w->final_norm, (int)H);
    for (int l = 0; l < c->n_layers; l++) {
        const g3_layer_weights *lw = &w->layers[l];
        hash_matrix(&h, lw->wq, qd, H);
        hash_matrix(&h, lw->wk, kvd, H);
        hash_matrix(&h, lw->wv, kvd, H);
        hash_matrix(&h, lw->wo, H, qd);
        hash_matrix(&h, lw->w_gate, I, H);
        hash_matrix(&h, lw->w_up, I, H);
        hash_matrix(&h, lw->w_down, H, I);
        hash_norm(&h, lw->attn_norm, (int)H);
        hash_norm(&h, lw->q_norm, c->head_dim);
        hash_norm(&h, lw->k_norm, c->head_dim);
        hash_norm(&h, lw->post_attn_norm, (int)H);
        hash_norm(&h, lw->pre_ffn_norm, (int)H);
        hash_norm(&h, lw->post_ffn_norm, (int)H);
    }
    return g3_hash64_digest(&h);
}

/* Positions the session's sliding rings hold: the last n_slots, none before ring_first. */
static int ring_rows(const g3_session_view *v) {
    int oldest = v->ring_first;
    for (int l = 0; l < v->cfg->n_layers; l++)
        if (v->cfg->layer_types[l] == G3_LAYER_SLIDING && v->pos - v->kv[l].n_slots > oldest)
            oldest = v->pos - v->kv[l].n_slots;
    return v->pos - oldest;
}

static void fingerprint(const g3_session_view *v, uint64_t f[N_FIELDS]) {
    const g3_config *c = v->cfg;
    f[FP_VOCAB] = (uint64_t)c->vocab_size;
    f[FP_HIDDEN] = (uint64_t)c->hidden_size;
    f[FP_INTER] = (uint64_t)c->intermediate_size;
    f[FP_LAYERS] = (uint64_t)c->n_layers;
    f[FP_HEADS] = (uint64_t)c->n_heads;
    f[FP_KV_HEADS] = (uint64_t)c->n_kv_heads;
    f[FP_HEAD_DIM] = (uint64_t)c->head_dim;
    f[FP_WINDOW] = (uint64_t)c->sliding_window;
    f[FP_MAX_POS] = (uint64_t)c->max_position_embeddings;
    f[FP_CONFIG] = config_hash(c);
    f[FP_WTYPE] = (uint64_t)(v->w->wtype - STATE_WTYPE_BASE);
    f[FP_WEIGHTS] = weights_hash(c, v->w);
    f[FP_EXACT] = (uint64_t)v->exact;
    f[FP_KV_TYPE] = (uint64_t)v->kv_bf16;
    f[FP_N_CTX] = (uint64_t)v->n_ctx;
    f[FP_POS] = (uint64_t)v->pos;
    f[FP_RING_ROWS] = (uint64_t)ring_rows(v);
}

static const char *field_str(enum field_kind kind, uint64_t value, char *buf, size_t n) {
    switch (kind) {
    case F_HASH: snprintf(buf, n, "%016llx", (unsigned long long)value); break;
    case F_WTYPE:
        snprintf(buf, n, "%s", value < GEMMA3_WEIGHTS_COUNT ? g3_wtype_name((g3_wtype)(value + STATE_WTYPE_BASE)) : "?");
        break;
    case F_KV: snprintf(buf, n, "%s", value ? "bf16" : "f32"); break;
    default: snprintf(buf, n, "%llu", (unsigned long long)value); break;
    }
    return buf;
}

/* ==== layout ================================================================================== */

/* Positions of layer l a state at position pos carries: all on a full layer, the ring_rows the
 * sliding rings hold on a sliding one. */
static int rows_kept(const g3_config *c, int l, int pos, int ring_rows) {
    return c->layer_types[l] == G3_LAYER_SLIDING ? ring_rows : pos;
}

static size_t payload_bytes(const g3_session_view *v, int pos, int ring_rows) {
    size_t n = (size_t)pos * sizeof(int32_t) + (size_t)v->cfg->vocab_size * sizeof(float);
    for (int l = 0; l < v->cfg->n_layers; l++)
        n += 2 * (size_t)rows_kept(v->cfg, l, pos, ring_rows) * v->row_bytes;
    return n;
}

static size_t state_bytes(const g3_session_view *v, int pos, int ring_rows) {
    return G3_STATE_HEADER_BYTES + payload_bytes(v, pos, ring_rows) + sizeof(uint64_t);
}

/* ==== writing ================================================================================= */

/* Where the bytes go: a FILE (errors surface at fflush/fclose through ferror) or a buffer the
 * caller sized with state_bytes. Every byte also goes into the running hash. */
typedef struct sink {
    FILE *f;
    char *buf;
    size_t len;
    g3_hasher hash;
} sink;

static void put_raw(sink *k, const void *p, size_t n) { /* not hashed: the header, the checksums */
    if (k->f)
        fwrite(p, 1, n, k->f);
    else
        memcpy(k->buf + k->len, p, n);
    k->len += n;
}

static void put(sink *k, const void *p, size_t n) {
    g3_hash64_update(&k->hash, p, n);
    put_raw(k, p, n);
}

/* n rows of a ring of n_slots, for positions first .. first+n-1, in position order. */
static void put_ring_rows(sink *k, const char *ring, int n_slots, size_t row, int first, int n) {
    while (n > 0) {
        int slot = first % n_slots;
        int run = n_slots - slot < n ? n_slots - slot : n;
        put(k, ring + (size_t)slot * row, (size_t)run * row);
        first += run;
        n -= run;
    }
}

static void write_state(const g3_session_view *v, sink *k) {
    unsigned char hdr[G3_STATE_HEADER_BYTES];
    uint64_t f[N_FIELDS];
    fingerprint(v, f);
    uint32_t version = G3_STATE_VERSION, n_fields = N_FIELDS;
    memcpy(hdr, G3_STATE_MAGIC, 8);
    memcpy(hdr + 8, &version, 4);
    memcpy(hdr + 12, &n_fields, 4);
    memcpy(hdr + 16, f, sizeof f);
    uint64_t hh = g3_hash64(hdr, G3_STATE_HEADER_BYTES - 8, 0);
    memcpy(hdr + G3_STATE_HEADER_BYTES - 8, &hh, 8);
    put_raw(k, hdr, sizeof hdr);

    g3_hash64_init(&k->hash, 0);
    put(k, v->tokens, (size_t)v->pos * sizeof(int32_t));
    put(k, v->logits, (size_t)v->cfg->vocab_size * sizeof(float));
    for (int l = 0; l < v->cfg->n_layers; l++) {
        int m = rows_kept(v->cfg, l, v->pos, ring_rows(v));
        const g3_kv_view *kv = &v->kv[l];
        put_ring_rows(k, kv->k, kv->n_slots, v->row_bytes, v->pos - m, m);
        put_ring_rows(k, kv->v, kv->n_slots, v->row_bytes, v->pos - m, m);
    }
    uint64_t ph = g3_hash64_digest(&k->hash);
    put_raw(k, &ph, sizeof ph);
}

size_t gemma3_session_state_size(gemma3_session *s) {
    g3_session_view v;
    g3_session_get_view(s, &v);
    return state_bytes(&v, v.pos, ring_rows(&v));
}

int gemma3_session_save_buffer(gemma3_session *s, void *buf, size_t cap) {
    if (!s || !buf) return g3_error(GEMMA3_ERR_ARG, "save state: no session or buffer");
    g3_session_view v;
    g3_session_get_view(s, &v);
    size_t need = state_bytes(&v, v.pos, ring_rows(&v));
    if (cap < need)
        return g3_error(GEMMA3_ERR_ARG, "save state: the buffer holds %zu bytes, the state takes %zu",
                        cap, need);
    sink k = {.buf = buf};
    write_state(&v, &k);
    return GEMMA3_OK;
}

/* Through gemma3_outfile: a regular file is written to a temporary, synced and renamed, so a
 * crash or a full disk leaves the previous file as it was; a device or FIFO is written as such. */
int gemma3_session_save(gemma3_session *s, const char *path) {
    if (!s || !path) return g3_error(GEMMA3_ERR_ARG, "save state: no session or path");
    gemma3_outfile *o;
    int rc = gemma3_outfile_open(path, &o);
    if (rc != GEMMA3_OK) return rc;
    g3_session_view v;
    g3_session_get_view(s, &v);
    sink k = {.f = gemma3_outfile_stream(o)};
    write_state(&v, &k);
    return gemma3_outfile_commit(o);
}

/* ==== reading ================================================================================= */

/* n rows for positions first .. first+n-1 into a ring of n_slots. */
static void get_ring_rows(char *ring, int n_slots, size_t row, int first, int n, const char *src) {
    while (n > 0) {
        int slot = first % n_slots;
        int run = n_slots - slot < n ? n_slots - slot : n;
        memcpy(ring + (size_t)slot * row, src, (size_t)run * row);
        src += (size_t)run * row;
        first += run;
        n -= run;
    }
}

/* The first difference between the file's fingerprint and this session's, as the error. */
static int check_fingerprint(const uint64_t *file, const uint64_t *ours, const char *name) {
    for (int i = 0; i < N_FIELDS; i++) {
        if (fields[i].scope == OF_CONTENTS || file[i] == ours[i]) continue;
        char a[32], b[32];
        field_str(fields[i].kind, file[i], a, sizeof a);
        field_str(fields[i].kind, ours[i], b, sizeof b);
        if (fields[i].scope == OF_MODEL)
            return g3_error(GEMMA3_ERR_UNSUPPORTED,
                            "%s: saved from another model: %s %s in the file, %s in this one", name,
                            fields[i].name, a, b);
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "%s: saved with other session settings: %s %s in the file, %s in this session",
                        name, fields[i].name, a, b);
    }
    return GEMMA3_OK;
}

/* Validates the whole image, then (only then) copies it into the session. */
static int load_image(gemma3_session *s, const unsigned char *d, size_t size, const char *name) {
    if (size < 8 || memcmp(d, G3_STATE_MAGIC, 8) != 0)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: not a gemma3 state file (no G3STATE magic)", name);
    if (size < G3_STATE_HEADER_BYTES)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: truncated: %zu bytes, less than the %d-byte header",
                        name, size, G3_STATE_HEADER_BYTES);
    uint32_t version = rd32(d + 8);
    if (version != G3_STATE_VERSION)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "%s: state format version %u; this build reads version %u",
                        name, version, G3_STATE_VERSION);
    if (rd64(d + G3_STATE_HEADER_BYTES - 8) != g3_hash64(d, G3_STATE_HEADER_BYTES - 8, 0))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: header checksum mismatch: the file is corrupted", name);
    if (rd32(d + 12) != N_FIELDS)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %u header fields; version %u has %d", name, rd32(d + 12),
                        G3_STATE_VERSION, N_FIELDS);

    g3_session_view v;
    g3_session_get_view(s, &v);
    uint64_t file[N_FIELDS], ours[N_FIELDS];
    for (int i = 0; i < N_FIELDS; i++) file[i] = rd64(d + 16 + 8 * i);
    fingerprint(&v, ours);
    int rc = check_fingerprint(file, ours, name);
    if (rc != GEMMA3_OK) return rc;
    if (file[FP_POS] > file[FP_N_CTX] || file[FP_N_CTX] > (uint64_t)v.cfg->max_position_embeddings)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: position %llu does not fit the saved n_ctx %llu", name,
                        (unsigned long long)file[FP_POS], (unsigned long long)file[FP_N_CTX]);
    if (file[FP_POS] > (uint64_t)v.n_ctx)
        return g3_error(GEMMA3_ERR_CONTEXT,
                        "%s: holds %llu tokens, more than this session's context of %d (raise n_ctx, -c)",
                        name, (unsigned long long)file[FP_POS], v.n_ctx);
    const int pos = (int)file[FP_POS];
    const int window_rows = v.cfg->sliding_window < pos ? v.cfg->sliding_window : pos;
    if (file[FP_RING_ROWS] < (uint64_t)window_rows || file[FP_RING_ROWS] > (uint64_t)pos)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %llu sliding rows for position %d, not in [%d, %d]", name,
                        (unsigned long long)file[FP_RING_ROWS], pos, window_rows, pos);
    const int ring_rows_in = (int)file[FP_RING_ROWS];
    const size_t want = state_bytes(&v, pos, ring_rows_in);
    if (size < want)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: truncated: %zu bytes, a state of %d tokens takes %zu",
                        name, size, pos, want);
    if (size > want)
        return g3_error(GEMMA3_ERR_FORMAT, "%s: %zu bytes, but a state of %d tokens takes %zu (extra bytes at the end)",
                        name, size, pos, want);
    const unsigned char *payload = d + G3_STATE_HEADER_BYTES;
    if (rd64(d + want - 8) != g3_hash64(payload, want - 8 - G3_STATE_HEADER_BYTES, 0))
        return g3_error(GEMMA3_ERR_FORMAT, "%s: payload checksum mismatch: the file is corrupted", name);
    for (int i = 0; i < pos; i++) {
        int32_t t = (int32_t)rd32(payload + 4 * (size_t)i);
        if (t < 0 || t >= v.cfg->vocab_size)
            return g3_error(GEMMA3_ERR_FORMAT, "%s: token %d at index %d is out of range [0, %d)", name,
                            t, i, v.cfg->vocab_size);
    }

    /* Valid: from here on nothing can fail. */
    const char *p = (const char *)payload;
    memcpy(v.tokens, p, (size_t)pos * sizeof(int32_t));
    p += (size_t)pos * sizeof(int32_t);
    memcpy(v.logits, p, (size_t)v.cfg->vocab_size * sizeof(float));
    p += (size_t)v.cfg->vocab_size * sizeof(float);
    int ring_first = 0;
    for (int l = 0; l < v.cfg->n_layers; l++) {
        /* the last `need` of the m rows: all of them unless this ring is smaller; never fewer
         * than the min(pos, W) the next query reads (pos <= n_ctx, W <= n_slots or n_ctx) */
        const g3_kv_view *kv = &v.kv[l];
        int m = rows_kept(v.cfg, l, pos, ring_rows_in);
        int need = m < kv->n_slots ? m : kv->n_slots;
        size_t skip = (size_t)(m - need) * v.row_bytes;
        get_ring_rows(kv->k, kv->n_slots, v.row_bytes, pos - need, need, p + skip);
        p += (size_t)m * v.row_bytes;
        get_ring_rows(kv->v, kv->n_slots, v.row_bytes, pos - need, need, p + skip);
        p += (size_t)m * v.row_bytes;
        if (v.cfg->layer_types[l] == G3_LAYER_SLIDING && pos - need > ring_first) ring_first = pos - need;
    }
    g3_session_set_pos(s, pos, ring_first);
    return GEMMA3_OK;
}

int gemma3_session_load_buffer(gemma3_session *s, const void *buf, size_t size) {
    if (!s || (!buf && size)) return g3_error(GEMMA3_ERR_ARG, "load state: no session or buffer");
    return load_image(s, buf, size, "state buffer");
}

int gemma3_session_load(gemma3_session *s, const char *path) {
    if (!s || !path) return g3_error(GEMMA3_ERR_ARG, "load state: no session or path");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused below, not waited on */
    if (fd < 0) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return g3_error(GEMMA3_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return g3_error(GEMMA3_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {
        close(fd);
        return load_image(s, (const unsigned char *)"", 0, path);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED) return g3_error(GEMMA3_ERR_IO, "%s: cannot map: %s", path, strerror(err));
    madvise(map, size, MADV_SEQUENTIAL);
    int rc = load_image(s, map, size, path);
    munmap(map, size);
    return rc;
}
