// The soak driver behind scripts/soak.sh (not a test): for --minutes N it keeps one proxy busy
// with normal streaming traffic from the simulator and, on the same proxy, the hostile client
// bytes of every case in this folder; a second lane replays every case (scripted upstream bytes
// included) against proxies in front of a recording upstream and checks each outcome as the
// adversarial test does. Every 10 s it samples the main proxy's resident memory from
// /proc/PID/status. At the end it prints what was sent, errors by kind, whether the proxies stayed
// up, and the RSS first/last/max, and exits 1 if a proxy died or the main proxy's RSS grew more
// than --rss-growth percent (default 20) after the first minute.
//
//   TOKENMETER_BIN=build/proxy/tokenmeter TOKENMETER_SIM=build/tests/sim/tokenmeter-sim \
//     node tests/integration/adversarial/soak.mjs --minutes 30 [--concurrency 8] \
//     [--only REGEX] [--skip REGEX] [--rss-growth 20]
//
// A proxy or simulator that dies is restarted (so the run shows everything that goes wrong) and
// counted; any proxy death fails the run. The simulator is not what is soaked: its deaths are
// reported, not failed on.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  request, sleep, startProxy, startSim, stopAll, waitReady,
} from '../lib/harness.mjs';
import {
  awaitPlan, caseProblems, exchange, expectations, loadCases, proxyConfig, renderClient,
  renderResponses, startRecordingUpstream,
} from '../lib/recording_upstream.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

function parseArgs(argv) {
  const options = { minutes: 30, concurrency: 8, only: undefined, skip: undefined, rssGrowth: 20 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s);
    const value = () => (inline !== undefined ? inline : argv[++i]);
    if (flag === '--minutes') options.minutes = Number(value());
    else if (flag === '--concurrency') options.concurrency = Number(value());
    else if (flag === '--only') options.only = new RegExp(value());
    else if (flag === '--skip') options.skip = new RegExp(value());
    else if (flag === '--rss-growth') options.rssGrowth = Number(value());
    else throw new Error(`unknown argument ${argv[i]}`);
  }
  if (!(options.minutes > 0)) throw new Error('--minutes must be a positive number');
  if (!(options.concurrency >= 1)) throw new Error('--concurrency must be at least 1');
  return options;
}

const options = parseArgs(process.argv.slice(2));
const durationMs = options.minutes * 60_000;
const startedAt = Date.now();
const deadline = startedAt + durationMs;
const running = () => Date.now() < deadline;
const elapsed = () => ((Date.now() - startedAt) / 1000).toFixed(0);

const cases = loadCases(HERE).filter((k) =>
  (!options.only || options.only.test(k.name)) && (!options.skip || !options.skip.test(k.name)));
// Cases whose client bytes mean the same thing in front of any upstream: no scripted upstream
// bytes, the default configuration, no base path. These go to the main proxy.
const clientOnly = cases.filter((k) => k.upstream === undefined && !k.config && !k.upstream_base);

const sent = { normal: 0, hostileMain: 0, hostileScripted: 0 };
const errors = new Map();
const unexpected = new Map();
const firstProblem = new Map();  // case → the first mismatch seen, for the report
const count = (map, key) => map.set(key, (map.get(key) || 0) + 1);
const withSocketError = (problems, result) =>
  (result.error ? [...problems, `client socket: ${result.error.code || result.error.message}`] : problems);
const mismatch = (key, problems) => {
  count(unexpected, key);
  if (!firstProblem.has(key)) firstProblem.set(key, problems.join(' / '));
};
const deaths = [];
let simRestarts = 0;

// ---- processes ----------------------------------------------------------------------------------

const quiet = ['--log-level', 'error'];
let sim = await startSim([], 'soak-sim');
const simPort = sim.port;
let main = await startProxy({ upstream: simPort, args: quiet, name: 'soak-proxy' });
await waitReady(main);
const recording = await startRecordingUpstream();
const side = new Map();  // base path + config → Promise<proxy>

function sideProxy(kase) {
  const key = `${kase.upstream_base || ''}\n${kase.config || ''}`;
  if (!side.has(key)) {
    const starting = (async () => {
      const proxy = await startProxy({
        upstream: `http://127.0.0.1:${recording.port}${kase.upstream_base || ''}`,
        config: proxyConfig(kase.config), args: quiet, name: 'soak-side-proxy',
      });
      await waitReady(proxy);
      return proxy;
    })();
    starting.catch(() => side.delete(key));
    side.set(key, starting);
  }
  return { key, promise: side.get(key) };
}

function describeDeath(which, proxy) {
  return `${which} proxy pid ${proxy.child.proc.pid} at ${elapsed()} s: exit ${proxy.child.exitCode}, ` +
    `signal ${proxy.child.exitSignal}; last stderr ${JSON.stringify(proxy.child.stderrText.slice(-200))}`;
}

// ---- RSS ----------------------------------------------------------------------------------------

const rssSeries = [];  // {t (s), kib} or {restart: true}
function rssKib(pid) {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}
function sampleRss() {
  const kib = main.child.running ? rssKib(main.child.proc.pid) : undefined;
  if (kib !== undefined) rssSeries.push({ t: (Date.now() - startedAt) / 1000, kib });
}
sampleRss();
const sampler = setInterval(() => {
  sampleRss();
  const last = rssSeries[rssSeries.length - 1];
  process.stdout.write(`[soak ${elapsed()} s] sent normal=${sent.normal} hostile=${sent.hostileMain}` +
    `+${sent.hostileScripted} errors=${[...errors.values()].reduce((a, b) => a + b, 0)} ` +
    `rss=${last && last.kib ? (last.kib / 1024).toFixed(1) : '?'} MiB\n`);
}, 10_000);

// Restarts what died: the simulator on its own port, the main proxy on a new one.
let supervising = true;
const supervisor = (async () => {
  while (supervising) {
    if (!sim.child.running) {
      simRestarts += 1;
      try { sim = await startSim(['--listen', `127.0.0.1:${simPort}`], 'soak-sim'); } catch { /* retry */ }
    }
    if (!main.child.running) {
      deaths.push(describeDeath('main', main));
      rssSeries.push({ restart: true });
      try {
        main = await startProxy({ upstream: simPort, args: quiet, name: 'soak-proxy' });
        await waitReady(main);
      } catch { /* retried next round */ }
    }
    await sleep(250);
  }
})();

// ---- normal traffic -----------------------------------------------------------------------------

const SIM_HEADERS = { 'x-sim-ttft-ms': '5', 'x-sim-itl-ms': '2', 'x-sim-output-tokens': '16' };
const NORMAL = [
  { path: '/v1/chat/completions', body: { model: 'soak-chat', messages: [{ role: 'user', content: 'hello soak' }], stream: true, stream_options: { include_usage: true } } },
  { path: '/v1/completions', body: { model: 'soak-completion', prompt: 'once upon a time', stream: true } },
  { path: '/v1/messages', body: { model: 'soak-claude', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }], stream: true } },
  { path: '/api/chat', body: { model: 'soak-ollama', messages: [{ role: 'user', content: 'hi' }] } },
  { path: '/v1/chat/completions', body: { model: 'soak-chat', messages: [{ role: 'user', content: 'no stream' }], stream: false } },
];

async function normalWorker(index) {
  for (let i = index; running(); i += options.concurrency) {
    const shape = NORMAL[i % NORMAL.length];
    sent.normal += 1;
    const res = await request({
      port: main.port, path: shape.path, body: shape.body, headers: SIM_HEADERS, keepBody: false, timeoutMs: 15_000,
    });
    if (res.error) count(errors, `normal: ${res.error.code || res.error.message}`);
    else if (res.status !== 200) count(errors, `normal: status ${res.status}`);
    else if (!res.complete) count(errors, 'normal: stream cut');
  }
}

// ---- hostile traffic on the main proxy ----------------------------------------------------------

// In front of the simulator only the local answers can be checked (status, close, JSON error);
// for a forwarded case the proxy must at least answer or close within the case's time.
async function mainLane() {
  for (let i = 0; running() && clientOnly.length; i++) {
    const kase = clientOnly[i % clientOnly.length];
    const vars = { host: `127.0.0.1:${simPort}` };
    const writes = renderClient(kase, vars);
    sent.hostileMain += 1;
    const plan = awaitPlan(kase);
    const result = await exchange(main.port, writes, { ...plan, timeoutMs: Math.max(plan.timeoutMs, 5000) });
    const local = expectations(kase).every((e) => e.upstream === null);
    if (local) {
      const problems = caseProblems(kase, result, undefined, vars);
      if (problems.length) mismatch(`main: ${kase.name}`, withSocketError(problems, result));
    } else if (result.data.length === 0 && !result.closed) {
      count(errors, 'hostile: no answer and no close');
    }
  }
}

// ---- every case, scripted upstream included, fully checked --------------------------------------

async function scriptedLane() {
  for (let i = 0; running() && cases.length; i++) {
    const kase = cases[i % cases.length];
    const { key, promise } = sideProxy(kase);
    let proxy;
    try { proxy = await promise; } catch { count(errors, 'side proxy failed to start'); await sleep(1000); continue; }
    const vars = { host: `127.0.0.1:${recording.port}` };
    const writes = renderClient(kase, vars);
    recording.reset(renderResponses(kase.upstream, vars));
    sent.hostileScripted += 1;
    const result = await exchange(proxy.port, writes, awaitPlan(kase));
    await sleep(expectations(kase).some((e) => e.upstream === null) ? 50 : 10);
    const seen = {
      bytes: recording.received(), connections: recording.connectionsSinceReset(), requests: recording.requests().length,
    };
    const problems = caseProblems(kase, result, seen, vars);
    if (problems.length) mismatch(`scripted: ${kase.name}`, withSocketError(problems, result));
    if (!proxy.child.running) {
      try { await proxy.child.waitExit(300); } catch { /* still up */ }
    }
    if (!proxy.child.running) {
      deaths.push(`${describeDeath('side', proxy)} after case ${JSON.stringify(kase.name)}`);
      side.delete(key);
    }
  }
}

// ---- run ----------------------------------------------------------------------------------------

process.stdout.write(`soak: ${options.minutes} min, ${cases.length} cases (${clientOnly.length} on the main ` +
  `proxy), ${options.concurrency} normal streams; main proxy pid ${main.child.proc.pid} port ${main.port}, ` +
  `simulator port ${simPort}\n`);
await Promise.all([
  ...Array.from({ length: options.concurrency }, (_, i) => normalWorker(i)),
  mainLane(),
  scriptedLane(),
]);
clearInterval(sampler);
sampleRss();
supervising = false;
await supervisor;
if (!main.child.running && !deaths.some((d) => d.includes(`pid ${main.child.proc.pid} `))) {
  deaths.push(describeDeath('main', main));
}
for (const promise of side.values()) {
  const proxy = await promise.catch(() => undefined);
  if (proxy && !proxy.child.running) deaths.push(describeDeath('side', proxy));
}

// ---- report -------------------------------------------------------------------------------------

const mib = (kib) => (kib === undefined ? '?' : `${(kib / 1024).toFixed(1)} MiB`);
// RSS of the last incarnation of the main proxy; the baseline is its first sample one minute in
// (or halfway through a run shorter than two minutes).
const lastRestart = rssSeries.map((s) => Boolean(s.restart)).lastIndexOf(true);
const samples = rssSeries.slice(lastRestart + 1).filter((s) => s.kib !== undefined);
const baselineAt = Math.min(60, durationMs / 2000);
const baseline = samples.find((s) => s.t >= baselineAt) || samples[0];
const first = samples[0];
const last = samples[samples.length - 1];
const max = samples.reduce((m, s) => Math.max(m, s.kib), 0);
const growth = baseline && last ? ((last.kib - baseline.kib) / baseline.kib) * 100 : 0;

const lines = [];
lines.push('');
lines.push(`soak finished after ${elapsed()} s`);
lines.push(`requests sent: ${sent.normal + sent.hostileMain + sent.hostileScripted} (normal streaming ${sent.normal}, ` +
  `hostile on the main proxy ${sent.hostileMain}, cases against the recording upstream ${sent.hostileScripted})`);
lines.push(`errors by kind:${errors.size ? '' : ' none'}`);
for (const [kind, n] of [...errors].sort((a, b) => b[1] - a[1])) lines.push(`  ${n}\t${kind}`);
lines.push(`cases whose outcome differed from the expectation: ${unexpected.size} distinct ` +
  '(times, then the first difference seen)');
for (const [name, n] of [...unexpected].sort((a, b) => a[0].localeCompare(b[0]))) {
  const first = firstProblem.get(name);
  lines.push(`  ${n}\t${name}`);
  lines.push(`    \tfirst: ${first.length > 300 ? `${first.slice(0, 300)}…` : first}`);
}
lines.push(`proxy stayed up: ${deaths.length === 0 ? 'yes' : `no, ${deaths.length} death(s)`}`);
for (const death of deaths) lines.push(`  ${death}`);
lines.push(`simulator restarts: ${simRestarts}`);
lines.push(`main proxy RSS: first ${mib(first && first.kib)}, at ${baseline ? baseline.t.toFixed(0) : '?'} s ` +
  `${mib(baseline && baseline.kib)}, last ${mib(last && last.kib)}, max ${mib(max || undefined)}; ` +
  `growth after the baseline ${growth.toFixed(1)} % (limit ${options.rssGrowth} %), ${samples.length} samples`);
const failed = deaths.length > 0 || growth > options.rssGrowth;
lines.push(`result: ${failed ? 'FAIL' : 'PASS'}`);
process.stdout.write(`${lines.join('\n')}\n`);

await recording.close();
await stopAll();
process.exit(failed ? 1 : 0);
