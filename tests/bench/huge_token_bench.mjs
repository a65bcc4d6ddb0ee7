// Benchmark (not a test): how much one stream of huge "tokens" delays other streams on the same
// worker. One proxy with one worker thread and the o200k_base reference tokenizer in front of the
// simulator; probes are small streams with no simulated TTFT, so their client-side TTFT is the
// proxy's own delay. Probes run alone, then while a stream of 40 tokens of 1 MiB each (one
// pre-token of letters each, the worst case for BPE) passes, alternating; prints medians and p99.
//
//   node tests/bench/huge_token_bench.mjs            (after a build and scripts/fetch-tokenizers.sh)
//   TOKENMETER_BIN=… TOKENMETER_SIM=… TOKENMETER_TOKENIZER_DIR=… to override the defaults.
import './lib/bench_env.mjs';

const { startProxy, startSim, stopAll, request, chatBody, waitReady, sleep } =
  await import('../integration/lib/harness.mjs');
const { probe, probes, printProbes } = await import('./lib/probes.mjs');

const ROUNDS = Number(process.env.ROUNDS || 5);
const PROBES_PER_ROUND = 20;

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
  console.log(`huge-token stream: 40 x 1 MiB tokens, ${ROUNDS} rounds, ${(hugeMs / ROUNDS).toFixed(0)} ms per stream`);
  console.log(`normalized output tokens counted: ${m.value('tokenmeter_normalized_tokens_total', { type: 'output' })}`);
  printProbes(alone, beside, 'beside the huge stream');
} finally {
  await stopAll();
}
