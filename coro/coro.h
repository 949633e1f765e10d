/* coro: stackful coroutines whose stacks come from the size-class heap.
 *
 * A coroutine is one allocation from sc_stack_alloc: the stack, a canary word at its
 * lowest address, and the control block at its top.  It runs when resumed, gives control
 * back with coro_yield, and when its function returns it is finished: coro_resume frees
 * the whole allocation before it returns, so a finished coroutine costs nothing.
 * Coroutines belong to the thread that created them; they know nothing of HTTP. */
#ifndef CORO_H
#define CORO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct coro coro;
typedef void *(*coro_fn)(void *arg);

#define CORO_DEFAULT_STACK (32u << 10)
#define CORO_MIN_STACK (8u << 10)

/* Misuse aborts with a message that names it: yielding outside a coroutine, destroying
 * one that is running or has finished, and - where CORO_CHECKS is on, see below -
 * resuming one that has finished (until its memory is reused; under ASan, until the
 * quarantine lets it go) or that is running (itself, or one up its chain of resumers). */

/* Creates a suspended coroutine that will run fn(arg) on a stack of stack_size bytes
 * (0: the default).  NULL if out of memory. */
coro *coro_create(coro_fn fn, void *arg, size_t stack_size);

/* Runs c until it yields or returns.  *io carries a value in (what coro_yield returns
 * inside c) and out (what c yielded or returned).  Returns true while c is suspended,
 * false once it has returned and been freed. */
static inline bool coro_resume(coro *c, void **io);

/* Suspends the running coroutine; returns the value of the coro_resume that wakes it. */
static inline void *coro_yield(void *value);

/* The running coroutine, or NULL on a thread's own stack. */
coro *coro_current(void);
uint64_t coro_id(const coro *c);

/* Frees a suspended coroutine without running it further.  Its stack is discarded as
 * it stands: only for coroutines that hold nothing that needs releasing. */
void coro_destroy(coro *c);

/* ---- Parking: a coroutine suspended for a while holds only its live stack bytes ----
 *
 * coro_park moves a suspended coroutine's live stack - from its saved stack pointer to
 * the top, with the control block that sits there - into a heap object of that size,
 * and gives every whole page of the stack back to the OS.  The stack's address range
 * stays allocated to the coroutine, so coro_unpark copies the bytes back to the same
 * addresses: pointers into its frames stay valid, and the coroutine is resumed as if
 * nothing had happened.  Between the two, nothing may read or write the stack or use
 * the coro pointer (coro_resume, coro_destroy, coro_id): whatever a parked coroutine
 * waits on must live outside its frames.  That is checked where CORO_CHECKS is on (an
 * access faults: the stack is PROT_NONE) and under ASan (the stack is poisoned: an
 * access is reported), so a violation shows at once rather than as a zeroed frame. */
typedef struct coro_parked coro_parked;
/* c must be suspended.  NULL if out of memory (c is left as it was). */
coro_parked *coro_park(coro *c);
/* The coroutine again, suspended exactly as it was parked; p is freed. */
coro *coro_unpark(coro_parked *p);
/* Frees a parked coroutine without running it further (as coro_destroy). */
void coro_parked_destroy(coro_parked *p);
/* The heap bytes the parked coroutine holds (its live stack and control block). */
size_t coro_parked_bytes(const coro_parked *p);

struct coro_options {
    size_t stack_size;         /* default stack size */
    bool guard_pages;          /* PROT_NONE page under each stack, stacks kept in a cache */
    bool paint;                /* measure each stack's high-water mark */
};
/* Applies to coroutines created afterwards, on any thread. */
void coro_configure(const struct coro_options *opt);
void coro_get_options(struct coro_options *out);

struct coro_counters {
    uint64_t live;             /* created and not yet finished */
    uint64_t created;          /* all time */
    uint64_t stack_bytes;      /* allocated for live coroutines' stacks */
    uint64_t deepest;          /* deepest stack use seen (needs paint), bytes */
    uint64_t parked;           /* parked now (coro_park) */
    uint64_t parked_bytes;     /* heap bytes they hold */
    uint64_t parks;            /* all time */
    uint64_t cached_stack_bytes;   /* finished coroutines' stacks kept (coro_trim_stacks) */
};
void coro_read_counters(struct coro_counters *out);

/* Gives the calling thread's cached stacks (those of its finished coroutines, kept for
 * its next ones) back to the heap: if unused_only, those no coroutine took since the
 * previous call, else all. */
void coro_trim_stacks(bool unused_only);

/* Which context switch this build uses: "asm-x86_64", "asm-aarch64" or "ucontext". */
const char *coro_switch_kind(void);

/* ---- Internals of the inline resume and yield; not for use outside coro/. ----
 *
 * coro_resume and coro_yield are inline so that the switch is entered straight from
 * the caller's code: the switch itself ends in a jump, and a resume that were a
 * function of its own would end in a ret whose return-stack prediction the switch
 * left stale - a mispredicted return on every round trip (measured: 4.3 ns of 13).
 * Under ASan and TSan (fiber hooks around every switch) and in the ucontext build they
 * call the out-of-line versions.  This header must be compiled with the library's
 * CORO_UCONTEXT setting, as the Makefile does. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CORO_INLINE_SWITCH 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CORO_INLINE_SWITCH 0
#endif
#endif
#ifndef CORO_INLINE_SWITCH
#if !CORO_UCONTEXT && (defined(__x86_64__) || defined(__aarch64__))
#define CORO_INLINE_SWITCH 1
#else
#define CORO_INLINE_SWITCH 0
#endif
#endif

/* Whether coro_resume checks that the coroutine is suspended.  In the inline switch that
 * costs 4 instructions per round trip (72 to 76 in bench_coro): off there unless built
 * with make CORO_CHECKS=1 (-DCORO_CHECKS=1); on where resume is out of line anyway
 * (ucontext, ASan, TSan). */
#ifndef CORO_CHECKS
#define CORO_CHECKS (!CORO_INLINE_SWITCH)
#endif

#define CORO_CANARY 0xC0A0C0DEDEADBEEFull

/* The leading fields of struct coro (coro.c checks the layout). */
struct coro_head {
    void *sp;                  /* the coroutine's stack pointer while it is suspended */
    void *caller_sp;           /* its resumer's while it runs */
    coro *resumer;             /* while it runs; CORO_FINISHED after; with CORO_CHECKS,
                                  NULL while suspended */
    uint64_t *canary;          /* the lowest word of its stack */
    void **io;                 /* the running coro_resume's value slot */
};

#define CORO_FINISHED ((coro *)1)

/* Never NULL: on a thread's own stack it is a stand-in whose canary never matches, so
 * the check every yield makes anyway also catches a yield outside a coroutine. */
extern __thread coro *coro_running;
bool coro_resume_call(coro *c, void **io);
void *coro_yield_call(void *value);
void coro_finished(coro *c);                            /* frees a coroutine that returned */
void coro_overflowed(const coro *c) __attribute__((noreturn));
void coro_misresumed(const coro *c) __attribute__((noreturn));
void *coro_switch(void **save_sp, void *load_sp, void *value);

static inline bool coro_resume(coro *c, void **io)
{
#if CORO_INLINE_SWITCH
    struct coro_head *h = (struct coro_head *)c;
#if CORO_CHECKS
    if (__builtin_expect(h->resumer != NULL, 0))
        coro_misresumed(c);
#endif
    h->resumer = coro_running;
    h->io = io;
    coro_running = c;
    /* The switch back carries the coroutine itself if it returned, NULL if it yielded
     * (the value travels through *io, written on the coroutine's side). */
    coro *done = (coro *)coro_switch(&h->caller_sp, h->sp, io ? *io : NULL);
    if (__builtin_expect(done != NULL, 0)) {
        coro_finished(done);
        return false;
    }
    return true;
#else
    return coro_resume_call(c, io);
#endif
}

static inline void *coro_yield(void *value)
{
#if CORO_INLINE_SWITCH
    struct coro_head *h = (struct coro_head *)coro_running;
    if (__builtin_expect(*h->canary != CORO_CANARY, 0))
        coro_overflowed((coro *)h);
    coro_running = h->resumer;
#if CORO_CHECKS
    h->resumer = NULL;
#endif
    if (h->io)
        *h->io = value;
    return coro_switch(&h->sp, h->caller_sp, NULL);
#else
    return coro_yield_call(value);
#endif
}

#endif
