// Driver (docs/client-check.md, protocol v2) for the TypeScript MCP SDK.
//
// The client under test is the SDK's `StdioClientTransport` + `Client`,
// used the way its documentation shows. A failed connect is followed by
// `client.close()`, as careful host code does; `exit` ends the program the
// natural way (no more input, nothing closed), leaving Node to exit when
// its event loop is empty.
//
// It answers `hello` (protocol 2) once the SDK is loaded, with the settings
// the SDK really uses: it takes no graces (its close ends stdin, waits 2 s,
// sends SIGTERM to the server's pid, waits 2 s more, then SIGKILL), leaves
// each server in the program's own process group, and bounds the handshake
// by the connect's request timeout.
//
//     mcp-conformance client -- node drivers/typescript/driver.mjs

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import readline from "node:readline";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

// The SDK's version, from the package.json above its resolved entry point
// (the package's `exports` do not expose package.json itself).
function sdkVersion() {
  try {
    let dir = dirname(fileURLToPath(import.meta.resolve("@modelcontextprotocol/sdk/client/index.js")));
    for (let i = 0; i < 6; i += 1) {
      try {
        const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
        if (manifest.name === "@modelcontextprotocol/sdk") return manifest.version;
      } catch {}
      dir = dirname(dir);
    }
  } catch {}
  return "unknown";
}

function hello() {
  return {
    protocol: 2,
    client: { name: "@modelcontextprotocol/sdk (TypeScript SDK)", version: sdkVersion() },
    eras: ["legacy"],
    settings: {
      graces: "fixed",
      eof_grace_ms: 2000,
      term_grace_ms: 2000,
      leader: "none",
      handshake_bound: true,
      contain: false,
    },
  };
}

function answer(id, ok, payload) {
  const message = ok ? { id, ok, result: payload ?? {} } : { id, ok, error: String(payload) };
  process.stdout.write(JSON.stringify(message) + "\n");
}

let client = null;
// The SDK's transport, for its child process (the SDK's own `_process`): at
// `close`, whether Node had reaped the server when close() returned.
let transport = null;
const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  let request;
  try {
    request = JSON.parse(line);
  } catch {
    continue;
  }
  const { id, op } = request;
  try {
    if (op === "hello") {
      answer(id, true, hello());
    } else if (op === "connect") {
      const server = request.server;
      transport = new StdioClientTransport({
        command: server.command,
        args: server.args ?? [],
        env: { ...process.env, ...(server.env ?? {}) },
        cwd: server.cwd ?? undefined,
      });
      client = new Client({ name: "mcp-driver-typescript", version: "1.0.0" });
      try {
        await client.connect(transport, { timeout: request.timeout_ms ?? 30000 });
      } catch (error) {
        await client.close().catch(() => {});
        throw error;
      }
      answer(id, true);
    } else if (op === "list_tools") {
      const tools = await client.listTools();
      answer(id, true, { count: tools.tools.length });
    } else if (op === "call_tool") {
      const result = await client.callTool(
        { name: request.name, arguments: request.arguments ?? {} },
        undefined,
        { timeout: request.timeout_ms ?? 30000 },
      );
      answer(id, true, { is_error: Boolean(result.isError) });
    } else if (op === "close") {
      const child = transport?._process;
      await client.close();
      // Node sets exitCode or signalCode when it has reaped the child (its
      // `exit` event): read in the same tick as close() returned, this is
      // the SDK's own state, not a race with the harness's process table.
      if (child) {
        answer(id, true, { reaped: child.exitCode !== null || child.signalCode !== null });
      } else {
        answer(id, true);
      }
    } else if (op === "exit") {
      answer(id, true);
      lines.close();
      break;
    } else {
      answer(id, false, `unknown op ${op}`);
    }
  } catch (error) {
    answer(id, false, error?.message ?? error);
  }
}
