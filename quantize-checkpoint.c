/* quantize-checkpoint.c - gemma3_quantize: a Q8_0/Q4_0 copy of a checkpoint directory that
 * loads in place. The weights are streamed through weights.c's quantizing writer; the side files
 * (config, tokenizer, ...) are copied; every output is written under a temporary name and renamed
 * only when all are complete, so a failure leaves no partial checkpoint. */
#include <dirent.h>
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

/* Copies src to dst byte for byte. src is a file of the checkpoint: anything but a regular file
 * (a FIFO would be waited on for a writer, /dev/zero copied without end) is refused at once. */
static int copy_file(const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (in < 0) return g3_error(GEMMA3_ERR_IO, "%s: cannot open: %s", src, strerror(errno));
    struct stat st;
    const char *why = fstat(in, &st) != 0 ? strerror(errno) : !S_ISREG(st.st_mode) ? "not a regular file" : NULL;
    if (why) {
        close(in);
        return g3_error(GEMMA3_ERR_IO, "%s: %s", src, why);
    }
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

/* The output directory must hold exactly what this call writes, or a stale generation_config.json
 * or a foreign tokenizer.model left there would be read with the new weights. Checking (remove
 * = 0): an entry is an error, unless replace allows it (a subdirectory never: it is not
 * removed). Removing (remove = 1, once every new file is complete): every entry but the
 * temporaries of this call goes. */
static int clear_dir(const char *dir, int replace, int remove) {
    DIR *d = opendir(dir);
    if (!d) return g3_error(GEMMA3_ERR_IO, "%s: cannot list the directory: %s", dir, strerror(errno));
    int rc = GEMMA3_OK;
    size_t ls = strlen(TMP_SUFFIX);
    for (struct dirent *e; rc == GEMMA3_OK && (e = readdir(d));) {
        const char *n = e->d_name;
        size_t ln = strlen(n);
        struct stat st;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        if (remove) {
            if ((ln <= ls || strcmp(n + ln - ls, TMP_SUFFIX)) && unlinkat(dirfd(d), n, 0) != 0)
                rc = g3_error(GEMMA3_ERR_IO, "%s/%s: cannot remove: %s", dir, n, strerror(errno));
        } else if (!replace) {
            rc = g3_error(GEMMA3_ERR_ARG, "%s: is not empty (it holds %s): the output directory "
                          "must hold only what is written (--force replaces what is there)", dir, n);
        } else if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            rc = g3_error(GEMMA3_ERR_ARG, "%s: holds the directory %s, which is never removed",
                          dir, n);
        }
    }
    closedir(d);
    return rc;
}

int gemma3_quantize(const char *src_dir, const char *dst_dir, enum gemma3_weight_type type,
                    int n_threads) {
    return gemma3_quantize_ex(src_dir, dst_dir, type, n_threads, 0);
}

int gemma3_quantize_ex(const char *src_dir, const char *dst_dir, enum gemma3_weight_type type,
                       int n_threads, int flags) {
    if (!src_dir || !dst_dir) return g3_error(GEMMA3_ERR_ARG, "quantize: no directory given");
    const int wt = (int)type;
    if (!gemma3_weight_type_is_quantized(type)) /* a block type or a recipe */
        return g3_error(GEMMA3_ERR_ARG, "quantize: weight type %s is not one of %s",
                        gemma3_weight_type_name(type), gemma3_weight_type_list(1));
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
    int replace = (flags & GEMMA3_QUANTIZE_REPLACE) != 0;
    if (rc == GEMMA3_OK && !created) rc = clear_dir(dst_dir, replace, 0);
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
    if (rc == GEMMA3_OK && !created) rc = clear_dir(dst_dir, replace, 1);
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
