// dashboards/: structure of the Grafana dashboards (valid JSON, unique panel ids, the data-source
// variable on every panel and query, a model variable, tenant and task variables where queries
// use them, task panels that never average two tasks or two models together,
// panels inside the 24-column grid without overlaps), the checked-in JSON equal to what
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
