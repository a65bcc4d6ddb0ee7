// metrics/build_revision: the git revision the build was configured from (12 hex digits), or
// "unknown" when the source was not a git checkout. CMake writes it into one generated file
// (build_revision.cpp.in) when it configures, so a commit rebuilds nothing.
#pragma once

#include <string_view>

namespace tokenmeter::metrics {

[[nodiscard]] std::string_view build_revision() noexcept;

}  // namespace tokenmeter::metrics
