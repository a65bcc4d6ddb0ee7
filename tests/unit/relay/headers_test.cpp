// Intermediary header rules: classification, hop-by-hop removal, ambiguous framing.
#include "relay/headers.hpp"

#include <gtest/gtest.h>

#include "net/beast.hpp"

namespace tokenmeter::relay {
namespace {

TEST(Classify, MeteredPathsNeedPost) {
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/chat/completions"),
              protocol::api_kind::openai_chat_completions);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/chat/completions?x=1"),
              protocol::api_kind::openai_chat_completions);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/completions"),
              protocol::api_kind::openai_completions);
    EXPECT_EQ(classify(bhttp::verb::get, "/v1/chat/completions"), protocol::api_kind::none);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/files"), protocol::api_kind::none);
    EXPECT_EQ(classify(bhttp::verb::get, "/v1/embeddings"), protocol::api_kind::none);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/chat/completions/extra"), protocol::api_kind::none);
}

TEST(CopyFields, DropsHopByHopAndFieldsNamedInConnection) {
    bhttp::fields from;
    from.insert("Connection", "keep-alive, X-Drop-Me");
    from.insert("Keep-Alive", "timeout=5");
    from.insert("TE", "trailers");
    from.insert("Transfer-Encoding", "chunked");
    from.insert("Upgrade", "h2c");
    from.insert("Proxy-Connection", "keep-alive");
    from.insert("Trailer", "X-Checksum");
    from.insert("Content-Length", "12");
    from.insert("X-Drop-Me", "1");
    from.insert("X-Keep", "yes");
    from.insert("Authorization", "Bearer k");
    from.insert("Set-Cookie", "a=1");
    from.insert("Set-Cookie", "b=2");
    bhttp::fields to;
    copy_end_to_end_fields(from, to);
    EXPECT_EQ(to["X-Keep"], "yes");
    EXPECT_EQ(to["Authorization"], "Bearer k");
    EXPECT_EQ(
        std::distance(to.equal_range("Set-Cookie").first, to.equal_range("Set-Cookie").second), 2);
    for (const char* gone : {"Connection", "Keep-Alive", "TE", "Transfer-Encoding", "Upgrade",
                             "Proxy-Connection", "Trailer", "Content-Length", "X-Drop-Me"}) {
        EXPECT_EQ(to.find(gone), to.end()) << gone;
    }
}

TEST(CopyFields, HopByHopInAnyCaseIsDroppedAndKeptFieldsKeepTheirNames) {
    bhttp::fields from;
    from.insert("kEeP-aLiVe", "timeout=5");
    from.insert("TRANSFER-ENCODING", "chunked");
    from.insert("proxy-connection", "close");
    from.insert("content-length", "3");
    from.insert("x-custom-thing", "1");
    from.insert("aUtHoRiZaTiOn", "Bearer k");
    bhttp::fields to;
    copy_end_to_end_fields(from, to);
    EXPECT_EQ(std::distance(to.begin(), to.end()), 2);
    // Known names keep what Beast knows of them, unknown ones their bytes.
    ASSERT_NE(to.find(bhttp::field::authorization), to.end());
    EXPECT_EQ(to.find(bhttp::field::authorization)->name_string(), "aUtHoRiZaTiOn");
    EXPECT_EQ(to["X-Custom-Thing"], "1");
    EXPECT_EQ(to.find("x-custom-thing")->name(), bhttp::field::unknown);
}

bhttp::request_header<> head_with(
    std::initializer_list<std::pair<const char*, const char*>> fields) {
    bhttp::request_header<> head;
    head.method(bhttp::verb::post);
    head.target("/");
    for (const auto& [name, value] : fields) {
        head.insert(name, value);
    }
    return head;
}

TEST(Framing, AmbiguousLengthsAreProblems) {
    EXPECT_FALSE(framing_problem(head_with({{"Content-Length", "5"}})));
    EXPECT_FALSE(framing_problem(head_with({{"Content-Length", "5"}, {"Content-Length", "5"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Content-Length", "5"}, {"Content-Length", "6"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Content-Length", "5, 6"}})));
    EXPECT_TRUE(
        framing_problem(head_with({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Transfer-Encoding", "gzip"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Transfer-Encoding", "chunked, gzip"}})));
    auto twice = framing_problem(head_with({{"Transfer-Encoding", "chunked, chunked"}}));
    ASSERT_TRUE(twice);
    EXPECT_EQ(twice->status, bhttp::status::bad_request);
}

TEST(Framing, CodingsBeforeChunkedAreNotImplemented) {
    // Forwarding "gzip, chunked" with the proxy's own framing would drop the gzip coding.
    auto problem = framing_problem(head_with({{"Transfer-Encoding", "gzip, chunked"}}));
    ASSERT_TRUE(problem);
    EXPECT_EQ(problem->status, bhttp::status::not_implemented);
    EXPECT_FALSE(framing_problem(head_with({{"Transfer-Encoding", "chunked"}})));
}

TEST(Credentials, NothingIsCheckedWithoutATenantSource) {
    EXPECT_FALSE(credential_problem(
        head_with({{"Authorization", "a"}, {"Authorization", "b"}, {"Connection", "x-api-key"}}),
        usage::tenant_source::none, "x-tenant-id"));
}

// The code of the head's credential problem, or "ok".
std::string credential_code(usage::tenant_source source, std::string_view tenant_header,
                            std::initializer_list<std::pair<const char*, const char*>> fields) {
    auto problem = credential_problem(head_with(fields), source, tenant_header);
    return problem ? std::string(problem->code) : std::string("ok");
}

TEST(Credentials, ApiKeyTenantsGetExactlyTheCredentialTheUpstreamReceives) {
    auto code = [](std::initializer_list<std::pair<const char*, const char*>> fields) {
        return credential_code(usage::tenant_source::api_key, "x-tenant-id", fields);
    };
    EXPECT_EQ(code({{"Authorization", "Bearer sk-1"}}), "ok");
    EXPECT_EQ(code({{"x-api-key", "sk-1"}}), "ok");
    EXPECT_EQ(code({{"Authorization", "Bearer sk-1"}, {"x-api-key", "sk-1"}}), "ok")
        << "the same key twice";
    EXPECT_EQ(code({{"Authorization", "Bearer sk-1"}, {"x-api-key", " "}}), "ok");
    EXPECT_EQ(code({{"Connection", "keep-alive, Authorization"},
                    {"Authorization", "Bearer junk"},
                    {"x-api-key", "sk-real"}}),
              "credential_in_connection");
    EXPECT_EQ(code({{"Connection", "X-API-KEY"}, {"x-api-key", "sk"}}), "credential_in_connection");
    EXPECT_EQ(code({{"Connection", "x-tenant-id"}, {"x-api-key", "sk"}}), "ok")
        << "the tenant header decides nothing here";
    EXPECT_EQ(code({{"Authorization", "Bearer a"}, {"Authorization", "Bearer b"}}),
              "duplicate_credentials");
    EXPECT_EQ(code({{"x-api-key", "a"}, {"X-Api-Key", "a"}}), "duplicate_credentials");
    EXPECT_EQ(code({{"Authorization", "Bearer\tsk-1"}}), "bad_authorization");
    EXPECT_EQ(code({{"Authorization", "Bearer junk"}, {"x-api-key", "sk-real"}}),
              "conflicting_credentials");
    EXPECT_EQ(code({{"Authorization", "Basic dXNlcjpw"}, {"x-api-key", "sk-real"}}),
              "conflicting_credentials")
        << "the upstream may authenticate either";
}

TEST(Credentials, HeaderTenantsCheckTheTenantHeaderOnly) {
    auto code = [](std::initializer_list<std::pair<const char*, const char*>> fields) {
        return credential_code(usage::tenant_source::header, "x-team", fields);
    };
    EXPECT_EQ(code({{"x-team", "a"}}), "ok");
    EXPECT_EQ(code({{"x-team", "a"}, {"X-Team", "b"}}), "duplicate_credentials");
    EXPECT_EQ(code({{"Connection", "x-team"}, {"x-team", "a"}}), "credential_in_connection");
    EXPECT_EQ(code({{"Authorization", "Bearer\tx"}, {"Authorization", "y"}}), "ok");
}

TEST(HostAndVersion, ExactlyOneHostOnHttp11) {
    auto head = head_with({});
    head.version(11);
    auto missing = host_or_version_problem(head);
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, bhttp::status::bad_request);
    head.version(10);
    EXPECT_FALSE(host_or_version_problem(head)) << "HTTP/1.0 may omit Host";
    head.insert("Host", "a");
    EXPECT_FALSE(host_or_version_problem(head));
    head.insert("Host", "b");
    EXPECT_TRUE(host_or_version_problem(head)) << "repeated Host";
    auto one = head_with({{"Host", "a"}});
    one.version(20);
    auto version = host_or_version_problem(one);
    ASSERT_TRUE(version);
    EXPECT_EQ(version->status, bhttp::status::http_version_not_supported);
}

TEST(HostAndVersion, HostMustBeAnAuthority) {
    for (const char* good : {"example.com", "example.com:8080", "[::1]:80", "10.0.0.1", ""}) {
        EXPECT_FALSE(host_or_version_problem(head_with({{"Host", good}}))) << good;
    }
    for (const char* bad :
         {"exa mple.com", "example.com/evil", "user@example.com", "a?b", "a#b", "a\\b"}) {
        EXPECT_TRUE(host_or_version_problem(head_with({{"Host", bad}}))) << bad;
    }
}

TEST(Trailers, FieldsAfterTheHeadAreDropped) {
    bhttp::fields fields;
    fields.insert("Host", "a");
    fields.insert("X-Header", "1");
    fields.insert("X-Trailer", "2");
    fields.insert("Content-Length", "9");
    drop_trailer_fields(fields, 2);
    EXPECT_EQ(fields["X-Header"], "1");
    EXPECT_EQ(fields.find("X-Trailer"), fields.end());
    EXPECT_EQ(fields.find("Content-Length"), fields.end());
}

TEST(HostHeader, OmitsPort80AndBracketsIpv6) {
    net::upstream_address target;
    target.host = "model";
    target.port = 80;
    EXPECT_EQ(upstream_host_header(target), "model");
    target.port = 8000;
    EXPECT_EQ(upstream_host_header(target), "model:8000");
    target.host = "::1";
    EXPECT_EQ(upstream_host_header(target), "[::1]:8000");
    // https leaves out its own default port, and keeps 80 (not its default).
    target.scheme = "https";
    target.host = "api.example.com";
    target.port = 443;
    EXPECT_EQ(upstream_host_header(target), "api.example.com");
    target.port = 80;
    EXPECT_EQ(upstream_host_header(target), "api.example.com:80");
}

// The bytes Beast's own serializer writes for a head, to compare the heads written as text with.
template <bool IsRequest>
std::string beast_head(bhttp::message<IsRequest, bhttp::empty_body>& message) {
    bhttp::serializer<IsRequest, bhttp::empty_body> serializer(message);
    std::string out;
    error_code ec;
    while (!serializer.is_header_done() && !ec) {
        serializer.next(ec, [&](error_code&, const auto& buffers) {
            std::size_t n = 0;
            for (auto buffer : beast::buffers_range_ref(buffers)) {
                out.append(static_cast<const char*>(buffer.data()), buffer.size());
                n += buffer.size();
            }
            serializer.consume(n);
        });
    }
    return out;
}

TEST(HeadText, ClientResponseHeadIsWhatBeastWritesForTheCopiedFields) {
    bhttp::response<bhttp::empty_body> upstream(bhttp::status::ok, 11);
    upstream.insert("Connection", "keep-alive, X-Hop");
    upstream.insert("Content-Type", "text/event-stream");
    upstream.insert("x-hop", "1");
    upstream.insert("Transfer-Encoding", "chunked");
    upstream.insert("X-Request-Id", "abc");
    upstream.insert("set-cookie", "a=1");
    upstream.insert("Set-Cookie", "b=2");
    upstream.insert("x-empty", "");
    upstream.insert("Content-Length", "12");

    // What the proxy wrote before: a second field set, serialized by Beast.
    bhttp::response<bhttp::empty_body> copied(bhttp::status::ok, 11);
    copy_end_to_end_fields(upstream.base(), copied.base());
    copied.chunked(true);

    std::string text;
    append_status_line(11, upstream.result_int(), upstream.reason(), text);
    append_end_to_end_fields(upstream.base(), text);
    append_field(text, "Transfer-Encoding", "chunked");
    text += "\r\n";
    EXPECT_EQ(text, beast_head(copied));
    EXPECT_EQ(text,
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Request-Id: abc\r\n"
              "set-cookie: a=1\r\nSet-Cookie: b=2\r\nx-empty: \r\n"
              "Transfer-Encoding: chunked\r\n\r\n");
}

TEST(HeadText, StatusLineIsWhatBeastWrites) {
    // The upstream's own reason phrase, and a code without a standard one.
    bhttp::response<bhttp::empty_body> odd;
    odd.result(599);
    odd.version(10);
    std::string text;
    append_status_line(10, 599, odd.reason(), text);
    text += "\r\n";
    EXPECT_EQ(text, beast_head(odd));
    odd.reason("Model Overloaded");
    text.clear();
    append_status_line(10, 599, odd.reason(), text);
    text += "\r\n";
    EXPECT_EQ(text, beast_head(odd));
    EXPECT_EQ(text, "HTTP/1.0 599 Model Overloaded\r\n\r\n");
}

TEST(HeadText, NoConnectionFieldMeansNoOptionsToDrop) {
    bhttp::fields fields;
    fields.insert("X-A", "1");
    EXPECT_TRUE(connection_options(fields).empty());
    fields.insert("connection", "close, x-a");
    EXPECT_EQ(connection_options(fields), (std::vector<std::string>{"close", "x-a"}));
}

}  // namespace
}  // namespace tokenmeter::relay
