// What the scripts that drive `dsh acp` with the official TypeScript ACP SDK
// share: starting dsh under an SDK client while keeping every line it
// writes as it wrote it, and checking a message against the SDK's schemas.
//
//   import { startDsh, schemaCheck, canonical } from "./acp-typescript-dsh.mjs";
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";

/// `value` as JSON with every object's keys sorted: two values that mean
/// the same read the same.
export const canonical = (value) =>
  JSON.stringify(value, (_, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]]))
      : v,
  );

/// Whether everything `sent` holds comes out of `read` unchanged (`read`
/// may add fields: defaults the schema fills in).
export const preserved = (sent, read) => {
  if (Array.isArray(sent))
    return Array.isArray(read) && sent.length === read.length && sent.every((item, i) => preserved(item, read[i]));
  if (sent && typeof sent === "object")
    return read && typeof read === "object" && Object.keys(sent).every((key) => preserved(sent[key], read[key]));
  return sent === read;
};

/// A check that records into `failures` each value that does not parse
/// with its zod schema, or does not come out `same` as it went in.
///
/// The SDK's schemas are lenient on purpose: an optional field that does
/// not parse becomes undefined instead of failing the message. So a value
/// passes only if it parses *and* comes out unchanged.
export const schemaCheck =
  (failures, same = (sent, read) => canonical(sent) === canonical(read)) =>
  (what, schema, value) => {
    const parsed = schema.safeParse(value);
    if (!parsed.success) failures.push(`${what}: ${JSON.stringify(value)}: ${parsed.error.message}`);
    else if (!same(value, parsed.data))
      failures.push(`${what}: the SDK reads ${canonical(parsed.data)} from ${canonical(value)}`);
  };

/// `dsh acp <args>` in `dir` under an SDK client named `name` (`sdk`: the
/// SDK's module): its raw stdout lines, the notifications the SDK
/// delivered, a way to wait for one (`until`), the client and its stream.
/// The child gets no credential: only PATH and HOME.
export function startDsh(sdk, dsh, args, dir, name) {
  const { client, methods, ndJsonStream } = sdk;
  const child = spawn(dsh, ["acp", ...args], {
    cwd: dir,
    stdio: ["pipe", "pipe", "inherit"],
    env: { PATH: process.env.PATH, HOME: process.env.HOME ?? dir },
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve(code ?? signal)));
  const raw = [];
  let pending = "";
  const stdout = Readable.toWeb(child.stdout).pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        pending += Buffer.from(chunk).toString("utf8");
        let end;
        while ((end = pending.indexOf("\n")) >= 0) {
          raw.push(pending.slice(0, end));
          pending = pending.slice(end + 1);
        }
        controller.enqueue(chunk);
      },
    }),
  );
  const received = [];
  const waiters = [];
  const app = client({ name }).onNotification(methods.client.session.update, (ctx) => {
    received.push(ctx.params);
    for (const waiter of waiters.splice(0)) if (!waiter(ctx.params)) waiters.push(waiter);
  });
  const until = (wanted) =>
    new Promise((resolve) => {
      const found = received.find(wanted);
      if (found) return resolve(found);
      waiters.push((params) => (wanted(params) ? (resolve(params), true) : false));
    });
  const stream = ndJsonStream(Writable.toWeb(child.stdin), stdout);
  return { child, exited, raw, received, until, app, stream };
}
