/* chat.c - the Gemma 3 chat format: a conversation into token ids, following the checkpoint's
 * chat_template.jinja. Built on the public tokenizer API only (gemma3.h). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gemma3.h"
#include "utf8.h"
#include "util.h"

/* Python's str.isspace() set, which Jinja's `trim` filter strips. */
static int py_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Code point of the well-formed sequence at s of length n (as g3_utf8_len measured it). */
static uint32_t code_point(const unsigned char *s, size_t n) {
    if (n == 1) return s[0] < 0x80 ? s[0] : 0xFFFFFFFFu;
    uint32_t cp = s[0] & (0xFF >> (n + 1));
    for (size_t i = 1; i < n; i++) cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

static void trim(const char *s, size_t *start, size_t *end) {
    const unsigned char *u = (const unsigned char *)s;
    size_t a = 0, b = strlen(s);
    while (a < b) {
        size_t n = g3_utf8_len(u + a, b - a);
        if (!py_space(code_point(u + a, n))) break;
        a += n;
    }
    /* from the end: step back over continuation bytes to the start of the last sequence */
    while (b > a) {
        size_t k = b - 1;
        while (k > a && (u[k] & 0xC0) == 0x80 && b - k < 4) k--;
        size_t n = g3_utf8_len(u + k, b - k);
        if (k + n != b) n = 1, k = b - 1;
        if (!py_space(code_point(u + k, n))) break;
        b = k;
    }
    *start = a;
    *end = b;
}

typedef struct {
    const gemma3_tokenizer *tok;
    int32_t *ids;
    int max_ids, count;
    int flags; /* tokenizer flags of the text: 0 or GEMMA3_TOK_MARKERS_AS_TEXT */
} chat_out;

static int chat_ids(chat_out *c, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) {
        if (c->count < c->max_ids) c->ids[c->count] = ids[i];
        if (c->count == INT_MAX) return g3_error(GEMMA3_ERR_ARG, "chat encode: too many ids");
        c->count++;
    }
    return GEMMA3_OK;
}

/* Encodes text without control-token parsing, appending to c. */
static int chat_text(chat_out *c, const char *s, size_t n) {
    if (n == 0) return GEMMA3_OK;
    int room = c->count < c->max_ids ? c->max_ids - c->count : 0;
    int got = gemma3_tokenizer_encode(c->tok, s, n, c->flags, room ? c->ids + c->count : NULL, room);
    if (got < 0) return got;
    if (got > INT_MAX - c->count) return g3_error(GEMMA3_ERR_ARG, "chat encode: too many ids");
    c->count += got;
    return GEMMA3_OK;
}

/* Follows chat_template.jinja: roles after an optional leading system message alternate
 * user/model starting with user ("assistant" is rendered "model"), every message content is
 * trimmed (Jinja's `trim`: Python whitespace), and the system text plus "\n\n" opens the first
 * user turn. The template does not trim the system text, so neither do we (a system message
 * alone renders nothing). The turn markers are the vocabulary's own
 * <start_of_turn>/<end_of_turn> ids; the text between them is encoded without control-token
 * parsing, so a message cannot smuggle in a <bos> or <eos>. Turn markers typed in a message do
 * match (they are user-defined pieces: SentencePiece and Hugging Face encode them as the marker
 * ids too) unless flags has GEMMA3_TOK_MARKERS_AS_TEXT, for text that must not end its turn. */
int gemma3_chat_encode(const gemma3_tokenizer *tok, const gemma3_chat_msg *msgs, int n_msgs,
                       int add_bos, int add_generation_prompt, int32_t *ids, int max_ids) {
    return gemma3_chat_encode_ex(tok, msgs, n_msgs, add_bos, add_generation_prompt, 0, ids, max_ids);
}

int gemma3_chat_encode_ex(const gemma3_tokenizer *tok, const gemma3_chat_msg *msgs, int n_msgs,
                          int add_bos, int add_generation_prompt, int flags, int32_t *ids,
                          int max_ids) {
    if (!tok || n_msgs < 0 || (!msgs && n_msgs) || max_ids < 0 || (!ids && max_ids) ||
        (flags & ~GEMMA3_TOK_MARKERS_AS_TEXT))
        return g3_error(GEMMA3_ERR_ARG, "chat encode: bad arguments");
    int32_t bos = gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_BOS);
    int32_t sot = gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_START_OF_TURN);
    int32_t eot = gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_END_OF_TURN);
    if (sot < 0 || eot < 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED,
                        "chat encode: the vocabulary has no <start_of_turn>/<end_of_turn> pieces");
    if (add_bos && bos < 0)
        return g3_error(GEMMA3_ERR_UNSUPPORTED, "chat encode: the model has no BOS piece");
    for (int i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return g3_error(GEMMA3_ERR_ARG, "chat encode: message %d has no role or content", i);

    int first = 0;
    const char *system = NULL;
    if (n_msgs > 0 && strcmp(msgs[0].role, "system") == 0) {
        system = msgs[0].content;
        first = 1;
    }
    for (int i = first; i < n_msgs; i++) {
        const char *r = msgs[i].role;
        int is_user = strcmp(r, "user") == 0;
        int is_model = strcmp(r, "model") == 0 || strcmp(r, "assistant") == 0;
        if (!is_user && !is_model)
            return g3_error(GEMMA3_ERR_ARG, "chat encode: message %d has role '%.32s' (expected "
                            "user, model or assistant; system only first)", i, r);
        if (is_user != ((i - first) % 2 == 0))
            return g3_error(GEMMA3_ERR_ARG,
                            "chat encode: message %d is '%.32s': roles must alternate user/model "
                            "starting with user", i, r);
    }

    /* the text of one turn: role, newline, [system + blank line], trimmed content */
    size_t cap = 16 + (system ? strlen(system) + 2 : 0);
    size_t a, b;
    size_t longest = 0;
    for (int i = first; i < n_msgs; i++) {
        size_t n = strlen(msgs[i].content);
        if (n > longest) longest = n;
    }
    char *turn = malloc(cap + longest);
    if (!turn) return g3_error(GEMMA3_ERR_NOMEM, "chat encode: out of memory");
    chat_out c = {tok, ids, max_ids, 0, flags};
    int rc = add_bos ? chat_ids(&c, &bos, 1) : GEMMA3_OK;
    for (int i = first; i < n_msgs && !rc; i++) {
        int is_user = strcmp(msgs[i].role, "user") == 0;
        size_t n = 0;
        const char *role = is_user ? "user\n" : "model\n";
        memcpy(turn, role, strlen(role));
        n += strlen(role);
        if (system && i == first) {
            memcpy(turn + n, system, strlen(system));
            n += strlen(system);
            memcpy(turn + n, "\n\n", 2);
            n += 2;
        }
        trim(msgs[i].content, &a, &b);
        memcpy(turn + n, msgs[i].content + a, b - a);
        n += b - a;
        rc = chat_ids(&c, &sot, 1);
        if (!rc) rc = chat_text(&c, turn, n);
        if (!rc) rc = chat_ids(&c, &eot, 1);
        if (!rc) rc = chat_text(&c, "\n", 1);
    }
    if (!rc && add_generation_prompt) {
        rc = chat_ids(&c, &sot, 1);
        if (!rc) rc = chat_text(&c, "model\n", 6);
    }
    free(turn);
    return rc ? rc : c.count;
}
