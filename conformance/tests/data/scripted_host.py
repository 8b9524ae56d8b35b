"""A scripted headless host for `mcp-conformance host` tests: what a real
agent CLI does in one `-p` turn, with a close chosen by flag.

scripted_host.py --config MCP_JSON --api API --close MODE [--hide SERVER]...

It reads the `mcpServers` config, starts every server (a process group of
its own for each), initializes it and lists its tools, then talks to the
model named by the environment (`mcp-conformance host --model-api API`
sets it) with the tools as `mcp__SERVER__TOOL`, calls every tool the model
asks for on its server, sends the results back, and prints the final
answer (a server named by --hide is listed, but its tools are not offered
to the model, as a host does with a server whose session broke). Then it closes the servers by MODE:

- careful: stdin EOF, a grace, SIGTERM to the group, a grace, SIGKILL to
  the group, and a sweep of the group after a graceful exit;
- sigint-ladder: the same, with SIGINT and its grace before SIGTERM;
- abrupt: exits at once, closing nothing (the kernel closes its pipes);
- hang: closes nothing and never exits.
"""

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_clients  # noqa: E402

GRACE = 0.3


class Server:
    def __init__(self, name, entry):
        self.name = name
        env = dict(os.environ, **entry.get("env", {}))
        self.proc = subprocess.Popen(
            [entry["command"], *entry.get("args", [])], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            process_group=0,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()
        self.next_id = 0

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _drain(self):
        while self.proc.stderr.read(65536):
            pass

    def request(self, method, params, timeout=15):
        self.next_id += 1
        rid = self.next_id
        if not self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}):
            return None
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0, deadline - time.monotonic()))
            except queue.Empty:
                return None
            if line is None:
                self.lines.put(None)  # for the next request too
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue  # a banner line on stdout
            if isinstance(message, dict) and message.get("id") == rid:
                return message

    def send(self, message):
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def exited(self, within):
        try:
            self.proc.wait(timeout=within)
            return True
        except subprocess.TimeoutExpired:
            return False

    def group(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def close(self, ladder):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        if not self.exited(GRACE):
            for sig in ladder:
                self.group(sig)
                if self.exited(GRACE):
                    break
            else:
                self.group(signal.SIGKILL)
                self.proc.wait()
        # The sweep: whatever the leader left in its group.
        self.group(signal.SIGTERM)
        time.sleep(0.05)
        self.group(signal.SIGKILL)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--api", required=True, choices=sorted(model_clients.CLIENTS))
    parser.add_argument("--close", required=True, choices=["careful", "sigint-ladder", "abrupt", "hang"])
    parser.add_argument("--pid-file", help="write this host's pid here first")
    parser.add_argument("--hide", action="append", default=[],
                        help="list this server's tools but never offer them to the model")
    args = parser.parse_args()
    if args.pid_file:
        with open(args.pid_file, "w") as f:
            f.write(str(os.getpid()))
    with open(args.config) as f:
        entries = json.load(f)["mcpServers"]
    servers = {name: Server(name, entry) for name, entry in entries.items()}
    tools = []
    for name, server in servers.items():
        init = server.request("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "scripted-host", "version": "1"},
        })
        if init is None:
            print(f"{name}: no initialize answer", file=sys.stderr)
            continue
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = server.request("tools/list", {})
        if name in args.hide:
            continue
        for tool in (listed or {}).get("result", {}).get("tools", []):
            tools.append((f"mcp__{name}__{tool['name']}", tool.get("description", ""), tool["inputSchema"]))
    client = model_clients.CLIENTS[args.api](model_clients.base_url(args.api, os.environ))
    calls, _ = client.turn("Call every tool you have.", tools)
    outputs = {}
    for call_id, tool_name, call_args in calls:
        _, server_name, tool = tool_name.split("__", 2)
        answer = servers[server_name].request("tools/call", {"name": tool, "arguments": call_args})
        outputs[call_id] = json.dumps(answer["result"]) if answer else "the server did not answer"
    _, final = client.turn(None, tools, model_clients.results_for(client, calls, outputs))
    print(final)
    sys.stdout.flush()
    if args.close == "abrupt":
        os._exit(0)
    if args.close == "hang":
        while True:
            time.sleep(3600)
    ladder = [signal.SIGTERM] if args.close == "careful" else [signal.SIGINT, signal.SIGTERM]
    threads = [threading.Thread(target=s.close, args=(ladder,)) for s in servers.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
