// A real redis-server for the shared-limit tests, on a loopback port the OS chose, with nothing
// written to disk; a small TCP relay that delays every chunk, to play a slow Redis; and the
// requests and config both shared-limit tests use.
import { spawnSync } from 'node:child_process';
import net from 'node:net';

import { request, startChild, waitFor } from './harness.mjs';

// A port that was free a moment ago (redis-server has no "port 0, tell me").
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// Starts redis-server on 127.0.0.1:port. Returns {port, child, stop(), cli(...args)}.
export async function startRedis(port) {
  const p = port ?? await freePort();
  const child = startChild(`redis-${p}`, 'redis-server',
    ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--protected-mode', 'no']);
  await child.waitForStdout(/Ready to accept connections/);
  return {
    port: p,
    child,
    url: `redis://127.0.0.1:${p}`,
    stop: (sig = 'SIGKILL') => child.stop(sig),
    // redis-cli against this server; stdout trimmed.
    cli: (...args) => {
      const out = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(p), ...args],
        { encoding: 'utf8', timeout: 5000 });
      return (out.stdout || '').trim();
    },
  };
}

// Relays 127.0.0.1:<port> to 127.0.0.1:<target>, holding every chunk delayMs in each direction.
export async function startDelayRelay(target, delayMs) {
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: target });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    const pipe = (from, to) => from.on('data', (chunk) => {
      setTimeout(() => { if (!to.destroyed) to.write(chunk); }, delayMs);
    });
    pipe(client, upstream);
    pipe(upstream, client);
    client.on('end', () => setTimeout(() => upstream.end(), delayMs));
    upstream.on('end', () => setTimeout(() => client.end(), delayMs));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    stop: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

// The shared-limit tests' traffic: a streamed chat request for tenant `team` (the simulator
// sets the output), and a config with one shared tenant limit.
const chat = (content = 'hello there') => ({
  model: 'shared-model', stream: true, stream_options: { include_usage: true },
  messages: [{ role: 'user', content }],
});

export function sharedConfig(url, { rate = 1000, onError = 'allow', timeout = '200ms', burst = '1s' } = {}) {
  return [
    'tenants:',
    '  source: header',
    '  enforce_provisioned: true',
    `  provisioned_burst: ${burst}`,
    '  limits:',
    `    team: { provisioned_tokens_per_second: ${rate} }`,
    '  shared_limits:',
    '    redis:',
    `      url: ${url}`,
    `      timeout: ${timeout}`,
    `      on_error: ${onError}`,
    '',
  ].join('\n');
}

export const send = (proxy, { tokens = 100, itl = 0, ttft = 0, tenant = 'team' } = {}) => request({
  port: proxy.port, body: chat(),
  headers: { 'x-tenant-id': tenant, 'x-sim-output-tokens': String(tokens),
    'x-sim-ttft-ms': String(ttft), 'x-sim-itl-ms': String(itl) },
});

export { waitFor };
