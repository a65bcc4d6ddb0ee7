// deploy/prometheus: every alert routes (severity critical or warning, as kube-prometheus
// routing expects), links its own section of docs/runbooks.md, keeps cluster/namespace/job in
// every aggregation, and has a promtool test case. Needs `npm ci` in tests/deploy (yaml).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parse } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const rules = parse(readFileSync(path.join(root, 'deploy/prometheus/tokenmeter.rules.yml'), 'utf8'));
const runbooks = readFileSync(path.join(root, 'docs/runbooks.md'), 'utf8');
const alerts = rules.groups.flatMap((g) => g.rules).filter((r) => r.alert);
const recordings = rules.groups.flatMap((g) => g.rules).filter((r) => r.record);

// GitHub's anchor for a heading: lower case, spaces to dashes, punctuation dropped.
const anchors = new Set([...runbooks.matchAll(/^#{2,3} (.+)$/gm)]
  .map((m) => m[1].trim().toLowerCase().replace(/[^a-z0-9 -]/g, '').replace(/ /g, '-')));

test('there are alerts to check', () => {
  assert.ok(alerts.length >= 10, `${alerts.length} alerts`);
});

for (const a of alerts) {
  test(`${a.alert}: severity, runbook, aggregation`, () => {
    assert.match(a.labels.severity, /^(critical|warning)$/);
    const url = a.annotations.runbook_url;
    assert.ok(url, 'runbook_url');
    const [page, anchor] = url.split('#');
    assert.ok(page.endsWith('/docs/runbooks.md'), url);
    assert.equal(anchor, a.alert.toLowerCase());
    assert.ok(anchors.has(anchor), `docs/runbooks.md has no section "## ${a.alert}"`);
    const section = runbooks.split(/^## /m).find((s) => s.startsWith(`${a.alert}\n`));
    for (const part of ['**What it means.**', '**First queries.**', '**Likely causes.**', '**Fixes.**']) {
      assert.ok(section.includes(part), `${a.alert}: runbook section lacks ${part}`);
    }
    for (const by of a.expr.matchAll(/\b(?:sum|max|min) by \(([^)]*)\)/g)) {
      const labels = by[1].split(',').map((s) => s.trim());
      for (const keep of ['cluster', 'namespace', 'job']) {
        assert.ok(labels.includes(keep), `${a.alert}: "by (${by[1]})" drops ${keep}`);
      }
    }
  });
}

test('every recording rule keeps cluster, namespace and job', () => {
  for (const r of recordings) {
    for (const by of r.expr.matchAll(/\b(?:sum|max|min) by \(([^)]*)\)/g)) {
      const labels = by[1].split(',').map((s) => s.trim());
      for (const keep of ['cluster', 'namespace', 'job']) {
        assert.ok(labels.includes(keep), `${r.record}: "by (${by[1]})" drops ${keep}`);
      }
    }
  }
});

test('every alert has a promtool test that expects it to fire', () => {
  const dir = path.join(root, 'deploy/prometheus/tests');
  const fired = new Set();
  for (const f of readdirSync(dir)) {
    const doc = parse(readFileSync(path.join(dir, f), 'utf8'));
    for (const t of doc.tests) {
      for (const a of t.alert_rule_test || []) {
        if ((a.exp_alerts || []).length > 0) fired.add(a.alertname);
      }
    }
  }
  for (const a of alerts) {
    assert.ok(fired.has(a.alert), `no promtool case fires ${a.alert}`);
  }
});

test('every runbook section belongs to an alert', () => {
  const names = new Set(alerts.map((a) => a.alert.toLowerCase()));
  for (const m of runbooks.matchAll(/^## (.+)$/gm)) {
    assert.ok(names.has(m[1].trim().toLowerCase()), `runbook section ${m[1]} has no alert`);
  }
});
