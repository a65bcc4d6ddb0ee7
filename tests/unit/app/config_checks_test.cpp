// app/config_checks: route rules built from the config once (API names resolved, '*' made a
// prefix) and the errors reported with their dotted keys.
#include "app/config_checks.hpp"

#include <gtest/gtest.h>

namespace tokenmeter::app {
namespace {

using protocol::api_kind;

TEST(RouteRules, BuiltOnceFromTheConfig) {
    std::vector<config::route> routes = {
        {"/ollama/*", "ollama_chat", std::nullopt},
        {"/llm/v1/chat/completions", "openai_chat", false, true},
        {"/v1/messages", "none", std::nullopt},
    };
    auto built = build_route_rules(routes);
    EXPECT_TRUE(built.errors.empty());
    ASSERT_EQ(built.rules.size(), 3u);
    EXPECT_EQ(built.rules[0].path, "/ollama/");
    EXPECT_TRUE(built.rules[0].prefix);
    EXPECT_EQ(built.rules[0].api, api_kind::ollama_chat);
    EXPECT_EQ(built.rules[1].path, "/llm/v1/chat/completions");
    EXPECT_FALSE(built.rules[1].prefix);
    EXPECT_EQ(built.rules[1].api, api_kind::openai_chat_completions);
    EXPECT_EQ(built.rules[1].usage_injection, false);
    EXPECT_TRUE(built.rules[1].continuous_usage_stats);
    EXPECT_EQ(built.rules[2].api, api_kind::none);
}

TEST(RouteRules, TheTableTakesTheTopLevelInjectionDefault) {
    config::settings s;
    s.routes = {{"/ollama/*", "ollama_chat", std::nullopt}};
    s.usage_injection = true;
    EXPECT_EQ(make_route_table(s).choose("/ollama/api/chat").api, api_kind::ollama_chat);
    EXPECT_TRUE(make_route_table(s).choose("/ollama/x").usage_injection);
    s.usage_injection = false;
    EXPECT_FALSE(make_route_table(s).choose("/v1/chat/completions").usage_injection);
}

TEST(RouteRules, UnknownApisAreNamedByKeyWithTheTablesNames) {
    config::settings s;
    s.routes = {{"/x", "grpc", std::nullopt},
                {"x", "none", std::nullopt},
                {"/a/*/b", "openai_chat", std::nullopt}};
    auto errors = module_config_errors(s);
    ASSERT_EQ(errors.size(), 1u);  // the paths are config::validate's to check
    EXPECT_EQ(errors[0].key, "routes[0].api");
    EXPECT_EQ(errors[0].message,
              "unknown api \"grpc\" (expected openai_chat, openai_completions, "
              "openai_responses, anthropic_messages, tgi_generate, llamacpp_completion, "
              "ollama_chat, ollama_generate, gemini_generate, openai_embeddings, rerank, score, "
              "classify, pooling, openai_moderations, openai_transcriptions, "
              "openai_translations, openai_speech, openai_realtime, "
              "openai_realtime_transcription or none)");
    EXPECT_TRUE(module_config_errors(config::settings{}).empty());
}

}  // namespace
}  // namespace tokenmeter::app
