// Task time through the real proxy in front of the simulator: the task header bounded by the
// allowlist (allowed, unlisted, huge and binary values, none), the task time and tokens per
// model and task, and sessions added up across requests and observed once idle. Hostile header
// values get no label and no crash; session ids never reach /metrics.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, nowMs, rawExchange, request, startProxy, startSim, stopAll, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

const CONFIG = [
  'tasks:',
  '  allowed: [fix-test, sql]',
  '  session_idle_expiry: 2s',
  '  max_sessions: 3',
  '',
].join('\n');

// One streamed chat request through the proxy: TTFT 150 ms, 20 ms between tokens.
async function send(proxy, model, tokens, headers = {}) {
  const started = nowMs();
  const res = await request({
    port: proxy.port,
    body: chatBody(model, { includeUsage: true, content: 'three words here' }),
    headers: { 'x-sim-output-tokens': String(tokens), 'x-sim-ttft-ms': '150', 'x-sim-itl-ms': '20', ...headers },
  });
  assert.equal(res.status, 200, res.body.toString());
  return { tookMs: nowMs() - started };
}

// A request written byte for byte, so its task header can carry bytes node:http refuses.
async function sendRaw(proxy, model, taskValue) {
  const body = Buffer.from(JSON.stringify(chatBody(model, { includeUsage: true, content: 'three words here' })));
  const head = Buffer.concat([
    Buffer.from('POST /v1/chat/completions HTTP/1.1\r\nhost: tokenmeter\r\ncontent-type: application/json\r\n' +
      `content-length: ${body.length}\r\nx-sim-output-tokens: 2\r\nx-sim-itl-ms: 0\r\nconnection: close\r\n` +
      'x-tokenmeter-task: ', 'latin1'),
    taskValue,
    Buffer.from('\r\n\r\n', 'latin1'),
  ]);
  const out = await rawExchange(proxy.port, Buffer.concat([head, body]), { untilComplete: true, timeoutMs: 5000 });
  return out.response;
}

test('task time per model and task; unlisted, huge and binary values are "other"; no header, no task', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: CONFIG });

  const fix = [];
  fix.push(await send(proxy, 'model-a', 5, { 'x-tokenmeter-task': 'fix-test' }));
  fix.push(await send(proxy, 'model-a', 7, { 'x-tokenmeter-task': ' fix-test ' }));
  await send(proxy, 'model-b', 4, { 'x-tokenmeter-task': 'sql' });
  await send(proxy, 'model-c', 3, { 'x-tokenmeter-task': 'drop-all-tables' });
  await send(proxy, 'model-c', 3, { 'x-tokenmeter-task': 'Fix-Test' });  // case matters
  await send(proxy, 'model-c', 3, { 'x-tokenmeter-task': 'y'.repeat(30_000) });
  await send(proxy, 'model-c', 3);                                       // no task
  await send(proxy, 'model-c', 3, { 'x-tokenmeter-task': '' });          // blank: no task
  const binary = await sendRaw(proxy, 'model-c', Buffer.from([0xff, 0xfe, 0x80, 0x41, 0xc3]));
  assert.equal(binary?.status, 200, 'a binary task value is forwarded like any request');

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'model-c' }) === 6);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'model-c' }), 6);
  const a = m.histogram('tokenmeter_task_duration_seconds', { model: 'model-a', task: 'fix-test' });
  assert.equal(a.count, 2);
  // Received → last token: 150 ms + (n − 1) × 20 ms by the simulator's schedule, so at least
  // 0.23 + 0.27 s, and never more than the requests took end to end.
  const slowest = fix.reduce((acc, r) => acc + r.tookMs, 0) / 1000;
  assert.ok(a.sum >= 0.5 - 0.01 && a.sum <= slowest, `task time ${a.sum} s, requests took ${slowest} s`);
  assert.equal(m.value('tokenmeter_task_tokens_total', { model: 'model-a', task: 'fix-test', type: 'output' }), 12);
  assert.equal(m.value('tokenmeter_task_tokens_total', { model: 'model-a', task: 'fix-test', type: 'input' }),
    m.value('tokenmeter_tokens_total', { model: 'model-a', type: 'input' }));
  assert.ok(m.value('tokenmeter_task_tokens_total', { model: 'model-a', type: 'input' }) > 0);
  assert.equal(m.histogram('tokenmeter_task_duration_seconds', { model: 'model-b', task: 'sql' }).count, 1);
  assert.equal(m.value('tokenmeter_task_tokens_total', { model: 'model-b', task: 'sql', type: 'output' }), 4);
  // Four hostile or unlisted values: "other"; two without a task: in no task series.
  assert.equal(m.histogram('tokenmeter_task_duration_seconds', { model: 'model-c', task: 'other' }).count, 4);
  assert.equal(m.value('tokenmeter_task_requests_total', { model: 'model-c' }), 4);
  assert.equal(m.value('tokenmeter_task_requests_total', { outcome: 'complete' }), 7);
  const tasks = new Set(m.samples.filter((s) => s.name.startsWith('tokenmeter_task_')).map((s) => s.labels.task));
  tasks.delete(undefined);
  assert.deepEqual([...tasks].sort(), ['fix-test', 'other', 'sql']);
  const text = await proxy.metricsText();
  assert.equal(text.includes('drop-all-tables'), false);
  assert.equal(text.includes('yyyy'), false);
  // No sessions were used: no session series.
  assert.equal(m.has('tokenmeter_task_session_duration_seconds_count'), false);
});

test('sessions add up across requests and end after the idle expiry; bad ids and evictions are counted', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port, config: CONFIG });
  const session = (id, task = 'fix-test') => ({ 'x-tokenmeter-task': task, 'x-tokenmeter-session': id });

  // Ids that are not kept: a space, over 256 bytes.
  await send(proxy, 'model-a', 1, session('has a space'));
  await send(proxy, 'model-a', 1, session('z'.repeat(300)));
  const started = nowMs();
  await send(proxy, 'model-a', 3, session('secret-agent-run-1'));
  await send(proxy, 'model-a', 4, session('secret-agent-run-1'));
  await send(proxy, 'model-a', 6, session('secret-agent-run-1'));
  const wallSeconds = (nowMs() - started) / 1000;
  // The same id on another model and another task: two more sessions.
  await send(proxy, 'model-b', 2, session('secret-agent-run-1'));
  await send(proxy, 'model-b', 2, session('secret-agent-run-1', 'sql'));

  let m = await proxy.metrics();
  assert.equal(m.value('tokenmeter_task_sessions_dropped_total', { reason: 'invalid_id' }), 2);
  assert.equal(m.value('tokenmeter_task_sessions_active'), 3);
  assert.equal(m.has('tokenmeter_task_session_duration_seconds_count'), false, 'not ended yet');

  // Idle for 2 s: the next scrape ends all three.
  m = await waitMetrics(proxy, (x) => x.value('tokenmeter_task_sessions_active') === 0, 6000);
  assert.equal(m.value('tokenmeter_task_sessions_active'), 0);
  const a = m.histogram('tokenmeter_task_session_duration_seconds', { model: 'model-a', task: 'fix-test' });
  assert.equal(a.count, 1);
  // First request received → last token of the third: within the three requests' wall time,
  // and at least their three schedules (0.19 + 0.21 + 0.25 s).
  assert.ok(a.sum >= 0.65 - 0.01 && a.sum <= wallSeconds, `session ${a.sum} s, wall ${wallSeconds} s`);
  assert.equal(m.value('tokenmeter_task_session_requests_total', { model: 'model-a', task: 'fix-test' }), 3);
  assert.equal(m.value('tokenmeter_task_session_tokens_total', { model: 'model-a', task: 'fix-test', type: 'output' }), 13);
  assert.equal(m.value('tokenmeter_task_session_requests_total', { model: 'model-b', task: 'fix-test' }), 1);
  assert.equal(m.value('tokenmeter_task_session_requests_total', { model: 'model-b', task: 'sql' }), 1);
  assert.equal(m.value('tokenmeter_task_session_requests_total'), 5);
  assert.equal(m.value('tokenmeter_task_sessions_dropped_total', { reason: 'evicted' }), 0);
  // Each request still has its own task time, the two with bad ids too.
  assert.equal(m.histogram('tokenmeter_task_duration_seconds', { model: 'model-a', task: 'fix-test' }).count, 5);
  assert.equal((await proxy.metricsText()).includes('secret-agent'), false);

  // max_sessions is 3: a fourth concurrent session evicts the least recently active.
  for (const id of ['s1', 's2', 's3', 's4']) {
    await send(proxy, 'model-a', 1, session(id));
  }
  m = await proxy.metrics();
  assert.equal(m.value('tokenmeter_task_sessions_dropped_total', { reason: 'evicted' }), 1);
  assert.equal(m.value('tokenmeter_task_sessions_active'), 3);
  m = await waitMetrics(proxy, (x) => x.value('tokenmeter_task_sessions_active') === 0, 6000);
  assert.equal(m.histogram('tokenmeter_task_session_duration_seconds', { model: 'model-a', task: 'fix-test' }).count, 1 + 3);
});
