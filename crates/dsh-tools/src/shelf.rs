//! Any tool's result within a budget, its whole text kept for paged reads
//! where a harness gives a shelf ([`ResultPolicy`]). The `subagent` tool
//! cuts its own results; tools that do not know of budgets (those mounted
//! from an MCP server, say) are cut by their mount with this.

use std::fmt;
use std::sync::Arc;

use crate::budget::{PagedRead, ResultLimit, head_and_tail};
use crate::{AgentRef, ToolError, ToolOutput, wording};

/// A result too long for its budget, handed whole to a [`ResultShelf`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptResult {
    /// A success: its text.
    Completed(Arc<String>),
    /// A failure: its message (what follows `Error: `).
    Failed(Arc<String>),
}

impl KeptResult {
    /// The text kept, success or failure.
    pub fn text(&self) -> &Arc<String> {
        match self {
            Self::Completed(text) | Self::Failed(text) => text,
        }
    }
}

/// Where a cut result is kept whole, so that the model reads the rest page
/// by page: a finished task of the caller, read with `task_output`
/// (`dsh_tool_tasks::TaskShelf`).
///
/// A place is reserved when the call starts ([`ResultShelf::reserve`]),
/// before the tool awaits anything, and used only if the result is cut: so
/// the calls of one round, started in call order, name their kept results
/// in call order whatever order they finish in.
pub trait ResultShelf: Send + Sync {
    /// Reserves the place where `caller`'s result will be kept if it is
    /// cut; `None` when nothing can be kept for it (no tool to read it, a
    /// caller that is gone). The cut's notice then says the rest is not
    /// kept. A place never used is dropped, and leaves at most a gap in
    /// the numbering.
    fn reserve(&self, caller: &AgentRef) -> Option<Box<dyn ShelfPlace>>;
}

/// The place reserved on a [`ResultShelf`] for one call's result.
pub trait ShelfPlace: Send {
    /// Keeps `result`, what the call of the tool `label` returned, and
    /// returns the call that reads it; `None` when it cannot be kept after
    /// all (a text larger than the store's bound, a caller gone since).
    fn keep(self: Box<Self>, label: &str, result: KeptResult) -> Option<PagedRead>;
}

/// A tool's result budget, and where a result it cuts is kept.
///
/// ```
/// use dsh_tools::ResultPolicy;
/// use dsh_tools::{ResultLimit, ToolOutput};
/// let policy = ResultPolicy::new(ResultLimit::MIN);
/// // Reserved when the call starts: nothing, without a shelf.
/// let place = policy.reserve(None);
/// let cut = policy.within(Ok(ToolOutput::text("x".repeat(5_000))), place, "mcp__files__read").unwrap();
/// assert!(cut.text.len() <= ResultLimit::MIN.bytes());
/// assert!(cut.text.contains("not kept"), "no shelf: the rest is not kept");
/// ```
#[derive(Clone)]
pub struct ResultPolicy {
    budget: ResultLimit,
    shelf: Option<Arc<dyn ResultShelf>>,
}

impl ResultPolicy {
    /// Results within `budget`, nothing kept.
    pub fn new(budget: ResultLimit) -> Self {
        Self { budget, shelf: None }
    }

    /// Keeps each result it cuts on `shelf`.
    #[must_use]
    pub fn kept_on(mut self, shelf: Arc<dyn ResultShelf>) -> Self {
        self.shelf = Some(shelf);
        self
    }

    /// The result budget.
    pub fn result_limit(&self) -> ResultLimit {
        self.budget
    }

    /// Reserves, when a call starts, the place on the shelf where its
    /// result will be kept if it is cut (see [`ResultShelf`]); `None`
    /// without a shelf or a `caller`.
    pub fn reserve(&self, caller: Option<&AgentRef>) -> Option<Box<dyn ShelfPlace>> {
        self.shelf.as_ref()?.reserve(caller?)
    }

    /// `outcome` within the budget. A success or a failure at or under it,
    /// or one cut already, is returned as it is. A longer one is kept whole
    /// in `place` (the call's [`reserve`](Self::reserve)), when there is
    /// one, and cut to its head and tail around the notice that gives the
    /// call reading on (or says the rest is not kept); a failure keeps its
    /// code and stays a failure, its `Error: ` counted within the budget.
    pub fn within(
        &self,
        outcome: Result<ToolOutput, ToolError>,
        place: Option<Box<dyn ShelfPlace>>,
        label: &str,
    ) -> Result<ToolOutput, ToolError> {
        let budget = self.budget.bytes();
        let keep = |result| place.and_then(|place| place.keep(label, result));
        match outcome {
            Ok(output) if output.cut.is_none() && output.text.len() > budget => {
                let text = Arc::new(output.text);
                let read = keep(KeptResult::Completed(text.clone()));
                Ok(match head_and_tail(&text, budget, read) {
                    Some(excerpt) => ToolOutput::excerpt(excerpt),
                    None => ToolOutput::text(Arc::unwrap_or_clone(text)),
                })
            }
            Err(error) if error.cut().is_none() && error.message().len() + wording::ERROR_PREFIX.len() > budget => {
                let allowance = budget.saturating_sub(wording::ERROR_PREFIX.len());
                let code = error.code().map(str::to_owned);
                let message = Arc::new(error.into_message());
                let read = keep(KeptResult::Failed(message.clone()));
                let error = match head_and_tail(&message, allowance, read) {
                    Some(excerpt) => ToolError::excerpt(excerpt),
                    None => ToolError::new(Arc::unwrap_or_clone(message)),
                };
                Err(match code {
                    Some(code) => error.with_code(code),
                    None => error,
                })
            }
            outcome => outcome,
        }
    }
}

impl Default for ResultPolicy {
    /// [`ResultLimit::DEFAULT`], nothing kept.
    fn default() -> Self {
        Self::new(ResultLimit::DEFAULT)
    }
}

/// Two policies are equal when their budgets are and they keep results on
/// the same shelf (or neither keeps any).
impl PartialEq for ResultPolicy {
    fn eq(&self, other: &Self) -> bool {
        let same_shelf = match (&self.shelf, &other.shelf) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.budget == other.budget && same_shelf
    }
}

impl Eq for ResultPolicy {}

impl fmt::Debug for ResultPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResultPolicy")
            .field("budget", &self.budget)
            .field("kept", &self.shelf.is_some())
            .finish()
    }
}
