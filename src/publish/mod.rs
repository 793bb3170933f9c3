//! Staged, crash-atomic publish of a stored snapshot tree into a destination directory
//! (`checkout`, `export`), and `recover` after an interrupted one (SPEC §7, DESIGN §5); and
//! its single-file sibling, the staged publish of one file (`pack --out FILE`: `file`).
//!
//! The protocol, in order:
//!
//! 0. **Claim** (`claim`, by the caller: `export` before it captures, `checkout`, `recover`):
//!    an `flock`ed lock file `<parent>/.zeroclaw-export-lock-<name>` held for the whole
//!    operation, so a second publish to the same destination fails at once.
//! 1. **Resolve** (`resolve`, once, in [`check`], which returns the [`Admitted`] destination
//!    every later step takes): the destination's parent is canonicalized, its last component
//!    is not; a `..` through a directory that does not exist yet is refused, and so is any
//!    overlap with a source tree or the store, in either direction (the store by path and by
//!    identity). Nothing has been created yet.
//!    The tree's expansion is checked against the store's limits
//!    (`zeroclaw_bundle_store::limits`: depth, entries, bytes) over tree objects only.
//! 2. **Admit** (`swap::admit`): the parent is created if missing, opened once, and its fd is
//!    held for every later step. An absent destination is *vacant*; an existing one must be a
//!    real directory (a symlink or a file is refused); empty is admitted, non-empty needs
//!    `--force`. Its (dev, ino) is recorded: the decision binds to that object, not the name.
//! 3. **Stage**: `<parent>/.zeroclaw-export-<token>` is created through the parent fd (mode
//!    0700 while it fills, 0755 at the end) and `flock`ed, so `recover` never touches a live
//!    publish; the tree is written through dir fds (`stage`), the caller's bundle marker file
//!    ([`BundleMarker`]) last.
//! 4. **Sync**: one `syncfs(2)` on the staging directory flushes every file's data and every
//!    new directory entry of the staged tree before anything refers to it. That is one
//!    journal commit instead of one per file and directory (a bundle is often thousands of
//!    small files), and since Linux 5.8 it reports writeback errors such as ENOSPC or EIO
//!    that happened after the staging fd was opened, so a tree that did not reach the disk
//!    fails the publish. The price is that it also flushes other dirty data of that
//!    filesystem.
//! 5. **Re-check and swap** (`swap`): hooks `publish-staged` then `before-swap`; the
//!    destination is re-checked through the parent fd, then swapped in with
//!    `RENAME_NOREPLACE` (vacant) or `RENAME_EXCHANGE` (existing; the two-rename fallback
//!    where exchange is unsupported). After the swap (and, with exchange, the rename of the
//!    previous tree to `.zeroclaw-export-old-<token>`) the parent directory is fsynced, which
//!    makes the new name durable; only then is the previous tree removed. The removal is not
//!    synced: a crash during it leaves a leftover that `recover` removes. The admitted
//!    destination's fd is `flock`ed as well, so the previous tree is never mistaken for
//!    garbage by a `recover` running beside a live publish.
//!
//! Cancelling the token of the publish's progress ([`Progress::cancel`]; the binary does on
//! SIGINT/SIGTERM) stops the publish before each staged file and just before the swap with [`PublishError::Interrupted`]; from the swap on it runs to the end.
//!
//! Every reported failure leaves the destination as it was and removes the staging tree,
//! except [`PublishError::RestoreFailed`] (says where the previous tree is) and
//! [`PublishError::NotDurable`] (the new tree is in place but its parent's fsync failed).
//!
//! Test hooks (`crate::hooks`, only in `test-hooks` builds), in publish order:
//! `publish-admitted`, `publish-write` (before each file; path = its path in the bundle),
//! `publish-staged`, `before-swap`, `publish-before-rename` (after the swap-time re-check,
//! right before the rename: a replacement there must be caught by the checks after the
//! rename), then one of `publish-after-rename` (vacant),
//! `publish-after-exchange` / `publish-after-retire` (exchange), or
//! `publish-after-first-rename` / `publish-after-second-rename` (fallback), and finally
//! `publish-after-remove`. Every other seam's path is the resolved destination.
//! Fault injection (`hooks::fault`, test-hooks builds): `staging-create`, `mkdir`, `create`,
//! `write` (path = the entry's path in the bundle), `chmod`, `syncfs`, `rename` (vacant or
//! exchange), `rename-first` / `rename-second` (fallback); each failure must leave the
//! destination as it was.
//!
//! Not a compare-and-swap: the checks narrow the window in which another process writing
//! the destination can interfere; they do not close it.

mod claim;
mod error;
mod file;
mod recover;
mod replace;
mod resolve;
pub(crate) use resolve::{lies_inside, resolve_path};
mod snapshot;
mod stage;
mod swap;

#[cfg(test)]
mod tests;

use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::limits::check_expansion;
use zeroclaw_bundle_store::{
    DestCache, DestKey, DestRecord, EntryKind, ObjectId, ObjectSource, StatEntry, TreeEntry,
};

pub use claim::{DestClaim, LOCK_PREFIX};
pub use error::PublishError;
pub use file::{publish_file, FileError, FileRequest, Keep};
pub use recover::{recover, LeftAlone, Recovered};
pub use replace::{check_replacement, BundleMarker, Replace, Replaced};
pub use snapshot::{publish_snapshot, reaches_private_file};

use crate::progress::Progress;
#[cfg(test)]
use crate::progress::Silent;
use crate::{hooks, sys};

/// Prefix of a staging directory (`.zeroclaw-export-<token>`).
pub const STAGING_PREFIX: &str = ".zeroclaw-export-";
/// Prefix of a retired previous tree (`.zeroclaw-export-old-<token>`).
pub const RETIRED_PREFIX: &str = ".zeroclaw-export-old-";

/// What to publish where.
#[derive(Debug, Clone, Copy)]
pub struct PublishRequest<'a> {
    /// `--out` as given.
    pub dest: &'a Path,
    /// `--force`: replace a non-empty destination.
    pub force: bool,
    /// Source trees (workspace, skill dirs) the destination must not overlap, either
    /// direction; empty for `checkout`.
    pub sources: &'a [PathBuf],
    /// The store the bundle is read from: a destination that is, contains or lies inside it
    /// is refused (publishing there would destroy the store).
    pub store: Option<&'a Path>,
    /// What marks a bundle (the caller knows; publish does not): its marker file is written
    /// last at the root, and `--force` replaces a directory that holds it.
    pub bundle: BundleMarker,
}

/// What a successful publish did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The resolved destination (canonical parent, last component as given).
    pub dest: PathBuf,
    /// Files written.
    pub files: u64,
    /// File bytes written.
    pub bytes: u64,
    /// Of `files`, how many were hard-linked from the previous tree instead of written.
    pub reused: u64,
    /// True when an existing (empty or forced) directory was replaced.
    pub replaced_existing: bool,
    /// True when the swap was one `RENAME_EXCHANGE` (false: vacant rename or the two-rename
    /// fallback).
    pub used_exchange: bool,
    /// The previous tree, when it could not be removed after a successful swap (untidy, not a
    /// failure: `recover` removes it).
    pub retired_left: Option<PathBuf>,
}

/// A destination checked once by [`check`]: resolved (canonical parent, last component as
/// given), overlapping no source tree and not the store, and admissible (vacant, empty, or
/// non-empty with `--force`) when it was checked. Everything after the check ([`Admitted::claim`],
/// [`publish_to`], the catalog's destination record) uses this resolution and never resolves
/// the path again; the publish re-admits the object through the parent's fd (it may have
/// changed since) and re-checks it at the swap.
#[derive(Debug, Clone)]
pub struct Admitted {
    given: PathBuf,
    dest: resolve::Destination,
    force: bool,
    sources: Vec<PathBuf>,
    bundle: BundleMarker,
}

impl Admitted {
    /// The resolved destination (canonical parent, last component as given).
    pub fn path(&self) -> &Path {
        &self.dest.full
    }

    /// The destination as the operator gave it (for messages).
    pub fn given(&self) -> &Path {
        &self.given
    }

    /// Claims the destination for this publish (see `claim`), so a second publish to it fails
    /// at once. Creates the destination's parent when it is missing.
    pub fn claim(&self) -> Result<DestClaim, PublishError> {
        claim::claim(&self.given, &self.dest)
    }
}

/// The catalog key of the destination record of `admitted` (what the last publish there left).
fn dest_key(admitted: &Admitted) -> DestKey {
    DestKey::new(admitted.path())
}

/// Checks, without creating or changing anything, that `req` would be admitted: the
/// destination resolves, overlaps no source and not the store, and is vacant, empty, or
/// non-empty with `--force` (never a symlink or a file). `export` calls this before it
/// captures, so a refused destination costs nothing. The one resolution of the destination.
pub fn check(req: &PublishRequest<'_>) -> Result<Admitted, PublishError> {
    let dest = resolve::resolve_destination(req.dest)?;
    if let Some(store) = req.store {
        resolve::refuse_store_overlap(req.dest, &dest.full, store)?;
    }
    resolve::refuse_overlap(req.dest, &dest.full, req.sources)?;
    match sys::open_dir_path(&dest.parent) {
        Ok(parent) => {
            swap::admit(parent.as_fd(), dest.name.as_bytes(), req.dest, req.force)?;
        }
        // The parent does not exist yet: publish creates it, so the destination is vacant.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(PublishError::io("open", &dest.parent, e)),
    }
    Ok(Admitted {
        given: req.dest.to_path_buf(),
        dest,
        force: req.force,
        sources: req.sources.to_vec(),
        bundle: req.bundle,
    })
}

/// Publishes tree `root` from `source` at `req.dest`: [`check`], then [`publish_to`] (see the
/// module doc for the protocol), reusing nothing.
#[cfg(test)]
pub fn publish(
    source: &dyn ObjectSource,
    root: &ObjectId,
    req: &PublishRequest<'_>,
) -> Result<Published, PublishError> {
    publish_with_progress(source, root, req, &Silent)
}

/// [`publish`], telling `progress` the running totals after each staged file (the bytes to
/// expect are the root tree's `total_size()`).
#[cfg(test)]
pub fn publish_with_progress(
    source: &dyn ObjectSource,
    root: &ObjectId,
    req: &PublishRequest<'_>,
    progress: &dyn Progress,
) -> Result<Published, PublishError> {
    publish_to(source, root, &check(req)?, None, progress)
}

/// What a publish keeps of its destination between publishes there (`checkout`, `export`):
/// the record the previous one left, to reuse, and the one this one leaves.
pub struct DestState<'a> {
    /// Loads what the previous publish there recorded ([`record_destination`], or `record`
    /// below); called only when there is a previous tree to reuse files from (`--force` over
    /// an existing destination), so a publish to a new directory never reads it.
    pub load: &'a dyn Fn() -> Option<DestCache>,
    /// Gets the stat of every file the publish writes, taken from the staged file's own fd
    /// after its last write, and, once every file is staged (before the sync and the swap,
    /// which change none of those stats), the time the record counts from. Complete only
    /// when nothing was hard-linked ([`Published::reused`] is 0): the removal of the previous
    /// tree changes a reused file's ctime, so such a publish records with
    /// [`record_destination`] after the swap instead.
    ///
    /// Taking the time after the stats (not before, as [`record_destination`] does) leaves
    /// the racy rule blind only to a change made to a staged file, inside the hidden staging
    /// directory, between its stat and that time; a record taken after the swap is blind to
    /// any change made before its stat, a window that contains this one.
    pub record: &'a mut DestRecord,
}

/// Publishes tree `root` from `source` at the destination `dest` admitted by [`check`] (see
/// the module doc for the protocol), with `state` (checkout and export) reusing what the
/// previous publish there left (with `--force`, a file whose stat still matches, and whose
/// bytes still hash to the right id when the record is racy, is hard-linked into the new
/// tree instead of being written again) and recording what this one writes, and telling
/// `progress` the running totals after each staged file.
pub fn publish_to(
    source: &dyn ObjectSource,
    root: &ObjectId,
    admitted: &Admitted,
    state: Option<DestState<'_>>,
    progress: &dyn Progress,
) -> Result<Published, PublishError> {
    let dest = &admitted.dest;
    // Bound what the tree expands to before anything is created: a hostile tree (a chain
    // 20,000 deep, a diamond of 2^40 paths) is refused here, not half-written.
    check_expansion(source, root, &format!("tree {}", root.short(12)))
        .map_err(|source| PublishError::TooLarge { source })?;
    let source_ids: Vec<sys::Stat> = admitted
        .sources
        .iter()
        .filter_map(|s| resolve::resolve_path(s).ok())
        .filter_map(|p| sys::stat_path(&p).ok())
        .collect();

    fs::create_dir_all(&dest.parent).map_err(|e| PublishError::io("create", &dest.parent, e))?;
    let parent =
        sys::open_dir_path(&dest.parent).map_err(|e| PublishError::io("open", &dest.parent, e))?;
    let name = dest.name.as_bytes();
    let admission = swap::admit(parent.as_fd(), name, &admitted.given, admitted.force)?;
    let hook_path = dest.full.to_string_lossy().into_owned();
    hooks::seam("publish-admitted", &hook_path);

    let mut staging = Staging::create(parent.as_fd(), &dest.parent)?;
    let root_dir = staging
        .fd
        .try_clone()
        .map_err(|e| PublishError::io("open", &staging.path, e))?;
    let (load, mut record) = match state {
        Some(DestState { load, record }) => (Some(load), Some(record)),
        None => (None, None),
    };
    let old_tree = admission.previous_tree();
    let cache = old_tree.as_ref().and(load).and_then(|load| load());
    let previous = old_tree
        .zip(cache.as_ref())
        .map(|(fd, cache)| stage::Previous { fd, cache });
    let last = admitted.bundle.file.as_bytes();
    let into = stage::StagingDir {
        dir: root_dir,
        path: &staging.path,
    };
    let tally = stage::materialize(
        source,
        root,
        into,
        previous,
        last,
        record.as_deref_mut(),
        progress,
    )?;
    if let Some(record) = record {
        record.set_recorded_at(crate::clock::now_ns());
    }
    hooks::fault("chmod", &hook_path)
        .and_then(|()| sys::chmod_fd(&staging.fd, 0o755))
        .map_err(|e| PublishError::io("set the mode of", &staging.path, e))?;
    hooks::fault("syncfs", &hook_path)
        .and_then(|()| sys::syncfs(&staging.fd))
        .map_err(|e| PublishError::io("sync", &staging.path, e))?;
    hooks::seam("publish-staged", &hook_path);
    hooks::seam("before-swap", &hook_path);
    // The last point where cancelling stops the publish; from the swap on it runs to the end.
    progress
        .check_cancel()
        .map_err(|_| PublishError::Interrupted)?;

    let swapper = swap::Swapper {
        parent: parent.as_fd(),
        parent_path: &dest.parent,
        name,
        full: &dest.full,
        given: &admitted.given,
        hook_path: &hook_path,
        sources: &source_ids,
    };
    let outcome = swapper.swap(&admission, &mut staging)?;
    Ok(Published {
        dest: dest.full.clone(),
        files: tally.files,
        bytes: tally.bytes,
        reused: tally.reused,
        replaced_existing: !matches!(admission, swap::Admission::Vacant),
        used_exchange: outcome.used_exchange,
        retired_left: outcome.retired_left,
    })
}

/// Stats every file of tree `root` as published at `dest` (through dir fds, never following a
/// symlink), for the next publish there to reuse ([`PublishRequest::reuse`]). A file that is
/// missing or not what the tree says is left out. `new_record` makes the empty record from
/// the time the stats start (`Catalog::dest_record`, which spills a large one to a file).
pub fn record_destination(
    source: &dyn ObjectSource,
    root: &ObjectId,
    dest: &Path,
    new_record: &dyn Fn(i64) -> DestRecord,
) -> Result<DestRecord, PublishError> {
    let (Some(parent), Some(name)) = (dest.parent(), dest.file_name()) else {
        return Err(PublishError::NoParent {
            path: dest.to_path_buf(),
        });
    };
    let recorded_at_ns = crate::clock::now_ns();
    let parent_fd = sys::open_dir_path(parent).map_err(|e| PublishError::io("open", parent, e))?;
    let dir = sys::open_dir_at(parent_fd.as_fd(), name.as_bytes())
        .map_err(|e| PublishError::io("open", dest, e))?;
    let mut record = new_record(recorded_at_ns);
    record_dir(source, root, dir.as_fd(), &mut Vec::new(), &mut record)?;
    Ok(record)
}

fn record_dir(
    source: &dyn ObjectSource,
    tree: &ObjectId,
    dir: BorrowedFd<'_>,
    rel: &mut Vec<u8>,
    out: &mut DestRecord,
) -> Result<(), PublishError> {
    let tree = source.tree(tree).map_err(|e| PublishError::Store {
        path: String::from_utf8_lossy(rel).into_owned(),
        source: e,
    })?;
    for e in tree.entries() {
        let len = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(&e.name);
        if e.kind == EntryKind::Dir {
            if let Ok(sub) = sys::open_dir_at(dir, &e.name) {
                record_dir(source, &e.id, sub.as_fd(), rel, out)?;
            }
        } else if let Ok(st) = sys::stat_at(dir, &e.name) {
            record_stat(out, rel, e, &st);
        }
        rel.truncate(len);
    }
    Ok(())
}

/// Records `st` as the stat of the file at `rel` holding tree entry `entry`, unless it is not
/// what the entry says (not a regular file, or another size).
fn record_stat(out: &mut DestRecord, rel: &[u8], entry: &TreeEntry, st: &sys::Stat) {
    if st.kind == sys::FileKind::File && st.size == entry.size {
        out.push(
            rel,
            &StatEntry {
                dev: st.dev,
                ino: st.ino,
                size: st.size,
                mtime_ns: st.mtime_ns,
                ctime_ns: st.ctime_ns,
                exec: entry.kind == EntryKind::ExecFile,
                id: entry.id,
            },
        );
    }
}

/// The staging directory: removed on drop while `armed` (every early return cleans up). It
/// is disarmed at the moment its name stops holding the staged tree (the swap).
pub(crate) struct Staging<'a> {
    parent: BorrowedFd<'a>,
    /// `.zeroclaw-export-<token>`.
    pub name: Vec<u8>,
    /// `.zeroclaw-export-old-<token>`.
    pub retired: Vec<u8>,
    /// Full path, for messages.
    pub path: PathBuf,
    /// The staging directory's fd, holding the `flock` that marks it live.
    pub fd: OwnedFd,
    pub armed: bool,
}

impl<'a> Staging<'a> {
    fn create(parent: BorrowedFd<'a>, parent_path: &Path) -> Result<Staging<'a>, PublishError> {
        let mut last_err = None;
        for _ in 0..64 {
            let token = zeroclaw_bundle_store::random_token();
            let name = format!("{STAGING_PREFIX}{token}").into_bytes();
            let retired = format!("{RETIRED_PREFIX}{token}").into_bytes();
            let path = parent_path.join(std::ffi::OsStr::from_bytes(&name));
            if sys::stat_at(parent, &retired).is_ok() {
                continue;
            }
            match hooks::fault("staging-create", &path.to_string_lossy())
                .and_then(|()| sys::mkdir_at(parent, &name, 0o700))
            {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    last_err = Some(e);
                    continue;
                }
                Err(e) => return Err(PublishError::io("create", &path, e)),
            }
            let fd = match sys::open_dir_at(parent, &name) {
                Ok(fd) => fd,
                Err(e) => {
                    let _ = sys::unlink_at(parent, &name, true);
                    return Err(PublishError::io("open", &path, e));
                }
            };
            // Advisory: marks the tree live for `recover`. Failing to lock loses nothing.
            let _ = sys::try_lock_exclusive(&fd);
            let staging = Staging {
                parent,
                name,
                retired,
                path,
                fd,
                armed: true,
            };
            return Ok(staging);
        }
        Err(PublishError::io(
            "create a staging directory in",
            parent_path,
            last_err.unwrap_or_else(|| std::io::Error::other("no free staging name")),
        ))
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = sys::remove_tree_at(self.parent, &self.name);
        }
    }
}

/// `path` as one shell word (single quotes when it holds anything but safe characters), for the
/// `recover` command a message names.
pub fn shell_quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,".contains(&b));
    if safe {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
