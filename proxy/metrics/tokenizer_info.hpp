// metrics/tokenizer_info: tokenmeter_tokenizer_info{role,model,name,source}, one series of value 1
// per tokenizer a role uses, so a dashboard can tell which tables the counts came from (a built-in
// table or a file) without reading the start-up log.
#pragma once

#include <prometheus/registry.h>

#include <vector>

#include "tokenizer/catalog.hpp"

namespace tokenmeter::metrics {

// Registers the family and sets one series per entry; entries are fixed at start-up, so the
// label set is bounded by the configuration.
void register_tokenizer_info(prometheus::Registry& registry,
                             const std::vector<tokenizer::catalog_entry>& entries);

}  // namespace tokenmeter::metrics
