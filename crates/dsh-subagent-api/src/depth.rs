//! Depth accounting: a child is one level deeper than its parent, and a
//! [`DepthLimit`] caps how deep it may be.

use crate::SubagentError;

/// The largest integer every JSON reader represents exactly (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// An absolute cap on a child's depth (a top-level agent is at depth 0, its
/// children at 1): a whole number from 0 to [`MAX_SAFE_INTEGER`]; `0`
/// forbids delegation. Checked when made, so a cap that exists is one every
/// reader of the tree can hold, from the tool's configuration across the
/// provider seam ([`ChildSettings::max_depth`](crate::ChildSettings::max_depth))
/// to the check of each child ([`child_depth`]).
///
/// ```
/// use dsh_subagent_api::{DepthLimit, MAX_SAFE_INTEGER};
/// assert_eq!(DepthLimit::new(3).map(DepthLimit::depth), Ok(3));
/// assert_eq!(
///     DepthLimit::new(MAX_SAFE_INTEGER + 1).unwrap_err().to_string(),
///     "subagent maxDepth must be a non-negative safe integer"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DepthLimit(u64);

impl DepthLimit {
    /// A cap of `depth`; refused past [`MAX_SAFE_INTEGER`] (`INVALID_MAX_DEPTH`).
    pub const fn new(depth: u64) -> Result<Self, SubagentError> {
        if depth > MAX_SAFE_INTEGER {
            return Err(SubagentError::InvalidMaxDepth);
        }
        Ok(Self(depth))
    }

    /// A cap of `depth` levels, which a 32-bit number always is within
    /// the safe range, so no check can fail (for a cap written in code).
    pub const fn levels(depth: u32) -> Self {
        Self(depth as u64)
    }

    /// The deepest a child may be.
    pub const fn depth(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for DepthLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// The depth of a child of a parent at `parent_depth`, checked against `max_depth`.
///
/// # Errors
/// - the parent's depth is past the safe-integer range: `agent subagentDepth must be a non-negative safe integer`;
/// - the child's depth would be: `subagent child depth exceeds the safe-integer range`;
/// - the child is too deep: `subagent depth <child> exceeds maxDepth <max>`.
///
/// ```
/// use dsh_subagent_api::{child_depth, DepthLimit};
/// let cap = |depth| DepthLimit::new(depth).ok();
/// assert_eq!(child_depth(0, cap(1)), Ok(1));
/// assert_eq!(
///     child_depth(3, cap(3)).unwrap_err().to_string(),
///     "subagent depth 4 exceeds maxDepth 3"
/// );
/// ```
pub fn child_depth(parent_depth: u64, max_depth: Option<DepthLimit>) -> Result<u64, SubagentError> {
    if parent_depth > MAX_SAFE_INTEGER {
        return Err(SubagentError::InvalidAgentDepth);
    }
    let child = parent_depth + 1;
    if child > MAX_SAFE_INTEGER {
        return Err(SubagentError::DepthOverflow);
    }
    if let Some(max) = max_depth
        && child > max.depth()
    {
        return Err(SubagentError::DepthExceeded {
            attempted: child,
            max: max.depth(),
        });
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_errors_use_the_contract_texts() {
        assert_eq!(
            child_depth(0, DepthLimit::new(0).ok()).unwrap_err().to_string(),
            "subagent depth 1 exceeds maxDepth 0"
        );
        assert_eq!(
            child_depth(MAX_SAFE_INTEGER, None).unwrap_err().to_string(),
            "subagent child depth exceeds the safe-integer range"
        );
        assert_eq!(
            child_depth(MAX_SAFE_INTEGER + 1, None).unwrap_err().to_string(),
            "agent subagentDepth must be a non-negative safe integer"
        );
        assert_eq!(
            DepthLimit::new(MAX_SAFE_INTEGER + 1).unwrap_err().to_string(),
            "subagent maxDepth must be a non-negative safe integer"
        );
        assert_eq!(child_depth(2, None), Ok(3));
    }
}
