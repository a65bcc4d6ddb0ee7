// WebSocket tunnels through the real proxy: a `ws` server as the upstream (plain and https), the
// proxy between, a `ws` client (plain and wss:// on the TLS listener). The handshake reaches the
// upstream with its path, query and credentials; text, binary and fragmented messages arrive
// byte for byte both ways; pings are answered end to end; close codes and reasons pass both
// ways; a non-101 answer comes back as a response; the tunnel cap answers 503 without reaching
// the upstream; the idle timeout, the end of a drain, an over-size message and a broken frame
// each end the tunnel with a close frame of the proxy's own; and the proxy serves an ordinary
// request afterwards.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { after, before, test } from 'node:test';

import { WebSocket, WebSocketServer } from 'ws';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import { request, startProxy, stopAll, waitFor } from './lib/harness.mjs';
import { closeWsServer } from './lib/ws_server.mjs';

const servers = [];
let ca;
let leaf;

before(() => {
  ca = makeCa();
  leaf = makeLeaf(ca, 'ws-server');
});

after(async () => {
  await stopAll();
  for (const s of servers) await s.close();
});

// The upstream: an HTTP(S) server that answers plain requests with "plain ok", refuses upgrades
// to /refuse with a 401 JSON answer, and otherwise accepts WebSocket upgrades, recording each
// handshake and connection. Its behaviour per connection is set by the test (onConnection).
async function startUpstream({ tls = false, perMessageDeflate = false } = {}) {
  const state = {
    handshakes: [],
    upgrades: 0,
    sockets: [],
    onConnection: () => {},
  };
  const handler = (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('plain ok');
  };
  const server = tls
    ? https.createServer({ cert: readFileSync(leaf.cert), key: readFileSync(leaf.key) }, handler)
    : http.createServer(handler);
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate });
  server.on('upgrade', (req, socket, head) => {
    state.upgrades += 1;
    state.handshakes.push({ url: req.url, headers: { ...req.headers } });
    if (req.url.startsWith('/refuse')) {
      const body = JSON.stringify({ error: { code: 'no_realtime_for_you' } });
      socket.end(`HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nX-Upstream: refused\r\n\r\n${body}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      state.sockets.push(ws);
      ws.on('error', () => {});
      state.onConnection(ws, req);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = server.address().port;
  const s = {
    ...state,
    state,
    port,
    url: `${tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    close: () => closeWsServer(server, wss, state.sockets),
  };
  servers.push(s);
  return s;
}

// A client connection; resolves once open, with every event it saw recorded.
function connect(url, options = {}) {
  const ws = new WebSocket(url, options.protocols ?? [], { perMessageDeflate: false, ...options.ws });
  const seen = { messages: [], pongs: [], pings: [], close: null, error: null, response: null };
  ws.on('message', (data, isBinary) => seen.messages.push({ data: Buffer.from(data), isBinary }));
  ws.on('pong', (data) => seen.pongs.push(Buffer.from(data)));
  ws.on('ping', (data) => seen.pings.push(Buffer.from(data)));
  ws.on('close', (code, reason) => { seen.close = { code, reason: reason.toString() }; });
  ws.on('error', (error) => { seen.error = error; });
  const opened = new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ ws, seen }));
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (text) => { body += text; });
      res.on('end', () => {
        seen.response = { status: res.statusCode, headers: res.headers, body };
        resolve({ ws, seen });
      });
    });
    ws.once('error', (error) => reject(error));
  });
  return opened;
}

// The upstream's side of its latest connection, with what it received recorded.
function upstreamSide(upstream) {
  return new Promise((resolve) => {
    upstream.state.onConnection = (ws) => {
      const seen = { messages: [], pings: [], pongs: [], close: null };
      ws.on('message', (data, isBinary) => seen.messages.push({ data: Buffer.from(data), isBinary }));
      ws.on('ping', (data) => seen.pings.push(Buffer.from(data)));
      ws.on('pong', (data) => seen.pongs.push(Buffer.from(data)));
      ws.on('close', (code, reason) => { seen.close = { code, reason: reason.toString() }; });
      resolve({ ws, seen });
    };
  });
}

async function openTunnel(proxyUrl, upstream, path = '/v1/realtime', options = {}) {
  const far = upstreamSide(upstream);
  const near = await connect(`${proxyUrl}${path}`, options);
  assert.equal(near.seen.response, null, `the upgrade was refused: ${JSON.stringify(near.seen.response)}`);
  return { near, far: await far };
}

function plainGet(port) {
  return request({ port, method: 'GET', path: '/health', timeoutMs: 5000 });
}

let upstream;
let proxy;

before(async () => {
  upstream = await startUpstream();
  proxy = await startProxy({ upstream: upstream.port, config: 'threads: 1\n' });
});

test('the handshake reaches the upstream with its path, query and credentials', async () => {
  const far = upstreamSide(upstream);
  const near = await connect(`ws://127.0.0.1:${proxy.port}/v1/realtime?model=gpt-4o-realtime&x=a%20b`, {
    protocols: ['realtime', 'openai-beta.realtime-v1'],
    ws: { headers: { Authorization: 'Bearer sk-test-123', 'OpenAI-Beta': 'realtime=v1' } },
  });
  await far;
  assert.equal(near.seen.response, null);
  const handshake = upstream.handshakes.at(-1);
  assert.equal(handshake.url, '/v1/realtime?model=gpt-4o-realtime&x=a%20b');
  assert.equal(handshake.headers.authorization, 'Bearer sk-test-123');
  assert.equal(handshake.headers['openai-beta'], 'realtime=v1');
  assert.equal(handshake.headers.upgrade, 'websocket');
  assert.match(handshake.headers.connection, /upgrade/i);
  assert.equal(handshake.headers['sec-websocket-version'], '13');
  assert.equal(handshake.headers['sec-websocket-protocol'], 'realtime,openai-beta.realtime-v1');
  // The client checked Sec-WebSocket-Accept against its own key (ws fails the handshake
  // otherwise), so the key went up and the answer came back unchanged; and the protocol the
  // upstream chose reached the client.
  assert.equal(near.ws.protocol, 'realtime');
  near.ws.close(1000);
  await waitFor(() => near.seen.close, { what: 'the close' });
});

test('text and binary messages arrive byte for byte both ways', async () => {
  const { near, far } = await openTunnel(`ws://127.0.0.1:${proxy.port}`, upstream);
  const text = 'héllo wörld ✓ '.repeat(50);
  const small = randomBytes(100);
  const large = randomBytes(300_000);  // 64-bit length, several reads and writes
  near.ws.send(text);
  near.ws.send(small);
  near.ws.send(large);
  await waitFor(() => far.seen.messages.length === 3, { timeoutMs: 10_000, what: 'three messages upstream' });
  assert.equal(far.seen.messages[0].isBinary, false);
  assert.equal(far.seen.messages[0].data.toString('utf8'), text);
  assert.equal(far.seen.messages[1].isBinary, true);
  assert.ok(far.seen.messages[1].data.equals(small));
  assert.ok(far.seen.messages[2].data.equals(large));

  const back = randomBytes(70_000);  // 64-bit length the other way
  far.ws.send('from the server ✓');
  far.ws.send(back);
  await waitFor(() => near.seen.messages.length === 2, { timeoutMs: 10_000, what: 'two messages at the client' });
  assert.equal(near.seen.messages[0].data.toString('utf8'), 'from the server ✓');
  assert.equal(near.seen.messages[0].isBinary, false);
  assert.ok(near.seen.messages[1].data.equals(back));
  near.ws.close(1000);
  await waitFor(() => near.seen.close, { what: 'the close' });
});

test('fragmented messages are reassembled by the far end, with a ping between fragments', async () => {
  const { near, far } = await openTunnel(`ws://127.0.0.1:${proxy.port}`, upstream);
  near.ws.send('first ', { fin: false });
  near.ws.ping('between');
  near.ws.send('second ', { fin: false });
  near.ws.send('third', { fin: true });
  await waitFor(() => far.seen.messages.length === 1, { what: 'the reassembled message' });
  assert.equal(far.seen.messages[0].data.toString(), 'first second third');
  assert.deepEqual(far.seen.pings.map(String), ['between']);

  far.ws.send(Buffer.from([1, 2, 3]), { fin: false, binary: true });
  far.ws.send(Buffer.from([4, 5]), { fin: true, binary: true });
  await waitFor(() => near.seen.messages.length === 1, { what: 'the reassembled message at the client' });
  assert.deepEqual([...near.seen.messages[0].data], [1, 2, 3, 4, 5]);
  assert.equal(near.seen.messages[0].isBinary, true);
  near.ws.close(1000);
  await waitFor(() => near.seen.close, { what: 'the close' });
});

test('pings from either side are answered by the other end', async () => {
  const { near, far } = await openTunnel(`ws://127.0.0.1:${proxy.port}`, upstream);
  near.ws.ping(Buffer.from('client ping'));
  await waitFor(() => near.seen.pongs.length === 1, { what: 'the upstream\'s pong' });
  assert.equal(near.seen.pongs[0].toString(), 'client ping');
  assert.equal(far.seen.pings[0].toString(), 'client ping');

  far.ws.ping(Buffer.from('server ping'));
  await waitFor(() => far.seen.pongs.length === 1, { what: 'the client\'s pong' });
  assert.equal(far.seen.pongs[0].toString(), 'server ping');
  assert.equal(near.seen.pings[0].toString(), 'server ping');
  near.ws.close(1000);
  await waitFor(() => near.seen.close, { what: 'the close' });
});

test('close codes and reasons pass both ways', async () => {
  const first = await openTunnel(`ws://127.0.0.1:${proxy.port}`, upstream);
  first.near.ws.close(4001, 'client says bye');
  await waitFor(() => first.far.seen.close && first.near.seen.close, { what: 'both closes' });
  assert.deepEqual(first.far.seen.close, { code: 4001, reason: 'client says bye' });
  assert.equal(first.near.seen.close.code, 4001);  // the upstream's answering close

  const second = await openTunnel(`ws://127.0.0.1:${proxy.port}`, upstream);
  second.far.ws.close(4002, 'server says bye');
  await waitFor(() => second.far.seen.close && second.near.seen.close, { what: 'both closes' });
  assert.deepEqual(second.near.seen.close, { code: 4002, reason: 'server says bye' });
  assert.equal(second.far.seen.close.code, 4002);
});

test('an upstream answer other than 101 comes back as an ordinary response', async () => {
  const near = await connect(`ws://127.0.0.1:${proxy.port}/refuse?model=x`);
  assert.ok(near.seen.response, 'the client got a response, not a tunnel');
  assert.equal(near.seen.response.status, 401);
  assert.equal(near.seen.response.headers['x-upstream'], 'refused');
  assert.deepEqual(JSON.parse(near.seen.response.body), { error: { code: 'no_realtime_for_you' } });
  assert.equal(upstream.handshakes.at(-1).url, '/refuse?model=x');
});

test('a frame that breaks the protocol is not forwarded: 1002 to its sender, 1001 to the other side', async () => {
  const far = upstreamSide(upstream);
  // A raw client: the upgrade request with a first frame behind it in the same write (sent
  // before the 101, so read with the request head), then a masked text frame with RSV2 set.
  const socket = net.connect(proxy.port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let received = Buffer.alloc(0);
  socket.on('data', (data) => { received = Buffer.concat([received, data]); });
  const good = maskedFrame(0x81, Buffer.from('fine'));
  const bad = maskedFrame(0xA1, Buffer.from('reserved bit'));
  socket.write(Buffer.concat([Buffer.from(
    'GET /v1/realtime HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n'), good]));
  const { seen } = await far;
  await waitFor(() => seen.messages.length === 1, { what: 'the early frame upstream' });
  socket.write(bad);
  await waitFor(() => seen.close, { what: 'the upstream\'s close' });
  assert.deepEqual(seen.messages.map((m) => m.data.toString()), ['fine']);
  assert.equal(seen.close.code, 1001);
  // The client got the 101, then a close frame 1002 of the proxy's (unmasked, as a server's).
  await waitFor(() => received.includes(Buffer.from([0x88])), { what: 'a close frame at the client' });
  const headEnd = received.indexOf('\r\n\r\n');
  assert.match(received.subarray(0, headEnd).toString(), /^HTTP\/1\.1 101 /);
  const frame = received.subarray(headEnd + 4);
  assert.equal(frame[0], 0x88);
  assert.equal(frame[1] & 0x80, 0, 'a server\'s frame is not masked');
  assert.equal(frame.readUInt16BE(2), 1002);
  socket.destroy();
});

test('a message over websocket.max_message_bytes closes the tunnel with 1009 to both sides', async () => {
  const small = await startProxy({
    upstream: upstream.port,
    config: 'threads: 1\nwebsocket:\n  max_message_bytes: 1KiB\n',
  });
  const { near, far } = await openTunnel(`ws://127.0.0.1:${small.port}`, upstream);
  near.ws.send(Buffer.alloc(1000, 1));  // within the limit
  near.ws.send(Buffer.alloc(2000, 2));  // over it: never forwarded
  await waitFor(() => near.seen.close && far.seen.close, { timeoutMs: 5000, what: 'both closes' });
  assert.equal(far.seen.messages.length, 1);
  assert.equal(far.seen.messages[0].data.length, 1000);
  assert.equal(near.seen.close.code, 1009);
  assert.equal(far.seen.close.code, 1009);
  await small.stop();
});

test('over websocket.max_tunnels an upgrade gets 503 and never reaches the upstream', async () => {
  const capped = await startProxy({
    upstream: upstream.port,
    config: 'threads: 2\nwebsocket:\n  max_tunnels: 1\n',
  });
  const url = `ws://127.0.0.1:${capped.port}`;
  assert.equal((await capped.metrics()).value('tokenmeter_websocket_tunnels'), 0);
  const first = await openTunnel(url, upstream);
  assert.equal((await capped.metrics()).value('tokenmeter_websocket_tunnels'), 1, 'the open tunnel');
  const upgradesBefore = upstream.state.upgrades;
  const refused = await connect(`${url}/v1/realtime`);
  assert.ok(refused.seen.response);
  assert.equal(refused.seen.response.status, 503);
  assert.match(refused.seen.response.headers['content-type'], /application\/json/);
  assert.equal(JSON.parse(refused.seen.response.body).error.code, 'too_many_tunnels');
  assert.equal(upstream.state.upgrades, upgradesBefore, 'the refused upgrade reached the upstream');
  // The first tunnel still works, and its place is free again once it ends.
  first.near.ws.send('still here');
  await waitFor(() => first.far.seen.messages.length === 1, { what: 'a message on the first tunnel' });
  first.near.ws.close(1000);
  await waitFor(() => first.near.seen.close, { what: 'the close' });
  await waitFor(async () => (await capped.metrics()).value('tokenmeter_websocket_tunnels') === 0,
    { timeoutMs: 5000, what: 'the tunnel gauge back at 0' });
  const again = await waitFor(async () => {
    const attempt = await connect(`${url}/v1/realtime`);
    if (attempt.seen.response) return undefined;
    return attempt;
  }, { timeoutMs: 5000, what: 'a tunnel after the first one ended' });
  again.ws.close(1000);
  await capped.stop();
});

test('a tunnel idle for websocket.idle_timeout is closed with 1001 to both sides', async () => {
  const idle = await startProxy({
    upstream: upstream.port,
    config: 'threads: 1\nwebsocket:\n  idle_timeout: 1s\n',
  });
  const opened = Date.now();
  const { near, far } = await openTunnel(`ws://127.0.0.1:${idle.port}`, upstream);
  // Traffic keeps it open past the timeout.
  for (let i = 0; i < 4; i += 1) {
    near.ws.send(`tick ${i}`);
    await waitFor(() => far.seen.messages.length === i + 1, { what: `tick ${i} upstream` });
    // Traffic paced slower than nothing at all would take: 4 × 300 ms outlasts the 1 s timeout.
    await new Promise((resolve) => { setTimeout(resolve, 300); });
  }
  assert.equal(near.seen.close, null, 'closed while traffic flowed');
  await waitFor(() => near.seen.close && far.seen.close, { timeoutMs: 5000, what: 'both closes' });
  assert.ok(Date.now() - opened >= 900 + 1000);
  assert.equal(near.seen.close.code, 1001);
  assert.equal(far.seen.close.code, 1001);
  await idle.stop();
});

test('wss:// on the TLS listener to an https upstream, with permessage-deflate (a path not metered)', async () => {
  const secureUpstream = await startUpstream({ tls: true, perMessageDeflate: true });
  const tlsProxy = await startProxy({
    upstream: `https://127.0.0.1:${secureUpstream.port}`,
    config: `threads: 1\ntls:\n  cert_file: ${leaf.cert}\n  key_file: ${leaf.key}\n` +
      `upstream_tls:\n  ca_file: ${ca.cert}\n`,
  });
  const caPem = readFileSync(ca.cert);
  const far = upstreamSide(secureUpstream);
  const near = await connect(`wss://127.0.0.1:${tlsProxy.port}/v1/deflated?model=m`, {
    ws: { ca: caPem, perMessageDeflate: true, headers: { Authorization: 'Bearer sk-tls' } },
  });
  const { ws: farWs, seen } = await far;
  assert.equal(near.seen.response, null);
  assert.equal(secureUpstream.handshakes.at(-1).headers.authorization, 'Bearer sk-tls');
  assert.match(near.ws.extensions, /permessage-deflate/);
  const text = 'compressible '.repeat(2000);
  const binary = randomBytes(50_000);
  near.ws.send(text);
  near.ws.send(binary);
  await waitFor(() => seen.messages.length === 2, { timeoutMs: 10_000, what: 'messages upstream' });
  assert.equal(seen.messages[0].data.toString(), text);
  assert.ok(seen.messages[1].data.equals(binary));
  farWs.send(text);
  await waitFor(() => near.seen.messages.length === 1, { what: 'the message at the client' });
  assert.equal(near.seen.messages[0].data.toString(), text);
  near.ws.ping('tls ping');
  await waitFor(() => near.seen.pongs.length === 1, { what: 'the pong' });
  near.ws.close(4003, 'tls bye');
  await waitFor(() => seen.close && near.seen.close, { what: 'both closes' });
  assert.deepEqual(seen.close, { code: 4003, reason: 'tls bye' });
  await tlsProxy.stop();
});

test('at the end of the drain window open tunnels are closed with 1001', async () => {
  const draining = await startProxy({
    upstream: upstream.port,
    config: 'threads: 1\ntimeouts:\n  drain: 500ms\n',
  });
  const { near, far } = await openTunnel(`ws://127.0.0.1:${draining.port}`, upstream);
  const signalled = Date.now();
  draining.child.signal('SIGTERM');
  // While the drain window lasts the tunnel keeps working.
  near.ws.send('during the drain');
  await waitFor(() => far.seen.messages.length === 1, { what: 'a message during the drain' });
  await waitFor(() => near.seen.close && far.seen.close, { timeoutMs: 10_000, what: 'both closes' });
  assert.ok(Date.now() - signalled >= 450, 'closed before the drain window ended');
  assert.equal(near.seen.close.code, 1001);
  assert.equal(far.seen.close.code, 1001);
  const exit = await draining.child.waitExit(10_000);
  assert.equal(exit.code, 0);
});

test('the proxy is alive afterwards and serves an ordinary request', async () => {
  const res = await plainGet(proxy.port);
  assert.equal(res.status, 200);
  assert.equal(res.body.toString(), 'plain ok');
  // And one more tunnel on the same process.
  const { near, far } = await openTunnel(`ws://127.0.0.1:${proxy.port}`, upstream);
  near.ws.send('last');
  await waitFor(() => far.seen.messages.length === 1, { what: 'the last message' });
  near.ws.close(1000);
  await waitFor(() => near.seen.close, { what: 'the close' });
  assert.ok(proxy.child.running);
});

// A client's frame (masked) with the given first byte.
function maskedFrame(first, payload) {
  const mask = randomBytes(4);
  const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]));
  return Buffer.concat([Buffer.from([first, 0x80 | payload.length]), mask, masked]);
}
