//! The directories of one walk that are still waiting: on files at the workers, or on a
//! directory below them that is. The walker does not stop at the end of a directory until
//! its files are stored; it goes on to the next entry of the parent, and the directory's tree
//! is written when its last file (or subdirectory) comes back. So a few large changed files
//! in different directories are read at the same time, with the rest of the walk, where a
//! walker waiting at each directory's end took them one after another (measured on the
//! benchmark corpus after 1% changed, 100 files of 23 MB: the walker spent about 190 ms of a
//! 250 ms capture waiting on them in turn).
//!
//! Bounds: at most `IN_FLIGHT` files are at the workers for the whole walk (the walker takes
//! one answer before it sends another past that), so the directories held open are those on
//! the paths from at most that many files up to the root, each holding its entries.
//!
//! Order does not depend on timing. Every entry the walker classifies takes the next number
//! of the walk (its walk order: depth first, names sorted). Skips are kept with that number
//! and reported in walk order when the walk ends. A failure is kept with the number of the
//! entry it belongs to, and the walk's failure is the one with the smallest number: after the
//! first failure the walker stops sending files, and every file it already sent is answered
//! (a worker answers a file numbered past the smallest failure unread: it cannot win), so all
//! the entries before the winner were looked at, whatever order the answers came in.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use zeroclaw_bundle_store::TreeEntry;

use crate::capture::file::{FileJob, FileOutcome};
use crate::capture::{CaptureError, SkipReason, Walked};

/// A worker's answer: the job it was given and what became of the file.
pub(crate) type Answer = (FileJob, FileOutcome);

/// Where a directory's finished tree goes: the parent directory's key, the slot there, and
/// the entry's name.
pub(crate) type Parent = (usize, usize, Vec<u8>);

/// One directory not yet written.
pub(crate) struct OpenDir {
    /// One per classified entry, in listing order; `None` until (unless) it is carried.
    pub slots: Vec<Option<TreeEntry>>,
    /// File bytes beneath, of what has come back so far.
    pub size: u64,
    /// Files beneath, of what has come back so far.
    pub files: u64,
    /// Its path prefix (`a/b/`, or `` for the root).
    pub prefix: String,
    /// The number of its own entry in the parent (0 for a walk's root).
    pub seq: u64,
    /// Files at the workers and subdirectories not yet written.
    waiting: usize,
    /// Whether the walker has classified all of its entries.
    listed: bool,
    /// Where its tree goes; `None` for the directory a walk started from.
    parent: Option<Parent>,
}

/// A directory whose entries are all in: ready for its tree to be written.
pub(crate) struct Ready {
    pub key: usize,
    pub dir: OpenDir,
    pub parent: Option<Parent>,
}

/// The waiting directories of one walk, its answer channel, its skips and its failure.
pub(crate) struct Waiting {
    dirs: Vec<Option<OpenDir>>,
    free: Vec<usize>,
    /// Files sent to the workers and not yet answered.
    in_flight: usize,
    /// The number the next classified entry takes.
    next_seq: u64,
    skips: Vec<(u64, String, SkipReason)>,
    failure: Option<(u64, CaptureError)>,
    /// The number of the earliest failure so far (`u64::MAX`: none), which the workers read.
    halt: Arc<AtomicU64>,
    /// Directories a walk started from, once written (by key).
    roots: HashMap<usize, Walked>,
    answers_tx: mpsc::Sender<Answer>,
    answers_rx: mpsc::Receiver<Answer>,
}

impl Waiting {
    /// A new walk's bookkeeping.
    pub(crate) fn new() -> Waiting {
        let halt = Arc::new(AtomicU64::new(u64::MAX));
        let (answers_tx, answers_rx) = mpsc::channel();
        Waiting {
            dirs: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
            next_seq: 1,
            skips: Vec::new(),
            failure: None,
            halt,
            roots: HashMap::new(),
            answers_tx,
            answers_rx,
        }
    }

    /// What the workers read to tell whether a job is worth doing ([`Waiting::worth_doing`]).
    pub(crate) fn halt(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.halt)
    }

    /// Whether a job numbered `seq` is worth doing, given the failures so far (for a worker).
    pub(crate) fn worth_doing(halt: &AtomicU64, seq: u64) -> bool {
        seq < halt.load(Ordering::Relaxed)
    }

    /// Opens a directory of `entries` entries whose own entry is numbered `seq`.
    pub(crate) fn open(&mut self, prefix: &str, entries: usize, seq: u64) -> usize {
        let dir = OpenDir {
            slots: Vec::with_capacity(entries),
            size: 0,
            files: 0,
            prefix: prefix.to_string(),
            seq,
            waiting: 0,
            listed: false,
            parent: None,
        };
        match self.free.pop() {
            Some(key) => {
                self.dirs[key] = Some(dir);
                key
            }
            None => {
                self.dirs.push(Some(dir));
                self.dirs.len() - 1
            }
        }
    }

    /// The open directory `key`.
    pub(crate) fn dir(&mut self, key: usize) -> &mut OpenDir {
        self.dirs[key]
            .as_mut()
            .expect("a key names an open directory until it is written")
    }

    /// The number of the next classified entry.
    pub(crate) fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// The number the walk has reached (for a failure of the walker itself).
    pub(crate) fn position(&self) -> u64 {
        self.next_seq
    }

    /// Whether the walk has failed (the walker stops).
    pub(crate) fn failed(&self) -> bool {
        self.failure.is_some()
    }

    /// Keeps `error` as the walk's failure if it is the earliest.
    pub(crate) fn fail(&mut self, seq: u64, error: CaptureError) {
        if self.failure.as_ref().is_none_or(|(first, _)| seq < *first) {
            self.halt.store(seq, Ordering::Relaxed);
            self.failure = Some((seq, error));
        }
    }

    /// The walk's failure, if any.
    pub(crate) fn take_failure(&mut self) -> Option<CaptureError> {
        self.failure.take().map(|(_, e)| e)
    }

    /// Keeps a skip, reported in walk order at the end.
    pub(crate) fn skip(&mut self, seq: u64, path: String, reason: SkipReason) {
        self.skips.push((seq, path, reason));
    }

    /// The skips, in walk order.
    pub(crate) fn take_skips(&mut self) -> Vec<(String, SkipReason)> {
        let mut skips = std::mem::take(&mut self.skips);
        skips.sort_by_key(|(seq, _, _)| *seq);
        skips.into_iter().map(|(_, p, r)| (p, r)).collect()
    }

    /// Where workers send their answers.
    pub(crate) fn answers(&self) -> mpsc::Sender<Answer> {
        self.answers_tx.clone()
    }

    /// Files at the workers.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// A file of directory `key` was sent.
    pub(crate) fn sent(&mut self, key: usize) {
        self.in_flight += 1;
        self.dir(key).waiting += 1;
    }

    /// The next answer, waiting for it when `block`; `None` when none is there (or none is
    /// out).
    pub(crate) fn answer(&mut self, block: bool) -> Result<Option<Answer>, CaptureError> {
        if self.in_flight == 0 {
            return Ok(None);
        }
        let answer = if block {
            Some(self.answers_rx.recv().map_err(|_| CaptureError::Workers)?)
        } else {
            match self.answers_rx.try_recv() {
                Ok(answer) => Some(answer),
                Err(mpsc::TryRecvError::Empty) => None,
                Err(mpsc::TryRecvError::Disconnected) => return Err(CaptureError::Workers),
            }
        };
        if answer.is_some() {
            self.in_flight -= 1;
        }
        Ok(answer)
    }

    /// Directory `child` (open) will write its tree into `slot` of `parent`.
    pub(crate) fn wait_for(&mut self, parent: usize, slot: usize, name: Vec<u8>, child: usize) {
        self.dir(child).parent = Some((parent, slot, name));
        self.dir(parent).waiting += 1;
    }

    /// The walker has classified all of directory `key`: ready now if nothing is out.
    pub(crate) fn listed(&mut self, key: usize) -> Option<Ready> {
        self.dir(key).listed = true;
        self.ready(key)
    }

    /// One thing directory `key` waited for came back: ready if it was the last.
    pub(crate) fn arrived(&mut self, key: usize) -> Option<Ready> {
        self.dir(key).waiting -= 1;
        self.ready(key)
    }

    fn ready(&mut self, key: usize) -> Option<Ready> {
        let dir = self.dir(key);
        if !dir.listed || dir.waiting > 0 {
            return None;
        }
        let mut dir = self.dirs[key].take()?;
        let parent = dir.parent.take();
        // A starting directory's key names its result until `take_root`: reused before that,
        // a skill walked next would write its result under the same key (a skill bundle whose
        // first skill was all cached failed its capture, now and then, under load).
        if parent.is_some() {
            self.free.push(key);
        }
        Some(Ready { key, dir, parent })
    }

    /// A walk's starting directory `key` was written.
    pub(crate) fn root_written(&mut self, key: usize, walked: Walked) {
        self.roots.insert(key, walked);
    }

    /// What a walk's starting directory `key` became, once written; its key is free again.
    pub(crate) fn take_root(&mut self, key: usize) -> Option<Walked> {
        let walked = self.roots.remove(&key)?;
        self.free.push(key);
        Some(walked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zeroclaw_bundle_store::ObjectId;

    fn walked(files: u64) -> Walked {
        Walked {
            id: ObjectId::of(&files.to_be_bytes()),
            size: files,
            files,
        }
    }

    /// Two starting directories (two skills of a bundle), the first written before the
    /// second is opened: each result is taken back under its own key.
    #[test]
    fn a_written_starting_directory_keeps_its_key_until_its_result_is_taken() {
        let mut waiting = Waiting::new();
        let first = waiting.open("a/", 0, 1);
        let ready = waiting.listed(first).expect("nothing is out");
        assert!(ready.parent.is_none());
        waiting.root_written(ready.key, walked(1));
        let second = waiting.open("b/", 0, 2);
        assert_ne!(
            first, second,
            "a key whose result is not taken is not reused"
        );
        let ready = waiting.listed(second).expect("nothing is out");
        waiting.root_written(ready.key, walked(2));
        assert_eq!(waiting.take_root(first).map(|w| w.files), Some(1));
        assert_eq!(waiting.take_root(second).map(|w| w.files), Some(2));
        // Taken, the key serves again.
        assert_eq!(waiting.open("c/", 0, 3), second);
    }
}
