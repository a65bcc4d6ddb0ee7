#include "json_walk_reference.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "protocol/json_limits.hpp"
#include "protocol/json_number.hpp"

namespace tokenmeter::protocol::reference {
namespace {

using json = nlohmann::json;

// The SAX handler of the former walk_json, unchanged but for the number reports, which now live
// in protocol/json_number (shared with the scanner).
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
        scalar([this, value] { detail::report_json_integer(visitor_, path_, value); });
        return true;
    }
    bool number_unsigned(number_unsigned_t value) override {
        scalar([this, value] { detail::report_json_unsigned(visitor_, path_, value); });
        return true;
    }
    bool number_float(number_float_t value, const string_t&) override {
        scalar([this, value] { detail::report_json_float(visitor_, path_, value); });
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
    std::vector<bool> arrays_;
    std::vector<bool> pushed_;
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

}  // namespace tokenmeter::protocol::reference
