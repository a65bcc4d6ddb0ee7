// Timing: the simulator sends on an exact schedule, so the proxy's TTFT, ITL and TPOT must come
// out at the scheduled values, within 2 ms (timers fire late, never early: TTFT may be later
// than scheduled but never earlier than 1 ms before it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  chatBody, describeResult, parseSse, request, sseText, startProxy, startSim, stopAll, expectedText, waitMetrics,
} from './lib/harness.mjs';

after(async () => {
  agent.destroy();
  await stopAll();
});

let sim;
let proxy;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
before(async () => {
  sim = await startSim();
  proxy = await startProxy({ upstream: sim.port });
});

const TOLERANCE = 0.002;

function assertNear(actual, expected, what, { notEarlierBy = TOLERANCE } = {}) {
  assert.ok(actual >= expected - notEarlierBy && actual <= expected + TOLERANCE,
    `${what}: ${actual.toFixed(6)} s, expected ${expected} s (−${notEarlierBy * 1000} ms / +${TOLERANCE * 1000} ms)`);
}

// One streamed request with x-sim-stamp, on a warm keep-alive connection. Returns the result and
// the bracket the proxy's TTFT must fall in, on the one clock all three processes share
// (CLOCK_MONOTONIC: Node's hrtime, the simulator's and the proxy's steady_clock):
//   lower = simulator sent the first content chunk − simulator received the request
//           (the proxy received the request before the simulator and the chunk after it was sent)
//   upper = client saw the first content chunk − client started sending
async function stampedStream(model, headers) {
  let firstTokenNs;
  let seen = '';
  const sentNs = process.hrtime.bigint();
  const res = await request({
    port: proxy.port,
    agent,
    body: chatBody(model, { includeUsage: true }),
    headers: { ...headers, 'x-sim-stamp': '1' },
    onData: (chunk) => {
      if (firstTokenNs !== undefined) return;
      seen += chunk.toString();
      if (seen.includes('"delta":{"content":')) firstTokenNs = process.hrtime.bigint();
    },
  });
  assert.equal(res.status, 200, describeResult(res));
  assert.equal(res.complete, true, describeResult(res));
  const receivedNs = BigInt(res.headers['x-sim-received-ns']);
  const first = parseSse(res.body.toString()).find((e) => e.json && e.json.sim_sent_ns !== undefined);
  const lower = Number(BigInt(first.json.sim_sent_ns) - receivedNs) / 1e9;
  const upper = Number(firstTokenNs - sentNs) / 1e9;
  return { res, lower, upper };
}

test('TTFT, ITL and TPOT match the schedule (ttft 200 ms, itl 20 ms, 20 tokens)', { timeout: 60_000 }, async () => {
  // Warm-up: a pooled upstream connection and running worker threads, as in steady state.
  const warm = await request({
    port: proxy.port, agent, body: chatBody('timing-warmup'),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '2' },
  });
  assert.equal(warm.status, 200, describeResult(warm));

  // The proxy's TTFT must always lie within the bracket of what the simulator and the client
  // saw (a hard correctness check). Being within 2 ms of the schedule also depends on how busy
  // the machine is (ctest runs test files in parallel), so up to 3 attempts, each with its own
  // model name, may be made for that part; every attempt must pass the bracket check.
  const attempts = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const model = `timing-basic-${attempt}`;
    const { res, lower, upper } = await stampedStream(model,
      { 'x-sim-ttft-ms': '200', 'x-sim-itl-ms': '20', 'x-sim-output-tokens': '20' });
    assert.equal(sseText(res.body.toString()), expectedText(20));

    const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
    const labels = { model, api: 'openai_chat' };
    const ttft = m.histogram('tokenmeter_time_to_first_token_seconds', labels);
    assert.equal(ttft.count, 1);
    assert.ok(ttft.sum >= lower && ttft.sum <= upper,
      `TTFT ${ttft.sum.toFixed(6)} s outside what the simulator and the client saw: ` +
      `[${lower.toFixed(6)}, ${upper.toFixed(6)}]`);
    assert.ok(lower >= 0.200, `the simulator sent the first token early: ${lower}`);
    assert.equal(ttft.bucket(0.1), 0);
    assert.equal(ttft.bucket(0.25), 1);

    const itl = m.histogram('tokenmeter_inter_token_latency_seconds', labels);
    assert.equal(itl.count, 19);
    assertNear(itl.sum / itl.count, 0.020, 'ITL mean');

    const tpot = m.histogram('tokenmeter_time_per_output_token_seconds', labels);
    assert.equal(tpot.count, 1);
    assertNear(tpot.sum, 0.020, 'TPOT');

    const decode = m.histogram('tokenmeter_decode_tokens_per_second', labels);
    assert.equal(decode.count, 1);
    assert.ok(Math.abs(decode.sum - 50) < 5, `decode tokens/s ${decode.sum}, expected ≈ 50`);

    const duration = m.histogram('tokenmeter_request_duration_seconds', { ...labels, outcome: 'complete' });
    assert.equal(duration.count, 1);
    assert.ok(duration.sum >= 0.579 && duration.sum < 0.750, `duration ${duration.sum}, expected ≈ 0.58`);

    const outputTps = m.histogram('tokenmeter_output_tokens_per_second', labels);
    assert.equal(outputTps.count, 1);
    assert.ok(Math.abs(outputTps.sum - 20 / duration.sum) < 0.5, `output tokens/s ${outputTps.sum}`);

    assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete', code: '200' }), 1);
    assert.equal(m.value('tokenmeter_requests_total', { model }), 1);
    assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), 20);
    assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'input' }), 3);

    attempts.push({ ttft: ttft.sum, lower, upper });
    if (ttft.sum >= 0.199 && ttft.sum <= 0.202) break;
  }
  const last = attempts.at(-1);
  assert.ok(last.ttft >= 0.199 && last.ttft <= 0.202,
    `TTFT not within 2 ms of 0.200 s (and not earlier than 0.199 s) in any of ${attempts.length} ` +
    `attempts: ${attempts.map((a) => `${a.ttft.toFixed(6)} [sim ${a.lower.toFixed(6)}, client ` +
    `${a.upper.toFixed(6)}]`).join('; ')}`);
});

test('without usage the tokens counter stays untouched but timing still counts chunks', { timeout: 30_000 }, async () => {
  const model = 'timing-no-usage';
  const res = await request({
    port: proxy.port,
    body: chatBody(model),
    headers: { 'x-sim-ttft-ms': '50', 'x-sim-itl-ms': '10', 'x-sim-output-tokens': '8' },
  });
  assert.equal(res.status, 200);
  assert.equal(res.complete, true);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model }), 0);
  const itl = m.histogram('tokenmeter_inter_token_latency_seconds', { model });
  assert.equal(itl.count, 7);
  assertNear(itl.sum / itl.count, 0.010, 'ITL mean');
});

test('4 tokens per chunk with continuous usage: ITL count n_out−1, gaps split per token', { timeout: 30_000 }, async () => {
  const model = 'timing-multi-token';
  const res = await request({
    port: proxy.port,
    body: chatBody(model, { includeUsage: true }),
    headers: {
      'x-sim-ttft-ms': '50', 'x-sim-itl-ms': '20', 'x-sim-output-tokens': '20',
      'x-sim-tokens-per-chunk': '4', 'x-sim-continuous-usage': '1',
    },
  });
  assert.equal(res.status, 200, describeResult(res));
  assert.equal(res.complete, true, describeResult(res));
  assert.equal(sseText(res.body.toString()), expectedText(20));

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  const labels = { model, api: 'openai_chat' };
  const itl = m.histogram('tokenmeter_inter_token_latency_seconds', labels);
  // 5 chunks of 4 tokens: the first chunk's 3 extra tokens are observations of 0; each later
  // chunk, 20 ms after the previous, gives 4 observations of 5 ms (itl / 4).
  assert.equal(itl.count, 19);
  assert.equal(itl.bucket(0.001), 3, 'three zero observations from the first chunk');
  assert.equal(itl.bucket(0.0025), 3, 'no observation between 1 and 2.5 ms');
  assert.equal(itl.bucket(0.01), 19, 'the other 16 are ≈ 5 ms');
  assertNear(itl.sum, 4 * 0.020, 'ITL sum = t_last − t_first');
  const nonZeroMean = itl.sum / 16;
  assertNear(nonZeroMean, 0.020 / 4, 'mean of the per-token gaps after the first chunk');
  assertNear(itl.sum / itl.count, (4 * 0.020) / 19, 'ITL mean');

  const tpot = m.histogram('tokenmeter_time_per_output_token_seconds', labels);
  assert.equal(tpot.count, 1);
  assertNear(tpot.sum, (4 * 0.020) / 19, 'TPOT');
  const ttft = m.histogram('tokenmeter_time_to_first_token_seconds', labels);
  assert.equal(ttft.count, 1);
  assertNear(ttft.sum, 0.050, 'TTFT', { notEarlierBy: 0.001 });
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), 20);
  assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete', code: '200' }), 1);
});
