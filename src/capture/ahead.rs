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
//!
//! Directories ahead of the walker: when a batch is formed, every kept entry the listing
//! calls a directory is handed to a worker to be warmed ([`WarmJob`], `sys::warm_dir`):
//! opened no-follow through the same directory fd, listed, its entries stated, and its
//! subdirectories the same way one level down, all of it thrown away. The walker, which goes
//! depth first and waits on each cold read in turn, then finds what it comes to in the
//! kernel's caches. On the benchmark corpus (2,304 directories of 8 files on average) a cold
//! capture after 1% changed went from 0.50-0.58 s to 0.27-0.38 s by hand (0.31 s in the bench,
//! against 0.41 s for `tar --listed-incremental`); warming one level only gave 0.36-0.43 s,
//! three levels no more than two.
//!
//! Only while the tree is cold ([`Warming`]): on a warm tree each warm job is the walker's
//! own calls made twice (a warm directory diff took 15% longer with it always on). The first
//! listing of each directory is timed: the walker's while warming is off, a warm job's of the
//! subdirectories it reaches one level down (nothing has read those yet; the directory a job
//! starts from was most often read one level down by the job before it). A slow one turns
//! warming on for the next [`COLD_CREDITS`] first listings, so a warm tree is never warmed
//! and a cold one stays warmed.
//!
//! Each directory is read by one warm job at most ([`Warming::claim`]): a directory is asked
//! for twice, as a job's own and one level below its parent's job, and reading it both times
//! stated the entries of a million-file tree three times over (2.2 million `fstatat`s where
//! the walker makes 1.2 million).
//!
//! Nothing a warm job learns is used: the walker makes every call of its own, in order, and
//! the safety checks are all its. A warm job reads metadata only (listings and inodes, never
//! a file's bytes), never follows a symlink, and starts only from a directory the walker
//! keeps; one level below it, it lists subdirectories the walker has not yet been asked to
//! keep, and states at most `sys::WARM_STATS` entries of any directory. A job whose parent
//! the walker has already left is dropped unread (it holds the parent weakly).

use std::collections::{HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::time::Duration;

use zeroclaw_bundle_store::{escape_name, heap};

use crate::capture::{CaptureError, Job, Keep};
use crate::sys::{self, Listed, Stat};

/// Entries per batch.
const BATCH: usize = 64;
/// Batches of one directory handed out and not yet taken by the walker, at most.
const AHEAD: usize = 8;
/// Levels a warm job reads: the directory, and its subdirectories.
const WARM_LEVELS: usize = 2;
/// First listings that keep warming on after a slow one.
const COLD_CREDITS: u32 = 16;
/// A first listing slower than this (plus [`SLOW_PER_ENTRY`] per entry) read the disk: a warm
/// one of a small directory takes a few microseconds, a cold one at least one read.
const SLOW_BASE: Duration = Duration::from_micros(40);
/// ... per entry listed (a warm listing of 100,000 entries is not a cold one).
const SLOW_PER_ENTRY: Duration = Duration::from_micros(1);

/// What warming ahead shares between the walker and the warm jobs: how cold the walk is (the
/// credits left from the last slow first listing, see the module doc), and which directories
/// a warm job has already read. Its answers change only how fast a capture is, never what it
/// captures.
#[derive(Default)]
pub(crate) struct Warming {
    credits: AtomicU32,
    /// Inode numbers of the directories warm jobs have read (at most [`READ_REMEMBERED`]).
    read: Mutex<HashSet<u64>>,
}

/// Directories [`Warming`] remembers as read, at most; past it, it forgets them all (small
/// enough that the set never takes a mapping of its own; see `zeroclaw_bundle_store::heap`).
/// A directory is warmed just ahead of the walker, so only recent ones matter.
const READ_REMEMBERED: usize = 4096;

impl Warming {
    /// Whether to warm ahead.
    pub(crate) fn is_cold(&self) -> bool {
        self.credits.load(Ordering::Relaxed) > 0
    }

    /// A first listing of `entries` entries took `elapsed`.
    pub(crate) fn observe(&self, elapsed: Duration, entries: usize) {
        let slow = SLOW_BASE + SLOW_PER_ENTRY * u32::try_from(entries).unwrap_or(u32::MAX);
        if elapsed > slow {
            self.credits.store(COLD_CREDITS, Ordering::Relaxed);
        } else {
            let _ = self
                .credits
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1));
        }
    }

    /// Whether directory `ino` is the asking warm job's to read: only the first ask is (a
    /// directory is warmed both as a job's own and as the subdirectory of its parent's job;
    /// reading it twice stated a million-file tree's entries three times over).
    pub(crate) fn claim(&self, ino: u64) -> bool {
        let Ok(mut read) = self.read.lock() else {
            return true;
        };
        if read.len() >= READ_REMEMBERED {
            read.clear();
        }
        read.insert(ino)
    }
}

/// An entry named for classification: its name and its bundle path.
type Named = (Vec<u8>, String);
/// A classified entry: its name, bundle path, and what the no-follow stat said.
pub(crate) type Classified = (Vec<u8>, String, io::Result<Stat>);

/// A directory to warm ahead of the walker: entry `name` of `dir`.
pub(crate) struct WarmJob {
    dir: Weak<OwnedFd>,
    name: Vec<u8>,
    warming: Arc<Warming>,
}

impl WarmJob {
    /// Opens the directory no-follow, lists it and stats its entries, keeping nothing. Any
    /// failure ends it quietly: the walker meets the same entry and reports what it finds.
    pub(crate) fn run(self) {
        if let Some(dir) = self.dir.upgrade() {
            sys::warm_dir(
                dir.as_fd(),
                &self.name,
                WARM_LEVELS,
                &|ino| self.warming.claim(ino),
                &|first| self.warming.observe(first, 0),
            );
        }
    }
}

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
    /// The names not yet batched, last first (taken with `pop`; released whole on drop).
    names: Vec<Listed>,
    warming: Arc<Warming>,
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
    pub(crate) fn new(
        dir: &Arc<OwnedFd>,
        prefix: &str,
        mut names: Vec<Listed>,
        warming: &Arc<Warming>,
    ) -> Ahead {
        let (reply_tx, reply_rx) = mpsc::channel();
        names.reverse();
        Ahead {
            dir: Arc::clone(dir),
            prefix: prefix.to_string(),
            names,
            warming: Arc::clone(warming),
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
                let entries = self.batch(keep, jobs);
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

    /// The next batch of kept names (at most [`BATCH`]), with their paths; while the walk is
    /// cold, the kept ones the listing calls directories are sent to be warmed.
    fn batch(&mut self, keep: Keep<'_>, jobs: &mpsc::Sender<Job>) -> Vec<Named> {
        let mut entries = Vec::with_capacity(BATCH.min(self.names.len()));
        while let Some(Listed { name, says_dir }) = self.names.pop() {
            let name = name.into_vec();
            let path = entry_path(&self.prefix, &name);
            if keep(&path) {
                if says_dir && self.warming.is_cold() {
                    // Advisory: with the pool gone the walker fails on its own next send.
                    let _ = jobs.send(Job::Warm(WarmJob {
                        dir: Arc::downgrade(&self.dir),
                        name: name.clone(),
                        warming: Arc::clone(&self.warming),
                    }));
                }
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
            let entries = self.batch(keep, jobs);
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

impl Drop for Ahead {
    /// A large directory's listing is freed without raising the allocator's threshold (see
    /// `zeroclaw_bundle_store::heap`).
    fn drop(&mut self) {
        heap::release(std::mem::take(&mut self.names));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cold_meter_warms_after_a_slow_first_listing_until_enough_fast_ones() {
        let meter = Warming::default();
        assert!(!meter.is_cold(), "a walk starts as if warm");
        meter.observe(Duration::from_micros(5), 8);
        assert!(!meter.is_cold());
        meter.observe(Duration::from_micros(300), 8);
        assert!(meter.is_cold());
        for _ in 1..COLD_CREDITS {
            meter.observe(Duration::from_micros(5), 8);
            assert!(meter.is_cold());
        }
        meter.observe(Duration::from_micros(5), 8);
        assert!(
            !meter.is_cold(),
            "warm again after {COLD_CREDITS} fast listings"
        );
        // A long listing of a large directory is not a cold one.
        meter.observe(Duration::from_micros(300), 100_000);
        assert!(!meter.is_cold());
    }

    #[test]
    fn a_directory_is_claimed_once_until_too_many_are_remembered() {
        let warming = Warming::default();
        assert!(warming.claim(7));
        assert!(!warming.claim(7), "read once per capture");
        for ino in 100..100 + READ_REMEMBERED as u64 {
            warming.claim(ino);
        }
        assert!(
            warming.read.lock().unwrap().len() <= READ_REMEMBERED,
            "the set stays bounded"
        );
        assert!(
            warming.claim(7),
            "forgotten past the bound: read again, never lost"
        );
    }

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
