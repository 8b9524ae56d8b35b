#!/usr/bin/env node
// The `mcp-stdio-conformance` launcher: finds the native `mcp-conformance`
// executable in the platform package npm installed beside this one (an
// optional dependency with `os`/`cpu`, as esbuild and biome ship theirs) and
// runs it with this process's arguments, stdio, exit code and signals.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// `${process.platform}-${process.arch}` -> the package carrying the binary.
const PLATFORMS = {
  'linux-x64': '@mcp-stdio-conformance/linux-x64',
  'linux-arm64': '@mcp-stdio-conformance/linux-arm64',
  'darwin-x64': '@mcp-stdio-conformance/darwin-x64',
  'darwin-arm64': '@mcp-stdio-conformance/darwin-arm64',
};

// Exit code when the binary cannot be found or started: the shell's
// "command not found", distinct from the tool's own 0/1/2.
const NOT_FOUND = 127;

function fail(message) {
  process.stderr.write(`mcp-stdio-conformance: ${message}\n`);
  process.exit(NOT_FOUND);
}

function binary() {
  const override = process.env.MCP_CONFORMANCE_BINARY;
  if (override) {
    return override;
  }
  const platform = `${process.platform}-${process.arch}`;
  const name = PLATFORMS[platform];
  if (!name) {
    fail(
      `no prebuilt mcp-conformance for ${platform} (there are: ${Object.keys(PLATFORMS).join(', ')}); ` +
        'build it with `cargo install mcp-conformance` and set MCP_CONFORMANCE_BINARY to its path'
    );
  }
  let manifest;
  try {
    manifest = require.resolve(`${name}/package.json`);
  } catch {
    fail(
      `the package ${name}, which carries the mcp-conformance binary for ${platform}, is not installed: ` +
        'reinstall without --no-optional / --omit=optional, or set MCP_CONFORMANCE_BINARY to the binary'
    );
  }
  const file = path.join(path.dirname(manifest), 'bin', 'mcp-conformance');
  if (!fs.existsSync(file)) {
    fail(`${name} has no binary at ${file}: reinstall it`);
  }
  return file;
}

const child = spawn(binary(), process.argv.slice(2), { stdio: 'inherit' });

child.on('error', (error) => {
  fail(`cannot run ${error.path || 'mcp-conformance'}: ${error.message}`);
});

// Signals reach the tool as they would reach it run directly. SIGTERM is
// forwarded always (a supervisor or CI runner signals this pid alone).
// SIGINT and SIGHUP from a terminal already reach the whole foreground
// process group, the tool included: forwarding them again would be a
// second signal, which the tool takes as "skip to SIGKILL". So they are
// forwarded only when stdin is not a terminal.
const handlers = {};
for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP']) {
  handlers[signal] = () => {
    if (signal === 'SIGTERM' || !process.stdin.isTTY) {
      child.kill(signal);
    }
  };
  process.on(signal, handlers[signal]);
}

child.on('exit', (code, signal) => {
  if (signal) {
    // Die of the same signal, so the caller sees what the tool's end was;
    // should this process ignore that signal (Node ignores SIGPIPE), it
    // exits as a shell reports a death by signal, never with 0.
    for (const [name, handler] of Object.entries(handlers)) {
      process.removeListener(name, handler);
    }
    process.exitCode = 128 + (os.constants.signals[signal] || 0);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code);
});
