// core/thread_name: names the calling thread, so `top -H`, `ps -L -o tid,comm` and gdb show each
// of the proxy's threads by its job (tm-worker-0, tm-planner, ...). Linux keeps at most 15 bytes
// of a name; a longer one is cut there.
#pragma once

#include <string>
#include <string_view>

namespace tokenmeter::core {

// Best effort: a name the system refuses leaves the thread as it was.
void name_this_thread(std::string_view name);

// The calling thread's name, as the system holds it ("" when it cannot be read).
[[nodiscard]] std::string this_thread_name();

}  // namespace tokenmeter::core
