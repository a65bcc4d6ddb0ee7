// Every dashboard query against a real Prometheus that scraped the real proxy.
//
// Starts the simulator and the proxy (config/dashboards.yaml), then a Prometheus server (Debian
// package `prometheus`) on loopback that scrapes the proxy's /metrics every second and evaluates
// deploy/prometheus/tokenmeter.rules.yml every second. Drives a short mixed workload through the
// proxy (three models, fast and slow, short and long prompts, with and without usage, a few
// truncated and failed responses), then runs each panel's PromQL as Grafana would (a range query
// over the run, variables substituted) and requires every query to parse and return data. The
// dashboards' variable queries must return values too.
//
// PENDING lists metrics that other branches add (issues 3, 4, 5). A panel that has no data only
// because such a metric is absent is reported, not failed; as soon as the metric exists (the
// branch is merged), its entry makes the test fail until it is removed, so the list cannot go
// stale and hide a real gap.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  makeTempDir, request, sleep, startProxy, startSim, stopAll, waitFor, waitReady,
} from './lib/harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const PROMETHEUS = process.env.PROMETHEUS_BIN || 'prometheus';
const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR || path.join(root, '.cache', 'tokenizers');
const TRAFFIC_SECONDS = 14;
const RATE_INTERVAL = '5s';

// [selector that returns nothing until the branch lands, expressions it excuses, origin]
const PENDING = [
  ['tokenmeter_tenant_requests_total', /tokenmeter_tenant_requests_total/, 'issue 5'],
  ['tokenmeter_tenant_tokens_total', /tokenmeter_tenant_tokens_total/, 'issue 5'],
  ['tokenmeter_tenant_provisioned_tokens_per_second', /tokenmeter_tenant_provisioned_tokens_per_second/, 'issue 5'],
  ['tokenmeter_tenant_rate_limited_total', /tokenmeter_tenant_rate_limited_total/, 'issue 5'],
  ['tokenmeter_usage_spool_records', /tokenmeter_usage_spool_records/, 'issue 5'],
  ['tokenmeter_usage_spool_oldest_age_seconds', /tokenmeter_usage_spool_oldest_age_seconds/, 'issue 5'],
  ['tokenmeter_usage_ship_errors_total', /tokenmeter_usage_ship_errors_total/, 'issue 5'],
];

const DASHBOARDS = ['tokenmeter-fleet.json', 'tokenmeter-slo.json', 'tokenmeter-tenants.json',
  'tokenmeter-proxy.json'].map((file) => ({
  file, json: JSON.parse(readFileSync(path.join(root, 'dashboards', file), 'utf8')),
}));

let promPort;
let prom;
let trafficStart;
let trafficEnd;
let proxy;
const sent = { total: 0, byStatus: new Map() };

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function getJson(pathAndQuery) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port: promPort, path: pathAndQuery, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => {
        try { resolve({ status: res.statusCode, json: JSON.parse(body) }); } catch (e) { reject(new Error(`${pathAndQuery}: ${body.slice(0, 300)}`)); }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`timeout: ${pathAndQuery}`)));
    req.on('error', reject);
  });
}

const query = (expr) => getJson(`/api/v1/query?query=${encodeURIComponent(expr)}`);
const queryRange = (expr, start, end) =>
  getJson(`/api/v1/query_range?query=${encodeURIComponent(expr)}&start=${start}&end=${end}&step=1`);

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
      const { headers, body } = variant(next++);
      try {
        const res = await request({
          port: proxy.port, agent, body: JSON.stringify(body), timeoutMs: 10_000,
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
  const sim = await startSim();
  proxy = await startProxy({
    upstream: sim.port,
    // The tokenizers (a native one for every model, the default reference) come from the
    // cache scripts/fetch-tokenizers.sh fills; their paths depend on the checkout.
    config: readFileSync(path.join(here, 'config', 'dashboards.yaml'), 'utf8') + [
      `tokenizer_dir: ${JSON.stringify(tokenizerDir)}`,
      'models:',
      ...['sim-interactive', 'sim-server', 'sim-batch'].flatMap((model) => [
        `  ${model}:`,
        `    tokenizer: ${JSON.stringify(path.join(tokenizerDir, 'llama3', 'tokenizer.json'))}`,
      ]),
      '',
    ].join('\n'),
  });
  await waitReady(proxy);

  const dir = makeTempDir('tokenmeter-prom-');
  mkdirSync(path.join(dir, 'data'));
  const configFile = path.join(dir, 'prometheus.yml');
  writeFileSync(configFile, [
    'global:',
    '  scrape_interval: 1s',
    '  evaluation_interval: 1s',
    'rule_files:',
    `  - ${JSON.stringify(path.join(root, 'deploy/prometheus/tokenmeter.rules.yml'))}`,
    'scrape_configs:',
    '  - job_name: tokenmeter',
    '    static_configs:',
    `      - targets: ["127.0.0.1:${proxy.adminPort}"]`,
    '',
  ].join('\n'));
  promPort = await freePort();
  prom = spawn(PROMETHEUS, [
    `--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${promPort}`, '--log.level=warn',
  ], { stdio: ['ignore', 'ignore', 'pipe'] });
  let promErr = '';
  prom.stderr.setEncoding('utf8');
  prom.stderr.on('data', (d) => { promErr += d; });
  prom.on('error', (e) => { promErr += `spawn: ${e.message} (install the Debian package prometheus)`; });
  await waitFor(async () => {
    if (prom.exitCode !== null) throw new Error(`prometheus exited: ${promErr}`);
    try {
      const r = await getJson('/api/v1/targets?state=active');
      return r.json.data.activeTargets.some((t) => t.health === 'up');
    } catch { return false; }
  }, { timeoutMs: 20_000, intervalMs: 200, what: `prometheus up and scraping (stderr: ${promErr})` });

  trafficStart = Date.now() / 1000;
  await drive(TRAFFIC_SECONDS, 8);
  trafficEnd = Date.now() / 1000;
  // Two more scrapes and rule evaluations after the last request.
  await sleep(2500);
});

after(async () => {
  if (prom && prom.exitCode === null) {
    prom.kill('SIGTERM');
    await new Promise((resolve) => { prom.once('exit', resolve); setTimeout(resolve, 5000); });
  }
  await stopAll();
});

function substitute(expr, model) {
  const range = `${Math.ceil(Date.now() / 1000 - trafficStart) + 2}s`;
  return expr
    .replaceAll('$__rate_interval', RATE_INTERVAL)
    .replaceAll('$__range', range)
    .replaceAll('$__interval', '1s')
    .replaceAll('$model', model)
    .replaceAll('$tenant', '.+');
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
  const text = await proxy.metricsText();
  const total = (name) => [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))]
    .reduce((acc, m) => acc + Number(m[1]), 0);
  assert.ok(total('tokenmeter_parse_errors_total') > 0, 'parse errors');
  assert.ok(total('tokenmeter_upstream_errors_total') > 0, 'upstream errors');
  assert.match(text, /tokenmeter_requests_total\{[^}]*code="503"/);
  assert.match(text, /tokenmeter_slo_requests_total\{[^}]*result="bad"/);
  assert.match(text, /tokenmeter_slo_requests_total\{[^}]*result="good"/);
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
      const r = await getJson(`/api/v1/label/${m[2]}/values?match[]=${encodeURIComponent(m[1])}` +
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
