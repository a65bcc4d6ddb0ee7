// Test harness for the integration and e2e tests: starts the real simulator and the real proxy
// on loopback ports the OS chooses, talks HTTP to them (node:http and raw node:net), reads the
// admin /metrics, and always kills what it started.
//
// Binaries come from the environment (CTest sets both):
//   TOKENMETER_BIN  path to tokenmeter
//   TOKENMETER_SIM  path to tokenmeter-sim
// Plain Node 18+ only: no dependencies.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { parseProm } from './prom.mjs';

export { parseProm } from './prom.mjs';
export { sleep };

// Generous: under ThreadSanitizer on a busy 2-core machine a large tokenizer file takes 8+ s to load.
const STARTUP_TIMEOUT_MS = 30_000;

export function binaries() {
  const bin = process.env.TOKENMETER_BIN;
  const sim = process.env.TOKENMETER_SIM;
  if (!bin || !sim) {
    throw new Error('TOKENMETER_BIN and TOKENMETER_SIM must point at the tokenmeter and ' +
      'tokenmeter-sim binaries (ctest sets them; by hand: TOKENMETER_BIN=build/proxy/tokenmeter ' +
      'TOKENMETER_SIM=build/tests/sim/tokenmeter-sim node --test tests/integration/x.test.mjs)');
  }
  return { bin, sim };
}

// ---- children --------------------------------------------------------------------------------

const children = new Set();
const tempDirs = new Set();

function killAllNow() {
  for (const child of children) {
    try { child.proc.kill('SIGKILL'); } catch { /* already gone */ }
  }
  for (const dir of tempDirs) {
    try { rmSync(dir, { recursive: true, force: true }); } catch { /* best effort */ }
  }
}
process.on('exit', killAllNow);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    killAllNow();
    process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1));
  });
}

// Kills every child still running and waits for them; call it from after().
export async function stopAll() {
  await Promise.all([...children].map((child) => child.stop()));
  for (const dir of tempDirs) {
    try { rmSync(dir, { recursive: true, force: true }); } catch { /* best effort */ }
  }
  tempDirs.clear();
}

export function makeTempDir(prefix = 'tokenmeter-it-') {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

// Writes text to a new file in a fresh temporary directory (removed by stopAll/exit).
export function writeTempFile(name, text) {
  const file = path.join(makeTempDir(), name);
  writeFileSync(file, text);
  return file;
}

class Child {
  constructor(name, command, args) {
    this.name = name;
    this.command = command;
    this.args = args;
    this.stdoutText = '';
    this.stderrText = '';
    this.exitCode = undefined;
    this.exitSignal = undefined;
    this.proc = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(this);
    this.exited = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        children.delete(this);
        resolve({ code, signal });
      });
      this.proc.on('error', (error) => {
        this.stderrText += `spawn error: ${error.message}\n`;
        children.delete(this);
        resolve({ code: null, signal: null, error });
      });
    });
    this.proc.stdout.setEncoding('utf8');
    this.proc.stderr.setEncoding('utf8');
    this.proc.stdout.on('data', (text) => { this.stdoutText += text; });
    // stderr is kept for diagnostics and also passed on, prefixed: ctest shows it on failure.
    this.proc.stderr.on('data', (text) => {
      this.stderrText += text;
      for (const line of text.split('\n')) {
        if (line) process.stderr.write(`[${this.name}] ${line}\n`);
      }
    });
  }

  get running() { return this.exitCode === undefined && this.exitSignal === undefined; }

  // Resolves with the first regex match on stdout; rejects on exit or timeout.
  waitForStdout(regex, timeoutMs = STARTUP_TIMEOUT_MS) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const match = regex.exec(this.stdoutText);
        if (match) {
          cleanup();
          resolve(match);
        }
      };
      const onExit = () => {
        cleanup();
        reject(new Error(`${this.name} exited (code ${this.exitCode}, signal ${this.exitSignal}) ` +
          `before printing ${regex}; stdout: ${JSON.stringify(this.stdoutText)}; stderr: ` +
          `${JSON.stringify(this.stderrText.slice(-2000))}`));
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`${this.name} did not print ${regex} within ${timeoutMs} ms; stdout: ` +
          `${JSON.stringify(this.stdoutText)}; stderr: ${JSON.stringify(this.stderrText.slice(-2000))}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.proc.stdout.off('data', check);
        this.proc.off('exit', onExit);
      };
      this.proc.stdout.on('data', check);
      this.proc.on('exit', onExit);
      check();
      if (!this.running) onExit();
    });
  }

  signal(sig) {
    if (this.running) this.proc.kill(sig);
  }

  // SIGKILL (or the given signal) and wait for the exit.
  async stop(sig = 'SIGKILL') {
    if (this.running) {
      try { this.proc.kill(sig); } catch { /* gone */ }
    }
    await this.exited;
  }

  // Resolves with {code, signal} or rejects after timeoutMs.
  async waitExit(timeoutMs) {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.name} did not exit within ${timeoutMs} ms`)),
        timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

// Starts any other server a test needs (redis-server ...), killed like the rest.
export function startChild(name, command, args) {
  return new Child(name, command, args);
}

// ---- simulator -------------------------------------------------------------------------------

// Starts tokenmeter-sim on 127.0.0.1:0. Returns {port, child, stats(), stop()}.
export async function startSim(extraArgs = [], name = 'sim') {
  const { sim } = binaries();
  const child = new Child(name, sim, ['--listen', '127.0.0.1:0', ...extraArgs]);
  const match = await child.waitForStdout(/listening on 127\.0\.0\.1:(\d+)/);
  const port = Number(match[1]);
  return {
    port,
    child,
    url: `http://127.0.0.1:${port}`,
    // GET /sim/stats on a fresh connection. That request itself adds 1 to `requests` and 1 to
    // `connections_accepted` before the numbers are read.
    stats: async () => {
      const res = await request({ port, method: 'GET', path: '/sim/stats', timeoutMs: 5000 });
      if (res.status !== 200) throw new Error(`/sim/stats answered ${res.status}: ${res.body}`);
      return JSON.parse(res.body.toString());
    },
    stop: (sig) => child.stop(sig),
  };
}

// Two simulators with identical flags: the same request, as the first request of each, gives the
// same bytes (ids carry a per-process request counter).
export async function startSimPair(extraArgs = []) {
  return Promise.all([startSim(extraArgs, 'sim-a'), startSim(extraArgs, 'sim-b')]);
}

// ---- proxy -----------------------------------------------------------------------------------

// Starts tokenmeter on 127.0.0.1:0 (proxy and admin). upstream: a port number or a URL.
// config: YAML text written to a temporary file and passed with --config.
// wrap: a command the proxy is started under, e.g. ['prlimit', '--nofile=256:256', '--'].
// bin: another build of the proxy that takes its flags (tokenmeter-faults); default tokenmeter.
export async function startProxy({ upstream, config, args = [], name = 'proxy', wrap = [], bin: exe } = {}) {
  const bin = exe || binaries().bin;
  const upstreamUrl = typeof upstream === 'number' ? `http://127.0.0.1:${upstream}` : upstream;
  const argv = ['--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'];
  if (upstreamUrl) argv.push('--upstream', upstreamUrl);
  // These tests meter from usage reports and chunks, as a proxy without a reference tokenizer
  // does. Since o200k_base is built in (normalized counts on by default), a test that does not
  // name a tokenizer in its config runs with reference_tokenizer: none; one that does (the
  // re-tokenization tests) gets exactly its config.
  // config: null starts the proxy with no --config at all (its built-in defaults).
  let configFile;
  if (config !== null) {
    const text = config === undefined ? '' : config;
    const effective = /tokenizer/.test(text) ? text : `${text}\nreference_tokenizer: none\n`;
    configFile = writeTempFile('tokenmeter.yaml', effective);
    argv.push('--config', configFile);
  }
  argv.push(...args);
  const child = wrap.length > 0
    ? new Child(name, wrap[0], [...wrap.slice(1), bin, ...argv])
    : new Child(name, bin, argv);
  const match = await child.waitForStdout(
    /tokenmeter listening: proxy=127\.0\.0\.1:(\d+) admin=127\.0\.0\.1:(\d+) upstream=(\S+)/);
  const port = Number(match[1]);
  const adminPort = Number(match[2]);
  const proxy = {
    port,
    adminPort,
    upstreamText: match[3],
    child,
    configFile,
    url: `http://127.0.0.1:${port}`,
    admin: (pathName) => request({ port: adminPort, method: 'GET', path: pathName, timeoutMs: 5000 }),
    metricsText: async () => {
      const res = await proxy.admin('/metrics');
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      return res.body.toString();
    },
    metrics: async () => parseProm(await proxy.metricsText()),
    stop: (sig) => child.stop(sig),
  };
  return proxy;
}

// Waits until GET /readyz is 200 (the first upstream probe succeeded).
export async function waitReady(proxy, timeoutMs = 5000) {
  const res = await waitFor(async () => {
    const r = await proxy.admin('/readyz');
    return r.status === 200 ? r : undefined;
  }, { timeoutMs, what: '/readyz 200' });
  return res;
}

// ---- polling ---------------------------------------------------------------------------------

// Calls fn until it returns something truthy; returns that. Throws after timeoutMs.
export async function waitFor(fn, { timeoutMs = 2000, intervalMs = 10, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
      last = value;
    } catch (error) {
      last = error;
    }
    if (Date.now() >= deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}` +
        (last instanceof Error ? `: ${last.message}` : ''));
    }
    await sleep(intervalMs);
  }
}

// Waits until the child's stderr matches re. A log line is read from a pipe, so it can arrive
// after a metric or a response that the same event changed: never assert on stderr at once.
export function waitForLog(child, re, timeoutMs = 5000) {
  return waitFor(() => re.test(child.stderrText), { timeoutMs, what: `a log line matching ${re}` });
}

// Polls /metrics until predicate(metrics) is true; returns the metrics. On timeout, the last
// scrape is returned (the caller's assertions then show the actual values).
export async function waitMetrics(proxy, predicate, timeoutMs = 2000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = await proxy.metrics();
    if (predicate(m) || Date.now() >= deadline) return m;
    await sleep(10);
  }
}

// ---- HTTP client -----------------------------------------------------------------------------

export const nowMs = () => Number(process.hrtime.bigint()) / 1e6;

// One HTTP request with node:http. Never rejects: resolves with
//   {status, headers, rawHeaders, body (Buffer), bytes, sha256, complete, aborted, error,
//    reusedSocket, startedAt, headersAt, firstDataAt, endedAt}
// complete is IncomingMessage.complete: true only when the whole message (for chunked: the
// terminating zero-length chunk) arrived. error is set when the request or response failed.
// Options: port, host, method, path, headers, body (string|Buffer|object → JSON), agent
// (default false: a fresh connection), keepBody (default true), onResponse(res, req),
// onData(chunk, req, res), timeoutMs (destroys the request; error.code 'TEST_TIMEOUT').
export function request({
  port, host = '127.0.0.1', method = 'POST', path: target = '/v1/chat/completions',
  headers = {}, body, agent = false, keepBody = true, onResponse, onData, timeoutMs = 30_000,
} = {}) {
  let payload;
  if (body !== undefined) {
    payload = Buffer.isBuffer(body) || typeof body === 'string' ? body : JSON.stringify(body);
  }
  const allHeaders = { ...headers };
  if (payload !== undefined && !Object.keys(allHeaders).some((k) => k.toLowerCase() === 'content-type')) {
    allHeaders['content-type'] = 'application/json';
  }
  return new Promise((resolve) => {
    const result = {
      status: undefined, headers: undefined, rawHeaders: undefined, body: Buffer.alloc(0), bytes: 0,
      sha256: undefined, complete: false, aborted: false, error: undefined, reusedSocket: false,
      startedAt: nowMs(), headersAt: undefined, firstDataAt: undefined, endedAt: undefined,
    };
    const chunks = [];
    const hash = createHash('sha256');
    let settled = false;
    let timer;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      result.endedAt = nowMs();
      result.body = Buffer.concat(chunks);
      result.sha256 = hash.digest('hex');
      resolve(result);
    };
    const req = http.request({ host, port, method, path: target, headers: allHeaders, agent });
    timer = setTimeout(() => {
      const error = new Error(`request ${method} ${target} timed out after ${timeoutMs} ms`);
      error.code = 'TEST_TIMEOUT';
      result.error = result.error || error;
      req.destroy(error);
      finish();
    }, timeoutMs);
    req.on('error', (error) => {
      result.error = result.error || error;
      finish();
    });
    req.on('response', (res) => {
      result.status = res.statusCode;
      result.headers = res.headers;
      result.rawHeaders = res.rawHeaders;
      result.headersAt = nowMs();
      result.reusedSocket = req.reusedSocket;
      res.on('data', (chunk) => {
        if (result.firstDataAt === undefined) result.firstDataAt = nowMs();
        result.bytes += chunk.length;
        hash.update(chunk);
        if (keepBody) chunks.push(chunk);
        if (onData) onData(chunk, req, res);
      });
      res.on('aborted', () => { result.aborted = true; });
      res.on('error', (error) => {
        result.error = result.error || error;
      });
      res.on('end', () => {
        result.complete = res.complete;
        finish();
      });
      res.on('close', () => {
        result.complete = res.complete;
        finish();
      });
      if (onResponse) onResponse(res, req);
    });
    if (payload !== undefined) req.end(payload); else req.end();
  });
}

// ---- raw TCP ---------------------------------------------------------------------------------

// Opens a TCP connection, writes the bytes, and collects everything until the peer closes or
// timeoutMs passes (or, with untilComplete, until one whole response has arrived). Resolves
// {data (Buffer), closed (the peer ended/closed the connection), error, response (parsed, or
// undefined)}.
export function rawExchange(port, bytes, { timeoutMs = 3000, host = '127.0.0.1', untilComplete = false } = {}) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const chunks = [];
    let closed = false;
    let error;
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const data = Buffer.concat(chunks);
      resolve({ data, closed, error, response: parseRawResponse(data) });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('connect', () => socket.write(bytes));
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      if (untilComplete) {
        const parsed = parseRawResponse(Buffer.concat(chunks));
        if (parsed && parsed.complete && parsed.framed) finish();
      }
    });
    socket.on('end', () => { closed = true; finish(); });
    socket.on('close', () => { closed = true; finish(); });
    socket.on('error', (e) => {
      error = e;
      // A reset after the response also means the connection is gone.
      closed = true;
      finish();
    });
  });
}

// Parses one HTTP/1.x response from raw bytes (Content-Length or chunked body).
export function parseRawResponse(data) {
  const headEnd = data.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const head = data.subarray(0, headEnd).toString('latin1').split('\r\n');
  const statusMatch = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(head[0]);
  if (!statusMatch) return undefined;
  const headers = {};
  for (const line of head.slice(1)) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
  }
  let rest = data.subarray(headEnd + 4);
  let body = rest;
  let complete = true;
  let framed = false;
  if (/chunked/i.test(headers['transfer-encoding'] || '')) {
    const parts = [];
    complete = false;
    framed = true;
    for (;;) {
      const lineEnd = rest.indexOf('\r\n');
      if (lineEnd < 0) break;
      const size = parseInt(rest.subarray(0, lineEnd).toString('latin1'), 16);
      if (Number.isNaN(size)) break;
      if (size === 0) { complete = true; break; }
      parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
      rest = rest.subarray(lineEnd + 2 + size + 2);
    }
    body = Buffer.concat(parts);
  } else if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    framed = true;
    complete = rest.length >= length;
    body = rest.subarray(0, length);
  }
  let json;
  try { json = JSON.parse(body.toString()); } catch { /* not JSON */ }
  return {
    version: statusMatch[1], status: Number(statusMatch[2]), reason: statusMatch[3] || '',
    headers, body, json, complete, framed,
  };
}

// A port nothing listens on: bound by the OS, then closed.
export async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

// A proxy whose upstream is a port nothing listens on. The proxy's own listeners bind port 0
// too, and the OS may hand one of them the port just closed (then the "upstream" answers, as
// the admin listener): that start is stopped and another port tried.
export async function startProxyWithClosedUpstream(options = {}) {
  for (let attempt = 0; attempt < 5; attempt += 1) {
    const port = await closedPort();
    const proxy = await startProxy({ ...options, upstream: port });
    if (proxy.port !== port && proxy.adminPort !== port) return { proxy, port };
    await proxy.stop();
  }
  throw new Error('no closed port stayed closed in 5 attempts');
}

// Resolves 'refused' | 'connected' | other error code for a TCP connect to host:port.
export function tryConnect(port, host = '127.0.0.1', timeoutMs = 2000) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const timer = setTimeout(() => { socket.destroy(); resolve('timeout'); }, timeoutMs);
    socket.on('connect', () => { clearTimeout(timer); socket.destroy(); resolve('connected'); });
    socket.on('error', (e) => {
      clearTimeout(timer);
      resolve(e.code === 'ECONNREFUSED' ? 'refused' : e.code || e.message);
    });
  });
}

// ---- OpenAI payloads and the simulator's deterministic text ---------------------------------

export const WORDS = [' time', ' year', ' people', ' way', ' day', ' man', ' thing', ' woman',
  ' life', ' child', ' world', ' school', ' state', ' family', ' student', ' group', ' country',
  ' problem', ' hand', ' part', ' place', ' case', ' week', ' company', ' system', ' program',
  ' work', ' number', ' night', ' point', ' home', ' water'];

// The simulator's completion text for tokens [0, n) with the given seed and padding.
export function expectedText(n, { seed = 0, padBytes = 0 } = {}) {
  let pad = '';
  for (let j = 0; j < padBytes; j++) pad += 'abcdefghijklmnopqrstuvwxyz'[j % 26];
  let text = '';
  for (let i = 0; i < n; i++) text += WORDS[(7 * i + seed) % 32] + pad;
  return text;
}

export function chatBody(model, { stream = true, includeUsage = false, content = 'hello there world', extra = {} } = {}) {
  const body = { model, messages: [{ role: 'user', content }], stream };
  if (includeUsage) body.stream_options = { include_usage: true };
  return { ...body, ...extra };
}

export function completionBody(model, { stream = true, includeUsage = false, prompt = 'once upon a time', extra = {} } = {}) {
  const body = { model, prompt, stream };
  if (includeUsage) body.stream_options = { include_usage: true };
  return { ...body, ...extra };
}

// Splits an SSE body into events: [{raw, data, json}] (json undefined when not JSON).
export function parseSse(text) {
  const events = [];
  for (const raw of String(text).split('\n\n')) {
    if (!raw.trim()) continue;
    const data = raw.split('\n').filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
    let json;
    try { json = JSON.parse(data); } catch { /* [DONE] or garbage */ }
    events.push({ raw, data, json });
  }
  return events;
}

// Concatenated delta content (chat) or text (completions) of an SSE body.
export function sseText(text) {
  let out = '';
  for (const event of parseSse(text)) {
    const choice = event.json && event.json.choices && event.json.choices[0];
    if (!choice) continue;
    if (choice.delta && typeof choice.delta.content === 'string') out += choice.delta.content;
    if (typeof choice.text === 'string') out += choice.text;
  }
  return out;
}

export function describeResult(res) {
  const text = res.body ? res.body.toString() : '';
  return `status=${res.status} complete=${res.complete} aborted=${res.aborted} ` +
    `error=${res.error && (res.error.code || res.error.message)} bytes=${res.bytes} ` +
    `body=${JSON.stringify(text.length > 600 ? `${text.slice(0, 300)}…${text.slice(-300)}` : text)}`;
}
