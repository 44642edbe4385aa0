//! The protocol's stdin and stdout, as the lines the ACP connection reads
//! and writes.
//!
//! An ACP client starts `dsh acp` with pipes for both. Read and written as
//! non-blocking pipes on the runtime's reactor, each message costs one
//! system call. tokio's portable stdio would hand every read, write and
//! flush to its blocking thread pool and wait for it: a prompt's stream of
//! `session/update`s (one write and one flush each) paid two thread hops per
//! update, which was most of the time `dsh acp` took to answer a short
//! prompt (`CHANGELOG.md`). When stdin or stdout is not a pipe (a
//! terminal, a file, a socket), or stdout's pipe is also stderr's (whose
//! writes must never fail with "would block"), that stream keeps tokio's
//! stdio.
//!
//! Lines are split by tokio's reader (the C library's `memchr`), not the
//! `futures` reader the SDK's byte-stream transport uses: that one probes
//! the CPU's features on its first line, a dozen `cpuid` instructions that
//! cost about 65 µs of every start on a virtual machine, where each one
//! traps to the hypervisor.
//!
//! [`Stdio::answered`] is notified once the first line is out, so that
//! `dsh acp` can build its shared runtime while the client reads that answer
//! (the module docs of [`super`]).
//!
//! Non-blocking mode belongs to the pipe's open file, which another process
//! may share; [`Stdio`] sets each one back to blocking when it is dropped.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::pin::Pin;
use std::sync::Arc;

use agent_client_protocol as acp;
use futures::{Sink, Stream};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::pipe;
use tokio::sync::Notify;

/// The lines the protocol reads, one JSON-RPC message each (without its end of line).
type Incoming = Pin<Box<dyn Stream<Item = io::Result<String>> + Send>>;
/// Where the protocol writes its lines; each is written and flushed whole.
type Outgoing = Pin<Box<dyn Sink<String, Error = io::Error> + Send>>;

/// The connection's transport, and the guard that sets the pipes back to blocking.
/// The protocol's lines on stdin and stdout, as the connection takes them.
pub(crate) type Lines = acp::Lines<Outgoing, Incoming>;

pub(crate) struct Stdio {
    /// The protocol's lines on stdin and stdout.
    pub(crate) lines: Lines,
    /// Notified when the first line has been written and flushed.
    pub(crate) answered: Arc<Notify>,
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
                Box::pin(receiver)
            }
            None => Box::pin(tokio::io::stdin()),
        };
        let shared_with_stderr = identity(stdout.as_fd()).is_some_and(|out| identity(std::io::stderr()) == Some(out));
        let sender = (!shared_with_stderr)
            .then(|| stdout.as_fd().try_clone_to_owned().ok())
            .flatten()
            .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok());
        let output: Pin<Box<dyn AsyncWrite + Send>> = match sender {
            Some(sender) => {
                made_non_blocking.extend(stdout.as_fd().try_clone_to_owned());
                Box::pin(sender)
            }
            None => Box::pin(tokio::io::stdout()),
        };
        let answered = Arc::new(Notify::new());
        Self {
            lines: acp::Lines::new(outgoing(output, answered.clone()), incoming(input)),
            answered,
            blocking: Blocking(made_non_blocking),
        }
    }
}

/// `input`'s lines, with `\n` or `\r\n` taken off; a line that is not UTF-8 is an error.
fn incoming(input: Pin<Box<dyn AsyncRead + Send>>) -> Incoming {
    let lines = BufReader::new(input).lines();
    Box::pin(futures::stream::unfold(lines, async |mut lines| {
        lines.next_line().await.transpose().map(|line| (line, lines))
    }))
}

/// Writes each line and its `\n` in one write, and flushes it; notifies
/// `answered` after the first.
fn outgoing(output: Pin<Box<dyn AsyncWrite + Send>>, answered: Arc<Notify>) -> Outgoing {
    let state = (output, Some(answered));
    Box::pin(futures::sink::unfold(
        state,
        async |(mut output, mut answered), line: String| {
            let mut bytes = line.into_bytes();
            bytes.push(b'\n');
            output.write_all(&bytes).await?;
            output.flush().await?;
            if let Some(answered) = answered.take() {
                answered.notify_one();
            }
            Ok((output, answered))
        },
    ))
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
