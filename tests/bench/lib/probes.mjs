// Probes for the benchmarks that measure how much one kind of request delays others on the same
// worker: small streams with no simulated TTFT, so their client-side TTFT is the proxy's delay.
import { request, chatBody, sleep } from '../../integration/lib/harness.mjs';

export function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

// One probe's TTFT in ms.
export async function probe(port) {
  const res = await request({
    port,
    body: chatBody('probe', { content: 'hi' }),
    headers: { 'x-sim-ttft-ms': '0', 'x-sim-itl-ms': '0', 'x-sim-output-tokens': '4' },
    timeoutMs: 30_000,
  });
  if (res.status !== 200 || !res.complete) throw new Error(`probe failed: ${res.status} ${res.error}`);
  return res.firstDataAt - res.startedAt;
}

// `n` probes one after another, 5 ms apart; their TTFTs appended to `out`.
export async function probes(port, n, out) {
  for (let i = 0; i < n; ++i) {
    out.push(await probe(port));
    await sleep(5);
  }
}

// The probes' table: n, p50, p99 and max of each set, and what the second adds to the first.
export function printProbes(alone, beside, besideName) {
  const fmt = (v) => v.toFixed(2).padStart(8);
  const row = (name, v) => console.log(
    `${name.padEnd(24)}${String(v.length).padStart(6)} ${fmt(quantile(v, 0.5))} ${fmt(quantile(v, 0.99))} ${fmt(Math.max(...v))}`);
  console.log('probe TTFT (ms)              n    p50      p99      max');
  row('alone', alone);
  row(besideName, beside);
  console.log(`added p50: ${(quantile(beside, 0.5) - quantile(alone, 0.5)).toFixed(2)} ms, added p99: ${(quantile(beside, 0.99) - quantile(alone, 0.99)).toFixed(2)} ms`);
}
