// Request bodies as Python's json reads them: what strict JSON refuses and vLLM serves.
#include "protocol/python_json.hpp"

#include <gtest/gtest.h>

#include "protocol/dialects.hpp"

namespace tokenmeter::protocol {
namespace {

std::string strict(std::string_view body) {
    auto rewritten = python_json_as_strict(body);
    return rewritten ? *rewritten : std::string("unchanged");
}

TEST(PythonJson, NonFiniteNumbersBecomeNull) {
    EXPECT_EQ(strict(R"({"a":NaN,"b":Infinity,"c":-Infinity})"), R"({"a":null,"b":null,"c":null})");
    EXPECT_EQ(strict(R"([1e400,-1E+999,1.5e3,0,-0.0])"), R"([null,null,1.5e3,0,-0.0])");
    EXPECT_EQ(strict("[" + std::string(400, '9') + "]"), "[null]") << "a Python int past a double";
}

TEST(PythonJson, LoneSurrogatesBecomeTheReplacementCharacter) {
    EXPECT_EQ(strict(R"(["a\ud800b"])"), R"(["a\ufffdb"])");
    EXPECT_EQ(strict(R"(["\udc00"])"), R"(["\ufffd"])");
    EXPECT_EQ(strict(R"(["\ud83d\ude00\ud83d"])"), R"(["\ud83d\ude00\ufffd"])") << "a pair stays";
    EXPECT_EQ(strict("[\"a\xED\xA0\x80\"]"), "[\"a\xEF\xBF\xBD\"]") << "encoded, as surrogatepass";
}

TEST(PythonJson, StringsAndStrictBodiesAreLeftAlone) {
    EXPECT_EQ(strict(R"({"model":"NaN Infinity 1e400","x":[1,2.5,-3]})"), "unchanged");
    EXPECT_EQ(strict(R"(["a\"NaN\\", NaN])"), R"(["a\"NaN\\", null])")
        << "an escaped quote does not end the string";
    EXPECT_EQ(strict("not json"), "unchanged");
    EXPECT_EQ(strict(""), "unchanged");
    EXPECT_EQ(strict(R"(["\u12"])"), "unchanged") << "a short escape is left to the reader";
}

TEST(PythonJson, TheDialectsReadTheModelPythonReads) {
    const std::string body =
        R"({"model":"m\ud800","temperature":NaN,"max_tokens":1e400,"messages":[{"role":"user","content":"hi"}],"stream":true})";
    for (const api_kind api :
         {api_kind::openai_chat_completions, api_kind::anthropic_messages, api_kind::ollama_chat}) {
        const request_info info = parse_request(api, "/x", body);
        EXPECT_TRUE(info.body_parsed) << to_string(api);
        EXPECT_EQ(info.model, "m\xEF\xBF\xBD") << to_string(api);
        EXPECT_TRUE(info.stream) << to_string(api);
    }
    EXPECT_FALSE(parse_request(api_kind::openai_chat_completions, "/x", "{NaN}").body_parsed)
        << "not JSON for Python either";
}

}  // namespace
}  // namespace tokenmeter::protocol
