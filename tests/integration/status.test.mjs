// The admin status page's document, /status.json (docs/status.md), against known traffic: counts
// equal what was sent and what /metrics counted, quantiles within the sketch's bound of the
// simulator's schedule; the page's headers (CSP, nosniff, no-store); odd queries; no key or
// secret anywhere; metrics.status_page: false turns it off. The page itself in Chromium:
// tests/status.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { request, startProxy, startSim, stopAll } from './lib/harness.mjs';
import {
  ALPHA_KEY, ALPHA_REQUESTS, BETA_KEY, BETA_REQUESTS, ITL_MS, MODEL, OUTPUT_TOKENS,
  STATUS_SECRET, TTFT_MS, startStatusScenario,
} from './lib/status.mjs';

after(stopAll);

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
  "img-src 'self'; base-uri 'none'; frame-ancestors 'none'";

test('/status.json agrees with the traffic sent and with /metrics', { timeout: 60_000 }, async () => {
  const { proxy, statuses, resetStatus } = await startStatusScenario();
  assert.deepEqual(statuses.alpha, Array(ALPHA_REQUESTS).fill(200));
  assert.equal(statuses.beta[0], 200);
  const refused = statuses.beta.filter((s) => s === 429).length;
  assert.equal(refused, BETA_REQUESTS - 1, `beta statuses ${statuses.beta}`);
  assert.equal(resetStatus, 502);

  const res = await proxy.admin('/status.json');
  assert.equal(res.status, 200);
  assert.equal(res.headers['content-type'], 'application/json');
  const doc = JSON.parse(res.body.toString());
  const m = await proxy.metrics();
  assert.equal(doc.version, 1);
  assert.equal(doc.streams_active, 0);
  assert.equal(doc.build.version, m.select('tokenmeter_build_info')[0].labels.version);
  assert.equal(doc.models.length, 1);
  const model = doc.models[0];
  assert.equal(model.model, MODEL);

  // Counts: exact. Every request that ended is one (the 429s and the reset included).
  const sent = ALPHA_REQUESTS + BETA_REQUESTS + 1;
  const streams = ALPHA_REQUESTS + 1;  // streams that produced tokens
  for (const w of ['1m', '5m', '15m']) {
    assert.equal(model.latency[w].requests, sent, w);
    assert.equal(model.latency[w].ttft.count, streams, w);
    assert.equal(model.latency[w].tpot.count, streams, w);
    // One ITL observation per token after the first, as the histogram counts them.
    assert.equal(model.latency[w].itl.count,
      m.histogram('tokenmeter_inter_token_latency_seconds', { model: MODEL }).count, w);
    assert.equal(model.latency[w].itl.count, streams * (OUTPUT_TOKENS - 1), w);
    assert.equal(model.throughput[w].output_tokens.reported, streams * OUTPUT_TOKENS, w);
    assert.equal(model.throughput[w].output_tokens.reported,
      m.value('tokenmeter_reported_tokens_total', { model: MODEL, type: 'output' }), w);
    const seconds = model.throughput[w].seconds;
    assert.ok(seconds > 0 && seconds <= doc.uptime_seconds + 1e-9, `${w}: ${seconds} s`);
    assert.ok(Math.abs(model.throughput[w].tokens_per_second.reported -
      (streams * OUTPUT_TOKENS) / seconds) < 1e-9, w);
  }

  // Quantiles: within the sketch's bound of the schedule, plus a little for the path (the
  // metering adds well under a millisecond; a loaded machine more, never less).
  const e = doc.relative_error;
  assert.ok(Math.abs(e - 0.0217) < 0.0001, `relative_error ${e}`);
  // Slack for the path and a loaded (or sanitized) machine; a late read also shortens the gap
  // after it, so ITL and TPOT get a little below as well.
  const within = (value, scheduledMs, belowMs, aboveMs, what) => {
    const s = scheduledMs / 1000;
    assert.ok(value >= s * (1 - e) - belowMs / 1000 && value <= s * (1 + e) + aboveMs / 1000,
      `${what} ${value} s against a schedule of ${scheduledMs} ms`);
  };
  // Under a sanitizer (its stages set *SAN_OPTIONS) the proxy may read several tokens at once:
  // only "never earlier than scheduled" is checked then.
  const sanitized = Boolean(process.env.ASAN_OPTIONS || process.env.TSAN_OPTIONS);
  const latency = model.latency['1m'];
  within(latency.ttft.p50, TTFT_MS, 0, sanitized ? Infinity : 50, 'TTFT p50');
  if (!sanitized) {
    within(latency.itl.p50, ITL_MS, 2, 5, 'ITL p50');
    within(latency.tpot.p50, ITL_MS, 2, 5, 'TPOT p50');
  }

  // SLO: the streams were all well within 500 ms and 100 ms.
  assert.equal(model.slo.objective, 0.99);
  assert.equal(model.slo.ttft_target_seconds, 0.5);
  const goodTtft = m.value('tokenmeter_slo_requests_total', { model: MODEL, slo: 'ttft', result: 'good' });
  for (const w of ['5m', '1h']) {
    assert.equal(model.slo.ttft[w].good, goodTtft, w);
    assert.equal(model.slo.ttft[w].bad, 0, w);
    assert.equal(model.slo.ttft[w].good_ratio, 1, w);
    assert.equal(model.slo.ttft[w].burn_rate, 0, w);
  }
  // Availability: the reset is the one bad request; the 429s are left out, the rest are good.
  assert.equal(model.slo.availability_objective, 0.999);
  const availability = (result) =>
    m.value('tokenmeter_slo_requests_total', { model: MODEL, slo: 'availability', result });
  assert.equal(availability('bad'), 1);
  assert.equal(availability('good'), ALPHA_REQUESTS + BETA_REQUESTS - refused);
  for (const w of ['5m', '1h']) {
    assert.equal(model.slo.availability[w].good, availability('good'), w);
    assert.equal(model.slo.availability[w].bad, 1, w);
    const burn = (1 - model.slo.availability[w].good_ratio) / (1 - 0.999);
    assert.ok(Math.abs(model.slo.availability[w].burn_rate - burn) < 1e-9, w);
  }

  // Tenants: by name, never by key; the same counts as the tenant series.
  const tokensOf = (tenant) =>
    m.value('tokenmeter_tenant_tokens_total', { tenant, model: MODEL, type: 'input' }) +
    m.value('tokenmeter_tenant_tokens_total', { tenant, model: MODEL, type: 'output' });
  assert.deepEqual(doc.tenants.by_tokens.map((t) => t.tenant), ['team-alpha', 'team-beta']);
  assert.equal(doc.tenants.by_tokens[0].tokens, tokensOf('team-alpha'));
  assert.equal(doc.tenants.by_tokens[1].tokens, tokensOf('team-beta'));
  assert.deepEqual(doc.tenants.by_rate_limited,
    [{ tenant: 'team-beta', tokens: tokensOf('team-beta'), rate_limited: refused }]);
  assert.equal(m.value('tokenmeter_tenant_rate_limited_total', { tenant: 'team-beta' }), refused);

  // Upstream errors: the reset, with the reason /metrics counts it under.
  assert.equal(doc.upstream_errors.recent.length, 1);
  const reason = doc.upstream_errors.recent[0].reason;
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason }), 1);
  assert.deepEqual(doc.upstream_errors.total, { [reason]: 1 });
  assert.ok(Math.abs(doc.upstream_errors.recent[0].at_unix_ms - Date.now()) < 60_000);

  // Config summary: what is safe to show, and nothing secret anywhere.
  assert.equal(doc.config.tenants_source, 'api_key');
  assert.equal(doc.config.tenant_limits, '1');
  for (const text of [res.body.toString(), (await proxy.admin('/')).body.toString()]) {
    for (const secret of [ALPHA_KEY, BETA_KEY, STATUS_SECRET, 'TOKENMETER_TEST_STATUS_SECRET']) {
      assert.ok(!text.includes(secret), `${secret} on the status page`);
    }
  }
});

test('status page headers, odd queries and methods', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const expectPage = (res, type, what) => {
    assert.equal(res.status, 200, what);
    assert.equal(res.headers['content-type'], type, what);
    assert.equal(res.headers['content-security-policy'], CSP, what);
    assert.equal(res.headers['x-content-type-options'], 'nosniff', what);
    assert.equal(res.headers['cache-control'], 'no-store', what);
  };
  for (const p of ['/', '/status', '/?refresh=1', '/status?']) {
    const res = await proxy.admin(p);
    expectPage(res, 'text/html; charset=utf-8', p);
    assert.match(res.body.toString(), /<script src="\/status\/status\.js" defer><\/script>/);
    assert.ok(!/<script>|<style|\sstyle=|\son\w+=/.test(res.body.toString()), 'inline script or style');
  }
  expectPage(await proxy.admin('/status/status.js'), 'text/javascript; charset=utf-8', 'js');
  expectPage(await proxy.admin('/status/status.css'), 'text/css; charset=utf-8', 'css');
  expectPage(await proxy.admin('/status/favicon.svg'), 'image/svg+xml', 'icon');
  const odd = ['/status.json?%zz&&==&a=%00', `/status.json?${'x'.repeat(4000)}`, '/status.json?#',
    '/status.json?sequence=-1&sequence=99999999999999999999'];
  let last = 0;
  for (const p of odd) {
    const res = await proxy.admin(p);
    expectPage(res, 'application/json', p);
    const doc = JSON.parse(res.body.toString());
    assert.ok(doc.sequence > last, 'each document has the next sequence number');
    last = doc.sequence;
    assert.deepEqual(doc.models, []);
  }
  for (const p of ['/status.json/', '/status/', '/status/../metrics', '/status/status.js.map', '//']) {
    assert.equal((await proxy.admin(p)).status, 404, p);
  }
  const head = await request({ port: proxy.adminPort, method: 'HEAD', path: '/status.json' });
  assert.equal(head.status, 200);
  assert.equal(head.body.length, 0);
  const post = await request({ port: proxy.adminPort, method: 'POST', path: '/status.json', body: '{}' });
  assert.equal(post.status, 405);
  const missing = await proxy.admin('/nope');
  assert.match(missing.body.toString(), /\/status\.json/);
  assert.equal((await proxy.admin('/healthz')).status, 200);
});

test('metrics.status_page: false answers 404', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'metrics:\n  status_page: false\n' });
  for (const p of ['/', '/status', '/status.json', '/status/status.js']) {
    const res = await proxy.admin(p);
    assert.equal(res.status, 404, p);
    assert.match(res.body.toString(), /status_page/);
  }
  assert.equal((await proxy.admin('/metrics')).status, 200);
});
