// Metering never cuts a stream: tokenmeter-faults (tests/faults, built only with the tests) is
// the proxy with an observer around its metering that throws in one phase of every request.
// For each phase, streamed requests through it reach the client whole and in order on a kept-alive
// connection, the failure is counted in tokenmeter_metering_failures_total{phase} (not as an
// internal error), and the usage record, when it was still open, is marked degraded.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import {
  chatBody, describeResult, expectedText, makeTempDir, parseSse, rawExchange, request, sseText,
  startProxy, startProxyWithClosedUpstream, startSim, stopAll, waitFor,
} from './lib/harness.mjs';
import { readRecords, waitRecord } from './lib/usage.mjs';

const FAULTS_BIN = process.env.TOKENMETER_FAULTS_BIN;
const TOKENS = 12;

after(stopAll);

function faulty(phase, spool) {
  assert.ok(FAULTS_BIN, 'TOKENMETER_FAULTS_BIN must point at tokenmeter-faults (ctest sets it)');
  process.env.TOKENMETER_FAULT_PHASE = phase;
  return {
    bin: FAULTS_BIN,
    name: `faults-${phase}`,
    config: spool ? `usage:\n  spool_dir: ${spool}\n` : '',
  };
}

const failures = async (proxy, phase) =>
  (await proxy.metrics()).value('tokenmeter_metering_failures_total', { phase });

// phase -> whether the record is marked: it was still open when the phase failed (seal and end
// come after the record was closed: the end is held until its close entry is on disk).
const STREAM_PHASES = {
  begin: 'none', admission: true, request_sent: true, response_head: true, body: true, seal: false,
  end: false,
};

for (const [phase, marked] of Object.entries(STREAM_PHASES)) {
  test(`a failure in ${phase} leaves the stream whole`, async () => {
    const sim = await startSim();
    const spool = makeTempDir('tokenmeter-faults-spool-');
    const proxy = await startProxy({ ...faulty(phase, spool), upstream: sim.port });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 2; i += 1) {
      const res = await request({
        port: proxy.port,
        agent,
        body: chatBody('sim-model', { includeUsage: true }),
        headers: { 'x-sim-output-tokens': String(TOKENS), 'x-request-id': `${phase}-${i}` },
      });
      assert.equal(res.status, 200, describeResult(res));
      assert.ok(res.complete && !res.aborted, describeResult(res));
      assert.equal(sseText(res.body.toString()), expectedText(TOKENS));
      assert.equal(parseSse(res.body.toString()).at(-1).data, '[DONE]');
      assert.equal(res.reusedSocket, i > 0, 'the connection was kept alive');
    }
    agent.destroy();
    await waitFor(async () => (await failures(proxy, phase)) >= 2,
      { timeoutMs: 5000, what: `tokenmeter_metering_failures_total{phase="${phase}"} >= 2` });
    const m = await proxy.metrics();
    assert.equal(m.value('tokenmeter_internal_errors_total') || 0, 0, 'no connection was ended');
    if (marked === 'none') {
      // Metering never began: forwarded unmetered, no record.
      assert.deepEqual(readRecords(spool), []);
      return;
    }
    for (let i = 0; i < 2; i += 1) {
      const record = await waitRecord(spool, `${phase}-${i}`);
      assert.equal(record.status, 200);
      assert.equal(record.degraded === true, marked, JSON.stringify(record));
    }
  });
}

test('a failure while counting an upstream error still answers 502', async () => {
  const { proxy } = await startProxyWithClosedUpstream(faulty('upstream_error'));
  const res = await request({ port: proxy.port, body: chatBody('sim-model') });
  assert.equal(res.status, 502, describeResult(res));
  assert.match(res.body.toString(), /upstream_unreachable/);
  assert.equal(await failures(proxy, 'upstream_error'), 1);
});

test('a failure while counting a local refusal still answers 400', async () => {
  const { proxy } = await startProxyWithClosedUpstream(faulty('unforwarded'));
  const res = await rawExchange(proxy.port, Buffer.from('GET / HTTP/1.1\r\n\r\n'));
  assert.match(res.data.toString(), /^HTTP\/1\.1 400 /);
  await waitFor(async () => (await failures(proxy, 'unforwarded')) === 1,
    { timeoutMs: 5000, what: 'the unforwarded failure counted' });
});
