#include "app/tokenizers.hpp"

namespace tokenmeter::app {

tokenizer::catalog::load_result load_tokenizers(const config::settings& settings) {
    const config::tokenization& t = settings.tokens;
    tokenizer::catalog_options options;
    options.reference = t.reference_tokenizer;
    options.reference_required = t.reference_explicit;
    options.search_dir = config::effective_tokenizer_dir(t);
    for (const auto& [model, m] : t.models) {
        options.models.emplace_back(model, m.tokenizer);
    }
    return tokenizer::catalog::load(options);
}

}  // namespace tokenmeter::app
