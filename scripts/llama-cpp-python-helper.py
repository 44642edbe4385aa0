"""Helpers for scripts/llama-cpp-python.sh (standard library only).

proxy LISTEN UPSTREAM LOG [null] [--parallel] [--long-children EOS] [--bodies DIR]
    Forwards every request from 127.0.0.1:LISTEN to 127.0.0.1:UPSTREAM,
    streaming the answer back as it comes. The parent's first model call
    (the one request that offers the `subagent` tool before any assistant
    message) gets `tool_choice` set to `subagent`: a 135M model seldom picks
    a tool by itself. Its string parameters get a `maxLength` of 300, which
    the server's grammar for a forced call enforces: the model's own output
    stays within what a window of 4,096 tokens can carry. With `null`, a tool-call-only assistant message's
    `"content": ""` is sent on as `null`, the shape dsh used to send. Each
    request is logged as one JSON line to LOG, with what its answer was: the
    status, the events streamed, and whether a finish reason came.
    --parallel: the forced call's one tool call is sent on twice (the copy
      with its own id), so the parent starts two children at once.
    --long-children EOS: child requests get a logit bias of -100 on the
      token EOS (comma-separated ids) and, when they set none, `max_tokens`
      3000, so a child writes until that limit: answers long enough that
      the parent's next request must be cut.
    --bodies DIR: each request body as sent on is written to DIR/N.json.

probe UPSTREAM
    Sends llama-cpp-python one conversation whose assistant message only
    calls a tool, once with `"content": null` and once with `"content": ""`,
    and prints the status of each.

count UPSTREAM LOG DIR WINDOW [--children N] [--refusals none|any] [--fit usable|window]
    Sends each logged request again without streaming and with
    `max_tokens` 1, reads the prompt tokens the server counts (or its
    refusal), and prints one line per request and a summary against WINDOW.
    Then checks what the run must show, and exits 1 when it does not:
    --children N: at least N child requests answered with model text;
    --refusals none: no request refused (any: the count is only stated);
    --fit usable: the largest request answered fits the usable window (the
      window less the answer's reserve); window: the server's whole window.
    A run whose largest answered request cannot be told fails too.

settle LOG [SECONDS]
    Waits (up to SECONDS, default 30) until every request in LOG has its
    last line, the one written once its answer has been passed on: the
    proxy must not be stopped before, or the last answer goes unlogged.
"""

import http.client
import http.server
import json
import sys
import threading

FORCED = {"type": "function", "function": {"name": "subagent"}}
# The tokens a long child answer runs to (when its request sets no limit):
# with the parent's prompt (about 120 tokens as the server counts it: its
# template leaves the tool definitions out), one such answer overflows the
# 3,072 tokens a 4,096-token window leaves beside the parent's answer, and a
# 135M model on two busy cores writes it in minutes.
LONG_ANSWER = 3000
# The characters of each answer's text the report shows.
TEXT_SHOWN = 80
# The characters each string argument of the forced call may take.
STRING_BOUND = 300


def bound_strings(request):
    """Gives each string parameter of the forced tool a `maxLength`, so the
    grammar llama-cpp-python builds from the schema ends the call's
    arguments in time: a 135M model once filled a `description` with 4,300
    tokens, a request no cut can shorten."""
    for tool in request.get("tools", []):
        if tool["function"]["name"] != FORCED["function"]["name"]:
            continue
        for schema in tool["function"].get("parameters", {}).get("properties", {}).values():
            if schema.get("type") == "string":
                schema.setdefault("maxLength", STRING_BOUND)


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


def duplicate_tool_call(data):
    """The SSE data line `data` with each index-0 tool-call delta followed
    by a copy at index 1 (its id, where it has one, suffixed `-b`)."""
    try:
        chunk = json.loads(data)
        delta = chunk["choices"][0]["delta"]
        calls = delta.get("tool_calls") or []
    except (ValueError, KeyError, IndexError, TypeError):
        return data
    copies = []
    for call in calls:
        if call.get("index", 0) == 0:
            copy = json.loads(json.dumps(call))
            copy["index"] = 1
            if copy.get("id"):
                copy["id"] = copy["id"] + "-b"
            copies.append(copy)
    if not copies:
        return data
    delta["tool_calls"] = calls + copies
    return json.dumps(chunk)


def stream_facts(body):
    """What an SSE body held: events, a finish reason, `[DONE]`, usage."""
    facts = {"events": 0, "finish_reason": None, "done": False, "usage": False, "text_bytes": 0, "text_start": ""}
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            facts["done"] = True
            continue
        facts["events"] += 1
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        if chunk.get("usage"):
            facts["usage"] = True
        for choice in chunk.get("choices") or []:
            if choice.get("finish_reason"):
                facts["finish_reason"] = choice["finish_reason"]
            content = (choice.get("delta") or {}).get("content")
            if isinstance(content, str):
                facts["text_bytes"] += len(content.encode())
                if len(facts["text_start"]) < TEXT_SHOWN:
                    facts["text_start"] = (facts["text_start"] + content)[:TEXT_SHOWN]
    return facts


def answer_text_bytes(body):
    """The bytes of model text in an answer that was not streamed."""
    try:
        content = json.loads(body)["choices"][0]["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return 0
    return len(content.encode()) if isinstance(content, str) else 0


def proxy(listen, upstream, log_path, send_null, parallel, eos, bodies):
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
            with lock:
                counter["n"] += 1
                entry["n"] = counter["n"]
            duplicate = False
            if body is not None and self.path.endswith("/chat/completions"):
                request = json.loads(body)
                messages = request.get("messages", [])
                tools = [t["function"]["name"] for t in request.get("tools", [])]
                parent = "subagent" in tools
                first_parent_call = parent and not any(m.get("role") == "assistant" for m in messages)
                if first_parent_call:
                    request["tool_choice"] = FORCED
                    bound_strings(request)
                    duplicate = parallel
                if eos and not parent:
                    request["logit_bias"] = {str(token): -100 for token in eos}
                    request.setdefault("max_tokens", LONG_ANSWER)
                if send_null:
                    for message in messages:
                        if message.get("role") == "assistant" and message.get("tool_calls") and message.get("content") == "":
                            message["content"] = None
                body = json.dumps(request).encode()
                if bodies:
                    with open(f"{bodies}/{entry['n']}.json", "wb") as out:
                        out.write(body)
                entry.update(
                    roles=[m.get("role") for m in messages],
                    tools=tools,
                    parent=parent,
                    bytes=len(body),
                    stream=bool(request.get("stream")),
                    max_tokens=request.get("max_tokens"),
                    forced_subagent=first_parent_call,
                    tool_call_only_content=tool_call_only_contents(messages),
                )
            with lock:
                with open(log_path, "a") as log:
                    log.write(json.dumps(dict(entry, status=None)) + "\n")
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
            seen = b""
            pending = b""
            try:
                while True:
                    chunk = answer.read1(65536)
                    if not chunk:
                        break
                    seen += chunk
                    if duplicate:
                        pending += chunk
                        lines = pending.split(b"\n")
                        pending = lines.pop()
                        out = []
                        for line in lines:
                            if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
                                line = b"data: " + duplicate_tool_call(line[5:].strip().decode()).encode()
                            out.append(line + b"\n")
                        chunk = b"".join(out)
                    self.wfile.write(chunk)
                    self.wfile.flush()
                if pending:
                    self.wfile.write(pending)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError) as err:
                entry["client_went_away"] = str(err)
            if answer.status >= 400:
                entry["error"] = error_summary(seen.decode(errors="replace"))
            elif entry.get("stream"):
                entry.update(stream_facts(seen))
            else:
                entry["text_bytes"] = answer_text_bytes(seen)
            with lock:
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


def logged(log_path):
    """Each request's last logged line, in request order."""
    merged = {}
    for line in open(log_path):
        entry = json.loads(line)
        merged[entry["n"]] = entry
    return [merged[n] for n in sorted(merged)]


def settle(log_path, seconds):
    """Waits until every logged request has its last line (a status)."""
    import time

    deadline = time.monotonic() + seconds
    while True:
        waiting = [e["n"] for e in logged(log_path) if e.get("status") is None]
        if not waiting:
            return
        if time.monotonic() > deadline:
            print(f"  the proxy had not logged the answers of calls {waiting} after {seconds} s", file=sys.stderr)
            return
        time.sleep(0.2)


def server_count(upstream, request):
    """The prompt tokens the server counts for `request`, or its refusal."""
    request.update(stream=False, max_tokens=1)
    request.pop("logit_bias", None)
    connection = http.client.HTTPConnection("127.0.0.1", upstream, timeout=600)
    connection.request(
        "POST", "/v1/chat/completions", body=json.dumps(request), headers={"content-type": "application/json"}
    )
    answer = connection.getresponse()
    text = answer.read().decode(errors="replace")
    if answer.status == 200:
        return json.loads(text)["usage"]["prompt_tokens"], None
    return None, error_summary(text)[:160]


def count(upstream, log_path, bodies, window, musts):
    """Counts each logged chat request's prompt tokens on the server, then
    checks what the run must show; returns whether it showed it all."""
    largest = None
    refusals = 0
    children = 0
    entries = logged(log_path)
    for e in entries:
        if "roles" not in e:
            continue
        tokens, refusal = server_count(upstream, json.load(open(f"{bodies}/{e['n']}.json")))
        who = "parent" if e.get("parent") else "child"
        how = "streamed" if e.get("stream") else "not streamed"
        # dsh's own ask for a count: not a request the model answers.
        asked = not e.get("stream") and e.get("max_tokens") == 1
        if asked:
            how = "not streamed, max_tokens 1: dsh asking for a count"
        reserve = (None if asked else e.get("max_tokens")) or min(4096, window // 4)
        usable = window - reserve
        counted = (
            f"{tokens} tokens ({100 * tokens / usable:.0f} % of the usable {usable})"
            if tokens is not None
            else f"refused when counted: {refusal}"
        )
        if e["status"] is None:
            print(f"  call {e['n']}: {who}, {len(e['roles'])} messages, {e['bytes']} bytes, {how}: no answer before the run ended; {counted}")
            continue
        refused = e["status"] >= 400 or (e.get("stream") and e.get("events", 0) == 0)
        refusals += refused
        if not refused and not asked and tokens is not None and (largest is None or tokens / usable > largest[0] / largest[1]):
            largest = (tokens, usable, e["n"])
        if who == "child" and not refused and not asked and e.get("text_bytes", 0) > 0:
            children += 1
        answered = f"HTTP {e['status']}"
        if e.get("stream") and e["status"] == 200:
            if e.get("events", 0) == 0:
                answered += ", an empty stream"
            elif e.get("finish_reason"):
                answered += f", finish_reason {e['finish_reason']}"
            else:
                answered += ", cut: [DONE] without a finish reason" if e.get("done") else ", cut: no [DONE]"
            answered += f", {e.get('text_bytes', 0)} bytes of text"
            if who == "child" and e.get("text_start"):
                answered += f" ({json.dumps(' '.join(e['text_start'].split()))}…)"
        print(f"  call {e['n']}: {who}, {len(e['roles'])} messages, {e['bytes']} bytes, {how} -> {answered}; {counted}")
    print(f"  requests: {sum('roles' in e for e in entries)}; refused (a 4xx/5xx, or an empty 200): {refusals}")
    if largest:
        tokens, usable, n = largest
        print(f"  largest request answered: call {n}, {tokens} tokens, {100 * tokens / usable:.0f} % of the usable window ({usable} of {window})")
    return judge(musts, children, refusals, largest, window)


def judge(musts, children, refusals, largest, window):
    """Prints what the run had to show and whether it did; True when all."""
    checks = []
    wanted = int(musts.get("children", 1))
    checks.append((f"at least {wanted} child request(s) answered with model text", children >= wanted, f"{children}"))
    if musts.get("refusals") == "none":
        checks.append(("no request refused", refusals == 0, f"{refusals} refused"))
    fit = musts.get("fit", "window")
    if largest is None:
        checks.append(("the largest request answered, counted by the server", False, "none could be told"))
    else:
        tokens, usable, n = largest
        room = usable if fit == "usable" else window
        what = "the usable window" if fit == "usable" else "the server's window"
        checks.append((f"the largest request answered fits {what} ({room} tokens)", tokens <= room, f"call {n}: {tokens} tokens"))
    print("  must show:")
    for what, shown, seen in checks:
        print(f"    {'shown' if shown else 'NOT SHOWN'}: {what} (seen: {seen})")
    return all(shown for _, shown, _ in checks)


if __name__ == "__main__":
    if sys.argv[1] == "proxy":
        args = sys.argv[2:]
        listen, upstream, log_path = int(args[0]), int(args[1]), args[2]
        rest = args[3:]
        send_null = "null" in rest
        parallel = "--parallel" in rest
        eos = rest[rest.index("--long-children") + 1].split(",") if "--long-children" in rest else []
        bodies = rest[rest.index("--bodies") + 1] if "--bodies" in rest else None
        proxy(listen, upstream, log_path, send_null, parallel, eos, bodies)
    elif sys.argv[1] == "probe":
        probe(int(sys.argv[2]))
    elif sys.argv[1] == "count":
        flags = sys.argv[6:]
        musts = {flags[i].lstrip("-"): flags[i + 1] for i in range(0, len(flags) - 1, 2)}
        sys.exit(0 if count(int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), musts) else 1)
    elif sys.argv[1] == "settle":
        settle(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 30)
    else:
        sys.exit(f"unknown command {sys.argv[1]!r}")
