// Test certificates, made with the openssl CLI in a temporary directory: a CA, certificates it
// signs (server, client, another host, one that expired), and a second CA nobody trusts. Every
// key is ECDSA P-256 (fast to make). Only for tests on loopback.
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
// (DNS names or IP addresses); client: for clientAuth instead of serverAuth; expired: valid for
// one day in January 2020 (`openssl ca` can set both dates; OpenSSL 3.0's x509 cannot).
export function makeLeaf(ca, name, { hosts = ['localhost', '127.0.0.1'], client = false, days = 2, serial, expired = false } = {}) {
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
  if (expired) {
    signWithDates(ca, csr, cert, ext, chosenSerial, '20200101000000Z', '20200102000000Z');
    return { cert, key, serial: chosenSerial };
  }
  const args = ['x509', '-req', '-in', csr, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', chosenSerial,
    '-out', cert, '-extfile', ext];
  args.push('-days', String(days));
  openssl(args, dir);
  return { cert, key, serial: chosenSerial };
}

// `openssl ca` with a throwaway database, for dates in the past.
function signWithDates(ca, csr, cert, ext, serial, start, end) {
  const dir = ca.dir;
  const db = path.join(dir, `ca-db-${serial}`);
  writeFileSync(`${db}.index`, '');
  // `openssl ca` reads the serial file as hex bytes: an odd number of digits is refused.
  const hex = BigInt(serial).toString(16);
  writeFileSync(`${db}.serial`, `${hex.length % 2 === 1 ? `0${hex}` : hex}\n`);
  const config = path.join(dir, `ca-${serial}.cnf`);
  writeFileSync(config, [
    '[ca]', 'default_ca = test_ca', '[test_ca]', `database = ${db}.index`, `new_certs_dir = ${dir}`,
    `serial = ${db}.serial`, 'default_md = sha256', 'policy = any_name', 'unique_subject = no',
    '[any_name]', 'commonName = supplied',
  ].join('\n') + '\n');
  openssl(['ca', '-config', config, '-batch', '-notext', '-cert', ca.cert, '-keyfile', ca.key,
    '-in', csr, '-out', cert, '-startdate', start, '-enddate', end, '-extfile', ext], dir);
}
