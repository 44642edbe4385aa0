//! `dsh run`'s live view on a terminal: the delegation tree, redrawn in
//! place as it runs (children appear, wait, run and finish; tokens and cost
//! rise), in the lines `dsh tree` prints.
//!
//! Events only feed a [`LiveTree`] (a few map operations under a lock); one
//! thread draws it, at most every [`FRAME`], and only when the drawing
//! changed. Plain ANSI escapes: up to the first line drawn, clear to the end
//! of the screen, the new lines. A frame is fitted to the terminal (each
//! line to its width, the tree to its height) so the count of lines to go
//! back up stays true; the last frame, drawn once the run has ended, is the
//! whole tree.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use dsh_agent::transcript::now_ms;
use dsh_tree::LiveTree;

use crate::tree::text;
use crate::wording;

/// The shortest time between two frames.
pub(crate) const FRAME: Duration = Duration::from_millis(100);

/// The live view: the tree it draws, once the top-level agent is known, and
/// the thread drawing it.
#[derive(Default)]
pub(crate) struct LiveView {
    tree: OnceLock<Arc<LiveTree>>,
    /// Set when the run has ended: the drawer draws its last frame and stops.
    ended: Arc<(Mutex<bool>, Condvar)>,
    drawer: Mutex<Option<JoinHandle<()>>>,
}

impl LiveView {
    /// The tree being drawn, once [`start`](Self::start) has named its root.
    pub(crate) fn tree(&self) -> Option<&LiveTree> {
        self.tree.get().map(Arc::as_ref)
    }

    /// Starts drawing the tree of top-level agent `root` (with its label and
    /// model) on stderr. Only the first call starts anything.
    pub(crate) fn start(&self, root: &str, label: &str, model: &str) {
        let tree = Arc::new(LiveTree::new(root, Some(label.to_owned()), Some(model.to_owned())));
        if self.tree.set(tree.clone()).is_err() {
            return;
        }
        let ended = self.ended.clone();
        let drawer = std::thread::Builder::new()
            .name("dsh-live-view".to_owned())
            .spawn(move || draw_until_ended(&tree, &ended));
        // Without a thread there is no live view; the run goes on.
        if let Ok(drawer) = drawer {
            *self.drawer.lock().unwrap_or_else(PoisonError::into_inner) = Some(drawer);
        }
    }

    /// The top-level agent's run ended with `stop`: the last frame, the whole
    /// tree, is drawn before this returns.
    pub(crate) fn finish(&self, stop: &str) {
        if let Some(tree) = self.tree() {
            tree.root_ended(stop);
        }
        let (ended, wake) = &*self.ended;
        *ended.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
        let drawer = self.drawer.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(drawer) = drawer {
            let _ = drawer.join();
        }
    }
}

/// Draws `tree` every [`FRAME`] while it changes, then once more, whole,
/// when `ended` is set.
fn draw_until_ended(tree: &LiveTree, ended: &(Mutex<bool>, Condvar)) {
    let mut screen = Screen::default();
    let (flag, wake) = ended;
    loop {
        let done = {
            let guard = flag.lock().unwrap_or_else(PoisonError::into_inner);
            let (guard, _) = wake
                .wait_timeout_while(guard, FRAME, |ended| !*ended)
                .unwrap_or_else(PoisonError::into_inner);
            *guard
        };
        let lines = text::lines(&tree.snapshot(), now_ms());
        let size = if done { None } else { terminal_size() };
        screen.draw(fit(lines, size));
        if done {
            return;
        }
    }
}

/// The terminal's rows and columns, when stderr is one and says.
fn terminal_size() -> Option<(usize, usize)> {
    console::Term::stderr()
        .size_checked()
        .map(|(rows, columns)| (usize::from(rows), usize::from(columns)))
}

/// `lines` fitted to a terminal of `size` (rows, columns): each line cut to
/// one column less than its width (a full line would wrap on some
/// terminals), and a tree taller than it shows its root, a line saying how
/// many lines are left out, and its last lines (where children start and
/// run). Without a size, the lines as they are.
pub(crate) fn fit(mut lines: Vec<String>, size: Option<(usize, usize)>) -> Vec<String> {
    let Some((rows, columns)) = size else {
        return lines;
    };
    // One row stays free for the cursor below the frame.
    let room = rows.saturating_sub(1).max(3);
    if lines.len() > room {
        let hidden = lines.len() - (room - 1);
        let tail = lines.split_off(hidden + 1);
        lines.truncate(1);
        lines.push(wording::live_hidden(hidden));
        lines.extend(tail);
    }
    let width = columns.saturating_sub(1).max(8);
    lines
        .into_iter()
        .map(|line| console::truncate_str(&line, width, "…").into_owned())
        .collect()
}

/// What the view last drew: the frame's lines, to go back over and to skip
/// a frame that would draw the same.
#[derive(Default)]
struct Screen {
    drawn: Vec<String>,
}

impl Screen {
    /// Replaces the last frame with `lines`, when they differ.
    fn draw(&mut self, lines: Vec<String>) {
        if lines == self.drawn {
            return;
        }
        let frame = frame(self.drawn.len(), &lines);
        let mut stderr = std::io::stderr().lock();
        // A terminal that stopped taking writes ends nothing: the run goes on.
        let _ = stderr.write_all(frame.as_bytes());
        let _ = stderr.flush();
        self.drawn = lines;
    }
}

/// The bytes that replace a frame of `drawn` lines with `lines`: up to the
/// first line drawn (`ESC [ n F`), clear to the end of the screen
/// (`ESC [ J`), the new lines.
pub(crate) fn frame(drawn: usize, lines: &[String]) -> String {
    let mut out = String::new();
    if drawn > 0 {
        out.push_str(&format!("\x1b[{drawn}F"));
    }
    out.push_str("\x1b[J");
    for line in lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(count: usize) -> Vec<String> {
        (0..count).map(|line| format!("line {line}")).collect()
    }

    #[test]
    fn a_tall_tree_keeps_its_root_and_last_lines_and_says_how_many_are_left_out() {
        let fitted = fit(lines(30), Some((10, 80)));
        assert_eq!(fitted.len(), 9);
        assert_eq!(fitted[0], "line 0");
        assert_eq!(fitted[1], "… 22 lines not shown");
        assert_eq!(fitted[2], "line 23");
        assert_eq!(fitted[8], "line 29");
        assert_eq!(fit(lines(9), Some((10, 80))), lines(9));
        assert_eq!(fit(lines(30), None), lines(30), "the last frame is whole");
    }

    #[test]
    fn a_wide_line_is_cut_to_the_terminal() {
        let fitted = fit(
            vec!["├─ subagent \"long label\" · completed".to_owned()],
            Some((24, 16)),
        );
        assert_eq!(fitted, ["├─ subagent \"l…"]);
    }

    #[test]
    fn a_frame_goes_back_over_the_last_and_clears_it() {
        assert_eq!(frame(0, &lines(1)), "\x1b[Jline 0\n");
        assert_eq!(frame(3, &lines(2)), "\x1b[3F\x1b[Jline 0\nline 1\n");
    }
}
