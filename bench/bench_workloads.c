/* bench_workloads: allocator workloads modelled on the classic benchmarks, for comparing
 * whole allocators by LD_PRELOAD (bench/bench-programs.sh).  Built against glibc alone and
 * calling plain malloc and free, so whatever is preloaded serves them.
 *
 *   bench_workloads larson T SCALE     server-like: T threads each keep 1000 objects of
 *                                      random size (16..1000 B), replacing a random one at
 *                                      a time; every 10,000 steps a thread hands its objects
 *                                      to a new thread and exits (frees land on others'
 *                                      memory, threads come and go); the new thread starts
 *                                      once the old one has exited (joins it), so that how
 *                                      many threads are alive at once - and so the peak RSS
 *                                      of every allocator - does not depend on the load
 *   bench_workloads xmalloc T SCALE    T producers allocate (8..512 B) in batches of 64
 *                                      and queue them, T consumers take batches and free
 *                                      them (xmalloc-test: every free a remote one)
 *   bench_workloads cache-scratch T SCALE
 *                                      false sharing: the main thread allocates one 8-byte
 *                                      object per thread back to back; each thread frees
 *                                      its own and then allocates, writes and frees 8-byte
 *                                      objects in a loop (an allocator that hands
 *                                      neighbouring bytes to different threads makes them
 *                                      fight over a cache line)
 *   bench_workloads glibc-simple 1 SCALE
 *                                      one thread: batches of 1000 objects of one size,
 *                                      allocated then freed, sizes 16 B to 4 KiB in turn
 *                                      (glibc's bench-malloc-simple)
 *   bench_workloads mstress T SCALE    T threads keep 2000 objects each, of sizes mostly
 *                                      small with a long tail to 1 MiB, replaced at random;
 *                                      one in 16 is handed to a shared exchange and freed
 *                                      by whoever takes it (mimalloc-bench's mstress)
 *   bench_workloads run CMD ARGS...    runs a program and reports like the others
 *
 * Each workload ends with one line: "wall_s=... cpu_s=... maxrss_kb=... checksum=..." (cpu_s:
 * user and system time; run: the child's, and its peak RSS).  Objects are written when allocated and read before being freed, so
 * no allocator gets away with untouched memory. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_seconds(const struct rusage *ru)
{
    return (double)(ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) + (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e6;
}

static inline uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static _Atomic uint64_t checksum;
static long scale = 1;
static int nthreads = 1;

static void *take(size_t n, uint64_t tag)
{
    unsigned char *p = malloc(n);
    if (!p)
        abort();
    p[0] = (unsigned char)tag;
    p[n - 1] = (unsigned char)(tag >> 8);
    return p;
}

static void give(void *p, size_t n)
{
    unsigned char *q = p;
    atomic_fetch_add_explicit(&checksum, q[0] + q[n - 1], memory_order_relaxed);
    free(p);
}

/* ---- larson ---- */
enum { LARSON_SLOTS = 1000, LARSON_STEPS = 10000 };
/* prev: the thread that created this one, joined before the first step (none for the first). */
struct larson { void *p[LARSON_SLOTS]; size_t n[LARSON_SLOTS]; uint64_t seed; long generations;
                pthread_t prev; bool has_prev; };

static void *larson_thread(void *arg)
{
    struct larson *l = arg;
    /* Under load an exiting thread may wait a long time for a core, with its successor
     * already at work: a varying number of threads (caches, arenas, stacks) held at once. */
    if (l->has_prev)
        pthread_join(l->prev, NULL);
    l->prev = pthread_self();
    l->has_prev = true;
    for (int k = 0; k < LARSON_STEPS; k++) {
        unsigned i = (unsigned)(rnd(&l->seed) % LARSON_SLOTS);
        give(l->p[i], l->n[i]);
        l->n[i] = 16 + rnd(&l->seed) % 985;
        l->p[i] = take(l->n[i], l->seed);
    }
    if (__atomic_sub_fetch(&l->generations, 1, __ATOMIC_RELAXED) > 0) {      /* main polls it */
        pthread_t t;
        if (pthread_create(&t, NULL, larson_thread, l))
            abort();
        return NULL;
    }
    for (int i = 0; i < LARSON_SLOTS; i++)
        give(l->p[i], l->n[i]);
    __atomic_store_n(&l->generations, -1, __ATOMIC_RELEASE);    /* done */
    return NULL;
}

static void larson(void)
{
    struct larson *ls = calloc((size_t)nthreads, sizeof *ls);
    for (int t = 0; t < nthreads; t++) {
        ls[t].seed = 0x9E3779B97F4A7C15u * (t + 1);
        ls[t].generations = 20 * scale;
        for (int i = 0; i < LARSON_SLOTS; i++) {
            ls[t].n[i] = 16 + rnd(&ls[t].seed) % 985;
            ls[t].p[i] = take(ls[t].n[i], i);        /* allocated here, freed by the threads */
        }
    }
    for (int t = 0; t < nthreads; t++) {
        pthread_t th;
        if (pthread_create(&th, NULL, larson_thread, &ls[t]))
            abort();
    }
    for (int t = 0; t < nthreads; t++) {
        while (__atomic_load_n(&ls[t].generations, __ATOMIC_ACQUIRE) != -1)
            usleep(1000);
        pthread_join(ls[t].prev, NULL);       /* the last of the line */
    }
    free(ls);
}

/* ---- xmalloc-test ---- */
enum { BATCH = 64, QUEUE = 256 };
struct batch { void *p[BATCH]; };
static struct batch *queue[QUEUE];
static unsigned qhead, qtail;
static long produced_left;
static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcond = PTHREAD_COND_INITIALIZER;

static void *producer(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x9E3779B97F4A7C15u + 1;
    for (;;) {
        struct batch *b = malloc(sizeof *b);
        for (int i = 0; i < BATCH; i++) {
            size_t n = 8 + rnd(&seed) % 505;
            b->p[i] = take(n, n);
        }
        pthread_mutex_lock(&qlock);
        while (qtail - qhead == QUEUE && produced_left > 0)
            pthread_cond_wait(&qcond, &qlock);
        if (produced_left <= 0) {
            pthread_mutex_unlock(&qlock);
            for (int i = 0; i < BATCH; i++)
                free(b->p[i]);
            free(b);
            return NULL;
        }
        produced_left -= BATCH;
        queue[qtail++ % QUEUE] = b;
        pthread_cond_broadcast(&qcond);
        pthread_mutex_unlock(&qlock);
    }
}

static void *consumer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&qlock);
        while (qtail == qhead && produced_left > 0)
            pthread_cond_wait(&qcond, &qlock);
        if (qtail == qhead) {
            pthread_mutex_unlock(&qlock);
            return NULL;
        }
        struct batch *b = queue[qhead++ % QUEUE];
        pthread_cond_broadcast(&qcond);
        pthread_mutex_unlock(&qlock);
        for (int i = 0; i < BATCH; i++) {
            atomic_fetch_add_explicit(&checksum, ((unsigned char *)b->p[i])[0], memory_order_relaxed);
            free(b->p[i]);
        }
        free(b);
    }
}

static void xmalloc(void)
{
    produced_left = 1000000 * scale;
    pthread_t t[64];
    int n = nthreads > 32 ? 32 : nthreads;
    for (int k = 0; k < n; k++) {
        pthread_create(&t[2 * k], NULL, producer, (void *)(uintptr_t)(k + 1));
        pthread_create(&t[2 * k + 1], NULL, consumer, NULL);
    }
    for (int k = 0; k < 2 * n; k++)
        pthread_join(t[k], NULL);
}

/* ---- cache-scratch ---- */
static void *scratch_thread(void *arg)
{
    free(arg);                                    /* the object the main thread made for us */
    long iters = 200000 * scale;
    for (long i = 0; i < iters; i++) {
        volatile unsigned char *p = malloc(8);
        for (int k = 0; k < 8; k++)
            p[k] = 0;
        for (int k = 0; k < 50; k++)
            p[k & 7] = (unsigned char)(p[k & 7] + k);
        atomic_fetch_add_explicit(&checksum, p[3], memory_order_relaxed);
        free((void *)p);
    }
    return NULL;
}

static void cache_scratch(void)
{
    pthread_t t[256];
    void *objs[256];
    int n = nthreads > 256 ? 256 : nthreads;
    for (int k = 0; k < n; k++)
        objs[k] = malloc(8);
    for (int k = 0; k < n; k++)
        pthread_create(&t[k], NULL, scratch_thread, objs[k]);
    for (int k = 0; k < n; k++)
        pthread_join(t[k], NULL);
}

/* ---- glibc-simple ---- */
static void glibc_simple(void)
{
    static const size_t sizes[] = { 16, 32, 64, 128, 256, 512, 1024, 4096 };
    static void *ps[1000];
    long rounds = 4000 * scale;
    for (long r = 0; r < rounds; r++) {
        size_t n = sizes[r % 8];
        for (int i = 0; i < 1000; i++)
            ps[i] = take(n, (uint64_t)i);
        for (int i = 0; i < 1000; i++)
            give(ps[i], n);
    }
}

/* ---- mstress ---- */
enum { MSTRESS_SLOTS = 2000, EXCHANGE = 1024 };
static void *_Atomic exchange[EXCHANGE];

static size_t mstress_size(uint64_t *seed)
{
    uint64_t r = rnd(seed);
    if (r % 1000 == 0)
        return 64 * 1024 + r % (1 << 20);          /* one in 1000: up to 1 MiB */
    if (r % 50 == 0)
        return 1024 + r % 16384;
    return 8 + (r >> 16) % 120;
}

static void *mstress_thread(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x9E3779B97F4A7C15u + 7;
    static __thread void *slot[MSTRESS_SLOTS];
    static __thread size_t len[MSTRESS_SLOTS];
    long steps = 400000 * scale;
    for (long k = 0; k < steps; k++) {
        unsigned i = (unsigned)(rnd(&seed) % MSTRESS_SLOTS);
        if (slot[i]) {
            if (seed % 16 == 0) {                  /* hand it over */
                unsigned e = (unsigned)(seed >> 20) % EXCHANGE;
                void *old = atomic_exchange(&exchange[e], slot[i]);
                if (old)
                    free(old);                   /* someone else's */
            } else {
                give(slot[i], len[i]);
            }
        }
        len[i] = mstress_size(&seed);
        slot[i] = take(len[i], seed);
    }
    for (int i = 0; i < MSTRESS_SLOTS; i++)
        if (slot[i])
            give(slot[i], len[i]), slot[i] = NULL;
    return NULL;
}

static void mstress(void)
{
    pthread_t t[256];
    int n = nthreads > 256 ? 256 : nthreads;
    for (int k = 0; k < n; k++)
        pthread_create(&t[k], NULL, mstress_thread, (void *)(uintptr_t)(k + 1));
    for (int k = 0; k < n; k++)
        pthread_join(t[k], NULL);
    for (int e = 0; e < EXCHANGE; e++)
        free(atomic_exchange(&exchange[e], NULL));
}

static int run(char **argv)
{
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return 1;
    double wall = now() - t0;
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    fprintf(stderr, "wall_s=%.3f cpu_s=%.3f maxrss_kb=%ld status=%d\n", wall, cpu_seconds(&ru), ru.ru_maxrss,
            WIFEXITED(st) ? WEXITSTATUS(st) : 128);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "run"))
        return run(argv + 2);
    if (argc != 4) {
        fprintf(stderr, "usage: bench_workloads larson|xmalloc|cache-scratch|glibc-simple|mstress THREADS SCALE\n"
                        "       bench_workloads run CMD [ARGS...]\n");
        return 2;
    }
    nthreads = atoi(argv[2]);
    scale = atol(argv[3]);
    static const struct { const char *name; void (*fn)(void); } w[] = {
        { "larson", larson }, { "xmalloc", xmalloc }, { "cache-scratch", cache_scratch },
        { "glibc-simple", glibc_simple }, { "mstress", mstress },
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        if (strcmp(argv[1], w[i].name))
            continue;
        double t0 = now();
        w[i].fn();
        double wall = now() - t0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("wall_s=%.3f cpu_s=%.3f maxrss_kb=%ld checksum=%llu\n", wall, cpu_seconds(&ru), ru.ru_maxrss,
               (unsigned long long)checksum);
        return 0;
    }
    fprintf(stderr, "bench_workloads: no workload %s\n", argv[1]);
    return 2;
}
