//! Looking at recordings: a cassette's summary (agents, requests, tokens,
//! errors, cut streams), and the first divergence between two recordings
//! of one task (which agent, which request, which field).

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::Value;

use super::cassette::{Cassette, opening};
use super::divergence::Divergence;
use super::exchange::Exchange;
use super::format::Outcome;
use super::key::first_difference;
use super::summary::{AgentSummary, Summary};
use crate::error::truncate;
use crate::model::ChatEvent;
use crate::wording;

impl Cassette {
    /// Its agents, requests, tokens, errors and cut streams.
    pub fn summary(&self) -> Summary {
        let mut summary = Summary {
            agents: Vec::new(),
            exchanges: self.len(),
            prompt_tokens: 0,
            completion_tokens: 0,
            errors: 0,
            cut_streams: 0,
            dropped: 0,
        };
        for (position, exchange) in self.exchanges().iter().enumerate() {
            let (agent, request) = self.place(position);
            if request == 1 {
                summary.agents.push(AgentSummary {
                    number: agent,
                    requests: 0,
                    task: task(&exchange.body),
                });
            }
            if let Some(entry) = summary.agents.iter_mut().find(|entry| entry.number == agent) {
                entry.requests += 1;
            }
            let answer = Answer::of(exchange);
            summary.prompt_tokens += answer.prompt_tokens;
            summary.completion_tokens += answer.completion_tokens;
            match answer.ending {
                Ending::Finished => {}
                Ending::Cut => summary.cut_streams += 1,
                Ending::Error => summary.errors += 1,
                Ending::Dropped => summary.dropped += 1,
            }
        }
        summary
    }

    /// The first place where `other`, a recording of the same task,
    /// parts from this one: agents are paired by how their conversation
    /// begins, their requests by order; `None` when every request and
    /// answer agrees.
    pub fn diff(&self, other: &Cassette) -> Option<Divergence> {
        let first = agents(self);
        let second = agents(other);
        for (at, (opening, (number, positions))) in first.order.iter().enumerate() {
            // The agent that began the same way; else the one in the same
            // place, when it began in a way the first recording has not
            // (the same agent, asked differently).
            let paired = second.by_opening.get(opening).copied().or_else(|| {
                second
                    .order
                    .get(at)
                    .filter(|(theirs, _)| !first.by_opening.contains_key(theirs))
                    .map(|_| at)
            });
            let Some((_, theirs)) = paired.and_then(|at| second.order.get(at)) else {
                let exchange = positions.first().and_then(|at| self.exchanges().get(*at));
                return Some(Divergence::Missing {
                    agent: *number,
                    request: 1,
                    in_first: true,
                    task: exchange.map(|exchange| task(&exchange.body)).unwrap_or_default(),
                });
            };
            if let Some(divergence) = self.diff_agent(other, *number, positions, &theirs.1) {
                return Some(divergence);
            }
        }
        for (at, (opening, (number, positions))) in second.order.iter().enumerate() {
            let paired = first.by_opening.contains_key(opening)
                || first
                    .order
                    .get(at)
                    .is_some_and(|(mine, _)| !second.by_opening.contains_key(mine));
            if !paired {
                let exchange = positions.first().and_then(|at| other.exchanges().get(*at));
                return Some(Divergence::Missing {
                    agent: *number,
                    request: 1,
                    in_first: false,
                    task: exchange.map(|exchange| task(&exchange.body)).unwrap_or_default(),
                });
            }
        }
        None
    }

    /// Where agent `number`'s requests (`positions`, in this cassette)
    /// and its pair's in `other` (`theirs`) first part, if they do.
    fn diff_agent(&self, other: &Cassette, number: usize, positions: &[usize], theirs: &[usize]) -> Option<Divergence> {
        for request in 0..positions.len().max(theirs.len()) {
            let mine = positions.get(request).copied();
            let other_one = theirs.get(request).copied();
            let (mine, other_one) = match (mine, other_one) {
                (Some(mine), Some(other_one)) => (mine, other_one),
                (only, _) => {
                    let exchange = only
                        .and_then(|at| self.exchanges().get(at))
                        .or_else(|| other_one.and_then(|at| other.exchanges().get(at)));
                    return Some(Divergence::Missing {
                        agent: number,
                        request: request + 1,
                        in_first: only.is_some(),
                        task: exchange.map(|exchange| task(&exchange.body)).unwrap_or_default(),
                    });
                }
            };
            if let Some(difference) = first_difference(self.key_at(mine), other.key_at(other_one)) {
                return Some(Divergence::Request {
                    agent: number,
                    request: request + 1,
                    field: difference.path,
                    first: difference.recorded.map(|value| truncate(&value.to_string(), 160)),
                    second: difference.asked.map(|value| truncate(&value.to_string(), 160)),
                });
            }
            let (Some(mine), Some(other_one)) = (self.exchanges().get(mine), other.exchanges().get(other_one)) else {
                continue;
            };
            let (a, b) = (Answer::of(mine).text, Answer::of(other_one).text);
            if a != b {
                return Some(Divergence::Answer {
                    agent: number,
                    request: request + 1,
                    first: truncate(&a, 160),
                    second: truncate(&b, 160),
                });
            }
        }
        None
    }
}

/// A cassette's agents: by opening, their number and exchange positions.
struct Agents {
    order: Vec<(String, (usize, Vec<usize>))>,
    by_opening: HashMap<String, usize>,
}

fn agents(cassette: &Cassette) -> Agents {
    let mut agents = Agents {
        order: Vec::new(),
        by_opening: HashMap::new(),
    };
    for position in 0..cassette.len() {
        let opening = opening(cassette.key_at(position));
        let at = *agents.by_opening.entry(opening.clone()).or_insert_with(|| {
            agents.order.push((opening, (agents.order.len() + 1, Vec::new())));
            agents.order.len() - 1
        });
        if let Some((_, (_, positions))) = agents.order.get_mut(at) {
            positions.push(position);
        }
    }
    agents
}

/// The start of a request's first user message.
fn task(body: &Value) -> String {
    let text = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|messages| {
            messages
                .iter()
                .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        })
        .and_then(|message| message.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    truncate(&text.replace('\n', " "), 60)
}

/// What an answer said, read from its events or its body: the text, tool
/// calls, finish reason or ending, and the usage it reported.
struct Answer {
    text: String,
    /// How it ended.
    ending: Ending,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// How a recorded answer ended, as the client reads it: only a finish
/// reason makes an answer complete; `[DONE]` or the body's end before one
/// is a cut stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// A finish reason arrived: the answer is whole.
    Finished,
    /// The stream stopped after some of the answer but before its finish
    /// reason (`[DONE]` too early, the body's end, a transport error).
    Cut,
    /// An error: a failure status, no answer at all, the model's error, or
    /// a body that said nothing (an empty 200).
    Error,
    /// The client stopped reading before the answer ended.
    Dropped,
}

/// What an answer said, as it is read.
#[derive(Default)]
struct Heard {
    /// It carried anything but `[DONE]`.
    anything: bool,
    /// It gave a finish reason.
    finished: bool,
    /// Its stream ended with `[DONE]`.
    done: bool,
}

impl Answer {
    fn of(exchange: &Exchange) -> Answer {
        let mut answer = Answer {
            text: String::new(),
            ending: Ending::Dropped,
            prompt_tokens: 0,
            completion_tokens: 0,
        };
        let status = exchange.answer.head.as_ref().map(|head| head.status);
        if let Some(status) = status.filter(|status| *status >= 300) {
            answer.text = wording::answer_status(status);
        }
        let mut heard = Heard::default();
        answer.read_events(&exchange.answer.events, &mut heard);
        answer.read_body(&exchange.answer.chunks, status, &mut heard);
        let failed_status = status.is_some_and(|status| status >= 400);
        answer.ending = answer.ending(&exchange.end.1, failed_status, &heard);
        match answer.ending {
            Ending::Error if !failed_status => answer.text.push_str(wording::ANSWER_FAILED),
            Ending::Dropped => answer.text.push_str(wording::ANSWER_DROPPED),
            _ => {}
        }
        answer
    }

    /// The events a model streamed (events level).
    fn read_events(&mut self, events: &[(u64, ChatEvent)], heard: &mut Heard) {
        for (_, event) in events {
            heard.anything = true;
            match event {
                ChatEvent::TextDelta(text) => self.text.push_str(text),
                ChatEvent::ToolCall(call) => self
                    .text
                    .push_str(&wording::answer_tool_call(&call.name, &call.arguments)),
                ChatEvent::Usage(usage) => self.usage(usage.prompt_tokens, usage.completion_tokens),
                ChatEvent::Finish(reason) => {
                    heard.finished = true;
                    self.text.push_str(&wording::answer_finish(reason.as_str()));
                }
                ChatEvent::Queued(_) => {}
            }
        }
    }

    /// The body's chunks (HTTP level): a stream of `data:` lines, or one
    /// whole completion.
    fn read_body(&mut self, chunks: &[(u64, Bytes)], status: Option<u16>, heard: &mut Heard) {
        let body: Vec<u8> = chunks.iter().flat_map(|(_, bytes)| bytes.to_vec()).collect();
        let body = String::from_utf8_lossy(&body);
        let mut streamed = false;
        for line in body.lines() {
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            streamed = true;
            if data == "[DONE]" {
                heard.done = true;
                continue;
            }
            heard.anything = true;
            let Ok(chunk) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            heard.finished |= self.chunk(&chunk);
        }
        // A whole (not streamed) answer is one JSON completion.
        if !streamed
            && status.is_some_and(|status| status < 300)
            && let Ok(whole) = serde_json::from_str::<Value>(&body)
        {
            heard.anything = true;
            heard.finished |= self.chunk(&whole);
        }
    }

    /// How the answer ended, from its recorded outcome and what it said;
    /// a cut's notice goes on its text.
    fn ending(&mut self, outcome: &Outcome, failed_status: bool, heard: &Heard) -> Ending {
        match outcome {
            Outcome::Failed(_) | Outcome::Error(_) => Ending::Error,
            _ if failed_status => Ending::Error,
            Outcome::Cut(error) => {
                self.text.push_str(&wording::answer_cut(error));
                Ending::Cut
            }
            // A client stops reading once the answer said it was complete.
            _ if heard.finished => Ending::Finished,
            Outcome::Dropped if !heard.done => Ending::Dropped,
            // `[DONE]` or the body's end before a finish reason: with
            // nothing said, a refusal inside a 200; after something, a cut.
            _ if !heard.anything => Ending::Error,
            _ => {
                let how = if heard.done {
                    wording::ANSWER_CUT_BY_DONE
                } else {
                    wording::ANSWER_CUT_BY_END
                };
                self.text.push_str(&wording::answer_cut(how));
                Ending::Cut
            }
        }
    }

    fn usage(&mut self, prompt: u64, completion: u64) {
        self.prompt_tokens += prompt;
        self.completion_tokens += completion;
    }

    /// One SSE chunk of the chat-completions stream, or a whole completion
    /// (fields read loosely: this is a summary, the client's own parser is
    /// elsewhere); whether it carried a finish reason.
    fn chunk(&mut self, chunk: &Value) -> bool {
        let mut finished = false;
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.usage(count("prompt_tokens"), count("completion_tokens"));
        }
        let choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for choice in choices {
            let delta = choice.get("delta").or_else(|| choice.get("message"));
            if let Some(text) = delta.and_then(|delta| delta.get("content")).and_then(Value::as_str) {
                self.text.push_str(text);
            }
            for call in delta
                .and_then(|delta| delta.get("tool_calls"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let function = call.get("function");
                let part = |name: &str| function.and_then(|f| f.get(name)).and_then(Value::as_str).unwrap_or("");
                self.text
                    .push_str(&wording::answer_tool_call(part("name"), part("arguments")));
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                finished = true;
                self.text.push_str(&wording::answer_finish(reason));
            }
        }
        finished
    }
}
