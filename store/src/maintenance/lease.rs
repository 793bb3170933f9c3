//! Mount leases: what keeps `gc` from removing the objects a running mount serves
//! ([`Maintenance::lease`]), and how `gc` and `forget` honour them.
//!
//! **A held record.** A mount of a snapshot whose record is a loose raw file holds a shared
//! `flock(2)` on that file for its life. The record is already open and read by then, so
//! taking the lease creates, writes and reads nothing more: a cold mount waits on no more of
//! the disk (a lease file's creation cost about 1.4 ms of a 24 ms cold mount, measured) and
//! a mount works on a full disk. The kernel releases the lock when the process ends, however
//! it ends, so there is no stale lease and no process id to trust.
//! - `gc` runs under the exclusive store lock, so no lease is being taken meanwhile. It tests
//!   every record it would not keep with a non-blocking exclusive `flock`: one it cannot lock
//!   is held by a mount, and everything its root reaches is kept, the record too.
//! - `forget` of a held record cannot lock it exclusively. It then moves the record from the
//!   objects to `leases/held-<id>-<token>` instead of removing it: the mount's lock moves
//!   with the file (same inode); `reindex` no longer finds the record among the objects; and
//!   `gc` keeps what it reaches while the lock is held, and removes it once it is not.
//! - A lease taken while `forget` removes or moves the record: `forget` does either while
//!   holding its exclusive lock on the record; the lease, once its shared lock is granted,
//!   checks that the record's path still names the file it locked, and fails as a missing
//!   snapshot when it does not (the snapshot was forgotten first).
//!
//! **A lease file.** Anything else (a record only packed or stored compressed, a tree leased
//! as itself by a library user) gets `leases/<pid>-<token>`, naming the snapshot and its root,
//! as every mount of an older build did; `gc` keeps what a lease file names while its process
//! lives, and removes lease files of dead processes.
//!
//! An older build's `gc` knows only lease files: it does not see a held record, so beside a
//! mount of this build it removes a snapshot forgotten during the mount, as it would have
//! without any lease.

use std::fs::{self, File, TryLockError};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::id::ObjectId;
use crate::snapshot::Snapshot;

use super::Maintenance;

/// The most of a record file a lease reads (records are a few hundred bytes).
const RECORD_READ_LIMIT: u64 = 1 << 20;

/// The name prefix of a held record moved out of the objects by `forget`.
const HELD_PREFIX: &str = "held-";

/// A running mount's claim on a snapshot (see the module doc); released on drop.
#[derive(Debug)]
pub struct Lease {
    held: Held,
}

#[derive(Debug)]
enum Held {
    /// The snapshot's record, locked shared while this is open.
    Record { _locked: File },
    /// A lease file, removed on drop.
    File(PathBuf),
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Held::File(path) = &self.held {
            let _ = fs::remove_file(path);
        }
    }
}

impl Lease {
    /// Whether the lease is a lock on the snapshot's record (no lease file).
    pub fn holds_the_record(&self) -> bool {
        matches!(self.held, Held::Record { .. })
    }
}

/// How a record file stands with respect to mounts.
enum RecordLock {
    /// No file there (or not a regular file).
    Absent,
    /// Locked exclusively by the caller: no mount holds it.
    Free(File),
    /// A mount holds it (the file, opened to find that out).
    Held(File),
}

/// A record file at `path`, opened as a regular file only (not through a symlink, without
/// blocking on a FIFO); `None` when there is none.
fn open_record(path: &Path) -> Result<Option<File>, StoreError> {
    match crate::sys::open_regular(path) {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("open", path, e)),
    }
}

/// Tries `path`'s exclusive lock without waiting.
fn try_exclusive(path: &Path) -> Result<RecordLock, StoreError> {
    let Some(file) = open_record(path)? else {
        return Ok(RecordLock::Absent);
    };
    match file.try_lock() {
        Ok(()) => Ok(RecordLock::Free(file)),
        Err(TryLockError::WouldBlock) => Ok(RecordLock::Held(file)),
        Err(TryLockError::Error(e)) => Err(StoreError::io("lock", path, e)),
    }
}

/// At most [`RECORD_READ_LIMIT`] bytes of an open record file.
fn read_record(file: &mut File, path: &Path) -> Result<Vec<u8>, StoreError> {
    let mut bytes = Vec::new();
    file.take(RECORD_READ_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|e| StoreError::io("read", path, e))?;
    Ok(bytes)
}

/// Whether `a` and `b` are the same file (device and inode).
fn same_file(a: &fs::Metadata, b: &fs::Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

impl Maintenance<'_> {
    pub(crate) fn leases_dir(&self) -> PathBuf {
        self.root().join("leases")
    }

    /// Records that this process serves the tree `root` (of `snapshot`) until the lease is
    /// dropped: gc keeps everything it reaches even if the snapshot is forgotten meanwhile
    /// (see the module doc). Fails with [`StoreError::MissingObject`] when the snapshot's
    /// record is already gone. The root tree is not looked up here: the reader reads it
    /// before serving anything (a mount refuses a snapshot without it), and a lookup of a
    /// packed tree loads every pack's index, which from a cold cache was the largest wait of
    /// a mount's start.
    pub fn lease(&self, snapshot: &ObjectId, root: &ObjectId) -> Result<Lease, StoreError> {
        // Under the shared lock, no gc is between its mark and its sweep: once the lease is
        // taken, the next gc sees it; and the record is checked in the same window.
        let _lock = crate::lock::shared(self.root(), "register a mount")?;
        if let Some(record) = self.hold_record(snapshot, root)? {
            return Ok(Lease {
                held: Held::Record { _locked: record },
            });
        }
        if !self.objects().has_loose_first(snapshot) {
            return Err(StoreError::MissingObject(*snapshot));
        }
        let dir = self.leases_dir_made()?;
        let path = dir.join(format!(
            "{}-{}",
            std::process::id(),
            crate::sys::random_token()
        ));
        if let Err(e) = fs::write(&path, format!("{snapshot} {root}\n")) {
            // A full disk can leave the file made and empty: not a lease to leave behind.
            let _ = fs::remove_file(&path);
            return Err(StoreError::io("write", &path, e));
        }
        Ok(Lease {
            held: Held::File(path),
        })
    }

    /// The snapshot's loose raw record, locked shared, when it is the record of `snapshot`
    /// with root `root`; `None` when there is no such file (a lease file is taken instead).
    /// Fails as a missing snapshot when `forget` removed or moved the record while the lock
    /// was awaited.
    fn hold_record(
        &self,
        snapshot: &ObjectId,
        root: &ObjectId,
    ) -> Result<Option<File>, StoreError> {
        let path = self.objects().path_of(snapshot);
        let Some(mut file) = open_record(&path)? else {
            return Ok(None);
        };
        let bytes = read_record(&mut file, &path)?;
        let is_the_record = ObjectId::of(&bytes) == *snapshot
            && Snapshot::decode(&bytes).is_ok_and(|snap| snap.root == *root);
        if !is_the_record {
            return Ok(None);
        }
        // Waits only while a `forget` holds the record exclusively, to remove or move it.
        file.lock_shared()
            .map_err(|e| StoreError::io("lock", &path, e))?;
        let locked = file
            .metadata()
            .map_err(|e| StoreError::io("read", &path, e))?;
        match fs::symlink_metadata(&path) {
            Ok(now) if same_file(&now, &locked) => Ok(Some(file)),
            _ => Err(StoreError::MissingObject(*snapshot)),
        }
    }

    /// The first half of `forget`'s removal of a snapshot's loose raw record, done before
    /// the catalog entry goes, so that a refusal changes nothing: the record locked
    /// exclusively (nobody holds it), or, when a mount holds it, `leases/` checked (or made)
    /// to be a real directory to move it into (see the module doc). Under the shared store
    /// lock.
    pub(crate) fn prepare_record_removal(
        &self,
        snapshot: &ObjectId,
    ) -> Result<RecordRemoval, StoreError> {
        let path = self.objects().path_of(snapshot);
        Ok(match try_exclusive(&path)? {
            RecordLock::Absent => RecordRemoval(Removal::Nothing),
            RecordLock::Free(locked) => RecordRemoval(Removal::Remove { path, locked }),
            RecordLock::Held(_) => {
                let dir = self.leases_dir_made()?;
                let aside = dir.join(format!(
                    "{HELD_PREFIX}{snapshot}-{}",
                    crate::sys::random_token()
                ));
                RecordRemoval(Removal::SetAside { path, aside })
            }
        })
    }

    /// The second half: the record removed while still locked (a lease waiting for the lock
    /// then finds the path gone), or moved to `leases/` with the mount's lock on it. Whether
    /// it was moved: a running mount still serves the snapshot.
    pub(crate) fn finish_record_removal(&self, removal: RecordRemoval) -> Result<bool, StoreError> {
        match removal.0 {
            Removal::Nothing => Ok(false),
            Removal::Remove { path, locked } => {
                let removed = match fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        Err(StoreError::io("remove", &path, e))
                    }
                    _ => Ok(()),
                };
                drop(locked);
                removed.map(|()| false)
            }
            Removal::SetAside { path, aside } => fs::rename(&path, &aside)
                .map(|()| true)
                .map_err(|e| StoreError::io("move", &path, e)),
        }
    }

    /// `leases/`, made when missing; refused when it is anything but a real directory (a
    /// symlink would send lease files, held records and gc's removals of stale ones outside
    /// the store).
    fn leases_dir_made(&self) -> Result<PathBuf, StoreError> {
        let dir = self.leases_dir();
        match fs::create_dir(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                return Err(StoreError::io("create", &dir, e))
            }
            _ => {}
        }
        self.leases_dir_checked()?;
        Ok(dir)
    }

    /// Fails, naming `leases/`, when it exists and is not a real directory.
    fn leases_dir_checked(&self) -> Result<(), StoreError> {
        let dir = self.leases_dir();
        match fs::symlink_metadata(&dir) {
            Ok(meta) if !meta.is_dir() => Err(StoreError::io(
                "use",
                &dir,
                io::Error::other(
                    "it is not a directory (it holds only mount leases in a store): move it \
                     away and run the command again",
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether a mount holds `snapshot`'s loose raw record (gc, under the exclusive lock).
    pub(crate) fn record_is_held(&self, snapshot: &ObjectId) -> Result<bool, StoreError> {
        Ok(matches!(
            try_exclusive(&self.objects().path_of(snapshot))?,
            RecordLock::Held(_)
        ))
    }

    /// (snapshot, root tree) pairs held by live mounts outside the objects: lease files of
    /// live processes and held records `forget` set aside. Stale ones are removed. Under the
    /// exclusive lock (gc).
    pub(crate) fn live_leases(&self) -> Result<Vec<(ObjectId, ObjectId)>, StoreError> {
        // Never through a symlink: what gc removes here must be the store's.
        self.leases_dir_checked()?;
        let dir = self.leases_dir();
        let mut out = Vec::new();
        for ent in crate::sys::list_dir(&dir)? {
            let ent = ent?;
            let name = ent.file_name().to_string_lossy().into_owned();
            let path = ent.path();
            if name.starts_with(HELD_PREFIX) {
                match try_exclusive(&path)? {
                    RecordLock::Held(mut file) => {
                        let bytes = read_record(&mut file, &path)?;
                        if let Ok(snap) = Snapshot::decode(&bytes) {
                            out.push((ObjectId::of(&bytes), snap.root));
                        }
                    }
                    RecordLock::Free(locked) => {
                        let _ = fs::remove_file(&path);
                        drop(locked);
                    }
                    // Not a regular file (a symlink, a FIFO): not one forget made.
                    RecordLock::Absent => {
                        let _ = fs::remove_file(&path);
                    }
                }
                continue;
            }
            let pid = name.split('-').next().unwrap_or("");
            if !crate::sys::process_alive(pid) {
                let _ = fs::remove_file(&path);
                continue;
            }
            // As a regular file only, bounded: a FIFO or a symlink to /dev/zero named like a
            // live lease must not hang or fill gc.
            let text = crate::sys::read_regular(&path, 1024)
                .ok()
                .flatten()
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&text);
            let mut ids = text.split_whitespace().map(|w| w.parse::<ObjectId>());
            if let (Some(Ok(snap)), Some(Ok(root))) = (ids.next(), ids.next()) {
                out.push((snap, root));
            }
        }
        Ok(out)
    }
}

/// What [`Maintenance::prepare_record_removal`] decided, for [`Maintenance::finish_record_removal`].
pub(crate) struct RecordRemoval(Removal);

enum Removal {
    Nothing,
    /// Remove `path`, whose exclusive lock this holds.
    Remove {
        path: PathBuf,
        locked: File,
    },
    /// Move `path`, held by a mount, to `aside` in `leases/`.
    SetAside {
        path: PathBuf,
        aside: PathBuf,
    },
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::handle::Store;
    use crate::maintenance::tests::{future_dated_snapshot, make_fifo, snapshot_of};

    fn held_files(store: &Store) -> Vec<String> {
        crate::sys::list_dir(&store.maintenance().leases_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_lease_is_a_lock_on_the_record_and_keeps_a_forgotten_snapshot_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (snap, blob) = snapshot_of(&store, b"data", "s");
        let root = store.objects().read_snapshot(&snap).unwrap().root;
        let lease = store.maintenance().lease(&snap, &root).unwrap();
        assert!(lease.holds_the_record());
        assert!(
            !store.maintenance().leases_dir().exists(),
            "no lease file, no lease directory"
        );
        // gc keeps a held record the catalog no longer lists (a lost catalog).
        fs::remove_dir_all(dir.path().join("catalog")).unwrap();
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 0);

        // Forgotten while held: the record leaves the objects for `leases/`, the lock with it.
        store.maintenance().forget(&snap).unwrap();
        assert!(store.objects().file_of(&snap).is_none());
        let held = held_files(&store);
        assert_eq!(held.len(), 1, "{held:?}");
        assert!(
            held[0].starts_with(&format!("{HELD_PREFIX}{snap}-")),
            "{held:?}"
        );
        assert_eq!(
            store.maintenance().reindex().unwrap().snapshots,
            0,
            "reindex does not list it"
        );
        assert!(store.catalog().resolve(&snap.to_hex()).is_err());
        assert!(matches!(
            store.maintenance().lease(&snap, &root),
            Err(StoreError::MissingObject(_))
        ));
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 0);
        assert!(store.objects().has(&blob) && store.objects().has(&root));

        // Released: the next gc removes the data and the set-aside record.
        drop(lease);
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 2);
        assert!(!store.objects().has(&blob));
        assert!(held_files(&store).is_empty());
    }

    /// A record gc would not keep (not listed, and left out by the received-record rules: a
    /// date far in the future) is kept while a mount holds it, with what it reaches.
    #[test]
    fn gc_keeps_a_held_record_it_would_otherwise_remove() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (kept, _) = snapshot_of(&store, b"kept", "k");
        let kept_root = store.objects().read_snapshot(&kept).unwrap().root;
        let (future, root, blob) = future_dated_snapshot(&store, b"other");
        let lease = store.maintenance().lease(&future, &root).unwrap();
        assert!(lease.holds_the_record());
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 0);
        assert!(store.objects().has(&future) && store.objects().has(&blob));
        drop(lease);
        assert_eq!(
            store.maintenance().gc(0).unwrap().removed,
            3,
            "record, tree and blob"
        );
        assert!(!store.objects().has(&blob));
        assert_eq!(
            store.objects().read_snapshot(&kept).unwrap().root,
            kept_root
        );
    }

    #[test]
    fn forget_of_a_record_nobody_holds_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (snap, _) = snapshot_of(&store, b"data", "s");
        let root = store.objects().read_snapshot(&snap).unwrap().root;
        drop(store.maintenance().lease(&snap, &root).unwrap());
        store.maintenance().forget(&snap).unwrap();
        assert!(store.objects().file_of(&snap).is_none());
        assert!(!store.maintenance().leases_dir().exists());
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 2);
    }

    /// A lease that waits while `forget` holds the record (to remove it) fails as a missing
    /// snapshot instead of holding a removed file gc cannot see.
    #[test]
    fn a_lease_granted_after_forget_removed_the_record_fails_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (snap, _) = snapshot_of(&store, b"data", "s");
        let root = store.objects().read_snapshot(&snap).unwrap().root;
        let path = store.objects().path_of(&snap);
        // What forget does: lock exclusively, remove, release.
        let RecordLock::Free(locked) = try_exclusive(&path).unwrap() else {
            panic!("nobody holds the record yet");
        };
        let (tx, rx) = mpsc::channel();
        let store_path = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let store = Store::open_or_create(&store_path).unwrap();
            tx.send(
                store
                    .maintenance()
                    .lease(&snap, &root)
                    .map(|l| l.holds_the_record()),
            )
            .unwrap();
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the lease waits for the exclusive lock"
        );
        fs::remove_file(&path).unwrap();
        drop(locked);
        let got = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        waiter.join().unwrap();
        assert!(
            matches!(got, Err(StoreError::MissingObject(id)) if id == snap),
            "{got:?}"
        );
    }

    /// A `leases/` that is a symlink, a file or a FIFO: gc refuses, naming it, and removes
    /// nothing through it; forget of a mounted snapshot refuses before it changes anything.
    #[test]
    fn a_leases_path_that_is_not_a_real_directory_is_refused_and_never_followed() {
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("99999999-x");
        fs::write(&victim, "not a lease").unwrap();
        for kind in ["symlink", "file", "fifo"] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open_or_create(dir.path()).unwrap();
            let (snap, _) = snapshot_of(&store, b"data", "s");
            let root = store.objects().read_snapshot(&snap).unwrap().root;
            let lease = store.maintenance().lease(&snap, &root).unwrap();
            let leases = store.maintenance().leases_dir();
            match kind {
                "symlink" => std::os::unix::fs::symlink(outside.path(), &leases).unwrap(),
                "file" => fs::write(&leases, "x").unwrap(),
                _ => make_fifo(&leases),
            }
            let err = store.maintenance().gc(0).unwrap_err().to_string();
            assert!(
                err.contains("leases") && err.contains("not a directory"),
                "{kind}: {err}"
            );
            let err = store.maintenance().forget(&snap).unwrap_err().to_string();
            assert!(err.contains("not a directory"), "{kind}: {err}");
            assert_eq!(
                store.catalog().resolve(&snap.to_hex()).unwrap(),
                snap,
                "{kind}: still listed"
            );
            assert!(
                store.objects().file_of(&snap).is_some(),
                "{kind}: record in place"
            );
            assert!(victim.exists(), "{kind}: nothing removed outside the store");
            assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1, "{kind}");
            drop(lease);
        }
    }

    /// What is planted in `leases/` is not followed and does not hang gc: a held-record name
    /// on a symlink or a FIFO is removed (not its target), a FIFO named like a live lease file
    /// is read without blocking.
    #[test]
    fn planted_lease_entries_neither_hang_gc_nor_reach_outside() {
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        fs::write(&target, "keep").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        snapshot_of(&store, b"data", "s");
        let leases = store.maintenance().leases_dir();
        fs::create_dir(&leases).unwrap();
        std::os::unix::fs::symlink(&target, leases.join(format!("{HELD_PREFIX}a-b"))).unwrap();
        let fifo = |name: String| {
            rustix::fs::mknodat(
                rustix::fs::CWD,
                leases.join(name),
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap()
        };
        fifo(format!("{HELD_PREFIX}c-d"));
        fifo(format!("{}-live", std::process::id()));
        let (tx, rx) = mpsc::channel();
        let root = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let store = Store::open_or_create(&root).unwrap();
            tx.send(store.maintenance().gc(0).map(|r| r.removed))
                .unwrap();
        });
        let removed = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("gc did not hang");
        assert_eq!(removed.unwrap(), 0);
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert_eq!(
            held_files(&store),
            vec![format!("{}-live", std::process::id())]
        );
    }

    #[test]
    fn what_is_not_a_loose_record_of_that_root_gets_a_lease_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (snap, blob) = snapshot_of(&store, b"data", "s");
        let root = store.objects().read_snapshot(&snap).unwrap().root;
        // A tree leased as itself (a library user mounting a tree), and a record named with
        // another root.
        for (leased, with_root) in [(root, root), (snap, blob)] {
            let lease = store.maintenance().lease(&leased, &with_root).unwrap();
            assert!(!lease.holds_the_record());
            assert_eq!(held_files(&store).len(), 1);
            drop(lease);
            assert!(held_files(&store).is_empty());
        }
    }
}
