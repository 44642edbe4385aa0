//! Recording model traffic into a cassette and replaying it offline: at the
//! HTTP level against a raw HTTP/1.1 server on loopback (whose quirks must
//! replay as they came), at the events level over the scripted model, and
//! every bad cassette refused with its file and line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use dsh_llm::cassette::{Cassette, CassetteError, Level, Recorder, RecordingModel, ReplayModel, Timing};
use dsh_llm::{
    CancellationToken, ChatModel, ChatRequest, ChatResponse, LlmError, Message, OpenAiChatModel, OpenAiConfig,
    ScriptedModel, ToolDefinition, complete,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SOON: Duration = Duration::from_secs(10);
const KEY: &str = "sk-live-secret-123";

/// What the server does for one request.
enum Reply {
    /// 200 with these SSE pieces, one HTTP chunk each; then a clean end,
    /// or (when `cut`) the connection closed mid-body.
    Sse { pieces: Vec<String>, cut: bool },
    /// A whole response with this status, headers and body.
    Status {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    },
}

/// Serves `replies` in order, one connection each; counts the requests.
async fn serve(replies: Vec<Reply>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        for reply in replies {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            if !read_request(&mut socket).await {
                return;
            }
            seen.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(respond(socket, reply));
        }
    });
    (base_url, count)
}

async fn read_request(socket: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    line.strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap_or(0))
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return true;
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn respond(mut socket: TcpStream, reply: Reply) {
    match reply {
        Reply::Sse { pieces, cut } => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-secret-header: nope\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
            let _ = socket.write_all(head.as_bytes()).await;
            for piece in pieces {
                let _ = socket
                    .write_all(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes())
                    .await;
                let _ = socket.flush().await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            if !cut {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            let _ = socket.shutdown().await;
        }
        Reply::Status { status, headers, body } => {
            let mut text = format!(
                "HTTP/1.1 {status} Whatever\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                text.push_str(&format!("{name}: {value}\r\n"));
            }
            text.push_str("\r\n");
            text.push_str(&body);
            let _ = socket.write_all(text.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    }
}

fn data(value: Value) -> String {
    format!("data: {value}\n\n")
}

fn text_chunk(text: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
}

fn finish_chunk(reason: &str) -> String {
    data(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
}

const DONE: &str = "data: [DONE]\n\n";

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![Message::system("be brief"), Message::user(text)])
}

fn client(base_url: &str) -> OpenAiChatModel {
    let config = OpenAiConfig::new()
        .with_base_url(base_url)
        .with_api_key(KEY)
        .with_model("test-model")
        .with_retry_base_delay(Duration::from_millis(1))
        .with_request_timeout(SOON)
        .with_idle_timeout(SOON);
    OpenAiChatModel::new(config).unwrap()
}

async fn call(model: &dyn ChatModel, text: &str) -> Result<ChatResponse, LlmError> {
    tokio::time::timeout(SOON, complete(model, ask(text), &CancellationToken::new()))
        .await
        .expect("call hung")
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A server's quirks, one request after another: a plain answer, a 429
/// then its retry's answer, a cut stream, a refusal for length, and an
/// empty 200 whose ask without streaming is a refusal.
fn quirky_replies() -> Vec<Reply> {
    vec![
        // 1: a plain answer.
        Reply::Sse {
            pieces: vec![text_chunk("Paris"), text_chunk("."), finish_chunk("stop"), DONE.into()],
            cut: false,
        },
        // 2: a 429, then its retry answers.
        Reply::Status {
            status: 429,
            headers: vec![("retry-after", "0")],
            body: r#"{"error":{"message":"slow down"}}"#.into(),
        },
        Reply::Sse {
            pieces: vec![text_chunk("after a wait"), finish_chunk("stop"), DONE.into()],
            cut: false,
        },
        // 3: a stream the server cut.
        Reply::Sse {
            pieces: vec![text_chunk("half an ans")],
            cut: true,
        },
        // 4: a refusal for length.
        Reply::Status {
            status: 400,
            headers: vec![],
            body: r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, your messages resulted in 4000 tokens.","code":"context_length_exceeded"}}"#.into(),
        },
        // 5: an empty 200, and the answer to the same request asked
        // without streaming: the refusal it was.
        Reply::Sse {
            pieces: vec![],
            cut: false,
        },
        Reply::Status {
            status: 400,
            headers: vec![],
            body: r#"{"error":{"message":"This model's maximum context length is 2048 tokens. However, you requested 2300 tokens (2044 in the messages, 256 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#.into(),
        },
    ]
}

#[tokio::test]
async fn http_quirks_replay_through_the_same_client_code() {
    let (base_url, count) = serve(quirky_replies()).await;
    let dir = temp_dir();
    let file = dir.path().join("quirks.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = client(&base_url).recorded(&recorder).unwrap();
    let mut recorded = Vec::new();
    for text in [
        "capital of France?",
        "busy?",
        "cut me",
        &format!("long {}", KEY),
        "say nothing",
    ] {
        recorded.push(call(&live, text).await);
    }
    assert_eq!(
        recorder.finish().unwrap(),
        7,
        "the 429 and its retry are two exchanges, the empty 200 and its ask without streaming too"
    );
    assert_eq!(count.load(Ordering::SeqCst), 7);
    assert_eq!(recorded[1].as_ref().unwrap().text, "after a wait");
    assert!(
        matches!(&recorded[2], Err(LlmError::StreamEnded { partial, .. }) if partial == "half an ans"),
        "{:?}",
        recorded[2]
    );
    assert!(matches!(recorded[3], Err(LlmError::ContextLength { .. })));
    assert!(
        matches!(&recorded[4], Err(LlmError::ContextLength { refusal, .. }) if refusal.window == Some(2048)),
        "{:?}",
        recorded[4]
    );

    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(KEY), "the key never reaches the cassette:\n{text}");
    assert!(!text.to_ascii_lowercase().contains("authorization"));
    assert!(!text.contains("x-secret-header"), "only the headers that matter");
    assert!(text.contains("[redacted]"));
    assert!(!Path::new(&format!("{}.recording", file.display())).exists());

    // Replayed: the same results, through the same code, with no network.
    let replay = ReplayModel::new(Cassette::load(&file).unwrap(), Timing::Fast);
    assert_eq!(replay.model_name(), "test-model");
    for (text, want) in [
        "capital of France?",
        "busy?",
        "cut me",
        &format!("long {}", "[redacted]"),
        "say nothing",
    ]
    .iter()
    .zip(&recorded)
    {
        assert_eq!(&call(&replay, text).await, want, "{text}");
    }
    assert_eq!(count.load(Ordering::SeqCst), 7, "replay used no network");

    // With the recorded pacing, the same answer.
    let paced = ReplayModel::new(Cassette::load(&file).unwrap(), Timing::Recorded);
    assert_eq!(&call(&paced, "capital of France?").await, &recorded[0]);
}

#[tokio::test]
async fn a_short_key_is_kept_out_of_the_file_and_the_cassette_replays() {
    // Local servers take any key, and their users give dummy ones. The key
    // travels in the Authorization header (never written) and, here, in
    // the URL; the texts the model and the server wrote stay as they were.
    let tool = ToolDefinition::new(
        "subagent",
        "Delegate a task to a child agent with its own context.",
        json!({"type": "object", "properties": {}}),
    );
    let asked = || {
        ChatRequest::new(vec![Message::user(
            "Read task_output while it has none; the server said EMPTY.",
        )])
        .with_tools(vec![tool.clone()])
    };
    for key in ["x", "none", "EMPTY"] {
        let answer = "its own context: none, EMPTY, x.";
        let (base_url, _) = serve(vec![Reply::Sse {
            pieces: vec![text_chunk(answer), finish_chunk("stop"), DONE.into()],
            cut: false,
        }])
        .await;
        let base_url = base_url.replacen("http://", &format!("http://dsh:{key}@"), 1);
        let dir = temp_dir();
        let file = dir.path().join("short-key.jsonl");
        let recorder = Recorder::create(&file).unwrap();
        let config = OpenAiConfig::new()
            .with_base_url(&base_url)
            .with_api_key(key)
            .with_model("test-model")
            .with_request_timeout(SOON);
        let live = OpenAiChatModel::new(config).unwrap().recorded(&recorder).unwrap();
        let recorded = complete(&live, asked(), &CancellationToken::new()).await.unwrap();
        assert_eq!(recorded.text, answer);
        recorder.finish().unwrap();

        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains("[redacted]"),
            "{key}: nothing the model or server wrote is rewritten:\n{text}"
        );
        assert!(
            text.contains("with its own context.") && text.contains("while it has none;"),
            "{key}"
        );
        for line in text.lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            if let Some(url) = line["url"].as_str() {
                assert!(
                    !url.contains('@') && url.starts_with("http://127.0.0.1:"),
                    "{key}: {url}"
                );
            }
        }
        assert!(!text.to_ascii_lowercase().contains("authorization"), "{key}");

        let replay = ReplayModel::new(Cassette::load(&file).unwrap(), Timing::Fast);
        let replayed = complete(&replay, asked(), &CancellationToken::new()).await;
        assert_eq!(replayed.as_ref(), Ok(&recorded), "{key}");
    }
}

#[tokio::test]
async fn a_miss_names_the_closest_request_and_where_it_differs() {
    let dir = temp_dir();
    let file = dir.path().join("scripted.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    call(&live, "first task").await.unwrap();
    call(&live, "second task").await.unwrap();
    recorder.finish().unwrap();
    let replay = ReplayModel::new(Cassette::load(&file).unwrap(), Timing::Fast);
    let err = call(&replay, "second tusk").await.unwrap_err();
    let text = err.to_string().replace(&dir.path().display().to_string(), "<dir>");
    insta::assert_snapshot!("replay_miss", text);
    let _ = call(&replay, "second task").await.unwrap();
    let err = call(&replay, "second task").await.unwrap_err();
    let text = err.to_string().replace(&dir.path().display().to_string(), "<dir>");
    insta::assert_snapshot!("replay_used_up", text);
}

#[tokio::test]
async fn a_miss_deep_in_a_long_text_shows_the_offset_and_the_text_around_it() {
    let dir = temp_dir();
    let file = dir.path().join("long.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    // A tool result of some kilobytes whose only difference is one task id,
    // as when two children's kept results swap ids.
    let long = |id: &str| {
        format!(
            "{}\n\n[output cut: to read the rest, call task_output {{\"task_id\": \"{id}\", \"offset\": 4000}}]\n\n{}",
            "head line\n".repeat(400),
            "tail line\n".repeat(60)
        )
    };
    call(&live, &long("subagent-1")).await.unwrap();
    recorder.finish().unwrap();
    let replay = ReplayModel::new(Cassette::load(&file).unwrap(), Timing::Fast);
    let err = call(&replay, &long("subagent-2")).await.unwrap_err();
    let text = err.to_string().replace(&dir.path().display().to_string(), "<dir>");
    // The field, the offset of the first difference, and a bounded excerpt
    // of each side around it: never the same start of both texts.
    insta::assert_snapshot!(text, @r#"no recorded answer: <dir>/long.jsonl holds no such request; the closest is agent 1's request 1 (line 2), which differs first at messages[1].content, at character offset 4072: recorded …" call task_output {\"task_id\": \"subagent-1\", \"offset\": 4000}]\n\ntail line\ntail lin"…, asked …" call task_output {\"task_id\": \"subagent-2\", \"offset\": 4000}]\n\ntail line\ntail lin"…"#);
    assert!(text.len() < 600, "bounded: {} bytes", text.len());
}

#[tokio::test]
async fn parallel_requests_match_in_any_order_and_repeats_in_recorded_order() {
    let dir = temp_dir();
    let file = dir.path().join("parallel.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let script = ScriptedModel::from_json_str(
        r#"{"rules": [{"when": {}, "reply": {"text": "answer to {{last_user}}, turns {{assistant_turns}}"}}]}"#,
    )
    .unwrap();
    let live = RecordingModel::new(script, &recorder).unwrap();
    let tasks: Vec<String> = (0..8).map(|n| format!("child task {n}")).collect();
    let mut recorded = Vec::new();
    for task in &tasks {
        recorded.push(call(&live, task).await.unwrap().text);
    }
    recorder.finish().unwrap();

    let replay = Arc::new(ReplayModel::new(Cassette::load(&file).unwrap(), Timing::Fast));
    let handles: Vec<_> = tasks
        .iter()
        .rev()
        .map(|task| {
            let replay = Arc::clone(&replay);
            let task = task.clone();
            tokio::spawn(async move { call(&*replay, &task).await.unwrap().text })
        })
        .collect();
    let mut replayed = Vec::new();
    for handle in handles {
        replayed.push(handle.await.unwrap());
    }
    replayed.reverse();
    assert_eq!(replayed, recorded);
}

/// The error of loading `text` as a cassette, with the directory hidden.
fn load_error(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    let err = Cassette::load(&file).unwrap_err();
    err.to_string().replace(&dir.display().to_string(), "<dir>")
}

#[tokio::test]
async fn bad_cassettes_are_refused_with_file_and_line() {
    let dir = temp_dir();
    let recorded = dir.path().join("good.jsonl");
    let recorder = Recorder::create(&recorded).unwrap();
    let live = RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    call(&live, "hello").await.unwrap();
    recorder.finish().unwrap();
    let good = std::fs::read_to_string(&recorded).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let without_last = lines[..lines.len() - 1].join("\n") + "\n";

    let mut report = Vec::new();
    let mut case = |what: &str, text: String| {
        report.push(format!(
            "{what}:\n  {}",
            load_error(dir.path(), &format!("{what}.jsonl"), &text)
        ));
    };
    case("torn", good[..good.len() - 10].to_owned());
    case("corrupt", good.replacen("\"kind\":\"event\"", "\"kind\":\"evnt\"", 1));
    case("unknown version", good.replacen("\"version\":1", "\"version\":7", 1));
    case("unfinished", without_last.clone());
    case("two runs in one file", without_last + &good);
    case("not a cassette", "hello\n".to_owned());
    case("empty", String::new());
    insta::assert_snapshot!("bad_cassettes", report.join("\n"));

    // Only the recording exists: the run that made it never finished.
    let partial = dir.path().join("crashed.jsonl.recording");
    std::fs::write(&partial, &good).unwrap();
    let err = Cassette::load(dir.path().join("crashed.jsonl")).unwrap_err();
    assert!(matches!(err, CassetteError::Unfinished { .. }), "{err}");
    assert!(err.to_string().contains("crashed.jsonl.recording"), "{err}");
}

#[tokio::test]
async fn two_recordings_into_one_file_and_an_unwritable_one_are_refused() {
    let dir = temp_dir();
    let file = dir.path().join("busy.jsonl");
    let first = Recorder::create(&file).unwrap();
    let err = Recorder::create(&file).unwrap_err();
    let text = err.to_string().replace(&dir.path().display().to_string(), "<dir>");
    insta::assert_snapshot!("busy", text);
    first.finish().unwrap();
    let cassette = Cassette::load(&file).unwrap();
    assert!(cassette.is_empty());
    assert_eq!(cassette.level(), Level::Events);

    let missing: PathBuf = dir.path().join("no-such-dir").join("x.jsonl");
    let err = Recorder::create(&missing).unwrap_err();
    assert!(matches!(err, CassetteError::Unwritable { .. }), "{err}");
    assert!(err.to_string().contains("no-such-dir/x.jsonl.recording"), "{err}");

    // A recorder of one level does not take a model of the other.
    let both = dir.path().join("both.jsonl");
    let recorder = Recorder::create(&both).unwrap();
    RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    let err = client("http://127.0.0.1:9/v1").recorded(&recorder).unwrap_err();
    assert!(matches!(err, CassetteError::MixedLevels { .. }), "{err}");
    recorder.finish().unwrap();
}

#[tokio::test]
async fn the_summary_counts_only_a_finish_reason_as_complete() {
    let whole = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "whole"},
        "finish_reason": "stop"}]});
    let (base_url, count) = serve(vec![
        // 1: [DONE] after the answer began but before a finish reason: a
        // cut, sent again by the client (nothing reached the caller), and
        // answered.
        Reply::Sse {
            pieces: vec![
                data(json!({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]})),
                DONE.into(),
            ],
            cut: false,
        },
        Reply::Sse {
            pieces: vec![text_chunk("all"), finish_chunk("stop"), DONE.into()],
            cut: false,
        },
        // 2: [DONE] alone (a refusal inside a 200: an error), then the
        // whole answer to the same request asked without streaming.
        Reply::Sse {
            pieces: vec![DONE.into()],
            cut: false,
        },
        Reply::Status {
            status: 200,
            headers: vec![("content-type", "application/json")],
            body: whole.to_string(),
        },
    ])
    .await;
    let dir = temp_dir();
    let file = dir.path().join("summary.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = client(&base_url).recorded(&recorder).unwrap();
    assert_eq!(call(&live, "retry me").await.unwrap().text, "all");
    assert_eq!(call(&live, "say nothing").await.unwrap().text, "whole");
    assert_eq!(recorder.finish().unwrap(), 4);
    assert_eq!(count.load(Ordering::SeqCst), 4);

    let summary = Cassette::load(&file).unwrap().summary();
    assert_eq!(
        (summary.exchanges, summary.cut_streams, summary.errors, summary.dropped),
        (4, 1, 1, 0),
        "{summary}"
    );
}

#[tokio::test]
async fn an_interrupted_recording_is_kept_and_refused_by_replay_with_why() {
    let dir = temp_dir();
    let file = dir.path().join("stopped.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    call(&live, "hello").await.unwrap();
    assert_eq!(recorder.interrupt("SIGINT").unwrap(), 1);
    assert!(!Path::new(&format!("{}.recording", file.display())).exists());
    let last = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    assert_eq!(last, r#"{"kind":"interrupted","exchanges":1,"reason":"SIGINT"}"#);

    // Replay refuses it, saying why; looking at it still works.
    let err = Cassette::load(&file).unwrap_err();
    assert!(matches!(err, CassetteError::Unfinished { .. }), "{err}");
    let text = err.to_string().replace(&dir.path().display().to_string(), "<dir>");
    assert_eq!(
        text,
        "<dir>/stopped.jsonl: the cassette is unfinished, so it is not replayed: the run that recorded it was interrupted (SIGINT) after 1 exchanges; record it again"
    );
    let inspected = Cassette::inspect(&file).unwrap();
    assert_eq!(inspected.interrupted(), Some("SIGINT"));
    assert_eq!(inspected.summary().exchanges, 1);
    assert_eq!(
        Cassette::load(&recorded_whole(dir.path()).await).unwrap().interrupted(),
        None
    );
}

/// A whole recording of one exchange, in `dir`.
async fn recorded_whole(dir: &Path) -> PathBuf {
    let file = dir.join("whole.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    call(&live, "hello").await.unwrap();
    recorder.finish().unwrap();
    file
}

#[tokio::test]
async fn a_recorder_dropped_unclosed_never_leaves_a_whole_cassette() {
    let dir = temp_dir();
    // With an exchange: FILE.recording without its closing line.
    let file = dir.path().join("dropped.jsonl");
    let recorder = Recorder::create(&file).unwrap();
    let live = RecordingModel::new(ScriptedModel::builtin(), &recorder).unwrap();
    call(&live, "hello").await.unwrap();
    drop((live, recorder));
    assert!(!file.exists());
    let partial = PathBuf::from(format!("{}.recording", file.display()));
    let kept = std::fs::read_to_string(&partial).unwrap();
    assert!(kept.lines().last().unwrap().contains(r#""kind":"end""#), "{kept}");
    let err = Cassette::load(&file).unwrap_err();
    assert!(matches!(err, CassetteError::Unfinished { .. }), "{err}");

    // With none: nothing is left, so the next recording is not refused.
    let empty = dir.path().join("empty.jsonl");
    drop(Recorder::create(&empty).unwrap());
    assert!(!Path::new(&format!("{}.recording", empty.display())).exists());
    Recorder::create(&empty).unwrap().finish().unwrap();
    assert!(Cassette::load(&empty).unwrap().is_empty());
}

#[tokio::test]
async fn parts_recorded_beside_a_cassette_load_with_it() {
    let dir = temp_dir();
    let file = dir.path().join("tree.jsonl");
    // A part an earlier recording left goes when a new one starts.
    std::fs::write(dir.path().join("tree.jsonl.part-7"), "stale").unwrap();
    let whole = Recorder::create(&file).unwrap();
    assert!(!dir.path().join("tree.jsonl.part-7").exists());
    let parent = RecordingModel::new(ScriptedModel::builtin(), &whole).unwrap();
    call(&parent, "the parent asks").await.unwrap();
    // Two children, each in a part of its own.
    for text in ["child one", "child two"] {
        let part = Recorder::create_part(&file).unwrap();
        let child = RecordingModel::new(ScriptedModel::builtin(), &part).unwrap();
        call(&child, text).await.unwrap();
        assert_eq!(part.finish().unwrap(), 1);
    }
    assert_eq!(whole.finish().unwrap(), 1);
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        text.lines().last().unwrap(),
        r#"{"kind":"finish","exchanges":1,"parts":["tree.jsonl.part-1","tree.jsonl.part-2"]}"#
    );

    let cassette = Cassette::load(&file).unwrap();
    assert_eq!((cassette.len(), cassette.summary().agents.len()), (3, 3));
    let replay = ReplayModel::new(cassette, Timing::Fast);
    for text in ["child two", "the parent asks", "child one"] {
        call(&replay, text).await.unwrap();
    }
    // A miss closest to a part's request names the part.
    let err = call(&replay, "child twoo").await.unwrap_err().to_string();
    assert!(err.contains("tree.jsonl.part-2 line 2"), "{err}");

    // A part that is gone leaves the cassette unfinished, saying which.
    std::fs::remove_file(dir.path().join("tree.jsonl.part-1")).unwrap();
    let err = Cassette::load(&file).unwrap_err();
    assert!(matches!(err, CassetteError::Unfinished { .. }), "{err}");
    assert!(err.to_string().contains("tree.jsonl.part-1 is missing"), "{err}");
}
