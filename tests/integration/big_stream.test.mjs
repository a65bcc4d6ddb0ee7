// A 20 MiB stream passes whole: same length and sha256 as directly from a twin simulator.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, describeResult, request, startProxy, startSimPair, stopAll, waitMetrics,
} from './lib/harness.mjs';

after(stopAll);

test('a 20 MiB stream arrives whole and identical', { timeout: 120_000 }, async () => {
  const model = 'big-stream';
  const [simA, simB] = await startSimPair();
  const proxy = await startProxy({ upstream: simB.port });
  const req = {
    body: chatBody(model, { includeUsage: true }),
    headers: {
      'x-sim-output-tokens': '2048', 'x-sim-pad-bytes': '10240', 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0',
    },
    keepBody: false,
    timeoutMs: 90_000,
  };
  const direct = await request({ port: simA.port, ...req });
  const proxied = await request({ port: proxy.port, ...req });
  assert.equal(direct.status, 200, describeResult(direct));
  assert.equal(direct.complete, true, describeResult(direct));
  assert.ok(direct.bytes > 20 * 1024 * 1024, `direct stream is ${direct.bytes} bytes`);
  assert.equal(proxied.status, 200, describeResult(proxied));
  assert.equal(proxied.complete, true, describeResult(proxied));
  assert.equal(proxied.error, undefined);
  assert.equal(proxied.bytes, direct.bytes);
  assert.equal(proxied.sha256, direct.sha256);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model }) >= 1);
  assert.equal(m.value('tokenmeter_requests_total',
    { model, api: 'openai_chat', outcome: 'complete', code: '200' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { model, type: 'output' }), 2048);
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', { model }).count, 2047);
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
  assert.equal(m.value('tokenmeter_streams_active'), 0);
});
