// make_corpus.mjs: writes the synthesized corpus files (corpus/synth_*.txt), the ones whose
// content is easier to generate than to type: whitespace runs with CRLF, long numbers, emoji
// sequences, special-token text in running text, unusual whitespace and combining marks, and
// machine-made text (logs, base64, hashes, URLs). A seeded
// generator, so the files are the same on every run; they are checked in, and this script is
// how they were made (run it again after changing it: node tests/parity/make_corpus.mjs).
import fs from "node:fs";
import path from "node:path";

const here = path.dirname(new URL(import.meta.url).pathname);
const out = path.join(here, "corpus");

// xorshift32: small, deterministic, good enough to pick among alternatives.
function rng(seed) {
  let s = seed >>> 0 || 1;
  const next = () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
  return {
    int: (n) => next() % n,
    pick: (xs) => xs[next() % xs.length],
  };
}

const words = (
  "tide ledger harbour lamp keeper evening water gauge measure record boat quay ferry wind " +
  "storm gull crab fog bell buoy stone wall chart station signal beacon rope anchor sail net"
).split(" ");

function whitespaceFile() {
  const r = rng(1);
  const gaps = [" ", "  ", "   ", "    ", "\t", "\t\t", " \t", "\t ", "\n", "\n\n", "\r\n",
    "\r\n\r\n", " \n", "  \r\n", "\n\t", "\n    ", "\r", "        ", " \n\n ", "\n \n"];
  const parts = [];
  for (let i = 0; i < 1500; i++) {
    parts.push(r.pick(words));
    parts.push(r.pick(gaps));
    if (r.int(40) === 0) {
      parts.push(" ".repeat(1 + r.int(120)));
    }
    if (r.int(60) === 0) {
      parts.push("\n".repeat(1 + r.int(30)));
    }
    if (r.int(60) === 0) {
      parts.push("\r\n".repeat(1 + r.int(10)));
    }
    if (r.int(80) === 0) {
      parts.push("\t".repeat(1 + r.int(16)));
    }
  }
  // Windows-style text block and an indented code block with trailing spaces.
  parts.push("\r\nWINDOWS LINE ONE\r\nline two   \r\n\r\n\tindented\r\n");
  parts.push("\n\nfunction f() {\n    return 1;    \n}\n\n\n");
  return parts.join("");
}

function numbersFile() {
  const r = rng(2);
  const lines = [];
  for (let i = 0; i < 400; i++) {
    const len = 1 + r.int(40);
    let digits = String(1 + r.int(9));
    while (digits.length < len) {
      digits += String(r.int(10));
    }
    const forms = [
      digits,
      `${digits}.${r.int(1000)}`,
      `-${digits}`,
      digits.replace(/\B(?=(\d{3})+(?!\d))/g, ","),
      digits.replace(/\B(?=(\d{3})+(?!\d))/g, " "),
      `${r.pick(words)}${digits}`,
      `${digits}${r.pick(words)}`,
      `0x${Number(r.int(1 << 30)).toString(16)}`,
      `${r.int(24)}:${String(r.int(60)).padStart(2, "0")}:${String(r.int(60)).padStart(2, "0")}`,
      `${1900 + r.int(200)}-${String(1 + r.int(12)).padStart(2, "0")}-${String(1 + r.int(28)).padStart(2, "0")}`,
      `${r.int(100)}%`,
      `$${r.int(100000)}.${String(r.int(100)).padStart(2, "0")}`,
      `v${r.int(10)}.${r.int(30)}.${r.int(200)}`,
      `+353 ${r.int(100)} ${r.int(1000)} ${r.int(10000)}`,
      `${r.int(1000)}e${r.int(40) - 20}`,
    ];
    lines.push(`${r.pick(forms)} ${r.pick(forms)}${r.pick([" ", ", ", "; ", "\n", " = ", "/"])}${r.pick(forms)}`);
  }
  lines.push("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651328230664709384460955058223172535940812848111745028410270193852110555964462294895493038196");
  lines.push("1".repeat(257) + " " + "0".repeat(100) + " " + "9876543210".repeat(12));
  return lines.join("\n") + "\n";
}

function emojiFile() {
  const r = rng(3);
  const base = ["👍", "👋", "🙌", "👏", "🤝", "💪", "🧑", "👩", "👨", "🧒", "🙋", "🤷", "🏃", "🚴", "🧘"];
  const tones = ["", "\u{1f3fb}", "\u{1f3fc}", "\u{1f3fd}", "\u{1f3fe}", "\u{1f3ff}"];
  const zwjTails = ["💻", "🔬", "🎨", "🚀", "🍳", "🌾", "🏫", "⚕️", "⚖️", "✈️", "🦰", "🦱", "🦳", "🦲"];
  const flags = ["IE", "JP", "BR", "IN", "KR", "TH", "EG", "UA", "US", "GB", "DE", "FR", "CN", "SA", "NG", "ZA", "MX", "CA", "AU", "NZ"];
  const flag = (cc) => String.fromCodePoint(...[...cc].map((c) => 0x1f1e6 + c.charCodeAt(0) - 65));
  const simple = ["😀", "😂", "🥲", "😍", "🤔", "😴", "🤯", "🥳", "😎", "🙃", "🎉", "🔥", "✨", "🌊", "⚓", "🦀", "🐍", "☕", "🍞", "⭐", "❤️", "💔", "✅", "❌", "⚠️", "ℹ️", "🆗", "🔟", "↩️", "〰️"];
  const families = [
    "👨\u200d👩\u200d👧\u200d👦",
    "👩\u200d👩\u200d👦",
    "👨\u200d👨\u200d👧\u200d👧",
    "🧑\u200d🤝\u200d🧑",
    "👩\u200d❤️\u200d👨",
    "🏳️\u200d🌈",
    "🏳️\u200d⚧️",
    "🏴\u200d☠️",
    "🐕\u200d🦺",
    "🐻\u200d❄️",
    "❤️\u200d🔥",
    "😶\u200d🌫️",
    "🏴\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}",
    "🏴\u{e0067}\u{e0062}\u{e0077}\u{e006c}\u{e0073}\u{e007f}",
  ];
  const parts = [];
  for (let i = 0; i < 900; i++) {
    switch (r.int(7)) {
      case 0:
        parts.push(r.pick(base) + r.pick(tones));
        break;
      case 1:
        parts.push(r.pick(["🧑", "👩", "👨"]) + r.pick(tones) + "\u200d" + r.pick(zwjTails));
        break;
      case 2:
        parts.push(flag(r.pick(flags)));
        break;
      case 3:
        parts.push(r.pick(families));
        break;
      case 4:
        parts.push(`${r.pick(words)} ${r.pick(simple)}`);
        break;
      case 5:
        parts.push(`${r.int(10)}\ufe0f\u20e3`);
        break;
      default:
        parts.push(r.pick(simple).repeat(1 + r.int(5)));
    }
    parts.push(r.pick(["", " ", " ", "  ", "\n", ", ", "! ", ".\n\n"]));
  }
  return parts.join("") + "\n";
}

function specialTextFile() {
  const r = rng(4);
  const specials = ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
    "<|eom_id|>", "<|python_tag|>", "<|reserved_special_token_5|>", "<|im_start|>", "<|im_end|>",
    "<|vision_start|>", "<|image_pad|>", "<tool_call>", "</tool_call>", "<think>", "</think>", "<s>", "</s>",
    "<unk>", "<pad>", "<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<mask>", "[multimodal]",
    "<start_of_image>", "<unused0>", "<unused42>", "[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<table>",
    "</td>", "<h1>", "<|", "|>", "<||>", "< |endoftext| >"];
  const lines = [];
  for (let i = 0; i < 600; i++) {
    const a = r.pick(words);
    const b = r.pick(words);
    const forms = [
      `${a} ${r.pick(specials)} ${b}`,
      `${a}${r.pick(specials)}${b}`,
      `${r.pick(specials)}${r.pick(specials)}`,
      `"${r.pick(specials)}"`,
      `\`${r.pick(specials)}\` ends the text`,
      `${r.pick(specials)}\n${a}`,
      `${a}\n\n${r.pick(specials)}`,
      ` ${r.pick(specials)}  `,
      `${r.pick(specials).toUpperCase()} ${b}`,
    ];
    lines.push(r.pick(forms));
  }
  lines.push("The tokenizer docs say <|endoftext|> marks a document boundary; in this sentence it is just text.");
  lines.push("<|im_start|>user\nWhat is <think>?<|im_end|>\n<|im_start|>assistant\n<think>\nThe user asks about a tag.\n</think>\n\nIt's a tag.<|im_end|>");
  return lines.join(r.pick(["\n", "\n", " "])) + "\n";
}

function unusualWhitespaceAndCombiningFile() {
  const r = rng(5);
  const spaces = ["\u00a0", "\u3000", "\u2002", "\u2003", "\u2009", "\u200a", "\u202f", "\u205f", "\u1680",
    "\u2007", "\u2028", "\u2029", "\u0085", "\u000b", "\u000c", "\u200b", "\ufeff", " \u00a0", "\u00a0 ", "\u3000\u3000"];
  const combining = ["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030a", "\u0323", "\u0327", "\u0328",
    "\u0331", "\u0338", "\u034f", "\u0361", "\u20d7", "\u093c", "\u094d", "\u0e31", "\u0e48", "\u05b7", "\u064b"];
  const bases = ["a", "e", "i", "o", "u", "n", "c", "A", "E", "O", "s", "z", "\u0915", "\u0e01", "\u05d0", "\u0628", "x", "1", " ", "-"];
  const parts = [];
  for (let i = 0; i < 1400; i++) {
    let w = "";
    const len = 1 + r.int(8);
    for (let j = 0; j < len; j++) {
      w += r.pick(bases);
      const marks = r.int(4) === 0 ? r.int(4) : 0;
      for (let k = 0; k < marks; k++) {
        w += r.pick(combining);
      }
    }
    parts.push(w);
    parts.push(r.int(3) === 0 ? r.pick(spaces) : " ");
    if (r.int(50) === 0) {
      parts.push("\n");
    }
  }
  // The same words precomposed and decomposed, so NFC has something to do.
  parts.push("\nprecomposed: \u00e9t\u00e9 \u00fcber \u00e5ngstr\u00f6m \u1ec7 \u01fa\n");
  parts.push("decomposed:  e\u0301te\u0301 u\u0308ber a\u030angstro\u0308m e\u0323\u0302 A\u030a\u0301\n");
  parts.push("hangul jamo: \u1100\u1161\u11a8 \u1102\u1165 \u1103\u1169\u11af \u1112\u1161\u11ab\u1100\u1173\u11af\n");
  return parts.join("");
}

// Machine-made text models often echo: log lines, stack traces, base64 and hex blobs, UUIDs,
// hashes, URLs with query strings, CSV. Long unbroken pieces (base64) matter for streaming.
function machineTextFile() {
  const r = rng(6);
  const hex = (n) => Array.from({ length: n }, () => "0123456789abcdef"[r.int(16)]).join("");
  const b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const b64 = (n) => Array.from({ length: n }, () => b64chars[r.int(64)]).join("");
  const levels = ["DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR"];
  const services = ["gateway", "billing-worker", "tide-api", "auth", "scheduler"];
  const lines = [];
  for (let i = 0; i < 250; i++) {
    const ts = `2024-11-${String(1 + r.int(28)).padStart(2, "0")}T${String(r.int(24)).padStart(2, "0")}:${String(r.int(60)).padStart(2, "0")}:${String(r.int(60)).padStart(2, "0")}.${String(r.int(1000)).padStart(3, "0")}Z`;
    switch (r.int(9)) {
      case 0:
        lines.push(`${ts} ${r.pick(levels)} [${r.pick(services)}] request_id=${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)} status=${r.pick([200, 201, 204, 400, 401, 404, 429, 500, 503])} latency_ms=${(r.int(100000) / 100).toFixed(2)} bytes=${r.int(1 << 20)}`);
        break;
      case 1:
        lines.push(`${ts} ERROR [${r.pick(services)}] unhandled exception\nTraceback (most recent call last):\n  File "/srv/app/${r.pick(words)}.py", line ${r.int(900)}, in handle\n    return self.${r.pick(words)}(payload)\nKeyError: '${r.pick(words)}_id'`);
        break;
      case 2:
        lines.push(`data:image/png;base64,${b64(40 + r.int(400))}${r.pick(["", "=", "=="])}`);
        break;
      case 3:
        lines.push(`sha256:${hex(64)}  ${r.pick(words)}-${r.int(10)}.${r.int(30)}.${r.int(100)}.tar.gz`);
        break;
      case 4:
        lines.push(`https://api.example.org/v${1 + r.int(3)}/${r.pick(words)}s/${r.int(100000)}?${r.pick(words)}=${hex(6)}&page=${r.int(50)}&sort=-created_at&fields=id,name,${r.pick(words)}`);
        break;
      case 5:
        lines.push(`${r.int(100000)},${r.pick(words)},"${r.pick(words)}, ${r.pick(words)}",${(r.int(1000000) / 1000).toFixed(3)},${r.pick(["true", "false", ""])},${ts}`);
        break;
      case 6:
        lines.push(`0x${hex(8)}: ${Array.from({ length: 8 }, () => hex(4)).join(" ")}  ${Array.from({ length: 16 }, () => String.fromCharCode(33 + r.int(94))).join("")}`);
        break;
      case 7:
        lines.push(`    at ${r.pick(words)}.${r.pick(words)} (/app/node_modules/${r.pick(words)}/dist/index.js:${r.int(5000)}:${r.int(80)})`);
        break;
      default:
        lines.push(`eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.${b64(60 + r.int(80)).replace(/[+/]/g, "_")}.${b64(43).replace(/[+/]/g, "-")}`);
    }
  }
  return lines.join("\n") + "\n";
}

const files = {
  "synth_whitespace.txt": whitespaceFile(),
  "synth_numbers.txt": numbersFile(),
  "synth_emoji.txt": emojiFile(),
  "synth_special_text.txt": specialTextFile(),
  "synth_unusual_ws_combining.txt": unusualWhitespaceAndCombiningFile(),
  "synth_machine_text.txt": machineTextFile(),
};

for (const [name, text] of Object.entries(files)) {
  fs.writeFileSync(path.join(out, name), text);
  console.log(`${name}: ${Buffer.byteLength(text)} bytes`);
}
