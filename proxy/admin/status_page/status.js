// The tokenmeter status page: fetches /status.json (docs/status.md) every 2 s and renders it.
// Everything from the document is inserted with textContent, never as markup. Each number cell
// carries the JSON path of its value (data-path) and its format (data-format), each line of a
// chart the JSON path of its series (data-series), and the root element the sequence of the
// snapshot on screen (data-sequence), so a test can compare the page with the document it came
// from. Charts are SVG drawn here, styled only by status.css (the CSP allows no inline style).
'use strict';

(function () {
  const REFRESH_MS = 2000;
  // A burn rate above 1 spends the error budget faster than the SLO period allows: the SLO table
  // marks it and the burn rate chart draws it as a line.
  const BURN_THRESHOLD = 1;

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

  // The SLOs a model has: TTFT and TPOT with a target, availability with an objective.
  function sloKinds(model) {
    return ['ttft', 'tpot', 'availability'].filter((kind) => (kind === 'availability'
      ? model.slo.availability_objective !== undefined
      : model.slo.objective !== undefined && model.slo[kind + '_target_seconds'] !== null));
  }

  function renderSlo(doc) {
    const table = reset('slo');
    headRow(table, ['model', 'SLO', 'target ms', 'objective', 'good ratio 5m', 'burn rate 5m',
      'good ratio 1h', 'burn rate 1h']);
    let rows = 0;
    doc.models.forEach((model, i) => {
      for (const kind of sloKinds(model)) {
        const latency = kind !== 'availability';
        const objective = latency ? 'objective' : 'availability_objective';
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
            burn !== null && burn > BURN_THRESHOLD ? 'burning' : undefined));
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

  // Charts of the 15-minute series. Point i of n sits at the end of its step: x = (i + 1) / n of
  // the plot's width, so the right edge is now and the left edge 15 minutes ago. y is linear
  // from 0 at the bottom to the top tick.
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const CHART = { width: 320, height: 160, left: 46, right: 10, top: 20, bottom: 22 };
  const PLOT_WIDTH = CHART.width - CHART.left - CHART.right;
  const PLOT_HEIGHT = CHART.height - CHART.top - CHART.bottom;
  let chartCount = 0;

  function svgElement(tag, attributes, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes || {})) {
      e.setAttribute(name, String(value));
    }
    if (text !== undefined) {
      e.textContent = text;
    }
    return e;
  }

  // Ticks of 1, 2 or 5 times a power of ten, at most 4 above 0, the top one at or above max.
  function yScale(max) {
    const wanted = (max > 0 ? max : 1) / 4;
    const power = 10 ** Math.floor(Math.log10(wanted));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= wanted * (1 - 1e-9));
    const ticks = [];
    for (let i = 0; i <= 4; i += 1) {
      ticks.push(Number((i * step).toPrecision(6)));
      if (i * step >= max * (1 - 1e-9)) {
        break;
      }
    }
    return ticks;
  }

  const lastValue = (values) => values.filter((v) => v !== null).pop();

  // spec: title, unit (the y axis' label), scale (document value → axis value), format (the
  // page's format of a document value), lines [{ label, path }], threshold (document value).
  function chart(doc, spec) {
    const figure = element('figure', undefined, 'chart');
    const lines = spec.lines.map((line) => ({ ...line, values: lookup(doc, line.path) || [] }));
    const shown = lines.map((line) => line.values.filter((v) => v !== null))
      .flat().map((v) => v * spec.scale);
    if (spec.threshold !== undefined) {
      shown.push(spec.threshold * spec.scale);
    }
    const ticks = yScale(Math.max(0, ...shown));
    const top = ticks[ticks.length - 1];
    const y = (v) => CHART.top + PLOT_HEIGHT * (1 - (v * spec.scale) / top);
    const points = doc.series.points;
    const x = (i) => CHART.left + (PLOT_WIDTH * (i + 1)) / points;

    const latest = lines.map((line) => {
      const v = lastValue(line.values);
      return line.label + ' ' + (v === undefined ? 'none' : show(v, spec.format) + ' ' + spec.unit);
    });
    const description = spec.title + ', last 15 minutes; latest: ' + latest.join(', ') +
      (spec.threshold !== undefined ? '; threshold ' + spec.threshold : '');
    chartCount += 1;
    const svg = svgElement('svg', {
      viewBox: `0 0 ${CHART.width} ${CHART.height}`, role: 'img',
      'aria-labelledby': 'chart-title-' + chartCount,
    });
    svg.appendChild(svgElement('title', { id: 'chart-title-' + chartCount }, description));
    svg.appendChild(svgElement('rect', {
      class: 'frame', x: CHART.left, y: CHART.top, width: PLOT_WIDTH, height: PLOT_HEIGHT,
    }));
    for (const tick of ticks) {
      const ty = (CHART.top + PLOT_HEIGHT * (1 - tick / top)).toFixed(1);
      svg.appendChild(svgElement('line', {
        class: 'grid', x1: CHART.left, x2: CHART.left + PLOT_WIDTH, y1: ty, y2: ty,
      }));
      svg.appendChild(svgElement('text', {
        class: 'tick y', x: CHART.left - 4, y: ty, 'text-anchor': 'end',
        'dominant-baseline': 'middle',
      }, String(tick)));
    }
    svg.appendChild(svgElement('text', { class: 'unit', x: 2, y: 11 }, spec.unit));
    for (const minutes of [15, 10, 5, 0]) {
      svg.appendChild(svgElement('text', {
        class: 'tick x', x: (CHART.left + PLOT_WIDTH * (1 - minutes / 15)).toFixed(1),
        y: CHART.height - 6, 'text-anchor': minutes === 15 ? 'start' : minutes === 0 ? 'end' : 'middle',
      }, minutes === 0 ? 'now' : '−' + minutes + ' min'));
    }
    if (spec.threshold !== undefined) {
      const ty = y(spec.threshold).toFixed(1);
      svg.appendChild(svgElement('line', {
        class: 'threshold', x1: CHART.left, x2: CHART.left + PLOT_WIDTH, y1: ty, y2: ty,
        'data-threshold': spec.threshold,
      }));
    }
    lines.forEach((line, n) => {
      const group = svgElement('g', { class: 'series s' + n, 'data-series': JSON.stringify(line.path) });
      let d = '';
      line.values.forEach((v, i) => {
        if (v === null) {
          return;
        }
        const px = x(i).toFixed(1);
        const py = y(v).toFixed(1);
        d += (i > 0 && line.values[i - 1] !== null ? ' L' : ' M') + px + ' ' + py;
        group.appendChild(svgElement('circle', { cx: px, cy: py, r: 2 }));
      });
      group.insertBefore(svgElement('path', { d: d.trim() }), group.firstChild);
      svg.appendChild(group);
    });
    if (shown.length === (spec.threshold !== undefined ? 1 : 0)) {
      svg.appendChild(svgElement('text', {
        class: 'empty', x: CHART.left + PLOT_WIDTH / 2, y: CHART.top + PLOT_HEIGHT / 2,
        'text-anchor': 'middle',
      }, 'no requests'));
    }
    figure.appendChild(svg);
    const caption = element('figcaption');
    caption.appendChild(element('span', spec.title, 'chart-title'));
    lines.forEach((line, n) => {
      const key = element('span', undefined, 'key');
      key.appendChild(element('span', undefined, 'swatch s' + n));
      key.appendChild(document.createTextNode(line.label));
      caption.appendChild(key);
    });
    if (spec.threshold !== undefined) {
      const key = element('span', undefined, 'key');
      key.appendChild(element('span', undefined, 'swatch threshold'));
      key.appendChild(document.createTextNode('threshold ' + spec.threshold));
      caption.appendChild(key);
    }
    figure.appendChild(caption);
    return figure;
  }

  // Per model: TTFT and ITL p50/p99, output tokens per second by source (those counted), and
  // the burn rate of each SLO the model has against BURN_THRESHOLD.
  function renderCharts(doc) {
    const charts = document.getElementById('charts');
    charts.replaceChildren();
    chartCount = 0;
    document.getElementById('series-step').textContent = String(doc.series.step_seconds);
    if (doc.models.length === 0) {
      charts.appendChild(element('p', 'no requests yet', 'empty'));
    }
    doc.models.forEach((model, i) => {
      const base = ['models', i, 'series'];
      const row = element('div', undefined, 'chart-row');
      row.appendChild(element('h3', model.model));
      for (const [metric, title] of [['ttft', 'TTFT'], ['itl', 'ITL']]) {
        row.appendChild(chart(doc, {
          title, unit: 'ms', scale: 1000, format: 'ms',
          lines: ['p50', 'p99'].map((q) => ({ label: q, path: [...base, metric, q] })),
        }));
      }
      const counted = ['reported', 'native', 'normalized'].filter((source) =>
        model.series.tokens_per_second[source].some((v) => v !== null && v > 0));
      row.appendChild(chart(doc, {
        title: 'Output tokens/s', unit: 'tokens/s', scale: 1, format: 'rate',
        lines: (counted.length > 0 ? counted : ['reported']).map((source) =>
          ({ label: source, path: [...base, 'tokens_per_second', source] })),
      }));
      const slos = sloKinds(model);
      if (slos.length > 0) {
        row.appendChild(chart(doc, {
          title: 'SLO burn rate (' + doc.series.burn_rate_window + ' window)', unit: '× budget',
          scale: 1, format: 'rate', threshold: BURN_THRESHOLD,
          lines: slos.map((kind) => ({
            label: kind === 'availability' ? kind : kind.toUpperCase(),
            path: [...base, 'burn_rate', kind],
          })),
        }));
      }
      charts.appendChild(row);
    });
  }

  function render(doc) {
    document.getElementById('error-bound').textContent =
      (doc.relative_error * 100).toFixed(2) + ' %';
    renderCards(doc);
    renderCharts(doc);
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
