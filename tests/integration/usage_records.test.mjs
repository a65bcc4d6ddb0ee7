// Usage records through the real proxy: a client that disconnects mid-stream is billed the
// tokens streamed so far (client_cancel); an explicit usage of 0 is recorded as 0, not guessed;
// tenants come from a trusted header or from a keyed hash of the API key (which a client-sent
// tenant header cannot override, and which never reaches disk); provisioned throughput answers
// 429 with Retry-After once a tenant's bucket is in debt, without cutting admitted streams;
// per-tenant metrics are bounded; `tokenmeter usage` totals what is in the spool.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import {
  chatBody, completionBody, makeTempDir, request, startProxy, startSim, stopAll,
  waitFor, waitForLog, waitMetrics,
} from './lib/harness.mjs';
import { readRecords, runUsage, waitRecord } from './lib/usage.mjs';

after(stopAll);

function usageConfig(spool, extra = '') {
  return `usage:\n  spool_dir: ${spool}\n  checkpoint_interval: 100ms\n${extra}`;
}

// Records, tenants from x-tenant-id, and `tenant` held to 10 tokens/s with a 1 s bucket.
function limitedConfig(spool, tenant) {
  return usageConfig(spool) + [
    'tenants:',
    '  source: header',
    '  enforce_provisioned: true',
    '  provisioned_burst: 1s',
    '  limits:',
    `    ${tenant}: { provisioned_tokens_per_second: 10 }`,
    '',
  ].join('\n');
}

test('client disconnects mid-stream: client_cancel record with the tokens streamed so far', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const proxy = await startProxy({ upstream: sim.port, config: usageConfig(spool) });
  let contentChunks = 0;
  await new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port: proxy.port, method: 'POST', path: '/v1/chat/completions', agent: false,
      headers: {
        'content-type': 'application/json', 'x-request-id': 'cancel-1',
        'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '20', 'x-sim-output-tokens': '1000',
      },
    });
    req.on('error', () => { /* our own destroy */ });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (chunk) => {
        text += chunk.toString();
        contentChunks = (text.match(/"content":"[^"]/g) || []).length;
        if (contentChunks >= 10) {
          req.destroy();
          resolve();
        }
      });
      res.on('error', () => {});
      res.on('end', () => reject(new Error('the stream ended before the disconnect')));
    });
    req.end(JSON.stringify(chatBody('cancel-model', { includeUsage: true })));
  });
  const record = await waitRecord(spool, 'cancel-1');
  assert.equal(record.outcome, 'client_cancel');
  assert.equal(record.status, 200);
  assert.equal(record.model, 'cancel-model');
  assert.equal(record.tenant, 'anonymous');
  // No usage report arrives before the end: the count is the tokens the proxy relayed, at least
  // what this client read, and far from the 1000 it would have been.
  // (Re-tokenized counts replace "counted" when a tokenizer is installed; the words are 1 token.)
  assert.ok(['counted', 'native', 'normalized'].includes(record.output_source), record.output_source);
  assert.ok(record.output_tokens >= contentChunks && record.output_tokens <= contentChunks + 5,
    `output_tokens ${record.output_tokens}, client read ${contentChunks}`);
  assert.equal(record.v, 1);
  assert.match(record.id, /^[0-9a-f]{32}$/);
  assert.ok(record.ttft_s >= 0 && record.duration_s >= record.ttft_s, JSON.stringify(record));
});

test('a stream whose server reports usage 0 records 0 tokens (reported), not a guess', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const proxy = await startProxy({ upstream: sim.port, config: usageConfig(spool) });
  const res = await request({
    port: proxy.port,
    body: completionBody('zero-model', { includeUsage: true, prompt: 'a b c d' }),
    path: '/v1/completions',
    headers: { 'x-request-id': 'zero-1', 'x-sim-output-tokens': '0' },
  });
  assert.equal(res.status, 200);
  assert.ok(res.complete);
  assert.match(res.body.toString(), /"completion_tokens":0/);
  const record = await waitRecord(spool, 'zero-1');
  assert.equal(record.outcome, 'complete');
  assert.equal(record.output_tokens, 0);
  assert.equal(record.output_source, 'reported');
  assert.equal(record.input_tokens, 4);
  assert.equal(record.input_source, 'reported');
  assert.equal(record.api, 'openai_completions');
  assert.equal(record.route, '/v1/completions');
  // Without a usage report at all, the count says where it came from and input stays unknown.
  const res2 = await request({
    port: proxy.port, body: chatBody('zero-model'),
    headers: { 'x-request-id': 'nousage-1', 'x-sim-output-tokens': '7', 'x-sim-usage': 'never' },
  });
  assert.equal(res2.status, 200);
  const record2 = await waitRecord(spool, 'nousage-1');
  assert.equal(record2.output_tokens, 7);
  assert.ok(['counted', 'native', 'normalized'].includes(record2.output_source), record2.output_source);
  if (record2.input_source === 'none') {
    assert.equal(record2.input_tokens, null);  // unknown stays unknown, never 0
  } else {
    assert.ok(['native', 'normalized'].includes(record2.input_source), record2.input_source);
    assert.ok(record2.input_tokens > 0);
  }
});

test('tenants from the API key: keyed hash, mapping, client tenant header ignored, key never stored', { timeout: 30_000 }, async () => {
  const secret = 'test-secret-for-hmac';
  process.env.TOKENMETER_TEST_TENANT_SECRET = secret;
  const keyTenant = (key) => `key:${createHmac('sha256', secret).update(key).digest('hex').slice(0, 32)}`;
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const config = usageConfig(spool) + [
    'tenants:',
    '  source: api_key',
    '  api_key_secret_env: TOKENMETER_TEST_TENANT_SECRET',
    '  api_key_names:',
    `    "${keyTenant('sk-beta-0123')}": team-beta`,
    '',
  ].join('\n');
  const proxy = await startProxy({ upstream: sim.port, config, args: ['--access-log'] });
  const send = (requestId, headers) => request({
    port: proxy.port, body: chatBody('tenant-model'),
    headers: { 'x-request-id': requestId, 'x-sim-output-tokens': '3', ...headers },
  });
  await send('t-alpha', { authorization: 'Bearer sk-alpha-4567', 'x-tenant-id': 'team-beta' });
  await send('t-beta', { 'x-api-key': 'sk-beta-0123' });
  await send('t-none', { 'x-tenant-id': 'team-beta' });
  assert.equal((await waitRecord(spool, 't-alpha')).tenant, keyTenant('sk-alpha-4567'));
  assert.equal((await waitRecord(spool, 't-beta')).tenant, 'team-beta');
  assert.equal((await waitRecord(spool, 't-none')).tenant, 'anonymous');
  for (const file of readdirSync(spool)) {
    const text = readFileSync(path.join(spool, file), 'utf8');
    assert.ok(!text.includes('sk-alpha') && !text.includes('sk-beta'), `an API key in ${file}`);
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tenant_requests_total', { tenant: 'team-beta' }) >= 1);
  assert.equal(m.value('tokenmeter_tenant_requests_total', { tenant: 'team-beta', model: 'tenant-model', outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tenant_tokens_total', { tenant: 'team-beta', model: 'tenant-model', type: 'output' }), 3);
  await proxy.stop('SIGTERM');
  assert.ok(!proxy.child.stderrText.includes('sk-alpha') && !proxy.child.stderrText.includes(secret),
    'the key or the secret was logged');
});

test('provisioned throughput: 429 + Retry-After + JSON once the bucket is in debt; admitted streams finish', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const config = limitedConfig(spool, 'slow');
  const proxy = await startProxy({ upstream: sim.port, config });
  const send = (requestId, tenant, tokens = 40) => request({
    port: proxy.port, body: chatBody('pt-model', { includeUsage: true, content: 'one two three' }),
    headers: { 'x-request-id': requestId, 'x-tenant-id': tenant, 'x-sim-output-tokens': String(tokens),
      'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '1' },
  });
  // Two streams start together while the bucket is full. The first admitted reserves its prompt
  // and output limit at once (4 + tenants.default_output_reservation 512 tokens), so the other,
  // concurrent one meets the debt: 429. A burst overruns the bucket by one reservation at most.
  const [a, b] = await Promise.all([send('pt-1', 'slow'), send('pt-2', 'slow')]);
  assert.deepEqual([a.status, b.status].sort(), [200, 429]);
  const admitted = a.status === 200 ? a : b;
  assert.ok(admitted.complete, 'the admitted stream runs to its end');
  // It settled to what it used (3 + 40 tokens): the bucket is about 10 - 43 = -33 tokens, about
  // 3.3 s at 10 tokens/s.
  const refused = await send('pt-3', 'slow');
  assert.equal(refused.status, 429);
  const retryAfter = Number(refused.headers['retry-after']);
  assert.ok(retryAfter >= 3 && retryAfter <= 5, `Retry-After ${refused.headers['retry-after']}`);
  const error = JSON.parse(refused.body.toString()).error;
  assert.equal(error.code, 'provisioned_throughput_exceeded');
  // Another tenant is not limited.
  assert.equal((await send('pt-4', 'fast')).status, 200);
  const record = await waitRecord(spool, 'pt-3');
  assert.equal(record.outcome, 'rejected');
  assert.equal(record.status, 429);
  // Never forwarded: nothing billed, with the reason.
  assert.equal(record.served, false);
  assert.equal(record.reason, 'provisioned_throughput_exceeded');
  assert.equal(record.input_tokens, 0);
  assert.equal(record.input_source, 'unbilled');
  assert.equal(record.output_tokens, 0);
  assert.equal(record.output_source, 'unbilled');
  assert.equal(record.tenant, 'slow');
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tenant_rate_limited_total', { tenant: 'slow' }) >= 2);
  assert.equal(m.value('tokenmeter_tenant_provisioned_tokens_per_second', { tenant: 'slow' }), 10);
  assert.equal(m.value('tokenmeter_tenant_rate_limited_total', { tenant: 'slow' }), 2);
  // Only the admitted stream billed: the refused ones bill nothing.
  assert.equal(m.value('tokenmeter_tenant_tokens_total', { tenant: 'slow', model: 'pt-model', type: 'output' }), 40);
  assert.equal(m.value('tokenmeter_tenant_tokens_total', { tenant: 'slow', model: 'pt-model', type: 'input' }), 3);
});

// A burst of 50 concurrent requests under a 10 tokens/s limit: the first admitted reserves its
// prompt and its max_tokens, and every other one meets that reservation: one admitted, 49 refused
// with 429, nothing billed for them; the bucket was overrun by one request's reservation.
test('a burst of concurrent requests is held to the limit by reservations at admission', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const config = limitedConfig(spool, 'burst');
  const proxy = await startProxy({ upstream: sim.port, config });
  const body = JSON.stringify({
    model: 'burst-model', stream: true, max_tokens: 100, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'one two three' }],
  });
  const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => request({
    port: proxy.port, body,
    headers: { 'x-request-id': `burst-${i}`, 'x-tenant-id': 'burst', 'x-sim-output-tokens': '20',
      'x-sim-ttft-ms': '200', 'x-sim-itl-ms': '5' },
  })));
  const statuses = responses.map((r) => r.status);
  assert.equal(statuses.filter((s) => s === 200).length, 1, statuses.join(','));
  assert.equal(statuses.filter((s) => s === 429).length, 49, statuses.join(','));
  // Retry-After: until the one reservation (4 + 100 tokens) less the bucket (10) refills.
  const retry = Number(responses.find((r) => r.status === 429).headers['retry-after']);
  assert.ok(retry >= 9 && retry <= 11, `Retry-After ${retry}`);
  // Each request's counters are added when it ends, which can be after its client saw the last
  // byte (a slow, sanitized build takes a while for 50): wait for all of them.
  const m = await waitMetrics(proxy,
    (x) => x.value('tokenmeter_tenant_requests_total', { tenant: 'burst' }) >= 50 &&
      x.value('tokenmeter_tenant_tokens_total', { tenant: 'burst', type: 'output' }) >= 20, 10_000);
  assert.equal(m.value('tokenmeter_tenant_requests_total', { tenant: 'burst' }), 50);
  assert.equal(m.value('tokenmeter_tenant_rate_limited_total', { tenant: 'burst' }), 49);
  assert.equal(m.value('tokenmeter_tenant_tokens_total', { tenant: 'burst', type: 'output' }), 20);
  const refusedRecords = () => readRecords(spool).filter((r) => r.tenant === 'burst' && r.status === 429);
  await waitFor(() => refusedRecords().length >= 49, { timeoutMs: 5000, what: '49 refused records' });
  const refused = refusedRecords();
  assert.equal(refused.length, 49);
  assert.ok(refused.every((r) => r.served === false && r.input_tokens === 0 && r.output_tokens === 0));
});

test('per-tenant metrics are bounded: first N tenants, then "other"', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const proxy = await startProxy({
    upstream: sim.port,
    config: 'tenants:\n  source: header\n  max_tenants: 2\n',
  });
  for (const tenant of ['t1', 't2', 't3', 't4']) {
    const res = await request({ port: proxy.port, body: chatBody('bound-model'),
      headers: { 'x-tenant-id': tenant, 'x-sim-output-tokens': '2' } });
    assert.equal(res.status, 200);
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_tenant_requests_total', { tenant: 'other' }) >= 2);
  const tenants = new Set(m.select('tokenmeter_tenant_requests_total').map((s) => s.labels.tenant));
  assert.deepEqual([...tenants].sort(), ['other', 't1', 't2']);
  assert.equal(m.value('tokenmeter_tenant_requests_total', { tenant: 'other' }), 2);
});

test('tokenmeter usage: totals per tenant and model, time range, tenant filter, JSON and table', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const proxy = await startProxy({ upstream: sim.port,
    config: usageConfig(spool, 'tenants:\n  source: header\n') });
  const plan = [['acme', 'm-a', 10], ['acme', 'm-a', 20], ['acme', 'm-b', 5], ['globex', 'm-a', 7]];
  for (const [tenant, model, tokens] of plan) {
    const res = await request({ port: proxy.port,
      body: chatBody(model, { includeUsage: true, content: 'w1 w2' }),
      headers: { 'x-tenant-id': tenant, 'x-sim-output-tokens': String(tokens), 'x-sim-itl-ms': '1' } });
    assert.equal(res.status, 200);
  }
  await proxy.stop('SIGTERM');
  assert.equal(readRecords(spool).length, 4);

  const all = await runUsage(['--spool', spool, '--json']);
  assert.equal(all.code, 0, all.stderr);
  const report = JSON.parse(all.stdout);
  assert.equal(report.records, 4);
  const row = (tenant, model) => report.rows.find((r) => r.tenant === tenant && r.model === model);
  assert.equal(row('acme', 'm-a').requests, 2);
  assert.equal(row('acme', 'm-a').output_tokens, 30);
  assert.equal(row('acme', 'm-a').input_tokens, 4);
  assert.equal(row('acme', 'm-b').output_tokens, 5);
  assert.equal(row('globex', 'm-a').output_tokens, 7);
  const acme = report.tenants.find((t) => t.tenant === 'acme');
  assert.equal(acme.output_tokens, 35);
  assert.equal(acme.outcomes.complete, 3);
  // All of acme's tokens fell within a second or two, so the peak is a large share of them.
  assert.ok(acme.peak_tokens_per_second > 0 && acme.peak_tokens_per_second <= 41, JSON.stringify(acme));

  const only = JSON.parse((await runUsage(['--spool', spool, '--json', '--tenant', 'globex'])).stdout);
  assert.deepEqual(only.rows.map((r) => r.tenant), ['globex']);
  const future = JSON.parse((await runUsage(['--spool', spool, '--json', '--from', '2999-01-01'])).stdout);
  assert.equal(future.records, 0);
  const past = JSON.parse((await runUsage(['--spool', spool, '--json', '--to', '2000-01-01T00:00'])).stdout);
  assert.equal(past.records, 0);

  const table = await runUsage(['--spool', spool]);
  assert.equal(table.code, 0);
  assert.match(table.stdout, /^TENANT\s+MODEL\s+REQUESTS/m);
  assert.match(table.stdout, /^acme\s+m-a\s+2\s+0\s+4\s+30\s/m);
  assert.match(table.stdout, /4 record\(s\)/);

  const bad = await runUsage(['--spool', spool, '--from', 'yesterday']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--from: expected a UTC time/);
});

test('a spool line that is not an entry is quarantined: the proxy starts, counts and names it; usage skips it', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const segment = 'usage-00000000000000000007.jsonl';
  const start = '2026-11-21T10:00:00.000Z';
  writeFileSync(path.join(spool, segment), [
    JSON.stringify({ v: 1, type: 'open', id: 'a'.repeat(32), tenant: 't', model: 'm', api: 'openai_chat', route: '/v1/chat/completions', request_id: null, start, streamed: true }),
    JSON.stringify({ v: 1, type: 'open', id: 'b'.repeat(32), start: 1234, streamed: 'yes' }),
    '{"v":1,"type":"close",',
    '',
  ].join('\n'));
  const proxy = await startProxy({ upstream: sim.port, config: usageConfig(spool) });
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_quarantined_lines_total') === 2);
  assert.equal(m.value('tokenmeter_usage_spool_quarantined_lines_total'), 2);
  await waitForLog(proxy.child, new RegExp(`${segment} line 2 \\(offset \\d+\\) is not a usage entry`));
  await waitForLog(proxy.child, new RegExp(`${segment} line 3 `));
  const res = await request({ port: proxy.port, body: chatBody('m', { includeUsage: true }),
    headers: { 'x-sim-output-tokens': '3' } });
  assert.equal(res.status, 200);
  await proxy.stop('SIGTERM');
  const quarantined = readFileSync(path.join(spool, 'quarantine.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(quarantined.map((q) => [q.file, q.line]), [[segment, 2], [segment, 3]]);
  assert.equal(quarantined[1].text, '{"v":1,"type":"close",');
  // The good open was recovered; the next segment comes after the one present.
  assert.ok(readdirSync(spool).includes('usage-00000000000000000008.jsonl'), readdirSync(spool).join(' '));
  assert.ok(readRecords(spool).some((r) => r.id === 'a'.repeat(32) && r.outcome === 'crash_recovered'));

  const lenient = await runUsage(['--spool', spool, '--json']);
  assert.equal(lenient.code, 0, lenient.stderr);
  assert.equal(JSON.parse(lenient.stdout).malformed_lines, 2);
  assert.match(lenient.stderr, /warning: 2 line\(s\) that are not usage entries skipped/);
  const strict = await runUsage(['--spool', spool, '--strict']);
  assert.equal(strict.code, 1);
  assert.equal(strict.stdout, '');
  assert.match(strict.stderr, new RegExp(`${segment} line 2`));
});

test('a prompt past limits.max_prompt_count_bytes is counted up to it and estimated: input_source "estimated"', { timeout: 30_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const proxy = await startProxy({ upstream: sim.port,
    config: usageConfig(spool, 'reference_tokenizer: o200k_base\nlimits:\n  max_prompt_count_bytes: 64KiB\n') });
  const ask = async (id, content) => {
    const res = await request({ port: proxy.port, body: chatBody('m', { stream: false, content }),
      headers: { 'x-request-id': id, 'x-sim-usage': 'never', 'x-sim-output-tokens': '2' } });
    assert.equal(res.status, 200);
    return waitRecord(spool, id);
  };
  // One pre-token of 3 MiB, and ordinary words past the budget: both estimates.
  const spaces = await ask('spaces', ' '.repeat(3 << 20));
  assert.equal(spaces.input_source, 'estimated');
  assert.ok(spaces.input_tokens > 0, JSON.stringify(spaces));
  const words = await ask('words', 'hello world '.repeat(20_000));
  assert.equal(words.input_source, 'estimated');
  assert.ok(Math.abs(words.input_tokens - 40_000) <= 40, JSON.stringify(words));
  const small = await ask('small', 'hello world');
  assert.equal(small.input_source, 'normalized');
  assert.equal(small.input_tokens, 2);
});
