// app/healthcheck_command: which address a probe uses for the admin listener's, and how it reads
// the status line.
#include <gtest/gtest.h>

#include "app/healthcheck_command.hpp"

namespace tokenmeter::app {
namespace {

TEST(Healthcheck, AnUnspecifiedAddressIsProbedOnTheLoopbackOfItsFamily) {
    EXPECT_EQ(probe_address({"0.0.0.0", 9090}), (config::endpoint{"127.0.0.1", 9090}));
    EXPECT_EQ(probe_address({"::", 9091}), (config::endpoint{"::1", 9091}));
    EXPECT_EQ(probe_address({"10.0.0.7", 9090}), (config::endpoint{"10.0.0.7", 9090}));
    EXPECT_EQ(probe_address({"localhost", 1}), (config::endpoint{"localhost", 1}));
}

TEST(Healthcheck, StatusLine) {
    EXPECT_EQ(response_status("HTTP/1.1 200 OK\r\n"), 200);
    EXPECT_EQ(response_status("HTTP/1.0 503 Service Unavailable\r\nx: y\r\n\r\n"), 503);
    EXPECT_EQ(response_status("HTTP/1.1 204\r\n"), 204);
    EXPECT_EQ(response_status("HTTP/1.1 200"), 200);
    EXPECT_EQ(response_status("HTTP/1.1 20"), std::nullopt);
    EXPECT_EQ(response_status("HTTP/1.1 2000 OK\r\n"), std::nullopt);
    EXPECT_EQ(response_status("HTTP/2 200 OK\r\n"), std::nullopt);
    EXPECT_EQ(response_status("SSH-2.0-OpenSSH\r\n"), std::nullopt);
    EXPECT_EQ(response_status(""), std::nullopt);
}

}  // namespace
}  // namespace tokenmeter::app
