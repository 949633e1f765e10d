/* Logging: timestamped, levelled lines on stderr, and the optional access log.
 *
 * Each line is formatted into one buffer and written with one write(2), so lines from
 * different workers never interleave.  The access log keeps one descriptor number for
 * the life of the process: a reopen (SIGHUP) opens the new file and dup2()s it onto that
 * number, which swaps the file behind it atomically, so a worker that read the number a
 * moment before still writes to an open file - the old or the new one, never a closed
 * descriptor or one since reused for a socket. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <stdatomic.h>

#include "log.h"
#include "readfile.h"

static const char *const level_names[] = { "error", "warn", "info", "debug" };
static _Atomic int access_fd = -1;
/* The log's own level: set from each configuration as it is applied, read by every
 * thread (a relaxed load: a line logged at the old level during a reload is harmless). */
static _Atomic int level = LOG_INFO;

void log_set_level(int l) { atomic_store_explicit(&level, l, memory_order_relaxed); }
bool log_enabled(int l) { return l <= atomic_load_explicit(&level, memory_order_relaxed); }

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, level_names[i]))
            return i;
    return -1;
}

void log_msg(int lvl, const char *fmt, ...)
{
    if (!log_enabled(lvl))
        return;
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, ".%03ldZ %-5s ", ts.tv_nsec / 1000000, level_names[lvl]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : n + (size_t)m < sizeof line - 1 ? n + (size_t)m : sizeof line - 2;
    line[n++] = '\n';
    if (write(2, line, n) < 0) {
        /* stderr is gone; nothing better to do */
    }
}

void log_rate_limited(int lvl, time_t *last, const char *fmt, ...)
{
    time_t now = time(NULL);
    if (!log_enabled(lvl) || *last == now)
        return;
    *last = now;
    char line[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_msg(lvl, "%s", line);
}

/* Opening never waits: O_NONBLOCK makes a FIFO without a reader fail at once (ENXIO)
 * instead of blocking the main thread until one comes, which hung --check, start and
 * SIGHUP.  A regular file, a character device (/dev/null, /dev/stdout on a terminal) or a
 * FIFO some process reads (/dev/stdout in a container) is written as before, blocking. */
static int open_log(const char *path, char *why, size_t whylen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
    struct stat st;
    if (fd < 0) {
        int err = errno;
        if (err == ENXIO && !stat(path, &st))    /* what would not take a writer */
            snprintf(why, whylen, "%s", S_ISFIFO(st.st_mode) ? "a FIFO that no process reads (h2park does not wait for one)"
                                                             : file_kind(st.st_mode));
        else
            snprintf(why, whylen, "%s", strerror(err));
        return -1;
    }
    if (fstat(fd, &st) || fcntl(fd, F_SETFL, O_APPEND)) {
        snprintf(why, whylen, "%s", strerror(errno));
        close(fd);
        return -1;
    }
    if (!(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        snprintf(why, whylen, "%s, not a file", file_kind(st.st_mode));   /* a block device */
        close(fd);
        return -1;
    }
    return fd;
}

int access_log_open(const char *path, char *why, size_t whylen)
{
    static int slot = -1;        /* the descriptor number, once there is one */
    bool on = path && *path;
    int fd = open_log(on ? path : "/dev/null", why, whylen);
    if (fd < 0)
        return on ? -1 : 0;
    if (slot < 0) {
        slot = fd;
    } else {
        int rc = dup3(fd, slot, O_CLOEXEC);
        close(fd);
        if (rc < 0)
            return snprintf(why, whylen, "%s", strerror(errno)), -1;
    }
    /* Off: writers in flight land in /dev/null; new ones see -1 and skip. */
    atomic_store(&access_fd, on ? slot : -1);
    return 0;
}

bool access_log_enabled(void) { return atomic_load_explicit(&access_fd, memory_order_relaxed) >= 0; }

void access_log_write(const char *line, size_t len)
{
    int fd = atomic_load_explicit(&access_fd, memory_order_relaxed);
    if (fd >= 0 && write(fd, line, len) < 0)
        log_msg(LOG_WARN, "access log: %s", strerror(errno));
}
