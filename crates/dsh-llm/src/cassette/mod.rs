//! Record a run's model traffic into a cassette, and replay it offline.
//!
//! A cassette is a JSON Lines file (docs/cassettes.md): a header with a
//! version, each exchange as a block of lines (the request as sent; the
//! answer as it came, with its timing and its ending: whole, cut, failed
//! or dropped), and a closing line. It is written as `FILE.recording` and
//! renamed to `FILE` once closed, so a cassette is whole or refused.
//!
//! Two levels:
//! - **HTTP**, under the OpenAI client ([`OpenAiChatModel::recorded`](crate::OpenAiChatModel::recorded)):
//!   status, the headers that matter and the streamed bytes, replayed
//!   through the client's own code;
//! - **events**, over any [`ChatModel`](crate::ChatModel) ([`RecordingModel`]).
//!
//! Replay ([`ReplayModel`]) matches each request by a canonical key of what
//! the model is asked, with generated ids, temporary paths and timestamps
//! normalised, through an index: parallel children match in any order, a
//! request asked twice gets its answers in recorded order, and a request
//! with no recorded answer is an error naming where the closest one
//! differs — never an answer from something else.
//!
//! ```
//! use std::sync::Arc;
//! use dsh_llm::cassette::{Cassette, Recorder, RecordingModel, ReplayModel, Timing};
//! use dsh_llm::{CancellationToken, ChatRequest, Message, ScriptedModel, complete};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = std::env::temp_dir().join(format!("dsh-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let file = dir.join("run.jsonl");
//! # let _ = std::fs::remove_file(&file);
//! let ask = || ChatRequest::new(vec![Message::user("hello")]);
//! let cancel = CancellationToken::new();
//!
//! let recorder = Recorder::create(&file)?;
//! let live = RecordingModel::new(ScriptedModel::builtin(), &recorder)?;
//! let first = complete(&live, ask(), &cancel).await?;
//! recorder.finish()?;
//!
//! let replay = ReplayModel::new(Cassette::load(&file)?, Timing::Fast);
//! assert_eq!(complete(&replay, ask(), &cancel).await?, first);
//! // Asked once more than recorded: an error, not a guess.
//! assert!(complete(&replay, ask(), &cancel).await.is_err());
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

mod capture;
#[expect(
    clippy::module_inception,
    reason = "the central type of the cassette module lives in the file named after it"
)]
mod cassette;
mod contents;
mod copy_into_kept;
mod divergence;
mod error;
mod error_record;
mod exchange;
mod exchange_log;
mod file_names;
mod format;
mod http;
mod key;
mod queue;
mod reader;
mod recorder;
mod recording_model;
mod replay_model;
mod report;
mod scrub;
mod spot;
mod summary;
mod tape;
mod timing;
mod writer;

pub use cassette::Cassette;
pub use divergence::Divergence;
pub use error::CassetteError;
pub use file_names::RECORDING_SUFFIX;
pub use format::{Level, VERSION};
pub use recorder::Recorder;
pub use recording_model::RecordingModel;
pub use replay_model::ReplayModel;
pub use summary::{AgentSummary, Summary};
pub use timing::Timing;
