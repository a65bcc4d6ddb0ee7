// The status page scenario shared by integration/status.test.mjs and the Chromium test
// (tests/status): a proxy with API-key tenants (one of them limited), an SLO, and known traffic
// from the simulator: streams on a fixed schedule, a tenant pushed into 429s, an upstream reset.
import { createHmac } from 'node:crypto';

import { chatBody, request, startProxy, startSim, waitFor } from './harness.mjs';

export const STATUS_SECRET = 'status-page-hmac-secret-0e1f';
export const ALPHA_KEY = 'sk-status-alpha-9c3b7d51';
export const BETA_KEY = 'sk-status-beta-44a2e6f0';
export const MODEL = 'status-model';
// The simulator's schedule for the metered streams.
export const TTFT_MS = 40;
export const ITL_MS = 10;
export const OUTPUT_TOKENS = 20;
export const ALPHA_REQUESTS = 6;
export const BETA_REQUESTS = 3;

const keyTenant = (key) =>
  `key:${createHmac('sha256', STATUS_SECRET).update(key).digest('hex').slice(0, 32)}`;

export function statusConfig(extra = '') {
  process.env.TOKENMETER_TEST_STATUS_SECRET = STATUS_SECRET;
  return [
    'tenants:',
    '  source: api_key',
    '  api_key_secret_env: TOKENMETER_TEST_STATUS_SECRET',
    '  api_key_names:',
    `    "${keyTenant(ALPHA_KEY)}": team-alpha`,
    `    "${keyTenant(BETA_KEY)}": team-beta`,
    '  enforce_provisioned: true',
    '  provisioned_burst: 5s',
    '  limits:',
    '    team-beta: { provisioned_tokens_per_second: 1 }',
    'slo:',
    '  models:',
    `    ${MODEL}: { ttft: 500ms, tpot: 100ms, availability: 99.9% }`,
    extra,
  ].join('\n');
}

// Starts the simulator and the proxy and sends the traffic. Returns what was sent and got.
export async function startStatusScenario() {
  const sim = await startSim(['--ttft-ms', String(TTFT_MS), '--itl-ms', String(ITL_MS)]);
  const proxy = await startProxy({ upstream: sim.port, config: statusConfig() });
  const send = (key, headers = {}) => request({
    port: proxy.port,
    body: chatBody(MODEL, { includeUsage: true }),
    headers: { authorization: `Bearer ${key}`, 'x-sim-output-tokens': String(OUTPUT_TOKENS), ...headers },
  });
  const statuses = { alpha: [], beta: [] };
  for (let i = 0; i < ALPHA_REQUESTS; i += 1) {
    statuses.alpha.push((await send(ALPHA_KEY)).status);
  }
  // team-beta's bucket holds 5 tokens (1 a second for 5 s): the first request is admitted and
  // leaves it more than 15 tokens in debt, so the ones sent within 15 s after it are refused.
  // The debt is charged when the request is recorded, just after the client has its response:
  // wait for the tenant's counters to show it (the proxy charges the bucket before them), or a
  // slow (sanitized) proxy admits the next request before its predecessor's charge.
  const sendBeta = () => send(BETA_KEY, { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0' });
  statuses.beta.push((await sendBeta()).status);
  await waitFor(async () => (await proxy.metrics())
    .value('tokenmeter_tenant_requests_total', { tenant: 'team-beta' }) === 1,
  { timeoutMs: 5000, what: "team-beta's first request in /metrics" });
  for (let i = 1; i < BETA_REQUESTS; i += 1) {
    statuses.beta.push((await sendBeta()).status);
  }
  const reset = await send(ALPHA_KEY, { 'x-sim-fail': 'reset' });
  // The last request's end is recorded just after its response: wait until the page has it.
  await waitFor(async () => {
    const res = await proxy.admin('/status.json');
    const doc = JSON.parse(res.body.toString());
    return doc.upstream_errors.recent.length > 0 &&
      doc.models.some((m) => m.latency['1m'].requests >= ALPHA_REQUESTS + BETA_REQUESTS + 1);
  }, { timeoutMs: 5000, what: 'every request in /status.json' });
  return { sim, proxy, statuses, resetStatus: reset.status };
}
