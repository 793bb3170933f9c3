//! The descriptor-verified tree reader (SPEC §4, reference §9.6): walks an opened root into
//! store objects and reports what it skipped.
//!
//! Invariants:
//! - every directory is read through its own fd; every entry is classified with a no-follow
//!   `fstatat` on its parent's fd, opened no-follow through the same fd, and the opened fd is
//!   fstat'ed and compared with the classification (dev, ino, type). No path is ever reopened
//!   by name;
//! - symlinks, sockets, FIFOs, devices and regular files with more than one link are skipped
//!   and counted; an entry replaced by another file between classify and open is skipped and
//!   counted as `replaced`; an entry replaced by a SYMLINK fails the capture, naming it;
//! - a directory whose (dev, ino) is the store root's is never entered and is counted as
//!   `store`: a store inside the captured tree holds the install's raw config as objects;
//! - an unreadable file or directory fails the capture (unreadable is not absent);
//! - a file's permission bits (`mode & 0o777`; setuid, setgid and sticky never travel) come
//!   from the fstat of its opened fd, or, for a stat-cache hit (not opened), from the walk's
//!   own no-follow stat through the directory fd: never from the cache, so a chmod (which
//!   moves the ctime the cache checks anyway) is always seen;
//! - the stat cache lets an unchanged file (same dev, ino, size, mtime, ctime, and a blob of
//!   that length referenced by a snapshot) skip opening and hashing; the racy rule
//!   (`crate::statmatch`, shared with publish) rehashes any entry whose mtime or ctime is not
//!   older than the capture start minus its granularity, and caches a hashed file only when
//!   its times are older than the moment it was read minus its granularity.
//!
//! Reads happen on the opened fd only; bytes go straight into the store (hashed as written).
//! The walker thread lists and classifies; the files it does not find in the stat cache are
//! opened, checked and stored by a few worker threads (`file`), each through the directory
//! fd the walker opened. The walker does not wait at a directory's end for its files: the
//! directory waits (`waiting`), and its tree is written when its last file is in. Results sit
//! in listing slots, and skips and failures carry their walk order, so trees, tallies, the
//! skip report and which failure is reported do not depend on thread timing.

mod ahead;
mod file;
mod put_order;
pub mod root;
pub mod sink;
mod waiting;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use zeroclaw_bundle_store::{
    CaptureReport, ObjectId, Skipped, SourceKey, SourceStatCache, StatCacheUpdate, StatEntry,
    Store, StoreError, Tally, Tree, TreeEntry, WriteLock,
};

use crate::progress::{Progress, Totals};
use crate::statmatch::{self, Racy};
use crate::sys::{self, FileKind, Stat};
use crate::{hooks, workers};

use ahead::{Ahead, StatJob, WarmJob, Warming};
use file::{open_failure, read_file, FileJob, FileOutcome, OpenFailure};
use put_order::PutOrder;
use waiting::{Answer, Ready, Waiting};

pub use root::RootError;
pub use sink::{KeepBytes, MemoryObjects, Sink};

/// Directory nesting below the snapshot root deeper than this fails the capture: it is the
/// store's own limit (`limits::MAX_DEPTH`), which publish, checkout and mount enforce, so a
/// deeper tree is refused while it is read (before its deepest directory is listed), not
/// after everything was stored. Labels count: `workspace` sits at depth 1.
const MAX_DEPTH: usize = zeroclaw_bundle_store::limits::MAX_DEPTH as usize;

/// Files of one walk handed to the workers and not yet answered, at most. Enough to keep
/// every worker busy; a bound, so a directory of 100,000 files holds 100,000 small tree
/// entries while it is read, not 100,000 queued jobs and their answers (about 360 bytes each),
/// and the directories held open waiting on files (see `waiting`) are few.
const IN_FLIGHT: usize = 256;

/// Work for the pool: classify a batch of entries, or read one file.
pub(crate) enum Job {
    /// No-follow stats of a batch of one directory's entries (see `ahead`).
    Stat(StatJob),
    /// A directory ahead of the walker read into the kernel's caches (see `ahead`).
    Warm(WarmJob),
    /// Open, check and store one file (see `file`).
    File(FileJob),
}

/// Where a directory sits in its walk.
struct Place {
    /// Its path prefix (`a/b/`, or `` for the root).
    prefix: String,
    /// The number of its own entry in walk order (see `waiting`; 0 for a walk's root).
    seq: u64,
    /// Where its tree goes; `None` for a directory a walk started from (kept by key).
    parent: Option<waiting::Parent>,
    /// How far below the snapshot root it nests.
    depth: usize,
}

/// Why a capture failed. Paths are as they sit in the bundle (`workspace/notes.md`).
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// SIGINT or SIGTERM arrived: the capture stopped and recorded nothing.
    #[error(
        "interrupted: the capture stopped and recorded no snapshot (what it already stored is \
         freed by `zeroclaw-bundle gc --grace 0` when no other capture is running)"
    )]
    Interrupted,
    /// A root could not be opened.
    #[error(transparent)]
    Root(#[from] RootError),
    /// An entry became a symlink between classification and open: fail closed.
    #[error("{path} was swapped for a symlink while it was being read; nothing was captured from it and the capture stops, because following it could carry host data")]
    SwappedForSymlink {
        /// Bundle path of the entry.
        path: String,
    },
    /// An entry that cannot be read.
    #[error(
        "could not read {path} (an unreadable entry fails the capture: unreadable is not absent)"
    )]
    Unreadable {
        /// Bundle path of the entry.
        path: String,
        /// The error.
        source: io::Error,
    },
    /// A worker thread died (a bug: it never returns without an outcome).
    #[error("a capture worker stopped unexpectedly; nothing was recorded")]
    Workers,
    /// Too deep.
    #[error(
        "{path} is nested more than {MAX_DEPTH} directories below the snapshot root, the store's \
         limit (a deeper snapshot could not be published, checked out or mounted); nothing was \
         recorded"
    )]
    TooDeep {
        /// Bundle path.
        path: String,
    },
    /// The store failed.
    #[error("could not store {path}")]
    Store {
        /// Bundle path of the entry.
        path: String,
        /// The store's error.
        source: StoreError,
    },
}

/// What a walk produced: the tree id, its total bytes, and how many files it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walked {
    /// Tree object id.
    pub id: ObjectId,
    /// Total file bytes beneath.
    pub size: u64,
    /// Files beneath (0 for a tree of empty directories).
    pub files: u64,
}

impl Walked {
    /// The directory entry naming this tree in its parent.
    pub fn entry(&self, name: Vec<u8>) -> TreeEntry {
        TreeEntry::dir(name, self.size, self.id)
    }
}

/// Which entries a walk keeps: asked once per entry, before it is looked at, with the entry's
/// bundle path (`workspace/notes/a.md`; names escaped as in reports). A directory that is not
/// kept is not entered, and nothing left out is counted or reported by the capture: the caller
/// owns the rule (and reports what it left out). Capture itself knows nothing of agents.
pub type Keep<'k> = &'k dyn Fn(&str) -> bool;

/// The [`Keep`] rule of a plain directory: everything travels.
pub fn keep_everything(_: &str) -> bool {
    true
}

/// How much work a capture did: files read and hashed vs. reused from the stat cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CaptureStats {
    /// Files opened, read and hashed.
    pub hashed_files: u64,
    /// Bytes read and hashed.
    pub hashed_bytes: u64,
    /// Files whose blob came from the stat cache without reading.
    pub cached_files: u64,
}

/// One capture: a stat cache loaded at the start, the tallies, and the new cache to commit.
pub struct Capture<'s> {
    store: &'s Store,
    cache_key: SourceKey,
    /// The loaded cache; it also collects what this capture keeps of it and what it adds.
    old_cache: SourceStatCache,
    racy: Racy,
    report: CaptureReport,
    stats: CaptureStats,
    progress: &'s dyn Progress,
    sink: Sink,
    /// Files and bytes counted on `progress`.
    progressed: Totals,
    /// (dev, ino) of the store's root directory: a directory with this identity is never
    /// entered, wherever it sits in the captured tree and however the store path was spelled.
    store_dir: (u64, u64),
    /// Whether the walk is meeting cold directories (so warming ahead pays), and what the warm
    /// jobs have read (see `ahead`).
    warming: Arc<Warming>,
    /// The directories of the walk in progress still waiting on files (see `waiting`).
    waiting: Waiting,
    /// New stat-cache records of answered files, added in walk order (see `put_order`).
    put_order: PutOrder,
}

impl<'s> Capture<'s> {
    /// Starts a capture whose stat cache is stored under `cache_key` (one key per source).
    /// Opens the catalog only for the moment it takes to load the cache. `_lock` (the store's
    /// write lock, held until the snapshot is committed) keeps gc from removing a blob the
    /// cache or a dedup check reuses.
    pub fn begin(
        store: &'s Store,
        _lock: &'s WriteLock,
        cache_key: SourceKey,
        progress: &'s dyn Progress,
    ) -> Result<Capture<'s>, StoreError> {
        let start_ns = crate::clock::now_ns();
        let old_cache = store.catalog().load_source_cache(&cache_key)?;
        // Small objects go into one pack, finished by the commit's sync.
        store.objects().pack_until_sync();
        // Followed: the store path may be a symlink; its target is what must not be carried.
        let store_dir = sys::open_dir_path(store.root())
            .and_then(sys::fstat)
            .map_err(|error| StoreError::Io {
                op: "stat",
                path: store.root().to_path_buf(),
                error,
            })?;
        Ok(Capture {
            store,
            cache_key,
            old_cache,
            racy: Racy::since(start_ns),
            report: CaptureReport::default(),
            stats: CaptureStats::default(),
            progress,
            sink: Sink::Store,
            progressed: Totals::default(),
            store_dir: (store_dir.dev, store_dir.ino),
            warming: Arc::new(Warming::default()),
            waiting: Waiting::new(),
            put_order: PutOrder::default(),
        })
    }

    /// Sends what this capture reads to `sink` instead of the store (a hash-only capture for
    /// `diff`). Its stat cache must then live under a key of its own: a cached id of a
    /// hash-only capture names no object in the store.
    pub fn with_sink(mut self, sink: Sink) -> Self {
        self.sink = sink;
        self
    }

    /// One more file of `len` bytes on `progress`.
    fn advance(&mut self, len: u64) {
        self.progressed.files += 1;
        self.progressed.bytes += len;
        self.progress.advance(self.progressed);
    }

    /// Work done so far.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// Consumes the capture: its report, and the stat-cache changes to commit with the
    /// snapshot.
    pub fn finish(self) -> (CaptureReport, StatCacheUpdate) {
        self.progress.finish();
        let Capture {
            old_cache,
            cache_key,
            report,
            ..
        } = self;
        (report, old_cache.into_update(&cache_key))
    }

    /// Walks a whole tree from its opened root. `label` prefixes bundle paths (`.` for none).
    pub fn walk(
        &mut self,
        root: OwnedFd,
        label: &str,
        keep: Keep<'_>,
    ) -> Result<Walked, CaptureError> {
        let mut tally = Tally {
            label: label.to_string(),
            ..Tally::default()
        };
        let prefix = prefix_of(label);
        let walked = self.with_workers(&mut tally, |capture, tally, jobs| {
            let place = Place {
                depth: depth_of(&prefix),
                prefix,
                seq: 0,
                parent: None,
            };
            let key = capture.walk_dir(&Arc::new(root), place, keep, tally, jobs)?;
            capture.settle(tally)?;
            capture.waiting.take_root(key).ok_or(CaptureError::Workers)
        })?;
        self.report.trees.push(tally);
        Ok(walked)
    }

    /// Runs `walk` with worker threads reading files (see `crate::workers`), then reports
    /// the walk's skips in walk order. After a failure, the walk's failure is the earliest
    /// one (see `waiting`), and files after it are answered unread.
    fn with_workers<R>(
        &mut self,
        tally: &mut Tally,
        walk: impl FnOnce(&mut Self, &mut Tally, &mpsc::Sender<Job>) -> Result<R, CaptureError>,
    ) -> Result<R, CaptureError> {
        let store: &Store = self.store;
        let sink = self.sink.clone();
        self.waiting = Waiting::new();
        let halt = self.waiting.halt();
        let result = workers::with_pool(
            || (),
            |_, job: Job, stopped| match job {
                Job::Stat(job) => job.run(),
                Job::Warm(job) if !stopped => job.run(),
                Job::Warm(_) => {}
                Job::File(job) => {
                    let outcome = if stopped || !Waiting::worth_doing(&halt, job.seq) {
                        FileOutcome::Failed(CaptureError::Workers)
                    } else {
                        read_file(store, &sink, &job)
                    };
                    let reply = job.reply.clone();
                    let _ = reply.send((job, outcome));
                }
            },
            |jobs| {
                let walked = walk(self, tally, jobs);
                self.earliest_failure(walked, tally)
            },
        );
        for (path, reason) in self.waiting.take_skips() {
            self.skip(tally, path, reason);
        }
        let old_cache = &mut self.old_cache;
        self.put_order
            .flush(&mut |path, stat| old_cache.put(path.as_bytes(), stat));
        result
    }

    /// The walk's result, or its earliest failure: a failure of the walker itself is kept
    /// at the position it reached, and every file already sent is answered first, so one
    /// before it that failed is the one reported (see `waiting`). An interrupt is reported
    /// at once.
    fn earliest_failure<R>(
        &mut self,
        walked: Result<R, CaptureError>,
        tally: &mut Tally,
    ) -> Result<R, CaptureError> {
        let walked = match walked {
            Err(CaptureError::Interrupted) => {
                self.waiting.fail(0, CaptureError::Interrupted);
                return Err(CaptureError::Interrupted);
            }
            Err(e) => {
                let position = self.waiting.position();
                self.waiting.fail(position, e);
                None
            }
            Ok(walked) => Some(walked),
        };
        while let Some(answer) = self.waiting.answer(true)? {
            self.apply(answer, tally);
        }
        match (self.waiting.take_failure(), walked) {
            (Some(e), _) => Err(e),
            (None, Some(walked)) => Ok(walked),
            (None, None) => Err(CaptureError::Workers),
        }
    }

    /// Walks a skill bundle root: only child directories admitted by `admits` are skills;
    /// loose files and special entries at the root are ignored and not counted; a skill
    /// that holds no file is not carried; `keep` is asked about every entry (skill directories
    /// included). `Ok(None)` when no skill was carried.
    pub fn walk_skill_bundle(
        &mut self,
        root: OwnedFd,
        label: &str,
        admits: &dyn Fn(&str) -> bool,
        keep: Keep<'_>,
    ) -> Result<Option<Walked>, CaptureError> {
        let mut tally = Tally {
            label: label.to_string(),
            ..Tally::default()
        };
        let prefix = prefix_of(label);
        let entries = self.with_workers(&mut tally, |capture, tally, jobs| {
            capture.walk_skills(root, &prefix, admits, keep, tally, jobs)
        })?;
        self.report.trees.push(tally);
        if entries.is_empty() {
            return Ok(None);
        }
        let size = entries.iter().map(|(e, _)| e.size).sum();
        let files = entries.iter().map(|(_, files)| files).sum();
        let id = self.write_tree(entries.into_iter().map(|(e, _)| e).collect(), label)?;
        Ok(Some(Walked { id, size, files }))
    }

    /// The skill directories of a bundle root, each walked whole: (entry, files beneath).
    fn walk_skills(
        &mut self,
        root: OwnedFd,
        prefix: &str,
        admits: &dyn Fn(&str) -> bool,
        keep: Keep<'_>,
        tally: &mut Tally,
        jobs: &mpsc::Sender<Job>,
    ) -> Result<Vec<(TreeEntry, u64)>, CaptureError> {
        let names = self.list(root.as_fd(), prefix)?;
        let mut skills = Vec::new();
        for sys::Listed { name, .. } in names {
            let name = name.into_vec();
            let Ok(text) = std::str::from_utf8(&name) else {
                continue;
            };
            let path = format!("{prefix}{text}");
            if !admits(text) || !keep(&path) {
                continue;
            }
            let seq = self.waiting.next_seq();
            let st = match sys::stat_at(root.as_fd(), &name) {
                Ok(st) => st,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => return Err(CaptureError::Unreadable { path, source }),
            };
            match st.kind {
                FileKind::Symlink => {
                    self.waiting.skip(seq, path, SkipReason::Symlink);
                    continue;
                }
                FileKind::Dir if self.is_store(&st) => {
                    self.waiting.skip(seq, path, SkipReason::Store);
                    continue;
                }
                FileKind::Dir => {}
                _ => continue,
            }
            let Some(sub) = self.open_dir(root.as_fd(), &name, &st, &path, seq)? else {
                continue;
            };
            let place = Place {
                prefix: format!("{path}/"),
                seq,
                parent: None,
                depth: depth_of(&path),
            };
            let key = self.walk_dir(&Arc::new(sub), place, keep, tally, jobs)?;
            skills.push((name, key));
            if self.waiting.failed() {
                return Err(CaptureError::Workers);
            }
        }
        self.settle(tally)?;
        let mut entries = Vec::new();
        for (name, key) in skills {
            let walked = self.waiting.take_root(key).ok_or(CaptureError::Workers)?;
            if walked.files > 0 {
                entries.push((walked.entry(name), walked.files));
            }
        }
        Ok(entries)
    }

    fn list(&self, dir: BorrowedFd<'_>, prefix: &str) -> Result<Vec<sys::Listed>, CaptureError> {
        let mut names = sys::read_dir_listing(dir).map_err(|source| CaptureError::Unreadable {
            path: display_dir(prefix),
            source,
        })?;
        // Unstable: names in one directory are distinct, so the order is the same, and a
        // stable sort of 200,000 names takes a 4.8 MB scratch buffer (see `heap`).
        names.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        Ok(names)
    }

    /// Walks one directory: classifies every entry, hands uncached files to the workers (at
    /// most [`IN_FLIGHT`] of the walk's at a time), recurses into subdirectories meanwhile,
    /// and applies answers as they arrive. Returns the directory's key among the walk's open
    /// ones: its tree is written once its last file is in (see `waiting`), into slot `slot`
    /// of `parent` (`None` for a walk's starting directory, kept by key). `seq` is the
    /// number of its own entry. What depends on order does not depend on arrival: entries
    /// sit in listing slots, and skips and failures carry their walk order.
    fn walk_dir(
        &mut self,
        dir: &Arc<OwnedFd>,
        place: Place,
        keep: Keep<'_>,
        tally: &mut Tally,
        jobs: &mpsc::Sender<Job>,
    ) -> Result<usize, CaptureError> {
        let Place {
            prefix,
            seq,
            parent,
            depth,
        } = place;
        let prefix = prefix.as_str();
        if depth > MAX_DEPTH {
            return Err(CaptureError::TooDeep {
                path: display_dir(prefix),
            });
        }
        // A directory listed while warming ahead is on was most likely warmed: only the
        // others tell how cold the tree is.
        let first_touch = !self.warming.is_cold();
        let started = Instant::now();
        let names = self.list(dir.as_fd(), prefix)?;
        if first_touch {
            self.warming.observe(started.elapsed(), names.len());
        }
        let key = self.waiting.open(prefix, names.len(), seq);
        if let Some((parent, slot, name)) = parent {
            self.waiting.wait_for(parent, slot, name, key);
        }
        let mut ahead = Ahead::new(dir, prefix, names, &self.warming);
        while let Some((name, path, classified)) = ahead.next(keep, jobs)? {
            self.progress
                .check_cancel()
                .map_err(|_| CaptureError::Interrupted)?;
            self.take_answers(false, tally)?;
            let seq = self.waiting.next_seq();
            let classified = match classified {
                Ok(st) => st,
                // Vanished between readdir and stat: it is not part of this tree.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => return Err(CaptureError::Unreadable { path, source }),
            };
            let slots = &mut self.waiting.dir(key).slots;
            let slot = slots.len();
            slots.push(None);
            match classified.kind {
                FileKind::Symlink => self.waiting.skip(seq, path, SkipReason::Symlink),
                FileKind::Special => self.waiting.skip(seq, path, SkipReason::Special),
                FileKind::File if classified.nlink > 1 => {
                    self.waiting.skip(seq, path, SkipReason::HardLink)
                }
                FileKind::File => {
                    let hit = if self.sink.wants_bytes(&path) {
                        None
                    } else {
                        self.cached(path.as_bytes(), &classified)
                    };
                    if let Some((position, hit)) = hit {
                        self.count_cached(position, hit.size, key, tally);
                        // The mode of this walk's own no-follow stat of the entry (through its
                        // directory's fd), never one from the cache: the record matched its
                        // identity and ctime, and a chmod moves the ctime.
                        self.waiting.dir(key).slots[slot] =
                            Some(TreeEntry::file(name, classified.perm, hit.size, hit.id));
                        continue;
                    }
                    if self.waiting.in_flight() >= IN_FLIGHT {
                        self.take_answers(true, tally)?;
                    }
                    let job = FileJob {
                        dir: Arc::clone(dir),
                        name,
                        classified,
                        path,
                        slot,
                        dir_key: key,
                        seq,
                        reply: self.waiting.answers(),
                    };
                    jobs.send(Job::File(job))
                        .map_err(|_| CaptureError::Workers)?;
                    self.waiting.sent(key);
                    self.put_order.sent(seq);
                }
                FileKind::Dir if self.is_store(&classified) => {
                    self.waiting.skip(seq, path, SkipReason::Store)
                }
                FileKind::Dir => {
                    let Some(sub) = self.open_dir(dir.as_fd(), &name, &classified, &path, seq)?
                    else {
                        continue;
                    };
                    let place = Place {
                        prefix: format!("{path}/"),
                        seq,
                        parent: Some((key, slot, name)),
                        depth: depth + 1,
                    };
                    self.walk_dir(&Arc::new(sub), place, keep, tally, jobs)?;
                }
            }
        }
        if let Some(ready) = self.waiting.listed(key) {
            self.complete(ready);
        }
        Ok(key)
    }

    /// Applies the answers that are in (with `block`, at least one, when any is out). The
    /// walker stops once the walk has failed (its failure is settled by `earliest_failure`).
    fn take_answers(&mut self, block: bool, tally: &mut Tally) -> Result<(), CaptureError> {
        let mut block = block;
        while let Some(answer) = self.waiting.answer(std::mem::take(&mut block))? {
            self.apply(answer, tally);
        }
        if self.waiting.failed() {
            return Err(CaptureError::Workers);
        }
        Ok(())
    }

    /// Waits for every file still at the workers (the walker has listed everything).
    fn settle(&mut self, tally: &mut Tally) -> Result<(), CaptureError> {
        while self.waiting.in_flight() > 0 {
            self.take_answers(true, tally)?;
        }
        Ok(())
    }

    /// Counts a file the stat cache vouches for (entry `position` of the old cache, `size`
    /// bytes) as carried: kept in the new cache, in the work stats, its directory's results,
    /// the tally and the progress.
    fn count_cached(&mut self, position: usize, size: u64, key: usize, tally: &mut Tally) {
        self.old_cache.keep(position);
        self.stats.cached_files += 1;
        let dir = self.waiting.dir(key);
        dir.files += 1;
        dir.size += size;
        tally.files += 1;
        tally.bytes += size;
        self.advance(size);
    }

    /// Writes the tree of a directory whose entries are all in, puts it in its parent's
    /// slot, and so on up while that completes the parent too. Once the walk has failed
    /// nothing more is written.
    fn complete(&mut self, ready: Ready) {
        let mut ready = ready;
        loop {
            if self.waiting.failed() {
                return;
            }
            let Ready { key, dir, parent } = ready;
            // In place (an `Option<TreeEntry>` is the size of a `TreeEntry`): collecting the
            // flattened slots into a new vector held a 200,000-entry directory twice (14 MB).
            let mut slots = dir.slots;
            slots.retain(Option::is_some);
            let entries = slots
                .into_iter()
                .map(|slot| slot.expect("only filled slots were kept"))
                .collect();
            let id = match self.write_tree(entries, &dir.prefix) {
                Ok(id) => id,
                Err(e) => {
                    self.waiting.fail(dir.seq, e);
                    return;
                }
            };
            let walked = Walked {
                id,
                size: dir.size,
                files: dir.files,
            };
            let Some((parent, slot, name)) = parent else {
                self.waiting.root_written(key, walked);
                return;
            };
            let above = self.waiting.dir(parent);
            above.size += walked.size;
            above.files += walked.files;
            above.slots[slot] = Some(walked.entry(name));
            match self.waiting.arrived(parent) {
                Some(next) => ready = next,
                None => return,
            }
        }
    }

    /// Applies one worker's answer to its directory (and the stat cache, the work stats and
    /// the progress spinner, counted as soon as a file is stored: a directory can hold most
    /// of a tree); writes the directory's tree if it was the last thing it waited for.
    fn apply(&mut self, (job, outcome): Answer, tally: &mut Tally) {
        let key = job.dir_key;
        let mut record = None;
        match outcome {
            FileOutcome::Failed(e) => self.waiting.fail(job.seq, e),
            FileOutcome::Skipped(reason) => self.waiting.skip(job.seq, job.path, reason),
            FileOutcome::Stored {
                id,
                len,
                opened,
                read_from_ns,
            } => {
                self.advance(len);
                record = self
                    .stored(&job.path, id, len, &opened, read_from_ns)
                    .map(|entry| (job.path, entry));
                tally.files += 1;
                tally.bytes += len;
                let dir = self.waiting.dir(key);
                dir.files += 1;
                dir.size += len;
                // The mode of the opened fd's fstat (setuid, setgid, sticky dropped).
                dir.slots[job.slot] = Some(TreeEntry::file(job.name, opened.perm, len, id));
            }
        }
        let old_cache = &mut self.old_cache;
        self.put_order.answered(job.seq, record, &mut |path, stat| {
            old_cache.put(path.as_bytes(), stat)
        });
        if let Some(ready) = self.waiting.arrived(key) {
            self.complete(ready);
        }
    }

    /// Stores the tree of the directory at `prefix` (`a/b/`, `a/b` or `` for the root), unless
    /// the stat cache shows the same tree stored by an earlier capture of this source.
    ///
    /// A directory's record in the stat cache is keyed by its path with one trailing `/` (the
    /// root's is `/`), which no file's path can be, and holds only the tree id. It stands
    /// for the object's presence on the same grounds as a file's blob id (see `cached`): the
    /// cache is committed only with a snapshot that references the tree, and `gc` drops every
    /// cache before it removes objects. So an unchanged directory costs no lookup in
    /// `objects/`: a cold capture after 1% of the benchmark corpus changed (19,859 files in
    /// 2,304 directories) made about 2,800 `statx` calls there, one per tree, each a cold
    /// directory block read.
    fn write_tree(
        &mut self,
        entries: Vec<TreeEntry>,
        prefix: &str,
    ) -> Result<ObjectId, CaptureError> {
        let malformed = |e| CaptureError::Store {
            path: display_dir(prefix),
            source: StoreError::Malformed {
                id: ObjectId::of(b""),
                what: "tree",
                why: e,
            },
        };
        let tree = Tree::from_entries(entries).map_err(malformed)?;
        let stored = |source| CaptureError::Store {
            path: display_dir(prefix),
            source,
        };
        if !matches!(self.sink, Sink::Store) {
            return self.sink.put_tree(self.store, tree).map_err(stored);
        }
        let key = format!("{}/", prefix.trim_end_matches('/'));
        // The id alone first: an unchanged directory needs no encoding held (12 MB for
        // 200,000 entries).
        let id = tree.id();
        match self.old_cache.get(key.as_bytes()) {
            Some((position, old)) if old.id == id => self.old_cache.keep(position),
            _ => {
                self.store.objects().write_tree(&tree).map_err(stored)?;
                self.old_cache.put(key.as_bytes(), &tree_record(id));
            }
        }
        Ok(id)
    }

    /// Opens a classified directory no-follow; `None` when it was replaced (skipped, counted).
    fn open_dir(
        &mut self,
        dir: BorrowedFd<'_>,
        name: &[u8],
        classified: &Stat,
        path: &str,
        seq: u64,
    ) -> Result<Option<OwnedFd>, CaptureError> {
        hooks::seam("classify-open", path);
        let sub = match sys::open_dir_at(dir, name) {
            Ok(fd) => fd,
            Err(e) => {
                return match open_failure(dir, name, path, e) {
                    OpenFailure::Skip(reason) => {
                        self.waiting.skip(seq, path.to_string(), reason);
                        Ok(None)
                    }
                    OpenFailure::Fail(e) => Err(e),
                }
            }
        };
        let opened = sys::fstat(&sub).map_err(|source| CaptureError::Unreadable {
            path: path.to_string(),
            source,
        })?;
        if !opened.same_object(classified) {
            self.waiting
                .skip(seq, path.to_string(), SkipReason::Replaced);
            return Ok(None);
        }
        Ok(Some(sub))
    }

    /// Records a freshly hashed file in the work stats, and keeps its entry of the stat
    /// cache when that is unchanged; `read_from_ns` is the clock just before its fstat. Gives
    /// the new entry to add to the cache (in walk order, see `put_order`), if any.
    fn stored(
        &mut self,
        path: &str,
        id: ObjectId,
        len: u64,
        opened: &Stat,
        read_from_ns: i64,
    ) -> Option<StatEntry> {
        self.stats.hashed_files += 1;
        self.stats.hashed_bytes += len;
        if len != opened.size {
            return None; // it changed while being read: never trust a cache entry for it
        }
        // A file changed within the timestamp granularity of the moment it was read may
        // change again without its times moving (same tick, same size): such a record would
        // later pass for unchanged while holding the old bytes. Like git's racily clean
        // entries, it is not cached; the next capture reads it again. Measured against the
        // file's own read (not the capture's start): a file last changed a second before a
        // long capture reached it is safe, and a corpus written just before its first
        // snapshot is not read again by the next one. The granularity is the fine one when
        // the file's times show sub-second precision (`statmatch`).
        let fine = opened.mtime_ns % 1_000_000_000 != 0 || opened.ctime_ns % 1_000_000_000 != 0;
        if !Racy::recorded_at(read_from_ns, fine).trusts(opened.mtime_ns, opened.ctime_ns) {
            return None;
        }
        let entry = StatEntry {
            dev: opened.dev,
            ino: opened.ino,
            size: len,
            mtime_ns: opened.mtime_ns,
            ctime_ns: opened.ctime_ns,
            exec: opened.is_executable(),
            id,
        };
        match self.old_cache.get(path.as_bytes()) {
            Some((position, old)) if old == entry => {
                self.old_cache.keep(position);
                None
            }
            _ => Some(entry),
        }
    }

    /// A stat-cache hit: same identity, size, times and mode class, and not racy. The blob
    /// is not looked up: a cache is committed only with a snapshot that references its blobs
    /// (after they are durable), and `gc` drops every stat cache whenever it removes objects,
    /// so a cached id always names a present object (short of hand-deleted objects, which
    /// `verify` reports, naming every snapshot that reaches them). Skipping the lookup saves
    /// a stat per file in a no-op capture: checking presence and length (`has_with_len`) made
    /// a no-op capture of 50,000 unchanged files 1.27x as long (median of 5 runs each, warm
    /// cache, debug build), more than a hand-deleted object is worth. Repair: delete the
    /// damaged object, touch or rewrite the file (a new mtime misses the cache), capture.
    fn cached(&self, key: &[u8], st: &Stat) -> Option<(usize, StatEntry)> {
        let (position, hit) = self.old_cache.get(key)?;
        let same = statmatch::matches(&hit, st) && hit.exec == st.is_executable();
        (same && self.racy.trusts(st.mtime_ns, st.ctime_ns)).then_some((position, hit))
    }

    /// Whether a classified directory is the store's root.
    fn is_store(&self, st: &Stat) -> bool {
        self.store_dir == (st.dev, st.ino)
    }

    fn skip(&mut self, tally: &mut Tally, path: String, reason: SkipReason) {
        match reason {
            SkipReason::Store => tally.store += 1,
            SkipReason::Symlink => tally.symlinks += 1,
            SkipReason::Special => tally.special += 1,
            SkipReason::HardLink => tally.hard_links += 1,
            SkipReason::Replaced => tally.replaced += 1,
        }
        self.report.skipped.push(Skipped {
            path,
            reason: reason.as_str().to_string(),
        });
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum SkipReason {
    Symlink,
    Special,
    HardLink,
    Replaced,
    /// The store being written to.
    Store,
}

impl SkipReason {
    fn as_str(self) -> &'static str {
        match self {
            SkipReason::Symlink => "symlink",
            SkipReason::Special => "special",
            SkipReason::HardLink => "hard_link",
            SkipReason::Replaced => "replaced",
            SkipReason::Store => "store",
        }
    }
}

/// A directory's stat-cache record: only the tree id counts (see `Capture::write_tree`).
fn tree_record(id: ObjectId) -> StatEntry {
    StatEntry {
        dev: 0,
        ino: 0,
        size: 0,
        mtime_ns: 0,
        ctime_ns: 0,
        exec: false,
        id,
    }
}

fn prefix_of(label: &str) -> String {
    if label.is_empty() || label == "." {
        String::new()
    } else {
        format!("{label}/")
    }
}

/// How many directories a bundle path (`skills/web/search`, `workspace/`, or `` for the
/// root) nests below the snapshot root.
fn depth_of(prefix: &str) -> usize {
    prefix.split('/').filter(|c| !c.is_empty()).count()
}

fn display_dir(prefix: &str) -> String {
    if prefix.is_empty() {
        ".".to_string()
    } else {
        prefix.trim_end_matches('/').to_string()
    }
}

#[cfg(test)]
mod tests {
    //! Pins: with classification ahead on the pool and a bounded window of files in flight,
    //! a directory larger than both still gives the canonical tree (the id of the same
    //! entries built independently), `keep` is asked exactly once per entry, what it leaves
    //! out is not carried, and skips are reported in listing order.

    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn large_directory_gives_the_canonical_tree_and_asks_keep_once_per_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        let big = src.join("big");
        fs::create_dir_all(&big).unwrap();
        // More entries than IN_FLIGHT and than the stat batches ahead (8 x 64).
        let count = 1500;
        let mut expected = Vec::new();
        let mut want_skipped = Vec::new();
        for i in 0..count {
            let name = format!("e{i:05}");
            if i % 250 == 7 {
                symlink("/etc/passwd", big.join(&name)).unwrap();
                want_skipped.push(format!("big/{name}"));
                continue;
            }
            let data = format!("entry {i}\n").repeat(i % 5 + 1);
            fs::write(big.join(&name), &data).unwrap();
            if i % 100 == 50 {
                continue; // left out by `keep` below
            }
            let mode = fs::metadata(big.join(&name)).unwrap().permissions().mode();
            expected.push(TreeEntry::file(
                name.into_bytes(),
                mode,
                data.len() as u64,
                ObjectId::of(data.as_bytes()),
            ));
        }
        let size: u64 = expected.iter().map(|e| e.size).sum();
        let files = expected.len() as u64;
        let big_id = ObjectId::of(&Tree::from_entries(expected).unwrap().encode());
        let root_tree =
            Tree::from_entries(vec![TreeEntry::dir(b"big".to_vec(), size, big_id)]).unwrap();
        let root_id = ObjectId::of(&root_tree.encode());

        let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
        let lock = store.write_lock().unwrap();
        let asked = AtomicUsize::new(0);
        let keep = |path: &str| {
            asked.fetch_add(1, Ordering::Relaxed);
            !path.ends_with("50") || path == "big"
        };
        for round in ["first", "again (stat cache)"] {
            asked.store(0, Ordering::Relaxed);
            let fd = root::open_configured(&src).unwrap().expect("source exists");
            let mut capture = Capture::begin(
                &store,
                &lock,
                SourceKey::Dir("test".into()),
                &crate::progress::Silent,
            )
            .unwrap();
            let walked = capture.walk(fd, ".", &keep).unwrap();
            assert_eq!(walked.id, root_id, "{round}: canonical root tree");
            assert_eq!((walked.size, walked.files), (size, files), "{round}");
            assert_eq!(
                asked.load(Ordering::Relaxed),
                count + 1,
                "{round}: keep asked once per entry (and once for big)"
            );
            let (report, update) = capture.finish();
            let skipped: Vec<String> = report.skipped.iter().map(|s| s.path.clone()).collect();
            assert_eq!(skipped, want_skipped, "{round}: skips in listing order");
            store.catalog().update_source_cache(&update).unwrap();
        }
    }
    /// One capture of `src` as source `key`, its stat cache recorded: the root tree's id.
    #[cfg(feature = "test-hooks")]
    fn capture_once(store: &Store, src: &std::path::Path, key: &str) -> ObjectId {
        let lock = store.write_lock().unwrap();
        let fd = root::open_configured(src).unwrap().expect("source exists");
        let mut capture = Capture::begin(
            store,
            &lock,
            SourceKey::Dir(key.into()),
            &crate::progress::Silent,
        )
        .unwrap();
        let walked = capture.walk(fd, ".", &|_: &str| true).unwrap();
        let (_, update) = capture.finish();
        // As a commit does before anything names the objects: the capture's pack is finished.
        store.objects().sync().unwrap();
        store.catalog().update_source_cache(&update).unwrap();
        walked.id
    }

    /// A first capture adds its files' stat-cache records in walk order, whatever order the
    /// workers answer in (see `put_order`): here a large first file is answered long after
    /// the small ones behind it. The next capture finds each record right after the one
    /// before; in answer order a million-file no-op searched the index for 930,000 of them.
    #[test]
    #[cfg(feature = "test-hooks")]
    fn new_stat_cache_records_are_written_in_walk_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("src/d");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("f0000"), vec![7u8; 8 << 20]).unwrap();
        for i in 1..=400 {
            fs::write(dir.join(format!("f{i:04}")), format!("{i}\n")).unwrap();
        }
        // Past the racy window, so that every file is cached.
        std::thread::sleep(std::time::Duration::from_millis(150));
        let store = Store::open_or_create(&tmp.path().join("store")).unwrap();
        capture_once(&store, &tmp.path().join("src"), "order");
        let files: Vec<_> = fs::read_dir(store.root().join("dircache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let [file] = &files[..] else {
            panic!("one cache file: {files:?}")
        };
        // The format (see `dircache` in the store): magic line, key length and key, then
        // {path_len:u16 path stat:73}, then a 32-byte sum.
        let bytes = fs::read(file).unwrap();
        let mut at = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
        let key_len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + key_len;
        let mut paths = Vec::new();
        while at < bytes.len() - 32 {
            let len = usize::from(u16::from_be_bytes([bytes[at], bytes[at + 1]]));
            paths.push(String::from_utf8(bytes[at + 2..at + 2 + len].to_vec()).unwrap());
            // dev, ino, size, mtime, ctime (8 bytes each), exec (1), blob id (32).
            at += 2 + len + 8 * 5 + 1 + 32;
        }
        let files: Vec<&String> = paths.iter().filter(|p| !p.ends_with('/')).collect();
        assert_eq!(files.len(), 401, "{paths:?}");
        let first_out_of_order = files.windows(2).find(|w| w[0] >= w[1]);
        assert_eq!(first_out_of_order, None, "records in walk order");
    }

    #[cfg(feature = "test-hooks")]
    fn subtree(store: &Store, root: &ObjectId, name: &str) -> ObjectId {
        let tree = store.objects().read_tree(root).unwrap();
        let entry = tree.entries().iter().find(|e| e.name == name.as_bytes());
        entry.expect("entry present").id
    }

    /// A directory whose tree the stat cache holds is not looked up in `objects/` again (the
    /// proof: a tree object removed by hand is not written back), while a changed directory's
    /// new tree is stored, and a source without that cache stores every tree.
    #[test]
    #[cfg(feature = "test-hooks")]
    fn a_cached_tree_is_not_looked_up_again_and_a_changed_one_is_stored() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("a")).unwrap();
        fs::create_dir_all(src.join("b")).unwrap();
        fs::write(src.join("a/x"), "x1\n").unwrap();
        fs::write(src.join("b/y"), "y\n").unwrap();
        let store = Store::open_or_create(&tmp.path().join("store")).unwrap();

        let first = capture_once(&store, &src, "src");
        let (a1, b) = (subtree(&store, &first, "a"), subtree(&store, &first, "b"));
        store.objects().remove_for_test(&b).unwrap();
        fs::write(src.join("a/x"), "x2\n").unwrap();

        let second = capture_once(&store, &src, "src");
        let a2 = subtree(&store, &second, "a");
        assert_ne!(a1, a2, "a changed");
        assert!(
            store.objects().has(&a2),
            "the changed directory's tree is stored"
        );
        assert!(store.objects().has(&second), "the root changed too: stored");
        assert_eq!(subtree(&store, &second, "b"), b, "b is unchanged");
        assert!(
            !store.objects().has(&b),
            "b's tree came from the stat cache: no lookup, no write"
        );

        capture_once(&store, &src, "another source");
        assert!(
            store.objects().has(&b),
            "without the cache every tree is stored"
        );
    }
}
