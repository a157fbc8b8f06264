/*
 * outfile.c - every file kiln writes (models, tensor dumps, logits) goes
 * through here: written to a temporary beside the target and renamed over it
 * only when complete, so a failure or an interrupt never leaves a truncated or
 * half-replaced file. Also refuses an output that is the command's own input,
 * keeps the target's mode (or the umask for a new file), writes straight to
 * devices and FIFOs, and keeps a list of live temporaries for signal handlers.
 */
#include "gguf_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The temporaries that exist right now, for gguf_outfile_remove_temps() in a
 * signal handler. Process-wide by nature (signals are): a fixed table of atomic
 * pointers, so the handler neither allocates nor takes a lock. */
#define MAX_LIVE 16
static char *_Atomic live[MAX_LIVE];

static int track(char *tmp) {
    for (int i = 0; i < MAX_LIVE; i++) {
        char *expected = NULL;
        if (atomic_compare_exchange_strong(&live[i], &expected, tmp)) return i;
    }
    return -1; /* more than MAX_LIVE at once: still written safely, just not cleaned on a signal */
}

static void untrack(int slot) {
    if (slot >= 0) atomic_store(&live[slot], NULL);
}

void gguf_outfile_remove_temps(void) {
    for (int i = 0; i < MAX_LIVE; i++) {
        char *p = atomic_exchange(&live[i], NULL);
        if (p) unlink(p); /* async-signal-safe */
    }
}

/* dir/.NAME.XXXXXX-style name for the temporary: the target's name cut so the
 * whole stays within NAME_MAX (a legal 255-byte target name must still work). */
static char *temp_name(const char *path, unsigned attempt) {
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dir_len;
    size_t base_len = strlen(base);
    const size_t suffix = 12; /* ".tmp." + 6 characters + the leading '.' */
    if (base_len > NAME_MAX - suffix) base_len = NAME_MAX - suffix;
    char *tmp = malloc(dir_len + base_len + suffix + 1);
    if (!tmp) return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long x = (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 16) ^ (attempt * 2654435761u);
    char rnd[7];
    for (int i = 0; i < 6; i++, x /= 36) rnd[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[x % 36];
    rnd[6] = 0;
    sprintf(tmp, "%.*s.%.*s.tmp.%s", (int)dir_len, path, (int)base_len, base, rnd);
    return tmp;
}

static bool fail(char *err, size_t errlen, const char *what, const char *path, int e) {
    gguf_fmt(err, errlen, "%s %s: %s", what, path, strerror(e));
    return false;
}

bool gguf_outfile_same(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool gguf_outfile_check_inputs(const char *path, const char *const *inputs, size_t n_inputs, char *err,
                               size_t errlen) {
    struct stat so;
    if (!path || stat(path, &so) != 0 || !S_ISREG(so.st_mode)) return true; /* only a file can be lost */
    for (size_t i = 0; i < n_inputs; i++) {
        struct stat si;
        if (!inputs[i] || stat(inputs[i], &si) != 0 || si.st_dev != so.st_dev || si.st_ino != so.st_ino) continue;
        gguf_fmt(err, errlen, "the output %s is the input file %s: refusing to overwrite it (choose another name)",
                 path, inputs[i]);
        return false;
    }
    return true;
}

/* The name a dangling symlink leads to (the chain followed hop by hop, each relative
 * link read against its own directory): the file to create, so that the link is kept
 * and resolves once the output is written. NULL with errno set when it cannot be read. */
static char *follow_dangling(const char *path) {
    char *cur = strdup(path);
    for (int hop = 0; cur && hop < 40; hop++) {
        struct stat ls;
        if (lstat(cur, &ls) != 0 || !S_ISLNK(ls.st_mode)) return cur;
        char link[PATH_MAX];
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) break;
        link[n] = 0;
        const char *slash = strrchr(cur, '/');
        size_t dir_len = link[0] != '/' && slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(dir_len + (size_t)n + 1);
        if (!next) break;
        memcpy(next, cur, dir_len);
        memcpy(next + dir_len, link, (size_t)n + 1);
        free(cur);
        cur = next;
    }
    int e = cur ? ELOOP : errno;
    if (e == 0) e = ENOMEM;
    free(cur);
    errno = e;
    return NULL;
}

bool gguf_outfile_open(struct gguf_outfile *o, const char *path, const char *input, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->slot = -1;
    if (!path || !*path) {
        gguf_fmt(err, errlen, "no output file name");
        return false;
    }
    if (input && !gguf_outfile_check_inputs(path, &input, 1, err, errlen)) return false;
    /* a symlink is kept and its target replaced, as an editor would (a device or FIFO is
     * opened by the name given: /dev/stdout resolves to a pipe that has no path); a
     * dangling one gets its target created, as a shell's > would; a loop is refused */
    struct stat st;
    bool exists = stat(path, &st) == 0;
    if (!exists && errno == ELOOP) return fail(err, errlen, "cannot write", path, ELOOP);
    char *target = exists && S_ISREG(st.st_mode) ? realpath(path, NULL) : exists ? strdup(path) : NULL;
    if (exists && !target) return fail(err, errlen, "cannot resolve", path, errno);
    if (!exists && !(target = follow_dangling(path))) return fail(err, errlen, "cannot write", path, errno);
    o->path = target;
    if (exists && S_ISDIR(st.st_mode)) {
        gguf_fmt(err, errlen, "cannot write %s: it is a directory", path);
        gguf_outfile_abort(o);
        return false;
    }
    /* the file the shell redirected our stdout or stderr to (--logits /dev/stdout > f):
     * replacing it would detach the redirection, so write through that descriptor */
    for (int std = 1; exists && S_ISREG(st.st_mode) && std <= 2; std++) {
        struct stat ss;
        if (fstat(std, &ss) != 0 || ss.st_dev != st.st_dev || ss.st_ino != st.st_ino) continue;
        int fd = dup(std);
        if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) close(fd);
            gguf_outfile_abort(o);
            return fail(err, errlen, "cannot write", path, e);
        }
        fflush(std == 1 ? stdout : stderr); /* what is already written comes first */
        return true;
    }
    if (exists && !S_ISREG(st.st_mode)) { /* a device or FIFO: nothing to replace, write to it */
        int fd = open(target, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) close(fd);
            gguf_outfile_abort(o);
            return fail(err, errlen, "cannot open", path, e);
        }
        return true;
    }
    int fd = -1;
    for (unsigned attempt = 0; fd < 0 && attempt < 64; attempt++) {
        free(o->tmp);
        if (!(o->tmp = temp_name(target, attempt))) {
            gguf_outfile_abort(o);
            return fail(err, errlen, "cannot write", path, ENOMEM);
        }
        /* 0666 through the umask, like any new file; a replaced file keeps its own mode below */
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        int e = errno;
        if (strcmp(target, path) != 0)
            gguf_fmt(err, errlen, "cannot create a temporary file beside %s (where the link %s leads): %s", target,
                     path, strerror(e));
        else
            gguf_fmt(err, errlen, "cannot create a temporary file beside %s: %s", path, strerror(e));
        gguf_outfile_abort(o);
        return false;
    }
    o->slot = track(o->tmp);
    if (exists) (void)fchmod(fd, st.st_mode & 07777);
    if (!(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        gguf_outfile_abort(o);
        return fail(err, errlen, "cannot write", path, e);
    }
    return true;
}

bool gguf_outfile_commit(struct gguf_outfile *o, char *err, size_t errlen) {
    int e = 0;
    if (!o->f) e = EBADF;
    else if (ferror(o->f) || fflush(o->f) != 0) e = errno ? errno : EIO;
    else if (o->tmp && fsync(fileno(o->f)) != 0) e = errno;
    if (o->f && fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
    o->f = NULL;
    if (!e && o->tmp && rename(o->tmp, o->path) != 0) e = errno;
    if (e) {
        gguf_fmt(err, errlen, "cannot write %s: %s", o->path ? o->path : "", strerror(e));
        gguf_outfile_abort(o);
        return false;
    }
    untrack(o->slot);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    o->slot = -1;
    return true;
}

void gguf_outfile_abort(struct gguf_outfile *o) {
    if (o->f) fclose(o->f);
    untrack(o->slot);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    o->slot = -1;
}
