//! The announced runs of a service that can be cancelled by their id
//! ([`SubagentService::cancel_run`](crate::SubagentService::cancel_run)):
//! each one's start token, kept from its announcement until it settles or
//! its handle is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use dsh_subagent_api::CancellationToken;

/// The tokens of the runs in flight, by run handle id (a provider may give
/// two runs one id: each is kept under its announced run id).
type Tokens = HashMap<String, Vec<(u64, CancellationToken)>>;

/// The cancellable runs of one service.
#[derive(Default)]
pub(crate) struct Running(Arc<Mutex<Tokens>>);

fn lock(tokens: &Mutex<Tokens>) -> MutexGuard<'_, Tokens> {
    tokens.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Running {
    /// Keeps `token` as the way to cancel run `run_id` (handle id `id`)
    /// until the returned guard drops.
    pub(crate) fn keep(&self, id: &str, run_id: u64, token: CancellationToken) -> Kept {
        lock(&self.0).entry(id.to_owned()).or_default().push((run_id, token));
        Kept {
            tokens: Arc::downgrade(&self.0),
            id: id.to_owned(),
            run_id,
        }
    }

    /// Cancels every run in flight whose handle id is `id`; whether there
    /// was one.
    pub(crate) fn cancel(&self, id: &str) -> bool {
        let tokens: Vec<CancellationToken> = lock(&self.0)
            .get(id)
            .map(|runs| runs.iter().map(|(_, token)| token.clone()).collect())
            .unwrap_or_default();
        // Cancelled outside the lock: a token's waiters run at once.
        for token in &tokens {
            token.cancel();
        }
        !tokens.is_empty()
    }

    /// How many runs are kept (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.0).values().map(Vec::len).sum()
    }
}

/// A run kept cancellable; dropping it forgets the run.
pub(crate) struct Kept {
    tokens: Weak<Mutex<Tokens>>,
    id: String,
    run_id: u64,
}

impl Drop for Kept {
    fn drop(&mut self) {
        let Some(tokens) = self.tokens.upgrade() else { return };
        let mut tokens = lock(&tokens);
        if let Some(runs) = tokens.get_mut(&self.id) {
            runs.retain(|(run_id, _)| *run_id != self.run_id);
            if runs.is_empty() {
                tokens.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_run_is_cancelled_by_its_id_until_it_is_forgotten() {
        let running = Running::default();
        let (first, second, other) = (
            CancellationToken::new(),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let kept_first = running.keep("kid", 1, first.clone());
        let _kept_second = running.keep("kid", 2, second.clone());
        let _kept_other = running.keep("other", 3, other.clone());
        drop(kept_first);
        assert!(running.cancel("kid"));
        assert!(!first.is_cancelled(), "forgotten");
        assert!(second.is_cancelled());
        assert!(!other.is_cancelled());
        assert!(!running.cancel("nobody"));
        assert_eq!(running.len(), 2);
    }
}
