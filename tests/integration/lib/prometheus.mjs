// A real Prometheus server (Debian package `prometheus`, or PROMETHEUS_BIN) on a loopback port,
// scraping the given targets every second, for tests that read what an SRE would read.
//
//   const prom = await startPrometheus({ targets: [`127.0.0.1:${proxy.adminPort}`] });
//   await prom.waitScraped();              // after the traffic: two fresh scrapes
//   const r = await prom.query('sum(tokenmeter_requests_total)');
//   await prom.stop();
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';

import { makeTempDir, sleep, waitFor } from './harness.mjs';

const PROMETHEUS = process.env.PROMETHEUS_BIN || 'prometheus';

export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function getJson(port, pathAndQuery) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: pathAndQuery, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { body += d; });
      res.on('end', () => {
        try { resolve({ status: res.statusCode, json: JSON.parse(body) }); } catch (e) { reject(new Error(`${pathAndQuery}: ${body.slice(0, 300)}`)); }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`timeout: ${pathAndQuery}`)));
    req.on('error', reject);
  });
}

// targets: ["host:port"]; labels: target labels ({cluster: 'test'}); ruleFiles: paths;
// features: --enable-feature values (e.g. 'native-histograms'); job: the scrape job's name.
export async function startPrometheus({ targets, labels, ruleFiles = [], features = [], job = 'tokenmeter' }) {
  const dir = makeTempDir('tokenmeter-prom-');
  mkdirSync(path.join(dir, 'data'));
  const configFile = path.join(dir, 'prometheus.yml');
  const lines = [
    'global:',
    '  scrape_interval: 1s',
    '  evaluation_interval: 1s',
  ];
  if (ruleFiles.length > 0) {
    lines.push('rule_files:', ...ruleFiles.map((f) => `  - ${JSON.stringify(f)}`));
  }
  lines.push(
    'scrape_configs:',
    `  - job_name: ${job}`,
    '    static_configs:',
    `      - targets: ${JSON.stringify(targets)}`,
  );
  if (labels) lines.push(`        labels: ${JSON.stringify(labels)}`);
  lines.push('');
  writeFileSync(configFile, lines.join('\n'));
  const port = await freePort();
  const args = [
    `--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dir, 'data')}`,
    `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn',
  ];
  for (const f of features) args.push(`--enable-feature=${f}`);
  const child = spawn(PROMETHEUS, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d) => { stderr += d; });
  child.on('error', (e) => { stderr += `spawn: ${e.message} (install the Debian package prometheus)`; });
  const prom = {
    port,
    child,
    get: (p) => getJson(port, p),
    query: (expr, time) => getJson(port, `/api/v1/query?query=${encodeURIComponent(expr)}` +
      (time === undefined ? '' : `&time=${time}`)),
    queryRange: (expr, start, end) => getJson(port,
      `/api/v1/query_range?query=${encodeURIComponent(expr)}&start=${start}&end=${end}&step=1`),
    // Waits for scrapes that started after this call: what was served before it is stored.
    waitScraped: async (count = 2) => {
      const since = Date.now();
      await waitFor(async () => {
        const r = await getJson(port, '/api/v1/targets?state=active');
        return r.json.data.activeTargets.every((t) => Date.parse(t.lastScrape) > since + (count - 1) * 1000 &&
          t.health === 'up');
      }, { timeoutMs: 10_000, intervalMs: 100, what: 'fresh scrapes' });
    },
    stop: async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((resolve) => { child.once('exit', resolve); setTimeout(resolve, 5000); });
      }
    },
  };
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`prometheus exited: ${stderr}`);
    try {
      const r = await prom.get('/api/v1/targets?state=active');
      return r.json.data.activeTargets.some((t) => t.health === 'up');
    } catch { return false; }
  }, { timeoutMs: 20_000, intervalMs: 200, what: `prometheus up and scraping (stderr: ${stderr})` });
  await sleep(0);
  return prom;
}
