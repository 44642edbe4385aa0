//! Owner-only modes for what the agent loop writes to disk (transcripts,
//! lock files, kept facts): 0600 files in 0700 directories, whatever the
//! umask (a no-op off Unix).

use std::fs::{File, OpenOptions};
use std::path::Path;

/// Group and other permission bits.
#[cfg(unix)]
const SHARED: u32 = 0o077;

/// Makes `dir` and any missing directory above it 0700; tightens `dir`
/// itself to 0700 if it had group or other access.
pub fn dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        if std::fs::metadata(dir)?.permissions().mode() & SHARED != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir)
}

/// A file these options create is made 0600.
pub fn file_options(options: &mut OpenOptions) {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, 0o600);
    #[cfg(not(unix))]
    let _ = options;
}

/// Tightens an open file to 0600 if it had group or other access.
pub fn tighten_file(file: &File) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if file.metadata()?.permissions().mode() & SHARED != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}
