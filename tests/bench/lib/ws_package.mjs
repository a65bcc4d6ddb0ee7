// The `ws` package the integration tests pin (tests/integration/package-lock.json; `npm ci`
// there installs it), for the benchmarks that speak WebSocket.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../integration/package.json', import.meta.url));
const ws = require('ws');

export const { WebSocket, WebSocketServer } = ws;
