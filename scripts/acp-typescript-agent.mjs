// An ACP agent written with the official TypeScript ACP SDK: it answers a
// prompt by streaming "echo: <prompt>" a word at a time (20 ms apart), ends
// a turn `cancelled` at session/cancel, and exits when its stdin closes.
// What `dsh check acp` and the provider kit check a TypeScript-SDK agent
// with (scripts/acp-typescript-agent.sh).
//
//   node acp-typescript-agent.mjs <sdk directory>
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [sdkDir] = process.argv.slice(2);
const sdk = await import(pathToFileURL(path.join(sdkDir, "dist/v1/stable/acp.js")));
const { agent, methods, ndJsonStream, PROTOCOL_VERSION } = sdk;

// The cancel of each session's turn under way.
const turns = new Map();
let sessions = 0;

const app = agent({ name: "acp-typescript-agent" })
  .onRequest(methods.agent.initialize, () => ({
    protocolVersion: PROTOCOL_VERSION,
    agentCapabilities: {},
    authMethods: [],
  }))
  .onRequest(methods.agent.session.new, () => ({ sessionId: `ts-session-${++sessions}` }))
  .onRequest(methods.agent.session.prompt, async (ctx) => {
    const { sessionId, prompt } = ctx.params;
    const text = prompt
      .filter((block) => block.type === "text")
      .map((block) => block.text)
      .join("");
    let cancelled = false;
    let wake = () => {};
    turns.set(sessionId, () => {
      cancelled = true;
      wake();
    });
    for (const word of `echo: ${text}`.split(" ")) {
      if (cancelled) break;
      await ctx.client.notify(methods.client.session.update, {
        sessionId,
        update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `${word} ` } },
      });
      await new Promise((resolve) => {
        wake = resolve;
        setTimeout(resolve, 20);
      });
    }
    turns.delete(sessionId);
    return { stopReason: cancelled ? "cancelled" : "end_turn" };
  })
  .onNotification(methods.agent.session.cancel, (ctx) => {
    turns.get(ctx.params.sessionId)?.();
  });

const connection = app.connect(ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;
process.exit(0);
