// SIGHUP reloads: which changes apply in place and which wait for a restart.
#include "config/reload.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::config {
namespace {

TEST(Reload, NothingChangedIsEmpty) {
    const settings a = default_settings();
    const auto diff = diff_for_reload(a, a);
    EXPECT_TRUE(diff.applied.empty());
    EXPECT_TRUE(diff.needs_restart.empty());
}

TEST(Reload, LogLevelTenantNamesAndSloApplyInPlace) {
    const settings running = default_settings();
    settings next = running;
    next.log.level = log_level::debug;
    next.tenants.api_key_names["key:00"] = "acme";
    next.slo.default_target =
        slo_target{slo_preset::none, milliseconds{500}, std::nullopt, std::nullopt, std::nullopt};
    const auto diff = diff_for_reload(running, next);
    EXPECT_EQ(diff.applied,
              (std::vector<std::string>{"log.level", "tenants.api_key_names", "slo"}));
    EXPECT_TRUE(diff.needs_restart.empty());
    const settings after = apply_reloadable(running, next);
    EXPECT_EQ(after, next);
}

TEST(Reload, EverythingElseWaitsForARestart) {
    const settings running = default_settings();
    settings next = running;
    next.listen.port = 1;
    next.upstream.port = 2;
    next.limits.max_json_depth = 64;
    next.tenants.header = "x-other";
    next.tasks.allowed = {"fix"};
    next.log.level = log_level::warn;
    const auto diff = diff_for_reload(running, next);
    EXPECT_EQ(diff.applied, (std::vector<std::string>{"log.level"}));
    EXPECT_EQ(diff.needs_restart,
              (std::vector<std::string>{"listen", "upstream", "limits", "tenants", "tasks"}));
    const settings after = apply_reloadable(running, next);
    EXPECT_EQ(after.listen, running.listen) << "kept as running";
    EXPECT_EQ(after.log.level, log_level::warn);
}

// SIGHUP reads the files named in tls and admin_tls again; naming other files waits.
TEST(Reload, TlsSectionsWaitForARestart) {
    const settings running = default_settings();
    settings next = running;
    next.tls.cert_file = "/other/tls.crt";
    next.admin_tls.client_auth = tls_client_auth::require;
    const auto diff = diff_for_reload(running, next);
    EXPECT_TRUE(diff.applied.empty());
    EXPECT_EQ(diff.needs_restart, (std::vector<std::string>{"tls", "admin_tls"}));
    EXPECT_EQ(apply_reloadable(running, next), running);
}

}  // namespace
}  // namespace tokenmeter::config
