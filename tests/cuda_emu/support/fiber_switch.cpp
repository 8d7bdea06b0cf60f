// The context switch of the CUDA stand-in's thread blocks (tests/cuda_emu/include/cuda_emu/blocks.h) on x86-64: saves
// the callee-saved registers on the current stack, stores the stack pointer in *save, continues on the stack `to`
// (where a switch saved it, or where blocks.h prepared a fresh one). What glibc's swapcontext does, without its
// signal-mask system call, which took over half of the emulation's time.
#if defined(__x86_64__)
asm(R"(
  .text
  .globl uoe_emu_switch
  .type uoe_emu_switch, @function
uoe_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size uoe_emu_switch, .-uoe_emu_switch
)");
#endif
