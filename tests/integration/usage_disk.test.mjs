// A spool that cannot write is loud and loses nothing: every write fails (the proxy runs under a
// file-size limit smaller than one batch), /readyz fails because readyz_fail_on_spool_error is
// set, tokenmeter_usage_spool_errors_total counts, streams are not held hostage; once the limit
// is lifted the queued entries reach the disk and every request has its record.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync } from 'node:fs';

import {
  binaries, chatBody, makeTempDir, request, startProxy, startSim, stopAll, waitFor, waitMetrics,
  waitForLog, writeTempFile,
} from './lib/harness.mjs';
import { readRecords } from './lib/usage.mjs';

after(stopAll);

test('failing disk: /readyz 503, errors counted, streams flow, nothing lost once it recovers', { timeout: 30_000 }, async () => {
  const { bin } = binaries();
  const wrapper = writeTempFile('limited.sh', `#!/bin/sh\nexec prlimit --fsize=256:unlimited -- "${bin}" "$@"\n`);
  chmodSync(wrapper, 0o755);
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const config = `usage:\n  spool_dir: ${spool}\n  readyz_fail_on_spool_error: true\n  fsync_interval: 5ms\n`;
  const saved = process.env.TOKENMETER_BIN;
  process.env.TOKENMETER_BIN = wrapper;
  let proxy;
  try {
    proxy = await startProxy({ upstream: sim.port, config });
  } finally {
    process.env.TOKENMETER_BIN = saved;
  }
  // A model name of 250 bytes (records cut names at 256) makes every entry larger than the
  // 256-byte file-size limit.
  const model = `big-${'m'.repeat(246)}`;
  for (let i = 0; i < 5; i++) {
    const res = await request({ port: proxy.port, body: chatBody(model, { includeUsage: true }),
      headers: { 'x-request-id': `disk-${i}`, 'x-sim-output-tokens': '4' }, timeoutMs: 5000 });
    assert.equal(res.status, 200, 'a stream was held by a failing disk');
    assert.ok(res.complete);
  }
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_usage_spool_errors_total') >= 1, 5000);
  assert.ok(m.value('tokenmeter_usage_spool_errors_total') >= 1);
  assert.ok(m.value('tokenmeter_usage_spool_records') >= 5, 'queued entries are visible');
  const ready = await waitFor(async () => {
    const r = await proxy.admin('/readyz');
    return r.status === 503 ? r : undefined;
  }, { timeoutMs: 5000, what: '/readyz 503' });
  assert.match(ready.body.toString(), /usage spool/);
  await waitForLog(proxy.child, /usage spool write failed/);
  assert.equal(readRecords(spool).length, 0);

  // The disk recovers: everything queued is written, /readyz is ready again.
  execFileSync('prlimit', ['--pid', String(proxy.child.proc.pid), '--fsize=unlimited']);
  await waitFor(async () => (await proxy.admin('/readyz')).status === 200,
    { timeoutMs: 5000, what: '/readyz 200 after recovery' });
  await waitFor(() => readRecords(spool).length === 5, { timeoutMs: 5000, what: '5 records' });
  const ids = readRecords(spool).map((r) => r.request_id).sort();
  assert.deepEqual(ids, ['disk-0', 'disk-1', 'disk-2', 'disk-3', 'disk-4']);
  assert.ok(readRecords(spool).every((r) => r.outcome === 'complete' && r.output_tokens === 4));
});
