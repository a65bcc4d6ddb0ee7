#include "tokenizer/catalog.hpp"

namespace tokenmeter::tokenizer {

catalog::load_result catalog::load(const catalog_options& options) {
    load_result result;
    auto built = std::make_shared<catalog>();
    std::map<std::string, std::shared_ptr<const encoder>> by_spec;

    auto load_spec = [&](const std::string& spec, std::string& error) {
        if (auto it = by_spec.find(spec); it != by_spec.end()) {
            return it->second;
        }
        auto enc = tokenizer::load(spec, options.search_dir, error);
        if (enc) {
            by_spec.emplace(spec, enc);
        }
        return enc;
    };

    if (options.reference != "none") {
        std::string error;
        built->reference_ = load_spec(options.reference, error);
        if (!built->reference_) {
            if (options.reference_required) {
                result.errors.push_back({"reference_tokenizer", error});
            } else {
                result.warnings.push_back(
                    "normalized token counts are off: the default reference tokenizer " +
                    options.reference + " could not be loaded (" + error +
                    "); run scripts/fetch-tokenizers.sh, set tokenizer_dir, or set "
                    "reference_tokenizer: none to silence this");
            }
        }
    }
    for (const auto& [model, spec] : options.models) {
        std::string error;
        auto enc = load_spec(spec, error);
        if (!enc) {
            result.errors.push_back({"models." + model + ".tokenizer", error});
            continue;
        }
        built->by_model_.emplace(model, std::move(enc));
    }
    if (result.errors.empty()) {
        result.value = std::move(built);
    }
    return result;
}

selection catalog::for_model(std::string_view model) const {
    selection s;
    s.reference = reference_.get();
    if (auto it = by_model_.find(model); it != by_model_.end()) {
        s.native = it->second.get();
    }
    return s;
}

std::string catalog::reference_name() const {
    return reference_ ? reference_->name() : std::string();
}

}  // namespace tokenmeter::tokenizer
