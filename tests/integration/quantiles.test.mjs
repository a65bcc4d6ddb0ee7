// Quantiles an SRE can trust: known latencies go through the proxy into a real Prometheus
// (Debian package `prometheus`) scraping /metrics, and histogram_quantile over the default
// buckets must come within 10 % of the truth; over the native histograms
// (metrics.native_histograms, scraped as protobuf by a second Prometheus started with
// --enable-feature=native-histograms) within 5 %.
//
// Each model gets requests with one scheduled TTFT and ITL from the simulator (cases that the
// old buckets misread: a 37 ms TTFT read 31 ms, 250 ms read 375 ms, 1.3 s read 1.75 s, a 20 ms ITL read
// 17.6 ms with the old buckets). The truth is what the proxy measured, request by request: the
// median of ttft_s and duration_s in the usage records. ITL and TPOT have no per-request
// record: for TPOT (one value per request, an average of its gaps) the truth is the exact mean
// (_sum / _count); for ITL it is the gap the simulator was told to keep (the mean is no truth
// there: a read that completes k tokens gives k observations of g/k, which pulls the mean
// down, not the median). ITL cases are 20 ms and up so that scheduling jitter on a busy
// 2-core machine stays well inside the tolerance.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import { makeTempDir, request, startProxy, startSim, stopAll, waitFor, waitReady } from './lib/harness.mjs';
import { startPrometheus } from './lib/prometheus.mjs';
import { readRecords } from './lib/usage.mjs';

// model: [TTFT ms, ITL ms, output tokens]
const CASES = {
  'q-ttft-6ms': [6, 20, 6],
  'q-ttft-37ms': [37, 25, 6],
  'q-ttft-250ms': [250, 45, 6],
  'q-ttft-1300ms': [1300, 300, 5],
};
const PER_MODEL = 9;

let prom;
let nativeProm;
let spoolDir;
let records;

const median = (values) => {
  const v = [...values].sort((a, b) => a - b);
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
};

before(async () => {
  const sim = await startSim();
  spoolDir = makeTempDir('tokenmeter-spool-');
  const proxy = await startProxy({
    upstream: sim.port,
    config: `usage:\n  spool_dir: ${JSON.stringify(spoolDir)}\nmetrics:\n  native_histograms: true\n` +
      'log:\n  level: error\n',
  });
  await waitReady(proxy);
  [prom, nativeProm] = await Promise.all([
    startPrometheus({ targets: [`127.0.0.1:${proxy.adminPort}`] }),
    startPrometheus({ targets: [`127.0.0.1:${proxy.adminPort}`], features: ['native-histograms'] }),
  ]);
  // The models run side by side, each model's requests one after another: 36 streams at once
  // would add their own scheduling delay to every TTFT on a 2-core machine.
  const sends = Object.entries(CASES).map(async ([model, [ttft, itl, tokens]]) => {
    const done = [];
    for (let i = 0; i < PER_MODEL; i++) {
      done.push(await request({
        port: proxy.port,
        body: { model, stream: true, messages: [{ role: 'user', content: 'hi' }] },
        headers: {
          'x-sim-ttft-ms': String(ttft), 'x-sim-itl-ms': String(itl),
          'x-sim-output-tokens': String(tokens),
        },
      }));
    }
    return done;
  });
  const results = (await Promise.all(sends)).flat();
  assert.ok(results.every((r) => r.status === 200 && r.complete), 'every request completed');
  const expected = Object.keys(CASES).length * PER_MODEL;
  records = await waitFor(() => {
    const r = readRecords(spoolDir);
    return r.length === expected ? r : undefined;
  }, { timeoutMs: 5000, what: `${expected} usage records` });
  await Promise.all([prom.waitScraped(), nativeProm.waitScraped()]);
});

after(async () => {
  if (nativeProm) await nativeProm.stop();
  if (prom) await prom.stop();
  await stopAll();
});

async function scalar(expr, server = prom) {
  const r = await server.query(expr);
  assert.equal(r.json.status, 'success', `${expr}: ${JSON.stringify(r.json)}`);
  assert.equal(r.json.data.result.length, 1, `${expr}: ${JSON.stringify(r.json.data.result)}`);
  return Number(r.json.data.result[0].value[1]);
}

const quantile = (metric, model, q = 0.5) =>
  scalar(`histogram_quantile(${q}, sum by (le) (${metric}_bucket{model="${model}"}))`);
const mean = async (metric, model) =>
  (await scalar(`sum(${metric}_sum{model="${model}"})`)) / (await scalar(`sum(${metric}_count{model="${model}"})`));

function within(read, truth, tolerance, what) {
  const error = Math.abs(read - truth) / truth;
  assert.ok(error <= tolerance,
    `${what}: histogram_quantile says ${read.toFixed(5)} s, the truth is ${truth.toFixed(5)} s (${(100 * error).toFixed(1)} % off)`);
  return error;
}

test('TTFT and request duration medians are within 10 % of the measured medians', async (t) => {
  for (const model of Object.keys(CASES)) {
    const own = records.filter((r) => r.model === model);
    assert.equal(own.length, PER_MODEL);
    const ttftTruth = median(own.map((r) => r.ttft_s));
    const durationTruth = median(own.map((r) => r.duration_s));
    const e1 = within(await quantile('tokenmeter_time_to_first_token_seconds', model), ttftTruth, 0.10, `${model} TTFT p50`);
    const e2 = within(await quantile('tokenmeter_request_duration_seconds', model), durationTruth, 0.10, `${model} duration p50`);
    t.diagnostic(`${model}: TTFT ${ttftTruth.toFixed(4)} s (${(100 * e1).toFixed(1)} % off), duration ${durationTruth.toFixed(4)} s (${(100 * e2).toFixed(1)} % off)`);
  }
});

test('ITL and TPOT medians are within 10 % of the truth', async (t) => {
  for (const [model, [, itl]] of Object.entries(CASES)) {
    const itlRead = await quantile('tokenmeter_inter_token_latency_seconds', model);
    const e1 = within(itlRead, itl / 1000, 0.10, `${model} ITL p50`);
    const tpotTruth = await mean('tokenmeter_time_per_output_token_seconds', model);
    const e2 = within(await quantile('tokenmeter_time_per_output_token_seconds', model), tpotTruth, 0.10, `${model} TPOT p50`);
    t.diagnostic(`${model}: ITL ${itl} ms (${(100 * e1).toFixed(1)} % off), TPOT ${tpotTruth.toFixed(5)} s (${(100 * e2).toFixed(1)} % off)`);
  }
});

test('the old buckets would have failed here (the test can tell)', () => {
  // The 250 ms case under the old boundaries 0.25 / 0.5: a median of 0.25x reads 0.375.
  const old = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5];
  const truth = median(records.filter((r) => r.model === 'q-ttft-250ms').map((r) => r.ttft_s));
  const upper = old.find((b) => b >= truth);
  const lower = old[old.indexOf(upper) - 1];
  const read = lower + 0.5 * (upper - lower);
  assert.ok(Math.abs(read - truth) / truth > 0.10, `old buckets read ${read} for ${truth}`);
});

// Native: the series has no _bucket suffix; sum() and histogram_quantile() take it whole.
const nativeQuantile = (metric, model, q = 0.5) =>
  scalar(`histogram_quantile(${q}, sum(${metric}{model="${model}"}))`, nativeProm);

test('the native-histogram Prometheus stores native histograms, not classic buckets', async () => {
  const model = Object.keys(CASES)[0];
  const r = await nativeProm.query(`tokenmeter_time_to_first_token_seconds{model="${model}"}`);
  assert.equal(r.json.status, 'success');
  assert.equal(r.json.data.result.length, 1, JSON.stringify(r.json.data.result));
  assert.ok(r.json.data.result[0].histogram, `a native histogram sample: ${JSON.stringify(r.json.data.result[0])}`);
  const classic = await nativeProm.query(`tokenmeter_time_to_first_token_seconds_bucket{model="${model}"}`);
  assert.equal(classic.json.data.result.length, 0, 'the protobuf scrape carried the native form');
  const itl = await nativeProm.query(`tokenmeter_inter_token_latency_seconds{model="${model}"}`);
  assert.ok(itl.json.data.result[0]?.histogram, 'inter-token latency is native too');
});

test('native histograms: TTFT, duration, TPOT and ITL medians within 5 % of the truth', async (t) => {
  for (const [model, [, itl]] of Object.entries(CASES)) {
    const own = records.filter((r) => r.model === model);
    const checks = [
      ['tokenmeter_time_to_first_token_seconds', median(own.map((r) => r.ttft_s))],
      ['tokenmeter_request_duration_seconds', median(own.map((r) => r.duration_s))],
      ['tokenmeter_time_per_output_token_seconds', await mean('tokenmeter_time_per_output_token_seconds', model)],
      ['tokenmeter_inter_token_latency_seconds', itl / 1000],
    ];
    for (const [metric, truth] of checks) {
      const e = within(await nativeQuantile(metric, model), truth, 0.05, `${model} ${metric} native p50`);
      t.diagnostic(`${model} ${metric} native: ${truth.toFixed(5)} s (${(100 * e).toFixed(2)} % off)`);
    }
  }
});
