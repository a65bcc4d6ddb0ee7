// Local answers: one table from failure to status, code and closing; upstream errors classified.
#include "relay/local_failure.hpp"

#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/error.hpp>
#include <nlohmann/json.hpp>

#include "relay/upstream_pool.hpp"

namespace tokenmeter::relay {
namespace {

TEST(LocalFailure, EachFailureHasItsAnswer) {
    EXPECT_EQ(answer_for(local_failure::header_too_large).status,
              bhttp::status::request_header_fields_too_large);
    EXPECT_EQ(answer_for(local_failure::rate_limited).status, bhttp::status::too_many_requests);
    EXPECT_FALSE(answer_for(local_failure::rate_limited).close);
    EXPECT_EQ(answer_for(local_failure::rate_limited).result, observe::outcome::rejected);
    EXPECT_EQ(answer_for(local_failure::upstream_timeout).status, bhttp::status::gateway_timeout);
    EXPECT_TRUE(answer_for(local_failure::upstream_timeout).close);
    EXPECT_EQ(answer_for(local_failure::pool_exhausted).code, "upstream_pool_exhausted");
    EXPECT_EQ(answer_for(local_failure::internal_error).status,
              bhttp::status::internal_server_error);
    // The body was read whole: the connection can carry the next request.
    EXPECT_EQ(answer_for(local_failure::unparsable_body).status, bhttp::status::bad_request);
    EXPECT_EQ(answer_for(local_failure::unparsable_body).code, "unparsable_body");
    EXPECT_FALSE(answer_for(local_failure::unparsable_body).close);
    EXPECT_EQ(answer_for(local_failure::unparsable_body).result, observe::outcome::rejected);
    EXPECT_EQ(answer_for(local_failure::model_required).status, bhttp::status::bad_request);
    EXPECT_EQ(answer_for(local_failure::model_required).code, "model_required");
    EXPECT_FALSE(answer_for(local_failure::model_required).close);
    EXPECT_EQ(answer_for(local_failure::model_required).result, observe::outcome::rejected);
}

TEST(LocalFailure, UpstreamErrorsGetTheirMetricLabelAndAnswer) {
    auto refused =
        classify_upstream_error(asio::error::connection_refused, upstream_stage::connect);
    EXPECT_EQ(refused.reason, "connect_refused");
    EXPECT_EQ(refused.failure, local_failure::upstream_unreachable);

    auto connect_timeout = classify_upstream_error(beast::error::timeout, upstream_stage::connect);
    EXPECT_EQ(connect_timeout.reason, "connect_timeout");
    EXPECT_EQ(connect_timeout.failure, local_failure::upstream_unreachable);

    auto head_timeout =
        classify_upstream_error(beast::error::timeout, upstream_stage::response_header);
    EXPECT_EQ(head_timeout.reason, "timeout");
    EXPECT_EQ(head_timeout.failure, local_failure::upstream_timeout);

    auto exhausted =
        classify_upstream_error(make_error_code(pool_errc::exhausted), upstream_stage::connect);
    EXPECT_EQ(exhausted.reason, "pool_exhausted");
    EXPECT_EQ(exhausted.failure, local_failure::pool_exhausted);

    auto closed =
        classify_upstream_error(bhttp::error::end_of_stream, upstream_stage::response_header);
    EXPECT_EQ(closed.reason, "connection_closed");
    EXPECT_EQ(closed.failure, local_failure::upstream_closed);

    auto garbage =
        classify_upstream_error(bhttp::error::bad_version, upstream_stage::response_header);
    EXPECT_EQ(garbage.reason, "bad_response");
    EXPECT_EQ(garbage.failure, local_failure::upstream_bad_response);
    EXPECT_NE(garbage.message.find("not valid HTTP/1.1"), std::string::npos);
}

// tokenmeter_upstream_errors_total starts each reason at 0: the list holds every one given.
TEST(LocalFailure, EveryUpstreamReasonIsListed) {
    const error_code codes[] = {
        asio::error::connection_refused,
        beast::error::timeout,
        make_error_code(pool_errc::exhausted),
        bhttp::error::end_of_stream,
        bhttp::error::bad_version,
        asio::error::host_not_found,
        asio::error::connection_reset,
        asio::error::network_unreachable,
        asio::ssl::error::make_error_code(asio::ssl::error::stream_truncated)};
    for (const auto stage :
         {upstream_stage::connect, upstream_stage::write, upstream_stage::response_header}) {
        for (const error_code& ec : codes) {
            const std::string_view reason = classify_upstream_error(ec, stage).reason;
            EXPECT_NE(
                std::find(upstream_error_reasons.begin(), upstream_error_reasons.end(), reason),
                upstream_error_reasons.end())
                << reason;
        }
    }
}

TEST(LocalFailure, UpstreamTlsFailuresAreTheirOwnReason) {
    const error_code verify(
        static_cast<int>(ERR_PACK(ERR_LIB_SSL, 0, SSL_R_CERTIFICATE_VERIFY_FAILED)),
        asio::error::get_ssl_category());
    auto failed = classify_upstream_error(verify, upstream_stage::connect,
                                          "certificate verify failed: certificate has expired");
    EXPECT_EQ(failed.reason, "tls");
    EXPECT_EQ(failed.failure, local_failure::upstream_tls);
    EXPECT_EQ(failed.message,
              "TLS with the upstream failed: certificate verify failed: certificate has expired");
    EXPECT_EQ(answer_for(local_failure::upstream_tls).status, bhttp::status::bad_gateway);
    EXPECT_EQ(answer_for(local_failure::upstream_tls).code, "upstream_tls_failed");

    // A server that hangs up mid-handshake, and an alert after it (a refused client certificate
    // under TLS 1.3 arrives with the response read).
    auto truncated = classify_upstream_error(asio::ssl::error::stream_truncated,
                                             upstream_stage::response_header);
    EXPECT_EQ(truncated.reason, "tls");
    EXPECT_NE(truncated.message.find("stream truncated"), std::string::npos);
}

TEST(LocalFailure, ErrorBodyIsJson) {
    auto body = nlohmann::json::parse(net::error_body("bad_request", "quote \" and\nnewline"));
    EXPECT_EQ(body["error"]["type"], "tokenmeter_error");
    EXPECT_EQ(body["error"]["code"], "bad_request");
    EXPECT_EQ(body["error"]["message"], "quote \" and\nnewline");
}

}  // namespace
}  // namespace tokenmeter::relay
