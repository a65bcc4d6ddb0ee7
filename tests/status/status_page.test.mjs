// The admin status page in headless Chromium (Debian's /usr/bin/chromium through playwright-core):
// it renders, every number it shows equals the /status.json snapshot it rendered (compared by
// the snapshot's sequence), every point its charts draw is that snapshot's series on the chart's
// own axis, chart text and lines keep their contrast in the light and the dark scheme, the
// Content-Security-Policy is sent and nothing violated it, no console error, and no API key or
// secret is on the page. Screenshots are kept at $TOKENMETER_ARTIFACTS_DIR/status-page.png and
// status-page-dark.png (CTest: <build>/artifacts/).
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
// What one step of a chart's axis is in the document's unit, by the axis' label.
const AXIS_UNITS = { ms: 1000, 'tokens/s': 1, '× budget': 1 };
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
    charts: [...document.querySelectorAll('#charts svg')].map((svg) => {
      const number = (e, name) => Number(e.getAttribute(name));
      const frame = svg.querySelector('rect.frame');
      const threshold = svg.querySelector('line.threshold');
      return {
        title: svg.querySelector('title').textContent,
        labelledBy: svg.getAttribute('aria-labelledby') === svg.querySelector('title').id,
        role: svg.getAttribute('role'),
        unit: svg.querySelector('text.unit').textContent,
        frame: { x: number(frame, 'x'), y: number(frame, 'y'), width: number(frame, 'width'),
          height: number(frame, 'height') },
        ticks: [...svg.querySelectorAll('text.tick.y')].map((t) => ({ label: t.textContent, y: number(t, 'y') })),
        threshold: threshold && { value: Number(threshold.dataset.threshold), y: number(threshold, 'y1') },
        series: [...svg.querySelectorAll('g.series')].map((g) => ({
          path: JSON.parse(g.dataset.series),
          d: g.querySelector('path').getAttribute('d'),
          dots: [...g.querySelectorAll('circle')].map((c) => [number(c, 'cx'), number(c, 'cy')]),
        })),
      };
    }),
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

  // The charts: each line is its series in the same document, point for point on the chart's
  // axis: one dot per value (none for null), x at the end of its step, y by the tick labels.
  assert.equal(doc.series.points, 30);
  assert.equal(doc.series.step_seconds, 30);
  const modelCharts = shown.charts.filter((c) => c.series.some((s) => s.path[1] === 0));
  assert.deepEqual(modelCharts.map((c) => c.unit), ['ms', 'ms', 'tokens/s', '× budget']);
  let heights = 0;
  for (const c of shown.charts) {
    assert.equal(c.role, 'img');
    assert.ok(c.labelledBy, 'the chart is labelled by its <title>');
    const factor = AXIS_UNITS[c.unit];
    assert.ok(factor, `axis unit ${c.unit}`);
    const bottom = c.frame.y + c.frame.height;
    // Ticks from 0 at the bottom to the top tick at the top, evenly.
    const tickValues = c.ticks.map((t) => Number(t.label));
    assert.equal(tickValues[0], 0);
    const top = tickValues[tickValues.length - 1];
    const yOf = (axisValue) => bottom - (axisValue / top) * c.frame.height;
    for (const [i, t] of c.ticks.entries()) {
      assert.ok(Math.abs(t.y - yOf(tickValues[i])) < 0.06, `tick ${t.label} at ${t.y}`);
    }
    if (c.threshold) {
      assert.ok(Math.abs(c.threshold.y - yOf(c.threshold.value * factor)) < 0.06, 'threshold');
    }
    const drawn = [];
    for (const line of c.series) {
      const values = lookup(doc, line.path);
      assert.equal(values.length, doc.series.points, JSON.stringify(line.path));
      const expected = [];
      values.forEach((v, i) => {
        if (v !== null) {
          expected.push([c.frame.x + (c.frame.width * (i + 1)) / values.length, yOf(v * factor), v, i]);
        }
      });
      assert.equal(line.dots.length, expected.length, `points of ${JSON.stringify(line.path)}`);
      expected.forEach(([x, y, v], k) => {
        const [cx, cy] = line.dots[k];
        assert.ok(Math.abs(cx - x) < 0.06 && Math.abs(cy - y) < 0.06,
          `${JSON.stringify(line.path)} value ${v}: drawn at ${cx},${cy}, axis says ${x},${y}`);
        assert.ok(cy >= c.frame.y - 0.06 && cy <= bottom + 0.06, 'inside the plot');
        drawn.push({ v: v * factor, cy });
      });
      // The line joins the dots, broken where a value is null.
      const steps = [...line.d.matchAll(/([ML])([\d.]+) ([\d.]+)/g)];
      assert.deepEqual(steps.map((m) => [Number(m[2]), Number(m[3])]), line.dots);
      assert.deepEqual(steps.map((m) => m[1]),
        expected.map(([, , , i], k) => (k > 0 && expected[k - 1][3] === i - 1 ? 'L' : 'M')));
      // The title states the latest value.
      const latest = values.filter((v) => v !== null).pop();
      if (latest !== undefined) {
        const format = c.unit === 'ms' ? 'ms' : 'rate';
        assert.ok(c.title.includes(`${show(latest, format)} ${c.unit}`), `${c.title} has ${latest}`);
      }
    }
    // Relative heights: a larger value is drawn higher, equal values at the same height.
    for (const a of drawn) {
      for (const b of drawn) {
        if (a.v > b.v) assert.ok(a.cy < b.cy);
        if (a.v === b.v) assert.ok(Math.abs(a.cy - b.cy) < 0.06);
      }
    }
    heights += new Set(drawn.map((p) => p.cy)).size > 1 ? 1 : 0;
  }
  // The upstream reset spends the availability budget: at least that chart has two heights.
  assert.ok(heights >= 1, 'a chart with values of different heights');
  const burnTitle = modelCharts[3].title;
  assert.match(burnTitle, /^SLO burn rate \(5m window\), last 15 minutes; latest: TTFT .* availability .*; threshold 1$/);

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
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    // Chart text (WCAG AA for text: 4.5) and lines (non-text: 3) against the chart's background.
    const contrast = await page.evaluate(() => {
      const rgb = (text) => text.match(/[\d.]+/g).slice(0, 3).map(Number);
      const luminance = (c) => {
        const [r, g, b] = rgb(c).map((v) => {
          const s = v / 255;
          return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const ratio = (a, b) => {
        const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
        return (hi + 0.05) / (lo + 0.05);
      };
      const figure = document.querySelector('#charts figure');
      const background = getComputedStyle(figure).backgroundColor;
      const style = (selector, property) => getComputedStyle(figure.querySelector(selector))[property];
      return {
        tick: ratio(style('text.tick', 'fill'), background),
        title: ratio(getComputedStyle(figure.querySelector('.chart-title')).color, background),
        lines: [...document.querySelectorAll('#charts g.series path, #charts line.threshold')]
          .map((e) => ratio(getComputedStyle(e).stroke, background)),
      };
    });
    assert.ok(contrast.tick >= 4.5, `${scheme}: tick labels ${contrast.tick.toFixed(2)}:1`);
    assert.ok(contrast.title >= 4.5, `${scheme}: chart title ${contrast.title.toFixed(2)}:1`);
    for (const line of contrast.lines) {
      assert.ok(line >= 3, `${scheme}: a chart line at ${line.toFixed(2)}:1`);
    }
    const screenshot = path.join(ARTIFACTS, scheme === 'light' ? 'status-page.png' : 'status-page-dark.png');
    await page.screenshot({ path: screenshot, fullPage: true });
    console.log(`status page screenshot (${scheme}): ${screenshot}`);
  }
});
