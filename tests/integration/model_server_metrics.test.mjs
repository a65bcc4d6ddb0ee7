// The model server's own metrics through tokenmeter (deploy/kubernetes: the `model-server`
// PodMonitor). vLLM listens on loopback only, so Prometheus cannot reach its /metrics; it
// scrapes tokenmeter's proxy port instead, and tokenmeter passes /metrics through unchanged
// (not a model API: counted as api="none"). Here a stand-in model server serves vLLM-style
// metrics and a real Prometheus scrapes them through the proxy.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';

import { startProxy, stopAll, waitReady } from './lib/harness.mjs';
import { startPrometheus } from './lib/prometheus.mjs';

let server;
let prom;
after(async () => {
  if (prom) await prom.stop();
  if (server) server.close();
  await stopAll();
});

test('Prometheus scrapes the model server\'s /metrics through tokenmeter\'s proxy port', { timeout: 60_000 }, async () => {
  let scrapes = 0;
  server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      scrapes += 1;
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
      res.end('# TYPE vllm:num_requests_waiting gauge\n' +
        'vllm:num_requests_waiting{model_name="llama"} 3\n' +
        '# TYPE vllm:gpu_cache_usage_perc gauge\n' +
        'vllm:gpu_cache_usage_perc{model_name="llama"} 0.42\n');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxy = await startProxy({ upstream: server.address().port, config: 'log:\n  level: error\n' });
  await waitReady(proxy);
  prom = await startPrometheus({ targets: [`127.0.0.1:${proxy.port}`], job: 'model-server' });
  await prom.waitScraped();

  const waiting = await prom.query('vllm:num_requests_waiting{job="model-server"}');
  assert.equal(waiting.json.data.result.length, 1, JSON.stringify(waiting.json));
  assert.equal(waiting.json.data.result[0].value[1], '3');
  const cache = await prom.query('vllm:gpu_cache_usage_perc');
  assert.equal(cache.json.data.result[0].value[1], '0.42');
  assert.ok(scrapes >= 2, `the model server was scraped through the proxy (${scrapes})`);
  // tokenmeter saw the scrapes as pass-through requests, not as model traffic.
  const m = await proxy.metrics();
  assert.ok(m.value('tokenmeter_requests_total', { api: 'none', code: '200' }) >= 2);
  assert.equal(m.has('tokenmeter_tokens_total'), false);
});
