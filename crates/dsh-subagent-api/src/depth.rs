//! Depth accounting: a child is one level deeper than its parent.

use crate::SubagentError;

/// The largest integer every JSON reader represents exactly (2^53 - 1).
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Checks a `maxDepth` value: a safe integer (at most [`MAX_SAFE_INTEGER`]).
pub fn validate_max_depth(max_depth: u64) -> Result<u64, SubagentError> {
    if max_depth > MAX_SAFE_INTEGER {
        return Err(SubagentError::InvalidMaxDepth);
    }
    Ok(max_depth)
}

/// The depth of a child of a parent at `parent_depth`, checked against `max_depth`.
///
/// # Errors
/// - the parent's depth is past the safe-integer range: `agent subagentDepth must be a non-negative safe integer`;
/// - the child's depth would be: `subagent child depth exceeds the safe-integer range`;
/// - `max_depth` is invalid: `subagent maxDepth must be a non-negative safe integer`;
/// - the child is too deep: `subagent depth <child> exceeds maxDepth <max>`.
///
/// ```
/// use dsh_subagent_api::{child_depth, SubagentError};
/// assert_eq!(child_depth(0, Some(1)), Ok(1));
/// assert_eq!(
///     child_depth(3, Some(3)).unwrap_err().to_string(),
///     "subagent depth 4 exceeds maxDepth 3"
/// );
/// ```
pub fn child_depth(parent_depth: u64, max_depth: Option<u64>) -> Result<u64, SubagentError> {
    if parent_depth > MAX_SAFE_INTEGER {
        return Err(SubagentError::InvalidAgentDepth);
    }
    let child = parent_depth + 1;
    if child > MAX_SAFE_INTEGER {
        return Err(SubagentError::DepthOverflow);
    }
    if let Some(max) = max_depth {
        let max = validate_max_depth(max)?;
        if child > max {
            return Err(SubagentError::DepthExceeded { attempted: child, max });
        }
    }
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_errors_use_the_contract_texts() {
        assert_eq!(
            child_depth(0, Some(0)).unwrap_err().to_string(),
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
            child_depth(0, Some(MAX_SAFE_INTEGER + 1)).unwrap_err().to_string(),
            "subagent maxDepth must be a non-negative safe integer"
        );
        assert_eq!(child_depth(2, None), Ok(3));
    }
}
