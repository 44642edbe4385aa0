#!/usr/bin/env bash
# The Subagents RFD against an independent implementation, both ways, with
# the official TypeScript ACP SDK (its unstable schemas, generated from its
# schema/v1/schema.unstable.json):
#   1. scripts/acp-typescript-subagents.mjs: an SDK client that advertises
#      `subagents` drives `dsh acp` through announce and stream, a per-child
#      cancel, a parent cancel and a load after a crash, and checks every
#      message dsh sends;
#   2. scripts/acp-typescript-subagent-agent.mjs: an SDK agent that
#      announces two subagents runs as an ACP child of `dsh run`, and
#      `dsh tree --json` shows them under it;
#   3. `dsh check acp` checks that agent, and its subagent updates follow
#      the Subagents RFD (acp.subagents-rfd passes).
# Offline: the scripted model.
#
# Needs npm and the npm registry (scripts/acp-typescript-sdk.sh).
# Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

target=${CARGO_TARGET_DIR:-$root/target}

source "$root/scripts/acp-typescript-sdk.sh"

echo "==> cargo build -p dsh"
cargo build --quiet -p dsh --bin dsh
dsh=$target/debug/dsh

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "==> dsh acp under an SDK $sdk_version client that advertises subagents"
mkdir -p "$scratch/client"
cat > "$scratch/client/script.json" <<'JSON'
{"rules": [
  {"when": {"tool_not_offered": "subagent", "last_user_contains": "slow"}, "reply": {"text": "slow answer", "delay_ms": 60000}},
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "fast answer", "delay_ms": 200}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "slow one", "prompt": "be slow"}},
    {"name": "subagent", "arguments": {"description": "fast one", "prompt": "be fast"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "the parent goes on"}}
]}
JSON
env -u DSH_API_KEY -u DSH_BASE_URL -u DSH_MODEL \
  "$node" "$root/scripts/acp-typescript-subagents.mjs" "$sdk" "$dsh" "$scratch/client"

echo "==> an SDK $sdk_version agent that announces two subagents, as an ACP child of dsh run"
mkdir -p "$scratch/agent"
cat > "$scratch/agent/parent.json" <<'JSON'
{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_ts", "arguments": {"description": "ask the TypeScript agent", "prompt": "split it"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "answered"}}
]}
JSON
cat > "$scratch/agent/parent.toml" <<TOML
[[subagents]]
tool_name = "subagent_ts"
provider = "acp"
command = "$node"
args = ["$root/scripts/acp-typescript-subagent-agent.mjs", "$sdk"]
max_depth = "provider-managed"
TOML
(cd "$scratch/agent" && env -u DSH_API_KEY -u DSH_BASE_URL -u DSH_MODEL \
  "$dsh" run --quiet --config parent.toml --script parent.json "go" >/dev/null)
(cd "$scratch/agent" && "$dsh" tree --json) > "$scratch/agent/tree.json"
"$node" - "$scratch/agent/tree.json" <<'JS'
const tree = JSON.parse(require("node:fs").readFileSync(process.argv[2], "utf8"));
const acp = tree.root.children[0];
const shown = (acp?.children ?? []).map((node) => [node.label, node.task, node.turns[0].ending.state, node.turns[0].ending.reason ?? ""]);
const expected = [
  ["planner", "plan the work", "completed", ""],
  ["checker", "check the plan", "stopped", "cancelled"],
];
const results = [
  [`the ACP child ran and answered (${acp?.turns?.[0]?.ending?.state})`, acp?.turns?.[0]?.ending?.state === "completed"],
  [`its two subagents show under it: ${JSON.stringify(shown)}`, JSON.stringify(shown) === JSON.stringify(expected)],
  [`they are sessions of it (${acp?.children?.[0]?.place?.ran})`, acp?.children?.every((node) => node.place.kind === "elsewhere")],
];
for (const [what, ok] of results) console.log(`${ok ? "pass" : "FAIL"}  ${what}`);
const passed = results.filter(([, ok]) => ok).length;
console.log(`${passed} passed, ${results.length - passed} failed`);
process.exit(passed === results.length ? 0 : 1);
JS

echo "==> dsh check acp against the SDK $sdk_version agent that announces subagents"
(cd "$scratch/agent" && "$dsh" check acp -- "$node" "$root/scripts/acp-typescript-subagent-agent.mjs" "$sdk") \
  | tee "$scratch/agent/check.txt"
grep -q "^CAPABILITY PASS    acp.subagents-rfd" "$scratch/agent/check.txt" \
  || { echo "FAIL  acp.subagents-rfd did not pass" >&2; exit 1; }
