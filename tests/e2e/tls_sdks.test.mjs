// The official SDKs through tokenmeter with TLS on both sides: each SDK trusts the
// test CA (made here with the openssl CLI) and talks to the proxy's TLS listener; the proxy talks
// to an https:// upstream (a twin simulator behind a TLS terminator) and verifies it against the
// same CA. Each SDK must get exactly what it gets from the other twin directly over plain HTTP.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { makeCa, makeLeaf } from '../integration/lib/certs.mjs';
import {
  expectedText, startProxy, startSimPair, stopAll, waitMetrics,
} from '../integration/lib/harness.mjs';
import { startTlsFront } from '../integration/lib/tls_front.mjs';
import { loadSdk } from './lib/load_sdk.mjs';

const fronts = [];
after(async () => {
  await stopAll();
  for (const f of fronts) await f.close();
});


const execFileAsync = promisify(execFile);
const TOKENS = 16;
const simHeaders = { 'x-sim-ttft-ms': '20', 'x-sim-itl-ms': '5', 'x-sim-output-tokens': String(TOKENS) };

let ca;
let server;
before(() => {
  ca = makeCa();
  server = makeLeaf(ca, 'server', { hosts: ['localhost', '127.0.0.1'] });
});

async function twinOverTls() {
  const [simA, simB] = await startSimPair();
  const front = await startTlsFront({ cert: server.cert, key: server.key, targetPort: simB.port });
  fronts.push(front);
  const proxy = await startProxy({
    upstream: `https://localhost:${front.port}`,
    config: `tls:\n  cert_file: ${server.cert}\n  key_file: ${server.key}\n` +
      `upstream_tls:\n  ca_file: ${ca.cert}\n`,
  });
  // The SDKs take a Node agent; this one trusts only the test CA.
  const agent = new https.Agent({ ca: readFileSync(ca.cert), keepAlive: true });
  return { simA, proxy, agent };
}

test('openai SDK: a chat stream over TLS equals the direct one, and is metered', { timeout: 60_000 }, async () => {
  const { default: OpenAI } = await loadSdk('openai');
  const { simA, proxy, agent } = await twinOverTls();
  const params = {
    model: 'sdk-tls', messages: [{ role: 'user', content: 'say something' }],
    stream: true, stream_options: { include_usage: true },
  };
  async function collect(client) {
    const stream = await client.chat.completions.create(params, { headers: simHeaders });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    return chunks;
  }
  const reference = await collect(new OpenAI({ baseURL: `http://127.0.0.1:${simA.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 }));
  const viaTls = new OpenAI({
    baseURL: `https://localhost:${proxy.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000, httpAgent: agent,
  });
  const chunks = await collect(viaTls);
  assert.deepEqual(chunks, reference);
  const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join('');
  assert.equal(text, expectedText(TOKENS));

  // An SDK that does not trust the CA is refused by its own verification.
  const untrusting = new OpenAI({ baseURL: `https://localhost:${proxy.port}/v1`, apiKey: 'test', maxRetries: 0, timeout: 20_000 });
  await assert.rejects(untrusting.chat.completions.create({ ...params, stream: false }), /certificate|connection error/i);

  const labels = { model: 'sdk-tls', api: 'openai_chat' };
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
  assert.equal(m.histogram('tokenmeter_inter_token_latency_seconds', labels).count, TOKENS - 1);
  assert.ok(m.value('tokenmeter_tls_handshakes_total', { listener: 'proxy' }) >= 1);
  assert.ok(m.value('tokenmeter_upstream_tls_handshakes_total') >= 1, 'the upstream side was TLS');
  agent.destroy();
});

// The SDK in a child process, as an application would run it: trusting the test CA through
// NODE_EXTRA_CA_CERTS (its fetch takes no agent). Asynchronous: the TLS upstream lives in this
// process and must keep answering while the child runs.
async function anthropicStream(baseURL, extraCa) {
  const env = { ...process.env };
  if (extraCa) env.NODE_EXTRA_CA_CERTS = extraCa;
  const script = fileURLToPath(new URL('./lib/anthropic_stream.mjs', import.meta.url));
  try {
    const { stdout } = await execFileAsync(process.execPath, [script, baseURL, JSON.stringify(simHeaders)],
      { env, encoding: 'utf8', timeout: 30_000 });
    return JSON.parse(stdout);
  } catch (error) {
    throw new Error(`the SDK client failed (${error.code}): ${error.stderr}`);
  }
}

test('@anthropic-ai/sdk: messages.stream over TLS equals the direct one', { timeout: 60_000 }, async () => {
  await loadSdk('@anthropic-ai/sdk');
  const { simA, proxy, agent } = await twinOverTls();
  agent.destroy();
  const reference = await anthropicStream(`http://127.0.0.1:${simA.port}`);
  const got = await anthropicStream(`https://localhost:${proxy.port}`, ca.cert);
  assert.deepEqual(got.events, reference.events);
  assert.deepEqual(got.message, reference.message);
  assert.equal(got.message.usage.output_tokens, TOKENS);
  await assert.rejects(anthropicStream(`https://localhost:${proxy.port}`), /certificate|Connection error/i,
    'without the CA the SDK refuses the proxy');
  const labels = { model: 'sdk-claude-tls', api: 'anthropic_messages' };
  const m = await waitMetrics(proxy, (x) => x.value('tokenmeter_requests_total', labels) >= 1);
  assert.equal(m.value('tokenmeter_requests_total', { ...labels, outcome: 'complete' }), 1);
  assert.equal(m.value('tokenmeter_tokens_total', { ...labels, type: 'output' }), TOKENS);
  assert.ok(m.value('tokenmeter_upstream_tls_handshakes_total') >= 1, 'the upstream side was TLS');
});
