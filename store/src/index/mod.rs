//! The tree index: for the root tree of every committed snapshot, the store keeps a trees-only
//! pack (the digest pack of [`crate::pack`], same format) at `<store>/trees/<root-id>.pack`,
//! rooted at that tree and holding every tree it reaches, so a reader gets every directory
//! listing of a snapshot from one file (one sequential read) instead of one object file per
//! directory. composefs keeps all of an image's metadata in one file for the same reason.
//!
//! **Shared by root.** Snapshots with the same root tree (every no-op capture after the first)
//! share one index, and a commit that finds its root's index present writes none: on the
//! benchmark corpus each copy was 1.4 MB, at 300,000 files 15 to 18 MB, and writing it was
//! most of a no-op's peak memory. The snapshot's record is not in the index: it is one small
//! object, read from the objects. Builds before this one kept an index per snapshot,
//! `trees/<snapshot-id>.pack`, rooted at its record; such an index is still read when the
//! snapshot's root has none, checked by `verify`, kept by `gc` while its snapshot lives, and
//! converted by `reindex` (which writes the root's index, then removes it). The names cannot
//! collide (a record and a tree never have the same bytes), and nothing needs a new store
//! version: an older build looks only for the per-snapshot name, so for a snapshot committed
//! by this one it finds no index and reads the objects, as it does for any snapshot without
//! one (its `gc` removes the shared indexes as orphans; they are a cache).
//!
//! **A derived cache.** The index is written after the snapshot's record and catalog entry
//! ([`crate::Catalog::commit_snapshot`] calls `ensure_tree_index` last), to `tmp/`, fsynced, renamed
//! into `trees/`, and the directory fsynced: a crash leaves either no index or a whole one.
//! Its absence is never an error: [`Index::snapshot_source`] then answers from the objects,
//! silently. `reindex` rebuilds missing and bad indexes, `verify` checks each snapshot's
//! against the objects, and `gc` removes those no live snapshot (a record it keeps, or a
//! mount's lease) uses: a shared index stays while any snapshot with its root lives.
//!
//! **Never trusted.** The pack reader hashes every tree it hands out against its id, so a
//! corrupt, truncated or hostile index cannot make a reader see a wrong tree: an index that
//! does not open, is rooted elsewhere, or fails a read is dropped for the rest of the source's
//! life with one notice on stderr, and the trees come from the objects.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::error::StoreError;
use crate::id::ObjectId;
use crate::inner::Inner;
use crate::limits::{complete_expansion, Expansion, MAX_INDEX_IN_MEMORY};
use crate::objects::{Blob, ObjectDir, StoreReader};
use crate::pack::{write_tree_pack, PackReader, PackStats};
use crate::source::ObjectSource;
use crate::tree::{EntryKind, Tree, TreeShape};
use crate::tree_view::TreeView;

mod expansion;

pub use expansion::RecordState;

/// The largest parent index a commit reads whole to write its own (see
/// `write_root_index`); a larger one is read tree by tree.
const WRITER_IN_MEMORY: u64 = 1 << 20;

/// The directory of the tree indexes, below the store root.
pub(crate) const TREES_DIR: &str = "trees";
const SUFFIX: &str = ".pack";

/// What [`Index::check_tree_index`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexState {
    /// No index file (never written, or removed): readers use the objects.
    Missing,
    /// The index holds exactly every tree the snapshot reaches (and, an index of an older
    /// build, its record), each verified.
    Good,
    /// The index is unusable; the sentence says why.
    Bad(String),
}

/// Counters of a [`SnapshotSource`]: where its trees came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TreeSourceStats {
    /// The index was opened and is still in use (no read from it failed).
    pub index_used: bool,
    /// Bytes of the index file (0 without one).
    pub index_bytes: u64,
    /// Trees answered from the index.
    pub trees_from_index: u64,
    /// Tree objects read from the object directory (one file each).
    pub trees_from_objects: u64,
}

/// The index file that serves a snapshot, and the root its header must name.
#[derive(Debug)]
struct IndexFile {
    path: PathBuf,
    /// The root tree (the shared index) or the snapshot (an older build's).
    root: ObjectId,
    /// Whether it is the shared index of the root tree.
    shared: bool,
}

/// One snapshot's trees from its tree index (when usable), blobs and anything else from the
/// store's objects. An [`ObjectSource`], as the store and a pack are; built by
/// [`Index::snapshot_source`].
#[derive(Debug)]
pub struct SnapshotSource {
    reader: StoreReader,
    snapshot: ObjectId,
    /// The index, opened for positioned reads (`None`: none usable). Set when the source
    /// is made, or at its first use for one made by [`Index::snapshot_source_answering`].
    index: OnceLock<Option<PackReader>>,
    /// The index file to open at first use, when `index` is not set yet.
    pending: Option<Box<IndexFile>>,
    /// The root tree, read off the head of the index (where the writer puts it) and hashed
    /// against its id, when the source was made without opening the index.
    head_root: Option<Box<(ObjectId, Tree)>>,
    /// The index read whole, once [`SnapshotSource::hold_index_in_memory`] did: answers
    /// before `index`.
    in_memory: OnceLock<Box<PackReader>>,
    index_bytes: u64,
    /// Set once a read from the index failed: the notice is printed, the index not used again.
    dropped: AtomicBool,
    from_index: AtomicU64,
    from_objects: AtomicU64,
}

impl SnapshotSource {
    /// The snapshot this source serves.
    pub fn snapshot(&self) -> &ObjectId {
        &self.snapshot
    }

    /// Where the trees read so far came from.
    pub fn stats(&self) -> TreeSourceStats {
        TreeSourceStats {
            index_used: self
                .index
                .get()
                .map_or(self.pending.is_some(), Option::is_some)
                && !self.dropped.load(Ordering::Relaxed),
            index_bytes: self.index_bytes,
            trees_from_index: self.from_index.load(Ordering::Relaxed),
            trees_from_objects: self.from_objects.load(Ordering::Relaxed),
        }
    }

    fn usable_index(&self) -> Option<&PackReader> {
        if self.dropped.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(pack) = self.in_memory.get() {
            return Some(pack);
        }
        self.index
            .get_or_init(|| {
                let file = self.pending.as_ref()?;
                open_usable(&self.snapshot, file, 0)
            })
            .as_ref()
    }

    /// Reads the index, opened for positioned reads, whole into memory when it is at most
    /// `limit` bytes, so later trees cost no system call; reads meanwhile go on from the
    /// file. For a reader that answers before it has read every tree (a mount with the
    /// root's expansion recorded), off its answering path. Whether it is now held.
    pub fn hold_index_in_memory(&self, limit: u64) -> bool {
        if self.in_memory.get().is_some() {
            return true;
        }
        if self.dropped.load(Ordering::Relaxed) || self.index_bytes > limit {
            return false;
        }
        // The file the index was opened from, or is to be opened from at first use (read
        // whole now, it is never opened for positioned reads).
        let (path, root) = match (self.index.get(), &self.pending) {
            (Some(Some(index)), _) => (index.path().to_path_buf(), index.root),
            (None, Some(file)) => (file.path.clone(), file.root),
            _ => return false,
        };
        // Opened again by its path: each tree is still hashed against its id as it is read,
        // so a file replaced meanwhile (by `reindex`) can only answer right or be dropped.
        match open_checked(&path, &root, limit) {
            Some(Ok(pack)) if pack.is_in_memory() => self.in_memory.set(Box::new(pack)).is_ok(),
            _ => false,
        }
    }

    fn drop_index(&self, why: &StoreError) {
        if !self.dropped.swap(true, Ordering::Relaxed) {
            notice(&self.snapshot, &why.to_string());
        }
    }

    /// `read` of the tree index when it holds `id` and is still trusted, else of the store's
    /// objects; an index that fails a read is dropped for the rest of this source's life.
    fn read_index_or_objects<T>(
        &self,
        id: &ObjectId,
        read: impl Fn(&dyn ObjectSource) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        if let Some(index) = self.usable_index() {
            if index.entry(id).is_some() {
                match read(index) {
                    Ok(found) => {
                        self.from_index.fetch_add(1, Ordering::Relaxed);
                        return Ok(found);
                    }
                    Err(e) => self.drop_index(&e),
                }
            }
        }
        self.from_objects.fetch_add(1, Ordering::Relaxed);
        read(&self.reader)
    }
}

fn notice(snapshot: &ObjectId, why: &str) {
    eprintln!(
        "notice: the tree index of snapshot {} is not usable ({why}); reading its trees from \
         the objects instead (`zeroclaw-bundle reindex` rebuilds it)",
        snapshot.short(12)
    );
}

impl ObjectSource for SnapshotSource {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        if let Some((root, tree)) = self.head_root.as_deref() {
            if root == id {
                self.from_index.fetch_add(1, Ordering::Relaxed);
                return Ok(tree.clone());
            }
        }
        self.read_index_or_objects(id, |source| source.tree(id))
    }

    fn tree_shape(&self, id: &ObjectId) -> Result<TreeShape, StoreError> {
        self.read_index_or_objects(id, |source| source.tree_shape(id))
    }

    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        if let Some((root, tree)) = self.head_root.as_deref() {
            if root == id {
                self.from_index.fetch_add(1, Ordering::Relaxed);
                return Ok(TreeView::of(tree));
            }
        }
        self.read_index_or_objects(id, |source| source.tree_view(id))
    }

    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.reader.blob(id)
    }

    fn blob_of_size(&self, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
        self.reader.blob_of_size(id, size)
    }

    /// Only what the index does not hold is hinted to the object directory.
    fn prefetch(&self, ids: &[ObjectId]) {
        match self.usable_index() {
            Some(index) => {
                let rest: Vec<ObjectId> = ids
                    .iter()
                    .filter(|id| index.entry(id).is_none())
                    .copied()
                    .collect();
                if !rest.is_empty() {
                    self.reader.prefetch(&rest);
                }
            }
            None => self.reader.prefetch(ids),
        }
    }
}

/// The index room: the tree index of every committed snapshot's root tree and the record of
/// what that tree expands to, both under `<store>/trees/` (see the module doc). Reached
/// through [`crate::Store::index`].
#[derive(Debug, Clone, Copy)]
pub struct Index<'s> {
    inner: &'s Inner,
}

impl<'s> Index<'s> {
    /// The index room of the store whose shared state is `inner`.
    pub(crate) fn new(inner: &'s Inner) -> Index<'s> {
        Index { inner }
    }

    /// The store directory.
    fn root(&self) -> &'s Path {
        self.inner.root()
    }

    /// The object directory, where the trees an index holds come from.
    fn objects(&self) -> &'s ObjectDir {
        self.inner.objects()
    }

    /// The part of [`crate::Catalog::resolve_indexed`] that needs no catalog: the snapshot a full id
    /// with a present record and a tree index names, else None (the catalog's to answer). A
    /// caller that must not open the catalog (a mount's fast start) asks this alone.
    pub fn resolve_full_indexed(&self, reference: &str) -> Option<ObjectId> {
        let id = ObjectId::from_full_ref(reference)?;
        self.is_indexed_snapshot(&id).then_some(id)
    }

    /// Whether `id` names a snapshot record whose root (or, from an older build, the snapshot
    /// itself) has a tree index: what [`Index::resolve_full_indexed`] answers without the
    /// catalog.
    pub(crate) fn is_indexed_snapshot(&self, id: &ObjectId) -> bool {
        let is_file = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
        // The record is read, not only found: a tree's id names a shared index too.
        self.objects().read_snapshot(id).is_ok_and(|snap| {
            is_file(&self.tree_index_path(&snap.root)) || is_file(&self.snapshot_index_path(id))
        })
    }

    /// [`Index::resolve_full_indexed`] for an id prefix (8 to 63 hex digits, any case), without
    /// the catalog: the one snapshot record stored loose under `objects/` whose id starts with
    /// it and whose root has a tree index. None when there is no such record or more than one
    /// candidate (a name, an unknown or an ambiguous reference is the catalog's to answer).
    /// For a mount, whose start the catalog's open would dominate: `list` shows 16-digit ids,
    /// a usual way to name a snapshot to mount.
    ///
    /// A record is served here as [`Index::resolve_full_indexed`] serves a full id, by the same
    /// argument: its root's index exists only for a listed snapshot's tree. Unlike the
    /// catalog's match (listed snapshots only), a record left by a forgotten snapshot that
    /// `gc` has not removed yet counts here as a candidate: with a listed one beside it the
    /// prefix is two candidates and goes to the catalog; alone, it is served by its own
    /// fields over a listed tree (the catalog would call the prefix unknown).
    pub fn resolve_abbreviation_indexed(&self, reference: &str) -> Option<ObjectId> {
        /// Candidates looked at before the question goes to the catalog.
        const MOST: usize = 2;
        /// A record's largest size here (records are a few hundred bytes).
        const RECORD_MOST: u64 = 64 << 10;
        let prefix = reference.to_ascii_lowercase();
        if !(8..64).contains(&prefix.len()) || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let dir = self.root().join("objects").join(&prefix[..2]);
        let mut ids: Vec<ObjectId> = Vec::new();
        for entry in fs::read_dir(&dir).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name();
            let name = name.to_str()?;
            let rest = name.strip_suffix(".zst").unwrap_or(name);
            if rest.len() != 62 || !rest.starts_with(&prefix[2..]) {
                continue;
            }
            let id: ObjectId = format!("{}{rest}", &prefix[..2]).parse().ok()?;
            if !ids.contains(&id) {
                ids.push(id);
            }
            if ids.len() > MOST {
                return None;
            }
        }
        let mut found = ids.into_iter().filter(|id| {
            let small = |p: PathBuf| {
                fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.len() <= RECORD_MOST)
            };
            (small(self.objects().path_of(id)) || small(self.objects().compressed_path_of(id)))
                && self.is_indexed_snapshot(id)
        });
        match (found.next(), found.next()) {
            (Some(id), None) => Some(id),
            _ => None,
        }
    }

    /// Where the tree index of root tree `root` lives (it may be absent): the index of every
    /// snapshot whose root it is.
    pub fn tree_index_path(&self, root: &ObjectId) -> PathBuf {
        self.root()
            .join(TREES_DIR)
            .join(format!("{}{SUFFIX}", root.to_hex()))
    }

    /// Where an older build kept the tree index of `snapshot` alone (rooted at its record);
    /// still read when the snapshot's root has no index of its own.
    pub fn snapshot_index_path(&self, snapshot: &ObjectId) -> PathBuf {
        self.tree_index_path(snapshot)
    }

    /// The index file that serves snapshot `snapshot` of root tree `root`: the root's when
    /// anything has its name (a non-file there is reported bad, not skipped), else the
    /// snapshot's own (an older build's; it may be absent).
    fn index_file(&self, snapshot: &ObjectId, root: &ObjectId) -> IndexFile {
        let shared = self.tree_index_path(root);
        if fs::symlink_metadata(&shared).is_ok() {
            return IndexFile {
                path: shared,
                root: *root,
                shared: true,
            };
        }
        IndexFile {
            path: self.snapshot_index_path(snapshot),
            root: *snapshot,
            shared: false,
        }
    }

    /// Writes (or replaces) the tree index of the root tree of committed snapshot
    /// `snapshot`, which every snapshot with that root shares: written to `tmp/`, fsynced,
    /// renamed into `trees/`, the directory fsynced. A failure leaves no partial index (the
    /// temp file is removed). This is `reindex`'s: it never reads the index it replaces.
    pub fn write_tree_index(&self, snapshot: &ObjectId) -> Result<PackStats, StoreError> {
        let snap = self.objects().read_snapshot(snapshot)?;
        self.write_root_index(snapshot, &snap.root, snap.parent, None)
    }

    /// The commit's step: writes the tree index of `snapshot`'s root unless that root has
    /// one already (another snapshot with the same root wrote it: a no-op capture writes
    /// nothing), reading the trees through `trees` when given. `None` when it was present.
    pub(crate) fn ensure_tree_index(
        &self,
        snapshot: &ObjectId,
        trees: Option<&dyn ObjectSource>,
    ) -> Result<Option<PackStats>, StoreError> {
        let snap = self.objects().read_snapshot(snapshot)?;
        // Present is enough: a bad one is every reader's to drop (with a notice) and
        // `verify`'s to report, as a bad one of the snapshot's own would be.
        if fs::symlink_metadata(self.tree_index_path(&snap.root)).is_ok() {
            return Ok(None);
        }
        self.write_root_index(snapshot, &snap.root, snap.parent, trees)
            .map(Some)
    }

    /// Writes the index of root tree `root` (of snapshot `snapshot`, child of `parent`).
    fn write_root_index(
        &self,
        snapshot: &ObjectId,
        root: &ObjectId,
        parent: Option<ObjectId>,
        trees: Option<&dyn ObjectSource>,
    ) -> Result<PackStats, StoreError> {
        let dir = self.root().join(TREES_DIR);
        fs::create_dir_all(&dir).map_err(|e| StoreError::io("create", &dir, e))?;
        let tmp = self.objects().tmp_dir().join(format!(
            "index-{}-{}",
            std::process::id(),
            crate::sys::random_token()
        ));
        let dest = self.tree_index_path(root);
        // The record goes first: one that lied (hand-edited, say) must not outlive the index
        // it came with when no new record can be written (a tree past the limits, a full disk).
        let record = self.expansion_record_path(root);
        match fs::remove_file(&record) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(StoreError::io("remove", &record, e));
            }
            _ => {}
        }
        let written = (|| -> Result<PackStats, StoreError> {
            let file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| StoreError::io("create", &tmp, e))?;
            // 256 KiB writes: the corpus's 1.4 MB index went out in 175 writes of 8 KiB.
            let mut out = BufWriter::with_capacity(1 << 18, file);
            // Where the trees come from, fastest first. An older build's index of this very
            // snapshot holds them all (reindex converting it). Else a new snapshot shares most
            // trees with its parent: those come from the parent's index (one sequential read)
            // instead of one object file each, which on a cold cache is most of a capture's
            // time; each is hashed against its id. Read tree by tree, not whole: each is
            // read once, in the order the parent's index was written (so the reads are
            // sequential), and a 300,000-file tree's index (18 MB) read whole was a third of
            // a no-op capture's peak memory. Never the root's index itself: it is the file
            // being written (or replaced: bad).
            let own = self.snapshot_index_path(snapshot);
            let stats = if let Some(trees) = trees {
                write_tree_pack(trees, root, &mut out)
            } else if fs::symlink_metadata(&own).is_ok_and(|m| m.is_file()) {
                let source = self.source_at(
                    snapshot,
                    IndexFile {
                        path: own,
                        root: *snapshot,
                        shared: false,
                    },
                    WRITER_IN_MEMORY,
                );
                write_tree_pack(&source, root, &mut out)
            } else if let Some(parent) = parent {
                let source = self.snapshot_source_within(&parent, WRITER_IN_MEMORY);
                write_tree_pack(&source, root, &mut out)
            } else {
                write_tree_pack(&self.objects().reader(), root, &mut out)
            }?;
            let file = out
                .into_inner()
                .map_err(|e| StoreError::io("write", &tmp, e.into_error()))?;
            file.sync_all()
                .map_err(|e| StoreError::io("sync", &tmp, e))?;
            fs::rename(&tmp, &dest).map_err(|e| StoreError::io("rename into", &dest, e))?;
            File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::io("sync", &dir, e))?;
            Ok(stats)
        })();
        match &written {
            // What the root expands to, for readers that would walk every tree to know it.
            Ok(_) => {
                self.record_expansion_from_index(root);
            }
            Err(_) => {
                let _ = fs::remove_file(&tmp);
            }
        }
        written
    }

    /// Writes the expansion record of root tree `root` (`expansion_record`) from its index,
    /// every tree read from it and hashed against its id. The record is a cache: without it
    /// a reader walks, so a failure here (the index unusable, a tree past the limits, a full
    /// disk) is nobody's error and leaves no record.
    pub(crate) fn record_expansion_from_index(&self, root: &ObjectId) -> Option<Expansion> {
        let pack = open_checked(&self.tree_index_path(root), root, WRITER_IN_MEMORY)?.ok()?;
        self.write_expansion_record(root, &pack).ok()
    }

    /// An [`ObjectSource`] for snapshot `snapshot`: its trees from its tree index when there
    /// is a usable one (read whole into memory up to [`MAX_INDEX_IN_MEMORY`], one sequential
    /// read), everything else from the objects. Never fails: a missing index (or record) is
    /// silently replaced by the objects, an unusable index with one notice on stderr.
    pub fn snapshot_source(&self, snapshot: &ObjectId) -> SnapshotSource {
        self.snapshot_source_within(snapshot, MAX_INDEX_IN_MEMORY)
    }

    /// [`Index::snapshot_source`], reading an index of more than `in_memory` bytes by
    /// positioned reads instead of whole (0: always by positioned reads; each tree read when
    /// asked for, every one still verified). A long-lived reader (a mount) asks for positioned
    /// reads: a whole index stays in its memory for its life; so does a reader that walks the
    /// trees once and must stay small (a checkout).
    pub fn snapshot_source_within(&self, snapshot: &ObjectId, in_memory: u64) -> SnapshotSource {
        // The record names the root, and so the index; without it nothing can be read anyway.
        match self.objects().read_snapshot(snapshot) {
            Ok(snap) => self.source_at(snapshot, self.index_file(snapshot, &snap.root), in_memory),
            Err(_) => self.source_without_index(snapshot),
        }
    }

    /// A source for `snapshot` reading its trees from index file `file` when usable.
    fn source_at(&self, snapshot: &ObjectId, file: IndexFile, in_memory: u64) -> SnapshotSource {
        match open_usable(snapshot, &file, in_memory) {
            Some(pack) => SnapshotSource {
                index_bytes: fs::metadata(&file.path).map(|m| m.len()).unwrap_or(0),
                index: OnceLock::from(Some(pack)),
                ..self.source_without_index(snapshot)
            },
            None => self.source_without_index(snapshot),
        }
    }

    /// Reads what [`Index::snapshot_source_answering`] reads of the index of `snapshot`
    /// (root `root`): its first page. For the warm-up of a mount another process starts.
    pub(crate) fn read_index_head(&self, snapshot: &ObjectId, root: &ObjectId) {
        let _ = read_head(&self.index_file(snapshot, root));
    }

    /// A [`Index::snapshot_source_within`] of `snapshot` (0 bytes in memory) for a reader
    /// that must answer before it reads anything but the root tree: a mount whose root's
    /// expansion is recorded. The index's end (its entry table and trailer, which lie past
    /// everything else) is read at the first tree other than the root; the root comes off
    /// the index's first page, where the writer puts it right after the header, hashed
    /// against its id. From a cold cache that spares the answering path three reads in a row
    /// (trailer, count, a 130 KB entry table for the 20,000-file corpus). A head that is not
    /// that (an older build's index rooted at the record, a damaged file) only means the root
    /// is read as any other tree.
    pub fn snapshot_source_answering(&self, snapshot: &ObjectId) -> SnapshotSource {
        let Ok(snap) = self.objects().read_snapshot(snapshot) else {
            return self.source_without_index(snapshot);
        };
        let file = self.index_file(snapshot, &snap.root);
        let Some((bytes, head_root)) = read_head(&file) else {
            // No index there (or not a regular file): as `snapshot_source_within` would.
            return self.source_at(snapshot, file, 0);
        };
        SnapshotSource {
            index_bytes: bytes,
            index: OnceLock::new(),
            pending: Some(Box::new(file)),
            head_root: head_root.map(Box::new),
            ..self.source_without_index(snapshot)
        }
    }

    fn source_without_index(&self, snapshot: &ObjectId) -> SnapshotSource {
        SnapshotSource {
            reader: self.objects().reader(),
            snapshot: *snapshot,
            index: OnceLock::from(None),
            pending: None,
            head_root: None,
            in_memory: OnceLock::new(),
            index_bytes: 0,
            dropped: AtomicBool::new(false),
            from_index: AtomicU64::new(0),
            from_objects: AtomicU64::new(0),
        }
    }

    /// Checks the tree index that serves `snapshot` (whose root tree is `root`) against the
    /// objects: it verifies (trailer, every object's id), is a trees-only pack rooted at the
    /// root tree (an older build's: at the snapshot), and holds exactly every tree the
    /// snapshot reaches (an older build's: and the record).
    pub fn check_tree_index(
        &self,
        snapshot: &ObjectId,
        root: &ObjectId,
    ) -> Result<IndexState, StoreError> {
        let file = self.index_file(snapshot, root);
        self.check_index_file(&file, snapshot, root)
    }

    /// [`Index::check_tree_index`] of a known index file (`verify` checks a shared one once).
    fn check_index_file(
        &self,
        file: &IndexFile,
        snapshot: &ObjectId,
        root: &ObjectId,
    ) -> Result<IndexState, StoreError> {
        let pack = match open_index(&file.path, MAX_INDEX_IN_MEMORY) {
            Ok(pack) => pack,
            Err(StoreError::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => {
                return Ok(IndexState::Missing)
            }
            Err(e) => return Ok(IndexState::Bad(e.to_string())),
        };
        if let Err(why) = check_header(&pack, &file.root) {
            return Ok(IndexState::Bad(why));
        }
        let verified = if file.shared {
            // No record to decode; and nothing between the trees and the index.
            pack.verify_objects().and_then(|()| {
                if pack.signatures()?.is_empty() {
                    Ok(())
                } else {
                    Err(StoreError::BadPack {
                        pack: file.path.clone(),
                        why: "carries signatures, which a tree index never holds".into(),
                    })
                }
            })
        } else {
            pack.verify()
        };
        if let Err(e) = verified {
            return Ok(IndexState::Bad(e.to_string()));
        }
        let mut want: HashSet<ObjectId> = HashSet::new();
        if !file.shared {
            want.insert(*snapshot);
        }
        let mut stack = vec![*root];
        // Whether a tree of the snapshot was read neither from the store nor from the index:
        // what lies beneath it is unknown, so no index entry can be called extra.
        let mut unknown = false;
        while let Some(id) = stack.pop() {
            if !want.insert(id) {
                continue;
            }
            // A tree the store cannot read (corrupt, missing) is verify's own finding. The
            // index's copy was just verified against its id, so the walk goes on through it:
            // a good index is never blamed for a damaged object.
            let tree = match self.objects().read_tree(&id) {
                Ok(tree) => tree,
                Err(_) => match pack.tree(&id) {
                    Ok(tree) => tree,
                    Err(_) => {
                        unknown = true;
                        continue;
                    }
                },
            };
            stack.extend(
                tree.entries()
                    .iter()
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id),
            );
        }
        let held: HashSet<ObjectId> = pack.entries().iter().map(|e| e.id).collect();
        // The smallest id of each kind, so two runs name the same object.
        if let Some(extra) = held.difference(&want).min().filter(|_| !unknown) {
            return Ok(IndexState::Bad(format!(
                "it holds object {}, which the snapshot does not reach",
                extra.short(12)
            )));
        }
        if let Some(lacking) = want
            .difference(&held)
            .filter(|id| self.objects().has(id))
            .min()
        {
            return Ok(IndexState::Bad(format!(
                "it lacks tree {} of the snapshot",
                lacking.short(12)
            )));
        }
        if file.shared {
            if let Some(why) = self.check_expansion_record(&pack, root) {
                return Ok(IndexState::Bad(why));
            }
        }
        Ok(IndexState::Good)
    }

    /// What is wrong with the expansion record of root `root` (none: nothing, or no record),
    /// against `index`, the root's verified index holding every tree it reaches.
    fn check_expansion_record(&self, index: &PackReader, root: &ObjectId) -> Option<String> {
        let path = self.expansion_record_path(root);
        let recorded = match self.read_expansion_record(root) {
            RecordState::Missing => return None,
            RecordState::Found(recorded) => recorded,
            RecordState::Bad(why) => {
                return Some(format!(
                    "its expansion record {} is bad: {why}",
                    path.display()
                ))
            }
        };
        let counted = |e: &Expansion| {
            format!(
                "depth {}, entries {}, bytes {}",
                e.depth, e.entries, e.bytes
            )
        };
        match complete_expansion(index, root, &format!("tree {}", root.short(12))) {
            Ok(actual) if actual == recorded => None,
            Ok(actual) => Some(format!(
                "its expansion record {} says {} but its trees expand to {}",
                path.display(),
                counted(&recorded),
                counted(&actual)
            )),
            Err(e) => Some(format!(
                "its expansion record {} says {}, but the walk over its trees fails: {e}",
                path.display(),
                counted(&recorded)
            )),
        }
    }

    /// Removes the tree indexes in `trees/` whose name is in neither `snapshots` (an older
    /// build's index of a snapshot gc keeps) nor `roots` (the shared index of a root tree of
    /// one), and the expansion records of such roots; returns how many indexes. Only names of
    /// the form `<64 hex>.pack` and `<64 hex>.expansion` are touched.
    pub(crate) fn remove_orphan_indexes(
        &self,
        snapshots: &HashSet<ObjectId>,
        roots: &HashSet<ObjectId>,
    ) -> Result<u64, StoreError> {
        let dir = self.root().join(TREES_DIR);
        let mut removed = 0;
        let mut synced = true;
        for ent in crate::sys::list_dir(&dir)? {
            let ent = ent?;
            let name = ent.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            // An index counts; a record goes with its index, uncounted.
            let (hex, counted) = match name.strip_suffix(SUFFIX) {
                Some(hex) => (hex, true),
                None => match name.strip_suffix(expansion::SUFFIX) {
                    Some(hex) => (hex, false),
                    None => continue,
                },
            };
            let Ok(id) = hex.parse::<ObjectId>() else {
                continue;
            };
            // Only files are the store's: anything else under such a name is left alone.
            if ent.file_type().is_ok_and(|t| !t.is_file()) {
                continue;
            }
            if !snapshots.contains(&id) && !roots.contains(&id) {
                match fs::remove_file(ent.path()) {
                    Ok(()) => {
                        removed += u64::from(counted);
                        synced = false;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io("remove", ent.path(), e)),
                }
            }
        }
        if !synced {
            File::open(&dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| StoreError::io("sync", &dir, e))?;
        }
        Ok(removed)
    }
}

/// Opens an index file; anything but a regular file (a FIFO would block the open, a device
/// never end) is refused before it is opened.
pub(crate) fn open_index(path: &Path, in_memory: u64) -> Result<PackReader, StoreError> {
    match crate::sys::open_regular(path).map_err(|e| StoreError::io("open pack", path, e))? {
        Some(file) => PackReader::from_file_within(path, file, in_memory),
        None => Err(StoreError::BadPack {
            pack: path.to_path_buf(),
            why: "is not a regular file".into(),
        }),
    }
}

/// Opens index `path` (whole when at most `in_memory` bytes) and checks that its header
/// names `root`: the reader, or why it is not usable; `None` when there is no such file.
fn open_checked(
    path: &Path,
    root: &ObjectId,
    in_memory: u64,
) -> Option<Result<PackReader, String>> {
    match open_index(path, in_memory) {
        Ok(pack) => Some(check_header(&pack, root).map(|()| pack)),
        Err(StoreError::Io { error, .. }) if error.kind() == io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(e.to_string())),
    }
}

/// [`open_checked`] of the index `file` that serves `snapshot`, for a reader: an index that
/// is not there means the objects, silently (removed since, by `gc` or `reindex`); one that
/// is not usable the objects too, with one notice.
fn open_usable(snapshot: &ObjectId, file: &IndexFile, in_memory: u64) -> Option<PackReader> {
    match open_checked(&file.path, &file.root, in_memory)? {
        Ok(pack) => Some(pack),
        Err(why) => {
            notice(snapshot, &why);
            None
        }
    }
}

/// How much of an index's head [`read_head`] reads: one page, which holds the header and
/// the root tree of a directory of up to some 50 entries.
const HEAD_READ: usize = 4096;

/// The size of index `file` and, when its first page holds it, its root tree: a shared
/// index's header names `file.root` as a trees-only pack without a base, and the object
/// right after the header is that tree (its bytes hash to its id and decode). `None` when
/// there is no regular file to read.
fn read_head(file: &IndexFile) -> Option<(u64, Option<(ObjectId, Tree)>)> {
    use std::os::unix::fs::FileExt;
    let handle = crate::sys::open_regular(&file.path).ok()??;
    let size = handle.metadata().ok()?.len();
    let mut head = vec![0u8; HEAD_READ.min(usize::try_from(size).unwrap_or(HEAD_READ))];
    let root = (|| {
        if !file.shared {
            return None;
        }
        handle.read_exact_at(&mut head, 0).ok()?;
        let header = crate::pack::parse_pack_header(&file.path, &head).ok()?;
        if header.root != file.root || !header.trees_only || header.base.is_some() {
            return None;
        }
        let rest = head.get(crate::pack_format::HEADER_LEN as usize..)?;
        let bytes = rest.get(..crate::tree::encoded_len(rest)?)?;
        if ObjectId::of(bytes) != file.root {
            return None;
        }
        Some((file.root, Tree::decode(bytes).ok()?))
    })();
    Some((size, root))
}

/// Whether `pack` is a tree index rooted at `root` (a root tree, or an older build's
/// snapshot): a trees-only pack with that root, no base.
fn check_header(pack: &PackReader, root: &ObjectId) -> Result<(), String> {
    if pack.root != *root {
        return Err(format!(
            "{} is rooted at {}, not {}",
            pack.path().display(),
            pack.root.short(12),
            root.short(12)
        ));
    }
    if !pack.trees_only || pack.base.is_some() {
        return Err(format!(
            "{} is not a trees-only pack without a base",
            pack.path().display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use crate::limits::check_expansion;
    use crate::maintenance::VerifyProblem;
    use crate::snapshot::Snapshot;
    use crate::tree::TreeEntry;

    /// A snapshot of `dirs` directories, each holding a file and a subdirectory with a file;
    /// `salt` makes the content differ between snapshots.
    fn snapshot(store: &Store, dirs: usize, salt: &str) -> (ObjectId, ObjectId) {
        let file = |name: &str, text: String| TreeEntry {
            name: name.as_bytes().to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: text.len() as u64,
            id: store.objects().write_bytes(text.as_bytes()).unwrap(),
        };
        let dir = |name: String, tree: &Tree| TreeEntry {
            name: name.into_bytes(),
            kind: EntryKind::Dir,
            mode: 0o755,
            size: tree.total_size(),
            id: store.objects().write_tree(tree).unwrap(),
        };
        let mut top = Vec::new();
        for i in 0..dirs {
            let inner =
                Tree::from_entries(vec![file("deep.txt", format!("{salt} {i} deep"))]).unwrap();
            let mid = Tree::from_entries(vec![
                file("f.txt", format!("{salt} {i}")),
                dir("inner".into(), &inner),
            ])
            .unwrap();
            top.push(dir(format!("d{i:03}"), &mid));
        }
        let root_tree = Tree::from_entries(top).unwrap();
        let root = store.objects().write_tree(&root_tree).unwrap();
        let snap = Snapshot::for_test(root, salt);
        let lock = store.write_lock().unwrap();
        (
            store.catalog().commit_snapshot(&lock, &snap, None).unwrap(),
            root,
        )
    }

    /// Every tree of the snapshot through `source`, compared with the store's objects.
    fn same_trees(store: &Store, source: &SnapshotSource, root: &ObjectId) -> u64 {
        let mut stack = vec![*root];
        let mut n = 0;
        while let Some(id) = stack.pop() {
            let tree = source.tree(&id).unwrap();
            assert_eq!(tree, store.objects().read_tree(&id).unwrap());
            n += 1;
            stack.extend(
                tree.entries()
                    .iter()
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.id),
            );
        }
        n
    }

    #[test]
    fn an_id_prefix_resolves_without_the_catalog_only_to_one_indexed_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 2, "a");
        let hex = id.to_hex();
        let resolve = |r: &str| store.index().resolve_abbreviation_indexed(r);
        assert_eq!(resolve(&hex[..8]), Some(id));
        assert_eq!(resolve(&hex[..16].to_ascii_uppercase()), Some(id));
        assert_eq!(resolve(&hex[..63]), Some(id));
        // Too short, too long (a full id is resolve_full_indexed's), not hex, not a record.
        assert_eq!(resolve(&hex[..7]), None);
        assert_eq!(resolve(&hex), None);
        assert_eq!(resolve(&format!("{}g", &hex[..8])), None);
        assert_eq!(resolve(&root.to_hex()[..16]), None, "a tree is no snapshot");
        // Two loose objects under the prefix: the catalog's to answer, even when only one of
        // them is a record.
        let twin = dir.path().join("objects").join(&hex[..2]).join(format!(
            "{}{}",
            &hex[2..20],
            "0".repeat(44)
        ));
        fs::write(&twin, b"not a record").unwrap();
        assert_eq!(
            resolve(&hex[..20]),
            Some(id),
            "one record, one other object"
        );
        let third = twin.with_file_name(format!("{}{}", &hex[2..20], "1".repeat(44)));
        fs::write(&third, b"nor this").unwrap();
        assert_eq!(resolve(&hex[..20]), None, "more than two candidates");
        assert_eq!(
            resolve(&hex[..21]),
            Some(id),
            "a longer prefix tells them apart"
        );
        fs::remove_file(&twin).unwrap();
        fs::remove_file(&third).unwrap();
        // A FIFO under the prefix is no record (opening it to read would block).
        let fifo = twin.with_file_name(format!("{}{}", &hex[2..20], "2".repeat(44)));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(resolve(&hex[..20]), Some(id), "one record, one FIFO");
        fs::remove_file(&fifo).unwrap();
        // Without its root's index the record is the catalog's to answer.
        fs::remove_file(store.index().tree_index_path(&root)).unwrap();
        assert_eq!(resolve(&hex[..16]), None);
        assert_eq!(store.catalog().resolve(&hex[..16]).unwrap(), id);
    }

    #[test]
    fn commit_writes_the_index_and_the_source_reads_only_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 20, "a");
        assert!(store.index().tree_index_path(&root).is_file());
        assert!(!store.index().snapshot_index_path(&id).exists());
        assert_eq!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Good
        );
        let source = store.index().snapshot_source(&id);
        check_expansion(&source, &root, "test").unwrap();
        let trees = same_trees(&store, &source, &root);
        assert_eq!(trees, 41, "the root, 20 directories, 20 inner ones");
        let s = source.stats();
        assert!(s.index_used, "{s:?}");
        assert_eq!(s.trees_from_objects, 0, "{s:?}");
        assert_eq!(s.trees_from_index, 2 * 41, "{s:?}");
        // With no index at all (an older store), the same answers come from the objects.
        fs::remove_file(store.index().tree_index_path(&root)).unwrap();
        assert_eq!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Missing
        );
        let source = store.index().snapshot_source(&id);
        assert_eq!(same_trees(&store, &source, &root), 41);
        let s = source.stats();
        assert!(!s.index_used && s.trees_from_index == 0 && s.trees_from_objects == 41);
        // reindex writes it back.
        assert_eq!(
            store.maintenance().reindex().unwrap().tree_indexes_written,
            1
        );
        assert_eq!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Good
        );
    }

    #[test]
    fn a_commit_takes_the_trees_it_shares_with_its_parent_from_the_parent_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (parent, root) = snapshot(&store, 5, "a");
        // A subtree object gone from the object directory: only the parent's index still
        // holds it, so the child's index can be complete only if it was read from there.
        let sub = store.objects().read_tree(&root).unwrap().entries()[2].id;
        fs::remove_file(store.objects().file_of(&sub).unwrap()).unwrap();
        // The child adds a file at the top: a new root, every subtree shared.
        let mut entries = store.objects().read_tree(&root).unwrap().entries().to_vec();
        entries.push(store.file_entry_for_test("zz.txt", b"new"));
        let child_root = store
            .objects()
            .write_tree(&Tree::from_entries(entries).unwrap())
            .unwrap();
        let mut snap = store.objects().read_snapshot(&parent).unwrap();
        snap.root = child_root;
        snap.created_unix_ns = 2;
        snap.parent = Some(parent);
        let lock = store.write_lock().unwrap();
        let child = store.catalog().commit_snapshot(&lock, &snap, None).unwrap();
        drop(lock);
        let pack = PackReader::open(&store.index().tree_index_path(&child_root)).unwrap();
        pack.verify_objects().unwrap();
        assert_eq!(pack.root, child_root, "rooted at the tree");
        assert!(pack.trees_only && pack.base.is_none());
        assert!(
            pack.entry(&sub).is_some(),
            "the shared subtree is in the child's index"
        );
        assert!(pack.entry(&child).is_none(), "no record");
        assert_eq!(pack.entries().len(), 11, "11 trees");
    }

    /// The bytes of a pack with its trailer checksum recomputed (a hostile index that passes
    /// the whole-file check).
    fn rehash_trailer(bytes: &mut [u8]) {
        let n = bytes.len();
        let digest = ObjectId::of(&bytes[..n - 48]);
        bytes[n - 40..n - 8].copy_from_slice(digest.as_bytes());
    }

    #[test]
    fn a_damaged_or_foreign_index_never_changes_an_answer() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 3, "a");
        let (_, other_root) = snapshot(&store, 4, "b");
        let path = store.index().tree_index_path(&root);
        let good = fs::read(&path).unwrap();
        let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x41;
            cases.push((format!("byte {i} flipped"), b.clone()));
            // The same flip behind a recomputed trailer: only the per-object hash catches it.
            if i < good.len() - 48 {
                rehash_trailer(&mut b);
                cases.push((format!("byte {i} flipped, trailer rehashed"), b));
            }
        }
        for n in [0, 1, 80, good.len() / 2, good.len() - 1] {
            cases.push((format!("truncated to {n}"), good[..n].to_vec()));
        }
        cases.push((
            "another snapshot's index".into(),
            fs::read(store.index().tree_index_path(&other_root)).unwrap(),
        ));
        // An older build's index of this very snapshot, at the root's name.
        let mut legacy = Vec::new();
        store
            .packs()
            .write(
                &id,
                crate::pack::PackOptions {
                    since: None,
                    trees_only: true,
                },
                &mut legacy,
                &mut |_| {},
            )
            .unwrap();
        cases.push(("a per-snapshot index at the root's name".into(), legacy));
        let expansion =
            check_expansion(&store.index().snapshot_source(&id), &root, "test").unwrap();
        let mut bad_found = 0;
        for (what, bytes) in &cases {
            fs::write(&path, bytes).unwrap();
            let source = store.index().snapshot_source(&id);
            assert_eq!(
                check_expansion(&source, &root, "test").unwrap(),
                expansion,
                "{what}"
            );
            assert_eq!(same_trees(&store, &source, &root), 7, "{what}");
            // Nor the root a mount reads off the index's first page.
            let answering = store.index().snapshot_source_answering(&id);
            assert_eq!(same_trees(&store, &answering, &root), 7, "{what}");
            let state = store.index().check_tree_index(&id, &root).unwrap();
            if bytes != &good {
                // A flip in a field nothing reads (an unused flag bit is refused; padding
                // does not exist) must still be caught by the check.
                assert!(matches!(state, IndexState::Bad(_)), "{what}: {state:?}");
                bad_found += 1;
            }
        }
        assert_eq!(bad_found, cases.len());
        // verify names it; reindex rebuilds it; verify is clean again.
        let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
        assert!(
            matches!(v.problems.as_slice(), [VerifyProblem::BadTreeIndex { snapshot, .. }] if *snapshot == id),
            "{:?}",
            v.problems
        );
        assert_eq!(
            store.maintenance().reindex().unwrap().tree_indexes_written,
            1
        );
        let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        assert_eq!((v.tree_indexes, v.tree_indexes_missing), (2, 0));
    }

    #[test]
    fn an_index_that_is_not_a_file_is_refused_without_opening_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 2, "a");
        let path = store.index().tree_index_path(&root);
        fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        // Opening a FIFO with no writer would block forever.
        let source = store.index().snapshot_source(&id);
        assert_eq!(same_trees(&store, &source, &root), 5);
        assert!(!source.stats().index_used);
        assert!(matches!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Bad(_)
        ));
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        assert!(!store.index().snapshot_source(&id).stats().index_used);
        assert!(matches!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Bad(_)
        ));
    }

    #[test]
    fn gc_removes_the_indexes_of_forgotten_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (_, keep) = snapshot(&store, 2, "keep");
        let (gone_id, gone) = snapshot(&store, 2, "gone");
        fs::write(store.root().join(TREES_DIR).join("notes.txt"), "mine").unwrap();
        store.maintenance().forget(&gone_id).unwrap();
        assert!(store.index().tree_index_path(&gone).is_file());
        let r = store.maintenance().gc(3600).unwrap();
        assert_eq!(r.tree_indexes_removed, 1, "{r:?}");
        assert!(!store.index().tree_index_path(&gone).exists());
        assert!(store.index().tree_index_path(&keep).is_file());
        assert!(store.root().join(TREES_DIR).join("notes.txt").is_file());
        assert_eq!(store.maintenance().gc(0).unwrap().tree_indexes_removed, 0);
    }
    #[test]
    fn a_commit_records_what_its_root_expands_to_and_gc_removes_it_with_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (_, keep) = snapshot(&store, 3, "keep");
        let (gone_id, gone) = snapshot(&store, 2, "gone");
        for root in [keep, gone] {
            let walked = check_expansion(&store.objects().reader(), &root, "test").unwrap();
            assert_eq!(store.index().recorded_expansion(&root), Some(walked));
        }
        // 3 dirs, each of a file and a dir of a file: 3 + 3 * 2 + 3 * 1 entries.
        assert_eq!(store.index().recorded_expansion(&keep).unwrap().entries, 12);
        store.maintenance().forget(&gone_id).unwrap();
        let r = store.maintenance().gc(3600).unwrap();
        assert_eq!(
            r.tree_indexes_removed, 1,
            "a record is not counted as an index"
        );
        assert!(!store.index().expansion_record_path(&gone).exists());
        assert!(store.index().expansion_record_path(&keep).is_file());
    }

    #[test]
    fn a_record_that_is_damaged_lies_or_is_past_the_limits_is_not_used_and_reindex_mends_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 2, "r");
        let good = store.index().recorded_expansion(&root).unwrap();
        let path = store.index().expansion_record_path(&root);
        let verify_says = |store: &Store| -> Vec<String> {
            store
                .maintenance()
                .verify(&mut |_, _| {})
                .unwrap()
                .problems
                .iter()
                .map(|p| p.to_string())
                .collect()
        };
        assert!(verify_says(&store).is_empty());

        // A flipped byte: not used, and verify names the record.
        let mut bytes = fs::read(&path).unwrap();
        bytes[40] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(store.index().recorded_expansion(&root), None);
        let said = verify_says(&store);
        assert!(
            said.iter()
                .any(|p| p.contains("expansion record") && p.contains("checksum")),
            "{said:?}"
        );

        // A whole record of other figures is the store's word (see the module doc): used,
        // and what verify reports.
        let lie = Expansion {
            entries: good.entries + 1,
            ..good
        };
        fs::write(&path, expansion::encode(&root, &lie)).unwrap();
        assert_eq!(store.index().recorded_expansion(&root), Some(lie));
        let said = verify_says(&store);
        assert!(
            said.iter().any(
                |p| p.contains(&format!("entries {}, bytes", good.entries + 1))
                    && p.contains(&format!(
                        "expand to depth {}, entries {},",
                        good.depth, good.entries
                    ))
            ),
            "{said:?}"
        );

        // Figures past today's limits: not used (the reader walks, and refuses).
        let huge = Expansion {
            entries: crate::limits::MAX_ENTRIES + 1,
            ..good
        };
        fs::write(&path, expansion::encode(&root, &huge)).unwrap();
        assert_eq!(store.index().recorded_expansion(&root), None);

        // Another root's record under this name: not used.
        let (_, other) = snapshot(&store, 1, "other");
        fs::copy(store.index().expansion_record_path(&other), &path).unwrap();
        assert_eq!(store.index().recorded_expansion(&root), None);

        // reindex replaces the bad one, and writes a missing one.
        store.maintenance().reindex().unwrap();
        assert_eq!(store.index().recorded_expansion(&root), Some(good));
        fs::remove_file(&path).unwrap();
        assert_eq!(
            store.index().read_expansion_record(&root),
            RecordState::Missing
        );
        assert!(
            verify_says(&store).is_empty(),
            "a missing record is no problem"
        );
        store.maintenance().reindex().unwrap();
        assert_eq!(store.index().recorded_expansion(&root), Some(good));
        assert!(store.index().snapshot_source(&id).stats().index_used);
    }

    #[test]
    fn a_root_past_the_limits_gets_an_index_but_no_record() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        // A chain one directory deeper than the limit.
        let mut tree = Tree::from_entries(Vec::new()).unwrap();
        for _ in 0..=crate::limits::MAX_DEPTH {
            let id = store.objects().write_tree(&tree).unwrap();
            tree = Tree::from_entries(vec![TreeEntry {
                name: b"d".to_vec(),
                kind: EntryKind::Dir,
                mode: 0o755,
                size: 0,
                id,
            }])
            .unwrap();
        }
        let root = store.objects().write_tree(&tree).unwrap();
        let lock = store.write_lock().unwrap();
        store
            .catalog()
            .commit_snapshot(&lock, &Snapshot::for_test(root, "deep"), None)
            .unwrap();
        drop(lock);
        assert!(store.index().tree_index_path(&root).is_file());
        assert_eq!(
            store.index().read_expansion_record(&root),
            RecordState::Missing
        );
        assert!(check_expansion(&store.objects().reader(), &root, "deep").is_err());
        // A forged record that says it is small is the store's word until verify flags it;
        // reindex, which cannot write a true one, removes it rather than leave the lie.
        let small = Expansion {
            depth: 1,
            entries: 1,
            bytes: 0,
        };
        let path = store.index().expansion_record_path(&root);
        fs::write(&path, expansion::encode(&root, &small)).unwrap();
        assert_eq!(store.index().recorded_expansion(&root), Some(small));
        let said: Vec<String> = (store.maintenance().verify(&mut |_, _| {}).unwrap().problems)
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert!(
            said.iter().any(|p| p.contains("directory depth")),
            "{said:?}"
        );
        store.maintenance().reindex().unwrap();
        assert!(store.index().tree_index_path(&root).is_file());
        assert_eq!(
            store.index().read_expansion_record(&root),
            RecordState::Missing
        );
    }

    #[test]
    fn a_source_holds_its_index_in_memory_when_asked_and_answers_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 4, "held");
        let source = store.index().snapshot_source_within(&id, 0);
        let before = same_trees(&store, &source, &root);
        assert!(!source.hold_index_in_memory(10), "larger than the limit");
        assert!(source.hold_index_in_memory(1 << 20));
        assert!(source.hold_index_in_memory(1 << 20), "held already");
        // The file may go: the copy in memory answers.
        fs::remove_file(store.index().tree_index_path(&root)).unwrap();
        assert_eq!(same_trees(&store, &source, &root), before);
        let stats = source.stats();
        assert_eq!(stats.trees_from_objects, 0, "{stats:?}");
        assert_eq!(stats.trees_from_index, 2 * before);
    }

    #[test]
    fn an_answering_source_reads_the_root_off_the_head_and_the_rest_at_first_use() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 4, "answering");
        let eager = store.index().snapshot_source_within(&id, 0);
        let answering = store.index().snapshot_source_answering(&id);
        assert!(answering.stats().index_used);
        assert_eq!(answering.head_root.as_deref().map(|(r, _)| *r), Some(root));
        assert!(answering.index.get().is_none(), "not opened yet");
        assert_eq!(
            answering.tree(&root).unwrap(),
            store.objects().read_tree(&root).unwrap()
        );
        assert!(answering.index.get().is_none(), "the root needs no index");
        // The index goes: the source that opened it at once still reads from it, the one
        // that did not finds it gone at its first other tree and reads the objects.
        let held = store.index().snapshot_source_answering(&id);
        fs::remove_file(store.index().tree_index_path(&root)).unwrap();
        assert_eq!(same_trees(&store, &eager, &root), 9);
        assert_eq!(eager.stats().trees_from_objects, 0);
        assert_eq!(same_trees(&store, &answering, &root), 9);
        let stats = answering.stats();
        assert!(!stats.index_used, "{stats:?}");
        assert_eq!((stats.trees_from_index, stats.trees_from_objects), (2, 8));
        // Held in memory before it went, from the file it had not opened: every tree.
        let again = store.index().snapshot_source_answering(&id);
        assert!(again.head_root.is_none() && !again.stats().index_used);
        let (id2, root2) = snapshot(&store, 4, "held whole");
        let whole = store.index().snapshot_source_answering(&id2);
        assert!(whole.hold_index_in_memory(1 << 20));
        fs::remove_file(store.index().tree_index_path(&root2)).unwrap();
        assert_eq!(same_trees(&store, &whole, &root2), 9);
        assert_eq!(whole.stats().trees_from_objects, 0);
        drop(held);
    }

    #[test]
    fn a_full_id_with_an_index_resolves_without_the_catalog() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 2, "quick");
        let (other, other_root) = snapshot(&store, 2, "other");
        {
            // sled locks its directory: were the catalog opened, this would wait and fail.
            let _held = store.catalog().session().unwrap();
            assert_eq!(store.catalog().resolve_indexed(&id.to_hex()).unwrap(), id);
            let upper = id.to_hex().to_ascii_uppercase();
            assert_eq!(store.catalog().resolve_indexed(&upper).unwrap(), id);
        }
        // A short id, or a full one without an index, goes through the catalog.
        assert_eq!(store.catalog().resolve_indexed(&id.short(12)).unwrap(), id);
        fs::remove_file(store.index().tree_index_path(&other_root)).unwrap();
        assert_eq!(
            store.catalog().resolve_indexed(&other.to_hex()).unwrap(),
            other
        );
        // A tree's id names its index, but it is no snapshot: the catalog answers.
        assert!(matches!(
            store.catalog().resolve_indexed(&root.to_hex()),
            Err(StoreError::UnknownSnapshot { .. })
        ));
        // Forgotten: the index waits for gc, but the record is gone, so the catalog answers.
        store.maintenance().forget(&id).unwrap();
        assert!(store.index().tree_index_path(&root).is_file());
        assert!(matches!(
            store.catalog().resolve_indexed(&id.to_hex()),
            Err(StoreError::UnknownSnapshot { .. })
        ));
        // Not an id at all.
        assert!(store.catalog().resolve_indexed(&"z".repeat(64)).is_err());
    }

    /// Commits a snapshot with the same root as `of` (a no-op capture), child of `of`.
    fn same_root(store: &Store, of: &ObjectId, created: i128) -> ObjectId {
        let mut snap = store.objects().read_snapshot(of).unwrap();
        snap.created_unix_ns = created;
        snap.parent = Some(*of);
        let lock = store.write_lock().unwrap();
        store.catalog().commit_snapshot(&lock, &snap, None).unwrap()
    }

    /// The names in `trees/`, with each file's inode and modification time.
    fn index_files(store: &Store) -> Vec<(String, u64, std::time::SystemTime)> {
        use std::os::unix::fs::MetadataExt;
        let mut out: Vec<_> = fs::read_dir(store.root().join(TREES_DIR))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let m = e.metadata().unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    m.ino(),
                    m.modified().unwrap(),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_snapshot_whose_root_is_indexed_writes_no_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (first, root) = snapshot(&store, 6, "a");
        let before = index_files(&store);
        assert_eq!(
            before.len(),
            2,
            "the index and its expansion record: {before:?}"
        );
        let second = same_root(&store, &first, 2);
        let third = same_root(&store, &second, 3);
        // The same files, untouched: not rewritten, not replaced.
        assert_eq!(index_files(&store), before);
        for id in [first, second, third] {
            assert_eq!(
                store.index().check_tree_index(&id, &root).unwrap(),
                IndexState::Good
            );
            let source = store.index().snapshot_source(&id);
            assert_eq!(same_trees(&store, &source, &root), 13);
            let s = source.stats();
            assert!(s.index_used && s.trees_from_objects == 0, "{s:?}");
            assert_eq!(store.catalog().resolve_indexed(&id.to_hex()).unwrap(), id);
        }
        let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
        assert!(v.problems.is_empty(), "{:?}", v.problems);
        assert_eq!((v.tree_indexes, v.tree_indexes_missing), (3, 0));
        // reindex finds it good for all three: nothing written.
        assert_eq!(
            store.maintenance().reindex().unwrap().tree_indexes_written,
            0
        );
        assert_eq!(index_files(&store), before);
    }

    #[test]
    fn gc_keeps_a_shared_index_while_a_snapshot_with_its_root_lives() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (first, root) = snapshot(&store, 2, "a");
        let second = same_root(&store, &first, 2);
        store.maintenance().forget(&first).unwrap();
        assert_eq!(store.maintenance().gc(0).unwrap().tree_indexes_removed, 0);
        assert!(store.index().tree_index_path(&root).is_file());
        let source = store.index().snapshot_source(&second);
        assert_eq!(same_trees(&store, &source, &root), 5);
        assert_eq!(source.stats().trees_from_objects, 0);
        // A mount's lease keeps it too, after its snapshot is forgotten.
        let lease = store.maintenance().lease(&second, &root).unwrap();
        store.maintenance().forget(&second).unwrap();
        assert_eq!(store.maintenance().gc(0).unwrap().tree_indexes_removed, 0);
        assert!(store.index().tree_index_path(&root).is_file());
        drop(lease);
        assert_eq!(store.maintenance().gc(0).unwrap().tree_indexes_removed, 1);
        assert!(!store.index().tree_index_path(&root).exists());
    }

    /// What an older build wrote: `trees/<snapshot-id>.pack`, rooted at the record.
    fn write_legacy_index(store: &Store, id: &ObjectId) {
        let mut bytes = Vec::new();
        store
            .packs()
            .write(
                id,
                crate::pack::PackOptions {
                    since: None,
                    trees_only: true,
                },
                &mut bytes,
                &mut |_| {},
            )
            .unwrap();
        fs::write(store.index().snapshot_index_path(id), bytes).unwrap();
    }

    #[test]
    fn an_older_per_snapshot_index_is_read_kept_and_converted() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (id, root) = snapshot(&store, 4, "old");
        let (gone, gone_root) = snapshot(&store, 2, "gone");
        for (id, root) in [(id, root), (gone, gone_root)] {
            write_legacy_index(&store, &id);
            fs::remove_file(store.index().tree_index_path(&root)).unwrap();
        }
        // Every tree from the old index, none from the objects.
        let source = store.index().snapshot_source(&id);
        assert_eq!(same_trees(&store, &source, &root), 9);
        let s = source.stats();
        assert!(s.index_used && s.trees_from_objects == 0, "{s:?}");
        assert_eq!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Good
        );
        {
            let _held = store.catalog().session().unwrap();
            assert_eq!(store.catalog().resolve_indexed(&id.to_hex()).unwrap(), id);
        }
        // gc keeps it while its snapshot lives, and removes the forgotten one's.
        store.maintenance().forget(&gone).unwrap();
        assert_eq!(store.maintenance().gc(0).unwrap().tree_indexes_removed, 1);
        assert!(store.index().snapshot_index_path(&id).is_file());
        assert!(!store.index().snapshot_index_path(&gone).exists());
        // reindex converts it: the root's index written (from it), the old one removed.
        assert_eq!(
            store.maintenance().reindex().unwrap().tree_indexes_written,
            1
        );
        assert!(!store.index().snapshot_index_path(&id).exists());
        assert_eq!(
            store.index().check_tree_index(&id, &root).unwrap(),
            IndexState::Good
        );
        let pack = PackReader::open(&store.index().tree_index_path(&root)).unwrap();
        assert_eq!((pack.root, pack.entries().len()), (root, 9));
    }
}
