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
// Where: the scrape targets chosen by the cluster, namespace and job variables. Their "All" is
// ".*", so series without a cluster or namespace label (a plain Prometheus) still match.
const W = 'cluster=~"$cluster", namespace=~"$namespace", job=~"$job"';
const M = `${W}, model=~"$model"`;
// Aggregations keep them, so two deployments of one model are never added into one quantile.
const BY = 'cluster, namespace, job';
// ... and so do the legends of such queries, or two deployments draw as identical lines.
const AT = '{{cluster}} {{namespace}} {{job}}';
const RI = '$__rate_interval';

// ---- building blocks -------------------------------------------------------------------------

function datasourceVariable() {
  return {
    name: 'datasource', label: 'Data source', type: 'datasource', query: 'prometheus',
    current: {}, hide: 0, refresh: 1, regex: '', options: [],
  };
}

function queryVariable(name, label, query, allValue = '.+') {
  return {
    name, label, type: 'query', datasource: DS,
    definition: query,
    query: { query, refId: 'PrometheusVariableQueryEditor-VariableQuery' },
    refresh: 2, includeAll: true, multi: true, allValue, sort: 1, hide: 0, regex: '',
    current: { selected: true, text: ['All'], value: ['$__all'] }, options: [],
  };
}

// cluster (an external or target label), namespace (Kubernetes), job (the scrape job): each
// narrowed by the ones before it.
const whereVariables = () => [
  queryVariable('cluster', 'Cluster', 'label_values(tokenmeter_build_info, cluster)', '.*'),
  queryVariable('namespace', 'Namespace',
    'label_values(tokenmeter_build_info{cluster=~"$cluster"}, namespace)', '.*'),
  queryVariable('job', 'Job',
    'label_values(tokenmeter_build_info{cluster=~"$cluster", namespace=~"$namespace"}, job)', '.*'),
];

// The SLO period the error budget is spent over (the burn-rate alerts assume 30 days). A window
// longer than the Prometheus retention silently covers only what is kept: the default, 7 days,
// fits kube-prometheus-stack's default retention of 10 days; 28d and 30d need a retention of at
// least 31 days (dashboards/README.md).
const SLO_WINDOW_DEFAULT = '7d';
function sloWindowVariable() {
  const values = ['7d', '28d', '30d'];
  return {
    name: 'slo_window', label: 'SLO window', type: 'custom', query: values.join(','),
    current: { selected: true, text: SLO_WINDOW_DEFAULT, value: SLO_WINDOW_DEFAULT }, hide: 0, multi: false,
    includeAll: false, options: values.map((v) => ({ selected: v === SLO_WINDOW_DEFAULT, text: v, value: v })),
  };
}

const modelVariable = () =>
  queryVariable('model', 'Model', `label_values(tokenmeter_requests_total{${W}, api!="none"}, model)`);
// Task names come from the tasks.allowed list (and "other"): a label bounded by the config.
const taskVariable = () =>
  queryVariable('task', 'Task', `label_values(tokenmeter_task_requests_total{${W}}, task)`);
const tenantVariable = () =>
  queryVariable('tenant', 'Tenant', `label_values(tokenmeter_tenant_requests_total{${W}}, tenant)`);

// The histograms whose buckets carry exemplars (a sampled request's trace_id and span_id;
// docs/metrics.md, "Exemplars"): a quantile of one of them shows its exemplars as points, each
// leading to the request's trace.
const EXEMPLAR_HISTOGRAMS = /\btokenmeter_(time_to_first_token|inter_token_latency|time_per_output_token|request_duration)_seconds_bucket\b/;

function target(expr, legendFormat, refId, kind) {
  // A table shows the value now, one row per series, its labels as columns: an instant query.
  if (kind === 'table') {
    return { datasource: DS, expr, legendFormat, range: false, instant: true, format: 'table', refId,
      editorMode: 'code' };
  }
  const t = { datasource: DS, expr, legendFormat, range: true, instant: false, refId, editorMode: 'code' };
  if (kind === 'timeseries' && expr.startsWith('histogram_quantile(') && EXEMPLAR_HISTOGRAMS.test(expr)) {
    t.exemplar = true;
  }
  return t;
}

// One panel. targets: [[expr, legend], ...]. kind: timeseries | stat | table | bargauge.
// units: for a table, the unit of each query's value column, in the order of the queries.
function panel(title, description, targets, { unit = 'short', kind = 'timeseries', w = 12, h = 8,
  min, max, thresholds, stack = false, units } = {}) {
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
  const refIds = targets.map((_, i) => String.fromCharCode(65 + i));
  const result = {
    type: kind, title, description, datasource: DS,
    targets: targets.map(([expr, legend], i) => target(expr, legend, refIds[i], kind)),
    fieldConfig: { defaults, overrides: [] },
    options, w, h,
  };
  if (kind === 'table') {
    // One row per label set, the queries' values side by side ("Value #A", "Value #B", ...),
    // each with its own unit; the timestamp column of an instant query says nothing.
    result.transformations = [
      { id: 'merge', options: {} },
      { id: 'organize', options: { excludeByName: { Time: true } } },
    ];
    result.fieldConfig.overrides = (units || []).map((u, i) => ({
      matcher: { id: 'byName', options: `Value #${refIds[i]}` },
      properties: [{ id: 'unit', value: u }],
    }));
  }
  return result;
}

// p50, p90, p99 and the mean (exact: _sum / _count, whatever the buckets) of a histogram.
const quantiles = (metric, by, { legendPrefix = '', filter = M } = {}) => [
  ...[0.5, 0.9, 0.99].map((q) => [
    `histogram_quantile(${q}, sum by (${BY}, ${by}, le) (rate(${metric}_bucket{${filter}}[${RI}])))`,
    `${legendPrefix}p${Math.round(q * 100)} {{${by.split(', ')[0]}}} ${AT}`,
  ]),
  [`sum by (${BY}, ${by}) (rate(${metric}_sum{${filter}}[${RI}])) / sum by (${BY}, ${by}) (rate(${metric}_count{${filter}}[${RI}]))`,
    `${legendPrefix}mean {{${by.split(', ')[0]}}} ${AT}`],
];

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

// Models compared on the same task (tasks: in the config; the task variable picks the tasks).
// Every figure is per model and task, so two tasks are never averaged together.
const K = `${M}, task=~"$task"`;
const TBY = `${BY}, model, task`;
const perTask = (numerator, denominator, window) =>
  `sum by (${TBY}) (${window === RI ? 'rate' : 'increase'}(${numerator}[${window}])) / sum by (${TBY}) (${window === RI ? 'rate' : 'increase'}(${denominator}[${window}]))`;
const taskCount = `tokenmeter_task_duration_seconds_count{${K}}`;
const sessionCount = `tokenmeter_task_session_duration_seconds_count{${K}}`;
function taskPanels() {
  return [
    panel('Task time by model: mean over the range', 'Per complete request with the task: request received to its last token, averaged over the dashboard range. The number to compare models on: a model that writes fewer tokens can finish sooner while looking slower in tokens/s.', [
      [perTask(`tokenmeter_task_duration_seconds_sum{${K}}`, taskCount, '$__range'), `{{task}} {{model}} ${AT}`],
    ], { unit: 's', kind: 'bargauge', w: 8 }),
    panel('Output tokens per task by model: mean over the range', 'Billed output tokens of the same requests, per request: how verbose each model is on the task.', [
      [perTask(`tokenmeter_task_tokens_total{${K}, type="output"}`, taskCount, '$__range'), `{{task}} {{model}} output ${AT}`],
      [perTask(`tokenmeter_task_tokens_total{${K}, type="input"}`, taskCount, '$__range'), `{{task}} {{model}} input ${AT}`],
    ], { kind: 'bargauge', w: 8 }),
    panel('Task time by model: p90 and mean', 'Request received to the last token, per complete request with the task.', [
      [`histogram_quantile(0.9, sum by (${TBY}, le) (rate(tokenmeter_task_duration_seconds_bucket{${K}}[${RI}])))`, `p90 {{task}} {{model}} ${AT}`],
      [perTask(`tokenmeter_task_duration_seconds_sum{${K}}`, taskCount, RI), `mean {{task}} {{model}} ${AT}`],
    ], { unit: 's', w: 8 }),
    panel('Multi-request tasks: mean session time by model', 'Sessions (one session id, task and model): first request received to the last token of the last request, observed once the session has been idle for tasks.session_idle_expiry.', [
      [perTask(`tokenmeter_task_session_duration_seconds_sum{${K}}`, sessionCount, RI), `{{task}} {{model}} ${AT}`],
    ], { unit: 's', w: 12 }),
    panel('Multi-request tasks: requests and output tokens per session by model', 'Means per ended session: requests (retries and failures included) and billed output tokens.', [
      [perTask(`tokenmeter_task_session_requests_total{${K}}`, sessionCount, RI), `{{task}} {{model}} requests ${AT}`],
      [perTask(`tokenmeter_task_session_tokens_total{${K}, type="output"}`, sessionCount, RI), `{{task}} {{model}} output tokens ${AT}`],
    ], { w: 12 }),
  ];
}

// ---- the dashboards --------------------------------------------------------------------------

const fleet = dashboard({
  uid: 'tokenmeter-fleet',
  title: 'tokenmeter / Fleet overview',
  description: 'Traffic, tokens and the latency users feel, per model, and models compared on the same task.',
  variables: [datasourceVariable(), ...whereVariables(), modelVariable(), taskVariable()],
  panels: [
    panel('Requests per second', 'Metered requests by model, counted when they end.', [
      [`sum by (model) (rate(tokenmeter_requests_total{${M}, api!="none"}[${RI}]))`, '{{model}}'],
    ], { unit: 'reqps', w: 8 }),
    panel('Requests by outcome', 'complete, client_cancel, upstream_error, upstream_truncated, rejected.', [
      [`sum by (outcome) (rate(tokenmeter_requests_total{${M}, api!="none"}[${RI}]))`, '{{outcome}}'],
    ], { unit: 'reqps', w: 8, stack: true }),
    panel('Streams in flight', 'Responses being relayed right now, across the selected proxies.', [
      [`sum(tokenmeter_streams_active{${W}})`, 'streams'],
    ], { w: 8 }),
    panel('Billed tokens per second', 'Input and output tokens as the usage records bill them: each token once, from the best count (reported, else re-tokenized, else counted).', [
      [`sum by (model, type) (rate(tokenmeter_tokens_total{${M}}[${RI}]))`, '{{model}} {{type}}'],
    ], { w: 8 }),
    panel('Where the billed counts come from', 'Billed tokens per second by source: reported by the server, native or normalized tokenizer, counted chunks. Anything but "reported" means the server sent no usage.', [
      [`sum by (source) (rate(tokenmeter_tokens_total{${M}}[${RI}]))`, '{{source}}'],
    ], { w: 8, stack: true }),
    panel('Output tokens per second, three counts', "The same output counted by the server's report, the model's own tokenizer (native) and the reference tokenizer (normalized, comparable across models).", [
      [`sum by (model) (rate(tokenmeter_reported_tokens_total{${M}, type="output"}[${RI}]))`, '{{model}} reported'],
      [`sum by (model) (rate(tokenmeter_native_tokens_total{${M}, type="output"}[${RI}]))`, '{{model}} native'],
      [`sum by (model) (rate(tokenmeter_normalized_tokens_total{${M}, type="output"}[${RI}]))`, '{{model}} normalized'],
    ], { w: 8 }),
    panel('Reasoning and cached input tokens per second', 'Parts of the billed output and input: reasoning (thinking) tokens and prompt tokens served from the cache.', [
      [`sum by (model) (rate(tokenmeter_reasoning_tokens_total{${M}}[${RI}]))`, '{{model}} reasoning'],
      [`sum by (model) (rate(tokenmeter_cached_input_tokens_total{${M}}[${RI}]))`, '{{model}} cached input'],
    ], { w: 12 }),
    panel('Per-request output speed (normalized tokens/s), p50 and mean', 'Per request: normalized output tokens / end-to-end time.', [
      [`histogram_quantile(0.5, sum by (${BY}, model, le) (rate(tokenmeter_normalized_output_tokens_per_second_bucket{${M}}[${RI}])))`, `p50 {{model}} ${AT}`],
      [`sum by (${BY}, model) (rate(tokenmeter_normalized_output_tokens_per_second_sum{${M}}[${RI}])) / sum by (${BY}, model) (rate(tokenmeter_normalized_output_tokens_per_second_count{${M}}[${RI}]))`, `mean {{model}} ${AT}`],
    ], { w: 12 }),
    panel('Time to first token: p50 / p90 / p99 and mean', 'Request received to first token (content, reasoning or tool-call text).',
      quantiles('tokenmeter_time_to_first_token_seconds', 'model'), { unit: 's', w: 8 }),
    panel('Inter-token latency: p50 / p90 / p99 and mean', 'Gap between consecutive output tokens.',
      quantiles('tokenmeter_inter_token_latency_seconds', 'model'), { unit: 's', w: 8 }),
    panel('Time per output token: p50 / p90 / p99 and mean', 'Per request: decode time / (output tokens - 1).',
      quantiles('tokenmeter_time_per_output_token_seconds', 'model'), { unit: 's', w: 8 }),
    panel('TTFT p90 by prompt size', 'Prefill dominates TTFT: each model split by prompt class (input tokens), never two models in one quantile.', [
      [`histogram_quantile(0.9, sum by (${BY}, model, prompt_class, le) (rate(tokenmeter_time_to_first_token_seconds_bucket{${M}}[${RI}])))`, `{{model}} {{prompt_class}} ${AT}`],
    ], { unit: 's', w: 12 }),
    panel('Time to first content token: p90 and mean', 'First visible answer token (reasoning excluded).', [
      [`histogram_quantile(0.9, sum by (${BY}, model, le) (rate(tokenmeter_time_to_first_content_token_seconds_bucket{${M}}[${RI}])))`, `p90 {{model}} ${AT}`],
      [`sum by (${BY}, model) (rate(tokenmeter_time_to_first_content_token_seconds_sum{${M}}[${RI}])) / sum by (${BY}, model) (rate(tokenmeter_time_to_first_content_token_seconds_count{${M}}[${RI}]))`, `mean {{model}} ${AT}`],
    ], { unit: 's', w: 12 }),
    panel('Decode tokens per second: p50 and mean', 'Per request: (output tokens - 1) / decode time.', [
      [`histogram_quantile(0.5, sum by (${BY}, model, le) (rate(tokenmeter_decode_tokens_per_second_bucket{${M}}[${RI}])))`, `p50 {{model}} ${AT}`],
      [`sum by (${BY}, model) (rate(tokenmeter_decode_tokens_per_second_sum{${M}}[${RI}])) / sum by (${BY}, model) (rate(tokenmeter_decode_tokens_per_second_count{${M}}[${RI}]))`, `mean {{model}} ${AT}`],
    ], { w: 12 }),
    panel('Request duration (metered APIs): p50 / p90 / p99 and mean', 'Request received to the end of the response, for the model APIs (pass-through requests excluded).',
      quantiles('tokenmeter_request_duration_seconds', 'model', { filter: `${M}, api!="none"` }), { unit: 's', w: 12 }),
    ...taskPanels(),
  ],
});

const sloSel = `tokenmeter_slo_requests_total{${M}}`;
const SLO_BY = `${BY}, model, slo`;
const badOrZero = (range) =>
  `(sum by (${SLO_BY}) (increase(tokenmeter_slo_requests_total{${M}, result="bad"}[${range}])) or 0 * sum by (${SLO_BY}) (increase(${sloSel}[${range}])))`;
const verdicts = (sloName, title, description) => panel(`${title}: good and bad requests per second`,
  description || `Requests judged against the ${sloName.toUpperCase()} target, good stacked on bad: together they are the requests with that measurement.`, [
    [`sum by (model, result) (rate(tokenmeter_slo_requests_total{${M}, slo="${sloName}"}[${RI}]))`, '{{model}} {{result}}'],
  ], { unit: 'reqps', w: 12, stack: true });
const slo = dashboard({
  uid: 'tokenmeter-slo',
  title: 'tokenmeter / SLOs and error budget',
  description: 'SLOs per model: each request is good or bad against the TTFT and TPOT targets and for availability (no 5xx, no error in the stream, no cut stream) as the slo: config sets them.',
  variables: [datasourceVariable(), ...whereVariables(), modelVariable(), sloWindowVariable()],
  panels: [
    // A stat has one set of thresholds for every series, and each model and SLO has its own
    // objective: the value is the good share minus that objective, so 0 is the line for all.
    panel('Good share over the SLO window, against the objective', 'Share of requests that met the target over the SLO window (variable slo_window), minus the configured objective (tokenmeter_slo_objective_ratio): green at or above 0 (the objective is met), red below. The good share itself is this plus the objective in "Targets and objectives".', [
      [`sum by (${SLO_BY}) (increase(tokenmeter_slo_requests_total{${M}, result="good"}[$slo_window])) / sum by (${SLO_BY}) (increase(${sloSel}[$slo_window])) - on (${SLO_BY}) max by (${SLO_BY}) (tokenmeter_slo_objective_ratio{${M}})`, `{{model}} {{slo}} ${AT}`],
    ], { unit: 'percentunit', kind: 'stat', w: 8, h: 6, thresholds: [{ color: 'red', value: null }, { color: 'green', value: 0 }] }),
    panel('Error budget left over the SLO window', '1 - (bad share / allowed bad share) over the SLO window (variable slo_window), not the dashboard range. Below 0: the budget is spent.', [
      [`1 - (${badOrZero('$slo_window')} / sum by (${SLO_BY}) (increase(${sloSel}[$slo_window]))) / on (${SLO_BY}) (1 - max by (${SLO_BY}) (tokenmeter_slo_objective_ratio{${M}}))`, `{{model}} {{slo}} ${AT}`],
    ], { unit: 'percentunit', kind: 'stat', w: 8, h: 6, thresholds: [{ color: 'red', value: null }, { color: 'orange', value: 0 }, { color: 'green', value: 0.5 }] }),
    panel('Targets and objectives', 'What the proxies are configured with now, per deployment: the latency target (none for availability) and the objective.', [
      [`max by (${SLO_BY}) (tokenmeter_slo_target_seconds{${M}})`, 'target'],
      [`max by (${SLO_BY}) (tokenmeter_slo_objective_ratio{${M}})`, 'objective'],
    ], { kind: 'table', w: 8, h: 6, units: ['s', 'percentunit'] }),
    panel('Burn rate, 5 m and 1 h (page at 14.4)', 'Bad share / allowed bad share. 1 spends the 30-day budget in exactly 30 days.', [
      [`tokenmeter:slo_errors:ratio_rate5m{${M}} / on (${SLO_BY}) (1 - tokenmeter:slo_objective:ratio)`, `{{model}} {{slo}} 5m ${AT}`],
      [`tokenmeter:slo_errors:ratio_rate1h{${M}} / on (${SLO_BY}) (1 - tokenmeter:slo_objective:ratio)`, `{{model}} {{slo}} 1h ${AT}`],
    ], { w: 12 }),
    panel('Burn rate, 30 m, 6 h and 3 d (page at 6, ticket at 1)', 'The slower windows of the multi-window alerts.', [
      [`tokenmeter:slo_errors:ratio_rate30m{${M}} / on (${SLO_BY}) (1 - tokenmeter:slo_objective:ratio)`, `{{model}} {{slo}} 30m ${AT}`],
      [`tokenmeter:slo_errors:ratio_rate6h{${M}} / on (${SLO_BY}) (1 - tokenmeter:slo_objective:ratio)`, `{{model}} {{slo}} 6h ${AT}`],
      [`tokenmeter:slo_errors:ratio_rate3d{${M}} / on (${SLO_BY}) (1 - tokenmeter:slo_objective:ratio)`, `{{model}} {{slo}} 3d ${AT}`],
    ], { w: 12 }),
    verdicts('availability', 'Availability', 'Requests judged for availability, good stacked on bad: bad is a 5xx (the proxy\'s own when the model server is unreachable, slow or saturated, or the server\'s), an error in the stream or a cut stream; client cancels, 4xx and 429 are left out.'),
    verdicts('ttft', 'TTFT'),
    verdicts('tpot', 'TPOT'),
    panel('Bad share', 'Bad / all requests per SLO.', [
      [`${badOrZero(RI).replaceAll('increase(', 'rate(')} / sum by (${SLO_BY}) (rate(${sloSel}[${RI}]))`, `{{model}} {{slo}} ${AT}`],
    ], { unit: 'percentunit', w: 8 }),
    panel('TTFT p99 and mean against the target', 'The histogram view of the TTFT SLO (targets are bucket boundaries; the buckets are about 19 % wide).', [
      [`histogram_quantile(0.99, sum by (${BY}, model, le) (rate(tokenmeter_time_to_first_token_seconds_bucket{${M}}[${RI}])))`, `{{model}} p99 ${AT}`],
      [`sum by (${BY}, model) (rate(tokenmeter_time_to_first_token_seconds_sum{${M}}[${RI}])) / sum by (${BY}, model) (rate(tokenmeter_time_to_first_token_seconds_count{${M}}[${RI}]))`, `{{model}} mean ${AT}`],
      [`max by (${BY}, model) (tokenmeter_slo_target_seconds{${M}, slo="ttft"})`, `{{model}} target ${AT}`],
    ], { unit: 's', w: 8 }),
    panel('TPOT p99 and mean against the target', 'The histogram view of the TPOT SLO.', [
      [`histogram_quantile(0.99, sum by (${BY}, model, le) (rate(tokenmeter_time_per_output_token_seconds_bucket{${M}}[${RI}])))`, `{{model}} p99 ${AT}`],
      [`sum by (${BY}, model) (rate(tokenmeter_time_per_output_token_seconds_sum{${M}}[${RI}])) / sum by (${BY}, model) (rate(tokenmeter_time_per_output_token_seconds_count{${M}}[${RI}]))`, `{{model}} mean ${AT}`],
      [`max by (${BY}, model) (tokenmeter_slo_target_seconds{${M}, slo="tpot"})`, `{{model}} target ${AT}`],
    ], { unit: 's', w: 8 }),
  ],
});

const T = `${W}, tenant=~"$tenant"`;
const tenants = dashboard({
  uid: 'tokenmeter-tenants',
  title: 'tokenmeter / Tenants and usage',
  description: 'Who uses what: requests and tokens per tenant, provisioned throughput, rate limiting and the usage export.',
  variables: [datasourceVariable(), ...whereVariables(), modelVariable(), tenantVariable()],
  panels: [
    panel('Requests per second by tenant', '', [
      [`sum by (tenant) (rate(tokenmeter_tenant_requests_total{${T}, model=~"$model"}[${RI}]))`, '{{tenant}}'],
    ], { unit: 'reqps', w: 12 }),
    panel('Requests by tenant and outcome', '', [
      [`sum by (tenant, outcome) (rate(tokenmeter_tenant_requests_total{${T}, model=~"$model"}[${RI}]))`, '{{tenant}} {{outcome}}'],
    ], { unit: 'reqps', w: 12, stack: true }),
    panel('Billed tokens per second by tenant and type', 'Input and output, as the usage records bill them.', [
      [`sum by (tenant, type) (rate(tokenmeter_tenant_tokens_total{${T}, model=~"$model"}[${RI}]))`, '{{tenant}} {{type}}'],
    ], { w: 12 }),
    panel('Top tenants by billed tokens over the range', 'Input + output tokens billed, as in the usage records.', [
      [`topk(10, sum by (tenant) (increase(tokenmeter_tenant_tokens_total{${T}, model=~"$model"}[$__range])))`, '{{tenant}}'],
    ], { kind: 'bargauge', w: 12 }),
    panel('Input + output tokens per second against provisioned throughput', 'Provisioned throughput limits input + output tokens per second, so both are counted here.', [
      [`sum by (tenant) (rate(tokenmeter_tenant_tokens_total{${T}, type=~"input|output"}[${RI}]))`, '{{tenant}} used'],
      [`max by (tenant) (tokenmeter_tenant_provisioned_tokens_per_second{${T}})`, '{{tenant}} provisioned'],
    ], { w: 12 }),
    panel('Rate-limited requests per second', '', [
      [`sum by (tenant) (rate(tokenmeter_tenant_rate_limited_total{${T}}[${RI}]))`, '{{tenant}}'],
    ], { unit: 'reqps', w: 12 }),
    panel('Usage spool: records waiting', 'Usage records written locally and not yet shipped.', [
      [`sum by (instance) (tokenmeter_usage_spool_records{${W}})`, '{{instance}}'],
    ], { w: 8 }),
    panel('Usage spool: oldest record age', 'Alert TokenmeterUsageSpoolBacklog fires above 15 minutes.', [
      [`max by (instance) (tokenmeter_usage_spool_oldest_age_seconds{${W}})`, '{{instance}}'],
    ], { unit: 's', w: 8 }),
    panel('Usage ship errors per second', '', [
      [`sum by (instance) (rate(tokenmeter_usage_ship_errors_total{${W}}[$__rate_interval]))`, '{{instance}}'],
    ], { w: 8 }),
  ],
});

const proxyHealth = dashboard({
  uid: 'tokenmeter-proxy',
  title: 'tokenmeter / Proxy health',
  description: 'The proxy itself: scrape status, streams, upstream failures, parse errors, status codes and latency.',
  variables: [datasourceVariable(), ...whereVariables(), modelVariable()],
  panels: [
    panel('Proxies up', 'Scrape targets of job "tokenmeter" (a static config, the ServiceMonitor) or "<namespace>/tokenmeter" (the PodMonitor) that answered their last scrape.', [
      [`sum(up{${W}, job=~"tokenmeter|.+/tokenmeter"})`, 'up'],
    ], { kind: 'stat', w: 6, h: 5 }),
    panel('Versions', 'tokenmeter_build_info by version.', [
      [`count by (version) (tokenmeter_build_info{${W}})`, '{{version}}'],
    ], { kind: 'stat', w: 6, h: 5 }),
    panel('Streams in flight per proxy', '', [
      [`sum by (instance) (tokenmeter_streams_active{${W}})`, '{{instance}}'],
    ], { w: 12, h: 5 }),
    panel('Upstream errors per second by reason', 'Refused, timed out, closed early, pool exhausted, ...', [
      [`sum by (reason) (rate(tokenmeter_upstream_errors_total{${W}}[$__rate_interval]))`, '{{reason}}'],
    ], { w: 12, stack: true }),
    panel('Responses by status code', 'What clients received (0: none was sent).', [
      [`sum by (code) (rate(tokenmeter_requests_total{${M}}[${RI}]))`, '{{code}}'],
    ], { unit: 'reqps', w: 12, stack: true }),
    panel('Parse errors per second', 'Responses or events the proxy could not understand (forwarded unchanged).', [
      [`sum(rate(tokenmeter_parse_errors_total{${W}}[$__rate_interval]))`, 'all'],
    ], { w: 12 }),
    panel('Parse errors by reason', '', [
      [`sum by (api, reason) (rate(tokenmeter_parse_errors_total{${W}, reason!=""}[$__rate_interval]))`, '{{api}} {{reason}}'],
    ], { w: 12 }),
    panel('End-to-end request duration (metered APIs): p50 / p90 / p99 and mean', 'Request received to the end of the response: upstream time plus the proxy, for the model APIs only (pass-through requests excluded).',
      quantiles('tokenmeter_request_duration_seconds', 'model', { filter: `${M}, api!="none"` }), { unit: 's', w: 12 }),
    panel('Time to first token p99 by API', 'Request received to the first token, per model and API dialect.', [
      [`histogram_quantile(0.99, sum by (${BY}, model, api, le) (rate(tokenmeter_time_to_first_token_seconds_bucket{${M}}[${RI}])))`, `{{model}} {{api}} ${AT}`],
    ], { unit: 's', w: 12 }),
    panel('Token count mismatches per second', 'Server-reported and re-tokenized counts that disagree.', [
      [`sum by (model, type) (rate(tokenmeter_token_count_mismatch_total{${M}}[${RI}]))`, '{{model}} {{type}}'],
    ], { w: 12 }),
    panel('Bytes per output token', 'UTF-8 bytes of output text / billed output tokens: a tokenizer sanity check (about 4 for English with most tokenizers).', [
      [`sum by (${BY}, model) (rate(tokenmeter_output_chars_total{${M}}[${RI}])) / sum by (${BY}, model) (rate(tokenmeter_tokens_total{${M}, type="output"}[${RI}]))`, `{{model}} ${AT}`],
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
