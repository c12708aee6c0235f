// Fiber context switch for the kernel emulator (System V x86-64).
// void emu_switch(void **save_sp, void *new_sp)
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *save_sp and resumes the fiber
// whose stack pointer is new_sp (saved by a previous emu_switch or prepared
// by emu_fiber_prepare in runtime.h).
#if defined(__x86_64__)
	.text
	.globl	emu_switch
	.type	emu_switch, @function
emu_switch:
	pushq	%rbp
	pushq	%rbx
	pushq	%r12
	pushq	%r13
	pushq	%r14
	pushq	%r15
	subq	$8, %rsp
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.size	emu_switch, .-emu_switch
#endif
	.section	.note.GNU-stack,"",@progbits
