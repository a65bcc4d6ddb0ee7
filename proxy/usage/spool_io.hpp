// usage/spool_io: the file calls the spool's writer and readers share (internal to usage/).
#pragma once

#include <filesystem>
#include <string_view>

namespace tokenmeter::usage::spool_io {

// fsync of a directory, so a file created or renamed in it survives a crash.
bool fsync_dir(const std::filesystem::path& dir);
// The whole of `data` to `fd`, through short writes and EINTR.
bool write_all(int fd, std::string_view data);

}  // namespace tokenmeter::usage::spool_io
