//! One exchange while it runs: the request the stream filled in, then
//! each line or event of its answer as it is heard, handed to the writer
//! as one block when it ends.

use std::time::Instant;

use super::capture::Capture;
use super::copy_into_kept::copy_event;
use super::format::{Line, Outcome};
use super::recorder::Recorder;
use crate::model::ChatEvent;

/// One exchange while it runs; handed to the writer as one block when it
/// ends, or, if it is dropped first, with a `dropped` ending.
pub(crate) struct ExchangeLog {
    recorder: Recorder,
    began: Instant,
    exchange: Option<Box<Capture>>,
}

impl ExchangeLog {
    /// Begins `exchange` (from [`Recorder::begin`], its request filled in)
    /// now: one reading of the clock for its time in the recording and the
    /// start of its answer's.
    pub(crate) fn begin(recorder: &Recorder, mut exchange: Box<Capture>) -> Self {
        let began = Instant::now();
        exchange.at_ms = millis(began.saturating_duration_since(recorder.started()));
        ExchangeLog {
            recorder: recorder.clone(),
            began,
            exchange: Some(exchange),
        }
    }

    /// The exchange's id.
    pub(crate) fn id(&self) -> u64 {
        self.exchange.as_ref().map_or(0, |exchange| exchange.id)
    }

    /// Milliseconds since the exchange began.
    pub(crate) fn t_ms(&self) -> u64 {
        millis(self.began.elapsed())
    }

    /// The recorder (to scrub what is logged).
    pub(crate) fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Adds a line of the answer (HTTP level).
    pub(crate) fn push(&mut self, line: Line) {
        if let Some(exchange) = &mut self.exchange {
            exchange.lines.push(line);
        }
    }

    /// Adds an event the model streamed, heard `t_ms` after the exchange
    /// began (events level): a text delta's text is copied onto the
    /// exchange's tape, any other event into its others.
    pub(crate) fn hear(&mut self, t_ms: u64, event: &ChatEvent) {
        let Some(exchange) = &mut self.exchange else {
            return;
        };
        match event {
            ChatEvent::TextDelta(text) => exchange.tape.text(t_ms, text),
            other => {
                let index = exchange.others_used;
                exchange.tape.other(t_ms);
                match exchange.others.get_mut(index) {
                    Some(kept) => copy_event(kept, other),
                    None => exchange.others.push(other.clone()),
                }
                exchange.others_used += 1;
            }
        }
    }

    /// Ends the exchange and hands it to the writer (once).
    pub(crate) fn end(&mut self, outcome: Outcome) {
        if self.exchange.is_some() {
            self.end_at(self.t_ms(), outcome);
        }
    }

    /// Ends the exchange `t_ms` after it began and hands it to the writer
    /// (once).
    pub(crate) fn end_at(&mut self, t_ms: u64, outcome: Outcome) {
        let Some(mut exchange) = self.exchange.take() else {
            return;
        };
        exchange.lines.push(Line::End {
            id: exchange.id,
            t_ms,
            outcome,
        });
        self.recorder.hand_over(exchange);
    }
}

impl Drop for ExchangeLog {
    fn drop(&mut self) {
        self.end(Outcome::Dropped);
    }
}

/// A duration in whole milliseconds (saturating).
fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
