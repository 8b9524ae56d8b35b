#!/usr/bin/env python3
"""Driver (docs/client-check.md, protocol v2) for the Python MCP SDK.

The client under test is the SDK's own `stdio_client` + `ClientSession`, used
the way its documentation shows: entered as async context managers, closed
by leaving them. `exit` ends the program without leaving them.

It answers `hello` (protocol 2) once the SDK is imported, with the settings
the SDK really uses: it takes no graces (its close waits 2 s after closing
stdin, then SIGTERMs the server's process group and waits 2 s more before
SIGKILL), starts each server in a session of its own
(`start_new_session=True`), and bounds the handshake by the session's read
timeout.

    mcp-conformance client -- python3 drivers/python/mcp_driver.py
"""

import asyncio
import importlib.metadata
import json
import sys
from contextlib import AsyncExitStack

import mcp.client.stdio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def hello():
    """What this client is and does, for the harness (protocol 2)."""
    # The SDK's own wait after closing stdin, where it names it.
    eof_grace = getattr(mcp.client.stdio, "PROCESS_TERMINATION_TIMEOUT", 2.0)
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return {
        "protocol": 2,
        "client": {"name": "mcp (Python SDK)", "version": version},
        "eras": ["legacy"],
        "settings": {
            "graces": "fixed",
            "eof_grace_ms": int(eof_grace * 1000),
            "term_grace_ms": 2000,
            "leader": "session",
            "handshake_bound": True,
            "contain": False,
        },
    }


def answer(request_id, ok, result=None, error=None):
    message = {"id": request_id, "ok": ok}
    if ok:
        message["result"] = result if result is not None else {}
    else:
        message["error"] = error
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def read_lines():
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return
        yield line


async def main():
    stack = None
    session = None
    async for line in read_lines():
        try:
            request = json.loads(line)
        except ValueError:
            continue
        request_id = request.get("id")
        op = request.get("op")
        try:
            if op == "hello":
                answer(request_id, True, hello())
            elif op == "connect":
                server = request["server"]
                timeout = request.get("timeout_ms", 30000) / 1000
                params = StdioServerParameters(
                    command=server["command"],
                    args=server.get("args", []),
                    env=server.get("env"),
                    cwd=server.get("cwd"),
                )
                stack = AsyncExitStack()
                try:
                    read, write = await stack.enter_async_context(stdio_client(params))
                    session = await stack.enter_async_context(
                        ClientSession(read, write, read_timeout_seconds=timeout)
                    )
                    await asyncio.wait_for(session.initialize(), timeout)
                except BaseException:
                    # A failed start leaves the `async with` blocks, as host
                    # code written with them would.
                    await stack.aclose()
                    stack = None
                    raise
                answer(request_id, True)
            elif op == "list_tools":
                tools = await session.list_tools()
                answer(request_id, True, {"count": len(tools.tools)})
            elif op == "call_tool":
                result = await session.call_tool(
                    request["name"],
                    request.get("arguments"),
                    read_timeout_seconds=request.get("timeout_ms", 30000) / 1000,
                )
                # mcp 2.x names the field `is_error`; 1.x named it `isError`.
                is_error = getattr(result, "is_error", None)
                if is_error is None:
                    is_error = getattr(result, "isError", False)
                answer(request_id, True, {"is_error": bool(is_error)})
            elif op == "close":
                if stack is not None:
                    await stack.aclose()
                    stack = None
                answer(request_id, True)
            elif op == "exit":
                answer(request_id, True)
                # The program ends without leaving the context managers.
                return
            else:
                answer(request_id, False, error=f"unknown op {op!r}")
        except BaseException as error:  # the client's own message, whatever it is
            answer(request_id, False, error=f"{type(error).__name__}: {error}")


if __name__ == "__main__":
    asyncio.run(main())
