//! `session/prompt`: one turn of a session, streamed to its client.
//!
//! The turn runs the session agent on the prompt's text, sends every event
//! of the run as `session/update`s as it happens (those ready together in
//! one burst, [`stream::coalesce`]), then the rest, then answers with the
//! stop reason. It owns the session's [`Turn`] and its stream for as long as
//! it runs, and lets both go before it answers: the client may send its next
//! prompt as soon as it reads the answer. Every other way out (an update
//! that cannot be sent, a failed answer, the task dropped with its
//! connection, a panic) drops them too, so a session is never left marked
//! running.

use acp::v1::schema::{ContentBlock, PromptResponse, SessionId, SessionNotification, SessionUpdate, StopReason};
use agent_client_protocol as acp;
use dsh_agent::AgentStop;
use dsh_subagent_api::SpanOrigin;
use dsh_tools::AgentId;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::session::{NextTurn, Turn};
use super::stream::{self, Event, Streams};
use super::updates;
use crate::wording;

/// The client of a prompt, as its turn sees it: where the updates go, and
/// who is answered at the end.
pub(super) trait PromptClient {
    /// Sends one `session/update`: of the prompt's session, or of the
    /// session `session` names (an announced child's, or the parent's of a
    /// child's `subagent_update`).
    fn update(&self, session: Option<&str>, update: SessionUpdate) -> Result<(), acp::Error>;

    /// Answers the prompt.
    fn answer(self, answer: Result<PromptResponse, acp::Error>) -> Result<(), acp::Error>;
}

/// The ACP connection of a `session/prompt` request.
pub(super) struct Connection {
    pub(super) cx: acp::v1::ConnectionTo<acp::Client>,
    pub(super) session_id: SessionId,
    pub(super) responder: acp::v1::Responder<PromptResponse>,
}

impl PromptClient for Connection {
    fn update(&self, session: Option<&str>, update: SessionUpdate) -> Result<(), acp::Error> {
        let session_id = session.map_or_else(|| self.session_id.clone(), |id| SessionId::new(id.to_owned()));
        self.cx.send_notification(SessionNotification::new(session_id, update))
    }

    fn answer(self, answer: Result<PromptResponse, acp::Error>) -> Result<(), acp::Error> {
        self.responder.respond_with_result(answer)
    }
}

/// How an agent run answers `session/prompt`.
pub(super) fn stop_reason(stop: &AgentStop) -> Result<StopReason, acp::Error> {
    match stop {
        AgentStop::Completed => Ok(StopReason::EndTurn),
        AgentStop::MaxTokens | AgentStop::TokenBudget(_) | AgentStop::CostBudget(_) => Ok(StopReason::MaxTokens),
        AgentStop::MaxTurns(_) => Ok(StopReason::MaxTurnRequests),
        AgentStop::Refusal => Ok(StopReason::Refusal),
        // An interrupted turn (dsh stopping) is cancelled for the client;
        // a later `session/load` goes on with it.
        AgentStop::Cancelled | AgentStop::Interrupted => Ok(StopReason::Cancelled),
        AgentStop::Error(message) => Err(acp::Error::new(
            acp::ErrorCode::INTERNAL_ERROR,
            wording::agent_run_failed(message),
        )),
        // A cut answer is no answer: the turn fails with the stop's line.
        AgentStop::AnswerCut(_) => Err(acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, stop.to_string())),
        // ACP has no stop reason for it: the turn fails with the stop's own
        // line, and its data says which stop it was.
        AgentStop::ContextWindow(context) => Err(acp::Error::new(acp::ErrorCode::INTERNAL_ERROR, stop.to_string())
            .data(serde_json::json!({
                "stopReason": dsh_agent::wording::CONTEXT_WINDOW_STOP,
                "contextWindow": context.window,
                "requestTokens": context.request,
            }))),
    }
}

/// The prompt's text: its text blocks, one per line.
pub(super) fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The session agent's events streamed to a prompt's channel, until
/// finished or dropped.
struct Streaming<'a> {
    streams: &'a Streams,
    agent: AgentId,
    open: bool,
}

impl<'a> Streaming<'a> {
    fn open(streams: &'a Streams, agent: &AgentId, events: UnboundedSender<Event>, subagents: bool) -> Self {
        streams.open(agent, events, subagents);
        Self {
            streams,
            agent: agent.clone(),
            open: true,
        }
    }

    /// Stops the stream; the terminal states of its announced children
    /// still running, to send before the answer.
    fn finish(mut self, cancelled: bool) -> Vec<Event> {
        self.open = false;
        self.streams.close(&self.agent, cancelled)
    }
}

impl Drop for Streaming<'_> {
    fn drop(&mut self) {
        if self.open {
            // A prompt that ends another way sends nothing more.
            self.streams.close(&self.agent, true);
        }
    }
}

/// The events already waiting on a prompt's channel, without waiting for more.
fn waiting(received: &mut UnboundedReceiver<Event>) -> impl Iterator<Item = Event> + '_ {
    std::iter::from_fn(|| received.try_recv().ok())
}

/// Sends the updates of `events` (coalesced), stopping at the first that
/// cannot be sent.
fn forward(client: &impl PromptClient, events: Vec<Event>) -> Result<(), acp::Error> {
    for (session, update) in stream::coalesce(events).into_iter().flat_map(updates::routed) {
        client.update(session.as_deref(), update)?;
    }
    Ok(())
}

/// Runs one turn: the session agent on `text`, its events streamed to
/// `client`, then the answer. With `subagents` (the client advertised
/// them) its children are announced as subagent sessions, and every one
/// of them still running when the run returns is closed before the answer
/// (`cancelled` when the turn was).
///
/// An update that cannot be sent means the client can no longer follow the
/// run: the turn is cancelled, the run ends as a cancelled run does (its
/// transcript records it), and that error is returned unanswered (the SDK
/// answers a request dropped unanswered, and ends the connection on a
/// task's error, as for any other write that fails).
pub(super) async fn run(
    turn: Turn,
    text: String,
    origin: SpanOrigin,
    streams: &Streams,
    subagents: bool,
    client: impl PromptClient,
) -> Result<(), acp::Error> {
    let (agent, cancel) = (turn.agent().clone(), turn.cancel().clone());
    let (events, mut received) = unbounded_channel();
    let streaming = Streaming::open(streams, agent.id(), events, subagents);
    let next = turn.next();
    let run = async {
        match next {
            NextTurn::New => agent.run_from(text, &cancel, &origin).await,
            NextTurn::Resume => agent.resume_from_origin(Some(text), &cancel, &origin).await,
        }
    };
    tokio::pin!(run);
    // Every event is sent before the run returns: forward them as they come
    // (those ready together at once), then the rest, then the answer.
    let mut sent = Ok(());
    let outcome = loop {
        tokio::select! {
            outcome = &mut run => break outcome,
            Some(event) = received.recv() => {
                let ready = std::iter::once(event).chain(waiting(&mut received)).collect();
                if sent.is_ok() {
                    sent = forward(&client, ready);
                    if sent.is_err() {
                        cancel.cancel();
                    }
                }
            }
        }
    };
    let closing = streaming.finish(outcome.stop == AgentStop::Cancelled);
    let rest = waiting(&mut received).chain(closing).collect();
    let sent = sent.and_then(|()| forward(&client, rest));
    drop(turn);
    sent?;
    client.answer(stop_reason(&outcome.stop).map(PromptResponse::new))
}

#[cfg(test)]
mod tests;
