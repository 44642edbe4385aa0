//! A scripted delegation tree, run by the real `dsh` binary against a
//! [`ModelServer`], for the tests of durable delegation: kills, interrupts,
//! the end of a run, resumes.
//!
//! The parent's task names its children by tag: `F<n>` ones run in the
//! foreground, `B<n>` ones in the background, all through one spawn tool
//! `subagent`; `A<n>` ones through a tool `subagent_acp` (foreground), for
//! a test that configures it. The child `B2` delegates one level further, to `G`. The
//! server scripts each agent by the tag that opens its first user message
//! and by its step (the answers in its request). Each child's answer
//! carries its result marker, `MARK-<tag>` (`B2`'s also lists the markers
//! it read, `G`'s); the parent reads the output of each background task a
//! notice reports (once a notice, with `task_output`), and its answer lists
//! every marker it read in tool results and notices, each occurrence in
//! order, so that a result delivered twice shows.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::model::{Exchange, HoldAt, ModelServer, Reply};

/// The binary under test.
pub(crate) const DSH: &str = env!("CARGO_BIN_EXE_dsh");

/// A hang guard, far above anything these tests wait for.
pub(crate) const GUARD: Duration = Duration::from_secs(60);

/// The delegation tool: spawn children, foreground or background, who may
/// delegate further themselves.
pub(crate) const CONFIG: &str = r#"
[[subagents]]
tool_name = "subagent"
provider = "spawn"
enable_run_in_background = true
"#;

/// The parent's task, naming its children.
pub(crate) fn task(children: &[&str]) -> String {
    format!(
        "[P] Have these parts written (F: now, B: in the background): {}",
        children.join(" ")
    )
}

/// The markers the final answer must carry once each: every child's, and
/// `G`'s when `B2` is among them.
pub(crate) fn expected_markers(children: &[&str]) -> Vec<String> {
    let mut markers: Vec<String> = children.iter().map(|tag| format!("MARK-{tag}")).collect();
    if children.contains(&"B2") {
        markers.push("MARK-G".to_owned());
    }
    markers.sort();
    markers
}

/// The agent a request is from: the tag that opens its first user message.
pub(crate) fn agent(body: &Value) -> String {
    let messages = messages(body);
    let first = messages
        .iter()
        .find(|message| message["role"] == "user")
        .map_or("", |message| text(message));
    first
        .strip_prefix('[')
        .and_then(|rest| rest.split_once(']'))
        .map_or("?", |(tag, _)| tag)
        .to_owned()
}

/// The agent's step: how many answers its request holds.
pub(crate) fn step(body: &Value) -> usize {
    messages(body)
        .iter()
        .filter(|message| message["role"] == "assistant")
        .count()
}

pub(crate) fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

fn text(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// The markers in `text`, in order, each occurrence.
pub(crate) fn markers(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("MARK-") {
        let tail = &rest[at + 5..];
        let end = tail.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(tail.len());
        found.push(format!("MARK-{}", &tail[..end]));
        rest = &tail[end..];
    }
    found
}

/// The markers an agent read: in its tool results and in the user messages
/// after its first (notices), in order.
fn markers_read(messages: &[Value]) -> Vec<String> {
    let first = messages.iter().position(|message| message["role"] == "user");
    messages
        .iter()
        .enumerate()
        .filter(|(index, message)| message["role"] == "tool" || (message["role"] == "user" && Some(*index) != first))
        .flat_map(|(_, message)| markers(text(message)))
        .collect()
}

/// The model's answer to each agent at each step.
pub(crate) fn script(body: &Value) -> Reply {
    let agent = agent(body);
    let messages = messages(body);
    match (agent.as_str(), step(body)) {
        ("P", 0) => delegate(&messages),
        ("P", step) => parent_step(&messages, step),
        ("B2", 0) => Reply::tool_calls(&[(
            "call-B2-0".to_owned(),
            "subagent",
            json!({"description": "part G", "prompt": "[G] Write the detail of part B2."}),
        )]),
        ("B2", _) => Reply::text(
            &format!(
                "Part B2 written, with its detail.\nMARK-B2 (from my child: {})",
                markers_read(&messages).join(" ")
            ),
            3,
        ),
        (tag, _) => Reply::text(&format!("Part {tag} written.\nMARK-{tag}"), 3),
    }
}

/// The parent's first step: one call for each child its task names.
fn delegate(messages: &[Value]) -> Reply {
    let task = messages
        .iter()
        .find(|message| message["role"] == "user")
        .map_or("", |message| text(message));
    let children = task.rsplit_once(": ").map_or("", |(_, children)| children);
    let calls: Vec<(String, &str, Value)> = children
        .split_whitespace()
        .enumerate()
        .map(|(index, tag)| {
            let mut arguments =
                json!({"description": format!("part {tag}"), "prompt": format!("[{tag}] Write part {tag}.")});
            if tag.starts_with('B') {
                arguments["run_in_background"] = json!(true);
            }
            let tool = if tag.starts_with('A') {
                "subagent_acp"
            } else {
                "subagent"
            };
            (format!("call-P-{index}"), tool, arguments)
        })
        .collect();
    Reply::tool_calls(&calls)
}

/// The parent after its first step: reads the output of each background
/// task a notice reported (once per notice), then lists what it read.
fn parent_step(messages: &[Value], step: usize) -> Reply {
    let mut noticed: Vec<String> = Vec::new();
    let mut read: Vec<String> = Vec::new();
    for message in messages {
        match message["role"].as_str() {
            Some("user") => {
                for (at, _) in text(message).match_indices("background task ") {
                    let id = text(message)[at + 16..].split_whitespace().next().unwrap_or_default();
                    noticed.push(id.to_owned());
                }
            }
            Some("assistant") => {
                for call in message["tool_calls"].as_array().into_iter().flatten() {
                    if call["function"]["name"] == "task_output" {
                        let arguments: Value =
                            serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("{}")).unwrap();
                        read.push(arguments["task_id"].as_str().unwrap_or_default().to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    for id in &read {
        if let Some(at) = noticed.iter().position(|noticed| noticed == id) {
            noticed.remove(at);
        }
    }
    if !noticed.is_empty() {
        let calls: Vec<(String, &str, Value)> = noticed
            .iter()
            .enumerate()
            .map(|(index, id)| (format!("call-P-{step}-{index}"), "task_output", json!({"task_id": id})))
            .collect();
        return Reply::tool_calls(&calls);
    }
    Reply::text(&format!("Markers read: {}", markers_read(messages).join(" ")), 3)
}

/// A tree's directory (its `dsh.toml`, its data directory `data`) and its
/// model server.
pub(crate) struct Tree {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) server: ModelServer,
    runs: std::cell::Cell<usize>,
}

/// A `dsh run` under way.
pub(crate) struct Running {
    pub(crate) child: Child,
    args: Vec<String>,
    out: PathBuf,
    err: PathBuf,
}

/// One `dsh run` that ended: its arguments, whether the test killed it,
/// its exit status and output.
pub(crate) struct Ran {
    pub(crate) args: Vec<String>,
    pub(crate) killed: bool,
    pub(crate) status: ExitStatus,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = if self.killed { "killed" } else { "ended" };
        writeln!(f, "--- dsh run {:?}: {how}, {}", self.args, self.status)?;
        writeln!(f, "stdout:\n{}stderr:\n{}", self.stdout, self.stderr)
    }
}

impl Running {
    /// Its stderr so far.
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Sends it `signal`.
    pub(crate) fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, signal).unwrap();
    }

    /// Waits for it to end (killed after [`GUARD`]: a hang fails the test).
    pub(crate) fn wait(mut self) -> Ran {
        let started = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > GUARD {
                self.child.kill().unwrap();
                self.child.wait().unwrap();
                panic!("dsh run {:?} hung:\n{}", self.args, self.stderr());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.ended(status, false)
    }

    /// Kills it (SIGKILL) and waits for it.
    pub(crate) fn kill(mut self) -> Ran {
        self.child.kill().unwrap();
        let status = self.child.wait().unwrap();
        self.ended(status, true)
    }

    fn ended(self, status: ExitStatus, killed: bool) -> Ran {
        Ran {
            args: self.args,
            killed,
            status,
            stdout: std::fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }
}

impl Tree {
    /// A tree configured with [`CONFIG`] and `more` (further `dsh.toml` text).
    pub(crate) fn new(more: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("dsh.toml"), format!("{CONFIG}{more}")).unwrap();
        Self {
            dir,
            server: ModelServer::start(script),
            runs: std::cell::Cell::new(0),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Starts `dsh run --data-dir data <args>` against the server, its
    /// output going to files.
    pub(crate) fn start(&self, args: &[String]) -> Running {
        self.start_with_env(args, &[])
    }

    /// [`Tree::start`], with these variables set too.
    pub(crate) fn start_with_env(&self, args: &[String], env: &[(&str, &std::ffi::OsStr)]) -> Running {
        self.server.next_run();
        let count = self.runs.get();
        self.runs.set(count + 1);
        let out = self.path().join(format!("run-{count}.out"));
        let err = self.path().join(format!("run-{count}.err"));
        let mut command = Command::new(DSH);
        command
            .args(["run", "--data-dir", "data"])
            .args(args)
            .current_dir(self.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        for key in ["DSH_LOG", "DSH_PARENT_CONFIGS", "DSH_CONTEXT_WINDOW", "DSH_CASSETTE"] {
            command.env_remove(key);
        }
        command
            .env("DSH_BASE_URL", &self.server.base_url)
            .env("DSH_API_KEY", "sk-test")
            .env("DSH_MODEL", "test-model")
            .envs(env.iter().copied());
        Running {
            child: command.spawn().unwrap(),
            args: args.to_vec(),
            out,
            err,
        }
    }

    /// `dsh run <args>`, to its end.
    pub(crate) fn run(&self, args: &[String]) -> Ran {
        self.start(args).wait()
    }

    /// `dsh run <args>`, killed (SIGKILL) once the server reaches `hold`:
    /// 200 ms after, and once every answer whose response completed is in
    /// a transcript (five seconds at most: a slow machine must not make a
    /// kill point of another), so that the kill loses only what was in
    /// flight. A run that ends first is not killed. The hold is released.
    pub(crate) fn run_until(&self, args: &[String], hold: Option<HoldAt>) -> Ran {
        if let Some(hold) = hold {
            self.server.hold_at(hold);
        }
        self.run_to_hold(args)
    }

    /// [`Tree::run_until`] the hold point armed on the server already.
    pub(crate) fn run_to_hold(&self, args: &[String]) -> Ran {
        let mut running = self.start(args);
        let started = Instant::now();
        let ran = loop {
            if running.child.try_wait().unwrap().is_some() {
                break running.wait();
            }
            if self.server.reached() {
                std::thread::sleep(Duration::from_millis(200));
                self.wait_written(Duration::from_secs(5));
                break running.kill();
            }
            if started.elapsed() > GUARD {
                running.child.kill().unwrap();
                panic!("dsh run {args:?} hung:\n{}", running.stderr());
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        self.server.release();
        ran
    }

    /// Waits up to `longest` until the answer of every request whose
    /// response completed is in some transcript: its tool calls' ids, or
    /// its text.
    fn wait_written(&self, longest: Duration) {
        let answers: Vec<String> = self
            .server
            .log()
            .iter()
            .filter(|exchange| exchange.completed.is_some())
            .flat_map(|exchange| written_signs(&script(&exchange.body)))
            .collect();
        let deadline = Instant::now() + longest;
        while Instant::now() < deadline {
            let mut written = String::new();
            for entry in std::fs::read_dir(self.path().join("data/agents")).into_iter().flatten() {
                written.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default());
            }
            if answers.iter().all(|sign| written.contains(sign.as_str())) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The top-level agent's id: the transcript whose header names no parent.
    pub(crate) fn parent_id(&self) -> Option<String> {
        let agents = std::fs::read_dir(self.path().join("data/agents")).ok()?;
        agents.filter_map(Result::ok).find_map(|entry| {
            let text = std::fs::read_to_string(entry.path()).ok()?;
            let header: Value = serde_json::from_str(text.lines().next()?).ok()?;
            (header["parent"].is_null()).then(|| header["id"].as_str().unwrap_or_default().to_owned())
        })
    }

    /// `dsh tree --json` of the parent.
    pub(crate) fn tree_json(&self) -> Result<Value, String> {
        let id = self.parent_id().ok_or("no parent transcript")?;
        let output = Command::new(DSH)
            .args(["tree", "--json", "--data-dir", "data", &id])
            .current_dir(self.path())
            .output()
            .unwrap();
        if !output.status.success() {
            return Err(format!("dsh tree failed: {}", String::from_utf8_lossy(&output.stderr)));
        }
        serde_json::from_slice(&output.stdout).map_err(|error| format!("dsh tree --json: {error}"))
    }

    /// The transcript of the agent tagged `tag` (its first user message
    /// opens with `[tag]`).
    pub(crate) fn transcript_of(&self, tag: &str) -> PathBuf {
        let opening = format!("[{tag}]");
        std::fs::read_dir(self.path().join("data/agents"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                text.lines()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .find(|entry| entry["type"] == "message" && entry["message"]["role"] == "user")
                    .is_some_and(|entry| {
                        entry["message"]["content"]
                            .as_str()
                            .unwrap_or_default()
                            .starts_with(&opening)
                    })
            })
            .unwrap_or_else(|| panic!("no transcript of {tag}"))
    }

    /// Cuts the messages of agent `tag`'s transcript from its first tool
    /// result that carries a marker: as if the process had died after its
    /// children ended and before it recorded what they gave. The records of
    /// children starting stay, so the state is one a kill leaves whatever
    /// order the children ended in: on a loaded machine one child may end
    /// (and its result be written) before the next starts, and a plain cut
    /// would then forget that the later ones ever ran. Returns how many
    /// messages went.
    pub(crate) fn forget_results(&self, tag: &str) -> usize {
        let path = self.transcript_of(tag);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let entries: Vec<Value> = lines.iter().map(|line| serde_json::from_str(line).unwrap()).collect();
        let Some(cut) = entries.iter().position(|entry| {
            entry["type"] == "message"
                && entry["message"]["role"] == "tool"
                && entry["message"]["content"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("MARK-")
        }) else {
            return 0;
        };
        assert!(
            entries[cut..].iter().all(|entry| entry["type"] != "turn_end"),
            "{tag}'s transcript ends a run after its results:\n{text}"
        );
        let (gone, kept): (Vec<_>, Vec<_>) = lines
            .iter()
            .zip(&entries)
            .enumerate()
            .partition(|(at, (_, entry))| *at >= cut && entry["type"] == "message");
        let kept: String = kept.iter().map(|(_, (line, _))| format!("{line}\n")).collect();
        std::fs::write(&path, kept).unwrap();
        gone.len()
    }

    /// The last turn end of each child's transcript (`stop`), by label;
    /// `None` for a turn left open.
    pub(crate) fn children_stops(&self) -> Vec<(String, Option<String>)> {
        let mut stops = Vec::new();
        for entry in std::fs::read_dir(self.path().join("data/agents")).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let entries: Vec<Value> = text
                .lines()
                .filter_map(|line| serde_json::from_str(line).ok())
                .collect();
            let Some(header) = entries.first() else { continue };
            if header["parent"].is_null() {
                continue;
            }
            let last = entries
                .iter()
                .rev()
                .find(|entry| entry["type"] == "turn_end" || entry["type"] == "message");
            let stop = last
                .filter(|entry| entry["type"] == "turn_end")
                .and_then(|entry| entry["stop"].as_str())
                .map(str::to_owned);
            stops.push((header["label"].as_str().unwrap_or_default().to_owned(), stop));
        }
        stops.sort();
        stops
    }
}

/// How an answer shows in a transcript: the ids of its tool calls, or its
/// text (as JSON writes it).
fn written_signs(reply: &Reply) -> Vec<String> {
    let mut text = String::new();
    let mut signs = Vec::new();
    for chunk in &reply.chunks {
        let delta = &chunk["choices"][0]["delta"];
        text.push_str(delta["content"].as_str().unwrap_or_default());
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            if let Some(id) = call["id"].as_str() {
                signs.push(format!("\"id\":\"{id}\""));
            }
        }
    }
    if !text.is_empty() {
        let quoted = serde_json::to_string(&text).unwrap();
        signs.push(quoted[1..quoted.len() - 1].to_owned());
    }
    signs
}

/// Every node of a `dsh tree --json` tree.
pub(crate) fn nodes(node: &Value) -> Vec<&Value> {
    let mut all = vec![node];
    for child in node["children"].as_array().into_iter().flatten() {
        all.extend(nodes(child));
    }
    all
}

/// What is wrong with a tree whose run ended with `last`: the final answer
/// does not carry each of `expected` exactly once; a request whose response
/// had completed was sent again; `dsh tree` shows an agent running; the
/// tree does not hold one agent a marker (its parent's aside).
pub(crate) fn problems(tree: &Tree, last: &Ran, expected: &[String]) -> Vec<String> {
    let mut problems = Vec::new();
    if !last.status.success() {
        problems.push(format!("the last run exited {}", last.status));
    }
    let mut seen = markers(&last.stdout);
    seen.sort();
    if seen != expected {
        problems.push(format!(
            "the final answer carries {seen:?}, not each of {expected:?} once"
        ));
    }
    problems.extend(sent_again(&tree.server.log()));
    match tree.tree_json() {
        Err(error) => problems.push(error),
        Ok(json) => {
            let all = nodes(&json["root"]);
            for node in &all {
                for turn in node["turns"].as_array().into_iter().flatten() {
                    if turn["ending"]["state"] == "running" {
                        problems.push(format!("dsh tree shows {} ({}) running", node["id"], node["label"]));
                    }
                }
            }
            if all.len() != 1 + expected.len() {
                let labels: Vec<String> = all.iter().map(|node| node["label"].to_string()).collect();
                problems.push(format!(
                    "dsh tree shows {} agents, not {}: {labels:?}",
                    all.len(),
                    1 + expected.len()
                ));
            }
        }
    }
    problems
}

/// Each request sent again after its response had completed: the same
/// messages as an earlier request whose response completed before it
/// arrived.
pub(crate) fn sent_again(log: &[Exchange]) -> Vec<String> {
    let mut again = Vec::new();
    for (index, exchange) in log.iter().enumerate() {
        let earlier = log[..index].iter().position(|earlier| {
            earlier.completed.is_some_and(|completed| completed < exchange.arrived)
                && earlier.body["messages"] == exchange.body["messages"]
        });
        if let Some(earlier) = earlier {
            again.push(format!(
                "request #{} sent again as #{} (by {}, step {}), though its response had completed",
                earlier + 1,
                index + 1,
                agent(&exchange.body),
                step(&exchange.body)
            ));
        }
    }
    again
}
