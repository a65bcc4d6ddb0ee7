// Request targets: absolute-form to origin-form, dot-segment removal, refusals.
#include "http/request_target.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::http {
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

}  // namespace
}  // namespace tokenmeter::http
