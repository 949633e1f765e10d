/* bench_coro: coroutine switch and spawn costs, beside the alternatives.
 *
 *   bench_coro time      ns per switch round trip (resume + yield) and per
 *                        spawn+run+destroy with a heap stack, for this build's switch,
 *                        Boost.Context's jump_fcontext (dlopened, where installed), and
 *                        pthread create+join
 *   bench_coro instr     the same loops between callgrind client requests
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
