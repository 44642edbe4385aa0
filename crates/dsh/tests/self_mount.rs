//! The self-mount check: a `dsh` started by a `dsh` (as an ACP child or
//! an MCP server) in its parent's directory refuses to mount the parent's
//! `dsh.toml` again, with exit 2 and a message saying how to give it its own
//! configuration. Offline: scripted models.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{DSH, dsh};

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// The parent asks `subagent_remote`, then repeats what it heard.
const PARENT_SCRIPT: &str = r#"{"rules": [
  {"when": {"last_message": "user"}, "reply": {"tool_calls": [
    {"name": "subagent_remote", "arguments": {"description": "ask the remote", "prompt": "hello remote"}}]}},
  {"when": {"last_message": "tool"}, "reply": {"text": "Parent heard: {{last_tool_result}}"}}
]}"#;

/// Says how to give the child its own configuration.
fn says_how_to_fix(text: &str) {
    assert!(text.contains("would start itself again"), "{text}");
    assert!(text.contains("--config <file>"), "{text}");
    assert!(text.contains("DSH_PARENT_CONFIGS"), "{text}");
}

#[test]
fn an_acp_child_started_in_its_parents_directory_refuses_the_parents_dsh_toml() {
    let dir = tempfile::tempdir().unwrap();
    let parent = write(dir.path(), "parent.json", PARENT_SCRIPT);
    // The child runs in this directory without `--config`: it would read
    // this very file and mount itself again.
    write(
        dir.path(),
        "dsh.toml",
        &format!(
            r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {DSH:?}
args = ["acp", "--quiet"]
max_depth = "provider-managed"
"#
        ),
    );
    let started = Instant::now();
    let output = dsh(dir.path(), &["run", "--quiet", "--script", &parent, "go"]);
    assert!(started.elapsed() < Duration::from_secs(30), "no endless chain");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    // The child refused at once: exit 2, the reason on its stderr, which the
    // parent's failed delegation quotes.
    assert!(
        stdout.starts_with("Parent heard: Error: subagent ACP child failed to start"),
        "{stdout}"
    );
    assert!(stdout.contains("exit code 2"), "{stdout}");
    says_how_to_fix(&stdout);

    // Given its own configuration, the same child starts and answers.
    write(dir.path(), "child.toml", "");
    write(
        dir.path(),
        "dsh.toml",
        &format!(
            r#"[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = {DSH:?}
args = ["acp", "--quiet", "--config", "child.toml"]
max_depth = "provider-managed"
"#
        ),
    );
    let output = dsh(dir.path(), &["run", "--quiet", "--script", &parent, "go"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        stdout.starts_with("Parent heard: The subagent finished the task."),
        "{stdout}"
    );
}

#[test]
fn an_mcp_server_that_is_dsh_on_the_same_dsh_toml_refuses_and_stops_the_parent() {
    let dir = tempfile::tempdir().unwrap();
    // `dsh mcp` as an MCP server of the parent, in the parent's directory.
    write(
        dir.path(),
        "dsh.toml",
        &format!("[[mcp_servers]]\nname = \"self\"\ncommand = {DSH:?}\nargs = [\"mcp\", \"--quiet\"]\n"),
    );
    let started = Instant::now();
    let output = dsh(dir.path(), &["run", "--quiet", "go"]);
    assert!(started.elapsed() < Duration::from_secs(30), "no endless chain");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("MCP server \"self\" failed to start: it exited with exit code 2"),
        "{stderr}"
    );
}

#[test]
fn a_dsh_whose_configuration_an_ancestor_loaded_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "dsh.toml", "[model]\nmodel = \"m\"\n");
    write(dir.path(), "copy.toml", "[model]\nmodel = \"m\"\n");
    write(dir.path(), "other.toml", "");
    // The fingerprint the parent passes is that of the file's bytes: the
    // same file and an identical copy are refused, another file is not.
    let mut command = Command::new(DSH);
    let fingerprint = {
        // 64-bit FNV-1a, as the self-mount check computes it.
        let hash = "[model]\nmodel = \"m\"\n"
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
            });
        format!("{hash:016x}")
    };
    for (args, refused) in [
        (&["config", "check"][..], false),
        (&["acp", "--quiet"][..], true),
        (&["acp", "--quiet", "--config", "copy.toml"][..], true),
        (&["mcp", "--quiet"][..], true),
        (&["run", "--quiet", "go"][..], true),
        (&["run", "--quiet", "--config", "other.toml", "go"][..], false),
    ] {
        let output = command
            .args(args)
            .current_dir(dir.path())
            .env("DSH_PARENT_CONFIGS", format!("0123456789abcdef,{fingerprint}"))
            .env_remove("DSH_API_KEY")
            .env_remove("DSH_BASE_URL")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        command = Command::new(DSH);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if refused {
            assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
            says_how_to_fix(&stderr);
        } else {
            assert!(output.status.success(), "{args:?}: {stderr}");
        }
    }
}
