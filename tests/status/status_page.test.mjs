// The admin status page in headless Chromium (Debian's /usr/bin/chromium through playwright-core):
// it renders, every number it shows equals the /status.json snapshot it rendered (compared by
// the snapshot's sequence), the Content-Security-Policy is sent and nothing violated it, no
// console error, and no API key or secret is on the page. A screenshot is kept at
// $TOKENMETER_ARTIFACTS_DIR/status-page.png (CTest: <build>/artifacts/status-page.png).
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

import { stopAll } from '../integration/lib/harness.mjs';
import {
  ALPHA_KEY, BETA_KEY, MODEL, STATUS_SECRET, startStatusScenario,
} from '../integration/lib/status.mjs';

const CHROMIUM = process.env.TOKENMETER_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.TOKENMETER_ARTIFACTS_DIR || path.join(tmpdir(), 'tokenmeter-artifacts');

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  throw new Error('playwright-core is missing: run `npm ci` in tests/status (scripts/test.sh does)');
}

let context;
let profile;
after(async () => {
  if (context) await context.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await stopAll();
});

// The page's formats (proxy/admin/status_page/status.js), applied to the document's values.
const formats = {
  ms: (v) => (v * 1000).toFixed(2),
  int: (v) => String(v),
  rate: (v) => v.toFixed(2),
  ratio: (v) => v.toFixed(4),
  percent: (v) => `${(v * 100).toFixed(2)} %`,
  seconds: (v) => `${v.toFixed(0)} s`,
  time: (v) => new Date(v).toISOString(),
  text: (v) => String(v),
};
const show = (v, format) => (v === null || v === undefined ? '–' : formats[format](v));
const lookup = (doc, keys) => keys.reduce((v, k) => (v === null || v === undefined ? undefined : v[k]), doc);

test('the status page renders /status.json exactly, under its CSP', { timeout: 120_000 }, async () => {
  const { proxy } = await startStatusScenario();
  profile = mkdtempSync(path.join(tmpdir(), 'tokenmeter-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
  });
  const page = await context.newPage();
  // Injected by the browser itself (not by the page), so the CSP does not apply to it.
  await page.addInitScript(() => {
    window.cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('requestfailed', (req) => problems.push(`request failed: ${req.url()}`));
  const origin = `http://127.0.0.1:${proxy.adminPort}`;
  const foreign = [];
  page.on('request', (req) => {
    if (!req.url().startsWith(`${origin}/`)) foreign.push(req.url());
  });
  // Every /status.json the page fetched, by sequence.
  const documents = new Map();
  const pending = [];
  page.on('response', (res) => {
    if (new URL(res.url()).pathname === '/status.json') {
      pending.push(res.text().then((text) => {
        const doc = JSON.parse(text);
        documents.set(doc.sequence, { doc, text });
      }));
    }
  });

  const response = await page.goto(`${origin}/`, { waitUntil: 'load' });
  assert.equal(response.status(), 200);
  const headers = response.headers();
  assert.match(headers['content-security-policy'], /default-src 'none'; script-src 'self'/);
  assert.equal(headers['x-content-type-options'], 'nosniff');
  assert.equal(headers['cache-control'], 'no-store');

  // Rendered: the root carries the sequence of the snapshot on screen.
  await page.waitForFunction(() => document.documentElement.dataset.sequence !== undefined,
    null, { timeout: 10_000 });
  // Read every value cell and the sequence in one go (one task of the page: no refresh between).
  const shown = await page.evaluate(() => ({
    sequence: Number(document.documentElement.dataset.sequence),
    cells: [...document.querySelectorAll('[data-path]')].map((e) => ({
      path: JSON.parse(e.dataset.path), format: e.dataset.format, text: e.textContent,
    })),
    title: document.title,
    state: document.getElementById('state').textContent,
    violations: window.cspViolations,
  }));
  await Promise.all(pending);
  const source = documents.get(shown.sequence);
  assert.ok(source, `the page shows snapshot ${shown.sequence}; fetched ${[...documents.keys()]}`);
  const { doc } = source;
  assert.equal(shown.title, 'tokenmeter status');
  assert.match(shown.state, new RegExp(`snapshot ${shown.sequence}\\)`));

  // Every number on the page is the document's, formatted.
  assert.ok(shown.cells.length >= 60, `${shown.cells.length} value cells`);
  for (const cell of shown.cells) {
    assert.equal(cell.text, show(lookup(doc, cell.path), cell.format), JSON.stringify(cell.path));
  }
  // ... and the document's numbers are all on the page: each model, window and quantile.
  const paths = new Set(shown.cells.map((c) => JSON.stringify(c.path)));
  assert.equal(doc.models[0].model, MODEL);
  for (const w of ['1m', '5m', '15m']) {
    for (const metric of ['ttft', 'itl', 'tpot']) {
      for (const q of ['p50', 'p99']) {
        assert.ok(paths.has(JSON.stringify(['models', 0, 'latency', w, metric, q])), `${w} ${metric} ${q}`);
      }
    }
    for (const source of ['reported', 'native', 'normalized']) {
      assert.ok(paths.has(JSON.stringify(['models', 0, 'throughput', w, 'tokens_per_second', source])));
    }
  }
  for (const w of ['5m', '1h']) {
    assert.ok(paths.has(JSON.stringify(['models', 0, 'slo', 'ttft', w, 'burn_rate'])));
    assert.ok(paths.has(JSON.stringify(['models', 0, 'slo', 'tpot', w, 'good_ratio'])));
    assert.ok(paths.has(JSON.stringify(['models', 0, 'slo', 'availability', w, 'burn_rate'])));
  }
  assert.ok(paths.has(JSON.stringify(['models', 0, 'slo', 'availability_objective'])));
  assert.ok(paths.has(JSON.stringify(['tenants', 'by_tokens', 0, 'tenant'])));
  assert.ok(paths.has(JSON.stringify(['tenants', 'by_rate_limited', 0, 'rate_limited'])));
  assert.ok(paths.has(JSON.stringify(['upstream_errors', 'recent', 0, 'reason'])));
  assert.ok(paths.has(JSON.stringify(['streams_active'])));
  // Real numbers, not dashes: the traffic is there.
  const ttft = shown.cells.find((c) => JSON.stringify(c.path) === JSON.stringify(['models', 0, 'latency', '1m', 'ttft', 'p50']));
  assert.match(ttft.text, /^\d+\.\d\d$/);

  // No inline script or style needed, nothing blocked, nothing fetched elsewhere.
  assert.deepEqual(shown.violations, []);
  assert.deepEqual(problems, []);
  assert.deepEqual(foreign, []);

  // No key or secret in what the browser got.
  const html = await page.content();
  for (const text of [html, ...[...documents.values()].map((d) => d.text)]) {
    for (const secret of [ALPHA_KEY, BETA_KEY, STATUS_SECRET]) {
      assert.ok(!text.includes(secret), `${secret} on the status page`);
    }
  }

  mkdirSync(ARTIFACTS, { recursive: true });
  const screenshot = path.join(ARTIFACTS, 'status-page.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`status page screenshot: ${screenshot}`);
});
