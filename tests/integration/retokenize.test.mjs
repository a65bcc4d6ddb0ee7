// Re-tokenization through the real proxy: the output text is counted again with the reference
// tokenizer (normalized) and the model's own tokenizer (native), and every count the proxy
// exports is checked against `tokenmeter tokenize` run on the exact text the client received.
// Needs the tokenizer files (scripts/fetch-tokenizers.sh; scripts/test.sh runs it).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  binaries, chatBody, describeResult, expectedText, request, sseText, startProxy, startSim, stopAll,
  waitMetrics, writeTempFile,
} from './lib/harness.mjs';

after(stopAll);

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR || path.join(repo, '.cache/tokenizers');
const llama3 = path.join(tokenizerDir, 'llama3/tokenizer.json');

before(() => {
  for (const file of [path.join(tokenizerDir, 'o200k_base.json'), llama3]) {
    assert.ok(existsSync(file), `${file} is missing: run scripts/fetch-tokenizers.sh ` +
      '(scripts/test.sh does) or set TOKENMETER_TOKENIZER_DIR');
  }
});

// The count `tokenmeter tokenize` gives for text: what a user would run to check the proxy.
function countTokens(spec, text) {
  const { bin } = binaries();
  const out = execFileSync(bin, ['tokenize', '--tokenizer', spec, '--tokenizer-dir', tokenizerDir],
    { input: text, encoding: 'utf8' });
  const count = Number(out.trim().split('\n').pop());
  assert.ok(Number.isInteger(count), `tokenmeter tokenize printed ${JSON.stringify(out)}`);
  return count;
}

async function streamChat(proxy, headers, content = 'hello there world') {
  const res = await request({
    port: proxy.port, method: 'POST', path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(chatBody('sim-model', { content })), timeoutMs: 10_000,
  });
  assert.equal(res.status, 200, describeResult(res));
  return sseText(res.body.toString());
}

test('normalized counts: the reference tokenizer counts what the client received', { timeout: 60_000 }, async () => {
  const sim = await startSim(['--ttft-ms', '5', '--itl-ms', '2']);
  const proxy = await startProxy({
    upstream: sim.port,
    config: `tokenizer_dir: ${JSON.stringify(tokenizerDir)}\nreference_tokenizer: o200k_base\n`,
  });
  const text = await streamChat(proxy, {
    'x-sim-output-tokens': '40', 'x-sim-tokens-per-chunk': '3', 'x-sim-usage': 'never',
    'x-sim-pad-bytes': '5',
  });
  assert.equal(text, expectedText(40, { padBytes: 5 }));
  const expected = countTokens('o200k_base', text);
  assert.ok(expected > 40, `padding makes more tokens than the simulator's 40 (${expected})`);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'sim-model' }) >= 1);
  const labels = { model: 'sim-model', api: 'openai_chat' };
  assert.equal(m.value('tokenmeter_normalized_tokens_total', { ...labels, type: 'output' }), expected);
  // Billed from the best count there is: the reference tokenizer's.
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output', source: 'normalized' }), expected);
  assert.equal(m.has('tokenmeter_reported_tokens_total'), false, 'the simulator reported no usage');
  assert.equal(m.has('tokenmeter_native_tokens_total'), false, 'no native tokenizer configured');
  assert.equal(m.value('tokenmeter_output_chars_total', labels), Buffer.byteLength(text));
  // Without a native tokenizer or a usage report, ITL counts normalized tokens: one observation
  // per token after the first.
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', labels).count, expected - 1);
  assert.equal(m.histogram('tokenmeter_normalized_output_tokens_per_second', labels).count, 1);
  assert.equal(m.histogram('tokenmeter_output_tokens_per_second', labels).count, 1);
  // The prompt is tokenized when the server does not report input tokens.
  assert.equal(m.value('tokenmeter_normalized_tokens_total', { ...labels, type: 'input' }),
    countTokens('o200k_base', 'hello there world'));
});

test('native counts, and a usage report that disagrees with the native count is exported', { timeout: 60_000 }, async () => {
  const sim = await startSim(['--ttft-ms', '5', '--itl-ms', '1']);
  const config = [
    `tokenizer_dir: ${JSON.stringify(tokenizerDir)}`,
    'models:',
    '  sim-model:',
    `    tokenizer: ${JSON.stringify(llama3)}`,
  ].join('\n');
  const proxy = await startProxy({ upstream: sim.port, config });
  // Honest report: 30 words, each one Llama 3 token; padding makes the text longer than the
  // simulator's own count, like a server that under-reports.
  const honest = await streamChat(proxy, { 'x-sim-output-tokens': '30', 'x-sim-usage': 'always' });
  const padded = await streamChat(proxy, {
    'x-sim-output-tokens': '30', 'x-sim-usage': 'always', 'x-sim-pad-bytes': '9',
  }, 'a longer prompt, with punctuation; and numbers 12345');
  const nativeHonest = countTokens(llama3, honest);
  const nativePadded = countTokens(llama3, padded);
  assert.equal(nativeHonest, 30, 'each simulator word is one Llama 3 token');
  assert.ok(nativePadded > 40, `padded text is many more tokens (${nativePadded})`);

  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'sim-model' }) >= 2);
  const labels = { model: 'sim-model', api: 'openai_chat' };
  assert.equal(m.value('tokenmeter_native_tokens_total', { ...labels, type: 'output' }), nativeHonest + nativePadded);
  assert.equal(m.value('tokenmeter_reported_tokens_total', { ...labels, type: 'output' }), 60);
  // Billed once, from the server's report, as the usage records do.
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), 60);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output', source: 'reported' }), 60);
  assert.equal(m.value('tokenmeter_normalized_tokens_total', { ...labels, type: 'output' }),
    countTokens('o200k_base', honest) + countTokens('o200k_base', padded));
  // Reported input is used as it is: the prompt is not tokenized when the server counts it.
  assert.equal(m.has('tokenmeter_native_tokens_total', { type: 'input' }), false);
  assert.equal(m.value('tokenmeter_token_count_mismatch_total', { model: 'sim-model', type: 'output' }), 1,
    'only the padded response disagrees with its report');
  // TPOT divides by native tokens: one observation per request.
  assert.equal(m.histogram('tokenmeter_time_per_output_token_seconds', labels).count, 2);
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', labels).count,
    nativeHonest - 1 + nativePadded - 1);
});

test('reasoning text is counted as output and on its own', { timeout: 30_000 }, async () => {
  const sim = await startSim(['--ttft-ms', '5', '--itl-ms', '1']);
  const proxy = await startProxy({
    upstream: sim.port,
    config: `tokenizer_dir: ${JSON.stringify(tokenizerDir)}\nusage_injection: false\n`,
  });
  await streamChat(proxy, {
    'x-sim-output-tokens': '20', 'x-sim-reasoning-tokens': '8', 'x-sim-usage': 'never',
  });
  // The simulator's words are one o200k token each: 20 output tokens, 8 of them reasoning.
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', { model: 'sim-model' }) >= 1);
  const labels = { model: 'sim-model', api: 'openai_chat' };
  assert.equal(m.value('tokenmeter_normalized_tokens_total', { ...labels, type: 'output' }), 20);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), 20);
  assert.equal(m.value('tokenmeter_reasoning_tokens_total', { ...labels, source: 'normalized' }), 8);
  assert.equal(m.has('tokenmeter_reasoning_tokens_total', { source: 'native' }), false);
});

test('a missing or broken tokenizer file stops --check-config and start-up, naming the file', { timeout: 20_000 }, () => {
  const { bin } = binaries();
  const missing = path.join(tokenizerDir, 'no-such-model/tokenizer.json');
  const config = writeTempFile('bad-tokenizer.yaml', [
    `tokenizer_dir: ${JSON.stringify(tokenizerDir)}`,
    'models:',
    '  my-model:',
    `    tokenizer: ${JSON.stringify(missing)}`,
  ].join('\n'));
  const check = spawnSync(bin, ['--check-config', config], { encoding: 'utf8' });
  assert.equal(check.status, 1, check.stderr);
  assert.match(check.stderr, /models\.my-model\.tokenizer/);
  assert.match(check.stderr, /no-such-model\/tokenizer\.json/);

  const notJson = writeTempFile('not-a-tokenizer.json', 'this is not json');
  const config2 = writeTempFile('bad-reference.yaml', `reference_tokenizer: ${JSON.stringify(notJson)}\n`);
  const start = spawnSync(bin, ['--config', config2, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'],
    { encoding: 'utf8', timeout: 10_000 });
  assert.equal(start.status, 1, `start-up must fail: ${start.stderr}`);
  assert.match(start.stderr, /reference_tokenizer/);
  assert.match(start.stderr, /not-a-tokenizer\.json/);
});
