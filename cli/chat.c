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
#include <sys/stat.h>
#include <unistd.h>
#include <editline/readline.h>

#include "reply.h"

static const char commands_help[] =
    "/help          this text\n"
    "/reset         forget the conversation (the system prompt stays)\n"
    "/system TEXT   set the system prompt and start a new conversation\n"
    "/stats         tokens in the context, speeds\n"
    "/save FILE     write the transcript (JSON: every turn's text and token ids) and the\n"
    "               session's state to FILE.state\n"
    "/load FILE     continue a saved conversation (transcript and state), with no prefill\n"
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
    const char *resume;    /* --resume FILE */
    const char *first_message;        /* -p: sent before any input is read */
    const char *in_prefix, *in_suffix; /* around every message's text */
    int single_turn;       /* -st: exit after answering -p */
    int interactive;       /* stdin is a terminal */
    int commands;          /* --commands: slash commands even when stdin is not a terminal */
    int n_messages, n_unanswered; /* messages read; those dropped without a reply */
    int n_failed_commands;        /* a /save or /load that failed (a script must learn of it) */
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
        if (!grown) return cli_error(GEMMA3_ERR_NOMEM, "out of memory");
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
        return cli_error(GEMMA3_ERR_NOMEM, "out of memory");
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
static int encode_live_conversation(chat *c, const char *text, int32_t **ids, int *n_ids);

static int encode_next_turn(chat *c, const char *text, int32_t **ids, int *n_ids) {
    int first = gemma3_session_pos(c->g.session) == 0;
    if (first && c->first_live < c->n_turns) { /* turns the cache lost (an interrupted prefill) */
        gemma3_sampler_reset(c->g.sampler);
        return encode_live_conversation(c, text, ids, n_ids);
    }
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
        return n_nl < 0 ? cli_lib(n_nl) : cli_error(GEMMA3_ERR_FORMAT, "tokenizer: newline encodes to %d ids", n_nl);
    }
    *n_ids = 1 + n_nl + n_body;
    *ids = malloc((size_t)*n_ids * sizeof **ids);
    if (!*ids) {
        free(body);
        return cli_error(GEMMA3_ERR_NOMEM, "out of memory");
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
    if (!msgs) return cli_error(GEMMA3_ERR_NOMEM, "out of memory");
    if (c->system_prompt) msgs[n_msgs++] = (gemma3_chat_msg){"system", c->system_prompt};
    for (int i = c->first_live; i < c->n_turns; i++)
        msgs[n_msgs++] = (gemma3_chat_msg){c->turns[i].is_model ? "model" : "user", c->turns[i].text};
    msgs[n_msgs++] = (gemma3_chat_msg){"user", text};
    int flags = c->g.chat_flags, bos = gemma3_tokenizer_add_bos(c->g.tok);
    int need = cli_lib(gemma3_chat_encode_ex(c->g.tok, msgs, n_msgs, bos, 1, flags, NULL, 0));
    int rc = need;
    if (need >= 0) {
        *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof **ids);
        rc = *ids ? cli_lib(gemma3_chat_encode_ex(c->g.tok, msgs, n_msgs, bos, 1, flags, *ids, need))
                  : cli_error(GEMMA3_ERR_NOMEM, "out of memory");
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
    /* The message as the first turn of an empty context: if even that leaves no room for one
     * token of reply, dropping turns cannot help, and it is the message that is too long. */
    int32_t *alone = NULL;
    int n_alone = 0;
    if (gen_encode_chat(&c->g, c->system_prompt, text, 1, &alone, &n_alone) != GEMMA3_OK) {
        fprintf(stderr, "gemma3: %s\n", cli_last_error());
        return -1;
    }
    free(alone);
    if (n_alone + 1 > n_ctx) {
        fprintf(stderr, "gemma3: the message is too long (%d tokens, context %d)\n", n_alone, n_ctx);
        return -1;
    }
    if (pos == 0) return 0; /* nothing to drop: the reply gets what is left */
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
                fprintf(stderr, "gemma3: the message is too long (%d tokens, context %d)\n",
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

/* Answers one message. Returns 0 when it was answered, 1 when it was dropped (the reason
 * printed), -1 when the chat cannot go on (out of memory, or non-finite logits: the model is
 * broken, and every later turn would be too). */
static int run_turn(chat *c, const char *text) {
    int32_t *ids = NULL;
    int n_ids = 0;
    if (encode_next_turn(c, text, &ids, &n_ids) != GEMMA3_OK) {
        fprintf(stderr, "gemma3: %s\n", cli_last_error());
        return 1;
    }
    int was_live = c->first_live, n_new = n_ids, pos = gemma3_session_pos(c->g.session);
    int rebuilt = make_room(c, text, &ids, &n_ids);
    if (rebuilt < 0) {
        free(ids);
        return 1;
    }
    if (rebuilt) /* which turns went, and why */
        fprintf(stderr, "[context shift: %d tokens in the context + %d of this message + %d kept for "
                        "the reply > -c %d: dropped the oldest turns, %d to %d of %d; %d turns kept]\n",
                pos, n_new, reply_reserve(c), gemma3_session_n_ctx(c->g.session),
                was_live + (c->first_live > was_live), c->first_live, c->n_turns,
                c->n_turns - c->first_live);

    int n_ctx = gemma3_session_n_ctx(c->g.session);
    int n_gen = 0, pos_before = gemma3_session_pos(c->g.session);
    gen_stop stop;
    interrupted = 0;
    double t0 = cli_now();
    int rc = gen_reply(&c->g, ids, n_ids, c->opts.n_predict, stdout, &interrupted, c->reply_ids,
                       n_ctx + 1, &n_gen, &stop);
    double dt = cli_now() - t0;
    if (rc == GEMMA3_ERR_ABORTED) { /* Ctrl-C in the prefill: the message is dropped */
        if (gemma3_session_truncate(c->g.session, pos_before) != GEMMA3_OK)
            gemma3_session_reset(c->g.session); /* the next turn re-renders the conversation */
        free(ids);
        fprintf(stderr, "[interrupted before the reply: the message is dropped]\n");
        return 1;
    }
    fputc('\n', stdout);
    fflush(stdout);
    if (rc != GEMMA3_OK) {
        free(ids);
        fprintf(stderr, "gemma3: %s\n", cli_last_error());
        return rc == GEMMA3_ERR_NUMERIC ? -1 : 1;
    }
    c->last_reply_tps = dt > 0 ? n_gen / dt : 0;
    if (stop == GEN_STOP_INTERRUPTED) fprintf(stderr, "[interrupted]\n");
    if (stop == GEN_STOP_CONTEXT) fprintf(stderr, "[context full]\n");
    rc = add_turn(c, 0, text, ids, n_ids);
    free(ids);
    if (rc == GEMMA3_OK) rc = add_turn(c, 1, c->g.text, c->reply_ids, n_gen);
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

/* Writes text and a newline to path through gemma3_outfile (a temporary renamed over a regular
 * file: an interrupted write never leaves a half-written transcript in place of the previous). */
static int write_atomically(const char *path, const char *text) {
    gemma3_outfile *o;
    int rc = cli_lib(gemma3_outfile_open(path, &o));
    if (rc != GEMMA3_OK) return rc;
    fputs(text, gemma3_outfile_stream(o));
    fputc('\n', gemma3_outfile_stream(o));
    return cli_lib(gemma3_outfile_commit(o));
}

/* The names of a saved pair: the transcript (resolved through symbolic links, so that the pair
 * lives beside the file a link names), FILE.state beside it, and the two being written, FILE.new
 * and FILE.state.new. */
typedef struct pair_paths {
    char transcript[4096], state[4096], transcript_new[4096], state_new[4096];
} pair_paths;

static int pair_names(const char *path, pair_paths *p) {
    char real[4096];
    const char *base = realpath(path, real) ? real : path;
    if (snprintf(p->transcript, sizeof p->transcript, "%s", base) >= (int)sizeof p->transcript ||
        snprintf(p->state, sizeof p->state, "%s.state", base) >= (int)sizeof p->state ||
        snprintf(p->transcript_new, sizeof p->transcript_new, "%s.new", base) >= (int)sizeof p->transcript_new ||
        snprintf(p->state_new, sizeof p->state_new, "%s.state.new", base) >= (int)sizeof p->state_new)
        return cli_error(GEMMA3_ERR_ARG, "%s: path too long", path);
    return GEMMA3_OK;
}

/* A save is committed by two renames, the state's then the transcript's, each of a complete
 * file: a save that stopped before the first leaves FILE.state.new (the old pair stands: the new
 * files are removed); one that stopped between them leaves only FILE.new (the new state is in
 * place: its transcript is renamed too). So a crash leaves the old pair or the new one. */
static void finish_interrupted_save(const pair_paths *p) {
    if (access(p->state_new, F_OK) == 0) {
        unlink(p->state_new);
        unlink(p->transcript_new);
    } else if (access(p->transcript_new, F_OK) == 0) {
        rename(p->transcript_new, p->transcript);
    }
}

static int commit_pair(const pair_paths *p) {
    if (rename(p->state_new, p->state) != 0)
        return cli_error(GEMMA3_ERR_IO, "%s: cannot rename %s to it: %s", p->state, p->state_new,
                        strerror(errno));
    if (rename(p->transcript_new, p->transcript) != 0)
        return cli_error(GEMMA3_ERR_IO, "%s: cannot rename %s to it: %s", p->transcript,
                        p->transcript_new, strerror(errno));
    return GEMMA3_OK;
}

/* A transcript and its state are a pair of regular files (or new paths): a device or FIFO
 * cannot hold one, nor can it be renamed over. */
static int refuse_non_regular(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return cli_error(GEMMA3_ERR_IO, "%s: not a regular file: a chat is saved as a transcript "
                        "with its state beside it", path);
    return GEMMA3_OK;
}

static cJSON *transcript_json(const chat *c, const char *state_name) {
    cJSON *root = cJSON_CreateObject();
    if (c->system_prompt) cJSON_AddStringToObject(root, "system", c->system_prompt);
    cJSON_AddNumberToObject(root, "seed", gemma3_sampler_seed(c->g.sampler));
    cJSON_AddStringToObject(root, "state", state_name); /* beside the transcript */
    cJSON_AddNumberToObject(root, "in_context_from", c->first_live);
    cJSON *turns = cJSON_AddArrayToObject(root, "turns");
    for (int i = 0; i < c->n_turns; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "role", c->turns[i].is_model ? "model" : "user");
        cJSON_AddStringToObject(t, "text", c->turns[i].text);
        cJSON_AddItemToObject(t, "ids", ids_json(c->turns[i].ids, c->turns[i].n_ids));
        cJSON_AddItemToArray(turns, t);
    }
    return root;
}

/* The transcript (system prompt, seed, turns with their ids, the first turn still in the
 * context) to path, and the session's state to path.state, as a pair (finish_interrupted_save).
 * Returns GEMMA3_OK or the error (printed). */
static int save_transcript(chat *c, const char *path) {
    pair_paths p;
    int rc = refuse_non_regular(path);
    if (rc == GEMMA3_OK) rc = pair_names(path, &p);
    if (rc == GEMMA3_OK) finish_interrupted_save(&p);
    if (rc == GEMMA3_OK) rc = cli_lib(gemma3_session_save(c->g.session, p.state_new));
    char *text = NULL;
    if (rc == GEMMA3_OK) {
        const char *slash = strrchr(p.state, '/');
        cJSON *root = transcript_json(c, slash ? slash + 1 : p.state);
        text = root ? cJSON_Print(root) : NULL;
        cJSON_Delete(root);
        rc = text ? write_atomically(p.transcript_new, text) : cli_error(GEMMA3_ERR_NOMEM, "out of memory");
        if (rc != GEMMA3_OK) unlink(p.state_new);
    }
    if (rc == GEMMA3_OK) rc = commit_pair(&p);
    free(text);
    if (rc != GEMMA3_OK) {
        fprintf(stderr, "gemma3: /save: %s\n", cli_last_error());
        return rc;
    }
    fprintf(stderr, "[saved %d turns to %s, the state (%d tokens) to %s.state]\n", c->n_turns, path,
            gemma3_session_pos(c->g.session), path);
    return GEMMA3_OK;
}

/* A transcript read back by /load or --resume, before anything of the chat is replaced. */
typedef struct saved_chat {
    char *system_prompt;
    turn *turns;
    int n_turns, first_live;
    char state[4096];
} saved_chat;

static void saved_chat_free(saved_chat *sc) {
    for (int i = 0; i < sc->n_turns; i++) turn_free(&sc->turns[i]);
    free(sc->turns);
    free(sc->system_prompt);
    memset(sc, 0, sizeof *sc);
}

static int transcript_error(const char *path, const char *what) {
    return cli_error(GEMMA3_ERR_FORMAT, "%s: not a chat transcript of /save: %s", path, what);
}

/* One turn of the transcript's "turns" array. */
static int read_turn(const cJSON *t, const char *path, int vocab, turn *out) {
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(t, "role");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(t, "text");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(t, "ids");
    if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "model")))
        return transcript_error(path, "a turn's \"role\" is not \"user\" or \"model\"");
    if (!cJSON_IsString(text) || !cJSON_IsArray(ids))
        return transcript_error(path, "a turn lacks its \"text\" or \"ids\"");
    int n = cJSON_GetArraySize(ids);
    out->is_model = role->valuestring[0] == 'm';
    out->text = strdup(text->valuestring);
    out->ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *out->ids);
    out->n_ids = 0;
    if (!out->text || !out->ids) return cli_error(GEMMA3_ERR_NOMEM, "out of memory");
    const cJSON *id;
    cJSON_ArrayForEach(id, ids) {
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= vocab ||
            id->valuedouble != (int32_t)id->valuedouble)
            return transcript_error(path, "a token id is not an integer in the vocabulary");
        out->ids[out->n_ids++] = (int32_t)id->valuedouble;
    }
    return GEMMA3_OK;
}

static int read_transcript(const char *path, int vocab, saved_chat *sc) {
    memset(sc, 0, sizeof *sc);
    cJSON *root = NULL;
    int rc = refuse_non_regular(path); /* a FIFO is not waited on */
    if (rc == GEMMA3_OK) rc = cli_lib(gemma3_read_json(path, &root));
    if (rc != GEMMA3_OK) return rc;
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(root, "system");
    const cJSON *state = cJSON_GetObjectItemCaseSensitive(root, "state");
    const cJSON *live = cJSON_GetObjectItemCaseSensitive(root, "in_context_from");
    const cJSON *turns = cJSON_GetObjectItemCaseSensitive(root, "turns");
    if (!cJSON_IsArray(turns) || (sys && !cJSON_IsString(sys))) {
        rc = transcript_error(path, "no \"turns\" array");
    } else if (!cJSON_IsString(state)) {
        rc = transcript_error(path, "no \"state\" file named (written before /save saved states?)");
    } else {
        char real[4096]; /* beside the file a link names, where /save put it */
        const char *where = realpath(path, real) ? real : path;
        const char *slash = strrchr(where, '/');
        int dir_len = slash && state->valuestring[0] != '/' ? (int)(slash - where) + 1 : 0;
        if (snprintf(sc->state, sizeof sc->state, "%.*s%s", dir_len, where, state->valuestring) >=
            (int)sizeof sc->state)
            rc = cli_error(GEMMA3_ERR_ARG, "%s: state path too long", path);
    }
    int n = rc == GEMMA3_OK ? cJSON_GetArraySize(turns) : 0;
    if (rc == GEMMA3_OK) {
        sc->turns = calloc((size_t)(n > 0 ? n : 1), sizeof *sc->turns);
        if (!sc->turns) rc = cli_error(GEMMA3_ERR_NOMEM, "out of memory");
    }
    const cJSON *t;
    if (rc == GEMMA3_OK) cJSON_ArrayForEach(t, turns) {
        rc = read_turn(t, path, vocab, &sc->turns[sc->n_turns++]);
        if (rc != GEMMA3_OK) break;
    }
    if (rc == GEMMA3_OK && live) {
        if (!cJSON_IsNumber(live) || live->valuedouble < 0 || live->valuedouble > n)
            rc = transcript_error(path, "\"in_context_from\" is not a turn index");
        else
            sc->first_live = (int)live->valuedouble;
    }
    if (rc == GEMMA3_OK && sys) {
        sc->system_prompt = strdup(sys->valuestring);
        if (!sc->system_prompt) rc = cli_error(GEMMA3_ERR_NOMEM, "out of memory");
    }
    cJSON_Delete(root);
    if (rc != GEMMA3_OK) saved_chat_free(sc);
    return rc;
}

/* The state's tokens must be the transcript's: the ids of the turns from the last one that
 * opened the context (a user turn beginning with <bos>: the first, or the conversation a context
 * shift re-rendered) to the end, where the last generated token may be missing (kept but not fed
 * when the context filled). Anything else is a state saved with another transcript, or edited. */
static int check_pair(const saved_chat *sc, const int32_t *tokens, int n, int32_t bos,
                      const char *path) {
    int from = sc->first_live, at = 0;
    for (int i = sc->first_live; i < sc->n_turns; i++)
        if (!sc->turns[i].is_model && sc->turns[i].n_ids > 0 && sc->turns[i].ids[0] == bos) from = i;
    for (int i = from; i < sc->n_turns; i++)
        for (int j = 0; j < sc->turns[i].n_ids; j++, at++) {
            int last = i == sc->n_turns - 1 && j == sc->turns[i].n_ids - 1 && sc->turns[i].is_model;
            if (at == n && last) return GEMMA3_OK;
            if (at >= n || tokens[at] != sc->turns[i].ids[j])
                return cli_error(GEMMA3_ERR_FORMAT,
                                "%s: the transcript and its state %s were not saved together: turn "
                                "%d's token %d is %d, the state's is %s", path, sc->state, i + 1,
                                j, (int)sc->turns[i].ids[j], at >= n ? "past its end" : "another");
        }
    if (at != n)
        return cli_error(GEMMA3_ERR_FORMAT, "%s: the transcript and its state %s were not saved "
                        "together: the state holds %d tokens, the transcript's turns %d", path,
                        sc->state, n, at);
    return GEMMA3_OK;
}

/* Loads sc's state into the session and checks it against sc's turns; only once both worked is
 * the conversation replaced with sc's (else the session is put back as it was). The sampler's
 * history is the restored tokens, as if they had been fed. */
static int resume_chat(chat *c, saved_chat *sc, const char *path) {
    size_t n_before = gemma3_session_pos(c->g.session) ? gemma3_session_state_size(c->g.session) : 0;
    void *before = n_before ? malloc(n_before) : NULL;
    if (n_before && (!before || gemma3_session_save_buffer(c->g.session, before, n_before) != GEMMA3_OK)) {
        free(before);
        return cli_error(GEMMA3_ERR_NOMEM, "out of memory keeping the conversation's state");
    }
    int rc = cli_lib(gemma3_session_load(c->g.session, sc->state));
    if (rc == GEMMA3_OK) {
        rc = check_pair(sc, gemma3_session_tokens(c->g.session), gemma3_session_pos(c->g.session),
                        gemma3_tokenizer_special(c->g.tok, GEMMA3_SPECIAL_BOS), path);
        if (rc != GEMMA3_OK && before) gemma3_session_load_buffer(c->g.session, before, n_before);
        else if (rc != GEMMA3_OK) gemma3_session_reset(c->g.session);
    }
    free(before);
    if (rc != GEMMA3_OK) return rc;
    for (int i = 0; i < c->n_turns; i++) turn_free(&c->turns[i]);
    free(c->turns);
    free(c->system_prompt);
    c->turns = sc->turns;
    c->n_turns = c->cap_turns = sc->n_turns;
    c->first_live = sc->first_live;
    c->system_prompt = sc->system_prompt;
    memset(sc, 0, sizeof *sc);
    gemma3_sampler_reset(c->g.sampler);
    const int32_t *tokens = gemma3_session_tokens(c->g.session);
    int pos = gemma3_session_pos(c->g.session);
    for (int i = 0; i < pos; i++) gemma3_sampler_accept(c->g.sampler, tokens[i]);
    fprintf(stderr, "[loaded %d turns from %s: %d tokens in the context, nothing to prefill]\n",
            c->n_turns, path, pos);
    return GEMMA3_OK;
}

/* A save that a crash interrupted is finished or undone first (finish_interrupted_save). */
static int load_pair(chat *c, const char *path, saved_chat *sc) {
    pair_paths p;
    if (pair_names(path, &p) == GEMMA3_OK) finish_interrupted_save(&p);
    int rc = read_transcript(path, c->g.info.vocab_size, sc);
    return rc == GEMMA3_OK ? resume_chat(c, sc, path) : rc;
}

static int load_transcript(chat *c, const char *path) {
    saved_chat sc = {0};
    int rc = load_pair(c, path, &sc);
    if (rc != GEMMA3_OK) fprintf(stderr, "gemma3: /load: %s\n", cli_last_error());
    saved_chat_free(&sc);
    return rc;
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
        c->n_failed_commands += save_transcript(c, line + 6) != GEMMA3_OK;
    } else if (!strncmp(line, "/load ", 6) && line[6]) {
        c->n_failed_commands += load_transcript(c, line + 6) != GEMMA3_OK;
    } else {
        char shown[256];
        fprintf(stderr, "gemma3: unknown command '%s' (try /help)\n",
                cli_escape(line, strlen(line), shown, sizeof shown));
    }
    return 0;
}

/* One line of input (without the newline), malloc'd, its length in *len (NUL bytes counted);
 * NULL at EOF. */
static char *read_line(chat *c, size_t *len) {
    if (c->interactive) {
        for (;;) {
            interrupted = 0;
            char *line = readline("> ");
            if (line || !interrupted) {
                if (line && *line) add_history(line);
                if (line) *len = strlen(line);
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
    *len = (size_t)n;
    return line;
}

/* A message: answered, or counted as unanswered with the reason printed. Returns 1 to quit. */
static int send_message(chat *c, const char *line, size_t len) {
    c->n_messages++;
    long nul = gen_find_nul(line, len);
    const char *pre = c->in_prefix ? c->in_prefix : "", *suf = c->in_suffix ? c->in_suffix : "";
    size_t n = strlen(pre) + len + strlen(suf) + 1;
    char *text = nul < 0 ? malloc(n) : NULL;
    int rc = 1;
    if (nul >= 0)
        fprintf(stderr, "gemma3: the message has a NUL byte at byte %ld: not sent\n", nul);
    else if (!text)
        fprintf(stderr, "gemma3: out of memory\n");
    else {
        snprintf(text, n, "%s%s%s", pre, line, suf);
        rc = run_turn(c, text);
    }
    free(text);
    if (rc != 0) c->n_unanswered++;
    return rc < 0;
}

static const cli_option chat_options[] = {
    {"-p, --prompt", "TEXT", CLI_TEXT, offsetof(chat, first_message),
     .help = "the first message, sent before any input is read (llama.cpp's -cnv -p)"},
    {"-st, --single-turn", NULL, CLI_SWITCH, offsetof(chat, single_turn), .value = 1,
     .help = "with -p: answer it and exit"},
    {"--in-prefix", "TEXT", CLI_TEXT, offsetof(chat, in_prefix),
     .help = "put TEXT before every message (inside the user turn)"},
    {"--in-suffix", "TEXT", CLI_TEXT, offsetof(chat, in_suffix),
     .help = "put TEXT after every message (inside the user turn)"},
    {"--context-shift", NULL, CLI_SWITCH, offsetof(chat, context_shift), .value = 1,
     .help = "when the context is full, drop the oldest turns without asking"},
    {"--resume", "FILE", CLI_TEXT, offsetof(chat, resume),
     .help = "continue the conversation /save wrote to FILE (and FILE.state), with no prefill; "
             "its seed unless -s is given"},
    {"--commands", NULL, CLI_SWITCH, offsetof(chat, commands), .value = 1,
     .help = "run /commands even when the input is not a terminal (else every piped line is a "
             "message)"},
    {"-i, -cnv, --interactive, --conversation", NULL, CLI_SWITCH, CLI_NOWHERE,
     .help = "chat (what gemma3 chat does anyway; for gemma3 -i -m DIR)"},
};

static const cli_group chat_group = CLI_GROUP("chat", chat_options);

static const cli_command chat_command = {
    "usage: gemma3 chat -m DIR [options]       (also: gemma3 -i / -cnv -m DIR)\n"
    "An interactive chat. Ctrl-C stops the current reply; Ctrl-D (EOF) or /quit exits.\n"
    "Commands (at a terminal, or with --commands): /help, /reset, /system TEXT, /stats,\n"
    "/save FILE, /load FILE, /quit. Piped input: every line is a message; exit 1 if any went\n"
    "unanswered.\n",
    "chat: unknown flag '%s' (see gemma3 chat --help)",
    {&chat_group, &gen_group, &cli_model_group, &cli_sampling_group, &cli_grammar_group,
     &cli_compat_group, &cli_spec_group, NULL},
};

int cmd_chat(int argc, char **argv) {
    chat c;
    memset(&c, 0, sizeof c);
    gen_opts_init(&c.opts);
    void *const dst[] = {&c, &c.opts, &c.opts.mo, &c.opts.cs, &c.opts.gr, &c.opts.mo, &c.opts.spec};
    int status;
    if (cli_parse(&chat_command, argc, argv, dst, &status)) return status;
    if (!c.opts.mo.model_dir) return cli_usage_error("-m: a model directory is required");
    if (c.single_turn && !c.first_message) return cli_usage_error("-st: needs -p TEXT");
    if (c.opts.escape && c.in_prefix) gen_unescape((char *)c.in_prefix); /* argv, in place */
    if (c.opts.escape && c.in_suffix) gen_unescape((char *)c.in_suffix);
    saved_chat resumed = {0};
    if (c.resume) {
        /* the transcript first (its ids are checked against the vocabulary once it is known):
         * its seed goes into the sampler unless -s was given */
        cJSON *probe = NULL;
        if (refuse_non_regular(c.resume) != GEMMA3_OK || cli_lib(gemma3_read_json(c.resume, &probe)) != GEMMA3_OK)
            return cli_fail("--resume: %s", cli_last_error());
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(probe, "seed");
        if (c.opts.cs.params.seed == GEMMA3_SEED_RANDOM && cJSON_IsNumber(seed) && seed->valuedouble >= 0 &&
            seed->valuedouble < GEMMA3_SEED_RANDOM)
            c.opts.cs.params.seed = (uint32_t)seed->valuedouble;
        cJSON_Delete(probe);
    }
    status = gen_open(&c.g, &c.opts);
    if (!status && c.resume && load_pair(&c, c.resume, &resumed) != GEMMA3_OK)
        status = cli_fail("--resume: %s", cli_last_error());
    saved_chat_free(&resumed);
    if (status) {
        gen_close(&c.g);
        cli_grammar_free(&c.opts.gr);
        return status;
    }
    c.interactive = isatty(STDIN_FILENO);
    int commands = c.interactive || c.commands;
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
    if (c.interactive) rl_catch_signals = 0;
    if (c.interactive && !c.opts.quiet) {
        fprintf(stderr, "gemma3 chat: /help for commands, Ctrl-C stops a reply, Ctrl-D exits "
                        "(seed %u)\n", gemma3_sampler_seed(c.g.sampler));
    }

    if (c.first_message) {
        size_t len = c.opts.escape ? gen_unescape((char *)c.first_message) : strlen(c.first_message);
        if (c.interactive) printf("> %s\n", c.first_message);
        if (send_message(&c, c.first_message, len)) status = CLI_EXIT_FAIL;
    }
    while (!status && !c.single_turn) {
        size_t len = 0;
        char *line = read_line(&c, &len);
        if (!line) break;
        int quit = 0, fatal = 0;
        long nul = gen_find_nul(line, len);
        if (commands && line[0] == '/' && nul >= 0) /* its text would be cut at the NUL */
            fprintf(stderr, "gemma3: the command has a NUL byte at byte %ld: ignored\n", nul);
        else if (commands && line[0] == '/') quit = run_command(&c, line);
        else if (len > 0) fatal = send_message(&c, line, len);
        free(line);
        if (fatal) status = CLI_EXIT_FAIL;
        if (quit || fatal) break;
    }
    if (c.interactive) fputc('\n', stdout);
    /* a script must learn that its conversation is not the one it sent */
    if (!status && !c.interactive && c.n_unanswered)
        status = cli_fail("%d of %d messages were not answered", c.n_unanswered, c.n_messages);
    if (!status && !c.interactive && c.n_failed_commands)
        status = cli_fail("%d /save or /load command%s failed", c.n_failed_commands,
                          c.n_failed_commands > 1 ? "s" : "");
done:
    for (int i = 0; i < c.n_turns; i++) turn_free(&c.turns[i]);
    free(c.turns);
    free(c.reply_ids);
    free(c.system_prompt);
    gen_close(&c.g);
    cli_grammar_free(&c.opts.gr);
    return status;
}
