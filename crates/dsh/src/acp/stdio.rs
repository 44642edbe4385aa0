//! The protocol's stdin and stdout.
//!
//! An ACP client starts `dsh acp` with pipes for both. Read and written as
//! non-blocking pipes on the runtime's reactor, each message costs one
//! system call. tokio's portable stdio would hand every read, write and
//! flush to its blocking thread pool and wait for it: a prompt's stream of
//! `session/update`s (one write and one flush each) paid two thread hops per
//! update, which was most of the time `dsh acp` took to answer a short
//! prompt (`docs/benchmarks.md`). When stdin or stdout is not a pipe (a
//! terminal, a file, a socket), or stdout's pipe is also stderr's (whose
//! writes must never fail with "would block"), that stream keeps tokio's
//! stdio.
//!
//! Non-blocking mode belongs to the pipe's open file, which another process
//! may share; [`Stdio`] sets each one back to blocking when it is dropped.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::pin::Pin;

use futures::{AsyncRead, AsyncWrite};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::net::unix::pipe;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// The two streams, and the guard that sets the pipes back to blocking.
pub(crate) struct Stdio {
    /// What the protocol reads.
    pub(crate) input: Pin<Box<dyn AsyncRead + Send>>,
    /// What the protocol writes.
    pub(crate) output: Pin<Box<dyn AsyncWrite + Send>>,
    /// Keep it until the protocol is done with the streams.
    pub(crate) blocking: Blocking,
}

/// The (device, inode) of what `fd` refers to, when it can be read.
fn identity(fd: impl AsFd) -> Option<(u64, u64)> {
    let file = std::fs::File::from(fd.as_fd().try_clone_to_owned().ok()?);
    let metadata = file.metadata().ok()?;
    Some((metadata.dev(), metadata.ino()))
}

impl Stdio {
    /// Stdin and stdout as the protocol's streams; must run on the runtime.
    pub(crate) fn open() -> Self {
        let mut made_non_blocking = Vec::new();
        let stdin = std::io::stdin();
        let stdout = std::io::stdout();
        let input: Pin<Box<dyn AsyncRead + Send>> = match stdin
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok())
        {
            Some(receiver) => {
                made_non_blocking.extend(stdin.as_fd().try_clone_to_owned());
                Box::pin(receiver.compat())
            }
            None => Box::pin(tokio::io::stdin().compat()),
        };
        let shared_with_stderr = identity(stdout.as_fd()).is_some_and(|out| identity(std::io::stderr()) == Some(out));
        let sender = (!shared_with_stderr)
            .then(|| stdout.as_fd().try_clone_to_owned().ok())
            .flatten()
            .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok());
        let output: Pin<Box<dyn AsyncWrite + Send>> = match sender {
            Some(sender) => {
                made_non_blocking.extend(stdout.as_fd().try_clone_to_owned());
                Box::pin(sender.compat_write())
            }
            None => Box::pin(tokio::io::stdout().compat_write()),
        };
        Self {
            input,
            output,
            blocking: Blocking(made_non_blocking),
        }
    }
}

/// Sets the pipes made non-blocking (copies of their descriptors) back to
/// blocking when dropped.
pub(crate) struct Blocking(Vec<OwnedFd>);

impl Drop for Blocking {
    fn drop(&mut self) {
        for fd in &self.0 {
            if let Ok(flags) = fcntl(fd, FcntlArg::F_GETFL) {
                let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
        }
    }
}
