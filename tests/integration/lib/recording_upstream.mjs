// A scripted HTTP/1.x upstream for the adversarial suite: a raw node:net server on 127.0.0.1 that
// records every byte each accepted connection sends it, and answers each request it can delimit
// with raw bytes the test chose beforehand. It never parses more than it must to know where one
// request ends (head, then a Content-Length or chunked body), so a test can assert exactly what
// the proxy put on the wire, or that it opened no connection at all.
//
//   const upstream = await startRecordingUpstream();
//   upstream.reset([response, ...]);   // closes every connection, forgets the record, new script
//   ... the proxy forwards something ...
//   upstream.received()                // Buffer: every byte received since reset, in arrival order
//   upstream.connectionsSinceReset()   // connections accepted since reset
//   upstream.connectionsEver()         // connections accepted since the upstream started
//   upstream.requests()                // [{connection, bytes (Buffer), complete}] in arrival order
//
// A response in the script is answered to the next delimited request on any connection (the
// proxy pools its upstream connections, so the test cannot know which one it will use):
//   "HTTP/1.1 200 OK\r\n..."                    raw bytes (a JS string, each char one byte: latin1)
//   {parts: ["bytes", {wait_ms: 50}, "bytes"],  written in order, pausing where asked
//    close: true,                               then end the connection (FIN)
//    reset: true,                               or destroy it (RST where the kernel can)
//    silent: true}                              or write nothing at all and keep it open
// When the script is used up, each further request gets defaultResponse (a small 200).
// Responses on one connection go out in the order of its requests (pipelining is honoured).
//
// The rest of this file is the adversarial case toolkit shared by adversarial.test.mjs and the
// soak driver (adversarial/soak.mjs): loading the case files, rendering their byte templates,
// talking to the proxy over a raw socket, splitting what came back into responses, and checking
// an outcome against a case's expectations. adversarial/README.md describes the case format.
import { readFileSync, readdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const DEFAULT_RESPONSE =
  'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok';

const MAX_HEAD_BYTES = 1024 * 1024;

function toBuffer(bytes) {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(String(bytes), 'latin1');
}

export function normalizeResponse(response) {
  if (response === undefined || response === null) return { parts: [toBuffer(DEFAULT_RESPONSE)] };
  if (typeof response === 'string' || Buffer.isBuffer(response)) {
    return { parts: [toBuffer(response)] };
  }
  const parts = (response.parts || (response.bytes !== undefined ? [response.bytes] : []))
    .map((part) => (typeof part === 'object' && !Buffer.isBuffer(part) ? part : toBuffer(part)));
  return {
    parts,
    close: Boolean(response.close),
    reset: Boolean(response.reset),
    silent: Boolean(response.silent),
  };
}

// Where the request starting at `start` ends: {end} (offset just past it), {need: true} (more
// bytes are needed), or {garbage: true} (it cannot be delimited; the rest of the input is taken as
// one request). Lines may end in CRLF or a bare LF, as a lenient server would read them.
export function requestEnd(data, start = 0) {
  let headEnd = -1;
  let i = start;
  for (;;) {
    const lf = data.indexOf(0x0a, i);
    if (lf < 0) break;
    const next = data[lf + 1];
    if (next === 0x0a) { headEnd = lf + 2; break; }
    if (next === 0x0d && data[lf + 2] === 0x0a) { headEnd = lf + 3; break; }
    if (next === undefined || (next === 0x0d && data[lf + 2] === undefined)) break;
    i = lf + 1;
  }
  if (headEnd < 0) {
    return data.length - start > MAX_HEAD_BYTES ? { garbage: true } : { need: true };
  }
  const lines = data.subarray(start, headEnd).toString('latin1').split(/\r?\n/);
  let contentLength;
  let chunked = false;
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'transfer-encoding' && /(^|,)\s*chunked\s*$/i.test(value)) chunked = true;
    if (name === 'content-length') {
      if (!/^\d+$/.test(value)) return { garbage: true };
      contentLength = Number(value);
    }
  }
  if (chunked) {
    let at = headEnd;
    for (;;) {
      const lf = data.indexOf(0x0a, at);
      if (lf < 0) return { need: true };
      const sizeText = data.subarray(at, lf).toString('latin1').replace(/\r$/, '').split(';')[0].trim();
      if (!/^[0-9a-fA-F]+$/.test(sizeText)) return { garbage: true };
      const size = parseInt(sizeText, 16);
      if (size === 0) {
        // Trailer fields, then an empty line.
        let t = lf + 1;
        for (;;) {
          const tl = data.indexOf(0x0a, t);
          if (tl < 0) return { need: true };
          const line = data.subarray(t, tl).toString('latin1').replace(/\r$/, '');
          t = tl + 1;
          if (line === '') return { end: t };
        }
      }
      at = lf + 1 + size;
      if (data.length < at + 1) return { need: true };
      if (data[at] === 0x0d) at += 1;
      if (data.length < at + 1) return { need: true };
      if (data[at] !== 0x0a) return { garbage: true };
      at += 1;
    }
  }
  if (contentLength !== undefined) {
    const end = headEnd + contentLength;
    return data.length >= end ? { end } : { need: true };
  }
  return { end: headEnd };
}

export async function startRecordingUpstream({ defaultResponse = DEFAULT_RESPONSE } = {}) {
  const sockets = new Set();
  let generation = 0;
  let script = [];
  let log = [];           // [{connection, chunk}] since reset
  let requestLog = [];    // [{connection, bytes, complete}] since reset
  let accepted = 0;       // connections since reset
  let acceptedEver = 0;   // connections since start (reset does not clear it)
  let nextId = 1;
  const waiters = new Set();

  const notify = () => {
    for (const waiter of waiters) waiter();
  };

  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    const id = nextId++;
    const myGeneration = generation;
    sockets.add(socket);
    accepted += 1;
    acceptedEver += 1;
    socket.setNoDelay(true);
    let pending = Buffer.alloc(0);
    let garbage = false;
    let queue = Promise.resolve();
    let ended = false;

    const answer = (response) => {
      queue = queue.then(async () => {
        if (socket.destroyed || ended) return;
        if (response.silent) return;
        for (const part of response.parts) {
          if (socket.destroyed) return;
          if (Buffer.isBuffer(part)) {
            if (part.length) socket.write(part);
          } else if (part && typeof part.wait_ms === 'number') {
            await sleep(part.wait_ms);
          }
        }
        if (response.reset) {
          ended = true;
          socket.resetAndDestroy ? socket.resetAndDestroy() : socket.destroy();
        } else if (response.close) {
          ended = true;
          socket.end();
        }
      }).catch(() => { /* the peer went away */ });
    };

    const takeRequests = () => {
      while (!garbage && pending.length > 0) {
        const found = requestEnd(pending);
        if (found.need) return;
        let bytes;
        if (found.garbage) {
          garbage = true;
          bytes = pending;
          pending = Buffer.alloc(0);
        } else {
          bytes = pending.subarray(0, found.end);
          pending = pending.subarray(found.end);
        }
        if (myGeneration === generation) {
          requestLog.push({ connection: id, bytes: Buffer.from(bytes), complete: !found.garbage });
        }
        const next = myGeneration === generation && script.length > 0 ? script.shift() : defaultResponse;
        answer(normalizeResponse(next));
        notify();
      }
    };

    socket.on('data', (chunk) => {
      if (myGeneration === generation) log.push({ connection: id, chunk: Buffer.from(chunk) });
      pending = Buffer.concat([pending, chunk]);
      takeRequests();
      notify();
    });
    socket.on('end', () => {
      // The proxy half-closed: answer what can be answered, then finish.
      queue = queue.then(() => { if (!socket.destroyed) socket.end(); });
      notify();
    });
    socket.on('error', () => { /* reset by the proxy */ });
    socket.on('close', () => { sockets.delete(socket); notify(); });
    notify();
  });
  server.on('error', () => { /* reported through listen */ });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const { port } = server.address();

  const upstream = {
    port,
    // Forget everything, close every connection (so no case inherits a pooled connection whose
    // state an earlier case left behind), and take a new script.
    reset(responses = []) {
      generation += 1;
      script = [...responses];
      log = [];
      requestLog = [];
      accepted = 0;
      for (const socket of sockets) socket.destroy();
    },
    // Queue more responses without forgetting anything.
    push(...responses) { script.push(...responses); },
    received: () => Buffer.concat(log.map((entry) => entry.chunk)),
    receivedBy: () => {
      const byConnection = new Map();
      for (const { connection, chunk } of log) {
        byConnection.set(connection, Buffer.concat([byConnection.get(connection) || Buffer.alloc(0), chunk]));
      }
      return byConnection;
    },
    requests: () => requestLog.slice(),
    connectionsSinceReset: () => accepted,
    connectionsEver: () => acceptedEver,
    openConnections: () => sockets.size,
    // Resolves true once predicate() holds, false after timeoutMs.
    waitFor(predicate, timeoutMs = 2000) {
      return new Promise((resolve) => {
        if (predicate()) { resolve(true); return; }
        let timer;
        const check = () => {
          if (predicate()) { clearTimeout(timer); waiters.delete(check); resolve(true); }
        };
        timer = setTimeout(() => { waiters.delete(check); resolve(false); }, timeoutMs);
        waiters.add(check);
      });
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
  return upstream;
}

// ---- adversarial case files (tests/integration/adversarial/*.json, see its README.md) ---------
// Shared by adversarial.test.mjs and the soak driver (adversarial/soak.mjs).

export function toBytes(items) {
  if (Buffer.isBuffer(items)) return items;
  if (typeof items === 'string') return Buffer.from(items, 'latin1');
  return Buffer.concat(items.filter((item) => Buffer.isBuffer(item)));
}

// Renders a byte template: a string (each character one byte, latin1; `{{name}}` replaced by
// vars[name]) or an array of segments: strings, {repeat: template, times: n}, {wait_ms: n} and
// {half_close: true} (kept as markers for the client writer). Returns an array of Buffers and
// markers, adjacent Buffers merged.
export function render(template, vars = {}) {
  const out = [];
  const push = (item) => {
    if (Buffer.isBuffer(item) && out.length && Buffer.isBuffer(out[out.length - 1])) {
      out[out.length - 1] = Buffer.concat([out[out.length - 1], item]);
    } else {
      out.push(item);
    }
  };
  const walk = (node) => {
    if (node === null || node === undefined) return;
    if (typeof node === 'string') {
      for (const piece of node.split(/(\{\{[a-z_]+\}\})/)) {
        const name = /^\{\{([a-z_]+)\}\}$/.exec(piece);
        if (name && name[1] in vars) {
          const value = vars[name[1]];
          push(Buffer.isBuffer(value) ? value : Buffer.from(String(value), 'latin1'));
        } else if (piece) {
          push(Buffer.from(piece, 'latin1'));
        }
      }
    } else if (Array.isArray(node)) {
      node.forEach(walk);
    } else if (typeof node === 'object' && 'repeat' in node) {
      const once = toBytes(render(node.repeat, vars));
      push(Buffer.alloc(once.length * node.times, once));
    } else if (typeof node === 'object') {
      out.push({ ...node });
    }
  };
  walk(template);
  return out;
}

// The client's writes: `client`, then `body` appended; `{{body_length}}` / `{{body_length_hex}}`
// in `client` are the byte length of `body`. Sets vars.body (for `{{body}}` in expectations).
export function renderClient(kase, vars) {
  const body = kase.body !== undefined ? toBytes(render(kase.body, vars)) : Buffer.alloc(0);
  vars.body = body;
  vars.body_length = String(body.length);
  vars.body_length_hex = body.length.toString(16);
  const writes = render(kase.client, vars);
  if (body.length) writes.push(body);
  return writes;
}

// The upstream script: a list with one entry per request (a single entry may stand alone). An
// entry is a template (raw response bytes; an array is a list of segments) or
// {parts: template, close, reset, silent}; {wait_ms} inside parts pauses the writer.
export function renderResponses(script, vars) {
  if (script === undefined || script === null) return [];
  const list = Array.isArray(script) ? script : [script];
  return list.map((entry) => {
    if (typeof entry === 'string' || Array.isArray(entry)) {
      return { parts: render(entry, vars) };
    }
    return { ...entry, parts: render(entry.parts || [], vars) };
  });
}

// A case's acceptable outcomes: `expect` is one object or a list of alternatives.
export function expectations(kase) {
  return Array.isArray(kase.expect) ? kase.expect : [kase.expect];
}

export function caseTimeoutMs(kase) {
  return kase.timeout_ms || 1500;
}

// The proxy configuration of a case: its `config` YAML, with the readiness probe slowed to once
// an hour (a probe is an upstream connection too) unless the case sets readiness itself.
export function proxyConfig(config) {
  const text = config || '';
  return /^readiness:/m.test(text) ? text : `${text}${text && !text.endsWith('\n') ? '\n' : ''}readiness:\n  probe_interval: 1h\n`;
}

// Every case of every *.json file in dir, in file then array order. A file is {"cases": [...]}
// (other top-level keys are comments) or a bare array. Names must be unique.
export function loadCases(dir) {
  const cases = [];
  const names = new Set();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    const parsed = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    for (const kase of Array.isArray(parsed) ? parsed : parsed.cases) {
      if (!kase.name || !kase.rfc || kase.client === undefined || kase.expect === undefined) {
        throw new Error(`${file}: a case needs name, rfc, client and expect: ${JSON.stringify(kase).slice(0, 200)}`);
      }
      if (names.has(kase.name)) throw new Error(`${file}: duplicate case name ${kase.name}`);
      names.add(kase.name);
      cases.push({ ...kase, file });
    }
  }
  return cases;
}

// Splits what a client received into responses: [{status, headers, body, complete, json}].
// 1xx, 204 and 304 have no body, nor the first final response when headFirst (a HEAD request);
// otherwise chunked, Content-Length, or everything up to the close (complete only if closed).
export function parseResponses(data, { headFirst = false, closed = false } = {}) {
  const responses = [];
  let at = 0;
  let finals = 0;
  while (at < data.length) {
    const headEnd = data.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const lines = data.subarray(at, headEnd).toString('latin1').split('\r\n');
    const m = /^HTTP\/(\d\.\d) (\d{3})(?: (.*))?$/.exec(lines[0]);
    if (!m) {
      responses.push({ status: 0, garbage: true, headers: {}, body: data.subarray(at), complete: false });
      break;
    }
    const headers = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon < 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    const status = Number(m[2]);
    const response = { version: m[1], status, reason: m[3] || '', headers, body: Buffer.alloc(0), complete: true };
    responses.push(response);
    at = headEnd + 4;
    if (status < 200) continue;
    finals += 1;
    if (status === 204 || status === 304 || (headFirst && finals === 1)) continue;
    if (/chunked/i.test(headers['transfer-encoding'] || '')) {
      const parts = [];
      response.complete = false;
      for (;;) {
        const lineEnd = data.indexOf('\r\n', at);
        if (lineEnd < 0) break;
        const sizeText = data.subarray(at, lineEnd).toString('latin1').split(';')[0].trim();
        if (!/^[0-9a-fA-F]+$/.test(sizeText)) { response.garbage = true; break; }
        const size = parseInt(sizeText, 16);
        if (size === 0) {
          const trailerEnd = data.indexOf('\r\n\r\n', lineEnd);
          if (trailerEnd >= 0 || data.subarray(lineEnd, lineEnd + 4).toString() === '\r\n\r\n') {
            at = (trailerEnd >= 0 ? trailerEnd : lineEnd) + 4;
            response.complete = true;
          }
          break;
        }
        if (data.length < lineEnd + 2 + size + 2) break;
        parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
      response.body = Buffer.concat(parts);
      if (!response.complete) { at = data.length; }
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      response.body = data.subarray(at, Math.min(data.length, at + length));
      response.complete = data.length - at >= length;
      at = Math.min(data.length, at + length);
    } else {
      response.body = data.subarray(at);
      response.complete = closed;
      at = data.length;
    }
    try { response.json = JSON.parse(response.body.toString()); } catch { /* not JSON */ }
    if (!response.complete) break;
  }
  return responses;
}

// ---- running a case ------------------------------------------------------------------------

// Writes the client's bytes (pausing where the case asks) and collects what comes back until the
// proxy closes, or the responses the case waits for are complete and the connection stays quiet,
// or the deadline passes.
export function exchange(port, writes, { finals, waitForClose, headFirst, timeoutMs }) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    const chunks = [];
    let closed = false;
    let error;
    let settled = false;
    let quietTimer;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      clearTimeout(quietTimer);
      socket.destroy();
      const data = Buffer.concat(chunks);
      resolve({ data, closed, error, responses: parseResponses(data, { headFirst, closed }) });
    };
    const deadline = setTimeout(finish, timeoutMs);
    const check = () => {
      const parsed = parseResponses(Buffer.concat(chunks), { headFirst, closed: false });
      const done = parsed.filter((r) => r.status >= 200 && r.complete);
      if (done.length >= finals) {
        clearTimeout(quietTimer);
        quietTimer = setTimeout(finish, waitForClose(done[0] && done[0].status) ? 500 : 60);
      }
    };
    socket.on('connect', async () => {
      for (const item of writes) {
        if (socket.destroyed || settled) return;
        if (Buffer.isBuffer(item)) {
          socket.write(item);
        } else if (item && item.wait_ms) {
          await sleep(item.wait_ms);
        } else if (item && item.half_close) {
          socket.end();
        }
      }
    });
    socket.on('data', (chunk) => { chunks.push(chunk); check(); });
    socket.on('end', () => { closed = true; finish(); });
    socket.on('close', () => { closed = true; finish(); });
    socket.on('error', (e) => { error = e; closed = true; finish(); });
  });
}

export function show(buffer, max = 600) {
  const text = buffer.toString('latin1');
  return JSON.stringify(text.length > max ? `${text.slice(0, max / 2)}…${text.slice(-max / 2)}` : text);
}

// Checks one acceptable outcome; returns a list of problems (empty: it matched). seen: what the
// recording upstream got ({bytes, connections, requests}); undefined skips the upstream checks.
export function mismatches(expect, kase, result, seen, vars) {
  const problems = [];
  const finals = result.responses.filter((r) => r.status >= 200);
  const statuses = result.responses.map((r) => r.status);
  const first = finals[0];
  if (Array.isArray(expect.status)) {
    if (JSON.stringify(statuses) !== JSON.stringify(expect.status)) {
      problems.push(`statuses ${JSON.stringify(statuses)}, expected ${JSON.stringify(expect.status)}`);
    }
  } else if (expect.status !== undefined) {
    if (!first || first.status !== expect.status) {
      problems.push(`status ${first ? first.status : 'none'}, expected ${expect.status}`);
    }
  }
  if (expect.status_any !== undefined && (!first || !expect.status_any.includes(first.status))) {
    problems.push(`status ${first ? first.status : 'none'}, expected one of ${JSON.stringify(expect.status_any)}`);
  }
  if (expect.closed !== undefined && result.closed !== expect.closed) {
    problems.push(expect.closed ? 'the proxy kept the client connection open' : 'the proxy closed the client connection');
  }
  const wantComplete = expect.complete !== undefined ? expect.complete : true;
  if (wantComplete) {
    const incomplete = finals.find((r) => !r.complete);
    if (incomplete) problems.push(`the response with status ${incomplete.status} was cut short`);
  } else if (finals.length > 0 && finals[finals.length - 1].complete) {
    problems.push('the last response looks complete, expected the stream to be cut (no clean end)');
  }
  if (expect.json_error) {
    const json = first && first.json;
    if (!json || typeof json.error !== 'object' || json.error === null ||
        typeof json.error.code !== 'string' || typeof json.error.message !== 'string') {
      problems.push(`no JSON error body {"error":{"code","message"}}: ${first ? show(first.body, 300) : 'no response'}`);
    }
  }
  if (expect.body_contains !== undefined) {
    const needle = toBytes(render(expect.body_contains, vars));
    if (!first || first.body.indexOf(needle) < 0) {
      problems.push(`body does not contain ${show(needle, 200)}: ${first ? show(first.body, 300) : 'no response'}`);
    }
  }
  if (expect.body !== undefined) {
    const want = toBytes(render(expect.body, vars));
    if (!first || !first.body.equals(want)) {
      problems.push(`body ${first ? show(first.body) : 'none'}, expected ${show(want)}`);
    }
  }
  if (expect.bodies !== undefined) {
    const want = expect.bodies.map((b) => toBytes(render(b, vars)));
    const got = finals.map((r) => r.body);
    if (got.length !== want.length || got.some((b, i) => !b.equals(want[i]))) {
      problems.push(`bodies ${JSON.stringify(got.map((b) => b.toString('latin1')))}, expected ` +
        `${JSON.stringify(want.map((b) => b.toString('latin1')))}`);
    }
  }
  if (expect.header_absent !== undefined && first) {
    for (const name of expect.header_absent) {
      if (first.headers[name.toLowerCase()] !== undefined) {
        problems.push(`response header ${name} reached the client: ${first.headers[name.toLowerCase()]}`);
      }
    }
  }
  if (seen === undefined) {
    // Not recorded (the soak's lane in front of the simulator).
  } else if (expect.upstream === null) {
    if (seen.connections > 0 || seen.bytes.length > 0) {
      problems.push(`expected no upstream connection; ${seen.connections} opened, received ${show(seen.bytes)}`);
    }
  } else if (expect.upstream !== undefined) {
    const want = toBytes(render(expect.upstream, vars));
    // Every request the proxy forwards carries its own traceparent (a new span id each time):
    // the well-formed line is checked here and left out of the comparison; a client's value
    // forwarded as it came would stay and not match.
    const { bytes, problem } = withoutTraceparent(seen.bytes);
    if (problem) problems.push(problem);
    if (!bytes.equals(want)) {
      problems.push(`upstream received ${show(bytes)}, expected ${show(want)}`);
    }
  }
  if (seen !== undefined && expect.upstream_requests !== undefined && seen.requests !== expect.upstream_requests) {
    problems.push(`${seen.requests} requests reached the upstream, expected ${expect.upstream_requests}`);
  }
  return problems;
}

// The upstream's bytes without the traceparent line the proxy adds to each request head, and a
// problem when a head that has one has it more than once or not in version-00 form.
const traceparentLine = /\r\ntraceparent: 00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\r\n/g;
export function withoutTraceparent(received) {
  const text = received.toString('latin1');
  const heads = text.split('\r\n\r\n');
  let problem = '';
  for (const head of heads) {
    const lines = (head.match(/\r\ntraceparent:/gi) || []).length;
    if (lines > 1) problem = `a request head carried ${lines} traceparent lines: ${show(Buffer.from(head, 'latin1'), 300)}`;
  }
  const stripped = text.replace(traceparentLine, '\r\n');
  if (/\r\ntraceparent:/i.test(stripped.split('\r\n\r\n')[0])) {
    problem = problem || `a malformed traceparent reached the upstream: ${show(received, 300)}`;
  }
  return { bytes: Buffer.from(stripped, 'latin1'), problem };
}

// How many final responses the client waits for, and whether, once they are complete, it should
// linger for the proxy's close: only when an outcome that fits the first final status says the
// proxy closes (or cuts the stream).
export function awaitPlan(kase) {
  const alternatives = expectations(kase);
  const finals = Math.max(...alternatives.map((e) => (Array.isArray(e.status)
    ? e.status.filter((s) => s >= 200).length : (e.bodies ? e.bodies.length : 1))));
  const fits = (e, status) => (Array.isArray(e.status) ? e.status.find((x) => x >= 200) === status
    : e.status !== undefined ? e.status === status
      : e.status_any !== undefined ? e.status_any.includes(status) : true);
  const waitForClose = (status) => alternatives.some((e) => (e.closed === true || e.complete === false) && fits(e, status));
  return { finals, waitForClose, headFirst: Boolean(kase.head), timeoutMs: caseTimeoutMs(kase) };
}

// The problems of a case's outcome: empty when any alternative matched, else one line per
// alternative.
export function caseProblems(kase, result, seen, vars) {
  const alternatives = expectations(kase);
  const outcomes = alternatives.map((e) => mismatches(e, kase, result, seen, vars));
  if (outcomes.some((p) => p.length === 0)) return [];
  return outcomes.map((p, i) => `${alternatives.length > 1 ? `alternative ${i + 1}: ` : ''}${p.join('; ')}`);
}
