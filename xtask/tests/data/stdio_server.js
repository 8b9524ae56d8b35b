// A minimal MCP stdio server with Node's standard library only: what a
// TypeScript server author would grade with the npm package
// (xtask/tests/dist.rs). One JSON-RPC message a line on stdin and stdout,
// nothing else on stdout; it exits when stdin reaches EOF, and dies of
// SIGTERM as Node does.
'use strict';

const readline = require('node:readline');

function answer(request) {
  switch (request.method) {
    case 'initialize':
      return {
        protocolVersion: (request.params && request.params.protocolVersion) || '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'stdlib-node-server', version: '1.0.0' },
      };
    case 'tools/list':
      return { tools: [] };
    case 'ping':
      return {};
    default:
      return undefined;
  }
}

const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => {
  if (!line.trim()) {
    return;
  }
  const message = JSON.parse(line);
  if (message.id === undefined || message.method === undefined) {
    return; // a notification, or a reply to us
  }
  const result = answer(message);
  const reply =
    result === undefined
      ? { jsonrpc: '2.0', id: message.id, error: { code: -32601, message: 'method not found' } }
      : { jsonrpc: '2.0', id: message.id, result };
  process.stdout.write(JSON.stringify(reply) + '\n');
});
lines.on('close', () => process.exit(0));
