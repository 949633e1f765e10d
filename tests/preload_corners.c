/* What a preloaded malloc meets in a real process, run by tests/e2e_preload.sh as
 * LD_PRELOAD=build/libscalloc.so build/tests/preload_corners DIR (DIR holds copies of
 * libpreload_tls.so).  Built against glibc alone, like any program: without the preload
 * the first test fails, and the others would test glibc.  With --jemalloc, run as
 * LD_PRELOAD="build/libscalloc.so libjemalloc.so.2", it tests pointers of another
 * allocator whose usable size is below the heap's smallest object: jemalloc's, which
 * the drop-in meets in programs that link jemalloc (h2load, redis-server).
 *
 * - the C library's allocation functions are scalloc's, from the first allocation on;
 * - memalign, posix_memalign and aligned_alloc with odd sizes and alignments (memalign
 *   rounds an alignment that is not a power of two up);
 * - malloc_usable_size: every usable byte can be written without touching a neighbour;
 * - calloc of sizes that overflow or cannot be had, and of 3 GiB, zero where read;
 * - realloc shrinking, growing and to 0, the contents kept;
 * - dlopen of twenty libraries with TLS: the dynamic linker allocates the thread vector
 *   (and grows it past the one it made at start, before malloc was scalloc's) and each
 *   thread's blocks with malloc, and frees them at thread exit and dlclose;
 * - threads whose key destructors allocate and free, in several rounds, and objects
 *   freed after the thread that allocated them has exited;
 * - fork while threads allocate, with fork handlers that allocate registered by a library
 *   (tests/atfork_alloc.c) whose constructor ran before the heap's;
 * - fork from a thread while others allocate, the child allocating and exec'ing a program
 *   under the same preload, and posix_spawn;
 * - memory from glibc's own allocator (__libc_malloc) measured, grown and freed through
 *   the drop-in, which hands it back to glibc (alloc/foreign.c);
 * - C++'s operator new and delete, which the drop-in defines, on the heap. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>

#include "check.h"

extern char **environ;
static const char *libdir;

struct sc_stats_prefix {
    uint64_t heap_alloc, heap_inuse, heap_idle, heap_released, heap_sys, stack_inuse;
    uint64_t mallocs, frees;
};
static void (*read_stats)(void *);

static uint64_t mallocs_now(void)
{
    static char buf[8192];       /* struct sc_stats, whose head is sc_stats_prefix */
    read_stats(buf);
    return ((struct sc_stats_prefix *)buf)->mallocs;
}

/* Through pointers, so the compiler neither folds nor drops the calls. */
static void *(*volatile malloc_)(size_t) = malloc;
static void *(*volatile calloc_)(size_t, size_t) = calloc;
static void *volatile got;

static void malloc_is_scalloc(void)
{
    read_stats = (void (*)(void *))dlsym(RTLD_DEFAULT, "sc_read_stats");
    CHECK(read_stats != NULL);
    uint64_t m0 = mallocs_now();
    void *p = malloc_(100);
    char *s = strdup("preloaded");
    CHECK(p && s && mallocs_now() - m0 == 2);
    CHECK(malloc_usable_size(p) == 112);
    free(p);
    free(s);
}

static void aligned_odd_sizes(void)
{
    static const size_t aligns[] = { 1, 2, 3, 8, 24, 48, 100, 4096, 5000, 16384, 65536, (size_t)1 << 20 };
    static const size_t sizes[] = { 0, 1, 3, 17, 100, 4097, 40000 };
    for (unsigned a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
        size_t pow2 = 1;
        while (pow2 < aligns[a])
            pow2 <<= 1;
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t n = sizes[s];
            char *p = memalign(aligns[a], n);
            CHECKF(p && (uintptr_t)p % pow2 == 0 && malloc_usable_size(p) >= n, "memalign(%zu, %zu) = %p", aligns[a], n,
                   (void *)p);
            memset(p, 0x5a, n);
            free(p);
            void *q = NULL;
            int rc = posix_memalign(&q, aligns[a], n);
            if (aligns[a] == pow2 && aligns[a] >= sizeof(void *)) {
                CHECKF(rc == 0 && (uintptr_t)q % pow2 == 0, "posix_memalign(%zu, %zu) = %d", aligns[a], n, rc);
                free(q);
            } else {
                CHECK(rc == EINVAL);
            }
        }
    }
    void *p = aligned_alloc(64, 3);     /* C11 let a size that is no multiple fail; glibc serves it */
    CHECK(p && (uintptr_t)p % 64 == 0);
    free(p);
}

/* Every usable byte of a run of neighbours written, then each checked. */
static void usable_size_is_usable(void)
{
    enum { N = 400 };
    static unsigned char *ps[N];
    static size_t us[N];
    for (int i = 0; i < N; i++) {
        size_t n = (size_t)i * i % 9000;
        ps[i] = malloc(n);
        us[i] = malloc_usable_size(ps[i]);
        CHECKF(ps[i] && us[i] >= n, "malloc(%zu): %zu usable", n, us[i]);
        memset(ps[i], i & 0xff, us[i]);
    }
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; k < us[i]; k++)
            CHECKF(ps[i][k] == (i & 0xff), "object %d byte %zu", i, k);
        free(ps[i]);
    }
}

static void calloc_huge(void)
{
    errno = 0;
    CHECK((got = calloc_((size_t)1 << 40, (size_t)1 << 40)) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK((got = calloc_(1, SIZE_MAX - 100)) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK((got = calloc_(1, (size_t)1 << 45)) == NULL && errno == ENOMEM);    /* more than the heap reserved */
    size_t big = (size_t)3 << 30;
    unsigned char *p = calloc_(1, big);
    CHECK(p != NULL);
    for (size_t off = 0; off < big; off += big / 7 + 4093)
        CHECKF(p[off] == 0, "byte %zu", off);
    p[big - 1] = 1;
    free(p);
}

static void realloc_shrink_grow(void)
{
    unsigned char *p = malloc(1 << 20);
    for (int i = 0; i < 1 << 20; i++)
        p[i] = (unsigned char)(i * 7);
    p = realloc(p, 100000);                          /* large to large */
    CHECK(p && malloc_usable_size(p) >= 100000);
    p = realloc(p, 3000);                            /* large to small */
    CHECK(p && malloc_usable_size(p) >= 3000 && malloc_usable_size(p) < 4096);
    p = realloc(p, 5);                               /* small to the smallest */
    CHECK(p && malloc_usable_size(p) >= 5);
    for (int i = 0; i < 5; i++)
        CHECK(p[i] == (unsigned char)(i * 7));
    p = realloc(p, 1 << 22);                         /* and up again */
    CHECK(p && p[4] == 28);
    CHECK(realloc(p, 0) == NULL);
}

struct tls_lib {
    void *h;
    int (*touch)(int);
};
static struct tls_lib libs[20];

static void *tls_thread(void *arg)
{
    intptr_t id = (intptr_t)arg, bad = 0;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 20; i++)
            if (libs[i].touch((int)id * 32 + i) != (int)id * 32 + i)
                bad++;
    return (void *)bad;
}

static void dlopen_tls(void)
{
    char path[4096];
    uint64_t m0 = mallocs_now();
    for (int i = 0; i < 20; i++) {
        snprintf(path, sizeof path, "%s/libpreload_tls%d.so", libdir, i);
        libs[i].h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        CHECKF(libs[i].h, "dlopen %s: %s", path, dlerror());
        libs[i].touch = (int (*)(int))dlsym(libs[i].h, "preload_tls_touch");
        CHECK(libs[i].touch);
    }
    pthread_t t[8];
    for (intptr_t k = 0; k < 8; k++)
        CHECK(pthread_create(&t[k], NULL, tls_thread, (void *)(k + 1)) == 0);
    CHECK(tls_thread((void *)0) == NULL);             /* the main thread: its vector grows */
    for (int k = 0; k < 8; k++) {
        void *bad;
        pthread_join(t[k], &bad);
        CHECK(bad == NULL);
    }
    CHECK(mallocs_now() - m0 > 20 * 8);               /* the TLS blocks came from the heap */
    for (int i = 0; i < 20; i++)
        CHECK(dlclose(libs[i].h) == 0);
}

static pthread_key_t key;
static _Atomic int rounds_seen;
static void *leftovers[64];
static _Atomic int nleft;

static void key_destructor(void *v)
{
    intptr_t round = (intptr_t)v;
    char *p = malloc(100 + round * 1000);
    memset(p, 1, 100);
    free(p);
    leftovers[atomic_fetch_add(&nleft, 1) % 64] = strdup("left behind by a dying thread");
    atomic_fetch_add(&rounds_seen, 1);
    if (round < 3)
        pthread_setspecific(key, (void *)(round + 1));   /* another destructor round */
}

static void *dying_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        free(malloc(i * 13 % 3000));
    pthread_setspecific(key, (void *)1);
    return NULL;
}

static void thread_exit_destructors(void)
{
    CHECK(pthread_key_create(&key, key_destructor) == 0);
    for (int k = 0; k < 8; k++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, dying_thread, NULL) == 0);
        pthread_join(t, NULL);
    }
    CHECK(rounds_seen == 8 * 3);
    for (int i = 0; i < 24; i++) {
        CHECK(leftovers[i] && !strcmp(leftovers[i], "left behind by a dying thread"));
        free(leftovers[i]);
    }
}

static _Atomic int stop;
static void *churn(void *arg)
{
    (void)arg;
    void *keep[32] = { 0 };
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        free(keep[i % 32]);
        keep[i % 32] = malloc(i * 37 % 5000);
    }
    for (int i = 0; i < 32; i++)
        free(keep[i]);
    return NULL;
}

static void fork_exec(void)
{
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        CHECK(pthread_create(&t[k], NULL, churn, NULL) == 0);
    for (int i = 0; i < 50; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* The child: the heap usable at once, then a program under the same preload. */
            char *p = malloc(1000), *q = strdup("child");
            free(p);
            if (strcmp(q, "child"))
                _exit(3);
            free(q);
            if (i % 10 == 0) {
                execl("/bin/sh", "sh", "-c", "exit 7", (char *)NULL);
                _exit(4);
            }
            _exit(7);
        }
        CHECK(pid > 0);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 7, "child %d: status %#x", i, st);
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    pid_t pid;
    char *argv[] = { "sh", "-c", "case \"$LD_PRELOAD\" in *libscalloc.so*) exit 0;; esac; exit 1", NULL };
    CHECK(posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) == 0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

extern void *__libc_malloc(size_t);

static void foreign_pointers(void)
{
    unsigned char *p = __libc_malloc(100);
    CHECK(p);
    memset(p, 7, 100);
    CHECK(malloc_usable_size(p) >= 100);
    uint64_t m0 = mallocs_now();
    p = realloc(p, 5000);                           /* moves onto the heap */
    CHECK(p && p[99] == 7 && mallocs_now() - m0 == 1 && malloc_usable_size(p) == 5376);
    free(p);
    free(__libc_malloc(3000));                      /* straight back to glibc */
}

/* jemalloc's 8-byte objects (mallocx: jemalloc's own entry, so the pointer is jemalloc's
 * whatever malloc is), grown and shrunk through the drop-in's realloc: onto the heap, the
 * contents kept. */
static void foreign_small_realloc(void)
{
    void *(*mallocx)(size_t, int) = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mallocx");
    CHECKF(mallocx, "no jemalloc in the process (LD_PRELOAD=\"%s\")", getenv("LD_PRELOAD"));
    for (size_t n = 1; n <= 24; n++) {
        unsigned char *p = mallocx(8, 0);
        CHECK(p && malloc_usable_size(p) == 8);
        memset(p, 0x5a, 8);
        uint64_t m0 = mallocs_now();
        p = realloc(p, n);
        CHECKF(p && mallocs_now() - m0 == 1 && malloc_usable_size(p) >= n, "realloc to %zu", n);
        for (size_t i = 0; i < (n < 8 ? n : 8); i++)
            CHECKF(p[i] == 0x5a, "realloc to %zu: byte %zu", n, i);
        free(p);
    }
}

static void cxx_operators(void)
{
    void *(*new_)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
    void *(*new_aligned)(size_t, size_t) = (void *(*)(size_t, size_t))dlsym(RTLD_DEFAULT, "_ZnwmSt11align_val_t");
    void (*delete_sized)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "_ZdlPvm");
    CHECK(new_ && new_aligned && delete_sized);
    uint64_t m0 = mallocs_now();
    void *p = new_(40), *q = new_aligned(100, 256);
    CHECK(p && q && (uintptr_t)q % 256 == 0 && mallocs_now() - m0 == 2);
    delete_sized(p, 40);
    delete_sized(q, 100);
}

/* tests/atfork_alloc.c: a library linked into this program registered fork handlers that
 * allocate before the heap registered its own; forks under threads must not deadlock. */
int atfork_alloc_check(int rounds, unsigned seconds);

static void fork_runs_allocating_atfork_handlers(void)
{
    int r = atfork_alloc_check(30, 60);
    CHECKF(r == 0, "%s (%d)", r == -SIGALRM ? "fork deadlocked" : r > 0 ? "a child failed" : "a handler did not run", r);
}

int main(int argc, char **argv)
{
    libdir = argc > 1 ? argv[1] : ".";
    RUN(malloc_is_scalloc);
    if (!read_stats)
        return 1;
    if (!strcmp(libdir, "--jemalloc")) {
        RUN(foreign_small_realloc);
        CHECK_DONE();
    }
    RUN(aligned_odd_sizes);
    RUN(usable_size_is_usable);
    RUN(calloc_huge);
    RUN(realloc_shrink_grow);
    RUN(dlopen_tls);
    RUN(thread_exit_destructors);
    RUN(fork_runs_allocating_atfork_handlers);
    RUN(fork_exec);
    RUN(foreign_pointers);
    RUN(cxx_operators);
    CHECK_DONE();
}
