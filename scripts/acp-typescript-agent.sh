#!/usr/bin/env bash
# Checks an ACP agent written with the official TypeScript ACP SDK
# (scripts/acp-typescript-agent.mjs) as a child of dsh: `dsh check acp`
# prints its table, then the provider kit (dsh-subagent-conformance) runs
# every cell of the delegation contract over the `acp` provider with that
# agent as its child (crates/dsh/tests/conformance_typescript.rs, ignored
# in a plain `cargo test` because it needs Node.js and the SDK).
#
# Needs npm and the npm registry (scripts/acp-typescript-sdk.sh).
# Run by .ci/run, after the other TypeScript scripts; its result is
# in docs/conformance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

target=${CARGO_TARGET_DIR:-$root/target}

source "$root/scripts/acp-typescript-sdk.sh"
export ACP_TS_NODE=$node ACP_TS_SDK=$sdk
export ACP_TS_AGENT=$root/scripts/acp-typescript-agent.mjs

echo "==> cargo build -p dsh"
cargo build --quiet -p dsh --bin dsh

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
echo "==> dsh check acp against the TypeScript ACP SDK $sdk_version agent"
(cd "$scratch" && "$target/debug/dsh" check acp -- "$ACP_TS_NODE" "$ACP_TS_AGENT" "$ACP_TS_SDK")

echo "==> the provider kit over the acp provider, the TypeScript SDK agent as its child"
cargo test --quiet -p dsh --test conformance_typescript -- --ignored --nocapture
