/* cli/grammar-options.c - constrained output flags of generate and chat: --grammar,
 * --grammar-file, -j/--json-schema, --json-schema-file, resolved to one GBNF text and checked
 * before the model loads (a malformed grammar or schema is a usage error: exit 2). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define G(field) offsetof(cli_grammar, field)
static const cli_option grammar_options[] = {
    {"--grammar", "TEXT", CLI_TEXT, G(grammar),
     .help = "constrain the output to a GBNF grammar (llama.cpp's syntax; root is the start)"},
    {"--grammar-file", "FILE", CLI_TEXT, G(grammar_file),
     .help = "the grammar from FILE (see grammars/)"},
    {"-j, --json-schema", "SCHEMA", CLI_TEXT, G(json_schema),
     .help = "constrain the output to JSON matching a JSON schema"},
    {"--json-schema-file", "FILE", CLI_TEXT, G(json_schema_file),
     .help = "the JSON schema from FILE"},
};
#undef G

const cli_group cli_grammar_group = CLI_GROUP("constrained output (one of these)", grammar_options);

/* A library message "grammar:L:C: ..." or "json-schema:L:C: ..." as "SOURCE:L:C: ...". */
static int grammar_error(const char *source, int rc) {
    const char *msg = gemma3_last_error();
    const char *rest = strncmp(msg, "grammar:", 8) == 0        ? msg + 8
                       : strncmp(msg, "json-schema:", 12) == 0 ? msg + 12
                                                               : NULL;
    if (rc == GEMMA3_ERR_IO || rc == GEMMA3_ERR_NOMEM) return cli_fail("%s", msg);
    if (rest && rest[0] >= '0' && rest[0] <= '9') return cli_usage_error("%s:%s", source, rest);
    return cli_usage_error("%s: %s", source, rest ? (rest[0] == ' ' ? rest + 1 : rest) : msg);
}

int cli_grammar_resolve(cli_grammar *cg) {
    int given = !!cg->grammar + !!cg->grammar_file + !!cg->json_schema + !!cg->json_schema_file;
    if (given == 0) return 0;
    if (given > 1)
        return cli_usage_error("--grammar: give only one of --grammar, --grammar-file, "
                               "--json-schema, --json-schema-file");
    const char *source = cg->grammar        ? "--grammar"
                         : cg->json_schema  ? "--json-schema"
                         : cg->grammar_file ? cg->grammar_file
                                            : cg->json_schema_file;
    char *text = NULL;
    size_t len = 0;
    const char *path = cg->grammar_file ? cg->grammar_file : cg->json_schema_file;
    if (path && gemma3_read_file(path, &text, &len) != GEMMA3_OK)
        return cli_fail("%s", gemma3_last_error());
    if (!path) {
        text = strdup(cg->grammar ? cg->grammar : cg->json_schema);
        if (!text) return cli_fail("out of memory");
        len = strlen(text);
    }
    int rc = GEMMA3_OK;
    if (cg->json_schema || cg->json_schema_file) {
        char *gbnf = NULL;
        rc = gemma3_json_schema_to_grammar(text, len, &gbnf);
        free(text);
        if (rc != GEMMA3_OK) return grammar_error(source, rc);
        text = gbnf;
        len = strlen(gbnf);
    }
    rc = gemma3_grammar_check(text, len);
    if (rc != GEMMA3_OK) {
        free(text);
        return grammar_error(source, rc);
    }
    cg->text = text;
    cg->len = len;
    cg->source = source;
    return 0;
}

void cli_grammar_free(cli_grammar *cg) {
    free(cg->text);
    cg->text = NULL;
}
