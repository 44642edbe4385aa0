//! One run of the agent loop, as named steps: begin the turn (or go on with
//! an interrupted one), then per step check the limits, send the request
//! (fitted to the context window), take the answer and run its tool calls;
//! on a final answer, wait for the agent's background work when the runtime
//! says so; then end the turn.

use dsh_llm::{ChatEvent, ChatRequest, ChatResponse, LlmError, Message, ToolCall, Usage, collect_response_with};
use dsh_subagent_api::{Rerun, SpanOrigin};
use dsh_tools::{CancellationToken, ToolExecution, ToolResult};
use tracing::Instrument;

use super::fit::{Round, Sent, Turn};
use super::{Agent, Phase, Runs};
use crate::context::{Anchor, Estimate};
use crate::trace;
use crate::transcript::{TranscriptEntry, TurnTimes, now_ms};
use crate::usage::{add_reported, completed, since};
use crate::{AgentStop, EndOfRun, Notice, Priced, RunOutcome};

/// A run in progress: its turn, and what it counts.
struct Run {
    /// The run's messages, and the round of results its next request carries.
    turn: Turn,
    /// Model calls made (in an interrupted turn, those before the
    /// interruption count too).
    steps: u32,
    /// Model calls this run made, as its turn's end records them.
    own_steps: u32,
    /// Tokens its own model calls reported.
    usage: Option<Usage>,
    /// What its own model calls cost, where their model's price is known.
    cost: Priced,
    /// The agent's children's tokens when the run began.
    children_before: Option<Usage>,
    /// When it began and how long its start waited; when each model call ended.
    times: TurnTimes,
}

/// What a run does next.
enum Next {
    /// It stops.
    Stop(AgentStop),
    /// It asks the model (again).
    Ask,
    /// The model gave a final answer: the run ends, unless a steered
    /// message or (when the runtime waits for it) background work is left.
    Answered,
    /// It runs these tool calls, then sends their results.
    CallTools(Vec<ToolCall>),
}

/// What a run is given.
enum Input {
    /// A new turn, opened by this prompt.
    Prompt(String),
    /// The turn the agent had not ended, gone on with; the message, when
    /// there is one, joins it once its calls are answered.
    Resume(Option<String>),
}

impl Agent {
    /// Runs one user prompt to a final answer, a limit, or cancellation.
    ///
    /// Cancellation is honoured at every await: the model stream is dropped,
    /// running tool calls receive the cancellation, and the run ends
    /// [`AgentStop::Cancelled`] with every tool call answered; or
    /// [`AgentStop::Interrupted`] when the runtime was
    /// [interrupted](crate::AgentRuntime::interrupt), its turn left open.
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
        self.run_input(Input::Prompt(prompt.into()), cancel, origin).await
    }

    /// Goes on with the turn an interrupted agent had not ended (a crash, a
    /// resumable stop), built with
    /// [`AgentBuilder::resume_from`](crate::AgentBuilder::resume_from): the
    /// calls of its last answer whose results were never recorded run again
    /// (a call that had started a child carries it, so that the child is
    /// continued, not started again), then `message` joins the turn when
    /// there is one, and the loop goes on from the turn's last completed
    /// step. No model call that had completed is made again.
    ///
    /// Without an open turn it is a new turn: `message` opens it, or with
    /// none, the turn waits for the agent's background work and reads its
    /// notices (a run whose children were stopped resumably); with neither,
    /// the run ends at once, completed, having made no model call.
    ///
    /// The runtime's [`OnResume`](crate::OnResume) is called first, so that a
    /// harness restores the agent's background tasks before the turn goes on.
    pub async fn resume(&self, message: Option<String>, cancel: &CancellationToken) -> RunOutcome {
        self.resume_from_origin(message, cancel, &SpanOrigin::current()).await
    }

    /// [`Agent::resume`], with its `invoke_agent` span placed by `origin`.
    pub async fn resume_from_origin(
        &self,
        message: Option<String>,
        cancel: &CancellationToken,
        origin: &SpanOrigin,
    ) -> RunOutcome {
        if let Some(on_resume) = self.inner.runtime.on_resume() {
            // A cancel meanwhile ends the wait; the turn then ends at once.
            tokio::select! {
                () = on_resume.resumed(self.agent_ref()) => {}
                () = cancel.cancelled() => {}
            }
        }
        self.run_input(Input::Resume(message), cancel, origin).await
    }

    async fn run_input(&self, input: Input, cancel: &CancellationToken, origin: &SpanOrigin) -> RunOutcome {
        let span = origin
            .place(|parent| trace::invoke_agent(parent, &self.inner.info, self.inner.runtime.model().provider_name()));
        if let Input::Prompt(prompt) | Input::Resume(Some(prompt)) = &input {
            trace::record_content(&span, "gen_ai.input.messages", "user", prompt);
        }
        let outcome = self.run_traced(input, cancel).instrument(span.clone()).await;
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
    async fn run_traced(&self, input: Input, cancel: &CancellationToken) -> RunOutcome {
        let _one_run_at_a_time = self.inner.run_lock.lock().await;
        let (mut run, mut next) = match input {
            Input::Prompt(prompt) => (self.begin(Some(prompt)), Next::Ask),
            Input::Resume(message) => self.begin_resumed(message, cancel).await,
        };
        let stop = loop {
            next = match next {
                Next::Stop(stop) => break stop,
                Next::Ask => self.step(&mut run, cancel).await,
                Next::CallTools(calls) => {
                    self.call_tools(calls, &mut run.turn, cancel).await;
                    Next::Ask
                }
                Next::Answered => self.after_answer(cancel).await,
            };
        };
        self.end(run, stop)
    }

    /// One step: the limits, the notices and steered messages, the request
    /// and its answer.
    async fn step(&self, run: &mut Run, cancel: &CancellationToken) -> Next {
        if let Some(stop) = self.limit_reached(run.steps, cancel) {
            return Next::Stop(stop);
        }
        run.steps += 1;
        run.own_steps += 1;
        self.take_notices(&mut run.turn);
        self.take_steered(&mut run.turn);
        match self.send(&mut run.turn, cancel).await {
            Ok((response, spent, sent)) => self.answered(run, response, spent, sent),
            Err(stop) => Next::Stop(stop),
        }
    }

    /// Opens the turn with the notices that arrived between runs, then the
    /// prompt, when there is one.
    fn begin(&self, prompt: Option<String>) -> Run {
        let mut run = self.open_run();
        self.take_notices(&mut run.turn);
        if let Some(prompt) = prompt {
            self.say(&mut run.turn, Message::user(prompt), &[]);
        }
        run
    }

    /// A run with an empty turn, open to steered messages.
    fn open_run(&self) -> Run {
        let mut times = TurnTimes::default();
        times.queued_ms = self.lock().queued_ms.take();
        times.started_at_ms = now_ms();
        self.open_turn();
        Run {
            turn: Turn::default(),
            steps: 0,
            own_steps: 0,
            usage: None,
            cost: Priced::Nothing,
            children_before: self.lock().usage.children,
            times,
        }
    }

    /// Opens the run that goes on with the agent's interrupted turn
    /// ([`Agent::resume`]), and what it does first. Notices that arrived
    /// meanwhile are taken at its next step, after what the turn holds.
    async fn begin_resumed(&self, message: Option<String>, cancel: &CancellationToken) -> (Run, Next) {
        let resumable = self
            .inner
            .resumable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_default();
        let Some(open) = resumable.open else {
            // No turn to go on with: a new one, opened by the message or by
            // the notices waiting; with neither, by those of the background
            // work it waits for.
            let run = self.begin(message);
            let next = if run.turn.messages.is_empty() {
                Next::Answered
            } else {
                Next::Ask
            };
            return (run, next);
        };
        let mut run = self.open_run();
        let answered = open.answered();
        run.steps = open.steps;
        run.turn.messages = open.messages;
        if let Some(round) = open.round {
            let start = run.turn.messages.len();
            let rerun = |call: &ToolCall| Rerun::new(resumable.children.get(&call.id).cloned());
            let results = self.rerun_round(&round.calls, round.results, rerun, cancel).await;
            run.turn.messages.extend(
                round
                    .calls
                    .iter()
                    .zip(&results)
                    .map(|(call, result)| Message::tool(call.id.clone(), result.text.clone())),
            );
            run.turn.round = Some(Round {
                start,
                calls: round.calls,
                results,
            });
        }
        run.turn.messages.extend(open.after);
        let next = match message {
            Some(message) => {
                self.say(&mut run.turn, Message::user(message), &[]);
                Next::Ask
            }
            None if answered => Next::Answered,
            None => Next::Ask,
        };
        (run, next)
    }

    /// Why the run may take no further step after `steps`, if it may not:
    /// cancelled (or interrupted), out of turns, or out of tokens in its tree.
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
                Err(error @ LlmError::StreamEnded { .. }) => return Err(self.cut_off(error, turn)),
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
            observer.step_finished(self.id(), run.own_steps, run.usage, run.cost);
        }
        // The answer's text moves into the turn: a long answer is not copied.
        let ChatResponse {
            text,
            tool_calls,
            finish_reason,
            ..
        } = response;
        let answer = Message::assistant_with_tool_calls(text, tool_calls.clone());
        self.say(&mut run.turn, answer, &[]);
        match finish_reason {
            dsh_llm::FinishReason::Length => return Next::Stop(AgentStop::MaxTokens),
            dsh_llm::FinishReason::ContentFilter => return Next::Stop(AgentStop::Refusal),
            _ => {}
        }
        if tool_calls.is_empty() {
            Next::Answered
        } else {
            Next::CallTools(tool_calls)
        }
    }

    /// After a final answer: the model is asked again when a message was
    /// steered in while it answered, or, when the runtime waits for
    /// background work, once a notice of that work arrives; otherwise the
    /// turn closes and the run completes.
    async fn after_answer(&self, cancel: &CancellationToken) -> Next {
        let waits = self.inner.runtime.end_of_run() == EndOfRun::WaitForBackground;
        if let (true, Some(source)) = (waits, self.inner.runtime.notices())
            && !self.steered_unread()
        {
            let work = source.wait_for_work(self.id());
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Next::Stop(AgentStop::Cancelled),
                notice = work => if notice {
                    return Next::Ask;
                },
            }
        }
        if self.close_unless_steered() {
            Next::Stop(AgentStop::Completed)
        } else {
            // A message joined while the model answered: answer it too.
            Next::Ask
        }
    }

    /// Runs the model's tool calls together and adds their results to the
    /// turn as the round the next request carries (fitted into the window
    /// right before it is sent). Each result is recorded when its call
    /// returns ([`Agent::call_and_record`]).
    async fn call_tools(&self, calls: Vec<ToolCall>, turn: &mut Turn, cancel: &CancellationToken) {
        let results =
            futures::future::join_all(calls.iter().map(|call| self.call_and_record(call, None, cancel))).await;
        let start = turn.messages.len();
        turn.messages.extend(
            calls
                .iter()
                .zip(&results)
                .map(|(call, result)| Message::tool(call.id.clone(), result.text.clone())),
        );
        turn.round = Some(Round { start, calls, results });
    }

    /// The results of an interrupted round: those recorded before the
    /// interruption as they were, the others from their calls run again
    /// (together, each with what its [`Rerun`] names), in call order.
    async fn rerun_round(
        &self,
        calls: &[ToolCall],
        recorded: Vec<Option<String>>,
        rerun: impl Fn(&ToolCall) -> Rerun,
        cancel: &CancellationToken,
    ) -> Vec<ToolResult> {
        let runs = calls.iter().zip(recorded).map(|(call, recorded)| {
            let rerun = recorded.is_none().then(|| rerun(call));
            async move {
                match (recorded, rerun) {
                    (Some(text), _) => ToolResult::recorded(text),
                    (None, rerun) => self.call_and_record(call, rerun, cancel).await,
                }
            }
        });
        futures::future::join_all(runs).await
    }

    /// One tool call, its result recorded in the transcript as soon as it
    /// returns, so that a crash after this point never runs it again. A
    /// result that came only from an interruption of the runtime is not
    /// recorded: the call runs again when the turn resumes.
    async fn call_and_record(&self, call: &ToolCall, rerun: Option<Rerun>, cancel: &CancellationToken) -> ToolResult {
        let result = self.call_tool(call, rerun, cancel).await;
        if !self.inner.runtime.is_interrupted() {
            self.record_message(&Message::tool(call.id.clone(), result.text.clone()), &[]);
        }
        result
    }

    /// Ends the run on `stop`: closes the turn, keeps it in the history,
    /// records its end and flushes the transcript. Messages steered in and
    /// never read are recorded, so none is lost. A cancellation of an
    /// interrupted runtime ends the run `interrupted`, its turn open.
    fn end(&self, run: Run, stop: AgentStop) -> RunOutcome {
        let Run {
            mut turn,
            own_steps,
            usage,
            cost,
            children_before,
            mut times,
            ..
        } = run;
        let stop = match stop {
            AgentStop::Cancelled if self.inner.runtime.is_interrupted() => AgentStop::Interrupted,
            stop => stop,
        };
        let unread = {
            let mut state = self.lock();
            state.inbox.phase = Phase::Closed;
            std::mem::take(&mut state.inbox.pending)
        };
        for message in unread {
            self.say(&mut turn, Message::user(message), &[]);
        }
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
            reason: Some(stop.clone()),
            steps: own_steps,
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
            steps: own_steps,
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

    /// Appends the messages steered into this run, each as a user message.
    fn take_steered(&self, turn: &mut Turn) {
        let steered = std::mem::take(&mut self.lock().inbox.pending);
        for message in steered {
            self.say(turn, Message::user(message), &[]);
        }
    }

    /// Whether a message steered into the run waits to be read.
    fn steered_unread(&self) -> bool {
        !self.lock().inbox.pending.is_empty()
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

    /// Appends the notices pending for this agent as one user message,
    /// recorded with the tasks they report. None is taken while the runtime
    /// is interrupted: they stay to be delivered when the agent resumes.
    fn take_notices(&self, turn: &mut Turn) {
        let Some(source) = self.inner.runtime.notices() else {
            return;
        };
        if self.inner.runtime.is_interrupted() {
            return;
        }
        let notices = source.take(self.id());
        if notices.is_empty() {
            return;
        }
        let tasks: Vec<String> = notices.iter().filter_map(|notice| notice.task_id.clone()).collect();
        let texts: Vec<String> = notices.into_iter().map(|Notice { text, .. }| text).collect();
        self.say(turn, Message::user(crate::wording::notices(&texts)), &tasks);
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

    async fn call_tool(&self, call: &ToolCall, rerun: Option<Rerun>, cancel: &CancellationToken) -> ToolResult {
        let observer = self.inner.runtime.observer();
        if let Some(observer) = observer {
            observer.tool_call_started(self.id(), call);
        }
        let mut exec = ToolExecution::new(cancel.child_token())
            .with_agent(self.agent_ref())
            .with_call_id(call.id.clone());
        if let Some(rerun) = rerun {
            exec = exec.with_rerun(rerun);
        }
        let result = self.inner.tools.call(&call.name, &call.arguments, exec).await;
        if let Some(observer) = observer {
            observer.tool_call_finished(self.id(), call, &result);
        }
        result
    }

    /// The stop of a run whose model's answer was cut off (`error`, after
    /// the model client's retries). Its text that had streamed joins the
    /// turn as the assistant's, as a `max-tokens` answer does, so that it is
    /// the run's text (a child's partial output) and the conversation holds
    /// what the model said. It is not asked again here: the text already
    /// reached the observer, and could not be taken back (docs/design.md,
    /// "Cut answers").
    fn cut_off(&self, error: LlmError, turn: &mut Turn) -> AgentStop {
        let line = error.to_string();
        if let LlmError::StreamEnded { partial, .. } = error
            && !partial.is_empty()
        {
            self.say(turn, Message::assistant(partial), &[]);
        }
        AgentStop::AnswerCut(line)
    }
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
