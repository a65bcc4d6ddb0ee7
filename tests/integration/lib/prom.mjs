// A small parser for the Prometheus text exposition format 0.0.4, enough to read counters,
// gauges and histograms by name and labels in tests.
//
//   const m = parseProm(text);
//   m.value('tokenmeter_requests_total', { model: 'x', outcome: 'complete' })  // sum over matches, 0 if none
//   m.has('tokenmeter_requests_total', { model: 'x' })                        // any sample matches
//   m.histogram('tokenmeter_time_to_first_token_seconds', { model: 'x' })
//     // → { count, sum, buckets: [{le, count}] (cumulative, ascending, le may be Infinity),
//     //     bucket(le) → cumulative count at that boundary }
//
// Label matching is by subset: the given labels must all be equal, others are ignored.
//
// The one exposition parser of the JavaScript tests (read /metrics through this, not with
// regular expressions). Its C++ counterpart is tests/bench/prom_text, for the load tool; both
// are held to the same fixture, tests/fixtures/prometheus/exposition.prom (prom.test.mjs here).

function parseValue(text) {
  if (text === '+Inf' || text === 'Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return NaN;
  const value = Number(text);
  if (Number.isNaN(value)) throw new Error(`bad sample value '${text}'`);
  return value;
}

function parseLabels(text, lineForErrors) {
  // text is what is between { and } (exclusive).
  const labels = {};
  let i = 0;
  while (i < text.length) {
    while (i < text.length && (text[i] === ',' || text[i] === ' ')) i++;
    if (i >= text.length) break;
    const eq = text.indexOf('=', i);
    if (eq < 0 || text[eq + 1] !== '"') throw new Error(`bad labels in: ${lineForErrors}`);
    const name = text.slice(i, eq).trim();
    let j = eq + 2;
    let value = '';
    for (;;) {
      if (j >= text.length) throw new Error(`unterminated label value in: ${lineForErrors}`);
      const c = text[j];
      if (c === '\\') {
        const next = text[j + 1];
        value += next === 'n' ? '\n' : next;
        j += 2;
      } else if (c === '"') {
        j += 1;
        break;
      } else {
        value += c;
        j += 1;
      }
    }
    labels[name] = value;
    i = j;
  }
  return labels;
}

function matches(labels, wanted) {
  for (const [key, value] of Object.entries(wanted || {})) {
    if (labels[key] !== String(value)) return false;
  }
  return true;
}

export function parseProm(text) {
  const samples = [];
  const types = new Map();
  for (const rawLine of String(text).split('\n')) {
    const line = rawLine.trim();
    if (!line) continue;
    if (line.startsWith('#')) {
      const typeMatch = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (typeMatch) types.set(typeMatch[1], typeMatch[2]);
      continue;
    }
    let name;
    let labels = {};
    let rest;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    if (brace >= 0 && (space < 0 || brace < space)) {
      name = line.slice(0, brace);
      // Find the closing brace outside quoted values.
      let k = brace + 1;
      let inQuotes = false;
      for (; k < line.length; k++) {
        const c = line[k];
        if (inQuotes && c === '\\') { k++; continue; }
        if (c === '"') inQuotes = !inQuotes;
        else if (c === '}' && !inQuotes) break;
      }
      labels = parseLabels(line.slice(brace + 1, k), line);
      rest = line.slice(k + 1).trim();
    } else {
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
    }
    const value = parseValue(rest.split(/\s+/)[0]);
    samples.push({ name, labels, value });
  }

  const select = (name, wanted) => samples.filter((s) => s.name === name && matches(s.labels, wanted));

  return {
    samples,
    types,
    select,
    has: (name, wanted) => select(name, wanted).length > 0,
    // Sum of every matching sample; 0 when none matches (a counter never incremented).
    value: (name, wanted) => select(name, wanted).reduce((acc, s) => acc + s.value, 0),
    histogram(name, wanted) {
      const count = select(`${name}_count`, wanted).reduce((acc, s) => acc + s.value, 0);
      const sum = select(`${name}_sum`, wanted).reduce((acc, s) => acc + s.value, 0);
      const byLe = new Map();
      for (const s of select(`${name}_bucket`, wanted)) {
        const le = parseValue(s.labels.le);
        byLe.set(le, (byLe.get(le) || 0) + s.value);
      }
      const buckets = [...byLe.entries()].sort((a, b) => a[0] - b[0]).map(([le, c]) => ({ le, count: c }));
      return {
        count,
        sum,
        buckets,
        present: select(`${name}_count`, wanted).length > 0,
        bucket(le) {
          const found = buckets.find((b) => b.le === Number(le));
          if (!found) throw new Error(`${name}: no bucket le=${le}; have ${buckets.map((b) => b.le).join(',')}`);
          return found.count;
        },
      };
    },
  };
}
