// dashboards/: structure of the Grafana dashboards (valid JSON, unique panel ids, the data-source
// variable on every panel and query, a model variable, tenant and task variables where queries
// use them, task panels that never average two tasks or two models together,
// panels inside the 24-column grid without overlaps), legends that name every label their query
// groups by, quantiles and ratios that never add deployments or models together, tables from
// instant queries with units, the SLO good share against the configured objective, no range
// beyond a 10-day retention by default, the checked-in JSON equal to what
// generate.mjs produces, and provisioning files that point at the dashboards. Whether every query
// returns data is tests/integration/dashboards.test.mjs (a real Prometheus).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const dir = path.join(root, 'dashboards');
const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

test('there are the four dashboards', () => {
  assert.deepEqual(files.sort(), ['tokenmeter-fleet.json', 'tokenmeter-proxy.json',
    'tokenmeter-slo.json', 'tokenmeter-tenants.json']);
});

test('the checked-in JSON is what generate.mjs produces', () => {
  const r = spawnSync(process.execPath, [path.join(dir, 'generate.mjs'), '--check'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
});

const uids = new Set();
for (const file of files) {
  test(`${file}: structure`, () => {
    const d = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    assert.ok(d.uid && !uids.has(d.uid), `unique uid, got ${d.uid}`);
    uids.add(d.uid);
    assert.ok(d.title.startsWith('tokenmeter / '));
    const vars = new Map(d.templating.list.map((v) => [v.name, v]));
    assert.equal(vars.get('datasource')?.type, 'datasource');
    assert.equal(vars.get('datasource').query, 'prometheus');
    assert.equal(vars.get('model')?.type, 'query', 'a model variable');
    assert.equal(vars.get('model').datasource.uid, '${datasource}');
    assert.equal(vars.get('model').allValue, '.+');

    const ids = new Set();
    const cells = new Set();
    let usesTenant = false;
    let usesTask = false;
    assert.ok(d.panels.length >= 8, `${d.panels.length} panels`);
    for (const p of d.panels) {
      assert.ok(Number.isInteger(p.id) && !ids.has(p.id), `unique panel id ${p.id}`);
      ids.add(p.id);
      assert.deepEqual(p.datasource, { type: 'prometheus', uid: '${datasource}' }, `panel ${p.title}`);
      assert.ok(p.targets.length > 0, `panel ${p.title} has queries`);
      for (const t of p.targets) {
        assert.equal(t.datasource.uid, '${datasource}', `panel ${p.title} ${t.refId}`);
        assert.match(t.expr, /tokenmeter|\bup\b/, `panel ${p.title} queries tokenmeter metrics`);
        // Exemplars on every quantile of a histogram whose buckets carry them, and nowhere else.
        const carriesExemplars = p.type === 'timeseries' && t.expr.startsWith('histogram_quantile(') &&
          /tokenmeter_(time_to_first_token|inter_token_latency|time_per_output_token|request_duration)_seconds_bucket/.test(t.expr);
        assert.equal(t.exemplar === true, carriesExemplars, `panel ${p.title} ${t.refId}: exemplars`);
        if (t.expr.includes('$tenant')) usesTenant = true;
        if (t.expr.includes('$task')) usesTask = true;
        // Every variable a query uses is defined (Grafana's own $__ variables aside).
        for (const [, name] of t.expr.matchAll(/\$(\w+)/g)) {
          assert.ok(name.startsWith('__') || vars.has(name), `panel ${p.title}: $${name} is not defined`);
        }
      }
      const { x, y, w, h } = p.gridPos;
      assert.ok(x >= 0 && w > 0 && x + w <= 24 && h > 0, `panel ${p.title} fits the grid`);
      for (let i = x; i < x + w; i++) {
        for (let j = y; j < y + h; j++) {
          assert.ok(!cells.has(`${i},${j}`), `panel ${p.title} overlaps another`);
          cells.add(`${i},${j}`);
        }
      }
    }
    assert.equal(vars.has('tenant'), usesTenant, 'a tenant variable exactly where queries use $tenant');
    assert.equal(vars.has('task'), usesTask, 'a task variable exactly where queries use $task');
  });
}

// The labels a query's result is split by: those of every "by (...)" and "on (...)" clause
// (le only feeds histogram_quantile). Queries here never aggregate a second time above them.
const groupingLabels = (expr) => new Set([...expr.matchAll(/\b(?:by|on) \(([^)]*)\)/g)]
  .flatMap((m) => m[1].split(',').map((l) => l.trim())).filter((l) => l && l !== 'le'));
const allTargets = () => files.flatMap((file) => {
  const d = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
  return d.panels.flatMap((p) => p.targets.map((t) => ({ file, panel: p, target: t })));
});

test('groupingLabels reads the labels of by and on clauses', () => {
  assert.deepEqual([...groupingLabels('histogram_quantile(0.9, sum by (cluster, job, model, le) (rate(x[5m])))')],
    ['cluster', 'job', 'model']);
  assert.deepEqual([...groupingLabels('a{x="1"} / on (job, slo) (1 - b)')], ['job', 'slo']);
  assert.deepEqual([...groupingLabels('sum(up{job="tokenmeter"})')], []);
});

test('every legend names every label its query groups by, so no two series draw alike', () => {
  let checked = 0;
  for (const { file, panel: p, target: t } of allTargets()) {
    // A table shows every label as a column of its own.
    if (t.format === 'table') continue;
    for (const label of groupingLabels(t.expr)) {
      assert.ok(t.legendFormat.includes(`{{${label}}}`),
        `${file} "${p.title}" ${t.refId}: legend "${t.legendFormat}" lacks {{${label}}} of ${t.expr}`);
    }
    checked += 1;
  }
  assert.ok(checked > 50, `${checked} legends checked`);
});

test('no quantile and no ratio adds two deployments or two models together', () => {
  for (const { file, panel: p, target: t } of allTargets()) {
    const aggregations = [...t.expr.matchAll(/\b(?:sum|max|min) by \(([^)]*)\)/g)].map((m) => m[1]);
    const quantile = t.expr.includes('histogram_quantile(');
    if (!quantile && !t.expr.includes(' / ')) continue;
    assert.ok(aggregations.length > 0 || !/\bsum\(/.test(t.expr), `${file} "${p.title}": ${t.expr}`);
    for (const by of aggregations) {
      const labels = by.split(',').map((l) => l.trim());
      for (const keep of ['cluster', 'namespace', 'job']) {
        assert.ok(labels.includes(keep), `${file} "${p.title}": "by (${by})" drops ${keep} in ${t.expr}`);
      }
      if (quantile) assert.ok(labels.includes('model'), `${file} "${p.title}": a quantile over models: ${t.expr}`);
    }
  }
});

test('tables are fed by instant queries, each value column with its unit', () => {
  const tables = allTargets().filter(({ panel: p }) => p.type === 'table');
  assert.ok(tables.length > 0, 'a table panel');
  for (const { file, panel: p, target: t } of tables) {
    assert.equal(t.instant, true, `${file} "${p.title}" ${t.refId}: instant`);
    assert.equal(t.range, false, `${file} "${p.title}" ${t.refId}: not a range query`);
    assert.equal(t.format, 'table', `${file} "${p.title}" ${t.refId}: table format`);
    const override = p.fieldConfig.overrides.find((o) => o.matcher.options === `Value #${t.refId}`);
    const unit = override?.properties.find((q) => q.id === 'unit')?.value;
    assert.ok(unit && unit !== 'short', `${file} "${p.title}" ${t.refId}: value column unit ${unit}`);
  }
});

test('the SLO good share is judged against the configured objective, not a fixed number', () => {
  const d = JSON.parse(readFileSync(path.join(dir, 'tokenmeter-slo.json'), 'utf8'));
  const stats = d.panels.filter((p) => p.type === 'stat' && p.targets.some((t) => t.expr.includes('result="good"')));
  assert.ok(stats.length > 0, 'a good-share stat');
  for (const p of stats) {
    for (const t of p.targets) assert.match(t.expr, /tokenmeter_slo_objective_ratio/, `${p.title}: ${t.expr}`);
    const steps = p.fieldConfig.defaults.thresholds.steps.map((x) => x.value).filter((v) => v !== null);
    assert.deepEqual(steps, [0], `${p.title}: thresholds relative to the objective`);
  }
});

// kube-prometheus-stack keeps 10 days by default: a longer range silently covers only those.
test('no query reaches further back than a 10-day retention by default', () => {
  const days = (v) => { const m = /^(\d+)d$/.exec(v); return m ? Number(m[1]) : 0; };
  for (const file of files) {
    const d = JSON.parse(readFileSync(path.join(dir, file), 'utf8'));
    const window = d.templating.list.find((v) => v.name === 'slo_window');
    if (window) assert.ok(days(window.current.value) <= 10, `${file}: slo_window defaults to ${window.current.value}`);
    for (const p of d.panels) {
      for (const t of p.targets) {
        for (const [, n] of t.expr.matchAll(/\[(\d+)d\]/g)) {
          assert.ok(Number(n) <= 10, `${file} "${p.title}": a ${n}-day range in ${t.expr}`);
        }
      }
    }
  }
});

test('the task panels compare models per task: every task query keeps model and task apart', () => {
  const d = JSON.parse(readFileSync(path.join(dir, 'tokenmeter-fleet.json'), 'utf8'));
  const exprs = d.panels.flatMap((p) => p.targets.map((t) => t.expr)).filter((e) => e.includes('tokenmeter_task_'));
  assert.ok(exprs.length >= 7, `${exprs.length} task queries`);
  for (const e of exprs) {
    assert.match(e, /task=~"\$task"/, e);
    for (const [, by] of e.matchAll(/sum by \(([^)]*)\)/g)) {
      const labels = by.split(',').map((x) => x.trim());
      assert.ok(labels.includes('model') && labels.includes('task'), `aggregation by (${by}) in ${e}`);
    }
  }
});

test('provisioning loads the dashboards folder and the demo data source', () => {
  const provider = readFileSync(path.join(dir, 'provisioning/dashboards/tokenmeter.yaml'), 'utf8');
  assert.match(provider, /type: file/);
  assert.match(provider, /path: \/var\/lib\/grafana\/dashboards\/tokenmeter/);
  const compose = readFileSync(path.join(root, 'docker/compose.yaml'), 'utf8');
  assert.match(compose, /\.\.\/dashboards:\/var\/lib\/grafana\/dashboards\/tokenmeter/);
  assert.match(compose, /\.\.\/dashboards\/provisioning:\/etc\/grafana\/provisioning/);
  const ds = readFileSync(path.join(dir, 'provisioning/datasources/prometheus.yaml'), 'utf8');
  assert.match(ds, /type: prometheus/);
  assert.match(ds, /url: http:\/\/prometheus:9090/);
});
