/* test-wordnet-template.c - the chat format on the bundled trained model's vocabulary
 * (models/wordnet-gemma/tokenizer.model, where <start_of_turn>/<end_of_turn> are 4/5, not
 * Gemma's 105/106): gemma3_chat_encode of a multi-turn conversation (system message, untrimmed
 * contents, "assistant" turns) gives exactly the ids of transformers' apply_chat_template with
 * Gemma 3's template (tests/data/wordnet-gemma/refs.json, tools/train-dict-model.py). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gemma3.h"
#include "util.h"

#define MODEL_PATH "models/wordnet-gemma/tokenizer.model"
#define REFS_PATH "tests/data/wordnet-gemma/refs.json"
#define MAX_MSGS 16

/* refs.json's chat_template object, or NULL (reported). */
static cJSON *load_reference(cJSON **root) {
    char *data;
    size_t size;
    if (g3_read_file(REFS_PATH, &data, &size) != GEMMA3_OK) {
        CHECK_MSG(0, "%s", gemma3_last_error());
        return NULL;
    }
    *root = cJSON_ParseWithLength(data, size);
    free(data);
    cJSON *chat = cJSON_GetObjectItemCaseSensitive(*root, "chat_template");
    CHECK_MSG(cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(chat, "ids")),
              "%s: chat_template.ids missing (the reference run recorded: %s)", REFS_PATH,
              cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(chat, "error")));
    return cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(chat, "ids")) ? chat : NULL;
}

/* Encodes the reference messages, "assistant" renamed to model_role, and compares with ids. */
static void check_conversation(const gemma3_tokenizer *tok, const cJSON *chat,
                               const char *model_role) {
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(chat, "messages");
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(chat, "ids");
    gemma3_chat_msg msgs[MAX_MSGS];
    int n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        if (n == MAX_MSGS) break;
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
        CHECK(role && content);
        if (!role || !content) return;
        msgs[n++] = (gemma3_chat_msg){strcmp(role, "assistant") == 0 ? model_role : role, content};
    }
    CHECK(n >= 5); /* system + at least two exchanges: a multi-turn conversation */
    int n_ref = cJSON_GetArraySize(ref);
    int32_t ids[1024];
    int got = gemma3_chat_encode(tok, msgs, n, 1, 1, ids, 1024);
    CHECK_MSG(got == n_ref, "%s turns: %d ids, transformers %d (%s)", model_role, got, n_ref,
              got < 0 ? gemma3_last_error() : "");
    int first_diff = -1;
    for (int i = 0; i < got && i < n_ref && first_diff < 0; i++)
        if (ids[i] != (int32_t)cJSON_GetArrayItem(ref, i)->valuedouble) first_diff = i;
    CHECK_MSG(first_diff < 0, "%s turns: id %d differs: %d vs transformers %d", model_role,
              first_diff, first_diff < 0 ? 0 : ids[first_diff],
              first_diff < 0 ? 0 : (int)cJSON_GetArrayItem(ref, first_diff)->valuedouble);
}

int main(void) {
    gemma3_tokenizer *tok = NULL;
    cJSON *root = NULL;
    if (gemma3_tokenizer_load(MODEL_PATH, &tok) != GEMMA3_OK) {
        CHECK_MSG(0, "%s", gemma3_last_error());
        return check_report();
    }
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_START_OF_TURN), 4);
    CHECK_EQ_INT(gemma3_tokenizer_special(tok, GEMMA3_SPECIAL_END_OF_TURN), 5);
    const cJSON *chat = load_reference(&root);
    if (chat) {
        check_conversation(tok, chat, "assistant");
        check_conversation(tok, chat, "model");
    }
    cJSON_Delete(root);
    gemma3_tokenizer_free(tok);
    return check_report();
}
