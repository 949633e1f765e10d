/* Context switch for x86-64 (System V).
 *
 * Saves the callee-saved registers, MXCSR and the x87 control word on the running stack,
 * stores the stack pointer, loads the other one and restores the same set.  Loading
 * MXCSR and the control word is slow (each stalls the pipeline for several cycles), and
 * nearly every context runs with the defaults, so each is loaded only when it differs
 * from the value already in force.  It ends with an indirect jump instead of ret: the
 * return address popped belongs to another call site, so ret would miss the
 * return-stack predictor on every switch.
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
    movl (%rsp), %r8d            /* the control state in force now */
    movzwl 4(%rsp), %r9d
    movq %rsi, %rsp
    cmpl (%rsp), %r8d
    jne 1f
2:  cmpw 4(%rsp), %r9w
    jne 3f
4:  addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    movq %rdx, %rax
    popq %rcx
    jmpq *%rcx
1:  ldmxcsr (%rsp)
    jmp 2b
3:  fldcw 4(%rsp)
    jmp 4b
    .size coro_switch, .-coro_switch

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
