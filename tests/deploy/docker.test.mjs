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

// A Debian 12 snapshot tag pinned by the digest of its image index.
const pinned = /^debian:bookworm-(\d{8})(-slim)?@sha256:([0-9a-f]{64})$/;

test('every stage is a pinned Debian 12 snapshot or builds on an earlier stage', () => {
  const seen = new Set();
  const snapshots = new Set();
  for (const s of dockerfile) {
    const m = pinned.exec(s.from);
    assert.ok(m || seen.has(s.from), `FROM ${s.from}: a dated bookworm tag with @sha256:<digest>`);
    if (m) {
      snapshots.add(m[1]);
      // A made-up digest (one digit repeated) is a placeholder, not a pin.
      assert.ok(new Set(m[3]).size > 4, `FROM ${s.from}: placeholder digest`);
    }
    if (s.name) seen.add(s.name);
  }
  assert.equal(snapshots.size, 1, `build and runtime bases from one snapshot: ${[...snapshots]}`);
  const slim = dockerfile.filter((s) => pinned.test(s.from)).map((s) => s.from.includes('-slim@'));
  assert.deepEqual(slim.sort(), [false, true], 'the full image builds, the slim one runs');
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
  // The HEALTHCHECK as the image runs it, against this proxy (the config path mapped likewise).
  const healthcheck = runtime.filter((i) => i.keyword === 'HEALTHCHECK').at(-1);
  let health = { status: null, stdout: '', stderr: 'the runtime stage has no HEALTHCHECK' };
  if (line && healthcheck) {
    const check = JSON.parse(healthcheck.args.replace(/^(--\S+\s+)*CMD\s+/, ''));
    health = spawnSync(process.env.TOKENMETER_BIN, check.slice(1).map((a) => copied.get(a) ?? a),
      { encoding: 'utf8', timeout: 10000 });
  }
  child.kill('SIGKILL');
  assert.ok(line, `no "listening" line; stdout: ${out} stderr: ${err}`);
  assert.match(line, /proxy=0\.0\.0\.0:8080\b/);
  assert.match(line, /admin=0\.0\.0\.0:9090\b/);
  assert.match(line, /upstream=http:\/\/127\.0\.0\.1:9\b/);
  assert.equal(health.status, 0, `HEALTHCHECK command: ${health.stdout}${health.stderr}`);
  assert.equal(health.stdout, '127.0.0.1:9090/healthz: 200\n');
});

test('the runtime image checks its own health with the binary it ships (no shell, no curl)', () => {
  const runtime = byName.get('runtime').body;
  const checks = runtime.filter((i) => i.keyword === 'HEALTHCHECK');
  assert.equal(checks.length, 1, 'one HEALTHCHECK in the runtime stage');
  const m = /^((?:--\S+\s+)*)CMD\s+(\[.*\])$/.exec(checks[0].args);
  assert.ok(m, `HEALTHCHECK CMD in exec form: ${checks[0].args}`);
  const options = Object.fromEntries([...m[1].matchAll(/--([a-z-]+)=(\S+)/g)].map((o) => [o[1], o[2]]));
  const argv = JSON.parse(m[2]);
  assert.deepEqual(argv.slice(0, 2), ['/usr/local/bin/tokenmeter', 'healthcheck']);
  // The probe's own deadline (2 s by default) ends before Docker's, so it reports why it failed.
  assert.ok(!argv.includes('--timeout'), 'the probe keeps its default 2 s deadline');
  assert.ok(parseFloat(options.timeout) > 2, `HEALTHCHECK --timeout ${options.timeout} must exceed 2s`);
  for (const key of ['interval', 'start-period', 'retries']) assert.ok(options[key], `--${key}`);
});

test('OCI labels: source, revision, version and licenses, from build arguments', () => {
  const runtime = byName.get('runtime').body;
  const args = new Set(runtime.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0]));
  const labels = runtime.filter((i) => i.keyword === 'LABEL').map((i) => i.args).join(' ');
  const label = (key) => new RegExp(`org\\.opencontainers\\.image\\.${key}="([^"]*)"`).exec(labels)?.[1];
  for (const [key, arg] of [['source', 'SOURCE'], ['revision', 'REVISION'], ['version', 'VERSION']]) {
    assert.equal(label(key), `\${${arg}}`, `${key} label from the ${arg} build argument`);
    assert.ok(args.has(arg), `ARG ${arg} in the runtime stage (an ARG before FROM is not visible)`);
  }
  // The license named is the one the repository carries, and it ships in the image.
  assert.equal(label('licenses'), 'Apache-2.0');
  assert.match(readFileSync(path.join(root, 'LICENSE'), 'utf8'), /Apache License\s+Version 2\.0/);
  const copies = runtime.filter((i) => i.keyword === 'COPY').map((i) => i.args.split(/\s+/));
  assert.ok(copies.some((c) => c.slice(0, -1).includes('LICENSE')), 'LICENSE copied into the image');
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

// .dockerignore as the builder reads it: each line a path pattern from the context root ('*' and
// '?' within one path element, '**' across any number), matching a path or one of its parents;
// a later '!' line re-includes. Returns whether `file` is left out of the context.
function ignoredBy(patterns, file) {
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = path.posix.normalize((negate ? raw.slice(1) : raw).replace(/^\/+/, ''));
    const re = new RegExp(`^${pattern.split('/').map((part) => (part === '**' ? '.*'
      : part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')))
      .join('/').replace(/\.\*\//g, '(?:.*/)?')}$`);
    const parts = file.split('/');
    if (parts.some((_, i) => re.test(parts.slice(0, i + 1).join('/')))) ignored = !negate;
  }
  return ignored;
}

test('.dockerignore keeps caches, build trees, node_modules and git out, and no COPY source', () => {
  const patterns = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n')
    .map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  for (const file of ['.cache/tokenizers/llama3/tokenizer.json', 'tests/parity/.cache/x.json',
    'build/proxy/tokenmeter', 'build-asan/CMakeCache.txt', 'build-tsan/x',
    'tests/deploy/node_modules/yaml/package.json', 'tests/e2e/node_modules/openai/index.js',
    '.git/HEAD', 'out/report.txt', 'tokenmeter_0.1.0_amd64.deb']) {
    assert.ok(ignoredBy(patterns, file), `${file} must not reach the build context`);
  }
  const sources = dockerfile.flatMap((s) => s.body.filter((i) => i.keyword === 'COPY' && !i.args.startsWith('--from'))
    .flatMap((i) => i.args.split(/\s+/).slice(0, -1)));
  for (const file of [...sources, 'proxy/main.cpp', 'CMakeLists.txt', 'tests/CMakeLists.txt']) {
    assert.ok(!ignoredBy(patterns, file), `${file} is needed by the build`);
  }
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
