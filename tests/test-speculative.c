/* test-speculative.c - speculative decoding changes no token: over prompts x seeds x sampler
 * chains (greedy, default, top-k/top-p, min-p, penalties + DRY, mirostat 2, Gumbel, a grammar)
 * the speculative run's tokens equal the plain run's, with n-gram lookup, with draft models of
 * other weight types (q8_0, q4_0 copies of the bundled model) and with the bundled model's
 * trained draft (models/wordnet-gemma-draft: another network, BF16 and q8_0), at 2 and 1
 * threads and under exact mode. Also: n-gram lookup's proposals, the rollback of the
 * sliding-window rings (a run whose drafts are all rejected, with a window of 8), the session's
 * logits after a sync, and the refusals. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "speculative.h"

#define MODEL_DIR "models/wordnet-gemma"
#define DRAFT_DIR "models/wordnet-gemma-draft" /* the trained draft: hidden 128, 4 layers */
#define N_GEN 24
#define N_LONG 200 /* past the window of 64: the rings wrap */
#define MAX_PROMPT 64
#define MAX_DRAFTERS 8

static const char *const prompts[] = {
    "dog: a domestic animal. cat: a domestic animal. dog:",
    "The word \"river\" is a noun meaning",
    "happy: feeling or showing pleasure. happy:",
    "Define the word \"stone\".",
};
#define N_PROMPTS 4
static const char grammar_text[] = "root ::= [a-z ]{1,40} (\".\" | \",\")";

enum chain { GREEDY, DEFAULT, TOPK_TOPP, MIN_P, PENALTIES_DRY, MIROSTAT2, GUMBEL, GRAMMAR, N_CHAINS };
static const char *const chain_names[N_CHAINS] = {"greedy", "default", "top-k/top-p", "min-p",
                                                  "penalties+dry", "mirostat2", "gumbel", "grammar"};

typedef struct run_ctx {
    const gemma3_model *model;
    const gemma3_tokenizer *tok;
    gemma3_session *session, *draft;
    int32_t eos[2];
} run_ctx;

static gemma3_sampler_params chain_params(enum chain c, uint32_t seed) {
    gemma3_sampler_params p = gemma3_sampler_default_params();
    p.seed = seed;
    p.n_eos = 0;
    switch (c) {
    case GREEDY: p.temperature = 0; break;
    case DEFAULT: p.temperature = 0.7f; break;
    case TOPK_TOPP: p.temperature = 1.2f; p.top_k = 20; p.top_p = 0.8f; break;
    case MIN_P: p.temperature = 1.0f; p.top_k = 0; p.top_p = 1; p.min_p = 0.1f; break;
    case PENALTIES_DRY:
        p.repeat_penalty = 1.3f; p.frequency_penalty = 0.2f; p.presence_penalty = 0.3f;
        p.dry_multiplier = 0.8f; p.dry_allowed_length = 1; break;
    case MIROSTAT2: p.mirostat = 2; p.mirostat_tau = 3; break;
    case GUMBEL: p.mode = GEMMA3_SAMPLER_MODE_GUMBEL; p.temperature = 0.9f; break;
    case GRAMMAR: p.temperature = 0.8f; break;
    default: break;
    }
    return p;
}

/* One generation as cli/reply.c does it: draw (under the grammar), stop on an end id, feed.
 * With sp, tokens go in through gemma3_spec_feed. Returns the count of ids, or < 0. */
static int generate(run_ctx *r, gemma3_spec *sp, const int32_t *prompt, int n_prompt, enum chain c,
                    uint32_t seed, int32_t *out, int n_gen) {
    gemma3_sampler_params p = chain_params(c, seed);
    gemma3_sampler *smp = NULL;
    gemma3_grammar *gr = NULL;
    int n = -1;
    gemma3_session_reset(r->session);
    if (gemma3_sampler_init(&p, gemma3_session_n_vocab(r->session), &smp) != GEMMA3_OK) goto done;
    if (c == GRAMMAR && gemma3_grammar_init_tokenizer(grammar_text, strlen(grammar_text), r->tok,
                                                       r->eos, 2, 0, &gr) != GEMMA3_OK)
        goto done;
    if (gemma3_session_forward(r->session, prompt, n_prompt, NULL) != GEMMA3_OK) goto done;
    for (int i = 0; i < n_prompt; i++) gemma3_sampler_accept(smp, prompt[i]);
    const float *logits = gemma3_session_logits(r->session);
    for (n = 0; n < n_gen;) {
        int64_t pos = sp ? gemma3_spec_pos(sp) : gemma3_session_pos(r->session);
        int32_t t = gr ? gemma3_grammar_sample(gr, smp, logits, pos) : gemma3_sampler_sample(smp, logits, pos);
        if (t < 0 || (gr && gemma3_grammar_accept(gr, t) != GEMMA3_OK)) { n = -1; break; }
        if (t == r->eos[0] || t == r->eos[1]) break;
        out[n++] = t;
        int rc = sp ? gemma3_spec_feed(sp, t, &logits) : gemma3_session_forward(r->session, &t, 1, NULL);
        if (!sp) logits = gemma3_session_logits(r->session);
        if (rc != GEMMA3_OK) { n = -1; break; }
        gemma3_sampler_accept(smp, t);
    }
    if (sp && n >= 0 && gemma3_spec_sync(sp) != GEMMA3_OK) n = -1;
done:
    gemma3_grammar_free(gr);
    gemma3_sampler_free(smp);
    return n;
}

typedef struct drafter {
    const char *name;
    enum gemma3_spec_type type;
    gemma3_model *model; /* GEMMA3_SPEC_DRAFT: a copy of the target in another weight type, or
                          * the trained draft */
    int coupled;         /* proposals drawn with the target's chain, seed and position */
} drafter;

static int same_ids(const int32_t *a, int na, const int32_t *b, int nb) {
    return na == nb && na >= 0 && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

/* Plain vs speculative over prompts x seeds x chains x drafters in one configuration. */
static void exactness(const gemma3_model *model, drafter *dr, int n_dr, int n_threads, int exact,
                      int n_prompts, int n_seeds) {
    run_ctx r = {.model = model, .tok = gemma3_model_tokenizer(model), .eos = {1, 5}};
    gemma3_session_params sp = gemma3_session_default_params();
    sp.n_ctx = 256;
    sp.n_threads = n_threads;
    sp.exact = exact;
    if (exact) sp.kv_type = GEMMA3_KV_F32;
    gemma3_spec_params qp = gemma3_spec_default_params();
    qp.draft_max = 6;
    sp.n_swa_extra = gemma3_spec_n_swa_extra(qp.draft_max);
    if (gemma3_session_init(model, &sp, &r.session) != GEMMA3_OK) {
        CHECK_MSG(0, "session: %s", gemma3_last_error());
        return;
    }
    int cases = 0, differ = 0;
    int64_t drafted[MAX_DRAFTERS] = {0}, accepted[MAX_DRAFTERS] = {0};
    for (int pi = 0; pi < n_prompts; pi++) {
        int32_t prompt[MAX_PROMPT];
        int n_prompt = gemma3_tokenizer_encode(r.tok, prompts[pi], strlen(prompts[pi]), GEMMA3_TOK_BOS,
                                               prompt, MAX_PROMPT);
        for (int si = 0; si < n_seeds; si++)
            for (int c = 0; c < N_CHAINS; c++) {
                uint32_t seed = 1000u + 17u * (uint32_t)si;
                int32_t plain[N_GEN], spec[N_GEN];
                int n_plain = generate(&r, NULL, prompt, n_prompt, c, seed, plain, N_GEN);
                for (int d = 0; d < n_dr; d++) {
                    gemma3_session *ds = NULL;
                    gemma3_spec *spc = NULL;
                    qp.type = dr[d].type;
                    if (dr[d].model && gemma3_session_init(dr[d].model, &sp, &ds) != GEMMA3_OK) break;
                    if (gemma3_spec_init(r.session, ds, &qp, &spc) != GEMMA3_OK) {
                        CHECK_MSG(0, "spec init: %s", gemma3_last_error());
                        gemma3_session_free(ds);
                        break;
                    }
                    gemma3_sampler_params cp = chain_params(c, seed);
                    if (dr[d].coupled && gemma3_spec_set_draft_sampling(spc, &cp) != GEMMA3_OK)
                        CHECK_MSG(0, "draft sampling: %s", gemma3_last_error());
                    int n_spec = generate(&r, spc, prompt, n_prompt, c, seed, spec, N_GEN);
                    gemma3_spec_stats st;
                    gemma3_spec_get_stats(spc, &st);
                    drafted[d] += st.n_drafted;
                    accepted[d] += st.n_accepted;
                    cases++;
                    if (!same_ids(plain, n_plain, spec, n_spec)) {
                        differ++;
                        CHECK_MSG(0, "%s, %s, prompt %d, seed %u, threads %d%s: %d plain vs %d "
                                  "speculative ids differ", dr[d].name, chain_names[c], pi, seed,
                                  n_threads, exact ? ", exact" : "", n_plain, n_spec);
                    }
                    gemma3_spec_free(spc);
                    gemma3_session_free(ds);
                }
            }
    }
    CHECK_EQ_INT(differ, 0);
    printf("exactness: %d cases at %d thread(s)%s: %d differ\n", cases, n_threads,
           exact ? ", exact" : "", differ);
    for (int d = 0; d < n_dr; d++) {
        /* every drafter exercised acceptance, not only rejection */
        CHECK_MSG(drafted[d] > 0 && accepted[d] > 0, "%s: %lld drafted, %lld accepted", dr[d].name,
                  (long long)drafted[d], (long long)accepted[d]);
        printf("  %s: %lld drafted, %lld accepted\n", dr[d].name, (long long)drafted[d],
               (long long)accepted[d]);
    }
    gemma3_session_free(r.session);
}

static void test_ngram_lookup(void) {
    const int32_t loop[] = {7, 1, 2, 3, 4, 1, 2, 3};
    int32_t out[8];
    /* suffix 1 2 3 recurs at index 1: the continuation 4 1 2 3 4 1 ... runs into the proposal */
    CHECK_EQ_INT(gemma3_spec_ngram_lookup(loop, 8, 2, 4, out, 6), 6);
    const int32_t want[] = {4, 1, 2, 3, 4, 1};
    CHECK(memcmp(out, want, sizeof want) == 0);
    const int32_t none[] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(gemma3_spec_ngram_lookup(none, 5, 2, 4, out, 6), 0);
    /* the longest recurring suffix wins: 9 2 recurs at index 3 (its continuation 8), 2 alone
     * at index 1 (continuation 5) */
    const int32_t longest[] = {0, 2, 5, 9, 2, 8, 9, 2};
    CHECK_EQ_INT(gemma3_spec_ngram_lookup(longest, 8, 1, 4, out, 1), 1);
    CHECK_EQ_INT(out[0], 8);
}

/* A run of N_LONG tokens wraps the rings of the window of 64 three times, with drafts rejected
 * all along: the tokens, the position and the final logits must be the plain run's. */
static void test_sync_logits(const gemma3_model *model) {
    run_ctx r = {.model = model, .tok = gemma3_model_tokenizer(model), .eos = {-1, -1}};
    gemma3_session_params sp = gemma3_session_default_params();
    sp.n_ctx = 256;
    sp.n_threads = 2;
    gemma3_spec_params qp = gemma3_spec_default_params();
    qp.draft_max = 4;
    qp.adaptive = 0;
    sp.n_swa_extra = gemma3_spec_n_swa_extra(qp.draft_max);
    gemma3_spec *spc = NULL;
    if (gemma3_session_init(model, &sp, &r.session) != GEMMA3_OK ||
        gemma3_spec_init(r.session, NULL, &qp, &spc) != GEMMA3_OK) {
        CHECK_MSG(0, "%s", gemma3_last_error());
        gemma3_session_free(r.session);
        return;
    }
    int32_t prompt[MAX_PROMPT], a[N_LONG], b[N_LONG];
    int n_prompt = gemma3_tokenizer_encode(r.tok, prompts[0], strlen(prompts[0]), GEMMA3_TOK_BOS, prompt, MAX_PROMPT);
    const int V = gemma3_session_n_vocab(r.session);
    float *want = malloc((size_t)V * sizeof *want);
    int na = generate(&r, NULL, prompt, n_prompt, DEFAULT, 5, a, N_LONG);
    memcpy(want, gemma3_session_logits(r.session), (size_t)V * sizeof *want);
    int pos_plain = gemma3_session_pos(r.session);
    int nb = generate(&r, spc, prompt, n_prompt, DEFAULT, 5, b, N_LONG);
    gemma3_spec_stats st;
    gemma3_spec_get_stats(spc, &st);
    printf("long run: %d tokens, %lld drafted, %lld accepted\n", nb, (long long)st.n_drafted,
           (long long)st.n_accepted);
    CHECK_EQ_INT(nb, N_LONG);
    CHECK(st.n_drafted > st.n_accepted && st.n_accepted > 0);
    CHECK(same_ids(a, na, b, nb));
    CHECK_EQ_INT(gemma3_session_pos(r.session), pos_plain);
    CHECK(memcmp(want, gemma3_session_logits(r.session), (size_t)V * sizeof *want) == 0);
    /* refusals: draft_max 0, a draft session with the n-gram type */
    gemma3_spec *bad = NULL;
    qp.draft_max = 0;
    CHECK_EQ_INT(gemma3_spec_init(r.session, NULL, &qp, &bad), GEMMA3_ERR_ARG);
    CHECK(strstr(gemma3_last_error(), "draft_max 0") != NULL);
    qp.draft_max = 4;
    CHECK_EQ_INT(gemma3_spec_init(r.session, r.session, &qp, &bad), GEMMA3_ERR_ARG);
    free(want);
    gemma3_spec_free(spc);
    gemma3_session_free(r.session);
}

static gemma3_model *load_as(const char *dir, enum gemma3_weight_type type) {
    gemma3_model_params mp = {0};
    mp.weight_type = type;
    mp.n_threads = 2;
    gemma3_model *m = NULL;
    if (gemma3_model_load_ex(dir, &mp, &m) != GEMMA3_OK)
        CHECK_MSG(0, "%s: %s", dir, gemma3_last_error());
    return m;
}

int main(void) {
    test_ngram_lookup();
    gemma3_model *model = load_as(MODEL_DIR, GEMMA3_WEIGHTS_AS_STORED);
    gemma3_model *q8 = load_as(MODEL_DIR, GEMMA3_WEIGHTS_Q8_0);
    gemma3_model *q4 = load_as(MODEL_DIR, GEMMA3_WEIGHTS_Q4_0);
    gemma3_model *tr = load_as(DRAFT_DIR, GEMMA3_WEIGHTS_AS_STORED);
    gemma3_model *tr8 = load_as(DRAFT_DIR, GEMMA3_WEIGHTS_Q8_0);
    if (model && q8 && q4 && tr && tr8) {
        test_sync_logits(model);
        drafter dr[] = {{"n-gram lookup", GEMMA3_SPEC_NGRAM, NULL, 0},
                        {"q8_0 draft, coupled draws", GEMMA3_SPEC_DRAFT, q8, 1},
                        {"q4_0 draft, greedy proposals", GEMMA3_SPEC_DRAFT, q4, 0},
                        {"trained draft, coupled draws", GEMMA3_SPEC_DRAFT, tr, 1},
                        {"trained draft q8_0, greedy proposals", GEMMA3_SPEC_DRAFT, tr8, 0}};
        exactness(model, dr, 5, 2, 0, N_PROMPTS, 3);  /* 4 x 3 x 8 x 5 = 480 cases */
        exactness(model, dr, 5, 1, 0, 2, 1);          /* 80 at 1 thread */
        exactness(model, dr, 5, 2, 1, 2, 1);          /* 80 exact */
    }
    gemma3_model_free(tr8);
    gemma3_model_free(tr);
    gemma3_model_free(q4);
    gemma3_model_free(q8);
    gemma3_model_free(model);
    return check_report();
}
