//! Classification ahead of the walker: the no-follow `fstatat`s of one directory's entries
//! run on the worker pool, a batch at a time and a few batches ahead, so a cold tree has
//! several inode reads in flight where the walker alone would wait on each in turn (a no-op
//! capture is nothing but these stats).
//!
//! Only the syscall moves: it is the same `fstatat(AT_SYMLINK_NOFOLLOW)` on the same
//! directory fd, and the walker takes the results one entry at a time in listing order and
//! decides everything itself, exactly as if it had made the call at that moment (a stat made
//! earlier is the same as a slower walker: the identity check after each open still compares
//! the opened object with it). [`Keep`] is asked once per entry, on the walker thread, when
//! its batch is formed, before the entry is looked at.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{mpsc, Arc};

use zeroclaw_bundle_store::escape_name;

use crate::capture::{CaptureError, Job, Keep};
use crate::sys::{self, Stat};

/// Entries per batch.
const BATCH: usize = 64;
/// Batches of one directory handed out and not yet taken by the walker, at most.
const AHEAD: usize = 8;

/// An entry named for classification: its name and its bundle path.
type Named = (Vec<u8>, String);
/// A classified entry: its name, bundle path, and what the no-follow stat said.
pub(crate) type Classified = (Vec<u8>, String, io::Result<Stat>);

/// One batch of names for a worker to stat.
pub(crate) struct StatJob {
    dir: Arc<OwnedFd>,
    batch: usize,
    entries: Vec<Named>,
    reply: mpsc::Sender<(usize, Vec<Classified>)>,
}

impl StatJob {
    /// Stats every entry (no-follow, through the directory fd) and sends the batch back.
    pub(crate) fn run(self) {
        let done = stat_all(&self.dir, self.entries);
        let _ = self.reply.send((self.batch, done));
    }
}

/// The no-follow stat of each entry, through the directory fd.
fn stat_all(dir: &OwnedFd, entries: Vec<Named>) -> Vec<Classified> {
    let dir = dir.as_fd();
    entries
        .into_iter()
        .map(|(name, path)| {
            let st = sys::stat_at(dir, &name);
            (name, path, st)
        })
        .collect()
}

/// `prefix` then `name` as [`escape_name`] spells it, in one allocation: most names are
/// printable ASCII without a backslash, which the escaper leaves as they are.
fn entry_path(prefix: &str, name: &[u8]) -> String {
    let mut path = String::with_capacity(prefix.len() + name.len());
    path.push_str(prefix);
    match std::str::from_utf8(name) {
        Ok(plain)
            if plain
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'\\') =>
        {
            path.push_str(plain)
        }
        _ => path.push_str(&escape_name(name)),
    }
    path
}

/// The classified entries of one directory, in listing order.
pub(crate) struct Ahead {
    dir: Arc<OwnedFd>,
    prefix: String,
    names: std::vec::IntoIter<Vec<u8>>,
    reply_tx: mpsc::Sender<(usize, Vec<Classified>)>,
    reply_rx: mpsc::Receiver<(usize, Vec<Classified>)>,
    /// Batches that arrived before the walker needed them.
    arrived: HashMap<usize, Vec<Classified>>,
    sent: usize,
    taken: usize,
    current: std::vec::IntoIter<Classified>,
}

impl Ahead {
    /// Classifies `names` (sorted) of directory `dir`, whose entries' paths start with
    /// `prefix`.
    pub(crate) fn new(dir: &Arc<OwnedFd>, prefix: &str, names: Vec<Vec<u8>>) -> Ahead {
        let (reply_tx, reply_rx) = mpsc::channel();
        Ahead {
            dir: Arc::clone(dir),
            prefix: prefix.to_string(),
            names: names.into_iter(),
            reply_tx,
            reply_rx,
            arrived: HashMap::new(),
            sent: 0,
            taken: 0,
            current: Vec::new().into_iter(),
        }
    }

    /// The next kept entry, classified; `None` after the last.
    pub(crate) fn next(
        &mut self,
        keep: Keep<'_>,
        jobs: &mpsc::Sender<Job>,
    ) -> Result<Option<Classified>, CaptureError> {
        loop {
            if let Some(entry) = self.current.next() {
                return Ok(Some(entry));
            }
            // A directory that is one batch in all is stated here, on the walker: a worker
            // would run the same stats one after another while the walker waits, plus two
            // thread hand-offs and a channel (most directories are small, and a warm walk is
            // nothing but these).
            if self.sent == 0 && self.names.len() <= BATCH {
                let entries = self.batch(keep);
                if entries.is_empty() {
                    return Ok(None);
                }
                (self.sent, self.taken) = (1, 1);
                self.current = stat_all(&self.dir, entries).into_iter();
                continue;
            }
            self.fill(keep, jobs)?;
            if self.taken == self.sent {
                return Ok(None);
            }
            let batch = loop {
                if let Some(batch) = self.arrived.remove(&self.taken) {
                    break batch;
                }
                let (i, batch) = self.reply_rx.recv().map_err(|_| CaptureError::Workers)?;
                self.arrived.insert(i, batch);
            };
            self.taken += 1;
            self.fill(keep, jobs)?;
            self.current = batch.into_iter();
        }
    }

    /// The next batch of kept names (at most [`BATCH`]), with their paths.
    fn batch(&mut self, keep: Keep<'_>) -> Vec<Named> {
        let mut entries = Vec::with_capacity(BATCH.min(self.names.len()));
        for name in self.names.by_ref() {
            let path = entry_path(&self.prefix, &name);
            if keep(&path) {
                entries.push((name, path));
                if entries.len() == BATCH {
                    break;
                }
            }
        }
        entries
    }

    /// Hands out batches to the workers until [`AHEAD`] are out or the names run out.
    fn fill(&mut self, keep: Keep<'_>, jobs: &mpsc::Sender<Job>) -> Result<(), CaptureError> {
        while self.sent - self.taken < AHEAD {
            let entries = self.batch(keep);
            if entries.is_empty() {
                return Ok(());
            }
            let job = StatJob {
                dir: Arc::clone(&self.dir),
                batch: self.sent,
                entries,
                reply: self.reply_tx.clone(),
            };
            jobs.send(Job::Stat(job))
                .map_err(|_| CaptureError::Workers)?;
            self.sent += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_path_spells_names_as_the_escaper_does() {
        let names: [&[u8]; 9] = [
            b"notes.md",
            b"a b~!",
            b"back\\slash",
            b"tab\there",
            b"del\x7f",
            b"\xff\xferaw",
            "zero\u{200B}width".as_bytes(),
            "caf\u{e9}".as_bytes(),
            b"",
        ];
        for name in names {
            for prefix in ["", "dir/sub/"] {
                assert_eq!(
                    entry_path(prefix, name),
                    format!("{prefix}{}", escape_name(name)),
                    "{name:?}"
                );
            }
        }
    }
}
