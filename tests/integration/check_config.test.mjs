// tokenmeter --check-config: every error names its key; the annotated example is valid.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { binaries, stopAll, writeTempFile } from './lib/harness.mjs';

after(stopAll);

// The tokenizer files scripts/fetch-tokenizers.sh puts in the repository's cache.
const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR ||
  fileURLToPath(new URL('../../.cache/tokenizers', import.meta.url));

function checkConfig(file, tokenizers = tokenizerDir) {
  const { bin } = binaries();
  const env = { ...process.env, TOKENMETER_TOKENIZER_DIR: tokenizers };
  const run = spawnSync(bin, ['--check-config', file], { encoding: 'utf8', timeout: 10_000, env });
  assert.equal(run.error, undefined, `could not run ${bin}: ${run.error}`);
  return run;
}

test('an unknown key and a bad duration: exit 1, both keys named', { timeout: 20_000 }, () => {
  const file = writeTempFile('bad.yaml', [
    'listen: "127.0.0.1:0"',
    'timeouts:',
    '  upstream_idl: 5s',
    '  drain: forever',
    '',
  ].join('\n'));
  const run = checkConfig(file);
  const output = run.stdout + run.stderr;
  assert.equal(run.status, 1, `exit ${run.status}; output:\n${output}`);
  assert.match(output, /timeouts\.upstream_idl/, output);
  assert.match(output, /unknown key/, output);
  assert.match(output, /upstream_idle/, 'suggests the closest known key');
  assert.match(output, /timeouts\.drain/, output);
  assert.match(output, /forever/, 'shows the bad value');
});

test('a YAML syntax error: exit 1 with line and column', { timeout: 20_000 }, () => {
  const file = writeTempFile('syntax.yaml', 'timeouts:\n  drain: [1, 2\nlisten: x\n');
  const run = checkConfig(file);
  assert.equal(run.status, 1, run.stdout + run.stderr);
  assert.match(run.stderr, /line \d+/);
});

test('the annotated example config is valid: exit 0', { timeout: 20_000 }, () => {
  const example = fileURLToPath(new URL('../../config/tokenmeter.example.yaml', import.meta.url));
  const run = checkConfig(example);
  assert.equal(run.status, 0, `exit ${run.status}; output:\n${run.stdout}${run.stderr}`);
  assert.equal(run.stderr, '');
});

test('without tokenizer files the example is valid: the default reference is built in', { timeout: 20_000 }, () => {
  const example = fileURLToPath(new URL('../../config/tokenmeter.example.yaml', import.meta.url));
  const run = checkConfig(example, '/nonexistent/tokenizers');
  assert.equal(run.status, 0, `exit ${run.status}; output:\n${run.stdout}${run.stderr}`);
  assert.equal(run.stderr, '');
});

test('the minimal config is valid: exit 0', { timeout: 20_000 }, () => {
  const minimal = fileURLToPath(new URL('../../config/tokenmeter.yaml', import.meta.url));
  const run = checkConfig(minimal);
  assert.equal(run.status, 0, `exit ${run.status}; output:\n${run.stdout}${run.stderr}`);
});

test('a missing file: exit 1', { timeout: 20_000 }, () => {
  const run = checkConfig('/nonexistent/tokenmeter-it/none.yaml');
  assert.equal(run.status, 1, run.stdout + run.stderr);
  assert.ok(run.stderr.length > 0);
});
