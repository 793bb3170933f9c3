//! The handle: [`Store`] opens (or creates) a store directory, checks and raises its
//! `STORE` marker, takes the store lock for writers, and hands out the five rooms, each
//! borrowing the shared state ([`crate::inner`]): [`Store::objects`], [`Store::index`],
//! [`Store::catalog`], [`Store::packs`] and [`Store::maintenance`]. It owns the marker and
//! the store's root directory; every other file belongs to a room.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::catalog::{dircache, signatures, Catalog};
use crate::error::StoreError;
use crate::index::{self, Index};
use crate::inner::Inner;
use crate::lock::{self, WriteLock};
use crate::maintenance::Maintenance;
use crate::objects::ObjectDir;
use crate::packs::Packs;
use crate::sys;

/// The mode of a store's root: only its owner may enter it.
const OWNER_ONLY: u32 = 0o700;

/// The store format version this build writes and the highest it reads. Version 2: tree
/// objects may be tree format 2 (entries carry their permission bits). Version 3: a small
/// object may be stored compressed, as `objects/ab/<62 hex>.zst` (see [`ObjectDir`]).
/// Version 4: small objects may be packed, in `objects/packs/` (see `packed`). Version 5: the
/// catalog keeps a reference table (`catalog/refs`) that every change of a name removes first
/// and rewrites after; a version-4 build would change names without it. An older
/// store is read as it is and its marker is raised to this version when this build opens it,
/// before it can write a format-2 tree, a compressed or a packed object: a build that knows
/// only an older version then refuses the store ([`StoreError::NewerStore`]) instead of
/// meeting trees it cannot read (its `gc` would not see what they reach) or reporting
/// compressed or packed objects as missing.
pub const STORE_VERSION: u32 = 5;
pub(crate) const MARKER: &str = "STORE";
const MARKER_HEAD: &str = "zeroclaw-bundle store";
/// The most of the marker that is read (it is two short lines).
const MARKER_MAX: u64 = 4096;

/// An open store. Cheap to clone; holds no lock (the catalog is opened per use).
#[derive(Debug, Clone)]
pub struct Store {
    inner: Inner,
}

impl Store {
    /// Opens the store at `root`, creating it when the directory is absent or empty.
    pub fn open_or_create(root: &Path) -> Result<Store, StoreError> {
        match fs::symlink_metadata(root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(StoreError::NotAStore {
                    path: root.to_path_buf(),
                    why: "it is not a directory".into(),
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                    fs::create_dir_all(parent)
                        .map_err(|e| StoreError::io("create store", parent, e))?;
                }
                match fs::DirBuilder::new().mode(OWNER_ONLY).create(root) {
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists && root.is_dir() => {}
                    other => other.map_err(|e| StoreError::io("create store", root, e))?,
                }
            }
            Err(e) => return Err(StoreError::io("open store", root, e)),
        }
        let marker = root.join(MARKER);
        let mut created = false;
        match Store::read_marker(root, &marker) {
            Ok(text) => {
                if Store::check_marker(root, &text)? < STORE_VERSION {
                    Store::raise_marker(root)?;
                    // Stores made before version 2 were created with the umask's mode, which
                    // let every local user read the bytes of a 0600 file out of `objects/`.
                    Store::make_owner_only(root);
                }
            }
            Err(StoreError::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => {
                // Another process may be creating this store right now: only our own layout
                // entries are allowed in a directory without a marker.
                // The marker itself may appear meanwhile (that process renamed its marker into
                // place after our read): writing ours over it is harmless, the text is the same.
                let entries = fs::read_dir(root).map_err(|e| StoreError::io("read", root, e))?;
                // Markers staged by creators that died before renaming theirs in.
                let mut stale_markers = Vec::new();
                for entry in entries {
                    let entry = entry.map_err(|e| StoreError::io("read", root, e))?;
                    let name = entry.file_name();
                    if let Some(pid) = name.to_string_lossy().strip_prefix("STORE.tmp.") {
                        if !sys::process_alive(pid) {
                            stale_markers.push(entry.path());
                        }
                    }
                    let ours = [
                        "objects",
                        "tmp",
                        "catalog",
                        "leases",
                        index::TREES_DIR,
                        dircache::DIR,
                        dircache::NO_CATALOG_CACHES,
                        signatures::SIGNATURES_DIR,
                        MARKER,
                        "STORE.tmp",
                        lock::LOCK_FILE,
                    ]
                    .iter()
                    .any(|n| name.as_encoded_bytes() == n.as_bytes())
                        || name.to_string_lossy().starts_with("STORE.tmp.");
                    if !ours {
                        return Err(StoreError::NotAStore {
                            path: root.to_path_buf(),
                            why: "the directory is not empty and has no STORE marker".into(),
                        });
                    }
                }
                Store::make_owner_only(root);
                // What every mount looks up comes first, so that ext4 numbers it right after
                // the root, in the same stretch of the inode table (a cold mount reads 128 KiB
                // of the table for each stretch): the tree indexes' directory (made at the
                // first commit instead, after a capture had filled the store's block group, it
                // went to another group), the marker (written now, renamed into place once the
                // layout exists: the rename keeps its inode) and the lock, then the 256
                // object directories.
                let trees = root.join(index::TREES_DIR);
                fs::create_dir_all(&trees).map_err(|e| StoreError::io("create", &trees, e))?;
                let marker = Store::stage_marker(root)?;
                lock::create(root)?;
                // A new store's catalog never held an older version's caches.
                dircache::mark_no_catalog_caches(root);
                ObjectDir::new(root).create_layout()?;
                Store::place_marker(root, &marker)?;
                for stale in stale_markers {
                    let _ = fs::remove_file(stale);
                }
                created = true;
            }
            Err(e) => return Err(e),
        }
        let store = Store {
            inner: Inner::at(root),
        };
        if created {
            // The catalog is made now, while the store is empty: a catalog made later
            // rebuilds its index from the snapshot records by scanning every object (the
            // commit of a first capture of 1.2 million files scanned them all, and held
            // their 117 MB listing). Failing here only leaves that to the first use.
            let _ = store.catalog().session();
        }
        Ok(store)
    }

    /// Makes the store's root owner-only (0700) when it is open to others: the objects hold the
    /// bytes of every captured file, including those no other user may read at their source.
    /// Best effort: a store the caller does not own keeps its mode.
    fn make_owner_only(root: &Path) {
        if let Ok(meta) = fs::metadata(root) {
            if meta.permissions().mode() & 0o077 != 0 {
                let _ = fs::set_permissions(root, fs::Permissions::from_mode(OWNER_ONLY));
            }
        }
    }

    /// Writes the marker of this build's version (to a temp file, renamed over the old one).
    fn write_marker(root: &Path) -> Result<(), StoreError> {
        let staged = Store::stage_marker(root)?;
        Store::place_marker(root, &staged)
    }

    /// The marker of this build's version, written to a temp file beside it.
    fn stage_marker(root: &Path) -> Result<PathBuf, StoreError> {
        let tmp = root.join(format!("STORE.tmp.{}", std::process::id()));
        fs::write(&tmp, format!("{MARKER_HEAD}\nversion {STORE_VERSION}\n"))
            .map_err(|e| StoreError::io("write", &tmp, e))?;
        Ok(tmp)
    }

    /// Renames a staged marker over the store's marker.
    fn place_marker(root: &Path, staged: &Path) -> Result<(), StoreError> {
        let marker = root.join(MARKER);
        fs::rename(staged, &marker).map_err(|e| StoreError::io("rename", &marker, e))
    }

    /// Raises an older store's marker to [`STORE_VERSION`] (see there). A store this user
    /// cannot write (read-only media, another user's store) stays as it is: nothing can write
    /// a new tree into it either.
    fn raise_marker(root: &Path) -> Result<(), StoreError> {
        match Store::write_marker(root) {
            Err(StoreError::Io { error, .. })
                if matches!(
                    error.kind(),
                    io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
                ) =>
            {
                Ok(())
            }
            other => other,
        }
    }

    /// The marker's text. Read only as a regular file, at most 4 KiB: a marker that is a
    /// symlink (to `/dev/zero`, say), a FIFO or a device would otherwise hang every command.
    fn read_marker(root: &Path, marker: &Path) -> Result<String, StoreError> {
        let not_ours = |why: &str| StoreError::NotAStore {
            path: root.to_path_buf(),
            why: why.to_string(),
        };
        let bytes = sys::read_regular(marker, MARKER_MAX)
            .map_err(|e| StoreError::io("read", marker, e))?
            .ok_or_else(|| not_ours("the STORE marker is not a regular file"))?;
        String::from_utf8(bytes).map_err(|_| not_ours("the STORE marker is not ours"))
    }

    /// Checks the marker's text; returns the store's version.
    fn check_marker(root: &Path, text: &str) -> Result<u32, StoreError> {
        let mut lines = text.lines();
        let not_store = |why: &str| StoreError::NotAStore {
            path: root.to_path_buf(),
            why: why.to_string(),
        };
        if lines.next() != Some(MARKER_HEAD) {
            return Err(not_store("the STORE marker is not ours"));
        }
        let version: u32 = lines
            .next()
            .and_then(|l| l.strip_prefix("version "))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| not_store("the STORE marker has no version"))?;
        if version > STORE_VERSION {
            return Err(StoreError::NewerStore {
                path: root.to_path_buf(),
                found: version,
                supported: STORE_VERSION,
            });
        }
        Ok(version)
    }

    /// The store directory.
    pub fn root(&self) -> &Path {
        self.inner.root()
    }

    /// The objects room: blobs, trees and snapshot records, and readers over them
    /// (`objects/`, `tmp/`).
    pub fn objects(&self) -> &ObjectDir {
        self.inner.objects()
    }

    /// The index room: tree indexes and expansion records (`trees/`).
    pub fn index(&self) -> Index<'_> {
        Index::new(&self.inner)
    }

    /// The catalog room: snapshots, names, commits, the caches of captures and publishes,
    /// signatures (`catalog/`, `dircache/`, `signatures/`).
    pub fn catalog(&self) -> Catalog<'_> {
        Catalog::new(&self.inner)
    }

    /// The packs room: a snapshot written out as a pack, packs unpacked and imported.
    pub fn packs(&self) -> Packs<'_> {
        Packs::new(&self.inner)
    }

    /// The maintenance room: verify, gc, reindex, forget, and the leases of mounts
    /// (`leases/`).
    pub fn maintenance(&self) -> Maintenance<'_> {
        Maintenance::new(&self.inner)
    }

    /// Takes the store lock shared for a writer (see the crate doc, "gc and writers"): hold
    /// it from before the first object a capture reuses or writes until its snapshot is
    /// committed. Waits while a gc or reindex runs.
    pub fn write_lock(&self) -> Result<WriteLock, StoreError> {
        self.inner.write_lock()
    }
}

#[cfg(test)]
impl Store {
    /// Tests: writes `bytes` as a blob and returns the 0644 file entry `name` naming it.
    pub(crate) fn file_entry_for_test(&self, name: &str, bytes: &[u8]) -> crate::tree::TreeEntry {
        let id = self
            .objects()
            .write_bytes(bytes)
            .expect("test blob written");
        crate::tree::TreeEntry::file(name.as_bytes().to_vec(), 0o644, bytes.len() as u64, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ObjectId;

    #[test]
    fn refuses_file_foreign_dir_and_newer_version() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            Store::open_or_create(&file),
            Err(StoreError::NotAStore { .. })
        ));
        let foreign = dir.path().join("foreign");
        fs::create_dir(&foreign).unwrap();
        fs::write(foreign.join("data"), "x").unwrap();
        assert!(matches!(
            Store::open_or_create(&foreign),
            Err(StoreError::NotAStore { .. })
        ));
        let newer = dir.path().join("newer");
        Store::open_or_create(&newer).unwrap();
        fs::write(newer.join("STORE"), "zeroclaw-bundle store\nversion 9\n").unwrap();
        let err = Store::open_or_create(&newer).unwrap_err();
        assert!(
            matches!(err, StoreError::NewerStore { found: 9, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_marker_that_is_not_a_regular_file_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        Store::open_or_create(&root).unwrap();
        let marker = root.join(MARKER);
        for make in ["symlink to /dev/zero", "fifo"] {
            fs::remove_file(&marker).unwrap();
            if make == "fifo" {
                let status = std::process::Command::new("mkfifo")
                    .arg(&marker)
                    .status()
                    .unwrap();
                assert!(status.success());
            } else {
                std::os::unix::fs::symlink("/dev/zero", &marker).unwrap();
            }
            // Read on a thread: a marker read that blocks (a FIFO) or never ends (/dev/zero)
            // fails the test instead of hanging it.
            let (tx, rx) = std::sync::mpsc::channel();
            let opening = root.clone();
            std::thread::spawn(move || {
                let _ = tx.send(Store::open_or_create(&opening).map(|_| ()));
            });
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("opening a store whose marker is a {make} hung"));
            assert!(
                matches!(&got, Err(StoreError::NotAStore { why, .. }) if why.contains("not a regular file")),
                "{make}: {got:?}"
            );
        }
    }

    /// A creator killed between staging its marker and renaming it in leaves a half-made
    /// store: the next open completes it and removes the dead creator's staged marker (a
    /// live creator's is left to it).
    #[test]
    fn a_store_half_made_by_a_killed_creator_is_completed_without_its_litter() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        fs::create_dir_all(root.join("objects/00")).unwrap();
        fs::create_dir_all(root.join(index::TREES_DIR)).unwrap();
        fs::write(root.join(lock::LOCK_FILE), "").unwrap();
        let dead = root.join("STORE.tmp.4194304999");
        let live = root.join("STORE.tmp.1");
        fs::write(&dead, "ZEROCLAW-BUNDLE-STORE\nversion 4\n").unwrap();
        fs::write(&live, "ZEROCLAW-BUNDLE-STORE\nversion 4\n").unwrap();
        let store = Store::open_or_create(&root).unwrap();
        assert!(root.join(MARKER).is_file());
        assert!(
            !dead.exists(),
            "the dead creator's staged marker is removed"
        );
        assert!(live.exists(), "pid 1 lives: its staged marker is its own");
        assert!(store
            .objects()
            .path_of(&ObjectId::of(b"x"))
            .parent()
            .unwrap()
            .is_dir());
    }

    /// A FIFO planted at an object's path (the snapshot record, here) is not the object: a
    /// read reports it missing instead of blocking in `open` (a mount and `verify` hung).
    #[test]
    fn a_fifo_at_an_objects_path_reads_as_missing_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        let store = Store::open_or_create(&root).unwrap();
        let (snap, _) = crate::maintenance::tests::snapshot_of(&store, b"fifo", "fifo");
        let path = store.objects().path_of(&snap);
        fs::remove_file(&path).unwrap();
        crate::maintenance::tests::make_fifo(&path);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let store = Store::open_or_create(&root).unwrap();
            let read = store.objects().read_snapshot(&snap).map(|_| ());
            let verified = store.maintenance().verify(&mut |_, _| {}).map(|_| ());
            tx.send((read, verified)).unwrap();
        });
        let (read, verified) = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("neither the read nor verify hangs on the FIFO");
        assert!(
            matches!(read, Err(StoreError::MissingObject(id)) if id == snap),
            "{read:?}"
        );
        assert!(verified.is_ok(), "{verified:?}");
    }

    #[test]
    fn dedup_same_content_is_one_object() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let big = vec![7u8; 3 * 1024 * 1024];
        let (a, _) = store.objects().write_from(&mut &big[..]).unwrap();
        let (b, _) = store.objects().write_from(&mut &big[..]).unwrap();
        let (c, _) = store.objects().write_from(&mut &b"small"[..]).unwrap();
        let (d, _) = store.objects().write_from(&mut &b"small"[..]).unwrap();
        assert_eq!(a, b);
        assert_eq!(c, d);
        assert_eq!(store.objects().list().unwrap().len(), 2);
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        assert_eq!(fs::read(store.objects().path_of(&a)).unwrap(), big);
    }
}
