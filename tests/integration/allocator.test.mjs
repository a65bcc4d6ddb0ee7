// The allocator the proxy binary runs on (TOKENMETER_MALLOC): the start-up line names the one the
// binary really links (ldd), and a streamed response passes through it unchanged.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  binaries, startSim, startProxy, stopAll, waitForLog, request, chatBody, sseText, expectedText,
} from './lib/harness.mjs';

after(stopAll);

test('the start-up line names the allocator the binary links', async () => {
  const { bin } = binaries();
  const ldd = spawnSync('ldd', [bin], { encoding: 'utf8' });
  assert.equal(ldd.status, 0, ldd.stderr);
  const linksMimalloc = /libmimalloc\.so/.test(ldd.stdout);
  const sanitized = /lib(asan|tsan)\.so/.test(ldd.stdout);

  const sim = await startSim();
  const proxy = await startProxy({ upstream: sim.port });
  await waitForLog(proxy.child, /worker thread\(s\) \(.*\), \S/);
  const line = proxy.child.stderrText.split('\n').find((l) => /worker thread\(s\)/.test(l));
  const expected = linksMimalloc ? /, mimalloc \d+\.\d+\.\d+$/
    : sanitized ? /, sanitizer allocator$/ : /, glibc malloc$/;
  assert.match(line, expected, `ldd:\n${ldd.stdout}`);

  const res = await request({
    port: proxy.port,
    body: chatBody('alloc-model'),
    headers: { 'x-sim-ttft-ms': '1', 'x-sim-itl-ms': '1', 'x-sim-output-tokens': '40' },
  });
  assert.equal(res.status, 200);
  assert.equal(sseText(res.body.toString()), expectedText(40));
});
