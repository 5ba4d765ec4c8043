/* json-schema.h - JSON schema -> GBNF (json-schema.c). The converter's entry point is public:
 * gemma3_json_schema_to_grammar in gemma3.h; this header only records its limits. */
#ifndef G3_JSON_SCHEMA_H
#define G3_JSON_SCHEMA_H

#include "gemma3.h"

#define G3_JSON_SCHEMA_MAX_REFS 256 /* distinct $ref targets in one schema */

#endif
