// tokenizer/load_hf_json: reads a tokenizer.json into an hf_document (load_internal.hpp) with
// nlohmann's SAX interface, so that the vocab and merges never become a DOM.
#include <string>
#include <vector>

#include "tokenizer/load_internal.hpp"

namespace tokenmeter::tokenizer::loader {

namespace {

using nlohmann::json;

class hf_reader {
  public:
    using string_t = json::string_t;
    explicit hf_reader(hf_document& doc) : doc_(doc), dom_(doc.dom, true) {}

    bool null() { return scalar([&] { return dom_.null(); }); }
    bool boolean(bool v) { return scalar([&] { return dom_.boolean(v); }); }
    bool number_integer(json::number_integer_t v) {
        return scalar([&] { return dom_.number_integer(v); });
    }
    bool number_unsigned(json::number_unsigned_t v) {
        if (mode_ == mode::vocab && skip_ == 0) {
            doc_.vocab.emplace_back(std::move(key_), v);
            return true;
        }
        return scalar([&] { return dom_.number_unsigned(v); });
    }
    bool number_float(json::number_float_t v, const string_t& text) {
        return scalar([&] { return dom_.number_float(v, text); });
    }
    bool string(string_t& v) {
        if (skip_ == 0 && mode_ == mode::merges) {
            const std::size_t space = v.find(' ');
            if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos) {
                bad_merge(v);
            } else {
                doc_.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
            }
            return true;
        }
        if (skip_ == 0 && mode_ == mode::merge_pair) {
            pair_.push_back(std::move(v));
            return true;
        }
        return scalar([&] { return dom_.string(v); });
    }
    bool binary(json::binary_t& v) { return scalar([&] { return dom_.binary(v); }); }

    bool start_object(std::size_t n) {
        if (mode_ != mode::dom) {
            invalid_nested();
            return true;
        }
        if (depth_ == 2 && key1_ == "model" && key2_ == "vocab") {
            doc_.has_vocab = true;
            mode_ = mode::vocab;
            ++depth_;
            return dom_.start_object(0) && dom_.end_object();
        }
        ++depth_;
        return dom_.start_object(n);
    }
    bool key(string_t& k) {
        if (mode_ == mode::vocab && skip_ == 0) {
            key_ = std::move(k);
            return true;
        }
        if (mode_ != mode::dom) {
            return true;
        }
        if (depth_ == 1) {
            key1_ = k;
        } else if (depth_ == 2) {
            key2_ = k;
        }
        return dom_.key(k);
    }
    bool end_object() {
        if (skip_ > 0) {
            --skip_;
            return true;
        }
        if (mode_ == mode::vocab) {
            mode_ = mode::dom;
            --depth_;
            return true;
        }
        --depth_;
        return dom_.end_object();
    }
    bool start_array(std::size_t n) {
        if (mode_ == mode::merges && skip_ == 0) {
            mode_ = mode::merge_pair;
            pair_.clear();
            return true;
        }
        if (mode_ != mode::dom) {
            invalid_nested();
            return true;
        }
        if (depth_ == 2 && key1_ == "model" && key2_ == "merges") {
            doc_.has_merges = true;
            mode_ = mode::merges;
            ++depth_;
            return dom_.start_array(0) && dom_.end_array();
        }
        ++depth_;
        return dom_.start_array(n);
    }
    bool end_array() {
        if (skip_ > 0) {
            --skip_;
            return true;
        }
        if (mode_ == mode::merge_pair) {
            mode_ = mode::merges;
            if (pair_.size() == 2) {
                doc_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
            } else {
                bad_merge("[...]");
            }
            return true;
        }
        if (mode_ == mode::merges) {
            mode_ = mode::dom;
            --depth_;
            return true;
        }
        --depth_;
        return dom_.end_array();
    }
    bool parse_error(std::size_t position, const std::string& last_token,
                     const nlohmann::detail::exception& e) {
        return dom_.parse_error(position, last_token, e);
    }

  private:
    enum class mode { dom, vocab, merges, merge_pair };

    // A scalar in the DOM, or where the vocab or merges expect something else: an error there.
    template <class F>
    bool scalar(F&& to_dom) {
        if (skip_ > 0) {
            return true;
        }
        if (mode_ == mode::dom) {
            return to_dom();
        }
        invalid_here();
        return true;
    }
    void invalid_here() {
        if (mode_ == mode::vocab) {
            if (!doc_.bad_vocab) {
                doc_.bad_vocab = true;
                doc_.bad_vocab_key = key_;
            }
        } else {
            bad_merge(mode_ == mode::merge_pair ? "[...]" : "a non-string");
        }
    }
    void invalid_nested() {
        invalid_here();
        ++skip_;
    }
    void bad_merge(const std::string& text) {
        if (!doc_.bad_merges) {
            doc_.bad_merges = true;
            doc_.bad_merge = doc_.merges.size();
            doc_.bad_merge_text = text;
        }
        if (mode_ == mode::merge_pair) {
            pair_.clear();
        }
    }

    hf_document& doc_;
    nlohmann::detail::json_sax_dom_parser<json> dom_;
    mode mode_ = mode::dom;
    int depth_ = 0;
    std::size_t skip_ = 0;
    std::string key1_;
    std::string key2_;
    std::string key_;
    std::vector<std::string> pair_;
};


}  // namespace

void parse_hf_document(const std::string& text, hf_document& doc) {
    try {
        hf_reader reader(doc);
        json::sax_parse(text, &reader);
    } catch (const json::exception& e) {
        throw load_error{std::string("is not JSON: ") + e.what()};
    }
}

}  // namespace tokenmeter::tokenizer::loader
