/* Unit tests of the size-class heap: the class table against Go's, rounding, alignment,
 * calloc/realloc, a randomized stress run against a shadow model, cross-thread frees,
 * thread exit, scavenging and the release of idle pages without it, stats, growth, the
 * aborts on bad frees, and regressions of races that need one particular interleaving of
 * threads (made to happen, not hoped for).  The internal header is included only to name
 * a span in those regressions. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"

/* Go's class table, carried by the repository (make test runs from its root). */
#define TSV_PATH_DEFAULT "tests/data/sizeclasses.tsv"

struct tsv_class { unsigned size, span, objects, tail, align; };
static struct tsv_class tsv[SC_NCLASS];
static int tsv_n;

static int load_tsv(void)
{
    const char *path = getenv("SIZECLASSES_TSV");
    FILE *f = fopen(path ? path : TSV_PATH_DEFAULT, "r");
    if (!f)
        return 0;
    char line[256];
    do {                                  /* a comment that says where it comes from, the header */
        if (!fgets(line, sizeof line, f)) {
            fclose(f);
            return 0;
        }
    } while (line[0] == '#');
    int cls;
    double waste;
    tsv_n = 1;
    while (tsv_n < SC_NCLASS && fgets(line, sizeof line, f)) {
        struct tsv_class *t = &tsv[tsv_n];
        if (sscanf(line, "%d %u %u %u %u %lf %u", &cls, &t->size, &t->span, &t->objects, &t->tail, &waste, &t->align) != 7 || cls != tsv_n)
            break;
        tsv_n++;
    }
    fclose(f);
    return tsv_n;
}

static void table_matches_go(void)
{
    CHECKF(load_tsv() == SC_NCLASS, "could not read 67 classes from %s (set SIZECLASSES_TSV)", TSV_PATH_DEFAULT);
    for (int c = 1; c < SC_NCLASS; c++) {
        CHECKF(sc_class_size[c] == tsv[c].size, "class %d size %u, Go %u", c, sc_class_size[c], tsv[c].size);
        CHECKF(sc_class_npages[c] * SC_PAGE_SIZE == tsv[c].span, "class %d span", c);
        CHECKF(sc_class_npages[c] * SC_PAGE_SIZE / sc_class_size[c] == tsv[c].objects, "class %d objects", c);
    }
}

static size_t expected_roundup(size_t n)
{
    if (n <= 32768) {
        for (int c = 1; c < tsv_n; c++)
            if (tsv[c].size >= n)
                return tsv[c].size;
    }
    return (n + 8191) / 8192 * 8192;
}

static void rounding_every_size(void)
{
    CHECK(tsv_n == SC_NCLASS);
    CHECK(sc_roundup(17) == 24 && sc_roundup(33) == 48 && sc_roundup(1030) == 1152);
    CHECK(sc_roundup(16000) == 16384 && sc_roundup(32769) == 40960 && sc_roundup(40960) == 40960);
    CHECK(sc_roundup(40961) == 49152 && sc_roundup(100000) == 106496);
    for (size_t n = 1; n <= 70000; n++) {
        size_t want = expected_roundup(n);
        CHECKF(sc_roundup(n) == want, "roundup(%zu) = %zu, want %zu", n, sc_roundup(n), want);
    }
    for (size_t n = 1; n <= 70000; n += (n < 2048 ? 1 : 97)) {
        void *p = sc_malloc(n);
        CHECKF(p && sc_usable_size(p) == expected_roundup(n), "usable_size(malloc(%zu)) = %zu", n, sc_usable_size(p));
        sc_free(p);
    }
}

static void specialized_dispatch(void)
{
    /* Constant sizes resolve their class at compile time; run-time sizes use the table. */
    void *a = sc_malloc(7), *b = sc_malloc(24), *c = sc_malloc(80), *d = sc_malloc(81);
    CHECK(sc_usable_size(a) == 8 && sc_usable_size(b) == 24 && sc_usable_size(c) == 80 && sc_usable_size(d) == 96);
    sc_free(a), sc_free(b), sc_free(c), sc_free(d);
    for (volatile size_t n = 0; n <= 96; n++) {
        void *p = sc_malloc(n);
        CHECKF(p && sc_usable_size(p) == sc_roundup(n ? n : 1), "n=%zu", (size_t)n);
        sc_free(p);
    }
    CHECK(sc_malloc_table[24] == sc_malloc_24 && sc_malloc_table[17] == sc_malloc_24 && sc_malloc_table[80] == sc_malloc_80);
}

static void alignment_per_class(void)
{
    CHECK(tsv_n == SC_NCLASS);
    for (int c = 1; c < SC_NCLASS; c++) {
        void *ps[40];
        for (int i = 0; i < 40; i++) {
            ps[i] = sc_malloc_generic(tsv[c].size);
            uintptr_t a = (uintptr_t)ps[i];
            CHECKF(a % tsv[c].align == 0, "class %d object %p not aligned to %u", c, ps[i], tsv[c].align);
            CHECK(a % 8 == 0);
            if (tsv[c].size % 16 == 0)
                CHECK(a % 16 == 0);
        }
        for (int i = 0; i < 40; i++)
            sc_free(ps[i]);
    }
    void *big = sc_malloc(100000);
    CHECK((uintptr_t)big % 8192 == 0);
    sc_free(big);
}

/* An aligned object is an ordinary object (a class whose size the alignment divides, or
 * a large span placed at the alignment): freed and measured like any other. */
static void aligned_allocation(void)
{
    static const size_t sizes[] = { 1, 24, 1000, 9000, 40000 };
    for (size_t align = 1; align <= ((size_t)4 << 20); align <<= 1)
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = sc_aligned_alloc(align, sizes[i]);
            CHECKF(p && (uintptr_t)p % align == 0, "%zu bytes at %zu: %p", sizes[i], align, p);
            CHECK(sc_usable_size(p) >= sizes[i]);
            memset(p, 0x3C, sizes[i]);
            sc_free(p);
        }
    struct sc_stats a, b, c;
    sc_scavenge();
    sc_read_stats(&a);
    void *p = sc_aligned_alloc((size_t)1 << 16, 100);   /* one page, 64 KiB-aligned */
    sc_read_stats(&b);
    CHECK((uintptr_t)p % ((size_t)1 << 16) == 0 && sc_usable_size(p) == 8192);
    CHECKF(b.heap_inuse - a.heap_inuse == 8192, "took %llu bytes", (unsigned long long)(b.heap_inuse - a.heap_inuse));
    sc_free(p);
    sc_scavenge();
    sc_read_stats(&c);
    CHECK(c.heap_inuse == a.heap_inuse && c.heap_alloc == a.heap_alloc);
    errno = 0;
    CHECK(sc_aligned_alloc(24, 8) == NULL && errno == EINVAL);
}

static void calloc_and_realloc(void)
{
    errno = 0;
    CHECK(sc_calloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    unsigned char *p = sc_malloc(100);
    memset(p, 0xAB, 100);
    sc_free(p);
    for (int round = 0; round < 3; round++) {
        unsigned char *ps[300];
        for (int i = 0; i < 300; i++) {
            ps[i] = sc_calloc(1, 4000);
            for (int j = 0; j < 4000; j += 97)
                CHECK(ps[i][j] == 0);
            memset(ps[i], 0xEE, 4000);
        }
        for (int i = 0; i < 300; i++)
            sc_free(ps[i]);
    }
    unsigned char *z = sc_calloc(10, 10);
    for (int i = 0; i < 100; i++)
        CHECK(z[i] == 0);
    z = sc_realloc(z, 110); /* same class (112): same block */
    CHECK(sc_usable_size(z) == 112);
    for (int i = 0; i < 110; i++)
        z[i] = (unsigned char)i;
    unsigned char *g = sc_realloc(z, 5000);
    CHECK(g && sc_usable_size(g) == 5376);
    for (int i = 0; i < 110; i++)
        CHECK(g[i] == (unsigned char)i);
    unsigned char *s = sc_realloc(g, 20);
    for (int i = 0; i < 20; i++)
        CHECK(s[i] == (unsigned char)i);
    CHECK(sc_realloc(s, 0) == NULL);
    void *n = sc_realloc(NULL, 50);
    CHECK(n && sc_usable_size(n) == 64);
    sc_free(n);
    sc_free(NULL);

    /* Large, zeroed, on fresh pages: RSS grows only where it is written. */
    sc_scavenge();
    long before = check_rss_bytes();
    unsigned char *big = sc_calloc(1, 256u << 20);
    CHECK(big);
    long after = check_rss_bytes();
    if (check_rss_is_the_heaps())
        CHECKF(after - before < (4 << 20), "calloc(256 MiB) took %ld KiB of RSS", (after - before) >> 10);
    CHECK(big[0] == 0 && big[(256u << 20) - 1] == 0 && big[123456789] == 0);
    memset(big + 4096 * 10, 7, 4096);
    sc_free(big);
    /* Reused dirty pages come back zeroed. */
    big = sc_calloc(1, 256u << 20);
    CHECK(big[4096 * 10] == 0 && big[4096 * 10 + 4095] == 0);
    sc_free(big);
}

/* Randomized allocation against a shadow record: each object is filled with a pattern
 * derived from its slot and checked just before it is freed or resized. */
static uint64_t rng = 88172645463325252ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t random_size(void)
{
    uint64_t r = next_rand();
    switch (r % 10) {
    case 0: return r >> 40 & 0x3FFFF;          /* up to 256 KiB */
    case 1: case 2: return (r >> 20) % 4096;
    default: return (r >> 20) % 256;
    }
}

static int verify_fill(unsigned char *p, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(tag + i))
            return 0;
    return 1;
}

static void fill(unsigned char *p, size_t n, unsigned tag)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(tag + i);
}

static void stress_shadow_model(void)
{
    enum { SLOTS = 4096 };
    /* Single-threaded: under ThreadSanitizer, whose byte-by-byte checks make it 20 times
     * slower, a twentieth of the run. */
    const int STEPS = CHECK_TSAN ? 20000 : 400000;
    static unsigned char *obj[SLOTS];
    static size_t len[SLOTS];
    struct sc_stats st0, st1;
    sc_scavenge();
    sc_read_stats(&st0);
    for (int step = 0; step < STEPS; step++) {
        unsigned i = next_rand() % SLOTS;
        if (step % 5000 == 0)
            sc_scavenge();    /* trimming returns empty spans mid-run: their structs get reused */
        if (obj[i]) {
            CHECKF(verify_fill(obj[i], len[i], i), "slot %u corrupted", i);
            if (next_rand() % 4 == 0) {
                size_t n = random_size();
                obj[i] = sc_realloc(obj[i], n ? n : 1);
                size_t keep = len[i] < n ? len[i] : n;
                CHECK(verify_fill(obj[i], keep, i));
                len[i] = n ? n : 1;
                fill(obj[i], len[i], i);
            } else {
                sc_free(obj[i]);
                obj[i] = NULL;
            }
        } else {
            len[i] = random_size();
            obj[i] = sc_malloc(len[i]);
            CHECK(obj[i] && sc_usable_size(obj[i]) >= len[i]);
            fill(obj[i], len[i], i);
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (obj[i]) {
            CHECK(verify_fill(obj[i], len[i], i));
            sc_free(obj[i]);
            obj[i] = NULL;
        }
    sc_scavenge();
    sc_read_stats(&st1);
    CHECKF(st1.heap_alloc == st0.heap_alloc, "heap_alloc %llu -> %llu after freeing everything",
           (unsigned long long)st0.heap_alloc, (unsigned long long)st1.heap_alloc);
    CHECK(st1.mallocs - st0.mallocs == st1.frees - st0.frees);
    CHECK(st1.by_class[0].mallocs - st0.by_class[0].mallocs == st1.by_class[0].frees - st0.by_class[0].frees);
}

/* Producer/consumer: objects allocated on one thread are freed on another. */
enum { RING = 1024, TRANSFERS = 300000 };
static void *ring[RING];
static unsigned ring_head, ring_tail;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_cond = PTHREAD_COND_INITIALIZER;
static int consumer_bad;

static void *producer(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < TRANSFERS; i++) {
        size_t n = 8 + (i * 7919u) % 2000;
        unsigned *p = sc_malloc(n);
        p[0] = i;
        p[1] = (unsigned)n;
        pthread_mutex_lock(&ring_lock);
        while (ring_head - ring_tail == RING)
            pthread_cond_wait(&ring_cond, &ring_lock);
        ring[ring_head++ % RING] = p;
        pthread_cond_broadcast(&ring_cond);
        pthread_mutex_unlock(&ring_lock);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (unsigned i = 0; i < TRANSFERS; i++) {
        pthread_mutex_lock(&ring_lock);
        while (ring_head == ring_tail)
            pthread_cond_wait(&ring_cond, &ring_lock);
        unsigned *p = ring[ring_tail++ % RING];
        pthread_cond_broadcast(&ring_cond);
        pthread_mutex_unlock(&ring_lock);
        if (p[0] != i || p[1] != 8 + (i * 7919u) % 2000)
            consumer_bad++;
        sc_free(p);
    }
    return NULL;
}

static void cross_thread_frees(void)
{
    struct sc_stats st0, st1;
    sc_read_stats(&st0);
    pthread_t a, b;
    pthread_create(&a, NULL, producer, NULL);
    pthread_create(&b, NULL, consumer, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(consumer_bad == 0);
    sc_read_stats(&st1);
    CHECKF(st1.heap_alloc == st0.heap_alloc, "heap_alloc %llu -> %llu", (unsigned long long)st0.heap_alloc, (unsigned long long)st1.heap_alloc);
    CHECK(st1.mallocs - st0.mallocs == TRANSFERS && st1.frees - st0.frees == TRANSFERS);
}

/* A thread that exits with live objects hands its spans to the central lists; they are
 * freed later from another thread, and the memory is reused. */
enum { LEFT = 50000 };
static void *left_behind[LEFT];
static void *allocate_and_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < LEFT; i++) {
        left_behind[i] = sc_malloc(48);
        memset(left_behind[i], 0x5A, 48);
    }
    return NULL;
}

static void thread_exit_hands_spans_over(void)
{
    struct sc_stats st0, st1, st2;
    sc_read_stats(&st0);
    pthread_t t;
    pthread_create(&t, NULL, allocate_and_exit, NULL);
    pthread_join(t, NULL);
    sc_read_stats(&st1);
    CHECK(st1.heap_alloc - st0.heap_alloc == (uint64_t)LEFT * 48);
    for (int i = 0; i < LEFT; i++) {
        unsigned char *p = left_behind[i];
        CHECK(p[0] == 0x5A && p[47] == 0x5A);
        sc_free(p);
    }
    sc_read_stats(&st2);
    CHECK(st2.heap_alloc == st0.heap_alloc);
    CHECKF(st2.heap_inuse <= st0.heap_inuse + 8 * 8192, "spans not returned: inuse %llu -> %llu",
           (unsigned long long)st0.heap_inuse, (unsigned long long)st2.heap_inuse);
}

static void scavenge_returns_memory(void)
{
    enum { SIZE = 64, COUNT = (256 << 20) / SIZE };
    void **ps = sc_malloc(sizeof(void *) * COUNT);
    memset(ps, 0, sizeof(void *) * COUNT);     /* resident before the baseline, like after */
    sc_scavenge();
    long before = check_rss_bytes();
    uint64_t heap_before = sc_heap_resident();
    for (int i = 0; i < COUNT; i++) {
        ps[i] = sc_malloc(SIZE);
        memset(ps[i], 1, SIZE);
    }
    long peak = check_rss_bytes();
    uint64_t heap_peak = sc_heap_resident();
    CHECKF(peak - before > (250l << 20), "256 MiB of objects raised RSS by only %ld MiB", (peak - before) >> 20);
    CHECKF(heap_peak - heap_before > (250ull << 20), "256 MiB of objects raised the heap's resident bytes by %llu MiB",
           (unsigned long long)(heap_peak - heap_before) >> 20);
    for (int i = 0; i < COUNT; i++)
        sc_free(ps[i]);
    sc_scavenge();
    long after = check_rss_bytes();
    uint64_t heap_after = sc_heap_resident();
    CHECKF(heap_after < heap_before + (8ull << 20), "the heap's resident bytes %llu MiB above the start after scavenging",
           (unsigned long long)(heap_after - heap_before) >> 20);
    struct sc_stats st;
    sc_read_stats(&st);
    printf("# scavenge: RSS %ld MiB -> %ld MiB -> %ld MiB, heap_released %llu MiB\n", before >> 20, peak >> 20,
           after >> 20, (unsigned long long)st.heap_released >> 20);
    if (check_rss_is_the_heaps())
        CHECKF(after - before < (8l << 20), "RSS %ld KiB above the start after scavenging", (after - before) >> 10);
    CHECK(st.heap_released >= (240ull << 20));
    sc_free(ps);
}

static uint64_t released_now(void)
{
    struct sc_stats st;
    sc_read_stats(&st);
    return st.heap_released;
}

static uint64_t release_calls_now(void)
{
    struct sc_stats st;
    sc_read_stats(&st);
    return st.release_calls;
}

static uint64_t coarse_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Frees that reach the page heap - each may be the first of a tick, which moves the peak's
 * windows on and releases what is due - for ms of the clock the heap reads: *s, of n bytes
 * (above the thread's large-object cache and ASan's quarantine), freed and taken again. */
static void page_heap_frees_for(char **s, size_t n, unsigned ms)
{
    uint64_t end = coarse_ms() + ms;
    do {
        sc_free(*s);
        *s = sc_malloc(n);
        (*s)[0] = 1;
    } while (coarse_ms() < end);
}

/* A large object freed and taken again every few ms, with other frees reaching the page
 * heap in between (git's delta windows, zlib's buffers): the heap's use stays at its recent
 * peak, so its pages stay - no madvise, no fresh page faults.  (Releasing runs that idled
 * a few ms gave these 4 MiB back and faulted them in again every round.) */
static void memory_wanted_again_is_kept(void)
{
    enum { BIG = 4 << 20, SPIN = 2 << 20, ROUNDS = 10 };
    int was = sc_set_decay_ms(1000);
    sc_scavenge();
    char *s = sc_malloc(SPIN);
    s[0] = 1;
    uint64_t r0 = 0, calls0 = 0;
    for (int round = 0; round < ROUNDS; round++) {
        char *b = sc_malloc(BIG);
        memset(b, round + 1, BIG);
        if (!round) {                            /* after the first round took its pages */
            r0 = released_now();
            calls0 = release_calls_now();
        }
        sc_free(b);
        page_heap_frees_for(&s, SPIN, 12);       /* several ticks, whatever the clock's step */
        CHECKF(released_now() <= r0, "round %d: %llu KiB released", round,
               (unsigned long long)(released_now() - r0) >> 10);
    }
    CHECKF(release_calls_now() == calls0, "%llu madvise calls", (unsigned long long)(release_calls_now() - calls0));
    sc_free(s);
    sc_set_decay_ms(was);
}

/* What stays free beyond the goal goes back within the decay period, by the frees that
 * follow (no thread of the heap's own, no sc_scavenge); what the program had in use a moment
 * ago does not go at once; and with decay_ms -1 nothing goes unasked. */
static void idle_pages_go_back_by_themselves(void)
{
    enum { LOOPED = 512 << 10, BIG = 8 << 20, SPIN = 2 << 20 };
    int was = sc_set_decay_ms(1000);
    sc_scavenge();
    uint64_t r0 = released_now();
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long iters = 0;
    do {
        char *p = sc_malloc(LOOPED);
        p[0] = p[LOOPED - 1] = 1;
        sc_free(p);
        iters++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 50000000L);
    uint64_t r1 = released_now();
    /* Its pages taken once from the released ones, and never given back.  (ASan's quarantine
     * holds each object back, so there the loop walks over several places.) */
    CHECKF(r0 - r1 == LOOPED || CHECK_ASAN, "%ld iterations of a 512 KiB loop: released %lld KiB, not -512",
           iters, ((long long)r1 - (long long)r0) / 1024);

    char *big = sc_malloc(BIG), *s = sc_malloc(SPIN);
    memset(big, 1, BIG);
    s[0] = 1;
    uint64_t r2 = released_now(), calls = release_calls_now();
    sc_free(big);
    CHECKF(released_now() - r2 < BIG, "freed 8 MiB: released %llu KiB at once",
           (unsigned long long)(released_now() - r2) >> 10);
    /* A decay of 50 ms: the peak with big in it leaves its windows within 50 ms of the
     * clock, and the next free after that releases it (bounded, so a stalled machine
     * cannot hang the test; the verdict is what went back, never when). */
    sc_set_decay_ms(50);
    uint64_t deadline = coarse_ms() + 10000;
    while (released_now() - r2 < BIG - (1u << 20) && coarse_ms() < deadline)
        page_heap_frees_for(&s, SPIN, 5);
    uint64_t r3 = released_now();
    CHECKF(r3 - r2 >= BIG - (1u << 20), "freed 8 MiB, decay 50 ms: released %llu KiB",
           (unsigned long long)(r3 - r2) >> 10);
    CHECKF(release_calls_now() > calls, "released without a madvise call counted");
    /* What stays is within the goal: the pages in use, a tenth of them and 1 MiB. */
    struct sc_stats st;
    sc_read_stats(&st);
    uint64_t dirty = st.heap_idle - st.heap_released, used = st.heap_inuse + st.stack_inuse;
    CHECKF(dirty <= used / 10 + (1u << 20) + SPIN, "%llu KiB dirty idle, %llu KiB in use",
           (unsigned long long)dirty >> 10, (unsigned long long)used >> 10);

    /* decay_ms -1: nothing goes back unasked, however long it idles; a scavenge still does. */
    sc_set_decay_ms(-1);
    big = sc_malloc(BIG);
    memset(big, 1, BIG);
    uint64_t r4 = released_now();
    sc_free(big);
    page_heap_frees_for(&s, SPIN, 30);
    CHECKF(released_now() == r4, "decay_ms -1: released %lld KiB", ((long long)released_now() - (long long)r4) / 1024);
    sc_free(s);
    sc_scavenge();
    sc_read_stats(&st);
    /* The page heap's count of dirty idle pages, kept run by run, is exact: a scavenge
     * leaves none. */
    CHECKF(st.heap_idle == st.heap_released, "idle %llu KiB, released %llu KiB after a scavenge",
           (unsigned long long)st.heap_idle >> 10, (unsigned long long)st.heap_released >> 10);
    sc_heap_lock();
    size_t short_dirty = sc_heap.short_dirty_pages;
    sc_heap_unlock();
    CHECKF(short_dirty == 0, "%zu dirty pages of short runs counted after a scavenge", short_dirty);
    sc_set_decay_ms(was);
}

/* Gaps between live objects - free runs shorter than 1 MiB, which the heap leaves alone while
 * they may be filled again - go back once they have idled two decay periods and the heap holds
 * more than its goal.  (Before the short runs' rule they stayed until everything was twice the
 * goal: 10 MiB of gaps beside 10 MiB in use never went back.) */
static void long_idle_gaps_go_back(void)
{
    enum { N = 32, GAP = 40 << 13, SPIN = 2 << 20 };    /* 40 pages: a short run, past the caches */
    static char *p[2 * N];
    int was = sc_set_decay_ms(1000);
    sc_scavenge();
    for (int i = 0; i < 2 * N; i++) {
        p[i] = sc_malloc(GAP);
        memset(p[i], 1, GAP);
    }
    char *s = sc_malloc(SPIN);
    s[0] = 1;
    for (int i = 0; i < 2 * N; i += 2)               /* every other one: N gaps between live ones */
        sc_free(p[i]);
    uint64_t r0 = released_now();
    sc_set_decay_ms(20);
    uint64_t deadline = coarse_ms() + 10000;
    while (released_now() - r0 < (uint64_t)N * GAP / 2 && coarse_ms() < deadline)
        page_heap_frees_for(&s, SPIN, 5);
    uint64_t r1 = released_now();
    for (int i = 1; i < 2 * N; i += 2)
        sc_free(p[i]);
    sc_free(s);
    sc_set_decay_ms(was);
    CHECKF(r1 - r0 >= (uint64_t)N * GAP / 2, "%d gaps of 320 KiB idle: %llu KiB released", N,
           (unsigned long long)(r1 - r0) >> 10);
}

/* SCALLOC_CONF, as hostile as an environment variable gets: each pair that does not parse
 * whole, within its range, is ignored (with a line on stderr) and leaves its default. */
static void conf_parses_only_what_it_should(void)
{
    static const struct { const char *in; int decay; unsigned retain; } cases[] = {
        { NULL, 7, 3 }, { "", 7, 3 }, { "decay_ms:5", 5, 3 }, { "retain_pct:20,decay_ms:0", 0, 20 },
        { "decay_ms:-1", -1, 3 }, { "decay_ms:-2", 7, 3 }, { "decay_ms:", 7, 3 }, { "decay_ms", 7, 3 },
        { "decay_ms:5x", 7, 3 }, { "decay_ms: 5", 7, 3 }, { "decay_ms:99999999999999999999999", 7, 3 },
        { "decay_ms:86400001", 7, 3 }, { "retain_pct:1001", 7, 3 }, { "retain_pct:-1", 7, 3 },
        { ",,,decay_ms:9,,", 9, 3 }, { ":", 7, 3 }, { "decay_ms:1,decay_ms:2", 2, 3 },
        { "DECAY_MS:5", 7, 3 }, { "decay_msx:5,retain_pc:5", 7, 3 }, { "bogus,retain_pct:1000", 7, 1000 },
        { "decay_ms:-", 7, 3 }, { "decay_ms:--1", 7, 3 },
    };
    /* Each ignored pair writes a line to stderr: not into the test's output. */
    fflush(stderr);
    int saved = dup(2), null = open("/dev/null", O_WRONLY);
    CHECK(saved >= 0 && null >= 0 && dup2(null, 2) == 2);
    close(null);
    bool all_ok = true;
    char why[256] = "";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && all_ok; i++) {
        struct sc_conf c = { .decay_ms = 7, .retain_pct = 3 };
        sc_conf_parse(cases[i].in, &c);
        all_ok = c.decay_ms == cases[i].decay && c.retain_pct == cases[i].retain;
        if (!all_ok)
            snprintf(why, sizeof why, "'%s': decay_ms %d retain_pct %u", cases[i].in ? cases[i].in : "(unset)",
                     c.decay_ms, c.retain_pct);
    }
    static char long_value[4096];
    memset(long_value, 'a', sizeof long_value - 1);
    struct sc_conf c = { .decay_ms = 7, .retain_pct = 3 };
    sc_conf_parse(long_value, &c);
    dup2(saved, 2);
    close(saved);
    CHECKF(all_ok, "%s", why);
    CHECK(c.decay_ms == 7 && c.retain_pct == 3);
}

/* A program that moves from one size to the next - 1000 objects of one size allocated and
 * freed, then of the next - reuses the pages of the sizes it left rather than keeping each
 * size's spans: the heap in use stays near the largest phase's, not the sum of all. */
static void sizes_in_turn_reuse_pages(void)
{
    static const size_t sizes[] = { 1024, 2048, 3072, 4096 };
    enum { N = 1000 };
    static void *ps[N];
    sc_scavenge();
    struct sc_stats st;
    sc_read_stats(&st);
    uint64_t start = st.heap_inuse, peak = start;
    for (int round = 0; round < 3; round++) {
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            for (int i = 0; i < N; i++) {
                ps[i] = sc_malloc(sizes[k]);
                memset(ps[i], 1, 16);
            }
            sc_read_stats(&st);
            if (st.heap_inuse > peak)
                peak = st.heap_inuse;
            for (int i = 0; i < N; i++)
                sc_free(ps[i]);
            usleep(11000);                       /* phases a clock step apart: see cache.c */
        }
    }
    printf("# sizes in turn: heap_inuse peak %llu KiB above the start (largest phase %d KiB, all %d KiB)\n",
           (unsigned long long)(peak - start) >> 10, N * 4, N * 10);
    /* ASan's quarantine keeps up to 1 MiB of the last phase's objects, and their spans. */
    CHECKF(peak - start <= (uint64_t)N * 4096 + (2u << 20), "heap_inuse peaked %llu KiB above the start",
           (unsigned long long)(peak - start) >> 10);
}

static void stats_track_objects(void)
{
    struct sc_stats a, b, c;
    sc_read_stats(&a);
    void *p = sc_malloc(24), *q = sc_malloc(1000), *r = sc_malloc(50000);
    void *stack = sc_stack_alloc(16384);
    sc_read_stats(&b);
    CHECK(b.heap_alloc - a.heap_alloc == 24 + 1024 + 57344);
    CHECK(b.mallocs - a.mallocs == 3);
    CHECK(b.by_class[3].mallocs - a.by_class[3].mallocs == 1);
    CHECK(b.stack_inuse >= a.stack_inuse + 16384);
    CHECK(b.heap_sys >= b.heap_inuse + b.heap_idle - 1 && b.heap_idle >= b.heap_released);
    sc_free(p), sc_free(q), sc_free(r), sc_stack_free(stack);
    sc_read_stats(&c);
    CHECK(c.heap_alloc == a.heap_alloc && c.frees - a.frees == 3);
}

/* A freed large object is reused by the thread's next allocation of its size, counted
 * as freed meanwhile, and given back to the page heap by a scavenge. */
static void large_objects_cached(void)
{
    struct sc_stats a, b, c;
    sc_scavenge();
    sc_read_stats(&a);
    void *p = sc_malloc(65536);
    sc_free(p);
    void *q = sc_malloc(65536);
    CHECK(q == p || CHECK_ASAN);          /* ASan's quarantine holds p back on purpose */
    void *r = sc_malloc(200000);
    sc_free(q);
    sc_read_stats(&b);
    CHECK(b.by_class[0].mallocs - a.by_class[0].mallocs == 3 && b.by_class[0].frees - a.by_class[0].frees == 2);
    CHECK(b.large_alloc - a.large_alloc == 204800 && b.heap_alloc - a.heap_alloc == 204800);
    sc_free(r);
    sc_scavenge();
    sc_read_stats(&c);
    CHECK(c.large_alloc == a.large_alloc && c.heap_alloc == a.heap_alloc);
    CHECK(c.mallocs - a.mallocs == 3 && c.frees - a.frees == 3);
    CHECKF(c.heap_inuse == a.heap_inuse, "heap_inuse %llu -> %llu: cached objects not given back",
           (unsigned long long)a.heap_inuse, (unsigned long long)c.heap_inuse);
}

static void growth_policy_matches_go(void)
{
    /* Go: append to []byte of cap 1024 -> 1536 (1472 rounded to class 1536);
     * []int64 of cap 256 -> 512 elements (doubling ends at 256: 256+256=512). */
    CHECK(sc_grow_cap(1024, 1025, 1) == 1536);
    CHECK(sc_grow_cap(256, 257, 8) == 512);
    CHECK(sc_grow_cap(100000, 100001, 1) == 131072);   /* 100000+25192=125192 -> pages */
    for (size_t cap = 1; cap < 1 << 20; cap = sc_grow_cap(cap, cap + 1, 1)) {
        size_t next = sc_grow_cap(cap, cap + 1, 1);
        CHECK(next > cap && sc_roundup(next) == next);
    }
}

/* The child announces the exact message it expects ("EXPECT <text>") before the bad
 * free; the parent checks that the allocator's abort says that very text. */
static char addr_text[64];
static void announce(const char *what, const void *p)
{
    snprintf(addr_text, sizeof addr_text, "%s of %p", what, p);
    dprintf(2, "EXPECT %s\n", addr_text);
}

static char child_output[512];
static int child_aborts_as_announced(void (*fn)(void))
{
    char buf[512];
    int sig = check_run_child(fn, buf, sizeof buf);
    memcpy(child_output, buf, sizeof child_output);
    char *expect = strstr(buf, "EXPECT "), want[96];
    if (!expect)
        return 0;
    char *nl = strchr(expect, '\n');
    if (!nl)
        return 0;
    *nl = 0;
    snprintf(want, sizeof want, "%s", expect + 7);
    return sig == SIGABRT && strstr(nl + 1, want);
}

static void do_double_free_small(void)
{
    void *p = sc_malloc(32);
    announce("double free", p);
    sc_free(p);
    sc_free(p);
}
static void do_double_free_after_others(void)
{
    void *p = sc_malloc(200), *q = sc_malloc(200);
    sc_free(p);
    sc_free(q);
    announce("double free", p);
    sc_free(p);
}
static void do_interior_free(void)
{
    char *p = sc_malloc(64);
    announce("invalid free", p + 8);
    sc_free(p + 8);
}
static void do_never_returned_free(void)
{
    /* Fill fresh spans of a class nothing else uses; the object after the last one
     * handed out was never returned (or, at a span's end, is someone else's). */
    char *p = sc_malloc(6784);
    announce("free", p + 6784);
    sc_free(p + 6784);
}
static void do_foreign_free(void)
{
    static char not_ours[64];
    announce("invalid free", not_ours);
    sc_free(not_ours);
}
static void do_double_free_large(void)
{
    void *p = sc_malloc(100000);       /* kept in the thread's cache once freed */
    announce("double free", p);
    sc_free(p);
    sc_free(p);
}

static void do_double_free_huge(void)
{
    /* Above the large-object cache's limit and ASan's quarantine's: back to the page heap. */
    void *p = sc_malloc(2u << 20);
    announce("invalid free", p);
    sc_free(p);
    sc_free(p);
}

static void bad_frees_abort_in_child(void)
{
    void (*cases[])(void) = { do_double_free_small, do_double_free_after_others, do_interior_free,
                              do_never_returned_free, do_foreign_free, do_double_free_large, do_double_free_huge };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECKF(child_aborts_as_announced(cases[i]), "case %u did not abort naming the address: %s", i, child_output);
}

/* A live object may hold anything in its first word - also, by chance, the very word a
 * freed object would hold, a link to another object of its span under the heap's key.  Its
 * free must not be taken for a double free, by its owner (which searches its lists) or by
 * another thread (which cannot, and used to abort on the decode alone: a valid program
 * killed at random).  Here the word is forged on purpose. */
static void *remote_free(void *p)
{
    sc_free(p);
    return NULL;
}

static void free_from_thread(void *p)
{
    pthread_t t;
    pthread_create(&t, NULL, remote_free, p);
    pthread_join(t, NULL);
}

static void free_live_objects_that_look_freed(void)
{
    for (int remote = 0; remote < 2; remote++) {
        uintptr_t *p = sc_malloc(48), *q = sc_malloc(48);
        *p = (uintptr_t)q ^ sc_heap.key;             /* decodes to q, in its own span */
        if (sc_span_of(p) != sc_span_of(q) || !sc_looks_freed(sc_span_of(p), p)) {
            dprintf(2, "SETUP: %p does not look freed\n", (void *)p);
            return;
        }
        sc_asan_unpoison(p, sizeof *p);   /* the heap's read of the word poisons it (ASan builds): p is live */
        if (remote)
            free_from_thread(p);
        else
            sc_free(p);
        sc_free(q);
    }
    /* The heap stays whole: the objects come back, once each. */
    void *a = sc_malloc(48), *b = sc_malloc(48), *c = sc_malloc(48);
    if (a != b && b != c && a != c)
        dprintf(2, "FREED\n");
}

static void live_object_that_looks_freed(void)
{
    int sig = check_run_child(free_live_objects_that_look_freed, child_output, sizeof child_output);
    CHECKF(!strstr(child_output, "SETUP"), "%s", child_output);
    CHECKF(sig == 0 && strstr(child_output, "FREED"), "signal %d: %s", sig, child_output);
}

/* What a free from another thread can tell for certain: the object it is pushing is the one
 * pushed last (a repeated free), or the owner collects a list that loops (p, q, p). */
static void *remote_free_twice(void *p)
{
    sc_free(p);
    sc_free(p);
    return NULL;
}
static void do_remote_double_free(void)
{
    void *p = sc_malloc(48);
    announce("double free", p);
    pthread_t t;
    pthread_create(&t, NULL, remote_free_twice, p);
    pthread_join(t, NULL);
}
static void *remote_free_p_q_p(void *arg)
{
    void **pq = arg;
    sc_free(pq[0]);
    sc_free(pq[1]);
    sc_free(pq[0]);
    return NULL;
}
static void do_remote_double_free_looping(void)
{
    static void *pq[2];
    pq[0] = sc_malloc(48);
    pq[1] = sc_malloc(48);
    sc_span *s = sc_span_of(pq[0]);
    announce("a free list loops in the span", (void *)s->base);
    pthread_t t;
    pthread_create(&t, NULL, remote_free_p_q_p, pq);
    pthread_join(t, NULL);
    for (int i = 0; i < 10000; i++)      /* past the span's objects: a refill collects */
        sc_malloc(48);
}

static void remote_double_frees_abort_in_child(void)
{
    if (CHECK_ASAN) {
        printf("# remote_double_frees_abort_in_child: ASan's quarantine reports them first\n");
        return;
    }
    CHECKF(child_aborts_as_announced(do_remote_double_free), "%s", child_output);
    CHECKF(child_aborts_as_announced(do_remote_double_free_looping), "%s", child_output);
}

/* realloc of a large object that stays large: a shrink gives the tail back in place, and a
 * growth into free pages right after it takes them, without a copy. */
static void realloc_large_in_place(void)
{
    struct sc_stats a, b;
    unsigned char *p = sc_malloc(300000);              /* 37 pages */
    for (int i = 0; i < 300000; i++)
        p[i] = (unsigned char)(i * 13);
    sc_read_stats(&a);
    unsigned char *q = sc_realloc(p, 100000);           /* 13 pages */
    sc_read_stats(&b);
    CHECK(q == p && sc_usable_size(q) == 13 * 8192);
    CHECKF(a.heap_inuse - b.heap_inuse == 24 * 8192 && a.heap_alloc - b.heap_alloc == 24 * 8192,
           "heap_inuse %llu -> %llu", (unsigned long long)a.heap_inuse, (unsigned long long)b.heap_inuse);
    CHECK(sc_span_lookup(q + 13 * 8192)->state == SC_SPAN_FREE);
    q = sc_realloc(q, 250000);                          /* 31 pages: the tail just given back */
    CHECK(q == p && sc_usable_size(q) == 31 * 8192);
    for (int i = 0; i < 100000; i++)
        CHECKF(q[i] == (unsigned char)(i * 13), "byte %d", i);
    memset(q, 7, 250000);
    sc_read_stats(&b);
    CHECK(a.heap_inuse - b.heap_inuse == 6 * 8192 && a.large_alloc - b.large_alloc == 6 * 8192);
    sc_free(q);
    sc_read_stats(&b);
    CHECK(b.mallocs - b.frees == a.mallocs - a.frees - 1);
}


static char child_err[2048];

/* ASan builds (SAN=1): a use after free of any object, and a touch of span memory never
 * handed out, is reported.  Each case runs in a child, which ASan ends with its report. */
static volatile unsigned char sink;

static void read_after_free_child(void)
{
    unsigned char *p = sc_malloc(64);
    sc_free(p);
    sink = p[10];
}

static void reused_slot_read_child(void)
{
    unsigned char *p = sc_malloc(64);
    sc_free(p);
    for (int i = 0; i < 200; i++)                 /* the quarantine keeps p from these */
        sc_free(sc_malloc(64));
    sink = p[0];
}

static void large_write_after_free_child(void)
{
    unsigned char *p = sc_malloc(100000);
    sc_free(p);
    p[50000] = 1;
}

static void after_realloc_moved_child(void)
{
    unsigned char *p = sc_malloc(24);
    unsigned char *q = sc_realloc(p, 4000);
    if (q != p)
        sink = p[1];
}

static void past_the_object_child(void)
{
    unsigned char *p = sc_malloc(4096);           /* its neighbour was never handed out */
    sink = p[4096 + 100];
}

static void *free_arg(void *p);
static void freed_by_another_thread_child(void)
{
    unsigned char *p = sc_malloc(300);
    pthread_t t;
    pthread_create(&t, NULL, free_arg, p);
    pthread_join(t, NULL);
    sink = p[299];
}

static void use_after_free_reported_by_asan(void)
{
    if (!CHECK_ASAN) {
        printf("# use_after_free_reported_by_asan: ASan builds only (make test SAN=1)\n");
        return;
    }
    static const struct { void (*fn)(void); const char *what; } cases[] = {
        { read_after_free_child, "read after free" },
        { reused_slot_read_child, "read after free, 200 allocations later" },
        { large_write_after_free_child, "write to a freed large object" },
        { after_realloc_moved_child, "read through the pointer realloc moved from" },
        { past_the_object_child, "read of span memory never handed out" },
        { freed_by_another_thread_child, "read of an object another thread freed" },
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_run_child(cases[i].fn, child_err, sizeof child_err);
        CHECKF(strstr(child_err, "AddressSanitizer: use-after-poison") || strstr(child_err, "heap-use-after-free"),
               "%s not reported: %.300s", cases[i].what, child_err);
    }
}

/* A thread may still free (and allocate) after the allocator's thread-exit handler has
 * torn its cache down: later key destructors, glibc's own clean-up.  Here a destructor
 * keeps its key set for glibc's four rounds and only in the last frees an object of a
 * live thread's span and allocates one; no round follows to tear anything down again.
 * The next thread gets the same thread-local memory (glibc reuses the stack), so a cache
 * left registered would be linked in twice; the statistics walk then loops forever. */
static pthread_key_t late_key;
static void *late_victim;
static int late_rounds;

static void late_destructor(void *v)
{
    if (++late_rounds < 4) {
        pthread_setspecific(late_key, v);
        return;
    }
    sc_free(late_victim);
    sc_free(sc_malloc(40));
}

static void *set_late_key(void *arg)
{
    (void)arg;
    sc_free(sc_malloc(16));
    pthread_setspecific(late_key, &late_key);
    return NULL;
}

static void *allocate_some(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        sc_free(sc_malloc(64));
    return NULL;
}

static void late_frees_child(void)
{
    alarm(10);
    struct sc_stats st0, st1;
    sc_read_stats(&st0);
    late_victim = sc_malloc(100);
    pthread_key_create(&late_key, late_destructor);
    pthread_t t;
    pthread_create(&t, NULL, set_late_key, NULL);
    pthread_join(t, NULL);
    pthread_create(&t, NULL, allocate_some, NULL);
    pthread_join(t, NULL);
    sc_read_stats(&st1);
    dprintf(2, "RESULT rounds %d live %lld\n", late_rounds,
            (long long)((st1.mallocs - st1.frees) - (st0.mallocs - st0.frees)));
}

static void frees_after_thread_exit(void)
{
    if (CHECK_TSAN) {
        /* ThreadSanitizer tears its own thread state down in that last round too. */
        printf("# frees_after_thread_exit: not under ThreadSanitizer\n");
        return;
    }
    int sig = check_run_child(late_frees_child, child_err, sizeof child_err);
    CHECKF(sig == 0 && strstr(child_err, "RESULT rounds 4 live 0\n"), "signal %d: %s", sig, child_err);
}

/* fork with other threads inside the allocator: the child must find every lock free.
 * Threads keep the page heap's lock (large objects), the central lists' (threads that
 * exit with live objects) and the statistics' busy while the main thread forks; each
 * child allocates, frees, reads the statistics and scavenges under an alarm. */
static _Atomic int fork_stop;

static void *hold_large(void *arg)
{
    (void)arg;
    while (!atomic_load(&fork_stop))
        sc_free(sc_malloc(300000));
    return NULL;
}

static void *leave_objects(void *arg)
{
    for (int i = 0; i < 64; i++)
        ((void **)arg)[i] = sc_malloc(48);
    return NULL;
}

static void *churn_threads(void *arg)
{
    (void)arg;
    void *left[64];
    while (!atomic_load(&fork_stop)) {
        pthread_t t;
        pthread_create(&t, NULL, leave_objects, left);
        pthread_join(t, NULL);
        for (int i = 0; i < 64; i++)
            sc_free(left[i]);
    }
    return NULL;
}

static void *read_stats_busily(void *arg)
{
    (void)arg;
    while (!atomic_load(&fork_stop)) {
        struct sc_stats st;
        sc_read_stats(&st);
    }
    return NULL;
}

static void fork_while_threads_allocate(void)
{
    pthread_t t[3];
    pthread_create(&t[0], NULL, hold_large, NULL);
    pthread_create(&t[1], NULL, churn_threads, NULL);
    pthread_create(&t[2], NULL, read_stats_busily, NULL);
    int hung = 0, bad = 0, i;
    for (i = 0; i < 200 && !hung && !bad; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(3);
            sc_free(sc_malloc(300000));
            void *p = sc_malloc(48);
            struct sc_stats st;
            sc_read_stats(&st);
            sc_scavenge();
            sc_free(p);
            _exit(0);
        }
        int status;
        waitpid(pid, &status, 0);
        hung += WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
        bad += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    atomic_store(&fork_stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    CHECKF(hung == 0 && bad == 0, "child %d %s", i, hung ? "hung on a lock" : "failed");
}

/* In the child only the forking thread exists; a thread the child starts may get the
 * thread-local memory of one that was running in the parent (glibc hands the child the
 * other threads' stacks to reuse).  The statistics must not walk the parent's threads. */
static _Atomic int parked_go;

static void *allocate_and_park(void *arg)
{
    (void)arg;
    void *p = sc_malloc(64);
    while (!atomic_load(&parked_go))
        usleep(1000);
    sc_free(p);
    return NULL;
}

static void child_starts_threads_after_fork(void)
{
    alarm(10);
    struct sc_stats st0, st1;
    sc_read_stats(&st0);
    for (int i = 0; i < 4; i++) {
        pthread_t t;
        pthread_create(&t, NULL, allocate_some, NULL);
        pthread_join(t, NULL);
    }
    sc_read_stats(&st1);
    dprintf(2, "RESULT %lld\n", (long long)((st1.mallocs - st1.frees) - (st0.mallocs - st0.frees)));
}

static void fork_forgets_the_parents_threads(void)
{
    if (CHECK_TSAN) {
        printf("# fork_forgets_the_parents_threads: ThreadSanitizer cannot start threads after such a fork\n");
        return;
    }
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, allocate_and_park, NULL);
    usleep(20000);
    int sig = check_run_child(child_starts_threads_after_fork, child_err, sizeof child_err);
    atomic_store(&parked_go, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECKF(sig == 0 && strstr(child_err, "RESULT 0\n"), "signal %d: %s", sig, child_err);
}

/* ---- Regressions of interleavings.  Each runs in a child process forked from a heap that
 * nothing has used yet (they run first), so which pages and span structs get reused is
 * known; each checks that the interleaving it needs really happened. ---- */


/* A free from another thread cannot search the owner's list, so it takes an object whose
 * first word decodes into its span for a freed one.  The first object of each page a span
 * hands out by bumping used to keep whatever its page held before: on a recycled page, a
 * stale link.  Here a thread fills a span of n-byte objects, frees them in reverse (object
 * 0's word now links to object 1) and exits, giving the span back; the next span of the
 * class takes the same page, and its first object, written only at byte 0 (n == 1) or not
 * at all, is freed by a third thread. */
static size_t stale_n;
static void *stale_first;

static void *fill_span_free_reverse(void *arg)
{
    (void)arg;
    unsigned cls = sc_size_to_class[stale_n];
    size_t count = (size_t)sc_class_npages[cls] * SC_PAGE_SIZE / sc_class_size[cls];
    void **ps = calloc(count, sizeof *ps);
    for (size_t i = 0; i < count; i++) {
        ps[i] = sc_malloc(stale_n);
        memset(ps[i], 0x77, stale_n);
    }
    stale_first = ps[0];
    for (size_t i = count; i-- > 0;)
        sc_free(ps[i]);
    free(ps);
    return NULL;
}

static void *free_arg(void *p)
{
    sc_free(p);
    return NULL;
}

static void stale_link_child(void)
{
    pthread_t t;
    pthread_create(&t, NULL, fill_span_free_reverse, NULL);
    pthread_join(t, NULL);
    unsigned char *p = sc_malloc(stale_n);
    if ((void *)p != stale_first) {
        dprintf(2, "SETUP: %p is not the recycled first object %p\n", (void *)p, stale_first);
        return;
    }
    if (stale_n == 8)
        p[0] = 0;           /* the rest of its first word left as the page had it */
    pthread_create(&t, NULL, free_arg, p);
    pthread_join(t, NULL);
    dprintf(2, "FREED\n");
}

static void remote_free_of_bumped_object_on_recycled_page(void)
{
    static const size_t sizes[] = { 8, 64, 4096 };
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        stale_n = sizes[i];
        int sig = check_run_child(stale_link_child, child_err, sizeof child_err);
        CHECKF(!strstr(child_err, "SETUP"), "size %zu: %s", sizes[i], child_err);
        CHECKF(sig == 0 && strstr(child_err, "FREED"), "size %zu: signal %d: %s", sizes[i], sig, child_err);
    }
}

#if defined(__x86_64__)
/* A remote free must not read its span after the push that hands the object over: from
 * then on the owner may collect it, give the empty span back and reuse the span struct
 * for another class.  The freeing thread runs with the trap flag set, one instruction per
 * SIGTRAP; the handler stops it right after the push becomes visible, lets the owner
 * recycle the span (a scavenge, then an allocation of another class on the same page),
 * and only then lets it go on.  Counted in the wrong class, the free left the statistics
 * one object and 4096 bytes short for good. */
static sc_span *step_span;
static void *step_obj;
static _Atomic int step_phase;       /* 0 stepping, 1 pushed: owner's turn, 2 go on */
static _Atomic long step_count;

static void on_step(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    if (atomic_load(&step_phase) == 0 &&
        atomic_load_explicit(&step_span->thread_free, memory_order_relaxed) == (uintptr_t)step_obj) {
        atomic_store(&step_phase, 1);
        while (atomic_load(&step_phase) != 2)
            ;
    }
    if (atomic_load(&step_phase) == 2 || ++step_count > 1000000)
        uc->uc_mcontext.gregs[REG_EFL] &= ~0x100ll;
}

static void *stepped_remote_free(void *p)
{
    sc_free(sc_malloc(8));            /* registered before: the stepped free takes no lock */
    struct sigaction sa = { .sa_sigaction = on_step, .sa_flags = SA_SIGINFO };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTRAP, &sa, NULL);
    __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
    sc_free(p);
#if SC_ASAN
    sc_quarantine_drain();            /* the free itself only held p back */
#endif
    __asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "memory", "cc");
    return NULL;
}

static void span_reused_during_remote_free_child(void)
{
    struct sc_stats st0, st1;
    sc_read_stats(&st0);
    void *p = sc_malloc(4096);
    memset(p, 1, 4096);
    step_span = sc_span_of(p);
    step_obj = p;
    pthread_t t;
    pthread_create(&t, NULL, stepped_remote_free, p);
    while (atomic_load(&step_phase) != 1)
        if (step_count > 1000000) {
            dprintf(2, "SETUP: the push was never seen\n");
            _exit(0);
        }
    sc_scavenge();                    /* collects the free: the span is empty, and goes */
    void *q = sc_malloc(64);          /* its struct and page, now for 64-byte objects */
    int reused = q == p;
    atomic_store(&step_phase, 2);
    pthread_join(t, NULL);
    sc_free(q);
    sc_read_stats(&st1);
    if (!reused)
        dprintf(2, "SETUP: the span was not reused\n");
    dprintf(2, "RESULT live %lld heap_alloc %lld\n", (long long)((st1.mallocs - st1.frees) - (st0.mallocs - st0.frees)),
            (long long)(st1.heap_alloc - st0.heap_alloc));
}

static void remote_free_counts_in_its_class(void)
{
    if (CHECK_TSAN) {
        /* ThreadSanitizer's atomics take internal locks, which a stopped thread may hold. */
        printf("# remote_free_counts_in_its_class: not under ThreadSanitizer\n");
        return;
    }
    int sig = check_run_child(span_reused_during_remote_free_child, child_err, sizeof child_err);
    CHECKF(sig == 0 && !strstr(child_err, "SETUP"), "signal %d: %s", sig, child_err);
    CHECKF(strstr(child_err, "RESULT live 0 heap_alloc 0\n"), "%s", child_err);
}
#else
static void remote_free_counts_in_its_class(void) { printf("# remote_free_counts_in_its_class: needs x86-64's trap flag\n"); }
#endif

int main(void)
{
    printf("# size_specialized=%d\n", SC_SIZE_SPECIALIZED);
    RUN(remote_free_of_bumped_object_on_recycled_page);      /* first: on an unused heap */
    RUN(remote_free_counts_in_its_class);
    RUN(frees_after_thread_exit);
    RUN(table_matches_go);
    RUN(rounding_every_size);
    RUN(specialized_dispatch);
    RUN(alignment_per_class);
    RUN(aligned_allocation);
    RUN(calloc_and_realloc);
    RUN(stress_shadow_model);
    RUN(cross_thread_frees);
    RUN(thread_exit_hands_spans_over);
    RUN(stats_track_objects);
    RUN(large_objects_cached);
    RUN(growth_policy_matches_go);
    RUN(bad_frees_abort_in_child);
    RUN(live_object_that_looks_freed);
    RUN(remote_double_frees_abort_in_child);
    RUN(realloc_large_in_place);
    RUN(use_after_free_reported_by_asan);
    RUN(fork_while_threads_allocate);
    RUN(fork_forgets_the_parents_threads);
    RUN(memory_wanted_again_is_kept);
    RUN(idle_pages_go_back_by_themselves);
    RUN(long_idle_gaps_go_back);
    RUN(conf_parses_only_what_it_should);
    RUN(sizes_in_turn_reuse_pages);
    RUN(scavenge_returns_memory);
    CHECK_DONE();
}
