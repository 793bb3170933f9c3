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
//! disk and only the first 8 bytes of each id are held in memory (8 bytes an object: 2.4 MB
//! for 300,000 objects), so a lookup is a binary search in memory and one positioned read of
//! the 57-byte entry, whose full id must match. A pack written by another process after the
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

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use crate::compressed;
use crate::error::StoreError;
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
}

#[derive(Debug, Default)]
struct State {
    /// False until `packs/` was listed once.
    listed: bool,
    /// `packs/`'s modification time when it was last listed.
    listed_mtime: Option<SystemTime>,
    packs: Vec<Arc<LocalPack>>,
    /// Every pack name seen (loaded or refused), so a refused pack is reported once.
    seen: HashSet<String>,
    /// Packs refused, with why: `verify` reports them.
    refused: Vec<(PathBuf, String)>,
}

/// One finished pack, open, with the 8-byte prefixes of its sorted ids.
#[derive(Debug)]
pub(crate) struct LocalPack {
    path: PathBuf,
    file: Arc<File>,
    prefixes: Vec<u64>,
    /// Where the first index entry starts (the index's count is 8 bytes before).
    entries_at: u64,
    /// The end of the object area (the index's start).
    objects_end: u64,
    modified: SystemTime,
}

/// The pack being written by a capture (see the module doc).
pub(crate) struct Packer {
    file: Arc<File>,
    path: PathBuf,
    hasher: IdHasher,
    len: u64,
    entries: HashMap<ObjectId, PackEntry>,
}

fn prefix(id: &ObjectId) -> u64 {
    u64::from_be_bytes(id.as_bytes()[..8].try_into().expect("8 bytes"))
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
            .is_some_and(|p| p.entries.contains_key(id))
        {
            return Ok(true);
        }
        let packer = match &mut writer.packer {
            Some(p) => p,
            none => none.insert(Packer::create(&self.tmp)?),
        };
        packer.append(id, stored, len, zstd)?;
        if packer.entries.len() >= ROLL_ENTRIES || packer.len >= ROLL_BYTES {
            let full = writer.packer.take().expect("just appended to");
            // Published under the writer's lock: a lookup meanwhile must not miss its objects.
            self.publish(full)?;
        }
        Ok(true)
    }

    /// Finishes the open packer, if any: its pack is written whole, fsynced and renamed into
    /// `packs/`, and the packer is closed (later objects are stored loose until the next
    /// [`Packed::start`]). The caller's `syncfs` then makes the rename durable.
    pub(crate) fn finish(&self) -> Result<(), StoreError> {
        let mut writer = lock(&self.writer);
        writer.open = false;
        match writer.packer.take() {
            Some(p) => self.publish(p),
            None => Ok(()),
        }
    }

    fn publish(&self, packer: Packer) -> Result<(), StoreError> {
        let pack = packer.finish_into(&self.dir)?;
        let mut state = lock(&self.state);
        let name = file_name(&pack.path);
        if state.seen.insert(name) {
            state.packs.push(Arc::new(pack));
        }
        Ok(())
    }

    /// Where object `id` is packed, if it is: the open packer first, then every pack (listed
    /// again when `packs/` changed since, so a pack another process wrote is found).
    pub(crate) fn find(&self, id: &ObjectId) -> Result<Option<Found>, StoreError> {
        if let Some(p) = lock(&self.writer).packer.as_ref() {
            if let Some(e) = p.entries.get(id) {
                return Ok(Some(Found {
                    file: p.file.clone(),
                    path: p.path.clone(),
                    entry: *e,
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
    fn packs(&self, refresh: bool) -> Result<Vec<Arc<LocalPack>>, StoreError> {
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
                Ok(Some(pack)) => state.packs.push(Arc::new(pack)),
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
    pub(crate) fn all(&self) -> Result<(Vec<Arc<LocalPack>>, Vec<(PathBuf, String)>), StoreError> {
        {
            let mut state = lock(&self.state);
            state.listed_mtime = None;
        }
        let packs = self.packs(true)?;
        // A pack removed since it was loaded (a gc in another process) is not listed.
        let packs = packs.into_iter().filter(|p| p.path.exists()).collect();
        Ok((packs, lock(&self.state).refused.clone()))
    }

    /// Rewrites the packs so that they no longer hold `doomed` (gc; see the module doc).
    /// Returns the bytes freed.
    pub(crate) fn rewrite_without(&self, doomed: &HashSet<ObjectId>) -> Result<u64, StoreError> {
        let (packs, _) = self.all()?;
        let mut freed = 0;
        for pack in packs {
            let entries = pack.entries()?;
            let dead = entries.iter().filter(|e| doomed.contains(&e.id)).count();
            if dead == 0 {
                continue;
            }
            if dead < entries.len() {
                let mut packer = Packer::create(&self.tmp)?;
                let mut buf = Vec::new();
                for e in entries.iter().filter(|e| !doomed.contains(&e.id)) {
                    pack.read_stored(e, &mut buf)?;
                    packer.append(&e.id, &buf, e.len, e.zstd)?;
                }
                self.publish(packer)?;
            }
            let size = pack.file.metadata().map(|m| m.len()).unwrap_or(0);
            match fs::remove_file(&pack.path) {
                Ok(()) => freed += size,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &pack.path, e)),
            }
            let mut state = lock(&self.state);
            state.packs.retain(|p| !Arc::ptr_eq(p, &pack));
        }
        Ok(freed)
    }
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

impl Packer {
    fn create(tmp: &Path) -> Result<Packer, StoreError> {
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
            entries: HashMap::new(),
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
        (&*self.file)
            .write_all(bytes)
            .map_err(|e| StoreError::io("write", &self.path, e))?;
        self.hasher.update(bytes);
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn append(
        &mut self,
        id: &ObjectId,
        stored: &[u8],
        len: u64,
        zstd: bool,
    ) -> Result<(), StoreError> {
        let entry = PackEntry {
            id: *id,
            offset: self.len,
            stored_len: stored.len() as u64,
            len,
            zstd,
        };
        self.write(stored)?;
        self.entries.insert(*id, entry);
        Ok(())
    }

    /// Writes the index and trailer, fsyncs, renames into `dir`; the pack, open for reading.
    fn finish_into(mut self, dir: &Path) -> Result<LocalPack, StoreError> {
        let mut index: Vec<PackEntry> = self.entries.values().copied().collect();
        index.sort_by(|a, b| a.id.cmp(&b.id));
        let objects_end = self.len;
        self.write(&encode_index(&index))?;
        let digest = self.hasher.finish();
        let trailer = encode_trailer(objects_end, &digest);
        (&*self.file)
            .write_all(&trailer)
            .map_err(|e| StoreError::io("write", &self.path, e))?;
        self.file
            .sync_data()
            .map_err(|e| StoreError::io("sync", &self.path, e))?;
        let dest = dir.join(format!("{}{SUFFIX}", digest.to_hex()));
        let renamed = fs::rename(&self.path, &dest).or_else(|e| {
            if e.kind() != io::ErrorKind::NotFound {
                return Err(e);
            }
            fs::create_dir_all(dir)?;
            fs::rename(&self.path, &dest)
        });
        renamed.map_err(|e| StoreError::io("rename into", &dest, e))?;
        self.path = PathBuf::new(); // renamed: nothing for Drop to remove
        Ok(LocalPack {
            path: dest,
            file: self.file.clone(),
            prefixes: index.iter().map(|e| prefix(&e.id)).collect(),
            entries_at: objects_end + 8,
            objects_end,
            modified: SystemTime::now(),
        })
    }
}

impl std::fmt::Debug for Packer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packer")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("objects", &self.entries.len())
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
                prefixes.push(prefix(&e.id));
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
    #[cfg(test)]
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
        let p = prefix(id);
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
