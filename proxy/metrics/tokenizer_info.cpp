#include "metrics/tokenizer_info.hpp"

#include <prometheus/family.h>
#include <prometheus/gauge.h>

namespace tokenmeter::metrics {

void register_tokenizer_info(prometheus::Registry& registry,
                             const std::vector<tokenizer::catalog_entry>& entries) {
    auto& family = prometheus::BuildGauge()
                       .Name("tokenmeter_tokenizer_info")
                       .Help(
                           "Tokenizers in use (value 1): role reference (normalized counts) or "
                           "native (a model's own), the model (empty for the reference), the "
                           "tokenizer's name, and whether its table is built in or from a file")
                       .Register(registry);
    for (const auto& e : entries) {
        family
            .Add({{"role", e.role},
                  {"model", e.model},
                  {"name", e.name},
                  {"source", e.source == "embedded" ? "embedded" : "file"}})
            .Set(1);
    }
}

}  // namespace tokenmeter::metrics
