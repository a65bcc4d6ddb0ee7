// Benchmark (not a test): how much the counting of long prompts delays other streams on the same
// worker. One proxy with one worker thread, the o200k_base reference tokenizer and cl100k_base
// as the model's own, counting every prompt (count_input_tokens: always), in front of the
// simulator. Probes are small streams with no simulated TTFT, so their client-side TTFT is the
// proxy's own delay. Probes run alone, then while requests with an 8 MiB prompt of one shape
// (CJK without spaces by default: the slowest to count) pass one after another; prints the
// probes' medians and p99, and the proxy's CPU per long request.
//
//   node tests/bench/long_prompt_bench.mjs     (after a build and scripts/fetch-tokenizers.sh)
//   SHAPE=cjk|words|spaces|digits  PROMPT_MIB=8  ROUNDS=5
//   TOKENMETER_BIN=… TOKENMETER_SIM=… TOKENMETER_TOKENIZER_DIR=… to override the defaults.
import fs from 'node:fs';
import './lib/bench_env.mjs';

const { startProxy, startSim, stopAll, request, chatBody, waitReady, sleep } =
  await import('../integration/lib/harness.mjs');
const { probes, printProbes } = await import('./lib/probes.mjs');

const ROUNDS = Number(process.env.ROUNDS || 5);
const PROMPT_BYTES = Number(process.env.PROMPT_MIB || 8) * 1024 * 1024;
const SHAPE = process.env.SHAPE || 'cjk';
const PROBES_PER_ROUND = 20;

function promptOf(shape, bytes) {
  const parts = [];
  let size = 0;
  for (let i = 0; size < bytes; ++i) {
    let unit;
    if (shape === 'cjk') unit = String.fromCodePoint(0x4e00 + (i * 7919) % 3000);
    else if (shape === 'spaces') unit = ' ';
    else if (shape === 'digits') unit = String(i % 10);
    else unit = ['the ', 'report ', 'shows ', 'growth ', 'in ', 'every ', 'region. '][i % 7];
    parts.push(unit);
    size += Buffer.byteLength(unit);
  }
  return parts.join('');
}

function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime + stime, in clock ticks
}

try {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    args: ['--threads', '1'],
    config: [
      'reference_tokenizer: o200k_base',
      'count_input_tokens: always',
      'limits:',
      `  max_request_body_bytes: ${PROMPT_BYTES + (1 << 20)}`,
      'models:',
      '  long:',
      '    tokenizer: cl100k_base',
      'readiness:',
      '  probe_interval: 1h',
      '',
    ].join('\n'),
  });
  await waitReady(proxy).catch(() => {});
  const body = chatBody('long', { stream: false, content: promptOf(SHAPE, PROMPT_BYTES) });
  await probes(proxy.port, 10, []);  // warm-up
  const alone = [];
  const beside = [];
  let longRequests = 0;
  let longCpu = 0;
  for (let round = 0; round < ROUNDS; ++round) {
    await probes(proxy.port, PROBES_PER_ROUND, alone);
    // Long requests one after another while the probes run, for as long as the probes take.
    let stop = false;
    const longs = (async () => {
      while (!stop) {
        const before = cpuSeconds(proxy.child.proc.pid);
        const res = await request({
          port: proxy.port, body,
          headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '4' },
          keepBody: false, timeoutMs: 120_000,
        });
        if (res.status !== 200 || !res.complete) throw new Error(`long request failed: ${res.status} ${res.error}`);
        longCpu += cpuSeconds(proxy.child.proc.pid) - before;
        longRequests += 1;
      }
    })();
    await sleep(50);
    await probes(proxy.port, PROBES_PER_ROUND, beside);
    stop = true;
    await longs;
  }
  const m = await proxy.metrics();
  console.log(`long prompts: ${(PROMPT_BYTES / 1048576).toFixed(0)} MiB of ${SHAPE}, ${longRequests} requests over ${ROUNDS} rounds, ` +
    `${(1000 * longCpu / longRequests).toFixed(0)} ms of proxy CPU per long request (probes included)`);
  console.log(`input tokens counted by the reference tokenizer: ${m.value('tokenmeter_normalized_tokens_total', { type: 'input' })}`);
  printProbes(alone, beside, 'beside long prompts');
} finally {
  await stopAll();
}
