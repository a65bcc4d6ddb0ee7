// app/allocator: which allocator serves this process's malloc (the build links mimalloc into the
// proxy binary unless TOKENMETER_MALLOC=system), found at run time, so that the same code is right
// in the binary, in tests built on the system allocator and under an LD_PRELOAD.
#pragma once

#include <string>

namespace tokenmeter::app {

// "mimalloc 2.0.9", "glibc malloc", or "sanitizer allocator" (ASan and TSan bring their own).
std::string allocator_name();

// Hands freed memory back to the system now, through whichever allocator is in use (glibc keeps
// the top of its heap; mimalloc what its delay has not yet released), so that a resident-memory
// reading taken next shows what is really held.
void release_free_memory();
// The calling thread's share of that: its own allocator heap's free pages (mimalloc keeps a heap
// per thread), without glibc's whole-process trim. For a worker gone idle.
void release_thread_memory() noexcept;

// While one is alive, memory freed is handed back to the system at once, not after mimalloc's
// delay (100 ms by default): for start-up, whose tokenizer tables free megabytes of temporary
// buffers that would otherwise stay resident. Under load the delay saves a system call per page
// freed and taken again, so it comes back when this ends. Nothing with glibc's allocator.
class prompt_release {
  public:
    prompt_release();
    ~prompt_release();
    prompt_release(const prompt_release&) = delete;
    prompt_release& operator=(const prompt_release&) = delete;

  private:
    long saved_delay_ = -1;  // mimalloc's delay before this; -1 without mimalloc
};

}  // namespace tokenmeter::app
