//! One run of the agent loop, as named steps: begin the turn, then per
//! step check the limits, send the request (fitted to the context window),
//! take the answer and run its tool calls; then end the turn.

use dsh_llm::{ChatEvent, ChatRequest, ChatResponse, LlmError, Message, ToolCall, Usage, collect_response_with};
use dsh_subagent_api::SpanOrigin;
use dsh_tools::{CancellationToken, ToolExecution, ToolResult};
use tracing::Instrument;

use super::fit::{Round, Sent, Turn};
use super::{Agent, Phase, Runs};
use crate::context::{Anchor, Estimate};
use crate::trace;
use crate::transcript::{TranscriptEntry, TurnTimes, now_ms};
use crate::usage::{add_reported, completed, since};
use crate::{AgentStop, Priced, RunOutcome};

/// A run in progress: its turn, and what it counts.
struct Run {
    /// The run's messages, and the round of results its next request carries.
    turn: Turn,
    /// Model calls made.
    steps: u32,
    /// Tokens its own model calls reported.
    usage: Option<Usage>,
    /// What its own model calls cost, where their model's price is known.
    cost: Priced,
    /// The agent's children's tokens when the run began.
    children_before: Option<Usage>,
    /// When it began and how long its start waited; when each model call ended.
    times: TurnTimes,
}

/// What a run does after the model's answer.
enum Next {
    /// It stops.
    Stop(AgentStop),
    /// It asks the model again: a message was steered in while it answered.
    AskAgain,
    /// It runs these tool calls, then sends their results.
    CallTools(Vec<ToolCall>),
}

impl Agent {
    /// Runs one user prompt to a final answer, a limit, or cancellation.
    ///
    /// Cancellation is honoured at every await: the model stream is dropped,
    /// running tool calls receive the cancellation, and the run ends
    /// [`AgentStop::Cancelled`] with every tool call answered.
    ///
    /// With a [`NoticeSource`](crate::NoticeSource) on the runtime, notices
    /// pending for this agent join the conversation as a user message: those
    /// from between runs just before the prompt, later ones before the model
    /// call that follows their arrival. Messages [steered](Agent::steer) into
    /// the run join it the same way, after the notices.
    ///
    /// The run is traced as an `invoke_agent <label>` span under the current
    /// span; [`Agent::run_from`] places it elsewhere.
    pub async fn run(&self, prompt: impl Into<String>, cancel: &CancellationToken) -> RunOutcome {
        self.run_from(prompt, cancel, &SpanOrigin::current()).await
    }

    /// [`Agent::run`], with its `invoke_agent` span placed by `origin`: under
    /// the span of the call that waits for it, or in a new trace that follows
    /// from the call that started it.
    pub async fn run_from(
        &self,
        prompt: impl Into<String>,
        cancel: &CancellationToken,
        origin: &SpanOrigin,
    ) -> RunOutcome {
        let prompt = prompt.into();
        let span = origin
            .place(|parent| trace::invoke_agent(parent, &self.inner.info, self.inner.runtime.model().provider_name()));
        trace::record_content(&span, "gen_ai.input.messages", "user", &prompt);
        let outcome = self.run_traced(prompt, cancel).instrument(span.clone()).await;
        if let Some(usage) = outcome.usage {
            trace::record_usage(&span, usage);
        }
        if let Some(cost) = outcome.cost.known() {
            trace::record_cost(&span, cost);
        }
        trace::record_stop(&span, &outcome.stop);
        trace::record_content(&span, "gen_ai.output.messages", "assistant", &outcome.text);
        outcome
    }

    /// One run, under the agent's run lock: steps until a stop, then the
    /// turn's end.
    async fn run_traced(&self, prompt: String, cancel: &CancellationToken) -> RunOutcome {
        let _one_run_at_a_time = self.inner.run_lock.lock().await;
        let mut run = self.begin(prompt);
        let stop = loop {
            if let Some(stop) = self.limit_reached(run.steps, cancel) {
                break stop;
            }
            run.steps += 1;
            self.take_notices(&mut run.turn);
            self.take_steered(&mut run.turn);
            let (response, spent, sent) = match self.send(&mut run.turn, cancel).await {
                Ok(answered) => answered,
                Err(stop) => break stop,
            };
            match self.answered(&mut run, response, spent, sent) {
                Next::Stop(stop) => break stop,
                Next::AskAgain => {}
                Next::CallTools(calls) => self.call_tools(calls, &mut run.turn, cancel).await,
            }
        };
        self.end(run, stop)
    }

    /// Opens the turn with the notices that arrived between runs, then the
    /// prompt.
    fn begin(&self, prompt: String) -> Run {
        let times = TurnTimes {
            queued_ms: self.lock().queued_ms.take(),
            started_at_ms: now_ms(),
            ..TurnTimes::default()
        };
        self.open_turn();
        let mut turn = Turn::default();
        self.take_notices(&mut turn);
        turn.messages.push(Message::user(prompt));
        self.record_turn(&mut turn);
        Run {
            turn,
            steps: 0,
            usage: None,
            cost: Priced::Nothing,
            children_before: self.lock().usage.children,
            times,
        }
    }

    /// Why the run may take no further step after `steps`, if it may not:
    /// cancelled, out of turns, or out of tokens in its tree.
    fn limit_reached(&self, steps: u32, cancel: &CancellationToken) -> Option<AgentStop> {
        if cancel.is_cancelled() {
            return Some(AgentStop::Cancelled);
        }
        if steps >= self.inner.max_turns {
            return Some(AgentStop::MaxTurns(self.inner.max_turns));
        }
        if let Some(spent) = self.inner.lineage.spent_budget() {
            return Some(AgentStop::TokenBudget(spent.limit()));
        }
        let budget = self.inner.lineage.cost_budget().filter(|budget| budget.is_spent())?;
        Some(AgentStop::CostBudget(budget.limit()))
    }

    /// Sends the conversation so far plus `turn`, its round of results
    /// fitted to the context window and checked against it first. A request
    /// refused for its length is fitted again (to the window the refusal
    /// named, else the configured one, with what the refusal taught of the
    /// estimate) and sent once more, never more than that. The model's
    /// answer, what it spent ([`Agent::call_model`]) and what the request
    /// carried; or why the run stops.
    async fn send(
        &self,
        turn: &mut Turn,
        cancel: &CancellationToken,
    ) -> Result<(ChatResponse, Usage, Sent), AgentStop> {
        let mut refused = false;
        loop {
            // Fitted right before it is built: every message appended since
            // the round's results arrived is counted, on the server's count
            // where its streams give none.
            self.count_when_it_matters(turn, cancel).await;
            self.fit_pending(turn);
            let request = self.request(&turn.messages);
            let estimate = self.estimate(&request);
            if let Some(room) = self.room(&request, estimate) {
                room.check(estimate).map_err(AgentStop::ContextWindow)?;
            }
            let sent = Sent {
                anchor: Anchor::of(&request),
                estimate,
            };
            let max_tokens = request.max_tokens;
            match self.call_model(request, estimate, cancel).await {
                Ok((response, spent)) => return Ok((response, spent, sent)),
                Err(LlmError::Cancelled) => return Err(AgentStop::Cancelled),
                Err(LlmError::ContextLength { refusal, .. }) => {
                    self.after_refusal(&refusal, max_tokens, estimate, refused)
                        .map_err(AgentStop::ContextWindow)?;
                    refused = true;
                }
                Err(error @ LlmError::StreamEnded { .. }) => return Err(cut_off(error, turn)),
                Err(error) => return Err(AgentStop::Error(error.to_string())),
            }
        }
    }

    /// The model took the request `sent`: the results it carried are final,
    /// what it `spent` is counted (an estimate where the server reported
    /// nothing) and its answer recorded. Then what the answer asks for next.
    fn answered(&self, run: &mut Run, response: ChatResponse, spent: Usage, sent: Sent) -> Next {
        run.times.calls_at_ms.push(now_ms());
        run.times.add_queued(response.queued);
        run.turn.round = None;
        self.record_turn(&mut run.turn);
        self.inner.lineage.spend(spent.prompt_tokens + spent.completion_tokens);
        let cost = Priced::of(&spent, self.inner.runtime.price(&self.inner.info.model));
        if let Some(cost) = cost.known() {
            self.inner.lineage.spend_cost(cost.nanos(), cost.is_estimated());
        }
        run.usage = add_reported(run.usage, Some(spent));
        run.cost = run.cost + cost;
        {
            let mut state = self.lock();
            state.usage.own = add_reported(state.usage.own, Some(spent));
            state.usage.own_cost = state.usage.own_cost + cost;
        }
        // Only the server's own count anchors and teaches the estimate.
        let reported = response.usage.map_or(0, |usage| usage.prompt_tokens);
        self.inner
            .runtime
            .learned()
            .answered(&self.inner.info.model, reported > 0);
        self.counted(sent, reported);
        if let Some(observer) = self.inner.runtime.observer() {
            observer.step_finished(self.id(), run.steps, run.usage, run.cost);
        }
        // The answer's text moves into the turn: a long answer is not copied.
        let ChatResponse {
            text,
            tool_calls,
            finish_reason,
            ..
        } = response;
        run.turn
            .messages
            .push(Message::assistant_with_tool_calls(text, tool_calls.clone()));
        self.record_turn(&mut run.turn);
        match finish_reason {
            dsh_llm::FinishReason::Length => return Next::Stop(AgentStop::MaxTokens),
            dsh_llm::FinishReason::ContentFilter => return Next::Stop(AgentStop::Refusal),
            _ => {}
        }
        if !tool_calls.is_empty() {
            return Next::CallTools(tool_calls);
        }
        if self.close_unless_steered() {
            Next::Stop(AgentStop::Completed)
        } else {
            // A message joined while the model answered: answer it too.
            Next::AskAgain
        }
    }

    /// Runs the model's tool calls together and adds their results to the
    /// turn as the round the next request carries (fitted into the window
    /// right before it is sent).
    async fn call_tools(&self, calls: Vec<ToolCall>, turn: &mut Turn, cancel: &CancellationToken) {
        let results = futures::future::join_all(calls.iter().map(|call| self.call_tool(call, cancel))).await;
        let start = turn.messages.len();
        turn.messages.extend(
            calls
                .iter()
                .zip(&results)
                .map(|(call, result)| Message::tool(call.id.clone(), result.text.clone())),
        );
        turn.round = Some(Round { start, calls, results });
    }

    /// Ends the run on `stop`: closes the turn, keeps it in the history,
    /// records its end and flushes the transcript. Messages steered in and
    /// never read are recorded, so none is lost.
    fn end(&self, run: Run, stop: AgentStop) -> RunOutcome {
        let Run {
            mut turn,
            steps,
            usage,
            cost,
            children_before,
            mut times,
        } = run;
        let unread = {
            let mut state = self.lock();
            state.inbox.phase = Phase::Closed;
            std::mem::take(&mut state.inbox.pending)
        };
        turn.messages.extend(unread.into_iter().map(Message::user));
        turn.round = None;
        self.record_turn(&mut turn);
        if let AgentStop::ContextWindow(context) = &stop {
            trace::record_context_stop(context);
        }
        let mut turn = turn.messages;
        let answer = turn.iter_mut().rev().find_map(|message| match message {
            Message::Assistant { content, .. } if !content.is_empty() => Some(content),
            _ => None,
        });
        let text = match self.inner.runs {
            Runs::Many => {
                let text = answer.cloned().unwrap_or_default();
                self.lock().history.extend(turn);
                text
            }
            // Nothing reads the conversation after the one run: its answer moves.
            Runs::Once => answer.map(std::mem::take).unwrap_or_default(),
        };
        let children_usage = since(self.lock().usage.children, children_before);
        times.ended_at_ms = now_ms();
        times.answer_bytes = text.len() as u64;
        self.record(&TranscriptEntry::TurnEnd {
            stop: stop.to_string(),
            steps,
            usage,
            children_usage,
            cost: cost.known(),
            times: Some(times),
        });
        self.inner.runtime.keep_learned();
        if let Some(transcript) = &self.inner.transcript
            && let Err(error) = transcript.flush()
        {
            tracing::warn!(agent = %self.id(), "{}", crate::wording::log_transcript_flush_failed(&error));
        }
        RunOutcome {
            stop,
            text,
            steps,
            usage,
            cost,
        }
    }

    /// One model call, traced as a `chat` span, with its text streamed to
    /// the observer: the answer, and the usage it spends. Where the server
    /// reported no usage, or left a count out or at zero, that count is
    /// estimated: the prompt as the request's `estimate` in the server's
    /// tokens, the completion from the answer's text and tool calls at the
    /// same density; the usage is then marked estimated, on the span too.
    async fn call_model(
        &self,
        request: ChatRequest,
        estimate: Estimate,
        cancel: &CancellationToken,
    ) -> Result<(ChatResponse, Usage), LlmError> {
        let observer = self.inner.runtime.observer();
        let model = self.inner.runtime.model();
        let chat = trace::chat(
            request.model.as_deref().unwrap_or(model.model_name()),
            model.provider_name(),
            request.max_tokens,
        );
        let stream = chat.in_scope(|| model.stream_chat(request, cancel.clone()));
        let on_event = |event: &ChatEvent| {
            if let (Some(observer), ChatEvent::TextDelta(delta)) = (observer, event) {
                observer.text_delta(self.id(), delta);
            }
        };
        let result = collect_response_with(stream, cancel, on_event)
            .instrument(chat.clone())
            .await
            .map(|response| {
                let spent = self.spent(estimate, &response);
                (response, spent)
            });
        match &result {
            Ok((response, spent)) => {
                trace::record_response(&chat, response, *spent);
                if let Some(price) = self.inner.runtime.price(&self.inner.info.model) {
                    trace::record_cost(&chat, price.cost(spent));
                }
            }
            Err(error) => trace::record_llm_error(&chat, error),
        }
        result
    }

    /// The usage of the call that sent a request estimated as `estimate`
    /// and got `response` ([`completed`]).
    fn spent(&self, estimate: Estimate, response: &ChatResponse) -> Usage {
        completed(
            response.usage,
            || self.estimated_tokens(estimate),
            || {
                let calls: usize = response
                    .tool_calls
                    .iter()
                    .map(|call| call.name.len() + call.arguments.len())
                    .sum();
                let density = self.inner.runtime.learned().density(&self.inner.info.model, estimate);
                density.tokens_of((response.text.len() + calls) as u64)
            },
        )
    }

    /// Appends the messages steered into this run, each as a user message;
    /// recorded unless a round of results waits before them.
    fn take_steered(&self, turn: &mut Turn) {
        let steered = std::mem::take(&mut self.lock().inbox.pending);
        turn.messages.extend(steered.into_iter().map(Message::user));
        self.record_turn(turn);
    }

    /// On a final answer: closes the turn if no steered message is unread
    /// (`true`), under the lock [`Agent::steer`] takes.
    fn close_unless_steered(&self) -> bool {
        let mut state = self.lock();
        if !state.inbox.pending.is_empty() {
            return false;
        }
        state.inbox.phase = Phase::Closed;
        true
    }

    /// Appends the notices pending for this agent as one user message;
    /// recorded unless a round of results waits before it.
    fn take_notices(&self, turn: &mut Turn) {
        let Some(source) = self.inner.runtime.notices() else {
            return;
        };
        let notices = source.take(self.id());
        if notices.is_empty() {
            return;
        }
        turn.messages.push(Message::user(crate::wording::notices(&notices)));
        self.record_turn(turn);
    }

    /// The request of the conversation so far plus `turn`. Its `max_tokens`
    /// is the agent's cap, and never more than its token budgets have left
    /// ([`budget_cap`]), so that one answer cannot overshoot them.
    pub(super) fn request(&self, turn: &[Message]) -> ChatRequest {
        let history = self.history();
        let mut messages = Vec::with_capacity(history.len() + turn.len() + 1);
        if let Some(system) = &self.inner.system_prompt {
            messages.push(Message::system(system.clone()));
        }
        messages.extend(history);
        messages.extend(turn.iter().cloned());
        let left = self
            .inner
            .lineage
            .token_budget()
            .map(|budget| budget.remaining().max(1));
        let max_tokens = budget_cap(self.inner.max_tokens, left);
        ChatRequest {
            messages,
            tools: self.inner.tools.definitions(),
            model: self.inner.model_override.clone(),
            max_tokens,
            temperature: None,
        }
    }

    async fn call_tool(&self, call: &ToolCall, cancel: &CancellationToken) -> ToolResult {
        let observer = self.inner.runtime.observer();
        if let Some(observer) = observer {
            observer.tool_call_started(self.id(), call);
        }
        let exec = ToolExecution::new(cancel.child_token())
            .with_agent(self.agent_ref())
            .with_call_id(call.id.clone());
        let result = self.inner.tools.call(&call.name, &call.arguments, exec).await;
        if let Some(observer) = observer {
            observer.tool_call_finished(self.id(), call, &result);
        }
        result
    }
}

/// The stop of a run whose model's answer was cut off (`error`, after the
/// model client's retries). Its text that had streamed joins the turn as
/// the assistant's, as a `max-tokens` answer does, so that it is the run's
/// text (a child's partial output) and the conversation holds what the
/// model said. It is not asked again here: the text already reached the
/// observer, and could not be taken back (docs/design.md, "Cut answers").
fn cut_off(error: LlmError, turn: &mut Turn) -> AgentStop {
    let line = error.to_string();
    if let LlmError::StreamEnded { partial, .. } = error
        && !partial.is_empty()
    {
        turn.messages.push(Message::assistant(partial));
    }
    AgentStop::AnswerCut(line)
}

/// The `max_tokens` of a request by an agent whose own cap is `cap` and
/// whose token budgets have `left` tokens: the smaller of the two. Without a
/// cap of its own, what is left is asked for only once it is at most
/// [`DEFAULT_ANSWER_RESERVE`](crate::DEFAULT_ANSWER_RESERVE): a larger
/// `max_tokens` than its model's output limit makes some servers refuse the
/// request (DeepSeek's limit is 8,192), while any model answers that much.
fn budget_cap(cap: Option<u64>, left: Option<u64>) -> Option<u64> {
    match (cap, left) {
        (Some(cap), Some(left)) => Some(cap.min(left)),
        (None, Some(left)) if left <= crate::DEFAULT_ANSWER_RESERVE => Some(left),
        (cap, _) => cap,
    }
}
