//! Object packs: the only code that writes under `<store>/objects/packs/`.
//!
//! **Why.** A capture stores most objects small (on the bench corpus 21,500 of 21,700 objects
//! are at most 256 KiB, 15,000 of them at most 4 KiB). One file each costs a 4 KiB block at
//! least (44 MiB of slack over 416 MiB of objects), an inode, a create and a rename into one of
//! 256 directories, and a restore opens every one of them again. So a capture appends its small
//! objects to one pack file instead, as git and restic do: one create, one sequential write,
//! one file to read back in order.
//!
//! **Format.** The travel pack's format (`pack_format`), flag [`FLAG_OBJECTS`] instead of a
//! root snapshot (root and base are zeros): header, the objects (each raw, or one zstd frame
//! under the store's rule in `compressed`), the index sorted by id, the trailer with the blake3
//! of every byte before it. Named `objects/packs/<that digest>.pack`. Only objects of at most
//! [`compressed::MAX_LEN`] bytes are packed; larger ones stay one raw file each, readable at
//! any offset.
//!
//! **Writing** ([`Packer`]). Objects are appended to a file in `tmp/`; an object the same packer
//! already holds is not appended twice. [`Packed::finish`] writes the index and trailer,
//! fsyncs the file and only then renames it into `packs/`: a pack there is whole (no torn pack
//! can make a later capture's dedup trust bytes that never reached the disk), and the rename
//! itself is made durable by the commit's `syncfs`, before any record names its objects. A
//! pack rolls over at [`ROLL_ENTRIES`] objects or [`ROLL_BYTES`], which bounds the writer's
//! memory. A packer dropped unfinished (a failed capture) removes its temp file; its objects
//! were never named by anything.
//!
//! **Reading.** The packs are found on first use and kept open; each pack's index stays on
//! disk and only the first 4 bytes of each id are held in memory (1.2 MB for 300,000 objects,
//! half of what 8 bytes took: a capture of one changed file among 300,000 holds them together
//! with the loaded stat cache and the catalog, and peaked at 62.4-65.3 MiB against a 64 MiB
//! goal), so a lookup is a binary search in memory and one positioned read of the 57-byte
//! entry (or a few, for ids that share those 4 bytes), whose full id must match. A pack written by another process after the
//! packs were listed is found when a lookup misses and `packs/` changed since. Nothing here
//! trusts a pack further than its bounds: an index that is not sorted, points outside the
//! object area, or claims a length no packed object can have makes the whole pack ignored,
//! with one notice; every object read is checked against its id by the caller as a loose one
//! is (`Blob::verify`, `verify`).
//!
//! **Removing** ([`Packed::rewrite_without`], gc only, under the exclusive lock): a pack whose
//! objects are all doomed is deleted; one with some doomed objects is rewritten with the rest
//! (the new pack is whole and renamed in before the old one goes). A reader that still has the
//! old pack open keeps reading it.
//!
//! **Merging** ([`Packed::consolidate`], gc only, after removing): every capture writes a pack
//! of its own, and a lookup searches every pack (and a command's first lookup loads each
//! one's index), so gc merges small packs as git's `repack --geometric=2` does. The packs
//! that are not full (under half of [`ROLL_ENTRIES`] and of [`ROLL_BYTES`]) are sorted by size;
//! the largest of them that grow at least twofold each step stay, and the rest are merged
//! into one (more if it rolls over), their objects in the order they were written (a
//! checkout reads a pack in that order). So the number of packs grows with the logarithm of
//! the store, and each object is rewritten a logarithmic number of times. The merged pack is
//! whole before the old ones go; a crash between the two leaves objects in two packs, which
//! is harmless and merged at the next gc.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use super::compressed;
use crate::error::StoreError;
use crate::heap;
use crate::id::{IdHasher, ObjectId};
use crate::pack_format::{
    decode_entry, encode_index, encode_trailer, PackEntry, END, ENTRY_LEN, FLAG_ZSTD, HEADER_LEN,
    MAGIC, PACK_VERSION, TRAILER_LEN,
};
use crate::sys;

/// The directory of the object packs, below `objects/`.
pub(crate) const PACKS_DIR: &str = "packs";
const SUFFIX: &str = ".pack";
/// Header flag of a store's object pack (no snapshot: root and base are zeros).
pub(crate) const FLAG_OBJECTS: u32 = 2;
/// A pack is finished and a new one begun after this many objects (the writer keeps one
/// index entry and one map slot per object: about 6 MB at this count).
pub(crate) const ROLL_ENTRIES: usize = 65_536;
/// ... or after this many bytes.
pub(crate) const ROLL_BYTES: u64 = 256 << 20;
/// Index entries read per positioned read while a pack is opened.
const INDEX_CHUNK: usize = 4096;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Where a packed object lies.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The pack, open.
    pub(crate) file: Arc<File>,
    /// Its path (for messages).
    pub(crate) path: PathBuf,
    /// The object's entry.
    pub(crate) entry: PackEntry,
}

/// The packs of one store, and the packer of the capture in progress (shared by every clone of
/// an `ObjectDir`).
#[derive(Debug)]
pub(crate) struct Packed {
    dir: PathBuf,
    tmp: PathBuf,
    state: Mutex<State>,
    writer: Mutex<Writer>,
}

/// The packing state: open between [`Packed::start`] and [`Packed::finish`]; the packer's file
/// is made by the first object (a capture that stores nothing new writes no pack).
#[derive(Debug, Default)]
struct Writer {
    open: bool,
    packer: Option<Packer>,
    /// The index of the last packer finished, cleared, for the next one (see [`PackerIndex`]).
    spare: PackerIndex,
}

#[derive(Debug, Default)]
struct State {
    /// False until `packs/` was listed once.
    listed: bool,
    /// `packs/`'s modification time when it was last listed.
    listed_mtime: Option<SystemTime>,
    /// Shared with every lookup in flight: a lookup clones the `Arc`, not the list.
    packs: Packs,
    /// Every pack name seen (loaded or refused), so a refused pack is reported once.
    seen: HashSet<String>,
    /// Packs refused, with why: `verify` reports them.
    refused: Vec<Refused>,
}

/// The loaded packs, as a lookup sees them.
type Packs = Arc<Vec<Arc<LocalPack>>>;

/// A pack that cannot be read, and why.
pub(crate) type Refused = (PathBuf, String);

/// One finished pack, open, with the 4-byte prefixes of its sorted ids.
#[derive(Debug)]
pub(crate) struct LocalPack {
    path: PathBuf,
    file: Arc<File>,
    /// The first 4 bytes of each id, in index order.
    prefixes: Vec<u32>,
    /// Where the first index entry starts (the index's count is 8 bytes before).
    entries_at: u64,
    /// The end of the object area (the index's start).
    objects_end: u64,
    modified: SystemTime,
}

/// The pack being written by a capture (see the module doc). Its index is kept compact: a
/// capture of 300,000 small files holds a full packer's 65,536 entries at a time, and an
/// `ObjectId -> PackEntry` map of them (about 250 bytes an entry with the table's growth)
/// took the first capture's peak from 37 to 90 MiB.
pub(crate) struct Packer {
    file: Arc<File>,
    path: PathBuf,
    hasher: IdHasher,
    len: u64,
    index: PackerIndex,
    /// False for an import's packer ([`ImportPacks`]), which is never looked up: it keeps no
    /// map of its ids, and its bytes are written [`PENDING`] at a time (from `pending`), not
    /// one object at a time.
    lookups: bool,
    pending: Vec<u8>,
}

/// What a packer knows of the objects it holds. Made at its full size once
/// ([`ROLL_ENTRIES`]; memory is touched only as it fills) and handed from one packer to the
/// next of a capture, cleared: a growing hash table frees each smaller table, and a capture of
/// a million small files rolls over 16 times, each roll freeing megabytes. Each such free
/// raised glibc's mmap threshold and took the capture's peak up by a third (see
/// [`crate::heap`]).
#[derive(Default)]
struct PackerIndex {
    /// Objects in the order they were appended (sorted by id only when finished).
    slots: Vec<Slot>,
    /// The slot of each id's first 8 bytes; an id whose prefix another id took is in
    /// `collided`.
    by_prefix: HashMap<u64, u32>,
    collided: HashMap<ObjectId, u32>,
}

impl std::fmt::Debug for PackerIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackerIndex")
            .field("objects", &self.slots.len())
            .finish()
    }
}

impl Drop for PackerIndex {
    /// Its slots (3.7 MB when full) freed as `heap` says, wherever an index is dropped (the
    /// hash table cannot be: its free at the end of a capture, gc or import moves the
    /// threshold once, after the work).
    fn drop(&mut self) {
        heap::release(std::mem::take(&mut self.slots));
    }
}

impl PackerIndex {
    /// Empty, with room for a full pack (and its lookups, with `lookups`).
    fn ready(mut self, lookups: bool) -> PackerIndex {
        self.slots.clear();
        self.by_prefix.clear();
        self.collided.clear();
        self.slots.reserve(ROLL_ENTRIES);
        if lookups {
            self.by_prefix.reserve(ROLL_ENTRIES);
        }
        self
    }
}

/// Bytes an import's packer gathers before it writes them.
const PENDING: usize = 1 << 20;

/// One appended object (49 bytes of fields; the lengths are at most 256 KiB and its frame).
#[derive(Clone, Copy)]
struct Slot {
    id: ObjectId,
    offset: u64,
    stored_len: u32,
    len: u32,
    zstd: bool,
}

impl Slot {
    fn entry(&self) -> PackEntry {
        PackEntry {
            id: self.id,
            offset: self.offset,
            stored_len: u64::from(self.stored_len),
            len: u64::from(self.len),
            zstd: self.zstd,
        }
    }
}

fn prefix(id: &ObjectId) -> u64 {
    u64::from_be_bytes(id.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The first 4 bytes of an id: what a finished pack keeps in memory per object (equal ones are
/// told apart by the full id in the index entry; at 300,000 objects about 10 pairs share one).
fn short_prefix(id: &ObjectId) -> u32 {
    u32::from_be_bytes(id.as_bytes()[..4].try_into().expect("4 bytes"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Packed {
    pub(crate) fn new(objects: &Path, tmp: &Path) -> Packed {
        Packed {
            dir: objects.join(PACKS_DIR),
            tmp: tmp.to_path_buf(),
            state: Mutex::new(State::default()),
            writer: Mutex::new(Writer::default()),
        }
    }

    /// Whether objects are being packed (a capture is in progress).
    pub(crate) fn packing(&self) -> bool {
        lock(&self.writer).open
    }

    /// Objects written from now until [`Packed::finish`] go into packs.
    pub(crate) fn start(&self) {
        lock(&self.writer).open = true;
    }

    /// Adds `stored` (the object's bytes, or its zstd frame when `zstd`) as object `id` of
    /// `len` bytes to the open packer; false when no packer is open (the caller stores the
    /// object loose). An object the packer holds already is not added again.
    pub(crate) fn add(
        &self,
        id: &ObjectId,
        stored: &[u8],
        len: u64,
        zstd: bool,
    ) -> Result<bool, StoreError> {
        let mut writer = lock(&self.writer);
        if !writer.open {
            return Ok(false);
        }
        if writer
            .packer
            .as_ref()
            .is_some_and(|p| p.lookup(id).is_some())
        {
            return Ok(true);
        }
        let writer = &mut *writer;
        let packer = match &mut writer.packer {
            Some(p) => p,
            none => none.insert(Packer::create(
                &self.tmp,
                std::mem::take(&mut writer.spare),
                true,
            )?),
        };
        packer.append(id, stored, len, zstd)?;
        if packer.is_full() {
            let full = writer.packer.take().expect("just appended to");
            // Published under the writer's lock: a lookup meanwhile must not miss its objects.
            writer.spare = self.publish(full)?;
        }
        Ok(true)
    }

    /// Finishes the open packer, if any: its pack is written whole, fsynced and renamed into
    /// `packs/`, and the packer is closed (later objects are stored loose until the next
    /// [`Packed::start`]). The caller's `syncfs` then makes the rename durable.
    pub(crate) fn finish(&self) -> Result<(), StoreError> {
        let mut writer = lock(&self.writer);
        writer.open = false;
        // The capture is over: its index goes.
        writer.spare = PackerIndex::default();
        match writer.packer.take() {
            Some(p) => self.publish(p).map(drop),
            None => Ok(()),
        }
    }

    /// Finishes `packer` into `packs/`; its index, for the next packer.
    fn publish(&self, packer: Packer) -> Result<PackerIndex, StoreError> {
        let (pack, index) = packer.finish_into(&self.dir)?;
        let mut state = lock(&self.state);
        let name = file_name(&pack.path);
        if state.seen.insert(name) {
            Arc::make_mut(&mut state.packs).push(Arc::new(pack));
        }
        Ok(index)
    }

    /// Publishes the packs of an import (see [`ImportPacks`]): each is finished (index,
    /// trailer, fsync) and renamed into `packs/`, where lookups find it from now on.
    pub(crate) fn publish_import(&self, packs: ImportPacks) -> Result<(), StoreError> {
        let ImportPacks {
            current, finished, ..
        } = packs;
        for mut pack in finished {
            let name = file_name(&pack.path);
            let dest = self.dir.join(&name);
            rename_making_dir(&pack.path, &dest, &self.dir)
                .map_err(|e| StoreError::io("rename into", &dest, e))?;
            pack.path = dest;
            let mut state = lock(&self.state);
            if state.seen.insert(name) {
                Arc::make_mut(&mut state.packs).push(Arc::new(pack));
            }
        }
        if let Some(packer) = current {
            self.publish(packer)?;
        }
        Ok(())
    }

    /// Whether `packs/` holds any pack file (read or not): one directory read, no pack opened.
    pub(crate) fn any_pack(&self) -> Result<bool, StoreError> {
        let rd = match fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(StoreError::io("list", &self.dir, e)),
        };
        for ent in rd {
            let ent = ent.map_err(|e| StoreError::io("list", &self.dir, e))?;
            if ent.file_name().to_string_lossy().ends_with(SUFFIX) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Where object `id` is packed, if it is: the open packer first, then every pack (listed
    /// again when `packs/` changed since, so a pack another process wrote is found).
    pub(crate) fn find(&self, id: &ObjectId) -> Result<Option<Found>, StoreError> {
        if let Some(p) = lock(&self.writer).packer.as_ref() {
            if let Some(entry) = p.lookup(id) {
                return Ok(Some(Found {
                    file: p.file.clone(),
                    path: p.path.clone(),
                    entry,
                }));
            }
        }
        let packs = self.packs(false)?;
        if let Some(found) = find_in(&packs, id)? {
            return Ok(Some(found));
        }
        let before = packs.len();
        let packs = self.packs(true)?;
        if packs.len() == before {
            return Ok(None);
        }
        find_in(&packs[before..], id)
    }

    /// The loaded packs; lists `packs/` the first time, and again with `refresh` when its
    /// modification time changed (or is too recent to tell).
    fn packs(&self, refresh: bool) -> Result<Packs, StoreError> {
        let mut state = lock(&self.state);
        if state.listed && !refresh {
            return Ok(state.packs.clone());
        }
        let mtime = match fs::metadata(&self.dir) {
            Ok(m) => m.modified().ok(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                state.listed = true;
                return Ok(state.packs.clone());
            }
            Err(e) => return Err(StoreError::io("stat", &self.dir, e)),
        };
        // Timestamps are coarse (a clock tick): a listing in the same second as the last
        // change may have missed a pack renamed in just after it.
        let settled = mtime.is_some_and(|m| {
            SystemTime::now()
                .duration_since(m)
                .is_ok_and(|age| age.as_secs() >= 2)
        });
        if state.listed && settled && mtime == state.listed_mtime {
            return Ok(state.packs.clone());
        }
        let rd = match fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                state.listed = true;
                return Ok(state.packs.clone());
            }
            Err(e) => return Err(StoreError::io("list", &self.dir, e)),
        };
        let mut names = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| StoreError::io("list", &self.dir, e))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.ends_with(SUFFIX) && !state.seen.contains(&name) {
                names.push(name);
            }
        }
        names.sort();
        for name in names {
            state.seen.insert(name.clone());
            let path = self.dir.join(&name);
            match LocalPack::open(&path) {
                Ok(Some(pack)) => Arc::make_mut(&mut state.packs).push(Arc::new(pack)),
                Ok(None) => {} // removed meanwhile (a gc rewrote it)
                Err(why) => {
                    eprintln!(
                        "notice: object pack {} is ignored: {why} (`zeroclaw-bundle verify` \
                         reports the objects it held)",
                        path.display()
                    );
                    state.refused.push((path, why));
                }
            }
        }
        state.listed = true;
        state.listed_mtime = mtime;
        Ok(state.packs.clone())
    }

    /// Every pack, listed afresh, with the packs refused and why.
    pub(crate) fn all(&self) -> Result<(Vec<Arc<LocalPack>>, Vec<Refused>), StoreError> {
        {
            let mut state = lock(&self.state);
            state.listed_mtime = None;
        }
        let packs = self.packs(true)?;
        // A pack removed since it was loaded (a gc in another process) is not listed.
        let packs = packs.iter().filter(|p| p.path.exists()).cloned().collect();
        Ok((packs, lock(&self.state).refused.clone()))
    }

    /// Rewrites the packs so that they no longer hold `doomed` (gc; see the module doc).
    /// Returns the bytes freed.
    pub(crate) fn rewrite_without(&self, doomed: &HashSet<ObjectId>) -> Result<u64, StoreError> {
        let (packs, _) = self.all()?;
        let mut freed = 0;
        for pack in packs {
            // A few doomed ids (a `forget`, an import's repaired objects) are looked up rather
            // than reading every pack's whole index.
            if doomed.len() * 16 < pack.len() {
                let mut held = false;
                for id in doomed {
                    if pack.find(id)?.is_some() {
                        held = true;
                        break;
                    }
                }
                if !held {
                    continue;
                }
            }
            let entries = pack.entries()?;
            let dead = entries.iter().filter(|e| doomed.contains(&e.id)).count();
            if dead == 0 {
                continue;
            }
            if dead < entries.len() {
                let mut packer = Packer::create(&self.tmp, PackerIndex::default(), true)?;
                let mut buf = Vec::new();
                for e in entries.iter().filter(|e| !doomed.contains(&e.id)) {
                    pack.read_stored(e, &mut buf)?;
                    packer.append(&e.id, &buf, e.len, e.zstd)?;
                }
                self.publish(packer)?;
            }
            let size = pack.file.metadata().map(|m| m.len()).unwrap_or(0);
            if self.remove_pack(&pack)? {
                freed += size;
            }
        }
        Ok(freed)
    }

    /// Removes `pack`'s file and forgets it (a reader that has it open reads on); false when
    /// another process removed the file first.
    fn remove_pack(&self, pack: &Arc<LocalPack>) -> Result<bool, StoreError> {
        let removed = match fs::remove_file(&pack.path) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(StoreError::io("remove", &pack.path, e)),
        };
        let mut state = lock(&self.state);
        Arc::make_mut(&mut state.packs).retain(|p| !Arc::ptr_eq(p, pack));
        Ok(removed)
    }
    /// Merges the small packs (gc; see the module doc, "Merging"). Returns how many packs
    /// were merged (0 or at least 2).
    pub(crate) fn consolidate(&self) -> Result<u64, StoreError> {
        let (packs, _) = self.all()?;
        let mut small = Vec::new();
        for pack in packs {
            let size = pack
                .file
                .metadata()
                .map_err(|e| StoreError::io("stat", &pack.path, e))?
                .len();
            if pack.len() < ROLL_ENTRIES / 2 && size < ROLL_BYTES / 2 {
                small.push((size, pack));
            }
        }
        small.sort_by_key(|(size, _)| *size);
        let sizes: Vec<u64> = small.iter().map(|(size, _)| *size).collect();
        let merging = &small[..geometric_split(&sizes)];
        if merging.len() < 2 {
            return Ok(0);
        }
        let mut seen = HashSet::new();
        let mut packer: Option<Packer> = None;
        let mut spare = PackerIndex::default();
        let mut buf = Vec::new();
        for (_, pack) in merging {
            let mut entries = pack.entries()?;
            entries.sort_unstable_by_key(|e| e.offset);
            for e in entries {
                if !seen.insert(e.id) {
                    continue;
                }
                pack.read_stored(&e, &mut buf)?;
                let p = match &mut packer {
                    Some(p) => p,
                    none => {
                        none.insert(Packer::create(&self.tmp, std::mem::take(&mut spare), true)?)
                    }
                };
                p.append(&e.id, &buf, e.len, e.zstd)?;
                if p.is_full() {
                    spare = self.publish(packer.take().expect("just appended to"))?;
                }
            }
        }
        if let Some(p) = packer {
            self.publish(p)?;
        }
        for (_, pack) in merging {
            self.remove_pack(pack)?;
        }
        Ok(merging.len() as u64)
    }
}

/// How many of the smallest packs to merge, given pack sizes in ascending order: the largest
/// packs that each hold at least twice the one below them stay, and so does any of them that
/// is at least twice everything merged below it.
fn geometric_split(ascending: &[u64]) -> usize {
    let mut split = (1..ascending.len())
        .rev()
        .find(|&i| ascending[i] < ascending[i - 1].saturating_mul(2))
        .unwrap_or(0);
    let mut merged = ascending[..split]
        .iter()
        .fold(0u64, |sum, size| sum.saturating_add(*size));
    while split < ascending.len() && ascending[split] < merged.saturating_mul(2) {
        merged = merged.saturating_add(ascending[split]);
        split += 1;
    }
    split
}

/// Renames `from` to `dest` in `dir`, making `dir` first when it is missing.
fn rename_making_dir(from: &Path, dest: &Path, dir: &Path) -> io::Result<()> {
    fs::rename(from, dest).or_else(|e| {
        if e.kind() != io::ErrorKind::NotFound {
            return Err(e);
        }
        fs::create_dir_all(dir)?;
        fs::rename(from, dest)
    })
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn find_in(packs: &[Arc<LocalPack>], id: &ObjectId) -> Result<Option<Found>, StoreError> {
    for pack in packs {
        if let Some(entry) = pack.find(id)? {
            return Ok(Some(Found {
                file: pack.file.clone(),
                path: pack.path.clone(),
                entry,
            }));
        }
    }
    Ok(None)
}

/// The packs an import (`unpack`, `pull`) writes the small objects it verified into, in its
/// staging directory: one file and one sequential write for thousands of objects, where one
/// file each cost a create and a rename apiece (on the bench corpus, 10,400 of them took most
/// of a cold unpack). Nothing here is visible in the store, and nothing is looked up here:
/// [`Packed::publish_import`] finishes them and renames them into `packs/` only once the
/// whole import verified. Rolls over as a capture's packer does: a full pack is finished
/// (index, trailer, fsync) at once, in the staging directory, so only the pack being written
/// holds its entries in memory. Dropped instead (a failed import), the pack being written
/// removes its file; the finished ones go with the staging directory.
#[derive(Debug)]
pub(crate) struct ImportPacks {
    dir: PathBuf,
    current: Option<Packer>,
    finished: Vec<LocalPack>,
    /// The last finished packer's index, for the next (see [`PackerIndex`]).
    spare: PackerIndex,
    added: usize,
}

impl ImportPacks {
    /// Packs to be written in `dir` (an import's staging directory), the first made by the
    /// first object added.
    pub(crate) fn new(dir: &Path) -> ImportPacks {
        ImportPacks {
            dir: dir.to_path_buf(),
            current: None,
            finished: Vec::new(),
            spare: PackerIndex::default(),
            added: 0,
        }
    }

    /// Appends object `id` of `len` bytes (at most [`compressed::MAX_LEN`]), stored as
    /// `stored`: its bytes, or its zstd frame when `zstd`. The caller verified it and adds
    /// each object once.
    pub(crate) fn add(
        &mut self,
        id: &ObjectId,
        stored: &[u8],
        len: u64,
        zstd: bool,
    ) -> Result<(), StoreError> {
        debug_assert!(len <= compressed::MAX_LEN as u64);
        let packer = match &mut self.current {
            Some(p) => p,
            none => none.insert(Packer::create(
                &self.dir,
                std::mem::take(&mut self.spare),
                false,
            )?),
        };
        packer.append(id, stored, len, zstd)?;
        self.added += 1;
        if packer.is_full() {
            if let Some(full) = self.current.take() {
                let (pack, index) = full.finish_into(&self.dir)?;
                self.finished.push(pack);
                self.spare = index;
            }
        }
        Ok(())
    }

    /// How many objects were added.
    pub(crate) fn len(&self) -> usize {
        self.added
    }
}

impl Packer {
    /// A new pack file in `tmp`, its index in `index` (a finished packer's, or a new one);
    /// `lookups` as the field.
    fn create(tmp: &Path, index: PackerIndex, lookups: bool) -> Result<Packer, StoreError> {
        fs::create_dir_all(tmp).map_err(|e| StoreError::io("create", tmp, e))?;
        let (file, path) = loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = tmp.join(format!(
                "pack-{}-{}-{}",
                std::process::id(),
                n,
                sys::random_token()
            ));
            match OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&path)
            {
                Ok(f) => break (f, path),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create temp file in", tmp, e)),
            }
        };
        let mut packer = Packer {
            file: Arc::new(file),
            path,
            hasher: IdHasher::new(),
            len: 0,
            index: index.ready(lookups),
            lookups,
            pending: Vec::new(),
        };
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&PACK_VERSION.to_le_bytes());
        header.extend_from_slice(&FLAG_OBJECTS.to_le_bytes());
        header.extend_from_slice(&[0u8; 64]);
        packer.write(&header)?;
        Ok(packer)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        if self.lookups {
            // A lookup may read the object from the file as soon as it is appended.
            (&*self.file)
                .write_all(bytes)
                .map_err(|e| StoreError::io("write", &self.path, e))?;
        } else {
            self.pending.extend_from_slice(bytes);
            if self.pending.len() >= PENDING {
                self.flush()?;
            }
        }
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Writes what an import's packer gathered.
    fn flush(&mut self) -> Result<(), StoreError> {
        if !self.pending.is_empty() {
            (&*self.file)
                .write_all(&self.pending)
                .map_err(|e| StoreError::io("write", &self.path, e))?;
            self.pending.clear();
        }
        Ok(())
    }

    fn append(
        &mut self,
        id: &ObjectId,
        stored: &[u8],
        len: u64,
        zstd: bool,
    ) -> Result<(), StoreError> {
        let slot = Slot {
            id: *id,
            offset: self.len,
            stored_len: u32::try_from(stored.len()).expect("packed objects are small"),
            len: u32::try_from(len).expect("packed objects are small"),
            zstd,
        };
        self.write(stored)?;
        let index = &mut self.index;
        let i = u32::try_from(index.slots.len()).expect("a pack rolls over long before");
        index.slots.push(slot);
        if !self.lookups {
            return Ok(());
        }
        match index.by_prefix.entry(prefix(id)) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(i);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                index.collided.insert(*id, i);
            }
        }
        Ok(())
    }

    /// Whether this pack is to be finished and a new one begun.
    fn is_full(&self) -> bool {
        self.index.slots.len() >= ROLL_ENTRIES || self.len >= ROLL_BYTES
    }

    /// The entry of `id`, if this packer holds it.
    fn lookup(&self, id: &ObjectId) -> Option<PackEntry> {
        let index = &self.index;
        let i = *index.by_prefix.get(&prefix(id))?;
        let slot = &index.slots[i as usize];
        if slot.id == *id {
            return Some(slot.entry());
        }
        let i = *index.collided.get(id)?;
        Some(index.slots[i as usize].entry())
    }

    /// Writes the index and trailer, fsyncs, renames into `dir`; the pack, open for reading,
    /// and this packer's index for the next one.
    fn finish_into(mut self, dir: &Path) -> Result<(LocalPack, PackerIndex), StoreError> {
        let mut index = std::mem::take(&mut self.index);
        let slots = &mut index.slots;
        slots.sort_unstable_by_key(|s| s.id);
        let objects_end = self.len;
        // The index, a chunk at a time (its count, then each entry).
        let mut chunk = (slots.len() as u64).to_le_bytes().to_vec();
        for part in slots.chunks(INDEX_CHUNK) {
            let entries: Vec<PackEntry> = part.iter().map(Slot::entry).collect();
            chunk.extend_from_slice(&encode_index(&entries)[8..]);
            self.write(&chunk)?;
            chunk.clear();
        }
        if !chunk.is_empty() {
            self.write(&chunk)?;
        }
        self.flush()?;
        self.pending = Vec::new();
        let digest = self.hasher.finish();
        let trailer = encode_trailer(objects_end, &digest);
        (&*self.file)
            .write_all(&trailer)
            .map_err(|e| StoreError::io("write", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::io("sync", &self.path, e))?;
        let dest = dir.join(format!("{}{SUFFIX}", digest.to_hex()));
        rename_making_dir(&self.path, &dest, dir)
            .map_err(|e| StoreError::io("rename into", &dest, e))?;
        self.path = PathBuf::new(); // renamed: nothing for Drop to remove
        let pack = LocalPack {
            path: dest,
            file: self.file.clone(),
            prefixes: slots.iter().map(|e| short_prefix(&e.id)).collect(),
            entries_at: objects_end + 8,
            objects_end,
            modified: SystemTime::now(),
        };
        Ok((pack, index))
    }
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("objects", &self.index.slots.len())
            .finish()
    }
}

impl Drop for Packer {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

impl LocalPack {
    /// Opens a finished pack and checks its structure (`None` when it is gone); the error says
    /// why it is refused.
    fn open(path: &Path) -> Result<Option<LocalPack>, String> {
        let file = match sys::open_regular(path) {
            Ok(Some(f)) => f,
            Ok(None) => return Err("it is not a regular file".into()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("it does not open: {e}")),
        };
        let meta = file.metadata().map_err(|e| format!("stat: {e}"))?;
        let size = meta.len();
        let read = |offset: u64, len: usize| -> Result<Vec<u8>, String> {
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, offset)
                .map_err(|e| format!("read at {offset}: {e}"))?;
            Ok(buf)
        };
        if size < HEADER_LEN + 8 + TRAILER_LEN {
            return Err(format!("it is {size} bytes, shorter than an empty pack"));
        }
        let header = read(0, HEADER_LEN as usize)?;
        let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        if &header[..8] != MAGIC
            || u32_at(&header, 8) != PACK_VERSION
            || u32_at(&header, 12) != FLAG_OBJECTS
        {
            return Err("its header is not an object pack's".into());
        }
        let trailer = read(size - TRAILER_LEN, TRAILER_LEN as usize)?;
        if &trailer[40..48] != END {
            return Err("its trailer is damaged".into());
        }
        let objects_end = u64::from_le_bytes(trailer[..8].try_into().unwrap());
        if objects_end < HEADER_LEN || objects_end > size - TRAILER_LEN - 8 {
            return Err("its index lies outside the file".into());
        }
        let count = u64::from_le_bytes(read(objects_end, 8)?.try_into().unwrap());
        let index_len = size - TRAILER_LEN - objects_end - 8;
        if count.checked_mul(ENTRY_LEN) != Some(index_len) {
            return Err(format!(
                "its index of {count} entries does not fill the index area"
            ));
        }
        let entries_at = objects_end + 8;
        // Read in chunks, but fetched as one request: from a cold cache the chunks' reads
        // were each a disk wait (5 ms of a mount's start for a 1.2 MB index).
        sys::will_need_range(&file, entries_at, index_len);
        let mut prefixes = Vec::with_capacity(count as usize);
        let mut last: Option<ObjectId> = None;
        let mut done = 0u64;
        while done < count {
            let n = (count - done).min(INDEX_CHUNK as u64);
            let chunk = read(entries_at + done * ENTRY_LEN, (n * ENTRY_LEN) as usize)?;
            for raw in chunk.chunks_exact(ENTRY_LEN as usize) {
                let e = check_entry(raw, objects_end)?;
                if last.is_some_and(|l| l >= e.id) {
                    return Err("its index is not sorted by id".into());
                }
                last = Some(e.id);
                prefixes.push(short_prefix(&e.id));
            }
            done += n;
        }
        Ok(Some(LocalPack {
            path: path.to_path_buf(),
            file: Arc::new(file),
            prefixes,
            entries_at,
            objects_end,
            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        }))
    }

    /// The pack's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// When the pack was written.
    pub(crate) fn modified(&self) -> SystemTime {
        self.modified
    }

    /// Number of objects.
    pub(crate) fn len(&self) -> usize {
        self.prefixes.len()
    }

    fn entry_at(&self, i: usize) -> Result<PackEntry, StoreError> {
        let mut raw = [0u8; ENTRY_LEN as usize];
        let at = self.entries_at + i as u64 * ENTRY_LEN;
        self.file
            .read_exact_at(&mut raw, at)
            .map_err(|e| StoreError::io("read pack index", &self.path, e))?;
        check_entry(&raw, self.objects_end).map_err(|why| StoreError::Io {
            op: "read pack index",
            path: self.path.clone(),
            error: io::Error::new(io::ErrorKind::InvalidData, why),
        })
    }

    fn find(&self, id: &ObjectId) -> Result<Option<PackEntry>, StoreError> {
        let p = short_prefix(id);
        let mut i = self.prefixes.partition_point(|x| *x < p);
        while i < self.prefixes.len() && self.prefixes[i] == p {
            let e = self.entry_at(i)?;
            if e.id == *id {
                return Ok(Some(e));
            }
            i += 1;
        }
        Ok(None)
    }

    /// Every entry, in index order (read from disk).
    pub(crate) fn entries(&self) -> Result<Vec<PackEntry>, StoreError> {
        let mut out = Vec::with_capacity(self.prefixes.len());
        for i in 0..self.prefixes.len() {
            out.push(self.entry_at(i)?);
        }
        Ok(out)
    }

    /// Reads entry `e`'s stored bytes into `buf`.
    pub(crate) fn read_stored(&self, e: &PackEntry, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        read_stored(&self.file, &self.path, e, buf)
    }
}

/// Reads entry `e`'s stored bytes from `file` into `buf` (its bounds were checked when its
/// entry was read).
pub(crate) fn read_stored(
    file: &File,
    path: &Path,
    e: &PackEntry,
    buf: &mut Vec<u8>,
) -> Result<(), StoreError> {
    buf.clear();
    buf.resize(e.stored_len as usize, 0);
    file.read_exact_at(buf, e.offset)
        .map_err(|err| StoreError::io("read pack", path, err))
}

/// One index entry, checked against what a packed object can be.
fn check_entry(raw: &[u8], objects_end: u64) -> Result<PackEntry, String> {
    let (e, flags) = decode_entry(raw);
    let bad = |why: &str| Err(format!("entry {} {why}", e.id.short(12)));
    if flags & !FLAG_ZSTD != 0 {
        return bad("has unknown flags");
    }
    if e.offset < HEADER_LEN
        || e.offset
            .checked_add(e.stored_len)
            .is_none_or(|end| end > objects_end)
    {
        return bad("lies outside the object area");
    }
    if e.len > compressed::MAX_LEN as u64 {
        return bad("is larger than any packed object");
    }
    if e.zstd {
        if e.stored_len > compressed::max_frame_len() as u64 {
            return bad("has a frame larger than any packed object needs");
        }
    } else if e.stored_len != e.len {
        return bad("has a stored length other than its length");
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::super::compressed::tests::random_seeded;
    use super::*;
    use crate::handle::Store;
    use crate::maintenance::VerifyProblem;

    fn store() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&tmp.path().join("s")).unwrap();
        (tmp, store)
    }

    fn text(len: usize, seed: u8) -> Vec<u8> {
        let mut v: Vec<u8> = b"fn main() { println!(\"hello\"); }\n"
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect();
        if let Some(b) = v.first_mut() {
            *b = seed;
        }
        v
    }

    fn pack_files(store: &Store) -> Vec<PathBuf> {
        let dir = store.root().join("objects").join(PACKS_DIR);
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    /// Writes `objects` packed, as a capture does, and syncs; their ids.
    fn write_packed(store: &Store, objects: &[Vec<u8>]) -> Vec<ObjectId> {
        store.objects().pack_until_sync();
        let ids = objects
            .iter()
            .map(|o| store.objects().write_bytes(o).unwrap())
            .collect();
        store.objects().sync().unwrap();
        ids
    }

    #[test]
    fn small_objects_of_a_capture_go_into_one_pack_and_read_back_in_every_way() {
        let (_t, store) = store();
        let tiny = b"tiny".to_vec();
        let compressible = text(20_000, b'a');
        let incompressible = random_seeded(9000, 7);
        let large = random_seeded(300 * 1024, 8);
        store.objects().pack_until_sync();
        let ids: Vec<ObjectId> = [&tiny, &compressible, &incompressible, &compressible]
            .iter()
            .map(|o| store.objects().write_bytes(o).unwrap())
            .collect();
        let (large_id, _) = store.objects().write_from(&mut &large[..]).unwrap();
        // Before the sync the objects are in the packer: this store sees them, no other does.
        assert!(store.objects().has_with_len(&ids[1], 20_000));
        assert_eq!(store.objects().read_verified(&ids[0]).unwrap(), tiny);
        let other = Store::open_or_create(store.root()).unwrap();
        assert!(!other.objects().has(&ids[0]));
        assert!(
            pack_files(&store).is_empty(),
            "nothing is in packs/ before the sync"
        );
        store.objects().sync().unwrap();

        assert_eq!(pack_files(&store).len(), 1);
        let tmp_left: Vec<_> = fs::read_dir(store.objects().tmp_dir()).unwrap().collect();
        assert!(tmp_left.is_empty(), "the packer's temp file was renamed");
        let other = Store::open_or_create(store.root()).unwrap();
        for (id, bytes) in ids.iter().zip([&tiny, &compressible, &incompressible]) {
            let o = other.objects();
            assert!(o.file_of(id).is_none(), "small objects are not loose");
            assert!(o.has(id) && o.has_with_len(id, bytes.len() as u64));
            assert!(!o.has_with_len(id, bytes.len() as u64 + 1));
            assert_eq!(&o.read_verified(id).unwrap(), bytes);
            let blob = o.open_blob(id).unwrap();
            blob.verify(id).unwrap();
            let mut back = vec![0u8; bytes.len()];
            assert_eq!(blob.read_at(&mut back, 0).unwrap(), bytes.len());
            assert_eq!(&back, bytes);
            assert_eq!(o.peek(id, 3).unwrap(), bytes[..3.min(bytes.len())]);
        }
        // The large object is one raw file of its own.
        assert!(other.objects().file_of(&large_id).is_some());
        let listed = other.objects().list().unwrap();
        assert_eq!(listed.iter().filter(|l| l.packed).count(), 3, "{listed:?}");
        assert!(listed.iter().any(|l| l.packed && l.compressed));
        assert!(listed.iter().any(|l| !l.packed && l.id == large_id));
        // After the sync, writes are loose again until the next capture.
        let loose = other.objects().write_bytes(b"after").unwrap();
        store.objects().write_bytes(b"after too").unwrap();
        assert!(other.objects().file_of(&loose).is_some());
        assert_eq!(pack_files(&store).len(), 1);
    }

    #[test]
    fn a_packed_object_is_not_packed_again_and_a_capture_with_nothing_new_writes_no_pack() {
        let (_t, store) = store();
        let a = text(5000, b'x');
        write_packed(&store, std::slice::from_ref(&a));
        assert_eq!(pack_files(&store).len(), 1);
        let store = Store::open_or_create(store.root()).unwrap();
        write_packed(&store, &[a]);
        assert_eq!(
            pack_files(&store).len(),
            1,
            "no second pack for an object packed already"
        );
    }

    #[test]
    fn an_unfinished_pack_leaves_nothing_behind() {
        let (_t, store) = store();
        let root = store.root().to_path_buf();
        store.objects().pack_until_sync();
        let id = store.objects().write_bytes(b"never synced").unwrap();
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 1);
        drop(store);
        let store = Store::open_or_create(&root).unwrap();
        assert!(!store.objects().has(&id));
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        assert!(pack_files(&store).is_empty());
    }

    #[test]
    fn a_pack_written_by_another_process_after_the_listing_is_found() {
        let (_t, store) = store();
        let first = write_packed(&store, &[b"one".to_vec()]);
        let reader = Store::open_or_create(store.root()).unwrap();
        assert!(reader.objects().has(&first[0]), "lists packs/ on first use");
        let writer = Store::open_or_create(store.root()).unwrap();
        let second = write_packed(&writer, &[b"two".to_vec()]);
        assert_eq!(reader.objects().read_verified(&second[0]).unwrap(), b"two");
    }

    #[test]
    fn gc_rewrites_a_pack_without_its_dead_objects_and_removes_an_all_dead_one() {
        let (_t, store) = store();
        let live = text(6000, b'l');
        let dead = text(6000, b'd');
        let ids = write_packed(&store, &[live.clone(), dead.clone()]);
        let gone = write_packed(&store, &[b"gone".to_vec()]);
        assert_eq!(pack_files(&store).len(), 2);
        let objects = store.objects();
        objects
            .remove_all(&HashSet::from([ids[1], gone[0]]))
            .unwrap();
        let packs = pack_files(&store);
        assert_eq!(packs.len(), 1, "{packs:?}");
        let fresh = Store::open_or_create(store.root()).unwrap();
        assert_eq!(fresh.objects().read_verified(&ids[0]).unwrap(), live);
        assert!(!fresh.objects().has(&ids[1]) && !fresh.objects().has(&gone[0]));
        assert_eq!(fresh.objects().list().unwrap().len(), 1);
        // The store that rewrote the pack reads on from the new one.
        assert_eq!(store.objects().read_verified(&ids[0]).unwrap(), live);
        assert!(fresh
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }

    #[test]
    fn the_geometric_split_keeps_a_progression_and_merges_the_rest() {
        assert_eq!(geometric_split(&[]), 0);
        assert_eq!(geometric_split(&[100]), 0);
        assert_eq!(geometric_split(&[10, 100]), 0);
        assert_eq!(geometric_split(&[10, 20, 40, 80]), 0);
        assert_eq!(geometric_split(&[10, 15, 100]), 2);
        assert_eq!(geometric_split(&[1, 1, 1, 1]), 4);
        // Merged below it, 30 is more than half of 50: that one joins too.
        assert_eq!(geometric_split(&[10, 10, 10, 50, 1000]), 4);
        // No overflow at the extremes (sizes saturate).
        assert_eq!(geometric_split(&[u64::MAX - 1, u64::MAX]), 0);
    }

    #[test]
    fn gc_merges_small_packs_keeping_every_object_in_its_written_order() {
        let (_t, store) = store();
        let large: Vec<Vec<u8>> = (0..40).map(|i| random_seeded(4000, 101 + 2 * i)).collect();
        let large_ids = write_packed(&store, &large);
        let mut small = Vec::new();
        for i in 0..5 {
            // Odd seeds: the generator ORs in the low bit.
            let pair = [
                random_seeded(3000, 201 + 2 * i),
                random_seeded(3000, 301 + 2 * i),
            ];
            let ids = write_packed(&store, &pair);
            small.push((ids, pair));
        }
        assert_eq!(pack_files(&store).len(), 6);

        assert_eq!(store.objects().consolidate_packs().unwrap(), 5);
        let packs = pack_files(&store);
        assert_eq!(packs.len(), 2, "the five small packs became one: {packs:?}");
        let merged = packs
            .iter()
            .map(|p| LocalPack::open(p).unwrap().unwrap())
            .find(|p| p.len() == 10)
            .expect("a pack of the ten small objects");
        let offsets: HashMap<ObjectId, u64> = merged
            .entries()
            .unwrap()
            .into_iter()
            .map(|e| (e.id, e.offset))
            .collect();
        for (ids, _) in &small {
            assert!(offsets[&ids[0]] < offsets[&ids[1]], "written order kept");
        }
        // Every object reads back, in this store and in a fresh one, and verify is clean.
        let fresh = Store::open_or_create(store.root()).unwrap();
        for s in [&store, &fresh] {
            for (id, bytes) in large_ids.iter().zip(&large) {
                assert_eq!(&s.objects().read_verified(id).unwrap(), bytes);
            }
            for (ids, pair) in &small {
                for (id, bytes) in ids.iter().zip(pair) {
                    assert_eq!(&s.objects().read_verified(id).unwrap(), bytes);
                }
            }
        }
        assert!(fresh
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
        // Now a progression (the large pack holds more than twice the merged one): nothing
        // more to merge.
        assert_eq!(store.objects().consolidate_packs().unwrap(), 0);
        assert_eq!(pack_files(&store).len(), 2);
    }

    #[test]
    fn a_damaged_packed_object_is_corrupt_and_a_hostile_index_makes_the_pack_ignored() {
        let (_t, store) = store();
        let a = text(3000, b'a');
        let b = random_seeded(3000, 3);
        let ids = write_packed(&store, &[a, b]);
        let path = pack_files(&store).remove(0);
        let bytes = fs::read(&path).unwrap();

        // One byte of the second object's bytes flipped: that object is corrupt, not the pack.
        let pack = LocalPack::open(&path).unwrap().unwrap();
        assert_eq!(pack.len(), 2);
        assert_eq!(pack.path(), path);
        let e = pack.find(&ids[1]).unwrap().unwrap();
        let mut damaged = bytes.clone();
        damaged[e.offset as usize + 10] ^= 1;
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
        fs::write(&path, &damaged).unwrap();
        let fresh = Store::open_or_create(store.root()).unwrap();
        assert!(matches!(
            fresh.objects().read_verified(&ids[1]),
            Err(StoreError::CorruptObject { .. })
        ));
        let report = fresh.maintenance().verify(&mut |_, _| {}).unwrap();
        assert_eq!(report.problems, vec![VerifyProblem::Corrupt { id: ids[1] }]);

        // An entry pointing outside the object area: the pack is refused whole, reported.
        let mut hostile = bytes.clone();
        let objects_end = u64::from_le_bytes(
            bytes[bytes.len() - 48..bytes.len() - 40]
                .try_into()
                .unwrap(),
        );
        let first_entry = objects_end as usize + 8;
        hostile[first_entry + 32..first_entry + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        fs::write(&path, &hostile).unwrap();
        let fresh = Store::open_or_create(store.root()).unwrap();
        assert!(!fresh.objects().has(&ids[0]) && !fresh.objects().has(&ids[1]));
        let report = fresh.maintenance().verify(&mut |_, _| {}).unwrap();
        assert!(
            matches!(report.problems.as_slice(),
                [VerifyProblem::BadPack { why, .. }] if why.contains("outside the object area")),
            "{:?}",
            report.problems
        );

        // Entries out of order: refused too.
        let mut unsorted = bytes.clone();
        let (one, two) = (first_entry, first_entry + ENTRY_LEN as usize);
        let first: Vec<u8> = bytes[one..two].to_vec();
        unsorted.copy_within(two..two + ENTRY_LEN as usize, one);
        unsorted[two..two + ENTRY_LEN as usize].copy_from_slice(&first);
        fs::write(&path, &unsorted).unwrap();
        assert!(LocalPack::open(&path).unwrap_err().contains("not sorted"));

        // Not an object pack at all.
        fs::write(
            &path,
            b"ZCBPACK\0 something else entirely, long enough to have a trailer......",
        )
        .unwrap();
        assert!(LocalPack::open(&path).is_err());
    }

    #[test]
    fn ids_that_share_their_first_8_bytes_are_told_apart() {
        let (_t, store) = store();
        let mut packer =
            Packer::create(store.objects().tmp_dir(), PackerIndex::default(), true).unwrap();
        let id = |last: u8| {
            let mut b = [7u8; 32];
            b[31] = last;
            ObjectId::from_bytes(b)
        };
        let objects = [(id(9), &b"ccc"[..]), (id(1), b"a"), (id(5), b"bb")];
        for (i, bytes) in objects {
            packer.append(&i, bytes, bytes.len() as u64, false).unwrap();
        }
        for (i, bytes) in objects {
            assert_eq!(packer.lookup(&i).unwrap().len, bytes.len() as u64);
        }
        assert!(packer.lookup(&id(2)).is_none());
        let dir = store.root().join("objects").join(PACKS_DIR);
        let (pack, _) = packer.finish_into(&dir).unwrap();
        let reopened = LocalPack::open(pack.path()).unwrap().unwrap();
        for p in [&pack, &reopened] {
            for (i, bytes) in objects {
                let e = p.find(&i).unwrap().unwrap();
                let mut back = Vec::new();
                p.read_stored(&e, &mut back).unwrap();
                assert_eq!(back, bytes);
            }
            assert!(p.find(&id(2)).unwrap().is_none());
        }
    }

    #[test]
    fn a_full_packer_rolls_over_into_a_new_pack() {
        let (_t, store) = store();
        let objects: Vec<Vec<u8>> = (0..ROLL_ENTRIES + 3)
            .map(|i| format!("object {i}").into_bytes())
            .collect();
        let ids = write_packed(&store, &objects);
        assert_eq!(pack_files(&store).len(), 2);
        let fresh = Store::open_or_create(store.root()).unwrap();
        for i in [0, ROLL_ENTRIES - 1, ROLL_ENTRIES, ROLL_ENTRIES + 2] {
            assert_eq!(fresh.objects().read_verified(&ids[i]).unwrap(), objects[i]);
        }
    }

    /// An import's packs roll over too; the full one is finished at once in the staging
    /// directory (its entries are not held until the end), and nothing of either is in the
    /// store until the staging lands: a staging dropped instead leaves nothing.
    #[test]
    fn an_imports_packs_roll_over_and_land_only_with_the_staging() {
        let (_t, store) = store();
        let objects: Vec<Vec<u8>> = (0..ROLL_ENTRIES + 3)
            .map(|i| format!("object {i}").into_bytes())
            .collect();
        let stage = |objects: &[Vec<u8>]| {
            let staging = store.objects().staging().unwrap();
            for o in objects {
                staging
                    .pack_verified(&ObjectId::of(o), o, o.len() as u64, false)
                    .unwrap();
            }
            staging
        };
        let dropped = stage(&objects[..ROLL_ENTRIES + 1]);
        let finished: Vec<_> = fs::read_dir(dropped.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(SUFFIX))
            .collect();
        assert_eq!(finished.len(), 1, "the full pack, finished in the staging");
        drop(dropped);
        assert!(pack_files(&store).is_empty());
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        assert!(store.objects().is_empty().unwrap());

        let staging = stage(&objects);
        assert_eq!(staging.len(), objects.len());
        staging.land().unwrap();
        assert_eq!(pack_files(&store).len(), 2);
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        let fresh = Store::open_or_create(store.root()).unwrap();
        for i in [0, ROLL_ENTRIES - 1, ROLL_ENTRIES, ROLL_ENTRIES + 2] {
            let id = ObjectId::of(&objects[i]);
            assert_eq!(fresh.objects().read_verified(&id).unwrap(), objects[i]);
            assert_eq!(store.objects().read_verified(&id).unwrap(), objects[i]);
        }
    }
}
