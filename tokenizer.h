/* tokenizer.h - internal interface of tokenizer.c beyond the public gemma3_tokenizer_* API:
 * loading from memory (tests of malformed files, the fuzz target) and piece lookup by text. */
#ifndef G3_TOKENIZER_H
#define G3_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gemma3.h"

/* SentencePiece piece types (ModelProto.SentencePiece.Type). */
enum g3_piece_type {
    G3_PIECE_NORMAL = 1,
    G3_PIECE_UNKNOWN = 2,
    G3_PIECE_CONTROL = 3,
    G3_PIECE_USER_DEFINED = 4,
    G3_PIECE_UNUSED = 5,
    G3_PIECE_BYTE = 6,
};

/* Parses a serialized SentencePiece ModelProto of `size` bytes (the caller keeps ownership of buf;
 * nothing points into it afterwards). `label` names the source in error messages (a path, or
 * "<buffer>"). Returns GEMMA3_OK, GEMMA3_ERR_FORMAT for a malformed protobuf,
 * GEMMA3_ERR_UNSUPPORTED for a model type or normalizer this file does not implement, or
 * GEMMA3_ERR_NOMEM. */
int g3_tokenizer_load_buffer(const uint8_t *buf, size_t size, const char *label,
                             gemma3_tokenizer **out);
/* gemma3_tokenizer_load for the tokenizer.model of a checkpoint directory: anything but a
 * regular file (a FIFO, a device) is refused at once, never waited on or read to its end. */
int g3_tokenizer_load_checkpoint_file(const char *path, gemma3_tokenizer **out);

/* A tokenizer from arrays of n_pieces pieces (text[i] of len[i] bytes, score[i], type[i] an
 * enum g3_piece_type) with the SentencePiece settings below (a BPE model); the same checks and
 * the same encoder as a tokenizer.model. Nothing points into the arrays afterwards. */
typedef struct g3_tokenizer_spec {
    int32_t bos_id, eos_id, pad_id; /* -1: none */
    int byte_fallback, add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    int add_bos; /* gemma3_tokenizer_add_bos */
} g3_tokenizer_spec;
int g3_tokenizer_from_pieces(const char *const *text, const size_t *len, const float *score,
                             const int32_t *type, size_t n_pieces, const g3_tokenizer_spec *spec,
                             const char *label, gemma3_tokenizer **out);

/* Id of the piece whose text is exactly the len bytes at text (any type), or -1. */
int32_t g3_tokenizer_piece_id(const gemma3_tokenizer *tok, const char *text, size_t len);

/* The type (enum g3_piece_type) and score of an id; 0 / 0.0f when out of range. */
int g3_tokenizer_piece_type(const gemma3_tokenizer *tok, int32_t id);
float g3_tokenizer_piece_score(const gemma3_tokenizer *tok, int32_t id);

#endif
