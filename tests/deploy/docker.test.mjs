// docker/: no Docker engine here, so the image is not built; these checks cover what can be
// checked without one. The Dockerfile: Debian 12 stages only, the build stage installs from
// scripts/apt-packages.txt via scripts/install-deps.sh, the runtime stage installs a package for
// every shared library the real proxy binary links (ldd + dpkg), runs as a numeric non-root user
// with exec-form ENTRYPOINT/CMD (no shell needed), and every COPY source exists. The compose
// file: its services, build targets, mounted files, a proxy config the real binary accepts and a
// Prometheus config promtool accepts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { parse } from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const dockerDir = path.join(root, 'docker');

// Instructions with their continuation lines joined; comments and parser directives dropped.
function instructions(text) {
  const out = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!current && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    current += (current ? ' ' : '') + line.replace(/\\$/, '').trim();
    if (!line.endsWith('\\')) {
      const [keyword, ...rest] = current.split(/\s+/);
      out.push({ keyword: keyword.toUpperCase(), args: rest.join(' ') });
      current = '';
    }
  }
  return out;
}

function stages(list) {
  const result = [];
  for (const ins of list) {
    if (ins.keyword === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      result.push({ from: m[1], name: m[2], body: [] });
    } else {
      result.at(-1).body.push(ins);
    }
  }
  return result;
}

const dockerfile = stages(instructions(readFileSync(path.join(dockerDir, 'Dockerfile'), 'utf8')));
const byName = new Map(dockerfile.map((s) => [s.name, s]));
const runs = (stage) => stage.body.filter((i) => i.keyword === 'RUN').map((i) => i.args).join('\n');

test('every stage is Debian 12 or builds on an earlier stage', () => {
  const seen = new Set();
  for (const s of dockerfile) {
    assert.ok(/^debian:12(-slim)?$/.test(s.from) || seen.has(s.from), `FROM ${s.from}`);
    if (s.name) seen.add(s.name);
  }
  assert.ok(byName.has('build') && byName.has('runtime') && byName.has('tools'));
  assert.equal(dockerfile.at(-1).name, 'runtime', 'the default (last) stage is the runtime');
});

test('the build stage installs from scripts/apt-packages.txt with scripts/install-deps.sh', () => {
  const build = byName.get('build');
  const copies = build.body.filter((i) => i.keyword === 'COPY').map((i) => i.args).join('\n');
  assert.match(copies, /scripts\/apt-packages\.txt/);
  assert.match(copies, /scripts\/install-deps\.sh/);
  assert.match(runs(build), /scripts\/install-deps\.sh/);
  assert.match(runs(build), /--target tokenmeter\b/);
});

test('the runtime stage installs a package for every library the proxy links', () => {
  const bin = process.env.TOKENMETER_BIN;
  assert.ok(bin, 'TOKENMETER_BIN must point at the tokenmeter binary (ctest sets it)');
  const ldd = spawnSync('ldd', [bin], { encoding: 'utf8' });
  assert.equal(ldd.status, 0, ldd.stderr);
  const libs = [...ldd.stdout.matchAll(/=> (\/\S+)/g)].map((m) => m[1]);
  assert.ok(libs.length > 3, ldd.stdout);
  const packages = new Set();
  for (const lib of libs) {
    const owner = spawnSync('dpkg', ['-S', lib], { encoding: 'utf8' });
    // dpkg knows /usr/lib/... when ldd printed the /lib/... alias (merged /usr).
    const alt = owner.status === 0 ? owner : spawnSync('dpkg', ['-S', `/usr${lib}`], { encoding: 'utf8' });
    assert.equal(alt.status, 0, `no package owns ${lib}`);
    packages.add(alt.stdout.split(':')[0]);
  }
  const inBase = new Set(['libc6', 'libgcc-s1', 'libstdc++6']);  // in debian:12-slim already
  const installed = runs(byName.get('runtime-base'));
  const missing = [...packages].filter((p) => !inBase.has(p) && !new RegExp(`\\b${p.replace(/[.+]/g, '\\$&')}\\b`).test(installed));
  assert.deepEqual(missing, [], `the runtime stage must apt-get install: ${missing.join(' ')}`);
});

test('the images run as a non-root user with exec-form entrypoints (no shell needed)', () => {
  for (const name of ['runtime', 'tools']) {
    const body = byName.get(name).body;
    const user = body.filter((i) => i.keyword === 'USER').at(-1);
    assert.ok(user, `${name}: USER`);
    const uid = user.args.split(':')[0];
    assert.match(uid, /^\d+$/, `${name}: numeric uid, so runAsNonRoot can verify it`);
    assert.notEqual(Number(uid), 0);
    for (const keyword of ['ENTRYPOINT', 'CMD']) {
      const ins = body.filter((i) => i.keyword === keyword).at(-1);
      assert.ok(ins, `${name}: ${keyword}`);
      assert.ok(Array.isArray(JSON.parse(ins.args)), `${name}: ${keyword} in exec form`);
    }
  }
});

// `docker run IMAGE --upstream URL`: Docker runs ENTRYPOINT + the user's arguments (they replace
// CMD). Run the real binary with exactly that argv, the image's config path mapped to the file the
// Dockerfile copies there, and check what it says it listens on: 0.0.0.0 (reachable through
// published ports) with the user's upstream. (Binds 0.0.0.0:8080 and :9090 for a moment.)
test('docker run IMAGE --upstream URL listens on 0.0.0.0 with the user flags appended', async () => {
  const runtime = byName.get('runtime').body;
  const entrypoint = JSON.parse(runtime.filter((i) => i.keyword === 'ENTRYPOINT').at(-1).args);
  const cmd = JSON.parse(runtime.filter((i) => i.keyword === 'CMD').at(-1).args);
  assert.deepEqual(cmd, [], 'CMD holds nothing the image needs: docker run arguments replace it');
  assert.equal(entrypoint[0], '/usr/local/bin/tokenmeter');
  const copied = new Map();
  for (const ins of runtime.filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))) {
    const [src, dest] = ins.args.split(/\s+/);
    copied.set(dest, path.join(root, src));
  }
  const argv = entrypoint.slice(1).map((a) => copied.get(a) ?? a);
  assert.ok(argv.some((a, i) => i > 0 && argv[i - 1] === '--config' && existsSync(a)),
    `the ENTRYPOINT's --config is a file the Dockerfile copies: ${entrypoint.join(' ')}`);
  const child = spawn(process.env.TOKENMETER_BIN,
    [...argv, '--upstream', 'http://127.0.0.1:9', '--threads', '1'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TOKENMETER_TOKENIZER_DIR: '' } });
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const line = await new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), 10000);
    child.stdout.on('data', (d) => {
      out += d;
      const m = /tokenmeter listening: .*/.exec(out);
      if (m) { clearTimeout(timer); resolve(m[0]); }
    });
    child.on('exit', () => { clearTimeout(timer); resolve(null); });
  });
  child.kill('SIGKILL');
  assert.ok(line, `no "listening" line; stdout: ${out} stderr: ${err}`);
  assert.match(line, /proxy=0\.0\.0\.0:8080\b/);
  assert.match(line, /admin=0\.0\.0\.0:9090\b/);
  assert.match(line, /upstream=http:\/\/127\.0\.0\.1:9\b/);
});

test('every COPY from the build context exists', () => {
  for (const s of dockerfile) {
    for (const ins of s.body.filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))) {
      const parts = ins.args.split(/\s+/);
      for (const src of parts.slice(0, -1)) {
        assert.ok(existsSync(path.join(root, src)), `COPY ${src}`);
      }
    }
  }
});

test('.dockerignore keeps build trees and node_modules out of the context', () => {
  const ignore = readFileSync(path.join(root, '.dockerignore'), 'utf8');
  assert.match(ignore, /^build\*$/m);
  assert.match(ignore, /node_modules/);
});

const compose = parse(readFileSync(path.join(dockerDir, 'compose.yaml'), 'utf8'));

test('the compose file runs the demo stack from this repository\'s files', () => {
  assert.deepEqual(Object.keys(compose.services).sort(),
    ['grafana', 'load', 'prometheus', 'simulator', 'tokenmeter']);
  for (const [name, svc] of Object.entries(compose.services)) {
    if (svc.build) {
      assert.equal(svc.build.dockerfile, 'docker/Dockerfile', name);
      assert.ok(byName.has(svc.build.target), `${name}: target ${svc.build.target}`);
    }
    for (const volume of svc.volumes || []) {
      const host = volume.split(':')[0];
      assert.ok(existsSync(path.join(dockerDir, host)), `${name}: mounts ${host}`);
    }
  }
  const grafanaMounts = compose.services.grafana.volumes.join('\n');
  assert.match(grafanaMounts, /\.\.\/dashboards:\/var\/lib\/grafana\/dashboards\/tokenmeter/);
  assert.match(grafanaMounts, /\.\.\/dashboards\/provisioning:\/etc\/grafana\/provisioning/);
});

test('the demo proxy config passes --check-config and points at the simulator', () => {
  const file = path.join(dockerDir, 'tokenmeter.yaml');
  const r = spawnSync(process.env.TOKENMETER_BIN, ['--check-config', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const config = parse(readFileSync(file, 'utf8'));
  const simListen = compose.services.simulator.command[compose.services.simulator.command.indexOf('--listen') + 1];
  assert.equal(config.upstream, `http://simulator:${simListen.split(':')[1]}`);
  const mounted = compose.services.tokenmeter.volumes[0].split(':')[1];
  assert.equal(compose.services.tokenmeter.command.at(-1), mounted);
});

test('the demo Prometheus config passes promtool and loads the rules of deploy/prometheus', () => {
  const file = path.join(dockerDir, 'prometheus.yml');
  const r = spawnSync('promtool', ['check', 'config', '--syntax-only', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const prom = parse(readFileSync(file, 'utf8'));
  const rulesMount = compose.services.prometheus.volumes.find((v) => v.includes('tokenmeter.rules.yml'));
  assert.equal(rulesMount.split(':')[1], prom.rule_files[0]);
  assert.equal(prom.scrape_configs[0].static_configs[0].targets[0], 'tokenmeter:9090');
});
