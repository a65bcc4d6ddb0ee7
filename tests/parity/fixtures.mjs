// fixtures.mjs: small hand-written tokenizer.json files whose added tokens use every flag Hugging
// Face tokenizers honours when it matches them in text (lstrip, rstrip, single_word, normalized),
// on the three shapes tokenmeter's engine has: byte-level BPE, SentencePiece-style BPE with
// Llama 2's Prepend + Replace normalizer, and SentencePiece-style BPE with a Metaspace
// pre-tokenizer (prepend_scheme "always" and "first"). The vocabularies are tiny (bytes or
// characters plus a few dozen merges), so most text becomes many short tokens and every added
// token boundary shows in the ids. generate.mjs writes them next to the expected ids; the parity
// checker loads them from there.

// Merges shared by every fixture, over characters ("_" stands for the space symbol of the shape).
const MERGES = [
  ["_", "t"], ["h", "e"], ["_t", "he"], ["i", "n"], ["e", "r"], ["a", "n"], ["_", "a"],
  ["o", "n"], ["r", "e"], ["_", "w"], ["o", "r"], ["_w", "or"], ["_wor", "d"], ["_", "s"],
  ["e", "n"], ["_", "i"], ["_i", "n"], ["a", "t"], ["i", "s"], ["_", "o"], ["in", "g"],
  ["_", "b"], ["_", "c"], ["e", "s"], ["o", "u"], ["l", "l"], ["_", "_"], ["__", "__"],
  ["w", "or"], ["wor", "d"], ["h", "i"], ["_", "<"], ["<", "|"], ["|", ">"], ["e", "d"],
];

// Added tokens with their flags; `special` decides whether text mode drops them (not used here:
// the fixtures are compared in match mode).
function addedTokens(kind) {
  const t = (content, flags = {}) => ({
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
    ...flags,
  });
  const tokens = [
    t("<|im_start|>"),
    t("<|im_end|>"),
    t("<l>", { lstrip: true }),
    t("<r>", { rstrip: true }),
    t("<lr>", { lstrip: true, rstrip: true }),
    t("<sw>", { single_word: true }),
    t("word", { single_word: true, special: false }),
    t("<ab"),
    t("<abc>"),
    t("<|end", { rstrip: true }),
    t("\n\n", { special: false }),
    t("éé", { single_word: true, lstrip: true, special: false }),
  ];
  if (kind !== "llama2style") {
    // normalized = true: matched in the segments the others leave (no normalizer here)
    tokens.push(t("hello", { normalized: true, special: false }));
    tokens.push(t("<n>", { normalized: true, lstrip: true, rstrip: true }));
    tokens.push(t("the", { normalized: true, single_word: true, special: false }));
    tokens.push(t("<|im_start|>user", { normalized: true }));
  }
  return tokens;
}

const LLAMA3_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's byte-to-unicode alphabet.
function byteLevelAlphabet() {
  const chars = [];
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    chars.push(String.fromCodePoint(printable ? b : next++));
  }
  return chars;
}

// MERGES with "_" spelled `space`; each merged token joins the vocab (next free id).
function addMerges(vocab, space) {
  const merges = [];
  for (const [a, b] of MERGES) {
    const m = [a.replaceAll("_", space), b.replaceAll("_", space)];
    if (vocab[m[0] + m[1]] === undefined) {
      vocab[m[0] + m[1]] = Object.keys(vocab).length;
    }
    merges.push(m);
  }
  return merges;
}

function bpeModel(vocab, merges, extra) {
  return {
    type: "BPE",
    dropout: null,
    unk_token: null,
    continuing_subword_prefix: null,
    end_of_word_suffix: null,
    fuse_unk: false,
    byte_fallback: false,
    ignore_merges: false,
    vocab,
    merges,
    ...extra,
  };
}

// Ids as Hugging Face assigns them: the model's id when the content is in its vocab (a
// byte-level vocab spells only printable ASCII the same way), else the next free one.
function withAdded(json, kind, vocabSize) {
  let next = vocabSize;
  json.added_tokens = addedTokens(kind).map((token) => {
    const inVocab = json.model.vocab[token.content];
    const ascii = /^[\x21-\x7e]+$/.test(token.content);
    const id = inVocab !== undefined && (ascii || json.pre_tokenizer?.type !== "ByteLevel") ? inVocab : next++;
    return { id, ...token };
  });
  return json;
}

function byteLevel() {
  const vocab = {};
  byteLevelAlphabet().forEach((c, i) => {
    vocab[c] = i;
  });
  const merges = addMerges(vocab, "\u0120");  // Ġ is the space byte
  const json = {
    version: "1.0",
    truncation: null,
    padding: null,
    normalizer: null,
    // Llama 3's split (digits in threes, so a long number is not one piece of one-digit tokens)
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        {
          type: "Split",
          pattern: { Regex: LLAMA3_SPLIT },
          behavior: "Isolated",
          invert: false,
        },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: null,
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: bpeModel(vocab, merges, {}),
  };
  return withAdded(json, "bytelevel", Object.keys(vocab).length);
}

// SentencePiece-style: <unk>, byte fallback tokens, "▁" and printable ASCII as characters.
function sentencePiece(kind) {
  const vocab = { "<unk>": 0 };
  for (let b = 0; b < 256; b++) {
    vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = Object.keys(vocab).length;
  }
  const chars = ["\u2581"];
  for (let c = 33; c < 127; c++) {
    chars.push(String.fromCharCode(c));
  }
  chars.push("é", "\n");
  for (const c of chars) {
    vocab[c] = Object.keys(vocab).length;
  }
  const merges = addMerges(vocab, "\u2581");
  const json = {
    version: "1.0",
    truncation: null,
    padding: null,
    normalizer: null,
    pre_tokenizer: null,
    post_processor: null,
    decoder: null,
    model: bpeModel(vocab, merges, { unk_token: "<unk>", fuse_unk: true, byte_fallback: true }),
  };
  if (kind === "llama2style") {
    json.normalizer = {
      type: "Sequence",
      normalizers: [
        { type: "Prepend", prepend: "\u2581" },
        { type: "Replace", pattern: { String: " " }, content: "\u2581" },
      ],
    };
  } else {
    json.pre_tokenizer = {
      type: "Metaspace",
      replacement: "\u2581",
      prepend_scheme: kind === "metaspace_first" ? "first" : "always",
      split: kind === "metaspace_first",
    };
  }
  return withAdded(json, kind, Object.keys(vocab).length);
}

// name -> the tokenizer.json object
export const FIXTURES = {
  flags_bytelevel: () => byteLevel(),
  flags_llama2style: () => sentencePiece("llama2style"),
  flags_metaspace: () => sentencePiece("metaspace"),
  flags_metaspace_first: () => sentencePiece("metaspace_first"),
};
