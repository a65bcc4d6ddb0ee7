// The relay end to end inside one process: client_connection and its upstream_exchange on a
// worker-like io_context, between a test client and a test upstream on loopback sockets. Each
// test plays the upstream step by step and asserts what crosses the sockets and what the
// observer is told, so the tests hold whatever shape the relay's classes take.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "relay_harness.hpp"

namespace tokenmeter::relay::testing {
namespace {

using calls = std::vector<std::string>;
using namespace std::chrono_literals;

const std::string stream_request =
    post("/v1/chat/completions",
         R"({"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]})");
const std::string json_request =
    post("/v1/chat/completions", R"({"model":"m","messages":[{"role":"user","content":"hi"}]})");

const std::string sse_head =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
const std::vector<std::string> events = {
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n",
    "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n",
    "data: [DONE]\n\n",
};
const std::string usage_event =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n";
const std::string json_answer = R"({"choices":[{"message":{"content":"Hello"}}]})";

std::string json_response(std::string_view body) {
    return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

// The client reads a whole Content-Length response; its body.
std::optional<std::string> read_sized_response(wire& client, int status = 200) {
    auto head = client.read_until("\r\n\r\n");
    if (!head) {
        return std::nullopt;
    }
    EXPECT_EQ(status_of(*head), status) << *head;
    EXPECT_EQ(field(*head, "transfer-encoding"), "") << *head;
    const std::string length = field(*head, "content-length");
    EXPECT_FALSE(length.empty()) << *head;
    return client.read_exact(length.empty() ? 0 : std::stoul(length));
}

// The client sends `request`; the upstream connection it arrives on (accepted, request read).
wire forwarded(relay_rig& rig, wire& client, const std::string& request) {
    client.send(request);
    wire upstream = rig.upstream.accept();
    EXPECT_TRUE(read_request(upstream)) << "the request reaches the upstream";
    return upstream;
}

// A stream under way: the client has the head and the first event; the upstream says no more.
wire stream_begun(relay_rig& rig, wire& client) {
    wire upstream = forwarded(rig, client, stream_request);
    upstream.send(sse_head + chunk(events[0]));
    EXPECT_TRUE(client.read_until("\r\n\r\n"));
    EXPECT_EQ(read_chunked(client, events[0].size()), events[0]);
    return upstream;
}

const calls served_json = {"request_sent", "response_head 200 application/json", "body",
                           "end upstream_complete"};
const calls streamed_then = {"request_sent", "response_head 200 text/event-stream", "body"};
calls streamed_and(std::string last) {
    calls all = streamed_then;
    all.push_back(std::move(last));
    return all;
}

// ---- streaming and keep-alive ---------------------------------------------------------------

TEST(RelayPlanning, ALargeMeteredBodyIsPlannedOffTheWorkerAndGoesOnAsASmallOneDoes) {
    core::job_thread planner(16, std::size_t{64} << 20);
    relay_rig rig;
    rig.plan_on(planner);
    const std::string prompt(200 * 1024, 'w');
    const std::string large = post(
        "/v1/chat/completions",
        R"({"model":"m","stream":true,"messages":[{"role":"user","content":")" + prompt + "\"}]}");
    wire client = rig.client();
    wire upstream = forwarded(rig, client, large);
    // The planner counts a job once it has returned, which may be just after the request left.
    const auto until = after(std::chrono::milliseconds(2000));
    while (planner.run_total() == 0 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(planner.run_total(), 1U) << "planned on the planner";
    upstream.send(sse_head + chunk(events[0]) + chunk(events[2]) + "0\r\n\r\n");
    ASSERT_TRUE(client.read_until("\r\n\r\n"));
    EXPECT_EQ(read_chunked(client, events[0].size() + events[2].size()), events[0] + events[2]);
    EXPECT_TRUE(read_final_chunk(client));

    // The next request on the same connection is small: planned where it was read.
    client.send(json_request);
    auto sent = read_request(upstream);
    ASSERT_TRUE(sent);
    upstream.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(client), json_answer);
    EXPECT_EQ(planner.run_total(), 1U);

    const auto first = rig.log.ended(0);
    EXPECT_EQ(first.model, "m");
    EXPECT_EQ(first.calls, streamed_and("end upstream_complete"));
    EXPECT_EQ(rig.log.ended(1).calls, served_json);
}

TEST(RelayPlanning, TheLargeBodyReachesTheUpstreamWithUsageInjected) {
    core::job_thread planner(16, std::size_t{64} << 20);
    relay_rig rig;
    rig.plan_on(planner);
    const std::string prompt(100 * 1024, 'w');
    wire client = rig.client();
    client.send(post(
        "/v1/chat/completions",
        R"({"model":"m","stream":true,"messages":[{"role":"user","content":")" + prompt + "\"}]}"));
    wire upstream = rig.upstream.accept();
    auto sent = read_request(upstream);
    ASSERT_TRUE(sent);
    EXPECT_NE(sent->find("include_usage"), std::string::npos) << "usage is injected";
    EXPECT_NE(sent->find(prompt), std::string::npos) << "the prompt as the client sent it";
    upstream.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(client), json_answer);
}

TEST(RelayStream, ChunksReachTheClientOneByOneThenTheFinalChunk) {
    relay_rig rig;
    wire client = rig.client();
    client.send(stream_request);
    wire upstream = rig.upstream.accept();
    auto sent = read_request(upstream);
    ASSERT_TRUE(sent);
    EXPECT_NE(sent->find("include_usage"), std::string::npos) << "usage is injected";

    upstream.send(sse_head + chunk(events[0]));
    auto head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(head);
    EXPECT_EQ(status_of(*head), 200);
    EXPECT_EQ(field(*head, "content-type"), "text/event-stream");
    EXPECT_EQ(field(*head, "transfer-encoding"), "chunked");
    // Each event reaches the client before the upstream sends the next one.
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (i > 0) {
            upstream.send(chunk(events[i]));
        }
        bool finished = true;
        EXPECT_EQ(read_chunked(client, events[i].size(), &finished), events[i]) << "event " << i;
        EXPECT_FALSE(finished);
    }
    EXPECT_TRUE(client.quiet_for(50ms)) << "no final chunk before the upstream's";
    upstream.send("0\r\n\r\n");
    EXPECT_TRUE(read_final_chunk(client));

    const auto log = rig.log.ended(0);
    EXPECT_EQ(log.calls, streamed_and("end upstream_complete"));
    EXPECT_EQ(log.body, events[0] + events[1] + events[2]);
    EXPECT_EQ(log.model, "m");
    EXPECT_EQ(log.target, "/v1/chat/completions");
}

TEST(RelayKeepAlive, SecondResponseOnTheSameConnectionsHasItsOwnFraming) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = forwarded(rig, client, stream_request);
    // The usage-only event the proxy asked for is taken out of the client's stream.
    upstream.send(sse_head + chunk(events[0]) + chunk(usage_event) + chunk(events[2]) +
                  "0\r\n\r\n");
    auto head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(head);
    EXPECT_EQ(field(*head, "transfer-encoding"), "chunked");
    bool finished = false;
    EXPECT_EQ(read_chunked(client, std::string::npos, &finished), events[0] + events[2]);
    EXPECT_TRUE(finished);
    EXPECT_TRUE(rig.log.ended(0).ended);

    // The second request goes over the same upstream connection: it arrives on `upstream`.
    client.send(json_request);
    auto second = read_request(upstream);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->find("include_usage"), std::string::npos);
    upstream.send(json_response(json_answer));
    auto second_head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(second_head);
    EXPECT_EQ(field(*second_head, "content-length"), std::to_string(json_answer.size()));
    EXPECT_EQ(field(*second_head, "transfer-encoding"), "");
    EXPECT_EQ(field(*second_head, "content-type"), "application/json");
    EXPECT_EQ(client.read_exact(json_answer.size()), json_answer);
    EXPECT_TRUE(client.quiet_for(50ms)) << "nothing follows the Content-Length body";
    EXPECT_FALSE(rig.upstream.has_pending()) << "one upstream connection for both";

    const auto first = rig.log.ended(0);
    EXPECT_EQ(first.calls, streamed_and("end upstream_complete"));
    EXPECT_EQ(first.body, events[0] + usage_event + events[2]) << "the observer sees every byte";
    const auto second_log = rig.log.ended(1);
    EXPECT_EQ(second_log.calls, served_json);
    EXPECT_EQ(second_log.body, json_answer);
    EXPECT_EQ(rig.log.exchange_count(), 2u);
}

// ---- retry on a fresh connection ------------------------------------------------------------

// The first request, served on a fresh upstream connection the pool then keeps idle.
wire first_exchange(relay_rig& rig, wire& client) {
    wire upstream = forwarded(rig, client, json_request);
    upstream.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(client), json_answer);
    EXPECT_TRUE(rig.log.ended(0).ended);
    return upstream;
}

TEST(RelayRetry, IdleConnectionTheUpstreamClosedIsReplacedByAFreshOne) {
    relay_rig rig;
    wire client = rig.client();
    wire first = first_exchange(rig, client);
    first.close();  // while the connection waits idle in the pool
    wire second = forwarded(rig, client, json_request);
    second.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(client), json_answer);
    EXPECT_EQ(rig.log.ended(1).calls, served_json);
    EXPECT_TRUE(rig.log.upstream_errors_seen().empty());
}

TEST(RelayRetry, ReusedConnectionClosedWithoutAnAnswerIsRetriedOnceOnAFreshOne) {
    relay_rig rig;
    wire client = rig.client();
    wire first = first_exchange(rig, client);
    client.send(json_request);
    auto on_reused = read_request(first);  // the pooled connection carries it
    ASSERT_TRUE(on_reused);
    first.close();  // a server closing an idle connection just as the request came
    wire second = rig.upstream.accept();
    EXPECT_EQ(read_request(second), on_reused) << "the same request, again";
    second.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(client), json_answer);
    EXPECT_EQ(rig.log.ended(1).calls, served_json) << "request_sent once";
    EXPECT_TRUE(rig.log.upstream_errors_seen().empty());
    EXPECT_FALSE(rig.upstream.has_pending());
}

// ---- interim responses ----------------------------------------------------------------------

const std::string interims =
    "HTTP/1.1 100 Continue\r\n\r\n"
    "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n";

TEST(RelayInterim, Http11ClientGetsEachInterimThenTheFinalResponse) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = forwarded(rig, client, json_request);
    upstream.send(interims + json_response(json_answer));
    auto continue_head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(continue_head);
    EXPECT_EQ(continue_head->substr(0, 12), "HTTP/1.1 100");
    auto hints_head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(hints_head);
    EXPECT_EQ(hints_head->substr(0, 12), "HTTP/1.1 103");
    EXPECT_EQ(field(*hints_head, "link"), "</style.css>; rel=preload");
    EXPECT_EQ(read_sized_response(client), json_answer);
    EXPECT_EQ(rig.log.ended(0).calls, served_json) << "one response head: the final one";
}

TEST(RelayInterim, Http10ClientGetsOnlyTheFinalResponse) {
    relay_rig rig;
    wire client = rig.client();
    client.send(post("/v1/chat/completions", R"({"model":"m","messages":[]})", 10));
    wire upstream = rig.upstream.accept();
    ASSERT_TRUE(read_request(upstream));
    upstream.send(interims + json_response(json_answer));
    auto head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->substr(0, 12), "HTTP/1.0 200") << *head;
    EXPECT_EQ(client.read_exact(json_answer.size()), json_answer);
    EXPECT_TRUE(client.closed_by_peer()) << "an HTTP/1.0 client without keep-alive";
    EXPECT_EQ(client.buffered(), "");
    EXPECT_EQ(rig.log.ended(0).calls, served_json);
}

// ---- the client hangs up --------------------------------------------------------------------

TEST(RelayClientGone, WhileWaitingForAPooledConnection) {
    relay_rig rig([](session_settings&, upstream_pool_settings& pool) {
        pool.max_connections = 1;
        pool.acquire_timeout = 1000ms;
    });
    wire busy = rig.client();
    wire upstream = forwarded(rig, busy, json_request);
    wire waiting = rig.client();
    waiting.send(json_request);
    // begin is called in the same turn that queues the request for a connection.
    ASSERT_TRUE(rig.log.wait_exchanges(2));
    waiting.close();
    EXPECT_EQ(rig.log.ended(1).calls, calls{"end client_cancel"});
    EXPECT_TRUE(rig.log.upstream_errors_seen().empty());
    EXPECT_FALSE(rig.upstream.has_pending()) << "no connection opened for it";
    upstream.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(busy), json_answer);
    EXPECT_EQ(rig.log.ended(0).calls, served_json);
}

TEST(RelayClientGone, WhileConnecting) {
    listener full(0);
    wire filler = wire::connect_to(full.port());
    relay_rig rig([&full](session_settings&, upstream_pool_settings& pool) {
        pool.port = std::to_string(full.port());
        pool.connect_timeout = 500ms;
    });
    wire client = rig.client();
    client.send(json_request);
    ASSERT_TRUE(rig.log.wait_exchanges(1));
    client.close();
    // Noticed when the connect gives up (connect_timeout), not at the hang-up.
    EXPECT_EQ(rig.log.ended(0).calls, calls{"end client_cancel"});
    EXPECT_TRUE(rig.log.upstream_errors_seen().empty());
}

TEST(RelayClientGone, WhileWaitingForTheResponseHead) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = forwarded(rig, client, json_request);
    client.close();
    EXPECT_TRUE(upstream.closed_by_peer()) << "the proxy closes the upstream connection";
    EXPECT_EQ(rig.log.ended(0).calls, (calls{"request_sent", "end client_cancel"}));
}

TEST(RelayClientGone, WhileTheBodyStreams) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = stream_begun(rig, client);
    client.close();
    EXPECT_TRUE(upstream.closed_by_peer()) << "the proxy closes the upstream connection";
    EXPECT_EQ(rig.log.ended(0).calls, streamed_and("end client_cancel"));
}

// The relay counts an end written to a client that had hung up as complete: the write to a
// closed peer succeeds, and the sealed record stands.
TEST(RelayClientGone, WhileTheEndIsHeldTheResponseStillEndsAsWritten) {
    relay_rig rig;
    rig.log.hold_end = true;
    rig.log.hold_seal = true;
    wire client = rig.client();
    wire upstream = stream_begun(rig, client);
    upstream.send(chunk(events[1]) + "0\r\n\r\n");
    ASSERT_TRUE(rig.log.wait_call(0, "seal"));
    EXPECT_FALSE(client.closed_by_peer(after(100ms)));  // reads what came before the hold
    client.close();
    rig.log.sink.make_all_durable();
    EXPECT_EQ(rig.log.ended(0).calls, (calls{"request_sent", "response_head 200 text/event-stream",
                                             "body", "seal", "end upstream_complete"}));
}

// ---- upstream failures ----------------------------------------------------------------------

// The client's 502 with its JSON code; the connection stays open for the next request.
void expect_bad_gateway(wire& client, std::string_view code) {
    auto head = client.read_until("\r\n\r\n");
    ASSERT_TRUE(head);
    EXPECT_EQ(status_of(*head), 502) << *head;
    EXPECT_EQ(field(*head, "content-type"), "application/json");
    const std::string length = field(*head, "content-length");
    ASSERT_FALSE(length.empty());
    auto body = client.read_exact(std::stoul(length));
    ASSERT_TRUE(body);
    EXPECT_NE(body->find("\"" + std::string(code) + "\""), std::string::npos) << *body;
}

calls answered_502(std::string code, bool sent) {
    calls expected = {"answered_locally " + code, "response_head 502 application/json (no body)",
                      "end upstream_failed"};
    if (sent) {
        expected.insert(expected.begin(), "request_sent");
    }
    return expected;
}

TEST(RelayUpstreamFails, ConnectRefused) {
    relay_rig rig;
    rig.upstream.close();
    wire client = rig.client();
    client.send(json_request);
    expect_bad_gateway(client, "upstream_unreachable");
    EXPECT_EQ(rig.log.ended(0).calls, answered_502("upstream_unreachable", false));
    EXPECT_EQ(rig.log.upstream_errors_seen(), calls{"connect_refused"});
}

TEST(RelayUpstreamFails, FreshConnectionClosedBeforeAnyHeadIsNotRetried) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = forwarded(rig, client, json_request);
    upstream.close();
    expect_bad_gateway(client, "upstream_closed");
    EXPECT_EQ(rig.log.ended(0).calls, answered_502("upstream_closed", true));
    EXPECT_EQ(rig.log.upstream_errors_seen(), calls{"connection_closed"});
    EXPECT_FALSE(rig.upstream.has_pending());
    // The connection carries the next request.
    client.send(json_request);
    wire next = rig.upstream.accept();
    ASSERT_TRUE(read_request(next));
    next.send(json_response(json_answer));
    EXPECT_EQ(read_sized_response(client), json_answer);
}

TEST(RelayUpstreamFails, MalformedHead) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = forwarded(rig, client, json_request);
    upstream.send("HTTP/1.1 two hundred OK\r\nContent-Length: 2\r\n\r\n{}");
    expect_bad_gateway(client, "upstream_bad_response");
    EXPECT_TRUE(upstream.closed_by_peer()) << "not reused";
    EXPECT_EQ(rig.log.ended(0).calls, answered_502("upstream_bad_response", true));
    EXPECT_EQ(rig.log.upstream_errors_seen(), calls{"bad_response"});
}

// A stream that began and was cut: the client gets no final chunk, only the close.
void expect_cut_after_first_event(wire& client) {
    EXPECT_TRUE(client.closed_by_peer());
    EXPECT_EQ(client.buffered(), "") << "no final chunk";
}

TEST(RelayUpstreamFails, CutMidBody) {
    relay_rig rig;
    wire client = rig.client();
    wire upstream = stream_begun(rig, client);
    upstream.close();
    expect_cut_after_first_event(client);
    const auto log = rig.log.ended(0);
    EXPECT_EQ(log.calls, (calls{"request_sent", "response_head 200 text/event-stream", "body",
                                "end upstream_truncated"}));
    EXPECT_EQ(log.body, events[0]);
    EXPECT_EQ(rig.log.upstream_errors_seen(), calls{"truncated"});
}

TEST(RelayUpstreamFails, IdleTimeoutMidBody) {
    relay_rig rig([](session_settings& settings, upstream_pool_settings&) {
        settings.upstream_idle = 300ms;
    });
    wire client = rig.client();
    wire upstream = stream_begun(rig, client);
    // The upstream sends nothing more.
    expect_cut_after_first_event(client);
    EXPECT_TRUE(upstream.closed_by_peer());
    EXPECT_EQ(rig.log.ended(0).calls, streamed_and("end upstream_failed"));
    EXPECT_EQ(rig.log.upstream_errors_seen(), calls{"idle_timeout"});
}

// ---- the observer's waits -------------------------------------------------------------------

TEST(RelayHeldWait, EndOfTheResponseWaitsForTheSeal) {
    relay_rig rig;
    rig.log.hold_end = true;
    rig.log.hold_seal = true;
    wire client = rig.client();
    wire upstream = stream_begun(rig, client);
    upstream.send(chunk(events[1]) + chunk(events[2]) + "0\r\n\r\n");
    ASSERT_TRUE(rig.log.wait_call(0, "seal"));
    EXPECT_FALSE(client.closed_by_peer(after(150ms)));
    EXPECT_EQ(client.buffered().find("0\r\n\r\n"), std::string::npos) << "final chunk while held";
    EXPECT_FALSE(rig.log.snapshot(0).ended);
    rig.log.sink.make_all_durable();
    bool finished = false;
    EXPECT_EQ(read_chunked(client, std::string::npos, &finished), events[1] + events[2]);
    EXPECT_TRUE(finished);
    EXPECT_EQ(rig.log.ended(0).calls, (calls{"request_sent", "response_head 200 text/event-stream",
                                             "body", "seal", "end upstream_complete"}));
}

TEST(RelayHeldWait, ResponseHeadWaitsForTheOpenEntry) {
    relay_rig rig;
    rig.log.hold_head = true;
    wire client = rig.client();
    wire upstream = forwarded(rig, client, json_request);
    upstream.send(json_response(json_answer));
    ASSERT_TRUE(rig.log.wait_call(0, "response_head 200 application/json"));
    EXPECT_TRUE(client.quiet_for(150ms)) << "no byte before the open entry is durable";
    rig.log.sink.make_all_durable();
    EXPECT_EQ(read_sized_response(client), json_answer);
    EXPECT_EQ(rig.log.ended(0).calls, served_json);
}

}  // namespace
}  // namespace tokenmeter::relay::testing
