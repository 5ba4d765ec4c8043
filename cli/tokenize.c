/* cli/tokenize.c - gemma3 tokenize: text to token ids or pieces, like llama.cpp's llama-tokenize,
 * plus a JSON-lines batch mode for checking a tokenizer against reference ids. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "gemma3.h"
#include "jsonl.h"

typedef struct {
    const char *model, *prompt, *file;
    int parse_special, bos, pieces, jsonl;
} tokenize_args;

#define A(field) offsetof(tokenize_args, field)
static const cli_option tokenize_options[] = {
    {"-m, --model", "PATH", CLI_TEXT, A(model),
     .help = "checkpoint directory (uses PATH/tokenizer.model) or a .model file"},
    {"-p, --prompt", "TEXT", CLI_TEXT, A(prompt), .help = "text to tokenize"},
    {"-f, --file", "FILE", CLI_TEXT, A(file),
     .help = "read the text (or, with --jsonl, the JSON lines) from FILE"},
    {"--parse-special", NULL, CLI_SWITCH, A(parse_special), .value = 1,
     .help = "text of control pieces (<bos>, <eos>, <pad>, <unk>) becomes their id"},
    {"--bos", NULL, CLI_SWITCH, A(bos), .value = 1, .help = "prepend <bos>"},
    {"--ids", NULL, CLI_SWITCH, A(pieces), .value = 0, .help = "print the ids as [2, 105, ...] (default)"},
    {"--pieces", NULL, CLI_SWITCH, A(pieces), .value = 1,
     .help = "print one 'id -> 'piece'' line per token (U+2581 for a space, <0xNN> for a byte)"},
    {"--jsonl", NULL, CLI_SWITCH, A(jsonl), .value = 1,
     .help = "read lines of {\"text\": ...}, write lines of {\"ids\": [...]}"},
};
#undef A

static const cli_group tokenize_group = CLI_GROUP("tokenize", tokenize_options);

static const cli_command tokenize_command = {
    "usage: gemma3 tokenize -m MODEL_DIR_OR_FILE [-p TEXT | -f FILE] [options]\n"
    "\n"
    "Tokenizes TEXT, the contents of FILE, or standard input (bytes taken exactly as given,\n"
    "a trailing newline included).\n",
    "tokenize: unknown option '%s' (try gemma3 tokenize --help)",
    {&tokenize_group, NULL},
};

static int check_args(const tokenize_args *a) {
    if (!a->model) return cli_usage_error("tokenize: -m MODEL_DIR_OR_FILE is required");
    if (a->prompt && a->file) return cli_usage_error("tokenize: -p and -f are exclusive");
    if (a->jsonl && a->prompt) return cli_usage_error("tokenize: --jsonl reads -f FILE or stdin, not -p");
    if (a->jsonl && a->pieces) return cli_usage_error("tokenize: --jsonl writes ids, not --pieces");
    return 0;
}

static int tok_flags(const tokenize_args *a) {
    return (a->parse_special ? GEMMA3_TOK_PARSE_SPECIAL : 0) | (a->bos ? GEMMA3_TOK_BOS : 0);
}

static int load_tokenizer(const char *model, gemma3_tokenizer **tok) {
    char path[4096];
    struct stat st;
    const char *file = model;
    if (stat(model, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (snprintf(path, sizeof path, "%s/tokenizer.model", model) >= (int)sizeof path)
            return cli_fail("%s: path too long", model);
        file = path;
    }
    int rc = gemma3_model_is_gguf(model) ? gemma3_gguf_tokenizer(model, tok) : gemma3_tokenizer_load(file, tok);
    if (rc != GEMMA3_OK) return cli_fail("%s", gemma3_last_error());
    return 0;
}

static int read_stdin(char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, stdin);
        if (n < cap) break;
        char *bigger = realloc(buf, 2 * cap + 1);
        if (!bigger) free(buf);
        buf = bigger;
        cap *= 2;
    }
    if (!buf) return cli_fail("<stdin>: out of memory");
    if (ferror(stdin)) {
        free(buf);
        return cli_fail("<stdin>: read error: %s", strerror(errno));
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

static int encode(const gemma3_tokenizer *tok, const char *text, size_t len, int flags,
                  int32_t **ids, int *n) {
    int need = gemma3_tokenizer_encode(tok, text, len, flags, NULL, 0);
    if (need < 0) return cli_fail("%s", gemma3_last_error());
    *ids = malloc((size_t)need * sizeof **ids + 1);
    if (!*ids) return cli_fail("tokenize: out of memory for %d ids", need);
    *n = gemma3_tokenizer_encode(tok, text, len, flags, *ids, need);
    return 0;
}

static void print_ids(const int32_t *ids, int n) {
    putchar('[');
    for (int i = 0; i < n; i++) printf(i ? ", %d" : "%d", (int)ids[i]);
    putchar(']');
}

static void print_piece(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n') fputs("\\n", stdout);
        else if (*p == '\t') fputs("\\t", stdout);
        else if (*p == '\r') fputs("\\r", stdout);
        else if (*p == '\\') fputs("\\\\", stdout);
        else if (*p == '\'') fputs("\\'", stdout);
        else if (*p < 0x20 || *p == 0x7f) printf("\\x%02x", *p);
        else putchar(*p);
    }
}

static int tokenize_text(const gemma3_tokenizer *tok, const tokenize_args *a, const char *text,
                         size_t len) {
    int32_t *ids;
    int n;
    int rc = encode(tok, text, len, tok_flags(a), &ids, &n);
    if (rc) return rc;
    if (a->pieces) {
        for (int i = 0; i < n; i++) {
            printf("%6d -> '", (int)ids[i]);
            print_piece(gemma3_tokenizer_piece(tok, ids[i]));
            puts("'");
        }
    } else {
        print_ids(ids, n);
        putchar('\n');
    }
    free(ids);
    return 0;
}

static int tokenize_jsonl(const gemma3_tokenizer *tok, const tokenize_args *a, const char *data,
                          size_t size) {
    const char *name = a->file ? a->file : "<stdin>";
    int line_no = 0;
    for (const char *line = data; line < data + size;) {
        const char *nl = memchr(line, '\n', (size_t)(data + size - line));
        size_t ll = nl ? (size_t)(nl - line) : (size_t)(data + size - line);
        line_no++;
        const char *p = jsonl_ws(line, line + ll);
        if (p < line + ll) {
            char *text;
            size_t len;
            int rc = jsonl_get_string(line, ll, "text", &text, &len);
            if (rc)
                return cli_fail("%s:%d: expected a JSON object with a string member \"text\"", name,
                                line_no);
            int32_t *ids;
            int n;
            rc = encode(tok, text, len, tok_flags(a), &ids, &n);
            free(text);
            if (rc) return rc;
            fputs("{\"ids\": ", stdout);
            print_ids(ids, n);
            fputs("}\n", stdout);
            free(ids);
        }
        line += ll + 1;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_args a = {0};
    void *const dst[] = {&a};
    int rc;
    if (cli_parse(&tokenize_command, argc, argv, dst, &rc)) return rc;
    if ((rc = check_args(&a))) return rc;
    gemma3_tokenizer *tok;
    rc = load_tokenizer(a.model, &tok);
    if (rc) return rc;
    char *data = NULL;
    size_t len = 0;
    if (a.prompt) {
        len = strlen(a.prompt);
    } else if (a.file) {
        if (gemma3_read_file(a.file, &data, &len) != GEMMA3_OK) rc = cli_fail("%s", gemma3_last_error());
    } else {
        rc = read_stdin(&data, &len);
    }
    if (!rc) {
        const char *text = a.prompt ? a.prompt : data;
        rc = a.jsonl ? tokenize_jsonl(tok, &a, text, len) : tokenize_text(tok, &a, text, len);
    }
    if (!rc && (fflush(stdout) != 0 || ferror(stdout)))
        rc = cli_fail("tokenize: error writing the output: %s", strerror(errno));
    free(data);
    gemma3_tokenizer_free(tok);
    return rc;
}
