// The input-only APIs through the real proxy in front of the simulator: embeddings, rerank,
// score, classify, pooling and moderations each bill their input: from the server's usage when
// it reports one, else counted by the reference tokenizer on the request's input. Records,
// tokenmeter_tokens_total, the request duration histogram, prices and tenant limits apply; no
// TTFT or inter-token latency is observed for them; a body that is not JSON is refused as on
// every metered API.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

import {
  binaries, makeTempDir, request, startProxy, startSim, stopAll, waitMetrics,
} from './lib/harness.mjs';
import { readRecords, waitRecord } from './lib/usage.mjs';

after(stopAll);

// The reference tokenizer's count of a text, from the proxy's own command.
function o200k(text) {
  const { bin } = binaries();
  const run = spawnSync(bin, ['tokenize', '--tokenizer', 'o200k_base'], { input: text, encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 0, run.stderr);
  return Number(run.stdout.trim());
}

// Words the simulator counts as tokens.
const words = (text) => text.split(/\s+/).filter(Boolean).length;

function config(spool, extra = '') {
  return `usage:\n  spool_dir: ${spool}\n  checkpoint_interval: 100ms\nreference_tokenizer: o200k_base\n${extra}`;
}

// Each endpoint, the request, and the input tokens the simulator reports for it.
const CASES = [
  { api: 'openai_embeddings', path: '/v1/embeddings',
    body: { model: 'emb-m', input: ['the quick brown fox', 'jumps over'] }, reported: 6 },
  { api: 'openai_embeddings', path: '/v1/embeddings',
    body: { model: 'emb-m', input: [[1, 2, 3], [4, 5]], encoding_format: 'base64' }, reported: 5 },
  { api: 'rerank', path: '/v1/rerank',
    body: { model: 'rr-m', query: 'what is up', documents: ['not much', 'the sky'] }, reported: 3 + 2 + 3 + 2 },
  { api: 'rerank', path: '/v2/rerank',
    body: { model: 'rr-m', query: 'q', documents: ['a b c'] }, reported: 4 },
  { api: 'score', path: '/score',
    body: { model: 'sc-m', text_1: 'left side', text_2: ['right one', 'right two words'] }, reported: 4 + 5 },
  { api: 'classify', path: '/classify', body: { model: 'cl-m', input: ['good film', 'bad'] }, reported: 3 },
  { api: 'pooling', path: '/pooling', body: { model: 'po-m', input: 'pool these four words' }, reported: 4 },
];

test('each input-only endpoint: record, tokens_total and duration from the reported usage; no TTFT', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-pooling-');
  const proxy = await startProxy({ upstream: sim.port, config: config(spool) });
  for (const [i, c] of CASES.entries()) {
    const viaSim = await request({ port: sim.port, path: c.path, body: c.body, headers: { 'x-sim-ttft-ms': '5' } });
    const res = await request({ port: proxy.port, path: c.path, body: c.body,
      headers: { 'x-request-id': `pool-${i}`, 'x-sim-ttft-ms': '5' } });
    assert.equal(res.status, 200, res.body.toString());
    // What the server answers directly, but for the ids (the simulator's request counter).
    const strip = (b) => JSON.parse(b.toString(), (k, v) => (k === 'id' ? undefined : v));
    assert.deepEqual(strip(res.body), strip(viaSim.body), c.path);
  }
  const totals = {};
  for (const [i, c] of CASES.entries()) {
    const record = await waitRecord(spool, `pool-${i}`);
    assert.equal(record.api, c.api, JSON.stringify(record));
    assert.equal(record.model, c.body.model);
    assert.equal(record.route, c.path);
    assert.equal(record.outcome, 'complete');
    assert.equal(record.streamed, false);
    assert.equal(record.ttft_s, null);
    assert.equal(record.input_tokens, c.reported, JSON.stringify(record));
    assert.equal(record.input_source, 'reported');
    // vLLM reports completion_tokens 0 but for rerank; there nothing generated counts to 0.
    assert.equal(record.output_tokens, 0);
    assert.equal(record.output_source, c.api === 'rerank' ? 'normalized' : 'reported');
    assert.ok(record.duration_s >= 0.004, JSON.stringify(record));
    const key = `${c.api}|${c.body.model}`;
    totals[key] = (totals[key] ?? 0) + c.reported;
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { api: 'pooling' }) >= 1);
  for (const [key, input] of Object.entries(totals)) {
    const [api, model] = key.split('|');
    assert.equal(m.value('tokenmeter_tokens_total', { api, model, type: 'input' }), input, key);
    assert.equal(m.value('tokenmeter_tokens_total', { api, model, type: 'output' }), 0, key);
    const runs = CASES.filter((c) => c.api === api).length;
    assert.equal(m.value('tokenmeter_requests_total', { api, model, outcome: 'complete', code: '200' }), runs, key);
    assert.equal(m.histogram('tokenmeter_request_duration_seconds', { api, model }).count, runs, key);
    for (const name of ['tokenmeter_time_to_first_token_seconds', 'tokenmeter_inter_token_latency_seconds',
      'tokenmeter_time_per_output_token_seconds']) {
      assert.equal(m.histogram(name, { api }).count, 0, `${name} ${api}`);
    }
  }
  assert.equal(m.value('tokenmeter_parse_errors_total'), 0);
});

test('without a usage report the input is counted by the reference tokenizer; moderations always are', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-pooling-');
  const proxy = await startProxy({ upstream: sim.port, config: config(spool) });
  const send = async (id, path, body, headers = {}) => {
    const res = await request({ port: proxy.port, path, body, headers: { 'x-request-id': id, ...headers } });
    assert.equal(res.status, 200, res.body.toString());
    return waitRecord(spool, id);
  };
  const never = { 'x-sim-usage': 'never' };
  const texts = ['hello world', 'tokens, counted here'];
  const emb = await send('n-emb', '/v1/embeddings', { model: 'e', input: texts }, never);
  assert.equal(emb.input_source, 'normalized');
  assert.equal(emb.input_tokens, o200k(texts.join('\n')));
  // Token ids count one each, beside the text.
  const ids = await send('n-ids', '/v1/embeddings', { model: 'e', input: [[11, 12, 13, 14], [15]] }, never);
  assert.equal(ids.input_source, 'normalized');
  assert.equal(ids.input_tokens, 5);
  const rr = await send('n-rr', '/rerank', { model: 'r', query: 'a question', documents: ['first doc', 'second'] }, never);
  assert.equal(rr.input_tokens, o200k('a question\nfirst doc\nsecond'));
  const sc = await send('n-sc', '/v1/score', { model: 's', text_1: 'one', text_2: 'two three' }, never);
  assert.equal(sc.input_tokens, o200k('one\ntwo three'));
  const mod = await send('n-mod', '/v1/moderations',
    { model: 'omni-moderation-latest', input: [{ type: 'text', text: 'is this fine' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] });
  assert.equal(mod.api, 'openai_moderations');
  assert.equal(mod.input_source, 'normalized');
  assert.equal(mod.input_tokens, o200k('is this fine'));
  assert.equal(mod.output_tokens, 0);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { api: 'openai_moderations' }) >= 1);
  assert.equal(m.value('tokenmeter_tokens_total', { api: 'openai_moderations', type: 'input' }), mod.input_tokens);
  assert.equal(m.value('tokenmeter_tokens_total', { api: 'openai_embeddings', type: 'input' }), emb.input_tokens + 5);
});

test('prices: an embeddings request costs its input at prices.<model>.input', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-pooling-');
  const proxy = await startProxy({ upstream: sim.port,
    config: config(spool, 'prices:\n  priced-emb: {input: 0.02, output: 0, currency: USD}\n') });
  const input = Array.from({ length: 50 }, (_, i) => `document number ${i} of the corpus`);
  const res = await request({ port: proxy.port, path: '/v1/embeddings', body: { model: 'priced-emb', input },
    headers: { 'x-request-id': 'priced' } });
  assert.equal(res.status, 200);
  const record = await waitRecord(spool, 'priced');
  const tokens = input.reduce((n, t) => n + words(t), 0);
  assert.equal(record.input_tokens, tokens);
  assert.equal(record.currency, 'USD');
  // 0.02 USD per million tokens is 20,000 pico-USD per token: an exact decimal.
  const cost = Number(`${tokens * 20_000}e-12`);
  assert.equal(record.cost, cost);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_cost_total', { currency: 'USD' }) > 0);
  assert.ok(Math.abs(m.value('tokenmeter_cost_total', { currency: 'USD', model: 'priced-emb' }) - cost) < 1e-12);
});

test('tenant limits: input-only requests reserve their input (no output), then bill what the server reported', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-pooling-');
  const limits = [
    'tenants:', '  source: header', '  enforce_provisioned: true', '  provisioned_burst: 1s', '  limits:',
    '    emb-tenant: { provisioned_tokens_per_second: 10 }', '',
  ].join('\n');
  const proxy = await startProxy({ upstream: sim.port, config: config(spool, limits) });
  const send = (id, input, ttft = '300') => request({
    port: proxy.port, path: '/v1/embeddings', body: { model: 'lim-emb', input },
    headers: { 'x-request-id': id, 'x-tenant-id': 'emb-tenant', 'x-sim-ttft-ms': ttft },
  });
  // Two concurrent requests of 2 tokens each fit the bucket of 10: with an output reservation
  // (tenants.default_output_reservation, 512) the second would meet the first's debt.
  const [a, b] = await Promise.all([send('lim-1', 'two words'), send('lim-2', 'two more')]);
  assert.deepEqual([a.status, b.status], [200, 200]);
  // One that reports 30 tokens puts the bucket in debt: the next one is refused.
  const big = await send('lim-3', Array.from({ length: 30 }, (_, i) => `w${i}`).join(' '), '0');
  assert.equal(big.status, 200);
  const refused = await send('lim-4', 'x', '0');
  assert.equal(refused.status, 429);
  assert.equal(JSON.parse(refused.body.toString()).error.code, 'provisioned_throughput_exceeded');
  const record = await waitRecord(spool, 'lim-4');
  assert.equal(record.api, 'openai_embeddings');
  assert.equal(record.served, false);
  assert.equal(record.input_source, 'unbilled');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tenant_requests_total', { tenant: 'emb-tenant' }) >= 4);
  assert.equal(m.value('tokenmeter_tenant_tokens_total', { tenant: 'emb-tenant', model: 'lim-emb', type: 'input' }), 2 + 2 + 30);
  assert.equal(m.value('tokenmeter_tenant_rate_limited_total', { tenant: 'emb-tenant' }), 1);
});

test('hostile bodies: not JSON is refused as on every metered API; odd shapes pass to the server', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-pooling-');
  const proxy = await startProxy({ upstream: sim.port, config: config(spool) });
  const broken = await request({ port: proxy.port, path: '/v1/embeddings', body: '{"model":"e","input":["x"', headers: { 'x-request-id': 'h-1' } });
  assert.equal(broken.status, 400);
  assert.equal(JSON.parse(broken.body.toString()).error.code, 'unparsable_body');
  const noModel = await request({ port: proxy.port, path: '/v1/embeddings', body: { input: 'x' } });
  assert.equal(noModel.status, 400);
  assert.equal(JSON.parse(noModel.body.toString()).error.code, 'model_required');
  // Wrong types reach the server, which answers 400; nothing is billed by a guess.
  const odd = await request({ port: proxy.port, path: '/v1/embeddings',
    body: { model: 'e', input: [true, null, { a: 1 }] }, headers: { 'x-request-id': 'h-2' } });
  assert.equal(odd.status, 400);
  const oddRecord = await waitRecord(spool, 'h-2');
  assert.equal(oddRecord.outcome, 'upstream_error');
  assert.equal(oddRecord.input_tokens, 0);
  assert.equal(oddRecord.input_source, 'unbilled');
  // A large token-id batch: counted from the report, the request forwarded whole.
  const batch = Array.from({ length: 200 }, (_, i) => Array.from({ length: 500 }, (__, j) => (i * 500 + j) % 50000));
  const big = await request({ port: proxy.port, path: '/v1/embeddings', body: { model: 'e', input: batch },
    headers: { 'x-request-id': 'h-3' } });
  assert.equal(big.status, 200);
  assert.equal(JSON.parse(big.body.toString()).data.length, 200);
  const bigRecord = await waitRecord(spool, 'h-3');
  assert.equal(bigRecord.input_tokens, 200 * 500);
  assert.equal(bigRecord.input_source, 'reported');
  // The refused body was never forwarded: nothing of it is billed.
  assert.equal(readRecords(spool).filter((r) => r.request_id === 'h-1' && r.served).length, 0);
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { api: 'openai_embeddings' }) >= 4);
  assert.equal(m.value('tokenmeter_requests_total', { api: 'openai_embeddings', code: '400' }), 3);
});
