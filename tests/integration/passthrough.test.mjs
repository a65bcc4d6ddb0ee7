// Hop-by-hop headers are dropped, everything else passes through; non-LLM paths are forwarded
// untouched and counted with api="none"; client and upstream keep-alive.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';

import {
  chatBody, completionBody, describeResult, rawExchange, request, startProxy, startSim, stopAll,
  waitMetrics, waitReady,
} from './lib/harness.mjs';

after(stopAll);

test('hop-by-hop headers are dropped, end-to-end ones kept, Host is the upstream', { timeout: 20_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const raw = [
    'POST /echo/path?q=1&r=two HTTP/1.1',
    `Host: 127.0.0.1:${proxy.port}`,
    'Connection: keep-alive, X-Drop-Me',
    'X-Drop-Me: 1',
    'Keep-Alive: timeout=5',
    'TE: trailers',
    'Proxy-Connection: keep-alive',
    'Upgrade: websocket',
    'X-Keep: yes',
    'X-Multi: A',
    'X-Multi: B',
    'Content-Type: text/plain',
    'Content-Length: 11',
    '',
    'hello world',
  ].join('\r\n');
  const result = await rawExchange(proxy.port, raw, { untilComplete: true, timeoutMs: 5000 });
  const res = result.response;
  assert.ok(res && res.complete, `no complete response: ${JSON.stringify(result.data.toString())}`);
  assert.equal(res.status, 200, res.body.toString());
  assert.equal(result.closed, false, 'a keep-alive client connection stays open');
  const echo = res.json;
  assert.ok(echo, res.body.toString());
  assert.equal(echo.method, 'POST');
  assert.equal(echo.target, '/echo/path?q=1&r=two');
  assert.equal(echo.body, 'hello world');
  assert.equal(echo.headers['x-keep'], 'yes');
  assert.equal(echo.headers['x-multi'], 'A, B');
  assert.equal(echo.headers['content-type'], 'text/plain');
  assert.equal(echo.headers['content-length'], '11');
  for (const name of ['x-drop-me', 'keep-alive', 'te', 'proxy-connection', 'upgrade', 'transfer-encoding']) {
    assert.equal(echo.headers[name], undefined, `${name} reached the upstream: ${JSON.stringify(echo.headers)}`);
  }
  if (echo.headers.connection !== undefined) {
    assert.doesNotMatch(echo.headers.connection, /x-drop-me|upgrade/i, 'Connection options are not forwarded');
  }
  assert.equal(echo.headers.host, `127.0.0.1:${sim.port}`, 'Host is the upstream host:port');
  assert.equal(echo.header_list.filter(([name]) => name.toLowerCase() === 'host').length, 1);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { api: 'none' }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'none', model: 'none', outcome: 'complete', code: '200' }), 1);
});

test('non-LLM paths pass through untouched and are counted with api="none"', { timeout: 20_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });

  const direct = await request({ port: sim.port, method: 'GET', path: '/v1/models' });
  const proxied = await request({ port: proxy.port, method: 'GET', path: '/v1/models' });
  assert.equal(proxied.status, 200, describeResult(proxied));
  assert.ok(proxied.body.equals(direct.body), `GET /v1/models differs: ${proxied.body} vs ${direct.body}`);
  assert.equal(proxied.headers['content-type'], direct.headers['content-type']);

  // A POST with a model field to a path no API is known by: forwarded unchanged, not metered
  // per model.
  const payload = Buffer.from(JSON.stringify({ model: 'embed-model', input: ['a', 'b c', 'ünïcödé'] }));
  const embed = await request({ port: proxy.port, method: 'POST', path: '/v1/files', body: payload });
  assert.equal(embed.status, 200, describeResult(embed));
  const echo = JSON.parse(embed.body.toString());
  assert.equal(echo.method, 'POST');
  assert.equal(echo.target, '/v1/files');
  assert.ok(Buffer.from(echo.body_base64, 'base64').equals(payload), 'request body forwarded byte for byte');

  // A 404 from the upstream is passed through as is.
  const missing = await request({ port: proxy.port, method: 'GET', path: '/no/such/path' });
  const missingDirect = await request({ port: sim.port, method: 'GET', path: '/no/such/path' });
  assert.equal(missing.status, 404);
  assert.ok(missing.body.equals(missingDirect.body));

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { api: 'none' }) >= 3);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'none', model: 'none', outcome: 'complete', code: '200' }), 2);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'none', model: 'none', code: '404' }), 1);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'none' }), 3);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'embed-model' }), 0, 'no per-model series for api=none');
  assert.equal(m.value('tokenmeter_tokens_total'), 0);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { api: 'none' }).count, 0);
});

test('keep-alive: 20 requests on one client connection, the upstream pool reuses connections', { timeout: 30_000 }, async () => {
  const model = 'keepalive-model';
  const sim = await startSim();
  // No readiness probes during the test: they would be connections too.
  const proxy = await startProxy({ upstream: sim.port, config: 'readiness:\n  probe_interval: 1h\n' });
  await waitReady(proxy);
  const before = await sim.stats();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    for (let i = 0; i < 20; i++) {
      const streamed = i % 3 !== 2;
      const completions = i % 4 === 1;
      const res = await request({
        port: proxy.port,
        agent,
        path: completions ? '/v1/completions' : '/v1/chat/completions',
        body: completions ? completionBody(model, { stream: streamed }) : chatBody(model, { stream: streamed }),
        headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '1', 'x-sim-output-tokens': '4' },
        timeoutMs: 10_000,
      });
      assert.equal(res.status, 200, `request ${i}: ${describeResult(res)}`);
      assert.equal(res.complete, true, `request ${i}: ${describeResult(res)}`);
      if (i > 0) assert.equal(res.reusedSocket, true, `request ${i} reused the client connection`);
    }
  } finally {
    agent.destroy();
  }
  const after = await sim.stats();
  // /sim/stats adds one connection and one request of its own.
  const upstreamConnections = after.connections_accepted - before.connections_accepted - 1;
  assert.equal(after.requests - before.requests - 1, 20);
  assert.ok(upstreamConnections >= 1 && upstreamConnections <= 2,
    `the simulator saw ${upstreamConnections} connections for 20 sequential requests`);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 20);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'complete', code: '200' }), 20);
});

test('HTTP/1.0 client without keep-alive gets a close-delimited stream', { timeout: 20_000 }, async () => {
  const model = 'http10-model';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const body = JSON.stringify(chatBody(model));
  const raw = `POST /v1/chat/completions HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n` +
    `X-Sim-Output-Tokens: 5\r\nX-Sim-Ttft-Ms: 0\r\nX-Sim-Itl-Ms: 1\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  const result = await rawExchange(proxy.port, raw, { timeoutMs: 5000 });
  assert.equal(result.closed, true);
  const res = result.response;
  assert.ok(res, result.data.toString());
  assert.equal(res.status, 200);
  assert.equal(res.version, '1.0');
  assert.equal(res.headers['transfer-encoding'], undefined, 'no chunked encoding for HTTP/1.0');
  assert.ok(res.body.toString().endsWith('data: [DONE]\n\n'), JSON.stringify(res.body.toString().slice(-100)));
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'complete' }), 1);
});

test('pipelined requests, a chunked request body and Expect: 100-continue', { timeout: 20_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });

  // Two requests in one write: both answered, in order.
  const pipelined = await rawExchange(proxy.port,
    'POST /echo/first HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1' +
    'POST /echo/second HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nConnection: close\r\n\r\n2', { timeoutMs: 5000 });
  const text = pipelined.data.toString();
  assert.equal(pipelined.closed, true);
  assert.equal((text.match(/HTTP\/1\.1 200 /g) || []).length, 2, text);
  assert.ok(text.indexOf('"target":"/echo/first"') < text.indexOf('"target":"/echo/second"'), text);

  // A chunked request body reaches the upstream whole.
  const chunked = await rawExchange(proxy.port,
    'POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' +
    '3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n', { timeoutMs: 5000 });
  assert.equal(chunked.response && chunked.response.status, 200, chunked.data.toString());
  assert.equal(chunked.response.json.body, 'abcdefg');

  // Expect: 100-continue: the proxy says continue, then forwards the body.
  const got = await new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port: proxy.port });
    let data = '';
    let sent = false;
    const timer = setTimeout(() => { socket.destroy(); reject(new Error(`no answer: ${data}`)); }, 5000);
    socket.on('data', (chunk) => {
      data += chunk.toString();
      if (!sent && data.includes('100 Continue\r\n\r\n')) {
        sent = true;
        socket.write('hello');
      }
    });
    socket.on('close', () => { clearTimeout(timer); resolve(data); });
    socket.on('error', reject);
    socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\n');
  });
  assert.match(got, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
  const echo = JSON.parse(got.slice(got.indexOf('\r\n\r\n', got.indexOf('200 OK')) + 4));
  assert.equal(echo.body, 'hello');
  assert.equal(echo.headers.expect, undefined, 'Expect is answered by the proxy, not forwarded');
});

test('a client that hangs up right after reading a whole response still counts as complete', { timeout: 30_000 }, async () => {
  // Each request is on its own connection that the client closes as soon as the body is read,
  // racing the proxy's end-of-response bookkeeping against its client-liveness watch.
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const rounds = 100;
  for (let i = 0; i < rounds; i++) {
    const res = await request({ port: proxy.port, method: 'GET', path: '/v1/models' });
    assert.equal(res.status, 200, describeResult(res));
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { api: 'none' }) >= rounds);
  const byOutcome = ['complete', 'client_cancel', 'upstream_error', 'upstream_truncated', 'rejected']
    .map((o) => `${o}=${m.value('tokenmeter_requests_total', { api: 'none', outcome: o })}`).join(' ');
  assert.equal(m.value('tokenmeter_requests_total', { api: 'none', outcome: 'complete' }), rounds, byOutcome);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'none', outcome: 'client_cancel' }), 0);
});

// The workers' event loops run without Asio's locks, where Asio's own resolver cannot run: an
// upstream named by host name is resolved on the pool's resolver thread and answered back
// through each worker's mailbox. Two workers, several new upstream connections at once.
test('an upstream named by host name is resolved for every worker', { timeout: 30_000 }, async () => {
  const model = 'named-upstream';
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: `http://localhost:${sim.port}`,
    args: ['--threads', '2'],
  });
  const results = await Promise.all(Array.from({ length: 8 }, () => request({
    port: proxy.port,
    body: chatBody(model),
    headers: { 'x-sim-output-tokens': '5', 'x-sim-itl-ms': '20' },
    timeoutMs: 10_000,
  })));
  for (const res of results) {
    assert.equal(res.status, 200, describeResult(res));
    assert.equal(res.complete, true, describeResult(res));
    assert.match(res.body.toString(), /data: \[DONE\]/);
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 8);
  assert.equal(m.value('tokenmeter_requests_total', { model, code: '200' }), 8);
  assert.equal(m.value('tokenmeter_upstream_errors_total'), 0);
});

test('an upstream name that does not resolve is a 502 with a JSON body, counted resolve_failed', { timeout: 60_000 }, async () => {
  const model = 'unresolvable-upstream';
  // .invalid never resolves (RFC 6761).
  const proxy = await startProxy({ upstream: 'http://tokenmeter-test.invalid:8000' });
  const res = await request({ port: proxy.port, body: chatBody(model), timeoutMs: 40_000 });
  assert.equal(res.status, 502, describeResult(res));
  assert.match(res.headers['content-type'], /^application\/json/);
  const json = JSON.parse(res.body.toString());
  assert.equal(typeof json.error.code, 'string');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_upstream_errors_total', { reason: 'resolve_failed' }), 1);
});
