//! Materializing a stored tree into the staging directory, through directory fds only.
//!
//! Every directory is created with `mkdirat` in its parent's fd and then opened no-follow;
//! every file is created `O_EXCL | O_NOFOLLOW` in its directory's fd, so nothing below the
//! staging root is ever reached by a path. Modes are exact whatever the umask: each file gets
//! the permission bits its tree entry records (a `0600` file stays `0600`; setuid, setgid and
//! sticky are never recorded, so never published), each directory 0755, like ZeroClaw's own
//! export (`set_permissions` after the copy). The mode is given to `openat(O_CREAT)` and, when
//! the umask would strip any of its bits, set again with `fchmod` on the new fd (skipped for
//! the usual 022 when it strips nothing), so a checkout matches what `mount` shows. File bytes come through the blob's
//! verifying reader: a corrupt object fails at its end, and the publish with it.
//!
//! At the root, the caller's marker file (`last`: the bundle manifest) is written last, after
//! every other entry (SPEC §1).
//! Nothing here fsyncs: the caller runs one `syncfs` over the finished staging tree.
//!
//! With a [`Previous`] tree (a `--force` publish over what an earlier publish left, with its
//! [`DestCache`]), a file whose entry in the old tree still has the recorded stat (dev, ino,
//! size, mtime, ctime, mode, one link) is hard-linked into the staging tree instead of being
//! copied; when the record is racy (taken within the timestamp granularity of the file's
//! times: `crate::statmatch`, the rule capture uses too), its bytes are hashed first. The old tree is removed after the swap, so the new tree owns the inode.
//!
//! Directories and files are created by the walking thread, one at a time; a few worker
//! threads fill the files, each through its own fd (a file reused from the previous tree is
//! linked by a worker, through the fd of its directory). The walk goes on to the next
//! directory while the workers still fill the last one's files (at most `IN_FLIGHT` files
//! out); once the whole tree is walked it waits for every file, then writes the manifest,
//! after them all.
//!
//! Why the walker creates: a create takes its directory's lock in the kernel, so the creates
//! in one directory run one at a time whoever makes them. Workers that created their own
//! files spun on that lock (a fifth of a checkout's CPU on 2 cores). With a lock of ours per
//! directory instead, so that creates in different directories ran side by side, a checkout
//! was slower still when the inode table held many recently deleted inodes (ext4 without a
//! journal skips those one by one on every create). Cold checkouts of the benchmark corpus
//! in alternating rounds after a large delete: 1.30-1.80 s with the walker creating,
//! 1.94-2.12 s with workers creating, 1.91-2.50 s with the lock per directory.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};

use zeroclaw_bundle_store::{
    DestCache, DestRecord, EntryKind, IdHasher, ObjectId, ObjectSource, StatEntry, StoreError,
    TreeEntry,
};

use super::{record_stat, PublishError};
use crate::progress::{Progress, Totals};
use crate::statmatch::{self, Racy};
use crate::{hooks, sys, workers};

const COPY_BUF: usize = 256 * 1024;

/// Files handed to the workers and not yet answered, at most: enough to keep every worker
/// busy across directory boundaries (the walk does not wait for a directory's files before
/// the next directory: the benchmark corpus averages 9 files a directory, so waiting there
/// left the workers idle at every boundary), and a bound, so a tree of 100,000 files does not
/// queue 100,000 jobs (each a tree entry, a path and two fds) at once. Each job holds its new
/// file's fd and its directory's (and the previous tree's), so this bounds the fds open
/// beyond the walk's own path too.
const IN_FLIGHT: usize = 128;

/// How many files may be out at once in this process: [`IN_FLIGHT`], or a quarter of the
/// soft limit on open files when that is lower (each file out holds its fd, and the workers,
/// the walk and the store hold others), at least 4. With 128 out, a checkout failed with
/// "Too many open files" under `ulimit -n 128`; with this bound it succeeds under 64.
fn in_flight_bound() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    soft.map_or(IN_FLIGHT, |n| {
        usize::try_from(n / 4).map_or(IN_FLIGHT, |quarter| quarter.clamp(4, IN_FLIGHT))
    })
}

/// Counts of what was written.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub files: u64,
    pub bytes: u64,
    /// Files hard-linked from the previous tree.
    pub reused: u64,
}

/// The tree being replaced, and what the publish that wrote it recorded.
pub(crate) struct Previous<'a> {
    pub fd: OwnedFd,
    pub cache: &'a DestCache,
}

/// What the walker knows about reusing one file.
struct Reuse {
    old_dir: Arc<OwnedFd>,
    cached: StatEntry,
    /// The record is older than the racy window: a matching stat is proof enough.
    trust_stat: bool,
}

struct Stager<'a> {
    source: &'a dyn ObjectSource,
    staging_path: &'a Path,
    /// The root's file written after every other entry (the bundle marker).
    last: &'a [u8],
    tally: Tally,
    progress: &'a dyn Progress,
    jobs: &'a mpsc::Sender<FileJob>,
    reuse: Option<&'a DestCache>,
    /// Which records are old enough to be trusted on stat.
    racy: Racy,
    /// Gets the stat of every file written (see [`materialize`]).
    record: Option<&'a mut DestRecord>,
    /// Where the workers answer, and how many files are out.
    /// (Dropped before the last answers are read, so a worker that died is noticed.)
    reply_tx: Option<mpsc::Sender<Reply>>,
    reply_rx: mpsc::Receiver<Reply>,
    pending: usize,
    /// At most this many files out (see [`in_flight_bound`]).
    in_flight: usize,
}

/// A worker's answer for one file: its entry and path back, and what became of it.
struct Reply {
    entry: TreeEntry,
    rel: PathBuf,
    result: Result<Staged, PublishError>,
}

/// How one file got into the staging tree.
enum Staged {
    /// Written from its object; its stat once written (none when the fstat failed, or the
    /// file was skipped after the walk failed).
    Written(Option<sys::Stat>),
    /// Hard-linked from the previous tree.
    Reused,
}

/// One file for a worker to copy.
struct FileJob {
    dir: Arc<OwnedFd>,
    entry: TreeEntry,
    rel: PathBuf,
    start: Start,
    reply: mpsc::Sender<Reply>,
}

/// How a worker starts on a file.
enum Start {
    /// The walker created it: fill it.
    Created(File),
    /// The previous tree has a copy: link it if it is provably the same bytes, else create
    /// and fill the file.
    Reuse(Reuse),
}

/// The (empty) directory a tree is written into: its fd, and its path (for messages only).
pub(crate) struct StagingDir<'a> {
    pub dir: OwnedFd,
    pub path: &'a Path,
}

/// Writes tree `root` into the directory `into`, the root's file named `last` after every
/// other entry. `progress`
/// gets the running totals after each file, `record` the stat of each file written (from
/// its own fd, after its last write: the values it is published with, since renaming a
/// directory above a file changes none of them), not of one hard-linked from `previous`
/// (the removal of the previous tree changes its ctime).
pub(crate) fn materialize(
    source: &dyn ObjectSource,
    root: &ObjectId,
    into: StagingDir<'_>,
    previous: Option<Previous<'_>>,
    last: &[u8],
    record: Option<&mut DestRecord>,
    progress: &dyn Progress,
) -> Result<Tally, PublishError> {
    let StagingDir {
        dir: root_dir,
        path: staging_path,
    } = into;
    workers::with_pool(
        || vec![0u8; COPY_BUF],
        |buf, job: FileJob, stopped| {
            let result = if stopped {
                Ok(Staged::Written(None))
            } else {
                match job.start {
                    Start::Created(file) => start_file(&job.rel, progress)
                        .and_then(|()| {
                            fill_file(source, staging_path, &job.entry, file, &job.rel, buf)
                        })
                        .map(Staged::Written),
                    Start::Reuse(reuse) if try_reuse(&reuse, &job.entry, job.dir.as_fd(), buf) => {
                        Ok(Staged::Reused)
                    }
                    Start::Reuse(_) => write_file(
                        source,
                        staging_path,
                        &job.entry,
                        job.dir.as_fd(),
                        &job.rel,
                        buf,
                        progress,
                    )
                    .map(Staged::Written),
                }
            };
            let _ = job.reply.send(Reply {
                entry: job.entry,
                rel: job.rel,
                result,
            });
        },
        |jobs| {
            let (reply_tx, reply_rx) = mpsc::channel();
            let mut stager = Stager {
                source,
                staging_path,
                last,
                tally: Tally::default(),
                progress,
                jobs,
                reuse: previous.as_ref().map(|p| p.cache),
                racy: previous.as_ref().map_or(Racy::never(), |p| {
                    Racy::recorded_at(p.cache.recorded_at_ns(), p.cache.has_fine_times())
                }),
                record,
                reply_tx: Some(reply_tx),
                reply_rx,
                pending: 0,
                in_flight: in_flight_bound(),
            };
            let old_root = previous.map(|p| Arc::new(p.fd));
            stager.write_root(root, root_dir, old_root)?;
            Ok(stager.tally)
        },
    )
}

fn store_error(rel: &Path, err: StoreError) -> PublishError {
    if err.is_corruption() {
        PublishError::CorruptObject {
            path: rel.display().to_string(),
            detail: err.to_string(),
        }
    } else {
        PublishError::Store {
            path: rel.display().to_string(),
            source: err,
        }
    }
}

impl Stager<'_> {
    /// Writes tree `id` into `dir` (its counterpart in the previous tree: `old_dir`) and
    /// returns without waiting for its files: the workers answer on the stager's channel, at
    /// most [`IN_FLIGHT`] files are out at once, and a failure is reported by the first
    /// answer read after it. At the root, the `last` file is not written but returned, for
    /// [`Stager::write_root`] to write once every other file is answered.
    fn write_dir(
        &mut self,
        id: &ObjectId,
        dir: &Arc<OwnedFd>,
        old_dir: Option<Arc<OwnedFd>>,
        rel: &mut PathBuf,
    ) -> Result<Vec<TreeEntry>, PublishError> {
        let tree = self.source.tree(id).map_err(|e| store_error(rel, e))?;
        let at_root = rel.as_os_str().is_empty();
        let mut deferred = Vec::new();
        for entry in tree.entries() {
            if at_root && entry.name == self.last && entry.kind.is_file() {
                deferred.push(entry.clone());
                continue;
            }
            rel.push(std::ffi::OsStr::from_bytes(&entry.name));
            let res = match entry.kind {
                EntryKind::Dir => self.write_subdir(entry, dir.as_fd(), old_dir.as_deref(), rel),
                EntryKind::File | EntryKind::ExecFile => {
                    // Created here, one at a time (see the module's doc); the workers fill.
                    let start = match self.reuse_of(old_dir.as_ref(), rel) {
                        Some(reuse) => Start::Reuse(reuse),
                        None => {
                            Start::Created(create_file(self.staging_path, entry, dir.as_fd(), rel)?)
                        }
                    };
                    self.send(FileJob {
                        dir: Arc::clone(dir),
                        entry: entry.clone(),
                        rel: rel.clone(),
                        start,
                        reply: self.reply_tx.clone().ok_or_else(|| workers_gone(rel))?,
                    })
                }
            };
            rel.pop();
            res?;
        }
        Ok(deferred)
    }

    /// Writes the whole tree `root` into `dir`: every entry but the root's `last` file, then,
    /// once every worker answered, that file (the bundle manifest goes last).
    fn write_root(
        &mut self,
        root: &ObjectId,
        dir: OwnedFd,
        old_dir: Option<Arc<OwnedFd>>,
    ) -> Result<(), PublishError> {
        let dir = Arc::new(dir);
        let mut rel = PathBuf::new();
        let manifest = self.write_dir(root, &dir, old_dir, &mut rel)?;
        self.reply_tx = None;
        while self.pending > 0 {
            self.receive(&rel)?;
        }
        let mut buf = vec![0u8; COPY_BUF];
        for entry in manifest {
            rel.push(std::ffi::OsStr::from_bytes(&entry.name));
            let res = write_file(
                self.source,
                self.staging_path,
                &entry,
                dir.as_fd(),
                &rel,
                &mut buf,
                self.progress,
            );
            let stat = res?;
            self.count(&entry, &rel, Staged::Written(stat));
            rel.pop();
        }
        Ok(())
    }

    /// Hands one file to the workers, first reading an answer when `in_flight` are out.
    fn send(&mut self, job: FileJob) -> Result<(), PublishError> {
        if self.pending >= self.in_flight {
            self.receive(&job.rel)?;
        }
        self.jobs
            .send(job)
            .map_err(|unsent| workers_gone(&unsent.0.rel))?;
        self.pending += 1;
        Ok(())
    }

    /// Reads one worker's answer: a written file goes on the tally and the progress, a
    /// failure fails the publish (the files still out are skipped: see `workers`).
    fn receive(&mut self, rel: &Path) -> Result<(), PublishError> {
        let reply = self.reply_rx.recv().map_err(|_| workers_gone(rel))?;
        self.pending -= 1;
        let staged = reply.result?;
        self.count(&reply.entry, &reply.rel, staged);
        Ok(())
    }

    /// Counts one staged file (at `rel`): on the tally, the progress, and, written, the
    /// destination record with the stat it was staged with.
    fn count(&mut self, entry: &TreeEntry, rel: &Path, staged: Staged) {
        match staged {
            Staged::Reused => self.tally.reused += 1,
            Staged::Written(Some(st)) => {
                if let Some(record) = self.record.as_deref_mut() {
                    record_stat(record, rel.as_os_str().as_bytes(), entry, &st);
                }
            }
            Staged::Written(None) => {}
        }
        self.tally.files += 1;
        self.tally.bytes += entry.size;
        self.progress.advance(Totals {
            files: self.tally.files,
            bytes: self.tally.bytes,
        });
    }

    /// The reuse candidate for the file at `rel`, when the previous tree recorded one.
    fn reuse_of(&self, old_dir: Option<&Arc<OwnedFd>>, rel: &Path) -> Option<Reuse> {
        let (old_dir, cache) = (old_dir?, self.reuse?);
        let cached = cache.get(rel.as_os_str().as_bytes())?;
        Some(Reuse {
            old_dir: Arc::clone(old_dir),
            cached,
            trust_stat: self.racy.trusts(cached.mtime_ns, cached.ctime_ns),
        })
    }

    fn write_subdir(
        &mut self,
        entry: &TreeEntry,
        dir: BorrowedFd<'_>,
        old_parent: Option<&OwnedFd>,
        rel: &mut PathBuf,
    ) -> Result<(), PublishError> {
        let path = self.staging_path.join(&*rel);
        hooks::fault("mkdir", &rel.to_string_lossy())
            .and_then(|()| sys::mkdir_at(dir, &entry.name, entry.mode))
            .map_err(|e| PublishError::io("create directory", &path, e))?;
        let sub = sys::open_dir_at(dir, &entry.name)
            .map_err(|e| PublishError::io("open directory", &path, e))?;
        if sys::umask_alters(entry.mode) {
            sys::chmod_fd(&sub, entry.mode)
                .map_err(|e| PublishError::io("set the mode of", &path, e))?;
        }
        let old_sub = old_parent
            .and_then(|old| sys::open_dir_at(old.as_fd(), &entry.name).ok())
            .map(Arc::new);
        // Below the root nothing is deferred.
        self.write_dir(&entry.id, &Arc::new(sub), old_sub, rel)
            .map(drop)
    }
}

/// Hard-links the previous tree's copy of `entry` into `dir` when it is provably the same
/// bytes: the recorded blob id and stat still match (and, for a racy record, the bytes hash
/// to the id), it has one link, and the new name ends up on that very inode. Any doubt
/// returns false and the file is written normally.
fn try_reuse(reuse: &Reuse, entry: &TreeEntry, dir: BorrowedFd<'_>, buf: &mut [u8]) -> bool {
    let c = &reuse.cached;
    let old_dir = reuse.old_dir.as_fd();
    if c.id != entry.id || c.size != entry.size || c.exec != (entry.kind == EntryKind::ExecFile) {
        return false;
    }
    let Ok(st) = sys::stat_at(old_dir, &entry.name) else {
        return false;
    };
    let unchanged = st.kind == sys::FileKind::File
        && st.nlink == 1
        && statmatch::matches(c, &st)
        && st.perm == entry.mode;
    if !unchanged || (!reuse.trust_stat && !hashes_to(old_dir, entry, &st, buf)) {
        return false;
    }
    if sys::link_at(old_dir, &entry.name, dir, &entry.name).is_err() {
        return false;
    }
    match sys::stat_at(dir, &entry.name) {
        Ok(now) if now.same_object(&st) && now.size == st.size && now.mtime_ns == st.mtime_ns => {
            true
        }
        _ => {
            let _ = sys::unlink_at(dir, &entry.name, false);
            false
        }
    }
}

/// True when the file `entry.name` in `dir`, still the object `st`, hashes to `entry.id`.
fn hashes_to(dir: BorrowedFd<'_>, entry: &TreeEntry, st: &sys::Stat, buf: &mut [u8]) -> bool {
    let Ok(mut file) = sys::open_file_at(dir, &entry.name) else {
        return false;
    };
    if !matches!(sys::fstat(&file), Ok(opened) if opened.same_object(st)) {
        return false;
    }
    let mut hasher = IdHasher::new();
    loop {
        match file.read(buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    hasher.finish() == entry.id
}

fn workers_gone(rel: &Path) -> PublishError {
    PublishError::io(
        "copy",
        rel,
        io::Error::other("a copy worker stopped unexpectedly"),
    )
}

/// Creates one file in `dir` and copies its verified bytes, unless `progress`'s token was
/// cancelled.
fn write_file(
    source: &dyn ObjectSource,
    staging_path: &Path,
    entry: &TreeEntry,
    dir: BorrowedFd<'_>,
    rel: &Path,
    buf: &mut [u8],
    progress: &dyn Progress,
) -> Result<Option<sys::Stat>, PublishError> {
    start_file(rel, progress)?;
    let file = create_file(staging_path, entry, dir, rel)?;
    fill_file(source, staging_path, entry, file, rel, buf)
}

/// The test seam before each file's bytes, and the cancel check.
fn start_file(rel: &Path, progress: &dyn Progress) -> Result<(), PublishError> {
    hooks::seam("publish-write", &rel.to_string_lossy());
    progress
        .check_cancel()
        .map_err(|_| PublishError::Interrupted)
}

/// Creates the empty file of `entry` in `dir`, with its mode (as far as the umask lets
/// `openat` set it: [`fill_file`] sets the rest).
fn create_file(
    staging_path: &Path,
    entry: &TreeEntry,
    dir: BorrowedFd<'_>,
    rel: &Path,
) -> Result<File, PublishError> {
    hooks::fault("create", &rel.to_string_lossy())
        .and_then(|()| sys::create_file_at(dir, &entry.name, entry.mode))
        .map_err(|e| PublishError::io("create", staging_path.join(rel), e))
}

/// Copies the verified bytes of `entry` into its new `file` and returns the file's stat
/// after its last change.
fn fill_file(
    source: &dyn ObjectSource,
    staging_path: &Path,
    entry: &TreeEntry,
    mut file: File,
    rel: &Path,
    buf: &mut [u8],
) -> Result<Option<sys::Stat>, PublishError> {
    let path = staging_path.join(rel);
    // By the recorded size: the store then opens the form (raw or compressed) that size
    // makes likely first, where `blob` tried the raw name of every compressed object first.
    let blob = source
        .blob_of_size(&entry.id, entry.size)
        .map_err(|e| store_error(rel, e))?;
    let mode = entry.mode;
    let mut reader = blob.verifying_reader(entry.id);
    loop {
        let n = match reader.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
                ) =>
            {
                return Err(PublishError::CorruptObject {
                    path: rel.display().to_string(),
                    detail: e.to_string(),
                })
            }
            Err(e) => return Err(PublishError::io("read the object for", &path, e)),
        };
        hooks::fault("write", &rel.to_string_lossy())
            .and_then(|()| file.write_all(&buf[..n]))
            .map_err(|e| PublishError::io("write", &path, e))?;
    }
    if sys::umask_alters(mode) {
        sys::chmod_fd(&file, mode).map_err(|e| PublishError::io("set the mode of", &path, e))?;
    }
    // After the last change to the file, so its times are the ones it is published with.
    Ok(sys::fstat(&file).ok())
}
