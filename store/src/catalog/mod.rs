//! The catalog room: which snapshots this store holds and by what names, and what saves a
//! capture or a publish work. It owns `<store>/catalog/` (sled, opened only by [`session`]:
//! the snapshot list, names, destination records, older stat caches), the catalogs set aside
//! as `catalog.broken-*`, `<store>/dircache/` (the stat caches of captured sources and the
//! verdicts of checks: [`dircache`], [`verdicts`]), `<store>/destcache/` (destination records,
//! also [`dircache`]) and `<store>/signatures/` ([`signatures`]).
//!
//! The commit is here: [`Catalog::commit_snapshot`] is the one place that enforces the write
//! order of the crate doc (objects synced, record written and synced, catalog entry, then the
//! index room's tree index). The catalog is a cache of the snapshot records: a lost one is
//! rebuilt from them under the rules of [`admission`], which `gc` and `reindex` share.

use std::fs;
use std::io;
use std::path::Path;

use crate::error::StoreError;
use crate::id::ObjectId;
use crate::index::Index;
use crate::inner::Inner;
use crate::lock::WriteLock;
use crate::objects::ObjectDir;
use crate::snapshot::{validate_name, Snapshot};
use crate::source::ObjectSource;

pub(crate) mod admission;
pub(crate) mod dircache;
mod keys;
mod records;
mod refs;
mod session;
pub(crate) mod signatures;
mod verdicts;

pub use keys::{DestKey, SourceKey};
pub use session::{
    CatalogSession, DestCache, DestRecord, SnapshotSummary, SourceStatCache, StatCache,
    StatCacheUpdate, StatEntry,
};
pub use signatures::StoredSignature;
pub use verdicts::Verdicts;

/// The catalog's directory (sled's, and the reference table's), below the store root.
const CATALOG_DIR: &str = "catalog";

/// The catalog room (see the module doc). Reached through [`crate::Store::catalog`].
#[derive(Debug, Clone, Copy)]
pub struct Catalog<'s> {
    inner: &'s Inner,
}

impl<'s> Catalog<'s> {
    /// The catalog room of the store whose shared state is `inner`.
    pub(crate) fn new(inner: &'s Inner) -> Catalog<'s> {
        Catalog { inner }
    }

    /// The store directory.
    fn root(&self) -> &'s Path {
        self.inner.root()
    }

    /// The object directory, where the records a commit writes go.
    fn objects(&self) -> &'s ObjectDir {
        self.inner.objects()
    }

    /// The index room, whose tree index a commit writes last.
    fn index(&self) -> Index<'s> {
        Index::new(self.inner)
    }

    /// Resolves `reference` as [`Catalog::resolve`] does, except that a full snapshot id (64
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
    ///
    /// A name or `agent/ALIAS` is answered the same way from the reference table the catalog
    /// keeps beside it ([`Catalog::resolve_without_catalog`]).
    pub fn resolve_indexed(&self, reference: &str) -> Result<ObjectId, StoreError> {
        match self.resolve_without_catalog(reference) {
            Some(id) => Ok(id),
            None => self.resolve(reference),
        }
    }

    /// The snapshot `reference` names, answered without opening the catalog, or None for the
    /// catalog to answer (and to word the error): a name or `agent/ALIAS` by the reference
    /// table (`refs`, kept in step with the catalog by every session that changes it), a full
    /// id or an id prefix by the store's records ([`Index::resolve_abbreviation_indexed`]).
    /// Whatever answers, the snapshot must be a stored record whose root has a tree index
    /// (see [`Catalog::resolve_indexed`] for why that is sound).
    pub fn resolve_without_catalog(&self, reference: &str) -> Option<ObjectId> {
        let index = self.index();
        if let Some(id) = refs::read(&self.root().join(CATALOG_DIR))
            .and_then(|table| table.resolve(reference))
            .filter(|id| index.is_indexed_snapshot(id))
        {
            return Some(id);
        }
        index
            .resolve_full_indexed(reference)
            .or_else(|| index.resolve_abbreviation_indexed(reference))
    }

    /// Opens a catalog session; drop it as soon as the work with it is done (sled locks the
    /// catalog against every other process while it is open).
    ///
    /// A catalog that cannot be opened (a torn log after a full disk or a crash) is a cache
    /// of the objects: it is renamed `catalog.broken-<unix time>-<token>` (kept for a
    /// post-mortem; delete it freely), a one-line notice goes to stderr, and a new catalog is
    /// rebuilt from the snapshot records. Stat caches are lost (the next capture rehashes).
    pub fn session(&self) -> Result<CatalogSession, StoreError> {
        let path = self.root().join(CATALOG_DIR);
        let before = fs::symlink_metadata(&path).ok();
        // Reading the (small) snapshot index once finds a log that opens but is torn.
        let why = match CatalogSession::open(&path).and_then(|c| c.snapshots().map(|_| c)) {
            Err(StoreError::CatalogUnreadable { why, .. }) => why,
            Ok(c) if c.is_fresh() => return self.complete(c),
            other => return other,
        };
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let aside = self.root().join(format!(
            "catalog.broken-{stamp}-{}",
            crate::sys::random_token()
        ));
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
        let catalog = CatalogSession::open(&path)?;
        if catalog.is_fresh() {
            return self.complete(catalog);
        }
        Ok(catalog)
    }

    /// Builds a new catalog's index from the records, then marks it complete: a build cut
    /// short (a full disk) leaves it unmarked, and the next open sets it aside again.
    fn complete(&self, mut catalog: CatalogSession) -> Result<CatalogSession, StoreError> {
        self.rebuild_index(&catalog)?;
        catalog.mark_complete()?;
        Ok(catalog)
    }

    /// The stat cache a capture of `key` starts from: from its own file under `dircache/`,
    /// without a catalog session. A source without one may have a cache an older version
    /// kept in the catalog, unless the store says its catalog holds none (see `dircache`):
    /// that is read instead (the commit that writes the file removes it). The records the
    /// capture adds go to an unnamed file under `tmp/` past a bound.
    pub fn load_source_cache(&self, key: &SourceKey) -> Result<SourceStatCache, StoreError> {
        let mut cache = match self.load_dircache(key)? {
            Some(cache) => cache,
            None if matches!(key, SourceKey::Diff(_)) || !self.may_hold_caches() => {
                SourceStatCache::empty()
            }
            None => {
                let session = self.session()?;
                let cache = session.load_source_cache(key)?;
                self.mark_if_cache_free(&session);
                cache
            }
        };
        cache.spill_into(self.objects().tmp_dir());
        Ok(cache)
    }

    /// An empty destination record whose stats are taken from `recorded_at_ns` on, for
    /// [`CatalogSession::store_dest_cache`]; past a bound its records go to an unnamed file under
    /// `tmp/` instead of memory.
    pub fn dest_record(&self, recorded_at_ns: i64) -> DestRecord {
        DestRecord::spilling_into(recorded_at_ns, self.objects().tmp_dir())
    }

    /// Records the stat cache a capture left (nothing when it is unchanged), where
    /// [`Catalog::load_source_cache`] reads it. A capture that commits a snapshot passes it to
    /// [`Catalog::commit_snapshot`] instead.
    pub fn update_source_cache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        if update.is_empty() {
            return Ok(());
        }
        if !update.in_dircache {
            self.session()?.remove_stat_cache(update)?;
        }
        self.write_dircache(update)
    }

    /// Drops every source's stat cache, in the catalog (an older version's) and in
    /// `dircache/` (see `gc`).
    pub(crate) fn clear_stat_caches(&self) -> Result<(), StoreError> {
        self.session()?.clear_stat_caches()?;
        self.clear_dircaches()
    }

    /// Commits a snapshot whose trees and blobs are all written: syncs them, writes and syncs
    /// the record, then adds it to the catalog (in that order: the crash invariant), then
    /// writes the tree index of its root unless present (a derived cache shared by every
    /// snapshot with that root: see [`Index::write_tree_index`]). When
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

    /// [`Catalog::commit_snapshot`], writing the tree index from `trees` when given (the packs a
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

    /// [`Catalog::commit_snapshot`] of a capture whose parent is the latest snapshot of the same
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
        let catalog = self.session()?;
        snap.parent = catalog.latest_of_source(&snap.source)?;
        let id = self.commit_in(Some(catalog), lock, &snap, stat_cache.as_ref())?;
        drop(stat_cache);
        self.index_committed(&id, None);
        Ok((id, snap))
    }

    /// The commit itself, in a catalog session opened by the caller or here; everything but
    /// the tree index ([`Catalog::index_committed`]).
    fn commit_in(
        &self,
        catalog: Option<CatalogSession>,
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
            None => self.session()?,
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

    /// Resolves a snapshot reference (see [`CatalogSession::resolve`]) with a short catalog session.
    pub fn resolve(&self, reference: &str) -> Result<ObjectId, StoreError> {
        self.session()?.resolve(reference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use crate::snapshot::{CaptureReport, SnapshotKind};
    use crate::tree::Tree;

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
        store.catalog().commit_snapshot(&lock, &snap, None).unwrap()
    }

    #[test]
    fn an_unreadable_catalog_is_set_aside_and_rebuilt() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let id = one_snapshot(&store);
        garble_catalog(dir.path());
        let opened = CatalogSession::open(&dir.path().join("catalog")).and_then(|c| c.snapshots());
        assert!(
            matches!(opened, Err(StoreError::CatalogUnreadable { .. })),
            "{opened:?}"
        );
        assert_eq!(store.catalog().resolve("kept").unwrap(), id);
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
        assert_eq!(store.maintenance().reindex().unwrap().snapshots, 1);
        assert_eq!(store.catalog().resolve("kept").unwrap(), id);
    }

    fn named_snapshot(store: &Store, name: &str, agent: Option<&str>, at: i128) -> ObjectId {
        let blob = store.objects().write_bytes(name.as_bytes()).unwrap();
        let entry = crate::tree::TreeEntry::file(format!("f{at}").into_bytes(), 0o644, 1, blob);
        let tree = Tree::from_entries(vec![entry]).unwrap();
        let root = store.objects().write_tree(&tree).unwrap();
        let snap = Snapshot {
            root,
            created_unix_ns: at,
            host: "h".into(),
            kind: SnapshotKind::Tree,
            source: format!("s{at}"),
            agent: agent.map(str::to_string),
            name: Some(name.into()),
            parent: None,
            report: CaptureReport::default(),
        };
        let lock = store.write_lock().unwrap();
        store.catalog().commit_snapshot(&lock, &snap, None).unwrap()
    }

    /// Moves sled's own files away, so that only what needs no catalog can answer.
    fn without_sled<T>(root: &Path, f: impl FnOnce() -> T) -> T {
        let (catalog, aside) = (root.join("catalog"), root.join("sled-aside"));
        fs::create_dir(&aside).unwrap();
        let moved: Vec<_> = fs::read_dir(&catalog)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != refs::REFS_FILE)
            .collect();
        for n in &moved {
            fs::rename(catalog.join(n), aside.join(n)).unwrap();
        }
        let out = f();
        for n in &moved {
            fs::rename(aside.join(n), catalog.join(n)).unwrap();
        }
        fs::remove_dir(&aside).unwrap();
        out
    }

    /// The reference table answers a name and `agent/ALIAS` without sled, and follows every
    /// change of the catalog: a name that moves, a forgotten snapshot, a newer agent snapshot.
    #[test]
    fn names_and_agents_resolve_without_the_catalog_and_follow_its_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let a = named_snapshot(&store, "n", Some("coder"), 10);
        let quick =
            |r: &str| without_sled(dir.path(), || store.catalog().resolve_without_catalog(r));
        assert_eq!(quick("n"), Some(a));
        assert_eq!(quick("agent/coder"), Some(a));
        assert_eq!(quick("agent/other"), None);
        assert_eq!(quick("missing"), None);
        // The name moves to a newer snapshot, which is also the agent's newest.
        let b = named_snapshot(&store, "n", Some("coder"), 20);
        assert_eq!(quick("n"), Some(b));
        assert_eq!(quick("agent/coder"), Some(b));
        // Forgotten: the table no longer names it; the catalog words the error.
        store.maintenance().forget(&b).unwrap();
        assert_eq!(quick("n"), None);
        assert_eq!(quick("agent/coder"), Some(a));
        assert!(store.catalog().resolve_indexed("n").is_err());
        assert_eq!(store.catalog().resolve_indexed("agent/coder").unwrap(), a);
    }

    /// A session that changed names and died before it closed (a crash) leaves no table, so
    /// readers ask the catalog, and the next session writes the table again. A table that
    /// names a record without a tree index, or a hand-edited one, is not trusted.
    #[test]
    fn a_crash_leaves_no_table_and_a_wrong_table_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let a = named_snapshot(&store, "n", None, 10);
        let b = named_snapshot(&store, "m", None, 20);
        let snap_b = store.objects().read_snapshot(&b).unwrap();
        let session = store.catalog().session().unwrap();
        session
            .add_snapshot(
                b,
                &Snapshot {
                    name: Some("n".into()),
                    ..snap_b
                },
            )
            .unwrap();
        std::mem::forget(session); // no Drop: as if killed here
        let table = refs::path(&dir.path().join("catalog"));
        assert!(!table.exists());
        // sled's lock dies with the process; here the forgotten session still holds it, so
        // the catalog itself is not asked in this test.
        assert_eq!(
            without_sled(dir.path(), || store.catalog().resolve_without_catalog("n")),
            None
        );
        // A table that points at a record with no tree index is not trusted.
        let record = Snapshot {
            root: ObjectId::of(b"no such tree"),
            ..store.objects().read_snapshot(&a).unwrap()
        };
        let c = store.objects().write_bytes(&record.encode()).unwrap();
        let mut wrong = refs::RefTable::default();
        wrong.names.insert("n".into(), c.to_hex());
        refs::write(&dir.path().join("catalog"), &wrong).unwrap();
        assert_eq!(store.catalog().resolve_without_catalog("n"), None);
    }

    /// A source's stat cache lives in a file under `dircache/`: one an older version kept in
    /// the catalog is read when there is no file (in a store that does not say its catalog
    /// holds none), the next commit writes the file and removes the catalog's copy, and
    /// clearing the caches (gc) removes both kinds.
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
            .session()
            .unwrap()
            .update_stat_cache(&old.into_update(&key))
            .unwrap();
        let file = store.root().join(dircache::DIR);
        assert!(!file.exists());
        // A new store says its catalog holds no cache, and is not asked.
        assert!(store.catalog().load_source_cache(&key).unwrap().is_empty());
        // A store an older version made is.
        fs::remove_file(store.root().join(dircache::NO_CATALOG_CACHES)).unwrap();
        let mut cache = store.catalog().load_source_cache(&key).unwrap();
        assert_eq!(cache.get(b"b.md").map(|(_, e)| e), Some(entry(2)));
        assert!(store.catalog().may_hold_caches());
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
            .catalog()
            .commit_snapshot(&lock, &snap, Some(&cache.into_update(&key)))
            .unwrap();
        assert!(
            store
                .catalog()
                .session()
                .unwrap()
                .load_source_cache(&key)
                .unwrap()
                .is_empty(),
            "the catalog's copy is gone"
        );
        let loaded = store.catalog().load_source_cache(&key).unwrap();
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
            .session()
            .unwrap()
            .update_stat_cache(&again.into_update(&SourceKey::Dir("/other".into())))
            .unwrap();
        store.catalog().clear_stat_caches().unwrap();
        assert_eq!(fs::read_dir(&file).unwrap().count(), 0);
        assert!(store.catalog().may_hold_caches());
        assert!(store.catalog().load_source_cache(&key).unwrap().is_empty());
        assert!(
            !store.catalog().may_hold_caches(),
            "a lookup that finds the catalog empty says so"
        );
        assert!(store
            .catalog()
            .load_source_cache(&SourceKey::Dir("/other".into()))
            .unwrap()
            .is_empty());
    }
}
