/* A minimal test harness: each TEST prints "ok NAME" or "FAIL NAME: file:line: what",
 * and tests/run.sh counts those lines across every test program.  A CHECK that fails
 * ends its test at once; the program goes on with the next one. */
#ifndef CHECK_H
#define CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int check_failed_now, check_failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (!(cond)) {                                                              \
            printf("FAIL %s: %s:%d: %s\n", check_current, __FILE__, __LINE__, #cond); \
            check_failed_now = 1;                                                   \
            return;                                                                 \
        }                                                                           \
    } while (0)

#define CHECKF(cond, ...)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            printf("FAIL %s: %s:%d: %s: ", check_current, __FILE__, __LINE__, #cond); \
            printf(__VA_ARGS__);                                                    \
            printf("\n");                                                           \
            check_failed_now = 1;                                                   \
            return;                                                                 \
        }                                                                           \
    } while (0)

static const char *check_current = "";

#define RUN(fn)                                                 \
    do {                                                        \
        check_current = #fn;                                    \
        check_failed_now = 0;                                   \
        fflush(stdout);                                         \
        fn();                                                   \
        if (!check_failed_now)                                  \
            printf("ok %s\n", #fn);                             \
        else                                                    \
            check_failures++;                                   \
        fflush(stdout);                                         \
    } while (0)

#define CHECK_DONE() return check_failures ? 1 : 0

/* The sanitizer a test program was built with (make SAN=1, TSAN=1): a few checks measure
 * what a sanitizer changes (RSS, which counts its shadow memory; immediate reuse, which
 * ASan's quarantine delays) or cannot run under it. */
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_ASAN 1
#endif
#endif
#ifndef CHECK_ASAN
#define CHECK_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#define CHECK_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHECK_TSAN 1
#endif
#endif
#ifndef CHECK_TSAN
#define CHECK_TSAN 0
#endif

/* Resident memory of the process, in bytes. */
static inline long check_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

/* Under valgrind (SC_TEST_UNDER_VALGRIND set) or a sanitizer, RSS also counts their
 * shadow memory, which stays: RSS bounds are checked in plain builds only. */
static inline int check_rss_is_the_heaps(void)
{
    return !getenv("SC_TEST_UNDER_VALGRIND") && !CHECK_ASAN && !CHECK_TSAN;
}

/* Runs fn in a child process with its stderr captured into out; returns the signal that
 * ended the child (0 if it exited), or -1 if it could not be started. */
static inline int check_run_child(void (*fn)(void), char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds))
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fds[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

#endif
