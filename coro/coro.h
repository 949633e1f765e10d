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

/* Creates a suspended coroutine that will run fn(arg) on a stack of stack_size bytes
 * (0: the default).  NULL if out of memory. */
coro *coro_create(coro_fn fn, void *arg, size_t stack_size);

/* Runs c until it yields or returns.  *io carries a value in (what coro_yield returns
 * inside c) and out (what c yielded or returned).  Returns true while c is suspended,
 * false once it has returned and been freed. */
bool coro_resume(coro *c, void **io);

/* Suspends the running coroutine; returns the value of the coro_resume that wakes it. */
void *coro_yield(void *value);

/* The running coroutine, or NULL on a thread's own stack. */
coro *coro_current(void);
uint64_t coro_id(const coro *c);

/* Frees a suspended coroutine without running it further.  Its stack is discarded as
 * it stands: only for coroutines that hold nothing that needs releasing. */
void coro_destroy(coro *c);

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
};
void coro_read_counters(struct coro_counters *out);

/* Which context switch this build uses: "asm-x86_64", "asm-aarch64" or "ucontext". */
const char *coro_switch_kind(void);

#endif
