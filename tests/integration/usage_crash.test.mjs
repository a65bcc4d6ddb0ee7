// Crash test for the usage spool: steady streamed load through the proxy, SIGKILL at 50 random
// moments, restart on the same spool each time, then reconcile what the clients saw with the
// records on disk:
//   - a request the client saw complete has exactly one record, outcome complete, with the
//     simulator's exact token counts;
//   - a request that got a response head but not a complete response has exactly one record,
//     partial (crash_recovered, client_cancel, upstream_truncated, upstream_error);
//   - no id is recorded twice, and no request id has two different ids.
// The simulator is deterministic (x-sim-output-tokens), so the client knows what complete is.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import {
  chatBody, expectedText, makeTempDir, parseSse, request, sleep, sseText, startProxy, startSim,
  stopAll,
} from './lib/harness.mjs';
import { readRecords, readSpool } from './lib/usage.mjs';

after(stopAll);

const KILLS = Number(process.env.TOKENMETER_CRASH_KILLS || 50);
const WORKERS = 12;
const PROMPT = 'one two three';  // the simulator counts 3 prompt tokens
const PARTIAL = new Set(['crash_recovered', 'client_cancel', 'upstream_truncated', 'upstream_error']);

function fullyComplete(res, tokens) {
  if (res.status !== 200 || !res.complete || res.error) return false;
  const body = res.body.toString();
  const events = parseSse(body);
  const usage = events.map((e) => e.json && e.json.usage).filter(Boolean).pop();
  return sseText(body) === expectedText(tokens) && events.some((e) => e.data === '[DONE]') &&
    usage && usage.completion_tokens === tokens;
}

test(`SIGKILL at ${KILLS} random moments under load: every request has exactly one record`, { timeout: 240_000 }, async () => {
  const started = Date.now();
  const sim = await startSim();
  const spool = makeTempDir('tokenmeter-spool-');
  const config = [
    'tenants:',
    '  source: header',
    'usage:',
    `  spool_dir: ${spool}`,
    '  fsync_interval: 10ms',
    '  checkpoint_interval: 50ms',
    '  segment_bytes: 256KiB',
    '',
  ].join('\n');
  let generation = 0;
  let proxy = await startProxy({ upstream: sim.port, config, name: `proxy-${generation}` });
  let running = true;
  const sent = [];

  async function worker(w) {
    for (let n = 0; running; n++) {
      const requestId = `w${w}-${n}`;
      const sentTo = generation;
      const tokens = 5 + Math.floor(Math.random() * 40);
      const res = await request({
        port: proxy.port,
        body: chatBody('crash-model', { includeUsage: true, content: PROMPT }),
        headers: {
          'x-request-id': requestId,
          'x-tenant-id': `tenant-${w % 3}`,
          'x-sim-output-tokens': String(tokens),
          'x-sim-ttft-ms': '5',
          'x-sim-itl-ms': '3',
        },
        timeoutMs: 15_000,
      });
      sent.push({ requestId, tokens, status: res.status, complete: fullyComplete(res, tokens) });
      // The proxy is down: wait for its successor instead of spinning on refused connections.
      while (res.status === undefined && running && generation === sentTo) await sleep(2);
    }
  }
  const workers = Array.from({ length: WORKERS }, (_, w) => worker(w));

  let kills = 0;
  while (kills < KILLS) {
    await sleep(80 + Math.random() * 320);
    await proxy.stop('SIGKILL');
    kills += 1;
    proxy = await startProxy({ upstream: sim.port, config, name: `proxy-${kills}` });
    generation += 1;  // after the new proxy is in place: waiting workers send to it
  }
  await sleep(300);
  running = false;
  await Promise.all(workers);
  // A graceful stop at the end: the last process's records are closed normally.
  proxy.child.signal('SIGTERM');
  await proxy.child.waitExit(10_000);
  // One more start finds nothing to recover (every open has its close).
  proxy = await startProxy({ upstream: sim.port, config, name: 'proxy-final' });
  await proxy.stop('SIGTERM');

  const records = readRecords(spool);
  const malformed = readSpool(spool).filter((e) => e.type === 'malformed');
  const byId = new Map();
  const byRequest = new Map();
  for (const r of records) {
    byId.set(r.id, (byId.get(r.id) || 0) + 1);
    if (!byRequest.has(r.request_id)) byRequest.set(r.request_id, []);
    byRequest.get(r.request_id).push(r);
  }
  const duplicatedIds = [...byId].filter(([, n]) => n > 1);
  assert.deepEqual(duplicatedIds, [], 'an id recorded twice');
  assert.deepEqual(malformed, [], 'malformed complete lines in the spool');

  const stats = { complete: 0, interrupted: 0, noHead: 0, recovered: 0, completeWindow: 0, noHeadRecorded: 0 };
  const known = new Set();
  for (const s of sent) {
    known.add(s.requestId);
    const recs = byRequest.get(s.requestId) || [];
    const what = `${s.requestId} (${s.tokens} tokens, status ${s.status}): ${JSON.stringify(recs)}`;
    if (s.complete) {
      stats.complete += 1;
      assert.equal(recs.length, 1, `complete request without exactly one record: ${what}`);
      const r = recs[0];
      assert.equal(r.outcome, 'complete', what);
      assert.equal(r.output_tokens, s.tokens, what);
      assert.equal(r.output_source, 'reported', what);
      assert.equal(r.input_tokens, 3, what);
      assert.equal(r.status, 200, what);
      assert.equal(r.tenant, `tenant-${Number(s.requestId.slice(1).split('-')[0]) % 3}`, what);
    } else if (s.status !== undefined) {
      stats.interrupted += 1;
      assert.equal(recs.length, 1, `interrupted request without exactly one record: ${what}`);
      const r = recs[0];
      if (r.outcome === 'complete') {
        // The one race no proxy can close: the close entry was on disk and the end of the
        // response released, and the kill came before the client read it. The record then
        // says what the upstream produced, all of it.
        stats.completeWindow += 1;
        assert.equal(r.output_tokens, s.tokens, what);
      } else {
        assert.ok(PARTIAL.has(r.outcome), `not flagged partial: ${what}`);
        assert.ok(r.output_tokens === null || r.output_tokens <= s.tokens, what);
      }
      if (r.outcome === 'crash_recovered') stats.recovered += 1;
    } else {
      // Never got a response head (connection refused while the proxy was down, or killed
      // before the open entry was on disk): the upstream saw at most a request nobody received.
      stats.noHead += 1;
      assert.ok(recs.length <= 1, `more than one record: ${what}`);
      stats.noHeadRecorded += recs.length;
    }
  }
  for (const r of records) {
    assert.ok(known.has(r.request_id), `a record for a request nobody sent: ${JSON.stringify(r)}`);
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`usage crash test: ${kills} kills, ${sent.length} requests, ${records.length} ` +
    `records; ${JSON.stringify(stats)}; ${seconds} s`);
  assert.ok(kills >= 50 || process.env.TOKENMETER_CRASH_KILLS, 'at least 50 kills');
  assert.ok(stats.complete >= 200, `only ${stats.complete} complete requests: not steady load`);
  assert.ok(stats.recovered >= 1, 'no crash_recovered record: the kills never hit a stream');
});
