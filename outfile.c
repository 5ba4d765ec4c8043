/* outfile.c - the one way every file the program writes is opened and finished.
 *
 * The rule: a regular file (reached directly or through symbolic links) or a path that does not
 * exist yet is written to a temporary beside its final name and renamed over it only once every
 * byte reached the disk, so a crash, a full disk or a kill leaves the previous file as it was;
 * a symbolic link stays a link (its target is what is replaced). Anything else is written as what
 * it is: a character device (/dev/null, /dev/full, a terminal), a FIFO or a socket is opened and
 * written directly, and so is a link to a file descriptor (/dev/stdout, /dev/fd/N,
 * /proc/self/fd/N: renaming over those would replace the link, and the program's own output
 * would go nowhere). A directory and a block device are refused. Temporaries that a killed save
 * left behind (PATH.tmp.PID of a process that no longer exists) are removed by the next save. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemma3.h"
#include "util.h"

struct gemma3_outfile {
    FILE *f;      /* writes go to fd through write_fd, which keeps the first error's errno */
    int fd, err;
    char *path;   /* as given, for messages */
    char *target; /* the regular file the rename replaces; NULL when written directly */
    char *tmp;    /* target.tmp.PID */
};

/* Whether following path's symbolic links passes through a link to a file descriptor
 * (/proc/PID/fd/N, /dev/fd/N, /dev/stdout -> /proc/self/fd/1): what such a link names is an
 * open file, not a directory entry one may rename over. */
static int through_descriptor_link(const char *path) {
    char cur[PATH_MAX], next[PATH_MAX];
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) return 0;
    for (int hop = 0; hop < 40; hop++) {
        if (!strncmp(cur, "/proc/", 6) || !strncmp(cur, "/dev/fd/", 8)) return 1;
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
        ssize_t n = readlink(cur, next, sizeof next - 1);
        if (n < 0) return 0;
        next[n] = '\0';
        if (next[0] == '/') {
            memcpy(cur, next, (size_t)n + 1);
        } else { /* relative to the link's directory */
            char *slash = strrchr(cur, '/');
            size_t dir = slash ? (size_t)(slash - cur) + 1 : 0;
            if (dir + (size_t)n + 1 > sizeof cur) return 0;
            memcpy(cur + dir, next, (size_t)n + 1);
        }
    }
    return 0;
}

/* Removes base.tmp.PID files in base's directory whose process is gone: what a save killed
 * between creating its temporary and renaming it left behind. */
static void remove_stale_temps(const char *target) {
    const char *slash = strrchr(target, '/');
    char dir[PATH_MAX];
    const char *base = slash ? slash + 1 : target;
    if (snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - target) + 1 : 1,
                 slash ? target : ".") >= (int)sizeof dir)
        return;
    DIR *d = opendir(dir);
    if (!d) return;
    size_t bl = strlen(base);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, bl) || strncmp(n + bl, ".tmp.", 5) || !n[bl + 5]) continue;
        char *end;
        long pid = strtol(n + bl + 5, &end, 10);
        if (*end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) unlinkat(dirfd(d), n, 0);
    }
    closedir(d);
}

static ssize_t write_fd(void *cookie, const char *buf, size_t n) {
    gemma3_outfile *o = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(o->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (!o->err) o->err = w < 0 ? errno : ENOSPC;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)w;
    }
    return (ssize_t)done;
}

static void outfile_free(gemma3_outfile *o) {
    free(o->path);
    free(o->target);
    free(o->tmp);
    free(o);
}

/* Opens o->tmp beside o->target (mode of the file it replaces, if any). */
static int open_temporary(gemma3_outfile *o, const struct stat *old) {
    size_t n = strlen(o->target) + 32;
    if (!(o->tmp = malloc(n))) return -1;
    snprintf(o->tmp, n, "%s.tmp.%ld", o->target, (long)getpid());
    remove_stale_temps(o->target);
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && unlink(o->tmp) == 0) /* ours, from a reused pid */
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 && old) (void)fchmod(fd, old->st_mode & 07777);
    return fd;
}

int gemma3_outfile_open(const char *path, gemma3_outfile **out) {
    *out = NULL;
    if (!path || !*path) return g3_error(GEMMA3_ERR_ARG, "an empty output file name");
    gemma3_outfile *o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path))) {
        free(o);
        return g3_error(GEMMA3_ERR_NOMEM, "%s: out of memory", path);
    }
    struct stat st, lst;
    int exists = stat(path, &st) == 0, err = exists ? 0 : errno, fd = -1;
    const char *refused = NULL;
    if (exists && S_ISDIR(st.st_mode)) {
        refused = "is a directory, not a file";
    } else if (exists && S_ISBLK(st.st_mode)) {
        refused = "is a block device (a disk is never written raw)";
    } else if (!exists && err != ENOENT) {
        /* err says why */
    } else if (exists ? S_ISREG(st.st_mode) && !through_descriptor_link(path)
                      : lstat(path, &lst) != 0) {
        /* a regular file (a link to one stays a link: its file is replaced) or a new path */
        o->target = exists ? realpath(path, NULL) : strdup(path);
        fd = o->target ? open_temporary(o, exists ? &st : NULL) : -1;
        err = errno;
    } else {
        /* a device, FIFO, socket, descriptor link or dangling link: written as it is.
         * O_APPEND: through /dev/stdout to a file the shell opened with >>, the output follows
         * what is there (with >, the file is empty anyway) */
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0666);
        err = errno;
    }
    o->fd = fd;
    if (fd >= 0 && !(o->f = fopencookie(o, "wb", (cookie_io_functions_t){.write = write_fd})))
        err = errno;
    if (!o->f) {
        if (fd >= 0) close(fd);
        if (o->tmp && fd >= 0) unlink(o->tmp);
        int rc = g3_error(GEMMA3_ERR_IO, "%s: cannot %s: %s", path,
                          refused ? "write" : o->target ? "create" : "open for writing",
                          refused ? refused : strerror(err));
        outfile_free(o);
        return rc;
    }
    *out = o;
    return GEMMA3_OK;
}

FILE *gemma3_outfile_stream(gemma3_outfile *o) { return o->f; }

int gemma3_outfile_commit(gemma3_outfile *o) {
    if (!o) return g3_error(GEMMA3_ERR_ARG, "no output file");
    int err = fflush(o->f) != 0 || ferror(o->f) ? (o->err ? o->err : EIO) : 0;
    if (!err && o->tmp && fsync(o->fd) != 0) err = errno;
    fclose(o->f);
    if (close(o->fd) != 0 && !err) err = errno;
    if (!err && o->tmp && rename(o->tmp, o->target) != 0) err = errno;
    if (err && o->tmp) unlink(o->tmp);
    int rc = err ? g3_error(GEMMA3_ERR_IO, "%s: cannot write: %s", o->path, strerror(err)) : GEMMA3_OK;
    outfile_free(o);
    return rc;
}

void gemma3_outfile_discard(gemma3_outfile *o) {
    if (!o) return;
    fclose(o->f);
    close(o->fd);
    if (o->tmp) unlink(o->tmp);
    outfile_free(o);
}
