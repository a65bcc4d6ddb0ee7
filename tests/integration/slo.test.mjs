// SLO counting and the TTFT prompt_class label through the real proxy and simulator: each
// streamed request is counted good or bad against its model's targets, the targets are exported
// and are histogram boundaries, and TTFT is split by the prompt size the server reported.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, describeResult, request, startProxy, startSim, stopAll, waitMetrics,
} from './lib/harness.mjs';

let proxy;
before(async () => {
  const sim = await startSim();
  proxy = await startProxy({
    upstream: sim.port,
    config: [
      'slo:',
      '  models:',
      '    chat-fast:',
      '      preset: interactive     # TTFT 500 ms, TPOT 30 ms',
      '    chat-slow:',
      '      preset: server          # TTFT 2 s, TPOT 100 ms',
      '      objective: 99.9%',
      '',
    ].join('\n'),
  });
});
after(stopAll);

async function stream(model, ttftMs, itlMs, { words = 3, usage = true } = {}) {
  const res = await request({
    port: proxy.port,
    body: chatBody(model, { includeUsage: usage, content: Array(words).fill('w').join(' ') }),
    // Without usage: a server that also ignores the include_usage the proxy adds.
    headers: {
      'x-sim-ttft-ms': String(ttftMs), 'x-sim-itl-ms': String(itlMs), 'x-sim-output-tokens': '4',
      ...(usage ? {} : { 'x-sim-usage': 'never' }),
    },
  });
  assert.equal(res.status, 200, describeResult(res));
}

const slo = (m, model, which, result) =>
  m.value('tokenmeter_slo_requests_total', { model, slo: which, result });

test('requests are counted good or bad against each target of their model', async () => {
  await stream('chat-fast', 50, 5);    // TTFT good, TPOT good
  await stream('chat-fast', 650, 5);   // TTFT bad (> 500 ms), TPOT good
  await stream('chat-fast', 50, 60);   // TTFT good, TPOT bad (> 30 ms)
  await stream('chat-slow', 650, 60);  // both good against the server preset
  await stream('no-slo', 50, 5);       // a model without an entry is not counted
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', {}) >= 5, 5000);
  assert.equal(slo(m, 'chat-fast', 'ttft', 'good'), 2);
  assert.equal(slo(m, 'chat-fast', 'ttft', 'bad'), 1);
  assert.equal(slo(m, 'chat-fast', 'tpot', 'good'), 2);
  assert.equal(slo(m, 'chat-fast', 'tpot', 'bad'), 1);
  assert.equal(slo(m, 'chat-slow', 'ttft', 'good'), 1);
  assert.equal(slo(m, 'chat-slow', 'ttft', 'bad'), 0);
  assert.equal(slo(m, 'chat-slow', 'tpot', 'good'), 1);
  assert.equal(m.has('tokenmeter_slo_requests_total', { model: 'no-slo' }), false);
  assert.equal(m.value('tokenmeter_slo_objective_ratio', { model: 'chat-slow', slo: 'ttft' }), 0.999);
  assert.equal(m.value('tokenmeter_slo_objective_ratio', { model: 'chat-fast', slo: 'tpot' }), 0.99);
  assert.equal(m.value('tokenmeter_slo_target_seconds', { model: 'chat-fast', slo: 'ttft' }), 0.5);
  assert.equal(m.value('tokenmeter_slo_target_seconds', { model: 'chat-slow', slo: 'tpot' }), 0.1);
});

test('failed requests count bad for availability and are left out of latency', async () => {
  const fail = async (how, status) => {
    const res = await request({
      port: proxy.port,
      body: chatBody('chat-fast', { includeUsage: true }),
      headers: { 'x-sim-ttft-ms': '5', 'x-sim-output-tokens': '4', 'x-sim-fail': how },
    });
    assert.equal(res.status, status, describeResult(res));
  };
  await fail('status:503', 503);       // the server's 5xx: bad
  await fail('close-after:2', 200);    // cut mid-stream: bad
  await fail('status:404', 404);       // the request's fault: left out
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', {}) >= 8, 5000);
  assert.equal(slo(m, 'chat-fast', 'availability', 'good'), 3);
  assert.equal(slo(m, 'chat-fast', 'availability', 'bad'), 2);
  assert.equal(slo(m, 'chat-slow', 'availability', 'good'), 1);
  assert.equal(m.value('tokenmeter_slo_objective_ratio', { model: 'chat-fast', slo: 'availability' }), 0.999);
  // The 503 and the 404 had no token: no TTFT verdict. The cut stream had its tokens on time.
  assert.equal(slo(m, 'chat-fast', 'ttft', 'good'), 3);
  assert.equal(slo(m, 'chat-fast', 'ttft', 'bad'), 1);
});

test('SLO targets are histogram bucket boundaries', async () => {
  const text = await proxy.metricsText();
  // 2 s (server TTFT) and 30 ms (interactive TPOT) are not default boundaries; they are added.
  assert.match(text, /tokenmeter_time_to_first_token_seconds_bucket\{[^}]*le="2"\}/);
  assert.match(text, /tokenmeter_time_per_output_token_seconds_bucket\{[^}]*le="0.03"\}/);
  assert.match(text, /tokenmeter_inter_token_latency_seconds_bucket\{[^}]*le="0.03"\}/);
});

test('TTFT is labelled with the prompt class from the reported prompt size', async () => {
  await stream('classes', 10, 1, { words: 600 });                 // 512-2k
  await stream('classes', 10, 1, { words: 3000 });                // 2k-8k
  await stream('classes', 10, 1, { words: 5, usage: false });     // no usage: unknown
  const m = await waitMetrics(proxy,
    (x) => x.histogram('tokenmeter_time_to_first_token_seconds', { model: 'classes' }).count >= 3, 5000);
  const count = (prompt_class) =>
    m.histogram('tokenmeter_time_to_first_token_seconds', { model: 'classes', prompt_class }).count;
  assert.equal(count('512-2k'), 1);
  assert.equal(count('2k-8k'), 1);
  assert.equal(count('unknown'), 1);
  assert.equal(count('0-512'), 0);
});
