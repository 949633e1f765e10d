/* A library whose fork handlers allocate, as some do (a cache reset in the child, a record
 * of the fork), registered by its constructor - which runs before the heap's own: the
 * dynamic linker starts a program's libraries before the program (test_export, which
 * links the heap in) and before a preloaded library that does not depend on them
 * (preload_corners under LD_PRELOAD=libscalloc.so).  fork runs prepare handlers in the
 * reverse order of registration, so a heap that registered its handlers in its own
 * constructor took its locks before this library's prepare handler ran, and the handler's
 * malloc waited for them for ever (alloc/fork.c).
 *
 * atfork_alloc_check(rounds, seconds) runs, in a process of its own (made with _Fork, so
 * that a deadlock cannot stop the caller), that many forks while
 * two threads allocate and free, each child allocating and exiting 7, within the given
 * time.  It returns 0; the round that failed plus one; -SIGALRM if the forks did not end
 * in time (a deadlock); -1 if a handler did not run each time. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic unsigned calls[3];
static void *kept;
/* Through a pointer the compiler cannot see through: it drops a malloc whose result is
 * only freed. */
static void *(*volatile malloc_)(size_t) = malloc;

static void prepare(void)
{
    char *p = malloc_(200);
    memset(p, 1, 200);
    free(kept);
    kept = p;
    free(malloc_(1 << 20));        /* and a large object: the page heap's lock, whatever the caches hold */
    calls[0]++;
}

static void parent(void)
{
    free(malloc_(5000));
    calls[1]++;
}

static void child(void)
{
    free(malloc_(1 << 20));
    calls[2]++;
}

__attribute__((constructor)) static void register_handlers(void) { pthread_atfork(prepare, parent, child); }

static _Atomic int stop;

static void *churn(void *arg)
{
    (void)arg;
    void *keep[16] = { 0 };
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        free(keep[i % 16]);
        keep[i % 16] = malloc_(i * 53 % 70000 + 1);
    }
    for (int i = 0; i < 16; i++)
        free(keep[i]);
    return NULL;
}

static int fork_rounds(int rounds)
{
    pthread_t t[2];
    int failed = 0;
    atomic_store(&stop, 0);
    for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k], NULL, churn, NULL))
            return -1;
    for (int i = 0; i < rounds && !failed; i++) {
        unsigned in_child = calls[2];
        pid_t pid = fork();
        if (pid == 0) {
            char *p = malloc_(1000);
            _exit(p && calls[2] == in_child + 1 ? 7 : 3);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
            failed = i + 1;
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    return failed;
}

int atfork_alloc_check(int rounds, unsigned seconds)
{
    /* _Fork runs no fork handlers: the watchdog's own fork cannot deadlock. */
    pid_t pid = _Fork();
    if (pid == 0) {
        alarm(seconds);
        unsigned prepared = calls[0], parents = calls[1];
        int failed = fork_rounds(rounds);
        if (!failed && (calls[0] != prepared + (unsigned)rounds || calls[1] != parents + (unsigned)rounds))
            failed = 255;
        _exit(failed);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    if (WIFSIGNALED(st))
        return -WTERMSIG(st);
    return WEXITSTATUS(st) == 255 ? -1 : WEXITSTATUS(st);
}
