// Test certificates, made with the openssl CLI in a temporary directory: a CA, certificates it
// signs (server, client, another host), and a second CA nobody trusts. Every key is
// ECDSA P-256 (fast to make). Only for tests on loopback.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

import { makeTempDir } from './harness.mjs';

function openssl(args, cwd) {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
}

function newKey(dir, name) {
  const file = path.join(dir, `${name}.key`);
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file], dir);
  return file;
}

// A self-signed CA: {cert, key, dir}.
export function makeCa(name = 'tokenmeter-test-ca', dir = makeTempDir('tokenmeter-tls-')) {
  const key = newKey(dir, name);
  const cert = path.join(dir, `${name}.pem`);
  openssl(['req', '-x509', '-new', '-key', key, '-out', cert, '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'], dir);
  return { cert, key, dir };
}

// A leaf certificate signed by `ca`: {cert, key, serial}. hosts: subjectAltName entries
// (DNS names or IP addresses); client: for clientAuth instead of serverAuth.
export function makeLeaf(ca, name, { hosts = ['localhost', '127.0.0.1'], client = false, days = 2, serial } = {}) {
  const dir = ca.dir;
  const key = newKey(dir, name);
  const csr = path.join(dir, `${name}.csr`);
  const cert = path.join(dir, `${name}.pem`);
  openssl(['req', '-new', '-key', key, '-out', csr, '-subj', `/CN=${name}`], dir);
  const san = hosts.map((h) => (/^[\d.]+$/.test(h) || h.includes(':') ? `IP:${h}` : `DNS:${h}`)).join(',');
  const ext = path.join(dir, `${name}.ext`);
  writeFileSync(ext, [
    'basicConstraints=CA:FALSE',
    `extendedKeyUsage=${client ? 'clientAuth' : 'serverAuth'}`,
    ...(san ? [`subjectAltName=${san}`] : []),
  ].join('\n') + '\n');
  const chosenSerial = serial ?? String(Math.floor(Math.random() * 1e12) + 1);
  const args = ['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', chosenSerial,
    '-out', cert, '-extfile', ext];
  args.push('-days', String(days));
  openssl(args, dir);
  return { cert, key, serial: chosenSerial };
}
