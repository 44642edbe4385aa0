#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use dsh_subagent_api::{ChildCount, CostLimit, QueueLimit};
use dsh_tool_subagent::MaxDepth;
use dsh_tools::ResultLimit;

use super::*;

fn check(text: &str) -> Result<Config, ConfigFileError> {
    parse(Path::new("dsh.toml"), text, Path::new("/work/project"))
}

fn error(text: &str) -> String {
    match check(text) {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(error) => error.to_string(),
    }
}

/// Each case's refusal under its name, one case after the other: what a
/// table of refused files pins.
fn refusals(cases: &[(&str, &str)]) -> String {
    let rendered: Vec<String> = cases
        .iter()
        .map(|(case, text)| format!("{case}:\n  {}", error(text)))
        .collect();
    rendered.join("\n")
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn a_full_file_resolves_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
[model]
base_url = "http://127.0.0.1:8080/v1"
model = "deepseek-chat"
api_key_env = "MY_KEY"
context_window = 128000

[[subagents]]
provider = "spawn"
persona = "You are terse."
agent_options.model = "deepseek-chat"
agent_options.context_window = 64000
tool_filter = { deny = ["subagent"] }
max_depth = 1
enable_run_in_background = true
timeout = "10min"
token_limit = 200000
result_limit = 4000

[[subagents]]
tool_name = "subagent_fork"
provider = "fork"

[[subagents]]
tool_name = "subagent_remote"
provider = "acp"
command = "dsh"
args = ["acp", "--quiet"]
env = { DSH_MODEL = "deepseek-chat" }
pass_env = ["DSH_API_KEY"]
cwd = "."
permission = "allow-first"
auth = { method = "api-key" }
turn_timeout = "10min"
cancel_grace = "1s"
eof_grace = "500ms"
term_grace = "700ms"
max_depth = "provider-managed"

[[mcp_servers]]
name = "files"
command = "mcp-files"
args = ["--root", "."]
env = { FILES_LOG = "debug" }
cwd = "."

[[mcp_servers]]
name = "docs"
url = "https://mcp.example.com/mcp"
headers = { "X-Team" = "agents" }
bearer_token_env = "DOCS_TOKEN"

[limits]
max_concurrent = 3
max_queued = 0
max_children = 50
token_limit = 1000000
result_limit = 16000
"#;
    let config = parse(Path::new("dsh.toml"), text, dir.path()).unwrap();
    assert_eq!(
        config.model,
        ModelConfig {
            base_url: Some("http://127.0.0.1:8080/v1".into()),
            model: Some("deepseek-chat".into()),
            api_key_env: Some("MY_KEY".into()),
            context_window: dsh_agent::ContextWindow::new(128_000).ok(),
            price: None,
            max_concurrent: None,
        }
    );
    let spawn = &config.subagents[0];
    assert!(matches!(spawn.provider, Provider::Spawn));
    assert_eq!(spawn.tool.tool_name, "subagent");
    assert_eq!(spawn.tool.provider, "spawn");
    assert_eq!(spawn.tool.persona.as_deref(), Some("You are terse."));
    assert_eq!(
        spawn
            .tool
            .agent_options
            .as_ref()
            .and_then(|options| options.model.as_deref()),
        Some("deepseek-chat")
    );
    assert_eq!(
        spawn
            .tool
            .agent_options
            .as_ref()
            .and_then(|options| options.context_window)
            .map(dsh_agent::ContextWindow::tokens),
        Some(64_000)
    );
    assert_eq!(
        spawn.tool.tool_filter.as_ref().and_then(|filter| filter.deny.clone()),
        Some(vec!["subagent".to_owned()])
    );
    assert_eq!(
        spawn.tool.max_depth,
        Some(MaxDepth::Limit(dsh_subagent_api::DepthLimit::levels(1)))
    );
    assert!(spawn.tool.enable_run_in_background);
    assert_eq!(spawn.tool.timeout, Some(Duration::from_secs(600)));
    assert_eq!(spawn.tool.token_limit.map(|limit| limit.tokens()), Some(200_000));
    assert_eq!(spawn.tool.result_limit, Some(ResultLimit::new(4_000).unwrap()));
    let fork = &config.subagents[1];
    assert!(matches!(fork.provider, Provider::Fork));
    assert!(!fork.tool.enable_run_in_background);
    assert_eq!((fork.tool.timeout, fork.tool.token_limit), (None, None));
    assert_eq!(fork.tool.result_limit, None);
    assert_eq!(
        config.limits,
        LimitsConfig {
            max_concurrent: ChildCount::new(3).ok(),
            max_queued: Some(QueueLimit::new(0)),
            max_children: ChildCount::new(50).ok(),
            token_limit: dsh_subagent_api::TokenLimit::new(1_000_000).ok(),
            cost_limit: None,
            result_limit: ResultLimit::new(16_000).ok(),
        }
    );
    let acp = &config.subagents[2];
    let Provider::Acp(acp_config) = &acp.provider else {
        panic!("not acp")
    };
    assert_eq!(acp.tool.provider, "acp:subagent_remote");
    assert_eq!(acp.tool.max_depth, Some(MaxDepth::ProviderManaged));
    let launch = &acp_config.program.launch;
    assert_eq!(acp_config.program.command, PathBuf::from("dsh"));
    assert_eq!(acp_config.program.args, ["acp", "--quiet"]);
    assert_eq!(
        launch.environment,
        dsh_subagent_acp::Environment::Scrubbed {
            pass: vec!["DSH_API_KEY".to_owned()]
        }
    );
    assert_eq!(launch.env, [("DSH_MODEL".to_owned(), "deepseek-chat".to_owned())]);
    assert_eq!(launch.cwd.as_deref(), Some(dir.path().join(".").as_path()));
    assert_eq!(acp_config.permission, dsh_subagent_acp::PermissionPolicy::AllowFirst);
    assert_eq!(acp_config.auth, dsh_subagent_acp::AcpAuth::Method("api-key".into()));
    assert_eq!(acp_config.turn_timeout, Some(Duration::from_secs(600)));
    assert_eq!(acp_config.cancel_grace, Duration::from_millis(1000));
    assert_eq!(launch.teardown.eof_grace, Duration::from_millis(500));
    assert_eq!(launch.teardown.term_grace, Duration::from_millis(700));
    let docs = dsh_mcp::RemoteServer::new("https://mcp.example.com/mcp")
        .and_then(|server| server.header("X-Team", "agents"))
        .and_then(|server| server.bearer_token_env("DOCS_TOKEN"))
        .unwrap();
    assert_eq!(
        config.mcp_servers,
        [
            dsh_mcp::McpServerSpec::stdio(
                "files",
                dsh_mcp::Program::new("mcp-files", dsh_mcp::McpServerSpec::default_launch())
                    .args(["--root", "."])
                    .env("FILES_LOG", "debug")
                    .cwd(dir.path().join("."))
            )
            .unwrap(),
            dsh_mcp::McpServerSpec::remote("docs", docs).unwrap(),
        ]
    );
}

/// `command`, `args`, `env`, `pass_env` and `cwd` say the same under
/// `[[subagents]]` and `[[mcp_servers]]`: the same program, arguments,
/// variables set and working directory; only where the environment starts
/// differs (an ACP child's is scrubbed, an MCP server's inherited).
#[test]
fn the_launch_keys_mean_the_same_under_both_tables() {
    let dir = tempfile::tempdir().unwrap();
    let keys = "command = \"/opt/My Agent/run\"\nargs = [\"--root\", \"my dir\"]\nenv = { B = \"2\", A = \"1 1\" }\ncwd = \".\"\n";
    let text = format!(
        "[[subagents]]\nprovider = \"acp\"\nmax_depth = \"provider-managed\"\n{keys}pass_env = [\"TOKEN\"]\n\n[[mcp_servers]]\nname = \"m\"\n{keys}"
    );
    let config = parse(Path::new("dsh.toml"), &text, dir.path()).unwrap();
    let Provider::Acp(acp) = &config.subagents[0].provider else {
        panic!("not acp")
    };
    let dsh_mcp::McpEndpoint::Stdio(mcp) = &config.mcp_servers[0].endpoint else {
        panic!("not a program")
    };
    let (acp, mcp) = (&acp.program, mcp);
    assert_eq!(acp.command, PathBuf::from("/opt/My Agent/run"));
    assert_eq!((&acp.command, &acp.args), (&mcp.command, &mcp.args));
    assert_eq!(acp.args, ["--root", "my dir"]);
    assert_eq!(acp.launch.env, mcp.launch.env);
    assert_eq!(
        acp.launch.env,
        [("A".to_owned(), "1 1".to_owned()), ("B".to_owned(), "2".to_owned())]
    );
    assert_eq!(acp.launch.cwd, mcp.launch.cwd);
    assert_eq!(acp.launch.cwd.as_deref(), Some(dir.path().join(".").as_path()));
    assert_eq!(
        acp.launch.environment,
        dsh_subagent_acp::Environment::Scrubbed {
            pass: vec!["TOKEN".to_owned()]
        }
    );
    assert_eq!(mcp.launch.environment, dsh_subagent_acp::Environment::Inherited);
}

/// The launch keys' refusals, where they are written: a shell line as a
/// `command` (with the `args` it should be), a name that cannot be a
/// variable, `env` as a list (names to pass are `pass_env`), `pass_env`
/// into an environment that is inherited whole, launch keys on a `url`
/// server or an in-process child, and a `cwd` that is not a directory.
#[test]
fn the_launch_keys_are_refused_where_they_are_written() {
    let cases: &[(&str, &str)] = &[
        (
            "a shell line as an mcp command",
            "[[mcp_servers]]\nname = \"files\"\ncommand = \"mcp-files --root .\"\n",
        ),
        (
            "a shell line as an acp command",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh acp --quiet\"\n",
        ),
        (
            "a bad env name",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nenv = { \"A=B\" = \"x\" }\n",
        ),
        (
            "a bad env name on an mcp server",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nenv = { \"\" = \"x\" }\n",
        ),
        (
            "env as a list of names",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nenv = [\"DSH_API_KEY\"]\n",
        ),
        (
            "an env value that is no string",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nenv = { PORT = 8080 }\n",
        ),
        (
            "a bad pass_env name",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\npass_env = [\"A=B\"]\n",
        ),
        (
            "pass_env on an mcp server",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\npass_env = [\"TOKEN\"]\n",
        ),
        (
            "args on a url server",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"https://example.com/mcp\"\nargs = [\"x\"]\n",
        ),
        (
            "env on a url server",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"https://example.com/mcp\"\nenv = { A = \"b\" }\n",
        ),
        (
            "pass_env on a spawn child",
            "[[subagents]]\nprovider = \"spawn\"\npass_env = [\"TOKEN\"]\n",
        ),
        (
            "a cwd that is not a directory",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\ncwd = \"nowhere\"\n",
        ),
        ("a blank command", "[[mcp_servers]]\nname = \"a\"\ncommand = \" \"\n"),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn an_empty_file_configures_nothing() {
    let config = check("").unwrap();
    assert_eq!(config.model, ModelConfig::default());
    assert!(config.subagents.is_empty());
    assert!(config.mcp_servers.is_empty());
}

/// The release graces are read under the names of the launch's graces,
/// as durations with their unit.
#[test]
fn the_graces_load_under_the_names_of_the_launchs_graces() {
    let acp = |graces: &str| {
        let text = format!("[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\n{graces}");
        let mut config = check(&text).unwrap();
        match config.subagents.remove(0).provider {
            Provider::Acp(acp) => acp,
            _ => panic!("not acp"),
        }
    };
    let named = acp("eof_grace = \"300ms\"\nterm_grace = \"900ms\"\n");
    assert_eq!(named.program.launch.teardown.eof_grace, Duration::from_millis(300));
    assert_eq!(named.program.launch.teardown.term_grace, Duration::from_millis(900));
    assert_ne!(acp(""), named, "the values above must differ from the defaults");
    let old = error("[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\neof_grace_ms = 300\n");
    assert!(old.contains("unknown field `eof_grace_ms`"), "{old}");
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read in order")]
fn errors_name_file_line_column_and_key() {
    let cases: &[(&str, &str)] = &[
        ("syntax", "[model\nbase_url = 1\n"),
        ("unknown top-level table", "[models]\nbase_url = \"x\"\n"),
        (
            "unknown model key",
            "[model]\nbase_url = \"http://x\"\napi_key = \"secret\"\n",
        ),
        (
            "unknown subagent key",
            "[[subagents]]\nprovider = \"spawn\"\npersonna = \"x\"\n",
        ),
        ("missing provider", "[[subagents]]\ntool_name = \"a\"\n"),
        ("unknown provider", "[[subagents]]\nprovider = \"docker\"\n"),
        (
            "wrong type",
            "[[subagents]]\nprovider = \"spawn\"\nenable_run_in_background = \"yes\"\n",
        ),
        (
            "negative max_depth",
            "[[subagents]]\nprovider = \"spawn\"\nmax_depth = -1\n",
        ),
        (
            "max_depth word",
            "[[subagents]]\nprovider = \"spawn\"\nmax_depth = \"unlimited\"\n",
        ),
        (
            "numeric max_depth over acp",
            "[[subagents]]\nprovider = \"spawn\"\n\n[[subagents]]\ntool_name = \"remote\"\nprovider = \"acp\"\ncommand = \"dsh\"\nmax_depth = 2\n",
        ),
        (
            "persona over acp",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\npersona = \"You are terse.\"\n",
        ),
        (
            "tool_filter over acp",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\ntool_filter = { deny = [\"x\"] }\n",
        ),
        (
            "acp without command",
            "[[subagents]]\nprovider = \"acp\"\nargs = [\"acp\"]\n",
        ),
        (
            "acp key on spawn",
            "[[subagents]]\nprovider = \"spawn\"\ncommand = \"dsh\"\n",
        ),
        (
            "graces longer than the tool waits",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\neof_grace = \"6s\"\nterm_grace = \"3s\"\n",
        ),
        (
            "unknown auth",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nauth = \"oauth\"\n",
        ),
        (
            "auth table without method",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nauth = { id = \"x\" }\n",
        ),
        (
            "zero turn timeout",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nturn_timeout = \"0s\"\n",
        ),
        (
            "empty tool filter",
            "[[subagents]]\nprovider = \"spawn\"\ntool_filter = {}\n",
        ),
        (
            "unknown tool filter key",
            "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { hide = [\"x\"] }\n",
        ),
        (
            "duplicate tool name",
            "[[subagents]]\nprovider = \"spawn\"\n\n[[subagents]]\nprovider = \"fork\"\n",
        ),
        (
            "unknown tool in a filter",
            "[[subagents]]\nprovider = \"spawn\"\ntool_filter = { deny = [\"subagnt\"] }\n",
        ),
        (
            "huge max_depth",
            "[[subagents]]\nprovider = \"spawn\"\nmax_depth = 9007199254740992\n",
        ),
        (
            "empty tool name",
            "[[subagents]]\nprovider = \"spawn\"\ntool_name = \"\"\n",
        ),
        ("mcp server without command", "[[mcp_servers]]\nname = \"files\"\n"),
        (
            "bad mcp server name",
            "[[mcp_servers]]\nname = \"my files\"\ncommand = \"x\"\n",
        ),
        (
            "duplicate mcp server",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\n[[mcp_servers]]\nname = \"a\"\ncommand = \"y\"\n",
        ),
        (
            "mcp server with command and url",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
        ),
        (
            "mcp url that is not http",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"ftp://example.com/mcp\"\n",
        ),
        (
            "a literal bearer token",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"https://example.com/mcp\"\nbearer_token = \"s3cret\"\n",
        ),
        (
            "a token in an authorization header",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"https://example.com/mcp\"\nheaders = { authorization = \"Bearer s3cret\" }\n",
        ),
        (
            "headers on a command server",
            "[[mcp_servers]]\nname = \"a\"\ncommand = \"x\"\nheaders = { \"X-A\" = \"b\" }\n",
        ),
        (
            "a bad header",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"https://example.com/mcp\"\nheaders = { \"X A\" = \"b\" }\n",
        ),
        ("unknown limits key", "[limits]\nmax_concurent = 2\n"),
        ("zero max_concurrent", "[limits]\nmax_concurrent = 0\n"),
        ("zero max_children", "[limits]\nmax_children = 0\n"),
        ("zero tree token_limit", "[limits]\ntoken_limit = 0\n"),
        ("negative max_queued", "[limits]\nmax_queued = -1\n"),
        (
            "a timeout that is no duration",
            "[[subagents]]\nprovider = \"spawn\"\ntimeout = \"ten minutes\"\n",
        ),
        (
            "a timeout without a unit",
            "[[subagents]]\nprovider = \"spawn\"\ntimeout = 600\n",
        ),
        (
            "zero tool token_limit",
            "[[subagents]]\nprovider = \"spawn\"\ntoken_limit = 0\n",
        ),
        (
            "token_limit over acp",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\ntoken_limit = 200000\n",
        ),
        (
            "a bad token variable",
            "[[mcp_servers]]\nname = \"a\"\nurl = \"https://example.com/mcp\"\nbearer_token_env = \"A=B\"\n",
        ),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn result_limits_below_256_tokens_are_refused_where_they_are_written() {
    let cases: &[(&str, &str)] = &[
        ("tree result_limit", "[limits]\nresult_limit = 12\n"),
        ("zero tree result_limit", "[limits]\nresult_limit = 0\n"),
        (
            "tool result_limit",
            "[[subagents]]\nprovider = \"spawn\"\n\n[[subagents]]\ntool_name = \"subagent_fork\"\nprovider = \"fork\"\nresult_limit = 255\n",
        ),
        ("a word", "[limits]\nresult_limit = \"8k\"\n"),
    ];
    insta::assert_snapshot!(refusals(cases));
}

/// Every bounded setting of the file is refused where it is written: the
/// file, the line and column of its value, and its key path.
#[test]
fn every_bounded_setting_is_refused_at_its_key_line_and_column() {
    let spawn = "[[subagents]]\nprovider = \"spawn\"\n";
    let acp = "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\n";
    let cases: Vec<(String, &str, &str)> = [
        (spawn, "max_depth", "-1"),
        (spawn, "max_depth", "9007199254740992"),
        (spawn, "timeout", "\"0s\""),
        (spawn, "token_limit", "0"),
        (spawn, "result_limit", "12"),
        (spawn, "agent_options.context_window", "512"),
        (acp, "turn_timeout", "\"90\""),
        (acp, "cancel_grace", "1000"),
        (acp, "eof_grace", "\"half a second\""),
        (acp, "term_grace", "\"-1s\""),
    ]
    .into_iter()
    .map(|(table, key, value)| (format!("{table}{key} = {value}\n"), key, value))
    .chain(
        [
            ("[limits]\n", "max_concurrent", "0"),
            ("[limits]\n", "max_queued", "-1"),
            ("[limits]\n", "max_children", "0"),
            ("[limits]\n", "token_limit", "0"),
            ("[limits]\n", "cost_limit", "0"),
            ("[limits]\n", "result_limit", "12"),
            ("[model]\n", "context_window", "512"),
            ("[model]\n", "max_concurrent", "0"),
            ("[data]\n", "max_age", "\"forever\""),
            ("[data]\n", "max_size", "\"1gb\""),
        ]
        .map(|(table, key, value)| (format!("{table}{key} = {value}\n"), key, value)),
    )
    .collect();
    for (text, key, value) in cases {
        let refused = error(&text);
        let line = text.lines().count();
        let column = key.len() + " = ".len() + 1;
        let table = text.lines().next().unwrap_or_default();
        let path = match table {
            "[[subagents]]" => format!("subagents[0].{key}"),
            table => format!("{}.{key}", table.trim_matches(['[', ']'])),
        };
        let at = format!("dsh.toml:{line}:{column}: {path}: ");
        assert!(refused.starts_with(&at), "{key} = {value}: {refused}\nis not at {at}");
    }
}

/// A bounded setting refuses a bad value in its own words, the same from
/// its flag and from its key in the file.
#[test]
fn a_flag_and_the_file_refuse_a_setting_in_the_same_words() {
    use clap::Parser;
    let cases = [
        (
            "--result-limit",
            "12",
            "limits.result_limit",
            "[limits]\nresult_limit = 12\n",
        ),
        (
            "--result-limit",
            "8k",
            "limits.result_limit",
            "[limits]\nresult_limit = \"8k\"\n",
        ),
        (
            "--token-limit",
            "0",
            "limits.token_limit",
            "[limits]\ntoken_limit = 0\n",
        ),
        (
            "--context-window",
            "512",
            "model.context_window",
            "[model]\ncontext_window = 512\n",
        ),
        (
            "--max-concurrent",
            "0",
            "limits.max_concurrent",
            "[limits]\nmax_concurrent = 0\n",
        ),
        (
            "--max-children",
            "0",
            "limits.max_children",
            "[limits]\nmax_children = 0\n",
        ),
        ("--max-queued", "-1", "limits.max_queued", "[limits]\nmax_queued = -1\n"),
        ("--cost-limit", "0", "limits.cost_limit", "[limits]\ncost_limit = 0\n"),
        (
            "--cost-limit",
            "5 dollars",
            "limits.cost_limit",
            "[limits]\ncost_limit = \"5 dollars\"\n",
        ),
        (
            "--context-window",
            "128k",
            "model.context_window",
            "[model]\ncontext_window = \"128k\"\n",
        ),
    ];
    let mut rendered = Vec::new();
    for (flag, value, key, file) in cases {
        let from_file = error(file);
        let Some((_, refusal)) = from_file.split_once(&format!(": {key}: ")) else {
            panic!("the file's error names no key: {from_file}")
        };
        let from_flag = match crate::cli::Cli::try_parse_from(["dsh", "run", &format!("{flag}={value}"), "go"]) {
            Ok(cli) => panic!("accepted: {cli:?}"),
            Err(error) => error.to_string(),
        };
        assert!(
            from_flag.contains(&format!("for '{flag} <")) && from_flag.contains(&format!(">': {refusal}\n")),
            "{from_flag}\nsays other than\n{refusal}"
        );
        rendered.push(format!(
            "{flag} {value}:\n  {}",
            from_flag.lines().next().unwrap_or_default()
        ));
    }
    insta::assert_snapshot!(rendered.join("\n"));
}

#[test]
fn a_result_limit_flag_beats_the_file_which_leaves_the_default_to_the_harness() {
    let none = LimitsConfig::default();
    assert_eq!(none.result_limit(&none), None);
    let file = check("[limits]\nresult_limit = 16000\n").unwrap().limits;
    assert_eq!(file.result_limit(&none).map(ResultLimit::tokens), Some(16_000));
    let flags = LimitsConfig {
        result_limit: ResultLimit::new(300).ok(),
        ..LimitsConfig::default()
    };
    assert_eq!(file.result_limit(&flags).map(ResultLimit::tokens), Some(300));
    // The result limit is no bound of the tree's gate.
    assert_eq!(file.resolve(&none), none.resolve(&none));
}

#[test]
fn a_limit_flag_beats_the_file_which_beats_the_default() {
    let defaults = LimitsConfig::default().resolve(&LimitsConfig::default());
    assert_eq!(
        defaults,
        dsh_subagent::Limits::none()
            .with_max_concurrent(ChildCount::new(8).unwrap())
            .with_max_queued(QueueLimit::new(64))
            .with_max_children(ChildCount::new(200).unwrap())
    );
    let file = check("[limits]\nmax_concurrent = 3\ntoken_limit = 5000\n")
        .unwrap()
        .limits;
    assert_eq!(
        file.resolve(&LimitsConfig::default()),
        dsh_subagent::Limits::none()
            .with_max_concurrent(ChildCount::new(3).unwrap())
            .with_max_queued(QueueLimit::new(64))
            .with_max_children(ChildCount::new(200).unwrap())
            .with_token_limit(dsh_subagent_api::TokenLimit::new(5000).unwrap())
    );
    let flags = LimitsConfig {
        max_concurrent: ChildCount::new(2).ok(),
        max_children: ChildCount::new(10).ok(),
        ..LimitsConfig::default()
    };
    assert_eq!(
        file.resolve(&flags),
        dsh_subagent::Limits::none()
            .with_max_concurrent(ChildCount::new(2).unwrap())
            .with_max_queued(QueueLimit::new(64))
            .with_max_children(ChildCount::new(10).unwrap())
            .with_token_limit(dsh_subagent_api::TokenLimit::new(5000).unwrap())
    );
}

#[test]
fn an_unreadable_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    let error = load(Some(&missing), dir.path()).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!("{}: cannot read the configuration file: ", missing.display())),
        "{error}"
    );
}

#[test]
fn without_a_file_there_is_no_configuration() {
    let dir = tempfile::tempdir().unwrap();
    assert!(load(None, dir.path()).unwrap().is_none());
    std::fs::write(dir.path().join(DEFAULT_FILE), "[[subagents]]\nprovider = \"fork\"\n").unwrap();
    let config = load(None, dir.path()).unwrap().unwrap();
    assert_eq!(config.path, PathBuf::from(DEFAULT_FILE));
    assert_eq!(config.subagents.len(), 1);
}

#[test]
fn the_readme_example_is_valid() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```toml\n").unwrap() + "```toml\n".len();
    let text = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let config = parse(Path::new("dsh.toml"), text, dir.path()).unwrap();
    let names: Vec<&str> = config.subagents.iter().map(|s| s.tool.tool_name.as_str()).collect();
    assert_eq!(names, ["subagent", "subagent_fork", "subagent_remote"]);
    assert_eq!(config.limits.max_concurrent, Some(LimitsConfig::DEFAULT_MAX_CONCURRENT));
    assert_eq!(config.limits.token_limit.map(|limit| limit.tokens()), Some(2_000_000));
    assert_eq!(config.limits.result_limit, Some(ResultLimit::DEFAULT));
    assert_eq!(config.subagents[0].tool.timeout, Some(Duration::from_secs(600)));
    assert_eq!(
        config.subagents[0].tool.result_limit.map(ResultLimit::tokens),
        Some(4_000)
    );
    // The commented adapter parses too, once uncommented.
    let adapter: String = text
        .lines()
        .skip_while(|line| !line.starts_with("# [[subagents]]"))
        .map(|line| format!("{}\n", line.trim_start_matches("# ")))
        .collect();
    let config = parse(Path::new("dsh.toml"), &adapter, dir.path()).unwrap();
    assert_eq!(config.subagents[0].tool.tool_name, "subagent_claude");
}

/// The documented example caps the depth of every tool whose children could
/// delegate again, so following it never meets the uncapped-depth warning.
#[test]
fn the_readme_example_caps_its_depth() {
    let readme = include_str!("../../README.md");
    let start = readme.find("```toml\n").unwrap() + "```toml\n".len();
    let text = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let config = parse(Path::new("dsh.toml"), text, dir.path()).unwrap();
    assert!(config.uncapped_tools().is_empty(), "{:?}", config.uncapped_tools());
    let example = check("[[subagents]]\nprovider = \"spawn\"\ntimeout = \"10min\"\n").unwrap();
    assert_eq!(example.uncapped_tools(), ["subagent"]);
}

/// The catalog's deployment note states dsh's default limits: it must say
/// what dsh does.
#[test]
fn the_catalog_states_dshs_default_limits() {
    let note = dsh_tool_catalog::manifest()
        .iter()
        .find(|entry| entry.package == "dsh-tool-subagent")
        .unwrap()
        .note;
    for stated in [
        format!(
            "at most {} children of a tree run at once",
            LimitsConfig::DEFAULT_MAX_CONCURRENT.children()
        ),
        format!(
            "{} more calls wait for a slot",
            LimitsConfig::DEFAULT_MAX_QUEUED.calls()
        ),
        format!(
            "{} children start over the tree's life",
            LimitsConfig::DEFAULT_MAX_CHILDREN.children()
        ),
        "there is no token limit".to_owned(),
    ] {
        assert!(note.contains(&stated), "{stated:?} not in the note");
    }
}

#[test]
fn context_window_errors_name_the_key() {
    let cases: &[(&str, &str)] = &[
        ("zero model window", "[model]\ncontext_window = 0\n"),
        ("small model window", "[model]\ncontext_window = 512\n"),
        ("model window as text", "[model]\ncontext_window = \"128k\"\n"),
        (
            "small child window",
            "[[subagents]]\nprovider = \"spawn\"\nagent_options = { model = \"small\", context_window = 100 }\n",
        ),
        (
            "child window over acp",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nagent_options.context_window = 32000\n",
        ),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn the_most_requests_at_once_of_an_endpoint_is_read_and_zero_is_refused() {
    let config = check("[model]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmax_concurrent = 1\n").unwrap();
    assert_eq!(config.model.max_concurrent, Some(dsh_llm::Concurrency::ONE));
    let cases: &[(&str, &str)] = &[
        ("zero", "[model]\nmax_concurrent = 0\n"),
        ("negative", "[model]\nmax_concurrent = -2\n"),
        ("text", "[model]\nmax_concurrent = \"one\"\n"),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn prices_and_a_cost_limit_are_read_per_million_tokens_and_in_units() {
    let config = check(
        "[model]\nprice = { input = 0.27, output = 1.1, cached_input = 0.07 }\n\n[limits]\ncost_limit = 2.5\n\n[[subagents]]\nprovider = \"spawn\"\nagent_options = { model = \"small\", price = { input = 1, output = 2 } }\n",
    )
    .unwrap();
    let price = config.model.price.unwrap();
    assert_eq!(
        (price.input(), price.output(), price.cached_input()),
        (0.27, 1.1, Some(0.07))
    );
    let child = config.subagents[0].price.unwrap();
    assert_eq!((child.input(), child.output(), child.cached_input()), (1.0, 2.0, None));
    let none = LimitsConfig::default();
    assert_eq!(
        config.limits.resolve(&none).cost_limit().map(CostLimit::nanos),
        Some(2_500_000_000)
    );
    let flags = LimitsConfig {
        cost_limit: CostLimit::from_amount(0.5).ok(),
        ..LimitsConfig::default()
    };
    assert_eq!(
        config.limits.resolve(&flags).cost_limit().map(CostLimit::nanos),
        Some(500_000_000),
        "the flag wins"
    );
    assert_eq!(check("").unwrap().limits.resolve(&none).cost_limit(), None);
}

#[test]
fn prices_and_cost_limits_that_are_no_amount_are_refused_at_their_key() {
    let cases: &[(&str, &str)] = &[
        (
            "a negative input price",
            "[model]\nprice = { input = -0.5, output = 1 }\n",
        ),
        (
            "an output price that is not a number",
            "[model]\nprice = { input = 1, output = nan }\n",
        ),
        (
            "an infinite cached price",
            "[model]\nprice = { input = 1, output = 1, cached_input = inf }\n",
        ),
        (
            "a price that is text",
            "[model]\nprice = { input = \"cheap\", output = 1 }\n",
        ),
        ("a price without its output", "[model]\nprice = { input = 1 }\n"),
        (
            "an unknown price key",
            "[model]\nprice = { input = 1, output = 1, cache = 1 }\n",
        ),
        (
            "a negative child price",
            "[[subagents]]\nprovider = \"spawn\"\nagent_options = { price = { input = 1, output = -1 } }\n",
        ),
        (
            "a price for an ACP child",
            "[[subagents]]\nprovider = \"acp\"\ncommand = \"dsh\"\nagent_options = { price = { input = 1, output = 1 } }\n",
        ),
        ("a zero cost limit", "[limits]\ncost_limit = 0\n"),
        ("a negative cost limit", "[limits]\ncost_limit = -3\n"),
        ("a cost limit that is not a number", "[limits]\ncost_limit = nan\n"),
        ("a cost limit that is text", "[limits]\ncost_limit = \"5 dollars\"\n"),
    ];
    insta::assert_snapshot!(refusals(cases));
}

#[test]
fn record_names_a_cassette_beside_the_file_and_refuses_what_is_not_one() {
    let config = check("[record]\nfile = \"runs/last.jsonl\"\n").unwrap();
    assert_eq!(config.record, Some(PathBuf::from("/work/project/runs/last.jsonl")));
    assert_eq!(check("").unwrap().record, None);
    let empty = error("[record]\nfile = \" \"\n");
    assert!(
        empty.contains("record.file") && empty.contains("must not be empty"),
        "{empty}"
    );
    let directory = error("[record]\nfile = \"runs/\"\n");
    assert!(
        directory.contains("record.file") && directory.contains("is a directory"),
        "{directory}"
    );
    let unknown = error("[record]\nfile = \"a.jsonl\"\nreplay = \"b.jsonl\"\n");
    assert!(unknown.contains("replay"), "{unknown}");
    let missing = error("[record]\n");
    assert!(missing.contains("file"), "{missing}");
}
