// One HTTPS request for the TLS tests (node:https, a fresh connection unless an agent is given),
// trusting the CA in caFile and optionally presenting a client certificate. Resolves
// {status, headers, body (text), peerSerial, protocol, alpn}; rejects with the TLS or socket
// error (a refused handshake, a timeout).
import { readFileSync } from 'node:fs';
import https from 'node:https';

export function httpsRequest(port, { caFile, method = 'POST', pathName = '/v1/chat/completions', body,
  headers = {}, cert, key, agent = false, servername = 'localhost', timeoutMs = 20_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request({
      host: '127.0.0.1', port, method, path: pathName, servername, agent,
      ca: readFileSync(caFile), cert: cert && readFileSync(cert), key: key && readFileSync(key),
      headers: { 'content-type': 'application/json', ...headers },
      timeout: timeoutMs,
    }, (res) => {
      const parts = [];
      res.on('data', (d) => parts.push(d));
      res.on('end', () => resolve({
        status: res.statusCode,
        headers: res.headers,
        body: Buffer.concat(parts).toString(),
        peerSerial: res.socket.getPeerCertificate?.()?.serialNumber,
        protocol: res.socket.getProtocol?.(),
        alpn: res.socket.alpnProtocol,
      }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    if (body) req.write(typeof body === 'string' ? body : JSON.stringify(body));
    req.end();
  });
}
