"""Small stdlib clients of the four model wire formats, shaped like the
requests the official SDKs (and the hosts built on them) send:

- Anthropic Messages as @anthropic-ai/sdk sends it for Claude Code
  (POST /v1/messages?beta=true, `x-api-key`, `anthropic-version`, tools with
  `input_schema`, `stream: true`; results as `tool_result` blocks);
- OpenAI Chat Completions as the openai SDK sends it for Qwen Code and
  opencode's openai-compatible provider (tools as `{type: function,
  function: {...}}`, `stream_options.include_usage`; results as `role: tool`);
- OpenAI Responses as Codex sends it (`instructions`, `input` items,
  `store: false`; results as `function_call_output` items);
- Gemini as @google/genai sends it for Gemini CLI
  (`:streamGenerateContent?alt=sse`, `x-goog-api-key`, `functionDeclarations`
  with `parametersJsonSchema`; results as `functionResponse` parts).

Each `turn` returns (tool calls as [(id, name, args)], text) parsed from the
streamed answer, failing loudly on anything the SDK's parser would reject.
Run as a script, it plays one whole conversation against a base URL and
prints what it saw as JSON.
"""

import json
import sys
import urllib.error
import urllib.request


def post(url, body, headers):
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.headers.get("content-type", ""), response.read().decode()


def sse_events(text):
    """(event name or None, parsed data) for each SSE event, as the SDKs'
    line decoders split them (blank line ends an event; CRLF allowed)."""
    events = []
    name, data = None, []
    for line in text.replace("\r\n", "\n").split("\n"):
        if line == "":
            if data:
                joined = "\n".join(data)
                events.append((name, joined if joined == "[DONE]" else json.loads(joined)))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[len("event:"):].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:"):].lstrip())
    assert not data, "an unterminated SSE event"
    return events


class Anthropic:
    name = "anthropic"

    def __init__(self, base):
        self.url = base.rstrip("/") + "/v1/messages?beta=true"
        self.messages = []

    def tools(self, tools):
        return [{"name": n, "description": d, "input_schema": s} for n, d, s in tools]

    def turn(self, prompt, tools, results=None):
        if results is None:
            self.messages.append({"role": "user", "content": [{"type": "text", "text": prompt}]})
        else:
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": out}]}
                for i, out in results
            ]})
        body = {
            "model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": True,
            "system": [{"type": "text", "text": "You are a host under test."}],
            "messages": self.messages, "tools": self.tools(tools),
            "metadata": {"user_id": "conformance"},
        }
        kind, text = post(self.url, body, {
            "x-api-key": "sk-test", "anthropic-version": "2023-06-01",
            "anthropic-beta": "claude-code-20250219",
        })
        assert kind.startswith("text/event-stream"), kind
        events = sse_events(text)
        assert events[0][0] == "message_start" and events[-1][0] == "message_stop", events
        blocks = {}
        stop = None
        for name, data in events:
            assert name == data["type"], (name, data)
            if name == "content_block_start":
                blocks[data["index"]] = dict(data["content_block"], partial="")
            elif name == "content_block_delta":
                delta = data["delta"]
                block = blocks[data["index"]]
                if delta["type"] == "input_json_delta":
                    block["partial"] += delta["partial_json"]
                elif delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                else:
                    raise AssertionError(delta)
            elif name == "message_delta":
                stop = data["delta"]["stop_reason"]
        calls, text_out, content = [], "", []
        for index in sorted(blocks):
            block = blocks[index]
            if block["type"] == "tool_use":
                args = json.loads(block["partial"] or "{}")
                calls.append((block["id"], block["name"], args))
                content.append({"type": "tool_use", "id": block["id"], "name": block["name"], "input": args})
            else:
                text_out += block["text"]
                content.append({"type": "text", "text": block["text"]})
        assert stop == ("tool_use" if calls else "end_turn"), stop
        self.messages.append({"role": "assistant", "content": content})
        return calls, text_out


class OpenAI:
    name = "openai"

    def __init__(self, base):
        self.url = base.rstrip("/") + "/chat/completions"
        self.messages = [{"role": "system", "content": "You are a host under test."}]

    def turn(self, prompt, tools, results=None):
        if results is None:
            self.messages.append({"role": "user", "content": prompt})
        else:
            self.messages.extend(
                {"role": "tool", "tool_call_id": i, "content": out} for i, out in results
            )
        body = {
            "model": "qwen3-coder-plus", "messages": self.messages, "stream": True,
            "stream_options": {"include_usage": True}, "tool_choice": "auto",
            "tools": [{"type": "function", "function": {"name": n, "description": d, "parameters": s}}
                      for n, d, s in tools],
        }
        kind, text = post(self.url, body, {"authorization": "Bearer sk-test"})
        assert kind.startswith("text/event-stream"), kind
        events = sse_events(text)
        assert events[-1][1] == "[DONE]", events[-1]
        calls, text_out, finish, usage = {}, "", None, None
        for _, chunk in events[:-1]:
            assert chunk["object"] == "chat.completion.chunk", chunk
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk["choices"]:
                delta = choice["delta"]
                text_out += delta.get("content") or ""
                for call in delta.get("tool_calls") or []:
                    slot = calls.setdefault(call["index"], {"id": None, "name": "", "arguments": ""})
                    slot["id"] = call.get("id") or slot["id"]
                    function = call.get("function", {})
                    slot["name"] += function.get("name") or ""
                    slot["arguments"] += function.get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        assert usage is not None, "include_usage asked for a usage chunk"
        ordered = [calls[i] for i in sorted(calls)]
        assert finish == ("tool_calls" if ordered else "stop"), finish
        out = [(c["id"], c["name"], json.loads(c["arguments"] or "{}")) for c in ordered]
        message = {"role": "assistant", "content": text_out or None}
        if ordered:
            message["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["arguments"]}}
                                     for c in ordered]
        self.messages.append(message)
        return out, text_out


class Responses:
    name = "openai-responses"

    def __init__(self, base):
        self.url = base.rstrip("/") + "/responses"
        self.input = []

    @staticmethod
    def tools(tools):
        """As Codex 0.171 sends them: its own tools as functions, each MCP
        server's tools in a `namespace` tool named `mcp__SERVER`."""
        out, spaces = [], {}
        for n, d, s in tools:
            function = {"type": "function", "name": n, "description": d, "strict": False, "parameters": s}
            if n.startswith("mcp__"):
                _, server, tool = n.split("__", 2)
                function["name"] = tool
                space = spaces.setdefault(server, {"type": "namespace", "name": f"mcp__{server}",
                                                   "description": f"Tools in the mcp__{server} namespace.",
                                                   "tools": []})
                if not space["tools"]:
                    out.append(space)
                space["tools"].append(function)
            else:
                out.append(function)
        return out

    def turn(self, prompt, tools, results=None):
        if results is None:
            self.input.append({"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": prompt}]})
        else:
            self.input.extend({"type": "function_call_output", "call_id": i, "output": out}
                              for i, out in results)
        body = {
            "model": "gpt-5-codex", "instructions": "You are a host under test.",
            "input": self.input, "tool_choice": "auto", "parallel_tool_calls": True,
            "store": False, "stream": True, "include": [], "prompt_cache_key": "conformance",
            "tools": self.tools(tools),
        }
        kind, text = post(self.url, body, {"authorization": "Bearer sk-test"})
        assert kind.startswith("text/event-stream"), kind
        events = sse_events(text)
        assert events[0][0] == "response.created", events[0]
        assert events[-1][0] == "response.completed", events[-1]
        done, text_out, seq = [], "", -1
        for name, data in events:
            assert name == data["type"], (name, data)
            assert data["sequence_number"] > seq, data
            seq = data["sequence_number"]
            if name == "response.output_item.done":
                done.append(data["item"])
            elif name == "response.output_text.delta":
                text_out += data["delta"]
        assert events[-1][1]["response"]["id"], "Codex needs the response id"
        calls = []
        for item in done:
            if item["type"] == "function_call":
                name = item["name"]
                if item.get("namespace"):
                    name = item["namespace"] + "__" + name
                calls.append((item["call_id"], name, json.loads(item["arguments"])))
                self.input.append({"type": "function_call", "name": item["name"],
                                   "arguments": item["arguments"], "call_id": item["call_id"]})
            elif item["type"] == "message":
                self.input.append({"type": "message", "role": "assistant", "content": item["content"]})
        return calls, text_out


class Gemini:
    name = "gemini"

    def __init__(self, base):
        self.url = base.rstrip("/") + "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        self.contents = []

    def turn(self, prompt, tools, results=None):
        if results is None:
            self.contents.append({"role": "user", "parts": [{"text": prompt}]})
        else:
            self.contents.append({"role": "user", "parts": [
                {"functionResponse": {"id": i, "name": n, "response": {"output": out}}}
                for i, n, out in results
            ]})
        body = {
            "contents": self.contents,
            "systemInstruction": {"role": "user", "parts": [{"text": "You are a host under test."}]},
            "generationConfig": {"temperature": 0, "topP": 1},
            "tools": [{"functionDeclarations": [
                {"name": n, "description": d, "parametersJsonSchema": s} for n, d, s in tools
            ]}],
        }
        kind, text = post(self.url, body, {"x-goog-api-key": "test"})
        assert kind.startswith("text/event-stream"), kind
        calls, text_out, parts, finish = [], "", [], None
        for _, chunk in sse_events(text):
            for candidate in chunk["candidates"]:
                finish = candidate.get("finishReason") or finish
                for part in candidate["content"]["parts"]:
                    parts.append(part)
                    if "functionCall" in part:
                        call = part["functionCall"]
                        calls.append((call.get("id") or call["name"], call["name"], call["args"]))
                    text_out += part.get("text", "")
        assert finish == "STOP", finish
        self.contents.append({"role": "model", "parts": parts})
        return calls, text_out


CLIENTS = {c.name: c for c in (Anthropic, OpenAI, Responses, Gemini)}


def base_url(api, environ):
    """The base URL a real SDK of `api` takes from the environment that
    `mcp-conformance host --model-api` sets."""
    return {
        "anthropic": lambda: environ["ANTHROPIC_BASE_URL"],
        "openai": lambda: environ["OPENAI_BASE_URL"],
        "openai-responses": lambda: environ["OPENAI_BASE_URL"],
        "gemini": lambda: environ["GOOGLE_GEMINI_BASE_URL"],
    }[api]()


def results_for(client, calls, outputs):
    if client.name == "gemini":
        return [(i, n, outputs[i]) for i, n, _ in calls]
    return [(i, outputs[i]) for i, _, _ in calls]


def side_requests(base):
    """The requests hosts make besides model turns: a HEAD of the root, a
    model list, a token count. Returns their status codes."""
    codes = []
    for method, path, body in [("HEAD", "/", None), ("GET", "/v1/models", None),
                               ("POST", "/v1/messages/count_tokens", {"messages": []}),
                               ("GET", "/no/such/thing", None)]:
        request = urllib.request.Request(base.rstrip("/") + path, method=method,
                                         data=json.dumps(body).encode() if body else None)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                payload = response.read()
                codes.append([path, response.status, json.loads(payload) if payload else None])
        except urllib.error.HTTPError as error:
            codes.append([path, error.code, None])
    return codes


def deferred(base):
    """Qwen Code's deferred MCP tools: only `tool_search` is offered, the
    MCP tools are named in the system prompt. Returns each turn's calls."""
    search = ("tool_search", "Fetches deferred tools.", {
        "type": "object", "required": ["query"],
        "properties": {"query": {"type": "string", "minLength": 1},
                       "max_results": {"type": "integer", "minimum": 1, "maximum": 20}}})
    echo = ("mcp__alpha__echo", "Returns its `text` argument.",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    client = OpenAI(base)
    client.messages[0]["content"] += "\n## Deferred Tools\nmcp__alpha__echo\nmcp__beta__pid"
    turns = []
    calls, _ = client.turn("use every tool", [search])
    turns.append([[n, a] for _, n, a in calls])
    # The search registered the tools: the next turn offers them.
    calls, _ = client.turn(None, [search, echo], [(i, "<functions>...</functions>") for i, _, _ in calls])
    turns.append([[n, a] for _, n, a in calls])
    calls, text = client.turn(None, [search, echo], [(i, "ok") for i, _, _ in calls])
    turns.append([[n, a] for _, n, a in calls])
    return {"turns": turns, "final": text}


if __name__ == "__main__" and sys.argv[1] == "deferred":
    print(json.dumps(deferred(sys.argv[2])))
    sys.exit(0)

if __name__ == "__main__" and sys.argv[1] == "side":
    print(json.dumps(side_requests(sys.argv[2])))
    sys.exit(0)

if __name__ == "__main__":
    # model_clients.py API BASE_URL: one conversation with a tool list like
    # a host's (two fixture servers' tools, prefixed, and a host tool).
    api, base = sys.argv[1], sys.argv[2]
    schema = lambda props, required: {"type": "object", "properties": props, "required": required}
    tools = [
        ("mcp__alpha__echo", "Returns its `text` argument.", schema({"text": {"type": "string"}}, ["text"])),
        ("mcp__beta__add", "Returns a + b.", schema({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"])),
        ("mcp__beta__sleep_ms", "Sleeps.", schema({"ms": {"type": "integer", "minimum": 0}}, ["ms"])),
        ("read_file", "A host's own tool.", schema({"path": {"type": "string"}}, ["path"])),
    ]
    client = CLIENTS[api](base)
    calls, text = client.turn("use every tool", tools)
    outputs = {i: "ok" for i, _, _ in calls}
    final_calls, final = client.turn(None, tools, results_for(client, calls, outputs))
    print(json.dumps({"calls": [[n, a] for _, n, a in calls], "first_text": text,
                      "final_calls": len(final_calls), "final": final}))
