//! Command-line arguments.
//!
//! The `--help` texts stay here, as doc comments and attributes, because
//! clap reads them from there; every other text `dsh` prints is in
//! [`crate::wording`].

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use dsh_subagent_api::DurationSetting;

/// dsh: an agent that delegates to subagents.
#[derive(Debug, Parser)]
#[command(name = "dsh", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a task with a parent agent that can delegate to subagents.
    ///
    /// With no model configured, the embedded scripted model runs offline.
    /// Set DSH_BASE_URL and DSH_API_KEY (and optionally DSH_MODEL) to use an
    /// OpenAI-compatible endpoint; DeepSeek is the default base URL.
    Run(RunArgs),
    /// Print an agent's transcript readably.
    Transcript(TranscriptArgs),
    /// Show the delegation tree of an agent: who started whom, how long each
    /// waited and ran, how it ended, its tokens and its result's size.
    ///
    /// Read from the transcripts in the data directory: the tree of the most
    /// recent top-level agent there, or of AGENT_ID. As text, as versioned
    /// JSON (--json), or as one self-contained page with a timeline (--html).
    Tree(TreeArgs),
    /// Serve the dsh agent as an Agent Client Protocol (ACP) agent on stdio.
    ///
    /// Each ACP session is a parent agent with the same subagent tools and
    /// model choice as `dsh run`. Stdout carries only the protocol; logs and
    /// progress go to stderr.
    Acp(AcpArgs),
    /// Serve the dsh delegation tools as a Model Context Protocol (MCP)
    /// server, on stdio or (with --listen) over Streamable HTTP.
    ///
    /// The tools are `subagent` (fresh in-process children, foreground or
    /// background), `send_message`, `task_output`, `task_kill` and
    /// `task_list`, with the same model choice as `dsh run`. Each MCP session
    /// is a calling agent: it owns its children and background tasks, and
    /// ending the session (closing stdin; over HTTP a DELETE, an idle
    /// timeout, or stopping dsh) cancels and releases them all. On stdio,
    /// stdout carries only the protocol; logs and progress go to stderr.
    Mcp(McpArgs),
    /// Work with the configuration file (dsh.toml).
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Look at recordings of model traffic (made with --record).
    #[command(subcommand)]
    Cassette(CassetteCommand),
    /// Check an agent against what dsh relies on when it runs one as a child.
    #[command(subcommand)]
    Check(CheckCommand),
}

#[derive(Debug, Subcommand)]
pub(crate) enum CheckCommand {
    /// Run an ACP agent as dsh runs one as a child (its own process group,
    /// a scrubbed environment, the teardown ladder) and check initialize,
    /// authentication where offered, session/new, a prompt answered, a
    /// cancel honoured within 5 s, its errors, and its whole process group
    /// gone after stdin closes and after the ladder.
    ///
    /// Prints a table of requirements (MANDATORY, CAPABILITY, ADVISORY) and
    /// a verdict, saves the report in the data directory for `dsh config
    /// check`, and exits 1 when a MANDATORY or CAPABILITY requirement fails.
    Acp(CheckAcpArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckAcpArgs {
    /// The agent's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
    /// Print the report as JSON, in its versioned shape.
    #[arg(long)]
    pub(crate) json: bool,
    /// How long each step (initialize, session/new, a prompt) may take,
    /// such as "10s" or "2min".
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub(crate) timeout: DurationSetting,
    /// Pass this variable of yours on to the agent (repeatable), as
    /// `pass_env` does in dsh.toml; it gets no other but PATH, HOME and the
    /// like, as an ACP child of dsh.
    #[arg(long = "pass-env", value_name = "VAR")]
    pub(crate) pass_env: Vec<String>,
    /// Where the report is saved (under checks/), for `dsh config check`.
    #[arg(long, default_value = ".dsh")]
    pub(crate) data_dir: PathBuf,
}

#[derive(Debug, Subcommand)]
pub(crate) enum CassetteCommand {
    /// Summarise a cassette: its agents, requests, tokens, errors and cut streams.
    Show {
        /// The cassette.
        file: PathBuf,
    },
    /// Show where two recordings of one task first part: which agent,
    /// which request, which field (exit 1 when they differ).
    Diff {
        /// The first cassette.
        first: PathBuf,
        /// The second cassette.
        second: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Check the configuration file and print the tool catalog the parent's
    /// model will see (as `dsh run` mounts it).
    Check(ConfigCheckArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ConfigCheckArgs {
    /// The configuration file (default: dsh.toml in the working directory).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Check each configured ACP child live (`dsh check acp`), instead of
    /// naming the verdict of its last saved check; exit 1 when one fails.
    #[arg(long)]
    pub(crate) probe: bool,
    /// Where `dsh check acp` saved its reports.
    #[arg(long, default_value = ".dsh")]
    pub(crate) data_dir: PathBuf,
}

/// How the parent agent's model is chosen, and its limits (shared by `run` and `acp`).
#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// The configuration file (default: dsh.toml in the working directory, if any).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// The base URL of an OpenAI-compatible endpoint (default: $DSH_BASE_URL).
    #[arg(long)]
    pub(crate) base_url: Option<String>,
    /// The model to use (default: $DSH_MODEL, or the endpoint's default).
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Use a scripted model from this JSON file instead of an endpoint.
    #[arg(long, conflicts_with = "base_url")]
    pub(crate) script: Option<PathBuf>,
    /// The most model calls any one agent may make per run.
    #[arg(long, default_value_t = dsh_agent::DEFAULT_MAX_TURNS)]
    pub(crate) max_turns: u32,
    /// Give the agents (parent and children) the tools of an MCP server, as
    /// `mcp__<name>__<tool>`: a command line run on stdio, or an http:// or
    /// https:// URL reached over Streamable HTTP. The command line is split
    /// like a shell's words (quotes and backslashes; no variables, globs or
    /// pipes) into the program and its arguments: the same launch as a
    /// `[[mcp_servers]]` entry's `command` and `args`, in dsh's whole
    /// environment and working directory. For variables set, a `cwd`,
    /// headers or a bearer token, use `[[mcp_servers]]` in dsh.toml.
    /// Repeatable.
    #[arg(long = "mcp-server", value_name = "NAME=COMMAND LINE|URL", value_parser = parse_mcp_server)]
    pub(crate) mcp_servers: Vec<dsh_mcp::McpServerSpec>,
    /// The most children one top-level agent's delegation tree runs at
    /// once; further calls wait in a queue, first come first served
    /// (default: `[limits].max_concurrent` in dsh.toml, else 8).
    #[arg(long, value_name = "N")]
    pub(crate) max_concurrent: Option<dsh_subagent_api::ChildCount>,
    /// The most calls of one tree that may wait for a slot; one more is
    /// refused at once (default: `[limits].max_queued`, else 64).
    #[arg(long, value_name = "N")]
    pub(crate) max_queued: Option<dsh_subagent_api::QueueLimit>,
    /// The most children one tree may start over its life; one more is
    /// refused (default: `[limits].max_children`, else 200).
    #[arg(long, value_name = "N")]
    pub(crate) max_children: Option<dsh_subagent_api::ChildCount>,
    /// The input plus output tokens one tree may spend, its top-level
    /// agent's own model calls included (default: `[limits].token_limit`,
    /// else none). Refused with an ACP tool: its children report no usage.
    #[arg(long, value_name = "TOKENS")]
    pub(crate) token_limit: Option<dsh_subagent_api::TokenLimit>,
    /// The money one tree may spend, in the unit its models' prices are
    /// given in (`price` in dsh.toml), its top-level agent's own model calls
    /// and estimated usage included (default: `[limits].cost_limit`, else
    /// none). Every model of the tree needs a price; refused with an ACP
    /// tool: its children report no usage.
    #[arg(long, value_name = "AMOUNT")]
    pub(crate) cost_limit: Option<dsh_subagent_api::CostLimit>,
    /// The parent model's context window, in tokens: every request is
    /// fitted into it, less a reserve for the answer (default:
    /// `[model].context_window` in dsh.toml, else $DSH_CONTEXT_WINDOW, else
    /// learned from the server's first refusal that names it).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) context_window: Option<dsh_agent::ContextWindow>,
    /// The most of a delegation output the model reads, in tokens of 4
    /// bytes (at least 256): a longer `subagent` result or `task_output`
    /// reads as its head and tail, and task_output pages through the rest
    /// (default: `[limits].result_limit`, else 8000; a `[[subagents]]`
    /// entry's own `result_limit` wins for its tool).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) result_limit: Option<dsh_tools::ResultLimit>,
    /// Record every model exchange of the run (the parent and its
    /// in-process children) into this cassette: at the HTTP level with an
    /// endpoint, else at the events level. Written as FILE.recording and
    /// renamed to FILE when dsh ends (docs/cassettes.md).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub(crate) record: Option<PathBuf>,
    /// Answer every model request from this cassette, with no network; a
    /// request it does not hold is an error naming where it differs.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["script", "base_url"])]
    pub(crate) replay: Option<PathBuf>,
    /// With --replay: keep the recorded pacing (default: as fast as possible).
    #[arg(long, requires = "replay")]
    pub(crate) replay_timing: bool,
}

#[cfg(test)]
impl AgentArgs {
    /// The arguments of `dsh run` with no flag but `--max-turns 4`: what a
    /// test starts from, setting only the fields it is about.
    pub(crate) fn plain() -> Self {
        Self {
            config: None,
            base_url: None,
            model: None,
            script: None,
            max_turns: 4,
            mcp_servers: Vec::new(),
            max_concurrent: None,
            max_queued: None,
            max_children: None,
            token_limit: None,
            cost_limit: None,
            context_window: None,
            result_limit: None,
            record: None,
            replay: None,
            replay_timing: false,
        }
    }
}

impl AgentArgs {
    /// The limits the flags set, to lay over the file's ([`crate::config::LimitsConfig::resolve`]).
    pub(crate) fn limits(&self) -> crate::config::LimitsConfig {
        crate::config::LimitsConfig {
            max_concurrent: self.max_concurrent,
            max_queued: self.max_queued,
            max_children: self.max_children,
            token_limit: self.token_limit,
            cost_limit: self.cost_limit,
            result_limit: self.result_limit,
        }
    }
}

fn parse_mcp_server(text: &str) -> Result<dsh_mcp::McpServerSpec, String> {
    dsh_mcp::McpServerSpec::parse(text).map_err(|error| error.to_string())
}

#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Where transcripts (and so continuable background children) are kept.
    #[arg(long, default_value = ".dsh")]
    pub(crate) data_dir: PathBuf,
    /// Keep a session's transcripts when it ends (by default they go with
    /// it: nothing can continue its children any more). The `[data]` bounds
    /// of dsh.toml still apply.
    #[arg(long)]
    pub(crate) keep_transcripts: bool,
    /// Hide the model banner and the live progress of children on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// How long a running tool call that asked for progress may go without
    /// a progress notification before a heartbeat is sent, such as "5s"
    /// or "500ms".
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub(crate) progress_interval: DurationSetting,
    /// Serve over Streamable HTTP at http://ADDR:PORT/mcp instead of stdio.
    /// A bare PORT listens on 127.0.0.1; an address beyond loopback needs
    /// --bearer-token-env.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_listen)]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// The environment variable holding the token every HTTP request must
    /// carry as `Authorization: Bearer <token>`.
    #[arg(long, value_name = "VAR", requires = "listen")]
    pub(crate) bearer_token_env: Option<String>,
    /// The most MCP sessions served at once over HTTP.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub(crate) max_sessions: u16,
    /// A browser origin accepted besides loopback ones, such as
    /// `https://app.example.com:443` (`:*` for any port). Repeatable.
    #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "listen")]
    pub(crate) allowed_origins: Vec<String>,
    /// A Host value accepted, such as mcp.example.com (on loopback,
    /// localhost and the loopback addresses always are). Repeatable.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "listen")]
    pub(crate) allowed_hosts: Vec<String>,
    /// How long an HTTP session may stay idle before it ends, such as
    /// "30min" or "90s".
    #[arg(long, value_name = "DURATION", default_value = "30min")]
    pub(crate) session_idle_timeout: DurationSetting,
    #[command(flatten)]
    pub(crate) agent: AgentArgs,
}

/// `PORT` (on 127.0.0.1), `localhost:PORT` or `ADDR:PORT`.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr};
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    if let Some(port) = text
        .strip_prefix("localhost:")
        .and_then(|port| port.parse::<u16>().ok())
    {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    text.parse().map_err(|_| crate::wording::bad_listen_address(text))
}

#[derive(Debug, clap::Args)]
pub(crate) struct AcpArgs {
    /// Where transcripts are kept (default: none are written).
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Hide the model banner and the live progress of children on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    #[command(flatten)]
    pub(crate) agent: AgentArgs,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("task_input").args(["task", "task_file"])))]
pub(crate) struct RunArgs {
    /// The task for the parent agent (with --resume: a message that joins
    /// the resumed turn, optional); `-` reads it from standard input. At
    /// most 4 MiB of UTF-8 text.
    #[arg(value_name = "TASK")]
    pub(crate) task: Option<String>,
    /// Read the task from this file instead (UTF-8, at most 4 MiB; its
    /// trailing line endings are dropped, as from standard input).
    #[arg(long, value_name = "FILE")]
    pub(crate) task_file: Option<PathBuf>,
    /// Continue an earlier parent (its id, as printed by `dsh run`; without
    /// one, the most recent interrupted run in the data directory) and its
    /// whole delegation tree: an interrupted turn goes on where it stopped,
    /// children that had finished deliver their results, interrupted ones
    /// resume. Its history, system prompt and model; today's tools.
    #[arg(long, value_name = "AGENT_ID", num_args = 0..=1, default_missing_value = "")]
    pub(crate) resume: Option<String>,
    /// When the parent answers while children it started in the background
    /// still run, stop them at once, resumably (`dsh run --resume` goes on
    /// with them), instead of waiting for them (default: `[run] wait` in
    /// dsh.toml, else wait; a resume waits unless this flag is given).
    #[arg(long)]
    pub(crate) no_wait: bool,
    /// Where transcripts are kept.
    #[arg(long, default_value = ".dsh")]
    pub(crate) data_dir: PathBuf,
    /// Hide the live progress of children.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// On a terminal, print one line per child start and end (as through a
    /// pipe) instead of redrawing the tree in place.
    #[arg(long)]
    pub(crate) plain: bool,
    #[command(flatten)]
    pub(crate) agent: AgentArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct TranscriptArgs {
    /// The agent's id (as printed at the end of `dsh run`).
    pub(crate) agent_id: String,
    /// Where transcripts are kept.
    #[arg(long, default_value = ".dsh")]
    pub(crate) data_dir: PathBuf,
}

#[derive(Debug, clap::Args)]
pub(crate) struct TreeArgs {
    /// The agent whose tree to show (default: the most recent top-level agent).
    pub(crate) agent_id: Option<String>,
    /// Where transcripts are kept.
    #[arg(long, default_value = ".dsh")]
    pub(crate) data_dir: PathBuf,
    /// Print the tree as JSON, in the versioned shape of docs/observability.md.
    #[arg(long)]
    pub(crate) json: bool,
    /// Write the tree and its timeline as one self-contained HTML page
    /// (no network; it opens from disk).
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    /// Every duration flag reads its value as a duration does in dsh.toml
    /// (`"90s"`, `"500ms"`), and refuses a plain number naming the flag, in
    /// the duration's one wording.
    #[test]
    fn every_duration_flag_is_a_duration_setting_refused_at_its_flag() {
        let cases: [&[&str]; 3] = [
            &["dsh", "check", "acp", "--timeout", "10", "--", "agent"],
            &["dsh", "mcp", "--progress-interval", "5000"],
            &["dsh", "mcp", "--session-idle-timeout", "0s"],
        ];
        let mut rendered = Vec::new();
        for argv in cases {
            let flag = argv
                .iter()
                .find(|arg| arg.starts_with("--") && arg.len() > 2)
                .unwrap_or(&"");
            let refused = Cli::try_parse_from(argv).unwrap_err().to_string();
            let written = argv[argv.iter().position(|arg| arg == flag).unwrap() + 1];
            let wording = written.parse::<super::DurationSetting>().unwrap_err().to_string();
            assert!(
                refused.contains(&format!("for '{flag} <DURATION>': {wording}\n")),
                "{refused}"
            );
            rendered.push(refused.lines().next().unwrap_or_default().to_owned());
        }
        insta::assert_snapshot!(rendered.join("\n"));
        let accepted = Cli::try_parse_from([
            "dsh",
            "mcp",
            "--progress-interval",
            "500ms",
            "--session-idle-timeout",
            "10min",
        ]);
        assert!(accepted.is_ok(), "{accepted:?}");
    }
}
