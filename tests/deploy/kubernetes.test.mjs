// deploy/kubernetes: the base and the overlays render with `kubectl kustomize` (on the machine
// image; a missing kubectl fails the test), every rendered object validates against the
// Kubernetes (and prometheus-operator) OpenAPI schemas, and the pod is what the README promises:
// tokenmeter as a native sidecar in front of vLLM, the Service on tokenmeter's port, probes on
// the admin port, the model container's preStop draining through tokenmeter's /drain with
// timings that fit the grace period, seccompProfile RuntimeDefault, a PodDisruptionBudget, a
// generated (hashed) ConfigMap the real binary accepts, PodMonitors kube-prometheus-stack
// selects (tokenmeter's and the model server's) over the scheme each port speaks, the
// NetworkPolicy, the billing overlay's spool and token, and the cluster-wide monitoring: a
// PrometheusRule equal to deploy/prometheus/tokenmeter.rules.yml and the dashboards ConfigMap.
//
// Needs `npm ci` in tests/deploy (pinned: yaml, kubernetes-models,
// @kubernetes-models/prometheus-operator) and TOKENMETER_BIN (ctest sets it). Note: the schemas
// check types and required fields; like the API server's non-strict mode they accept unknown
// fields, so the key fields are asserted one by one below.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parseAllDocuments, parse } from 'yaml';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { Certificate } from '@kubernetes-models/cert-manager/cert-manager.io/v1/Certificate';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const k8s = path.join(root, 'deploy/kubernetes');

const MODELS = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
  'cert-manager.io/v1/Certificate': Certificate,
};

// dir: under deploy/kubernetes, or absolute.
function render(dir) {
  const r = spawnSync('kubectl', ['kustomize', path.resolve(k8s, dir)], { encoding: 'utf8' });
  assert.equal(r.error, undefined, `kubectl kustomize ${dir}: ${r.error} (kubectl is part of the machine image)`);
  assert.equal(r.status, 0, `kubectl kustomize ${dir}: ${r.stderr}`);
  const docs = parseAllDocuments(r.stdout);
  for (const d of docs) assert.deepEqual(d.errors.map(String), [], `${dir}: YAML errors`);
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

const RENDERED = {
  base: render('base'),
  example: render('overlays/example'),
  'existing-vllm': render('overlays/existing-vllm'),
  tls: render('overlays/tls'),
  billing: render('overlays/billing'),
};
const APPLICATION_KINDS = ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'PodMonitor', 'PodMonitor', 'Service'];
const EXPECTED_KINDS = {
  base: APPLICATION_KINDS,
  example: [...APPLICATION_KINDS, 'NetworkPolicy'],
  'existing-vllm': APPLICATION_KINDS,
  tls: [...APPLICATION_KINDS, 'Certificate', 'NetworkPolicy'],
  billing: [...APPLICATION_KINDS, 'NetworkPolicy'],
};

function parts(docs) {
  const of = (kind) => docs.filter((d) => d.kind === kind);
  const deployment = of('Deployment')[0];
  const pod = deployment.spec.template.spec;
  const sidecar = (pod.initContainers || []).find((c) => c.name === 'tokenmeter');
  const model = pod.containers[0];
  const configMap = of('ConfigMap').find((c) => c.metadata.name.startsWith('tokenmeter-config'));
  return {
    of, deployment, pod, sidecar, model, configMap,
    config: parse(configMap.data['tokenmeter.yaml']),
  };
}
const base = parts(RENDERED.base);
const portOf = (container, name) => container.ports.find((p) => p.name === name)?.containerPort;
const portOfEndpoint = (text) => Number(/:(\d+)$/.exec(text)[1]);
const seconds = (text) => {
  const m = /^(\d+)(ms|s|m)$/.exec(text);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60 }[m[2]];
};

// `tokenmeter --check-config` on a config text; returns its spawnSync result.
function checkConfig(text) {
  const bin = process.env.TOKENMETER_BIN;
  assert.ok(bin, 'TOKENMETER_BIN must point at the tokenmeter binary (ctest sets it)');
  const dir = mkdtempSync(path.join(tmpdir(), 'tokenmeter-k8s-'));
  try {
    const file = path.join(dir, 'tokenmeter.yaml');
    writeFileSync(file, text);
    return spawnSync(bin, ['--check-config', file], { encoding: 'utf8' });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('base and overlays render, and every object validates against its schema', () => {
  for (const [name, docs] of Object.entries(RENDERED)) {
    const kinds = docs.map((d) => d.kind).sort();
    assert.deepEqual(kinds, [...EXPECTED_KINDS[name]].sort(), name);
    for (const doc of docs) {
      const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
      assert.ok(model, `${name}: no schema for ${doc.apiVersion} ${doc.kind}`);
      assert.doesNotThrow(() => new model(doc).validate(), `${name}: ${doc.kind} ${doc.metadata.name}`);
    }
  }
});

test('the schema validation can fail (a wrong type is refused)', () => {
  const broken = structuredClone(base.deployment);
  broken.spec.template.spec.initContainers[0].ports[0].containerPort = 'eighty';
  assert.throws(() => new Deployment(broken).validate(), /containerPort/);
});

// The seconds a pod's shutdown takes at most: the drain hook's wait, the model server's own
// shutdown, tokenmeter's preStop and drain, and with a usage sink the batch in flight.
function shutdownSeconds(p) {
  const url = new URL(p.model.lifecycle.preStop.httpGet.path, 'http://pod');
  const wait = seconds(url.searchParams.get('wait'));
  const modelShutdown = 10;  // what vLLM needs after SIGTERM, generously
  const sidecarPreStop = p.sidecar.lifecycle.preStop.sleep.seconds;
  const drain = seconds(p.config.timeouts.drain);
  const lastShip = p.config.usage?.sink?.url ? seconds(p.config.usage.sink.request_timeout ?? '10s') : 0;
  return wait + modelShutdown + sidecarPreStop + drain + lastShip;
}

for (const [name, docs] of Object.entries(RENDERED)) {
  const p = parts(docs);
  test(`${name}: tokenmeter is a native sidecar in front of the model server on loopback`, () => {
    assert.ok(p.sidecar, 'an init container named tokenmeter');
    assert.equal(p.sidecar.restartPolicy, 'Always');
    assert.ok(p.model.args.includes('--host=127.0.0.1'), 'the model server listens on loopback only');
    const modelPort = Number(p.model.args.find((a) => a.startsWith('--port=')).split('=')[1]);
    assert.equal(p.config.upstream, `http://127.0.0.1:${modelPort}`);
    assert.equal(portOf(p.sidecar, 'tm-http'), portOfEndpoint(p.config.listen));
    assert.equal(portOf(p.sidecar, 'tm-admin'), portOfEndpoint(p.config.admin));
    assert.match(p.config.listen, /^0\.0\.0\.0:/);
    assert.match(p.config.admin, /^0\.0\.0\.0:/);
    const mount = p.sidecar.volumeMounts.find((m) => m.name === 'tokenmeter-config');
    assert.equal(p.sidecar.args.join(' '), `--config ${mount.mountPath}/tokenmeter.yaml`);
    // configMapGenerator: the name carries the content's hash, and the pod mounts that name, so
    // a config change is a new pod template (a rollout).
    assert.match(p.configMap.metadata.name, /^tokenmeter-config-[a-z0-9]{10}$/);
    assert.equal(p.pod.volumes.find((v) => v.name === 'tokenmeter-config').configMap.name,
      p.configMap.metadata.name);
    assert.equal(p.sidecar.securityContext.runAsNonRoot, true);
    assert.equal(p.sidecar.securityContext.readOnlyRootFilesystem, true);
    assert.equal(p.pod.securityContext.seccompProfile.type, 'RuntimeDefault');
  });

  test(`${name}: probes are on the admin port; liveness never depends on the upstream`, () => {
    assert.equal(p.sidecar.readinessProbe.httpGet.path, '/readyz');
    assert.equal(p.sidecar.readinessProbe.httpGet.port, 'tm-admin');
    assert.equal(p.sidecar.livenessProbe.httpGet.path, '/healthz');
    assert.equal(p.sidecar.livenessProbe.httpGet.port, 'tm-admin');
  });

  test(`${name}: the model container drains through /drain, and it all fits the grace period`, () => {
    const hook = p.model.lifecycle.preStop.httpGet;
    assert.ok(hook, 'the model container\'s preStop is an httpGet');
    assert.equal(hook.port, portOf(p.sidecar, 'tm-admin'), 'to tokenmeter\'s admin port');
    assert.equal(new URL(hook.path, 'http://pod').pathname, '/drain');
    const total = shutdownSeconds(p);
    const grace = p.pod.terminationGracePeriodSeconds;
    assert.ok(total < grace, `drain wait, model shutdown, tokenmeter preStop and drain` +
      `${p.config.usage?.sink ? ', the last shipment' : ''}: ${total} s must be below ` +
      `terminationGracePeriodSeconds ${grace}`);
  });

  test(`${name}: every scrape and probe of tokenmeter's ports speaks the scheme the port serves`, () => {
    const httpsOn = { 'tm-http': Boolean(p.config.tls?.cert_file), 'tm-admin': Boolean(p.config.admin_tls?.cert_file) };
    const certificate = p.of('Certificate')[0];
    const endpoints = [
      ...p.of('PodMonitor').flatMap((m) => m.spec.podMetricsEndpoints),
      ...p.of('ServiceMonitor').flatMap((m) => m.spec.endpoints),
    ];
    assert.ok(endpoints.length >= 2);
    for (const e of endpoints) {
      if (!httpsOn[e.port]) {
        assert.notEqual(e.scheme, 'https', `${e.port}: plain HTTP`);
        continue;
      }
      assert.equal(e.scheme, 'https', `${e.port} serves TLS: a plain scrape gets 400 plain_http_on_tls_port`);
      assert.equal(e.tlsConfig.ca.secret.name, certificate.spec.secretName, `${e.port}: the issuing CA`);
      assert.equal(e.tlsConfig.ca.secret.key, 'ca.crt');
      assert.ok(certificate.spec.dnsNames.includes(e.tlsConfig.serverName), `${e.port}: serverName on the certificate`);
      assert.notEqual(e.tlsConfig.insecureSkipVerify, true);
    }
    const adminScheme = httpsOn['tm-admin'] ? 'HTTPS' : 'HTTP';
    for (const [what, get] of [['readiness probe', p.sidecar.readinessProbe.httpGet],
      ['liveness probe', p.sidecar.livenessProbe.httpGet], ['drain hook', p.model.lifecycle.preStop.httpGet]]) {
      assert.equal(get.scheme ?? 'HTTP', adminScheme, `${what} on the admin port`);
    }
  });

  test(`${name}: the Service targets tokenmeter; a PodDisruptionBudget covers the pods`, () => {
    const podLabels = p.deployment.spec.template.metadata.labels;
    const service = p.of('Service')[0];
    for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(podLabels[k], v, `selector ${k}`);
    for (const port of service.spec.ports) {
      assert.equal(port.targetPort, portOf(p.sidecar, 'tm-http'), 'targetPort is tokenmeter\'s listen port');
    }
    const pdb = p.of('PodDisruptionBudget')[0];
    for (const [k, v] of Object.entries(pdb.spec.selector.matchLabels)) assert.equal(podLabels[k], v, `pdb ${k}`);
    assert.equal(pdb.spec.maxUnavailable, 1);
  });

  test(`${name}: PodMonitors scrape tokenmeter and the model server's own metrics`, () => {
    const podLabels = p.deployment.spec.template.metadata.labels;
    const monitors = p.of('PodMonitor');
    for (const m of monitors) {
      for (const [k, v] of Object.entries(m.spec.selector.matchLabels)) assert.equal(podLabels[k], v);
      if (name !== 'base') {
        assert.equal(m.metadata.labels.release, 'kube-prometheus-stack',
          `${m.metadata.name}: kube-prometheus-stack's default podMonitorSelector`);
      }
    }
    const ns = p.deployment.metadata.namespace || 'default';
    const own = monitors.find((m) => m.spec.podMetricsEndpoints[0].port === 'tm-admin');
    // TokenmeterDown's job selector, anchored as Prometheus anchors a regex matcher.
    const down = parse(readFileSync(path.join(root, 'deploy/prometheus/tokenmeter.rules.yml'), 'utf8'))
      .groups.flatMap((g) => g.rules).find((r) => r.alert === 'TokenmeterDown');
    const tokenmeterJob = new RegExp(`^(?:${down.expr.match(/job=~"([^"]+)"/)[1]})$`);
    assert.match(`${ns}/${own.metadata.name}`, tokenmeterJob, 'job name matched by TokenmeterDown');
    // The model server listens on loopback: its /metrics is passed through tokenmeter's port.
    const server = monitors.find((m) => m.spec.podMetricsEndpoints[0].port === 'tm-http');
    assert.ok(server, 'a PodMonitor for the model server');
    assert.equal(server.spec.podMetricsEndpoints[0].path, '/metrics');
    assert.doesNotMatch(`${ns}/${server.metadata.name}`, /tokenmeter/, 'not taken for a tokenmeter target');
    assert.doesNotMatch(`tokenmeter/${server.metadata.name}`, tokenmeterJob,
      'not taken for a tokenmeter target even in a namespace called tokenmeter');
    assert.equal(p.of('PrometheusRule').length, 0, 'the rules are cluster-wide (cluster-monitoring), not per application');
  });

  // The tls and billing configs name files from Secrets: their own tests stand them in.
  if (!['tls', 'billing'].includes(name)) test(`${name}: the generated config passes tokenmeter --check-config`, () => {
    const bin = process.env.TOKENMETER_BIN;
    assert.ok(bin, 'TOKENMETER_BIN must point at the tokenmeter binary (ctest sets it)');
    const dir = mkdtempSync(path.join(tmpdir(), 'tokenmeter-k8s-'));
    try {
      const file = path.join(dir, 'tokenmeter.yaml');
      writeFileSync(file, p.configMap.data['tokenmeter.yaml']);
      const ok = spawnSync(bin, ['--check-config', file], { encoding: 'utf8' });
      assert.equal(ok.status, 0, `check-config failed: ${ok.stdout}${ok.stderr}`);
      // And it would notice a mistake in it.
      writeFileSync(file, `${p.configMap.data['tokenmeter.yaml']}\nthreds: 2\n`);
      const bad = spawnSync(bin, ['--check-config', file], { encoding: 'utf8' });
      assert.notEqual(bad.status, 0);
      assert.match(bad.stdout + bad.stderr, /threds/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('the existing-vllm example leaves its own Deployment file untouched by tokenmeter', () => {
  const own = parseAllDocuments(readFileSync(path.join(k8s, 'overlays/existing-vllm/app/vllm.yaml'), 'utf8'))
    .map((d) => d.toJS());
  assert.ok(!JSON.stringify(own).includes('tokenmeter'), 'vllm.yaml is what the user already has');
});

test('the Component changes only labelled Deployments and Services, not a web app beside them', () => {
  const docs = render(path.join(root, 'tests/deploy/fixtures/bystander'));
  const of = (kind, name) => docs.find((d) => d.kind === kind && d.metadata.name === name);
  const sources = parseAllDocuments(readFileSync(path.join(root, 'tests/deploy/fixtures/bystander/apps.yaml'), 'utf8'))
    .map((d) => d.toJS());
  const source = (kind, name) => sources.find((d) => d.kind === kind && d.metadata.name === name);
  // Unlabelled: exactly as written (its own preStop kept, its Service still on its own port).
  assert.deepEqual(of('Deployment', 'web'), source('Deployment', 'web'));
  assert.deepEqual(of('Service', 'web'), source('Service', 'web'));
  // Labelled: the sidecar, the drain and the Service on tokenmeter's port.
  const model = of('Deployment', 'model').spec.template.spec;
  assert.ok(model.initContainers.some((c) => c.name === 'tokenmeter'));
  assert.equal(of('Service', 'model').spec.ports[0].targetPort, 8080);
  // The drain is the preStop of every main container; the rest of each lifecycle stays as written.
  const written = source('Deployment', 'model').spec.template.spec.containers;
  assert.equal(model.containers.length, written.length);
  for (const [i, c] of model.containers.entries()) {
    assert.match(c.lifecycle.preStop.httpGet.path, /^\/drain/, c.name);
    assert.equal(Object.keys(c.lifecycle.preStop).length, 1, `${c.name}: one handler`);
    const { preStop: _ours, ...kept } = c.lifecycle;
    const { preStop: _theirs, ...before } = written[i].lifecycle ?? {};
    assert.deepEqual(kept, before, `${c.name}: postStart and the rest of lifecycle kept`);
  }
  assert.ok(model.containers.some((c) => c.lifecycle.postStart), 'the fixture has a postStart to keep');
});

test('no patch in deploy/kubernetes picks an argument, command word or variable by its position', () => {
  const files = spawnSync('git', ['ls-files', 'deploy/kubernetes'], { cwd: root, encoding: 'utf8' }).stdout
    .split('\n').filter((f) => /\.ya?ml$/.test(f));
  assert.ok(files.length > 10, files.join(' '));
  for (const file of files) {
    const text = readFileSync(path.join(root, file), 'utf8');
    assert.doesNotMatch(text, /path:\s*\S*\/(args|command|env)\/\d+/, `${file}: a JSON patch by index`);
  }
});

test('the sidecar memory request and limit fit the default tokenizer\'s row of the README table', () => {
  const readme = readFileSync(path.join(root, 'deploy/README.md'), 'utf8');
  const row = /^\| o200k_base \(default reference\) \| (\d+) MiB \| (\d+)Mi \| (\d+)Mi \|/m.exec(readme);
  assert.ok(row, 'deploy/README.md has the o200k_base row of the memory table');
  const mib = (q) => Number(/^(\d+)Mi$/.exec(q)[1]);
  const { requests, limits } = base.sidecar.resources;
  assert.equal(mib(requests.memory), Number(row[2]));
  assert.equal(mib(limits.memory), Number(row[3]));
  assert.ok(Number(row[1]) < mib(requests.memory), 'the measured idle RSS is below the request');
});

test('cluster-monitoring: the rules of deploy/prometheus and the dashboards for Grafana\'s sidecar, once', () => {
  const docs = render('cluster-monitoring');
  assert.deepEqual(docs.map((d) => d.kind).sort(), ['ConfigMap', 'PrometheusRule']);
  for (const doc of docs) {
    assert.doesNotThrow(() => new MODELS[`${doc.apiVersion}/${doc.kind}`](doc).validate(), doc.kind);
    assert.equal(doc.metadata.namespace, 'monitoring');
  }
  const rule = docs.find((d) => d.kind === 'PrometheusRule');
  const rules = parse(readFileSync(path.join(root, 'deploy/prometheus/tokenmeter.rules.yml'), 'utf8'));
  assert.deepEqual(rule.spec.groups, rules.groups);
  assert.equal(rule.metadata.labels.release, 'kube-prometheus-stack');
  const dashboards = docs.find((d) => d.kind === 'ConfigMap');
  assert.equal(dashboards.metadata.labels.grafana_dashboard, '1', 'kube-prometheus-stack\'s sidecar label');
  assert.equal(dashboards.metadata.name, 'tokenmeter-dashboards', 'a fixed name: no stale copy after an update');
  const files = spawnSync('git', ['ls-files', 'dashboards/*.json'], { cwd: root, encoding: 'utf8' }).stdout
    .split('\n').filter(Boolean);
  assert.ok(files.length >= 4, files.join(' '));
  assert.deepEqual(Object.keys(dashboards.data).sort(), files.map((f) => path.basename(f)).sort(), 'every dashboard');
  for (const f of files) {
    assert.equal(dashboards.data[path.basename(f)], readFileSync(path.join(root, f), 'utf8'), f);
  }
  // kubectl apply (client side) keeps the whole object in an annotation of at most 256 KiB.
  const size = Object.values(dashboards.data).reduce((n, v) => n + Buffer.byteLength(v), 0);
  assert.ok(size < 200 * 1024, `dashboards ConfigMap is ${size} bytes`);
});

test('the ServiceMonitor component replaces the PodMonitors with the same two jobs', () => {
  const docs = render(path.join(root, 'tests/deploy/fixtures/servicemonitor'));
  for (const doc of docs) {
    const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
    assert.ok(model, `no schema for ${doc.apiVersion} ${doc.kind}`);
    assert.doesNotThrow(() => new model(doc).validate(), `${doc.kind} ${doc.metadata.name}`);
  }
  const p = parts(docs);
  assert.equal(p.of('PodMonitor').length, 0);
  const monitors = p.of('ServiceMonitor');
  assert.equal(monitors.length, 2);
  const podLabels = p.deployment.spec.template.metadata.labels;
  const jobs = {};
  for (const m of monitors) {
    const services = p.of('Service').filter((s) => Object.entries(m.spec.selector.matchLabels)
      .every(([k, v]) => s.metadata.labels?.[k] === v));
    assert.equal(services.length, 1, `${m.metadata.name} selects one Service`);
    const [service] = services;
    assert.equal(service.spec.clusterIP, 'None', 'headless: clients keep the application\'s Service');
    for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(podLabels[k], v, `${service.metadata.name} ${k}`);
    const [endpoint] = m.spec.endpoints;
    const port = service.spec.ports.find((x) => x.name === endpoint.port);
    assert.ok(port, `${m.metadata.name}: the Service has port ${endpoint.port}`);
    assert.equal(port.targetPort, endpoint.port);
    assert.ok(portOf(p.sidecar, endpoint.port), `the sidecar has port ${endpoint.port}`);
    jobs[endpoint.port] = service.metadata.labels[m.spec.jobLabel];
  }
  assert.match(jobs['tm-admin'], /tokenmeter/, 'tokenmeter\'s job, matched by the alerts');
  assert.doesNotMatch(jobs['tm-http'], /tokenmeter/, 'the model server\'s job, not taken for tokenmeter');
});

test('the drain-auth component: the hook sends the bearer token, the sidecar reads it from the Secret', () => {
  const docs = render(path.join(root, 'tests/deploy/fixtures/drain-auth'));
  const p = parts(docs);
  assert.doesNotThrow(() => new Deployment(p.deployment).validate());
  const mount = p.sidecar.volumeMounts.find((m) => p.config.admin_auth.token_file.startsWith(`${m.mountPath}/`));
  assert.ok(mount && mount.readOnly, 'admin_auth.token_file is on a read-only mount');
  const secret = p.pod.volumes.find((v) => v.name === mount.name).secret;
  assert.ok(secret, 'from a Secret');
  assert.equal(path.basename(p.config.admin_auth.token_file), 'token', 'the Secret\'s key');
  assert.equal(secret.defaultMode & 0o004, 0o004, 'readable by the sidecar\'s user');
  for (const c of p.pod.containers) {
    const hook = c.lifecycle.preStop.httpGet;
    assert.match(hook.path, /^\/drain/);
    const [header] = hook.httpHeaders;
    assert.equal(header.name, 'Authorization');
    assert.match(header.value, /^Bearer \S+$/);
  }
  assert.equal(p.sidecar.lifecycle.preStop.httpGet, undefined, 'tokenmeter\'s own preStop is untouched');
});

test('the NetworkPolicy: the admin port from the monitoring namespace only, the proxy port from the clients', () => {
  const p = parts(RENDERED.example);
  const [policy] = p.of('NetworkPolicy');
  const podLabels = p.deployment.spec.template.metadata.labels;
  for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels)) assert.equal(podLabels[k], v, k);
  assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
  const peersOf = (port) => policy.spec.ingress.filter((r) => r.ports.some((x) => x.port === port)).flatMap((r) => r.from);
  const monitoring = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } };
  // Every rule names its ports: no rule opens every port.
  for (const r of policy.spec.ingress) assert.ok(r.ports?.length, 'a rule without ports opens them all');
  assert.deepEqual(peersOf(portOf(p.sidecar, 'tm-admin')), [monitoring], 'admin: Prometheus only');
  const proxy = peersOf(portOf(p.sidecar, 'tm-http'));
  assert.ok(proxy.some((x) => x.podSelector && Object.keys(x.podSelector).length === 0 && !x.namespaceSelector),
    'proxy: the application\'s own namespace');
  assert.ok(proxy.some((x) => JSON.stringify(x) === JSON.stringify(monitoring)), 'proxy: the model server\'s scrape');
  const ports = policy.spec.ingress.flatMap((r) => r.ports.map((x) => x.port)).sort();
  assert.deepEqual(ports, [portOf(p.sidecar, 'tm-http'), portOf(p.sidecar, 'tm-admin')].sort());
});

test('the billing overlay: a writable spool under a read-only root, the sink token from a Secret', () => {
  const p = parts(RENDERED.billing);
  assert.equal(p.sidecar.securityContext.readOnlyRootFilesystem, true);
  const mountOf = (file) => p.sidecar.volumeMounts
    .filter((m) => file === m.mountPath || file.startsWith(`${m.mountPath}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  const spool = mountOf(p.config.usage.spool_dir);
  assert.ok(spool && !spool.readOnly, 'the spool directory is on a writable volume');
  assert.ok(p.pod.volumes.find((v) => v.name === spool.name).emptyDir, 'an emptyDir (deploy/README.md: what it keeps)');
  const token = mountOf(p.config.usage.sink.token_file);
  assert.ok(token && token.readOnly, 'the token file is on a read-only mount');
  const secret = p.pod.volumes.find((v) => v.name === token.name).secret;
  assert.ok(secret, 'from a Secret');
  assert.equal(path.basename(p.config.usage.sink.token_file), 'token', 'the Secret\'s key');
  assert.equal(secret.defaultMode & 0o004, 0o004, 'readable by the sidecar\'s user');
  assert.match(p.config.usage.sink.url, /^https:/);
  assert.ok(shutdownSeconds(p) < p.pod.terminationGracePeriodSeconds, 'the grace period covers the last shipment');
  // --check-config with the Secret's file in the mount's place (and without it, as before the
  // Secret exists).
  const dir = mkdtempSync(path.join(tmpdir(), 'tokenmeter-k8s-billing-'));
  try {
    writeFileSync(path.join(dir, 'token'), 'sink-token\n');
    const text = p.configMap.data['tokenmeter.yaml']
      .replaceAll(`${token.mountPath}/`, `${dir}/`).replaceAll(p.config.usage.spool_dir, path.join(dir, 'spool'));
    const ok = checkConfig(text);
    assert.equal(ok.status, 0, `check-config failed: ${ok.stdout}${ok.stderr}`);
    const missing = checkConfig(p.configMap.data['tokenmeter.yaml'].replaceAll(p.config.usage.spool_dir, path.join(dir, 'spool')));
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /usage\.sink\.token_file/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the shared-limits overlay: a Redis Service, and every replica\'s config pointing at it', () => {
  const docs = render('overlays/shared-limits');
  for (const doc of docs) {
    const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
    assert.ok(model, `no schema for ${doc.apiVersion} ${doc.kind}`);
    assert.doesNotThrow(() => new model(doc).validate(), `${doc.kind} ${doc.metadata.name}`);
  }
  const of = (kind, name) => docs.find((d) => d.kind === kind && d.metadata.name === name);
  const llm = of('Deployment', 'llm');
  const redisDeployment = of('Deployment', 'tokenmeter-redis');
  const redisService = of('Service', 'tokenmeter-redis');
  assert.ok(llm && redisDeployment && redisService);
  assert.ok(llm.spec.replicas >= 2, 'several replicas share the limit');
  assert.equal(redisDeployment.metadata.namespace, llm.metadata.namespace);
  assert.equal(redisService.metadata.namespace, llm.metadata.namespace);
  const redisLabels = redisDeployment.spec.template.metadata.labels;
  for (const [k, v] of Object.entries(redisService.spec.selector)) assert.equal(redisLabels[k], v);
  assert.ok(!(redisDeployment.spec.template.spec.initContainers || []).some((c) => c.name === 'tokenmeter'),
    'Redis gets no tokenmeter sidecar');
  // One ConfigMap, mounted by the pod template every replica is made from.
  const configMaps = docs.filter((d) => d.kind === 'ConfigMap');
  assert.equal(configMaps.length, 1);
  const pod = llm.spec.template.spec;
  assert.equal(pod.volumes.find((v) => v.name === 'tokenmeter-config').configMap.name,
    configMaps[0].metadata.name);
  const config = parse(configMaps[0].data['tokenmeter.yaml']);
  assert.equal(config.tenants.enforce_provisioned, true);
  const url = new URL(config.tenants.shared_limits.redis.url);
  assert.equal(url.protocol, 'redis:');
  assert.equal(url.hostname, redisService.metadata.name);
  assert.equal(Number(url.port), redisService.spec.ports[0].port);
  const ok = checkConfig(configMaps[0].data['tokenmeter.yaml']);
  assert.equal(ok.status, 0, `check-config failed: ${ok.stdout}${ok.stderr}`);
});

test('the tls overlay: a cert-manager Certificate whose Secret the sidecar mounts, and a config naming its files', () => {
  const docs = render('overlays/tls');
  for (const doc of docs) {
    const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
    assert.ok(model, `no schema for ${doc.apiVersion} ${doc.kind}`);
    assert.doesNotThrow(() => new model(doc).validate(), `${doc.kind} ${doc.metadata.name}`);
  }
  const p = parts(docs);
  const certificate = p.of('Certificate')[0];
  assert.ok(certificate, 'a Certificate');
  const service = p.of('Service')[0];
  assert.ok(certificate.spec.dnsNames.includes(service.metadata.name), 'the Service name is on the certificate');
  assert.ok(certificate.spec.dnsNames.includes(`${service.metadata.name}.${service.metadata.namespace}.svc`));
  const volume = p.pod.volumes.find((v) => v.secret && v.secret.secretName === certificate.spec.secretName);
  assert.ok(volume, 'the sidecar\'s pod mounts the Certificate\'s Secret');
  const mount = p.sidecar.volumeMounts.find((m) => m.name === volume.name);
  assert.ok(mount && mount.readOnly);
  assert.equal(p.config.tls.cert_file, `${mount.mountPath}/tls.crt`, 'cert-manager writes tls.crt');
  assert.equal(p.config.tls.key_file, `${mount.mountPath}/tls.key`);
  // The sidecar runs as a non-root user; the Secret's files (owned by root) must be readable.
  assert.equal(volume.secret.defaultMode & 0o004, 0o004, 'readable by the sidecar\'s user');
  assert.ok(p.sidecar.volumeMounts.some((m) => m.name === 'tokenmeter-config'), 'the config is still mounted');
  // --check-config loads the files: a certificate and key as cert-manager writes them stand in
  // for the Secret's, in a directory that takes the mount's place.
  const secretDir = mkdtempSync(path.join(tmpdir(), 'tokenmeter-k8s-tls-'));
  try {
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256',
      '-nodes', '-days', '1', '-subj', `/CN=${service.metadata.name}`, '-keyout', path.join(secretDir, 'tls.key'),
      '-out', path.join(secretDir, 'tls.crt')], { encoding: 'utf8' });
    assert.equal(made.status, 0, made.stderr);
    const text = p.configMap.data['tokenmeter.yaml'].replaceAll(`${mount.mountPath}/`, `${secretDir}/`);
    const ok = checkConfig(text);
    assert.equal(ok.status, 0, `check-config failed: ${ok.stdout}${ok.stderr}`);
    // As in the pod before cert-manager has issued the certificate: the check says so.
    const missing = checkConfig(p.configMap.data['tokenmeter.yaml']);
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /tls\.cert_file: cannot read/);
  } finally {
    rmSync(secretDir, { recursive: true, force: true });
  }
});
