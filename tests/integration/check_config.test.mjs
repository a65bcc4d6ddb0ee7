// tokenmeter --check-config: every error names its key; the annotated example is valid; the
// files and secrets the config names are loaded; the proxy's flags apply. --print-config.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { makeCa, makeLeaf } from './lib/certs.mjs';
import { binaries, stopAll, writeTempFile } from './lib/harness.mjs';

after(stopAll);

// The tokenizer files scripts/fetch-tokenizers.sh puts in the repository's cache.
const tokenizerDir = process.env.TOKENMETER_TOKENIZER_DIR ||
  fileURLToPath(new URL('../../.cache/tokenizers', import.meta.url));

function checkConfig(file, tokenizers = tokenizerDir) {
  return check(['--check-config', file], { TOKENMETER_TOKENIZER_DIR: tokenizers });
}

// tokenmeter ARGS with the repository's tokenizer files and `env` on top of this environment.
function check(args, env = {}) {
  const { bin } = binaries();
  const run = spawnSync(bin, args, {
    encoding: 'utf8', timeout: 10_000, env: { ...process.env, TOKENMETER_TOKENIZER_DIR: tokenizerDir, ...env },
  });
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

// --check-config loads what the config names, as start-up would: every missing or broken file
// and every unset variable in one run, each by its key.

test('every missing file and unset variable the config names: one run, each by its key', { timeout: 20_000 }, () => {
  const file = writeTempFile('files.yaml', [
    'upstream: "https://model.internal:8443"',
    'tls: {cert_file: /nonexistent/tm/cert.pem, key_file: /nonexistent/tm/key.pem}',
    'admin_tls: {cert_file: /nonexistent/tm/admin.pem, key_file: /nonexistent/tm/admin.key,',
    '            client_ca_file: /nonexistent/tm/clients.pem, client_auth: require}',
    'upstream_tls: {ca_file: /nonexistent/tm/ca.pem}',
    'usage:',
    '  spool_dir: /nonexistent/tm/spool',
    '  sink: {url: "https://billing.internal/v1/usage", ca_file: /nonexistent/tm/sink-ca.pem,',
    '         token_env: TOKENMETER_IT_UNSET_TOKEN}',
    'tenants:',
    '  source: api_key',
    '  api_key_secret_file: /nonexistent/tm/hmac',
    '  shared_limits: {redis: {url: "redis://redis:6379", password_env: TOKENMETER_IT_UNSET_PW}}',
    'timeouts: {drain: forever}',
    '',
  ].join('\n'));
  const run = check(['--check-config', file], { TOKENMETER_IT_UNSET_TOKEN: '', TOKENMETER_IT_UNSET_PW: '' });
  assert.equal(run.status, 1, run.stdout + run.stderr);
  for (const key of ['timeouts.drain', 'tls.cert_file', 'tls.key_file', 'admin_tls.cert_file',
    'admin_tls.key_file', 'admin_tls.client_ca_file', 'upstream_tls.ca_file', 'usage.sink.ca_file',
    'usage.sink.token_env', 'tenants.api_key_secret_file', 'tenants.shared_limits.redis.password_env']) {
    assert.match(run.stderr, new RegExp(`: ${key.replace(/\./g, '\\.')}: `), `${key} named:\n${run.stderr}`);
  }
  assert.match(run.stderr, /: 11 error\(s\)\n$/);
});

test('files that exist but do not load: a key that is not the certificate\'s, a CA that is not PEM', { timeout: 30_000 }, () => {
  const ca = makeCa();
  const leaf = makeLeaf(ca, 'proxy');
  const other = makeLeaf(ca, 'other');
  const notPem = writeTempFile('not-a-ca.pem', 'hello\n');
  const good = writeTempFile('good.yaml', `tls: {cert_file: ${leaf.cert}, key_file: ${leaf.key}}\n` +
    `upstream: "https://127.0.0.1:8443"\nupstream_tls: {ca_file: ${ca.cert}}\n`);
  const ok = check(['--check-config', good]);
  assert.equal(ok.status, 0, ok.stdout + ok.stderr);
  const bad = writeTempFile('bad.yaml', `tls: {cert_file: ${leaf.cert}, key_file: ${other.key}}\n` +
    `upstream: "https://127.0.0.1:8443"\nupstream_tls: {ca_file: ${notPem}}\n`);
  const run = check(['--check-config', bad]);
  assert.equal(run.status, 1, run.stdout + run.stderr);
  assert.match(run.stderr, /tls\.key_file/);
  assert.match(run.stderr, /upstream_tls\.ca_file/);
  assert.match(run.stderr, /: 2 error\(s\)\n$/);
});

test('--check-config takes the proxy\'s flags: they are checked and change what is loaded', { timeout: 20_000 }, () => {
  const file = writeTempFile('flags.yaml', 'upstream_tls: {ca_file: /nonexistent/tm/ca.pem}\n');
  // An http:// upstream loads no upstream_tls; --upstream https:// makes the CA count.
  assert.equal(check(['--check-config', file]).status, 0);
  const run = check(['--check-config', file, '--upstream', 'https://model:8443', '--listen', 'nope',
    '--threads', '9999']);
  assert.equal(run.status, 1, run.stdout + run.stderr);
  for (const key of ['--listen', 'threads', 'upstream_tls.ca_file']) {
    assert.match(run.stderr, new RegExp(`: ${key.replace(/\./g, '\\.')}: `), `${key}:\n${run.stderr}`);
  }
  const other = check(['--check-config', file, '--config', '/etc/other.yaml']);
  assert.equal(other.status, 2);
  assert.match(other.stderr, /different files/);
});

test('--print-config: the effective config with the flags applied, secrets redacted, and it reads back', { timeout: 20_000 }, () => {
  const file = writeTempFile('print.yaml', [
    'tenants:',
    '  source: api_key',
    '  api_key_secret_env: TOKENMETER_IT_HMAC',
    '  api_key_names: {"key:0123456789abcdef0123456789abcdef": team-a}',
    'usage:',
    '  spool_dir: /tmp/tm-spool',
    '  sink: {url: "https://billing.internal/v1/usage", token_env: TOKENMETER_IT_HMAC}',
    '',
  ].join('\n'));
  const run = check(['--config', file, '--print-config', '--listen', '127.0.0.1:18080'], { TOKENMETER_IT_HMAC: 's3cret' });
  assert.equal(run.status, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /^listen: 127\.0\.0\.1:18080$/m);
  assert.match(run.stdout, /api_key_secret_env: TOKENMETER_IT_HMAC/);
  assert.doesNotMatch(run.stdout, /0123456789abcdef|s3cret/);
  assert.match(run.stdout, /key:redacted-1: team-a/);
  assert.match(run.stdout, /token_env: TOKENMETER_IT_HMAC/);
  const printed = writeTempFile('printed.yaml', run.stdout);
  const again = check(['--check-config', printed], { TOKENMETER_IT_HMAC: 's3cret' });
  assert.equal(again.status, 0, again.stdout + again.stderr);
  // With --check-config, the print follows a passing check; an invalid config prints nothing.
  const both = check(['--check-config', printed, '--print-config'], { TOKENMETER_IT_HMAC: 's3cret' });
  assert.equal(both.status, 0, both.stderr);
  assert.equal(both.stdout, run.stdout);
  const broken = check(['--print-config', '--threads', 'many']);
  assert.equal(broken.status, 1);
  assert.equal(broken.stdout, '');
  assert.match(broken.stderr, /--threads/);
});
