//! The maintenance room: the verbs that walk every other room. `verify` (rehash every object,
//! check every snapshot's reachability and tree index), `gc` (mark from snapshot records and
//! live mount leases, sweep the rest past a grace period: objects, temp files, tree indexes,
//! signatures, destination records), `reindex` (rebuild the catalog from snapshot records,
//! write missing tree indexes) and `forget`. It owns `<store>/leases/`: the leases a mount
//! holds, which `gc` and `forget` honour, are `lease`'s. `gc` and `reindex` hold the store
//! lock exclusive for their whole run.
//!
//! gc's roots and reindex's catalog are the same set of snapshot records: which records are
//! snapshots of this store is the catalog room's rule (`catalog::admission`), applied by both.
//! Before it removes anything, gc drops the stat caches (captures trust a cache hit without a
//! blob lookup).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::Path;

use crate::catalog::Catalog;
use crate::error::StoreError;
use crate::id::ObjectId;
use crate::index::{Index, IndexState, RecordState};
use crate::inner::Inner;
use crate::objects::{ListedObject, ObjectDir};
use crate::tree::EntryKind;

mod lease;

pub use lease::Lease;

/// One problem found by `verify`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "problem", rename_all = "kebab-case")]
pub enum VerifyProblem {
    /// An object whose bytes do not hash to its name.
    Corrupt {
        /// The object.
        id: ObjectId,
    },
    /// An object a snapshot reaches that is not in the store.
    Missing {
        /// The snapshot.
        snapshot: ObjectId,
        /// The missing object.
        id: ObjectId,
        /// Where in the snapshot (escaped path).
        path: String,
    },
    /// A tree or record that does not decode.
    Malformed {
        /// The object.
        id: ObjectId,
        /// The decoder's message.
        why: String,
    },
    /// A tree records a size that is not its blob's length (a file) or its subtree's total
    /// (a directory).
    WrongSize {
        /// The snapshot.
        snapshot: ObjectId,
        /// The blob or tree.
        id: ObjectId,
        /// Where in the snapshot (escaped path).
        path: String,
        /// The size the parent tree records.
        recorded: u64,
        /// The blob's length or the subtree's total.
        actual: u64,
    },
    /// A catalog entry whose record is absent.
    DanglingCatalogEntry {
        /// The snapshot id listed.
        snapshot: ObjectId,
    },
    /// An object a snapshot reaches that fails its hash (the object itself is reported as
    /// [`VerifyProblem::Corrupt`]; this names each snapshot that depends on it).
    CorruptReached {
        /// The snapshot.
        snapshot: ObjectId,
        /// The corrupt object.
        id: ObjectId,
        /// Where in the snapshot (escaped path).
        path: String,
    },
    /// A snapshot's tree index that does not match its objects (readers fall back to the
    /// objects; `reindex` rebuilds it).
    BadTreeIndex {
        /// The snapshot.
        snapshot: ObjectId,
        /// What is wrong with it.
        why: String,
    },
    /// An object pack that cannot be read: every object it holds counts as absent (the
    /// snapshots that need them are reported [`VerifyProblem::Missing`]).
    BadPack {
        /// The pack file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for VerifyProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyProblem::Corrupt { id } => write!(f, "object {id} is corrupt"),
            VerifyProblem::Missing { snapshot, id, path } => write!(
                f,
                "snapshot {} needs object {id} ({path}), which is missing",
                snapshot.short(12)
            ),
            VerifyProblem::CorruptReached { snapshot, id, path } => write!(
                f,
                "snapshot {} needs object {id} ({path}), which is corrupt",
                snapshot.short(12)
            ),
            VerifyProblem::Malformed { id, why } => write!(f, "object {id} is malformed: {why}"),
            VerifyProblem::WrongSize {
                snapshot,
                id,
                path,
                recorded,
                actual,
            } => write!(
                f,
                "snapshot {} records {recorded} bytes for {path} (object {}), which holds {actual}",
                snapshot.short(12),
                id.short(16)
            ),
            VerifyProblem::DanglingCatalogEntry { snapshot } => {
                write!(
                    f,
                    "the catalog lists snapshot {snapshot}, whose record is missing"
                )
            }
            VerifyProblem::BadPack { path, why } => {
                write!(f, "object pack {path} cannot be read: {why}")
            }
            VerifyProblem::BadTreeIndex { snapshot, why } => write!(
                f,
                "the tree index of snapshot {} is bad: {why} (`zeroclaw-bundle reindex` rebuilds it)",
                snapshot.short(12)
            ),
        }
    }
}

/// What `verify` found.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct VerifyReport {
    /// Objects rehashed.
    pub objects: u64,
    /// Bytes rehashed.
    pub bytes: u64,
    /// Snapshots walked.
    pub snapshots: u64,
    /// Snapshots whose tree index was checked and found good (snapshots sharing a root share
    /// one index, checked once).
    pub tree_indexes: u64,
    /// Snapshots without a tree index (not a problem: readers use the objects; `reindex`
    /// writes them).
    pub tree_indexes_missing: u64,
    /// Everything wrong.
    pub problems: Vec<VerifyProblem>,
}

/// What `gc` did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct GcReport {
    /// Objects reachable (kept).
    pub reachable: u64,
    /// Objects removed.
    pub removed: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// Unreachable objects kept because they are younger than the grace period.
    pub young_kept: u64,
    /// Bytes of those objects.
    pub young_kept_bytes: u64,
    /// Stale temp files, and staging directories of interrupted imports, removed.
    pub temp_removed: u64,
    /// Bytes of those temp files and staging directories.
    pub temp_freed_bytes: u64,
    /// Tree indexes no kept snapshot or live mount uses (no record or lease has their root
    /// tree; an older build's per-snapshot index: its record is gone), removed.
    pub tree_indexes_removed: u64,
    /// Signatures of snapshots whose record is gone, removed.
    pub signatures_removed: u64,
    /// Records of checkout and export destinations that no longer exist, removed (each
    /// destination's record keeps the stat of every file written there, for the next publish
    /// to the same place).
    pub dest_records_removed: u64,
    /// Loose copies of reachable objects that a pack also holds intact, removed (an import
    /// lands objects loose; a later capture packs the same bytes again).
    pub duplicates_removed: u64,
    /// Bytes of those copies.
    pub duplicate_bytes: u64,
    /// Small object packs merged into one (each capture writes a pack of its own; see
    /// `packed`, "Merging").
    pub packs_merged: u64,
}

/// What `reindex` did.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct ReindexReport {
    /// Snapshots in the rebuilt index.
    pub snapshots: u64,
    /// Tree indexes written because they were missing or bad (one per root tree, shared by
    /// the snapshots with that root; an older build's per-snapshot index is converted).
    pub tree_indexes_written: u64,
    /// Records left out and names moved, one sentence each (already escaped).
    pub problems: Vec<String>,
}

/// What verify collects to check recorded sizes: blob lengths from the object listing,
/// decoded trees' totals, and every directory reference with the size its parent records.
#[derive(Default)]
struct SizeCheck {
    blob_len: HashMap<ObjectId, u64>,
    tree_total: HashMap<ObjectId, u64>,
    /// (snapshot, directory id, recorded size, where: a node of [`Paths`]).
    dir_refs: Vec<(ObjectId, ObjectId, u64, usize)>,
}

/// The paths of the directories a walk met, each stored once as (parent node, name), so a
/// walk's memory grows with the number of directories, not with their depth times their
/// number (a path string per directory made a 20,000-deep chain cost 750 MiB). A path is
/// spelled out only when a problem names it.
struct Paths {
    nodes: Vec<(usize, String)>,
}

impl Paths {
    /// A walk from a root, which is node 0 (`/`).
    fn new() -> Paths {
        Paths {
            nodes: vec![(0, String::new())],
        }
    }

    /// The node of directory `name` below node `parent`.
    fn push(&mut self, parent: usize, name: String) -> usize {
        self.nodes.push((parent, name));
        self.nodes.len() - 1
    }

    /// The path of node `at` (ending in `/`), then `file` when given.
    fn path(&self, mut at: usize, file: Option<&str>) -> String {
        let mut parts = Vec::new();
        while at != 0 {
            let (parent, name) = &self.nodes[at];
            parts.push(name.as_str());
            at = *parent;
        }
        let mut out = String::from("/");
        for part in parts.iter().rev() {
            out.push_str(part);
            out.push('/');
        }
        if let Some(file) = file {
            out.push_str(file);
        }
        out
    }
}

/// Reports each directory whose parent records a size other than its subtree's total.
fn check_dir_sizes(sizes: SizeCheck, paths: &Paths, problems: &mut Vec<VerifyProblem>) {
    for (snapshot, id, recorded, at) in sizes.dir_refs {
        if let Some(&actual) = sizes.tree_total.get(&id) {
            if actual != recorded {
                let path = paths.path(at, None);
                problems.push(VerifyProblem::WrongSize {
                    snapshot,
                    id,
                    path,
                    recorded,
                    actual,
                });
            }
        }
    }
}

/// What gc keeps: every object marked reachable, the snapshot records kept, and their root
/// trees (whose shared tree indexes stay).
#[derive(Default)]
struct Live {
    marked: HashSet<ObjectId>,
    records: HashSet<ObjectId>,
    roots: HashSet<ObjectId>,
}

/// The unmarked objects of `listed` past the grace period, with their stored lengths; counts
/// the reachable and the young ones kept in `report`.
fn unreachable(
    listed: Vec<ListedObject>,
    marked: &HashSet<ObjectId>,
    grace_secs: u64,
    report: &mut GcReport,
) -> Vec<(ObjectId, u64)> {
    listed
        .into_iter()
        .filter_map(
            |ListedObject {
                 id,
                 stored_len: len,
                 age_secs: age,
                 ..
             }| {
                if marked.contains(&id) {
                    report.reachable += 1;
                    None
                } else if age < grace_secs {
                    report.young_kept += 1;
                    report.young_kept_bytes += len;
                    None
                } else {
                    Some((id, len))
                }
            },
        )
        .collect()
}

/// What [`Maintenance::forget`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forgotten {
    /// A running mount still serves the snapshot: its record waits in `leases/`, and its data
    /// stays until that mount ends (see `lease`).
    pub served_by_a_mount: bool,
}

/// The maintenance room (see the module doc). Reached through [`crate::Store::maintenance`].
#[derive(Debug, Clone, Copy)]
pub struct Maintenance<'s> {
    inner: &'s Inner,
}

impl<'s> Maintenance<'s> {
    /// The maintenance room of the store whose shared state is `inner`.
    pub(crate) fn new(inner: &'s Inner) -> Maintenance<'s> {
        Maintenance { inner }
    }

    /// The store directory (its lock, `leases/`).
    fn root(&self) -> &'s Path {
        self.inner.root()
    }

    /// The object directory: what `verify` rehashes and `gc` sweeps.
    fn objects(&self) -> &'s ObjectDir {
        self.inner.objects()
    }

    /// The catalog room: the snapshots `verify` walks and `gc` keeps, rebuilt by `reindex`.
    fn catalog(&self) -> Catalog<'s> {
        Catalog::new(self.inner)
    }

    /// The index room: the tree indexes `verify` checks, `gc` trims and `reindex` writes.
    fn index(&self) -> Index<'s> {
        Index::new(self.inner)
    }

    /// Marks everything reachable from `root`, recording absent objects as problems (paths
    /// as nodes of `paths`, see [`Paths`]).
    fn mark(
        &self,
        snapshot: ObjectId,
        root: ObjectId,
        marked: &mut HashSet<ObjectId>,
        problems: &mut Vec<VerifyProblem>,
        mut sizes: Option<&mut SizeCheck>,
        paths: &mut Paths,
    ) {
        let mut stack = vec![(root, 0usize)];
        marked.insert(root);
        while let Some((tree_id, at)) = stack.pop() {
            let tree = match self.objects().read_tree(&tree_id) {
                Ok(t) => t,
                Err(StoreError::MissingObject(id)) => {
                    problems.push(VerifyProblem::Missing {
                        snapshot,
                        id,
                        path: paths.path(at, None),
                    });
                    continue;
                }
                // Reported by the rehash.
                Err(StoreError::CorruptObject { .. } | StoreError::Undecodable { .. }) => continue,
                Err(e) => {
                    problems.push(VerifyProblem::Malformed {
                        id: tree_id,
                        why: e.to_string(),
                    });
                    continue;
                }
            };
            if let Some(sizes) = sizes.as_deref_mut() {
                sizes.tree_total.insert(tree_id, tree.total_size());
            }
            for e in tree.entries() {
                // Sizes are checked at every reference: the same object may be recorded with
                // a different size elsewhere.
                let descend = marked.insert(e.id);
                if e.kind == EntryKind::Dir {
                    let child =
                        (descend || sizes.is_some()).then(|| paths.push(at, e.display_name()));
                    if let (Some(sizes), Some(child)) = (sizes.as_deref_mut(), child) {
                        sizes.dir_refs.push((snapshot, e.id, e.size, child));
                    }
                    if let (true, Some(child)) = (descend, child) {
                        stack.push((e.id, child));
                    }
                    continue;
                }
                if let Some(sizes) = sizes.as_deref_mut() {
                    if let Some(&actual) = sizes.blob_len.get(&e.id) {
                        if actual != e.size {
                            problems.push(VerifyProblem::WrongSize {
                                snapshot,
                                id: e.id,
                                path: paths.path(at, Some(&e.display_name())),
                                recorded: e.size,
                                actual,
                            });
                        }
                    }
                }
                if descend && !self.objects().has(&e.id) {
                    problems.push(VerifyProblem::Missing {
                        snapshot,
                        id: e.id,
                        path: paths.path(at, Some(&e.display_name())),
                    });
                }
            }
        }
    }

    /// The marking walk visits a tree shared by several snapshots once, so a missing or
    /// corrupt object under it was named with the first snapshot only. When anything is
    /// damaged, every snapshot is walked again on its own (each tree once per snapshot) and
    /// every snapshot that reaches a damaged object is named. Costs nothing on a healthy store.
    fn name_every_reacher(
        &self,
        roots: &[(ObjectId, ObjectId)],
        problems: &mut Vec<VerifyProblem>,
    ) {
        let mut missing = HashSet::new();
        let mut corrupt = HashSet::new();
        let mut named = HashSet::new();
        for p in problems.iter() {
            match p {
                VerifyProblem::Missing { snapshot, id, .. } => {
                    missing.insert(*id);
                    named.insert((*snapshot, *id));
                }
                VerifyProblem::Corrupt { id } => {
                    corrupt.insert(*id);
                }
                _ => {}
            }
        }
        if missing.is_empty() && corrupt.is_empty() {
            return;
        }
        for &(snapshot, root) in roots {
            let mut seen = HashSet::new();
            let mut stack = vec![(root, String::from("/"))];
            seen.insert(root);
            while let Some((tree_id, path)) = stack.pop() {
                let mut damaged = |id: ObjectId, path: String| {
                    if !named.insert((snapshot, id)) {
                        return;
                    }
                    if missing.contains(&id) {
                        problems.push(VerifyProblem::Missing { snapshot, id, path });
                    } else if corrupt.contains(&id) {
                        problems.push(VerifyProblem::CorruptReached { snapshot, id, path });
                    }
                };
                if missing.contains(&tree_id) || corrupt.contains(&tree_id) {
                    damaged(tree_id, path);
                    continue;
                }
                let Ok(tree) = self.objects().read_tree(&tree_id) else {
                    continue; // reported by the marking walk
                };
                for e in tree.entries() {
                    let child = format!("{}{}", path, e.display_name());
                    if e.kind == EntryKind::Dir {
                        if seen.insert(e.id) {
                            stack.push((e.id, format!("{child}/")));
                        }
                    } else if missing.contains(&e.id) || corrupt.contains(&e.id) {
                        damaged(e.id, child);
                    }
                }
            }
        }
    }

    /// Rehashes every object and checks that every cataloged snapshot reaches only present
    /// objects. `progress` is called with the bytes read so far (stored bytes: a compressed
    /// object counts its frame) and their total.
    pub fn verify(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport, StoreError> {
        let mut report = VerifyReport::default();
        let blob_len = self.rehash_objects(&mut report, progress)?;
        // No gc can sweep while the snapshots are walked; a `forget` can still remove a record
        // after the listing, so a missing record is reported only if it is still listed.
        let _lock = crate::lock::shared(self.root(), "verify")?;
        let mut sizes = SizeCheck {
            blob_len,
            ..SizeCheck::default()
        };
        let mut paths = Paths::new();
        let roots = self.walk_snapshots(&mut report, &mut sizes, &mut paths)?;
        self.name_every_reacher(&roots, &mut report.problems);
        check_dir_sizes(sizes, &paths, &mut report.problems);
        Ok(report)
    }

    /// Rehashes every object (and reports unreadable packs) into `report`; returns each
    /// object's length (decoded, for a compressed one), for the size check.
    fn rehash_objects(
        &self,
        report: &mut VerifyReport,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<HashMap<ObjectId, u64>, StoreError> {
        let objects = self.objects().list()?;
        for (path, why) in self.objects().refused_packs()? {
            report.problems.push(VerifyProblem::BadPack {
                path: path.display().to_string(),
                why,
            });
        }
        // Progress counts stored bytes (what is read); the report counts object bytes.
        let total: u64 = objects.iter().map(|o| o.stored_len).sum();
        let mut stored_done = 0u64;
        let mut blob_len = HashMap::with_capacity(objects.len());
        for listed in &objects {
            let id = &listed.id;
            stored_done += listed.stored_len;
            let blob = match self.objects().open_blob(id) {
                Ok(b) => b,
                Err(StoreError::MissingObject(_)) => continue, // removed meanwhile
                Err(StoreError::Undecodable { .. }) => {
                    report.problems.push(VerifyProblem::Corrupt { id: *id });
                    report.objects += 1;
                    progress(stored_done, total);
                    continue;
                }
                Err(e) => return Err(e),
            };
            blob_len.insert(*id, blob.len());
            match blob.verify(id) {
                Ok(()) => {}
                Err(StoreError::CorruptObject { .. }) => {
                    report.problems.push(VerifyProblem::Corrupt { id: *id })
                }
                Err(e) => return Err(e),
            }
            report.objects += 1;
            report.bytes += blob.len();
            progress(stored_done, total);
        }
        Ok(blob_len)
    }

    /// Walks every cataloged snapshot (marking, sizes, its tree index) into `report`; returns
    /// the (snapshot, root tree) of each one readable.
    fn walk_snapshots(
        &self,
        report: &mut VerifyReport,
        sizes: &mut SizeCheck,
        paths: &mut Paths,
    ) -> Result<Vec<(ObjectId, ObjectId)>, StoreError> {
        let listed = self.catalog().session()?.snapshots()?;
        let mut marked = HashSet::new();
        let mut roots = Vec::new();
        // Snapshots that share a root share its index: it is checked once.
        let mut shared_checked: HashMap<ObjectId, IndexState> = HashMap::new();
        for s in listed {
            report.snapshots += 1;
            match self.objects().read_snapshot(&s.id) {
                Ok(snap) => {
                    roots.push((s.id, snap.root));
                    self.mark(
                        s.id,
                        snap.root,
                        &mut marked,
                        &mut report.problems,
                        Some(sizes),
                        paths,
                    );
                    match self.tree_index_state(&mut shared_checked, s.id, snap.root)? {
                        IndexState::Good => report.tree_indexes += 1,
                        IndexState::Missing => report.tree_indexes_missing += 1,
                        IndexState::Bad(why) => report.problems.push(VerifyProblem::BadTreeIndex {
                            snapshot: s.id,
                            why,
                        }),
                    }
                }
                Err(StoreError::MissingObject(_)) => {
                    let still_listed = self
                        .catalog()
                        .session()?
                        .snapshots()?
                        .iter()
                        .any(|x| x.id == s.id);
                    if still_listed {
                        report
                            .problems
                            .push(VerifyProblem::DanglingCatalogEntry { snapshot: s.id })
                    } else {
                        report.snapshots -= 1;
                    }
                }
                Err(StoreError::CorruptObject { .. } | StoreError::Undecodable { .. }) => {}
                Err(e) => report.problems.push(VerifyProblem::Malformed {
                    id: s.id,
                    why: e.to_string(),
                }),
            }
        }
        Ok(roots)
    }

    /// The state of the tree index of `snapshot`'s `root`, checked once per root that has a
    /// shared index (`checked` remembers them).
    fn tree_index_state(
        &self,
        checked: &mut HashMap<ObjectId, IndexState>,
        snapshot: ObjectId,
        root: ObjectId,
    ) -> Result<IndexState, StoreError> {
        if let Some(state) = checked.get(&root) {
            return Ok(state.clone());
        }
        let state = self.index().check_tree_index(&snapshot, &root)?;
        if self.index().tree_index_path(&root).exists() {
            checked.insert(root, state.clone());
        }
        Ok(state)
    }

    /// Removes objects unreachable from every snapshot record and live lease, when older
    /// than `grace_secs` (a capture in progress writes objects before its record).
    pub fn gc(&self, grace_secs: u64) -> Result<GcReport, StoreError> {
        // Exclusive: no capture is between its first reuse and its commit, no other gc or
        // reindex runs (see the crate doc, "gc and writers").
        let _lock = crate::lock::exclusive(self.root(), "collect garbage")?;
        let mut report = GcReport::default();
        let live = self.mark_live()?;
        let listed = self.objects().list()?;
        let duplicates = self.loose_duplicates(&listed, &live);
        let doomed = unreachable(listed, &live.marked, grace_secs, &mut report);
        self.remove_unreachable(doomed, &mut report)?;
        for (id, len) in duplicates {
            self.objects().remove_loose(&id)?;
            report.duplicates_removed += 1;
            report.duplicate_bytes += len;
        }
        report.packs_merged = self.objects().consolidate_packs()?;
        self.sweep_temp(grace_secs, &mut report);
        self.objects().sync()?;
        self.sweep_side_records(&live, &mut report)?;
        Ok(report)
    }

    /// gc's marking: everything the snapshots reindex would list reach, then what mounts'
    /// leases hold.
    fn mark_live(&self) -> Result<Live, StoreError> {
        let mut live = Live::default();
        let mut ignored = Vec::new();
        // The roots are the snapshots reindex would list (see the module doc): a record that
        // is only found among the objects (a file's content, a planted record) is not one.
        let catalog = self.catalog().session()?;
        let scanned = self.catalog().scan_records()?;
        let scanned_roots: Vec<(ObjectId, ObjectId)> = scanned
            .iter()
            .filter_map(|rec| Some((rec.id, rec.snap.as_ref()?.root)))
            .collect();
        let admission = self.catalog().admit_records(&catalog, scanned)?;
        drop(catalog);
        for (id, snap) in &admission.admitted {
            self.mark_kept(&mut live, *id, snap.root, &mut ignored);
        }
        // Mounts' leases: records a mount holds (see `lease`), then lease files and held
        // records set aside by `forget`.
        let mut held = Vec::new();
        for (id, root) in scanned_roots {
            if !live.records.contains(&id) && self.record_is_held(&id)? {
                held.push((id, root));
            }
        }
        held.extend(self.live_leases()?);
        for (snapshot, root) in held {
            self.mark_kept(&mut live, snapshot, root, &mut ignored);
        }
        Ok(live)
    }

    /// Keeps record `snapshot`, its root tree's index, and everything `root` reaches.
    fn mark_kept(
        &self,
        live: &mut Live,
        snapshot: ObjectId,
        root: ObjectId,
        ignored: &mut Vec<VerifyProblem>,
    ) {
        live.marked.insert(snapshot);
        live.records.insert(snapshot);
        live.roots.insert(root);
        let mut paths = Paths::new();
        self.mark(snapshot, root, &mut live.marked, ignored, None, &mut paths);
    }

    /// The loose copies of reachable objects that a pack also holds, read back intact (never
    /// the only good copy), with their stored lengths. A record a mount holds stays where it
    /// is: its lock is the lease.
    fn loose_duplicates(&self, listed: &[ListedObject], live: &Live) -> Vec<(ObjectId, u64)> {
        let packed: HashSet<ObjectId> = listed.iter().filter(|l| l.packed).map(|l| l.id).collect();
        listed
            .iter()
            .filter(|l| !l.packed && packed.contains(&l.id) && live.marked.contains(&l.id))
            .filter(|l| {
                !live.records.contains(&l.id) || !self.record_is_held(&l.id).unwrap_or(true)
            })
            .filter(|l| self.objects().packed_copy_is_intact(&l.id))
            .map(|l| (l.id, l.stored_len))
            .collect()
    }

    /// Removes the `doomed` objects, dropping the stat caches first.
    fn remove_unreachable(
        &self,
        doomed: Vec<(ObjectId, u64)>,
        report: &mut GcReport,
    ) -> Result<(), StoreError> {
        if !doomed.is_empty() {
            // Stat caches may name these blobs and trees, and captures trust a cache hit
            // without looking the object up: drop the caches first (the next capture rehashes
            // once).
            self.catalog().clear_stat_caches()?;
        }
        let mut ids = HashSet::with_capacity(doomed.len());
        for (id, len) in doomed {
            ids.insert(id);
            report.removed += 1;
            report.freed_bytes += len;
        }
        // Each pack holding doomed objects is rewritten once, without them.
        self.objects().remove_all(&ids)?;
        Ok(())
    }

    /// Removes the temp files older than `grace_secs`, and every staging directory, from the
    /// object directory's temp directory (best effort).
    fn sweep_temp(&self, grace_secs: u64, report: &mut GcReport) {
        let tmp = self.objects().tmp_dir();
        let Ok(rd) = fs::read_dir(tmp) else {
            return;
        };
        let now = std::time::SystemTime::now();
        for ent in rd.flatten() {
            // An import's staging directory exists only while its writer holds the
            // write lock, which this gc excludes: one seen here was left by a killed
            // import, whatever its age.
            let staging = ent
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(crate::objects::STAGING_PREFIX))
                && ent.file_type().is_ok_and(|t| t.is_dir());
            if staging {
                let bytes = tree_bytes(&ent.path());
                if fs::remove_dir_all(ent.path()).is_ok() {
                    report.temp_removed += 1;
                    report.temp_freed_bytes += bytes;
                }
                continue;
            }
            let old = ent
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|m| now.duration_since(m).ok())
                .map(|d| d.as_secs() >= grace_secs)
                .unwrap_or(false);
            let bytes = ent.metadata().map(|m| m.len()).unwrap_or(0);
            if old && fs::remove_file(ent.path()).is_ok() {
                report.temp_removed += 1;
                report.temp_freed_bytes += bytes;
            }
        }
    }

    /// Removes what lives beside the objects and is only good while its owner is: tree
    /// indexes, signatures, destination records.
    fn sweep_side_records(&self, live: &Live, report: &mut GcReport) -> Result<(), StoreError> {
        // After the objects: an index is a cache of the trees of kept snapshots, and goes
        // when none of them has its root (an older build's per-snapshot one: with its record).
        report.tree_indexes_removed = self
            .index()
            .remove_orphan_indexes(&live.records, &live.roots)?;
        // So do its signatures (kept beside the record, outside the objects).
        report.signatures_removed = self.catalog().remove_orphan_signatures(&live.records)?;
        // A destination's record is only good for the next publish to it: once the directory
        // is gone (a review checkout deleted, say), so is the record.
        let gone = |path: &std::path::Path| matches!(fs::symlink_metadata(path), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
        // Files (this version's records) and an older version's in the catalog.
        let session = self.catalog().session()?;
        report.dest_records_removed =
            self.catalog().remove_dest_files(&gone)? + session.remove_dest_records(&gone)?;
        self.catalog().mark_if_cache_free(&session);
        Ok(())
    }

    /// Rebuilds the catalog's snapshot list and names from the snapshot records. Invalid
    /// records are left out and reported; a name on several records stays on the newest.
    /// An unreadable catalog is set aside first (see [`Catalog::session`]): reindex never needs
    /// the old one to open.
    pub fn reindex(&self) -> Result<ReindexReport, StoreError> {
        // Exclusive: a record committed or forgotten between the scan and the rebuild would
        // otherwise be missing from, or listed in, the new index.
        let _lock = crate::lock::exclusive(self.root(), "reindex")?;
        let catalog = self.catalog().session()?;
        let rebuilt = self.catalog().rebuild_index(&catalog)?;
        let mut report = ReindexReport {
            snapshots: rebuilt.snapshots,
            problems: rebuilt.problems,
            ..ReindexReport::default()
        };
        // Only what the catalog now lists gets an index: a record left out (a file's content,
        // a planted record) never does, so an index always names a listed snapshot (which
        // `Catalog::resolve_indexed` relies on).
        let listed: HashSet<ObjectId> = catalog.snapshots()?.iter().map(|s| s.id).collect();
        drop(catalog);
        // Then the tree indexes: each root's is written where it is missing or bad (once for
        // all the snapshots sharing it), and an older build's per-snapshot index, read to
        // write it, is removed once the root's is good.
        let mut good_roots: HashSet<ObjectId> = HashSet::new();
        for rec in self.catalog().scan_records()? {
            let (Some(snap), None, true) = (rec.snap, rec.problem, listed.contains(&rec.id)) else {
                continue;
            };
            if !good_roots.contains(&snap.root) {
                let shared = self.index().tree_index_path(&snap.root);
                let state = if fs::symlink_metadata(&shared).is_ok() {
                    self.index().check_tree_index(&rec.id, &snap.root)?
                } else {
                    IndexState::Missing
                };
                match state {
                    // An index of an older build has no expansion record: it gets one.
                    IndexState::Good => {
                        if self.index().read_expansion_record(&snap.root) == RecordState::Missing {
                            self.index().record_expansion_from_index(&snap.root);
                        }
                    }
                    IndexState::Missing | IndexState::Bad(_) => {
                        match self.index().write_tree_index(&rec.id) {
                            Ok(_) => report.tree_indexes_written += 1,
                            Err(e) => {
                                report.problems.push(format!(
                                    "could not write the tree index of snapshot {}: {e}",
                                    rec.id.short(16)
                                ));
                                continue;
                            }
                        }
                    }
                }
                good_roots.insert(snap.root);
            }
            let own = self.index().snapshot_index_path(&rec.id);
            match fs::remove_file(&own) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => report.problems.push(format!(
                    "could not remove the older tree index of snapshot {}: {}",
                    rec.id.short(16),
                    StoreError::io("remove", &own, e)
                )),
            }
        }
        Ok(report)
    }

    /// Removes a snapshot: its catalog entry and its record. Its data goes at the next `gc`,
    /// or, when a running mount still serves it, at the first `gc` after that mount ends.
    pub fn forget(&self, snapshot: &ObjectId) -> Result<Forgotten, StoreError> {
        let _lock = crate::lock::shared(self.root(), "forget")?;
        // Both steps inside one catalog session: a catalog being rebuilt (which holds the
        // catalog while it scans records) sees either both or neither.
        let catalog = self.catalog().session()?;
        // A record a mount holds is set aside, not removed (see `lease`); what that needs is
        // checked before the catalog entry goes, so a refusal changes nothing.
        let record = self.prepare_record_removal(snapshot)?;
        catalog.remove_snapshot(snapshot)?;
        let served_by_a_mount = self.finish_record_removal(record)?;
        self.objects().remove(snapshot)?;
        drop(catalog);
        Ok(Forgotten { served_by_a_mount })
    }
}

/// The bytes of the regular files under `dir` (a staging directory: flat, but any depth is
/// counted), without following symlinks; what cannot be read counts 0.
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for ent in rd.flatten() {
            match ent.file_type() {
                Ok(t) if t.is_dir() => stack.push(ent.path()),
                Ok(t) if t.is_file() => total += ent.metadata().map(|m| m.len()).unwrap_or(0),
                _ => {}
            }
        }
    }
    total
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::handle::Store;
    use crate::snapshot::Snapshot;
    use crate::tree::{Tree, TreeEntry};

    /// A FIFO at `path` (what a hostile store plants where a file is expected).
    pub(crate) fn make_fifo(path: &Path) {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }

    /// A snapshot named `name` of one file `f` holding `content`: (snapshot, blob).
    pub(crate) fn snapshot_of(store: &Store, content: &[u8], name: &str) -> (ObjectId, ObjectId) {
        let (blob, len) = store.objects().write_from(&mut &content[..]).unwrap();
        let tree = Tree::from_entries(vec![TreeEntry {
            name: b"f".to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: len,
            id: blob,
        }])
        .unwrap();
        let root = store.objects().write_tree(&tree).unwrap();
        let snap = Snapshot {
            name: Some(name.into()),
            ..Snapshot::for_test(root, "s")
        };
        let lock = store.write_lock().unwrap();
        (
            store.catalog().commit_snapshot(&lock, &snap, None).unwrap(),
            blob,
        )
    }

    /// A blob stored loose (as an import lands it) and packed by a later capture: gc drops
    /// the loose copy when the packed one reads back intact, and keeps it when it does not.
    #[test]
    fn gc_drops_a_loose_copy_that_a_pack_holds_intact_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let content = b"carried twice, loose and packed".repeat(10);
        let (_, blob) = snapshot_of(&store, &content, "loose");
        assert!(store.objects().file_of(&blob).is_some());
        let again = Store::open_or_create(dir.path()).unwrap();
        again.objects().pack_until_sync();
        again.objects().write_bytes(&content).unwrap();
        again.objects().sync().unwrap();
        let copies = |s: &Store| {
            s.objects()
                .list()
                .unwrap()
                .iter()
                .filter(|l| l.id == blob)
                .count()
        };
        assert_eq!(copies(&again), 2);

        // The packed copy damaged: the loose one is the only good copy and stays.
        let listed = again.objects().list().unwrap();
        assert!(listed.iter().any(|l| l.id == blob && l.packed));
        let pack = fs::read_dir(dir.path().join("objects/packs"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let bytes = fs::read(&pack).unwrap();
        let at = bytes
            .windows(content.len())
            .position(|w| w == &content[..])
            .unwrap();
        let mut damaged = bytes.clone();
        damaged[at] ^= 1;
        fs::set_permissions(&pack, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        fs::write(&pack, &damaged).unwrap();
        let r = Store::open_or_create(dir.path())
            .unwrap()
            .maintenance()
            .gc(0)
            .unwrap();
        assert_eq!(r.duplicates_removed, 0, "{r:?}");
        assert!(again.objects().file_of(&blob).is_some());

        // Intact again: the loose copy goes, the object reads from the pack.
        fs::write(&pack, &bytes).unwrap();
        let fresh = Store::open_or_create(dir.path()).unwrap();
        let r = fresh.maintenance().gc(0).unwrap();
        assert_eq!((r.duplicates_removed, r.removed), (1, 0), "{r:?}");
        assert!(fresh.objects().file_of(&blob).is_none());
        assert_eq!(fresh.objects().read_verified(&blob).unwrap(), content);
        assert_eq!(copies(&fresh), 1);
        assert!(fresh
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }

    #[test]
    fn gc_keeps_reachable_and_removes_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (keep, keep_blob) = snapshot_of(&store, b"kept", "keep");
        let (gone, gone_blob) = snapshot_of(&store, b"forgotten", "gone");
        let (orphan, _) = store.objects().write_from(&mut &b"orphan"[..]).unwrap();
        store.maintenance().forget(&gone).unwrap();
        // Young objects survive a gc with a grace period.
        let young = store.maintenance().gc(3600).unwrap();
        assert_eq!(young.removed, 0);
        assert!(store.objects().has(&orphan));
        let r = store.maintenance().gc(0).unwrap();
        assert_eq!(r.removed, 3, "{r:?}"); // gone's blob, gone's tree, the orphan
        assert!(store.objects().has(&keep) && store.objects().has(&keep_blob));
        assert!(!store.objects().has(&gone_blob) && !store.objects().has(&orphan));
        let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
        assert!(v.problems.is_empty(), "{:?}", v.problems);
    }

    /// An import killed while staging leaves its staging directory under tmp/ (nothing in
    /// objects/); gc removes it however young, and leaves other young temp files alone.
    /// Issue 22, item 13: a name moved from `a` to `b`; `b` is forgotten; a reindex leaves
    /// `a` unnamed (its record still carries the name), as the catalog had it.
    #[test]
    fn reindex_never_puts_a_moved_name_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (a, _) = snapshot_of(&store, b"first", "prod");
        let (b, _) = snapshot_of(&store, b"second", "prod");
        assert_eq!(store.catalog().resolve("prod").unwrap(), b);
        store.maintenance().forget(&b).unwrap();
        assert!(store.catalog().resolve("prod").is_err());
        store.maintenance().reindex().unwrap();
        assert!(
            store.catalog().resolve("prod").is_err(),
            "the name came back to a"
        );
        let listed = store.catalog().session().unwrap().snapshots().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!((listed[0].id, listed[0].name.clone()), (a, None));
    }

    #[test]
    fn gc_removes_the_staging_directory_of_a_killed_import() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let staging = store.objects().staging().unwrap();
        let bytes = b"staged, never landed";
        let id = ObjectId::of(bytes);
        staging.put_verified(&id, bytes).unwrap();
        let staged = staging.path().to_path_buf();
        std::mem::forget(staging); // a SIGKILL runs no destructor
        let hex = id.to_hex();
        assert!(staged.join(&hex[..2]).join(&hex[2..]).is_file());
        assert!(!store.objects().has(&id), "a staged object is not visible");
        let young = store.objects().tmp_dir().join("obj-young");
        fs::write(&young, b"x").unwrap();
        let r = store.maintenance().gc(3600).unwrap();
        assert_eq!(r.temp_removed, 1, "{r:?}");
        assert_eq!(r.temp_freed_bytes, bytes.len() as u64, "{r:?}");
        assert!(!staged.exists());
        assert!(young.exists(), "a young temp file stays");
    }

    #[test]
    fn gc_survives_a_lost_catalog_and_respects_leases() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (snap, blob) = snapshot_of(&store, b"data", "s");
        fs::remove_dir_all(dir.path().join("catalog")).unwrap();
        store.maintenance().gc(0).unwrap();
        assert!(store.objects().has(&blob));
        assert_eq!(store.maintenance().reindex().unwrap().snapshots, 1);
        assert_eq!(store.catalog().resolve("s").unwrap(), snap);
        // A lease keeps a forgotten snapshot's data while the mount lives.
        let root = store.objects().read_snapshot(&snap).unwrap().root;
        let lease = store.maintenance().lease(&snap, &root).unwrap();
        store.maintenance().forget(&snap).unwrap();
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 0);
        assert!(store.objects().has(&blob) && store.objects().has(&root));
        drop(lease);
        assert_eq!(store.maintenance().gc(0).unwrap().removed, 2);
        assert!(!store.objects().has(&blob));
    }

    #[test]
    fn verify_names_corrupt_and_missing_objects() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (snap, blob) = snapshot_of(&store, b"precious", "p");
        let path = store.objects().file_of(&blob).unwrap();
        let mut perms = fs::metadata(&path).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        fs::set_permissions(&path, perms).unwrap();
        fs::write(&path, b"tampered").unwrap();
        let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
        // The object, and the snapshot that reaches it.
        assert_eq!(
            v.problems,
            vec![
                VerifyProblem::Corrupt { id: blob },
                VerifyProblem::CorruptReached {
                    snapshot: snap,
                    id: blob,
                    path: "/f".into()
                }
            ]
        );
        fs::remove_file(&path).unwrap();
        let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
        assert!(matches!(
            v.problems.as_slice(),
            [VerifyProblem::Missing { snapshot, id, path }] if *snapshot == snap && *id == blob && path == "/f"
        ));
    }

    #[test]
    fn verify_checks_every_recorded_size() {
        for (file_size, dir_size) in [(1_000_000_000_000, 6), (1, 6), (0, 6), (6, 7), (6, 0)] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open_or_create(dir.path()).unwrap();
            let (blob, len) = store.objects().write_from(&mut &b"six b."[..]).unwrap();
            assert_eq!(len, 6);
            let file = |size| TreeEntry {
                name: b"f".to_vec(),
                kind: EntryKind::File,
                mode: 0o644,
                size,
                id: blob,
            };
            let sub = store
                .objects()
                .write_tree(&Tree::from_entries(vec![file(file_size)]).unwrap())
                .unwrap();
            // The same blob once more with its true size: sizes are checked per reference.
            let root = Tree::from_entries(vec![
                TreeEntry {
                    name: b"d".to_vec(),
                    kind: EntryKind::Dir,
                    mode: 0o755,
                    size: dir_size,
                    id: sub,
                },
                TreeEntry {
                    name: b"g".to_vec(),
                    ..file(6)
                },
            ])
            .unwrap();
            let root = store.objects().write_tree(&root).unwrap();
            let snap = Snapshot::for_test(root, "s");
            let lock = store.write_lock().unwrap();
            let id = store.catalog().commit_snapshot(&lock, &snap, None).unwrap();
            drop(lock);
            let v = store.maintenance().verify(&mut |_, _| {}).unwrap();
            let mut want = Vec::new();
            if file_size != 6 {
                want.push(VerifyProblem::WrongSize {
                    snapshot: id,
                    id: blob,
                    path: "/d/f".into(),
                    recorded: file_size,
                    actual: 6,
                });
            }
            if dir_size != file_size {
                want.push(VerifyProblem::WrongSize {
                    snapshot: id,
                    id: sub,
                    path: "/d/".into(),
                    recorded: dir_size,
                    actual: file_size,
                });
            }
            assert_eq!(v.problems, want, "file {file_size}, dir {dir_size}");
        }
    }
    /// Issue 18, item 1: records found among the objects follow the received-record rules.
    /// A record that arrived as a file's content (named like the local snapshot, or an export
    /// of the local agent dated in the future) never becomes a name, a listed snapshot or a gc
    /// root; a valid record that only lacks its catalog entry (a commit cut short) is listed.
    #[test]
    fn records_found_among_objects_follow_the_received_record_rules() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let now = i128::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        let (local, _) = snapshot_of(&store, b"local", "prod");
        let agent_snap = Snapshot {
            agent: Some("ops".into()),
            kind: crate::snapshot::SnapshotKind::AgentBundle,
            created_unix_ns: 7,
            name: None,
            ..store.objects().read_snapshot(&local).unwrap()
        };
        let lock = store.write_lock().unwrap();
        let local_agent = store
            .catalog()
            .commit_snapshot(&lock, &agent_snap, None)
            .unwrap();
        drop(lock);
        // The planted tree: reached by the planted records only.
        let (planted_blob, len) = store.objects().write_from(&mut &b"planted"[..]).unwrap();
        let planted_root = store
            .objects()
            .write_tree(
                &Tree::from_entries(vec![TreeEntry {
                    name: b"f".to_vec(),
                    kind: EntryKind::File,
                    mode: 0o644,
                    size: len,
                    id: planted_blob,
                }])
                .unwrap(),
            )
            .unwrap();
        let planted = |name: Option<&str>, agent: Option<&str>, created: i128| Snapshot {
            name: name.map(str::to_string),
            agent: agent.map(str::to_string),
            kind: crate::snapshot::SnapshotKind::AgentBundle,
            created_unix_ns: created,
            ..Snapshot::for_test(planted_root, "sender")
        };
        let named = planted(Some("prod"), None, now).encode();
        let future = planted(None, Some("ops"), i128::from(i64::MAX)).encode();
        let newer = planted(None, Some("ops"), now).encode();
        // A received snapshot whose files are those records.
        let files: Vec<TreeEntry> = [("a", &named), ("b", &future), ("c", &newer)]
            .iter()
            .map(|(name, bytes)| store.file_entry_for_test(name, bytes))
            .collect();
        let carrier_root = store
            .objects()
            .write_tree(&Tree::from_entries(files).unwrap())
            .unwrap();
        let lock = store.write_lock().unwrap();
        let carrier = store
            .catalog()
            .commit_snapshot(&lock, &Snapshot::for_test(carrier_root, "carrier"), None)
            .unwrap();
        drop(lock);
        // A commit cut short before its catalog entry: a valid record, found, listed.
        let (orphan_blob, len) = store.objects().write_from(&mut &b"orphan"[..]).unwrap();
        let orphan_root = store
            .objects()
            .write_tree(
                &Tree::from_entries(vec![TreeEntry {
                    name: b"o".to_vec(),
                    kind: EntryKind::File,
                    mode: 0o644,
                    size: len,
                    id: orphan_blob,
                }])
                .unwrap(),
            )
            .unwrap();
        let orphan = store
            .objects()
            .write_bytes(&Snapshot::for_test(orphan_root, "cut-short").encode())
            .unwrap();

        let report = store.maintenance().reindex().unwrap();
        let content = "is the content of a file in a snapshot";
        for bytes in [&named, &future, &newer] {
            let id = ObjectId::of(bytes);
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.contains(&id.to_hex()) && p.contains(content)),
                "{id}: {:?}",
                report.problems
            );
        }
        assert_eq!(store.catalog().resolve("prod").unwrap(), local);
        assert_eq!(store.catalog().resolve("agent/ops").unwrap(), local_agent);
        let listed: HashSet<ObjectId> = store
            .catalog()
            .session()
            .unwrap()
            .snapshots()
            .unwrap()
            .iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(listed, [local, local_agent, carrier, orphan].into());
        // Only the roots of listed snapshots have a tree index, so a planted record's full id
        // does not resolve through one either.
        assert!(!store.index().tree_index_path(&planted_root).exists());
        for bytes in [&named, &future, &newer] {
            let id = ObjectId::of(bytes);
            assert!(!store.index().snapshot_index_path(&id).exists(), "{id}");
            assert!(matches!(
                store.catalog().resolve_indexed(&id.to_hex()),
                Err(StoreError::UnknownSnapshot { .. })
            ));
        }
        assert!(store.index().tree_index_path(&orphan_root).is_file());
        assert_eq!(
            store.catalog().resolve_indexed(&orphan.to_hex()).unwrap(),
            orphan
        );
        // gc: the planted records are content (kept as such), not roots: their tree goes.
        store.maintenance().gc(0).unwrap();
        assert!(!store.objects().has(&planted_root) && !store.objects().has(&planted_blob));
        assert!(store.objects().has(&ObjectId::of(&named)));
        assert!(store.objects().has(&orphan_root) && store.objects().has(&orphan_blob));
        assert!(store
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }

    /// A snapshot record of one file `g` holding `content`, dated far in the future (so the
    /// received-record rules leave it out), written among the objects with no catalog entry:
    /// (record, root tree, blob).
    pub(crate) fn future_dated_snapshot(
        store: &Store,
        content: &[u8],
    ) -> (ObjectId, ObjectId, ObjectId) {
        let (blob, len) = store.objects().write_from(&mut &content[..]).unwrap();
        let root = store
            .objects()
            .write_tree(
                &Tree::from_entries(vec![TreeEntry::file(b"g".to_vec(), 0o644, len, blob)])
                    .unwrap(),
            )
            .unwrap();
        let record = store
            .objects()
            .write_bytes(
                &Snapshot {
                    created_unix_ns: i128::from(i64::MAX),
                    ..Snapshot::for_test(root, "x")
                }
                .encode(),
            )
            .unwrap();
        (record, root, blob)
    }

    /// The same rules hold for records that are not anyone's content (a lost catalog rebuilt,
    /// then reindexed): a future-dated record is left out and is no gc root; a record named
    /// like a listed snapshot does not take the name.
    #[test]
    fn a_future_dated_or_name_taking_record_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (local, _) = snapshot_of(&store, b"local", "prod");
        let root = store.objects().read_snapshot(&local).unwrap().root;
        let (future, other_root, _) = future_dated_snapshot(&store, b"other");
        let taker = store
            .objects()
            .write_bytes(
                &Snapshot {
                    name: Some("prod".into()),
                    created_unix_ns: i128::try_from(
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap()
                            .as_nanos(),
                    )
                    .unwrap(),
                    ..Snapshot::for_test(root, "x")
                }
                .encode(),
            )
            .unwrap();
        let report = store.maintenance().reindex().unwrap();
        let said = |id: ObjectId, why: &str| {
            report
                .problems
                .iter()
                .any(|p| p.contains(&id.to_hex()) && p.contains(why))
        };
        assert!(said(future, "in the future"), "{:?}", report.problems);
        assert!(
            said(taker, "already names snapshot"),
            "{:?}",
            report.problems
        );
        assert_eq!(store.catalog().resolve("prod").unwrap(), local);
        assert_eq!(
            store
                .catalog()
                .session()
                .unwrap()
                .snapshots()
                .unwrap()
                .len(),
            1
        );
        store.maintenance().gc(0).unwrap();
        assert!(!store.objects().has(&other_root) && !store.objects().has(&future));
        assert!(store.objects().has(&root));
    }
    /// Peak resident memory of this process since the last reset, in bytes (`VmHWM`).
    fn peak_rss_after_reset(f: impl FnOnce()) -> u64 {
        // Writing 5 to clear_refs resets the peak (Linux 4.0+).
        fs::write("/proc/self/clear_refs", "5").unwrap();
        f();
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// Issue 18, item 4: verify's memory does not grow with the square of the depth. A chain
    /// 20,000 directories deep (a store that predates the unpack limit, or built by hand)
    /// took 750 MiB, a path string per directory; now one node per directory.
    #[test]
    fn verify_of_a_deep_chain_stays_small() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(dir.path()).unwrap();
        let (leaf, _) = snapshot_of(&store, b"leaf", "leaf");
        let mut id = store.objects().read_snapshot(&leaf).unwrap().root;
        for _ in 0..20_000 {
            id = store
                .objects()
                .write_tree(
                    &Tree::from_entries(vec![TreeEntry {
                        name: b"d".to_vec(),
                        kind: EntryKind::Dir,
                        mode: crate::tree::DIR_MODE,
                        size: 4,
                        id,
                    }])
                    .unwrap(),
                )
                .unwrap();
        }
        let lock = store.write_lock().unwrap();
        store
            .catalog()
            .commit_snapshot(&lock, &Snapshot::for_test(id, "deep"), None)
            .unwrap();
        drop(lock);
        let mut report = None;
        let peak = peak_rss_after_reset(|| {
            report = Some(store.maintenance().verify(&mut |_, _| {}).unwrap())
        });
        let report = report.unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(peak < 150 << 20, "verify peaked at {} MiB", peak >> 20);
    }
}
