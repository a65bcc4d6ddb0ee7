// Long prompts through the real proxy: the end of a request whose prompt is long to count runs
// on the finishing thread, not on the I/O thread, and bills exactly what counting in place
// bills: the record's input count equals `tokenmeter tokenize` on the prompt's text, with the
// end held until the close entry is on disk, or not held. A proxy stopped right after such a
// response still writes its record (the finishing thread runs what it holds before the spool
// stops). Needs the tokenizer files (scripts/fetch-tokenizers.sh; scripts/test.sh runs it).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import {
  binaries, chatBody, describeResult, makeTempDir, request, startProxy, startSim, stopAll,
} from './lib/harness.mjs';
import { readRecords, waitRecord } from './lib/usage.mjs';

after(stopAll);

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR || path.join(repo, '.cache/tokenizers');

function countTokens(spec, text) {
  const { bin } = binaries();
  const out = execFileSync(bin, ['tokenize', '--tokenizer', spec, '--tokenizer-dir', tokenizerDir],
    { input: text, encoding: 'utf8', maxBuffer: 64 << 20 });
  const count = Number(out.trim().split('\n').pop());
  assert.ok(Number.isInteger(count), `tokenmeter tokenize printed ${JSON.stringify(out)}`);
  return count;
}

// About `bytes` of ordinary prose (under the 1 MiB counting budget: counted exactly).
function prose(bytes) {
  const words = ['revenue', 'grew', 'in', 'every', 'region', 'while', 'costs', 'fell', 'by',
    'a', 'third,', 'and', 'the', 'board', 'approved', 'a', 'new', 'plan.'];
  const out = [];
  let size = 0;
  for (let i = 0; size < bytes; ++i) {
    const w = `${words[(i * 7) % words.length]}${i % 97 === 0 ? '\n' : ' '}`;
    out.push(w);
    size += w.length;
  }
  return out.join('');
}

function config(spool, extra = '') {
  return [
    `tokenizer_dir: ${JSON.stringify(tokenizerDir)}`,
    'reference_tokenizer: o200k_base',
    'count_input_tokens: always',
    'usage:',
    `  spool_dir: ${spool}`,
    extra,
    '',
  ].join('\n');
}

async function send(proxy, id, content, stream) {
  const res = await request({
    port: proxy.port, method: 'POST', path: '/v1/chat/completions',
    headers: {
      'content-type': 'application/json', 'x-request-id': id,
      'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '3', 'x-sim-usage': 'never',
    },
    body: JSON.stringify(chatBody('sim-model', { stream, content })), timeoutMs: 30_000,
  });
  assert.equal(res.status, 200, describeResult(res));
  assert.ok(res.complete, describeResult(res));
  return res;
}

const content = prose(600 * 1024);
const expected = countTokens('o200k_base', content);

for (const [what, extra] of [['held until durable', ''], ['not held', '  hold_until_durable: false']]) {
  for (const stream of [true, false]) {
    test(`a 600 KiB prompt, ${stream ? 'streamed' : 'JSON'}, end ${what}: counted as in place`, { timeout: 60_000 }, async () => {
      const sim = await startSim();
      const spool = makeTempDir('tokenmeter-spool-');
      const proxy = await startProxy({ upstream: sim.port, config: config(spool, extra) });
      const id = `long-${stream}-${extra ? 'free' : 'held'}`;
      await send(proxy, id, content, stream);
      if (!extra) {
        // Held: the client saw the end only once the close entry was on disk.
        assert.ok(readRecords(spool).find((r) => r.request_id === id), 'the record was there at the end');
      }
      const record = await waitRecord(spool, id, 10_000);
      assert.equal(record.input_source, 'normalized');
      assert.equal(record.input_tokens, expected, 'the prompt counted as `tokenmeter tokenize` counts it');
      // A short request beside it ends in place and bills too.
      await send(proxy, `${id}-short`, 'hello there', stream);
      const short = await waitRecord(spool, `${id}-short`);
      assert.equal(short.input_tokens, countTokens('o200k_base', 'hello there'));
      const m = await proxy.metrics();
      assert.equal(m.value('tokenmeter_finishing_thread_ends_total', { result: 'queued' }), 1,
        'the long prompt\'s end, and only it, went to the finishing thread');
      assert.equal(m.value('tokenmeter_finishing_thread_ends_total', { result: 'queue_full' }), 0);
    });
  }
}

test('a proxy stopped right after long-prompt responses writes every record', { timeout: 60_000 }, async () => {
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const proxy = await startProxy({ upstream: sim.port, config: config(spool, '  hold_until_durable: false') });
  const ids = ['stop-1', 'stop-2', 'stop-3'];
  await Promise.all(ids.map((id) => send(proxy, id, content, false)));
  await proxy.stop('SIGTERM');
  assert.equal(proxy.child.exitCode, 0, proxy.child.stderrText);
  const records = readRecords(spool);
  for (const id of ids) {
    const record = records.find((r) => r.request_id === id);
    assert.ok(record, `the record of ${id} is in the spool`);
    assert.equal(record.input_tokens, expected);
  }
});
