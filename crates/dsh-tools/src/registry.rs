//! The tool registry: names are reserved, tools are mounted into reservations,
//! and every handle undoes exactly what it did when dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt;
use futures::future::{BoxFuture, Either};
use serde_json::Value;
use tracing::Instrument;

use crate::{Tool, ToolError, ToolExecution, ToolOutput, ToolResult, wording};

/// The code of the error for a call whose token was cancelled before dispatch.
pub const ABORTED_BEFORE_DISPATCH: &str = crate::ErrorCode::AbortedBeforeDispatch.as_str();

/// Why the registry refused a name or a tool.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Another reservation or registration already holds this name.
    #[error("{}", wording::duplicate_name(name))]
    DuplicateName {
        /// The contested name.
        name: String,
    },
    /// A tool was mounted into a reservation held for another name.
    #[error("{}", wording::name_mismatch(tool, reserved))]
    NameMismatch {
        /// The name the reservation holds.
        reserved: String,
        /// The name the tool reports.
        tool: String,
    },
    /// The reservation already has a tool mounted.
    #[error("{}", wording::already_mounted(name))]
    AlreadyMounted {
        /// The reserved name.
        name: String,
    },
    /// The name is empty.
    #[error("{}", wording::EMPTY_NAME)]
    EmptyName,
}

/// The model-facing definition of one registered tool.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// The tool's description.
    pub description: String,
    /// The JSON schema of its arguments.
    pub parameters: Value,
}

#[derive(Default)]
struct State {
    names: BTreeMap<String, Claim>,
    next_id: u64,
}

/// A reserved name, and the tool mounted under it, if any. (Not a "slot":
/// that word is the admission gate's, in `dsh-subagent`.)
struct Claim {
    reservation: u64,
    mounted: Option<(u64, Arc<dyn Tool>)>,
}

impl State {
    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// A set of tools addressed by unique name. Cheap to clone: clones share state.
///
/// A name is first *reserved* ([`ToolRegistry::reserve`]), then a tool is
/// *mounted* into the reservation ([`NameReservation::mount`]). The split lets
/// a plugin claim its name when it is configured, long before the tool can be
/// built, so a duplicate name fails at configuration and never later.
/// [`ToolRegistry::register`] does both at once.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry").field("names", &self.names()).finish()
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Claims `name`; fails when it is already held.
    pub fn reserve(&self, name: &str) -> Result<NameReservation, RegistryError> {
        if name.is_empty() {
            return Err(RegistryError::EmptyName);
        }
        let mut state = lock(&self.state);
        if state.names.contains_key(name) {
            return Err(RegistryError::DuplicateName { name: name.to_owned() });
        }
        let reservation = state.next_id();
        state.names.insert(
            name.to_owned(),
            Claim {
                reservation,
                mounted: None,
            },
        );
        Ok(NameReservation {
            registry: self.clone(),
            name: name.to_owned(),
            id: reservation,
        })
    }

    /// Reserves the tool's name and mounts it; dropping the handle removes both.
    pub fn register(&self, tool: Arc<dyn Tool>) -> Result<ToolRegistration, RegistryError> {
        let reservation = self.reserve(tool.name())?;
        let mounted = reservation.mount(tool)?;
        Ok(ToolRegistration {
            _mounted: mounted,
            _reservation: reservation,
        })
    }

    /// The mounted tool with this name.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let state = lock(&self.state);
        state.names.get(name)?.mounted.as_ref().map(|(_, tool)| tool.clone())
    }

    /// The names of the mounted tools, sorted.
    pub fn names(&self) -> Vec<String> {
        let state = lock(&self.state);
        state
            .names
            .iter()
            .filter(|(_, claim)| claim.mounted.is_some())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The definitions of the mounted tools, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let tools: Vec<Arc<dyn Tool>> = {
            let state = lock(&self.state);
            state
                .names
                .values()
                .filter_map(|claim| claim.mounted.as_ref().map(|(_, tool)| tool.clone()))
                .collect()
        };
        tools
            .iter()
            .map(|tool| ToolSpec {
                name: tool.name().to_owned(),
                description: tool.description().to_owned(),
                parameters: tool.parameters().clone(),
            })
            .collect()
    }

    /// Dispatches one call and renders its result, inside the call's
    /// `execute_tool <name>` span ([`execute_tool_span`](crate::trace::execute_tool_span)).
    ///
    /// A call whose token is already cancelled is refused before dispatch
    /// (`Error: tool call aborted before dispatch`, code
    /// [`ABORTED_BEFORE_DISPATCH`]); an unknown name and a panicking tool
    /// become error results too, so a call never panics the caller.
    ///
    /// The tool is looked up here, so the returned future borrows neither
    /// the registry nor `name`: a harness can spawn it as a task of its own
    /// (mapped to wherever its result goes) without moving the registry and
    /// the arguments into a wrapping `async` block, which would hold them
    /// beside the call's own copy for as long as the call runs. The span is
    /// made here too: under the subscriber and the parent span current when
    /// the call is made, not where it is later polled.
    pub fn call(
        &self,
        name: &str,
        args: Value,
        exec: ToolExecution,
    ) -> impl Future<Output = ToolResult> + Send + use<> {
        let span = crate::trace::execute_tool_span(name, &exec);
        // Kept small: a harness that spawns each call as a task holds this
        // future in the task's cell for as long as the call runs. The
        // arguments and the context are needed only until the first poll
        // hands them to the tool, so they wait in a box of their own (freed
        // then) rather than widening the future; a refusal waits boxed too.
        match self.dispatchable(name, &exec) {
            Err(refused) => {
                crate::trace::record_tool_result(&span, &refused);
                let refused = Box::new(refused);
                Either::Left(async move { *refused })
            }
            Ok(tool) => {
                let input = Box::new((args, exec));
                Either::Right(async move {
                    // Unboxed in a block of its own, so the box is freed
                    // now, not when the call ends.
                    let (args, exec) = {
                        let input = input;
                        *input
                    };
                    let result = match AssertUnwindSafe(started(&*tool, args, exec)).catch_unwind().await {
                        Ok(outcome) => ToolResult::from_outcome(outcome),
                        // The tool is mounted under its own name.
                        Err(panic) => panicked(tool.name(), &*panic),
                    };
                    crate::trace::record_tool_result(&tracing::Span::current(), &result);
                    result
                })
            }
        }
        .instrument(span)
    }

    /// The tool a call goes to, or the result that refuses it.
    fn dispatchable(&self, name: &str, exec: &ToolExecution) -> Result<Arc<dyn Tool>, ToolResult> {
        if exec.cancel().is_cancelled() {
            return Err(ToolError::new(wording::ABORTED_BEFORE_DISPATCH)
                .with_code(ABORTED_BEFORE_DISPATCH)
                .into());
        }
        self.get(name).ok_or_else(|| {
            ToolError::new(wording::unknown_tool(name))
                .with_code(crate::ErrorCode::UnknownTool)
                .into()
        })
    }
}

/// The call's future. A tool that panics in `execute` itself, before
/// returning its future (in work done before its `async` block), gets a
/// future that panics with the same payload when polled, so the one
/// `catch_unwind` around the future turns both into an error result.
fn started(tool: &dyn Tool, args: Value, exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
    std::panic::catch_unwind(AssertUnwindSafe(|| tool.execute(args, exec)))
        .unwrap_or_else(|panic| Box::pin(async move { std::panic::resume_unwind(panic) }))
}

fn panicked(name: &str, panic: &(dyn std::any::Any + Send)) -> ToolResult {
    ToolError::new(wording::tool_panicked(name, &panic_message(panic)))
        .with_code(crate::ErrorCode::ToolPanicked)
        .into()
}

/// Runs one tool outside any registry (a tool local to one agent, say): a
/// panic becomes an error result, as in [`ToolRegistry::call`]. Opens no span.
pub async fn execute(tool: &dyn Tool, args: Value, exec: ToolExecution) -> ToolResult {
    match AssertUnwindSafe(started(tool, args, exec)).catch_unwind().await {
        Ok(outcome) => ToolResult::from_outcome(outcome),
        Err(panic) => panicked(tool.name(), &*panic),
    }
}

/// The text of a panic payload, for error messages.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        wording::NON_STRING_PANIC.to_owned()
    }
}

/// A claim on a tool name. Dropping it frees the name and removes any tool
/// mounted under it.
#[must_use = "dropping a reservation frees the name at once"]
pub struct NameReservation {
    registry: ToolRegistry,
    name: String,
    id: u64,
}

impl NameReservation {
    /// The reserved name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mounts `tool`, whose name must be the reserved one. Dropping the
    /// returned handle unmounts it and keeps the reservation.
    pub fn mount(&self, tool: Arc<dyn Tool>) -> Result<MountedTool, RegistryError> {
        if tool.name() != self.name {
            return Err(RegistryError::NameMismatch {
                reserved: self.name.clone(),
                tool: tool.name().to_owned(),
            });
        }
        let mut state = lock(&self.registry.state);
        let mount_id = state.next_id();
        let claim = match state.names.get_mut(&self.name) {
            Some(claim) if claim.reservation == self.id => claim,
            // Unreachable while `self` is alive; report it as a conflict rather than panic.
            _ => {
                return Err(RegistryError::DuplicateName {
                    name: self.name.clone(),
                });
            }
        };
        if claim.mounted.is_some() {
            return Err(RegistryError::AlreadyMounted {
                name: self.name.clone(),
            });
        }
        claim.mounted = Some((mount_id, tool));
        Ok(MountedTool {
            registry: self.registry.clone(),
            name: self.name.clone(),
            reservation: self.id,
            id: mount_id,
        })
    }
}

impl Drop for NameReservation {
    fn drop(&mut self) {
        let removed = {
            let mut state = lock(&self.registry.state);
            match state.names.get(&self.name) {
                Some(claim) if claim.reservation == self.id => state.names.remove(&self.name),
                _ => None,
            }
        };
        // The tool (and whatever it owns) drops outside the lock.
        drop(removed);
    }
}

impl std::fmt::Debug for NameReservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameReservation").field("name", &self.name).finish()
    }
}

/// A tool mounted under a reservation. Dropping it unmounts the tool.
#[must_use = "dropping the handle unmounts the tool at once"]
pub struct MountedTool {
    registry: ToolRegistry,
    name: String,
    reservation: u64,
    id: u64,
}

impl MountedTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Unmounts the tool now (the same as dropping the handle).
    pub fn dispose(self) {}
}

impl Drop for MountedTool {
    fn drop(&mut self) {
        let removed = {
            let mut state = lock(&self.registry.state);
            match state.names.get_mut(&self.name) {
                Some(claim)
                    if claim.reservation == self.reservation
                        && claim.mounted.as_ref().is_some_and(|(id, _)| *id == self.id) =>
                {
                    claim.mounted.take()
                }
                _ => None,
            }
        };
        drop(removed);
    }
}

impl std::fmt::Debug for MountedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountedTool").field("name", &self.name).finish()
    }
}

/// A reserved and mounted tool. Dropping it (or [`ToolRegistration::dispose`])
/// removes the tool and frees its name.
#[must_use = "dropping the registration removes the tool at once"]
#[derive(Debug)]
pub struct ToolRegistration {
    // Field order is drop order: unmount, then free the name.
    _mounted: MountedTool,
    _reservation: NameReservation,
}

impl ToolRegistration {
    /// Removes the tool now (the same as dropping the handle).
    pub fn dispose(self) {}
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::CancellationToken;

    struct Echo(Value);

    impl Tool for Echo {
        fn name(&self) -> &str {
            "echo"
        }

        fn description(&self) -> &str {
            "Repeat the arguments."
        }

        fn parameters(&self) -> &Value {
            &self.0
        }

        fn execute(&self, args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
            Box::pin(async move { Ok(ToolOutput::text(args.to_string())) })
        }
    }

    /// A harness that spawns each call as a task holds the call's future in
    /// the task's cell for the whole call: the future keeps no room for the
    /// arguments and the context the tool took on the first poll, nor for
    /// a refusal.
    #[tokio::test]
    async fn a_call_in_flight_holds_only_the_tool_and_its_future() {
        let registry = ToolRegistry::new();
        let _registration = registry.register(Arc::new(Echo(json!({"type": "object"})))).unwrap();
        let exec = ToolExecution::new(CancellationToken::new());
        let args = json!({"text": "a somewhat longer argument than a pointer"});
        let call = registry.call("echo", args.clone(), exec.clone());
        // The span, the tool, the boxed input or the tool's boxed future
        // (96 B): with a oneshot sender beside it, a 256 B task cell.
        let size = std::mem::size_of_val(&call);
        assert!(size <= 112, "a call's future is {size} B");
        assert_eq!(call.await.text, args.to_string());
        let refused = registry.call("missing", Value::Null, exec).await;
        assert!(refused.is_error, "{}", refused.text);
    }

    /// Panics before returning its future (`early`) or while it is polled.
    struct Panics {
        early: bool,
        parameters: Value,
    }

    impl Tool for Panics {
        fn name(&self) -> &str {
            "panics"
        }

        fn description(&self) -> &str {
            "Panic."
        }

        fn parameters(&self) -> &Value {
            &self.parameters
        }

        fn execute(&self, _args: Value, _exec: ToolExecution) -> BoxFuture<'_, Result<ToolOutput, ToolError>> {
            if self.early {
                panic!("before the future");
            }
            Box::pin(async { panic!("inside the future") })
        }
    }

    /// A panic is an error result wherever the tool panics: in `execute`
    /// itself, or in the future it returned; through the registry, and
    /// through [`execute`]. The tool stays mounted.
    #[tokio::test]
    async fn a_panic_before_or_inside_the_future_is_an_error_result() {
        for (early, message) in [(true, "before the future"), (false, "inside the future")] {
            let tool = Arc::new(Panics {
                early,
                parameters: json!({"type": "object"}),
            });
            let registry = ToolRegistry::new();
            let _registration = registry.register(tool.clone()).unwrap();
            let exec = ToolExecution::new(CancellationToken::new());
            let expected = format!("Error: tool \"panics\" panicked: {message}");
            let called = registry.call("panics", json!({}), exec.clone()).await;
            assert_eq!(called.text, expected);
            assert!(called.error.unwrap().has_code(crate::ErrorCode::ToolPanicked));
            let executed = execute(&*tool, json!({}), exec).await;
            assert_eq!(executed.text, expected);
            assert!(registry.get("panics").is_some());
        }
    }
}
