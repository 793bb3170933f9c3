//! The handle: [`Store`] opens (or creates) a store directory, checks and raises its
//! `STORE` marker, takes the store lock for writers, and hands out the five rooms, each
//! borrowing the shared state ([`crate::inner`]): [`Store::objects`], [`Store::index`],
//! [`Store::catalog`], [`Store::packs`] and [`Store::maintenance`]. It owns the marker and
//! the store's root directory; every other file belongs to a room.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::catalog::{Catalog, DestRecord, SourceStatCache, StatCacheUpdate};
use crate::error::StoreError;
use crate::id::ObjectId;
use crate::index::Index;
use crate::inner::Inner;
use crate::keys::SourceKey;
use crate::lock::{self, WriteLock};
use crate::objects::ObjectDir;
use crate::snapshot::{validate_name, Snapshot};
use crate::source::ObjectSource;
use crate::{dircache, index, signatures, sys};

/// The mode of a store's root: only its owner may enter it.
const OWNER_ONLY: u32 = 0o700;

/// The store format version this build writes and the highest it reads. Version 2: tree
/// objects may be tree format 2 (entries carry their permission bits). Version 3: a small
/// object may be stored compressed, as `objects/ab/<62 hex>.zst` (see [`ObjectDir`]).
/// Version 4: small objects may be packed, in `objects/packs/` (see `packed`). An older
/// store is read as it is and its marker is raised to this version when this build opens it,
/// before it can write a format-2 tree, a compressed or a packed object: a build that knows
/// only an older version then refuses the store ([`StoreError::NewerStore`]) instead of
/// meeting trees it cannot read (its `gc` would not see what they reach) or reporting
/// compressed or packed objects as missing.
pub const STORE_VERSION: u32 = 4;
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
                ObjectDir::new(root).create_layout()?;
                Store::place_marker(root, &marker)?;
                for stale in stale_markers {
                    let _ = fs::remove_file(stale);
                }
            }
            Err(e) => return Err(e),
        }
        Ok(Store {
            inner: Inner::at(root),
        })
    }

    /// The store at `root` as paths only, for reads that must not open it (see `warm`): no
    /// marker is read or raised, nothing is created.
    pub(crate) fn unopened(root: &Path) -> Store {
        Store {
            inner: Inner::at(root),
        }
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

    /// The object directory (writes and reads of raw objects).
    pub fn objects(&self) -> &ObjectDir {
        self.inner.objects()
    }

    /// The index room: tree indexes and expansion records (`trees/`).
    pub fn index(&self) -> Index<'_> {
        Index::new(&self.inner)
    }

    /// Resolves `reference` as [`Store::resolve`] does, except that a full snapshot id (64
    /// hex digits) whose record is present and which has a tree index is answered without
    /// opening the catalog. Opening sled costs a mount's start more than everything else it
    /// does before it answers (measured: 6 ms of 24 ms warm, about 70 ms cold); a reader that
    /// is going to read the objects anyway asks this instead.
    ///
    /// Why that is sound: an index exists only for what the catalog has listed. A commit
    /// writes it after the catalog entry, `reindex` only for listed snapshots, and `gc`
    /// removes it once no snapshot it keeps has its root. An older build's per-snapshot index
    /// names a listed snapshot itself (`forget` removes the record with the catalog entry, so
    /// a forgotten one fails the record check). A shared index names a root tree: the record,
    /// read from the objects, names that root, so what is served is the tree of a listed
    /// snapshot. A record that is not listed itself (a commit cut short before its catalog
    /// entry, which `reindex` would list; a record that arrived as a file's content) brings
    /// only its own fields to such a tree: its creation time and its id, by which signatures
    /// are still checked (`--require-signed`). A record whose root has no index goes to the
    /// catalog, which refuses it.
    pub fn resolve_indexed(&self, reference: &str) -> Result<ObjectId, StoreError> {
        match self.index().resolve_full_indexed(reference) {
            Some(id) => Ok(id),
            None => self.resolve(reference),
        }
    }

    /// Opens the catalog; drop the result as soon as the work with it is done.
    ///
    /// A catalog that cannot be opened (a torn log after a full disk or a crash) is a cache
    /// of the objects: it is renamed `catalog.broken-<unix time>-<token>` (kept for a
    /// post-mortem; delete it freely), a one-line notice goes to stderr, and a new catalog is
    /// rebuilt from the snapshot records. Stat caches are lost (the next capture rehashes).
    pub fn catalog(&self) -> Result<Catalog, StoreError> {
        let path = self.root().join("catalog");
        let before = fs::symlink_metadata(&path).ok();
        // Reading the (small) snapshot index once finds a log that opens but is torn.
        let why = match Catalog::open(&path).and_then(|c| c.snapshots().map(|_| c)) {
            Err(StoreError::CatalogUnreadable { why, .. }) => why,
            Ok(c) if c.is_fresh() => return self.complete(c),
            other => return other,
        };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let aside = self
            .root()
            .join(format!("catalog.broken-{stamp}-{}", sys::random_token()));
        // Another process may have set it aside and rebuilt it meanwhile: move only the
        // directory that failed to open (same inode), and never a fresh one.
        let now = fs::symlink_metadata(&path).ok();
        let same = {
            use std::os::unix::fs::MetadataExt;
            matches!((&before, &now), (Some(a), Some(b)) if a.ino() == b.ino() && a.dev() == b.dev())
        };
        if same {
            match fs::rename(&path, &aside) {
                Ok(()) => eprintln!(
                    "notice: the catalog could not be used ({why}); moved it to {} and rebuilt it from the objects",
                    aside.display()
                ),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StoreError::io(
                        "set aside the unreadable catalog",
                        &path,
                        e,
                    ))
                }
            }
        }
        let catalog = Catalog::open(&path)?;
        if catalog.is_fresh() {
            return self.complete(catalog);
        }
        Ok(catalog)
    }

    /// Builds a new catalog's index from the records, then marks it complete: a build cut
    /// short (a full disk) leaves it unmarked, and the next open sets it aside again.
    fn complete(&self, mut catalog: Catalog) -> Result<Catalog, StoreError> {
        self.rebuild_index(&catalog)?;
        catalog.mark_complete()?;
        Ok(catalog)
    }

    /// Takes the store lock shared for a writer (see the crate doc, "gc and writers"): hold
    /// it from before the first object a capture reuses or writes until its snapshot is
    /// committed. Waits while a gc or reindex runs.
    pub fn write_lock(&self) -> Result<WriteLock, StoreError> {
        self.inner.write_lock()
    }

    /// The stat cache a capture of `key` starts from: from its own file under `dircache/`,
    /// without a catalog session. A source without one may have a cache an older version
    /// kept in the catalog: that is read instead (the commit that writes the file removes
    /// it). The records the capture adds go to an unnamed file under `tmp/` past a bound.
    pub fn load_source_cache(&self, key: &SourceKey) -> Result<SourceStatCache, StoreError> {
        let mut cache = match self.load_dircache(key)? {
            Some(cache) => cache,
            None if matches!(key, SourceKey::Diff(_)) => SourceStatCache::empty(),
            None => self.catalog()?.load_source_cache(key)?,
        };
        cache.spill_into(self.objects().tmp_dir());
        Ok(cache)
    }

    /// An empty destination record whose stats are taken from `recorded_at_ns` on, for
    /// [`Catalog::store_dest_cache`]; past a bound its records go to an unnamed file under
    /// `tmp/` instead of memory.
    pub fn dest_record(&self, recorded_at_ns: i64) -> DestRecord {
        DestRecord::spilling_into(recorded_at_ns, self.objects().tmp_dir())
    }

    /// Records the stat cache a capture left (nothing when it is unchanged), where
    /// [`Store::load_source_cache`] reads it. A capture that commits a snapshot passes it to
    /// [`Store::commit_snapshot`] instead.
    pub fn update_source_cache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        if update.is_empty() {
            return Ok(());
        }
        if !update.in_dircache {
            self.catalog()?.remove_stat_cache(update)?;
        }
        self.write_dircache(update)
    }

    /// Drops every source's stat cache, in the catalog (an older version's) and in
    /// `dircache/` (see `gc`).
    pub(crate) fn clear_stat_caches(&self) -> Result<(), StoreError> {
        self.catalog()?.clear_stat_caches()?;
        self.clear_dircaches()
    }

    /// Commits a snapshot whose trees and blobs are all written: syncs them, writes and syncs
    /// the record, then adds it to the catalog (in that order: the crash invariant), then
    /// writes the tree index of its root unless present (a derived cache shared by every
    /// snapshot with that root: see [`Store::write_tree_index`]). When
    /// `stat_cache` is given, it is applied in the same catalog session. `_lock` is the
    /// writer's proof that no gc ran since its capture started.
    pub fn commit_snapshot(
        &self,
        lock: &WriteLock,
        snap: &Snapshot,
        stat_cache: Option<&StatCacheUpdate>,
    ) -> Result<ObjectId, StoreError> {
        self.commit_snapshot_reading(lock, snap, stat_cache, None)
    }

    /// [`Store::commit_snapshot`], writing the tree index from `trees` when given (the packs a
    /// received snapshot came in, which hold its trees in memory or one file) instead of one
    /// object file per tree.
    pub(crate) fn commit_snapshot_reading(
        &self,
        lock: &WriteLock,
        snap: &Snapshot,
        stat_cache: Option<&StatCacheUpdate>,
        trees: Option<&dyn ObjectSource>,
    ) -> Result<ObjectId, StoreError> {
        let id = self.commit_in(None, lock, snap, stat_cache)?;
        self.index_committed(&id, trees);
        Ok(id)
    }

    /// [`Store::commit_snapshot`] of a capture whose parent is the latest snapshot of the same
    /// source: `snap.parent` is set from the catalog in the session that adds the record, so
    /// a capture opens the catalog once (each open of sled replays its log and fsyncs: about
    /// 10 ms warm and 50 ms cold on the benchmark machine, a tenth of a cold capture after 1%
    /// of the files changed). Returns the id and the record as written.
    ///
    /// The stat cache is taken by value and dropped once written, before the tree index is:
    /// at 300,000 files the loaded cache (27 MB) and the index writer's trees (16 MB) held
    /// together took a capture of one changed file past 64 MiB.
    pub fn commit_snapshot_of_source(
        &self,
        lock: &WriteLock,
        mut snap: Snapshot,
        stat_cache: Option<StatCacheUpdate>,
    ) -> Result<(ObjectId, Snapshot), StoreError> {
        let catalog = self.catalog()?;
        snap.parent = catalog.latest_of_source(&snap.source)?;
        let id = self.commit_in(Some(catalog), lock, &snap, stat_cache.as_ref())?;
        drop(stat_cache);
        self.index_committed(&id, None);
        Ok((id, snap))
    }

    /// The commit itself, in a catalog session opened by the caller or here; everything but
    /// the tree index ([`Store::index_committed`]).
    fn commit_in(
        &self,
        catalog: Option<Catalog>,
        _lock: &WriteLock,
        snap: &Snapshot,
        stat_cache: Option<&StatCacheUpdate>,
    ) -> Result<ObjectId, StoreError> {
        if let Some(name) = &snap.name {
            validate_name(name)?;
        }
        let encoded = snap.encode();
        snap.validate().map_err(|why| StoreError::Malformed {
            id: ObjectId::of(&encoded),
            what: "snapshot record",
            why,
        })?;
        self.objects().sync()?;
        let id = self.objects().write_bytes(&encoded)?;
        self.objects().sync()?;
        let catalog = match catalog {
            Some(catalog) => catalog,
            None => self.catalog()?,
        };
        catalog.add_snapshot(id, snap)?;
        let stat_cache = stat_cache.filter(|u| !u.is_empty());
        if let Some(update) = stat_cache.filter(|u| !u.in_dircache) {
            // An older version's copy in the catalog: the file written below replaces it (a
            // crash in between leaves no cache, and the next capture reads every file).
            catalog.remove_stat_cache(update)?;
        }
        drop(catalog);
        if let Some(update) = stat_cache {
            // The cache names only blobs made durable above; it is a file of its own, not
            // part of the catalog session, and never synced (a torn one reads as empty).
            self.write_dircache(update)?;
        }
        Ok(id)
    }

    /// Last step of a commit: the tree index is derived from what is now committed, and its
    /// absence is never an error (readers use the objects), so a failure here does not fail
    /// the commit.
    fn index_committed(&self, id: &ObjectId, trees: Option<&dyn ObjectSource>) {
        if let Err(e) = self.index().ensure_tree_index(id, trees) {
            eprintln!(
                "notice: could not write the tree index of snapshot {} ({e}); readers use the \
                 objects instead (`zeroclaw-bundle reindex` writes it)",
                id.short(12)
            );
        }
    }

    /// Resolves a snapshot reference (see [`Catalog::resolve`]) with a short catalog session.
    pub fn resolve(&self, reference: &str) -> Result<ObjectId, StoreError> {
        self.catalog()?.resolve(reference)
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
    use crate::catalog::StatEntry;
    use crate::keys::SourceKey;
    use crate::snapshot::{validate_name, CaptureReport, SnapshotKind};
    use crate::tree::Tree;

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
            let verified = store.verify(&mut |_, _| {}).map(|_| ());
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

    #[test]
    fn names_that_look_like_refs_are_refused() {
        assert!(validate_name("release-1").is_ok());
        assert!(validate_name("deadbeef").is_err());
        assert!(validate_name("agent/x").is_err());
        assert!(validate_name("a b").is_err());
        assert!(validate_name("").is_err());
    }

    fn garble_catalog(root: &Path) {
        let db = root.join("catalog/db");
        let mut bytes = fs::read(&db).unwrap();
        for b in bytes.iter_mut().step_by(7) {
            *b ^= 0x5a;
        }
        fs::write(&db, bytes).unwrap();
    }

    fn one_snapshot(store: &Store) -> ObjectId {
        let root = store.objects().write_tree(&Tree::default()).unwrap();
        let snap = Snapshot {
            root,
            created_unix_ns: 5,
            host: "h".into(),
            kind: SnapshotKind::Tree,
            source: "s".into(),
            agent: None,
            name: Some("kept".into()),
            parent: None,
            report: CaptureReport::default(),
        };
        let lock = store.write_lock().unwrap();
        store.commit_snapshot(&lock, &snap, None).unwrap()
    }

    #[test]
    fn an_unreadable_catalog_is_set_aside_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let id = one_snapshot(&store);
        garble_catalog(dir.path());
        let opened = Catalog::open(&dir.path().join("catalog")).and_then(|c| c.snapshots());
        assert!(
            matches!(opened, Err(StoreError::CatalogUnreadable { .. })),
            "{opened:?}"
        );
        assert_eq!(store.resolve("kept").unwrap(), id);
        let aside: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("catalog.broken-")
            })
            .collect();
        assert_eq!(aside.len(), 1);
        // The store still opens (the set-aside directory is ours), and reindex does not need
        // the old catalog either.
        Store::open_or_create(dir.path()).unwrap();
        garble_catalog(dir.path());
        assert_eq!(store.reindex().unwrap().snapshots, 1);
        assert_eq!(store.resolve("kept").unwrap(), id);
    }

    /// A source's stat cache lives in a file under `dircache/`: one an older version kept in
    /// the catalog is read when there is no file, the next commit writes the file and removes
    /// the catalog's copy, and clearing the caches (gc) removes both kinds.
    #[test]
    fn a_catalog_stat_cache_is_read_then_moved_to_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let key = SourceKey::Dir("/srv/tree".into());
        let entry = |n: u64| StatEntry {
            dev: 1,
            ino: n,
            size: n,
            mtime_ns: 3,
            ctime_ns: 4,
            exec: false,
            id: ObjectId::of(&n.to_be_bytes()),
        };
        // An older version's cache, in the catalog.
        let mut old = SourceStatCache::empty();
        old.put(b"a.md", &entry(1));
        old.put(b"b.md", &entry(2));
        store
            .catalog()
            .unwrap()
            .update_stat_cache(&old.into_update(&key))
            .unwrap();
        let file = store.root().join(dircache::DIR);
        assert!(!file.exists());
        let mut cache = store.load_source_cache(&key).unwrap();
        assert_eq!(cache.get(b"b.md").map(|(_, e)| e), Some(entry(2)));
        let (at, _) = cache.get(b"a.md").unwrap();
        cache.keep(at);
        cache.put(b"c.md", &entry(3));
        let lock = store.write_lock().unwrap();
        let root = store.objects().write_tree(&Tree::default()).unwrap();
        let snap = Snapshot {
            root,
            created_unix_ns: 5,
            host: "h".into(),
            kind: SnapshotKind::Tree,
            source: "s".into(),
            agent: None,
            name: None,
            parent: None,
            report: CaptureReport::default(),
        };
        store
            .commit_snapshot(&lock, &snap, Some(&cache.into_update(&key)))
            .unwrap();
        assert!(
            store
                .catalog()
                .unwrap()
                .load_source_cache(&key)
                .unwrap()
                .is_empty(),
            "the catalog's copy is gone"
        );
        let loaded = store.load_source_cache(&key).unwrap();
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded.get(b"a.md").map(|(_, e)| e), Some(entry(1)));
        assert_eq!(loaded.get(b"c.md").map(|(_, e)| e), Some(entry(3)));
        assert!(loaded.get(b"b.md").is_none(), "not kept");
        assert_eq!(fs::read_dir(&file).unwrap().count(), 1);
        // Clearing removes the file and any catalog copy.
        let mut again = SourceStatCache::empty();
        again.put(b"z.md", &entry(9));
        store
            .catalog()
            .unwrap()
            .update_stat_cache(&again.into_update(&SourceKey::Dir("/other".into())))
            .unwrap();
        store.clear_stat_caches().unwrap();
        assert_eq!(fs::read_dir(&file).unwrap().count(), 0);
        assert!(store.load_source_cache(&key).unwrap().is_empty());
        assert!(store
            .load_source_cache(&SourceKey::Dir("/other".into()))
            .unwrap()
            .is_empty());
    }
}
