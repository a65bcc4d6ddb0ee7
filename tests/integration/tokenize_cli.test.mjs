// tokenmeter tokenize: the count (and ids) of stdin with a named encoding or a tokenizer.json;
// every error exits 2 with a message naming what is wrong.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { binaries, stopAll, writeTempFile } from './lib/harness.mjs';

after(stopAll);

const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR ||
  fileURLToPath(new URL('../../.cache/tokenizers', import.meta.url));

// Without input, stdin is closed: a command that fails before reading it must not race a write
// (EPIPE).
function tokenize(args, input) {
  const { bin } = binaries();
  const options = input === undefined ? { stdio: ['ignore', 'pipe', 'pipe'] } : { input };
  const run = spawnSync(bin, ['tokenize', ...args], { ...options, encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.error, undefined, `could not run ${bin}: ${run.error}`);
  return run;
}

function requireTokenizers() {
  assert.ok(existsSync(`${tokenizerDir}/o200k_base.json`),
    `tokenizer files missing in ${tokenizerDir}: run scripts/fetch-tokenizers.sh`);
}

test('o200k_base by name: ids line, then the count', { timeout: 30_000 }, () => {
  requireTokenizers();
  const run = tokenize(['--tokenizer', 'o200k_base', '--ids', '--tokenizer-dir', tokenizerDir],
    'Hello, world!');
  assert.equal(run.status, 0, run.stderr);
  assert.equal(run.stdout, '13225 11 2375 0\n4\n');
});

test('a tokenizer.json by path, directory from the environment', { timeout: 60_000 }, () => {
  requireTokenizers();
  const { bin } = binaries();
  const run = spawnSync(bin, ['tokenize', '--tokenizer', `${tokenizerDir}/llama3/tokenizer.json`],
    { input: 'Hello, world! <|begin_of_text|>', encoding: 'utf8', timeout: 60_000,
      env: { ...process.env, TOKENMETER_TOKENIZER_DIR: '/nonexistent' } });
  assert.equal(run.status, 0, run.stderr);
  // Added tokens are matched by default, as Hugging Face tokenizers does: 4 tokens for the
  // greeting, " ", then the control token 128000.
  assert.equal(run.stdout, '6\n');
  // --special-tokens text: " <|", "begin", "_of", "_text", "|", ">" instead.
  const asText = spawnSync(bin, ['tokenize', '--tokenizer', `${tokenizerDir}/llama3/tokenizer.json`,
    '--special-tokens', 'text'],
    { input: 'Hello, world! <|begin_of_text|>', encoding: 'utf8', timeout: 60_000,
      env: { ...process.env, TOKENMETER_TOKENIZER_DIR: '/nonexistent' } });
  assert.equal(asText.status, 0, asText.stderr);
  assert.equal(asText.stdout, '10\n');
});

test('errors exit 2 and say what is wrong', { timeout: 30_000 }, () => {
  let run = tokenize(['--tokenizer', 'no_such_encoding', '--tokenizer-dir', '/nonexistent']);
  assert.equal(run.status, 2);
  assert.match(run.stderr, /no such file/);
  assert.match(run.stderr, /\/nonexistent\/no_such_encoding\.json/);

  const bad = writeTempFile('tokenizer.json', '{"model": ');
  run = tokenize(['--tokenizer', bad]);
  assert.equal(run.status, 2);
  assert.match(run.stderr, /is not JSON/);
  assert.ok(run.stderr.includes(bad), run.stderr);

  run = tokenize(['--bogus']);
  assert.equal(run.status, 2);
  assert.match(run.stderr, /unknown argument '--bogus'/);

  run = tokenize([]);
  assert.equal(run.status, 2);
  assert.match(run.stderr, /--tokenizer is required/);
});
