// usage/cloudevents: usage records as a CloudEvents 1.0 JSON batch
// (application/cloudevents-batch+json), the shape OpenMeter's ingest API accepts. The event id
// is the record's idempotency id, so a sink that dedupes by id counts a re-sent batch once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "usage/record.hpp"

namespace tokenmeter::usage {

inline constexpr std::string_view cloudevents_type = "tokenmeter.usage.v1";
inline constexpr std::string_view cloudevents_batch_content_type =
    "application/cloudevents-batch+json";

std::string encode_cloudevents_batch(const std::vector<usage_record>& records,
                                     std::string_view source);

}  // namespace tokenmeter::usage
