// Benchmark (not a test): how much one stream of huge "tokens" delays other streams on the same
// worker. One proxy with one worker thread and the o200k_base reference tokenizer in front of the
// simulator; probes are small streams with no simulated TTFT, so their client-side TTFT is the
// proxy's own delay. Probes run alone, then while a stream of 40 tokens of 1 MiB each (one
// pre-token of letters each, the worst case for BPE) passes, alternating; prints medians and p99.
//
//   node tests/bench/huge_token_bench.mjs            (after a build and scripts/fetch-tokenizers.sh)
//   TOKENMETER_BIN=… TOKENMETER_SIM=… TOKENMETER_TOKENIZER_DIR=… to override the defaults.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
process.env.TOKENMETER_BIN ||= path.join(root, 'build/proxy/tokenmeter');
process.env.TOKENMETER_SIM ||= path.join(root, 'build/tests/sim/tokenmeter-sim');
process.env.TOKENMETER_TOKENIZER_DIR ||= path.join(root, '.cache/tokenizers');

const { startProxy, startSim, stopAll, request, chatBody, waitReady, sleep } =
  await import('../integration/lib/harness.mjs');

const ROUNDS = Number(process.env.ROUNDS || 5);
const PROBES_PER_ROUND = 20;

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

async function probe(port) {
  const res = await request({
    port,
    body: chatBody('probe', { content: 'hi' }),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '4' },
    timeoutMs: 30_000,
  });
  if (res.status !== 200 || !res.complete) throw new Error(`probe failed: ${res.status} ${res.error}`);
  return res.firstDataAt - res.startedAt;
}

async function probes(port, n, out) {
  for (let i = 0; i < n; ++i) {
    out.push(await probe(port));
    await sleep(5);
  }
}

try {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    args: ['--threads', '1'],
    config: 'reference_tokenizer: o200k_base\nreadiness:\n  probe_interval: 1h\n',
  });
  await waitReady(proxy).catch(() => {});
  await probes(proxy.port, 10, []);  // warm-up
  const alone = [];
  const beside = [];
  let hugeMs = 0;
  for (let round = 0; round < ROUNDS; ++round) {
    await probes(proxy.port, PROBES_PER_ROUND, alone);
    const started = Date.now();
    const huge = request({
      port: proxy.port,
      body: chatBody('huge', { content: 'go' }),
      headers: {
        'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '40',
        'x-sim-pad-bytes': String(1 << 20),
      },
      keepBody: false,
      timeoutMs: 120_000,
    });
    let done = false;
    huge.then(() => { done = true; hugeMs += Date.now() - started; });
    while (!done) {
      beside.push(await probe(proxy.port));
      await sleep(5);
    }
    const res = await huge;
    if (res.status !== 200 || !res.complete) throw new Error(`huge stream failed: ${res.status}`);
  }
  const m = await proxy.metrics();
  const fmt = (v) => v.toFixed(2).padStart(8);
  console.log(`huge-token stream: 40 x 1 MiB tokens, ${ROUNDS} rounds, ${(hugeMs / ROUNDS).toFixed(0)} ms per stream`);
  console.log(`normalized output tokens counted: ${m.value('tokenmeter_normalized_tokens_total', { type: 'output' })}`);
  console.log('probe TTFT (ms)              n    p50      p99      max');
  console.log(`alone                   ${String(alone.length).padStart(6)} ${fmt(quantile(alone, 0.5))} ${fmt(quantile(alone, 0.99))} ${fmt(Math.max(...alone))}`);
  console.log(`beside the huge stream  ${String(beside.length).padStart(6)} ${fmt(quantile(beside, 0.5))} ${fmt(quantile(beside, 0.99))} ${fmt(Math.max(...beside))}`);
  console.log(`added p50: ${(quantile(beside, 0.5) - quantile(alone, 0.5)).toFixed(2)} ms, added p99: ${(quantile(beside, 0.99) - quantile(alone, 0.99)).toFixed(2)} ms`);
} finally {
  await stopAll();
}
