/* cli/speculate.c - the speculative decoding flags of generate, chat and bench: a draft model
 * (-md) or n-gram lookup (--lookup), and what they need opened beside the model. */
#include "speculate.h"

#include <stddef.h>
#include <string.h>

static int parse_spec_type(const char *flag, const char *value, void *group) {
    cli_spec *o = group;
    if (strcmp(value, "none") == 0) o->lookup = 0;
    else if (strcmp(value, "ngram-simple") == 0 || strcmp(value, "ngram") == 0) o->lookup = 1;
    else if (strcmp(value, "draft") == 0) o->lookup = 0; /* with -md */
    else return cli_usage_error("%s: '%s' is not one of none, draft, ngram-simple", flag, value);
    return 0;
}

static int parse_draft_quant(const char *flag, const char *value, void *group) {
    int type = gemma3_weight_type_parse(value);
    if (type < 0 || type == GEMMA3_WEIGHTS_AS_STORED)
        return cli_usage_error("%s: '%s' is not one of %s", flag, value, gemma3_weight_type_list(0));
    ((cli_spec *)group)->draft_type = (enum gemma3_weight_type)type;
    return 0;
}

#define S(field) offsetof(cli_spec, field)
static const cli_option spec_options[] = {
    {"-md, --model-draft, --spec-draft-model", "DIR", CLI_TEXT, S(draft_dir),
     .help = "speculative decoding with this draft model (a smaller Gemma 3 with the same "
             "vocabulary): the output is the same, token for token"},
    {"--lookup", NULL, CLI_SWITCH, S(lookup), .value = 1,
     .help = "speculative decoding by n-gram lookup over the prompt and the text so far (pays "
             "where the text repeats its context: quoting, editing, code)"},
    {"--spec-type", "TYPE", CLI_CUSTOM, .parse = parse_spec_type,
     .help = "none, draft (with -md) or ngram-simple (= --lookup), as llama.cpp"},
    {"--draft-max, --draft, --draft-n, --spec-draft-n-max", "N", CLI_INT, S(p.draft_max), 1, 256,
     .help = "most tokens drafted per step"},
    {"--draft-min, --spec-draft-n-min", "N", CLI_INT, S(p.draft_min), 0, 256,
     .help = "fewer drafted tokens are not verified"},
    {"--draft-p-min, --spec-draft-p-min", "P", CLI_FLOAT, S(p.draft_p_min), 0, 1,
     .help = "the draft model stops drafting when its greedy token's probability is below P"},
    {"-qd, --quant-draft", "TYPE", CLI_CUSTOM, .parse = parse_draft_quant,
     .help = "the draft's weight type: bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m ... (default: as the model's -q)"},
    {"-td, --threads-draft, --spec-draft-threads", "N", CLI_INT, S(draft_threads), 0, 4096,
     .help = "the draft's threads (0: as -t)"},
    {"--no-spec-adaptive", NULL, CLI_SWITCH, S(p.adaptive), .value = 0,
     .help = "draft --draft-max tokens every step, however many were rejected"},
};
#undef S

const cli_group cli_spec_group = CLI_GROUP("speculative decoding", spec_options);

void cli_spec_init(cli_spec *o) {
    memset(o, 0, sizeof *o);
    o->p = gemma3_spec_default_params();
    o->draft_type = -1;
}

int cli_spec_wanted(const cli_spec *o) { return o->draft_dir || o->lookup; }

void cli_spec_prepare(const cli_spec *o, cli_model_opts *mo) {
    int extra = gemma3_spec_n_swa_extra(o->p.draft_max);
    if (cli_spec_wanted(o) && mo->sp.n_swa_extra < extra) mo->sp.n_swa_extra = extra;
}

/* The draft must speak the model's vocabulary, piece for piece, and be the smaller of the two. */
static int check_draft(const cli_spec *o, const gemma3_model *model, const gemma3_model *draft) {
    gemma3_model_info mi, di;
    gemma3_model_get_info(model, &mi);
    gemma3_model_get_info(draft, &di);
    const gemma3_tokenizer *mt = gemma3_model_tokenizer(model), *dt = gemma3_model_tokenizer(draft);
    int n = dt ? gemma3_tokenizer_vocab_size(dt) : -1;
    if (di.vocab_size != mi.vocab_size || !dt || n != gemma3_tokenizer_vocab_size(mt))
        return cli_usage_error("-md %s: the draft's vocabulary (%d ids, %d pieces) is not the "
                               "model's (%d ids, %d pieces)", o->draft_dir, di.vocab_size, n,
                               mi.vocab_size, gemma3_tokenizer_vocab_size(mt));
    for (int i = 0; i < n; i++)
        if (strcmp(gemma3_tokenizer_piece(dt, i), gemma3_tokenizer_piece(mt, i)) != 0)
            return cli_usage_error("-md %s: the draft's vocabulary differs from the model's at "
                                   "id %d ('%s' vs '%s')", o->draft_dir, i,
                                   gemma3_tokenizer_piece(dt, i), gemma3_tokenizer_piece(mt, i));
    if (di.n_params > mi.n_params)
        return cli_usage_error("-md %s: the draft (%lld parameters) is larger than the model "
                               "(%lld): it would only slow decoding down", o->draft_dir,
                               (long long)di.n_params, (long long)mi.n_params);
    return 0;
}

static int open_draft(cli_spec_state *st, const cli_spec *o, const cli_model_opts *mo,
                      const gemma3_model *model, const gemma3_session *target) {
    cli_model_opts dmo = *mo;
    dmo.model_dir = o->draft_dir;
    if (o->draft_type >= 0) dmo.mp.weight_type = (enum gemma3_weight_type)o->draft_type;
    if (o->draft_threads > 0) dmo.sp.n_threads = o->draft_threads;
    dmo.sp.n_ctx = gemma3_session_n_ctx(target);
    int rc = cli_model_load(&dmo, &st->draft_model);
    if (rc) return rc;
    if ((rc = check_draft(o, model, st->draft_model))) return rc;
    if (gemma3_session_init(st->draft_model, &dmo.sp, &st->draft_session) != GEMMA3_OK)
        return cli_fail("-md %s: %s", o->draft_dir, gemma3_last_error());
    return 0;
}

int cli_spec_open(cli_spec_state *st, const cli_spec *o, const cli_model_opts *mo,
                  const gemma3_model *model, gemma3_session *target) {
    memset(st, 0, sizeof *st);
    if (!cli_spec_wanted(o)) return 0;
    gemma3_spec_params p = o->p;
    p.type = o->draft_dir ? GEMMA3_SPEC_DRAFT : GEMMA3_SPEC_NGRAM;
    if (o->draft_dir) {
        int rc = open_draft(st, o, mo, model, target);
        if (rc) return rc;
    }
    if (gemma3_spec_init(target, st->draft_session, &p, &st->spec) != GEMMA3_OK)
        return cli_usage_error("%s", gemma3_last_error());
    return 0;
}

void cli_spec_close(cli_spec_state *st) {
    gemma3_spec_free(st->spec);
    gemma3_session_free(st->draft_session);
    gemma3_model_free(st->draft_model);
    memset(st, 0, sizeof *st);
}

void cli_spec_print_stats(const cli_spec_state *st, FILE *f) {
    if (!st->spec) return;
    gemma3_spec_stats s;
    gemma3_spec_get_stats(st->spec, &s);
    fprintf(f, "speculative: %s | drafted %lld, accepted %lld (%.1f%%) in %lld steps\n",
            st->draft_session ? "draft model" : "n-gram lookup", (long long)s.n_drafted,
            (long long)s.n_accepted, s.n_drafted ? 100.0 * (double)s.n_accepted / (double)s.n_drafted : 0.0,
            (long long)s.n_steps);
}
