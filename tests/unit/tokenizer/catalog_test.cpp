// tokenizer/catalog: the tokenizers a process uses, what it reports about each (role, model,
// name, source; load time and memory measured through the caller's functions), one instance per
// spec however many models share it, and the warning when an optional reference is missing.
#include <gtest/gtest.h>

#include "tokenizer/catalog.hpp"

namespace {

using tokenmeter::tokenizer::catalog;
using tokenmeter::tokenizer::catalog_options;

TEST(TokenizerCatalog, BuiltInReferenceWithNoFilesAndOneInstancePerSpec) {
    catalog_options options;
    options.reference = "o200k_base";
    options.search_dirs = {"/nonexistent/tokenmeter-catalog-test"};
    options.models = {{"model-a", "cl100k_base"}, {"model-b", "cl100k_base"}};
    double now = 0;
    std::int64_t resident = 1000;
    options.seconds_now = [&] { return now += 0.25; };
    options.resident_bytes = [&] { return resident += 4096; };
    const auto result = catalog::load(options);
    ASSERT_NE(result.value, nullptr);
    EXPECT_TRUE(result.warnings.empty());
    EXPECT_EQ(result.value->reference_name(), "o200k_base");
    const auto& entries = result.value->entries();
    ASSERT_EQ(entries.size(), 3U);
    EXPECT_EQ(entries[0].role, "reference");
    EXPECT_EQ(entries[0].model, "");
    EXPECT_EQ(entries[0].name, "o200k_base");
    EXPECT_EQ(entries[0].source, "embedded");
    EXPECT_DOUBLE_EQ(entries[0].load_seconds, 0.25);
    EXPECT_EQ(entries[0].resident_growth_bytes, 4096);
    EXPECT_FALSE(entries[0].shared);
    EXPECT_EQ(entries[1].role, "native");
    EXPECT_EQ(entries[1].model, "model-a");
    EXPECT_EQ(entries[1].name, "cl100k_base");
    EXPECT_FALSE(entries[1].shared);
    EXPECT_EQ(entries[2].model, "model-b");
    EXPECT_TRUE(entries[2].shared);
    EXPECT_EQ(entries[2].load_seconds, 0);
    const auto a = result.value->for_model("model-a");
    const auto b = result.value->for_model("model-b");
    EXPECT_EQ(a.native, b.native) << "one instance for both models";
    EXPECT_NE(a.native, a.reference);
}

TEST(TokenizerCatalog, MissingOptionalReferenceWarnsWithWhatWasTriedAndWhatToDo) {
    catalog_options options;
    options.reference = "my_reference";
    options.search_dirs = {"/nonexistent/first", "/nonexistent/second"};
    const auto result = catalog::load(options);
    ASSERT_NE(result.value, nullptr);
    EXPECT_EQ(result.value->reference_name(), "");
    ASSERT_EQ(result.warnings.size(), 1U);
    const std::string& w = result.warnings[0];
    EXPECT_NE(w.find("normalized token counts are off"), std::string::npos) << w;
    EXPECT_NE(w.find("/nonexistent/first/my_reference.json"), std::string::npos) << w;
    EXPECT_NE(w.find("/nonexistent/second/my_reference/tokenizer.json"), std::string::npos) << w;
    EXPECT_NE(w.find("tokenizer_dir"), std::string::npos) << w;
    EXPECT_NE(w.find("reference_tokenizer: none"), std::string::npos) << w;
    EXPECT_NE(w.find("o200k_base"), std::string::npos) << "names the built-in choice: " << w;
}

TEST(TokenizerCatalog, MissingRequiredReferenceIsAnError) {
    catalog_options options;
    options.reference = "my_reference";
    options.reference_required = true;
    options.search_dirs = {"/nonexistent/first"};
    const auto result = catalog::load(options);
    EXPECT_EQ(result.value, nullptr);
    ASSERT_EQ(result.errors.size(), 1U);
    EXPECT_EQ(result.errors[0].key, "reference_tokenizer");
}

}  // namespace
