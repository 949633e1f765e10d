/* Context switch for aarch64 (AAPCS64).
 *
 * Saves x19-x30, d8-d15 and FPCR below the running stack pointer, stores it, loads the
 * other one, restores the same set and branches to the restored x30 with br rather than
 * ret, for the same return-predictor reason as the x86-64 switch.
 *
 * Frame (176 bytes): x19..x28 at 0..72, x29 x30 at 80, d8..d15 at 96..152, fpcr at 160.
 * coro_ctx_init builds it for a new coroutine with x19 = the coroutine and x30 =
 * coro_start. */
#if defined(__aarch64__) && !CORO_UCONTEXT
    .text
    .p2align 4
    .globl coro_switch
    .hidden coro_switch
    .type coro_switch, %function
coro_switch:                     /* x0: void **save_sp, x1: void *load_sp, x2: value */
    sub sp, sp, #176
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mrs x9, fpcr
    str x9, [sp, #160]
    mov x9, sp
    str x9, [x0]
.Lrestore:
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    ldr x9, [sp, #160]
    msr fpcr, x9
    add sp, sp, #176
    mov x0, x2
    br x30
    .size coro_switch, .-coro_switch

    /* The last switch out of a finished coroutine: nothing of it needs saving. */
    .p2align 4
    .globl coro_jump
    .hidden coro_jump
    .type coro_jump, %function
coro_jump:                       /* x0: void *load_sp, x1: value */
    mov x2, x1
    mov x1, x0
    b .Lrestore
    .size coro_jump, .-coro_jump

    .p2align 4
    .globl coro_start
    .hidden coro_start
    .type coro_start, %function
coro_start:                      /* x19: the coroutine, x0: the value it was resumed with */
    mov x1, x0
    mov x0, x19
    bl coro_main
    brk #0
    .size coro_start, .-coro_start
#endif
    .section .note.GNU-stack, "", %progbits
