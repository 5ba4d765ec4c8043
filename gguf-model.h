/* gguf-model.h - a Gemma 3 model from a GGUF file (architecture "gemma3", as llama.cpp's
 * convert_hf_to_gguf.py writes it): its metadata as a g3_config, its tensors as a checkpoint
 * under Hugging Face names (so weights.c binds them as it binds safetensors), its vocabulary as
 * a tokenizer. Where GGUF lacks what config.json has, this does what llama.cpp does
 * (docs/gguf.md). Every function also takes a checkpoint directory, and then does what it did. */
#ifndef G3_GGUF_MODEL_H
#define G3_GGUF_MODEL_H

#include <stdio.h>

#include "config.h"
#include "gemma3.h"
#include "quant.h"
#include "safetensors.h"

/* Does `model` name a GGUF file (rather than a checkpoint directory)? */
int g3_model_is_gguf(const char *model);

/* The text configuration: MODEL/config.json, or a GGUF's metadata. */
int g3_model_config_load(const char *model, g3_config *cfg);

/* The tensors: the directory's safetensors (g3_st_open_dir_ex), or the GGUF's tensors viewed
 * under HF names (model.layers.N.self_attn.q_proj.weight ...) with dtypes BF16/F16/F32, or U8
 * rows of blocks with __metadata__ gemma3.quant for Q8_0/Q4_0 files, and gemma3.norms
 * "plus_one" (the converter stored 1 + w). A tensor of another ggml type, or quantized types
 * mixed in one file, is refused naming the tensor and the type. */
int g3_model_open_st(const char *model, g3_st_load load, int n_threads, int populate, g3_st **out);

/* The tokenizer of a GGUF from tokenizer.ggml.* (model "llama", SentencePiece); *out NULL and
 * GEMMA3_OK for a GGUF without tokenizer.ggml.tokens. */
int g3_gguf_model_tokenizer(const char *path, gemma3_tokenizer **out);

/* Prints what a user needs to know of a GGUF: architecture, name, context length, size and the
 * tensors per type. */
int g3_gguf_model_describe(const char *path, FILE *out);

/* Writes the model at src (a directory or a GGUF) as a GGUF at path, every matrix as type (bf16,
 * q8_0 or q4_0; quantized as at load, so the blocks are those of gemma3 quantize and of
 * llama-quantize --pure), with the metadata and vocabulary llama.cpp's converter writes. A config
 * llama.cpp would run differently from its GGUF (an attention scale it would not derive, layer
 * types no sliding_window_pattern gives) is refused. The file appears whole or not at all. */
int g3_gguf_model_write(const char *src, g3_wtype type, int n_threads, const char *path);

#endif
