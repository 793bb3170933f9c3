//! Starting and stopping a mount: [`mount`] returns a [`MountHandle`] once the mount answers;
//! the handle unmounts on drop. fuser serves requests on its own worker threads.
//!
//! Lifecycle invariants:
//! - `mount` returns once the mount is in place and the server has answered the kernel's
//!   FUSE handshake (INIT, inside fuser's `Session::new`), and its serving threads are
//!   started: from then on the kernel holds every request through the mount until a worker
//!   reads it, so the mount answers. Nothing more is waited for: a stat probe through the
//!   mount (and a read of the mount table) used to follow, which put the workers' start and
//!   a round trip on every mount's path without proving more than the handshake had. A
//!   `mount` that fails leaves no mount behind (fuser unmounts when the handshake fails).
//! - Mounts of one directory at once make one mount: the check and the mount syscall hold an
//!   exclusive `flock` on the directory, and the later one is refused as already mounted.
//! - Unmounting is by path (umount2(2), or `fusermount3 -u` for a non-root user) and only of
//!   a mount that is ours. The session threads end when the kernel drops the connection.
//! - Dropping a handle that is still mounted unmounts it; if something still uses the mount
//!   it is detached lazily (it leaves the namespace now, the kernel keeps it until the last
//!   file closes) rather than left to turn stale when this process exits.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};
use zeroclaw_bundle_store::limits::{check_expansion, within_limits, Expansion};
use zeroclaw_bundle_store::{Lease, ObjectId, ObjectSource};

use crate::error::MountError;
use crate::fs::{Faults, Requests, SnapshotFs, View};
use crate::mountpoint::checked_mountpoint;
use crate::passthrough::{Backings, Passthrough};
use crate::sys::{self, UnmountOutcome, FSNAME};

/// How to mount. `MountOptions::default()` is the safe choice: private to the mounting user,
/// no execution, read-only (always).
#[derive(Debug, Clone)]
pub struct MountOptions {
    /// Shown as the mount's source, `zeroclaw-bundle:<label>` (e.g. a short snapshot id);
    /// characters other than `[A-Za-z0-9._:@+-]` become `_`. Empty: `zeroclaw-bundle`.
    pub label: String,
    /// Let other users see the mount (`allow_other`; a non-root user needs
    /// `user_allow_other` in /etc/fuse.conf). Off by default.
    pub allow_other: bool,
    /// Allow executing files from the mount (drops `noexec`). Off by default: a bundle may
    /// hold scripts, and review should not run them by accident.
    pub allow_exec: bool,
    /// FUSE worker threads (at least 1).
    pub threads: usize,
    /// The atime/mtime/ctime every entry reports (e.g. the snapshot's creation time).
    pub time: SystemTime,
    /// Bound on trees kept in memory, in directory entries (about 60 bytes each, kept as the
    /// tree's verified encoding).
    pub tree_cache_entries: usize,
    /// Mount with the kernel's `ro` option (default true). Only tests set it false, to check
    /// that the daemon's own refusals (the second line, see `fs`) hold without it; nothing
    /// becomes writable either way.
    #[doc(hidden)]
    pub kernel_ro: bool,
    /// Text the caller wants a reviewer to see about the whole snapshot (who signed it),
    /// served as the root directory's extended attribute [`crate::XATTR_SIGNATURES`]. The
    /// tree itself is never changed: the mount stays byte for byte what a checkout writes.
    pub root_note: Option<String>,
    /// What the tree expands to, when the caller knows it from a record it trusts as much as
    /// the source (a store's expansion record): the walk over every tree before mounting is
    /// skipped. `None` (the default): the mount walks and refuses a tree past the limits.
    pub known_expansion: Option<Expansion>,
    /// Whether reads of large whole objects may be handed to the kernel (FUSE passthrough):
    /// [`Passthrough::On`] (the default) uses it wherever the kernel and the privileges allow
    /// it, [`Passthrough::Off`] never does, and its reason is what the mount then reports
    /// ([`MountHandle::passthrough`], the root's [`crate::XATTR_PASSTHROUGH`]). Reads stay
    /// verified either way; off, every read goes through the mount server (for a comparison,
    /// or a source whose blobs are never whole object files).
    pub passthrough: Passthrough,
}

impl Default for MountOptions {
    fn default() -> MountOptions {
        MountOptions {
            label: String::new(),
            allow_other: false,
            allow_exec: false,
            threads: thread::available_parallelism()
                .map(|n| n.get().min(4))
                .unwrap_or(2),
            time: SystemTime::UNIX_EPOCH,
            // About 3 MB of tree encodings (the largest directory is kept whatever its size):
            // with 100,000 decoded entries the daemon peaked at 66 MB after a `find` of the
            // 300,000-file scale tree; listings come from READDIRPLUS, so the kernel seldom
            // asks again.
            tree_cache_entries: 50_000,
            kernel_ro: true,
            root_note: None,
            known_expansion: None,
            passthrough: Passthrough::On,
        }
    }
}

impl MountOptions {
    fn fsname(&self) -> String {
        if self.label.is_empty() {
            return FSNAME.to_string();
        }
        let label: String = self
            .label
            .chars()
            .take(64)
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._:@+-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{FSNAME}:{label}")
    }

    fn fuser_config(&self) -> Config {
        let mut opts = vec![
            if self.kernel_ro {
                MountOption::RO
            } else {
                MountOption::RW
            },
            MountOption::NoSuid,
            MountOption::NoDev,
            MountOption::NoAtime,
            MountOption::DefaultPermissions,
            MountOption::FSName(self.fsname()),
            // As a raw option, so the kernel gets it on the direct (root) mount path too
            // (fuser only hands `Subtype` to fusermount3): the type shows as
            // `fuse.zeroclaw-bundle`.
            MountOption::CUSTOM(format!("subtype={FSNAME}")),
        ];
        if !self.allow_exec {
            opts.push(MountOption::NoExec);
        }
        let mut config = Config::default();
        config.mount_options = opts;
        config.acl = if self.allow_other {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        config.n_threads = Some(self.threads.max(1));
        // One /dev/fuse fd per worker (FUSE_DEV_IOC_CLONE, Linux 4.5+).
        config.clone_fd = self.threads > 1;
        config
    }
}

/// A live mount. Unmounts when dropped; see the module doc.
#[derive(Debug)]
pub struct MountHandle {
    path: PathBuf,
    session: Option<BackgroundSession>,
    faults: Arc<Faults>,
    requests: Arc<Requests>,
    backings: Arc<Backings>,
    lease: Option<Lease>,
}

/// Unmounts one mount from any thread (a signal handler thread, say); cheap to clone.
#[derive(Debug, Clone)]
pub struct Unmounter {
    path: PathBuf,
}

impl Unmounter {
    /// Unmounts the mount, as [`crate::unmount`] does. A mount still in use stays mounted
    /// and this returns [`MountError::Busy`]; a mount already gone is [`MountError::NotMounted`].
    pub fn unmount(&self) -> Result<(), MountError> {
        crate::mountpoint::unmount(&self.path)
    }

    /// Detaches the mount even while it is in use (`MNT_DETACH`, `fusermount3 -u -z`): it
    /// leaves the namespace now, and what is open in it keeps working until closed. For a
    /// mount nobody was told about (a server stopped before it reported the mount).
    pub fn detach(&self) -> Result<(), MountError> {
        match sys::unmount(&self.path, true) {
            UnmountOutcome::Done => Ok(()),
            UnmountOutcome::Busy => Err(MountError::Busy(self.path.clone())),
            UnmountOutcome::Failed(why) => Err(MountError::Unmount {
                path: self.path.clone(),
                why,
            }),
        }
    }
}

/// Mounts tree `root` of `source` read-only on `mountpoint` and returns once the mount
/// answers (the kernel's handshake answered, the serving threads started; see the module
/// doc). `mountpoint` must pass [`check_mountpoint`](crate::check_mountpoint); the root tree must be readable.
pub fn mount(
    source: Arc<dyn ObjectSource>,
    root: ObjectId,
    mountpoint: &Path,
    options: &MountOptions,
) -> Result<MountHandle, MountError> {
    // Two mounts of one directory at once would both pass the check and stack: the check and
    // the mount hold an exclusive lock on the directory, so the second checks after the first
    // mounted and is refused as already mounted.
    let _one_at_a_time = sys::lock_directory(mountpoint);
    let path = checked_mountpoint(mountpoint)?;
    let root_tree = source
        .tree_view(&root)
        .map_err(|source| MountError::Root { root, source })?;
    // A hostile tree (a diamond expanding to 2^40 paths, a chain 20,000 deep) would grow the
    // inode table without bound as it is walked: refuse it before mounting. A tree whose
    // expansion the caller knows (recorded within the limits) is not walked again.
    let label = if options.label.is_empty() {
        format!("tree {}", root.short(12))
    } else {
        format!("snapshot {}", options.label)
    };
    if !options
        .known_expansion
        .is_some_and(|known| within_limits(&known))
    {
        check_expansion(&*source, &root, &label).map_err(MountError::TooLarge)?;
    }
    let (uid, gid) = sys::user_ids();
    let view = View {
        uid,
        gid,
        time: options.time,
        tree_cache_entries: options.tree_cache_entries,
        root_note: options.root_note.clone(),
    };
    let faults = Arc::new(Faults::default());
    let requests = Arc::new(Requests::default());
    let backings = Arc::new(Backings::new(&options.passthrough));
    let fs = SnapshotFs::new(
        source,
        root,
        root_tree,
        view,
        faults.clone(),
        Arc::clone(&requests),
        Arc::clone(&backings),
    );
    let mount_err = |source| MountError::Mount {
        path: mountpoint.to_path_buf(),
        source,
    };
    let notifier = fs.notifier_slot();
    let session = fuser::Session::new(fs, &path, &options.fuser_config())
        .and_then(|session| {
            // Set before the session serves, so every open can store (see `fs`).
            let _ = notifier.set(session.notifier());
            fuser::Session::spawn(session)
        })
        .map_err(mount_err)?;
    Ok(MountHandle {
        path,
        session: Some(session),
        faults,
        requests,
        backings,
        lease: None,
    })
}

impl MountHandle {
    /// The mountpoint (absolute, as the mount table lists it).
    pub fn mountpoint(&self) -> &Path {
        &self.path
    }

    /// Something that can unmount this mount from another thread (e.g. on SIGINT/SIGTERM),
    /// which makes [`MountHandle::wait`] return.
    pub fn unmounter(&self) -> Unmounter {
        Unmounter {
            path: self.path.clone(),
        }
    }

    /// Keeps the store's lease (see `Maintenance::lease`) until the mount is gone (released by a
    /// successful [`MountHandle::unmount`], the end of [`MountHandle::wait`], or drop), so gc
    /// keeps every object this mount serves. Take the lease *before* calling [`mount`].
    pub fn keep_lease(&mut self, lease: Lease) {
        self.lease = Some(lease);
    }

    /// Damage seen while serving (missing or corrupt objects answered with EIO): distinct
    /// messages, at most 64, oldest first.
    pub fn faults(&self) -> Vec<String> {
        self.faults.snapshot().0
    }

    /// How many OPEN, FLUSH and RELEASE requests of files the daemon has answered: for tests
    /// that pin when the kernel stops sending them (see `fs`).
    #[doc(hidden)]
    pub fn file_requests(&self) -> u64 {
        self.requests.files.load(Ordering::Relaxed)
    }

    /// How many READ requests the daemon has answered: for tests that pin that a
    /// passed-through file is read by the kernel alone (see `passthrough`).
    #[doc(hidden)]
    pub fn read_requests(&self) -> u64 {
        self.requests.reads.load(Ordering::Relaxed)
    }

    /// How many files' bytes an open stored in the kernel's page cache (so no READ follows):
    /// for tests (see `fs`).
    #[doc(hidden)]
    pub fn stored_at_open(&self) -> u64 {
        self.requests.stored.load(Ordering::Relaxed)
    }

    /// How many opens were answered with passthrough: for tests (see `passthrough`).
    #[doc(hidden)]
    pub fn passed_through(&self) -> u64 {
        self.backings.opened()
    }

    /// How many backing files the kernel refused to register: for tests that pin that a
    /// refusal turns passthrough off for the rest of the mount (one, unless several
    /// opens tried at once; see `passthrough`).
    #[doc(hidden)]
    pub fn passthrough_refusals(&self) -> u64 {
        self.backings.refused()
    }

    /// Whether the mount passes reads through to the store's object files, or why not, as
    /// its root's [`crate::XATTR_PASSTHROUGH`] says: settled when the mount answered (the
    /// kernel's handshake), and turned off for good should the kernel refuse a backing file
    /// later (see [`Passthrough`]).
    pub fn passthrough(&self) -> Passthrough {
        self.backings.status()
    }

    /// Blocks until the mount goes away: unmounted through an [`Unmounter`], by
    /// `zeroclaw-bundle umount`, `fusermount3 -u` or `umount`. For a foreground `mount`.
    pub fn wait(mut self) -> Result<(), MountError> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let served = end_session(session);
        // If the connection was aborted rather than unmounted, the mount is now stale:
        // remove it so the directory is usable again.
        if sys::is_stale(&self.path) {
            let _ = sys::unmount(&self.path, true);
        }
        served.map_err(|e| MountError::io("serve the mount on", &self.path, e))
    }

    /// Unmounts now. A mount still in use fails with [`MountError::Busy`] and stays mounted
    /// (retry, or drop the handle to detach it lazily). After success this is a no-op.
    pub fn unmount(&mut self) -> Result<(), MountError> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        match crate::mountpoint::unmount(&self.path) {
            // Already gone (unmounted from outside): just reap the threads.
            Ok(()) | Err(MountError::NotMounted(_)) => {
                reap(session, REAP_WAIT);
                self.lease = None;
                Ok(())
            }
            Err(e) => {
                self.session = Some(session);
                Err(e)
            }
        }
    }

    /// Best-effort teardown: unmount, or detach lazily when busy.
    fn detach(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let still_ours = sys::mount_at(&self.path)
            .ok()
            .flatten()
            .is_some_and(|m| m.is_ours());
        let mut wait = REAP_WAIT;
        if still_ours {
            match sys::unmount(&self.path, false) {
                UnmountOutcome::Done => {}
                UnmountOutcome::Busy | UnmountOutcome::Failed(_) => {
                    let _ = sys::unmount(&self.path, true);
                    // Still in use: the threads must keep serving; do not wait for them.
                    wait = Duration::ZERO;
                }
            }
        }
        reap(session, wait);
    }
}

/// How long teardown waits for the session threads after the mount is gone.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// Joins the session threads once they end. They end when the kernel drops the connection,
/// which a lazily detached mount (still in use) or a copy of the mount in another namespace
/// delays indefinitely: then the session is leaked instead, so its threads go on serving
/// until the kernel lets go, and fuser's own drop (which unmounts *by path*, whatever is
/// there by then) never runs.
fn reap(session: BackgroundSession, wait: Duration) {
    let start = Instant::now();
    while !session.guard.is_finished() {
        if start.elapsed() >= wait {
            std::mem::forget(session);
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
    let _ = end_session(session);
}

/// Joins a session's thread without dropping fuser's `Mount`, whose drop unmounts the
/// mountpoint by path once more: fuser 0.18 takes a dead connection (POLLERR on its
/// `/dev/fuse`) for a live mount, so a session ending after a new mount took the same
/// directory unmounted that new mount (seen in CI: `mount --daemon` right after `umount` of
/// the same directory reported its mount and lost it to the old server ending). Our own
/// mount is gone when this runs; the `Mount` is leaked with its dead descriptor, which the
/// process's end (a server's, right after) closes.
fn end_session(mut session: BackgroundSession) -> std::io::Result<()> {
    let placeholder = thread::spawn(|| Ok(()));
    let guard = std::mem::replace(&mut session.guard, placeholder);
    std::mem::forget(session);
    guard
        .join()
        .map_err(|_| std::io::Error::other("the mount's session thread panicked"))?
}

impl Drop for MountHandle {
    fn drop(&mut self) {
        self.detach();
    }
}
