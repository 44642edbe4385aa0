//! A model's context window, as one checked setting.

use std::num::NonZeroU64;

use crate::setting::{self, Bounded, Written};
use crate::wording;

/// A model's context window: the tokens one request (prompt and answer)
/// may take, at least [`ContextWindow::MIN`].
///
/// It checks itself wherever it is read, so a window travels whole from a
/// flag (`FromStr`), a configuration file or a start request's
/// [`AgentOptions`](crate::AgentOptions) (`Deserialize`, as a JSON number)
/// to the agent loop that fits each request into it; every refusal reads
/// as [`InvalidContextWindow`] says.
///
/// ```
/// use dsh_subagent_api::ContextWindow;
/// let window = ContextWindow::new(24_000).expect("large enough");
/// assert_eq!(window.tokens(), 24_000);
/// assert!(ContextWindow::new(100).is_err());
/// let read: ContextWindow = serde_json::from_value(serde_json::json!(32_000)).unwrap();
/// assert_eq!(serde_json::to_value(read).unwrap(), serde_json::json!(32_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextWindow(NonZeroU64);

impl ContextWindow {
    /// The smallest window: less cannot hold a system prompt, the tools'
    /// definitions and a task.
    pub const MIN: u64 = 1_024;

    /// A window of `tokens` tokens; refused below [`ContextWindow::MIN`].
    pub fn new(tokens: u64) -> Result<Self, InvalidContextWindow> {
        match NonZeroU64::new(tokens) {
            Some(tokens) if tokens.get() >= Self::MIN => Ok(Self(tokens)),
            _ => Err(InvalidContextWindow(Written::as_is(tokens))),
        }
    }

    /// The window in tokens.
    pub const fn tokens(self) -> u64 {
        self.0.get()
    }
}

/// A value that is no context window: not a whole number of tokens, or
/// fewer than [`ContextWindow::MIN`]. Its text is the one refusal of a
/// window, however it was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", wording::context_window_refused(&self.0, ContextWindow::MIN))]
pub struct InvalidContextWindow(Written);

impl Bounded for ContextWindow {
    type Error = InvalidContextWindow;

    fn from_whole(value: u64) -> Result<Self, InvalidContextWindow> {
        Self::new(value)
    }

    fn refuse(written: Written) -> InvalidContextWindow {
        InvalidContextWindow(written)
    }

    fn whole(&self) -> u64 {
        self.tokens()
    }
}

setting::bounded_setting!(ContextWindow);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reader_refuses_in_one_wording() {
        let refusals = [
            ContextWindow::new(0).unwrap_err().to_string(),
            ContextWindow::new(1_023).unwrap_err().to_string(),
            "512".parse::<ContextWindow>().unwrap_err().to_string(),
            "128k".parse::<ContextWindow>().unwrap_err().to_string(),
            serde_json::from_value::<ContextWindow>(serde_json::json!(-1))
                .unwrap_err()
                .to_string(),
            serde_json::from_value::<ContextWindow>(serde_json::json!(2048.5))
                .unwrap_err()
                .to_string(),
            serde_json::from_value::<ContextWindow>(serde_json::json!("128000"))
                .unwrap_err()
                .to_string(),
            serde_json::from_value::<ContextWindow>(serde_json::json!([1]))
                .unwrap_err()
                .to_string(),
            serde_json::from_value::<ContextWindow>(serde_json::json!({"tokens": 1}))
                .unwrap_err()
                .to_string(),
            serde_json::from_value::<ContextWindow>(serde_json::json!(null))
                .unwrap_err()
                .to_string(),
        ];
        insta::assert_snapshot!("context_window_refused", refusals.join("\n"));
    }

    #[test]
    fn a_window_at_the_bound_is_taken_however_it_is_written() {
        let at_bound = ContextWindow::new(ContextWindow::MIN).unwrap();
        assert_eq!(" 1024 ".parse::<ContextWindow>(), Ok(at_bound));
        assert_eq!(
            serde_json::from_value::<ContextWindow>(serde_json::json!(1024)).unwrap(),
            at_bound
        );
    }
}
