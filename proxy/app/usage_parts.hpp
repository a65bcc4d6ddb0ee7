// app/usage_parts: the usage spool, its crash recovery and its shipper, set up at start-up and
// stopped at the end (usage.spool_dir empty: all off).
#pragma once

#include <cstdint>
#include <memory>

#include "config/config.hpp"
#include "observe/metering_observer.hpp"
#include "outbound/usage_shipper.hpp"
#include "usage/spool.hpp"

namespace tokenmeter::app {

struct usage_parts {
    std::unique_ptr<outbound::usage_shipper>
        shipper;  // before the spool: the spool's commits wake it
    std::unique_ptr<usage::spool_writer> spool;
    std::unique_ptr<observe::spool_sink> sink;
    std::uint64_t unacknowledged_at_start = 0;
    std::uint64_t quarantined_at_start = 0;  // lines the recovery scan set aside

    // The last commit, then the shipper. Sessions destroyed after this write synchronously.
    void stop();
};

// Opens the spool, turns every stream a killed process left open into a record, and starts the
// shipper. Throws std::runtime_error with a message for the operator when the spool cannot open.
usage_parts open_usage(const config::usage_settings& settings);

}  // namespace tokenmeter::app
