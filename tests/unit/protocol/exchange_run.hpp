// One response through meter::exchange, for a dialect's tests: the request as read, the head at
// 1 ms, each read 10 ms after the one before, the end 10 ms after the last.
#pragma once

#include <chrono>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "meter/exchange.hpp"
#include "protocol/types.hpp"

namespace tokenmeter::protocol {

inline meter::request_summary run_exchange(api_kind api, const request_info& info,
                                           std::string_view content_type,
                                           std::initializer_list<std::string_view> reads) {
    static const std::vector<double> bounds = {0.01, 0.1};
    meter::exchange ex(api, info, core::time_point{}, &bounds, {});
    ex.on_request_sent();
    ex.on_response_head(200, content_type, core::time_point{} + std::chrono::milliseconds(1));
    int ms = 10;
    for (std::string_view bytes : reads) {
        ex.on_body(bytes, core::time_point{} + std::chrono::milliseconds(ms));
        ms += 10;
    }
    return ex.finish(meter::end_reason::upstream_complete,
                     core::time_point{} + std::chrono::milliseconds(ms));
}

}  // namespace tokenmeter::protocol
