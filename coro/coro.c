/* Coroutine lifecycle: creation on a heap stack, resume/yield, and release at finish.
 *
 * Layout of the one allocation (stacks grow down):
 *     lo: [guard page, guard mode only][canary][ ...stack... ][struct coro] :hi
 * The canary sits where an overflow lands first and is checked on every switch out of
 * the coroutine; a smashed one aborts naming the coroutine.  In guard mode the lowest
 * page is PROT_NONE.  A finished coroutine's stack goes to a per-thread cache (LIFO,
 * linked through the canary word, one size and guard mode at a time) for the next one:
 * its pages stay resident and its guard protected, so a burst of short coroutines pays
 * no page faults and no mprotect.  The worker's tick gives back what stayed unused.
 * Under ASan nothing is cached: a stack goes back through the heap's quarantine, so a
 * stale pointer into it is reported rather than landing in the next coroutine's frames.
 *
 * resume and yield are inline in coro.h; coro_resume_call and coro_yield_call here are
 * the same protocol for the builds that cannot inline the switch (ASan, ucontext).
 * Sanitizers are told about every switch (ASan's and TSan's fiber APIs), and valgrind
 * about every stack, so none of them reports the stack changes as errors; to TSan each
 * coroutine is a fiber, and a switch orders what ran before it before what runs after.
 *
 * Parking (coro_park) copies the live part of a suspended coroutine's stack, which is
 * contiguous with its control block above it, into one heap object:
 *     stack: lo [canary][ ...dead... ][sp: live frames][struct coro] hi
 *     parked: [struct coro_parked][live frames][struct coro]
 * and releases the stack's pages; the allocation itself stays the coroutine's.  The
 * saved stack pointer is the exact lower bound of what is live: below it there is no
 * red zone to keep (the switch was a call, which already wrote below the caller's
 * stack pointer).  The canary's page goes with the rest, so unparking writes it again. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <pthread.h>

#include "coro.h"
#include "scalloc.h"
#include "switch.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CORO_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CORO_ASAN 1
#endif
#if CORO_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CORO_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CORO_TSAN 1
#endif
#if CORO_TSAN
#include <sanitizer/tsan_interface.h>
#endif
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define CORO_VALGRIND 1
/* A client request costs a dozen instructions even natively: ask once. */
static int on_valgrind = -1;
static inline bool under_valgrind(void)
{
    if (__builtin_expect(on_valgrind < 0, 0))
        on_valgrind = RUNNING_ON_VALGRIND ? 1 : 0;
    return on_valgrind;
}
#endif

#define PAINT_BYTE 0xA5
#if CORO_ASAN
/* Nothing cached: a stack goes back through the heap, whose quarantine keeps it poisoned
 * a while, so a stale pointer into a finished coroutine's stack, or a stale handle, is
 * reported - from the cache the very next coroutine would take the stack back whole. */
#define STACK_CACHE_BYTES 0u
#else
#define STACK_CACHE_BYTES (32u << 20)
#endif

/* What a coroutine needs beyond a stack and a canary: each is a flag so that the
 * common coroutine pays one test for all of them when it is released. */
enum { CORO_GUARDED = 1, CORO_PAINTED = 2, CORO_VALGRIND_STACK = 4 };

/* Begins with the fields of struct coro_head (coro.h), which the inline resume and
 * yield use in the assembly builds. */
struct coro {
    coro_ctx ctx;              /* the coroutine's own context while it is suspended */
    coro_ctx caller;           /* its resumer's context while it runs */
    coro *resumer;
    uint64_t *canary;
    void **io;                 /* the running coro_resume's value slot */
    coro_fn fn;
    void *arg;
    void *mem;                 /* the allocation */
    size_t mem_size;
    uint64_t id;
    uint8_t flags;
#if CORO_ASAN
    void *fake_stack;
    const void *caller_stack_bottom;
    size_t caller_stack_size;
#endif
#if CORO_TSAN
    void *tsan_fiber;
    void *tsan_resumer;        /* the resumer's fiber while the coroutine runs */
#endif
#if CORO_VALGRIND
    unsigned vg_stack;
#endif
};

#if !CORO_UCONTEXT
_Static_assert(offsetof(struct coro, ctx) == offsetof(struct coro_head, sp) &&
               offsetof(struct coro, caller) == offsetof(struct coro_head, caller_sp) &&
               offsetof(struct coro, resumer) == offsetof(struct coro_head, resumer) &&
               offsetof(struct coro, canary) == offsetof(struct coro_head, canary) &&
               offsetof(struct coro, io) == offsetof(struct coro_head, io),
               "struct coro must begin like struct coro_head");
#endif

/* A parked coroutine: the bytes from its stack pointer (rounded down to 16) to the end
 * of its control block, which is therefore the copy's last sizeof(struct coro) bytes.
 * The copy of the control block is aligned as it was: the coroutine sits on a 64-byte
 * boundary, its bytes start 16 bytes into a heap object of a 16-byte multiple class. */
struct coro_parked {
    coro *c;                   /* where the bytes go back */
    uint32_t len;              /* bytes saved */
    uint32_t size;             /* heap bytes of this object */
    _Alignas(16) unsigned char bytes[];
};

/* Per-thread counters, summed by coro_read_counters: written only by their thread. */
struct counters {
    uint64_t live, created, stack_bytes, parked, parked_bytes, parks, cached_bytes;
    struct counters *next;
    bool registered;
};

/* What coro_running points to on a thread's own stack (coro.h). */
static uint64_t not_a_canary;
static struct coro thread_stack = { .canary = &not_a_canary };
__thread coro *coro_running = &thread_stack;
static __thread struct counters counters;
/* The heap's real size for the stack size last asked (sc_roundup), per thread. */
static __thread size_t rounded_for, rounded;
/* Freed stacks kept for the thread's next coroutines, as Go's runtime keeps freed stacks
 * in a per-P cache until its next collection.  A server that runs a coroutine per request
 * frees a stack per request; given back to the heap, a stack is released to the OS a few
 * milliseconds after it idles (once the heap idles more than it keeps), and the next
 * coroutine faulted its pages in again: with a thousand proxied requests in flight, 0.46
 * page faults per request and 5.5% of the daemon's CPU time in faults and madvise.  Here a
 * freed stack waits, as it is, for the next coroutine of the same size and guard: up to
 * STACK_CACHE_BYTES of them (1024 stacks of the default 32 KiB), linked through their
 * canary word, until coro_trim_stacks gives them back: those no coroutine took since its
 * last call (the daemon calls it every worker tick, so a stack waits 1 to 2 s at most), or
 * all (at a scavenge, and when the thread exits).  Every stack kept was in use a moment
 * before: the cache delays giving memory back by a tick or two.  A guarded stack keeps its
 * protection while it waits, so its mprotect calls are paid once per stack. */
static __thread void *stack_cache;
static __thread unsigned stacks_cached;
static __thread size_t stack_cache_size;
static __thread bool stack_cache_guarded;
static __thread unsigned stack_cache_low;      /* the fewest cached since the last trim */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct counters *registry;
static struct counters exited;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static _Atomic size_t opt_stack_size = CORO_DEFAULT_STACK;
static _Atomic uint8_t opt_flags;      /* CORO_GUARDED, CORO_PAINTED for new coroutines */
static _Atomic uint64_t deepest_seen;

static void bump(uint64_t *ctr, int64_t delta)
{
    __atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + (uint64_t)delta, __ATOMIC_RELAXED);
}


static void thread_exit(void *arg)
{
    struct counters *c = arg;
    coro_trim_stacks(false);
    pthread_mutex_lock(&registry_lock);
    exited.created += c->created;
    exited.live += c->live;
    exited.stack_bytes += c->stack_bytes;
    exited.parked += c->parked;
    exited.parked_bytes += c->parked_bytes;
    exited.parks += c->parks;
    struct counters **pp = &registry;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
    c->registered = false;
    pthread_mutex_unlock(&registry_lock);
}

static void make_key(void) { pthread_key_create(&exit_key, thread_exit); }

static void register_counters(void)
{
    pthread_once(&exit_once, make_key);
    pthread_setspecific(exit_key, &counters);
    pthread_mutex_lock(&registry_lock);
    counters.next = registry;
    registry = &counters;
    counters.registered = true;
    pthread_mutex_unlock(&registry_lock);
}

void coro_configure(const struct coro_options *opt)
{
    size_t size = opt->stack_size ? opt->stack_size : CORO_DEFAULT_STACK;
    if (size < CORO_MIN_STACK)
        size = CORO_MIN_STACK;
    atomic_store(&opt_stack_size, size);
    atomic_store(&opt_flags, (uint8_t)((opt->guard_pages ? CORO_GUARDED : 0) | (opt->paint ? CORO_PAINTED : 0)));
}

void coro_get_options(struct coro_options *out)
{
    out->stack_size = atomic_load(&opt_stack_size);
    uint8_t flags = atomic_load(&opt_flags);
    out->guard_pages = flags & CORO_GUARDED;
    out->paint = flags & CORO_PAINTED;
}

void coro_read_counters(struct coro_counters *out)
{
    pthread_mutex_lock(&registry_lock);
    out->live = exited.live;
    out->created = exited.created;
    out->stack_bytes = exited.stack_bytes;
    out->parked = exited.parked;
    out->parked_bytes = exited.parked_bytes;
    out->parks = exited.parks;
    out->cached_stack_bytes = 0;   /* a thread gives its cache back as it exits */
    for (struct counters *c = registry; c; c = c->next) {
        out->live += __atomic_load_n(&c->live, __ATOMIC_RELAXED);
        out->created += __atomic_load_n(&c->created, __ATOMIC_RELAXED);
        out->stack_bytes += __atomic_load_n(&c->stack_bytes, __ATOMIC_RELAXED);
        out->parked += __atomic_load_n(&c->parked, __ATOMIC_RELAXED);
        out->parked_bytes += __atomic_load_n(&c->parked_bytes, __ATOMIC_RELAXED);
        out->parks += __atomic_load_n(&c->parks, __ATOMIC_RELAXED);
        out->cached_stack_bytes += __atomic_load_n(&c->cached_bytes, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&registry_lock);
    out->deepest = atomic_load_explicit(&deepest_seen, memory_order_relaxed);
}

const char *coro_switch_kind(void)
{
#if CORO_UCONTEXT
    return "ucontext";
#elif defined(__x86_64__)
    return "asm-x86_64";
#else
    return "asm-aarch64";
#endif
}

coro *coro_current(void) { return coro_running == &thread_stack ? NULL : coro_running; }
uint64_t coro_id(const coro *c) { return c->id; }

static size_t os_page(void)
{
    static size_t page;
    if (!page)
        page = (size_t)sysconf(_SC_PAGESIZE);
    return page;
}

/* Where a stack's canary word is: its lowest usable word, above the guard page if any. */
static void **cache_link(void *mem, bool guarded)
{
    return (void **)((char *)mem + (guarded ? os_page() : 0));
}

static void *cached_stack(size_t size, bool guarded)
{
    if (!stacks_cached || stack_cache_size != size || stack_cache_guarded != guarded)
        return NULL;
    void *mem = stack_cache;
    stack_cache = *cache_link(mem, guarded);
    if (--stacks_cached < stack_cache_low)
        stack_cache_low = stacks_cached;
    bump(&counters.cached_bytes, -(int64_t)size);
    return mem;
}

static void stack_free(void *mem, size_t size, bool guarded)
{
#if CORO_ASAN
    ASAN_UNPOISON_MEMORY_REGION(mem, size);
#else
    (void)size;
#endif
    if (guarded)
        mprotect(mem, os_page(), PROT_READ | PROT_WRITE);
    sc_stack_free(mem);
}

/* Kept for the next coroutine if the cache has room and holds stacks like it (a
 * change of size or guard empties it: the old kind will not be asked for again). */
static void cache_stack(void *mem, size_t size, bool guarded)
{
    if (stacks_cached && (stack_cache_size != size || stack_cache_guarded != guarded))
        coro_trim_stacks(false);
    if ((stacks_cached + 1) * size > STACK_CACHE_BYTES) {
        stack_free(mem, size, guarded);
        return;
    }
    stack_cache_size = size;
    stack_cache_guarded = guarded;
    void **link = cache_link(mem, guarded);
    *link = stack_cache;
    stack_cache = mem;
    stacks_cached++;
    bump(&counters.cached_bytes, (int64_t)size);
}

void coro_trim_stacks(bool unused_only)
{
    for (unsigned n = unused_only ? stack_cache_low : stacks_cached; n; n--) {
        void *mem = stack_cache;
        stack_cache = *cache_link(mem, stack_cache_guarded);
        stacks_cached--;
        bump(&counters.cached_bytes, -(int64_t)stack_cache_size);
        stack_free(mem, stack_cache_size, stack_cache_guarded);
    }
    stack_cache_low = stacks_cached;
}

/* Guard mode: whole pages from the heap's large path (page-aligned), lowest page
 * protected. */
static void *guarded_stack_alloc(size_t size)
{
    void *mem = cached_stack(size, true);
    if (mem)
        return mem;
    size_t alloc = size < 40u << 10 ? 40u << 10 : size;   /* above 32 KiB: page-aligned */
    mem = sc_stack_alloc(alloc);
    if (!mem)
        return NULL;
    if (mprotect(mem, os_page(), PROT_NONE)) {
        sc_stack_free(mem);
        return NULL;
    }
    return mem;
}

coro *coro_create(coro_fn fn, void *arg, size_t stack_size)
{
    if (!stack_size)
        stack_size = atomic_load_explicit(&opt_stack_size, memory_order_relaxed);
    else if (stack_size < CORO_MIN_STACK)
        stack_size = CORO_MIN_STACK;
    uint8_t flags = atomic_load_explicit(&opt_flags, memory_order_relaxed);
    void *mem;
    size_t mem_size;
    uintptr_t lo;
    if (__builtin_expect(flags & CORO_GUARDED, 0)) {
        mem_size = (stack_size < 40u << 10 ? 40u << 10 : stack_size);
        mem_size = (mem_size + os_page() - 1) & ~(os_page() - 1);
        mem = guarded_stack_alloc(mem_size);
        lo = (uintptr_t)mem + os_page();
    } else {
        if (__builtin_expect(stack_size != rounded_for, 0)) {
            rounded_for = stack_size;
            rounded = sc_roundup(stack_size);
        }
        mem_size = rounded;
        mem = cached_stack(mem_size, false);
        if (!mem)
            mem = sc_stack_alloc(stack_size);
        lo = (uintptr_t)mem;
    }
    if (!mem)
        return NULL;
#if CORO_ASAN
    /* A reused stack may keep the poisoned redzones of an earlier coroutine's frames. */
    ASAN_UNPOISON_MEMORY_REGION((void *)lo, (uintptr_t)mem + mem_size - lo);
#endif
    uintptr_t hi = ((uintptr_t)mem + mem_size - sizeof(coro)) & ~(uintptr_t)63;
    coro *c = (coro *)hi;
    c->canary = (uint64_t *)lo;
    c->resumer = NULL;             /* suspended; the memory may hold a finished one's mark */
    c->fn = fn;
    c->arg = arg;
    c->mem = mem;
    c->mem_size = mem_size;
    *c->canary = CORO_CANARY;
    uintptr_t stack_lo = lo + sizeof(uint64_t);
    if (__builtin_expect(flags & CORO_PAINTED, 0))
        memset((void *)stack_lo, PAINT_BYTE, hi - stack_lo);
    coro_ctx_init(&c->ctx, (void *)stack_lo, hi - stack_lo, c);
#if CORO_TSAN
    c->tsan_fiber = __tsan_create_fiber(0);
#endif
#if CORO_VALGRIND
    if (under_valgrind()) {
        flags |= CORO_VALGRIND_STACK;
        c->vg_stack = VALGRIND_STACK_REGISTER(stack_lo, hi);
    }
#endif
    c->flags = flags;
    if (__builtin_expect(!counters.registered, 0))
        register_counters();
    c->id = counters.created + 1;
    bump(&counters.created, 1);
    bump(&counters.live, 1);
    bump(&counters.stack_bytes, (int64_t)mem_size);
    return c;
}

/* Aborts naming the mistake: "coro: <call> of coroutine <id>, <why>". */
static void misuse(const char *call, const coro *c, const char *why) __attribute__((noreturn));
static void misuse(const char *call, const coro *c, const char *why)
{
    fprintf(stderr, "coro: %s of coroutine %llu, %s\n", call, (unsigned long long)c->id, why);
    abort();
}

void coro_overflowed(const coro *c)
{
    if (c == &thread_stack) {
        fprintf(stderr, "coro: coro_yield outside a coroutine (on a thread's own stack)\n");
        abort();
    }
    fprintf(stderr, "coro: stack overflow in coroutine %llu (stack of %zu bytes): raise coro_stack_size\n",
            (unsigned long long)c->id, c->mem_size);
    abort();
}

/* c is running or waits in a resume of another: it is up the running one's chain. */
static bool is_running(const coro *c)
{
    for (const coro *r = coro_running; r != &thread_stack; r = r->resumer)
        if (r == c)
            return true;
    return false;
}

/* A coroutine to be resumed that is not suspended (CORO_CHECKS). */
void coro_misresumed(const coro *c)
{
    if (c->resumer == CORO_FINISHED)
        misuse("coro_resume", c, "which has finished (and was freed)");
    if (c == coro_running)
        misuse("coro_resume", c, "by itself");
    misuse("coro_resume", c, "which is running (it resumed this one, directly or not)");
}

static void check_canary(const coro *c)
{
    if (__builtin_expect(*c->canary != CORO_CANARY, 0))
        coro_overflowed(c);
}

static void measure_depth(const coro *c)
{
    const unsigned char *p = (const unsigned char *)(c->canary + 1), *top = (const unsigned char *)c;
    while (p < top && *p == PAINT_BYTE)
        p++;
    uint64_t used = (uint64_t)(top - p);
    uint64_t seen = atomic_load_explicit(&deepest_seen, memory_order_relaxed);
    while (used > seen && !atomic_compare_exchange_weak(&deepest_seen, &seen, used)) {
    }
}

static void release(coro *c)
{
#if CORO_TSAN
    __tsan_destroy_fiber(c->tsan_fiber);
#endif
    bump(&counters.live, -1);
    bump(&counters.stack_bytes, -(int64_t)c->mem_size);
    if (__builtin_expect(!c->flags, 1)) {
        cache_stack(c->mem, c->mem_size, false);
        return;
    }
    if (c->flags & CORO_PAINTED)
        measure_depth(c);
#if CORO_VALGRIND
    if (c->flags & CORO_VALGRIND_STACK)
        VALGRIND_STACK_DEREGISTER(c->vg_stack);
#endif
    cache_stack(c->mem, c->mem_size, c->flags & CORO_GUARDED);
}

/* Protocol: the coroutine side hands its yielded or returned value over through the
 * resumer's io slot and makes the resumer the running coroutine again before it
 * switches out, so coro_resume has nothing to do afterwards but see whether the
 * coroutine finished: the switch back carries the coroutine itself when it did, NULL
 * when it yielded. */
void coro_main(coro *c, void *value)
{
#if CORO_ASAN
    __sanitizer_finish_switch_fiber(NULL, &c->caller_stack_bottom, &c->caller_stack_size);
#endif
    (void)value;
    void *result = c->fn(c->arg);
    c = coro_running;          /* the same coroutine; reloading spares a saved register */
    check_canary(c);
    coro_running = c->resumer;
    c->resumer = CORO_FINISHED;
    if (c->io)
        *c->io = result;
#if CORO_ASAN
    __sanitizer_start_switch_fiber(NULL, c->caller_stack_bottom, c->caller_stack_size);
#endif
#if CORO_TSAN
    __tsan_switch_to_fiber(c->tsan_resumer, 0);
#endif
    coro_ctx_jump(&c->caller, c);
}

void coro_finished(coro *c) { release(c); }

bool coro_resume_call(coro *c, void **io)
{
#if CORO_CHECKS
    if (__builtin_expect(c->resumer != NULL, 0))
        coro_misresumed(c);
#endif
    c->resumer = coro_running;
    c->io = io;
    coro_running = c;
#if CORO_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, c->canary, (size_t)((char *)c - (char *)c->canary));
#endif
#if CORO_TSAN
    c->tsan_resumer = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(c->tsan_fiber, 0);
#endif
    coro *finished = coro_ctx_switch(&c->caller, &c->ctx, io ? *io : NULL);
#if CORO_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    if (__builtin_expect(finished != NULL, 0)) {
        release(finished);
        return false;
    }
    return true;
}

void *coro_yield_call(void *value)
{
    coro *c = coro_running;
    check_canary(c);
    coro_running = c->resumer;
#if CORO_CHECKS
    c->resumer = NULL;
#endif
    if (c->io)
        *c->io = value;
#if CORO_ASAN
    __sanitizer_start_switch_fiber(&c->fake_stack, c->caller_stack_bottom, c->caller_stack_size);
#endif
#if CORO_TSAN
    __tsan_switch_to_fiber(c->tsan_resumer, 0);
#endif
    void *in = coro_ctx_switch(&c->ctx, &c->caller, NULL);
#if CORO_ASAN
    __sanitizer_finish_switch_fiber(c->fake_stack, &c->caller_stack_bottom, &c->caller_stack_size);
#endif
    return in;
}

void coro_destroy(coro *c)
{
    if (c->resumer == CORO_FINISHED)
        misuse("coro_destroy", c, "which has finished (and was freed)");
    if (is_running(c))
        misuse("coro_destroy", c, "which is running");
    release(c);
}

/* ---- parking ---- */

/* Where a suspended coroutine's stack pointer was saved. */
static uintptr_t saved_sp(const coro *c)
{
#if !CORO_UCONTEXT
    return (uintptr_t)c->ctx.sp;
#elif defined(__x86_64__)
    return (uintptr_t)c->ctx.uc.uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
    return (uintptr_t)c->ctx.uc.uc_mcontext.sp;
#else
    return (uintptr_t)(c->canary + 1);       /* not known here: all of the stack is live */
#endif
}

static const struct coro *parked_block(const coro_parked *p)
{
    return (const struct coro *)(const void *)(p->bytes + p->len - sizeof(struct coro));
}

/* A parked stack is out of bounds for everyone: poisoned for ASan, else (CORO_CHECKS)
 * its whole pages are PROT_NONE.  The guard page, if any, stays PROT_NONE after. */
static void fence(void *mem, size_t size, uint8_t flags, bool parked)
{
#if CORO_ASAN
    (void)flags;
    if (parked)
        __asan_poison_memory_region(mem, size);
    else
        __asan_unpoison_memory_region(mem, size);
#elif CORO_CHECKS
    uintptr_t lo = ((uintptr_t)mem + os_page() - 1) & ~(os_page() - 1);
    uintptr_t hi = ((uintptr_t)mem + size) & ~(os_page() - 1);
    if (!parked && (flags & CORO_GUARDED))
        lo += os_page();
    /* Unprotected, a parked stack is only unchecked (mprotect may fail once the process
     * has too many mappings); the way back must not fail. */
    if (hi > lo && mprotect((void *)lo, hi - lo, parked ? PROT_NONE : PROT_READ | PROT_WRITE) && !parked) {
        perror("coro: unprotecting a parked stack");
        abort();
    }
#else
    (void)mem, (void)size, (void)flags, (void)parked;
#endif
}

coro_parked *coro_park(coro *c)
{
    if (c->resumer == CORO_FINISHED)
        misuse("coro_park", c, "which has finished (and was freed)");
    if (is_running(c))
        misuse("coro_park", c, "which is running");
    uintptr_t lo = saved_sp(c) & ~(uintptr_t)15, end = (uintptr_t)c + sizeof *c;
    if (lo < (uintptr_t)(c->canary + 1) || lo > (uintptr_t)c)
        misuse("coro_park", c, "whose saved stack pointer lies outside its stack");
    size_t len = end - lo;
    coro_parked *p = sc_malloc(sizeof *p + len);
    if (!p)
        return NULL;
    if (c->flags & CORO_PAINTED)
        measure_depth(c);          /* the paint below goes with the pages */
    void *mem = c->mem;
    size_t mem_size = c->mem_size;
    uint8_t flags = c->flags;
    p->c = c;
    p->len = (uint32_t)len;
    p->size = (uint32_t)sc_usable_size(p);
#if CORO_ASAN
    /* The frames' redzones are poisoned; the copy reads them too. */
    __asan_unpoison_memory_region((void *)lo, len);
#endif
    memcpy(p->bytes, (const void *)lo, len);
    sc_release_pages(mem, mem_size);
    fence(mem, mem_size, flags, true);
    bump(&counters.parked, 1);
    bump(&counters.parked_bytes, p->size);
    bump(&counters.parks, 1);
    return p;
}

/* Lets the stack be touched again and puts the control block back; the frames are the
 * caller's to restore, or not. */
static coro *restore_block(coro_parked *p)
{
    const struct coro *saved = parked_block(p);
    coro *c = p->c;
    fence(saved->mem, saved->mem_size, saved->flags, false);
    memcpy(c, saved, sizeof *c);
    bump(&counters.parked, -1);
    bump(&counters.parked_bytes, -(int64_t)p->size);
    return c;
}

coro *coro_unpark(coro_parked *p)
{
    coro *c = restore_block(p);
    uintptr_t lo = (uintptr_t)c + sizeof *c - p->len;
    memcpy((void *)lo, p->bytes, p->len - sizeof *c);
    *c->canary = CORO_CANARY;
    if (c->flags & CORO_PAINTED)
        memset(c->canary + 1, PAINT_BYTE, lo - (uintptr_t)(c->canary + 1));
    sc_free(p);
    return c;
}

void coro_parked_destroy(coro_parked *p)
{
    coro *c = restore_block(p);
    sc_free(p);
    release(c);
}

size_t coro_parked_bytes(const coro_parked *p) { return p->size; }
