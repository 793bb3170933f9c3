//! The objects room, the object directory: the only code that writes under `<store>/objects/`
//! (loose, compressed and packed objects: see `packed` and `compressed`), and what reads
//! blobs, trees and snapshot records back ([`ObjectDir::reader`]).
//!
//! Writes hash while they write: bytes go to a fresh file in `<store>/tmp/`, which is then
//! made read-only and renamed to `objects/<2 hex>/<62 hex>`. An object that already exists
//! with the expected length is success (dedup) and the temp file is dropped. Small inputs are
//! hashed in memory first, so a duplicate costs no write at all.
//!
//! Two forms (store format 3): an object is stored raw at `objects/<2 hex>/<62 hex>`, or,
//! when it is small and compresses by an eighth (the rule is in `compressed`), as one zstd
//! frame at `objects/<2 hex>/<62 hex>.zst`. Either way its id is the blake3 of its
//! uncompressed bytes. Every reader here accepts both forms (raw first: it is the only form of
//! large objects and of every object an older version wrote), so callers never know which
//! one they got; a compressed object is decoded whole (at most 256 KiB) into memory. A raw
//! loose object's [`Blob`] is the only one that hands out its file ([`Blob::backing_file`]:
//! a mount lets the kernel read it directly, after verifying it).
//! Writers check both forms before writing, so an object normally has one file; should both
//! exist (an import racing a capture), either is valid and `remove` takes both.
//!
//! Durability: individual objects are NOT fsynced. Instead [`ObjectDir::sync`] calls
//! `syncfs(2)` once on the store's filesystem before anything that references the new objects
//! (the snapshot record, then the catalog entry) is written. One syncfs flushes every object
//! file and every directory entry of the capture in a single pass, where 20,000 fsyncs would
//! each wait for the journal; since Linux 5.8 syncfs reports writeback errors. The cost: it
//! also flushes other dirty data on the same filesystem.
//!
//! A crash before that sync can leave an object whose name exists but whose data never reached
//! the disk (typically a zero-length file after ext4 delayed allocation). Such an object is
//! unreferenced (no record was written), and the dedup check compares the length, so a later
//! capture rewrites it rather than trusting it. `verify` rehashes everything.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{DecodeError, StoreError};
use crate::id::{IdHasher, ObjectId};
use crate::snapshot::Snapshot;
use crate::source::ObjectSource;
use crate::sys;
use crate::tree::Tree;
use crate::tree_view::TreeView;

pub(crate) mod compressed;
mod packed;

use packed::{Found, ImportPacks, Packed};

/// Inputs below this size are hashed in memory before anything is written (and may be stored
/// compressed: see `compressed`).
const SMALL: usize = compressed::MAX_LEN;
/// Read buffer for streaming larger inputs.
const CHUNK: usize = 1024 * 1024;

/// File name suffix of an object stored compressed.
const ZST_SUFFIX: &str = ".zst";

/// Name prefix of a staging directory under `tmp/` (see [`ObjectDir::staging`]).
pub(crate) const STAGING_PREFIX: &str = "stage-";

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The objects room: handle on `<store>/objects` and `<store>/tmp`, reached through
/// [`crate::Store::objects`]. Clones share the store's packs and the packer of a capture in
/// progress.
#[derive(Debug, Clone)]
pub struct ObjectDir {
    objects: PathBuf,
    tmp: PathBuf,
    packed: Arc<Packed>,
}

/// An object's bytes, readable at any offset: a range of a file read in place (a raw store
/// object, a pack member), or the decoded bytes of a compressed store object (small).
#[derive(Debug, Clone)]
pub struct Blob {
    data: BlobData,
    len: u64,
}

#[derive(Debug, Clone)]
enum BlobData {
    /// `len` bytes of the file from `offset`.
    Range { file: Arc<File>, offset: u64 },
    /// A raw object file of this store, whole, opened read-only (see [`Blob::backing_file`]).
    Object(Arc<File>),
    /// The bytes themselves (a compressed object, decoded).
    Memory(Arc<[u8]>),
}

impl Blob {
    /// A blob that is the byte range `offset..offset+len` of `file` (a whole object file, or a
    /// member of a pack).
    pub fn from_range(file: Arc<File>, offset: u64, len: u64) -> Blob {
        Blob {
            data: BlobData::Range { file, offset },
            len,
        }
    }

    /// A raw object file of this store (`objects/<2 hex>/<62 hex>`), whole: `len` is the
    /// file's length when it was opened, read-only.
    fn from_object_file(file: File, len: u64) -> Blob {
        Blob {
            data: BlobData::Object(Arc::new(file)),
            len,
        }
    }

    /// The file this blob is, whole, when it is a raw object file of the store (opened
    /// read-only from `objects/<2 hex>/<62 hex>`, which the store writes once, makes
    /// read-only and renames into place, and never writes again) and the file is still
    /// exactly [`Blob::len`] bytes long. `None` for anything else: a member of a pack, a
    /// compressed object decoded into memory, a blob some other source made of a file
    /// ([`Blob::from_range`]).
    ///
    /// For a reader that hands the file itself to someone else (a FUSE mount passing reads
    /// through to it): its bytes are the blob's only as long as the object is intact, so
    /// [`Blob::verify`] it first, as every other reader of a blob does.
    pub fn backing_file(&self) -> Option<&File> {
        let BlobData::Object(file) = &self.data else {
            return None;
        };
        let meta = file.metadata().ok()?;
        (meta.is_file() && meta.len() == self.len).then_some(&**file)
    }

    /// A blob held in memory (a compressed object, decoded).
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> Blob {
        Blob {
            len: bytes.len() as u64,
            data: BlobData::Memory(bytes.into()),
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for the empty blob.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positioned read (`pread(2)`): fills `buf` from `pos`, short only at the end.
    pub fn read_at(&self, buf: &mut [u8], pos: u64) -> io::Result<usize> {
        if pos >= self.len {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.len - pos).unwrap_or(usize::MAX));
        let (file, offset) = match &self.data {
            BlobData::Range { file, offset } => (file, *offset),
            BlobData::Object(file) => (file, 0),
            BlobData::Memory(bytes) => {
                let start = usize::try_from(pos).expect("below len, which fits in memory");
                buf[..want].copy_from_slice(&bytes[start..start + want]);
                return Ok(want);
            }
        };
        let mut done = 0;
        while done < want {
            let n = file.read_at(&mut buf[done..want], offset + pos + done as u64)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "object is shorter than recorded",
                ));
            }
            done += n;
        }
        Ok(done)
    }

    /// Hashes the whole blob and compares it with `id`.
    pub fn verify(&self, id: &ObjectId) -> Result<(), StoreError> {
        if let BlobData::Memory(bytes) = &self.data {
            let actual = ObjectId::of(bytes);
            if actual != *id {
                return Err(StoreError::CorruptObject { id: *id, actual });
            }
            return Ok(());
        }
        let mut hasher = IdHasher::new();
        let mut buf = vec![0u8; CHUNK];
        let mut pos = 0;
        while pos < self.len {
            let n = self
                .read_at(&mut buf, pos)
                .map_err(|e| StoreError::io("read object", id.to_hex(), e))?;
            hasher.update(&buf[..n]);
            pos += n as u64;
        }
        let actual = hasher.finish();
        if actual != *id {
            return Err(StoreError::CorruptObject { id: *id, actual });
        }
        Ok(())
    }

    /// A sequential reader that fails with `InvalidData` at the end if the bytes do not hash
    /// to `id` (so a copy made through it is discarded when the object is corrupt).
    pub fn verifying_reader(&self, id: ObjectId) -> VerifyingReader {
        VerifyingReader {
            blob: self.clone(),
            id,
            pos: 0,
            hasher: IdHasher::new(),
        }
    }
}

/// See [`Blob::verifying_reader`].
pub struct VerifyingReader {
    blob: Blob,
    id: ObjectId,
    pos: u64,
    hasher: IdHasher,
}

impl Read for VerifyingReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.blob.read_at(buf, self.pos)?;
        if n == 0 && !buf.is_empty() {
            let actual = self.hasher.finish();
            if actual != self.id {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    StoreError::CorruptObject {
                        id: self.id,
                        actual,
                    },
                ));
            }
            return Ok(0);
        }
        self.hasher.update(&buf[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl ObjectDir {
    pub(crate) fn new(store: &Path) -> ObjectDir {
        let objects = store.join("objects");
        let tmp = store.join("tmp");
        ObjectDir {
            packed: Arc::new(Packed::new(&objects, &tmp)),
            objects,
            tmp,
        }
    }

    /// Creates the 256 fan-out directories (done once at store creation).
    pub(crate) fn create_layout(&self) -> Result<(), StoreError> {
        for dir in [&self.objects, &self.tmp] {
            fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        }
        for i in 0..=255u8 {
            let d = self.objects.join(format!("{i:02x}"));
            match fs::create_dir(&d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(StoreError::io("create", d, e)),
            }
        }
        Ok(())
    }

    /// Where object `id` lives when it is stored raw (see the module doc: a small object may
    /// be stored compressed at [`ObjectDir::compressed_path_of`] instead).
    pub fn path_of(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.objects.join(&hex[..2]).join(&hex[2..])
    }

    /// Where object `id` lives when it is stored compressed (one zstd frame).
    pub fn compressed_path_of(&self, id: &ObjectId) -> PathBuf {
        let hex = id.to_hex();
        self.objects
            .join(&hex[..2])
            .join(format!("{}{ZST_SUFFIX}", &hex[2..]))
    }

    /// The file that holds object `id` loose (raw or compressed), if any: for tools and tests
    /// that look at the store's files themselves. A packed object has none (see `packed`).
    pub fn file_of(&self, id: &ObjectId) -> Option<PathBuf> {
        [self.path_of(id), self.compressed_path_of(id)]
            .into_iter()
            .find(|p| fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
    }

    /// Writes a tree object (its encoding freed as `heap` says: 12 MB for 200,000 entries).
    pub fn write_tree(&self, tree: &Tree) -> Result<ObjectId, StoreError> {
        let encoded = tree.encode();
        let written = self.write_bytes(&encoded);
        crate::heap::release(encoded);
        written
    }

    /// Reads, verifies and decodes a tree object.
    pub fn read_tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.decoded_tree(id, |bytes| {
            let tree = Tree::decode(&bytes);
            // 12 MB for a directory of 200,000 entries (see `heap`).
            crate::heap::release(bytes);
            tree
        })
    }

    /// Reads and verifies a tree object, kept as its encoding (see [`TreeView`]).
    pub fn read_tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        self.decoded_tree(id, TreeView::decode)
    }

    /// Tree `id` read, verified and decoded by `decode`, which takes the bytes read.
    fn decoded_tree<T>(
        &self,
        id: &ObjectId,
        decode: impl FnOnce(Vec<u8>) -> Result<T, DecodeError>,
    ) -> Result<T, StoreError> {
        decode(self.read_verified(id)?).map_err(|why| StoreError::Malformed {
            id: *id,
            what: "tree",
            why,
        })
    }

    /// Reads, verifies and decodes a snapshot record.
    pub fn read_snapshot(&self, id: &ObjectId) -> Result<Snapshot, StoreError> {
        let bytes = self.read_verified_loose_first(id)?;
        Snapshot::decode(&bytes).map_err(|why| StoreError::Malformed {
            id: *id,
            what: "snapshot record",
            why,
        })
    }

    /// A read-only view for mounts and readers: no catalog, only immutable objects.
    pub fn reader(&self) -> StoreReader {
        StoreReader {
            objects: self.clone(),
        }
    }

    /// The `tmp/` directory.
    pub fn tmp_dir(&self) -> &Path {
        &self.tmp
    }

    /// True when the object exists with length `len` (the dedup test: a crash-truncated
    /// object of the wrong length does not count). A compressed object must decode to `len`
    /// bytes (it is read whole, at most 256 KiB: a frame torn after its header declares the
    /// right length and still does not count).
    pub fn has_with_len(&self, id: &ObjectId, len: u64) -> bool {
        if len <= SMALL as u64 && self.packed_with_len(id, len) {
            return true;
        }
        if self.has_raw_with_len(id, len) {
            return true;
        }
        compressed::candidate(usize::try_from(len).unwrap_or(usize::MAX))
            && self.has_compressed_with_len(id, len)
    }

    /// Whether object `id` is stored compressed and decodes to `len` bytes.
    fn has_compressed_with_len(&self, id: &ObjectId, len: u64) -> bool {
        matches!(
            self.open_stored(id),
            Ok(Stored::Compressed { bytes, .. }) if bytes.len() as u64 == len
        )
    }

    /// Whether object `id` is packed with length `len` (a pack that cannot be read counts as
    /// not holding it: the object is then written again).
    fn packed_with_len(&self, id: &ObjectId, len: u64) -> bool {
        matches!(self.packed.find(id), Ok(Some(f)) if f.entry.len == len)
    }

    fn has_raw_with_len(&self, id: &ObjectId, len: u64) -> bool {
        fs::symlink_metadata(self.path_of(id))
            .map(|m| m.is_file() && m.len() == len)
            .unwrap_or(false)
    }

    /// True when the object exists and its bytes hash to its id (reads it whole: for the
    /// rare object an import finds present, never for a whole closure).
    pub fn is_intact(&self, id: &ObjectId) -> bool {
        self.open_blob(id).and_then(|b| b.verify(id)).is_ok()
    }

    /// What the store holds of object `id` of `len` bytes, for an import deciding whether to
    /// land it: as [`ObjectDir::has_with_len`] and [`ObjectDir::is_intact`] together tell, and
    /// whether some other copy (a torn one, of another length) is there, in the same few
    /// lookups.
    pub(crate) fn holding(&self, id: &ObjectId, len: u64) -> Holding {
        let judged = |o: &ObjectDir| match o.is_intact(id) {
            true => Holding::Intact,
            false => Holding::Damaged,
        };
        let mut torn = false;
        if len <= SMALL as u64 {
            if let Ok(Some(found)) = self.packed.find(id) {
                if found.entry.len == len {
                    return judged(self);
                }
                torn = true;
            }
        }
        if let Ok(m) = fs::symlink_metadata(self.path_of(id)) {
            if m.is_file() && m.len() == len {
                return judged(self);
            }
            torn = true;
        }
        if len <= SMALL as u64 {
            match sys::open_regular(&self.compressed_path_of(id)) {
                Ok(Some(file)) => {
                    let decoded = read_frame(&file, &self.compressed_path_of(id))
                        .ok()
                        .and_then(|frame| compressed::decompress(&frame).ok());
                    if decoded.is_some_and(|bytes| bytes.len() as u64 == len) {
                        return judged(self);
                    }
                    torn = true;
                }
                Ok(None) => torn = true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => torn = true,
            }
        }
        if torn {
            Holding::Damaged
        } else {
            Holding::Absent
        }
    }

    /// True when the store holds no object at all, in any form (a store just created, which
    /// an unpack usually fills): then an import need not look up, one by one, objects that
    /// cannot be there. Reads `packs/` and then the fan-out directories up to the first entry
    /// (so one or two directory reads in a store in use). An object written by another
    /// process after this answer is at worst imported again (harmless: a second copy).
    pub(crate) fn is_empty(&self) -> Result<bool, StoreError> {
        if self.packed.any_pack()? {
            return Ok(false);
        }
        for i in 0..=255u8 {
            let dir = self.objects.join(format!("{i:02x}"));
            match fs::read_dir(&dir) {
                Ok(mut rd) => {
                    if rd.next().is_some() {
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("list", &dir, e)),
            }
        }
        Ok(true)
    }

    /// True when the object exists (in any form).
    pub fn has(&self, id: &ObjectId) -> bool {
        matches!(self.packed.find(id), Ok(Some(_))) || self.file_of(id).is_some()
    }

    /// [`ObjectDir::has`] trying the loose file first: for a record (always loose), so that
    /// the answer loads no pack index.
    pub fn has_loose_first(&self, id: &ObjectId) -> bool {
        self.file_of(id).is_some() || matches!(self.packed.find(id), Ok(Some(_)))
    }

    /// Packs every small object written from now until the next [`ObjectDir::sync`] (a
    /// capture: see `packed`). While packing, a small object counts as present only when it
    /// is packed: one also stored loose (by an import, or an older version) is packed again
    /// rather than looked up among the loose files, whose directories a capture of a few
    /// changed files would otherwise read cold, one per new object.
    pub fn pack_until_sync(&self) {
        self.packed.start();
    }

    /// Stores `bytes` as an object; returns its id. Existing objects are not rewritten. Small
    /// compressible bytes are stored compressed (see the module doc), and packed while
    /// [`ObjectDir::pack_until_sync`] is in effect.
    pub fn write_bytes(&self, bytes: &[u8]) -> Result<ObjectId, StoreError> {
        let id = ObjectId::of(bytes);
        let len = bytes.len() as u64;
        if bytes.len() <= SMALL && self.packed.packing() {
            if self.packed_with_len(&id, len) {
                return Ok(id);
            }
            let frame = compressed::compress(bytes);
            let (stored, zstd) = match &frame {
                Some(frame) => (frame.as_slice(), true),
                None => (bytes, false),
            };
            if self.packed.add(&id, stored, len, zstd)? {
                return Ok(id);
            }
        }
        if self.has_raw_with_len(&id, len) {
            return Ok(id);
        }
        let frame = compressed::compress(bytes);
        let (stored, dest) = match &frame {
            Some(frame) => {
                // Compression is deterministic: a complete copy has exactly this length.
                let present = fs::symlink_metadata(self.compressed_path_of(&id))
                    .is_ok_and(|m| m.is_file() && m.len() == frame.len() as u64);
                if present {
                    return Ok(id);
                }
                (frame.as_slice(), self.compressed_path_of(&id))
            }
            None => {
                if compressed::candidate(bytes.len()) && self.has_compressed_with_len(&id, len) {
                    // Compressed by another zstd version or an import: as good.
                    return Ok(id);
                }
                (bytes, self.path_of(&id))
            }
        };
        let (mut file, tmp) = self.temp_file()?;
        let res = file
            .write_all(stored)
            .map_err(|e| StoreError::io("write", &tmp, e));
        self.finish_temp(file, tmp, &dest, res)?;
        Ok(id)
    }

    /// Streams `reader` into the store, hashing as it goes; returns (id, length).
    pub fn write_from(&self, reader: &mut dyn Read) -> Result<(ObjectId, u64), StoreError> {
        self.write_from_sized(reader, SMALL as u64)
    }

    /// [`ObjectDir::write_from`] for a reader of about `size` bytes (its stat: a guess, any
    /// length is stored whole). The first `SMALL` bytes are read into a buffer of about the
    /// file's size, not zeroed: a zeroed 256 KiB buffer per file, taken from each worker's
    /// malloc arena, cost a memset of 256 KiB per file (100 GB for 400,000 small files) and
    /// kept a first capture's arenas large.
    pub fn write_from_sized(
        &self,
        reader: &mut dyn Read,
        size: u64,
    ) -> Result<(ObjectId, u64), StoreError> {
        let first = usize::try_from(size).map_or(SMALL, |n| n.saturating_add(1).min(SMALL));
        let mut buf = Vec::with_capacity(first);
        (&mut *reader)
            .take(SMALL as u64)
            .read_to_end(&mut buf)
            .map_err(|e| StoreError::io("read", "source file", e))?;
        let filled = buf.len();
        if filled < SMALL {
            let id = self.write_bytes(&buf[..filled])?;
            return Ok((id, filled as u64));
        }
        // Large: stream to a temp file while hashing (always raw).
        let (mut file, tmp) = self.temp_file()?;
        let mut hasher = IdHasher::new();
        let mut total = 0u64;
        let res = (|| -> Result<(), StoreError> {
            buf.resize(CHUNK, 0);
            hasher.update(&buf[..filled]);
            file.write_all(&buf[..filled])
                .map_err(|e| StoreError::io("write", &tmp, e))?;
            total += filled as u64;
            loop {
                let n = match reader.read(&mut buf) {
                    Ok(0) => return Ok(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(StoreError::io("read", "source file", e)),
                };
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n])
                    .map_err(|e| StoreError::io("write", &tmp, e))?;
                total += n as u64;
            }
        })();
        let id = hasher.finish();
        if res.is_ok() && self.has_with_len(&id, total) {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Ok((id, total));
        }
        let dest = self.path_of(&id);
        self.finish_temp(file, tmp, &dest, res)?;
        Ok((id, total))
    }

    fn temp_file(&self) -> Result<(File, PathBuf), StoreError> {
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = self.tmp.join(format!(
                "obj-{}-{}-{}",
                std::process::id(),
                n,
                sys::random_token()
            ));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&path)
            {
                Ok(f) => return Ok((f, path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create temp file in", &self.tmp, e)),
            }
        }
    }

    /// A fresh staging directory under `tmp/` (the temp files' naming, with a `stage-` prefix)
    /// for an import that lands many objects at once: see [`Staging`]. The caller holds the
    /// store's write lock, so only an interrupted import leaves one behind, which `gc` removes.
    pub(crate) fn staging(&self) -> Result<Staging, StoreError> {
        fs::create_dir_all(&self.tmp).map_err(|e| StoreError::io("create", &self.tmp, e))?;
        loop {
            let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = self.tmp.join(format!(
                "{STAGING_PREFIX}{}-{}-{}",
                std::process::id(),
                n,
                sys::random_token()
            ));
            match fs::create_dir(&dir) {
                Ok(()) => {
                    return Ok(Staging {
                        objects: self.clone(),
                        packs: Mutex::new(ImportPacks::new(&dir)),
                        dir,
                        staged: Mutex::new(Vec::new()),
                        done: false,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(StoreError::io("create staging directory in", &self.tmp, e)),
            }
        }
    }

    /// Moves `from` (a complete, verified object file) to `dest` (an object's path, in the
    /// form `from` holds).
    fn rename_into_place(&self, from: &Path, dest: &Path) -> Result<(), StoreError> {
        // A fan-out directory removed by hand is made again.
        making_parent(dest, || fs::rename(from, dest))
            .map_err(|e| StoreError::io("rename into", dest, e))
    }

    /// Renames a fully written temp file into place, or removes it on failure.
    fn finish_temp(
        &self,
        file: File,
        tmp: PathBuf,
        dest: &Path,
        written: Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        drop(file);
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        self.rename_into_place(&tmp, dest).inspect_err(|_| {
            let _ = fs::remove_file(&tmp);
        })
    }

    /// Reads a whole (small) object and checks its hash.
    pub fn read_verified(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        verified_bytes(id, self.open_stored(id)?)
    }

    /// [`ObjectDir::read_verified`] of an object that is most likely loose: a snapshot
    /// record (written after the commit's sync ends packing, and landed loose by imports).
    /// The loose file is tried first, then the packs: so reading a record (a mount's first
    /// step, `list`, `log`) opens no pack index on a cold cache (a store of 51 packs spent
    /// 33 ms there before a mount could start).
    pub(crate) fn read_verified_loose_first(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        let stored = match self.open_stored_trying(id, false, false) {
            Err(StoreError::MissingObject(_)) => self.open_stored(id)?,
            other => other?,
        };
        verified_bytes(id, stored)
    }

    /// Opens an object for positioned reads (not verified: see [`Blob::verify`]). A
    /// compressed object is decoded here, whole (damage that stops it decoding is
    /// [`StoreError::Undecodable`]).
    pub fn open_blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.open_stored(id)?.into_blob()
    }

    /// [`ObjectDir::open_blob`] of an object a tree records as `len` bytes: the form that
    /// length makes likely is tried first (a compressed object then costs no failed open of
    /// the raw name: 15,000 of them in a checkout of the bench corpus).
    pub fn open_blob_of_len(&self, id: &ObjectId, len: u64) -> Result<Blob, StoreError> {
        self.open_stored_of_len(id, len)?.into_blob()
    }

    /// Opens object `id` in whichever form it is stored: a raw file (open), or a compressed
    /// one (read and decoded, with its frame for a caller that can use it as it is: `pack`).
    /// Not verified.
    pub(crate) fn open_stored(&self, id: &ObjectId) -> Result<Stored, StoreError> {
        self.open_stored_trying(id, false, true)
    }

    /// [`ObjectDir::open_stored`] of an object recorded as `len` bytes (see
    /// [`ObjectDir::open_blob_of_len`]).
    pub(crate) fn open_stored_of_len(&self, id: &ObjectId, len: u64) -> Result<Stored, StoreError> {
        let likely = compressed::candidate(usize::try_from(len).unwrap_or(usize::MAX));
        self.open_stored_trying(id, likely, len <= SMALL as u64)
    }

    /// [`ObjectDir::open_stored`], trying the compressed form first when `compressed_first`,
    /// and the packs first when `maybe_packed` (only small objects are packed).
    fn open_stored_trying(
        &self,
        id: &ObjectId,
        compressed_first: bool,
        maybe_packed: bool,
    ) -> Result<Stored, StoreError> {
        if maybe_packed {
            if let Some(found) = self.packed.find(id)? {
                return stored_in_pack(id, found);
            }
        }
        let forms = if compressed_first {
            [true, false]
        } else {
            [false, true]
        };
        for compressed in forms {
            let path = if compressed {
                self.compressed_path_of(id)
            } else {
                self.path_of(id)
            };
            // A regular file only, not through a symlink and without blocking on a FIFO
            // planted at an object's path (anything else is not the object: the other form,
            // or missing).
            let file = match sys::open_regular(&path) {
                Ok(Some(file)) => file,
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("open", &path, e)),
            };
            if !compressed {
                let len = file
                    .metadata()
                    .map_err(|e| StoreError::io("stat", &path, e))?
                    .len();
                return Ok(Stored::Raw(Blob::from_object_file(file, len), path));
            }
            let frame = read_frame(&file, &path)?;
            let bytes = compressed::decompress(&frame)
                .map_err(|why| StoreError::Undecodable { id: *id, why })?;
            return Ok(Stored::Compressed { frame, bytes });
        }
        Err(StoreError::MissingObject(*id))
    }

    /// Hints that object `id` will be read soon (`posix_fadvise` WILLNEED on its file).
    pub(crate) fn will_need(&self, id: &ObjectId) {
        if let Ok(Some(found)) = self.packed.find(id) {
            let e = found.entry;
            sys::will_need_range(&found.file, e.offset, e.stored_len);
            return;
        }
        let regular = |path: PathBuf| sys::open_regular(&path).ok().flatten();
        if let Some(file) =
            regular(self.path_of(id)).or_else(|| regular(self.compressed_path_of(id)))
        {
            sys::will_need(&file);
        }
    }

    /// Makes every object and directory entry written so far durable (`syncfs(2)`), after
    /// finishing the pack of [`ObjectDir::pack_until_sync`], if one is open.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.packed.finish()?;
        sys::syncfs(&self.objects).map_err(|e| StoreError::io("sync", &self.objects, e))
    }

    /// Every object present: one entry per loose file and per packed copy (so an object
    /// stored in two forms, which only a race or a capture after an import leaves, is listed
    /// twice).
    pub fn list(&self) -> Result<Vec<ListedObject>, StoreError> {
        let mut out = Vec::new();
        let now = std::time::SystemTime::now();
        let (packs, _) = self.packed.all()?;
        for pack in packs {
            let age_secs = now
                .duration_since(pack.modified())
                .map(|d| d.as_secs())
                .unwrap_or(0);
            for e in pack.entries()? {
                out.push(ListedObject {
                    id: e.id,
                    stored_len: e.stored_len,
                    compressed: e.zstd,
                    age_secs,
                    packed: true,
                });
            }
        }
        for i in 0..=255u8 {
            let dir = self.objects.join(format!("{i:02x}"));
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("list", &dir, e)),
            };
            for ent in rd {
                let ent = ent.map_err(|e| StoreError::io("list", &dir, e))?;
                let name = ent.file_name();
                let Some(rest) = name.to_str() else { continue };
                let (rest, compressed) = match rest.strip_suffix(ZST_SUFFIX) {
                    Some(rest) => (rest, true),
                    None => (rest, false),
                };
                let Ok(id) = format!("{i:02x}{rest}").parse::<ObjectId>() else {
                    continue;
                };
                let meta = ent
                    .metadata()
                    .map_err(|e| StoreError::io("stat", ent.path(), e))?;
                let age_secs = meta
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                out.push(ListedObject {
                    id,
                    stored_len: meta.len(),
                    compressed,
                    age_secs,
                    packed: false,
                });
            }
        }
        Ok(out)
    }

    /// Tests of other crates: removes an object in every form, as gc would (a packed one by
    /// rewriting its pack), to prove that something never looks it up.
    #[cfg(feature = "test-hooks")]
    pub fn remove_for_test(&self, id: &ObjectId) -> Result<(), StoreError> {
        self.remove(id)
    }

    /// Removes an object, in every form (gc and `forget` only, under the exclusive lock).
    pub(crate) fn remove(&self, id: &ObjectId) -> Result<(), StoreError> {
        self.remove_all(&HashSet::from([*id]))
    }

    /// Removes every object of `ids`, in every form: loose files one by one, packs rewritten
    /// without them (each pack once; see `packed`). Under the exclusive lock only.
    pub(crate) fn remove_all(&self, ids: &HashSet<ObjectId>) -> Result<(), StoreError> {
        for id in ids {
            self.remove_loose(id)?;
        }
        self.packed.rewrite_without(ids)?;
        Ok(())
    }

    /// Merges the small object packs (gc, after removing; see `packed`, "Merging"). Returns
    /// how many packs were merged.
    pub(crate) fn consolidate_packs(&self) -> Result<u64, StoreError> {
        self.packed.consolidate()
    }

    /// Removes the loose files of object `id` (both forms), leaving any packed copy.
    pub(crate) fn remove_loose(&self, id: &ObjectId) -> Result<(), StoreError> {
        for path in [self.path_of(id), self.compressed_path_of(id)] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path, e)),
            }
        }
        Ok(())
    }

    /// Whether a pack holds object `id` and its bytes there hash to `id`.
    pub(crate) fn packed_copy_is_intact(&self, id: &ObjectId) -> bool {
        match self.packed.find(id) {
            Ok(Some(found)) => stored_in_pack(id, found)
                .and_then(Stored::into_blob)
                .and_then(|blob| blob.verify(id))
                .is_ok(),
            _ => false,
        }
    }

    /// The object packs that could not be read, with why (`verify` reports them).
    pub(crate) fn refused_packs(&self) -> Result<Vec<(PathBuf, String)>, StoreError> {
        Ok(self.packed.all()?.1)
    }

    /// Reads the first bytes of an object (to recognise snapshot records cheaply; a
    /// compressed object is decoded, at most 256 KiB). A missing object is an `Io` error of
    /// kind `NotFound`.
    pub(crate) fn peek(&self, id: &ObjectId, n: usize) -> Result<Vec<u8>, StoreError> {
        let (blob, path) = match self.open_stored(id) {
            Ok(Stored::Raw(blob, path)) => (blob, path),
            Ok(Stored::Compressed { mut bytes, .. }) => {
                bytes.truncate(n);
                return Ok(bytes);
            }
            Err(StoreError::MissingObject(_)) => {
                return Err(StoreError::io(
                    "open",
                    self.path_of(id),
                    io::Error::from(io::ErrorKind::NotFound),
                ))
            }
            Err(e) => return Err(e),
        };
        let mut buf = vec![0u8; n.min(usize::try_from(blob.len()).unwrap_or(usize::MAX))];
        let got = blob
            .read_at(&mut buf, 0)
            .map_err(|e| StoreError::io("read", &path, e))?;
        buf.truncate(got);
        Ok(buf)
    }
}

/// An object as stored (see [`ObjectDir::open_stored`]).
pub(crate) enum Stored {
    /// A raw object, read in place (a whole loose file, or a range of a pack), and the path of
    /// its file.
    Raw(Blob, PathBuf),
    /// A compressed object: its frame as stored and its bytes decoded (not yet verified).
    Compressed {
        /// The zstd frame, exactly as stored.
        frame: Vec<u8>,
        /// What it decodes to.
        bytes: Vec<u8>,
    },
}

impl Stored {
    /// The object as a [`Blob`] (a raw one read in place, a compressed one from memory).
    pub(crate) fn into_blob(self) -> Result<Blob, StoreError> {
        match self {
            Stored::Raw(blob, _) => Ok(blob),
            Stored::Compressed { bytes, .. } => Ok(Blob::from_bytes(bytes)),
        }
    }
}

/// One object file of [`ObjectDir::list`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedObject {
    /// The object's id.
    pub id: ObjectId,
    /// The file's length: the object's length when raw, its frame's when compressed.
    pub stored_len: u64,
    /// Stored compressed (one zstd frame).
    pub compressed: bool,
    /// Seconds since the file (or its pack) was last modified.
    pub age_secs: u64,
    /// Held in an object pack (see `packed`) rather than a file of its own.
    pub packed: bool,
}

/// What an import finds of an object in the store ([`ObjectDir::holding`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Holding {
    /// A copy of the right length whose bytes hash to the id: nothing to land.
    Intact,
    /// Some copy that is not intact (torn, or its bytes damaged): the import lands a
    /// verified one over it.
    Damaged,
    /// No copy at all.
    Absent,
}

/// A packed object as stored: a raw one in place, a compressed one read and decoded (it must
/// decode to its entry's length).
fn stored_in_pack(id: &ObjectId, found: Found) -> Result<Stored, StoreError> {
    let e = found.entry;
    if !e.zstd {
        return Ok(Stored::Raw(
            Blob::from_range(found.file, e.offset, e.len),
            found.path,
        ));
    }
    let mut frame = Vec::new();
    packed::read_stored(&found.file, &found.path, &e, &mut frame)?;
    let bytes =
        compressed::decompress(&frame).map_err(|why| StoreError::Undecodable { id: *id, why })?;
    if bytes.len() as u64 != e.len {
        return Err(StoreError::Undecodable {
            id: *id,
            why: format!(
                "its pack entry says {} bytes and its frame decodes to {}",
                e.len,
                bytes.len()
            ),
        });
    }
    Ok(Stored::Compressed { frame, bytes })
}

/// The stored frame of a compressed object, in one read of its length (bounded before any
/// allocation: a frame longer than any small object needs is damage, left to the decoder to
/// name).
fn read_frame(file: &File, path: &Path) -> Result<Vec<u8>, StoreError> {
    let len = file
        .metadata()
        .map_err(|e| StoreError::io("stat", path, e))?
        .len();
    let len = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(compressed::max_frame_len() + 1);
    let mut frame = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut frame[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io("read", path, e)),
        }
    }
    frame.truncate(done);
    Ok(frame)
}

/// Runs `op` on `path`; when it fails because `path`'s directory does not exist (a fan-out
/// directory not made yet, or removed by hand), makes the directory and runs `op` once more.
fn making_parent<T>(path: &Path, op: impl Fn() -> io::Result<T>) -> io::Result<T> {
    op().or_else(|e| {
        if e.kind() != io::ErrorKind::NotFound {
            return Err(e);
        }
        fs::create_dir_all(path.parent().expect("object paths have a parent"))?;
        op()
    })
}

/// A directory under `<store>/tmp/` where an import (`unpack`, `pull`) writes objects it has
/// verified: the small ones it lacked appended to packs ([`Staging::pack_verified`], see
/// `packed::ImportPacks`), the others each as a read-only file named by its id (fanned out as
/// in `objects/`). Nothing in it is visible in the store: [`Staging::land`] renames the packs
/// into `objects/packs/` and every staged file into `objects/` only once the whole import
/// verified (cheap renames within one filesystem); dropping a staging that did not land
/// removes it with everything in it. A process killed meanwhile leaves the directory, which
/// `gc` removes (staging is only done under the store's write lock, which gc excludes).
/// Loose objects are not fsynced here: the commit's `syncfs` covers them, as for a capture;
/// each pack is fsynced before its rename, as a capture's is.
#[derive(Debug)]
pub(crate) struct Staging {
    objects: ObjectDir,
    dir: PathBuf,
    /// Objects completely written as files (only these are landed), each with whether it is
    /// staged compressed.
    staged: Mutex<Vec<(ObjectId, bool)>>,
    /// Objects appended to packs.
    packs: Mutex<ImportPacks>,
    done: bool,
}

/// One object being streamed into a [`Staging`]; it counts only once [`StagedFile::finish`]ed.
pub(crate) struct StagedFile<'s> {
    staging: &'s Staging,
    id: ObjectId,
    path: PathBuf,
    file: io::BufWriter<File>,
    /// The first write that failed (its OS error, or kind), kept so the caller can name this
    /// file instead of blaming the bytes it was decoding (a full disk is not a bad pack).
    failed: Option<(Option<i32>, io::ErrorKind)>,
}

impl Staging {
    /// The staging directory.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }

    /// Where object `id` is staged: fanned out like `objects/` (`<2 hex>/<62 hex>`), so
    /// workers creating files at once rarely wait on the same directory's lock (one flat
    /// directory serialized their creates).
    fn staged_path(&self, id: &ObjectId, compressed: bool) -> PathBuf {
        let hex = id.to_hex();
        let suffix = if compressed { ZST_SUFFIX } else { "" };
        self.dir
            .join(&hex[..2])
            .join(format!("{}{suffix}", &hex[2..]))
    }

    fn create(&self, id: &ObjectId, compressed: bool) -> Result<(File, PathBuf), StoreError> {
        let path = self.staged_path(id, compressed);
        let open = || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .open(&path)
        };
        // The fan-out directory is made on first use.
        let file = making_parent(&path, open)
            .map_err(|e| StoreError::io("create staged object", &path, e))?;
        Ok((file, path))
    }

    /// Stages object `id` whose bytes are `bytes`. The caller has hashed them and compared
    /// the hash with `id` (they are not hashed again here).
    pub(crate) fn put_verified(&self, id: &ObjectId, bytes: &[u8]) -> Result<(), StoreError> {
        self.put(id, bytes, false)
    }

    /// Stages object `id` in its compressed form: `frame`, a zstd frame the caller decoded to
    /// the object's bytes, hashed and compared with `id`, and that
    /// `compressed::storable` accepts (an import landing a pack's frame as it is).
    pub(crate) fn put_verified_frame(&self, id: &ObjectId, frame: &[u8]) -> Result<(), StoreError> {
        self.put(id, frame, true)
    }

    /// Appends object `id` of `len` bytes (at most the size of a packed object) to the
    /// staging's packs, stored as `stored`: its bytes, or a zstd frame of them when `zstd`
    /// (one that `compressed::storable` accepts). The caller has hashed the bytes and
    /// compared the hash with `id`, and the store lacks the object (a damaged copy is
    /// replaced by a staged file instead, which takes its place).
    pub(crate) fn pack_verified(
        &self,
        id: &ObjectId,
        stored: &[u8],
        len: u64,
        zstd: bool,
    ) -> Result<(), StoreError> {
        self.packs
            .lock()
            .expect("no panic holds the packs")
            .add(id, stored, len, zstd)
    }

    /// Whether an object of `len` bytes may go into the staging's packs.
    pub(crate) fn packable(len: u64) -> bool {
        len <= SMALL as u64
    }

    fn put(&self, id: &ObjectId, stored: &[u8], compressed: bool) -> Result<(), StoreError> {
        let (mut file, path) = self.create(id, compressed)?;
        file.write_all(stored)
            .map_err(|e| StoreError::io("write", &path, e))?;
        self.staged
            .lock()
            .expect("no panic holds the list")
            .push((*id, compressed));
        Ok(())
    }

    /// Starts streaming object `id` (a large one) into the staging directory; the caller
    /// hashes what it writes and calls [`StagedFile::finish`] only when the hash matched.
    pub(crate) fn stream(&self, id: &ObjectId) -> Result<StagedFile<'_>, StoreError> {
        let (file, path) = self.create(id, false)?;
        Ok(StagedFile {
            staging: self,
            id: *id,
            path,
            file: io::BufWriter::with_capacity(CHUNK, file),
            failed: None,
        })
    }

    /// How many objects are staged (as files and packed).
    pub(crate) fn len(&self) -> usize {
        self.staged.lock().expect("no panic holds the list").len()
            + self.packs.lock().expect("no panic holds the packs").len()
    }

    /// Renames every staged object into `objects/` (an object already there is replaced by
    /// the same bytes) and removes the staging directory. Call only when the whole import
    /// verified. An interruption midway leaves some objects landed, unreferenced until the
    /// record is committed: the crash invariant allows that.
    pub(crate) fn land(mut self) -> Result<(), StoreError> {
        let packs = std::mem::replace(
            &mut *self.packs.lock().expect("no panic holds the packs"),
            ImportPacks::new(&self.dir),
        );
        // The packed objects were absent from the store: the packs hold no copy of them to
        // drop, and none of the staged files below.
        self.objects.packed.publish_import(packs)?;
        let staged = std::mem::take(&mut *self.staged.lock().expect("no panic holds the list"));
        for &(id, compressed) in &staged {
            let dest = if compressed {
                self.objects.compressed_path_of(&id)
            } else {
                self.objects.path_of(&id)
            };
            self.objects
                .rename_into_place(&self.staged_path(&id, compressed), &dest)?;
        }
        // An import lands only what is missing or damaged; a packed copy of a landed object
        // is a damaged one (readers look in the packs first): the packs drop it, so the landed
        // copy replaces it.
        let damaged: HashSet<ObjectId> = staged
            .iter()
            .map(|&(id, _)| id)
            .filter(|id| matches!(self.objects.packed.find(id), Ok(Some(_))))
            .collect();
        if !damaged.is_empty() {
            self.objects.packed.rewrite_without(&damaged)?;
        }
        self.done = true;
        // Only the emptied fan-out directories are left.
        fs::remove_dir_all(&self.dir).map_err(|e| StoreError::io("remove", &self.dir, e))
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

impl Write for StagedFile<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf).inspect_err(|e| self.note(e))
    }
    fn flush(&mut self) -> io::Result<()> {
        self.file.flush().inspect_err(|e| self.note(e))
    }
}

impl StagedFile<'_> {
    fn note(&mut self, e: &io::Error) {
        self.failed.get_or_insert((e.raw_os_error(), e.kind()));
    }

    /// The error of the first failed write, naming this file, if a write failed.
    pub(crate) fn write_error(&self) -> Option<StoreError> {
        self.failed.map(|(os, kind)| {
            let e = os.map_or_else(|| io::Error::from(kind), io::Error::from_raw_os_error);
            StoreError::io("write", &self.path, e)
        })
    }

    /// Completes the object: the caller verified its bytes against its id.
    pub(crate) fn finish(mut self) -> Result<(), StoreError> {
        self.file
            .flush()
            .map_err(|e| StoreError::io("write", &self.path, e))?;
        self.staging
            .staged
            .lock()
            .expect("no panic holds the list")
            .push((self.id, false));
        Ok(())
    }
}

/// The bytes of `stored`, checked against `id`.
fn verified_bytes(id: &ObjectId, stored: Stored) -> Result<Vec<u8>, StoreError> {
    let bytes = match stored {
        Stored::Raw(blob, path) => {
            let len = usize::try_from(blob.len()).map_err(|_| {
                StoreError::io("read", &path, io::Error::from(io::ErrorKind::OutOfMemory))
            })?;
            let mut bytes = vec![0u8; len];
            let n = blob
                .read_at(&mut bytes, 0)
                .map_err(|e| StoreError::io("read", &path, e))?;
            bytes.truncate(n);
            bytes
        }
        Stored::Compressed { bytes, .. } => bytes,
    };
    let actual = ObjectId::of(&bytes);
    if actual != *id {
        return Err(StoreError::CorruptObject { id: *id, actual });
    }
    Ok(bytes)
}

/// A store seen only through its immutable objects (what a mount serves).
#[derive(Debug, Clone)]
pub struct StoreReader {
    objects: ObjectDir,
}

impl ObjectSource for StoreReader {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.objects.read_tree(id)
    }

    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        self.objects.read_tree_view(id)
    }

    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.objects.open_blob(id)
    }

    fn blob_of_size(&self, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
        let blob = self.objects.open_blob_of_len(id, size)?;
        crate::source::of_recorded_size(id, blob, size)
    }

    fn prefetch(&self, ids: &[ObjectId]) {
        for id in ids {
            self.objects.will_need(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use std::os::unix::fs::PermissionsExt;

    fn text(len: usize) -> Vec<u8> {
        b"fn main() { println!(\"hello\"); }\n"
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect()
    }

    use super::compressed::tests::random_seeded as random;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        (dir, store)
    }

    /// Writes `bytes` raw at object `id`'s place by hand, as a version before format 3 did.
    fn write_raw_by_hand(objects: &ObjectDir, bytes: &[u8]) -> ObjectId {
        let id = ObjectId::of(bytes);
        let path = objects.path_of(&id);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, bytes).unwrap();
        id
    }

    /// The size given to `write_from_sized` is only a guess: a file that grew or shrank since
    /// its stat, or is exactly at the small/large boundary, is stored whole under its own id.
    #[test]
    fn a_wrong_size_guess_still_stores_the_whole_file() {
        let (_d, store) = store();
        let o = store.objects();
        for (len, guess) in [
            (0, 0),
            (10, 0),
            (10, 1 << 20),
            (5000, 100),
            (SMALL - 1, 10),
            (SMALL, SMALL as u64 - 1),
            (SMALL + 1, 3),
            (3 * SMALL + 17, u64::MAX),
        ] {
            let bytes = random(len, len as u64 + 1);
            let (id, got) = o.write_from_sized(&mut &bytes[..], guess).unwrap();
            assert_eq!(
                (id, got),
                (ObjectId::of(&bytes), len as u64),
                "{len} guessed {guess}"
            );
            assert_eq!(
                o.read_verified(&id).unwrap(),
                bytes,
                "{len} guessed {guess}"
            );
        }
    }

    #[test]
    fn small_compressible_objects_are_stored_compressed_and_read_back_in_every_way() {
        let (_d, store) = store();
        let o = store.objects();
        let bytes = text(20_000);
        let (id, len) = o.write_from(&mut &bytes[..]).unwrap();
        assert_eq!((id, len), (ObjectId::of(&bytes), bytes.len() as u64));
        let file = o.file_of(&id).unwrap();
        assert_eq!(file, o.compressed_path_of(&id));
        assert!(!o.path_of(&id).exists(), "one form only");
        let stored = fs::read(&file).unwrap();
        assert!(stored.len() < bytes.len() / 4, "{} bytes", stored.len());
        // One zstd frame, declaring its size: any zstd tool decodes it.
        assert_eq!(zstd::bulk::decompress(&stored, bytes.len()).unwrap(), bytes);
        assert!(o.has(&id) && o.has_with_len(&id, len) && !o.has_with_len(&id, len + 1));
        assert_eq!(o.read_verified(&id).unwrap(), bytes);
        let blob = o.open_blob(&id).unwrap();
        assert_eq!(blob.len(), len);
        blob.verify(&id).unwrap();
        // Whatever form the recorded length suggests, the object is found.
        for hint in [len, SMALL as u64 * 4] {
            o.open_blob_of_len(&id, hint).unwrap().verify(&id).unwrap();
        }
        let mut middle = vec![0u8; 100];
        assert_eq!(blob.read_at(&mut middle, 5000).unwrap(), 100);
        assert_eq!(middle, bytes[5000..5100]);
        assert_eq!(blob.read_at(&mut middle, len - 10).unwrap(), 10);
        let mut copy = Vec::new();
        blob.verifying_reader(id).read_to_end(&mut copy).unwrap();
        assert_eq!(copy, bytes);
        assert_eq!(o.peek(&id, 7).unwrap(), bytes[..7]);
        let listed = o.list().unwrap();
        assert_eq!(
            listed,
            [ListedObject {
                id,
                stored_len: stored.len() as u64,
                compressed: true,
                age_secs: listed[0].age_secs,
                packed: false,
            }]
        );
        // Dedup: writing it again writes nothing.
        let before = fs::metadata(&file).unwrap().modified().unwrap();
        o.write_bytes(&bytes).unwrap();
        assert_eq!(fs::metadata(&file).unwrap().modified().unwrap(), before);
        assert_eq!(fs::read_dir(o.tmp_dir()).unwrap().count(), 0);
        o.remove(&id).unwrap();
        assert!(!o.has(&id) && o.list().unwrap().is_empty());
    }

    #[test]
    fn large_tiny_and_incompressible_objects_stay_raw() {
        let (_d, store) = store();
        let o = store.objects();
        for bytes in [
            text(SMALL),
            text(40),
            text(4096),
            random(50_000, 3),
            Vec::new(),
        ] {
            let (id, _) = o.write_from(&mut &bytes[..]).unwrap();
            assert_eq!(
                o.file_of(&id).unwrap(),
                o.path_of(&id),
                "{} bytes",
                bytes.len()
            );
            assert_eq!(fs::read(o.path_of(&id)).unwrap(), bytes, "b3sum checks it");
        }
    }

    #[test]
    fn raw_objects_of_an_older_version_are_read_and_not_duplicated() {
        let (_d, store) = store();
        let o = store.objects();
        let bytes = text(10_000);
        let id = write_raw_by_hand(o, &bytes);
        assert!(o.has_with_len(&id, bytes.len() as u64));
        assert_eq!(o.write_bytes(&bytes).unwrap(), id);
        assert!(!o.compressed_path_of(&id).exists(), "no second copy");
        assert_eq!(o.read_verified(&id).unwrap(), bytes);
        let len = bytes.len() as u64;
        assert_eq!(o.open_blob_of_len(&id, len).unwrap().len(), len);
        assert!(matches!(
            o.open_blob_of_len(&ObjectId::of(b"absent"), len),
            Err(StoreError::MissingObject(_))
        ));
        assert_eq!(o.list().unwrap().len(), 1);
    }

    #[test]
    fn a_torn_compressed_object_does_not_count_and_is_rewritten() {
        let (_d, store) = store();
        let o = store.objects();
        let bytes = text(30_000);
        let id = o.write_bytes(&bytes).unwrap();
        let path = o.compressed_path_of(&id);
        let whole = fs::read(&path).unwrap();
        for torn in [&whole[..0], &whole[..10], &whole[..whole.len() - 1]] {
            fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
            fs::write(&path, torn).unwrap();
            assert!(!o.has_with_len(&id, bytes.len() as u64), "{}", torn.len());
            assert!(!o.is_intact(&id));
            assert_eq!(o.write_bytes(&bytes).unwrap(), id);
            assert_eq!(fs::read(&path).unwrap(), whole, "rewritten whole");
        }
    }

    #[test]
    fn a_damaged_compressed_object_is_corruption_not_a_crash() {
        let (_d, store) = store();
        let o = store.objects();
        let bytes = text(30_000);
        let id = o.write_bytes(&bytes).unwrap();
        let path = o.compressed_path_of(&id);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let mut frame = fs::read(&path).unwrap();
        // A frame that claims to be far larger than any compressed object may be.
        let huge = zstd::bulk::compress(&text(SMALL * 4), 3).unwrap();
        for damaged in [
            {
                let mid = frame.len() / 2;
                frame[mid] ^= 0x55;
                frame.clone()
            },
            huge,
            random(300, 5),
        ] {
            fs::write(&path, &damaged).unwrap();
            for err in [
                o.open_blob(&id).and_then(|b| b.verify(&id)).unwrap_err(),
                o.read_verified(&id).unwrap_err(),
            ] {
                assert!(err.is_corruption(), "{err}");
            }
        }
        let report = store.maintenance().verify(&mut |_, _| {}).unwrap();
        assert_eq!(
            report.problems,
            [crate::maintenance::VerifyProblem::Corrupt { id }],
            "verify names it and goes on"
        );
    }

    #[test]
    fn a_pack_is_the_same_whichever_form_the_store_keeps() {
        let files = [text(5_000), text(70_000), random(9_000, 7), text(200_000)];
        let pack_of = |raw: bool| {
            let (_d, store) = store();
            let snap = snapshot_of_files(&store, &files, |bytes| {
                if raw {
                    write_raw_by_hand(store.objects(), bytes)
                } else {
                    store.objects().write_bytes(bytes).unwrap()
                }
            });
            let compressed = store
                .objects()
                .list()
                .unwrap()
                .iter()
                .filter(|l| l.compressed)
                .count();
            assert_eq!(compressed, if raw { 0 } else { 3 });
            let mut out = Vec::new();
            store
                .packs()
                .write(&snap, Default::default(), &mut out, &mut |_| {})
                .unwrap();
            out
        };
        assert_eq!(pack_of(false), pack_of(true));
    }

    /// Commits a snapshot of `files` (named `f0`, `f1`, ...), each stored by `write`.
    fn snapshot_of_files(
        store: &Store,
        files: &[Vec<u8>],
        write: impl Fn(&[u8]) -> ObjectId,
    ) -> ObjectId {
        use crate::snapshot::Snapshot;
        use crate::tree::{Tree, TreeEntry};
        let entries = files
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                TreeEntry::file(
                    format!("f{i}").into_bytes(),
                    0o644,
                    bytes.len() as u64,
                    write(bytes),
                )
            })
            .collect();
        let root = store
            .objects()
            .write_tree(&Tree::from_entries(entries).unwrap())
            .unwrap();
        let lock = store.write_lock().unwrap();
        store
            .catalog()
            .commit_snapshot(&lock, &Snapshot::for_test(root, "s"), None)
            .unwrap()
    }

    /// A store is empty until its first object, whatever its form: a loose file, a pack,
    /// even a pack that cannot be read.
    #[test]
    fn a_store_is_empty_until_its_first_object_in_any_form() {
        let (_d, used) = store();
        let o = used.objects();
        assert!(o.is_empty().unwrap(), "a new store");
        let id = o.write_bytes(&text(100)).unwrap();
        assert!(!o.is_empty().unwrap(), "one loose object");
        o.remove(&id).unwrap();
        assert!(o.is_empty().unwrap(), "removed again");
        o.pack_until_sync();
        o.write_bytes(&text(100)).unwrap();
        o.sync().unwrap();
        assert!(o.file_of(&id).is_none() && o.has(&id));
        assert!(!o.is_empty().unwrap(), "one packed object");

        let (_e, junk) = store();
        let packs = junk.objects().tmp_dir().with_file_name("objects/packs");
        fs::create_dir_all(&packs).unwrap();
        fs::write(packs.join("junk.pack"), b"not a pack").unwrap();
        assert!(
            !junk.objects().is_empty().unwrap(),
            "a pack file, even unreadable"
        );
    }

    /// What an import finds of an object: nothing, an intact copy in any form, or a damaged
    /// one (torn to another length, or its bytes changed).
    #[test]
    fn holding_tells_intact_damaged_and_absent_apart_in_every_form() {
        let (_d, store) = store();
        let o = store.objects();
        let absent = text(6_000);
        assert_eq!(
            o.holding(&ObjectId::of(&absent), absent.len() as u64),
            Holding::Absent
        );
        for bytes in [text(100), text(20_000), random(300_000, 9)] {
            let id = o.write_bytes(&bytes).unwrap();
            let len = bytes.len() as u64;
            assert_eq!(o.holding(&id, len), Holding::Intact, "{len}");
            let file = o.file_of(&id).unwrap();
            fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
            let whole = fs::read(&file).unwrap();
            let mut changed = whole.clone();
            let last = changed.len() - 1;
            changed[last] ^= 1;
            for damaged in [&whole[..whole.len() / 2], &changed[..]] {
                fs::write(&file, damaged).unwrap();
                assert_eq!(o.holding(&id, len), Holding::Damaged, "{len}");
            }
            fs::remove_file(&file).unwrap();
            assert_eq!(o.holding(&id, len), Holding::Absent, "{len}");
        }
        o.pack_until_sync();
        let bytes = text(30_000);
        let id = o.write_bytes(&bytes).unwrap();
        o.sync().unwrap();
        assert_eq!(o.holding(&id, bytes.len() as u64), Holding::Intact);
        assert_eq!(o.holding(&id, bytes.len() as u64 + 1), Holding::Damaged);
    }

    #[test]
    fn unpack_lands_a_packs_frames_as_compressed_objects() {
        use crate::pack::PackReader;
        let files = [text(5_000), text(70_000), random(9_000, 7), text(200_000)];
        let (dir, src) = store();
        let snap = snapshot_of_files(&src, &files, |bytes| {
            src.objects().write_bytes(bytes).unwrap()
        });
        let path = dir.path().join("p.zcpack");
        let mut out = Vec::new();
        src.packs()
            .write(&snap, Default::default(), &mut out, &mut |_| {})
            .unwrap();
        fs::write(&path, &out).unwrap();
        let (_d, dst) = store();
        assert_eq!(
            dst.packs()
                .unpack(&PackReader::open(&path).unwrap())
                .unwrap(),
            snap
        );
        let form = |s: &Store| {
            let mut l: Vec<(ObjectId, bool, u64)> = s
                .objects()
                .list()
                .unwrap()
                .iter()
                .map(|l| (l.id, l.compressed, l.stored_len))
                .collect();
            l.sort();
            l
        };
        // The same files, byte for byte: the frames landed as the capture wrote them.
        assert_eq!(form(&dst), form(&src));
        for bytes in &files {
            assert_eq!(
                dst.objects().read_verified(&ObjectId::of(bytes)).unwrap(),
                *bytes
            );
        }
        assert!(dst
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }
}
