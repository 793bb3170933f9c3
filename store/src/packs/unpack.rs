//! Importing packs into the store: `unpack` of one pack, and `pull`'s import of a snapshot
//! from the packs a remote sent. Both import exactly what the snapshot reaches and the store
//! lacks ([`Packs::closure_needs`]), refuse a snapshot past the store's expansion limits, and verify
//! and write every object in one pass
//! ([`land_objects`]) and make nothing visible until everything verified.
//!
//! The pass: the entries to import are sorted by their offset in the pack and taken in that
//! order by `available_parallelism()` workers; each reads an object's stored bytes once,
//! decompresses them (capped at the length the index declares: a decompression bomb stops
//! there), hashes the result once, compares it with the id and writes it into a staging
//! directory under `<store>/tmp/` ([`crate::objects::Staging`]): an object of at most 256 KiB
//! the store has no copy of is appended to the staging's object pack (the form a capture
//! writes: one file for thousands of small objects, where a file each cost a create and a
//! rename apiece, most of a cold unpack of the bench corpus), any other one is a file of its
//! own. An object of up to
//! [`IN_MEMORY`] bytes (stored and decoded) is handled in a buffer its worker reuses; a larger
//! one streams from the pack through the decoder and the hasher into its staged file, so no
//! allocation follows a declared length above that. Meanwhile one more thread checks each
//! pack's trailer hash with one sequential read. Only when the trailer and every object
//! passed is the staged pack fsynced and renamed into `objects/packs/` and are the staged
//! files renamed into `objects/` (cheap), then
//! [`crate::Catalog::commit_snapshot`] syncs the filesystem once (`syncfs`, no fsync per object) and
//! writes the record, then the catalog entry. A failure anywhere removes the staging
//! directory: nothing is imported. A kill leaves at most that directory (which `gc` removes)
//! or, during the renames, unreferenced objects: never a snapshot that lists missing objects.
//! A pack's signatures (its signature section) are kept beside the record just before it is
//! committed. An object the store already holds intact (same id, length and hash) is verified but not
//! staged; a tree the store holds damaged is replaced by the pack's verified copy (a file in
//! its place). A store that holds no object when the import begins (one `unpack` just
//! created: [`ObjectDir::is_empty`]) is not asked for any object, neither by the walk of what
//! to import nor by the workers.

use std::collections::HashSet;
use std::io::{self, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{DecodeError, StoreError};
use crate::id::ObjectId;
use crate::objects::StoreReader;
use crate::objects::{Blob, Holding, ObjectDir, Staging};
use crate::pack::{bad, corrupt_in_pack, decode_pack_object, PackReader};
use crate::pack_format::PackEntry;
use crate::snapshot::Snapshot;
use crate::source::ObjectSource;
use crate::tree::{EntryKind, Tree};

use super::Packs;

/// The trees of a snapshot just received, for its tree index: from the packs that carried
/// them (already open, read whole or positioned) before the store, so writing the index does
/// not open one object file per tree just landed.
struct ReceivedTrees<'p> {
    packs: &'p [PackReader],
    store: StoreReader,
}

impl ObjectSource for ReceivedTrees<'_> {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        match find_in(self.packs, id) {
            Some(pack) => pack.tree(id),
            None => self.store.tree(id),
        }
    }

    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.store.blob(id)
    }
}

/// What an import tells its caller as it goes, and asks it: how far the verification got, and
/// whether to stop. Called from the import's worker threads (hence `Sync`); [`NoWatch`]
/// watches nothing.
pub trait ImportWatch: Sync {
    /// The verification starts: `objects` objects of `bytes` bytes (as stored in the packs).
    fn begin(&self, objects: u64, bytes: u64) {
        let _ = (objects, bytes);
    }
    /// One more object of `bytes` stored bytes verified.
    fn advance(&self, bytes: u64) {
        let _ = bytes;
    }
    /// True once the caller wants the import to stop: it then fails with
    /// [`StoreError::Interrupted`] at the next object, and nothing is imported (the staging
    /// directory is removed).
    fn stop(&self) -> bool {
        false
    }
}

/// An [`ImportWatch`] that shows nothing and never stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoWatch;

impl ImportWatch for NoWatch {}

/// Objects up to this size (stored and decoded) are decoded in memory; larger ones stream.
pub(crate) const IN_MEMORY: u64 = 8 << 20;
/// Read buffer of a streamed object.
const STREAM_BUF: usize = 1 << 20;

/// Verifies entries `jobs` (each `(index into packs, entry)`), and every pack's trailer, and
/// lands the objects in the store; see the module doc. Opens the store's catalog meanwhile
/// (see below). On an error nothing has landed.
pub(crate) fn land_objects(
    store: &Packs<'_>,
    packs: &[PackReader],
    mut jobs: Vec<(usize, PackEntry)>,
    fresh: bool,
    watch: &dyn ImportWatch,
) -> Result<(), StoreError> {
    jobs.sort_by_key(|(p, e)| (*p, e.offset));
    watch.begin(
        jobs.len() as u64,
        jobs.iter().map(|(_, e)| e.stored_len).sum(),
    );
    let objects = store.objects();
    let staging = objects.staging()?;
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<StoreError>> = Mutex::new(None);
    let fail = |e: StoreError| {
        failed.store(true, Ordering::Relaxed);
        first_error
            .lock()
            .expect("no panic holds the error")
            .get_or_insert(e);
    };
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(jobs.len())
        .max(1);
    std::thread::scope(|s| {
        s.spawn(|| {
            for pack in packs {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                if let Err(e) = pack.check_trailer() {
                    fail(e);
                }
            }
            // A store's first catalog open indexes every object in it (a store whose catalog
            // was lost). For the new store an unpack usually creates, that is free now, while
            // objects/ is still empty, and after the objects landed it read each one again
            // (measured: a third of a cold unpack of 6,000 objects). Nothing lands in objects/
            // before this scope ends.
            if let Err(e) = store.catalog().session() {
                fail(e);
            }
        });
        for _ in 0..workers {
            s.spawn(|| {
                let mut bufs = Buffers::default();
                while !failed.load(Ordering::Relaxed) {
                    let Some((p, e)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        return;
                    };
                    if watch.stop() {
                        fail(StoreError::Interrupted);
                        return;
                    }
                    match land_one(&packs[*p], e, objects, fresh, &staging, &mut bufs) {
                        Ok(()) => watch.advance(e.stored_len),
                        Err(err) => fail(err),
                    }
                }
            });
        }
    });
    if let Some(e) = first_error.into_inner().expect("no panic holds the error") {
        return Err(e); // dropping `staging` removes it
    }
    debug_assert!(staging.len() <= jobs.len());
    if watch.stop() {
        return Err(StoreError::Interrupted); // dropping `staging` removes it
    }
    staging.land()
}

/// A worker's reused buffers (each at most [`IN_MEMORY`] bytes).
#[derive(Default)]
struct Buffers {
    stored: Vec<u8>,
    decoded: Vec<u8>,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

/// Reads, decodes, verifies and (unless the store has it) stages one object: packed when
/// it is small and the store has no copy of it (always, in a `fresh` store: one that held no
/// object when the import began), else as a file of its own.
fn land_one(
    pack: &PackReader,
    e: &PackEntry,
    objects: &ObjectDir,
    fresh: bool,
    staging: &Staging,
    bufs: &mut Buffers,
) -> Result<(), StoreError> {
    let path = pack.path();
    // Held already: a concurrent import landed it, or it is a damaged tree this import
    // replaces (see `closure_needs`); only an intact copy is kept, and a damaged one is
    // replaced by a file in its place.
    let holding = match fresh {
        true => Holding::Absent,
        false => objects.holding(&e.id, e.len),
    };
    let have = holding == Holding::Intact;
    let packed = holding == Holding::Absent && Staging::packable(e.len);
    if e.len > IN_MEMORY || e.stored_len > IN_MEMORY {
        let mut stored = BufReader::with_capacity(STREAM_BUF, pack.stored_reader(e));
        if have {
            return decode_pack_object(path, e, &mut stored, &mut io::sink());
        }
        let mut file = staging.stream(&e.id)?;
        if let Err(err) = decode_pack_object(path, e, &mut stored, &mut file) {
            // A write that failed (a full disk) is named as such, not as a bad pack.
            return Err(file.write_error().unwrap_or(err));
        }
        return file.finish();
    }
    pack.read_stored(e, &mut bufs.stored)?;
    let bytes: &[u8] = if e.zstd {
        let zstd = match &mut bufs.zstd {
            Some(z) => z,
            empty => empty.insert(
                zstd::bulk::Decompressor::new()
                    .map_err(|err| StoreError::io("start zstd for", path, err))?,
            ),
        };
        // Decompressed into exactly the declared length: more does not fit (a bomb stops).
        bufs.decoded.clear();
        bufs.decoded.resize(e.len as usize, 0);
        let n = zstd
            .decompress_to_buffer(&bufs.stored[..], &mut bufs.decoded[..])
            .map_err(|err| {
                bad(
                    path,
                    format!(
                        "object {} does not decompress within the {} bytes its index says: {err}",
                        e.id.short(12),
                        e.len
                    ),
                )
            })?;
        if n as u64 != e.len {
            return Err(bad(
                path,
                format!(
                    "object {} decompresses to {n} bytes, not the {} its index says",
                    e.id.short(12),
                    e.len
                ),
            ));
        }
        &bufs.decoded
    } else {
        // The layout check guarantees a raw entry's length equals its stored length.
        &bufs.stored
    };
    let actual = ObjectId::of(bytes);
    if actual != e.id {
        return Err(corrupt_in_pack(path, &e.id, &actual));
    }
    if have {
        return Ok(());
    }
    // The pack's frame is what the store would write for these bytes: it lands as it is
    // (no recompression, and the unpacked store is as small as a captured one).
    let frame = e.zstd && crate::objects::compressed::storable(&bufs.stored, bytes.len());
    match (packed, frame) {
        (true, true) => staging.pack_verified(&e.id, &bufs.stored, e.len, true),
        (true, false) => staging.pack_verified(&e.id, bytes, e.len, false),
        (false, true) => staging.put_verified_frame(&e.id, &bufs.stored),
        (false, false) => staging.put_verified(&e.id, bytes),
    }
}

/// A received record must not take over this store's refs: its name must not already name
/// another snapshot here (the record's bytes, and so its id, carry the name, so it cannot be
/// renamed on the way in), and its creation time must not lie in the future, where it would
/// stay `agent/<alias>` (the newest snapshot of the agent) over every later local export.
fn check_foreign_record(
    store: &Packs<'_>,
    origin: &Path,
    id: &ObjectId,
    snapshot: &Snapshot,
) -> Result<(), StoreError> {
    if crate::snapshot::future_dated(snapshot) {
        return Err(bad(
            origin,
            "carries a snapshot created more than a day in the future; it would shadow every \
             later local snapshot of its agent, so it is not imported (check the sending host's \
             clock)",
        ));
    }
    if let Some(name) = &snapshot.name {
        if let Some(local) = store.catalog().session()?.name_target(name)? {
            if local != *id {
                return Err(bad(
                    origin,
                    format!(
                        "carries a snapshot named `{name}`, which already names snapshot {} in \
                         this store; a received snapshot does not take over a local name \
                         (`zeroclaw-bundle forget {name}` drops the local one, its data kept \
                         until `gc`; or unpack into another store with `--store DIR`; or \
                         `mount` or `diff` the pack without unpacking it)",
                        local.short(12)
                    ),
                ));
            }
        }
    }
    Ok(())
}

impl Packs<'_> {
    /// Imports pack `pack` into `store`: exactly the objects its snapshot reaches that the store
    /// lacks (found by [`Packs::closure_needs`], as `pull` finds them; whatever else the pack lists is
    /// ignored, never written: an extra snapshot record planted beside the snapshot never lands
    /// where `reindex` or `gc` could find it), each verified and staged in one pass
    /// (see the `unpack` module), lands in `objects/` only once all verified (and the trailer too), then
    /// the record and the catalog entry are committed through [`crate::Catalog::commit_snapshot`]. So an
    /// interrupted unpack leaves at most unreferenced objects (and a staging directory for gc),
    /// and a pack that fails verification imports nothing. Fails before staging anything when the
    /// pack is a digest pack, (incremental) needs objects the store lacks, or its snapshot passes
    /// the store's expansion limits ([`crate::limits`]).
    pub fn unpack(&self, pack: &PackReader) -> Result<ObjectId, StoreError> {
        self.unpack_watched(pack, &NoWatch)
    }

    /// [`Packs::unpack`], telling `watch` how the verification goes and stopping when it asks.
    pub fn unpack_watched(
        &self,
        pack: &PackReader,
        watch: &dyn ImportWatch,
    ) -> Result<ObjectId, StoreError> {
        self.unpack_counted(pack, watch).map(|r| r.id)
    }

    /// [`Packs::unpack_watched`], saying how many objects came from the pack and how many the store
    /// already held (see [`UnpackReport`]).
    pub fn unpack_counted(
        &self,
        pack: &PackReader,
        watch: &dyn ImportWatch,
    ) -> Result<UnpackReport, StoreError> {
        if pack.trees_only {
            return Err(bad(
                pack.path(),
                "is a digest pack (trees only): it can be diffed or listed, not unpacked",
            ));
        }
        // Held from the first look at what the store holds to the catalog entry, so `gc` cannot
        // remove an object this import counts on, or its staging directory (the store's write
        // lock, as for a capture).
        let lock = self.write_lock()?;
        let snapshot = pack.snapshot()?;
        // Read (and checked for form) before anything is staged; kept beside the record once
        // every object has landed, before the record is committed.
        let signatures = pack.signatures()?;
        check_foreign_record(self, pack.path(), &pack.root, &snapshot)?;
        let packs = std::slice::from_ref(pack);
        check_received_limits(
            self,
            packs,
            &snapshot.root,
            &format!(
                "snapshot {} of pack {}",
                pack.root.short(12),
                pack.path().display()
            ),
        )?;
        // A store with no object yet (one this unpack created) is not asked for each one.
        let fresh = self.objects().is_empty()?;
        // Only what the snapshot reaches and the store lacks: any other object the pack lists
        // (an extra snapshot record, an unused blob) is never written.
        let walk = closure_walk(self, packs, &snapshot.root, fresh)?;
        let (missing, from_pack) = (walk.missing, walk.from_packs);
        if let Some(first) = missing.first() {
            return Err(bad(
                pack.path(),
                match pack.base {
                    Some(base) => format!(
                        "is incremental on snapshot {} and this store lacks {} of the objects it needs (first: {}); unpack a pack of the base first",
                        base.short(12),
                        missing.len(),
                        first.short(12)
                    ),
                    None => format!("lacks {} objects its trees name (first: {})", missing.len(), first.short(12)),
                },
            ));
        }
        // The record is read and hashed by `snapshot()` and written by the commit.
        let jobs = jobs_for(packs, &from_pack);
        land_objects(self, packs, jobs, fresh, watch)?;
        self.catalog()
            .add_received_signatures(&lock, &pack.root, &signatures)?;
        let trees = ReceivedTrees {
            packs,
            store: self.objects().reader(),
        };
        let id = self
            .catalog()
            .commit_snapshot_reading(&lock, &snapshot, None, Some(&trees))?;
        if id != pack.root {
            return Err(bad(
                pack.path(),
                format!(
                    "its record re-encodes to {}, not {}",
                    id.short(12),
                    pack.root.short(12)
                ),
            ));
        }
        Ok(UnpackReport {
            id,
            // The record is read from the pack and hashed by `snapshot()` every time.
            read: from_pack.len() + 1,
            present: walk.reached - from_pack.len(),
        })
    }

    /// Walks the snapshot tree under `root` through the store and `packs` and returns the
    /// objects it reaches that neither holds, and (second) those the packs must provide (reached,
    /// not in the store). A tree found nowhere is reported and not descended: the caller fetches
    /// it and walks again.
    pub fn closure_needs(
        &self,
        packs: &[PackReader],
        root: &ObjectId,
    ) -> Result<(Vec<ObjectId>, Vec<ObjectId>), StoreError> {
        let walk = closure_walk(self, packs, root, false)?;
        Ok((walk.missing, walk.from_packs))
    }

    /// Imports snapshot `snapshot_id` (its record is `record`, hashed here against the id) from
    /// `packs` into `store` (each pack's trailer checked, every object it provides verified): every object the store lacks lands, then the
    /// record and the catalog entry through [`crate::Catalog::commit_snapshot`], the same order as
    /// [`Packs::unpack`]. Fails before writing anything when an object is found nowhere.
    pub fn import(
        &self,
        snapshot_id: &ObjectId,
        record: &[u8],
        packs: &[PackReader],
        watch: &dyn ImportWatch,
    ) -> Result<ObjectId, StoreError> {
        let actual = ObjectId::of(record);
        if actual != *snapshot_id {
            return Err(StoreError::CorruptObject {
                id: *snapshot_id,
                actual,
            });
        }
        let snapshot = Snapshot::decode(record).map_err(|why| StoreError::Malformed {
            id: *snapshot_id,
            what: "snapshot record",
            why,
        })?;
        check_foreign_record(
            self,
            Path::new(&format!("of snapshot {}", snapshot_id.short(12))),
            snapshot_id,
            &snapshot,
        )?;
        // Held from the walk that decides what the store already has to the catalog entry, so a
        // gc cannot delete an unreferenced object the walk counted on.
        let lock = self.write_lock()?;
        check_received_limits(
            self,
            packs,
            &snapshot.root,
            &format!("snapshot {}", snapshot_id.short(12)),
        )?;
        let fresh = self.objects().is_empty()?;
        let walk = closure_walk(self, packs, &snapshot.root, fresh)?;
        if let Some(first) = walk.missing.first() {
            return Err(StoreError::MissingObject(*first));
        }
        let jobs = jobs_for(packs, &walk.from_packs);
        // Every pack's trailer is checked too, even one that only provided trees.
        land_objects(self, packs, jobs, fresh, watch)?;
        let trees = ReceivedTrees {
            packs,
            store: self.objects().reader(),
        };
        let id = self
            .catalog()
            .commit_snapshot_reading(&lock, &snapshot, None, Some(&trees))?;
        if id != *snapshot_id {
            return Err(StoreError::Malformed {
                id: *snapshot_id,
                what: "snapshot record",
                why: DecodeError::BadField {
                    field: "record",
                    why: format!("re-encodes to {}", id.short(12)),
                },
            });
        }
        Ok(id)
    }
}

/// What an unpack did with the objects its snapshot needs: `read + present` is every object
/// the snapshot reaches, its record included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnpackReport {
    /// The snapshot the pack carried, now in the store.
    pub id: ObjectId,
    /// Objects read from the pack and verified against their ids (the snapshot record is
    /// always one of them): what the store lacked or held damaged.
    pub read: usize,
    /// Objects the store already held, which were not read from the pack at all: the pack's
    /// copies of them may be damaged without the unpack noticing (`verify PACK` checks all).
    pub present: usize,
}

/// A received snapshot must stay within the store's own expansion limits ([`crate::limits`]:
/// depth, entries, bytes), which every reader of the store enforces: what no reader would
/// expand is not imported (and `verify` never walks it). Checked over tree objects only,
/// before anything is staged; `label` names the snapshot and where it came from.
fn check_received_limits(
    store: &Packs<'_>,
    packs: &[PackReader],
    root: &ObjectId,
    label: &str,
) -> Result<(), StoreError> {
    let trees = ReceivedTrees {
        packs,
        store: store.objects().reader(),
    };
    crate::limits::check_expansion(&trees, root, label).map(|_| ())
}

/// The import jobs of `ids` (each found in one of `packs`).
fn jobs_for(packs: &[PackReader], ids: &[ObjectId]) -> Vec<(usize, PackEntry)> {
    ids.iter()
        .filter_map(|id| {
            packs
                .iter()
                .enumerate()
                .find_map(|(i, p)| p.entry(id).map(|e| (i, *e)))
        })
        .collect()
}

/// Where an object of a multi-pack import is found.
fn find_in<'p>(packs: &'p [PackReader], id: &ObjectId) -> Option<&'p PackReader> {
    packs.iter().find(|p| p.entry(id).is_some())
}

/// What [`closure_walk`] found.
struct ClosureWalk {
    /// Reached, held neither by the store nor by the packs.
    missing: Vec<ObjectId>,
    /// Reached, to be read from the packs (absent from the store, or a tree it holds damaged).
    from_packs: Vec<ObjectId>,
    /// Every distinct object reached (trees and blobs, the root tree included).
    reached: usize,
}

/// [`Packs::closure_needs`], counting what it reached too; in a `fresh` store (one that held
/// no object when the import began: [`ObjectDir::is_empty`]) nothing is looked up in it.
fn closure_walk(
    store: &Packs<'_>,
    packs: &[PackReader],
    root: &ObjectId,
    fresh: bool,
) -> Result<ClosureWalk, StoreError> {
    let has = |id: &ObjectId| !fresh && store.objects().has(id);
    let mut missing = Vec::new();
    let mut from_packs = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![*root];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        // A tree the store holds damaged (`verify` names it) is taken from the packs like a
        // missing one, so unpacking or pulling the snapshot again replaces it.
        let held = match has(&id) {
            true => match store.objects().read_tree(&id) {
                Ok(tree) => Some(tree),
                Err(StoreError::CorruptObject { .. } | StoreError::Undecodable { .. }) => None,
                Err(e) => return Err(e),
            },
            false => None,
        };
        let tree = if let Some(tree) = held {
            tree
        } else if let Some(pack) = find_in(packs, &id) {
            from_packs.push(id);
            pack.tree(&id)?
        } else {
            missing.push(id);
            continue;
        };
        for e in tree.entries() {
            if e.kind == EntryKind::Dir {
                stack.push(e.id);
            } else if seen.insert(e.id) && !has(&e.id) {
                match find_in(packs, &e.id) {
                    Some(_) => from_packs.push(e.id),
                    None => missing.push(e.id),
                }
            }
        }
    }
    Ok(ClosureWalk {
        missing,
        from_packs,
        reached: seen.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use crate::pack::PackOptions;
    use crate::tree::{Tree, TreeEntry};
    use std::os::unix::fs::PermissionsExt;

    /// Bytes that do not compress (the store's test generator, seeded from `seed`).
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        crate::objects::compressed::tests::random_seeded(
            len,
            seed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
    }

    /// A store with one snapshot of `files` (name, bytes) and its pack.
    fn packed(dir: &Path, files: &[(String, Vec<u8>)]) -> (ObjectId, Vec<u8>) {
        let store = Store::open_or_create(&dir.join("src")).unwrap();
        let mut entries: Vec<TreeEntry> = files
            .iter()
            .map(|(name, bytes)| store.file_entry_for_test(name, bytes))
            .collect();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let root = store
            .objects()
            .write_tree(&Tree::from_entries(entries).unwrap())
            .unwrap();
        let snap = Snapshot::for_test(root, "test");
        let lock = store.write_lock().unwrap();
        let id = store.catalog().commit_snapshot(&lock, &snap, None).unwrap();
        let mut out = Vec::new();
        store
            .packs()
            .write(&id, PackOptions::default(), &mut out, &mut |_| {})
            .unwrap();
        (id, out)
    }

    /// The pack's index offset and its entries (offset of each entry's bytes in the pack,
    /// the entry): read straight from the format, so a test can lie in one field.
    fn index_of(pack: &[u8]) -> (usize, Vec<(usize, PackEntry)>) {
        let n = pack.len();
        let io = u64::from_le_bytes(pack[n - 48..n - 40].try_into().unwrap()) as usize;
        let count = u64::from_le_bytes(pack[io..io + 8].try_into().unwrap()) as usize;
        let u = |at: usize| u64::from_le_bytes(pack[at..at + 8].try_into().unwrap());
        let entries = (0..count)
            .map(|i| {
                let at = io + 8 + i * 57;
                let e = PackEntry {
                    id: ObjectId::from_bytes(pack[at..at + 32].try_into().unwrap()),
                    offset: u(at + 32),
                    stored_len: u(at + 40),
                    len: u(at + 48),
                    zstd: pack[at + 56] & 1 != 0,
                };
                (at, e)
            })
            .collect();
        (io, entries)
    }

    /// Recomputes the trailer hash, so only the per-object checks can catch a change.
    fn reseal(pack: &mut [u8]) {
        let n = pack.len();
        let digest = ObjectId::of(&pack[..n - 48]);
        pack[n - 40..n - 8].copy_from_slice(digest.as_bytes());
    }

    /// Unpacks `bytes` into a new store `name` under `dir`.
    fn unpack_into(dir: &Path, name: &str, bytes: &[u8]) -> (Store, Result<ObjectId, StoreError>) {
        let path = dir.join(format!("{name}.zcpack"));
        std::fs::write(&path, bytes).unwrap();
        let store = Store::open_or_create(&dir.join(name)).unwrap();
        let result = PackReader::open(&path).and_then(|p| store.packs().unpack(&p));
        (store, result)
    }

    /// Nothing imported: no object, no staging directory, no snapshot.
    fn assert_nothing_imported(store: &Store) {
        assert!(store.objects().list().unwrap().is_empty(), "objects landed");
        let tmp: Vec<_> = std::fs::read_dir(store.objects().tmp_dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(tmp.is_empty(), "left in tmp/: {tmp:?}");
        assert!(store
            .catalog()
            .session()
            .unwrap()
            .snapshots()
            .unwrap()
            .is_empty());
    }

    fn many_files() -> Vec<(String, Vec<u8>)> {
        (0..64)
            .map(|i| (format!("f{i:03}"), noise(i + 1, 3_000 + i as usize * 97)))
            .collect()
    }

    /// The last object of the pack (by offset) is damaged, its trailer resealed: the failure
    /// comes after every other object was verified and staged, and nothing lands.
    #[test]
    fn damage_in_the_last_object_imports_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (id, pack) = packed(dir.path(), &many_files());
        let (io, _) = index_of(&pack);
        let mut bad = pack.clone();
        bad[io - 1] ^= 0x20;
        reseal(&mut bad);
        let (store, result) = unpack_into(dir.path(), "b", &bad);
        let err = result.expect_err("a damaged object").to_string();
        assert!(
            err.contains("b.zcpack") && err.contains("hashes to"),
            "{err}"
        );
        assert_nothing_imported(&store);
        // The intact pack then imports into the same store, and again (every object is
        // already there: verified, not rewritten).
        let (store, result) = unpack_into(dir.path(), "b", &pack);
        assert_eq!(result.unwrap(), id);
        let again = PackReader::open(&dir.path().join("b.zcpack")).unwrap();
        assert_eq!(store.packs().unpack(&again).unwrap(), id);
        assert!(store
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
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
        assert_eq!(
            std::fs::read_dir(store.objects().tmp_dir())
                .unwrap()
                .count(),
            0
        );
    }

    /// A damaged trailer alone (every object intact) is refused too.
    #[test]
    fn a_bad_trailer_imports_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut pack) = packed(dir.path(), &many_files());
        let n = pack.len();
        pack[n - 20] ^= 1;
        let (store, result) = unpack_into(dir.path(), "b", &pack);
        let err = result.expect_err("a bad trailer").to_string();
        assert!(err.contains("trailer checksum"), "{err}");
        assert_nothing_imported(&store);
    }

    /// Objects above `IN_MEMORY` stream (raw and compressed) and round-trip; a large
    /// compressed object that lies about its length is caught by the streaming cap.
    #[test]
    fn large_objects_stream_and_their_lies_are_caught() {
        let big = IN_MEMORY as usize + 1_000_000;
        let files = vec![
            ("noise".to_string(), noise(7, big)),
            ("zeros".to_string(), vec![0u8; big + 5]),
            ("small".to_string(), b"small".to_vec()),
        ];
        let dir = tempfile::tempdir().unwrap();
        let (id, pack) = packed(dir.path(), &files);
        let (_, entries) = index_of(&pack);
        assert!(entries.iter().any(|(_, e)| e.zstd && e.len > IN_MEMORY));
        assert!(entries.iter().any(|(_, e)| !e.zstd && e.len > IN_MEMORY));
        let (store, result) = unpack_into(dir.path(), "ok", &pack);
        assert_eq!(result.unwrap(), id);
        assert!(store
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
        let zeros = ObjectId::of(&files[1].1);
        assert_eq!(store.objects().read_verified(&zeros).unwrap(), files[1].1);

        for (name, delta) in [("longer", 1i64), ("shorter", -1)] {
            let mut bad = pack.clone();
            let (at, e) = *entries
                .iter()
                .find(|(_, e)| e.zstd && e.len > IN_MEMORY)
                .unwrap();
            let lie = (e.len as i64 + delta) as u64;
            bad[at + 48..at + 56].copy_from_slice(&lie.to_le_bytes());
            reseal(&mut bad);
            let (store, result) = unpack_into(dir.path(), name, &bad);
            let err = result.expect_err(name).to_string();
            assert!(err.contains("decompresses to"), "{err}");
            assert_nothing_imported(&store);
        }
    }

    /// A small compressed object whose declared length is too short (a bomb against its cap)
    /// or too long is refused by the in-memory path.
    #[test]
    fn small_compressed_lies_are_caught() {
        let files = vec![("a".to_string(), vec![b'a'; 50_000])];
        let dir = tempfile::tempdir().unwrap();
        let (_, pack) = packed(dir.path(), &files);
        let (_, entries) = index_of(&pack);
        let (at, e) = *entries.iter().find(|(_, e)| e.zstd).unwrap();
        for (name, lie, needle) in [
            ("bomb", 5, "does not decompress within the 5 bytes"),
            ("long", e.len + 1, "decompresses to 50000 bytes"),
        ] {
            let mut bad = pack.clone();
            bad[at + 48..at + 56].copy_from_slice(&lie.to_le_bytes());
            reseal(&mut bad);
            let (store, result) = unpack_into(dir.path(), name, &bad);
            let err = result.expect_err(name).to_string();
            assert!(err.contains(needle), "{name}: {err}");
            assert_nothing_imported(&store);
        }
    }
    /// Every object `store` lists, by id: (packed, compressed); an object listed twice fails.
    fn forms(store: &Store) -> std::collections::HashMap<ObjectId, (bool, bool)> {
        let mut out = std::collections::HashMap::new();
        for o in store.objects().list().unwrap() {
            let again = out.insert(o.id, (o.packed, o.compressed));
            assert!(again.is_none(), "{} is stored twice", o.id.short(12));
        }
        out
    }

    /// How many object packs `store` holds.
    fn pack_files(store: &Store) -> usize {
        let packs = store.objects().tmp_dir().with_file_name("objects/packs");
        std::fs::read_dir(packs).map(|rd| rd.count()).unwrap_or(0)
    }

    /// Issue 43: an unpack into a new store lands what a capture would have written: the small
    /// objects in one object pack (the compressible one as the pack's zstd frame), only the
    /// object over 256 KiB and the record as files of their own; nothing left in tmp/.
    #[test]
    fn an_unpack_into_a_new_store_lands_its_small_objects_in_one_pack() {
        let mut files = many_files();
        files.push(("text".into(), b"compressible text ".repeat(2_000)));
        files.push(("big".into(), noise(99, 300_000)));
        let dir = tempfile::tempdir().unwrap();
        let (id, pack) = packed(dir.path(), &files);
        let (store, result) = unpack_into(dir.path(), "new", &pack);
        assert_eq!(result.unwrap(), id);
        let forms = forms(&store);
        let big = ObjectId::of(&files.last().unwrap().1);
        let loose: HashSet<ObjectId> = forms
            .iter()
            .filter(|(_, (packed, _))| !packed)
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(
            loose,
            HashSet::from([id, big]),
            "only the big blob and the record"
        );
        // The blobs and the root tree, packed.
        assert_eq!(forms.len(), files.len() + 2);
        let text = ObjectId::of(&files[files.len() - 2].1);
        assert_eq!(forms[&text], (true, true), "the pack's frame, packed");
        assert_eq!(pack_files(&store), 1);
        for (_, bytes) in &files {
            assert_eq!(
                store.objects().read_verified(&ObjectId::of(bytes)).unwrap(),
                *bytes
            );
        }
        assert!(store
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
        assert_eq!(
            std::fs::read_dir(store.objects().tmp_dir())
                .unwrap()
                .count(),
            0
        );
    }

    /// Into a store in use: what it lacks lands packed, what it holds intact is not written
    /// again, and the root tree it holds damaged is replaced by a file of the verified bytes.
    #[test]
    fn an_unpack_into_a_store_in_use_packs_what_it_lacks_and_replaces_a_damaged_tree() {
        let files = many_files();
        let dir = tempfile::tempdir().unwrap();
        let (id, pack) = packed(dir.path(), &files);
        let src = Store::open_or_create(&dir.path().join("src")).unwrap();
        let root = src.objects().read_snapshot(&id).unwrap().root;
        let dst = Store::open_or_create(&dir.path().join("dst")).unwrap();
        for (_, bytes) in &files[..10] {
            dst.objects().write_bytes(bytes).unwrap();
        }
        let tree = src.objects().read_verified(&root).unwrap();
        assert_eq!(dst.objects().write_bytes(&tree).unwrap(), root);
        let file = dst.objects().file_of(&root).unwrap();
        let mut damaged = tree.clone();
        damaged[20] ^= 0x40;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(&file, &damaged).unwrap();
        let path = dir.path().join("in-use.zcpack");
        std::fs::write(&path, &pack).unwrap();
        let report = dst
            .packs()
            .unpack_counted(&PackReader::open(&path).unwrap(), &NoWatch)
            .unwrap();
        assert_eq!(report.id, id);
        assert_eq!((report.read, report.present), (files.len() - 10 + 2, 10));
        let forms = forms(&dst);
        for (i, (_, bytes)) in files.iter().enumerate() {
            let packed = forms[&ObjectId::of(bytes)].0;
            assert_eq!(
                packed,
                i >= 10,
                "file {i}: held ones stay, lacked ones are packed"
            );
        }
        assert!(!forms[&root].0, "the damaged tree is replaced by a file");
        assert_eq!(std::fs::read(&file).unwrap(), tree);
        assert_eq!(pack_files(&dst), 1);
        assert!(dst
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }

    /// A tree of files (name, bytes) written into `store`, and its id.
    fn tree_of(store: &Store, files: &[(&str, &[u8])]) -> (ObjectId, Vec<u8>) {
        let entries = files
            .iter()
            .map(|(name, bytes)| store.file_entry_for_test(name, bytes))
            .collect();
        let tree = Tree::from_entries(entries).unwrap().encode();
        (store.objects().write_bytes(&tree).unwrap(), tree)
    }

    /// Issue 18, items 1 and 2: a pack lists, beside its innocent snapshot, a record named like
    /// a local snapshot, a future-dated export of a local agent, their tree and blob, and an
    /// unused 64 MiB blob of zeros (a few KiB compressed). `unpack` writes exactly what the
    /// snapshot reaches; nothing else lands, so `reindex` and `gc` never see the planted
    /// records and the local names stay where they were.
    #[test]
    fn a_pack_adds_exactly_what_its_snapshot_reaches() {
        let dir = tempfile::tempdir().unwrap();
        let src = Store::open_or_create(&dir.path().join("src")).unwrap();
        let (innocent_root, innocent_tree) = tree_of(&src, &[("a", b"innocent")]);
        let innocent = Snapshot::for_test(innocent_root, "sender").encode();
        let (planted_root, planted_tree) = tree_of(&src, &[("f", b"planted")]);
        let now = i128::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        let named = Snapshot {
            name: Some("prod".into()),
            created_unix_ns: now,
            ..Snapshot::for_test(planted_root, "sender")
        }
        .encode();
        let future = Snapshot {
            agent: Some("ops".into()),
            kind: crate::snapshot::SnapshotKind::AgentBundle,
            created_unix_ns: i128::from(i64::MAX),
            ..Snapshot::for_test(planted_root, "sender")
        }
        .encode();
        let zeros = vec![0u8; 64 << 20];
        let objects = vec![
            (innocent.clone(), false),
            (innocent_tree, false),
            (b"innocent".to_vec(), false),
            (named.clone(), false),
            (future.clone(), false),
            (planted_tree, false),
            (b"planted".to_vec(), false),
            (zeros.clone(), true),
        ];
        let pack = crate::pack::craft_pack(ObjectId::of(&innocent), None, &objects);
        assert!(pack.len() < 64 << 10, "a small pack: {} bytes", pack.len());

        let dst = Store::open_or_create(&dir.path().join("dst")).unwrap();
        let (local_root, _) = tree_of(&dst, &[("f", b"local")]);
        let lock = dst.write_lock().unwrap();
        let local = dst
            .catalog()
            .commit_snapshot(
                &lock,
                &Snapshot {
                    name: Some("prod".into()),
                    agent: Some("ops".into()),
                    kind: crate::snapshot::SnapshotKind::AgentBundle,
                    created_unix_ns: 5,
                    ..Snapshot::for_test(local_root, "local")
                },
                None,
            )
            .unwrap();
        drop(lock);
        let before: HashSet<ObjectId> =
            dst.objects().list().unwrap().iter().map(|o| o.id).collect();
        let path = dir.path().join("p.zcpack");
        std::fs::write(&path, &pack).unwrap();
        let id = dst
            .packs()
            .unpack(&PackReader::open(&path).unwrap())
            .unwrap();
        assert_eq!(id, ObjectId::of(&innocent));
        let after: HashSet<ObjectId> = dst.objects().list().unwrap().iter().map(|o| o.id).collect();
        let added: HashSet<ObjectId> = after.difference(&before).copied().collect();
        let reached: HashSet<ObjectId> = [
            ObjectId::of(&innocent),
            innocent_root,
            ObjectId::of(b"innocent"),
        ]
        .into();
        assert_eq!(added, reached, "exactly what the snapshot reaches");
        let bytes_in_objects: u64 = dst
            .objects()
            .list()
            .unwrap()
            .iter()
            .map(|o| o.stored_len)
            .sum();
        assert!(
            bytes_in_objects < 1 << 20,
            "{bytes_in_objects} bytes landed"
        );
        dst.maintenance().reindex().unwrap();
        dst.maintenance().gc(0).unwrap();
        for (reference, want) in [("prod", local), ("agent/ops", local)] {
            assert_eq!(
                dst.catalog().resolve(reference).unwrap(),
                want,
                "{reference}"
            );
        }
        assert_eq!(
            dst.catalog().session().unwrap().snapshots().unwrap().len(),
            2
        );
        assert!(dst
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }

    /// Issue 18, item 4: what the store's own limits refuse (a chain 257 directories deep),
    /// `unpack` refuses before anything lands, naming the pack and the limit; 256 is accepted.
    #[test]
    fn unpack_refuses_what_the_expansion_limits_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let src = Store::open_or_create(&dir.path().join("src")).unwrap();
        let chain = |depth: u64| {
            let (mut id, mut objects) = {
                let (id, tree) = tree_of(&src, &[("leaf", b"x")]);
                (id, vec![(tree, false), (b"x".to_vec(), false)])
            };
            for _ in 0..depth {
                let tree = Tree::from_entries(vec![TreeEntry {
                    name: b"d".to_vec(),
                    kind: EntryKind::Dir,
                    mode: crate::tree::DIR_MODE,
                    size: 1,
                    id,
                }])
                .unwrap()
                .encode();
                id = ObjectId::of(&tree);
                objects.push((tree, false));
            }
            let record = Snapshot::for_test(id, "deep").encode();
            objects.push((record.clone(), false));
            crate::pack::craft_pack(ObjectId::of(&record), None, &objects)
        };
        let (store, result) = unpack_into(dir.path(), "deep", &chain(257));
        let err = result.expect_err("too deep").to_string();
        assert!(
            err.contains("deep.zcpack") && err.contains("directory depth passes the limit of 256"),
            "{err}"
        );
        assert_nothing_imported(&store);
        let (_, result) = unpack_into(dir.path(), "fine", &chain(256));
        result.unwrap();
    }
}
