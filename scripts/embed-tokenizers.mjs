#!/usr/bin/env node
// embed-tokenizers.mjs: derives the compact, compressed tables that are built into the tokenmeter
// binary (proxy/tokenizer/embedded/<name>.tmtok.z) from the tiktoken npm package's encoder files,
// which scripts/fetch-tokenizers.sh fetches and checks against scripts/tokenizers.sha256.
//
//   node scripts/embed-tokenizers.mjs [--dir DIR]          regenerate the blobs and SOURCES
//   node scripts/embed-tokenizers.mjs --check [--dir DIR]  verify the committed blobs (exit 1 if not)
//
// DIR defaults to $TOKENMETER_TOKENIZER_DIR, else <repo>/.cache/tokenizers.
//
// --check decompresses each committed blob and compares it byte for byte with the table derived
// from the checksum-verified npm file now, so the blob in the repository provably is that file's
// content (zlib's compressed bytes may differ between zlib versions; the decompressed ones may not).
//
// Table format (little endian varints, see proxy/tokenizer/embedded.cpp, which reads it):
//   "TMTOK1" | varint len, name | varint len, pattern | varint count |
//   count x (varint rank gap, varint len, token bytes)   rank = previous rank + 1 + gap
// Blob: "TMZ1" | u32 LE length of the table | zlib stream of the table.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { deflateSync, inflateSync } from "node:zlib";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outDir = join(root, "proxy/tokenizer/embedded");
const manifest = join(root, "scripts/tokenizers.sha256");
const sources = [
  { name: "o200k_base", file: "o200k_base.json", package: "tiktoken@1.0.22" },
  { name: "cl100k_base", file: "cl100k_base.json", package: "tiktoken@1.0.22" },
];

const args = process.argv.slice(2);
const check = args.includes("--check");
const dirIndex = args.indexOf("--dir");
const dir =
  dirIndex >= 0 ? args[dirIndex + 1] : process.env.TOKENMETER_TOKENIZER_DIR || join(root, ".cache/tokenizers");

function die(message) {
  console.error(`embed-tokenizers: ${message}`);
  process.exit(1);
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

function expectedSum(file) {
  for (const line of readFileSync(manifest, "utf8").split("\n")) {
    const [sum, name] = line.trim().split(/\s+/);
    if (name === file) return sum;
  }
  die(`no checksum for ${file} in ${manifest}`);
}

function varint(out, value) {
  let v = value;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

function table(source) {
  const path = join(dir, source.file);
  let raw;
  try {
    raw = readFileSync(path);
  } catch {
    die(`${path} is missing: run scripts/fetch-tokenizers.sh first`);
  }
  const want = expectedSum(source.file);
  if (sha256(raw) !== want) die(`${path} does not match ${want} (scripts/tokenizers.sha256)`);
  const j = JSON.parse(raw.toString("utf8"));
  const entries = [];
  for (const line of j.bpe_ranks.split("\n")) {
    if (line === "") continue;
    const words = line.split(" ");
    let rank = Number(words[1]);
    for (const word of words.slice(2)) entries.push([rank++, Buffer.from(word, "base64")]);
  }
  entries.sort((a, b) => a[0] - b[0]);
  const head = [];
  const text = (s) => {
    const b = Buffer.from(s, "utf8");
    varint(head, b.length);
    head.push(...b);
  };
  head.push(...Buffer.from("TMTOK1", "ascii"));
  text(source.name);
  text(j.pat_str);
  varint(head, entries.length);
  const parts = [Buffer.from(head)];
  let previous = -1;
  for (const [rank, bytes] of entries) {
    if (rank <= previous) die(`${source.file}: rank ${rank} repeated`);
    const entry = [];
    varint(entry, rank - previous - 1);
    varint(entry, bytes.length);
    parts.push(Buffer.from(entry), bytes);
    previous = rank;
  }
  return { table: Buffer.concat(parts), sourceSum: want, count: entries.length };
}

function unpack(blob, file) {
  if (blob.subarray(0, 4).toString("ascii") !== "TMZ1") die(`${file}: not a TMZ1 blob`);
  const length = blob.readUInt32LE(4);
  const t = inflateSync(blob.subarray(8));
  if (t.length !== length) die(`${file}: header says ${length} bytes, stream has ${t.length}`);
  return t;
}

const lines = [
  "# The tokenizer tables built into tokenmeter, derived by scripts/embed-tokenizers.mjs.",
  "# name | npm package | file in the package | sha256 of that file | sha256 of the blob here",
];
let failures = 0;
for (const source of sources) {
  const { table: t, sourceSum, count } = table(source);
  const blobPath = join(outDir, `${source.name}.tmtok.z`);
  if (check) {
    let committed;
    try {
      committed = unpack(readFileSync(blobPath), blobPath);
    } catch (e) {
      die(`${blobPath}: ${e.message}`);
    }
    if (Buffer.compare(committed, t) !== 0) {
      console.error(`embed-tokenizers: ${blobPath} differs from the table derived from ${source.file}`);
      failures++;
    } else {
      console.log(`embed-tokenizers: ${source.name}: ${count} tokens, blob matches ${source.package} (${sourceSum})`);
    }
    continue;
  }
  const header = Buffer.alloc(8);
  header.write("TMZ1", 0, "ascii");
  header.writeUInt32LE(t.length, 4);
  const blob = Buffer.concat([header, deflateSync(t, { level: 9 })]);
  writeFileSync(blobPath, blob);
  lines.push(`${source.name} | ${source.package} | package/encoders/${source.file} | ${sourceSum} | ${sha256(blob)}`);
  console.log(`embed-tokenizers: ${blobPath}: ${count} tokens, ${t.length} bytes, ${blob.length} compressed`);
}
if (!check) writeFileSync(join(outDir, "SOURCES"), lines.join("\n") + "\n");
process.exit(failures === 0 ? 0 : 1);
