// prices: the cost of each request's tokens in its usage record, in tokenmeter_cost_total and in
// `tokenmeter usage`, through the real proxy in front of the simulator. The expected amounts are
// computed here in integers from the record's own token counts, so an exact decimal is checked.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';

import {
  binaries, chatBody, makeTempDir, request, startProxy, startSim, stopAll, waitMetrics,
} from './lib/harness.mjs';
import { readRecords, runUsage, waitRecord } from './lib/usage.mjs';

after(stopAll);

// Micro-units per million tokens: 2.5 and 10 USD; 0.15 and 0.6 EUR.
const PRICES = {
  'priced-usd': { input: 2_500_000n, output: 10_000_000n, currency: 'USD', yaml: '{input: 2.5, output: 10, currency: USD}' },
  'priced-eur': { input: 150_000n, output: 600_000n, currency: 'EUR', yaml: '{input: 0.15, output: 0.6, currency: EUR}' },
};

// Pico-units as an exact decimal string, as the proxy writes it.
function decimal(picos) {
  const unit = 1_000_000_000_000n;
  const whole = picos / unit;
  const fraction = (picos % unit).toString().padStart(12, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : `${whole}`;
}

test('priced models: exact cost and currency in records, metric and usage report; unpriced: none', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-cost-');
  const config = [
    'tenants:', '  source: header', '  header: x-tenant-id',
    'usage:', `  spool_dir: ${spool}`,
    'prices:',
    ...Object.entries(PRICES).map(([model, p]) => `  ${model}: ${p.yaml}`),
    '',
  ].join('\n');
  const proxy = await startProxy({ upstream: sim.port, config });

  const sent = [
    ['priced-usd', 37, 'c-1'], ['priced-usd', 120, 'c-2'], ['priced-eur', 55, 'c-3'],
    ['unpriced', 20, 'c-4'],
  ];
  for (const [model, tokens, id] of sent) {
    const res = await request({
      port: proxy.port, body: chatBody(model, { includeUsage: true, content: 'price this prompt please' }),
      headers: { 'x-request-id': id, 'x-tenant-id': 'team-a', 'x-sim-output-tokens': String(tokens), 'x-sim-itl-ms': '0' },
    });
    assert.equal(res.status, 200);
  }
  const expected = {};  // currency -> picos
  for (const [model, tokens, id] of sent) {
    const record = await waitRecord(spool, id);
    assert.equal(record.output_tokens, tokens, JSON.stringify(record));
    const price = PRICES[model];
    if (!price) {
      assert.equal('cost' in record, false, `an unpriced model has no cost field: ${JSON.stringify(record)}`);
      assert.equal('currency' in record, false);
      continue;
    }
    assert.equal(typeof record.input_tokens, 'number', 'the simulator reports prompt tokens');
    const picos = BigInt(record.input_tokens) * price.input + BigInt(record.output_tokens) * price.output;
    assert.equal(record.currency, price.currency);
    assert.equal(record.cost, Number(decimal(picos)), `${model}: ${JSON.stringify(record)}`);
    expected[price.currency] = (expected[price.currency] ?? 0n) + picos;
  }
  assert.equal(readRecords(spool).length, sent.length);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_cost_total', { currency: 'EUR' }) > 0);
  for (const [currency, picos] of Object.entries(expected)) {
    const value = m.select('tokenmeter_cost_total').filter((s) => s.labels.currency === currency)
      .reduce((sum, s) => sum + s.value, 0);
    assert.ok(Math.abs(value - Number(picos) / 1e12) < 1e-12, `${currency}: metric ${value}, records ${decimal(picos)}`);
  }
  const usd = m.select('tokenmeter_cost_total').find((s) => s.labels.currency === 'USD');
  assert.equal(usd.labels.model, 'priced-usd');
  assert.equal(usd.labels.tenant, 'team-a');
  assert.equal(m.select('tokenmeter_cost_total').some((s) => s.labels.model === 'unpriced'), false);

  const json = await runUsage(['--spool', spool, '--json']);
  assert.equal(json.code, 0, json.stderr);
  const report = JSON.parse(json.stdout);
  const team = JSON.stringify(report);
  assert.ok(team.includes(`"USD":"${decimal(expected.USD)}"`), team);
  assert.ok(team.includes(`"EUR":"${decimal(expected.EUR)}"`), team);
  assert.ok(team.includes('"unpriced_requests":1'), team);

  const table = await runUsage(['--spool', spool]);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /COST/);
  assert.match(table.stdout, /priced-eur .* EUR/);
  assert.match(table.stdout, /unpriced .* - /);
});

test('a broken price stops start-up naming the key', { timeout: 20_000 }, async () => {
  const { bin } = binaries();
  const file = `${makeTempDir('tokenmeter-cost-cfg-')}/bad.yaml`;
  const { writeFileSync } = await import('node:fs');
  writeFileSync(file, 'prices:\n  m: {input: 0.1234567, output: 1, currency: USD}\n');
  const out = await new Promise((resolve) => {
    execFile(bin, ['--check-config', file], (error, stdout, stderr) => resolve({ code: error ? error.code : 0, stderr }));
  });
  assert.equal(out.code, 1);
  assert.match(out.stderr, /prices\.m\.input: .*at most 6 decimal places/);
});
