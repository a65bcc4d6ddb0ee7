// app/tokenizers: loads the tokenizers the settings name (start-up and --check-config).
#pragma once

#include "config/config.hpp"
#include "tokenizer/catalog.hpp"

namespace tokenmeter::app {

tokenizer::catalog::load_result load_tokenizers(const config::settings& settings);

}  // namespace tokenmeter::app
