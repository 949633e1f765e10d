/* The context switch interface shared by the assembly and ucontext builds.
 *
 * coro_ctx_switch saves the running context into *from, resumes *to, and returns the
 * value passed by whoever later switches back.  coro_ctx_jump resumes *to and discards
 * the running context (a finished coroutine's).  A context made by coro_ctx_init starts
 * by calling coro_main(c, value) on its own stack; coro_main never returns. */
#ifndef CORO_SWITCH_H
#define CORO_SWITCH_H

#include <stddef.h>

#include "coro.h"

#if CORO_UCONTEXT
#include <ucontext.h>
typedef struct { ucontext_t uc; } coro_ctx;
void *coro_ctx_switch(coro_ctx *from, coro_ctx *to, void *value);
void coro_ctx_jump(coro_ctx *to, void *value) __attribute__((noreturn));
#else
typedef struct { void *sp; } coro_ctx;
void coro_jump(void *load_sp, void *value) __attribute__((noreturn, visibility("hidden")));
static inline void *coro_ctx_switch(coro_ctx *from, coro_ctx *to, void *value)
{
    return coro_switch(&from->sp, to->sp, value);
}
static inline __attribute__((noreturn)) void coro_ctx_jump(coro_ctx *to, void *value) { coro_jump(to->sp, value); }
#endif

void coro_ctx_init(coro_ctx *ctx, void *stack_lo, size_t size, coro *c) __attribute__((visibility("hidden")));
void coro_main(coro *c, void *value) __attribute__((noreturn, visibility("hidden")));

#endif
