// config/schema_checks: the range and form checks of single keys that the schema's tables name
// (config/schema.cpp): each reports through the checker with the key's path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/walk.hpp"

namespace tokenmeter::config::schema {

void check_host(checker& c, key_ref key, const endpoint& e);
void check_upstream(checker& c, key_ref key, const upstream_target& u);
void check_threads(checker& c, key_ref key, const std::uint32_t& n);
void check_json_depth(checker& c, key_ref key, const std::uint32_t& n);
void check_model_labels(checker& c, key_ref key, const model_label_settings& m);
void check_prompt_classes(checker& c, key_ref key, const std::vector<std::uint64_t>& bounds);
void check_rate(checker& c, key_ref key, const double& rate);
void check_ratio(checker& c, key_ref key, const double& ratio);
void check_segment_bytes(checker& c, key_ref key, const std::uint64_t& bytes);
void check_batch_size(checker& c, key_ref key, const std::uint32_t& n);
void check_reference(checker& c, key_ref key, const std::string& spec);
void check_model_tokenizer(checker& c, key_ref key, const std::string& spec);
void check_required_price(checker& c, key_ref key, const std::optional<std::int64_t>& micros);
void check_currency(checker& c, key_ref key, const std::string& code);
std::string special_tokens_complaint(const std::string& word);
void check_route_path(checker& c, key_ref key, const std::string& path);
void check_slo_entry(checker& c, key_ref key, const slo_target& t);

}  // namespace tokenmeter::config::schema
