// Generates the Grafana dashboards in this directory from one description, so that every panel
// follows the same conventions (datasource variable, model filter, units, ids). Run
//   node dashboards/generate.mjs          (rewrites dashboards/*.json)
//   node dashboards/generate.mjs --check  (exit 1 if a checked-in file differs; the tests do this)
// Plain Node 18+, no dependencies.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const DS = { type: 'prometheus', uid: '${datasource}' };
const M = 'model=~"$model"';
const RI = '$__rate_interval';

// ---- building blocks -------------------------------------------------------------------------

function datasourceVariable() {
  return {
    name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus',
    current: {}, hide: 0, refresh: 1, regex: '', options: [],
  };
}

function queryVariable(name, label, query) {
  return {
    name, label, type: 'query', datasource: DS,
    definition: query,
    query: { query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    refresh: 2, includeAll: true, multi: true, allValue: '.+', sort: 1, hide: 0, regex: '',
    current: { selected: true, text: ['All'], value: ['$__all'] }, options: [],
  };
}

const modelVariable = () =>
  queryVariable('model', 'Model', 'label_values(tokenmeter_requests_total{api!="none"}, model)');
const tenantVariable = () =>
  queryVariable('tenant', 'Tenant', 'label_values(tokenmeter_tenant_requests_total, tenant)');

function target(expr, legendFormat, refId) {
  return { datasource: DS, expr, legendFormat, range: true, instant: false, refId, editorMode: 'code' };
}

// One panel. targets: [[expr, legend], ...]. kind: timeseries | stat | table | bargauge.
function panel(title, description, targets, { unit = 'short', kind = 'timeseries', w = 12, h = 8,
  min, max, thresholds, stack = false } = {}) {
  const defaults = { unit };
  if (min !== undefined) defaults.min = min;
  if (max !== undefined) defaults.max = max;
  if (thresholds) {
    defaults.thresholds = { mode: 'absolute', steps: thresholds };
  }
  if (kind === 'timeseries') {
    defaults.custom = { drawStyle: 'line', lineWidth: 1, fillOpacity: stack ? 30 : 0, showPoints: 'never',
      stacking: { mode: stack ? 'normal' : 'none', group: 'A' } };
  }
  const options = kind === 'timeseries'
    ? { legend: { displayMode: 'table', placement: 'bottom', calcs: ['mean', 'max', 'lastNotNull'] },
        tooltip: { mode: 'multi', sort: 'desc' } }
    : kind === 'stat'
      ? { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false }, colorMode: 'value',
          graphMode: 'area', justifyMode: 'auto', textMode: 'auto', orientation: 'auto' }
      : kind === 'bargauge'
        ? { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
            displayMode: 'gradient', orientation: 'horizontal', showUnfilled: true }
        : { showHeader: true };
  return {
    type: kind, title, description, datasource: DS,
    targets: targets.map(([expr, legend], i) => target(expr, legend, String.fromCharCode(65 + i))),
    fieldConfig: { defaults, overrides: [] },
    options, w, h,
  };
}

const quantiles = (metric, by, legendPrefix = '') => [0.5, 0.9, 0.99].map((q) => [
  `histogram_quantile(${q}, sum by (${by}, le) (rate(${metric}_bucket{${M}}[${RI}])))`,
  `${legendPrefix}p${Math.round(q * 100)} {{${by.split(', ')[0]}}}`,
]);

// Lays panels out left to right, top to bottom, in a 24-column grid; ids in order.
function dashboard({ uid, title, description, variables, panels }) {
  let x = 0;
  let y = 0;
  let rowHeight = 0;
  const laidOut = panels.map((p, i) => {
    const { w, h, ...rest } = p;
    if (x + w > 24) {
      x = 0;
      y += rowHeight;
      rowHeight = 0;
    }
    const placed = { id: i + 1, gridPos: { x, y, w, h }, ...rest };
    x += w;
    rowHeight = Math.max(rowHeight, h);
    return placed;
  });
  return {
    uid, title, description, tags: ['tokenmeter'], editable: true, graphTooltip: 1,
    schemaVersion: 39, version: 1, refresh: '30s', timezone: 'browser',
    time: { from: 'now-3h', to: 'now' }, timepicker: {},
    annotations: { list: [] }, links: [
      { type: 'dashboards', tags: ['tokenmeter'], asDropdown: true, title: 'tokenmeter', includeVars: true, keepTime: true },
    ],
    templating: { list: variables },
    panels: laidOut,
  };
}

// ---- the dashboards --------------------------------------------------------------------------

const reported = 'count=~"reported|"';  // the server's usage; series without `count` predate it

const fleet = dashboard({
  uid: 'tokenmeter-fleet',
  title: 'tokenmeter / Fleet overview',
  description: 'Traffic, tokens and the latency users feel, per model.',
  variables: [datasourceVariable(), modelVariable()],
  panels: [
    panel('Requests per second', 'Metered requests by model, counted when they end.', [
      [`sum by (model) (rate(tokenmeter_requests_total{${M}, api!="none"}[${RI}]))`, '{{model}}'],
    ], { unit: 'reqps', w: 8 }),
    panel('Requests by outcome', 'complete, client_cancel, upstream_error, upstream_truncated, rejected.', [
      [`sum by (outcome) (rate(tokenmeter_requests_total{${M}, api!="none"}[${RI}]))`, '{{outcome}}'],
    ], { unit: 'reqps', w: 8, stack: true }),
    panel('Streams in flight', 'Responses being relayed right now, across all proxies.', [
      ['sum(tokenmeter_streams_active)', 'streams'],
    ], { w: 8 }),
    panel('Output tokens per second (reported by the server)', 'From the usage the model server reports.', [
      [`sum by (model) (rate(tokenmeter_tokens_total{${M}, type="output", ${reported}}[${RI}]))`, '{{model}}'],
    ], { w: 8 }),
    panel('Output tokens per second (native tokenizer)', "Re-counted with each model's own tokenizer.", [
      [`sum by (model) (rate(tokenmeter_tokens_total{${M}, type="output", count="native"}[${RI}]))`, '{{model}}'],
    ], { w: 8 }),
    panel('Output tokens per second (normalized)', 'Re-counted with the one reference tokenizer, comparable across models.', [
      [`sum by (model) (rate(tokenmeter_tokens_total{${M}, type="output", count="normalized"}[${RI}]))`, '{{model}}'],
    ], { w: 8 }),
    panel('Input tokens per second (reported)', 'Prompt tokens the server reported.', [
      [`sum by (model) (rate(tokenmeter_tokens_total{${M}, type="input", ${reported}}[${RI}]))`, '{{model}}'],
    ], { w: 12 }),
    panel('Per-request output speed (normalized tokens/s), p50', 'Per request: normalized output tokens / end-to-end time.', [
      [`histogram_quantile(0.5, sum by (model, le) (rate(tokenmeter_normalized_output_tokens_per_second_bucket{${M}}[${RI}])))`, '{{model}}'],
    ], { w: 12 }),
    panel('Time to first token p50 / p90 / p99', 'Request received to first token (content, reasoning or tool-call text).',
      quantiles('tokenmeter_time_to_first_token_seconds', 'model'), { unit: 's', w: 8 }),
    panel('Inter-token latency p50 / p90 / p99', 'Gap between consecutive output tokens.',
      quantiles('tokenmeter_inter_token_latency_seconds', 'model'), { unit: 's', w: 8 }),
    panel('Time per output token p50 / p90 / p99', 'Per request: decode time / (output tokens - 1).',
      quantiles('tokenmeter_time_per_output_token_seconds', 'model'), { unit: 's', w: 8 }),
    panel('TTFT p90 by prompt size', 'Prefill dominates TTFT: the same model, split by prompt class (input tokens).', [
      [`histogram_quantile(0.9, sum by (prompt_class, le) (rate(tokenmeter_time_to_first_token_seconds_bucket{${M}}[${RI}])))`, '{{prompt_class}}'],
    ], { unit: 's', w: 12 }),
    panel('Time to first content token p90', 'First visible answer token (reasoning excluded).', [
      [`histogram_quantile(0.9, sum by (model, le) (rate(tokenmeter_time_to_first_content_token_seconds_bucket{${M}}[${RI}])))`, '{{model}}'],
    ], { unit: 's', w: 12 }),
    panel('Decode tokens per second p50', 'Per request: (output tokens - 1) / decode time.', [
      [`histogram_quantile(0.5, sum by (model, le) (rate(tokenmeter_decode_tokens_per_second_bucket{${M}}[${RI}])))`, '{{model}}'],
    ], { w: 12 }),
    panel('Request duration p90', 'Request received to the end of the response.', [
      [`histogram_quantile(0.9, sum by (model, le) (rate(tokenmeter_request_duration_seconds_bucket{${M}, api!="none"}[${RI}])))`, '{{model}}'],
    ], { unit: 's', w: 12 }),
  ],
});

const sloSel = `tokenmeter_slo_requests_total{${M}}`;
const badOrZero = (range) =>
  `(sum by (model, slo) (increase(tokenmeter_slo_requests_total{${M}, result="bad"}[${range}])) or 0 * sum by (model, slo) (increase(${sloSel}[${range}])))`;
const slo = dashboard({
  uid: 'tokenmeter-slo',
  title: 'tokenmeter / SLOs and error budget',
  description: 'Latency SLOs per model: each request is good or bad against the TTFT and TPOT targets in the slo: config.',
  variables: [datasourceVariable(), modelVariable()],
  panels: [
    panel('Good requests over the range', 'Share of requests that met the target, over the selected time range.', [
      [`sum by (model, slo) (increase(tokenmeter_slo_requests_total{${M}, result="good"}[$__range])) / sum by (model, slo) (increase(${sloSel}[$__range]))`, '{{model}} {{slo}}'],
    ], { unit: 'percentunit', kind: 'stat', w: 8, h: 6, thresholds: [{ color: 'red', value: null }, { color: 'green', value: 0.99 }] }),
    panel('Error budget left over the range', '1 - (bad share / allowed bad share). Below 0: the budget of this range is spent.', [
      [`1 - (${badOrZero('$__range')} / sum by (model, slo) (increase(${sloSel}[$__range]))) / on (model, slo) (1 - max by (model, slo) (tokenmeter_slo_objective_ratio{${M}}))`, '{{model}} {{slo}}'],
    ], { unit: 'percentunit', kind: 'stat', w: 8, h: 6, thresholds: [{ color: 'red', value: null }, { color: 'orange', value: 0 }, { color: 'green', value: 0.5 }] }),
    panel('Targets and objectives', 'What the proxies are configured with.', [
      [`max by (model, slo) (tokenmeter_slo_target_seconds{${M}})`, '{{model}} {{slo}} target'],
      [`max by (model, slo) (tokenmeter_slo_objective_ratio{${M}})`, '{{model}} {{slo}} objective'],
    ], { kind: 'table', w: 8, h: 6 }),
    panel('Burn rate, 5 m and 1 h (page at 14.4)', 'Bad share / allowed bad share. 1 spends the 30-day budget in exactly 30 days.', [
      [`tokenmeter:slo_errors:ratio_rate5m{${M}} / on (model, slo) (1 - tokenmeter:slo_objective:ratio)`, '{{model}} {{slo}} 5m'],
      [`tokenmeter:slo_errors:ratio_rate1h{${M}} / on (model, slo) (1 - tokenmeter:slo_objective:ratio)`, '{{model}} {{slo}} 1h'],
    ], { w: 12 }),
    panel('Burn rate, 30 m, 6 h and 3 d (page at 6, ticket at 1)', 'The slower windows of the multi-window alerts.', [
      [`tokenmeter:slo_errors:ratio_rate30m{${M}} / on (model, slo) (1 - tokenmeter:slo_objective:ratio)`, '{{model}} {{slo}} 30m'],
      [`tokenmeter:slo_errors:ratio_rate6h{${M}} / on (model, slo) (1 - tokenmeter:slo_objective:ratio)`, '{{model}} {{slo}} 6h'],
      [`tokenmeter:slo_errors:ratio_rate3d{${M}} / on (model, slo) (1 - tokenmeter:slo_objective:ratio)`, '{{model}} {{slo}} 3d'],
    ], { w: 12 }),
    panel('Good and bad requests per second', 'Counted by the proxy against each target.', [
      [`sum by (model, slo, result) (rate(${sloSel}[${RI}]))`, '{{model}} {{slo}} {{result}}'],
    ], { unit: 'reqps', w: 12, stack: true }),
    panel('Bad share', 'Bad / all requests per SLO.', [
      [`${badOrZero(RI).replaceAll('increase(', 'rate(')} / sum by (model, slo) (rate(${sloSel}[${RI}]))`, '{{model}} {{slo}}'],
    ], { unit: 'percentunit', w: 12 }),
    panel('TTFT p99 against the target', 'The histogram view of the TTFT SLO (targets are bucket boundaries).', [
      [`histogram_quantile(0.99, sum by (model, le) (rate(tokenmeter_time_to_first_token_seconds_bucket{${M}}[${RI}])))`, '{{model}} p99'],
      [`max by (model) (tokenmeter_slo_target_seconds{${M}, slo="ttft"})`, '{{model}} target'],
    ], { unit: 's', w: 12 }),
    panel('TPOT p99 against the target', 'The histogram view of the TPOT SLO.', [
      [`histogram_quantile(0.99, sum by (model, le) (rate(tokenmeter_time_per_output_token_seconds_bucket{${M}}[${RI}])))`, '{{model}} p99'],
      [`max by (model) (tokenmeter_slo_target_seconds{${M}, slo="tpot"})`, '{{model}} target'],
    ], { unit: 's', w: 12 }),
  ],
});

const T = 'tenant=~"$tenant"';
const tenants = dashboard({
  uid: 'tokenmeter-tenants',
  title: 'tokenmeter / Tenants and usage',
  description: 'Who uses what: requests and tokens per tenant, provisioned throughput, rate limiting and the usage export.',
  variables: [datasourceVariable(), modelVariable(), tenantVariable()],
  panels: [
    panel('Requests per second by tenant', '', [
      [`sum by (tenant) (rate(tokenmeter_tenant_requests_total{${T}, ${M}}[${RI}]))`, '{{tenant}}'],
    ], { unit: 'reqps', w: 12 }),
    panel('Requests by tenant and outcome', '', [
      [`sum by (tenant, outcome) (rate(tokenmeter_tenant_requests_total{${T}, ${M}}[${RI}]))`, '{{tenant}} {{outcome}}'],
    ], { unit: 'reqps', w: 12, stack: true }),
    panel('Tokens per second by tenant and type', '', [
      [`sum by (tenant, type) (rate(tokenmeter_tenant_tokens_total{${T}, ${M}}[${RI}]))`, '{{tenant}} {{type}}'],
    ], { w: 12 }),
    panel('Top tenants by tokens over the range', '', [
      [`topk(10, sum by (tenant) (increase(tokenmeter_tenant_tokens_total{${T}, ${M}}[$__range])))`, '{{tenant}}'],
    ], { kind: 'bargauge', w: 12 }),
    panel('Output tokens per second against provisioned throughput', '', [
      [`sum by (tenant) (rate(tokenmeter_tenant_tokens_total{${T}, ${M}, type="output"}[${RI}]))`, '{{tenant}} used'],
      [`max by (tenant) (tokenmeter_tenant_provisioned_tokens_per_second{${T}})`, '{{tenant}} provisioned'],
    ], { w: 12 }),
    panel('Rate-limited requests per second', '', [
      [`sum by (tenant) (rate(tokenmeter_tenant_rate_limited_total{${T}}[${RI}]))`, '{{tenant}}'],
    ], { unit: 'reqps', w: 12 }),
    panel('Usage spool: records waiting', 'Usage records written locally and not yet shipped.', [
      ['sum by (instance) (tokenmeter_usage_spool_records)', '{{instance}}'],
    ], { w: 8 }),
    panel('Usage spool: oldest record age', 'Alert TokenmeterUsageSpoolBacklog fires above 15 minutes.', [
      ['max by (instance) (tokenmeter_usage_spool_oldest_age_seconds)', '{{instance}}'],
    ], { unit: 's', w: 8 }),
    panel('Usage ship errors per second', '', [
      ['sum by (instance) (rate(tokenmeter_usage_ship_errors_total[$__rate_interval]))', '{{instance}}'],
    ], { w: 8 }),
  ],
});

const proxyHealth = dashboard({
  uid: 'tokenmeter-proxy',
  title: 'tokenmeter / Proxy health',
  description: 'The proxy itself: scrape status, streams, upstream failures, parse errors, status codes and latency.',
  variables: [datasourceVariable(), modelVariable()],
  panels: [
    panel('Proxies up', 'Scrape targets whose job name contains "tokenmeter".', [
      ['sum(up{job=~".*tokenmeter.*"})', 'up'],
    ], { kind: 'stat', w: 6, h: 5 }),
    panel('Versions', 'tokenmeter_build_info by version.', [
      ['count by (version) (tokenmeter_build_info)', '{{version}}'],
    ], { kind: 'stat', w: 6, h: 5 }),
    panel('Streams in flight per proxy', '', [
      ['sum by (instance) (tokenmeter_streams_active)', '{{instance}}'],
    ], { w: 12, h: 5 }),
    panel('Upstream errors per second by reason', 'Refused, timed out, closed early, pool exhausted, ...', [
      ['sum by (reason) (rate(tokenmeter_upstream_errors_total[$__rate_interval]))', '{{reason}}'],
    ], { w: 12, stack: true }),
    panel('Responses by status code', 'What clients received (0: none was sent).', [
      [`sum by (code) (rate(tokenmeter_requests_total{${M}}[${RI}]))`, '{{code}}'],
    ], { unit: 'reqps', w: 12, stack: true }),
    panel('Parse errors per second', 'Responses or events the proxy could not understand (forwarded unchanged).', [
      ['sum(rate(tokenmeter_parse_errors_total[$__rate_interval]))', 'all'],
    ], { w: 12 }),
    panel('Parse errors by reason', '', [
      ['sum by (api, reason) (rate(tokenmeter_parse_errors_total{reason!=""}[$__rate_interval]))', '{{api}} {{reason}}'],
    ], { w: 12 }),
    panel('Upstream latency: request duration p50 / p90 / p99', 'Request received to end of response, as the proxy saw the model server.',
      quantiles('tokenmeter_request_duration_seconds', 'model'), { unit: 's', w: 12 }),
    panel('Upstream latency: time to first token p99 by API', '', [
      [`histogram_quantile(0.99, sum by (api, le) (rate(tokenmeter_time_to_first_token_seconds_bucket{${M}}[${RI}])))`, '{{api}}'],
    ], { unit: 's', w: 12 }),
    panel('Token count mismatches per second', 'Server-reported and re-tokenized counts that disagree.', [
      [`sum by (model, type) (rate(tokenmeter_token_count_mismatch_total{${M}}[${RI}]))`, '{{model}} {{type}}'],
    ], { w: 12 }),
    panel('Characters per output token', 'Output characters / reported output tokens: a tokenizer sanity check.', [
      [`sum by (model) (rate(tokenmeter_output_chars_total{${M}}[${RI}])) / sum by (model) (rate(tokenmeter_tokens_total{${M}, type="output", ${reported}}[${RI}]))`, '{{model}}'],
    ], { w: 12 }),
  ],
});

export const dashboards = {
  'tokenmeter-fleet.json': fleet,
  'tokenmeter-slo.json': slo,
  'tokenmeter-tenants.json': tenants,
  'tokenmeter-proxy.json': proxyHealth,
};

export const render = (d) => `${JSON.stringify(d, null, 2)}\n`;

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [file, d] of Object.entries(dashboards)) {
    const target = path.join(here, file);
    if (check) {
      let current = '';
      try { current = readFileSync(target, 'utf8'); } catch { /* missing: stale */ }
      if (current !== render(d)) {
        console.error(`${file} differs from what generate.mjs produces; run node dashboards/generate.mjs`);
        stale += 1;
      }
    } else {
      writeFileSync(target, render(d));
      console.log(`wrote ${file}`);
    }
  }
  process.exit(stale ? 1 : 0);
}
