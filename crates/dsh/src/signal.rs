//! The signals that stop `dsh` (SIGINT, SIGTERM): each command waits for
//! them to end what it runs cleanly, and a recording (`--record`) says
//! which one stopped its run.

/// A signal that asks `dsh` to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Stop {
    /// The signal's name, as a recording keeps it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
        }
    }
}

/// Resolves at the first SIGINT or SIGTERM, with which one came. The
/// signals are caught from this call on (not from the first poll), so a
/// caller that has said it is ready is never killed by one instead.
pub(crate) fn stopped() -> impl Future<Output = Stop> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut interrupt = signal(SignalKind::interrupt()).ok();
    let mut terminate = signal(SignalKind::terminate()).ok();
    async move {
        let interrupted = async {
            match interrupt.as_mut() {
                Some(interrupt) => {
                    interrupt.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        let terminated = async {
            match terminate.as_mut() {
                Some(terminate) => {
                    terminate.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = interrupted => Stop::Interrupt,
            () = terminated => Stop::Terminate,
        }
    }
}
