// `tokenmeter usage --plan` on a spool written by a known load through the real proxy: the mix it
// prints is exactly the load's (the simulator reports every count), and its bands follow from its
// own peaks by the documented rules.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, makeTempDir, request, startProxy, startSim, stopAll,
} from './lib/harness.mjs';
import { readRecords, runUsage, waitRecord } from './lib/usage.mjs';

after(stopAll);

test('usage --plan: the mix of a known load, and bands that follow from its peaks', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-plan-');
  const proxy = await startProxy({ upstream: sim.port, config: `usage:\n  spool_dir: ${spool}\n` });
  // 12 requests of 40 output tokens and 8 of 100, all with the same prompt.
  const outputs = [...Array(12).fill(40), ...Array(8).fill(100)];
  await Promise.all(outputs.map((tokens, i) => request({
    port: proxy.port, body: chatBody('plan-model', { includeUsage: true, content: 'the same prompt every time' }),
    headers: { 'x-request-id': `p-${i}`, 'x-sim-output-tokens': String(tokens), 'x-sim-itl-ms': '2', 'x-sim-ttft-ms': '20' },
  })));
  await waitRecord(spool, 'p-19');
  const records = readRecords(spool);
  assert.equal(records.length, 20);
  const inputs = new Set(records.map((r) => r.input_tokens));
  assert.equal(inputs.size, 1, 'the simulator counts the same prompt the same');
  const input = [...inputs][0];

  const res = await runUsage(['--spool', spool, '--plan', '--json', '--band-size', '50', '--ttft-target', '10s', '--tpot-target', '1s']);
  assert.equal(res.code, 0, res.stderr);
  const plan = JSON.parse(res.stdout);
  assert.equal(plan.band_size, 50);
  assert.deepEqual(plan.reference_mix, { input: 2048, output: 256 });
  assert.equal(plan.models.length, 1);
  const m = plan.models[0];
  assert.equal(m.model, 'plan-model');
  assert.equal(m.requests, 20);
  assert.deepEqual(m.input_tokens, { requests: 20, mean: input, p50: input, p95: input });
  // Nearest rank over 12 x 40 and 8 x 100: p50 is the 10th value, p95 the 19th.
  assert.deepEqual(m.output_tokens, { requests: 20, mean: (12 * 40 + 8 * 100) / 20, p50: 40, p95: 100 });
  // The whole load ran within a minute or two: its windows hold every token and every start.
  const tokens = 20 * input + 12 * 40 + 8 * 100;
  assert.ok(m.minutes >= 1 && m.minutes <= 2, JSON.stringify(m));
  assert.ok(m.tokens_per_second.peak >= tokens / 60 / m.minutes - 1e-9 && m.tokens_per_second.peak <= tokens / 60 + 1e-9,
    JSON.stringify(m.tokens_per_second));
  assert.ok(m.requests_per_second.peak >= 20 / 60 / m.minutes - 1e-9 && m.requests_per_second.peak <= 20 / 60 + 1e-9);
  // The bands, from the peaks by the documented rules.
  assert.equal(m.band_tokens_per_second, Math.ceil(m.tokens_per_second.peak / 50 - 1e-9) * 50);
  assert.ok(Math.abs(m.reference_tokens_per_second - m.requests_per_second.peak * 2304) < 1e-9);
  assert.equal(m.reference_band_tokens_per_second, Math.ceil(m.reference_tokens_per_second / 50 - 1e-9) * 50);
  assert.deepEqual(m.ttft, { target_s: 10, judged: 20, good: 20 });
  assert.deepEqual(m.tpot, { target_s: 1, judged: 20, good: 20 });

  const text = await runUsage(['--spool', spool, '--plan']);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /^model plan-model: 20 requests in \d one-minute window\(s\)/);
  assert.match(text.stdout, /output {2}mean 64\.0 {2}p50 40 {2}p95 100/);
  assert.match(text.stdout, /reference +\d+ tokens\/s: the peak [\d.]+ requests\/s at 2048 in \+ 256 out/);

  const bad = await runUsage(['--spool', spool, '--plan', '--ttft-target', 'soon']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--ttft-target: expected a duration like 500ms or 2s, got 'soon'/);
});
