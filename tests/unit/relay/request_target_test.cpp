// Request targets: absolute-form to origin-form, dot-segment removal, refusals.
#include "relay/request_target.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::relay {
namespace {

std::string forwarded(std::string_view target) {
    auto result = normalize_target(target);
    if (auto* refusal = std::get_if<target_refusal>(&result)) {
        return "refused:" + std::string(refusal->code);
    }
    return std::get<std::string>(result);
}

TEST(RequestTarget, OriginFormWithoutDotsIsUnchanged) {
    EXPECT_EQ(forwarded("/v1/chat/completions"), "/v1/chat/completions");
    EXPECT_EQ(forwarded("/v1/models?x=/../y"), "/v1/models?x=/../y") << "the query is not a path";
    EXPECT_EQ(forwarded("/"), "/");
    EXPECT_EQ(forwarded("//double"), "//double");
    EXPECT_EQ(forwarded("/a..b/.c/..."), "/a..b/.c/...");
}

TEST(RequestTarget, DotSegmentsAreRemoved) {
    EXPECT_EQ(forwarded("/a/./b/../c"), "/a/c");
    EXPECT_EQ(forwarded("/a/b/.."), "/a/");
    EXPECT_EQ(forwarded("/a/b/."), "/a/b/");
    EXPECT_EQ(forwarded("/a/%2e%2E/b"), "/b");
    EXPECT_EQ(forwarded("/a/.%2e/b?q=1"), "/b?q=1");
    EXPECT_EQ(forwarded("/v1/./chat/completions"), "/v1/chat/completions");
}

TEST(RequestTarget, ClimbingAboveTheRootIsRefused) {
    EXPECT_EQ(forwarded("/../admin/secret"), "refused:path_escapes_base");
    EXPECT_EQ(forwarded("/%2e%2e/admin"), "refused:path_escapes_base");
    EXPECT_EQ(forwarded("/a/../../b"), "refused:path_escapes_base");
    EXPECT_EQ(forwarded("/.."), "refused:path_escapes_base");
}

TEST(RequestTarget, AbsoluteFormBecomesOriginForm) {
    EXPECT_EQ(forwarded("http://x/v1/chat/completions"), "/v1/chat/completions");
    EXPECT_EQ(forwarded("HTTPS://x:8443/v1/messages?beta=1"), "/v1/messages?beta=1");
    EXPECT_EQ(forwarded("http://x"), "/");
    EXPECT_EQ(forwarded("http://x?q"), "/?q");
    EXPECT_EQ(forwarded("http://x/a/../../b"), "refused:path_escapes_base");
}

TEST(RequestTarget, OtherFormsAreRefused) {
    EXPECT_EQ(forwarded("x"), "refused:bad_target");
    EXPECT_EQ(forwarded("example.com:443"), "refused:bad_target") << "authority-form";
    EXPECT_EQ(forwarded("ftp://x/y"), "refused:bad_target");
    EXPECT_EQ(forwarded("http:///path"), "refused:bad_target");
    EXPECT_EQ(forwarded("http://user@x/y"), "refused:bad_target");
    EXPECT_EQ(forwarded("/a#frag"), "refused:bad_target");
    EXPECT_EQ(forwarded("*"), "*");
}

TEST(RequestTarget, PercentEncodedUnreservedCharactersAreDecodedInThePath) {
    // What a model server reads (RFC 3986 §6.2.2.2): routing, the meter and the upstream see
    // the same path.
    EXPECT_EQ(forwarded("/v1/chat/%63ompletions"), "/v1/chat/completions");
    EXPECT_EQ(forwarded("/%761/chat/completions"), "/v1/chat/completions");
    EXPECT_EQ(forwarded("/v1/%43hat/x%2D%5f%7E"), "/v1/Chat/x-_~");
    EXPECT_EQ(forwarded("http://h/v1/%6Dessages?q=%61"), "/v1/messages?q=%61")
        << "the query is left as it came";
    // Reserved characters and other bytes stay escaped; an invalid escape stays as it is.
    EXPECT_EQ(forwarded("/v1/chat%2Fcompletions"), "/v1/chat%2Fcompletions");
    EXPECT_EQ(forwarded("/a%3Ab%25c%zz%4"), "/a%3Ab%25c%zz%4");
    EXPECT_EQ(forwarded("/a%2541"), "/a%2541") << "decoded once: %25 is '%', not an escape";
    // Decoded dots are dot segments.
    EXPECT_EQ(forwarded("/v1/x/%2E%2e/chat/completions"), "/v1/chat/completions");
    EXPECT_EQ(forwarded("/%2E%2E/x"), "refused:path_escapes_base");
}

TEST(RequestTarget, NormalizingTwiceChangesNothing) {
    for (const char* target :
         {"/v1/chat/%63ompletions", "/a%2541", "/a/%2e%2e/b%2F%41", "/x%2F..%2Fy", "/%C3%A9/%7e"}) {
        const std::string once = forwarded(target);
        EXPECT_EQ(forwarded(once), once) << target;
    }
}

TEST(RequestTarget, PercentDecodingReadsThePathAsUvicornDoes) {
    EXPECT_EQ(percent_decode_path("/v1/chat%2Fcompletions"), "/v1/chat/completions");
    EXPECT_EQ(percent_decode_path("/a%2fb%3Ac%zz%4"), "/a/b:c%zz%4");
    EXPECT_EQ(percent_decode_path("/%2541"), "/%41") << "one pass, as Python's unquote";
}

TEST(RequestTarget, AnEscapedPathThatDecodesToAMeteredApiIsRefused) {
    const protocol::route_table routes({}, true);
    auto refused = [&routes](std::string_view target) {
        auto refusal = refuse_escaped_api_path(target, routes);
        return refusal ? std::string(refusal->code) : std::string("forwarded");
    };
    EXPECT_EQ(refused("/v1/chat%2Fcompletions"), "escaped_api_path");
    EXPECT_EQ(refused("/v1%2Fchat%2fcompletions?x=1"), "escaped_api_path");
    EXPECT_EQ(refused("/v1/x%2F..%2Fchat/completions"), "escaped_api_path")
        << "a server that removes dot segments after decoding reads /v1/chat/completions";
    EXPECT_EQ(refused("/v1beta/models/gemini%3AgenerateContent"), "escaped_api_path");
    EXPECT_EQ(refused("/v1/chat/completions"), "forwarded");
    EXPECT_EQ(refused("/v1/files%2Fabc"), "forwarded") << "not an API the proxy meters";
    EXPECT_EQ(refused("/v1/chat/completions?next=%2F"), "forwarded") << "the query is no path";
    EXPECT_EQ(refused("/v1/chat/completions%zz"), "forwarded") << "no valid escape";

    // A configured prefix route counts too.
    const protocol::route_table prefixed(
        {{"/llm/", true, protocol::api_kind::openai_chat_completions, {}, false}}, true);
    EXPECT_TRUE(refuse_escaped_api_path("/llm%2Fv1/chat", prefixed));
    EXPECT_TRUE(refuse_escaped_api_path("/llm/a%20b", prefixed));
    EXPECT_FALSE(refuse_escaped_api_path("/other%2Fx", prefixed));
}

TEST(RequestTarget, DotSegmentsCanBeClampedAtTheRoot) {
    std::string out;
    EXPECT_FALSE(remove_dot_segments("/../a", out));
    ASSERT_TRUE(remove_dot_segments("/../a/../../b", out, true));
    EXPECT_EQ(out, "/b");
}

}  // namespace
}  // namespace tokenmeter::relay
