// tokenmeter-faults: the proxy with a failure injected into metering, for the integration test
// metering_faults. TOKENMETER_FAULT_PHASE names the phase that throws on every request (begin,
// admission, request_sent, answered_locally, response_head, body, seal, end, unforwarded,
// upstream_error); the flags are the proxy's own. Built only with the tests: the tokenmeter binary has no such switch.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/app.hpp"
#include "app/command_line.hpp"
#include "throwing_observer.hpp"

namespace {

std::optional<tokenmeter::observe::metering_phase> phase_named(std::string_view name) {
    using tokenmeter::observe::metering_phase;
    for (std::size_t i = 0; i < tokenmeter::observe::metering_phase_count; ++i) {
        const auto phase = static_cast<metering_phase>(i);
        if (tokenmeter::observe::to_string(phase) == name) {
            return phase;
        }
    }
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace tokenmeter;
    const char* name = std::getenv("TOKENMETER_FAULT_PHASE");
    const auto phase = phase_named(name != nullptr ? name : "");
    if (!phase) {
        std::fprintf(stderr, "tokenmeter-faults: set TOKENMETER_FAULT_PHASE to a phase\n");
        return 2;
    }
    const app::parsed_command_line parsed =
        app::parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed.value) {
        std::fprintf(stderr, "tokenmeter-faults: %s\n", parsed.error.c_str());
        return 2;
    }
    config::load_result loaded = app::build_settings(*parsed.value);
    if (!loaded.ok()) {
        app::print_errors(loaded.errors, "tokenmeter-faults");
        return 1;
    }
    return app::run(loaded.value, {}, [phase = *phase](observe::observer& metering) {
        return std::make_unique<faults::throwing_observer>(metering, phase);
    });
}
