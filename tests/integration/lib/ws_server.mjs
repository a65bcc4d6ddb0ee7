// Stopping a test WebSocket upstream: every open socket dropped, the ws server and its HTTP(S)
// server closed; resolves once the HTTP server has closed.
export function closeWsServer(server, wss, sockets) {
  return new Promise((resolve) => {
    for (const ws of sockets) ws.terminate();
    wss.close();
    server.closeAllConnections?.();
    server.close(() => resolve());
  });
}
