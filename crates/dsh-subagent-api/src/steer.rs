//! Strict live delivery into a running child's current turn.
//!
//! A provider whose children can take a message mid-turn attaches a
//! [`Steerer`] to the runs it publishes ([`SubagentRun::with_steerer`](crate::SubagentRun::with_steerer)).
//! Steering is *strict*: the message either joins the turn that is running
//! now (the child reads it before it next calls its model, and its answer to
//! that turn is the run's result), or it is refused at once with an error
//! that says it was not delivered. It never queues a later turn and never
//! falls through to something else.

use std::fmt;
use std::sync::Arc;

use crate::{ContentBlock, SubagentError};

type SteerFn = dyn Fn(Vec<ContentBlock>) -> Result<(), SubagentError> + Send + Sync;

/// A run's live-delivery handle: cheap to clone, usable from any thread,
/// and valid for the run's whole life (after the turn closes it refuses).
///
/// ```
/// use dsh_subagent_api::{ContentBlock, Steerer, SubagentError};
/// use std::sync::{Arc, Mutex};
///
/// let inbox = Arc::new(Mutex::new(Vec::new()));
/// let sink = inbox.clone();
/// let steerer = Steerer::new(move |content: Vec<ContentBlock>| {
///     sink.lock().unwrap().extend(content);
///     Ok::<(), SubagentError>(())
/// });
/// steerer.steer(vec![ContentBlock::text("also consider Y")]).unwrap();
/// assert_eq!(inbox.lock().unwrap().len(), 1);
/// ```
#[derive(Clone)]
pub struct Steerer {
    // A thin pointer, so an `Option<Steerer>` costs a run one word.
    deliver: Arc<Box<SteerFn>>,
}

impl Steerer {
    /// A steerer that hands each message to `deliver`. `deliver` must decide
    /// synchronously: `Ok` only when the message has joined the running turn,
    /// an error (whose text ends with `the message was not delivered`)
    /// otherwise.
    pub fn new<F>(deliver: F) -> Self
    where
        F: Fn(Vec<ContentBlock>) -> Result<(), SubagentError> + Send + Sync + 'static,
    {
        Self {
            deliver: Arc::new(Box::new(deliver)),
        }
    }

    /// Delivers `content` into the running turn, or refuses it.
    pub fn steer(&self, content: Vec<ContentBlock>) -> Result<(), SubagentError> {
        (self.deliver)(content)
    }
}

impl fmt::Debug for Steerer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steerer").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steerer_is_one_word_inside_an_option() {
        assert_eq!(size_of::<Option<Steerer>>(), size_of::<usize>());
    }

    #[test]
    fn refusals_reach_the_caller_unchanged() {
        let steerer = Steerer::new(|_| Err(SubagentError::failed("turn closed; the message was not delivered")));
        let error = steerer.steer(vec![ContentBlock::text("x")]).unwrap_err();
        assert_eq!(error.to_string(), "turn closed; the message was not delivered");
    }
}
