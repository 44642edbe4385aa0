// An ACP agent written with the official TypeScript SDK (its unstable
// schema) that announces two subagent sessions while it answers a prompt,
// when its client advertised `subagents`: `planner` ends its work, and
// `checker` is cancelled. Run as an ACP child of `dsh run` by
// scripts/acp-typescript-subagents.sh.
//
//   node acp-typescript-subagent-agent.mjs <sdk directory>
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir] = process.argv.slice(2);
const { agent, methods, ndJsonStream } = await import(pathToFileURL(path.join(sdkDir, "dist/v1/unstable/acp.js")));

let subagents = false;
const update = (client, sessionId, update) => client.notify(methods.client.session.update, { sessionId, update });

const app = agent({ name: "acp-typescript-subagent-agent" })
  .onRequest(methods.agent.initialize, (ctx) => {
    subagents = ctx.params.clientCapabilities?.subagents != null;
    return { protocolVersion: 1, agentCapabilities: {} };
  })
  .onRequest(methods.agent.session.new, () => ({ sessionId: "ts-session" }))
  .onRequest(methods.agent.session.prompt, async (ctx) => {
    const session = ctx.params.sessionId;
    const client = ctx.client;
    if (subagents) {
      for (const [id, title, task] of [
        ["ts-planner", "planner", "plan the work"],
        ["ts-checker", "checker", "check the plan"],
      ]) {
        await update(client, session, {
          sessionUpdate: "subagent_update",
          sessionId: id,
          title,
          description: task,
          capabilities: { cancel: {} },
          state: { state: "running" },
        });
        await update(client, id, { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `${title} at work` } });
      }
      await update(client, session, { sessionUpdate: "subagent_update", sessionId: "ts-planner", state: { state: "idle", stopReason: "end_turn" } });
      await update(client, session, { sessionUpdate: "subagent_update", sessionId: "ts-checker", state: { state: "idle", stopReason: "cancelled" } });
    }
    await update(client, session, { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "planned and checked" } });
    return { stopReason: "end_turn" };
  })
  .onNotification(methods.agent.session.cancel, () => {});

const stream = ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const connection = app.connect(stream);
await new Promise((resolve) => connection.signal.addEventListener("abort", resolve));
