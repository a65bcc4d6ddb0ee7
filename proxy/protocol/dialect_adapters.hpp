// protocol/dialect_adapters: factories of the adapters that live in their own files; only the
// protocol registry (dialects.cpp) and tests use these directly.
#pragma once

#include <memory>

#include "protocol/adapter.hpp"

namespace tokenmeter::protocol {

std::unique_ptr<adapter> make_openai_responses_adapter();
std::unique_ptr<adapter> make_anthropic_adapter();
std::unique_ptr<adapter> make_tgi_adapter();
std::unique_ptr<adapter> make_llamacpp_adapter();
std::unique_ptr<adapter> make_ollama_adapter();
std::unique_ptr<adapter> make_gemini_adapter();

}  // namespace tokenmeter::protocol
