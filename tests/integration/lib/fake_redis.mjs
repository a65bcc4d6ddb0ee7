// A scripted RESP server for the shared-limit fault tests, on a loopback port the OS chose:
// it reads the proxy's commands (arrays of bulk strings) and answers each with what `answer`
// returns (null: no answer), optionally greeting every connection first; plain or TLS. It counts
// connections and commands by name.
import net from 'node:net';
import tls from 'node:tls';

// Commands in `buffer`, and the bytes left over (a command cut by the end of a read).
function readCommands(buffer) {
  const commands = [];
  let at = 0;
  const line = (from) => {
    const end = buffer.indexOf('\r\n', from);
    return end < 0 ? null : { text: buffer.subarray(from, end).toString(), next: end + 2 };
  };
  for (;;) {
    const head = line(at);
    if (!head || head.text[0] !== '*') break;
    const count = Number(head.text.slice(1));
    let next = head.next;
    const args = [];
    let whole = true;
    for (let i = 0; i < count; ++i) {
      const len = line(next);
      if (!len) { whole = false; break; }
      const size = Number(len.text.slice(1));
      if (buffer.length < len.next + size + 2) { whole = false; break; }
      args.push(buffer.subarray(len.next, len.next + size).toString());
      next = len.next + size + 2;
    }
    if (!whole) break;
    commands.push(args);
    at = next;
  }
  return { commands, rest: buffer.subarray(at) };
}

// A Redis that answers PING with its token, AUTH with OK and the bucket script with an
// admission at the given level, carrying back the call's tag (its last argument) as the script
// does.
export function redisLike(command, { level = '100.0' } = {}) {
  const [name, arg] = command;
  if (name === 'PING') return `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`;
  if (name === 'AUTH') return '+OK\r\n';
  const tag = command[command.length - 1];
  return `*3\r\n:1\r\n$${level.length}\r\n${level}\r\n$${Buffer.byteLength(tag)}\r\n${tag}\r\n`;
}

export async function startFakeRedis({ answer = redisLike, greeting = '', tlsOptions = null } = {}) {
  const sockets = new Set();
  const stats = { connections: 0, commands: {} };
  const onSocket = (socket) => {
    stats.connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    if (greeting) socket.write(greeting);
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      const { commands, rest } = readCommands(Buffer.concat([pending, chunk]));
      pending = rest;
      for (const command of commands) {
        stats.commands[command[0]] = (stats.commands[command[0]] || 0) + 1;
        const out = answer(command, stats);
        if (out && !socket.destroyed) socket.write(out);
      }
    });
  };
  const server = tlsOptions ? tls.createServer(tlsOptions, onSocket) : net.createServer(onSocket);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    port,
    stats,
    url: `${tlsOptions ? 'rediss' : 'redis'}://127.0.0.1:${port}`,
    count: (name) => stats.commands[name] || 0,
    stop: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
