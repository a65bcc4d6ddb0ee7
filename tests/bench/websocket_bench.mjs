// Benchmark (not a test): WebSocket relay cost through proxies beside the upstream direct, the
// client of scripts/bench-websocket.sh (which starts the upstream, tests/bench/ws_upstream.mjs,
// and the proxies). Per target and round, --connections tunnels are opened at once, then:
//   ping-pong  every connection sends a text message every --ping-gap-ms, --pings times, and
//              waits for the upstream's echo: round trip per message;
//   stream     every connection asks for --messages deltas of about 110 bytes, --gap-ms apart
//              (0: all at once); each delta carries the upstream's CLOCK_MONOTONIC at its send,
//              so the client sees each one's delivery latency.
// The proxy's CPU over a phase is utime + stime of its processes (/proc/PID/stat), divided by
// the messages it relayed (both ways). Added latency = the target's p50 (p99) minus the same
// round's direct one; the order of the targets (direct among them) rotates per round and medians
// over the rounds are reported. Memory first, on fresh processes: RSS idle, then with
// --connections tunnels open, each having carried one message.
//
//   node tests/bench/websocket_bench.mjs --direct ws://127.0.0.1:P \
//     --via NAME=ws://127.0.0.1:P,PID[+PID...] ... [--baseline NAME] [--json]
import fs from 'node:fs';
import { parseArgs } from 'node:util';

import { WebSocket } from './lib/ws_package.mjs';
import { quantile } from './lib/probes.mjs';
import { nowMs, sleep } from '../integration/lib/harness.mjs';

const { values: opts } = parseArgs({
  options: {
    direct: { type: 'string' },
    via: { type: 'string', multiple: true, default: [] },
    baseline: { type: 'string' },
    connections: { type: 'string', default: '200' },
    pings: { type: 'string', default: '100' },
    'ping-gap-ms': { type: 'string', default: '50' },
    messages: { type: 'string', default: '500' },
    'gap-ms': { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
    'clock-ticks': { type: 'string', default: '100' },
    json: { type: 'boolean', default: false },
  },
});

const CONNECTIONS = Number(opts.connections);
const PINGS = Number(opts.pings);
const PING_GAP_MS = Number(opts['ping-gap-ms']);
const MESSAGES = Number(opts.messages);
const GAP_MS = Number(opts['gap-ms']);
const ROUNDS = Number(opts.rounds);
const TICK_US = 1e6 / Number(opts['clock-ticks']);
// A phase that takes this much longer than its schedule has failed: what is missing is counted
// as errors and the run goes on.
const PHASE_SLACK_MS = 30_000;
const PING_TEXT = 'ping'.padEnd(100, '.');

function fail(message) {
  console.error(`websocket_bench: ${message}`);
  process.exit(2);
}
for (const [name, value] of Object.entries({ CONNECTIONS, PINGS, MESSAGES, ROUNDS })) {
  if (!Number.isInteger(value) || value < 1) fail(`${name.toLowerCase()} must be a whole number ≥ 1`);
}
if (!opts.direct) fail('--direct ws://HOST:PORT is required');

const targets = [{ name: 'direct', url: opts.direct, pids: [] }];
for (const spec of opts.via) {
  const match = /^([\w.-]+)=(ws:\/\/[^,]+),([\d+]+)$/.exec(spec);
  if (!match) fail(`--via wants NAME=ws://HOST:PORT,PID[+PID...], not ${spec}`);
  targets.push({ name: match[1], url: match[2], pids: match[3].split('+').filter(Boolean).map(Number) });
}
const baseline = opts.baseline || targets[1]?.name;

// ---- the proxy's processes -------------------------------------------------------------------

// utime and stime of every process in `pids`, in clock ticks.
function cpuTicks(pids) {
  let user = 0;
  let system = 0;
  for (const pid of pids) {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    user += Number(fields[11]);
    system += Number(fields[12]);
  }
  return { user, system };
}

// A /proc/PID/status field (kB) summed over `pids`, in bytes.
function statusBytes(pids, field) {
  let total = 0;
  for (const pid of pids) {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    total += match ? Number(match[1]) * 1024 : 0;
  }
  return total;
}

// ---- connections -----------------------------------------------------------------------------

// Opens `n` connections to `url` at once. Resolves with the open sockets, the upgrade times (ms)
// and the count that failed to open.
async function openConnections(url, n) {
  const attempts = [];
  for (let i = 0; i < n; ++i) {
    attempts.push(new Promise((resolve) => {
      const started = nowMs();
      const socket = new WebSocket(`${url}/realtime`, { perMessageDeflate: false });
      const timer = setTimeout(() => socket.terminate(), PHASE_SLACK_MS);
      socket.once('open', () => {
        clearTimeout(timer);
        resolve({ socket, upgradeMs: nowMs() - started });
      });
      socket.once('error', () => {});
      socket.once('close', () => {
        clearTimeout(timer);
        resolve({ socket: null });
      });
    }));
  }
  const results = await Promise.all(attempts);
  const sockets = results.filter((r) => r.socket).map((r) => r.socket);
  for (const socket of sockets) socket.removeAllListeners('close');
  return { sockets, upgradeMs: results.filter((r) => r.socket).map((r) => r.upgradeMs), failed: n - sockets.length };
}

async function closeAll(sockets) {
  await Promise.all(sockets.map((socket) => new Promise((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) {
      resolve();
      return;
    }
    const timer = setTimeout(() => {
      socket.terminate();
      resolve();
    }, 5000);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
    socket.close(1000);
  })));
}

// Runs `start(socket, index, done)` on every socket, the starts spread over `spreadMs`; resolves
// when every socket called done() (or closed) or at `deadlineMs` from now. done() takes the
// socket's message listeners off.
function onEvery(sockets, spreadMs, deadlineMs, start) {
  return new Promise((resolve) => {
    let left = sockets.length;
    const timer = setTimeout(resolve, deadlineMs);
    if (left === 0) {
      clearTimeout(timer);
      resolve();
    }
    sockets.forEach((socket, index) => {
      let finished = false;
      const done = () => {
        if (finished) return;
        finished = true;
        socket.removeAllListeners('message');
        socket.off('close', done);
        left -= 1;
        if (left === 0) {
          clearTimeout(timer);
          resolve();
        }
      };
      socket.once('close', done);
      setTimeout(() => {
        if (socket.readyState === WebSocket.OPEN) start(socket, index, done);
        else done();
      }, (index * spreadMs) / sockets.length);
    });
  });
}

// Ping-pong: each socket sends PINGS messages, PING_GAP_MS apart, each after the previous echo.
async function pingPong(sockets) {
  const rtts = [];
  let sent = 0;
  let received = 0;
  await onEvery(sockets, PING_GAP_MS, PINGS * PING_GAP_MS + PHASE_SLACK_MS, (socket, index, done) => {
    let left = PINGS;
    let sentAt = 0;
    const send = () => {
      if (socket.readyState !== WebSocket.OPEN) {
        done();
        return;
      }
      sentAt = nowMs();
      sent += 1;
      socket.send(PING_TEXT);
    };
    socket.on('message', () => {
      rtts.push(nowMs() - sentAt);
      received += 1;
      left -= 1;
      if (left === 0) {
        done();
      } else {
        setTimeout(send, Math.max(0, PING_GAP_MS - (nowMs() - sentAt)));
      }
    });
    send();
  });
  return { rtts, relayed: sent + received, errors: sockets.length * PINGS - received };
}

// Stream: each socket asks for MESSAGES deltas GAP_MS apart and reads them to the "end" frame.
async function streamPhase(sockets) {
  const latencies = [];
  let relayed = 0;
  let deltas = 0;
  const expectedMs = MESSAGES * GAP_MS;
  await onEvery(sockets, GAP_MS, expectedMs + PHASE_SLACK_MS, (socket, index, done) => {
    socket.on('message', (data) => {
      const now = process.hrtime.bigint();
      relayed += 1;
      const text = data.toString();
      if (text === 'end') {
        done();
        return;
      }
      deltas += 1;
      latencies.push(Number(now - BigInt(JSON.parse(text).t)) / 1e6);
    });
    relayed += 1;
    socket.send(`stream ${MESSAGES} ${GAP_MS}`);
  });
  return { latencies, relayed, errors: sockets.length * MESSAGES - deltas };
}

// One target, one round: open, ping-pong, stream, close; CPU per phase.
async function runRound(target) {
  const { sockets, upgradeMs, failed } = await openConnections(target.url, CONNECTIONS);
  const cpu0 = cpuTicks(target.pids);
  const ping = await pingPong(sockets);
  const cpu1 = cpuTicks(target.pids);
  const stream = await streamPhase(sockets);
  const cpu2 = cpuTicks(target.pids);
  await closeAll(sockets);
  const perMessage = (a, b, n) => ({
    user: n ? ((b.user - a.user) * TICK_US) / n : NaN,
    system: n ? ((b.system - a.system) * TICK_US) / n : NaN,
  });
  return {
    upgradeP50: quantile(upgradeMs, 0.5),
    pingP50: quantile(ping.rtts, 0.5),
    pingP99: quantile(ping.rtts, 0.99),
    streamP50: quantile(stream.latencies, 0.5),
    streamP99: quantile(stream.latencies, 0.99),
    pingCpu: perMessage(cpu0, cpu1, ping.relayed),
    streamCpu: perMessage(cpu1, cpu2, stream.relayed),
    pingMessages: ping.relayed,
    streamMessages: stream.relayed,
    errors: failed + ping.errors + stream.errors,
  };
}

// Memory, on the fresh process: RSS idle, then with every tunnel open and one message carried.
async function measureMemory(target) {
  const idle = statusBytes(target.pids, 'VmRSS');
  const { sockets, failed } = await openConnections(target.url, CONNECTIONS);
  let echoed = 0;
  await onEvery(sockets, 0, PHASE_SLACK_MS, (socket, index, done) => {
    socket.on('message', () => {
      echoed += 1;
      done();
    });
    socket.send(PING_TEXT);
  });
  const open = statusBytes(target.pids, 'VmRSS');
  await closeAll(sockets);
  return { idle, open, perTunnel: sockets.length ? (open - idle) / sockets.length : NaN,
    errors: failed + sockets.length - echoed };
}

const median = (values) => quantile(values.filter((v) => Number.isFinite(v)), 0.5) ?? NaN;

const proxies = targets.filter((t) => t.pids.length > 0);
const memory = {};
for (const target of proxies) memory[target.name] = await measureMemory(target);

// Warm-up, not reported: connections, pools, caches, the JIT.
for (const target of targets) {
  const { sockets } = await openConnections(target.url, Math.min(CONNECTIONS, 20));
  await pingPong(sockets);
  await closeAll(sockets);
}

const rounds = Object.fromEntries(targets.map((t) => [t.name, []]));
for (let round = 0; round < ROUNDS; ++round) {
  const order = targets.map((_, i) => targets[(i + round) % targets.length]);
  for (const target of order) {
    rounds[target.name].push(await runRound(target));
    await sleep(200);
  }
}

// ---- the report ------------------------------------------------------------------------------

const report = {
  connections: CONNECTIONS,
  pings: PINGS,
  ping_gap_ms: PING_GAP_MS,
  messages: MESSAGES,
  gap_ms: GAP_MS,
  rounds: ROUNDS,
  baseline,
  targets: [],
};
for (const target of targets) {
  const mine = rounds[target.name];
  const direct = rounds.direct;
  const added = (key) => median(mine.map((r, i) => r[key] - direct[i][key]));
  const row = {
    name: target.name,
    upgrade_p50_ms: median(mine.map((r) => r.upgradeP50)),
    ping_rtt_p50_ms: median(mine.map((r) => r.pingP50)),
    ping_rtt_p99_ms: median(mine.map((r) => r.pingP99)),
    stream_latency_p50_ms: median(mine.map((r) => r.streamP50)),
    stream_latency_p99_ms: median(mine.map((r) => r.streamP99)),
    errors: mine.reduce((sum, r) => sum + r.errors, 0),
    stream_messages_per_round: median(mine.map((r) => r.streamMessages)),
    per_round: mine,
  };
  if (target.pids.length > 0) {
    Object.assign(row, {
      ping_added_p50_ms: added('pingP50'),
      ping_added_p99_ms: added('pingP99'),
      stream_added_p50_ms: added('streamP50'),
      stream_added_p99_ms: added('streamP99'),
      ping_cpu_us_per_message: median(mine.map((r) => r.pingCpu.user + r.pingCpu.system)),
      stream_cpu_us_per_message: median(mine.map((r) => r.streamCpu.user + r.streamCpu.system)),
      stream_user_us_per_message: median(mine.map((r) => r.streamCpu.user)),
      stream_system_us_per_message: median(mine.map((r) => r.streamCpu.system)),
      stream_cpu_rounds_us: mine.map((r) => r.streamCpu.user + r.streamCpu.system),
      peak_rss_bytes: statusBytes(target.pids, 'VmHWM'),
      idle_rss_bytes: memory[target.name].idle,
      rss_per_tunnel_bytes: memory[target.name].perTunnel,
    });
    row.errors += memory[target.name].errors;
  }
  report.targets.push(row);
}
const base = report.targets.find((t) => t.name === baseline && t.name !== 'direct');
const RATIO_KEYS = ['ping_cpu_us_per_message', 'stream_cpu_us_per_message', 'ping_added_p50_ms',
  'ping_added_p99_ms', 'stream_added_p50_ms', 'stream_added_p99_ms', 'peak_rss_bytes', 'rss_per_tunnel_bytes'];
for (const row of report.targets) {
  if (!base || row.name === 'direct') continue;
  row.ratio_to_baseline = Object.fromEntries(RATIO_KEYS.map((k) => [k, row[k] / base[k]]));
}

if (opts.json) {
  console.log(JSON.stringify(report, null, 2));
} else {
  const fmt = (v, digits = 2) => (Number.isFinite(v) ? v.toFixed(digits) : '-');
  // A ratio to a baseline of zero or below (an added latency inside the noise) says nothing.
  const ratio = (row, key) => (row.ratio_to_baseline && Number.isFinite(row.ratio_to_baseline[key]) && base[key] > 0
    ? `${row.ratio_to_baseline[key].toFixed(2)}x` : '');
  const table = (title, columns) => {
    console.log(`\n${title}`);
    const line = (cells) => cells.map((cell, i) => (i === 0 ? cell.padEnd(columns[0][2])
      : cell.padStart(columns[i][2]))).join(' ');
    console.log(line(columns.map(([head]) => head)));
    for (const row of report.targets) {
      if (columns.some(([, get]) => get(row) === undefined)) continue;
      console.log(line(columns.map(([, get]) => String(get(row)))));
    }
  };
  console.log(`WebSocket relay: ${CONNECTIONS} connections per target; ping-pong ${PINGS} x 100-byte ` +
    `text messages ${PING_GAP_MS} ms apart per connection; stream ${MESSAGES} deltas of about 110 bytes ` +
    `${GAP_MS} ms apart per connection; ${ROUNDS} rounds, order rotated; medians; ratios to ${base ? baseline : 'nothing'}`);
  const name = ['target', (r) => r.name, 16];
  table('latency (ms): ping round trip, stream delivery (upstream send to client read)', [
    name,
    ['upgrade p50', (r) => fmt(r.upgrade_p50_ms, 3), 11],
    ['rtt p50', (r) => fmt(r.ping_rtt_p50_ms, 3), 9],
    ['rtt p99', (r) => fmt(r.ping_rtt_p99_ms, 3), 9],
    ['delivery p50', (r) => fmt(r.stream_latency_p50_ms, 3), 12],
    ['delivery p99', (r) => fmt(r.stream_latency_p99_ms, 3), 12],
    ['errors', (r) => r.errors, 6],
  ]);
  table('added latency (ms) over direct, per round, median', [
    name,
    ['rtt p50', (r) => fmt(r.ping_added_p50_ms, 3), 9],
    ['ratio', (r) => ratio(r, 'ping_added_p50_ms'), 6],
    ['rtt p99', (r) => fmt(r.ping_added_p99_ms, 3), 9],
    ['ratio', (r) => ratio(r, 'ping_added_p99_ms'), 6],
    ['delivery p50', (r) => fmt(r.stream_added_p50_ms, 3), 12],
    ['ratio', (r) => ratio(r, 'stream_added_p50_ms'), 6],
    ['delivery p99', (r) => fmt(r.stream_added_p99_ms, 3), 12],
    ['ratio', (r) => ratio(r, 'stream_added_p99_ms'), 6],
  ].map(([h, get, w]) => [h, (r) => (r.name === 'direct' ? undefined : get(r)), w]));
  table('proxy CPU per relayed message (us, utime+stime of its processes) and memory', [
    name,
    ['ping', (r) => fmt(r.ping_cpu_us_per_message), 7],
    ['ratio', (r) => ratio(r, 'ping_cpu_us_per_message'), 6],
    ['stream', (r) => fmt(r.stream_cpu_us_per_message), 7],
    ['(user', (r) => fmt(r.stream_user_us_per_message), 6],
    ['sys)', (r) => fmt(r.stream_system_us_per_message), 6],
    ['ratio', (r) => ratio(r, 'stream_cpu_us_per_message'), 6],
    ['peak RSS MiB', (r) => fmt(r.peak_rss_bytes / 1048576, 1), 12],
    ['ratio', (r) => ratio(r, 'peak_rss_bytes'), 6],
    ['KiB/tunnel', (r) => fmt(r.rss_per_tunnel_bytes / 1024, 1), 10],
    ['ratio', (r) => ratio(r, 'rss_per_tunnel_bytes'), 6],
  ].map(([h, get, w]) => [h, (r) => (r.name === 'direct' ? undefined : get(r)), w]));
  for (const row of report.targets) {
    if (row.stream_cpu_rounds_us) {
      console.log(`${row.name}: stream CPU per round ${row.stream_cpu_rounds_us.map((v) => fmt(v)).join(', ')} us ` +
        `(one clock tick is ${fmt(TICK_US / row.stream_messages_per_round, 3)} us of it)`);
    }
  }
}
const errors = report.targets.reduce((sum, r) => sum + r.errors, 0);
process.exit(errors > 0 ? 1 : 0);
