// admin/status_page: the admin status page's files (proxy/admin/status_page/), embedded in the
// binary at build time by cmake/embed_files.cmake. The page fetches /status.json itself.
#pragma once

#include <string_view>

namespace tokenmeter::admin::status_page {

extern const std::string_view index_html;
extern const std::string_view status_css;
extern const std::string_view status_js;
extern const std::string_view favicon_svg;

}  // namespace tokenmeter::admin::status_page
