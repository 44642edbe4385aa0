"""Helpers for scripts/llama-cpp-python.sh (standard library only).

proxy LISTEN UPSTREAM LOG [null]
    Forwards every request from 127.0.0.1:LISTEN to 127.0.0.1:UPSTREAM,
    streaming the answer back as it comes. The parent's first model call
    (the one request that offers the `subagent` tool before any assistant
    message) gets `tool_choice` set to `subagent`: a 135M model seldom picks
    a tool by itself. With `null`, a tool-call-only assistant message's
    `"content": ""` is sent on as `null`, the shape dsh used to send. Each
    request is logged as one JSON line to LOG.

probe UPSTREAM
    Sends llama-cpp-python one conversation whose assistant message only
    calls a tool, once with `"content": null` and once with `"content": ""`,
    and prints the status of each.
"""

import http.client
import http.server
import json
import sys
import threading

FORCED = {"type": "function", "function": {"name": "subagent"}}


def tool_call_only_contents(messages):
    """The `content` of each assistant message that calls tools."""
    return [m.get("content", "<absent>") for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]


def error_summary(text):
    """One line for an error body: for a validation error, the count and
    what it says about an assistant message's content."""
    summary = " ".join(text.split())[:300]
    try:
        lines = json.loads(text)["error"]["message"].splitlines()
    except (ValueError, KeyError, TypeError, AttributeError):
        return summary
    about = [line.strip() for line in lines if "AssistantMessage" in line and "'content'" in line]
    return f"{lines[0].strip().rstrip(':')}; the assistant message's: {about[0]}" if about else summary


def proxy(listen, upstream, log_path, send_null):
    lock = threading.Lock()
    counter = {"n": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.forward(None)

        def do_POST(self):
            length = int(self.headers.get("content-length", "0"))
            self.forward(self.rfile.read(length))

        def forward(self, body):
            entry = {"path": self.path}
            if body is not None and self.path.endswith("/chat/completions"):
                request = json.loads(body)
                messages = request.get("messages", [])
                tools = [t["function"]["name"] for t in request.get("tools", [])]
                first_parent_call = "subagent" in tools and not any(m.get("role") == "assistant" for m in messages)
                if first_parent_call:
                    request["tool_choice"] = FORCED
                if send_null:
                    for message in messages:
                        if message.get("role") == "assistant" and message.get("tool_calls") and message.get("content") == "":
                            message["content"] = None
                body = json.dumps(request).encode()
                entry.update(
                    roles=[m.get("role") for m in messages],
                    tools=tools,
                    forced_subagent=first_parent_call,
                    tool_call_only_content=tool_call_only_contents(messages),
                )
            connection = http.client.HTTPConnection("127.0.0.1", upstream, timeout=600)
            headers = {"content-type": "application/json", "accept": self.headers.get("accept", "*/*")}
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            entry["status"] = answer.status
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(name, value)
            self.send_header("connection", "close")
            self.end_headers()
            error = b""
            while True:
                chunk = answer.read1(65536)
                if not chunk:
                    break
                if answer.status >= 400:
                    error += chunk
                self.wfile.write(chunk)
                self.wfile.flush()
            if error:
                entry["error"] = error_summary(error.decode(errors="replace"))
            with lock:
                counter["n"] += 1
                entry["n"] = counter["n"]
                with open(log_path, "a") as log:
                    log.write(json.dumps(entry) + "\n")

    server = http.server.ThreadingHTTPServer(("127.0.0.1", listen), Handler)
    server.serve_forever()


def probe(upstream):
    for content in (None, ""):
        request = {
            "messages": [
                {"role": "system", "content": "You are helpful."},
                {"role": "user", "content": "What is 2+2?"},
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": '{"x":"2+2"}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "4"},
            ],
            "max_tokens": 1,
        }
        connection = http.client.HTTPConnection("127.0.0.1", upstream, timeout=600)
        connection.request(
            "POST", "/v1/chat/completions", body=json.dumps(request), headers={"content-type": "application/json"}
        )
        answer = connection.getresponse()
        text = answer.read().decode(errors="replace")
        detail = f" ({error_summary(text)})" if answer.status >= 400 else ""
        print(f'probe: "content": {json.dumps(content)} -> HTTP {answer.status}{detail}')


if __name__ == "__main__":
    if sys.argv[1] == "proxy":
        proxy(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:] == ["null"])
    elif sys.argv[1] == "probe":
        probe(int(sys.argv[2]))
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}")
