/* A multi-threaded stress of the heap as a real program uses it, bounded in time
 * (STRESS_SECONDS, default 2).
 *
 * Worker threads allocate random sizes from 1 byte to 300 KiB (most of them small),
 * through malloc, calloc and realloc; they free their own objects, hand others to other
 * workers to free, and exit after a random number of steps, leaving objects behind for
 * others, while new workers start.  Meanwhile one thread scavenges and one reads the
 * statistics.  Every object is filled with a pattern derived from its tag when it is
 * allocated and checked whenever it changes hands and before it is freed; some leave
 * their first word as the heap gave it (what a 1-byte string or a struct set later
 * does), which is what a free from another thread has to cope with.  At the end, with
 * the objects left behind still live: mallocs - frees equals their count and heap_alloc
 * the sum of their usable sizes; once they are freed and the heap scavenged, RSS is back
 * near where it started.
 *
 * The bookkeeping lives in static arrays, not on the heap under test, so the statistics
 * count the workers' objects only. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "scalloc.h"

enum { WORKERS = 6, SLOTS = 256, INBOX = 64, ORPHANS = 4096, MAX_SIZE = 300 << 10 };

struct obj {
    unsigned char *p;
    size_t n;
    uint64_t tag;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    return x;
}

/* The tag's pattern over [from, n): words, then the bytes of a tail. */
static bool pattern(struct obj *o, size_t from, bool write)
{
    unsigned char *p = o->p;
    size_t i = from;
    for (; i + 8 <= o->n; i += 8) {
        uint64_t w = mix(o->tag + i);
        if (write)
            memcpy(p + i, &w, 8);
        else if (memcmp(p + i, &w, 8))
            return false;
    }
    for (; i < o->n; i++) {
        unsigned char b = (unsigned char)mix(o->tag + i);
        if (write)
            p[i] = b;
        else if (p[i] != b)
            return false;
    }
    return true;
}

/* One object in eight of 16 bytes or more keeps its first word as the heap gave it. */
static size_t first_written(const struct obj *o) { return o->n >= 16 && o->tag % 8 == 0 ? 8 : 0; }
static void fill(struct obj *o) { pattern(o, first_written(o), true); }
static bool intact(struct obj *o) { return pattern(o, first_written(o), false); }

static _Atomic long corrupted, calloc_dirty;

static void check_and_free(struct obj *o)
{
    if (!intact(o))
        atomic_fetch_add(&corrupted, 1);
    sc_free(o->p);
    o->p = NULL;
}

static size_t random_size(uint64_t r)
{
    uint64_t v = r >> 8;
    switch (r % 100) {
    default: return 1 + v % 128;
    case 60 ... 84: return 1 + v % 1024;
    case 85 ... 94: return 1 + v % 8192;
    case 95 ... 98: return 1 + v % 32768;
    case 99: return 32769 + v % (MAX_SIZE - 32768);
    }
}

/* Objects left behind by exiting workers, freed later by others and finally by main. */
static pthread_mutex_t orphan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj orphans[ORPHANS];
static size_t norphans;

static bool orphan_put(struct obj *o)
{
    pthread_mutex_lock(&orphan_lock);
    bool ok = norphans < ORPHANS;
    if (ok)
        orphans[norphans++] = *o;
    pthread_mutex_unlock(&orphan_lock);
    return ok;
}

static bool orphan_take(struct obj *o)
{
    pthread_mutex_lock(&orphan_lock);
    bool ok = norphans > 0;
    if (ok)
        *o = orphans[--norphans];
    pthread_mutex_unlock(&orphan_lock);
    return ok;
}

struct worker {
    pthread_t thread;
    _Atomic int state;             /* 0 free slot, 1 running, 2 finished (to be joined) */
    uint64_t seed;
    long steps;
    struct obj slots[SLOTS];
    pthread_mutex_t lock;          /* the inbox */
    bool open;
    struct obj inbox[INBOX];
    unsigned ninbox;
};

static struct worker workers[WORKERS];
static _Atomic bool stopping;
static _Atomic long workers_started, handed_over;

/* Gives o to worker w; false if its inbox is closed or full. */
static bool send_to(struct worker *w, struct obj *o)
{
    pthread_mutex_lock(&w->lock);
    bool ok = w->open && w->ninbox < INBOX;
    if (ok)
        w->inbox[w->ninbox++] = *o;
    pthread_mutex_unlock(&w->lock);
    return ok;
}

static void drain_inbox(struct worker *w, bool close)
{
    struct obj got[INBOX];
    pthread_mutex_lock(&w->lock);
    unsigned n = w->ninbox;
    memcpy(got, w->inbox, n * sizeof got[0]);
    w->ninbox = 0;
    if (close)
        w->open = false;
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < n; i++)
        check_and_free(&got[i]);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->seed;
    for (long step = 0; step < w->steps && !atomic_load_explicit(&stopping, memory_order_relaxed); step++) {
        rng = mix(rng + 0x9E3779B97F4A7C15ull);
        struct obj *o = &w->slots[rng % SLOTS];
        unsigned op = (unsigned)(rng >> 32) % 100;
        if (step % 64 == 0)
            drain_inbox(w, false);
        if (!o->p) {
            o->n = random_size(mix(rng));
            o->tag = mix(rng ^ 0xABCDEF);
            if (op < 20) {
                o->p = sc_calloc(1, o->n);
                if (o->p)
                    for (size_t i = 0; i < o->n; i += 509)
                        if (o->p[i])
                            atomic_fetch_add(&calloc_dirty, 1);
            } else {
                o->p = sc_malloc(o->n);
            }
            if (!o->p) {
                atomic_fetch_add(&corrupted, 1);
                continue;
            }
            fill(o);
        } else if (op < 45) {
            check_and_free(o);
        } else if (op < 75) {
            /* To another worker, or left behind for anyone. */
            if (!intact(o))
                atomic_fetch_add(&corrupted, 1);
            struct worker *to = &workers[(rng >> 40) % WORKERS];
            if (to != w && send_to(to, o)) {
                atomic_fetch_add_explicit(&handed_over, 1, memory_order_relaxed);
                o->p = NULL;
            } else if (op < 50 && orphan_put(o)) {
                o->p = NULL;
            }
        } else if (op < 85) {
            if (!intact(o))
                atomic_fetch_add(&corrupted, 1);
            size_t n = random_size(mix(rng ^ 77));
            unsigned char *q = sc_realloc(o->p, n);
            if (!q) {
                atomic_fetch_add(&corrupted, 1);
                continue;
            }
            o->p = q;
            o->n = n;
            fill(o);
        } else {
            struct obj other;
            if (op < 90 && orphan_take(&other))
                check_and_free(&other);
        }
    }
    /* Leaving: half of what it holds stays live for others, the rest is freed. */
    drain_inbox(w, true);
    for (unsigned i = 0; i < SLOTS; i++) {
        struct obj *o = &w->slots[i];
        if (!o->p)
            continue;
        if ((i % 2 || atomic_load(&stopping)) && orphan_put(o))
            o->p = NULL;
        else
            check_and_free(o);
    }
    atomic_store(&w->state, 2);
    return NULL;
}

static void start_worker(struct worker *w, uint64_t seed)
{
    w->seed = seed;
    w->steps = (1000 + (long)(mix(seed) % 20000)) / (CHECK_TSAN ? 8 : 1);   /* as many exits */
    pthread_mutex_lock(&w->lock);
    w->open = true;
    pthread_mutex_unlock(&w->lock);
    atomic_store(&w->state, 1);
    atomic_fetch_add(&workers_started, 1);
    if (pthread_create(&w->thread, NULL, work, w))
        abort();
}

static _Atomic long scavenges, stat_reads, stats_bad;

static void *scavenger(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        sc_scavenge();
        atomic_fetch_add(&scavenges, 1);
        usleep(2000);
    }
    return NULL;
}

static void *stats_reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        struct sc_stats st;
        sc_read_stats(&st);
        uint64_t m = 0, f = 0;
        for (int c = 0; c < SC_NUM_CLASSES; c++) {
            m += st.by_class[c].mallocs;
            f += st.by_class[c].frees;
        }
        if (st.frees > st.mallocs || m != st.mallocs || f != st.frees || st.heap_idle < st.heap_released ||
            st.heap_sys < st.heap_inuse + st.stack_inuse)
            atomic_fetch_add(&stats_bad, 1);
        atomic_fetch_add(&stat_reads, 1);
        usleep(500);
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void threads_share_the_heap(void)
{
    const char *env = getenv("STRESS_SECONDS");
    double seconds = env ? atof(env) : 2.0;
    sc_free(sc_malloc(1));
    sc_scavenge();
    long rss0 = check_rss_bytes();
    struct sc_stats st0, st1, st2;
    sc_read_stats(&st0);
    double t0 = now(), deadline = t0 + seconds;
    for (int i = 0; i < WORKERS; i++)
        pthread_mutex_init(&workers[i].lock, NULL);
    pthread_t scav, stats;
    pthread_create(&scav, NULL, scavenger, NULL);
    pthread_create(&stats, NULL, stats_reader, NULL);
    uint64_t seed = 12345;
    while (now() < deadline) {
        for (int i = 0; i < WORKERS; i++) {
            struct worker *w = &workers[i];
            if (atomic_load(&w->state) == 2) {
                pthread_join(w->thread, NULL);
                atomic_store(&w->state, 0);
            }
            if (atomic_load(&w->state) == 0)
                start_worker(w, seed = mix(seed));
        }
        usleep(1000);
    }
    atomic_store(&stopping, true);
    for (int i = 0; i < WORKERS; i++)
        if (atomic_load(&workers[i].state))
            pthread_join(workers[i].thread, NULL);
    pthread_join(scav, NULL);
    pthread_join(stats, NULL);
    double ran = now() - t0;

    /* Quiet now: what the workers left behind is all that is live. */
    uint64_t usable = 0;
    for (size_t i = 0; i < norphans; i++)
        usable += sc_usable_size(orphans[i].p);
    sc_read_stats(&st1);
    long live = (long)((st1.mallocs - st1.frees) - (st0.mallocs - st0.frees));
    printf("# %.1f s: %ld workers, %ld handed over, %ld scavenges, %ld stats reads; %zu objects (%llu bytes) left live\n",
           ran, (long)workers_started, (long)handed_over, (long)scavenges, (long)stat_reads, norphans,
           (unsigned long long)usable);
    CHECKF(corrupted == 0, "%ld objects corrupted or not allocated", (long)corrupted);
    CHECKF(calloc_dirty == 0, "%ld calloc bytes not zero", (long)calloc_dirty);
    CHECKF(stats_bad == 0, "%ld inconsistent stats reads", (long)stats_bad);
    CHECKF(live == (long)norphans, "mallocs - frees = %ld, live objects %zu", live, norphans);
    CHECKF(st1.heap_alloc - st0.heap_alloc == usable, "heap_alloc grew by %llu, usable sizes of the live objects %llu",
           (unsigned long long)(st1.heap_alloc - st0.heap_alloc), (unsigned long long)usable);

    struct obj o;
    while (orphan_take(&o))
        check_and_free(&o);
    CHECK(corrupted == 0);
    sc_scavenge();
    sc_read_stats(&st2);
    long rss2 = check_rss_bytes();
    printf("# RSS %ld MiB at the start, %ld MiB after freeing everything and scavenging\n", rss0 >> 20, rss2 >> 20);
    CHECK(st2.mallocs - st0.mallocs == st2.frees - st0.frees);
    CHECK(st2.heap_alloc == st0.heap_alloc);
    CHECKF(st2.heap_inuse <= st0.heap_inuse, "heap_inuse %llu -> %llu", (unsigned long long)st0.heap_inuse,
           (unsigned long long)st2.heap_inuse);
    if (check_rss_is_the_heaps())
        CHECKF(rss2 - rss0 < (8l << 20), "RSS %ld KiB above the start", (rss2 - rss0) >> 10);
}

int main(void)
{
    RUN(threads_share_the_heap);
    CHECK_DONE();
}
