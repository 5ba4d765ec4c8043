/* quantize-checkpoint.c - gemma3_quantize: a Q8_0/Q4_0 copy of a checkpoint directory that
 * loads in place. The weights are streamed through weights.c's quantizing writer; the side files
 * (config, tokenizer, ...) are copied; every output is written under a temporary name and renamed
 * only when all are complete, so a failure leaves no partial checkpoint. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "gemma3.h"
#include "gguf-model.h"
#include "quant.h"
#include "util.h"
#include "weights.h"

/* The files of a checkpoint directory besides the weights, copied as they are. */
static const char *const side_files[] = {
    "config.json", "generation_config.json", "tokenizer.model", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
};
#define N_SIDE_FILES (sizeof side_files / sizeof side_files[0])
#define TMP_SUFFIX ".gemma3-tmp"

/* Copies src to dst byte for byte. */
static int copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return g3_error(GEMMA3_ERR_IO, "%s: cannot create: %s", dst, strerror(e));
    }
    char buf[1 << 16];
    int rc = GEMMA3_OK;
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = g3_error(GEMMA3_ERR_IO, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        if (n == 0) break;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                rc = g3_error(GEMMA3_ERR_IO, "%s: write failed: %s", dst,
                              w < 0 ? strerror(errno) : "no progress");
                break;
            }
            done += w;
        }
        if (rc != GEMMA3_OK) break;
    }
    close(in);
    if (close(out) != 0 && rc == GEMMA3_OK)
        rc = g3_error(GEMMA3_ERR_IO, "%s: close failed: %s", dst, strerror(errno));
    return rc;
}

int gemma3_quantize(const char *src_dir, const char *dst_dir, enum gemma3_weight_type type,
                    int n_threads) {
    if (!src_dir || !dst_dir) return g3_error(GEMMA3_ERR_ARG, "quantize: no directory given");
    int wt = type == GEMMA3_WEIGHTS_Q8_0 ? G3_WTYPE_Q8_0 : type == GEMMA3_WEIGHTS_Q4_0 ? G3_WTYPE_Q4_0 : -1;
    if (wt < 0)
        return g3_error(GEMMA3_ERR_ARG, "quantize: weight type %s is not q8_0 or q4_0",
                        gemma3_weight_type_name(type));
    if (n_threads < 0 || n_threads > 1024)
        return g3_error(GEMMA3_ERR_ARG, "quantize: n_threads %d is out of range [0, 1024]", n_threads);
    char src[4096], dst[4096];
    g3_config *cfg = malloc(sizeof *cfg);
    if (!cfg) return g3_error(GEMMA3_ERR_NOMEM, "quantize: out of memory");
    int rc = g3_model_is_gguf(src_dir) /* it has no config.json or tokenizer.model to copy */
                 ? g3_error(GEMMA3_ERR_ARG, "%s: a GGUF is quantized into a GGUF (a name ending in .gguf)", src_dir)
                 : g3_path_join(src, sizeof src, src_dir, "config.json");
    if (rc == GEMMA3_OK) rc = g3_config_load(src, cfg);
    int created = 0;
    if (rc == GEMMA3_OK) {
        struct stat sb;
        if (stat(dst_dir, &sb) != 0) {
            if (mkdir(dst_dir, 0755) != 0)
                rc = g3_error(GEMMA3_ERR_IO, "%s: cannot create the directory: %s", dst_dir,
                              strerror(errno));
            else
                created = 1;
        } else if (!S_ISDIR(sb.st_mode)) {
            rc = g3_error(GEMMA3_ERR_IO, "%s: exists and is not a directory", dst_dir);
        }
    }
    if (rc == GEMMA3_OK) {
        char a[PATH_MAX], b[PATH_MAX];
        if (realpath(src_dir, a) && realpath(dst_dir, b) && strcmp(a, b) == 0)
            rc = g3_error(GEMMA3_ERR_ARG, "%s: the destination is the source directory", dst_dir);
    }
    if (rc == GEMMA3_OK) { /* an index there would shadow the model.safetensors written here */
        rc = g3_path_join(dst, sizeof dst, dst_dir, "model.safetensors.index.json");
        if (rc == GEMMA3_OK && access(dst, F_OK) == 0)
            rc = g3_error(GEMMA3_ERR_ARG,
                          "%s: has a model.safetensors.index.json, which loaders would read instead "
                          "of the quantized model.safetensors; use an empty directory",
                          dst_dir);
    }
    /* every output under a temporary name first; renamed only when all are complete */
    int have[N_SIDE_FILES] = {0};
    if (rc == GEMMA3_OK) rc = g3_path_join(dst, sizeof dst, dst_dir, "model.safetensors" TMP_SUFFIX);
    if (rc == GEMMA3_OK) rc = g3_weights_write_quantized(src_dir, cfg, (g3_wtype)wt, n_threads, dst);
    for (size_t i = 0; i < N_SIDE_FILES && rc == GEMMA3_OK; i++) {
        rc = g3_path_join(src, sizeof src, src_dir, side_files[i]);
        if (rc != GEMMA3_OK || access(src, F_OK) != 0) continue;
        char name[128];
        snprintf(name, sizeof name, "%s" TMP_SUFFIX, side_files[i]);
        rc = g3_path_join(dst, sizeof dst, dst_dir, name);
        if (rc == GEMMA3_OK) {
            have[i] = 1; /* (a partial copy is removed below) */
            rc = copy_file(src, dst);
        }
    }
    /* the weights last: a directory without model.safetensors does not load */
    for (size_t i = 0; i <= N_SIDE_FILES && rc == GEMMA3_OK; i++) {
        const char *name = i < N_SIDE_FILES ? side_files[i] : "model.safetensors";
        if (i < N_SIDE_FILES && !have[i]) continue;
        char tmp[4096];
        rc = g3_path_join(dst, sizeof dst, dst_dir, name);
        if (rc == GEMMA3_OK && (size_t)snprintf(tmp, sizeof tmp, "%s" TMP_SUFFIX, dst) >= sizeof tmp)
            rc = g3_error(GEMMA3_ERR_ARG, "%s: path too long", dst);
        if (rc == GEMMA3_OK && rename(tmp, dst) != 0)
            rc = g3_error(GEMMA3_ERR_IO, "%s: cannot rename %s to it: %s", dst, tmp, strerror(errno));
        if (rc == GEMMA3_OK && i < N_SIDE_FILES) have[i] = 0; /* renamed */
    }
    if (rc != GEMMA3_OK) {
        int e = rc; /* keep the first error's message: cleanup below records none */
        for (size_t i = 0; i <= N_SIDE_FILES; i++) {
            char name[128];
            if (i < N_SIDE_FILES && !have[i]) continue;
            snprintf(name, sizeof name, "%s" TMP_SUFFIX, i < N_SIDE_FILES ? side_files[i] : "model.safetensors");
            if (snprintf(dst, sizeof dst, "%s/%s", dst_dir, name) < (int)sizeof dst) unlink(dst);
        }
        if (created) rmdir(dst_dir);
        rc = e;
    }
    free(cfg);
    return rc;
}
