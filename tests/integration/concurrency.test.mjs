// 50 concurrent streams through the proxy: every one arrives whole with its own text (each uses
// its own seed, so crossed wires would show), and tokenmeter_streams_active goes back to 0.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  chatBody, describeResult, expectedText, parseSse, request, sseText, startProxy, startSim, stopAll,
  waitFor, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

const STREAMS = 50;
const TOKENS = 50;
const BURST = 80;

test(`${STREAMS} concurrent streams all complete with the right bytes`, { timeout: 60_000 }, async () => {
  const model = 'concurrency-model';
  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  const agent = new http.Agent({ keepAlive: false, maxSockets: STREAMS * 2 });
  let withContent = 0;
  let ended = 0;
  try {
    const requests = [];
    for (let i = 0; i < STREAMS; i++) {
      let seen = '';
      let counted = false;
      requests.push(request({
        port: proxy.port,
        agent,
        body: chatBody(model, { includeUsage: true }),
        // 50 tokens 20 ms apart: each stream lasts about a second.
        headers: {
          'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '20', 'x-sim-output-tokens': String(TOKENS), 'x-sim-seed': String(i),
        },
        onData: (chunk) => {
          if (counted) return;
          seen += chunk.toString();
          if (seen.includes('"delta":{"content":')) {
            counted = true;
            withContent += 1;
          }
        },
        timeoutMs: 30_000,
      }).then((res) => { ended += 1; return res; }));
    }

    // While all of them are in flight, the gauge shows them all.
    await waitFor(() => withContent === STREAMS || ended > 0, { timeoutMs: 10_000, what: 'all streams to start' });
    if (ended === 0) {
      const m = await proxy.metrics();
      // Only meaningful if still none had ended when the scrape was answered.
      if (ended === 0) {
        assert.equal(m.value('tokenmeter_streams_active'), STREAMS, 'streams_active while all are in flight');
      }
    }

    const results = await Promise.all(requests);
    const ids = new Set();
    results.forEach((res, i) => {
      assert.equal(res.status, 200, `stream ${i}: ${describeResult(res)}`);
      assert.equal(res.complete, true, `stream ${i}: ${describeResult(res)}`);
      const text = res.body.toString();
      assert.equal(sseText(text), expectedText(TOKENS, { seed: i }), `stream ${i} text`);
      const events = parseSse(text);
      assert.equal(events.at(-1).data, '[DONE]', `stream ${i} ends with [DONE]`);
      const streamIds = new Set(events.filter((e) => e.json).map((e) => e.json.id));
      assert.equal(streamIds.size, 1, `stream ${i} has one id: ${[...streamIds]}`);
      ids.add([...streamIds][0]);
      assert.equal(events.at(-2).json.usage.completion_tokens, TOKENS);
    });
    assert.equal(ids.size, STREAMS, 'every stream came from its own upstream request');
  } finally {
    agent.destroy();
  }

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_streams_active') === 0
    && x.value('tokenmeter_requests_total', { model }) === STREAMS, 2000);
  assert.equal(m.value('tokenmeter_streams_active'), 0);
  assert.equal(m.value('tokenmeter_requests_total', { model, outcome: 'complete', code: '200' }), STREAMS);
  assert.equal(m.value('tokenmeter_tokens_total', { model, type: 'output' }), STREAMS * TOKENS);
  assert.equal(m.histogram('tokenmeter_time_to_first_token_seconds', { model }).count, STREAMS);
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', { model }).count, STREAMS * (TOKENS - 1));
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
  assert.equal(m.value('tokenmeter_upstream_errors_total'), 0);
  const stats = await sim.stats();
  assert.equal(stats.streams_completed, STREAMS, JSON.stringify(stats));
});

// Streams that end together leave their upstream connections idle. By default the pool keeps
// every one (until upstream_pool.idle_keepalive), so the next burst reuses them all instead of
// connecting again; with max_idle_connections set, the rest are closed.
async function burst(proxy, model, count) {
  const agent = new http.Agent({ keepAlive: false, maxSockets: count * 2 });
  try {
    const results = await Promise.all(Array.from({ length: count }, () => request({
      port: proxy.port,
      agent,
      body: chatBody(model),
      headers: { 'x-sim-ttft-ms': '200', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': '5' },
      timeoutMs: 20_000,
    })));
    results.forEach((res, i) => {
      assert.equal(res.status, 200, `stream ${i}: ${describeResult(res)}`);
      assert.equal(res.complete, true, `stream ${i}: ${describeResult(res)}`);
    });
  } finally {
    agent.destroy();
  }
}

for (const [name, config, expectNew] of [
  ['the default pool keeps every idle upstream connection', '', (n) => n === 0],
  ['max_idle_connections: 10 closes the rest', 'upstream_pool:\n  max_idle_connections: 10\n',
    (n) => n >= BURST - 10 - 2],
]) {
  test(`a second burst of ${BURST} streams: ${name}`, { timeout: 60_000 }, async () => {
    const sim = await startSim();
    // No readiness probes during the test: they would be connections too.
    const proxy = await startProxy({
      upstream: sim.port, config: `readiness:\n  probe_interval: 1h\n${config}`,
    });
    await burst(proxy, 'burst-model', BURST);
    const between = await sim.stats();
    await burst(proxy, 'burst-model', BURST);
    const after = await sim.stats();
    // /sim/stats adds one connection of its own.
    const fresh = after.connections_accepted - between.connections_accepted - 1;
    assert.ok(expectNew(fresh), `the second burst opened ${fresh} upstream connections`);
  });
}
