// Every dashboard query against a real Prometheus that scraped the real proxy.
//
// Starts the simulator and the proxy (config/dashboards.yaml), then a Prometheus server (Debian
// package `prometheus`) on loopback that scrapes the proxy's /metrics every second and evaluates
// deploy/prometheus/tokenmeter.rules.yml every second. Drives a short mixed workload through the
// proxy (three models, fast and slow, short and long prompts, with and without usage, a few
// truncated and failed responses), then runs each panel's PromQL as Grafana would (a range query
// over the run, variables substituted) and requires every query to parse and return data. The
// dashboards' variable queries must return values too. Key panels are also held to the truth:
// top tenants sum to the tokens the usage records bill, TTFT good + bad verdicts equal the
// requests with a TTFT, and provisioned-throughput use counts input + output.
//
// PENDING lists metrics that other branches add. A panel that has no data only
// because such a metric is absent is reported, not failed; as soon as the metric exists (the
// branch is merged), its entry makes the test fail until it is removed, so the list cannot go
// stale and hide a real gap.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  closedPort, makeTempDir, request, sleep, startProxy, startSim, stopAll, waitReady,
} from './lib/harness.mjs';
import { startPrometheus } from './lib/prometheus.mjs';
import { readRecords } from './lib/usage.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR || path.join(root, '.cache', 'tokenizers');
const TRAFFIC_SECONDS = 14;
const RATE_INTERVAL = '5s';

// [selector that returns nothing until the branch lands, expressions it excuses, origin]
const PENDING = [
];

const DASHBOARDS = ['tokenmeter-fleet.json', 'tokenmeter-slo.json', 'tokenmeter-tenants.json',
  'tokenmeter-proxy.json'].map((file) => ({
  file, json: JSON.parse(readFileSync(path.join(root, 'dashboards', file), 'utf8')),
}));

let prom;
let trafficStart;
let trafficEnd;
let proxy;
let spoolDir;
const sent = { total: 0, byStatus: new Map() };

const query = (expr) => prom.query(expr);
const queryRange = (expr, start, end) => prom.queryRange(expr, start, end);

function words(n) {
  return Array.from({ length: n }, (_, i) => `w${i}`).join(' ');
}

// One request of the mix; i picks the variant deterministically.
function variant(i) {
  const models = ['sim-interactive', 'sim-server', 'sim-batch'];
  const model = models[i % 3];
  const slow = i % 4 === 0;
  const headers = {
    'x-sim-ttft-ms': String(slow ? 600 : 20 + (i % 5) * 10),
    'x-sim-itl-ms': String(slow ? 40 : 5),
    'x-sim-output-tokens': String(4 + (i % 6)),
    // Not aligned with the model (i % 3), so every model has traffic of every tenant.
    'x-tenant-id': ['tenant-small', 'tenant-big', 'tenant-free', 'tenant-big'][(i >> 1) % 4],
    // Every request has a task (two allowed, one not: "other") and a session of a few requests.
    'x-tokenmeter-task': ['summarize', 'fix-test', 'unlisted-task'][(i >> 2) % 3],
    'x-tokenmeter-session': `run-${i >> 4}`,
  };
  // Prompt classes 0-512, 512-2k and 2k-8k (the simulator counts words).
  const promptWords = [20, 700, 2500][i % 3 === 0 ? (i >> 2) % 3 : i % 3];
  let usage = i % 7 !== 0;  // some streams without usage: prompt_class "unknown"
  let stream = i % 11 !== 5;
  if (i % 13 === 6) headers['x-sim-fail'] = 'close-after:2';       // upstream truncated
  if (i % 17 === 8) headers['x-sim-fail'] = 'status:503';          // 5xx
  if (i % 19 === 9) { headers['x-sim-fail'] = 'status:500'; usage = true; stream = true; }
  if (i % 5 === 2) {  // text longer than the reported usage says:
    headers['x-sim-pad-bytes'] = '9';           // native count != reported (mismatch panel)
    usage = true;
    stream = true;
  }
  if (i % 23 === 10) {  // an event above limits.max_sse_event_bytes: a parse error
    headers['x-sim-pad-bytes'] = '70000';
    headers['x-sim-output-tokens'] = '2';
    stream = true;
  }
  // Some reasoning (the reasoning panel), and some Responses API requests: they report
  // reasoning and cached input tokens (0 cached, but a series: the cached-input panel).
  if (i % 8 === 1) headers['x-sim-reasoning-tokens'] = '2';
  if (i % 7 === 3) {
    headers['x-sim-reasoning-tokens'] = '2';
    return { headers, path: '/v1/responses', body: { model, stream: true, input: words(promptWords) } };
  }
  const body = { model, stream, messages: [{ role: 'user', content: words(promptWords) }] };
  if (stream && usage) body.stream_options = { include_usage: true };
  return { headers, body };
}

async function drive(seconds, concurrency) {
  const deadline = Date.now() + seconds * 1000;
  let next = 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const worker = async () => {
    while (Date.now() < deadline) {
      const { headers, body, path: target } = variant(next++);
      try {
        const res = await request({
          port: proxy.port, agent, body: JSON.stringify(body), timeoutMs: 10_000, path: target,
          headers: { 'content-type': 'application/json', ...headers },
        });
        sent.byStatus.set(res.status, (sent.byStatus.get(res.status) || 0) + 1);
      } catch {
        sent.byStatus.set('error', (sent.byStatus.get('error') || 0) + 1);
      }
      sent.total += 1;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
}

before(async () => {
  const closedSinkPort = await closedPort();
  const sim = await startSim();
  proxy = await startProxy({
    upstream: sim.port,
    // The tokenizers (a native one for every model, the default reference) come from the
    // cache scripts/fetch-tokenizers.sh fills; their paths depend on the checkout.
    config: readFileSync(path.join(here, 'config', 'dashboards.yaml'), 'utf8') + [
      `tokenizer_dir: ${JSON.stringify(tokenizerDir)}`,
      'usage:',
      `  spool_dir: ${JSON.stringify(spoolDir = makeTempDir('tokenmeter-spool-'))}`,
      // A sink that refuses connections: ship errors and a growing backlog to chart.
      '  sink:',
      `    url: http://127.0.0.1:${closedSinkPort}/usage`,
      'models:',
      ...['sim-interactive', 'sim-server', 'sim-batch'].flatMap((model) => [
        `  ${model}:`,
        `    tokenizer: ${JSON.stringify(path.join(tokenizerDir, 'llama3', 'tokenizer.json'))}`,
      ]),
      '',
    ].join('\n'),
  });
  await waitReady(proxy);

  // Target labels as Kubernetes service discovery and an external label would add them: the
  // dashboards' cluster and namespace variables read them.
  prom = await startPrometheus({
    targets: [`127.0.0.1:${proxy.adminPort}`],
    labels: { cluster: 'test', namespace: 'llm' },
    ruleFiles: [path.join(root, 'deploy/prometheus/tokenmeter.rules.yml')],
  });

  trafficStart = Date.now() / 1000;
  await drive(TRAFFIC_SECONDS, 8);
  trafficEnd = Date.now() / 1000;
  // Two more scrapes and rule evaluations after the last request.
  await sleep(2500);
});

after(async () => {
  if (prom) await prom.stop();
  await stopAll();
});

function substitute(expr, model) {
  const range = `${Math.ceil(Date.now() / 1000 - trafficStart) + 2}s`;
  return expr
    .replaceAll('$__rate_interval', RATE_INTERVAL)
    .replaceAll('$__range', range)
    .replaceAll('$__interval', '1s')
    .replaceAll('$model', model)
    .replaceAll('$tenant', '.+')
    .replaceAll('$task', '.+')
    .replaceAll('$cluster', '.*')
    .replaceAll('$namespace', '.*')
    .replaceAll('$job', '.*')
    .replaceAll('$slo_window', range);
}

function metricsOf(expr) {
  return [...new Set(expr.match(/\b[a-z_:]*tokenmeter[a-z0-9_:]*\b|\bup\b/g) || [])];
}

const hasData = (result) => result.some((series) =>
  (series.values || [series.value]).some(([, v]) => !Number.isNaN(Number(v))));

test('the workload reached the proxy', () => {
  assert.ok(sent.total > 50, `only ${sent.total} requests were sent`);
  assert.ok((sent.byStatus.get(200) || 0) > sent.total / 2, JSON.stringify([...sent.byStatus]));
});

test('the proxy health panels chart real events, not only zeros', async () => {
  const m = await proxy.metrics();
  assert.ok(m.value('tokenmeter_parse_errors_total') > 0, 'parse errors');
  assert.ok(m.value('tokenmeter_upstream_errors_total') > 0, 'upstream errors');
  assert.ok(m.has('tokenmeter_requests_total', { code: '503' }), 'a 503 counted');
  assert.ok(m.has('tokenmeter_slo_requests_total', { result: 'bad' }), 'a bad SLO request');
  assert.ok(m.has('tokenmeter_slo_requests_total', { result: 'good' }), 'a good SLO request');
});

test('every pending entry is still pending (remove entries whose metric now exists)', async () => {
  const landed = [];
  for (const [selector, , origin] of PENDING) {
    const r = await query(`count(${selector})`);
    assert.equal(r.json.status, 'success', `${selector}: ${JSON.stringify(r.json)}`);
    if (r.json.data.result.length > 0) landed.push(`${selector} (${origin})`);
  }
  assert.deepEqual(landed, [], 'these metrics exist now: remove them from PENDING in ' +
    `tests/integration/dashboards.test.mjs so their panels are held to returning data:\n${landed.join('\n')}`);
});

for (const model of ['.+', 'sim-interactive']) {
  test(`every panel query returns data (model=${model})`, async (t) => {
    const failures = [];
    const excused = [];
    const end = Date.now() / 1000;
    for (const { file, json } of DASHBOARDS) {
      for (const panel of json.panels) {
        for (const target of panel.targets || []) {
          const expr = substitute(target.expr, model);
          const r = await queryRange(expr, Math.floor(trafficStart), Math.ceil(end));
          const where = `${file} / "${panel.title}" / ${target.refId}`;
          if (r.json.status !== 'success') {
            failures.push(`${where}: ${r.json.errorType}: ${r.json.error}\n    ${expr}`);
            continue;
          }
          if (hasData(r.json.data.result)) continue;
          const pending = PENDING.filter(([, re]) => re.test(target.expr));
          if (pending.length > 0) {
            excused.push(`${where}: no data; uses ${pending.map(([s, , o]) => `${s} from ${o}`).join(', ')}`);
          } else {
            failures.push(`${where}: no data; metrics used: ${metricsOf(target.expr).join(', ')}\n    ${expr}`);
          }
        }
      }
    }
    if (excused.length > 0) {
      t.diagnostic('panels without data because their metrics come from branches not merged yet:');
      for (const line of excused) t.diagnostic(line);
    }
    assert.deepEqual(failures, [], `${failures.length} panel queries failed:\n${failures.join('\n')}`);
  });
}

test('every dashboard variable query finds values', async () => {
  const failures = [];
  for (const { file, json } of DASHBOARDS) {
    for (const v of json.templating.list.filter((x) => x.type === 'query')) {
      const m = /^label_values\((.+), *(\w+)\)$/.exec(v.query.query);
      assert.ok(m, `${file} variable ${v.name}: expected label_values(selector, label), got ${v.query.query}`);
      // Variables refer to the ones before them: substituted with "All".
      const r = await prom.get(`/api/v1/label/${m[2]}/values?match[]=${encodeURIComponent(substitute(m[1], '.+'))}` +
        `&start=${Math.floor(trafficStart)}&end=${Math.ceil(trafficEnd) + 3}`);
      assert.equal(r.json.status, 'success', JSON.stringify(r.json));
      if (r.json.data.length > 0) continue;
      const pending = PENDING.find(([, re]) => re.test(m[1]));
      if (!pending) failures.push(`${file} variable ${v.name}: ${v.query.query} found no values`);
    }
  }
  assert.deepEqual(failures, []);
});

test('the recording rules produce series from the scraped data', async () => {
  const r = await query('count by (__name__) ({__name__=~"tokenmeter:.+|model.*:tokenmeter_.+"})');
  const names = new Set(r.json.data.result.map((s) => s.metric.__name__));
  const rules = readFileSync(path.join(root, 'deploy/prometheus/tokenmeter.rules.yml'), 'utf8');
  const recorded = [...rules.matchAll(/- record: (\S+)/g)].map((m) => m[1]);
  assert.ok(recorded.length > 20);
  const missing = recorded.filter((name) => !names.has(name));
  assert.deepEqual(missing, [], `recording rules with no series: ${missing.join(', ')}`);
});

// ---- values of key panels --------------------------------------------------------------------

function panelExpr(file, title, refId = 'A') {
  const { json } = DASHBOARDS.find((d) => d.file === file);
  const p = json.panels.find((x) => x.title === title);
  assert.ok(p, `${file}: no panel "${title}"`);
  return p.targets.find((t) => t.refId === refId).expr;
}

// At `time` (Unix seconds) when given: queries compared with each other are evaluated at one
// instant, or a rate over a short window moves between them as scrapes arrive.
async function instant(expr, time) {
  const r = await prom.query(expr, time);
  assert.equal(r.json.status, 'success', `${expr}: ${JSON.stringify(r.json)}`);
  return r.json.data.result;
}

const total = (result) => result.reduce((acc, s) => acc + Number(s.value[1]), 0);

// Input + output of every close record in the spool: what billing charges.
function billedByUsageRecords() {
  const records = readRecords(spoolDir);
  const tokens = records.reduce((acc, r) => acc + (r.input_tokens || 0) + (r.output_tokens || 0), 0);
  return { tokens, records: records.length };
}

test('top tenants add up to the tokens the usage records bill', async () => {
  const billed = billedByUsageRecords();
  assert.ok(billed.records > 50 && billed.tokens > 1000, JSON.stringify(billed));
  // The counters themselves: exact.
  assert.equal(total(await instant('sum(tokenmeter_tenant_tokens_total)')), billed.tokens);
  assert.equal(total(await instant('sum(tokenmeter_tokens_total{api!="none"})')), billed.tokens);
  // The panel: increase() over the run misses each series' first increment and extrapolates a
  // little, so it is close, not exact; a family that counted a token twice (reasoning inside
  // output, three sources of one count) would be 50 % or more over.
  const panel = total(await instant(substitute(panelExpr('tokenmeter-tenants.json', 'Top tenants by billed tokens over the range'), '.+')));
  assert.ok(panel > 0.85 * billed.tokens && panel < 1.1 * billed.tokens,
    `top tenants ${panel} against ${billed.tokens} billed`);
});

test('TTFT good + bad verdicts equal the requests with a TTFT, and are not doubled by TPOT', async () => {
  const run = `${Math.ceil(Date.now() / 1000 - trafficStart) + 2}s`;
  const models = 'model=~"sim-interactive|sim-server|sim-batch"';  // all covered: slo.default
  const verdictsNow = total(await instant(`sum(tokenmeter_slo_requests_total{slo="ttft"})`));
  const ttftNow = total(await instant(`sum(tokenmeter_time_to_first_token_seconds_count{${models}})`));
  assert.ok(ttftNow > 20, `ttft count ${ttftNow}`);
  assert.equal(verdictsNow, ttftNow);
  // The panel's good and bad series (rates over the run) against the TTFT histogram's rate.
  const expr = panelExpr('tokenmeter-slo.json', 'TTFT: good and bad requests per second');
  const at = Date.now() / 1000;
  const panel = total(await instant(substitute(expr, '.+').replace(`[${RATE_INTERVAL}]`, `[${run}]`), at));
  const truth = total(await instant(`sum(rate(tokenmeter_time_to_first_token_seconds_count{${models}}[${run}]))`, at));
  assert.ok(truth > 0);
  assert.ok(Math.abs(panel - truth) <= 0.02 * truth, `panel ${panel} req/s against ${truth} req/s`);
});

test('provisioned throughput use counts input and output tokens', async () => {
  const expr = panelExpr('tokenmeter-tenants.json', 'Input + output tokens per second against provisioned throughput');
  // At the end of the traffic: the short rate window then still holds the last requests.
  const at = trafficEnd + 1;
  const used = total(await instant(substitute(expr, '.+'), at));
  const both = total(await instant(`sum(rate(tokenmeter_tenant_tokens_total[${RATE_INTERVAL}]))`, at));
  const output = total(await instant(`sum(rate(tokenmeter_tenant_tokens_total{type="output"}[${RATE_INTERVAL}]))`, at));
  assert.ok(both > output, 'the run has input tokens');
  assert.ok(Math.abs(used - both) < 1e-6 * both + 1e-9, `panel ${used}, input + output ${both}`);
});

test('task panels: task time and tokens count every complete request, sessions every forwarded one', async () => {
  // Every request of the run has a task and a session id, and every session has ended (idle for
  // 1 s; the scrape below sweeps): the task families against the usage records.
  const m = await proxy.metrics();
  const records = readRecords(spoolDir);
  const complete = records.filter((r) => r.outcome === 'complete');
  const forwarded = records.filter((r) => r.outcome !== 'rejected');
  assert.ok(complete.length > 50, `${complete.length} complete records`);
  assert.equal(m.value('tokenmeter_task_requests_total'), records.length);
  assert.equal(m.histogram('tokenmeter_task_duration_seconds').count, complete.length);
  assert.equal(m.value('tokenmeter_task_tokens_total', { type: 'output' }),
    complete.reduce((acc, r) => acc + (r.output_tokens || 0), 0));
  assert.equal(m.value('tokenmeter_task_sessions_active'), 0);
  assert.equal(m.value('tokenmeter_task_session_requests_total'), forwarded.length);
  assert.equal(m.value('tokenmeter_task_session_tokens_total', { type: 'output' }),
    forwarded.reduce((acc, r) => acc + (r.output_tokens || 0), 0));
  assert.ok(m.has('tokenmeter_task_requests_total', { task: 'other' }));
  assert.equal(m.samples.some((s) => s.labels.task === 'unlisted-task'), false);
  // The mean panel over the range against the exact mean of the counters: increase() misses
  // each series' first observation, so close, not equal.
  const result = await instant(substitute(panelExpr('tokenmeter-fleet.json', 'Task time by model: mean over the range'), '.+'));
  assert.ok(result.length >= 6, `${result.length} model/task series`);
  for (const series of result) {
    const { model, task } = series.metric;
    const exact = m.histogram('tokenmeter_task_duration_seconds', { model, task });
    const mean = exact.sum / exact.count;
    assert.ok(Math.abs(Number(series.value[1]) - mean) <= 0.25 * mean,
      `${model} ${task}: panel ${series.value[1]} s, counters ${mean} s`);
  }
});

test('quantile panels show the mean beside p50, p90 and p99', () => {
  for (const { file, json } of DASHBOARDS) {
    for (const p of json.panels) {
      const exprs = (p.targets || []).map((t) => t.expr);
      if (!exprs.some((e) => e.startsWith('histogram_quantile('))) continue;
      if (p.title.includes('by prompt size') || p.title.includes('by API')) continue;  // one quantile per group
      assert.ok(exprs.some((e) => /_sum\{/.test(e) && /_count\{/.test(e)), `${file} "${p.title}" has no mean`);
    }
  }
});
