//! Making a transcript fit to be appended to again after a crash: the torn
//! last line (a write the crash cut short) is cut off and kept.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

use crate::{Transcript, TranscriptEntry, TranscriptWriter};

/// Cuts a torn last line off the file and records it as a
/// [`TranscriptEntry::Repair`], so appending after a crash never glues a new
/// entry onto the torn bytes. A complete last entry that lost only its
/// newline gets the newline back. Returns the diagnostic that was recorded.
pub fn repair_torn_tail(path: &Path, transcript: &Transcript) -> std::io::Result<Option<String>> {
    let Some(torn) = &transcript.torn else {
        let mut file = OpenOptions::new().read(true).append(true).open(path)?;
        let length = file.metadata()?.len();
        if length > 0 {
            use std::io::{Read, Seek, SeekFrom};
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(length - 1))?;
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
            }
        }
        return Ok(None);
    };
    let diagnostic = transcript.diagnostic.clone().unwrap_or_default();
    let file = OpenOptions::new().write(true).open(path)?;
    let length = file.metadata()?.len();
    file.set_len(length.saturating_sub(torn.len() as u64))?;
    file.sync_all()?;
    drop(file);
    let writer = TranscriptWriter::open(path.to_owned())?;
    writer.append(&TranscriptEntry::Repair {
        diagnostic: diagnostic.clone(),
        torn: String::from_utf8_lossy(torn).into_owned(),
    })?;
    writer.flush()?;
    Ok(Some(diagnostic))
}

/// Prepares a transcript to be continued after a crash: cuts a torn last
/// line off ([`repair_torn_tail`]). The turn the agent had not ended stays
/// in the file, to be resumed ([`Transcript::turns`]). Returns what was
/// repaired, one diagnostic per repair.
pub fn repair_for_resume(path: &Path, transcript: &Transcript) -> std::io::Result<Vec<String>> {
    Ok(repair_torn_tail(path, transcript)?.into_iter().collect())
}
