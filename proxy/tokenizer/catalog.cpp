#include "tokenizer/catalog.hpp"

namespace tokenmeter::tokenizer {

catalog::load_result catalog::load(const catalog_options& options) {
    load_result result;
    auto built = std::make_shared<catalog>();
    struct loaded {
        std::shared_ptr<const encoder> value;
        std::string source;
        std::string special_mode;
        double seconds = 0;
        std::int64_t resident = 0;
    };
    std::map<std::pair<std::string, special_tokens>, loaded> by_spec;

    // Loads `spec` once per mode; records an entry for `role`/`model`. Returns the failed load
    // on error.
    auto use = [&](const std::string& role, const std::string& model, const std::string& spec,
                   special_tokens special,
                   tokenizer::load_result& failure) -> std::shared_ptr<const encoder> {
        catalog_entry entry{role, model, "", spec, "", "", 0, 0, false};
        if (auto it = by_spec.find({spec, special}); it != by_spec.end()) {
            entry.shared = true;
            entry.name = it->second.value->name();
            entry.source = it->second.source;
            entry.special_mode = it->second.special_mode;
            built->entries_.push_back(std::move(entry));
            return it->second.value;
        }
        const double t0 = options.seconds_now ? options.seconds_now() : 0;
        const std::int64_t r0 = options.resident_bytes ? options.resident_bytes() : 0;
        tokenizer::load_result got =
            tokenizer::load(spec, load_options{options.search_dirs, true, special});
        if (!got.value) {
            failure = std::move(got);
            return nullptr;
        }
        for (auto& w : got.warnings) {
            result.warnings.push_back(std::move(w));
        }
        loaded l{got.value, got.source, got.special_mode,
                 options.seconds_now ? options.seconds_now() - t0 : 0,
                 options.resident_bytes ? options.resident_bytes() - r0 : 0};
        entry.name = l.value->name();
        entry.source = l.source;
        entry.special_mode = l.special_mode;
        entry.load_seconds = l.seconds;
        entry.resident_growth_bytes = l.resident;
        built->entries_.push_back(std::move(entry));
        by_spec.emplace(std::make_pair(spec, special), l);
        return l.value;
    };

    if (options.reference != "none") {
        tokenizer::load_result failure;
        built->reference_ =
            use("reference", "", options.reference, options.reference_special, failure);
        if (!built->reference_) {
            if (options.reference_required) {
                result.errors.push_back({"reference_tokenizer", failure.error});
            } else {
                result.warnings.push_back(
                    "normalized token counts are off: the reference tokenizer " +
                    options.reference + " was not found (" + failure.error +
                    "). Fix: put " + options.reference +
                    ".json (or <name>/tokenizer.json) into one of the directories tried, or set "
                    "tokenizer_dir to the directory that holds it; or use a built-in reference "
                    "(reference_tokenizer: o200k_base or cl100k_base, no file needed); or set "
                    "reference_tokenizer: none to silence this");
            }
        }
    }
    for (const auto& m : options.models) {
        tokenizer::load_result failure;
        auto enc = use("native", m.model, m.spec, m.special, failure);
        if (!enc) {
            result.errors.push_back({"models." + m.model + ".tokenizer", failure.error});
            continue;
        }
        built->by_model_.emplace(m.model, std::move(enc));
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
