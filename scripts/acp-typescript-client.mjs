// Drives `dsh acp` with the official TypeScript ACP SDK as the client, and
// checks every message it sends against the SDK's own schemas (zod).
//
//   node acp-typescript-client.mjs <sdk directory> <dsh> <dir>
//
// <dir> holds parent.json, the parent's script: it delegates two tasks at
// once, and dsh runs under --max-concurrent 1, so the second call goes
// pending, then in progress, while the first child's progress shows on its
// call (scripts/acp-typescript-client.sh writes it).
import { pathToFileURL } from "node:url";
import path from "node:path";
import { canonical, schemaCheck, startDsh } from "./acp-typescript-dsh.mjs";

const [sdkDir, dsh, dir] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(sdkDir, "dist/v1/stable/acp.js")));
const zod = await import(pathToFileURL(path.join(sdkDir, "dist/v1/schema/zod.gen.js")));
const { methods } = sdk;

const args = ["--quiet", "--max-concurrent", "1", "--script", path.join(dir, "parent.json")];
const { child, exited, raw, received, app, stream } = startDsh(sdk, dsh, args, dir, "acp-typescript-client");
const failures = [];
// Stable schemas: a message must come out exactly as dsh sent it.
const check = schemaCheck(failures);

let stopReason;
await app.connectWith(stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: {} });
  check("initialize response", zod.zInitializeResponse, init);
  const session = await agent.request(methods.agent.session.new, { cwd: dir, mcpServers: [] });
  check("session/new response", zod.zNewSessionResponse, session);
  const answer = await agent.request(methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text: "Ask both." }],
  });
  check("session/prompt response", zod.zPromptResponse, answer);
  stopReason = answer.stopReason;
});
child.stdin.end();
const code = await exited;

const notifications = raw.map((line) => JSON.parse(line)).filter((message) => message.method === "session/update");
for (const notification of notifications) check("session/update", zod.zSessionNotification, notification.params);
const updates = notifications.map((notification) => notification.params.update);
const statuses = (call) =>
  updates.filter((update) => update.toolCallId === call && update.status).map((update) => update.status);
const kinds = [...new Set(updates.map((update) => update.sessionUpdate))];

const results = [
  ["dsh acp exited 0", code === 0],
  ["the turn ended end_turn", stopReason === "end_turn"],
  [`every line dsh wrote is JSON-RPC (${raw.length} lines)`, raw.every((line) => JSON.parse(line).jsonrpc === "2.0")],
  [`every message passes the SDK's schemas unchanged (${notifications.length} session/update, 3 responses)`, failures.length === 0],
  [`the SDK delivered each of them to the client (${received.length})`, received.length === notifications.length],
  [`update kinds: ${kinds.join(", ")}`, ["agent_message_chunk", "tool_call", "tool_call_update"].every((k) => kinds.includes(k))],
  [`first call: ${statuses("call_1_0").join(" → ")}`, statuses("call_1_0").at(-1) === "completed"],
  [
    "the first child's progress shows on its call",
    updates.some((update) => update.toolCallId === "call_1_0" && !update.status && update.content?.length === 1),
  ],
  [
    `second call (queued): ${statuses("call_1_1").join(" → ")}`,
    JSON.stringify(statuses("call_1_1")) === JSON.stringify(["in_progress", "pending", "in_progress", "completed"]),
  ],
];
for (const failure of failures) console.log(`  schema: ${failure}`);
for (const [what, ok] of results) console.log(`${ok ? "pass" : "FAIL"}  ${what}`);
process.exit(results.every(([, ok]) => ok) ? 0 : 1);
