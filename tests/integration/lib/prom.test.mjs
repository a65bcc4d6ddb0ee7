// prom.mjs against the exposition fixture shared with the C++ parser of the load tool
// (tests/fixtures/prometheus/): both must read the same samples from the same text.
// Run by ctest as unit.prom_mjs (node --test, no proxy needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseProm } from './prom.mjs';

const fixtures = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'fixtures', 'prometheus');
const text = readFileSync(join(fixtures, 'exposition.prom'), 'utf8');
const expected = JSON.parse(readFileSync(join(fixtures, 'exposition.samples.json'), 'utf8'));

// The fixture writes +Inf, -Inf and NaN as strings (JSON has no such numbers).
const expectedValue = (v) => (v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : v === 'NaN' ? NaN : v);

test('reads every sample of the shared fixture', () => {
  const m = parseProm(text);
  assert.equal(m.samples.length, expected.samples.length);
  expected.samples.forEach((want, i) => {
    const got = m.samples[i];
    const where = `sample ${i}: ${JSON.stringify(want)}`;
    assert.equal(got.name, want.name, where);
    assert.deepEqual(got.labels, want.labels, where);
    // deepEqual treats NaN as equal to NaN (Object.is), as the fixture means.
    assert.deepEqual(got.value, expectedValue(want.value), where);
  });
});

test('reads every TYPE of the shared fixture', () => {
  const m = parseProm(text);
  assert.deepEqual(Object.fromEntries(m.types), expected.types);
});

test('value, has and histogram on the shared fixture', () => {
  const m = parseProm(text);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'llama' }), 10);
  assert.equal(m.value('tokenmeter_requests_total'), 12);
  assert.equal(m.value('tokenmeter_requests_total', { model: 'absent' }), 0);
  assert.ok(m.has('weird_labels', { msg: 'say "hi"\nbye' }));
  assert.ok(!m.has('weird_labels', { msg: 'say "hi"' }));
  const h = m.histogram('tokenmeter_time_to_first_token_seconds', { model: 'llama' });
  assert.equal(h.count, 10);
  assert.equal(h.sum, 0.55);
  assert.equal(h.bucket(0.05), 4);
  assert.equal(h.bucket(Infinity), 10);
  assert.deepEqual(h.buckets.map((b) => b.le), [0.025, 0.05, 0.1, Infinity]);
});
