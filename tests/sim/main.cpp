// tokenmeter-sim: a deterministic OpenAI-compatible model server for tests, the demo and
// benchmarks. argv → options → listener → io threads; SIGINT/SIGTERM end it with status 0.

#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/signal_set.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sim_listener.hpp"
#include "sim_options.hpp"
#include "sim_server.hpp"

namespace {

namespace net = boost::asio;
namespace sim = tokenmeter::sim;

// Thousands of concurrent streams need thousands of descriptors; the soft limit is often 1024.
void raise_descriptor_limit() {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

// Written to a temporary name and renamed, so a reader polling for the file never sees
// a partial port number.
void write_port_file(const std::string& path, unsigned short port) {
    const std::string temporary = path + ".tmp." + std::to_string(getpid());
    {
        std::ofstream out(temporary, std::ios::trunc);
        out << port << '\n';
        out.flush();
        if (!out) {
            throw std::runtime_error("cannot write " + temporary);
        }
    }
    std::filesystem::rename(temporary, path);
}

std::string endpoint_text(const net::ip::tcp::endpoint& endpoint) {
    const auto address = endpoint.address();
    std::string host = address.to_string();
    if (address.is_v6()) {
        host = "[" + host + "]";
    }
    return host + ":" + std::to_string(endpoint.port());
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed =
        sim::parse_command_line(std::span<char* const>(argv, static_cast<std::size_t>(argc)));
    if (parsed.help) {
        std::cout << sim::usage_text();
        return 0;
    }
    if (!parsed.options) {
        std::cerr << "tokenmeter-sim: " << parsed.error << '\n' << sim::usage_text();
        return 2;
    }
    try {
        raise_descriptor_limit();
        auto state = std::make_shared<sim::server_state>(std::move(*parsed.options));
        const auto& options = state->options;
        net::io_context io{static_cast<int>(options.threads)};

        const net::ip::tcp::endpoint endpoint{net::ip::make_address(options.listen_host),
                                              options.listen_port};
        auto listener = std::make_shared<sim::sim_listener>(io, endpoint, state);
        const auto bound = listener->local_endpoint();

        net::signal_set signals{io, SIGINT, SIGTERM};
        signals.async_wait([&io, listener](const boost::system::error_code&, int) {
            listener->stop();
            io.stop();
        });
        listener->run();

        if (!options.port_file.empty()) {
            write_port_file(options.port_file, bound.port());
        }
        std::cout << "listening on " << endpoint_text(bound) << std::endl;

        std::vector<std::thread> workers;
        for (unsigned i = 1; i < options.threads; ++i) {
            workers.emplace_back([&io] { io.run(); });
        }
        io.run();
        for (auto& worker : workers) {
            worker.join();
        }
    } catch (const std::exception& error) {
        std::cerr << "tokenmeter-sim: " << error.what() << '\n';
        return 1;
    }
    return 0;
}
