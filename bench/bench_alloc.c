/* bench_alloc: the allocator measurements behind docs/performance.md's tables.
 *
 *   bench_alloc time [ALLOC...]   ns per malloc+free pair and per allocation in batches
 *                                 of 1000, every size, for each allocator
 *   bench_alloc instr ALLOC       the same loops once each, bracketed by callgrind client
 *                                 requests (run under valgrind --tool=callgrind)
 *   bench_alloc rss               bytes of RSS per live object, 1,000,000 objects of 24,
 *                                 100 and 4 bytes and of 1..15 bytes in turn, each allocator
 *                                 in a fresh child process
 *   bench_alloc growth            growth policies: Go's, doubling, and the smooth x2 -> x1.125 of the Go proposal "runtime: smoother growth rate transition yields great results"
 *   bench_alloc stats             us per sc_read_stats with 10^6 live 24 B objects and with
 *                                 10^5 of 1 KiB (it walks every span)
 *
 * "sc" calls sc_malloc with a compile-time constant size, so a build with
 * SIZE_SPECIALIZED=1 takes the size-specialized entry points and one with 0 the generic
 * path: the two builds of this file give the on/off comparison.  The other allocators
 * (glibc, and jemalloc, mimalloc, tcmalloc where installed, loaded with dlopen) are
 * called through function pointers.  Output is tab-separated, one figure per line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scalloc.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(x) (void)(x)
#define CALLGRIND_TOGGLE_COLLECT
#endif

#define BATCH 1000
#define SC_PAGE_SHIFT_BENCH 13   /* 8 KiB pages: heap_inuse in pages */
#define SIZES(X) X(4) X(8) X(12) X(16) X(24) X(32) X(48) X(64) X(80) X(88) X(96) X(112) X(128) X(144) X(192) X(256) \
    X(1024) X(4096) X(16384) X(32768) X(65536) X(262144)

static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Where a batch keeps its pointers: each round moves 512 bytes on, eight rounds covering
 * a 4 KiB page, so that the stores into this array and the allocator's loads alias in
 * 4 KiB (a false dependency that stalls the loads) in some rounds of every run rather
 * than in all rounds of some builds: a change of code layout once moved the malloc-loop
 * timings by 40%. */
static void **batch_slots(long round)
{
    static void *slots[BATCH + 7 * 64];
    return slots + (round % 8) * 64;
}

/* ---- sc, with constant sizes ---- */
#define SC_LOOPS(N)                                                   \
    static void sc_pair_##N(long iters)                               \
    {                                                                 \
        for (long i = 0; i < iters; i++) {                            \
            void *p = sc_malloc(N);                                   \
            escape(p);                                                \
            sc_free(p);                                               \
        }                                                             \
    }                                                                 \
    static void sc_batch_##N(long rounds)                             \
    {                                                                 \
        for (long r = 0; r < rounds; r++) {                           \
            void **ps = batch_slots(r);                               \
            for (int i = 0; i < BATCH; i++) {                         \
                ps[i] = sc_malloc(N);                                 \
                escape(ps[i]);                                        \
            }                                                         \
            for (int i = 0; i < BATCH; i++)                           \
                sc_free(ps[i]);                                       \
        }                                                             \
    }                                                                 \
    /* The mallocs of the batches alone: ns spent in them, and under  \
     * callgrind the frees are not collected. */                      \
    static double sc_mallocs_##N(long rounds)                         \
    {                                                                 \
        double ns = 0;                                                \
        for (long r = 0; r < rounds; r++) {                           \
            void **ps = batch_slots(r);                               \
            double t0 = now_ns();                                     \
            for (int i = 0; i < BATCH; i++) {                         \
                ps[i] = sc_malloc(N);                                 \
                escape(ps[i]);                                        \
            }                                                         \
            ns += now_ns() - t0;                                      \
            CALLGRIND_TOGGLE_COLLECT;                                 \
            for (int i = 0; i < BATCH; i++)                           \
                sc_free(ps[i]);                                       \
            CALLGRIND_TOGGLE_COLLECT;                                 \
        }                                                             \
        return ns;                                                    \
    }
SIZES(SC_LOOPS)

struct sc_case { size_t size; void (*pair)(long); void (*batch)(long); double (*mallocs)(long); };
#define SC_CASE(N) { N, sc_pair_##N, sc_batch_##N, sc_mallocs_##N },
static const struct sc_case sc_cases[] = { SIZES(SC_CASE) };
#define NSIZES (sizeof sc_cases / sizeof sc_cases[0])

/* ---- other allocators, through pointers ---- */
struct allocator {
    const char *name;
    void *(*m)(size_t);
    void (*f)(void *);
};

static void *sc_generic_malloc(size_t n) { return sc_malloc_generic(n); }

static int load_peer(struct allocator *a, const char *name)
{
    static const struct { const char *name, *lib, *m, *f; } peers[] = {
        { "glibc", NULL, "malloc", "free" },
        { "jemalloc", "libjemalloc.so.2", "malloc", "free" },
        { "mimalloc", "libmimalloc.so.2", "mi_malloc", "mi_free" },
        { "tcmalloc", "libtcmalloc_minimal.so.4", "tc_malloc", "tc_free" },
    };
    for (size_t i = 0; i < sizeof peers / sizeof peers[0]; i++) {
        if (strcmp(name, peers[i].name))
            continue;
        /* jemalloc cannot be dlopened (static TLS): the script preloads it instead. */
        void *h = RTLD_DEFAULT;
        if (peers[i].lib && !(h = dlopen(peers[i].lib, RTLD_NOW | RTLD_NOLOAD)) &&
            !(h = dlopen(peers[i].lib, RTLD_NOW | RTLD_LOCAL))) {
            fprintf(stderr, "# %s: %s\n", name, dlerror());
            return -1;
        }
        a->name = peers[i].name;
        a->m = (void *(*)(size_t))dlsym(h, peers[i].m);
        a->f = (void (*)(void *))dlsym(h, peers[i].f);
        return a->m && a->f ? 0 : -1;
    }
    if (!strcmp(name, "sc-generic")) {
        *a = (struct allocator){ "sc-generic", sc_generic_malloc, sc_free };
        return 0;
    }
    return -1;
}

static void peer_pair(const struct allocator *a, size_t n, long iters)
{
    for (long i = 0; i < iters; i++) {
        void *p = a->m(n);
        escape(p);
        a->f(p);
    }
}

static void peer_batch(const struct allocator *a, size_t n, long rounds)
{
    for (long r = 0; r < rounds; r++) {
        void **ps = batch_slots(r);
        for (int i = 0; i < BATCH; i++) {
            ps[i] = a->m(n);
            escape(ps[i]);
        }
        for (int i = 0; i < BATCH; i++)
            a->f(ps[i]);
    }
}

static void empty_pair(long iters)
{
    for (long i = 0; i < iters; i++)
        escape(&iters);
}

static double median5(double t[5])
{
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j];
                t[j] = x;
            }
    return t[2];
}

/* Runs fn(arg) for `work` units, best median of 5 timings, in ns per unit. */
typedef void (*runner)(const void *ctx, long reps);
static double time_per(runner run, const void *ctx, long reps, long units)
{
    double t[5];
    run(ctx, reps / 10 + 1);   /* warm: spans carved, caches filled */
    for (int k = 0; k < 5; k++) {
        double t0 = now_ns();
        run(ctx, reps);
        t[k] = (now_ns() - t0) / (double)units;
    }
    return median5(t);
}

/* ns per malloc in the batches' malloc loops, median of 5 after a warming run. */
static double mallocs_per(const struct sc_case *c, long rounds)
{
    double t[5];
    c->mallocs(rounds / 10 + 1);
    for (int k = 0; k < 5; k++)
        t[k] = c->mallocs(rounds) / (double)(rounds * BATCH);
    return median5(t);
}

struct ctx { const struct allocator *a; size_t size; const struct sc_case *c; };
static void run_sc_pair(const void *x, long reps) { ((const struct ctx *)x)->c->pair(reps); }
static void run_sc_batch(const void *x, long reps) { ((const struct ctx *)x)->c->batch(reps); }
static void run_peer_pair(const void *x, long reps) { const struct ctx *c = x; peer_pair(c->a, c->size, reps); }
static void run_peer_batch(const void *x, long reps) { const struct ctx *c = x; peer_batch(c->a, c->size, reps); }
static void run_empty(const void *x, long reps) { (void)x; empty_pair(reps); }

static long pair_iters(size_t size) { return size >= 65536 ? 200000 : 3000000; }
static long batch_rounds(size_t size) { return size >= 65536 ? 20 : size >= 4096 ? 200 : 2000; }

static void cmd_time(int argc, char **argv)
{
    const char *name = SC_SIZE_SPECIALIZED ? "sc-on" : "sc-off";
    double empty = time_per(run_empty, NULL, 3000000, 3000000);
    printf("time\tempty-loop\t0\tpair\t%.2f\n", empty);
    for (size_t i = 0; i < NSIZES; i++) {
        struct ctx c = { NULL, sc_cases[i].size, &sc_cases[i] };
        long it = pair_iters(c.size), r = batch_rounds(c.size);
        printf("time\t%s\t%zu\tpair\t%.2f\n", name, c.size, time_per(run_sc_pair, &c, it, it));
        printf("time\t%s\t%zu\tbatch\t%.2f\n", name, c.size, time_per(run_sc_batch, &c, r, r * BATCH));
        if (c.size <= 256)
            printf("time\t%s\t%zu\tmalloc\t%.2f\n", name, c.size, mallocs_per(&sc_cases[i], r));
    }
    for (int k = 0; k < argc; k++) {
        struct allocator a;
        if (load_peer(&a, argv[k])) {
            printf("# %s not installed\n", argv[k]);
            continue;
        }
        for (size_t i = 0; i < NSIZES; i++) {
            struct ctx c = { &a, sc_cases[i].size, NULL };
            long it = pair_iters(c.size), r = batch_rounds(c.size);
            printf("time\t%s\t%zu\tpair\t%.2f\n", a.name, c.size, time_per(run_peer_pair, &c, it, it));
            printf("time\t%s\t%zu\tbatch\t%.2f\n", a.name, c.size, time_per(run_peer_batch, &c, r, r * BATCH));
        }
    }
}

/* Under callgrind: each loop between a zero and a dump; the script divides the dumped
 * totals by the counts printed here and subtracts the empty loop. */
static void cmd_instr(const char *alloc)
{
    enum { PAIRS = 20000, ROUNDS = 20 };
    char label[96];
    CALLGRIND_ZERO_STATS;
    empty_pair(PAIRS);
    CALLGRIND_DUMP_STATS_AT("empty-loop 0 pair 20000");
    struct allocator a;
    bool sc = !strcmp(alloc, "sc");
    if (!sc && load_peer(&a, alloc)) {
        printf("# %s not installed\n", alloc);
        return;
    }
    for (size_t i = 0; i < NSIZES; i++) {
        size_t n = sc_cases[i].size;
        if (sc) {
            sc_cases[i].pair(PAIRS / 10);
            CALLGRIND_ZERO_STATS;
            sc_cases[i].pair(PAIRS);
            snprintf(label, sizeof label, "%s %zu pair %d", alloc, n, PAIRS);
            CALLGRIND_DUMP_STATS_AT(label);
            sc_cases[i].batch(2);
            CALLGRIND_ZERO_STATS;
            sc_cases[i].batch(ROUNDS);
            snprintf(label, sizeof label, "%s %zu batch %d", alloc, n, ROUNDS * BATCH);
            CALLGRIND_DUMP_STATS_AT(label);
            if (n > 256)
                continue;
            sc_cases[i].mallocs(2);
            CALLGRIND_ZERO_STATS;
            sc_cases[i].mallocs(ROUNDS);
            snprintf(label, sizeof label, "%s %zu malloc %d", alloc, n, ROUNDS * BATCH);
            CALLGRIND_DUMP_STATS_AT(label);
            continue;
        } else {
            peer_pair(&a, n, PAIRS / 10);
            CALLGRIND_ZERO_STATS;
            peer_pair(&a, n, PAIRS);
            snprintf(label, sizeof label, "%s %zu pair %d", alloc, n, PAIRS);
            CALLGRIND_DUMP_STATS_AT(label);
            peer_batch(&a, n, 2);
            CALLGRIND_ZERO_STATS;
            peer_batch(&a, n, ROUNDS);
        }
        snprintf(label, sizeof label, "%s %zu batch %d", alloc, n, ROUNDS * BATCH);
        CALLGRIND_DUMP_STATS_AT(label);
    }
}

/* Anonymous resident memory only: the child was forked, so every code page of libc or
 * of an allocator's slow paths it runs for the first time would count as RSS too
 * (that noise was 0.2 bytes per object between runs). */
static long rss_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    long kb = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

static void cmd_rss(int argc, char **argv)
{
    enum { COUNT = 1000000 };
    /* 0: a mix of 1..15 bytes, each size in turn (strings and small structs). */
    static const size_t sizes[] = { 24, 100, 4, 0 };
    for (int k = -1; k < argc; k++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            int fds[2];
            if (pipe(fds))
                return;
            pid_t pid = fork();
            if (pid == 0) {
                struct allocator a = { "sc", sc_generic_malloc, sc_free };
                if (k >= 0 && load_peer(&a, argv[k]))
                    _exit(3);
                void **ps = mmap(NULL, COUNT * sizeof *ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                memset(ps, 0, COUNT * sizeof *ps);
                a.f(a.m(sizes[s] ? sizes[s] : 1));     /* the allocator's own start-up */
                long before = rss_now();
                for (int i = 0; i < COUNT; i++) {
                    size_t n = sizes[s] ? sizes[s] : 1 + (size_t)i % 15;
                    ps[i] = a.m(n);
                    memset(ps[i], 1, n);
                }
                double per = (double)(rss_now() - before) / COUNT;
                char line[128];
                int n = snprintf(line, sizeof line, "rss\t%s\t%s\t%.2f\n", a.name,
                                 sizes[s] == 24 ? "24" : sizes[s] == 100 ? "100" : sizes[s] == 4 ? "4" : "1-15", per);
                if (write(fds[1], line, (size_t)n) < 0)
                    _exit(4);
                _exit(0);
            }
            close(fds[1]);
            char buf[128] = { 0 };
            ssize_t n = read(fds[0], buf, sizeof buf - 1);
            close(fds[0]);
            waitpid(pid, NULL, 0);
            if (n > 0)
                fputs(buf, stdout);
        }
    }
}

/* ---- growth policies (Go's, x2, and the proposal's smooth x2 -> x1.125) ---- */
static size_t grow_x2(size_t cap, size_t need)
{
    size_t c = cap ? cap * 2 : 8;
    return sc_roundup(c < need ? need : c);
}

static size_t grow_smooth(size_t cap, size_t need)
{
    const size_t start = 1 << 10, end = 1 << 24;
    size_t c = cap;
    if (cap < start) {
        c = cap ? cap * 2 : 8;
    } else {
        size_t mul = cap <= end ? (size_t)(27 - (64 - __builtin_clzll(cap))) : 2;
        while (c < need)
            c += mul * (c >> 4);
    }
    return sc_roundup(c < need ? need : c);
}

static size_t grow_go(size_t cap, size_t need) { return sc_grow_cap(cap, need, 1); }

static void cmd_growth(long step)
{
    struct { const char *name; size_t (*grow)(size_t, size_t); } policies[] = {
        { "go", grow_go }, { "x2", grow_x2 }, { "smooth-x2-x1.125", grow_smooth },
    };
    for (size_t p = 0; p < 3; p++) {
        unsigned long long reallocs = 0, bytes = 0, waste = 0, targets = 0;
        double t0 = now_ns();
        for (size_t target = 320 << 10; target <= 16u << 20; target += (size_t)step) {
            size_t len = 0, cap = 0;
            char *buf = NULL;
            while (len < target) {
                if (len == cap) {
                    cap = policies[p].grow(cap, len + 1);
                    buf = sc_realloc(buf, cap);
                    reallocs++;
                    bytes += cap;
                }
                /* Appending byte by byte up to the capacity or the target. */
                size_t n = (cap < target ? cap : target) - len;
                memset(buf + len, (int)len, n);
                len += n;
            }
            waste += cap - len;
            targets++;
            sc_free(buf);
        }
        double ms = (now_ns() - t0) / 1e6;
        printf("growth\t%s\t%llu\t%llu\t%llu\t%.1f\t%llu\n", policies[p].name, reallocs, bytes, waste / targets, ms, targets);
    }
}

static void cmd_stats(void)
{
    static const struct { long count; size_t size; } cases[] = { { 1000000, 24 }, { 100000, 1024 } };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        void **ps = malloc((size_t)cases[k].count * sizeof *ps);
        if (!ps)
            return;
        for (long i = 0; i < cases[k].count; i++)
            ps[i] = sc_malloc_generic(cases[k].size);
        struct sc_stats st;
        double t[5];
        for (int r = 0; r < 5; r++) {
            double t0 = now_ns();
            sc_read_stats(&st);
            t[r] = (now_ns() - t0) / 1000;
        }
        printf("stats\t%ld\t%zu\t%llu\t%.1f\n", cases[k].count, cases[k].size,
               (unsigned long long)(st.heap_inuse >> SC_PAGE_SHIFT_BENCH), median5(t));
        for (long i = 0; i < cases[k].count; i++)
            sc_free(ps[i]);
        free(ps);
        sc_scavenge();       /* the next case walks only its own spans */
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_alloc time [ALLOC...] | instr ALLOC | rss [ALLOC...] | growth [STEP] | stats\n");
        return 2;
    }
    if (!strcmp(argv[1], "time"))
        cmd_time(argc - 2, argv + 2);
    else if (!strcmp(argv[1], "instr") && argc == 3)
        cmd_instr(argv[2]);
    else if (!strcmp(argv[1], "rss"))
        cmd_rss(argc - 2, argv + 2);
    else if (!strcmp(argv[1], "growth"))
        cmd_growth(argc > 2 ? atol(argv[2]) : 10001);
    else if (!strcmp(argv[1], "stats"))
        cmd_stats();
    else
        return 2;
    return 0;
}
