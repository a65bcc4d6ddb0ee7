// core/secret_file: the file's content less its trailing newline; errors never quote it.
#include "core/secret_file.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tokenmeter::core {
namespace {

std::string temp_file(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
}

TEST(SecretFile, TrailingNewlinesAreNotPartOfTheSecret) {
    std::string why;
    const auto echoed = temp_file("tokenmeter-secret-echo", "s3cret\n");
    EXPECT_EQ(read_secret_file(echoed, why), "s3cret");
    const auto crlf = temp_file("tokenmeter-secret-crlf", "s3 cret\r\n\n");
    EXPECT_EQ(read_secret_file(crlf, why), "s3 cret");
    std::filesystem::remove(echoed);
    std::filesystem::remove(crlf);
}

TEST(SecretFile, MissingOrEmptyIsAnErrorWithoutContent) {
    std::string why;
    EXPECT_FALSE(read_secret_file("/nonexistent/token", why));
    EXPECT_EQ(why, "cannot read /nonexistent/token");
    const auto empty = temp_file("tokenmeter-secret-empty", "\n");
    EXPECT_FALSE(read_secret_file(empty, why));
    EXPECT_EQ(why, empty + " is empty");
    std::filesystem::remove(empty);
}

}  // namespace
}  // namespace tokenmeter::core
