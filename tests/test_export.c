/* Unit tests of the C library's malloc family on the heap (alloc/export.c, linked into
 * this program as it is into the daemon): that libc's own callers reach it, fundamental
 * alignment, every alignment from 1 byte to 4 MiB through each aligned entry point, the
 * errors and errno of each function, realloc's corner cases, and overflow; and fork with
 * fork handlers that allocate, registered by a library (tests/atfork_alloc.c) whose
 * constructor ran before the heap's. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>

#include "check.h"
#include "scalloc.h"

static uint64_t mallocs_now(void)
{
    struct sc_stats st;
    sc_read_stats(&st);
    return st.mallocs;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void libc_callers_reach_the_heap(void)
{
    uint64_t m0 = mallocs_now();
    void *p = malloc(100);
    CHECK(p && sc_usable_size(p) == 112 && malloc_usable_size(p) == 112);
    CHECK(mallocs_now() - m0 == 1);
    free(p);
    /* glibc's own allocations: strdup, a stdio buffer, qsort's scratch array. */
    m0 = mallocs_now();
    char *s = strdup("scalloc");
    CHECK(s && mallocs_now() - m0 == 1 && sc_usable_size(s) == 8);
    free(s);
    m0 = mallocs_now();
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f && fgetc(f) != EOF);
    CHECK(mallocs_now() - m0 >= 2);     /* the FILE and its buffer */
    fclose(f);
    enum { N = 100000 };
    int *v = malloc(N * sizeof *v);
    for (int i = 0; i < N; i++)
        v[i] = (i * 7919) % N;
    m0 = mallocs_now();
    qsort(v, N, sizeof *v, cmp_int);
    CHECK(mallocs_now() - m0 == 1 && v[0] == 0 && v[N - 1] == N - 1);
    free(v);
}

/* C: malloc's memory suits any type that fits, up to alignof(max_align_t). */
static void fundamental_alignment(void)
{
    for (size_t n = 1; n <= 5000; n++) {
        size_t want = n >= 16 ? 16 : n >= 8 ? 8 : 1;
        void *p = malloc(n), *c = calloc(1, n), *r = realloc(NULL, n);
        CHECKF((uintptr_t)p % want == 0 && (uintptr_t)c % want == 0 && (uintptr_t)r % want == 0, "n %zu", n);
        CHECK(malloc_usable_size(p) >= n && malloc_usable_size(c) >= n);
        memset(p, 1, n);
        free(p), free(c), free(r);
    }
    void *z = malloc(0);
    CHECK(z && malloc_usable_size(z) > 0);
    free(z);
}

static void every_alignment(void)
{
    static const size_t sizes[] = { 0, 1, 8, 24, 100, 4000, 8192, 30000, 40000, 300000 };
    struct sc_stats a, b;
    sc_scavenge();
    sc_read_stats(&a);
    for (size_t align = 1; align <= ((size_t)4 << 20); align <<= 1) {
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            void *p[4] = { aligned_alloc(align, n), memalign(align, n), NULL, NULL };
            int rc = posix_memalign(&p[2], align, n);
            CHECKF(align < sizeof(void *) ? rc == EINVAL : rc == 0, "posix_memalign(%zu) = %d", align, rc);
            p[3] = memalign(align - (align > 2), n);      /* rounded up to align */
            for (int k = 0; k < 4; k++) {
                if (!p[k])
                    continue;
                CHECKF((uintptr_t)p[k] % align == 0, "entry %d: %p not aligned to %zu", k, p[k], align);
                CHECKF(malloc_usable_size(p[k]) >= n, "entry %d: %zu bytes for %zu", k, malloc_usable_size(p[k]), n);
                memset(p[k], 0xA5, n);
            }
            CHECK(p[0] && p[1] && p[3]);
            for (int k = 0; k < 4; k++)
                free(p[k]);
        }
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *v = valloc(100), *pv = pvalloc(page + 1), *p0 = pvalloc(0);
    CHECK((uintptr_t)v % page == 0 && (uintptr_t)pv % page == 0 && (uintptr_t)p0 % page == 0);
    CHECK(malloc_usable_size(pv) >= 2 * page && malloc_usable_size(p0) >= page);
    free(v), free(pv), free(p0);
    sc_scavenge();
    sc_read_stats(&b);
    /* Every aligned object freed, and the pages around the large aligned ones given back. */
    CHECK(b.heap_alloc == a.heap_alloc && b.mallocs - a.mallocs == b.frees - a.frees);
    CHECKF(b.heap_inuse <= a.heap_inuse + (64 << 10), "heap_inuse %llu -> %llu", (unsigned long long)a.heap_inuse,
           (unsigned long long)b.heap_inuse);
}

/* Called through pointers the compiler cannot see through: it knows these functions,
 * rejects constant sizes it knows too large, drops a call whose result is only compared
 * with NULL, and (clang) assumes they leave errno alone. */
static void *volatile got;
static void *(*volatile malloc_)(size_t) = malloc;
static void *(*volatile calloc_)(size_t, size_t) = calloc;
static void *(*volatile realloc_)(void *, size_t) = realloc;
static void *(*volatile reallocarray_)(void *, size_t, size_t) = reallocarray;
static void *(*volatile aligned_alloc_)(size_t, size_t) = aligned_alloc;
static void *(*volatile memalign_)(size_t, size_t) = memalign;
static void *(*volatile pvalloc_)(size_t) = pvalloc;
static int (*volatile posix_memalign_)(void **, size_t, size_t) = posix_memalign;

static void errors_and_errno(void)
{
    errno = 0;
    CHECK((got = malloc_(SIZE_MAX)) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK((got = malloc_(SIZE_MAX - 4096)) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK((got = calloc_(SIZE_MAX / 2, 3)) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK((got = reallocarray_(NULL, SIZE_MAX / 2, 3)) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK((got = aligned_alloc_(24, 48)) == NULL && errno == EINVAL);
    errno = 0;
    CHECK((got = aligned_alloc_(0, 48)) == NULL && errno == EINVAL);
    errno = 0;
    CHECK((got = memalign_(SIZE_MAX, 8)) == NULL && errno == EINVAL);
    errno = 0;
    CHECK((got = aligned_alloc_((size_t)1 << 20, SIZE_MAX)) == NULL && errno == ENOMEM);
    void *keep = &keep;
    errno = EDOM;
    CHECK(posix_memalign_(&keep, 24, 8) == EINVAL && posix_memalign_(&keep, 4, 8) == EINVAL);
    CHECK(posix_memalign_(&keep, 64, SIZE_MAX) == ENOMEM);
    CHECK(keep == &keep && errno == EDOM);      /* posix_memalign reports, it does not set errno */
    errno = 0;
    CHECK((got = pvalloc_(SIZE_MAX)) == NULL && errno == ENOMEM);
    void *p = reallocarray(NULL, 10, 10);
    CHECK(p && malloc_usable_size(p) >= 100);
    free(p);
}

static void realloc_corners(void)
{
    struct sc_stats a, b;
    unsigned char *p = realloc(NULL, 10);
    CHECK(p);
    for (int i = 0; i < 10; i++)
        p[i] = (unsigned char)i;
    sc_read_stats(&a);
    errno = 0;
    CHECK((got = realloc_(p, SIZE_MAX)) == NULL && errno == ENOMEM);     /* p stays */
    CHECK(p[9] == 9);
    p = realloc(p, 100000);
    CHECK(p && p[0] == 0 && p[9] == 9);
    p = realloc(p, 20);                /* 17..24 bytes: the 32-byte class, 16-aligned */
    CHECK(p && p[9] == 9 && (uintptr_t)p % 16 == 0 && malloc_usable_size(p) == 32);
    sc_read_stats(&a);
    CHECK((got = realloc_(p, 0)) == NULL);       /* frees, as glibc's does */
    sc_read_stats(&b);
    CHECK(b.frees - a.frees == 1 && a.heap_alloc - b.heap_alloc == 32);
    free(NULL);
    CHECK(malloc_usable_size(NULL) == 0);
}

/* tests/atfork_alloc.c: a library linked into this program registered fork handlers that
 * allocate before the heap registered its own; forks under threads must not deadlock. */
int atfork_alloc_check(int rounds, unsigned seconds);

static void fork_runs_allocating_atfork_handlers(void)
{
    int r = atfork_alloc_check(30, 60);
    CHECKF(r == 0, "%s (%d)", r == -SIGALRM ? "fork deadlocked" : r > 0 ? "a child failed" : "a handler did not run", r);
}

int main(void)
{
    RUN(libc_callers_reach_the_heap);
    RUN(fundamental_alignment);
    RUN(every_alignment);
    RUN(errors_and_errno);
    RUN(realloc_corners);
    RUN(fork_runs_allocating_atfork_handlers);
    CHECK_DONE();
}
