"""A minimal MCP stdio server with the standard library only: what a Python
server author would grade with the wheel (xtask/tests/dist.rs). One
JSON-RPC message a line on stdin and stdout, nothing else on stdout; it
exits when stdin reaches EOF, and dies of SIGTERM as Python does."""

import json
import sys


def answer(request):
    method = request.get("method")
    if method == "initialize":
        params = request.get("params") or {}
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdlib-python-server", "version": "1.0.0"},
        }
    if method == "tools/list":
        return {"tools": []}
    if method == "ping":
        return {}
    return None


def main():
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # a notification, or a reply to us
        result = answer(message)
        if result is None:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": "method not found"},
            }
        else:
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
