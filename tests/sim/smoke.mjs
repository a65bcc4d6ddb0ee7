// Self-check of tokenmeter-sim: starts the binary on an OS-chosen loopback port and checks
// every endpoint, header and failure mode, printing measured timings.
// usage: node tests/sim/smoke.mjs [wrapper...] build/tests/sim/tokenmeter-sim [sim flags] [--streams N]
//   e.g. node tests/sim/smoke.mjs nice -n -5 build/tests/sim/tokenmeter-sim --threads 2
import { spawn } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

const command = process.argv.slice(2);
const streamsArg = command.indexOf('--streams');
const concurrentStreams = streamsArg >= 0 ? Number(command.splice(streamsArg, 2)[1]) : 1000;
if (command.length === 0) {
  console.error('usage: node smoke.mjs [wrapper...] path/to/tokenmeter-sim [sim flags] [--streams N]');
  process.exit(2);
}

const WORDS = [' time', ' year', ' people', ' way', ' day', ' man', ' thing', ' woman', ' life',
  ' child', ' world', ' school', ' state', ' family', ' student', ' group', ' country',
  ' problem', ' hand', ' part', ' place', ' case', ' week', ' company', ' system', ' program',
  ' work', ' number', ' night', ' point', ' home', ' water'];
const expectedText = (seed, begin, end) => {
  let s = '';
  for (let i = begin; i < end; i++) s += WORDS[(i * 7 + seed) % 32];
  return s;
};

let failures = 0;
const check = (ok, what) => {
  if (!ok) failures++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
};
const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const pct = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
};

// The wrapper (nice, taskset) must exec the simulator so that sim.pid is the simulator's.
const sim = spawn(command[0], [...command.slice(1), '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const [line] = await Promise.race([
  once(sim.stdout, 'data'),
  sleep(5000).then(() => { throw new Error('simulator did not start'); }),
]);
const port = Number(/listening on 127\.0\.0\.1:(\d+)/.exec(String(line))[1]);
console.log(`simulator on port ${port}`);

const agent = new http.Agent({ keepAlive: true, maxSockets: 2000 });

// One request; resolves with status, headers, body, SSE events with arrival times.
function request({ path = '/v1/chat/completions', method = 'POST', body, headers = {}, useAgent = agent }) {
  return new Promise((resolve) => {
    const started = nowMs();
    const payload = body === undefined ? undefined : (typeof body === 'string' ? body : JSON.stringify(body));
    const req = http.request({ host: '127.0.0.1', port, path, method, agent: useAgent, headers: {
      'content-type': 'application/json', ...headers } }, (res) => {
      const headersAt = nowMs();
      const chunks = [];
      const events = [];
      let pending = '';
      let bytes = 0;
      res.on('data', (chunk) => {
        const at = nowMs();
        bytes += chunk.length;
        if (bytes < 4 * 1024 * 1024) chunks.push(chunk);
        pending += chunk.toString('latin1');
        let cut;
        while ((cut = pending.indexOf('\n\n')) >= 0) {
          const raw = pending.slice(0, cut);
          pending = pending.slice(cut + 2);
          const data = raw.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
          let json = null;
          try { json = JSON.parse(data); } catch { /* garbage mode */ }
          events.push({ at, raw, data, json, hr: process.hrtime.bigint() });
        }
      });
      const finish = (error) => resolve({ status: res.statusCode, headers: res.headers, started, headersAt,
        body: Buffer.concat(chunks).toString(), events, bytes, error, reused: req.reusedSocket, ended: nowMs(),
        complete: res.complete });
      res.on('end', () => finish(null));
      res.on('error', (e) => finish(e));
      res.on('aborted', () => finish(new Error('aborted')));
    });
    req.on('error', (e) => resolve({ error: e, started }));
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

const chatBody = (extra = {}) => ({ model: 'gpt-sim', stream: true, messages: [{ role: 'user', content: 'one two three four' }], ...extra });
const contentEvents = (r) => r.events.filter((e) => e.json && e.json.choices && e.json.choices.length && e.json.choices[0].finish_reason === null && !(e.json.choices[0].delta && 'role' in e.json.choices[0].delta));

// 1. Timing against the defaults and against per-request overrides (after one warm-up, so
// connection set-up and JIT are not counted as simulator latency).
await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0 } });
for (const [ttft, itl, n] of [[50, 10, 32], [200, 25, 20], [5, 1, 200]]) {
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': ttft, 'x-sim-itl-ms': itl, 'x-sim-output-tokens': n, 'x-sim-stamp': '1' } });
  const content = contentEvents(r);
  const measuredTtft = content[0].at - r.started;
  const gaps = content.slice(1).map((e, i) => e.at - content[i].at);
  const received = BigInt(r.headers['x-sim-received-ns']);
  // Server side: when each chunk was handed to the socket, against its absolute deadline.
  const late = content.map((e, k) => Number(BigInt(e.json.sim_sent_ns) - received) / 1e6 - (ttft + k * itl));
  console.log(`     ttft ${ttft} itl ${itl} n ${n}: client saw ttft ${measuredTtft.toFixed(2)} ms (headers after ${(r.headersAt - r.started).toFixed(2)} ms), itl mean ${(gaps.reduce((a, b) => a + b, 0) / gaps.length).toFixed(3)} p50 ${pct(gaps, 0.5).toFixed(3)} max ${Math.max(...gaps).toFixed(3)} ms; server sent each chunk after its deadline by min ${Math.min(...late).toFixed(3)} p50 ${pct(late, 0.5).toFixed(3)} max ${Math.max(...late).toFixed(3)} ms`);
  check(content.length === n && Math.min(...late) >= 0 && pct(late, 0.5) < 2, `timing ttft=${ttft} itl=${itl}: never early, on time at the median`);
}

// 2. Content, determinism, usage and finish reasons.
{
  const r = await request({ body: chatBody({ stream_options: { include_usage: true } }), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 10, 'x-sim-tokens-per-chunk': 3 } });
  const text = contentEvents(r).map((e) => e.json.choices[0].delta.content).join('');
  check(text === expectedText(0, 0, 10), 'chat text is deterministic');
  check(contentEvents(r).length === 4, 'tokens-per-chunk 3 gives 4 chunks for 10 tokens');
  const usage = r.events.find((e) => e.json && e.json.usage && e.json.choices.length === 0);
  check(usage && usage.json.usage.prompt_tokens === 4 && usage.json.usage.completion_tokens === 10 && usage.json.usage.total_tokens === 14, 'usage chunk with include_usage');
  check(r.events.at(-1).data === '[DONE]', 'ends with [DONE]');
  check(r.headers['content-type'] === 'text/event-stream' && r.headers['cache-control'] === 'no-cache' && r.headers['x-sim-request-id'], 'stream headers');
  check(r.events[0].json.choices[0].delta.role === 'assistant', 'role chunk first');
}
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0 } });
  check(!r.events.some((e) => e.json && e.json.usage), 'auto usage: none without include_usage');
  const r2 = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-usage': 'always' } });
  check(r2.events.some((e) => e.json && e.json.usage && e.json.choices.length === 0), 'usage always');
  const r3 = await request({ body: chatBody({ stream_options: { include_usage: true } }), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-usage': 'never' } });
  check(!r3.events.some((e) => e.json && e.json.usage), 'usage never');
}
{
  const r = await request({ body: chatBody({ max_tokens: 5 }), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-seed': 3 } });
  const fin = r.events.find((e) => e.json && e.json.choices && e.json.choices[0] && e.json.choices[0].finish_reason);
  check(contentEvents(r).length === 5 && fin.json.choices[0].finish_reason === 'length', 'max_tokens cuts with finish_reason length');
  check(contentEvents(r).map((e) => e.json.choices[0].delta.content).join('') === expectedText(3, 0, 5), 'seed header shifts the words');
}
{
  const r = await request({ path: '/v1/completions', body: { model: 'm', stream: true, prompt: 'a b c', stream_options: { include_usage: true } }, headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 4 } });
  const texts = r.events.filter((e) => e.json && e.json.choices && e.json.choices.length && e.json.choices[0].finish_reason === null).map((e) => e.json.choices[0].text);
  check(texts.join('') === expectedText(0, 0, 4) && r.events[0].json.object === 'text_completion', 'completions stream');
  const usage = r.events.find((e) => e.json && e.json.usage);
  check(usage.json.usage.prompt_tokens === 3, 'completions prompt tokens');
}
{
  const started = nowMs();
  const r = await request({ body: chatBody({ stream: false }), headers: { 'x-sim-ttft-ms': 100, 'x-sim-itl-ms': 10, 'x-sim-output-tokens': 11 } });
  const j = JSON.parse(r.body);
  const took = r.headersAt - started;
  console.log(`     non-streaming: response after ${took.toFixed(2)} ms (expected 200)`);
  check(j.object === 'chat.completion' && j.choices[0].message.content === expectedText(0, 0, 11) && j.usage.completion_tokens === 11, 'non-streaming chat');
  // Never early (the whole generation time is waited out); how late depends on the machine's load.
  check(took >= 199, 'non-streaming chat waits ttft + itl x tokens');
  const c = await request({ path: '/v1/completions', body: { prompt: ['x y', 'z'], max_tokens: 2 }, headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0 } });
  const cj = JSON.parse(c.body);
  check(cj.choices[0].text === expectedText(0, 0, 2) && cj.choices[0].finish_reason === 'length' && cj.usage.prompt_tokens === 3 && cj.model === 'sim-model', 'non-streaming completions');
}

// 3. Meter options: reasoning, tool call, continuous usage.
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 6, 'x-sim-reasoning-tokens': 4, 'x-sim-tokens-per-chunk': 3, 'x-sim-usage': 'always' } });
  const c = contentEvents(r);
  const reasoning = c.map((e) => e.json.choices[0].delta.reasoning_content || '').join('');
  const content = c.map((e) => e.json.choices[0].delta.content || '').join('');
  const usage = r.events.find((e) => e.json && e.json.usage && e.json.choices.length === 0).json.usage;
  check(reasoning === expectedText(0, 0, 4) && content === expectedText(0, 4, 6) && usage.completion_tokens_details.reasoning_tokens === 4, 'reasoning tokens');
}
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 5, 'x-sim-tool-call': '1' } });
  const args = contentEvents(r).map((e) => e.json.choices[0].delta.tool_calls[0].function.arguments).join('');
  const fin = r.events.find((e) => e.json && e.json.choices && e.json.choices[0] && e.json.choices[0].finish_reason);
  check(JSON.parse(args).text === expectedText(0, 0, 5) && r.events[0].json.choices[0].delta.tool_calls[0].function.name === 'sim_tool' && fin.json.choices[0].finish_reason === 'tool_calls', 'tool call arguments form JSON');
}
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 5, 'x-sim-continuous-usage': '1', 'x-sim-tokens-per-chunk': 2 } });
  const running = contentEvents(r).map((e) => e.json.usage.completion_tokens);
  check(JSON.stringify(running) === '[2,4,5]', `continuous usage running totals ${JSON.stringify(running)}`);
}

// 4. Keep-alive: many sequential requests on one connection.
{
  const single = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const ids = new Set();
  let reused = 0;
  for (let i = 0; i < 100; i++) {
    const r = await request({ body: chatBody({ stream: i % 2 === 0 }), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 3 }, useAgent: single });
    ids.add(r.headers['x-sim-request-id']);
    if (r.reused) reused++;
  }
  single.destroy();
  check(ids.size === 100 && reused === 99, `keep-alive: 100 requests, ${reused} on a reused socket`);
}

// 5. Failure injection.
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 5, 'x-sim-fail': 'close-after:3' } });
  check(r.error && contentEvents(r).length === 3 && !r.events.some((e) => e.data === '[DONE]'), `close-after:3 -> ${r.error && r.error.message}, ${contentEvents(r).length} content chunks`);
  const raw = await rawExchange('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\nx-sim-fail: close-after:2\r\ncontent-length: 15\r\n\r\n{"stream":true}');
  check(!raw.text.includes('\r\n0\r\n\r\n') && raw.text.split('delta').length - 1 === 3, 'close-after: no terminating zero-length chunk on the wire');
}
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-fail': 'status:429' } });
  const j = JSON.parse(r.body);
  check(r.status === 429 && j.error.type === 'rate_limit_error' && r.headers['retry-after'] === '1', 'status:429');
  const r5 = await request({ body: chatBody(), headers: { 'x-sim-fail': 'status:503' } });
  check(r5.status === 503 && JSON.parse(r5.body).error.type === 'server_error', 'status:503');
}
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-fail': 'slow-headers:300', 'x-sim-ttft-ms': 50, 'x-sim-itl-ms': 10, 'x-sim-output-tokens': 3 } });
  const headersAfter = r.headersAt - r.started;
  const first = contentEvents(r)[0].at - r.started;
  console.log(`     slow-headers:300: headers after ${headersAfter.toFixed(2)} ms, first token after ${first.toFixed(2)} ms`);
  check(Math.abs(headersAfter - 300) < 10 && Math.abs(first - 350) < 10, 'slow-headers');
}
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-fail': 'garbage', 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 3 } });
  check(r.body.includes('data: {not json\n\n') && r.body.includes('event: sim-unknown') && r.events.at(-1).data === '[DONE]' && contentEvents(r).length === 3, 'garbage');
  const ns = await request({ body: chatBody(), headers: { 'x-sim-fail': 'no-sse', 'x-sim-ttft-ms': 0 } });
  check(ns.status === 200 && ns.headers['content-type'] === 'text/event-stream' && !ns.body.includes('data:'), 'no-sse');
  const rs = await request({ body: chatBody(), headers: { 'x-sim-fail': 'reset' }, useAgent: false });
  check(rs.error && (rs.error.code === 'ECONNRESET' || /socket hang up/.test(rs.error.message)), `reset -> ${rs.error && (rs.error.code || rs.error.message)}`);
  const bad = await request({ body: chatBody(), headers: { 'x-sim-bogus': '1' } });
  check(bad.status === 400, 'unknown x-sim header is a 400');
}

// 6. Echo and 404.
{
  const r = await request({ path: '/echo/some/path?q=1', method: 'PUT', body: 'hello body', headers: { 'x-custom': 'A', connection: 'keep-alive' } });
  const j = JSON.parse(r.body);
  check(j.method === 'PUT' && j.target === '/echo/some/path?q=1' && j.body === 'hello body' && j.headers['x-custom'] === 'A' && j.header_list.length >= 3, 'echo');
  const other = await request({ path: '/v1/files', body: { input: 'x' } });
  check(other.status === 200 && JSON.parse(other.body).body === '{"input":"x"}', 'POST to an unknown path echoes');
  const nf = await request({ path: '/v2/nothing', method: 'GET' });
  check(nf.status === 404 && JSON.parse(nf.body).error, '404 JSON');
}

// 6b. The pooling endpoints, answered as vLLM answers them.
{
  const e = await request({ path: '/v1/embeddings', body: { model: 'emb', input: ['one two', 'three'] } });
  const ej = JSON.parse(e.body);
  check(e.status === 200 && ej.model === 'emb' && ej.data.length === 2 && ej.data[0].embedding.length === 8 &&
    ej.usage.prompt_tokens === 3 && ej.usage.total_tokens === 3, 'embeddings: one vector per input, usage');
  const b = JSON.parse((await request({ path: '/v1/embeddings', body: { input: [1, 2, 3], encoding_format: 'base64' } })).body);
  check(Buffer.from(b.data[0].embedding, 'base64').length === 32 && b.usage.prompt_tokens === 3, 'embeddings: base64 floats, token ids one each');
  const r = JSON.parse((await request({ path: '/v2/rerank', body: { query: 'a b', documents: ['c', 'd e'] } })).body);
  check(r.results.length === 2 && r.usage.total_tokens === 7 && !('prompt_tokens' in r.usage), 'rerank: the query paired with each document');
  const n = await request({ path: '/score', body: { text_1: 'a', text_2: ['b'] }, headers: { 'x-sim-usage': 'never' } });
  check(n.status === 200 && !('usage' in JSON.parse(n.body)), 'x-sim-usage: never leaves usage out');
}

// 7. A big stream: 20 MiB via pad bytes.
{
  const started = nowMs();
  const r = await request({ body: chatBody(), headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 0, 'x-sim-output-tokens': 2048, 'x-sim-pad-bytes': 10240 } });
  const took = nowMs() - started;
  console.log(`     20 MiB stream: ${(r.bytes / 1048576).toFixed(2)} MiB of body, ${r.events.length} events in ${took.toFixed(0)} ms (${(r.bytes / 1048576 / took * 1000).toFixed(0)} MiB/s)`);
  check(r.bytes > 20 * 1048576 && r.events.at(-1).data === '[DONE]' && r.complete, '20 MiB stream complete');
}

// 8. Delivery latency with x-sim-stamp (same machine, same CLOCK_MONOTONIC).
{
  const r = await request({ body: chatBody(), headers: { 'x-sim-stamp': '1', 'x-sim-ttft-ms': 10, 'x-sim-itl-ms': 5, 'x-sim-output-tokens': 50 } });
  const lat = contentEvents(r).map((e) => Number(e.hr - BigInt(e.json.sim_sent_ns)) / 1000);
  console.log(`     stamp: send-to-receive latency p50 ${pct(lat, 0.5).toFixed(1)} us, max ${Math.max(...lat).toFixed(1)} us`);
  check(lat.length === 50 && lat.every((v) => v > 0 && v < 1e6), 'sim_sent_ns stamps are plausible');
}

// 9. The client hangs up mid-stream: the simulator stops (watched while waiting, not on the next write).
{
  const before = await stats();
  const req = http.request({ host: '127.0.0.1', port, path: '/v1/chat/completions', method: 'POST', agent: false,
    headers: { 'x-sim-ttft-ms': 0, 'x-sim-itl-ms': 5000, 'x-sim-output-tokens': 10 } });
  req.on('error', () => {});
  req.end(JSON.stringify(chatBody()));
  const [res] = await once(req, 'response');
  res.once('data', () => {});
  await sleep(100);
  req.destroy();
  await sleep(100);
  const after = await stats();
  check(after.streams_aborted === before.streams_aborted + 1 && after.streams_active === 0, `disconnect noticed within 100 ms during a 5 s wait (aborted ${before.streams_aborted} -> ${after.streams_aborted})`);
}

// 10. Expect: 100-continue with a large body, as curl sends it.
{
  const big = 'x'.repeat(2 * 1024 * 1024);
  const started = nowMs();
  const r = await new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/echo', method: 'POST', agent: false, headers: { expect: '100-continue', 'content-length': big.length } });
    req.on('continue', () => req.end(big));
    req.on('response', (res) => { let n = 0; res.on('data', (d) => { n += d.length; }); res.on('end', () => resolve({ status: res.statusCode, n })); });
  });
  check(r.status === 200 && nowMs() - started < 500, `expect 100-continue answered (${(nowMs() - started).toFixed(0)} ms)`);
}

// 11. Many concurrent streams.
{
  const n = concurrentStreams;
  const ttft = 50;
  const itl = 10;
  const tokens = 32;
  const wide = new http.Agent({ keepAlive: true, maxSockets: n + 10 });
  const started = nowMs();
  const cpuBefore = simCpuMs();
  const results = await Promise.all(Array.from({ length: n }, () => request({ body: chatBody(), useAgent: wide, headers: { 'x-sim-ttft-ms': ttft, 'x-sim-itl-ms': itl, 'x-sim-output-tokens': tokens, 'x-sim-stamp': '1' } })));
  const took = nowMs() - started;
  const cpu = simCpuMs() - cpuBefore;
  // Server-side lateness: when each chunk was handed to the socket versus its deadline.
  const serverLate = [];
  for (const r of results.filter((x) => !x.error)) {
    const received = BigInt(r.headers['x-sim-received-ns']);
    contentEvents(r).forEach((e, k) => serverLate.push(Number(BigInt(e.json.sim_sent_ns) - received) / 1e6 - (ttft + k * itl)));
  }
  console.log(`     ${n} streams: simulator used ${cpu.toFixed(0)} ms CPU; chunk sent after its deadline p50 ${pct(serverLate, 0.5).toFixed(2)} p99 ${pct(serverLate, 0.99).toFixed(2)} max ${Math.max(...serverLate).toFixed(2)} ms (server side)`);
  const ok = results.filter((r) => !r.error && contentEvents(r).length === tokens && r.events.at(-1).data === '[DONE]').length;
  const ttfts = results.filter((r) => !r.error).map((r) => contentEvents(r)[0].at - r.started);
  const lastLate = results.filter((r) => !r.error).map((r) => contentEvents(r)[tokens - 1].at - r.started - (ttft + (tokens - 1) * itl));
  console.log(`     ${n} concurrent streams: ${ok} complete in ${took.toFixed(0)} ms; ttft p50 ${pct(ttfts, 0.5).toFixed(1)} p99 ${pct(ttfts, 0.99).toFixed(1)} ms; last chunk lateness p50 ${pct(lastLate, 0.5).toFixed(1)} p99 ${pct(lastLate, 0.99).toFixed(1)} ms`);
  check(ok === n, `${n} concurrent streams complete`);
  wide.destroy();
  const s = await stats();
  console.log(`     stats: ${JSON.stringify(s)}`);
}

function simCpuMs() {
  const fields = readFileSync(`/proc/${sim.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;  // utime + stime, in 10 ms ticks
}

async function stats() {
  const r = await request({ path: '/sim/stats', method: 'GET', useAgent: false });
  return JSON.parse(r.body);
}

function rawExchange(text) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(text));
    let data = '';
    socket.on('data', (d) => { data += d.toString('latin1'); });
    socket.on('close', () => resolve({ text: data }));
    socket.on('error', () => {});
  });
}

agent.destroy();
sim.kill('SIGTERM');
const [code] = await once(sim, 'exit');
check(code === 0, `SIGTERM -> exit status ${code}`);
console.log(failures === 0 ? 'all checks passed' : `${failures} check(s) failed`);
process.exit(failures === 0 ? 0 : 1);
