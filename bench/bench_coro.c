/* bench_coro: coroutine switch and spawn costs, beside the alternatives.
 *
 *   bench_coro time      ns per switch round trip (resume + yield) and per
 *                        spawn+run+destroy with a heap stack, for this build's switch,
 *                        Boost.Context's jump_fcontext (dlopened, where installed), and
 *                        pthread create+join
 *   bench_coro instr     the same loops between callgrind client requests
 *   bench_coro park      ns per coro_park and coro_unpark of a suspended coroutine whose
 *                        live frames take D bytes, the bytes moved and the stack pages
 *                        resident before and after, beside the two other ways to the same
 *                        end: trimming the pages below the stack pointer, and a shared run
 *                        stack that copies the live part out and in at every switch
 *
 * The ucontext figures come from the same file built with CORO=ucontext. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "coro.h"
#include "scalloc.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(x) (void)(x)
#endif

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- this build's coroutines ---- */
static void *yielder(void *arg)
{
    (void)arg;
    for (;;)
        coro_yield(NULL);
    return NULL;
}

static void coro_round_trips(long n)
{
    static coro *c;
    if (!c)
        c = coro_create(yielder, NULL, 0);
    for (long i = 0; i < n; i++)
        coro_resume(c, NULL);
}

static void *returner(void *arg) { return arg; }

static void coro_spawns(long n)
{
    for (long i = 0; i < n; i++) {
        coro *c = coro_create(returner, NULL, 0);
        coro_resume(c, NULL);
    }
}

/* ---- Boost.Context's fcontext, through dlopen ---- */
typedef void *fcontext_t;
typedef struct { fcontext_t fctx; void *data; } transfer_t;
static transfer_t (*jump_fcontext)(fcontext_t, void *);
static fcontext_t (*make_fcontext)(void *, size_t, void (*)(transfer_t));

static bool load_fcontext(void)
{
    void *h = dlopen("libboost_context.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libboost_context.so.1.74.0", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return false;
    jump_fcontext = (transfer_t(*)(fcontext_t, void *))dlsym(h, "jump_fcontext");
    make_fcontext = (fcontext_t(*)(void *, size_t, void (*)(transfer_t)))dlsym(h, "make_fcontext");
    return jump_fcontext && make_fcontext;
}

static void fc_yielder(transfer_t t)
{
    for (;;)
        t = jump_fcontext(t.fctx, NULL);
}

static void fc_round_trips(long n)
{
    static fcontext_t ctx;
    if (!ctx) {
        size_t size = 32 << 10;
        char *stack = sc_stack_alloc(size);
        ctx = make_fcontext(stack + size, size, fc_yielder);
    }
    for (long i = 0; i < n; i++)
        ctx = jump_fcontext(ctx, NULL).fctx;
}

static void fc_returner(transfer_t t)
{
    jump_fcontext(t.fctx, t.data);   /* never resumed: the "destroy" frees the stack */
}

static void fc_spawns(long n)
{
    size_t size = 32 << 10;
    for (long i = 0; i < n; i++) {
        char *stack = sc_stack_alloc(size);
        fcontext_t ctx = make_fcontext(stack + size, size, fc_returner);
        jump_fcontext(ctx, NULL);
        sc_stack_free(stack);
    }
}

/* ---- parking ---- */
struct parkee {
    coro *c;
    size_t depth;
    uintptr_t low;             /* the lowest address of its live frame */
    coro_parked *parked;
    char *copy;                /* copy-on-switch: where its live part goes between turns */
};

static void *park_body(void *arg)
{
    struct parkee *p = arg;
    char frame[p->depth + 1];
    memset(frame, 1, sizeof frame);     /* a handler's frames are written, not only reserved */
    __asm__ volatile("" : : "r"(frame) : "memory");
    p->low = (uintptr_t)frame;
    for (;;)
        coro_yield(NULL);
    return NULL;
}

/* The default stack: a 32 KiB object of its own class, page-aligned, the control block in
 * its last page (coro.c). */
static uintptr_t stack_hi(const coro *c) { return ((uintptr_t)c + 4095) & ~(uintptr_t)4095; }

static size_t resident_pages(const coro *c)
{
    unsigned char vec[CORO_DEFAULT_STACK / 4096];
    if (mincore((void *)(stack_hi(c) - CORO_DEFAULT_STACK), CORO_DEFAULT_STACK, vec))
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < sizeof vec; i++)
        n += vec[i] & 1;
    return n;
}

#define PARKEES 1000

static void park_bench(void)
{
    static const size_t depths[] = { 256, 1024, 4096, 16384 };
    static struct parkee ps[PARKEES];
    printf("# park: %d suspended coroutines per depth, best of 5 rounds; ns per coroutine\n", PARKEES);
    printf("# depth\tpark_ns\tunpark_ns\tbytes_moved\tpages_before\tpages_parked\ttrim_ns\ttrim_pages\t"
           "roundtrip_ns\tcopy_switch_roundtrip_ns\n");
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        double best_park = 1e18, best_unpark = 1e18, best_trim = 1e18, best_rt = 1e18, best_copy = 1e18;
        size_t moved = 0, before = 0, parked = 0, trimmed = 0;
        for (int i = 0; i < PARKEES; i++) {
            ps[i] = (struct parkee){ .depth = depths[d] };
            ps[i].c = coro_create(park_body, &ps[i], 0);
            coro_resume(ps[i].c, NULL);
        }
        for (int round = 0; round < 5; round++) {
            for (int i = 0; i < PARKEES; i++)
                coro_resume(ps[i].c, NULL);          /* warm: its pages are resident */
            before = resident_pages(ps[0].c);
            double t0 = now_ns();
            for (int i = 0; i < PARKEES; i++)
                ps[i].parked = coro_park(ps[i].c);
            double t1 = now_ns();
            moved = coro_parked_bytes(ps[0].parked);
            for (int i = 0; i < PARKEES; i++)
                coro_unpark(ps[i].parked);
            double t2 = now_ns();
            if ((t1 - t0) / PARKEES < best_park)
                best_park = (t1 - t0) / PARKEES;
            if ((t2 - t1) / PARKEES < best_unpark)
                best_unpark = (t2 - t1) / PARKEES;
            /* Trimming: the pages below the live frames go, the canary's page and the
             * pages of the live part stay; the coroutine resumes with no copy. */
            for (int i = 0; i < PARKEES; i++)
                coro_resume(ps[i].c, NULL);
            t0 = now_ns();
            for (int i = 0; i < PARKEES; i++) {
                uintptr_t lo = stack_hi(ps[i].c) - CORO_DEFAULT_STACK + 4096, hi = (ps[i].low - 256) & ~(uintptr_t)4095;
                if (hi > lo)
                    madvise((void *)lo, hi - lo, MADV_DONTNEED);
            }
            t1 = now_ns();
            trimmed = resident_pages(ps[0].c);
            if ((t1 - t0) / PARKEES < best_trim)
                best_trim = (t1 - t0) / PARKEES;
            /* A shared run stack: every switch away copies the live part out, every switch
             * back copies it in (emulated on the coroutine's own stack: the same bytes). */
            size_t live = stack_hi(ps[0].c) - (ps[0].low - 256);
            t0 = now_ns();
            for (int k = 0; k < 100; k++)
                for (int i = 0; i < 10; i++)
                    coro_resume(ps[i].c, NULL);
            t1 = now_ns();
            if ((t1 - t0) / 1000 < best_rt)
                best_rt = (t1 - t0) / 1000;
            for (int i = 0; i < 10; i++) {
                ps[i].copy = malloc(live);
                memcpy(ps[i].copy, (char *)(stack_hi(ps[i].c) - live), live);
            }
            t0 = now_ns();
            for (int k = 0; k < 100; k++)
                for (int i = 0; i < 10; i++) {
                    char *lo = (char *)(stack_hi(ps[i].c) - live);
                    memcpy(lo, ps[i].copy, live);
                    coro_resume(ps[i].c, NULL);
                    memcpy(ps[i].copy, lo, live);
                    __asm__ volatile("" : : "r"(ps[i].copy) : "memory");
                }
            t1 = now_ns();
            for (int i = 0; i < 10; i++)
                free(ps[i].copy);
            if ((t1 - t0) / 1000 < best_copy)
                best_copy = (t1 - t0) / 1000;
        }
        ps[0].parked = coro_park(ps[0].c);
        parked = resident_pages(ps[0].c);
        coro_unpark(ps[0].parked);
        for (int i = 0; i < PARKEES; i++)
            coro_destroy(ps[i].c);
        printf("park\t%zu\t%.0f\t%.0f\t%zu\t%zu\t%zu\t%.0f\t%zu\t%.1f\t%.1f\n", depths[d], best_park, best_unpark, moved,
               before, parked, best_trim, trimmed, best_rt, best_copy);
    }
}

/* ---- threads ---- */
static void *thread_body(void *arg) { return arg; }

static void thread_spawns(long n)
{
    for (long i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, NULL, thread_body, NULL);
        pthread_join(t, NULL);
    }
}

static double per(void (*fn)(long), long n)
{
    fn(n / 10 + 1);
    double best = 1e18;
    for (int k = 0; k < 5; k++) {
        double t0 = now_ns();
        fn(n);
        double t = (now_ns() - t0) / (double)n;
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    bool instr = argc > 1 && !strcmp(argv[1], "instr");
    if (argc > 1 && !strcmp(argv[1], "park")) {
        park_bench();
        return 0;
    }
    bool fc = load_fcontext();
    const char *me = coro_switch_kind();
    char label[64];
    struct { const char *name, *what; void (*fn)(long); long n; bool on; } cases[] = {
        { me, "roundtrip", coro_round_trips, 2000000, true },
        { me, "spawn", coro_spawns, 1000000, true },
        { "fcontext", "roundtrip", fc_round_trips, 2000000, fc },
        { "fcontext", "spawn", fc_spawns, 1000000, fc },
        { "pthread", "spawn", thread_spawns, 20000, !instr },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!cases[i].on)
            continue;
        if (instr) {
            long n = 20000;
            cases[i].fn(n / 10);
            CALLGRIND_ZERO_STATS;
            cases[i].fn(n);
            snprintf(label, sizeof label, "%s %s %ld", cases[i].name, cases[i].what, n);
            CALLGRIND_DUMP_STATS_AT(label);
        } else {
            printf("time\t%s\t%s\t%.2f\n", cases[i].name, cases[i].what, per(cases[i].fn, cases[i].n));
        }
    }
    if (!fc)
        printf("# Boost.Context not installed: no fcontext figures\n");
    return 0;
}
