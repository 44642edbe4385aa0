//! The subject's provider as the service sees it: the same name,
//! capabilities and children, with the calls at the seam counted, and a
//! panic put into a run's result on demand (the panic cell).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

use dsh_subagent_api::{Capabilities, ContinuableProvider, StartRequest, SubagentError, SubagentProvider, SubagentRun};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::wording;

/// Where the next runs' results panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Panics {
    /// Nowhere: the provider's own results.
    Never = 0,
    /// At once, while the child still runs.
    WhileRunning = 1,
    /// Once the child's own result is in.
    AfterResult = 2,
}

/// The subject's provider, counted.
pub(crate) struct Observed {
    inner: Arc<dyn SubagentProvider>,
    starts: AtomicUsize,
    published: AtomicUsize,
    panics: AtomicU8,
}

impl Observed {
    pub(crate) fn new(inner: Arc<dyn SubagentProvider>) -> Self {
        Self {
            inner,
            starts: AtomicUsize::new(0),
            published: AtomicUsize::new(0),
            panics: AtomicU8::new(Panics::Never as u8),
        }
    }

    /// Calls of `start` that reached the provider.
    pub(crate) fn starts(&self) -> usize {
        self.starts.load(Ordering::SeqCst)
    }

    /// Runs the provider published.
    pub(crate) fn published(&self) -> usize {
        self.published.load(Ordering::SeqCst)
    }

    /// Makes the next runs' results panic (or not).
    pub(crate) fn panic_results(&self, panics: Panics) {
        self.panics.store(panics as u8, Ordering::SeqCst);
    }

    fn panics(&self) -> Panics {
        match self.panics.load(Ordering::SeqCst) {
            1 => Panics::WhileRunning,
            2 => Panics::AfterResult,
            _ => Panics::Never,
        }
    }
}

impl SubagentProvider for Observed {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn inherits_parent_context(&self) -> bool {
        self.inner.inherits_parent_context()
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'_, Result<SubagentRun, SubagentError>> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        let panics = self.panics();
        self.inner
            .start(request)
            .map(move |started| {
                let run = started?;
                self.published.fetch_add(1, Ordering::SeqCst);
                Ok(match panics {
                    Panics::Never => run,
                    Panics::WhileRunning => run.map_result(|_own| async { panic!("{}", wording::INJECTED_PANIC) }),
                    Panics::AfterResult => run.map_result(|own| async {
                        let _settled = own.await;
                        panic!("{}", wording::INJECTED_PANIC)
                    }),
                })
            })
            .boxed()
    }

    fn continuation(&self) -> Option<&dyn ContinuableProvider> {
        self.inner.continuation()
    }
}
