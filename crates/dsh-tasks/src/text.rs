//! Task outputs: kept in memory in a store with a byte bound, or read again
//! from where their producer keeps them (a child's transcript).
//!
//! A [`TextStore`] holds texts up to its bound, in the order they were
//! kept. Keeping one more evicts the oldest until the store is within its
//! bound again. The bound is hard: a text larger than the whole bound is
//! not kept at all (nothing is evicted for it), and reads as no longer
//! kept from the start. A text is freed when the last [`TaskText`] naming
//! it is dropped (its task was forgotten), or when it is evicted: reading
//! it then answers that it is no longer kept. Nothing is ever produced
//! again to answer a read.
//!
//! One store serves the whole process unless a harness names another
//! ([`TextStore::process`], which [`TextStore::default`] shares): however
//! many sessions, trees and registries a process holds, their kept outputs
//! together stay within [`DEFAULT_KEPT_BYTES`].

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use dsh_tools::TextSource;
use dsh_tools::budget::TextSize;

use crate::lock;

/// The bytes of output the process's [`TextStore`] keeps: 32 MiB, a
/// thousand cut results at the default result budget's 32,000 bytes, or
/// sixteen answers of 2 MB.
pub const DEFAULT_KEPT_BYTES: usize = 32 * 1024 * 1024;

/// The store every [`TextStore::process`] handle shares.
static PROCESS: OnceLock<TextStore> = OnceLock::new();

/// Texts kept in memory up to a byte bound, oldest out first. Cheap to
/// clone: clones share the texts and the bound.
///
/// ```
/// use dsh_tasks::TextStore;
/// let store = TextStore::new(10);
/// let first = store.keep("123456".to_owned());
/// let second = store.keep("abcdef".to_owned());
/// // Twelve bytes are over the bound of ten: the oldest went.
/// assert_eq!(first.kept(), None);
/// assert_eq!(first.size().chars, 6);
/// assert_eq!(second.kept().as_deref().map(String::as_str), Some("abcdef"));
/// assert_eq!(store.held(), 6);
/// // A text larger than the bound is not kept, and evicts nothing.
/// let huge = store.keep("x".repeat(11));
/// assert_eq!((huge.kept(), huge.size().chars), (None, 11));
/// assert_eq!(store.held(), 6);
/// ```
#[derive(Clone)]
pub struct TextStore {
    shelf: Arc<Mutex<Shelf>>,
}

struct Shelf {
    bound: usize,
    /// The bytes of every text held.
    held: usize,
    /// The last key issued; keys grow in the order texts are kept.
    last: u64,
    texts: BTreeMap<u64, Arc<String>>,
}

impl Shelf {
    fn remove(&mut self, key: u64) {
        if let Some(text) = self.texts.remove(&key) {
            self.held -= text.len();
        }
    }
}

impl TextStore {
    /// A store of its own that keeps at most `bound` bytes of text, apart
    /// from the process's ([`TextStore::process`]).
    pub fn new(bound: usize) -> Self {
        Self {
            shelf: Arc::new(Mutex::new(Shelf {
                bound,
                held: 0,
                last: 0,
                texts: BTreeMap::new(),
            })),
        }
    }

    /// The store of the whole process: [`DEFAULT_KEPT_BYTES`], shared by
    /// every handle this returns (and by [`TextStore::default`]), so the
    /// kept outputs of every session, tree and registry of the process
    /// count against one bound.
    pub fn process() -> Self {
        PROCESS.get_or_init(|| Self::new(DEFAULT_KEPT_BYTES)).clone()
    }

    /// Whether a text of `bytes` bytes can be kept at all (it is no larger
    /// than the bound): a larger one is refused by [`TextStore::keep`].
    pub fn can_keep(&self, bytes: usize) -> bool {
        bytes <= self.bound()
    }

    /// The bound, in bytes.
    pub fn bound(&self) -> usize {
        lock(&self.shelf).bound
    }

    /// The bytes of text held now.
    pub fn held(&self) -> usize {
        lock(&self.shelf).held
    }

    /// Keeps `text` (moved or shared, never copied), evicting the oldest
    /// texts until the store is within its bound, and returns the handle
    /// that reads it. An empty text takes no room. A text larger than the
    /// bound is not kept and evicts nothing: its handle knows its size and
    /// reads as no longer kept.
    pub fn keep(&self, text: impl Into<Arc<String>>) -> TaskText {
        let text = text.into();
        if text.is_empty() {
            return TaskText::default();
        }
        let size = TextSize::of(&text);
        let mut shelf = lock(&self.shelf);
        shelf.last += 1;
        let key = shelf.last;
        let place = Place::Kept {
            shelf: self.shelf.clone(),
            key,
        };
        if text.len() > shelf.bound {
            drop(shelf);
            return TaskText(Some(Arc::new(Held { size, place })));
        }
        shelf.held += text.len();
        shelf.texts.insert(key, text);
        // Evicted texts are dropped after the lock is released.
        let mut evicted = Vec::new();
        while shelf.held > shelf.bound
            && let Some((&oldest, _)) = shelf.texts.first_key_value()
            && oldest != key
        {
            if let Some(text) = shelf.texts.remove(&oldest) {
                shelf.held -= text.len();
                evicted.push(text);
            }
        }
        drop(shelf);
        drop(evicted);
        TaskText(Some(Arc::new(Held { size, place })))
    }
}

impl Default for TextStore {
    /// The process's store ([`TextStore::process`]).
    fn default() -> Self {
        Self::process()
    }
}

/// Two handles are equal when they share their texts.
impl PartialEq for TextStore {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shelf, &other.shelf)
    }
}

impl Eq for TextStore {}

impl fmt::Debug for TextStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shelf = lock(&self.shelf);
        f.debug_struct("TextStore")
            .field("bound", &shelf.bound)
            .field("held", &shelf.held)
            .field("texts", &shelf.texts.len())
            .finish()
    }
}

/// A task's output: empty, kept in a [`TextStore`], or read again from its
/// producer's [`TextSource`]. Cheap to clone: a snapshot of a task shares
/// its text, never copies it.
///
/// Two outputs are equal when they are the same output (both empty, or
/// clones of one), not when their texts match.
#[derive(Clone, Default)]
pub struct TaskText(Option<Arc<Held>>);

struct Held {
    size: TextSize,
    place: Place,
}

enum Place {
    Kept { shelf: Arc<Mutex<Shelf>>, key: u64 },
    Source(Arc<dyn TextSource>),
}

impl Drop for Held {
    /// The last handle of a kept text frees it.
    fn drop(&mut self) {
        if let Place::Kept { shelf, key } = &self.place {
            lock(shelf).remove(*key);
        }
    }
}

impl TaskText {
    /// An output read again from `source` whenever it is read; `size` is
    /// the size of the text it must read (anything else reads as gone).
    pub fn from_source(source: Arc<dyn TextSource>, size: TextSize) -> Self {
        if size.bytes == 0 {
            return Self::default();
        }
        Self(Some(Arc::new(Held {
            size,
            place: Place::Source(source),
        })))
    }

    /// The size of the text, kept or not.
    pub fn size(&self) -> TextSize {
        self.0.as_ref().map(|held| held.size).unwrap_or_default()
    }

    /// Whether there is no text.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The text, when it is held in memory: `Some("")` when empty, `None`
    /// when it was evicted or lives in a source ([`TaskText::read`] reads
    /// that).
    pub fn kept(&self) -> Option<Arc<String>> {
        match self.0.as_deref() {
            None => Some(Arc::default()),
            Some(Held {
                place: Place::Kept { shelf, key },
                ..
            }) => lock(shelf).texts.get(key).cloned(),
            Some(Held {
                place: Place::Source(_),
                ..
            }) => None,
        }
    }

    /// The text, or `None` when it is no longer kept: evicted from its
    /// store, or gone from (or changed in) its source. A source is read on
    /// a blocking thread.
    pub async fn read(&self) -> Option<Arc<String>> {
        let Some(Held {
            size,
            place: Place::Source(source),
        }) = self.0.as_deref()
        else {
            return self.kept();
        };
        let (size, source) = (*size, source.clone());
        let text = tokio::task::spawn_blocking(move || source.read()).await.ok()??;
        (TextSize::of(&text) == size).then(|| Arc::new(text))
    }
}

impl PartialEq for TaskText {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for TaskText {}

impl fmt::Debug for TaskText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let place = match self.0.as_deref().map(|held| &held.place) {
            None => "empty",
            Some(Place::Kept { .. }) => "kept",
            Some(Place::Source(_)) => "source",
        };
        f.debug_struct("TaskText")
            .field("size", &self.size())
            .field("place", &place)
            .finish()
    }
}

/// A completed task's output, as its producer hands it over: the text
/// (kept in the task's store), or where it can be read again.
#[derive(Clone)]
pub enum Output {
    /// The text itself (shared, so a producer that still reads it after
    /// handing it over need not copy it).
    Text(Arc<String>),
    /// A source that reads the text again (a child's transcript), and the
    /// text's size; nothing is held in memory.
    Source {
        /// Where the text is read from.
        source: Arc<dyn TextSource>,
        /// The size of the text.
        size: TextSize,
    },
}

impl Output {
    /// The output as a task holds it: a text goes into `store`.
    pub(crate) fn into_text(self, store: &TextStore) -> TaskText {
        match self {
            Self::Text(text) => store.keep(text),
            Self::Source { source, size } => TaskText::from_source(source, size),
        }
    }
}

impl From<String> for Output {
    fn from(text: String) -> Self {
        Self::Text(Arc::new(text))
    }
}

impl From<&str> for Output {
    fn from(text: &str) -> Self {
        Self::Text(Arc::new(text.to_owned()))
    }
}

/// Texts are equal when they match; sources when they are the same source
/// of the same size.
impl PartialEq for Output {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Text(a), Self::Text(b)) => a == b,
            (Self::Source { source: a, size: x }, Self::Source { source: b, size: y }) => Arc::ptr_eq(a, b) && x == y,
            _ => false,
        }
    }
}

impl Eq for Output {}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(text) => f.debug_tuple("Text").field(&text.len()).finish(),
            Self::Source { source, size } => f
                .debug_struct("Source")
                .field("source", source)
                .field("size", size)
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Fixed(&'static str);

    impl TextSource for Fixed {
        fn read(&self) -> Option<String> {
            Some(self.0.to_owned())
        }
    }

    #[test]
    fn the_oldest_text_goes_first_and_a_text_over_the_bound_is_not_kept() {
        let store = TextStore::new(10);
        let a = store.keep("aaaa".to_owned());
        let b = store.keep("bbbb".to_owned());
        assert_eq!(store.held(), 8);
        let c = store.keep("cccc".to_owned());
        assert_eq!(a.kept(), None, "evicted");
        assert_eq!(a.size().bytes, 4, "its size is still known");
        assert_eq!(b.kept().unwrap().as_str(), "bbbb");
        assert_eq!(c.kept().unwrap().as_str(), "cccc");
        let huge = store.keep("x".repeat(25));
        assert_eq!(store.held(), 8, "a text over the bound is not kept, and evicts nothing");
        assert_eq!(huge.kept(), None);
        assert_eq!(huge.size().bytes, 25);
        assert_eq!(b.kept().unwrap().as_str(), "bbbb");
        let full = store.keep("y".repeat(10));
        assert_eq!(store.held(), 10, "a text of the whole bound is kept alone");
        assert_eq!((b.kept(), c.kept()), (None, None));
        assert_eq!(full.kept().unwrap().len(), 10);
        assert!(store.can_keep(10) && !store.can_keep(11));
    }

    #[test]
    fn every_default_store_is_the_processs_one() {
        assert_eq!(TextStore::default(), TextStore::process());
        assert_eq!(TextStore::process().bound(), DEFAULT_KEPT_BYTES);
        assert_ne!(TextStore::new(DEFAULT_KEPT_BYTES), TextStore::process());
    }

    #[test]
    fn dropping_the_last_handle_frees_the_text() {
        let store = TextStore::new(100);
        let text = store.keep("12345".to_owned());
        let clone = text.clone();
        drop(text);
        assert_eq!(store.held(), 5);
        drop(clone);
        assert_eq!(store.held(), 0);
        assert!(store.keep(String::new()).is_empty());
        assert_eq!(store.held(), 0);
    }

    #[tokio::test]
    async fn a_source_is_read_again_and_checked_against_its_size() {
        let right = TaskText::from_source(Arc::new(Fixed("answer")), TextSize::of("answer"));
        assert_eq!(right.kept(), None);
        assert_eq!(right.read().await.unwrap().as_str(), "answer");
        let changed = TaskText::from_source(Arc::new(Fixed("other text")), TextSize::of("answer"));
        assert_eq!(changed.read().await, None);
        assert_eq!(TaskText::default().read().await.unwrap().as_str(), "");
    }
}
