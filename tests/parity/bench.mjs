// bench.mjs: single-thread throughput of the reference tokenizers (tiktoken WASM, a native build
// of tiktoken, Hugging Face tokenizers native addon) on the same documents and rounds as
// tokenizer_bench.cpp: one round
// encodes every corpus/*.txt file, `repeat` times, one call per file; the median round counts.
// Prints one JSON object per tokenizer per line (scripts/bench-tokenizer.sh makes the table).
//
// Usage: node bench.mjs [--tokenizers a,b] [--rounds N] [--repeat K]
// Run it with UV_THREADPOOL_SIZE=1 and TOKENIZERS_PARALLELISM=false (the script does): the HF
// addon encodes on libuv's pool, one call at a time here.
import fs from "node:fs";
import path from "node:path";
import { TOKENIZERS, loadNativeTiktoken, loadReference } from "./reference.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);

function parseArgs(argv) {
  const args = { tokenizers: Object.keys(TOKENIZERS), rounds: 7, repeat: 4 };
  for (let i = 0; i < argv.length; i += 2) {
    const value = argv[i + 1];
    if (argv[i] === "--tokenizers") {
      args.tokenizers = value.split(",").filter(Boolean);
    } else if (argv[i] === "--rounds") {
      args.rounds = Math.max(1, Number(value));
    } else if (argv[i] === "--repeat") {
      args.repeat = Math.max(1, Number(value));
    } else {
      throw new Error(`unknown argument ${argv[i]}`);
    }
  }
  return args;
}

function median(xs) {
  const v = [...xs].sort((a, b) => a - b);
  const n = v.length;
  return n % 2 === 1 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const dir = path.join(here, "corpus");
  const docs = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".txt"))
    .sort()
    .map((f) => fs.readFileSync(path.join(dir, f)).toString("utf8"));
  const corpusBytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);
  const roundBytes = corpusBytes * args.repeat;
  const results = [];
  for (const name of args.tokenizers) {
    const loadStart = process.hrtime.bigint();
    const ref = loadReference(name);
    const loadS = Number(process.hrtime.bigint() - loadStart) / 1e9;
    results.push(await bench(ref, ref.kind === "tiktoken" ? "tiktoken-wasm" : "hf-tokenizers", loadS));
    if (ref.kind === "tiktoken") {
      const native = loadNativeTiktoken(name);
      if (native) {
        results.push(await bench(native, "tiktoken-native", 0));
      } else {
        console.error(`bench: no native tiktoken for ${name} (optional package not installed)`);
      }
    }
  }

  async function bench(ref, impl, loadS) {
    const times = [];
    const cpuTimes = [];
    let tokens = 0;
    for (let round = 0; round <= args.rounds; round++) {
      tokens = 0;
      const start = process.hrtime.bigint();
      // Process CPU time (user + system, all threads): the HF addon and native tiktoken encode
      // on a libuv pool thread while the main thread waits, so this is the work itself, and it
      // is far less disturbed than wall time by other processes on a shared machine.
      const cpuStart = process.cpuUsage();
      for (let k = 0; k < args.repeat; k++) {
        for (const d of docs) {
          // tiktoken WASM is synchronous; awaiting it would only add a microtask per call.
          tokens += ref.encodeSync ? ref.encodeSync(d).length : (await ref.encode(d)).length;
        }
      }
      const s = Number(process.hrtime.bigint() - start) / 1e9;
      const cpu = process.cpuUsage(cpuStart);
      if (round > 0) {
        times.push(s);
        cpuTimes.push((cpu.user + cpu.system) / 1e6);
      }
    }
    const med = median(times);
    const cpuMed = median(cpuTimes);
    const row = {
      impl,
      tokenizer: ref.name,
      bytes: roundBytes,
      tokens,
      rounds: args.rounds,
      median_s: Number(med.toFixed(6)),
      mb_s: Number((roundBytes / med / 1e6).toFixed(3)),
      tokens_s: Math.round(tokens / med),
      cpu_median_s: Number(cpuMed.toFixed(6)),
      cpu_mb_s: Number((roundBytes / cpuMed / 1e6).toFixed(3)),
      cpu_tokens_s: Math.round(tokens / cpuMed),
      load_s: Number(loadS.toFixed(3)),
    };
    console.log(JSON.stringify(row));
    return row;
  }
}

main().catch((err) => {
  console.error(`bench: ${err.message}`);
  process.exit(1);
});
