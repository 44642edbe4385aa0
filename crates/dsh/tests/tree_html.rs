//! `dsh tree --html`: the page opened in a real headless Chromium, offline,
//! and checked for what a person sees: every agent's row, the bars in time
//! order, a queued wait, a cut and a failure marked, and no console error.
//! A screenshot is kept beside the test's build output.
//!
//! Needs Chromium (`chromium` from Debian's packages, or `DSH_CHROMIUM`);
//! `.ci/run` installs it where missing. Without one the test says so and
//! passes, except under CI (`CI` set), where it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::dsh;

/// Three children in one answer, two slots: one waits. `research` and
/// `draft` take a while (their words stream with a pause); `draft`'s answer
/// is cut to the result budget; `check`'s model call fails.
fn script(dir: &Path) -> String {
    let long = "word ".repeat(10_000);
    let script = serde_json::json!({"rules": [
        {"when": {"first_user_contains": "PARENT", "last_message": "user"}, "reply": {"tool_calls": [
            {"name": "subagent", "arguments": {"description": "research", "prompt": "research it"}},
            {"name": "subagent", "arguments": {"description": "draft", "prompt": "draft it"}},
            {"name": "subagent", "arguments": {"description": "check", "prompt": "check it"}}]}},
        {"when": {"first_user_contains": "PARENT", "last_message": "tool"},
         "reply": {"text": "all three reported back", "delay_ms": 30}},
        {"when": {"first_user_contains": "research"}, "reply": {"text": "found five things worth a look", "delay_ms": 60}},
        {"when": {"first_user_contains": "draft"}, "reply": {"text": long, "stream_by": "whole", "delay_ms": 500}},
        {"when": {"first_user_contains": "check"}, "reply": {"error": "the checker is down"}}
    ]});
    let path = dir.join("script.json");
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

/// The Chromium to drive: `DSH_CHROMIUM`, else the first of the usual
/// names on the `PATH`.
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("DSH_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser", "google-chrome"].map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Runs Chromium headless on `page` with no network of any kind, a fresh
/// profile, and `extra` flags; returns stdout and stderr.
fn run_chromium(chromium: &Path, page: &Path, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=3000",
            "--window-size=1280,420",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The value of attribute `name` in `tag`, when it has one.
fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(&tag[start..end])
}

/// The opening tags in `dom` whose class attribute starts with `class`.
fn tags<'a>(dom: &'a str, class: &str) -> Vec<&'a str> {
    let needle = format!("class=\"{class}");
    dom.match_indices(&needle)
        .map(|(at, _)| {
            let start = dom[..at].rfind('<').unwrap();
            let end = at + dom[at..].find('>').unwrap();
            &dom[start..=end]
        })
        .collect()
}

/// The `left: N%` of a tag's style.
fn left(tag: &str) -> f64 {
    let style = attribute(tag, "style").unwrap();
    let start = style.find("left: ").unwrap() + 6;
    let end = style[start..].find('%').unwrap() + start;
    style[start..end].parse().unwrap()
}

#[test]
fn the_page_shows_every_agent_on_one_time_axis_in_a_real_browser() {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have Chromium (.ci/run installs Debian's `chromium`)"
        );
        eprintln!("skipped: no Chromium here (install Debian's `chromium`, or set DSH_CHROMIUM)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = script(dir.path());
    std::fs::write(dir.path().join("dsh.toml"), "[limits]\nmax_concurrent = 2\n").unwrap();
    let run = dsh(dir.path(), &["run", "--quiet", "--script", &script, "PARENT task"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let json = dsh(dir.path(), &["tree", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let page = dir.path().join("tree.html");
    let written = dsh(dir.path(), &["tree", "--html", page.to_str().unwrap()]);
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    assert_eq!(
        String::from_utf8_lossy(&written.stderr),
        format!("dsh tree: wrote {} (4 agents)\n", page.display())
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for remote in ["http://", "https://", "//cdn"] {
        assert!(!html.contains(remote), "the page reaches for {remote}");
    }

    let (dom, stderr) = run_chromium(&chromium, &page, &["--dump-dom".to_owned()]);
    // The script ran to its end, and nothing failed on the way.
    assert!(dom.contains("data-rendered=\"4\""), "{dom}");
    assert!(!dom.contains("data-errors"), "{dom}");
    let console: Vec<&str> = stderr.lines().filter(|line| line.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");

    // Every agent has its row, parent first.
    let mut ids = vec![json["root"]["id"].as_str().unwrap()];
    ids.extend(
        json["root"]["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(|child| child["id"].as_str().unwrap()),
    );
    let rows: Vec<&str> = tags(&dom, "row")
        .iter()
        .map(|tag| attribute(tag, "data-id").unwrap())
        .collect();
    assert_eq!(rows, ids);
    for label in ["research", "draft", "check"] {
        assert!(dom.contains(&format!("</span>{label}</div>")), "{label}: {dom}");
    }

    // The running bars sit on one axis in the order of their start times.
    let bars = tags(&dom, "bar running");
    assert_eq!(bars.len(), 4, "{dom}");
    let mut by_time: Vec<(u64, f64)> = bars
        .iter()
        .map(|tag| (attribute(tag, "data-start").unwrap().parse().unwrap(), left(tag)))
        .collect();
    by_time.sort_by_key(|(start, _)| *start);
    assert!(
        by_time.windows(2).all(|pair| pair[0].1 <= pair[1].1),
        "bars out of time order: {by_time:?}"
    );
    // The parent's bar begins first; one call waited for a slot.
    assert_eq!(by_time[0].1, 0.0);
    assert_eq!(tags(&dom, "bar queued").len(), 1, "{dom}");
    // Model calls as ticks; the cut and the failure marked.
    assert!(tags(&dom, "call").len() >= 4, "{dom}");
    assert_eq!(tags(&dom, "mark cut").len(), 1, "{dom}");
    assert_eq!(tags(&dom, "mark failure").len(), 1, "{dom}");
    assert_eq!(tags(&dom, "bar running failed").len(), 1, "{dom}");

    // A screenshot, kept for a person to look at.
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dsh-tree-page.png");
    let _ = std::fs::remove_file(&shot);
    run_chromium(&chromium, &page, &[format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    assert!(png.len() > 10_000, "a picture, not a blank");
    eprintln!("screenshot: {}", shot.display());
}
