// The availability SLO through an outage: the real proxy (slo.default naming only the server
// preset) in front of the simulator, a real Prometheus (Debian package `prometheus`) scraping it
// every second and evaluating deploy/prometheus/tokenmeter.rules.yml every second. Traffic is
// served, then the simulator is stopped under traffic: every request gets a 502, counts bad for
// availability and is left out of the latency SLOs; the error budget burns on /metrics, in the
// recording rules and on the status page, and TokenmeterAvailabilitySLOFastBurn fires while the
// latency alerts stay quiet. The rules are the shipped ones: their ratios do not depend on how
// much of the hour the test covers, and 100 judged requests meet their minimum traffic.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  chatBody, describeResult, request, startProxy, startSim, stopAll, waitFor,
} from './lib/harness.mjs';
import { startPrometheus } from './lib/prometheus.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const rules = path.resolve(here, '../../deploy/prometheus/tokenmeter.rules.yml');
const MODEL = 'sim-llama';
const SERVED = 120;
const FAILED = 150;

let prom;
after(async () => {
  if (prom) await prom.stop();
  await stopAll();
});

const send = (proxy) => request({
  port: proxy.port,
  body: chatBody(MODEL, { includeUsage: true }),
  headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '3' },
  timeoutMs: 10_000,
});

async function sendMany(proxy, n, status) {
  for (let i = 0; i < n; i += 1) {
    const res = await send(proxy);
    assert.equal(res.status, status, describeResult(res));
  }
}

async function firing(name) {
  const r = await prom.get('/api/v1/alerts');
  return r.json.data.alerts.filter((a) => a.labels.alertname === name && a.state === 'firing');
}

async function scalar(expr) {
  const r = await prom.query(expr);
  assert.equal(r.json.status, 'success', JSON.stringify(r.json));
  return r.json.data.result.map((s) => Number(s.value[1]));
}

test('an upstream outage burns the availability budget and fires its alert', async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: ['slo:', '  default: {preset: server}', ''].join('\n'),
  });
  prom = await startPrometheus({ targets: [`127.0.0.1:${proxy.adminPort}`], ruleFiles: [rules] });
  const slo = async (which, result) => (await proxy.metrics())
    .value('tokenmeter_slo_requests_total', { model: MODEL, slo: which, result });

  // Served: one request makes the series, a scrape stores them, then the rest.
  await sendMany(proxy, 1, 200);
  await prom.waitScraped();
  await sendMany(proxy, SERVED - 1, 200);
  await prom.waitScraped();
  assert.equal(await slo('availability', 'good'), SERVED);
  assert.equal(await slo('availability', 'bad'), 0);
  assert.deepEqual(await firing('TokenmeterAvailabilitySLOFastBurn'), []);

  // The model server goes away under traffic: 502s, each one bad for availability.
  await sim.stop();
  await sendMany(proxy, 1, 502);
  await prom.waitScraped();
  await sendMany(proxy, FAILED - 1, 502);
  await prom.waitScraped();

  const m = await proxy.metrics();
  assert.equal(m.value('tokenmeter_slo_requests_total',
    { model: MODEL, slo: 'availability', result: 'bad' }), FAILED);
  assert.equal(m.value('tokenmeter_slo_requests_total',
    { model: MODEL, slo: 'availability', result: 'good' }), SERVED);
  assert.equal(m.value('tokenmeter_slo_objective_ratio', { model: MODEL, slo: 'availability' }), 0.999);
  // Failed requests have no TTFT: the latency SLOs judged only what was served.
  assert.equal(m.value('tokenmeter_slo_requests_total', { model: MODEL, slo: 'ttft', result: 'good' }), SERVED);
  assert.equal(m.value('tokenmeter_slo_requests_total', { model: MODEL, slo: 'ttft', result: 'bad' }), 0);

  // The status page burns too: 150 of 270 bad against a 0.1 % budget.
  const doc = JSON.parse((await proxy.admin('/status.json')).body.toString());
  const model = doc.models.find((x) => x.model === MODEL);
  assert.equal(model.slo.availability_objective, 0.999);
  assert.equal(model.slo.availability['5m'].good, SERVED);
  assert.equal(model.slo.availability['5m'].bad, FAILED);
  assert.ok(model.slo.availability['5m'].burn_rate > 500, JSON.stringify(model.slo.availability));
  assert.equal(model.slo.ttft['5m'].bad, 0);

  // Prometheus: the recording rules' burn rate, and the page.
  await waitFor(async () => {
    const burn = await scalar(
      'tokenmeter:slo_errors:ratio_rate5m{slo="availability"} / on (cluster, namespace, job, model, slo) (1 - tokenmeter:slo_objective:ratio)');
    return burn.length === 1 && burn[0] > 14.4;
  }, { timeoutMs: 15_000, intervalMs: 250, what: 'availability burn rate above 14.4 in Prometheus' });
  await waitFor(async () => (await firing('TokenmeterAvailabilitySLOFastBurn')).length === 1,
    { timeoutMs: 15_000, intervalMs: 250, what: 'TokenmeterAvailabilitySLOFastBurn firing' });
  const [alert] = await firing('TokenmeterAvailabilitySLOFastBurn');
  assert.equal(alert.labels.model, MODEL);
  assert.equal(alert.labels.slo, 'availability');
  assert.equal(alert.labels.severity, 'critical');
  // The budget over the whole run is spent (the SLO dashboard's "error budget left").
  const left = await scalar(
    '1 - (sum by (job, model, slo) (increase(tokenmeter_slo_requests_total{slo="availability", result="bad"}[5m])) / sum by (job, model, slo) (increase(tokenmeter_slo_requests_total{slo="availability"}[5m]))) / (1 - 0.999)');
  assert.equal(left.length, 1);
  assert.ok(left[0] < 0, `budget left ${left[0]}`);
  // Slow is not down: no latency page for an outage.
  assert.deepEqual(await firing('TokenmeterLatencySLOFastBurn'), []);
});
