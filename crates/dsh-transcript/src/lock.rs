//! Who runs a delegation tree now: the process holding its top-level
//! agent's lock file, `locks/<id>.lock` in the data directory.
//!
//! The lock is an advisory file lock (`flock`), released by the operating
//! system when its holder exits, however it exits: a tree whose lock is free
//! and whose turns are not ended was interrupted (a crash, a resumable
//! stop), not running. A second process that wants to run the same tree
//! (two resumes of one parent at once) is refused.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use dsh_subagent_api::AgentId;

/// The held lock of one delegation tree; released when dropped.
#[derive(Debug)]
pub struct TreeLock {
    path: PathBuf,
    _file: File,
}

/// Why a tree's lock was not taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeLockError {
    /// Another process runs the tree.
    #[error("{}", crate::wording::tree_busy(path))]
    Busy {
        /// The lock file.
        path: PathBuf,
    },
    /// The lock file could not be made or locked (a read-only data
    /// directory, say).
    #[error("{}", crate::wording::tree_lock_failed(path, source))]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The lock file of the tree whose top-level agent is `root`.
pub fn lock_path(data_dir: &Path, root: &AgentId) -> PathBuf {
    data_dir.join("locks").join(format!("{root}.lock"))
}

impl TreeLock {
    /// Takes the lock of `root`'s tree, or says who has it.
    pub fn acquire(data_dir: &Path, root: &AgentId) -> Result<Self, TreeLockError> {
        let path = lock_path(data_dir, root);
        let io = |source| TreeLockError::Io {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            crate::owner_only::dir(dir).map_err(io)?;
        }
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).write(true);
        crate::owner_only::file_options(&mut options);
        let file = options.open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => Ok(Self { path, _file: file }),
            Err(TryLockError::WouldBlock) => Err(TreeLockError::Busy { path }),
            Err(TryLockError::Error(source)) => Err(io(source)),
        }
    }

    /// Whether some process holds the lock of `root`'s tree now: it runs.
    /// A tree without a lock file (an older data directory) is not running.
    pub fn is_held(data_dir: &Path, root: &AgentId) -> bool {
        let Ok(file) = File::open(lock_path(data_dir, root)) else {
            return false;
        };
        matches!(file.try_lock_shared(), Err(TryLockError::WouldBlock))
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a lock file of `root`'s tree was left behind by a process
    /// that ended without removing it ([`TreeLock::remove`]): one that did
    /// not end cleanly (a crash, a kill).
    pub fn left_behind(data_dir: &Path, root: &AgentId) -> bool {
        lock_path(data_dir, root).is_file() && !Self::is_held(data_dir, root)
    }

    /// Lets the lock go and removes its file: the tree ended cleanly, and
    /// leaves no mark ([`TreeLock::left_behind`]).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let root = AgentId::new("root");
        assert!(!TreeLock::is_held(dir.path(), &root));
        let lock = TreeLock::acquire(dir.path(), &root).unwrap();
        assert!(TreeLock::is_held(dir.path(), &root));
        let busy = TreeLock::acquire(dir.path(), &root).unwrap_err();
        assert!(matches!(busy, TreeLockError::Busy { .. }), "{busy}");
        drop(lock);
        assert!(!TreeLock::is_held(dir.path(), &root));
        TreeLock::acquire(dir.path(), &root).unwrap();
    }
}
