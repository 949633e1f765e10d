/* Unit tests of the coroutines: switching, nesting, many suspended coroutines, values
 * in and out, register and floating-point state, stack alignment, release at finish and
 * the stacks kept for the next coroutines,
 * overflow detection (canary, and guard pages that no frame can step over), parking
 * (frames kept at their addresses, pages given back, a parked stack that nobody may
 * touch), and misuse that must abort naming itself. */
#define _GNU_SOURCE
#include <fenv.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "coro.h"
#include "scalloc.h"

static void *counter_fn(void *arg)
{
    intptr_t n = (intptr_t)arg;
    for (intptr_t i = 0; i < n; i++) {
        intptr_t got = (intptr_t)coro_yield((void *)i);
        if (got != i * 10)
            return (void *)-1;
    }
    return (void *)(n * 1000);
}

static void values_in_and_out(void)
{
    coro *c = coro_create(counter_fn, (void *)5, 0);
    CHECK(c && coro_current() == NULL);
    void *io = NULL;
    CHECK(coro_resume(c, &io) && io == (void *)0);
    for (intptr_t i = 0; i < 5; i++) {
        io = (void *)(i * 10);            /* what the yield that gave i returns */
        bool alive = coro_resume(c, &io);
        if (i < 4)
            CHECK(alive && (intptr_t)io == i + 1);
        else
            CHECK(!alive && (intptr_t)io == 5000);
    }
}

/* Two coroutines bouncing a counter through their resumer. */
static int ping_count, pong_count;
static void *bounce(void *count)
{
    for (int i = 0; i < 100000; i++) {
        ++*(int *)count;
        coro_yield(NULL);
    }
    return NULL;
}

static void ping_pong(void)
{
    coro *a = coro_create(bounce, &ping_count, 0), *b = coro_create(bounce, &pong_count, 0);
    bool alive_a = true, alive_b = true;
    while (alive_a || alive_b) {
        if (alive_a) alive_a = coro_resume(a, NULL);
        CHECK(pong_count == ping_count - (alive_a ? 1 : 0) || !alive_a);
        if (alive_b) alive_b = coro_resume(b, NULL);
        CHECK(!alive_a || pong_count == ping_count);
    }
    CHECK(ping_count == 100000 && pong_count == 100000);
}

/* A coroutine that creates and drives others, two levels deep. */
static void *leaf(void *arg)
{
    coro_yield((void *)((intptr_t)arg + 1));
    return (void *)((intptr_t)arg + 2);
}
static void *middle(void *arg)
{
    intptr_t sum = 0;
    coro *self = coro_current();
    for (intptr_t i = 0; i < 10; i++) {
        coro *l = coro_create(leaf, (void *)(i * 100), 0);
        void *io = NULL;
        if (!coro_resume(l, &io) || coro_current() != self)
            return (void *)-1;
        sum += (intptr_t)io;
        if (coro_resume(l, &io))
            return (void *)-2;
        sum += (intptr_t)io;
        coro_yield((void *)sum);
    }
    return (void *)(sum + (intptr_t)arg);
}

static void nested_coroutines(void)
{
    coro *m = coro_create(middle, (void *)7, 0);
    void *io = NULL;
    int rounds = 0;
    while (coro_resume(m, &io))
        rounds++;
    /* sum of (i*100+1)+(i*100+2) over i<10 = 200*45 + 30 = 9030 */
    CHECK(rounds == 10);
    CHECK((intptr_t)io == 9030 + 7);
    CHECK(coro_current() == NULL);
}

static void *suspend_once(void *arg)
{
    intptr_t v = (intptr_t)coro_yield(arg);
    return (void *)(v + 1);
}

static void hundred_thousand_suspended(void)
{
    /* ThreadSanitizer counts each coroutine as a thread and stops at 8128 at once. */
    enum { MAX = 100000 };
    const intptr_t N = CHECK_TSAN ? 4000 : MAX;
    static coro *cs[MAX];
    struct coro_counters before, during, after;
    coro_read_counters(&before);
    for (intptr_t i = 0; i < N; i++) {
        cs[i] = coro_create(suspend_once, (void *)i, CORO_MIN_STACK);
        CHECK(cs[i]);
        void *io = NULL;
        CHECK(coro_resume(cs[i], &io) && (intptr_t)io == i);
    }
    coro_read_counters(&during);
    CHECK(during.live - before.live == (uint64_t)N);
    CHECK(during.stack_bytes - before.stack_bytes >= (uint64_t)N * CORO_MIN_STACK);
    struct sc_stats st;
    sc_read_stats(&st);
    CHECK(st.stack_inuse >= (uint64_t)N * CORO_MIN_STACK);
    for (intptr_t i = N - 1; i >= 0; i--) {
        void *io = (void *)(i * 3);
        CHECK(!coro_resume(cs[i], &io));
        CHECK((intptr_t)io == i * 3 + 1);
    }
    coro_read_counters(&after);
    CHECK(after.live == before.live && after.stack_bytes == before.stack_bytes);
    CHECK(after.created - before.created == (uint64_t)N);
}

/* Many live values across switches: the compiler keeps them in callee-saved
 * registers, which the other side overwrites with its own. */
static void *clobber(void *arg)
{
    volatile double vd = 1.5;
    uint64_t a = (uintptr_t)arg, b = a * 3, c = a ^ 0x55, d = a + 99, e = ~a, f = a << 7;
    double x = vd, y = vd * 2, z = vd * 3;
    for (int i = 0; i < 1000; i++) {
        coro_yield(NULL);
        a += b, b ^= c, c += d, d ^= e, e += f, f ^= a;
        x = x * 1.000001 + y, y += z * 0.5, z -= x * 0.25;
    }
    return (void *)(uintptr_t)(a + b + c + d + e + f + (uint64_t)(x + y + z));
}

static uint64_t clobber_reference(uintptr_t arg)
{
    volatile double vd = 1.5;
    uint64_t a = arg, b = a * 3, c = a ^ 0x55, d = a + 99, e = ~a, f = a << 7;
    double x = vd, y = vd * 2, z = vd * 3;
    for (int i = 0; i < 1000; i++) {
        a += b, b ^= c, c += d, d ^= e, e += f, f ^= a;
        x = x * 1.000001 + y, y += z * 0.5, z -= x * 0.25;
    }
    return a + b + c + d + e + f + (uint64_t)(x + y + z);
}

static void registers_preserved(void)
{
    coro *p = coro_create(clobber, (void *)12345, 0), *q = coro_create(clobber, (void *)777, 0);
    uint64_t m1 = 0x0123456789abcdefull, m2 = m1 * 7, m3 = m1 ^ 0xff, m4 = m1 + 1;
    double dx = 3.25, dy = -1.75;
    void *rp = NULL, *rq = NULL;
    bool ap = true, aq = true;
    while (ap || aq) {
        if (ap) ap = coro_resume(p, &rp);
        m1 = m1 * 31 + m2, m2 ^= m3, m3 += m4, m4 = m4 * 3 + 1, dx = dx * 0.5 + dy, dy += 1.0;
        if (aq) aq = coro_resume(q, &rq);
    }
    uint64_t r1 = 0x0123456789abcdefull, r2 = r1 * 7, r3 = r1 ^ 0xff, r4 = r1 + 1;
    double ex = 3.25, ey = -1.75;
    for (int i = 0; i < 1001; i++)
        r1 = r1 * 31 + r2, r2 ^= r3, r3 += r4, r4 = r4 * 3 + 1, ex = ex * 0.5 + ey, ey += 1.0;
    CHECK(m1 == r1 && m2 == r2 && m3 == r3 && m4 == r4 && dx == ex && dy == ey);
    CHECK((uintptr_t)rp == clobber_reference(12345));
    CHECK((uintptr_t)rq == clobber_reference(777));
}

/* Floating-point control state belongs to each context. */
static void *rounding_up(void *arg)
{
    (void)arg;
    fesetround(FE_UPWARD);
#if defined(__x86_64__)
    uint16_t cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    cw = (uint16_t)((cw & ~0x300) | 0x000);   /* x87 precision: single */
    __asm__ volatile("fldcw %0" ::"m"(cw));
#endif
    coro_yield(NULL);
    intptr_t ok = fegetround() == FE_UPWARD;
#if defined(__x86_64__)
    uint16_t now;
    __asm__ volatile("fnstcw %0" : "=m"(now));
    ok = ok && (now & 0x300) == 0;
#endif
    fesetround(FE_TONEAREST);
    return (void *)ok;
}

static void fp_control_preserved(void)
{
    fesetround(FE_TONEAREST);
    coro *c = coro_create(rounding_up, NULL, 0);
    void *io = NULL;
    CHECK(coro_resume(c, &io));
    CHECK(fegetround() == FE_TONEAREST);
#if defined(__x86_64__)
    uint16_t cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    CHECK((cw & 0x300) == 0x300);
#endif
    CHECK(!coro_resume(c, &io));
    CHECK(io == (void *)1);
}

static void *alignment_probe(void *arg)
{
    (void)arg;
    char buf[64];
    volatile double d = 2.5;
    /* printf of a double uses aligned SSE stores on the stack in glibc. */
    snprintf(buf, sizeof buf, "%f %Lf", d, (long double)d);
    _Alignas(16) char probe[16];
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    return (void *)(uintptr_t)(((uintptr_t)probe % 16 == 0) && sp % 16 == 0 && !strcmp(buf, "2.500000 2.500000"));
}

static void stack_aligned_at_entry(void)
{
    for (size_t size = CORO_MIN_STACK; size < 70000; size += 4104) {
        coro *c = coro_create(alignment_probe, NULL, size);
        void *io = NULL;
        CHECK(!coro_resume(c, &io));
        CHECKF(io == (void *)1, "misaligned with stack size %zu", size);
    }
}

static void *return_at_once(void *arg) { return arg; }

static void stack_released_at_finish(void)
{
    struct sc_stats a, b;
    struct coro_counters ca, cb;
    coro *warm = coro_create(return_at_once, NULL, 0);
    CHECK(!coro_resume(warm, NULL));
    sc_read_stats(&a);
    coro_read_counters(&ca);
    for (int i = 0; i < 1000; i++) {
        coro *c = coro_create(return_at_once, (void *)(intptr_t)i, 0);
        void *io = NULL;
        CHECK(!coro_resume(c, &io) && io == (void *)(intptr_t)i);
    }
    sc_read_stats(&b);
    coro_read_counters(&cb);
    /* One stack, reused each time (ASan's quarantine holds freed stacks back a while). */
    CHECK(b.stack_inuse == a.stack_inuse || CHECK_ASAN);
    CHECK(cb.live == ca.live && cb.stack_bytes == ca.stack_bytes);
}

/* n coroutines alive at once, each touching 20 KiB of its stack, then all finished. */
static void batch_of_deep_coroutines(int n);

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* Finished coroutines' stacks wait, resident, for the thread's next coroutines, and go
 * back to the heap only when trimmed: all of them, or those no coroutine took since the
 * previous trim.  Given back at once, a batch of stacks idle for a few milliseconds was
 * released to the OS by the heap (once the thread's cache trimmed their spans), and the
 * next batch faulted every page in again. */
static void finished_stacks_kept_until_trimmed(void)
{
    enum { N = 128 };
    struct coro_counters k;
    coro_trim_stacks(false);
    coro_read_counters(&k);
    CHECK(k.cached_stack_bytes == 0);
    batch_of_deep_coroutines(N);
    coro_read_counters(&k);
    if (CHECK_ASAN) {              /* through the heap's quarantine: see stale_handle_reported_under_asan */
        CHECKF(k.cached_stack_bytes == 0, "%llu bytes cached under ASan", (unsigned long long)k.cached_stack_bytes);
        return;
    }
    uint64_t stack = k.cached_stack_bytes / N;
    CHECKF(k.cached_stack_bytes == N * stack && stack >= CORO_MIN_STACK, "%llu bytes cached",
           (unsigned long long)k.cached_stack_bytes);
    /* The heap gives back what it holds idle (as it does by itself, a few milliseconds
     * after its caches trim): not these. */
    sc_scavenge();
    long faults = minor_faults();
    batch_of_deep_coroutines(N);
    faults = minor_faults() - faults;
    CHECKF(faults < N / 4 || CHECK_ASAN || CHECK_TSAN, "%ld page faults for %d coroutines on kept stacks", faults, N);
    coro_trim_stacks(true);        /* every one was taken since the last trim */
    coro_read_counters(&k);
    CHECK(k.cached_stack_bytes == N * stack);
    batch_of_deep_coroutines(N / 4);
    coro_trim_stacks(true);        /* three quarters stayed unused */
    coro_read_counters(&k);
    CHECKF(k.cached_stack_bytes == N / 4 * stack, "%llu bytes cached", (unsigned long long)k.cached_stack_bytes);
    coro_trim_stacks(false);
    coro_read_counters(&k);
    CHECK(k.cached_stack_bytes == 0);
}

static void *deep(void *arg)
{
    size_t n = (size_t)arg;
    volatile char big[n];
    for (size_t i = 0; i < n; i++)
        big[i] = (char)i;
    coro_yield(NULL);
    return (void *)(uintptr_t)big[0];
}

static void batch_of_deep_coroutines(int n)
{
    coro *cs[256];
    CHECK(n <= 256);
    for (int i = 0; i < n; i++) {
        cs[i] = coro_create(deep, (void *)(size_t)(20u << 10), 0);
        CHECK(cs[i] && coro_resume(cs[i], NULL));
    }
    for (int i = 0; i < n; i++)
        CHECK(!coro_resume(cs[i], NULL));
}

static void painting_measures_depth(void)
{
    struct coro_options old, opt;
    coro_get_options(&old);
    opt = old;
    opt.paint = true;
    coro_configure(&opt);
    coro *c = coro_create(deep, (void *)(size_t)10000, 32768);
    CHECK(coro_resume(c, NULL));
    CHECK(!coro_resume(c, NULL));
    coro_configure(&old);
    struct coro_counters k;
    coro_read_counters(&k);
    CHECKF(k.deepest >= 10000 && k.deepest < 20000, "deepest %llu", (unsigned long long)k.deepest);
}

static void overflow_canary_child(void)
{
    coro *c = coro_create(deep, (void *)(size_t)(16384 + 512), 16384);
    coro_resume(c, NULL);
}

/* In a child: coroutines created from now on get a guard page. */
static void guard_pages_on(void)
{
    struct coro_options opt;
    coro_get_options(&opt);
    opt.guard_pages = true;
    coro_configure(&opt);
}

static void overflow_guard_child(void)
{
    guard_pages_on();
    coro *c = coro_create(deep, (void *)(size_t)(200u << 10), 64u << 10);
    coro_resume(c, NULL);
}

/* The guard page faulted; a sanitizer catches the fault itself and reports it. */
static int faulted_on_guard(int sig, const char *err)
{
    return sig == SIGSEGV || (strstr(err, "Sanitizer") && strstr(err, "SEGV")) || strstr(err, "stack-overflow");
}

static void overflow_detected(void)
{
    char err[1024];
    int sig;
    sig = check_run_child(overflow_canary_child, err, sizeof err);
    /* Under ASan the writes below the stack land in poisoned heap memory and are
     * reported before the canary is checked. */
    CHECKF((sig == SIGABRT && strstr(err, "stack overflow in coroutine") && strstr(err, "coro_stack_size")) ||
               (CHECK_ASAN && strstr(err, "AddressSanitizer: use-after-poison")),
           "signal %d, stderr: %s", sig, err);
    sig = check_run_child(overflow_guard_child, err, sizeof err);
    CHECKF(faulted_on_guard(sig, err), "guard page: signal %d, stderr: %.200s", sig, err);
}

/* A 16 KiB frame that writes only its far end, called about 10 KiB above the stack's
 * lowest page: unprobed, it steps over the 4 KiB guard page and writes into whatever
 * lies below the stack, silently.  Built with -fstack-clash-protection (the Makefile
 * builds everything so) the frame is touched page by page and faults on the guard. */
static __attribute__((noinline)) void far_frame(void)
{
    char buf[16384];
    buf[0] = 1;
    __asm__ volatile("" : : "r"(buf) : "memory");
}

static void *near_the_bottom(void *arg)
{
    size_t n = (size_t)arg;
    volatile char pad[n];
    pad[0] = pad[n - 1] = 0;
    far_frame();
    return (void *)(uintptr_t)pad[0];
}

static void guard_jump_child(void)
{
    guard_pages_on();
    coro *c = coro_create(near_the_bottom, (void *)(size_t)(53u << 10), 64u << 10);
    coro_resume(c, NULL);
    dprintf(2, "NOT CAUGHT\n");
}

static void guard_page_cannot_be_jumped(void)
{
    char err[1024];
    int sig = check_run_child(guard_jump_child, err, sizeof err);
    CHECKF(faulted_on_guard(sig, err), "signal %d, stderr: %.300s", sig, err);
}


/* ---- parking ---- */

static volatile unsigned char *parked_frame;   /* a local of the coroutine parked last */

/* A frame of n bytes with a pattern, a pointer into itself and values live across the
 * yield, checked after the coroutine was parked and unparked. */
static void *frame_keeper(void *arg)
{
    size_t n = (size_t)arg;
    unsigned char buf[n + 1];
    for (size_t i = 0; i <= n; i++)
        buf[i] = (unsigned char)(i * 7 + n);
    unsigned char *volatile self = buf;
    parked_frame = buf;
    volatile double d = (double)n * 1.5;
    intptr_t got = (intptr_t)coro_yield((void *)1);
    if (self != buf || d != (double)n * 1.5)
        return (void *)-1;
    for (size_t i = 0; i <= n; i++)
        if (buf[i] != (unsigned char)(i * 7 + n))
            return (void *)-2;
    return (void *)(got + 1);
}

static uint64_t parked_now(void)
{
    struct coro_counters k;
    coro_read_counters(&k);
    return k.parked;
}

static void park_keeps_frames(void)
{
    static const size_t sizes[] = { 0, 16, 200, 1000, 5000, 20000 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        coro *c = coro_create(frame_keeper, (void *)n, 0);
        void *io = NULL;
        CHECK(coro_resume(c, &io) && io == (void *)1);
        uint64_t before = parked_now();
        coro_parked *p = coro_park(c);
        CHECK(p && parked_now() == before + 1);
        /* The frame, the control block (two ucontext_t in that build) and not much more. */
        /* A class rounds up by 1/8 at most; sanitizers' frames are larger. */
        size_t most = (n + (strcmp(coro_switch_kind(), "ucontext") ? 320 : 2304)) * 9 / 8 + (CORO_INLINE_SWITCH ? 128 : 1024);
        CHECKF(coro_parked_bytes(p) >= n && coro_parked_bytes(p) < most, "%zu bytes for a frame of %zu",
               coro_parked_bytes(p), n);
        if (!n)
            printf("# parked with an empty frame: %zu bytes\n", coro_parked_bytes(p));
        CHECK(coro_unpark(p) == c && parked_now() == before);
        io = (void *)41;
        CHECK(!coro_resume(c, &io));
        CHECKF(io == (void *)42, "frame of %zu: %p", n, io);
    }
}

/* Whole OS pages of the allocation a coroutine's stack lies in: the default stack is a
 * 32 KiB object of its own class, page-aligned, with the control block in its last page. */
static size_t resident_stack_pages(const coro *c)
{
    uintptr_t hi = ((uintptr_t)c + 4095) & ~(uintptr_t)4095, lo = hi - CORO_DEFAULT_STACK;
    unsigned char vec[CORO_DEFAULT_STACK / 4096];
    if (mincore((void *)lo, CORO_DEFAULT_STACK, vec))
        return (size_t)-1;
    size_t n = 0;
    for (size_t i = 0; i < sizeof vec; i++)
        n += vec[i] & 1;
    return n;
}

static void park_releases_pages(void)
{
    coro *c = coro_create(frame_keeper, (void *)(size_t)6000, 0);
    CHECK(coro_resume(c, NULL));
    size_t before = resident_stack_pages(c);
    CHECKF(before >= 2 && before != (size_t)-1, "%zu pages resident before", before);
    coro_parked *p = coro_park(c);
    CHECK(p);
    /* Under CORO_CHECKS or ASan nothing may look at the stack now, mincore aside. */
    size_t after = resident_stack_pages(c);
    CHECKF(after == 0, "%zu of %zu pages still resident", after, before);
    CHECK(coro_unpark(p) == c);
    CHECKF(resident_stack_pages(c) <= 4, "%zu pages resident after unparking", resident_stack_pages(c));
    void *io = (void *)1;
    CHECK(!coro_resume(c, &io) && io == (void *)2);
}

static void many_parked(void)
{
    enum { N = 2000 };
    static coro *cs[N];
    static coro_parked *ps[N];
    struct coro_counters k0, k1;
    coro_read_counters(&k0);
    for (int i = 0; i < N; i++) {
        cs[i] = coro_create(frame_keeper, (void *)(size_t)(i % 700), 0);
        CHECK(cs[i] && coro_resume(cs[i], NULL));
        ps[i] = coro_park(cs[i]);
        CHECK(ps[i]);
    }
    coro_read_counters(&k1);
    CHECK(k1.parked == k0.parked + N && k1.parks == k0.parks + N && k1.parked_bytes > k0.parked_bytes);
    for (int i = N - 1; i >= 0; i -= 2)         /* out of order, every other one */
        CHECK(coro_unpark(ps[i]) == cs[i]);
    for (int i = 0; i < N; i += 2)
        CHECK(coro_unpark(ps[i]) == cs[i]);
    for (int i = 0; i < N; i++) {
        void *io = (void *)(intptr_t)i;
        CHECK(!coro_resume(cs[i], &io));
        CHECKF(io == (void *)(intptr_t)(i + 1), "coroutine %d: %p", i, io);
    }
    coro_read_counters(&k1);
    CHECK(k1.parked == k0.parked && k1.parked_bytes == k0.parked_bytes && k1.live == k0.live);
}

/* Parked twice in its life, once before it ever ran; destroyed while parked. */
static void park_before_start_and_destroy(void)
{
    coro *c = coro_create(frame_keeper, (void *)(size_t)100, 0);
    coro_parked *p = coro_park(c);
    CHECK(p && coro_unpark(p) == c);
    void *io = NULL;
    CHECK(coro_resume(c, &io) && io == (void *)1);
    CHECK((p = coro_park(c)) && coro_unpark(p) == c);
    io = (void *)7;
    CHECK(!coro_resume(c, &io) && io == (void *)8);
    struct coro_counters k0, k1;
    coro_read_counters(&k0);
    c = coro_create(frame_keeper, (void *)(size_t)100, 0);
    CHECK(coro_resume(c, NULL) && (p = coro_park(c)));
    coro_parked_destroy(p);
    coro_read_counters(&k1);
    CHECK(k1.live == k0.live && k1.parked == k0.parked && k1.stack_bytes == k0.stack_bytes);
}

/* With guard pages (whose lowest page stays PROT_NONE after unparking) and with
 * painting (which must not mistake the released pages for stack used). */
static void park_with_guard_and_paint(void)
{
    struct coro_options old, opt;
    coro_get_options(&old);
    opt = old;
    opt.guard_pages = true;
    opt.paint = true;
    coro_configure(&opt);
    for (int i = 0; i < 3; i++) {
        coro *c = coro_create(frame_keeper, (void *)(size_t)3000, 0);
        CHECK(coro_resume(c, NULL));
        coro_parked *p = coro_park(c);
        CHECK(p && coro_unpark(p) == c);
        void *io = (void *)(intptr_t)i;
        CHECK(!coro_resume(c, &io) && io == (void *)(intptr_t)(i + 1));
    }
    coro_configure(&old);
    struct coro_counters k;
    coro_read_counters(&k);
    CHECKF(k.deepest < 20000, "deepest %llu", (unsigned long long)k.deepest);
}

/* The detector: a read of a parked coroutine's frame, by a pointer kept from before it
 * was parked, is reported at once - a fault (CORO_CHECKS) or an ASan report. */
static void touch_parked_child(void)
{
    coro *c = coro_create(frame_keeper, (void *)(size_t)64, 0);
    coro_resume(c, NULL);
    coro_parked *p = coro_park(c);
    dprintf(2, "read %d\n", parked_frame[3]);
    dprintf(2, "NOT CAUGHT\n");
    coro_unpark(p);
}

static void parked_stack_is_fenced(void)
{
    if (!CORO_CHECKS && !CHECK_ASAN) {
        printf("# a parked stack is fenced in CORO_CHECKS=1 and SAN=1 builds\n");
        return;
    }
    char err[2048];
    int sig = check_run_child(touch_parked_child, err, sizeof err);
    CHECKF(!strstr(err, "NOT CAUGHT") &&
               ((CHECK_ASAN && strstr(err, "AddressSanitizer: use-after-poison")) || (!CHECK_ASAN && faulted_on_guard(sig, err))),
           "signal %d, stderr: %.400s", sig, err);
}

static void *park_self(void *arg)
{
    (void)arg;
    coro_park(coro_current());
    return NULL;
}
static void park_self_child(void) { coro_resume(coro_create(park_self, NULL, 0), NULL); }

/* Misuse, each in a child that must abort naming it. */
static char misuse_err[1024];
static int aborts_saying(void (*fn)(void), const char *want)
{
    int sig = check_run_child(fn, misuse_err, sizeof misuse_err);
    return sig == SIGABRT && strstr(misuse_err, want);
}

/* Under ASan a finished coroutine's memory is poisoned: touching it is reported first. */
static int caught_use_after_free(void)
{
    return CHECK_ASAN && (strstr(misuse_err, "use-after-poison") || strstr(misuse_err, "heap-use-after-free"));
}

static void yield_outside_child(void) { coro_yield(NULL); }

static void *resume_self(void *arg)
{
    (void)arg;
    coro_resume(coro_current(), NULL);
    return NULL;
}
static void resume_self_child(void) { coro_resume(coro_create(resume_self, NULL, 0), NULL); }

static coro *outer;
static void *resume_outer(void *arg)
{
    (void)arg;
    coro_resume(outer, NULL);
    return NULL;
}
static void *resume_inner(void *arg)
{
    (void)arg;
    coro_resume(coro_create(resume_outer, NULL, 0), NULL);
    return NULL;
}
static void resume_running_child(void)
{
    outer = coro_create(resume_inner, NULL, 0);
    coro_resume(outer, NULL);
}

static void resume_finished_child(void)
{
    coro *c = coro_create(return_at_once, NULL, 0);
    coro_resume(c, NULL);
    coro_resume(c, NULL);
}

static void *destroy_self(void *arg)
{
    (void)arg;
    coro_destroy(coro_current());
    return NULL;
}
static void destroy_running_child(void) { coro_resume(coro_create(destroy_self, NULL, 0), NULL); }

static void destroy_finished_child(void)
{
    coro *c = coro_create(return_at_once, NULL, 0);
    coro_resume(c, NULL);
    coro_destroy(c);
}

/* A finished coroutine's handle used after the next coroutine was made: with its stack
 * cached, the next one would sit at the same address and the resume would run it. */
static void resume_stale_child(void)
{
    coro *finished = coro_create(return_at_once, NULL, 0);
    coro_resume(finished, NULL);
    coro *next = coro_create(return_at_once, NULL, 0);
    coro_resume(finished, NULL);
    (void)next;                    /* left suspended: the child exits here */
}

static void stale_handle_reported_under_asan(void)
{
    if (!CHECK_ASAN) {
        printf("# a stale handle is reported in ASan builds only\n");
        return;
    }
    check_run_child(resume_stale_child, misuse_err, sizeof misuse_err);
    CHECKF(caught_use_after_free(), "%s", misuse_err);
}

static void misuse_aborts_naming_it(void)
{
    CHECKF(aborts_saying(yield_outside_child, "coro: coro_yield outside a coroutine"), "%s", misuse_err);
    CHECKF(aborts_saying(destroy_running_child, "coro_destroy of coroutine") && strstr(misuse_err, "which is running"),
           "%s", misuse_err);
    CHECKF((aborts_saying(destroy_finished_child, "coro_destroy of coroutine") && strstr(misuse_err, "has finished")) ||
               caught_use_after_free(), "%s", misuse_err);
    CHECKF(aborts_saying(park_self_child, "coro_park of coroutine") && strstr(misuse_err, "which is running"), "%s",
           misuse_err);
    if (!CORO_CHECKS) {
        printf("# resuming a coroutine that is not suspended is checked with CORO_CHECKS=1 only\n");
        return;
    }
    CHECKF(aborts_saying(resume_self_child, "coro_resume of coroutine") && strstr(misuse_err, "by itself"), "%s",
           misuse_err);
    CHECKF(aborts_saying(resume_running_child, "coro_resume of coroutine") && strstr(misuse_err, "which is running"),
           "%s", misuse_err);
    CHECKF((aborts_saying(resume_finished_child, "coro_resume of coroutine") && strstr(misuse_err, "has finished")) ||
               caught_use_after_free(), "%s", misuse_err);
}

static void guard_pages_reuse_stacks(void)
{
    struct coro_options old, opt;
    coro_get_options(&old);
    opt = old;
    opt.guard_pages = true;
    coro_configure(&opt);
    for (int i = 0; i < 200; i++) {
        coro *c = coro_create(counter_fn, (void *)2, 0);
        void *io = NULL;
        CHECK(coro_resume(c, &io) && io == (void *)0);
        io = (void *)0;
        CHECK(coro_resume(c, &io));
        io = (void *)10;
        CHECK(!coro_resume(c, &io) && io == (void *)2000);
    }
    coro_configure(&old);
}

int main(void)
{
    printf("# switch=%s\n", coro_switch_kind());
    RUN(values_in_and_out);
    RUN(ping_pong);
    RUN(nested_coroutines);
    RUN(hundred_thousand_suspended);
    RUN(registers_preserved);
    RUN(fp_control_preserved);
    RUN(stack_aligned_at_entry);
    RUN(stack_released_at_finish);
    RUN(finished_stacks_kept_until_trimmed);
    RUN(painting_measures_depth);
    RUN(guard_pages_reuse_stacks);
    RUN(overflow_detected);
    RUN(guard_page_cannot_be_jumped);
    RUN(park_keeps_frames);
    RUN(park_releases_pages);
    RUN(many_parked);
    RUN(park_before_start_and_destroy);
    RUN(park_with_guard_and_paint);
    RUN(parked_stack_is_fenced);
    RUN(misuse_aborts_naming_it);
    RUN(stale_handle_reported_under_asan);
    CHECK_DONE();
}
