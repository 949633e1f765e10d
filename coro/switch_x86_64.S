/* Context switch for x86-64 (System V).
 *
 * Saves the callee-saved registers, MXCSR and the x87 control word (both callee-saved
 * in the ABI) on the running stack, stores the stack pointer, loads the other one and
 * restores the same set.  Measured on this project's Zen 4 machine, per round trip:
 * stmxcsr costs about 3 ns and cannot be avoided (nothing else reads MXCSR), while
 * loading both control words unconditionally costs 0.5 ns - less than comparing the
 * stored value with the target's first (reading stmxcsr's store back stalls: 11.6 ns
 * against 8.7 ns).  push/pop measured faster than mov to and from offsets (8.7 against
 * 9.2 ns).  It ends with an indirect jump instead of ret: the return address popped
 * belongs to another call site, so ret would miss the return-stack predictor on every
 * switch.
 *
 * Frame, from the saved stack pointer up: mxcsr(4) fpucw(2) pad(2) r15 r14 r13 r12 rbx
 * rbp, return address.  coro_ctx_init builds the same frame for a new coroutine with
 * rbx = the coroutine and the return address = coro_start. */
#if defined(__x86_64__) && !CORO_UCONTEXT
    .text
    .p2align 4
    .globl coro_switch
    .hidden coro_switch
    .type coro_switch, @function
coro_switch:                     /* rdi: void **save_sp, rsi: void *load_sp, rdx: value */
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
.Lrestore:
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    movq %rdx, %rax
    popq %rcx
    jmpq *%rcx
    .size coro_switch, .-coro_switch

    /* The last switch out of a finished coroutine: nothing of it needs saving. */
    .p2align 4
    .globl coro_jump
    .hidden coro_jump
    .type coro_jump, @function
coro_jump:                       /* rdi: void *load_sp, rsi: value */
    movq %rsi, %rdx
    movq %rdi, %rsi
    jmp .Lrestore
    .size coro_jump, .-coro_jump

    .p2align 4
    .globl coro_start
    .hidden coro_start
    .type coro_start, @function
coro_start:                      /* rbx: the coroutine, rax: the value it was resumed with */
    movq %rbx, %rdi
    movq %rax, %rsi
    andq $-16, %rsp
    callq coro_main
    ud2
    .size coro_start, .-coro_start
#endif
    .section .note.GNU-stack, "", @progbits
