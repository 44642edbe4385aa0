#!/usr/bin/env bash
# Drives `dsh acp` with the official TypeScript ACP SDK as its client
# (scripts/acp-typescript-client.mjs): initialize, session/new, and a prompt
# whose parent delegates two tasks at once under --max-concurrent 1, so the
# second call goes pending, then in progress. Every message dsh sends must
# pass the SDK's own schemas unchanged. Offline: the scripted model.
#
# Needs npm and the npm registry (scripts/acp-typescript-sdk.sh).
# Run by .ci/run, beside scripts/acp-typescript-subagents.sh; its result is
# in docs/conformance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

target=${CARGO_TARGET_DIR:-$root/target}

source "$root/scripts/acp-typescript-sdk.sh"

echo "==> cargo build -p dsh"
cargo build --quiet -p dsh --bin dsh

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cat > "$scratch/parent.json" <<'JSON'
{"rules": [
  {"when": {"tool_not_offered": "subagent"}, "reply": {"text": "answered {{last_user}}", "delay_ms": 20}},
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent", "arguments": {"description": "first", "prompt": "one"}},
    {"name": "subagent", "arguments": {"description": "second", "prompt": "two"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "Both answered."}}
]}
JSON

echo "==> dsh acp under the TypeScript ACP SDK $sdk_version"
env -u DSH_API_KEY -u DSH_BASE_URL -u DSH_MODEL \
  "$node" "$root/scripts/acp-typescript-client.mjs" "$sdk" "$target/debug/dsh" "$scratch"
