/* SPDX-License-Identifier: MIT */
/*
 * context-x86_64.S — the context switch for x86-64 System V (see context.h).
 *
 * Frame pushed on the stack being left, from high to low addresses:
 *   return address | rbp | rbx | r15 | r14 | r13 | r12 | fpucw:mxcsr   <- saved sp
 * A new context is built by context_init() with the same frame, whose return address is
 * context_trampoline and whose r12 / r13 hold the entry's argument and address.
 */
#if defined(__x86_64__) && !defined(SCHED_CONTEXT_UCONTEXT)
        .text

/* void context_switch_asm(void **from_sp, void *to_sp)
 *
 * The CFI follows every push and pop, so an unwinder that starts inside the switch (the
 * stall detector's backtrace(3) from a signal, a debugger) finds the return address at
 * any instruction. Across `movq %rsi, %rsp` the frame is the other context's, saved by
 * this same code with the same layout, so the offsets still hold. */
        .globl  context_switch_asm
        .hidden context_switch_asm
        .type   context_switch_asm, @function
        .p2align 4
context_switch_asm:
        .cfi_startproc
        pushq   %rbp
        .cfi_adjust_cfa_offset 8
        pushq   %rbx
        .cfi_adjust_cfa_offset 8
        pushq   %r15
        .cfi_adjust_cfa_offset 8
        pushq   %r14
        .cfi_adjust_cfa_offset 8
        pushq   %r13
        .cfi_adjust_cfa_offset 8
        pushq   %r12
        .cfi_adjust_cfa_offset 8
        subq    $8, %rsp
        .cfi_adjust_cfa_offset 8
        stmxcsr (%rsp)
        fnstcw  4(%rsp)
        movq    %rsp, (%rdi)
        movq    %rsi, %rsp
        ldmxcsr (%rsp)
        fldcw   4(%rsp)
        addq    $8, %rsp
        .cfi_adjust_cfa_offset -8
        popq    %r12
        .cfi_adjust_cfa_offset -8
        popq    %r13
        .cfi_adjust_cfa_offset -8
        popq    %r14
        .cfi_adjust_cfa_offset -8
        popq    %r15
        .cfi_adjust_cfa_offset -8
        popq    %rbx
        .cfi_adjust_cfa_offset -8
        popq    %rbp
        .cfi_adjust_cfa_offset -8
        ret
        .cfi_endproc
        .size   context_switch_asm, .-context_switch_asm

/* First frame of every new context: entry(arg), where r13 = entry and r12 = arg. */
        .globl  context_trampoline
        .hidden context_trampoline
        .type   context_trampoline, @function
        .p2align 4
context_trampoline:
        .cfi_startproc
        .cfi_undefined rip
        movq    %r12, %rdi
        callq   *%r13
        ud2
        .cfi_endproc
        .size   context_trampoline, .-context_trampoline

        .section .note.GNU-stack,"",%progbits
#endif
