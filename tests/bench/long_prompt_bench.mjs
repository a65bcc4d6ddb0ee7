// Benchmark (not a test): how much requests with long prompts delay other streams on the same
// worker. One proxy with one worker thread, the o200k_base reference tokenizer and cl100k_base
// as the model's own, counting every prompt (count_input_tokens: always), in front of the
// simulator. Probes are small streams with no simulated TTFT. They run alone, then while
// requests with an 8 MiB prompt of one shape (CJK without spaces by default: the slowest to
// count) pass one after another; both straight to the simulator and through the proxy, so what
// the simulator itself takes for a long body (it reads and parses it too) is measured apart from
// what the proxy adds. The long requests are sent from a worker thread of their own, so building
// and writing 8 MiB bodies does not pause the probes' timing; the simulator runs three threads,
// so its parse of a long body does not hold the probes' answers.
//
//   node tests/bench/long_prompt_bench.mjs     (after a build and scripts/fetch-tokenizers.sh)
//   SHAPE=cjk|words|spaces|digits  PROMPT_MIB=8  ROUNDS=5
//   PIN=1: the proxy's worker thread (tm-worker-0) on CPU 0 alone, and everything else this
//     benchmark runs (the proxy's other threads, the simulator, Node) on the other CPUs: shows
//     what is left of the neighbours' tail when the worker does not share its core with them.
//     Needs 2 CPUs or more and taskset (util-linux); other processes on the machine are not
//     moved, so run it on an otherwise idle machine.
//   TOKENMETER_BIN=… TOKENMETER_SIM=… TOKENMETER_TOKENIZER_DIR=… to override the defaults.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import './lib/bench_env.mjs';

const { startProxy, startSim, stopAll, request, chatBody, waitReady, sleep } =
  await import('../integration/lib/harness.mjs');
const { probes, printProbes, quantile } = await import('./lib/probes.mjs');

const ROUNDS = Number(process.env.ROUNDS || 5);
const PROMPT_BYTES = Number(process.env.PROMPT_MIB || 8) * 1024 * 1024;
const SHAPE = process.env.SHAPE || 'cjk';
const PROBES_PER_ROUND = 60;
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

// PIN=1: the thread named tm-worker-0 of `proxyPid` on CPU 0; every other thread of it, of
// `otherPids` and of this process on CPUs 1..n-1.
function pinWorker(proxyPid, otherPids) {
  const cpus = os.cpus().length;
  if (cpus < 2) throw new Error('PIN=1 needs 2 CPUs or more');
  const rest = `1-${cpus - 1}`;
  for (const pid of [...otherPids, process.pid]) {
    execFileSync('taskset', ['-a', '-p', '-c', rest, String(pid)], { stdio: 'ignore' });
  }
  let pinned = 0;
  for (const tid of fs.readdirSync(`/proc/${proxyPid}/task`)) {
    const name = fs.readFileSync(`/proc/${proxyPid}/task/${tid}/comm`, 'utf8').trim();
    const worker = name === 'tm-worker-0';
    execFileSync('taskset', ['-p', '-c', worker ? '0' : rest, tid], { stdio: 'ignore' });
    if (worker) pinned += 1;
  }
  if (pinned !== 1) throw new Error(`PIN=1: found ${pinned} threads named tm-worker-0 in the proxy`);
  console.log(`pinned: the proxy's worker on CPU 0; its other threads, the simulator and Node on CPUs ${rest}`);
}

function cpuSeconds(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;  // utime + stime, in clock ticks
}

// The long-request sender, on its own thread: one request after another to workerData.port
// until told to stop; reports each request's proxy CPU (when a pid is given).
async function sendLongRequests() {
  const body = Buffer.from(JSON.stringify(chatBody('long', { stream: false, content: promptOf(SHAPE, PROMPT_BYTES) })));
  let stop = false;
  let pid = 0;
  let port = 0;
  parentPort.on('message', (m) => {
    if (m.stop) stop = true;
    if (m.port) { port = m.port; pid = m.pid || 0; stop = false; run(); }
  });
  parentPort.postMessage({ ready: true });
  async function run() {
    let n = 0;
    let cpu = 0;
    while (!stop) {
      const before = pid ? cpuSeconds(pid) : 0;
      const res = await request({
        port, body,
        headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '4' },
        keepBody: false, timeoutMs: 120_000,
      });
      if (res.status !== 200 || !res.complete) throw new Error(`long request failed: ${res.status} ${res.error}`);
      if (pid) cpu += cpuSeconds(pid) - before;
      n += 1;
    }
    parentPort.postMessage({ done: true, n, cpu });
  }
}

// Probes alone and beside long requests to `port`, ROUNDS times.
async function measure(sender, port, pid) {
  const alone = [];
  const beside = [];
  let requests = 0;
  let cpu = 0;
  await probes(port, 10, []);  // warm-up
  for (let round = 0; round < ROUNDS; ++round) {
    await probes(port, PROBES_PER_ROUND, alone);
    const done = new Promise((resolve) => sender.once('message', resolve));
    sender.postMessage({ port, pid });
    await sleep(50);
    await probes(port, PROBES_PER_ROUND, beside);
    sender.postMessage({ stop: true });
    const result = await done;
    requests += result.n;
    cpu += result.cpu;
    await sleep(200);  // the last long request's count ends before the next "alone"
  }
  return { alone, beside, requests, cpu };
}

if (!isMainThread) {
  await sendLongRequests();
} else {
  try {
    const sim = await startSim(['--threads', '3']);
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
    if (process.env.PIN === '1') pinWorker(proxy.child.proc.pid, [sim.child.proc.pid]);
    const sender = new Worker(new URL(import.meta.url));
    await new Promise((resolve) => sender.once('message', resolve));
    const direct = await measure(sender, sim.port, 0);
    const through = await measure(sender, proxy.port, proxy.child.proc.pid);
    await sender.terminate();
    const m = await proxy.metrics();
    console.log(`long prompts: ${(PROMPT_BYTES / 1048576).toFixed(0)} MiB of ${SHAPE}; ` +
      `${direct.requests} straight to the simulator, ${through.requests} through the proxy over ${ROUNDS} rounds each, ` +
      `${(1000 * through.cpu / through.requests).toFixed(0)} ms of proxy CPU per long request (probes included)`);
    console.log(`input tokens counted by the reference tokenizer: ${m.value('tokenmeter_normalized_tokens_total', { type: 'input' })}`);
    console.log('\nstraight to the simulator');
    printProbes(direct.alone, direct.beside, 'beside long prompts');
    console.log('\nthrough the proxy');
    printProbes(through.alone, through.beside, 'beside long prompts');
    const added = (q) => (quantile(through.beside, q) - quantile(direct.beside, q)).toFixed(2);
    console.log(`\nbeside long prompts, the proxy adds p50 ${added(0.5)} ms and p99 ${added(0.99)} ms to the simulator's own TTFT`);
    const shift = (q) => (quantile(through.beside, q) - quantile(through.alone, q)).toFixed(2);
    console.log(`through the proxy, beside long prompts against alone: p50 ${shift(0.5)} ms, p99 ${shift(0.99)} ms`);
  } finally {
    await stopAll();
  }
}
