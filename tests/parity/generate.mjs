// generate.mjs: writes the expected token ids for the parity tests, from the reference
// tokenizers (reference.mjs), as JSON Lines, one file per tokenizer:
//   {"name": "...", "text": "...", "ids": [...]}                  valid UTF-8 input
//   {"name": "...", "hex": "...", "text": "...", "ids": [...]}    invalid UTF-8: the engine is fed
//       the bytes in "hex"; "text" is what a conformant UTF-8 decoder makes of them (U+FFFD per
//       maximal ill-formed subpart), the only form of those bytes the references accept.
// Cases: the short ones in cases.mjs, the whole corpus concatenated ("corpus/all"), every corpus
// file whole ("file/<name>"), every paragraph of every corpus file ("para/<name>#<n>", split
// at blank lines), and the code-space sweep ("sweep/U+XXXX..U+YYYY", see cases.mjs).
//
// Usage: node generate.mjs --out DIR [--tokenizers o200k_base,llama3,...] [--corrupt]
//   (the flags_* fixtures of fixtures.mjs only when named; they are written to DIR)
//                          [--special-tokens text|match]   (match: <name>.match.jsonl)
//   --corrupt also writes <name>.corrupted.jsonl, the negative control (see writeCorrupted).
import fs from "node:fs";
import path from "node:path";
import { TOKENIZERS, loadReference, tokenizerDir } from "./reference.mjs";
import { shortCases, invalidUtf8Cases, sweepCases } from "./cases.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);

function parseArgs(argv) {
  const args = {
    out: null,
    tokenizers: Object.keys(TOKENIZERS).filter((name) => !TOKENIZERS[name].fixture),
    corrupt: false,
    specialTokens: "text",
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--out") {
      args.out = argv[++i];
    } else if (argv[i] === "--special-tokens") {
      args.specialTokens = argv[++i];
      if (!["match", "text"].includes(args.specialTokens)) {
        throw new Error("--special-tokens is match or text");
      }
    } else if (argv[i] === "--corrupt") {
      args.corrupt = true;
    } else if (argv[i] === "--tokenizers") {
      args.tokenizers = argv[++i].split(",").filter(Boolean);
    } else {
      throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  if (!args.out) {
    throw new Error("usage: node generate.mjs --out DIR [--tokenizers a,b]");
  }
  return args;
}

// Corpus files, read as bytes and checked to be valid UTF-8 (invalid input lives in cases.mjs).
export function corpusFiles() {
  const dir = path.join(here, "corpus");
  const strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".txt"))
    .sort()
    .map((f) => {
      const bytes = fs.readFileSync(path.join(dir, f));
      let text;
      try {
        text = strict.decode(bytes);
      } catch {
        throw new Error(`corpus/${f} is not valid UTF-8; invalid input belongs in cases.mjs`);
      }
      return { name: f.replace(/\.txt$/, ""), text };
    });
}

export function allCases() {
  const cases = [...shortCases()];
  const files = corpusFiles();
  // The whole corpus as one text too: the longest input, every file boundary inside it.
  cases.push({ name: "corpus/all", text: files.map((f) => f.text).join("") });
  for (const file of files) {
    cases.push({ name: `file/${file.name}`, text: file.text });
    file.text.split(/\n\n/).forEach((para, i) => {
      if (para.length > 0) {
        cases.push({ name: `para/${file.name}#${i}`, text: para });
      }
    });
  }
  cases.push(...sweepCases());
  const lenient = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
  for (const c of invalidUtf8Cases()) {
    cases.push({ name: c.name, hex: Buffer.from(c.bytes).toString("hex"), text: lenient.decode(c.bytes) });
  }
  return cases;
}

// The negative control: three cases with their ids altered (one id changed, one dropped, one
// added) and the same three unaltered as "control/<name>". The checker must report exactly the
// altered ones, in every check, and pass the controls (parity.self_check runs it with
// --expect-failing-cases 3); it does not depend on the engine passing any other case.
const CORRUPTED_CASES = ["case/one_letter", "file/prose_en", "para/cjk#3"];

function writeCorrupted(lines, file) {
  const out = [];
  for (const line of lines) {
    const c = JSON.parse(line);
    const k = CORRUPTED_CASES.indexOf(c.name);
    if (k < 0) {
      continue;
    }
    out.push(JSON.stringify({ ...c, name: `control/${c.name}` }));
    if (k === 0) {
      c.ids[0] += 1;
    } else if (k === 1) {
      c.ids.pop();
    } else {
      c.ids.push(c.ids[0]);
    }
    out.push(JSON.stringify(c));
  }
  if (out.length !== 2 * CORRUPTED_CASES.length) {
    throw new Error(`negative control: found ${out.length / 2} of ${CORRUPTED_CASES.length} cases`);
  }
  fs.writeFileSync(file, out.join("\n") + "\n");
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  fs.mkdirSync(args.out, { recursive: true });
  const cases = allCases();
  const dir = tokenizerDir();
  for (const name of args.tokenizers) {
    const started = Date.now();
    // Fixtures (fixtures.mjs) are written next to the expected ids, where the checker finds them.
    const ref = loadReference(name, TOKENIZERS[name]?.fixture ? args.out : dir, args.specialTokens);
    const lines = [];
    let tokens = 0;
    for (const c of cases) {
      const ids = Array.from(await ref.encode(c.text));
      if (ref.encodeNoSpecial) {
        const other = ref.encodeNoSpecial(c.text);
        if (other.length !== ids.length || other.some((id, i) => id !== ids[i])) {
          throw new Error(`${name}: encode(text, [], []) differs from encode_ordinary on ${c.name}`);
        }
      }
      tokens += ids.length;
      const line = c.hex !== undefined ? { name: c.name, hex: c.hex, text: c.text, ids } : { name: c.name, text: c.text, ids };
      lines.push(JSON.stringify(line));
    }
    // text mode: <name>.jsonl; match mode: <name>.match.jsonl
    const file = path.join(args.out, args.specialTokens === "match" ? `${name}.match.jsonl` : `${name}.jsonl`);
    fs.writeFileSync(`${file}.tmp`, lines.join("\n") + "\n");
    fs.renameSync(`${file}.tmp`, file);
    if (args.corrupt) {
      writeCorrupted(lines, path.join(args.out, `${name}.corrupted.jsonl`));
    }
    console.log(
      `generate: ${name}: ${cases.length} cases, ${tokens} tokens -> ${file} (${Date.now() - started} ms)` +
        (ref.removedSpecialTokens && args.specialTokens === "text"
          ? `; ${ref.removedSpecialTokens.length} special added tokens treated as text`
          : ""),
    );
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err) => {
    console.error(`generate: ${err.message}`);
    process.exit(1);
  });
}
