// The WebSocket upstream of scripts/bench-websocket.sh: a `ws` server on 127.0.0.1 (an
// OS-chosen port, printed as "listening on 127.0.0.1:PORT") that answers every connection's
// text messages:
//   "stream COUNT GAP_MS"  sends COUNT JSON text frames of about 110 bytes each, like a realtime
//                          API's deltas, GAP_MS apart (0: all at once), then one "end" frame;
//                          each carries the send time (CLOCK_MONOTONIC, ns) as "t";
//   anything else          is echoed back as it came.
// No permessage-deflate, so every byte the client measures crosses the proxy as sent.
//
//   node tests/bench/ws_upstream.mjs
import { WebSocketServer } from './lib/ws_package.mjs';

const MAX_STREAM = 1_000_000;

// One delta of the stream: a realtime event with a short text delta, about 110 bytes; `t` is
// CLOCK_MONOTONIC in ns just before the send (the client reads the same clock).
function delta(seq) {
  return JSON.stringify({
    t: process.hrtime.bigint().toString(),
    type: 'response.text.delta',
    event_id: `ev_${seq.toString().padStart(8, '0')}`,
    item_id: 'item_1',
    delta: ' token',
  });
}

function stream(socket, count, gapMs) {
  let seq = 0;
  const sendSome = (n) => {
    for (let i = 0; i < n && seq < count; ++i) socket.send(delta(seq++));
    if (seq === count) socket.send('end');
  };
  if (gapMs <= 0) {
    sendSome(count);
    return;
  }
  const timer = setInterval(() => {
    if (socket.readyState !== socket.OPEN) {
      clearInterval(timer);
      return;
    }
    sendSome(1);
    if (seq === count) clearInterval(timer);
  }, gapMs);
}

const server = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false, backlog: 4096 });
server.on('connection', (socket) => {
  socket.on('error', () => {});
  socket.on('message', (data, isBinary) => {
    const text = isBinary ? '' : data.toString();
    const command = /^stream (\d+) (\d+)$/.exec(text);
    if (command) {
      stream(socket, Math.min(Number(command[1]), MAX_STREAM), Number(command[2]));
    } else {
      socket.send(data, { binary: isBinary });
    }
  });
});
server.on('listening', () => {
  console.log(`listening on 127.0.0.1:${server.address().port}`);
});
for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    for (const socket of server.clients) socket.terminate();
    server.close(() => process.exit(0));
  });
}
