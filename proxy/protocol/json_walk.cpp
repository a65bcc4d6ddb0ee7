#include "protocol/json_walk.hpp"

#include <nlohmann/json.hpp>

#include "protocol/json_limits.hpp"

namespace tokenmeter::protocol {

bool json_path::is(std::initializer_list<std::string_view> steps) const noexcept {
    return is_from(0, steps);
}

bool json_path::is_from(std::size_t skip,
                        std::initializer_list<std::string_view> steps) const noexcept {
    if (size_ < skip || size_ - skip != steps.size()) {
        return false;
    }
    std::size_t i = skip;
    for (std::string_view step : steps) {
        if (steps_[i] != step) {
            return false;
        }
        ++i;
    }
    return true;
}

void json_path::push(std::string_view step) {
    if (size_ < steps_.size()) {
        steps_[size_].assign(step);
    } else {
        steps_.emplace_back(step);
    }
    ++size_;
}

namespace {

using json = nlohmann::json;

class walker final : public nlohmann::json_sax<json> {
  public:
    walker(json_visitor& visitor, json_path& path) : visitor_(visitor), path_(path) {}

    bool null() override {
        scalar([this] { visitor_.on_null(path_); });
        return true;
    }
    bool boolean(bool value) override {
        scalar([this, value] { visitor_.on_bool(path_, value); });
        return true;
    }
    bool number_integer(number_integer_t value) override {
        if (value >= 0) {
            scalar([this, value] { visitor_.on_count(path_, static_cast<std::uint64_t>(value)); });
        } else {
            scalar([this] { visitor_.on_other(path_); });
        }
        return true;
    }
    bool number_unsigned(number_unsigned_t value) override {
        scalar([this, value] { visitor_.on_count(path_, value); });
        return true;
    }
    bool number_float(number_float_t value, const string_t&) override {
        // Range first: converting an out-of-range double to an integer is undefined.
        if (value >= 0.0 && value < 1e18 &&
            static_cast<double>(static_cast<std::uint64_t>(value)) == value) {
            scalar([this, value] { visitor_.on_count(path_, static_cast<std::uint64_t>(value)); });
        } else if (value >= 0.0 && value < 1e18) {
            scalar([this, value] { visitor_.on_fraction(path_, value); });
        } else {
            scalar([this] { visitor_.on_other(path_); });
        }
        return true;
    }
    bool string(string_t& value) override {
        scalar([this, &value] { visitor_.on_string(path_, value); });
        return true;
    }
    bool binary(binary_t&) override {
        scalar([this] { visitor_.on_other(path_); });
        return true;
    }
    bool start_object(std::size_t) override { return open(true); }
    bool key(string_t& value) override {
        key_ = value;
        return true;
    }
    bool end_object() override {
        close(true);
        return true;
    }
    bool start_array(std::size_t) override { return open(false); }
    bool end_array() override {
        close(false);
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }

  private:
    // The step a value takes in its parent: its key, or "[]" in an array; none at the root.
    bool push_step() {
        if (arrays_.empty()) {
            return false;
        }
        path_.push(arrays_.back() ? json_path::element : std::string_view(key_));
        return true;
    }

    template <typename Report>
    void scalar(Report&& report) {
        bool pushed = push_step();
        report();
        if (pushed) {
            path_.pop();
        }
    }

    // False past the depth limit: the parse stops there and the text counts as not parsed.
    bool open(bool object) {
        if (arrays_.size() >= max_depth_) {
            return false;
        }
        pushed_.push_back(push_step());
        visitor_.on_open(path_, object);
        arrays_.push_back(!object);
        return true;
    }

    void close(bool object) {
        arrays_.pop_back();
        visitor_.on_close(path_, object);
        if (pushed_.back()) {
            path_.pop();
        }
        pushed_.pop_back();
    }

    json_visitor& visitor_;
    json_path& path_;
    std::string key_;
    std::vector<bool> arrays_;  // per open container: is it an array
    std::vector<bool> pushed_;  // per open container: did it add a path step
    std::size_t max_depth_ = max_json_depth();
};

}  // namespace

walk_result walk_json(std::string_view text, json_visitor& visitor, json_path& path) {
    path.clear();
    walker w(visitor, path);
    bool ok =
        json::sax_parse(text.begin(), text.end(), &w, nlohmann::detail::input_format_t::json, true);
    return ok ? walk_result::ok : walk_result::invalid_json;
}

}  // namespace tokenmeter::protocol
