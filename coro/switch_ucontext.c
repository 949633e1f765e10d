/* The portable context switch (make CORO=ucontext), and the frame builder for the
 * assembly switches.
 *
 * ucontext is the fallback for other architectures and the baseline in bench-coro:
 * swapcontext saves the signal mask with a system call on every switch, which is what
 * makes it two orders of magnitude slower.  The value handed across a switch travels in
 * a thread-local, since swapcontext carries none. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "switch.h"

#if CORO_UCONTEXT
static __thread void *handed_over;

void *coro_ctx_switch(coro_ctx *from, coro_ctx *to, void *value)
{
    handed_over = value;
    swapcontext(&from->uc, &to->uc);
    return handed_over;
}

void coro_ctx_jump(coro_ctx *to, void *value)
{
    handed_over = value;
    setcontext(&to->uc);
    abort();
}

static void ucontext_entry(unsigned lo, unsigned hi)
{
    coro *c = (coro *)((uintptr_t)hi << 32 | lo);
    coro_main(c, handed_over);
}

void coro_ctx_init(coro_ctx *ctx, void *stack_lo, size_t size, coro *c)
{
    getcontext(&ctx->uc);
    ctx->uc.uc_stack.ss_sp = stack_lo;
    ctx->uc.uc_stack.ss_size = size;
    ctx->uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)c;
    makecontext(&ctx->uc, (void (*)(void))ucontext_entry, 2, (unsigned)p, (unsigned)(p >> 32));
}

#elif defined(__x86_64__)
void coro_start(void) __attribute__((visibility("hidden")));

void coro_ctx_init(coro_ctx *ctx, void *stack_lo, size_t size, coro *c)
{
    uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top - 10;   /* coro_start realigns before its call */
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0; fnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
    sp[0] = mxcsr | (uint64_t)fpucw << 32;
    sp[1] = sp[2] = sp[3] = sp[4] = sp[6] = 0;      /* r15 r14 r13 r12, rbp */
    sp[5] = (uint64_t)(uintptr_t)c;                 /* rbx */
    sp[7] = (uint64_t)(uintptr_t)coro_start;        /* return address */
    ctx->sp = sp;
}

#elif defined(__aarch64__)
void coro_start(void) __attribute__((visibility("hidden")));

void coro_ctx_init(coro_ctx *ctx, void *stack_lo, size_t size, coro *c)
{
    uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 176);
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    memset(sp, 0, 176);
    sp[0] = (uint64_t)(uintptr_t)c;                 /* x19 */
    sp[11] = (uint64_t)(uintptr_t)coro_start;       /* x30 */
    sp[20] = fpcr;
    ctx->sp = sp;
}

#else
#error "no assembly context switch for this architecture: build with make CORO=ucontext"
#endif
