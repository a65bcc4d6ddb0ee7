// deploy/kubernetes: every manifest parses, validates against the Kubernetes (and
// prometheus-operator) OpenAPI schemas, and describes the pod the README promises: tokenmeter as
// a native sidecar in front of vLLM, the Service on tokenmeter's port, probes on the admin port,
// shutdown timings that fit the grace period, a config the real binary accepts, and a
// PrometheusRule equal to deploy/prometheus/tokenmeter.rules.yml.
//
// Needs `npm ci` in tests/deploy (pinned: yaml, kubernetes-models,
// @kubernetes-models/prometheus-operator) and TOKENMETER_BIN (ctest sets it). Note: the schemas
// check types and required fields; like the API server's non-strict mode they accept unknown
// fields, so the key fields are asserted one by one below.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parseAllDocuments, parse } from 'yaml';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Service } from 'kubernetes-models/v1/Service';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const k8s = path.join(root, 'deploy/kubernetes');
const base = path.join(k8s, 'base');
const overlay = path.join(k8s, 'overlays/example');

const MODELS = {
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/Deployment': Deployment,
  'monitoring.coreos.com/v1/PodMonitor': PodMonitor,
  'monitoring.coreos.com/v1/PrometheusRule': PrometheusRule,
};

function loadDocs(file) {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  for (const d of docs) {
    assert.deepEqual(d.errors.map(String), [], `${file}: YAML errors`);
  }
  return docs.map((d) => d.toJS()).filter((d) => d !== null);
}

function yamlFiles(dir) {
  return readdirSync(dir).filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'));
}

const baseResources = new Map();  // kind -> object
for (const file of yamlFiles(base).filter((f) => f !== 'kustomization.yaml')) {
  for (const doc of loadDocs(path.join(base, file))) {
    baseResources.set(doc.kind, doc);
  }
}
const deployment = baseResources.get('Deployment');
const pod = deployment.spec.template.spec;
const sidecar = (pod.initContainers || []).find((c) => c.name === 'tokenmeter');
const vllm = pod.containers.find((c) => c.name === 'vllm');
const config = parse(baseResources.get('ConfigMap').data['tokenmeter.yaml']);
const portOf = (container, name) => container.ports.find((p) => p.name === name)?.containerPort;
const portOfEndpoint = (text) => Number(/:(\d+)$/.exec(text)[1]);

test('every manifest validates against its schema', () => {
  const checked = [];
  for (const dir of [base, overlay]) {
    for (const file of yamlFiles(dir).filter((f) => f !== 'kustomization.yaml')) {
      for (const doc of loadDocs(path.join(dir, file))) {
        const model = MODELS[`${doc.apiVersion}/${doc.kind}`];
        assert.ok(model, `${file}: no schema for ${doc.apiVersion} ${doc.kind}`);
        // Overlay patches are partial objects; the base resources must be complete.
        if (dir === base) {
          assert.doesNotThrow(() => new model(doc).validate(), `${file} (${doc.kind})`);
        }
        checked.push(`${path.basename(dir)}/${file}`);
      }
    }
  }
  assert.ok(checked.length >= 7, checked.join(' '));
});

test('the schema validation can fail (a wrong type is refused)', () => {
  const broken = structuredClone(deployment);
  broken.spec.template.spec.initContainers[0].ports[0].containerPort = 'eighty';
  assert.throws(() => new Deployment(broken).validate(), /containerPort/);
});

test('kustomize base and overlay list files that exist, and the base lists every manifest', () => {
  const kBase = parse(readFileSync(path.join(base, 'kustomization.yaml'), 'utf8'));
  for (const r of kBase.resources) assert.ok(existsSync(path.join(base, r)), `base resource ${r}`);
  const manifests = yamlFiles(base).filter((f) => f !== 'kustomization.yaml').sort();
  assert.deepEqual([...kBase.resources].sort(), manifests);

  const kOverlay = parse(readFileSync(path.join(overlay, 'kustomization.yaml'), 'utf8'));
  for (const r of kOverlay.resources) assert.ok(existsSync(path.join(overlay, r)), `overlay resource ${r}`);
  for (const p of kOverlay.patches || []) {
    if (p.path) assert.ok(existsSync(path.join(overlay, p.path)), `overlay patch ${p.path}`);
  }
  // The overlay's images replace images the base really uses.
  const images = [...pod.initContainers, ...pod.containers].map((c) => c.image.split(':')[0]);
  for (const image of kOverlay.images) assert.ok(images.includes(image.name), `image ${image.name}`);
});

test('tokenmeter is a native sidecar in front of vLLM on loopback', () => {
  assert.ok(sidecar, 'an init container named tokenmeter');
  assert.equal(sidecar.restartPolicy, 'Always');
  assert.ok(vllm, 'a container named vllm');
  assert.ok(vllm.args.includes('--host=127.0.0.1'), 'vLLM listens on loopback only');
  const vllmPort = Number(vllm.args.find((a) => a.startsWith('--port=')).split('=')[1]);
  assert.equal(vllmPort, portOf(vllm, 'vllm'));
  assert.equal(config.upstream, `http://127.0.0.1:${vllmPort}`);
  assert.equal(portOf(sidecar, 'http'), portOfEndpoint(config.listen));
  assert.equal(portOf(sidecar, 'admin'), portOfEndpoint(config.admin));
  assert.match(config.listen, /^0\.0\.0\.0:/);
  assert.match(config.admin, /^0\.0\.0\.0:/);
  const mount = sidecar.volumeMounts.find((m) => m.name === 'tokenmeter-config');
  assert.equal(sidecar.args.join(' '), `--config ${mount.mountPath}/tokenmeter.yaml`);
  assert.equal(pod.volumes.find((v) => v.name === 'tokenmeter-config').configMap.name,
    baseResources.get('ConfigMap').metadata.name);
  assert.equal(sidecar.securityContext.runAsNonRoot, true);
  assert.equal(sidecar.securityContext.readOnlyRootFilesystem, true);
});

test('probes are on the admin port; liveness never depends on the upstream', () => {
  assert.equal(sidecar.readinessProbe.httpGet.path, '/readyz');
  assert.equal(sidecar.readinessProbe.httpGet.port, 'admin');
  assert.equal(sidecar.livenessProbe.httpGet.path, '/healthz');
  assert.equal(sidecar.livenessProbe.httpGet.port, 'admin');
});

test('preStop delays and drain fit terminationGracePeriodSeconds', () => {
  const grace = pod.terminationGracePeriodSeconds;
  const drainSeconds = Number(/^(\d+)s$/.exec(config.timeouts.drain)[1]);
  const sidecarPreStop = sidecar.lifecycle.preStop.sleep.seconds;
  const vllmPreStop = vllm.lifecycle.preStop.sleep.seconds;
  const vllmShutdown = 10;  // what vLLM needs after SIGTERM, generously
  assert.ok(sidecarPreStop > 0 && vllmPreStop > 0);
  const total = vllmPreStop + vllmShutdown + sidecarPreStop + drainSeconds;
  assert.ok(total < grace, `vLLM preStop ${vllmPreStop} + vLLM shutdown ${vllmShutdown} + tokenmeter preStop ` +
    `${sidecarPreStop} + drain ${drainSeconds} = ${total} s must be below terminationGracePeriodSeconds ${grace}`);
});

test('the Service targets tokenmeter, and the PodMonitor scrapes its admin port', () => {
  const service = baseResources.get('Service');
  const podLabels = deployment.spec.template.metadata.labels;
  for (const [k, v] of Object.entries(service.spec.selector)) assert.equal(podLabels[k], v, `selector ${k}`);
  for (const p of service.spec.ports) {
    assert.equal(p.targetPort, portOf(sidecar, 'http'), 'targetPort is tokenmeter\'s listen port');
    assert.notEqual(p.targetPort, portOf(vllm, 'vllm'));
  }
  const monitor = baseResources.get('PodMonitor');
  for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(podLabels[k], v);
  assert.equal(monitor.spec.podMetricsEndpoints[0].port, 'admin');
  assert.equal(monitor.spec.podMetricsEndpoints[0].path, '/metrics');
  assert.match(`default/${monitor.metadata.name}`, /.*tokenmeter.*/, 'job name matched by TokenmeterDown');
});

test('the PrometheusRule carries exactly the rules of deploy/prometheus', () => {
  const rules = parse(readFileSync(path.join(root, 'deploy/prometheus/tokenmeter.rules.yml'), 'utf8'));
  assert.deepEqual(baseResources.get('PrometheusRule').spec.groups, rules.groups);
});

test('the ConfigMap\'s configuration passes tokenmeter --check-config', () => {
  const bin = process.env.TOKENMETER_BIN;
  assert.ok(bin, 'TOKENMETER_BIN must point at the tokenmeter binary (ctest sets it)');
  const dir = mkdtempSync(path.join(tmpdir(), 'tokenmeter-k8s-'));
  try {
    const file = path.join(dir, 'tokenmeter.yaml');
    writeFileSync(file, baseResources.get('ConfigMap').data['tokenmeter.yaml']);
    const ok = spawnSync(bin, ['--check-config', file], { encoding: 'utf8' });
    assert.equal(ok.status, 0, `check-config failed: ${ok.stdout}${ok.stderr}`);
    // And it would notice a mistake in it.
    writeFileSync(file, `${baseResources.get('ConfigMap').data['tokenmeter.yaml']}\nthreds: 2\n`);
    const bad = spawnSync(bin, ['--check-config', file], { encoding: 'utf8' });
    assert.notEqual(bad.status, 0);
    assert.match(bad.stdout + bad.stderr, /threds/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
