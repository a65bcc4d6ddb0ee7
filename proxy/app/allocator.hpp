// app/allocator: which allocator serves this process's malloc (the build links mimalloc into the
// proxy binary unless TOKENMETER_MALLOC=system), found at run time, so that the same code is right
// in the binary, in tests built on the system allocator and under an LD_PRELOAD.
#pragma once

#include <string>

namespace tokenmeter::app {

// "mimalloc 2.0.9", "glibc malloc", or "sanitizer allocator" (ASan and TSan bring their own).
std::string allocator_name();

// Hands freed memory back to the system now, through whichever allocator is in use (mimalloc
// keeps freed pages for a while before it returns them; glibc keeps the top of its heap), so
// that a resident-memory reading taken next shows what is really held.
void release_free_memory();

}  // namespace tokenmeter::app
