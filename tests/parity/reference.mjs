// reference.mjs: the reference tokenizers the parity tests compare tokenmeter's engine against,
// loaded the way the comparison needs them. Shared by generate.mjs and bench.mjs.
//
// - tiktoken (OpenAI's Rust tiktoken compiled to WASM): encode_ordinary, so special-token text
//   such as "<|endoftext|>" is ordinary text, as tokenmeter counts it.
// - Hugging Face tokenizers (the Rust crate as a native Node addon): the tokenizer.json with every
//   added token marked `"special": true` taken out of `added_tokens` (their ids stay in the vocab;
//   only the "match this text as one control token" rule goes), encoded without the
//   post-processor's BOS/EOS (addSpecialTokens: false). That is what the Rust crate's
//   `encode_special_tokens = true` does, which this binding does not expose. Non-special added
//   tokens (Qwen3's <think>, Gemma 3's "\n\n" and <table> ...) stay: they are how those models
//   tokenize ordinary output.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

// name -> how to find its file in the tokenizer cache (scripts/fetch-tokenizers.sh layout).
export const TOKENIZERS = {
  o200k_base: { kind: "tiktoken", file: "o200k_base.json" },
  cl100k_base: { kind: "tiktoken", file: "cl100k_base.json" },
  llama3: { kind: "hf", file: "llama3/tokenizer.json" },
  qwen3: { kind: "hf", file: "qwen3/tokenizer.json" },
  gemma3: { kind: "hf", file: "gemma3/tokenizer.json" },
  llama2: { kind: "hf", file: "llama2/tokenizer.json" },
};

export function tokenizerDir() {
  const here = path.dirname(new URL(import.meta.url).pathname);
  return process.env.TOKENMETER_TOKENIZER_DIR || path.resolve(here, "../../.cache/tokenizers");
}

function loadPackage(name) {
  try {
    return require(name);
  } catch (err) {
    throw new Error(
      `cannot load the npm package ${name} (${err.message}); run \`npm ci\` in tests/parity ` +
        "(scripts/test.sh does)",
    );
  }
}

// Returns { name, kind, encode(text) -> number[] }; encode is synchronous for tiktoken and async
// for HF, so both are awaited by callers.
export function loadReference(name, dir = tokenizerDir()) {
  const spec = TOKENIZERS[name];
  if (!spec) {
    throw new Error(`unknown tokenizer ${name}; known: ${Object.keys(TOKENIZERS).join(", ")}`);
  }
  const file = path.join(dir, spec.file);
  if (!fs.existsSync(file)) {
    throw new Error(`missing ${file}; run scripts/fetch-tokenizers.sh`);
  }
  if (spec.kind === "tiktoken") {
    const { Tiktoken } = loadPackage("tiktoken");
    const data = JSON.parse(fs.readFileSync(file, "utf8"));
    const enc = new Tiktoken(data.bpe_ranks, data.special_tokens, data.pat_str);
    return {
      name,
      kind: spec.kind,
      file,
      encodeSync: (text) => enc.encode_ordinary(text),
      encode: async (text) => Array.from(enc.encode_ordinary(text)),
    };
  }
  const { Tokenizer } = loadPackage("@anush008/tokenizers");
  const json = JSON.parse(fs.readFileSync(file, "utf8"));
  const removed = json.added_tokens.filter((t) => t.special).map((t) => t.content);
  json.added_tokens = json.added_tokens.filter((t) => !t.special);
  const tok = Tokenizer.fromString(JSON.stringify(json));
  return {
    name,
    kind: spec.kind,
    file,
    removedSpecialTokens: removed,
    encode: async (text) => (await tok.encode(text, null, { addSpecialTokens: false })).getIds(),
  };
}
