// Intermediary header rules: classification, hop-by-hop removal, ambiguous framing.
#include "http/headers.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::http {
namespace {

TEST(Classify, MeteredPathsNeedPost) {
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/chat/completions"),
              protocol::api_kind::openai_chat_completions);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/chat/completions?x=1"),
              protocol::api_kind::openai_chat_completions);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/completions"),
              protocol::api_kind::openai_completions);
    EXPECT_EQ(classify(bhttp::verb::get, "/v1/chat/completions"), protocol::api_kind::none);
    EXPECT_EQ(classify(bhttp::verb::post, "/v1/embeddings"), protocol::api_kind::none);
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
    EXPECT_FALSE(framing_problem(head_with({{"Transfer-Encoding", "gzip, chunked"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Content-Length", "5"}, {"Content-Length", "6"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Content-Length", "5, 6"}})));
    EXPECT_TRUE(
        framing_problem(head_with({{"Content-Length", "5"}, {"Transfer-Encoding", "chunked"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Transfer-Encoding", "gzip"}})));
    EXPECT_TRUE(framing_problem(head_with({{"Transfer-Encoding", "chunked, gzip"}})));
}

TEST(HostHeader, OmitsPort80AndBracketsIpv6) {
    config::upstream_target target;
    target.host = "model";
    target.port = 80;
    EXPECT_EQ(upstream_host_header(target), "model");
    target.port = 8000;
    EXPECT_EQ(upstream_host_header(target), "model:8000");
    target.host = "::1";
    EXPECT_EQ(upstream_host_header(target), "[::1]:8000");
}

}  // namespace
}  // namespace tokenmeter::http
