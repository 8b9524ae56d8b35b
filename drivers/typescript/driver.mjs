// Driver (docs/client-check.md, protocol v1) for the TypeScript MCP SDK.
//
// The client under test is the SDK's `StdioClientTransport` + `Client`,
// used the way its documentation shows. A failed connect is followed by
// `client.close()`, as careful host code does; `exit` ends the program the
// natural way (no more input, nothing closed), leaving Node to exit when
// its event loop is empty.
//
//     mcp-conformance client -- node drivers/typescript/driver.mjs

import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function answer(id, ok, payload) {
  const message = ok ? { id, ok, result: payload ?? {} } : { id, ok, error: String(payload) };
  process.stdout.write(JSON.stringify(message) + "\n");
}

let client = null;
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
    if (op === "connect") {
      const server = request.server;
      const transport = new StdioClientTransport({
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
      await client.close();
      answer(id, true);
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
