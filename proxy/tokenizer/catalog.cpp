#include "tokenizer/catalog.hpp"

namespace tokenmeter::tokenizer {

catalog::load_result catalog::load(const catalog_options& options) {
    load_result result;
    auto built = std::make_shared<catalog>();
    struct loaded {
        std::shared_ptr<const encoder> value;
        std::string source;
        double seconds = 0;
        std::int64_t resident = 0;
    };
    std::map<std::string, loaded> by_spec;
    load_options search{options.search_dirs, true};

    // Loads `spec` once; records an entry for `role`/`model`. Returns the failed load on error.
    auto use = [&](const std::string& role, const std::string& model, const std::string& spec,
                   tokenizer::load_result& failure) -> std::shared_ptr<const encoder> {
        catalog_entry entry{role, model, "", spec, "", 0, 0, false};
        if (auto it = by_spec.find(spec); it != by_spec.end()) {
            entry.shared = true;
            entry.name = it->second.value->name();
            entry.source = it->second.source;
            built->entries_.push_back(std::move(entry));
            return it->second.value;
        }
        const double t0 = options.seconds_now ? options.seconds_now() : 0;
        const std::int64_t r0 = options.resident_bytes ? options.resident_bytes() : 0;
        tokenizer::load_result got = tokenizer::load(spec, search);
        if (!got.value) {
            failure = std::move(got);
            return nullptr;
        }
        loaded l{got.value, got.source, options.seconds_now ? options.seconds_now() - t0 : 0,
                 options.resident_bytes ? options.resident_bytes() - r0 : 0};
        entry.name = l.value->name();
        entry.source = l.source;
        entry.load_seconds = l.seconds;
        entry.resident_growth_bytes = l.resident;
        built->entries_.push_back(std::move(entry));
        by_spec.emplace(spec, l);
        return l.value;
    };

    if (options.reference != "none") {
        tokenizer::load_result failure;
        built->reference_ = use("reference", "", options.reference, failure);
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
    for (const auto& [model, spec] : options.models) {
        tokenizer::load_result failure;
        auto enc = use("native", model, spec, failure);
        if (!enc) {
            result.errors.push_back({"models." + model + ".tokenizer", failure.error});
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
