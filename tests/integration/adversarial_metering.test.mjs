// No way around the meter, kept as data: every case in adversarial/metering/*.json is sent over a
// fresh connection to the real proxy, in front of a model server that reads requests as vLLM's
// Python stack does (lib/python_upstream.mjs: uvicorn's path decoding, Python's json, gzip when
// asked). Each case asserts the status the client sees, what reached the model server (or that
// nothing did), the usage record of the request (or that there is none) and how much its tenant's
// counters grew, so a request the server would serve is never served unmetered, billed to another
// tenant or let around the meter. adversarial/README.md ("Metering cases") describes the format.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import zlib from 'node:zlib';

import { startProxy, stopAll, waitFor, waitReady } from './lib/harness.mjs';
import { exchange, show } from './lib/recording_upstream.mjs';
import { startPythonLikeUpstream } from './lib/python_upstream.mjs';
import { readRecords } from './lib/usage.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CASE_DIR = path.join(HERE, 'adversarial', 'metering');
const SECRET = 'metering-corpus-secret';
// The API keys a case names as {{key:<tenant>}}; each maps to its tenant by api_key_names.
const KEYS = { 'team-a': 'sk-team-a-0123456789', 'team-b': 'sk-team-b-9876543210' };

function loadCases() {
  const names = new Set();
  const cases = [];
  for (const file of readdirSync(CASE_DIR).filter((f) => f.endsWith('.json')).sort()) {
    for (const kase of JSON.parse(readFileSync(path.join(CASE_DIR, file), 'utf8')).cases) {
      if (!kase.name || !kase.why || !kase.request || !kase.expect) {
        throw new Error(`${file}: a case needs name, why, request and expect: ${JSON.stringify(kase).slice(0, 200)}`);
      }
      if (names.has(kase.name)) throw new Error(`${file}: duplicate case name ${kase.name}`);
      names.add(kase.name);
      cases.push(kase);
    }
  }
  return cases;
}

const CASES = loadCases();
const work = mkdtempSync(path.join(os.tmpdir(), 'tokenmeter-metering-'));
const secretFile = path.join(work, 'secret');
writeFileSync(secretFile, SECRET);
let upstream;
const proxies = new Map();  // proxy kind → Promise<{proxy, spool}>

before(async () => {
  upstream = await startPythonLikeUpstream();
});

after(async () => {
  await stopAll();
  if (upstream) await upstream.close();
});

function keyTenant(key) {
  return `key:${createHmac('sha256', SECRET).update(key).digest('hex').slice(0, 32)}`;
}

// The proxy kinds a case can ask for: tenants by API key (the default), by a trusted header, by
// API key with limits.unparsable_body: forward, and by API key reading at most 4 KiB of a JSON
// answer (small_buffer).
function configFor(kind, spool) {
  const names = Object.entries(KEYS).map(([tenant, key]) => `    "${keyTenant(key)}": ${tenant}\n`).join('');
  const tenants = kind === 'header'
    ? 'tenants:\n  source: header\n  header: x-team\n'
    : `tenants:\n  source: api_key\n  api_key_secret_file: ${secretFile}\n  api_key_names:\n${names}`;
  const limits = kind === 'forward' ? 'limits:\n  unparsable_body: forward\n'
    : kind === 'small_buffer' ? 'limits:\n  max_buffered_response_bytes: 4KiB\n' : '';
  return `usage:\n  spool_dir: ${spool}\n${tenants}${limits}readiness:\n  probe_interval: 1h\n`;
}

function proxyFor(kind) {
  if (!proxies.has(kind)) {
    const spool = mkdtempSync(path.join(work, `${kind}-spool-`));
    const starting = (async () => {
      const proxy = await startProxy({
        upstream: `http://127.0.0.1:${upstream.port}`, config: configFor(kind, spool), name: `proxy-${kind}`,
      });
      await waitReady(proxy);
      return { proxy, spool };
    })();
    starting.catch(() => proxies.delete(kind));
    proxies.set(kind, starting);
  }
  return proxies.get(kind);
}

// {{key:<tenant>}}: the tenant's API key; {{id}}: the request's id; {{repeat:<c>:<n>}}: the
// character c, n times (a long model name).
function fill(text, id) {
  return text.replace(/\{\{key:([a-z-]+)\}\}/g, (_, tenant) => KEYS[tenant]).replace(/\{\{id\}\}/g, id)
    .replace(/\{\{repeat:(.):(\d+)\}\}/g, (_, c, n) => c.repeat(Number(n)));
}

// The raw request: the request line, Host, the case's fields in order (repeats and tabs as
// written), X-Request-Id for finding its record, then Content-Type and Content-Length.
function rawRequest(kase, id) {
  const { method = 'POST', target, headers = [], body } = kase.request;
  const bytes = body === undefined ? Buffer.alloc(0) : Buffer.from(fill(body, id), 'utf8');
  let head = `${method} ${fill(target, id)} HTTP/1.1\r\nHost: proxy.test\r\n`;
  for (const [name, value] of headers) head += `${name}: ${fill(value, id)}\r\n`;
  head += `X-Request-Id: ${id}\r\n`;
  if (body !== undefined) head += `Content-Type: application/json\r\nContent-Length: ${bytes.length}\r\n`;
  return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), bytes]);
}

function fieldValues(rawHeaders, name) {
  const values = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (rawHeaders[i].toLowerCase() === name) values.push(rawHeaders[i + 1]);
  }
  return values;
}

function responseJson(response) {
  let body = response.body;
  if (/gzip/i.test(response.headers['content-encoding'] || '')) body = zlib.gunzipSync(body);
  try { return JSON.parse(body.toString()); } catch { return undefined; }
}

function tenantCounters(metrics, tenant) {
  return {
    input: metrics.value('tokenmeter_tenant_tokens_total', { tenant, type: 'input' }),
    output: metrics.value('tokenmeter_tenant_tokens_total', { tenant, type: 'output' }),
    requests: metrics.value('tokenmeter_tenant_requests_total', { tenant }),
  };
}

let sequence = 0;
for (const kase of CASES) {
  test(kase.name, { timeout: 20_000 }, async () => {
    const { proxy, spool } = await proxyFor(kase.proxy || 'api_key');
    const expect = kase.expect;
    const id = `metering-${process.pid}-${sequence += 1}`;
    const problems = [];
    const tenant = expect.tenant && expect.tenant.name;
    const before = tenant ? tenantCounters(await proxy.metrics(), tenant) : undefined;
    const parseErrorsBefore = expect.parse_errors
      ? (await proxy.metrics()).value('tokenmeter_parse_errors_total', expect.parse_errors.labels) : 0;
    // Other series a case names, with how much each must grow: {name, labels, increase}.
    const seriesBefore = [];
    for (const series of expect.series || []) {
      seriesBefore.push((await proxy.metrics()).value(series.name, series.labels));
    }
    upstream.reset();

    const result = await exchange(proxy.port, [rawRequest(kase, id)],
      { finals: 1, waitForClose: () => false, timeoutMs: 5000 });
    const response = result.responses.find((r) => r.status >= 200);
    if (!response) {
      problems.push('no response');
    } else {
      if (response.status !== expect.status) problems.push(`status ${response.status}, expected ${expect.status}`);
      if (expect.json_error !== undefined) {
        const json = responseJson(response);
        const code = json && json.error && json.error.code;
        if (code !== expect.json_error) problems.push(`error code ${code}, expected ${expect.json_error}`);
      }
      if (expect.content_encoding !== undefined &&
        (response.headers['content-encoding'] || '') !== expect.content_encoding) {
        problems.push(`content-encoding ${response.headers['content-encoding']}, expected ${expect.content_encoding}`);
      }
    }

    // What the model server received.
    await sleep(20);
    const received = upstream.requests();
    if (expect.upstream === null) {
      if (received.length !== 0) problems.push(`${received.length} request(s) reached the model server: ${received.map((r) => r.rawTarget).join(', ')}`);
    } else if (expect.upstream) {
      if (received.length !== 1) {
        problems.push(`${received.length} request(s) reached the model server, expected 1`);
      } else {
        const got = received[0];
        const want = expect.upstream;
        if (want.target !== undefined && got.rawTarget !== want.target) problems.push(`upstream target ${got.rawTarget}, expected ${want.target}`);
        if (want.served !== undefined && got.served !== want.served) problems.push(`upstream served=${got.served}, expected ${want.served}`);
        for (const [name, values] of Object.entries(want.fields || {})) {
          const gotValues = fieldValues(got.headers, name.toLowerCase());
          const wanted = values.map((v) => fill(v, id));
          if (JSON.stringify(gotValues) !== JSON.stringify(wanted)) {
            problems.push(`upstream ${name}: ${JSON.stringify(gotValues)}, expected ${JSON.stringify(wanted)}`);
          }
        }
      }
    }

    // The usage record.
    if (expect.record === null) {
      await sleep(300);
      const record = readRecords(spool).find((r) => r.request_id === id);
      if (record) problems.push(`a usage record was written: ${JSON.stringify(record)}`);
    } else if (expect.record) {
      let record;
      try {
        record = await waitFor(() => readRecords(spool).find((r) => r.request_id === id),
          { timeoutMs: 5000, intervalMs: 20, what: `the usage record of ${id}` });
      } catch {
        problems.push('no usage record');
      }
      for (const [key, raw] of Object.entries(record ? expect.record : {})) {
        const value = typeof raw === 'string' ? fill(raw, id) : raw;
        if (JSON.stringify(record[key]) !== JSON.stringify(value)) {
          problems.push(`record ${key}: ${JSON.stringify(record[key])}, expected ${JSON.stringify(value)}`);
        }
      }
    }

    // The tenant's counters grew by exactly what the record bills (or not at all).
    if (tenant) {
      const want = { input: 0, output: 0, requests: 0, ...expect.tenant };
      const grown = (m) => {
        const now = tenantCounters(m, tenant);
        return { input: now.input - before.input, output: now.output - before.output, requests: now.requests - before.requests };
      };
      let delta;
      try {
        await waitFor(async () => {
          delta = grown(await proxy.metrics());
          return delta.requests >= want.requests && delta.output >= want.output && delta.input >= want.input;
        }, { timeoutMs: 3000, intervalMs: 20, what: 'tenant counters' });
      } catch { /* compared below */ }
      if (want.requests === 0) {
        await sleep(100);
        delta = grown(await proxy.metrics());
      }
      for (const key of ['input', 'output', 'requests']) {
        if (delta[key] !== want[key]) problems.push(`tenant ${tenant} ${key} grew by ${delta[key]}, expected ${want[key]}`);
      }
    }

    if (expect.parse_errors) {
      const grownBy = (await proxy.metrics()).value('tokenmeter_parse_errors_total', expect.parse_errors.labels) - parseErrorsBefore;
      if (grownBy < expect.parse_errors.min_increase) {
        problems.push(`tokenmeter_parse_errors_total${JSON.stringify(expect.parse_errors.labels)} grew by ${grownBy}`);
      }
    }

    if (expect.series) {
      const m = await proxy.metrics();
      expect.series.forEach((series, i) => {
        const grownBy = m.value(series.name, series.labels) - seriesBefore[i];
        if (grownBy !== series.increase) {
          problems.push(`${series.name}${JSON.stringify(series.labels)} grew by ${grownBy}, expected ${series.increase}`);
        }
      });
    }

    assert.ok(problems.length === 0,
      `${kase.name} [${kase.why}]\n  ${problems.join('\n  ')}\n  client saw: ${show(result.data, 400)}`);
  });
}
