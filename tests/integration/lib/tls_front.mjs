// A TLS terminator on loopback in front of a plain server (the simulator): what an https://
// model server looks like to the proxy. Node's own TLS server (OpenSSL underneath), so session
// tickets, SNI and client certificates behave as a real server's do. Records each accepted
// connection: {resumed, servername, authorized, peerSubject, protocol, alpn}.
import net from 'node:net';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';

// cert, key: the server's PEM files. clientCa: require a client certificate from this CA.
export async function startTlsFront({ cert, key, targetPort, clientCa } = {}) {
  const connections = [];
  const sockets = new Set();
  const server = tls.createServer({
    cert: readFileSync(cert),
    key: readFileSync(key),
    ALPNProtocols: ['http/1.1'],
    ...(clientCa ? { ca: readFileSync(clientCa), requestCert: true, rejectUnauthorized: true } : {}),
  }, (socket) => {
    sockets.add(socket);
    connections.push({
      resumed: socket.isSessionReused(),
      servername: socket.servername,
      authorized: socket.authorized,
      peerSubject: socket.getPeerCertificate()?.subject?.CN,
      protocol: socket.getProtocol(),
      alpn: socket.alpnProtocol,
    });
    const back = net.connect(targetPort, '127.0.0.1');
    sockets.add(back);
    socket.pipe(back).pipe(socket);
    const end = () => { socket.destroy(); back.destroy(); sockets.delete(socket); sockets.delete(back); };
    socket.on('error', end);
    back.on('error', end);
    socket.on('close', end);
    back.on('close', end);
  });
  const failures = [];
  server.on('tlsClientError', (error) => failures.push(error.code || error.message));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: server.address().port,
    connections,
    failures,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
