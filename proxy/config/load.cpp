// config/load: YAML text or a file → settings, through the schema tables, then validate().
// yaml-cpp's exceptions never leave load_yaml; every problem becomes a config_error.
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <system_error>

#include "config/config.hpp"
#include "config/walk.hpp"

namespace tokenmeter::config {

settings default_settings() {
    return settings{};
}

std::string to_string(const config_error& e) {
    if (e.key.empty()) {
        return e.message;
    }
    return e.key + ": " + e.message;
}

namespace {

std::string describe_yaml_exception(const YAML::Exception& e) {
    if (e.mark.is_null()) {
        return "invalid YAML: " + e.msg;
    }
    // yaml-cpp counts from 0; editors count from 1.
    return "invalid YAML at line " + std::to_string(e.mark.line + 1) + ", column " +
           std::to_string(e.mark.column + 1) + ": " + e.msg;
}

}  // namespace

load_result load_yaml(const std::string& yaml_text) {
    load_result result{default_settings(), {}};
    unknown_words words;
    try {
        const std::vector<YAML::Node> documents = YAML::LoadAll(yaml_text);
        if (documents.size() > 1) {
            result.errors.push_back(config_error{"", "expected one YAML document, found " +
                                                         std::to_string(documents.size()) +
                                                         " (remove the extra '---')"});
            return result;
        }
        if (!documents.empty()) {
            const YAML::Node& root = documents.front();
            if (!root.IsNull() && !root.IsMap()) {
                result.errors.push_back(
                    config_error{"", "expected a mapping of settings at the top level, got " +
                                         schema::describe(root)});
                return result;
            }
            schema::walker w(result.errors, words);
            schema::read_section(w, root, "", schema::root(), result.value);
        }
    } catch (const YAML::Exception& e) {
        // A syntax error means nothing after it was read: report it alone, with its position.
        result.value = default_settings();
        result.errors.assign({config_error{"", describe_yaml_exception(e)}});
        return result;
    } catch (const std::exception& e) {
        result.errors.push_back(config_error{"", std::string("cannot load: ") + e.what()});
        return result;
    }
    std::vector<config_error> semantic = validate(result.value, words);
    result.errors.insert(result.errors.end(), std::make_move_iterator(semantic.begin()),
                         std::make_move_iterator(semantic.end()));
    return result;
}

load_result load_file(const std::string& path) {
    const auto unreadable = [&](const std::string& why) {
        load_result result{default_settings(), {}};
        result.errors.push_back(config_error{"", "cannot read " + path + ": " + why});
        return result;
    };
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return unreadable("it is a directory");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return unreadable(std::generic_category().message(errno));
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
        return unreadable(std::generic_category().message(errno));
    }
    return load_yaml(text.str());
}

}  // namespace tokenmeter::config
