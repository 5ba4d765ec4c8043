/* cli/chat.c - `gemma3 chat`: an interactive conversation in the Gemma 3 chat format.
 *
 * The KV cache is kept between turns, so each turn prefills only its new tokens:
 *   first turn:  <bos><start_of_turn>user\n{system}\n\n{text}<end_of_turn>\n<start_of_turn>model\n
 *   later turns: <end_of_turn>\n<start_of_turn>user\n{text}<end_of_turn>\n<start_of_turn>model\n
 * (the reply's stop token is never fed to the model, so every later turn closes the previous
 * reply itself). Fed token for token, this is exactly the sequence one long prompt holding the
 * whole conversation would give, so a seeded chat reproduces a seeded one-shot run.
 *
 * When a turn does not fit, the oldest turns can be dropped (--context-shift does it without
 * asking): the remaining conversation is re-rendered and prefilled from an empty cache. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <editline/readline.h>

#include "reply.h"
#include "util.h"

static const char commands_help[] =
    "/help          this text\n"
    "/reset         forget the conversation (the system prompt stays)\n"
    "/system TEXT   set the system prompt and start a new conversation\n"
    "/stats         tokens in the context, speeds\n"
    "/save FILE     write the transcript (JSON: every turn's text and token ids)\n"
    "/quit          exit (as does Ctrl-D)\n";

typedef struct {
    int is_model;
    char *text;
    int32_t *ids; /* exactly what was fed (user turns) or generated (model turns) */
    int n_ids;
} turn;

typedef struct {
    gen_state g;
    gen_opts opts;
    char *system_prompt;   /* owned */
    turn *turns;           /* the whole transcript */
    int n_turns, cap_turns;
    int first_live;        /* turns before this are no longer in the cache */
    int context_shift;
    int interactive;       /* stdin is a terminal */
    int32_t *reply_ids;    /* scratch, n_ctx + 1 */
    double last_reply_tps;
} chat;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static void turn_free(turn *t) {
    free(t->text);
    free(t->ids);
}

static int add_turn(chat *c, int is_model, const char *text, const int32_t *ids, int n_ids) {
    if (c->n_turns == c->cap_turns) {
        int cap = c->cap_turns ? c->cap_turns * 2 : 16;
        turn *grown = realloc(c->turns, (size_t)cap * sizeof *grown);
        if (!grown) return g3_error(GEMMA3_ERR_NOMEM, "out of memory");
        c->turns = grown;
        c->cap_turns = cap;
    }
    turn *t = &c->turns[c->n_turns];
    t->is_model = is_model;
    t->text = strdup(text);
    t->ids = malloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *t->ids);
    t->n_ids = n_ids;
    if (!t->text || !t->ids) {
        turn_free(t);
        return g3_error(GEMMA3_ERR_NOMEM, "out of memory");
    }
    memcpy(t->ids, ids, (size_t)n_ids * sizeof *ids);
    c->n_turns++;
    return GEMMA3_OK;
}

static void reset_conversation(chat *c) {
    for (int i = 0; i < c->n_turns; i++) turn_free(&c->turns[i]);
    c->n_turns = 0;
    c->first_live = 0;
    gemma3_session_reset(c->g.session);
    gemma3_sampler_reset(c->g.sampler);
}

/* Ids of a new user turn continuing the cached conversation. */
static int encode_next_turn(chat *c, const char *text, int32_t **ids, int *n_ids) {
    int first = gemma3_session_pos(c->g.session) == 0;
    int32_t *body = NULL;
    int n_body = 0;
    int rc = gen_encode_chat(&c->g, first ? c->system_prompt : NULL, text, first, &body, &n_body);
    if (rc != GEMMA3_OK) return rc;
    if (first) {
        *ids = body;
        *n_ids = n_body;
        return GEMMA3_OK;
    }
    /* close the previous reply: <end_of_turn>\n */
    int32_t newline[8];
    int n_nl = gemma3_tokenizer_encode(c->g.tok, "\n", 1, 0, newline, 8);
    if (n_nl < 0 || n_nl > 8) {
        free(body);
        return n_nl < 0 ? n_nl : g3_error(GEMMA3_ERR_FORMAT, "tokenizer: newline encodes to %d ids", n_nl);
    }
    *n_ids = 1 + n_nl + n_body;
    *ids = malloc((size_t)*n_ids * sizeof **ids);
    if (!*ids) {
        free(body);
        return g3_error(GEMMA3_ERR_NOMEM, "out of memory");
    }
    (*ids)[0] = gemma3_tokenizer_special(c->g.tok, GEMMA3_SPECIAL_END_OF_TURN);
    memcpy(*ids + 1, newline, (size_t)n_nl * sizeof *newline);
    memcpy(*ids + 1 + n_nl, body, (size_t)n_body * sizeof *body);
    free(body);
    return GEMMA3_OK;
}

/* Re-renders turns [first_live, n_turns) plus the new user text as one fresh prompt. */
static int encode_live_conversation(chat *c, const char *text, int32_t **ids, int *n_ids) {
    int n_msgs = 0;
    gemma3_chat_msg *msgs = malloc((size_t)(c->n_turns - c->first_live + 2) * sizeof *msgs);
    if (!msgs) return g3_error(GEMMA3_ERR_NOMEM, "out of memory");
    if (c->system_prompt) msgs[n_msgs++] = (gemma3_chat_msg){"system", c->system_prompt};
    for (int i = c->first_live; i < c->n_turns; i++)
        msgs[n_msgs++] = (gemma3_chat_msg){c->turns[i].is_model ? "model" : "user", c->turns[i].text};
    msgs[n_msgs++] = (gemma3_chat_msg){"user", text};
    int need = gemma3_chat_encode(c->g.tok, msgs, n_msgs, 1, 1, NULL, 0);
    int rc = need;
    if (need >= 0) {
        *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof **ids);
        rc = *ids ? gemma3_chat_encode(c->g.tok, msgs, n_msgs, 1, 1, *ids, need)
                  : g3_error(GEMMA3_ERR_NOMEM, "out of memory");
        *n_ids = rc;
    }
    free(msgs);
    return rc < 0 ? rc : GEMMA3_OK;
}

static int ask_yes_no(chat *c, const char *question) {
    if (!c->interactive) return 0;
    char *answer = readline(question);
    int yes = answer && (answer[0] == 'y' || answer[0] == 'Y');
    free(answer);
    return yes;
}

/* Room a reply needs after its prompt: -n if set, else a quarter of the context. */
static int reply_reserve(const chat *c) {
    int n_ctx = gemma3_session_n_ctx(c->g.session);
    int want = c->opts.n_predict > 0 ? c->opts.n_predict : n_ctx / 4;
    return want < n_ctx / 2 ? want : n_ctx / 2;
}

/* Makes room for a turn of user text: drops the oldest turns (asking unless --context-shift)
 * and re-prefills the rest from an empty cache. Returns 1 when *ids is now the full
 * conversation to feed after a reset, 0 to go on with the incremental ids, -1 to skip the turn. */
static int make_room(chat *c, const char *text, int32_t **ids, int *n_ids) {
    int n_ctx = gemma3_session_n_ctx(c->g.session);
    int pos = gemma3_session_pos(c->g.session);
    if (pos + *n_ids + reply_reserve(c) <= n_ctx) return 0;
    if (!c->context_shift &&
        !ask_yes_no(c, "context full: drop the oldest turns to make room? [y/N] ")) {
        fprintf(stderr, "gemma3: context full (%d of %d tokens): use /reset, or --context-shift to "
                        "drop the oldest turns automatically\n", pos, n_ctx);
        return -1;
    }
    for (;;) {
        int32_t *all = NULL;
        int n_all = 0;
        if (encode_live_conversation(c, text, &all, &n_all) != GEMMA3_OK) return -1;
        /* Free half the context at once (as llama.cpp's context shift does), so the next
         * turns do not each pay for a re-prefill. */
        if (n_all + reply_reserve(c) <= n_ctx / 2 || c->first_live >= c->n_turns) {
            if (n_all + 1 > n_ctx) {
                free(all);
                fprintf(stderr, "gemma3: this message alone (%d tokens) does not fit the context (%d)\n",
                        n_all, n_ctx);
                return -1;
            }
            free(*ids);
            *ids = all;
            *n_ids = n_all;
            gemma3_session_reset(c->g.session);
            gemma3_sampler_reset(c->g.sampler);
            return 1;
        }
        free(all);
        c->first_live += 2; /* a user turn and its reply */
        if (c->first_live > c->n_turns) c->first_live = c->n_turns;
    }
}

static int run_turn(chat *c, const char *text) {
    int32_t *ids = NULL;
    int n_ids = 0;
    if (encode_next_turn(c, text, &ids, &n_ids) != GEMMA3_OK) {
        fprintf(stderr, "gemma3: %s\n", gemma3_last_error());
        return 0;
    }
    int rebuilt = make_room(c, text, &ids, &n_ids);
    if (rebuilt < 0) {
        free(ids);
        return 0;
    }
    if (rebuilt) fprintf(stderr, "[dropped the oldest turns; %d turns kept]\n", c->n_turns - c->first_live);

    int n_ctx = gemma3_session_n_ctx(c->g.session);
    int n_gen = 0;
    gen_stop stop;
    interrupted = 0;
    double t0 = g3_now();
    int rc = gen_reply(&c->g, ids, n_ids, c->opts.n_predict, stdout, &interrupted, c->reply_ids,
                       n_ctx + 1, &n_gen, &stop);
    double dt = g3_now() - t0;
    fputc('\n', stdout);
    fflush(stdout);
    if (rc != GEMMA3_OK) {
        free(ids);
        fprintf(stderr, "gemma3: %s\n", gemma3_last_error());
        return 0;
    }
    c->last_reply_tps = dt > 0 ? n_gen / dt : 0;
    if (stop == GEN_STOP_INTERRUPTED) fprintf(stderr, "[interrupted]\n");
    if (stop == GEN_STOP_CONTEXT) fprintf(stderr, "[context full]\n");
    rc = add_turn(c, 0, text, ids, n_ids);
    free(ids);
    if (rc == GEMMA3_OK) {
        int need = gemma3_tokenizer_decode(c->g.tok, c->reply_ids, n_gen, NULL, 0);
        char *reply = need >= 0 ? malloc((size_t)need + 1) : NULL;
        if (reply) gemma3_tokenizer_decode(c->g.tok, c->reply_ids, n_gen, reply, (size_t)need + 1);
        rc = reply ? add_turn(c, 1, reply, c->reply_ids, n_gen) : GEMMA3_ERR_NOMEM;
        free(reply);
    }
    if (rc != GEMMA3_OK) {
        fprintf(stderr, "gemma3: out of memory\n");
        return -1;
    }
    return 0;
}

static cJSON *ids_json(const int32_t *ids, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

static void save_transcript(const chat *c, const char *path) {
    cJSON *root = cJSON_CreateObject();
    if (c->system_prompt) cJSON_AddStringToObject(root, "system", c->system_prompt);
    cJSON_AddNumberToObject(root, "seed", gemma3_sampler_seed(c->g.sampler));
    cJSON *turns = cJSON_AddArrayToObject(root, "turns");
    for (int i = 0; i < c->n_turns; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "role", c->turns[i].is_model ? "model" : "user");
        cJSON_AddStringToObject(t, "text", c->turns[i].text);
        cJSON_AddItemToObject(t, "ids", ids_json(c->turns[i].ids, c->turns[i].n_ids));
        cJSON_AddItemToArray(turns, t);
    }
    char *s = cJSON_Print(root);
    FILE *f = fopen(path, "w");
    if (!f || !s || fputs(s, f) < 0 || fputc('\n', f) < 0)
        fprintf(stderr, "gemma3: /save: cannot write %s: %s\n", path, strerror(errno));
    else
        fprintf(stderr, "[saved %d turns to %s]\n", c->n_turns, path);
    if (f) fclose(f);
    free(s);
    cJSON_Delete(root);
}

static void print_stats(const chat *c) {
    const gen_state *g = &c->g;
    fprintf(stderr, "context: %d of %d tokens | turns: %d (%d in context) | last reply: %.2f tok/s\n",
            gemma3_session_pos(g->session), gemma3_session_n_ctx(g->session), c->n_turns,
            c->n_turns - c->first_live, c->last_reply_tps);
    gen_print_summary(g, stderr);
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) fprintf(stderr, "peak RSS: %ld KiB\n", ru.ru_maxrss);
}

/* Handles a line starting with '/'. Returns 1 to quit. */
static int run_command(chat *c, const char *line) {
    if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) return 1;
    if (!strcmp(line, "/help")) {
        fputs(commands_help, stderr);
    } else if (!strcmp(line, "/reset")) {
        reset_conversation(c);
        fprintf(stderr, "[conversation reset]\n");
    } else if (!strncmp(line, "/system", 7) && (line[7] == ' ' || line[7] == '\0')) {
        const char *text = line + 7 + (line[7] == ' ');
        free(c->system_prompt);
        c->system_prompt = *text ? strdup(text) : NULL;
        reset_conversation(c);
        fprintf(stderr, "[system prompt %s; conversation reset]\n", c->system_prompt ? "set" : "cleared");
    } else if (!strcmp(line, "/stats")) {
        print_stats(c);
    } else if (!strncmp(line, "/save ", 6) && line[6]) {
        save_transcript(c, line + 6);
    } else {
        fprintf(stderr, "gemma3: unknown command '%s' (try /help)\n", line);
    }
    return 0;
}

/* One line of input (without the newline), malloc'd; NULL at EOF. */
static char *read_line(chat *c) {
    if (c->interactive) {
        for (;;) {
            interrupted = 0;
            char *line = readline("> ");
            if (line || !interrupted) {
                if (line && *line) add_history(line);
                return line;
            }
            fputc('\n', stdout); /* Ctrl-C at the prompt: a fresh prompt, not an exit */
        }
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    return line;
}

static const cli_option chat_options[] = {
    {"--context-shift", NULL, CLI_SWITCH, offsetof(chat, context_shift), .value = 1,
     .help = "when the context is full, drop the oldest turns without asking"},
    {"-i, -cnv, --interactive, --conversation", NULL, CLI_SWITCH, CLI_NOWHERE,
     .help = "chat (what gemma3 chat does anyway; for gemma3 -i -m DIR)"},
};

static const cli_group chat_group = CLI_GROUP("chat", chat_options);

static const cli_command chat_command = {
    "usage: gemma3 chat -m DIR [options]       (also: gemma3 -i / -cnv -m DIR)\n"
    "An interactive chat. Ctrl-C stops the current reply; Ctrl-D (EOF) or /quit exits.\n"
    "Commands: /help, /reset, /system TEXT, /stats, /save FILE, /quit.\n",
    "chat: unknown flag '%s' (see gemma3 chat --help)",
    {&chat_group, &gen_group, &cli_model_group, &cli_sampling_group, &cli_grammar_group, NULL},
};

int cmd_chat(int argc, char **argv) {
    chat c;
    memset(&c, 0, sizeof c);
    gen_opts_init(&c.opts);
    void *const dst[] = {&c, &c.opts, &c.opts.mo, &c.opts.cs, &c.opts.gr};
    int status;
    if (cli_parse(&chat_command, argc, argv, dst, &status)) return status;
    if (!c.opts.mo.model_dir) return cli_usage_error("-m: a model directory is required");
    status = gen_open(&c.g, &c.opts);
    if (status) {
        gen_close(&c.g);
        cli_grammar_free(&c.opts.gr);
        return status;
    }
    c.interactive = isatty(STDIN_FILENO);
    c.reply_ids = malloc(((size_t)gemma3_session_n_ctx(c.g.session) + 1) * sizeof *c.reply_ids);
    if (c.opts.system_prompt) c.system_prompt = strdup(c.opts.system_prompt);
    if (!c.reply_ids || (c.opts.system_prompt && !c.system_prompt)) {
        status = cli_fail("out of memory");
        goto done;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a blocked read returns so we see the flag */
    if (c.interactive) {
        rl_catch_signals = 0;
        fprintf(stderr, "gemma3 chat: /help for commands, Ctrl-C stops a reply, Ctrl-D exits "
                        "(seed %u)\n", gemma3_sampler_seed(c.g.sampler));
    }

    for (;;) {
        char *line = read_line(&c);
        if (!line) break;
        int quit = 0;
        if (line[0] == '/') quit = run_command(&c, line);
        else if (line[0] != '\0') quit = run_turn(&c, line) < 0;
        free(line);
        if (quit) break;
    }
    if (c.interactive) fputc('\n', stdout);
done:
    for (int i = 0; i < c.n_turns; i++) turn_free(&c.turns[i]);
    free(c.turns);
    free(c.reply_ids);
    free(c.system_prompt);
    gen_close(&c.g);
    cli_grammar_free(&c.opts.gr);
    return status;
}
