// Drives `dsh acp` with the official TypeScript ACP SDK as a client that
// advertises `subagents` (the Subagents RFD), and checks every message dsh
// sends against the SDK's unstable schemas (zod, generated from its
// schema/v1/schema.unstable.json), unchanged.
//
//   node acp-typescript-subagents.mjs <sdk directory> <dsh> <dir>
//
// <dir> holds script.json: a parent that asks a slow child and a fast one
// at once (scripts/acp-typescript-subagents.sh writes it). In order:
//   1. announce and stream: each child is announced on the parent's session
//      before any update of its own, and ends once, after its last update;
//   2. a per-child cancel: the slow child alone ends `cancelled`, the parent
//      reads its cancelled result and answers;
//   3. a parent cancel: every child ends before the prompt answers
//      `cancelled`;
//   4. a load after a crash: dsh is killed while a child runs; a new dsh
//      loads the session and replays that child announced and left
//      running, since the next prompt resumes it (nothing is closed as
//      `_disconnected`), the same on a second load.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { canonical, preserved, schemaCheck, startDsh } from "./acp-typescript-dsh.mjs";

const [sdkDir, dsh, dir] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(sdkDir, "dist/v1/unstable/acp.js")));
const zod = await import(pathToFileURL(path.join(sdkDir, "dist/v1/unstable/schema/zod.gen.js")));
const schema = JSON.parse(readFileSync(path.join(sdkDir, "schema/v1/schema.unstable.json"), "utf8"));
const { methods } = sdk;
const updateKinds = new Set(
  schema.$defs.SessionUpdate.oneOf.map((variant) => variant.properties.sessionUpdate.const),
);

const failures = [];
const results = [];
const expect = (what, ok) => results.push([what, Boolean(ok)]);

// The unstable schemas add defaults for fields of capabilities dsh does not
// take, such as mcpCapabilities.acp: those may be added, nothing else.
const check = schemaCheck(failures, preserved);

/// One `dsh acp` under an SDK client that advertises `subagents`.
const start = (extra) =>
  startDsh(sdk, dsh, ["--quiet", "--script", path.join(dir, "script.json"), ...extra], dir, "acp-typescript-subagents");

/// Every message dsh wrote, checked against the unstable schemas.
function checkAll(raw, label) {
  const messages = raw.map((line) => JSON.parse(line));
  for (const message of messages) {
    if (message.jsonrpc !== "2.0") failures.push(`${label}: not JSON-RPC: ${JSON.stringify(message)}`);
    if (message.method === "session/update") {
      check(`${label} session/update`, zod.zSessionNotification, message.params);
      if (!updateKinds.has(message.params.update.sessionUpdate))
        failures.push(`${label}: ${message.params.update.sessionUpdate} is not in schema.unstable.json`);
    }
  }
  return messages.filter((message) => message.method === "session/update").map((message) => message.params);
}

const subagentUpdate = (params) => params.update.sessionUpdate === "subagent_update";
const announced = (title) => (params) => subagentUpdate(params) && params.update.title === title;
const terminal = (notifications, child) =>
  notifications.filter(
    (params) => subagentUpdate(params) && params.update.sessionId === child && params.update.state?.state === "idle",
  );

/// Each announced child: announced before its first update, exactly one
/// terminal state after its last.
function orderOfEveryChild(notifications, label, open = []) {
  const children = notifications.filter((params) => subagentUpdate(params) && params.update.state?.state === "running");
  for (const announce of children) {
    const child = announce.update.sessionId;
    const at = notifications.indexOf(announce);
    const own = notifications.map((params, index) => [params, index]).filter(([params]) => params.sessionId === child);
    const ends = terminal(notifications, child);
    const end = notifications.indexOf(ends[0]);
    expect(`${label}: ${announce.update.title} announced before its own updates`, own.every(([, index]) => index > at));
    if (open.includes(child)) {
      expect(`${label}: ${announce.update.title} is left running (${ends.length} ends)`, ends.length === 0);
      continue;
    }
    expect(`${label}: ${announce.update.title} ends once, after its last update (${ends.length})`, ends.length === 1 && own.every(([, index]) => index < end));
  }
  return children.length;
}

// 1–3: one connection, with transcripts kept for step 4.
const data = path.join(dir, "data");
const first = start(["--data-dir", data]);
let session;
let killedFrom = 0;
await first.app.connectWith(first.stream, async (agent) => {
  const init = await agent.request(methods.agent.initialize, {
    protocolVersion: 1,
    clientCapabilities: { subagents: {} },
  });
  check("initialize response", zod.zInitializeResponse, init);
  const created = await agent.request(methods.agent.session.new, { cwd: dir, mcpServers: [] });
  check("session/new response", zod.zNewSessionResponse, created);
  session = created.sessionId;

  // 1 and 2: both children announced; the slow one cancelled by its id.
  const turn = agent.request(methods.agent.session.prompt, {
    sessionId: session,
    prompt: [{ type: "text", text: "Ask both." }],
  });
  const slow = (await first.until(announced("slow one"))).update.sessionId;
  await agent.notify(methods.agent.session.cancel, { sessionId: slow });
  const answer = await turn;
  check("session/prompt response", zod.zPromptResponse, answer);
  expect(`per-child cancel: the parent's turn goes on (${answer.stopReason})`, answer.stopReason === "end_turn");
  const ends = terminal(first.received, slow);
  expect(
    `per-child cancel: the slow child ends cancelled, on the parent's session (${ends.map((e) => e.update.state.stopReason)})`,
    ends.length === 1 && ends[0].update.state.stopReason === "cancelled" && ends[0].sessionId === session,
  );
  const results = first.received.filter((params) => params.sessionId === session && params.update.sessionUpdate === "tool_call_update" && params.update.content);
  expect(
    "per-child cancel: the parent's model read the cancelled result",
    results.some((params) => JSON.stringify(params.update.content).includes("cancelled")),
  );
  expect(
    "per-child cancel: the parent answered after it",
    first.received.some((params) => params.sessionId === session && params.update.content?.text === "the parent goes on"),
  );
  // A child's id is no session a client prompts.
  const refused = await agent
    .request(methods.agent.session.prompt, { sessionId: slow, prompt: [{ type: "text", text: "hi" }] })
    .then(() => null, (error) => error);
  expect(`a prompt to a child's session is refused: ${refused?.message}`, refused?.message?.includes("subagent session"));

  // 3: the parent cancelled while its children run.
  const before = first.received.length;
  const second = agent.request(methods.agent.session.prompt, {
    sessionId: session,
    prompt: [{ type: "text", text: "Ask both again." }],
  });
  await first.until((params) => first.received.indexOf(params) >= before && announced("slow one")(params));
  await agent.notify(methods.agent.session.cancel, { sessionId: session });
  const cancelled = await second;
  expect(`parent cancel: the prompt answers ${cancelled.stopReason}`, cancelled.stopReason === "cancelled");
  const turnTwo = first.received.slice(before);
  const childrenTwo = turnTwo.filter((params) => subagentUpdate(params) && params.update.state?.state === "running");
  expect(
    `parent cancel: every child ended before the answer (${childrenTwo.length})`,
    childrenTwo.length === 2 && childrenTwo.every((announce) => terminal(turnTwo, announce.update.sessionId).length === 1),
  );

  // 4 (first half): a third turn, and dsh dies while the slow child runs.
  const third = first.received.length;
  killedFrom = third;
  agent
    .request(methods.agent.session.prompt, { sessionId: session, prompt: [{ type: "text", text: "Once more." }] })
    .catch(() => {});
  await first.until((params) => first.received.indexOf(params) >= third && announced("slow one")(params));
  // Once the fast one has ended, only the slow one runs.
  const fast = (await first.until((params) => first.received.indexOf(params) >= third && announced("fast one")(params))).update.sessionId;
  await first.until((params) => first.received.indexOf(params) >= third && terminal([params], fast).length === 1);
  first.child.kill("SIGKILL");
}).catch(() => {});
await first.exited;
const firstUpdates = checkAll(first.raw, "live");
// The children of the turn dsh died in never ended live: only the load closes them.
const counted = orderOfEveryChild(firstUpdates.slice(0, killedFrom), "live");
expect(`the SDK delivered every update (${first.received.length} of ${firstUpdates.length})`, first.received.length === firstUpdates.length);
expect(`children announced live, before the crash: ${counted}`, counted === 4);

// 4: a new dsh loads the session; the child the crash interrupted is left
// running: the next prompt resumes it.
async function load() {
  const peer = start(["--data-dir", data]);
  await peer.app.connectWith(peer.stream, async (agent) => {
    await agent.request(methods.agent.initialize, { protocolVersion: 1, clientCapabilities: { subagents: {} } });
    const loaded = await agent.request(methods.agent.session.load, { sessionId: session, cwd: dir, mcpServers: [] });
    check("session/load response", zod.zLoadSessionResponse, loaded);
  });
  peer.child.stdin.end();
  const code = await peer.exited;
  expect(`dsh acp (load) exited ${code}`, code === 0);
  return checkAll(peer.raw, "load");
}
const loaded = await load();
const interrupted = loaded
  .filter((params) => subagentUpdate(params) && params.update.state?.state === "running")
  .map((params) => params.update.sessionId)
  .filter((child) => terminal(loaded, child).length === 0);
const loadedChildren = orderOfEveryChild(loaded, "load", interrupted);
const disconnected = loaded.filter(
  (params) => subagentUpdate(params) && params.update.state?.stopReason === "_disconnected",
);
expect(`load: every child replayed (${loadedChildren})`, loadedChildren === 6);
expect(`load: the interrupted child is left running, to be resumed (${interrupted})`, interrupted.length === 1);
expect(`load: nothing is closed as disconnected (${disconnected.length})`, disconnected.length === 0);
const again = await load();
expect("load: a second load replays the same", canonical(again) === canonical(loaded));

for (const failure of failures) console.log(`  schema: ${failure}`);
expect(`every message passes the SDK's unstable schemas unchanged (${failures.length} failures)`, failures.length === 0);
for (const [what, ok] of results) console.log(`${ok ? "pass" : "FAIL"}  ${what}`);
const passed = results.filter(([, ok]) => ok).length;
console.log(`${passed} passed, ${results.length - passed} failed`);
process.exit(passed === results.length ? 0 : 1);
