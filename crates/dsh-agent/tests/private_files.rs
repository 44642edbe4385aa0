//! Transcripts hold every prompt and answer: they are private to the user
//! running the agent. Files are 0600 and the directories dsh makes 0700,
//! whatever the umask, and a transcript directory or file found with
//! looser modes is tightened when a transcript is opened there. A data
//! directory that already existed keeps its mode: it is not dsh's, and the
//! `agents/` directory inside it is what keeps the files private.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use dsh_agent::transcript::{TranscriptEntry, TranscriptWriter, transcript_path};
use dsh_tools::AgentId;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn write(data_dir: &Path, id: &str) -> std::path::PathBuf {
    let path = transcript_path(data_dir, &AgentId::new(id));
    let writer = TranscriptWriter::open(path.clone()).unwrap();
    writer
        .append(&TranscriptEntry::TurnEnd {
            stop: "completed".into(),
            reason: None,
            steps: 1,
            usage: None,
            children_usage: None,
            cost: None,
            times: None,
        })
        .unwrap();
    writer.flush().unwrap();
    path
}

#[test]
fn a_new_data_directory_its_agents_directory_and_transcripts_are_private() {
    let root = tempfile::tempdir().unwrap();
    let data_dir = root.path().join("new/.dsh");
    let path = write(&data_dir, "a1");
    assert_eq!(mode(&path), 0o600, "the transcript");
    assert_eq!(mode(path.parent().unwrap()), 0o700, "agents/");
    assert_eq!(mode(&data_dir), 0o700, "the data directory dsh made");
    assert_eq!(mode(&root.path().join("new")), 0o700, "every directory dsh made");
}

#[test]
fn looser_modes_found_on_disk_are_tightened_when_a_transcript_is_opened() {
    let root = tempfile::tempdir().unwrap();
    let data_dir = root.path().join("shared");
    std::fs::create_dir_all(data_dir.join("agents")).unwrap();
    set_mode(&data_dir, 0o755);
    set_mode(&data_dir.join("agents"), 0o755);
    // A transcript written by an older dsh, readable by everyone.
    let old = transcript_path(&data_dir, &AgentId::new("old"));
    std::fs::write(&old, "").unwrap();
    set_mode(&old, 0o644);

    let new = write(&data_dir, "new");
    assert_eq!(mode(&new), 0o600);
    assert_eq!(mode(&data_dir.join("agents")), 0o700, "agents/ is tightened");
    assert_eq!(mode(&data_dir), 0o755, "a data directory that existed keeps its mode");
    assert_eq!(mode(&old), 0o644, "a transcript nobody opened is left as it was");

    write(&data_dir, "old");
    assert_eq!(mode(&old), 0o600, "a transcript opened again is tightened");
}
