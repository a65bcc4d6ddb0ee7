// core/text: trim removes exactly the given characters at both ends and nothing inside.
#include "core/text.hpp"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace tokenmeter::core {
namespace {

static_assert(trim(" \t a b \r\n") == "a b");
static_assert(trim(" \t\r\n").empty());

TEST(Trim, BothEndsOnlyByDefaultSpacesTabsAndLineEnds) {
    EXPECT_EQ(trim("  max 100000\n"), "max 100000");
    EXPECT_EQ(trim("\r\n\tteam-b \r"), "team-b");
    EXPECT_EQ(trim("a \t b"), "a \t b");
    EXPECT_EQ(trim("x"), "x");
    EXPECT_EQ(trim(""), "");
    EXPECT_EQ(trim("\n\n"), "");
    EXPECT_EQ(trim("\v\fx\f"), "\v\fx\f") << "only the four characters, not isspace()";
}

TEST(Trim, HttpWhitespaceLeavesLineEnds) {
    EXPECT_EQ(trim(" \tgzip\t ", http_whitespace), "gzip");
    EXPECT_EQ(trim("\r gzip \n", http_whitespace), "\r gzip \n");
    EXPECT_EQ(trim(" \t ", http_whitespace), "");
}

TEST(Trim, ReturnsAViewIntoItsArgument) {
    const std::string text = "  value  ";
    const std::string_view trimmed = trim(text);
    EXPECT_EQ(trimmed.data(), text.data() + 2);
    EXPECT_EQ(trimmed.size(), 5U);
}

}  // namespace
}  // namespace tokenmeter::core
