// reference.mjs: the reference tokenizers the parity tests compare tokenmeter's engine against,
// loaded the way the comparison needs them. Shared by generate.mjs and bench.mjs.
//
// - tiktoken (OpenAI's Rust tiktoken compiled to WASM): encode_ordinary, so special-token text
//   such as "<|endoftext|>" is ordinary text, as tokenmeter counts it by default; with
//   specialTokens "match", encode(text, "all"), every special token of the file matched.
// - Hugging Face tokenizers (the Rust crate as a native Node addon): the tokenizer.json with every
//   added token marked `"special": true` made unmatchable in `added_tokens` (only the "match this
//   text as one control token" rule goes), encoded without the
//   post-processor's BOS/EOS (addSpecialTokens: false). That is what the Rust crate's
//   `encode_special_tokens = true` does, which this binding does not expose. Non-special added
//   tokens (Qwen3's <think>, Gemma 3's "\n\n" and <table> ...) stay: they are how those models
//   tokenize ordinary output. (The special entries are renamed to unmatchable text rather than
//   deleted, which would renumber the others; see loadReference.)
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { FIXTURES } from "./fixtures.mjs";

const require = createRequire(import.meta.url);

// name -> how to find its file in the tokenizer cache (scripts/fetch-tokenizers.sh layout).
export const TOKENIZERS = {
  o200k_base: { kind: "tiktoken", file: "o200k_base.json" },
  cl100k_base: { kind: "tiktoken", file: "cl100k_base.json" },
  llama3: { kind: "hf", file: "llama3/tokenizer.json" },
  qwen3: { kind: "hf", file: "qwen3/tokenizer.json" },
  gemma3: { kind: "hf", file: "gemma3/tokenizer.json" },
  llama2: { kind: "hf", file: "llama2/tokenizer.json" },
  // Written by generate.mjs into its output directory (fixtures.mjs), compared in match mode.
  ...Object.fromEntries(Object.keys(FIXTURES).map((name) => [name, { kind: "hf", fixture: true }])),
};

// Where generate.mjs writes a fixture's tokenizer.json (the parity checker's --spec).
export function fixturePath(dir, name) {
  return path.join(dir, `${name}.tokenizer.json`);
}

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
// specialTokens: "text" (default: special added tokens made unmatchable, tiktoken's
// encode_ordinary) or "match" (Hugging Face's own default: every added token matchable).
export function loadReference(name, dir = tokenizerDir(), specialTokens = "text") {
  const spec = TOKENIZERS[name];
  if (!spec) {
    throw new Error(`unknown tokenizer ${name}; known: ${Object.keys(TOKENIZERS).join(", ")}`);
  }
  const file = spec.fixture ? fixturePath(dir, name) : path.join(dir, spec.file);
  if (spec.fixture) {
    fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(file, JSON.stringify(FIXTURES[name](), null, 1));
  }
  if (!fs.existsSync(file)) {
    throw new Error(`missing ${file}; run scripts/fetch-tokenizers.sh`);
  }
  if (spec.kind === "tiktoken") {
    const { Tiktoken } = loadPackage("tiktoken");
    const data = JSON.parse(fs.readFileSync(file, "utf8"));
    const enc = new Tiktoken(data.bpe_ranks, data.special_tokens, data.pat_str);
    if (specialTokens === "match") {
      // encode(text, allowed_special = "all"): every special token of the file matched.
      return {
        name,
        kind: spec.kind,
        file,
        specialTokens,
        encodeSync: (text) => enc.encode(text, "all"),
        encode: async (text) => Array.from(enc.encode(text, "all")),
      };
    }
    return {
      name,
      kind: spec.kind,
      file,
      encodeSync: (text) => enc.encode_ordinary(text),
      encode: async (text) => Array.from(enc.encode_ordinary(text)),
      // encode() with no special token allowed and none disallowed: the same ids, documented
      // and cross-checked by generate.mjs (the default arguments throw on "<|endoftext|>").
      encodeNoSpecial: (text) => Array.from(enc.encode(text, [], [])),
    };
  }
  const { Tokenizer } = loadPackage("@anush008/tokenizers");
  const json = JSON.parse(fs.readFileSync(file, "utf8"));
  // Rename rather than delete: the library numbers added tokens that are not in the model's
  // vocab by their position in the list, so deleting entries would shift the ids of the
  // non-special ones after them (Qwen3's <|fim_prefix|> would become 151645 instead of 151659).
  // The new content cannot occur in any test text.
  const removed = [];
  for (const t of json.added_tokens) {
    if (t.special && specialTokens === "text") {
      removed.push(t.content);
      t.content = `\u0000\u0001tokenmeter: special token ${t.id} not matched\u0001\u0000`;
    }
  }
  const tok = Tokenizer.fromString(JSON.stringify(json));
  for (const t of json.added_tokens) {
    if ((!t.special || specialTokens === "match") && tok.tokenToId(t.content) !== t.id) {
      throw new Error(`${file}: added token ${JSON.stringify(t.content)} has id ${tok.tokenToId(t.content)}, file says ${t.id}`);
    }
  }
  return {
    name,
    kind: spec.kind,
    file,
    removedSpecialTokens: removed,
    specialTokens,
    encode: async (text) => (await tok.encode(text, null, { addSpecialTokens: false })).getIds(),
  };
}

// For the benchmark only: a native (not WASM) build of tiktoken's Rust core,
// @anysphere/tiktoken-node (a fork of OpenAI's tiktoken; optional dependency, x86-64 Linux).
// Same ids as the WASM build on the whole corpus (bench-tokenizer.sh compares the totals).
// Returns null when the package is not installed or the encoding is not one it has.
export function loadNativeTiktoken(name) {
  let binding;
  try {
    binding = require("@anysphere/tiktoken-node-linux-x64-gnu");
  } catch {
    return null;
  }
  const encoding = { o200k_base: binding.SupportedEncoding.O200k, cl100k_base: binding.SupportedEncoding.Cl100k }[name];
  if (encoding === undefined) {
    return null;
  }
  const tok = binding.getTokenizer();
  const normalText = binding.SpecialTokenAction.NormalText;
  return {
    name,
    kind: "tiktoken-native",
    // Resolves on a libuv pool thread (UV_THREADPOOL_SIZE=1 in the bench).
    encode: (text) => tok.encode(text, encoding, normalText, {}),
  };
}
