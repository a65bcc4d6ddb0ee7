#include "usage/cloudevents.hpp"

#include <nlohmann/json.hpp>

namespace tokenmeter::usage {

std::string encode_cloudevents_batch(const std::vector<usage_record>& records,
                                     std::string_view source) {
    using json = nlohmann::ordered_json;
    json batch = json::array();
    for (const auto& r : records) {
        json event;
        event["specversion"] = "1.0";
        event["type"] = cloudevents_type;
        event["id"] = r.id;
        event["source"] = source;
        event["subject"] = r.tenant;
        event["time"] = format_time(r.end_unix_ms);
        event["datacontenttype"] = "application/json";
        json data = json::parse(encode_record_fields(r), nullptr, false);
        data["v"] = record_version;
        event["data"] = std::move(data);
        batch.push_back(std::move(event));
    }
    return batch.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace tokenmeter::usage
