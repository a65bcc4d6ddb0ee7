// The edge under pressure: SIGHUP reloads without touching streams and keeps the old
// configuration when the new file is broken; running short of descriptors pauses accepting
// instead of spinning, keeps /metrics answering and resumes; limits.max_client_connections
// answers 503; the upstream response head has an idle timeout, not a deadline; process_* series.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import net from 'node:net';

import {
  chatBody, rawExchange, request, sleep, startProxy, startSim, stopAll, waitFor, waitMetrics,
  waitForLog, waitReady,
} from './lib/harness.mjs';
import { startRecordingUpstream } from './lib/recording_upstream.mjs';

after(stopAll);

const STREAM = { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '50', 'x-sim-output-tokens': '40' };

function openIdle(port, count) {
  return Promise.all(Array.from({ length: count }, () => new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('error', () => {});
    socket.on('connect', () => resolve(socket));
  })));
}

test('SIGHUP applies the log level and SLO targets, keeps streams, refuses a broken file', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const base = 'log:\n  level: info\nslo:\n  models:\n    hup-model:\n      ttft: 500ms\n';
  const proxy = await startProxy({ upstream: sim.port, config: base });
  await waitReady(proxy);
  const target = (m) => m.value('tokenmeter_slo_target_seconds', { model: 'hup-model', slo: 'ttft' });
  const loadedAt = (m) => m.value('tokenmeter_config_last_reload_success_timestamp_seconds');
  const atStart = await proxy.metrics();
  assert.equal(target(atStart), 0.5);

  // A stream of about 2 s runs across both reloads.
  const stream = request({ port: proxy.port, body: chatBody('hup-model'), headers: STREAM });
  await sleep(300);
  writeFileSync(proxy.configFile, base.replace('ttft: 500ms', 'ttft: 250ms')
    .replace('level: info', 'level: debug'));
  proxy.child.signal('SIGHUP');
  await waitFor(() => /SIGHUP: configuration reloaded; applied: log.level, slo/.test(proxy.child.stderrText),
    { timeoutMs: 5000, what: 'the reload log line' });
  const afterReload = await proxy.metrics();
  assert.equal(target(afterReload), 0.25, 'the new SLO target is served');
  assert.ok(loadedAt(afterReload) > loadedAt(atStart), 'the accepted reload is the last load');

  writeFileSync(proxy.configFile, `${base}limits:\n  max_json_depht: 3\n`);
  proxy.child.signal('SIGHUP');
  await waitFor(() => /SIGHUP: limits\.max_json_depht: unknown key/.test(proxy.child.stderrText),
    { timeoutMs: 5000, what: 'the error naming the key' });
  // The summary is a separate log line, written after the per-key errors.
  await waitForLog(proxy.child, /the new configuration has 1 error\(s\); the running one stays/);

  const res = await stream;
  assert.equal(res.status, 200);
  assert.ok(res.complete, 'the stream running across both reloads completed');
  assert.match(res.body.toString(), /data: \[DONE\]/);
  assert.ok(proxy.child.running, 'SIGHUP did not end the process');
  const m = await proxy.metrics();
  assert.equal(m.value('tokenmeter_config_reloads_total', { result: 'ok' }), 1);
  assert.equal(m.value('tokenmeter_config_reloads_total', { result: 'rejected' }), 1);
  assert.equal(target(m), 0.25, 'the broken file changed nothing');
  assert.equal(loadedAt(m), loadedAt(afterReload), 'a rejected reload is no load');
});

test('SIGHUP without --config is logged and harmless', { timeout: 15_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: null });
  proxy.child.signal('SIGHUP');
  await waitFor(() => /SIGHUP: started without --config/.test(proxy.child.stderrText),
    { timeoutMs: 5000, what: 'the log line' });
  const res = await request({ port: proxy.port, body: chatBody('after-hup'), headers: { 'x-sim-output-tokens': '2' } });
  assert.equal(res.status, 200);
});

test('400 connections under a 256-descriptor limit: accepting pauses, /metrics answers, no log flood, service resumes', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, wrap: ['prlimit', '--nofile=256:256', '--'] });
  await waitReady(proxy);
  const before = await proxy.metrics();
  assert.equal(before.value('process_max_fds'), 256);
  const sockets = await openIdle(proxy.port, 400);
  await sleep(1500);
  // Admin still answers while the proxy listener is at its descriptor budget.
  const m = await proxy.metrics();
  assert.ok(m.value('process_open_fds') < 256, `open fds ${m.value('process_open_fds')}`);
  assert.ok(m.value('process_open_fds') > 90, 'the accepted connections hold descriptors');
  const floodLines = proxy.child.stderrText.split('\n').filter((l) => /accept failed/.test(l)).length;
  assert.ok(floodLines <= 5, `at most a few accept-failure lines, got ${floodLines}`);
  for (const s of sockets) s.destroy();
  // The queued connections are served as the idle ones go, and new requests work again.
  const res = await waitFor(async () => {
    const r = await request({ port: proxy.port, body: chatBody('after-pressure'), headers: { 'x-sim-output-tokens': '2' }, timeoutMs: 5000 });
    return r.status === 200 ? r : undefined;
  }, { timeoutMs: 30_000, intervalMs: 200, what: 'a request served after the pressure' });
  assert.ok(res.complete);
  assert.ok(proxy.child.running);
});

test('limits.max_client_connections: the next connection gets 503 JSON and is closed', { timeout: 20_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: 'limits:\n  max_client_connections: 5\n' });
  const sockets = await openIdle(proxy.port, 5);
  await waitMetrics(proxy, () => true);
  await sleep(200);
  const refused = await rawExchange(proxy.port, 'GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n', { timeoutMs: 3000 });
  assert.equal(refused.response && refused.response.status, 503);
  assert.equal(refused.response.json.error.code, 'too_many_connections');
  assert.equal(refused.closed, true);
  const m = await proxy.metrics();
  assert.equal(m.value('tokenmeter_connections_refused_total'), 1);
  sockets[0].destroy();
  await sleep(200);
  const ok = await request({ port: proxy.port, body: chatBody('under-limit'), headers: { 'x-sim-output-tokens': '2' } });
  assert.equal(ok.status, 200);
  for (const s of sockets) s.destroy();
});

test('the upstream response head has an idle timeout: a slow but steady head is not cut', { timeout: 20_000 }, async () => {
  const upstream = await startRecordingUpstream();
  const proxy = await startProxy({
    upstream: upstream.port,
    config: 'timeouts:\n  upstream_idle: 1s\nreadiness:\n  probe_interval: 1h\n',
  });
  upstream.reset([{ parts: ['HTTP/1.1 200 OK\r\n', { wait_ms: 700 }, 'Content-Length: 2\r\n', { wait_ms: 700 }, '\r\nok'] }]);
  const slow = await request({ port: proxy.port, method: 'GET', path: '/slow-head' });
  assert.equal(slow.status, 200, 'a head taking 1.4 s with 0.7 s gaps passes a 1 s idle timeout');
  assert.equal(slow.body.toString(), 'ok');
  upstream.reset([{ parts: ['HTTP/1.1 200 OK\r\n', { wait_ms: 1500 }, 'Content-Length: 2\r\n\r\nok'] }]);
  const silent = await request({ port: proxy.port, method: 'GET', path: '/silent-head' });
  assert.equal(silent.status, 504, 'a 1.5 s silence inside the head is cut');
  await upstream.close();
});

test('process_* series every exporter has', { timeout: 15_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const m = await proxy.metrics();
  const now = Date.now() / 1000;
  assert.ok(Math.abs(m.value('process_start_time_seconds') - now) < 60, 'start time is about now');
  assert.ok(m.value('process_resident_memory_bytes') > 1e6);
  assert.ok(m.value('process_virtual_memory_bytes') > m.value('process_resident_memory_bytes'));
  assert.ok(m.value('process_open_fds') >= 5);
  assert.ok(m.value('process_max_fds') >= m.value('process_open_fds'));
  const text = await proxy.metricsText();
  assert.match(text, /# TYPE process_cpu_seconds_total counter/);
});

test('a listener that cannot bind names itself and its address', { timeout: 15_000 }, async () => {
  const { spawnSync } = await import('node:child_process');
  const blocker = net.createServer();
  await new Promise((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const taken = blocker.address().port;
  try {
    for (const [flag, name] of [['--listen', 'proxy'], ['--admin', 'admin']]) {
      const other = flag === '--listen' ? '--admin' : '--listen';
      const run = spawnSync(process.env.TOKENMETER_BIN,
        [flag, `127.0.0.1:${taken}`, other, '127.0.0.1:0'], { encoding: 'utf8', timeout: 10_000 });
      assert.equal(run.status, 1);
      assert.match(run.stderr, new RegExp(`cannot bind the ${name} address 127\\.0\\.0\\.1:${taken}: Address already in use`));
    }
  } finally {
    blocker.close();
  }
});

test('a body nested 150,000 deep is refused on metered paths, or with unparsable_body: forward passes the proxy unchanged and the simulator refuses it alive', { timeout: 20_000 }, async () => {
  const sim = await startSim();
  const depth = 150_000;
  const body = `{"model":"deep","system":${'['.repeat(depth)}${']'.repeat(depth)},"messages":[]}`;
  const refusing = await startProxy({ upstream: sim.port });
  for (const path of ['/v1/messages', '/v1/chat/completions', '/api/chat']) {
    const res = await request({ port: refusing.port, path, body });
    assert.equal(res.status, 400, `${path}: deeper than limits.max_json_depth, so not metered`);
    assert.equal(JSON.parse(res.body.toString()).error.code, 'unparsable_body');
  }
  assert.ok(refusing.child.running, 'the proxy is still up');
  const proxy = await startProxy({ upstream: sim.port, config: 'limits:\n  unparsable_body: forward\n' });
  for (const path of ['/v1/messages', '/v1/chat/completions', '/api/chat']) {
    const res = await request({ port: proxy.port, path, body });
    assert.equal(res.status, 400, `${path}: the simulator's own refusal, relayed`);
    assert.match(res.body.toString(), /deeper than 512/);
  }
  assert.ok(proxy.child.running && sim.child.running, 'both processes are still up');
  const echo = await request({ port: proxy.port, path: '/v1/echo-deep', body });
  assert.equal(echo.status, 200);
  assert.equal(JSON.parse(echo.body.toString()).body_length, body.length, 'forwarded byte for byte');
});
