// The tokenmeter status page: fetches /status.json (docs/status.md) every 2 s and renders it.
// Everything from the document is inserted with textContent, never as markup. Each number cell
// carries the JSON path of its value (data-path) and its format (data-format), and the root
// element the sequence of the snapshot on screen (data-sequence), so a test can compare the page
// with the document it came from.
'use strict';

(function () {
  const REFRESH_MS = 2000;

  const formats = {
    ms: (v) => (v * 1000).toFixed(2),
    int: (v) => String(v),
    rate: (v) => v.toFixed(2),
    ratio: (v) => v.toFixed(4),
    percent: (v) => (v * 100).toFixed(2) + ' %',
    seconds: (v) => v.toFixed(0) + ' s',
    time: (v) => new Date(v).toISOString(),
    text: (v) => String(v),
  };

  function show(value, format) {
    return value === null || value === undefined ? '–' : formats[format](value);
  }

  function lookup(doc, path) {
    let v = doc;
    for (const key of path) {
      if (v === null || v === undefined) {
        return undefined;
      }
      v = v[key];
    }
    return v;
  }

  function element(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined) {
      e.textContent = text;
    }
    if (className) {
      e.className = className;
    }
    return e;
  }

  // A cell showing the value at `path` of the document.
  function valueCell(doc, path, format, className) {
    const td = element('td', show(lookup(doc, path), format), className);
    td.dataset.path = JSON.stringify(path);
    td.dataset.format = format;
    return td;
  }

  const TEXT_COLUMNS = new Set(['model', 'window', 'SLO', 'tenant', 'time (UTC)', 'reason',
    'setting', 'value']);

  function headRow(table, names) {
    const tr = element('tr');
    for (const name of names) {
      tr.appendChild(element('th', name, TEXT_COLUMNS.has(name) ? 'text' : undefined));
    }
    table.appendChild(tr);
  }

  function emptyRow(table, columns, text) {
    const tr = element('tr');
    const td = element('td', text, 'empty');
    td.colSpan = columns;
    tr.appendChild(td);
    table.appendChild(tr);
  }

  function reset(id) {
    const table = document.getElementById(id);
    table.replaceChildren();
    return table;
  }

  function renderCards(doc) {
    const cards = document.getElementById('cards');
    cards.replaceChildren();
    const card = (label, path, format) => {
      const div = element('div', undefined, 'card');
      div.appendChild(element('div', label, 'label'));
      const value = element('div', show(lookup(doc, path), format), 'value');
      value.dataset.path = JSON.stringify(path);
      value.dataset.format = format;
      div.appendChild(value);
      cards.appendChild(div);
    };
    card('active streams', ['streams_active'], 'int');
    card('models', ['models', 'length'], 'int');
    card('uptime', ['uptime_seconds'], 'seconds');
    card('version', ['build', 'version'], 'text');
  }

  // One row per model and window: the model's name, the window, then fill(tr, index, window).
  function modelWindowRows(doc, table, columns, fill) {
    if (doc.models.length === 0) {
      emptyRow(table, columns, 'no requests yet');
    }
    doc.models.forEach((model, i) => {
      for (const w of ['1m', '5m', '15m']) {
        const tr = element('tr', undefined, w === '1m' ? 'group' : undefined);
        tr.appendChild(element('td', w === '1m' ? model.model : ''));
        tr.appendChild(element('td', w, 'text'));
        fill(tr, i, w);
        table.appendChild(tr);
      }
    });
  }

  function renderLatency(doc) {
    const table = reset('latency');
    headRow(table, ['model', 'window', 'requests', 'TTFT p50', 'TTFT p99', 'ITL p50', 'ITL p99',
      'TPOT p50', 'TPOT p99']);
    modelWindowRows(doc, table, 9, (tr, i, w) => {
      const base = ['models', i, 'latency', w];
      tr.appendChild(valueCell(doc, [...base, 'requests'], 'int'));
      for (const metric of ['ttft', 'itl', 'tpot']) {
        tr.appendChild(valueCell(doc, [...base, metric, 'p50'], 'ms'));
        tr.appendChild(valueCell(doc, [...base, metric, 'p99'], 'ms'));
      }
    });
  }

  function renderThroughput(doc) {
    const table = reset('throughput');
    headRow(table, ['model', 'window', 'reported', 'native', 'normalized', 'output tokens (reported)']);
    modelWindowRows(doc, table, 6, (tr, i, w) => {
      const base = ['models', i, 'throughput', w];
      for (const source of ['reported', 'native', 'normalized']) {
        tr.appendChild(valueCell(doc, [...base, 'tokens_per_second', source], 'rate'));
      }
      tr.appendChild(valueCell(doc, [...base, 'output_tokens', 'reported'], 'int'));
    });
  }

  function renderSlo(doc) {
    const table = reset('slo');
    headRow(table, ['model', 'SLO', 'target ms', 'objective', 'good ratio 5m', 'burn rate 5m',
      'good ratio 1h', 'burn rate 1h']);
    let rows = 0;
    doc.models.forEach((model, i) => {
      for (const kind of ['ttft', 'tpot', 'availability']) {
        const latency = kind !== 'availability';
        const objective = latency ? 'objective' : 'availability_objective';
        if (model.slo[objective] === undefined ||
            (latency && model.slo[kind + '_target_seconds'] === null)) {
          continue;
        }
        const tr = element('tr');
        tr.appendChild(element('td', model.model));
        tr.appendChild(element('td', latency ? kind.toUpperCase() : kind, 'text'));
        tr.appendChild(latency
          ? valueCell(doc, ['models', i, 'slo', kind + '_target_seconds'], 'ms')
          : element('td', '—', 'text'));
        tr.appendChild(valueCell(doc, ['models', i, 'slo', objective], 'percent'));
        for (const w of ['5m', '1h']) {
          tr.appendChild(valueCell(doc, ['models', i, 'slo', kind, w, 'good_ratio'], 'ratio'));
          const burn = model.slo[kind][w].burn_rate;
          tr.appendChild(valueCell(doc, ['models', i, 'slo', kind, w, 'burn_rate'], 'rate',
            burn !== null && burn > 1 ? 'burning' : undefined));
        }
        table.appendChild(tr);
        rows += 1;
      }
    });
    if (rows === 0) {
      emptyRow(table, 8, 'no SLO configured for the models seen');
    }
  }

  function renderTenants(doc, id, list) {
    const table = reset(id);
    headRow(table, ['tenant', 'tokens', '429s']);
    doc.tenants[list].forEach((tenant, i) => {
      const tr = element('tr');
      tr.appendChild(valueCell(doc, ['tenants', list, i, 'tenant'], 'text', 'text'));
      tr.appendChild(valueCell(doc, ['tenants', list, i, 'tokens'], 'int'));
      tr.appendChild(valueCell(doc, ['tenants', list, i, 'rate_limited'], 'int'));
      table.appendChild(tr);
    });
    if (doc.tenants[list].length === 0) {
      emptyRow(table, 3, 'none');
    }
  }

  function renderErrors(doc) {
    const table = reset('errors');
    headRow(table, ['time (UTC)', 'reason']);
    doc.upstream_errors.recent.forEach((entry, i) => {
      const tr = element('tr');
      tr.appendChild(valueCell(doc, ['upstream_errors', 'recent', i, 'at_unix_ms'], 'time', 'text'));
      tr.appendChild(valueCell(doc, ['upstream_errors', 'recent', i, 'reason'], 'text', 'text'));
      table.appendChild(tr);
    });
    if (doc.upstream_errors.recent.length === 0) {
      emptyRow(table, 2, 'none since start');
    }
  }

  function renderConfig(doc) {
    const table = reset('config');
    headRow(table, ['setting', 'value']);
    for (const key of Object.keys(doc.config)) {
      const tr = element('tr');
      tr.appendChild(element('td', key));
      tr.appendChild(valueCell(doc, ['config', key], 'text', 'text'));
      table.appendChild(tr);
    }
  }

  function render(doc) {
    document.getElementById('error-bound').textContent =
      (doc.relative_error * 100).toFixed(2) + ' %';
    renderCards(doc);
    renderLatency(doc);
    renderThroughput(doc);
    renderSlo(doc);
    renderTenants(doc, 'tenants-tokens', 'by_tokens');
    renderTenants(doc, 'tenants-429', 'by_rate_limited');
    renderErrors(doc);
    renderConfig(doc);
    const state = document.getElementById('state');
    state.className = 'state';
    state.textContent = 'updated ' + new Date(doc.generated_at_unix_ms).toISOString() +
      ' (snapshot ' + doc.sequence + ')';
    document.documentElement.dataset.sequence = String(doc.sequence);
  }

  async function refresh() {
    try {
      const response = await fetch('/status.json', { cache: 'no-store' });
      if (!response.ok) {
        throw new Error('HTTP ' + response.status);
      }
      render(await response.json());
    } catch (e) {
      const state = document.getElementById('state');
      state.className = 'state stale';
      state.textContent = 'cannot read /status.json (' + e.message + '); showing the last data';
    } finally {
      setTimeout(refresh, REFRESH_MS);
    }
  }

  refresh();
})();
