// The adversarial suite, kept as data: every case in adversarial/*.json is sent
// over a fresh client connection to the real proxy, in front of a recording upstream that answers
// with the case's scripted bytes. Each case states what a correct, RFC-conforming proxy does: the
// statuses the client sees, whether the proxy closes the connection, and exactly which bytes reach
// the upstream (or that no upstream connection is opened at all). After every case the proxy must
// still be running and answer a normal request, so a crash is pinned on the case that caused it.
// adversarial/README.md describes the case format.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

import { startProxy, stopAll, waitMetrics, waitReady } from './lib/harness.mjs';
import {
  awaitPlan, caseProblems, caseTimeoutMs, exchange, expectations, loadCases, proxyConfig,
  renderClient, renderResponses, show, startRecordingUpstream,
} from './lib/recording_upstream.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CASES = loadCases(path.join(HERE, 'adversarial'));

let upstream;
const proxies = new Map();  // key → Promise<proxy>

after(async () => {
  if (upstream) await upstream.close();
  await stopAll();
});

before(async () => {
  upstream = await startRecordingUpstream();
});

// One proxy per (base path, config), started when a case first needs it. A start that fails (the
// binary may be in the middle of a rebuild) is retried a few times.
async function launchProxy(kase) {
  const base = kase.upstream_base || '';
  for (let attempt = 1; ; attempt++) {
    try {
      const connectionsBefore = upstream.connectionsEver();
      const proxy = await startProxy({
        upstream: `http://127.0.0.1:${upstream.port}${base}`,
        config: proxyConfig(kase.config),
        name: `proxy${base}`,
      });
      await waitReady(proxy);
      // The readiness probe's connection completes in the kernel before the upstream's event
      // loop accepts it: on a busy machine that can be after the case's reset, where it would
      // count as a connection the case opened. Wait until the upstream has seen it.
      if (!/^readiness:/m.test(kase.config || '')) {
        await upstream.waitFor(() => upstream.connectionsEver() > connectionsBefore, 3000);
      }
      return proxy;
    } catch (error) {
      if (attempt >= 3) throw error;
      await sleep(2000);
    }
  }
}

function proxyFor(kase) {
  const key = `${kase.upstream_base || ''}\n${kase.config || ''}`;
  if (!proxies.has(key)) {
    const starting = launchProxy(kase);
    starting.catch(() => proxies.delete(key));
    proxies.set(key, starting);
  }
  return { key, proxy: proxies.get(key) };
}

async function liveness(proxy) {
  upstream.reset([]);
  const writes = [Buffer.from('GET /adversarial/liveness HTTP/1.1\r\nHost: live\r\nConnection: close\r\n\r\n')];
  const result = await exchange(proxy.port, writes, { finals: 1, waitForClose: () => true, timeoutMs: 3000 });
  const res = result.responses.find((r) => r.status >= 200);
  return res && res.status === 200 && res.body.toString() === 'ok'
    ? undefined : `a normal request after the case failed: ${show(result.data, 300)}`;
}

for (const kase of CASES) {
  test(kase.name, { timeout: caseTimeoutMs(kase) + 10_000 }, async () => {
    const { key, proxy: proxyPromise } = proxyFor(kase);
    const proxy = await proxyPromise;
    const vars = { host: `127.0.0.1:${upstream.port}` };
    const writes = renderClient(kase, vars);
    const alternatives = expectations(kase);
    const metricChecks = alternatives.flatMap((e) => e.metrics || []);
    const metricsBefore = metricChecks.length ? await proxy.metrics() : undefined;

    upstream.reset(renderResponses(kase.upstream, vars));
    await sleep(5);
    const result = await exchange(proxy.port, writes, awaitPlan(kase));
    // Whatever reached the upstream did so before the proxy answered (or never will): a short
    // settle lets a stray forward show itself.
    await sleep(alternatives.some((e) => e.upstream === null) ? 50 : 10);
    const seen = {
      bytes: upstream.received(),
      connections: upstream.connectionsSinceReset(),
      requests: upstream.requests().length,
    };
    const problems = caseProblems(kase, result, seen, vars);

    // Metric expectations hold for whichever alternative names them.
    for (const check of metricChecks) {
      const name = check.name || 'tokenmeter_requests_total';
      const beforeValue = metricsBefore.value(name, check.labels || {});
      const m = await waitMetrics(proxy, (x) => x.value(name, check.labels || {}) >= beforeValue + (check.min_increase ?? 1), 2000);
      const increase = m.value(name, check.labels || {}) - beforeValue;
      if (increase < (check.min_increase ?? 1)) {
        problems.push(`${name}${JSON.stringify(check.labels || {})} grew by ${increase}, expected at least ${check.min_increase ?? 1}`);
      }
    }

    // The proxy is still there and still serves. If not, the case is blamed and the next case
    // that needs this configuration starts a fresh proxy.
    const died = async () => {
      if (proxy.child.running) {
        try { await proxy.child.waitExit(300); } catch { /* still running */ }
      }
      return !proxy.child.running;
    };
    const problem = proxy.child.running ? await liveness(proxy) : undefined;
    if (!proxy.child.running || (problem && await died())) {
      problems.push(`the proxy died (exit code ${proxy.child.exitCode}, signal ${proxy.child.exitSignal}); ` +
        `stderr tail: ${JSON.stringify(proxy.child.stderrText.slice(-300))}`);
      proxies.delete(key);
    } else if (problem) {
      problems.push(problem);
      proxies.delete(key);
      await proxy.stop();
    }

    assert.ok(problems.length === 0,
      `${kase.name} [${kase.rfc}]\n  ${problems.join('\n  ')}\n  client saw: ${show(result.data)}` +
      ` (closed=${result.closed})`);
  });
}
