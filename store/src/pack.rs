//! Packs: one self-verifying file that carries a snapshot and every object it reaches, so a
//! bundle crosses hosts as one file and can be mounted, diffed or checked out without
//! unpacking ([`PackReader`] is an [`ObjectSource`] like the store). The byte format is
//! `pack_format`'s; this module walks a snapshot into a pack (its blobs through the
//! `pack_writer` pipeline) and reads packs back.
//!
//! Reading is hostile-input safe: the trailer, the index and every entry are checked against the
//! file size before anything is allocated (offsets inside the object area, no overlaps, ids
//! strictly sorted, lengths within bounds), a compressed object is decompressed into a buffer
//! capped at its declared length (a decompression bomb stops there), and every object read is
//! hashed and compared with its id. [`PackReader::verify`] checks the trailer hash and every
//! object; `unpack` and `pull` check the same in their one pass (see the `unpack`
//! module) before anything becomes visible in the store.
//!
//! The store keeps trees-only packs as its tree indexes (`<store>/trees/`, see
//! [`crate::SnapshotSource`]): one per root tree, rooted at that tree instead of a record
//! (`write_tree_pack`), shared by every snapshot with that root; a small pack is read whole
//! into memory ([`PackReader::open_within`]), with its trailer checked at once.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{DecodeError, StoreError};
use crate::id::{IdHasher, ObjectId};
use crate::objects::{Blob, ObjectDir, StoreReader};
#[cfg(test)]
use crate::pack_format::ZSTD_LEVEL;
use crate::pack_format::{
    decode_entry, decode_signatures, encode_index, encode_signatures, encode_trailer, PackEntry,
    END, ENTRY_LEN, FLAG_TREES_ONLY, FLAG_ZSTD, HEADER_LEN, MAGIC, PACK_VERSION, STREAM_WINDOW_LOG,
    TRAILER_LEN,
};
use crate::pack_writer::{write_blobs, write_err, HashingWriter, Tuning};
use crate::snapshot::Snapshot;
use crate::source::ObjectSource;
use crate::tree::{EntryKind, Tree, TreeShape};
use crate::tree_view::TreeView;

/// Largest tree or record [`PackReader::read`] reads into memory (64 MiB, the size of the
/// largest tree index read whole: [`crate::limits::MAX_INDEX_IN_MEMORY`]).
pub const MAX_IN_MEMORY_OBJECT: u64 = crate::limits::MAX_INDEX_IN_MEMORY;

/// What is wrong with a pack (always named, with the pack's path, by [`StoreError::BadPack`]).
pub(crate) fn bad(pack: &Path, why: impl Into<String>) -> StoreError {
    StoreError::BadPack {
        pack: pack.to_path_buf(),
        why: why.into(),
    }
}

/// An object of pack `pack` whose bytes hash to `actual`, not to its id.
pub(crate) fn corrupt_in_pack(pack: &Path, id: &ObjectId, actual: &ObjectId) -> StoreError {
    bad(
        pack,
        format!(
            "object {} hashes to {} (corrupt)",
            id.short(12),
            actual.short(12)
        ),
    )
}

/// What a written pack holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackStats {
    /// Objects written.
    pub objects: u64,
    /// Of which trees (the record not counted).
    pub trees: u64,
    /// Of which blobs.
    pub blobs: u64,
    /// Uncompressed bytes of the objects.
    pub bytes: u64,
    /// Bytes of the pack file.
    pub pack_bytes: u64,
}

/// Options of [`crate::Packs::write`].
#[derive(Clone, Copy, Debug, Default)]
pub struct PackOptions {
    /// Leave out every object this snapshot reaches (an incremental pack).
    pub since: Option<ObjectId>,
    /// Only the record and the trees (a digest pack).
    pub trees_only: bool,
}

/// Every tree id reachable from `root` (iteratively; each tree read once).
pub(crate) fn reachable_trees(
    source: &dyn ObjectSource,
    root: &ObjectId,
) -> Result<Vec<(ObjectId, Tree)>, StoreError> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut stack = vec![*root];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let tree = source.tree(&id)?;
        for e in tree.entries().iter().rev() {
            if e.kind == EntryKind::Dir {
                stack.push(e.id);
            }
        }
        out.push((id, tree));
    }
    Ok(out)
}

/// What [`emit`] writes.
pub(crate) struct Emit<'a> {
    pub(crate) snapshot_id: &'a ObjectId,
    pub(crate) flags: u32,
    pub(crate) base: Option<ObjectId>,
    pub(crate) trees: &'a [(ObjectId, Vec<u8>)],
    pub(crate) blobs: &'a [(ObjectId, u64)],
    /// The signature section's content (none: no section).
    pub(crate) signatures: &'a [Vec<u8>],
}

/// Writes the header, the record, `trees`, `blobs` (read from the store, verified and
/// compressed ahead on worker threads: [`crate::pack_writer`]), the signature section when
/// there are signatures, the index and the trailer.
pub(crate) fn emit(
    objects: &ObjectDir,
    what: Emit<'_>,
    tuning: &Tuning,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<PackStats, StoreError> {
    let Emit {
        snapshot_id,
        flags,
        base,
        trees,
        blobs,
        signatures,
    } = what;
    let mut w = HashingWriter::new(out);
    w.write_all(&header(snapshot_id, flags, base))
        .map_err(write_err)?;

    let mut index: Vec<PackEntry> = Vec::new();
    let mut stats = PackStats::default();
    let record = objects.read_verified(snapshot_id)?;
    put(&mut w, &mut index, *snapshot_id, &record)?;
    progress(record.len() as u64);
    for (id, bytes) in trees {
        put(&mut w, &mut index, *id, bytes)?;
        stats.trees += 1;
        progress(bytes.len() as u64);
    }
    write_blobs(objects, blobs, tuning, &mut w, &mut index, progress)?;
    stats.blobs = blobs.len() as u64;
    stats.objects = index.len() as u64;
    stats.bytes = index.iter().map(|e| e.len).sum();
    w.write_all(&encode_signatures(signatures))
        .map_err(write_err)?;
    stats.pack_bytes = finish(w, index)?;
    Ok(stats)
}

/// A pack's header: the magic, the version, `flags`, the root object and the base (zeros:
/// none).
fn header(root: &ObjectId, flags: u32, base: Option<ObjectId>) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_LEN as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&PACK_VERSION.to_le_bytes());
    header.extend_from_slice(&flags.to_le_bytes());
    header.extend_from_slice(root.as_bytes());
    header.extend_from_slice(base.map(|b| *b.as_bytes()).unwrap_or([0; 32]).as_slice());
    header
}

/// Ends a pack after its objects (and signature section): the index, sorted by id, then the
/// trailer. Returns the pack's length.
fn finish(mut w: HashingWriter<'_>, mut index: Vec<PackEntry>) -> Result<u64, StoreError> {
    let index_offset = w.written;
    index.sort_by_key(|e| e.id);
    w.write_all(&encode_index(&index)).map_err(write_err)?;
    let pack_bytes = w.written + TRAILER_LEN;
    // The trailer is not part of its own hash: it goes to the output unhashed.
    let digest = w.digest();
    let out = w.into_inner();
    out.write_all(&encode_trailer(index_offset, &digest))
        .map_err(write_err)?;
    out.flush().map_err(write_err)?;
    Ok(pack_bytes)
}

/// Writes the trees-only pack rooted at tree `root` (a store's tree index, see `index`): its
/// header names the tree as the pack's root, and it holds every tree `root` reaches, each once,
/// in the walk's order (pre-order, entries by name), and nothing else: no record, no blob, no
/// signature section. Each tree goes out as it is read, so memory holds one tree at a time
/// and the index, not every encoding (a 300,000-file tree's are 16 MB).
pub(crate) fn write_tree_pack(
    trees_from: &dyn ObjectSource,
    root: &ObjectId,
    out: &mut dyn Write,
) -> Result<PackStats, StoreError> {
    let mut w = HashingWriter::new(out);
    w.write_all(&header(root, FLAG_TREES_ONLY, None))
        .map_err(write_err)?;
    let mut index: Vec<PackEntry> = Vec::new();
    let mut stats = PackStats::default();
    let mut seen = HashSet::new();
    let mut stack = vec![*root];
    while let Some(id) = stack.pop() {
        if !seen.insert(id) {
            continue;
        }
        let tree = trees_from.tree(&id)?;
        stack.extend(
            tree.entries()
                .iter()
                .rev()
                .filter(|e| e.kind == EntryKind::Dir)
                .map(|e| e.id),
        );
        let bytes = tree.encode();
        drop(tree);
        put(&mut w, &mut index, id, &bytes)?;
        stats.trees += 1;
        stats.bytes += bytes.len() as u64;
    }
    stats.objects = index.len() as u64;
    stats.pack_bytes = finish(w, index)?;
    Ok(stats)
}

/// Writes a record or tree object, stored raw (they were never compressed: small, and a
/// trees-only pack is read whole into memory).
fn put(
    w: &mut HashingWriter<'_>,
    index: &mut Vec<PackEntry>,
    id: ObjectId,
    bytes: &[u8],
) -> Result<(), StoreError> {
    index.push(PackEntry {
        id,
        offset: w.written,
        stored_len: bytes.len() as u64,
        len: bytes.len() as u64,
        zstd: false,
    });
    w.write_all(bytes).map_err(write_err)
}

/// Where a pack's bytes are read from: the file (positioned reads), or a copy read whole
/// into memory (a small pack such as a snapshot's tree index: one sequential read).
#[derive(Debug)]
enum Backing {
    File(Arc<File>),
    /// The bytes as read: an `Arc<Vec<u8>>`, not an `Arc<[u8]>`, whose conversion copied the
    /// whole buffer (1.4 MB for the tree index of the 19,859-file corpus, read by every mount:
    /// 6% of the mount daemon's CPU before it answered, in a perf profile).
    Memory(Arc<Vec<u8>>),
}

impl Backing {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self {
            Backing::File(file) => file.read_exact_at(buf, offset),
            Backing::Memory(bytes) => {
                let start = usize::try_from(offset).ok();
                let range = start.and_then(|s| Some(s..s.checked_add(buf.len())?));
                match range.and_then(|r| bytes.get(r)) {
                    Some(src) => {
                        buf.copy_from_slice(src);
                        Ok(())
                    }
                    None => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "read past the end of the pack",
                    )),
                }
            }
        }
    }
}

/// A pack's header and index, checked as [`PackReader::open`] checks them: what a reader
/// that fetches byte ranges from elsewhere (a remote object store) needs to find objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackLayout {
    /// The snapshot the pack carries.
    pub root: ObjectId,
    /// The base of an incremental pack.
    pub base: Option<ObjectId>,
    /// A digest pack: trees and the record only.
    pub trees_only: bool,
    /// The index, sorted by id.
    pub entries: Vec<PackEntry>,
    /// Where the index starts.
    pub index_offset: u64,
    /// The trailer's blake3 of every byte before it.
    pub digest: ObjectId,
    /// Where the signature section lies (offset, length): the gap between the end of the last
    /// object and the index, if any (see `pack_format`).
    pub signatures_at: Option<(u64, u64)>,
}

impl PackLayout {
    /// The entry of `id`, if the pack holds it.
    pub fn entry(&self, id: &ObjectId) -> Option<&PackEntry> {
        self.entries
            .binary_search_by(|e| e.id.cmp(id))
            .ok()
            .map(|i| &self.entries[i])
    }
}

/// What a pack's header says.
pub(crate) struct PackHeader {
    /// It holds trees (and records) only.
    pub(crate) trees_only: bool,
    /// Its root object: a snapshot record, or a tree index's root tree.
    pub(crate) root: ObjectId,
    /// The snapshot an update pack builds on.
    pub(crate) base: Option<ObjectId>,
}

/// Parses the first [`HEADER_LEN`] bytes of pack `path`: magic, format, flags, root, base.
pub(crate) fn parse_pack_header(path: &Path, header: &[u8]) -> Result<PackHeader, StoreError> {
    if header.len() < HEADER_LEN as usize || &header[..8] != MAGIC {
        return Err(bad(
            path,
            "does not start with the pack magic (not a zeroclaw-bundle pack)",
        ));
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if version != PACK_VERSION {
        return Err(bad(
            path,
            format!("is pack format {version}; this build reads format {PACK_VERSION}"),
        ));
    }
    let flags = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes"));
    if flags & !FLAG_TREES_ONLY != 0 {
        return Err(bad(path, format!("has unknown flags {flags:#x}")));
    }
    let root = ObjectId::from_bytes(header[16..48].try_into().expect("32 bytes"));
    let base_bytes: [u8; 32] = header[48..80].try_into().expect("32 bytes");
    let base = (base_bytes != [0; 32]).then(|| ObjectId::from_bytes(base_bytes));
    Ok(PackHeader {
        trees_only: flags & FLAG_TREES_ONLY != 0,
        root,
        base,
    })
}

/// Reads and checks the layout of a pack of `size` bytes through `read(offset, len)`, which
/// returns exactly `len` bytes at `offset` (each call lies inside `0..size`; the largest is
/// the index, whose length is checked against `size` first). `path` names the pack in errors.
pub fn read_pack_layout(
    path: &Path,
    size: u64,
    read: &mut dyn FnMut(u64, usize) -> Result<Vec<u8>, StoreError>,
) -> Result<PackLayout, StoreError> {
    if size < HEADER_LEN + 8 + TRAILER_LEN {
        return Err(bad(
            path,
            format!("is {size} bytes, too short to be a pack"),
        ));
    }
    let PackHeader {
        trees_only,
        root,
        base,
    } = parse_pack_header(path, &read(0, HEADER_LEN as usize)?)?;

    let trailer = read(size - TRAILER_LEN, TRAILER_LEN as usize)?;
    if &trailer[40..48] != END {
        return Err(bad(path, "has no pack trailer (truncated or not a pack)"));
    }
    let index_offset = u64::from_le_bytes(trailer[..8].try_into().expect("8 bytes"));
    let digest = ObjectId::from_bytes(trailer[8..40].try_into().expect("32 bytes"));
    let index_end = size - TRAILER_LEN;
    if index_offset < HEADER_LEN || index_offset > index_end - 8 {
        return Err(bad(
            path,
            format!("its index offset {index_offset} lies outside the file ({size} bytes)"),
        ));
    }
    let count = u64::from_le_bytes(read(index_offset, 8)?.try_into().expect("8 bytes"));
    let room = index_end - index_offset - 8;
    if count.checked_mul(ENTRY_LEN) != Some(room) {
        return Err(bad(
            path,
            format!("its index claims {count} objects but holds {room} bytes of entries"),
        ));
    }
    // `room` is within the file, so this allocation is bounded by the pack's size.
    let raw = read(index_offset + 8, room as usize)?;
    let mut index = Vec::with_capacity(count as usize);
    for chunk in raw.chunks_exact(ENTRY_LEN as usize) {
        let (entry, flags) = decode_entry(chunk);
        if flags & !FLAG_ZSTD != 0 {
            return Err(bad(
                path,
                format!("an index entry has unknown flags {flags:#x}"),
            ));
        }
        index.push(entry);
    }
    for pair in index.windows(2) {
        if pair[0].id >= pair[1].id {
            return Err(bad(
                path,
                if pair[0].id == pair[1].id {
                    format!("its index lists object {} twice", pair[0].id.short(12))
                } else {
                    "its index is not sorted by id".to_string()
                },
            ));
        }
    }
    // An empty object stores nothing, so it may share its offset with the next object.
    let mut by_offset: Vec<&PackEntry> = index.iter().collect();
    by_offset.sort_by_key(|e| (e.offset, e.stored_len));
    let mut end_of_previous = HEADER_LEN;
    for e in &by_offset {
        let end = e.offset.checked_add(e.stored_len);
        let overlaps = e.stored_len > 0 && e.offset < end_of_previous;
        if overlaps || e.offset < HEADER_LEN || end.is_none_or(|end| end > index_offset) {
            return Err(bad(
                path,
                format!(
                    "object {} at {}+{} overlaps another or lies outside the object area",
                    e.id.short(12),
                    e.offset,
                    e.stored_len
                ),
            ));
        }
        if !e.zstd && e.len != e.stored_len {
            return Err(bad(
                path,
                format!(
                    "object {} claims {} bytes but stores {}",
                    e.id.short(12),
                    e.len,
                    e.stored_len
                ),
            ));
        }
        end_of_previous = end_of_previous.max(e.offset + e.stored_len);
    }
    let signatures_at =
        (end_of_previous < index_offset).then(|| (end_of_previous, index_offset - end_of_previous));
    if index.binary_search_by(|e| e.id.cmp(&root)).is_err() {
        return Err(bad(
            path,
            format!("does not hold its snapshot record {}", root.short(12)),
        ));
    }
    Ok(PackLayout {
        root,
        base,
        trees_only,
        entries: index,
        index_offset,
        digest,
        signatures_at,
    })
}

/// A pack opened for reading: its header and index, checked against the file.
#[derive(Debug)]
pub struct PackReader {
    path: PathBuf,
    file: Backing,
    /// The snapshot the pack carries.
    pub root: ObjectId,
    /// The base of an incremental pack.
    pub base: Option<ObjectId>,
    /// A digest pack: trees and the record only.
    pub trees_only: bool,
    index: Vec<PackEntry>,
    index_offset: u64,
    digest: ObjectId,
    signatures_at: Option<(u64, u64)>,
}

impl PackReader {
    /// Opens `path` and checks its structure (not yet its bytes: see [`PackReader::verify`]).
    pub fn open(path: &Path) -> Result<PackReader, StoreError> {
        PackReader::open_within(path, 0)
    }

    /// Opens `path` like [`PackReader::open`], but a pack of at most `in_memory` bytes is read
    /// whole into memory with one sequential read and its trailer checksum is checked at once
    /// (cheap at that size): later reads cost no system call. A larger pack is read with
    /// positioned reads, as by [`PackReader::open`].
    pub fn open_within(path: &Path, in_memory: u64) -> Result<PackReader, StoreError> {
        let file = File::open(path).map_err(|e| StoreError::io("open pack", path, e))?;
        PackReader::from_file_within(path, file, in_memory)
    }

    /// [`PackReader::open_within`] of `file`, already opened from `path`.
    pub(crate) fn from_file_within(
        path: &Path,
        mut file: File,
        in_memory: u64,
    ) -> Result<PackReader, StoreError> {
        let size = file
            .metadata()
            .map_err(|e| StoreError::io("stat pack", path, e))?
            .len();
        let file = if size <= in_memory {
            // Bounded by `in_memory`, and by the size the file had when opened: a file that
            // grows meanwhile is not read past it.
            // One read of the whole size: from a cold cache, a read that grows its buffer
            // step by step waits on the disk once per step.
            let mut bytes = vec![0u8; size as usize];
            file.read_exact(&mut bytes).map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => {
                    bad(path, format!("shrank from {size} bytes while read"))
                }
                _ => StoreError::io("read pack", path, e),
            })?;
            Backing::Memory(Arc::new(bytes))
        } else {
            Backing::File(Arc::new(file))
        };
        let in_memory = matches!(file, Backing::Memory(_));
        let reader = PackReader::open_backing(path, file, size)?;
        if in_memory {
            reader.check_trailer()?;
        }
        Ok(reader)
    }

    fn open_backing(path: &Path, file: Backing, size: u64) -> Result<PackReader, StoreError> {
        let layout = read_pack_layout(path, size, &mut |offset, len| {
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, offset)
                .map_err(|e| StoreError::io("read pack", path, e))?;
            Ok(buf)
        })?;
        Ok(PackReader {
            path: path.to_path_buf(),
            file,
            root: layout.root,
            base: layout.base,
            trees_only: layout.trees_only,
            index: layout.entries,
            index_offset: layout.index_offset,
            digest: layout.digest,
            signatures_at: layout.signatures_at,
        })
    }

    /// The pack's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the pack was read whole into memory when opened.
    pub fn is_in_memory(&self) -> bool {
        matches!(self.file, Backing::Memory(_))
    }

    /// The index, sorted by id.
    pub fn entries(&self) -> &[PackEntry] {
        &self.index
    }

    /// The entry of `id`, if the pack holds it.
    pub fn entry(&self, id: &ObjectId) -> Option<&PackEntry> {
        self.index
            .binary_search_by(|e| e.id.cmp(id))
            .ok()
            .map(|i| &self.index[i])
    }

    /// Tree `id` read, verified and decoded by `decode`: borrowed where it lies when the pack
    /// is in memory, else the bytes read (which a decoder keeping them takes without a copy).
    fn decoded_tree<T>(
        &self,
        id: &ObjectId,
        decode: fn(Cow<'_, [u8]>) -> Result<T, DecodeError>,
    ) -> Result<T, StoreError> {
        let decoded = match self.verified_in_memory(id) {
            Some(bytes) => decode(Cow::Borrowed(bytes)),
            None => decode(Cow::Owned(self.read(id)?)),
        };
        decoded.map_err(|why| StoreError::Malformed {
            id: *id,
            what: "tree",
            why,
        })
    }

    /// An uncompressed object's bytes where they lie, in a pack held in memory, when they are
    /// its recorded length and hash to its id (no copy: a mount's start reads every tree of
    /// its index this way); `None` for anything else, which [`PackReader::read`] reads, and
    /// whose damage it names.
    fn verified_in_memory(&self, id: &ObjectId) -> Option<&[u8]> {
        let Backing::Memory(all) = &self.file else {
            return None;
        };
        let e = self.entry(id)?;
        if e.zstd || e.stored_len != e.len || e.len > MAX_IN_MEMORY_OBJECT {
            return None;
        }
        let start = usize::try_from(e.offset).ok()?;
        let bytes = all.get(start..start.checked_add(usize::try_from(e.len).ok()?)?)?;
        (ObjectId::of(bytes) == e.id).then_some(bytes)
    }

    /// The uncompressed bytes of `id`, hashed and compared with it: for trees and records,
    /// which are read into memory; an object that claims more than `MAX_IN_MEMORY_OBJECT` (64 MiB)
    /// bytes is refused before anything is read (blobs stream: [`ObjectSource::blob`]).
    pub fn read(&self, id: &ObjectId) -> Result<Vec<u8>, StoreError> {
        let e = *self.entry(id).ok_or(StoreError::MissingObject(*id))?;
        if e.len > MAX_IN_MEMORY_OBJECT {
            return Err(bad(
                &self.path,
                format!(
                    "object {} claims {} bytes; a tree or record is read into memory only up to {} bytes",
                    e.id.short(12),
                    e.len,
                    MAX_IN_MEMORY_OBJECT
                ),
            ));
        }
        let mut stored = vec![0u8; e.stored_len as usize];
        self.file
            .read_exact_at(&mut stored, e.offset)
            .map_err(|err| StoreError::io("read pack", &self.path, err))?;
        if !e.zstd {
            // Checked where it lies (length and hash, the same checks and messages), not
            // copied: the 6 MB encoding of the scale test's 100,000-entry directory was held
            // twice while a mount read it.
            decode_pack_object(&self.path, &e, &mut &stored[..], &mut io::sink())?;
            return Ok(stored);
        }
        // A compressed entry's declared length is not trusted for the allocation.
        let mut bytes = Vec::new();
        let decoded = decode_pack_object(&self.path, &e, &mut &stored[..], &mut bytes);
        crate::heap::release(stored);
        decoded.map(|()| bytes)
    }

    /// Reads entry `e`'s stored (possibly compressed) bytes into `buf`, resized to its stored
    /// length (checked against the file when the pack was opened).
    pub(crate) fn read_stored(&self, e: &PackEntry, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        buf.clear();
        buf.resize(e.stored_len as usize, 0);
        self.file
            .read_exact_at(buf, e.offset)
            .map_err(|err| StoreError::io("read pack", &self.path, err))
    }

    /// A sequential reader over entry `e`'s stored bytes (positioned reads: several readers
    /// of one pack run at once).
    pub(crate) fn stored_reader(&self, e: &PackEntry) -> StoredReader<'_> {
        StoredReader {
            file: &self.file,
            pos: e.offset,
            end: e.offset + e.stored_len,
        }
    }

    /// The signatures of the pack's snapshot carried in its signature section (opaque bytes;
    /// none when it has no section, as a pack of an older writer). Checked for form and bounds
    /// only: the trailer hash ([`PackReader::verify`]) covers the section, and what a signature
    /// proves is the caller's to check.
    pub fn signatures(&self) -> Result<Vec<Vec<u8>>, StoreError> {
        let Some((offset, len)) = self.signatures_at else {
            return Ok(Vec::new());
        };
        let most = 12
            + crate::limits::MAX_SIGNATURES as u64
                * (4 + crate::limits::MAX_SIGNATURE_BYTES as u64);
        if len > most {
            return Err(bad(
                &self.path,
                format!(
                    "holds {len} bytes between its objects and its index, more than a signature \
                     section can be"
                ),
            ));
        }
        let mut buf = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut buf, offset)
            .map_err(|e| StoreError::io("read pack", &self.path, e))?;
        decode_signatures(&buf).map_err(|why| bad(&self.path, why))
    }

    /// The snapshot record the pack carries.
    pub fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let bytes = self.read(&self.root)?;
        Snapshot::decode(&bytes).map_err(|why| StoreError::Malformed {
            id: self.root,
            what: "snapshot record",
            why,
        })
    }

    /// Checks the trailer hash over every byte before it, then every object against its id,
    /// that every tree and the record decode, and that a signature section is well formed. Nothing is trusted until this passes.
    pub fn verify(&self) -> Result<(), StoreError> {
        self.verify_objects()?;
        self.snapshot()?;
        self.signatures()?;
        Ok(())
    }

    /// The part of [`PackReader::verify`] that holds for any pack, a tree-rooted one (a
    /// store's tree index) too: the trailer hash, then every object against its id.
    pub(crate) fn verify_objects(&self) -> Result<(), StoreError> {
        self.check_trailer()?;
        for e in &self.index {
            // Streamed into nothing: memory stays bounded whatever the objects' sizes.
            let mut stored = io::BufReader::with_capacity(64 << 10, self.stored_reader(e));
            decode_pack_object(&self.path, e, &mut stored, &mut io::sink())?;
        }
        Ok(())
    }

    /// Checks the trailer hash over every byte before it (one sequential read of the pack):
    /// what a reader that serves the pack in place (`diff`, `mount`) checks first, so a
    /// damaged pack is refused before anything is compared or listed, as `unpack` refuses it.
    pub fn check_trailer(&self) -> Result<(), StoreError> {
        let mut hasher = IdHasher::new();
        let end = self.index_offset + 8 + self.index.len() as u64 * ENTRY_LEN;
        let mut pos = 0u64;
        if let Backing::Memory(bytes) = &self.file {
            // `end` is the trailer's position, checked against the size at open.
            hasher.update(&bytes[..end as usize]);
            pos = end;
        }
        let mut buf = vec![0u8; if pos < end { 1 << 20 } else { 0 }];
        while pos < end {
            let n = ((end - pos) as usize).min(buf.len());
            self.file
                .read_exact_at(&mut buf[..n], pos)
                .map_err(|e| StoreError::io("read pack", &self.path, e))?;
            hasher.update(&buf[..n]);
            pos += n as u64;
        }
        if hasher.finish() != self.digest {
            return Err(bad(
                &self.path,
                "its trailer checksum does not match its content (corrupt or truncated)",
            ));
        }
        Ok(())
    }

    /// Ids of the objects reached from the pack's root that it does not hold (for an
    /// incremental pack: what the base must provide), given a way to test the store.
    pub fn missing(&self, has: &dyn Fn(&ObjectId) -> bool) -> Result<Vec<ObjectId>, StoreError> {
        let snap = self.snapshot()?;
        let mut missing = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![snap.root];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            if self.entry(&id).is_none() {
                if !has(&id) {
                    missing.push(id);
                }
                continue;
            }
            let tree = self.tree(&id)?;
            for e in tree.entries() {
                if e.kind == EntryKind::Dir {
                    stack.push(e.id);
                } else if self.entry(&e.id).is_none()
                    && !self.trees_only
                    && !has(&e.id)
                    && seen.insert(e.id)
                {
                    missing.push(e.id);
                }
            }
        }
        Ok(missing)
    }
}

/// See [`PackReader::stored_reader`].
pub(crate) struct StoredReader<'p> {
    file: &'p Backing,
    pos: u64,
    end: u64,
}

impl Read for StoredReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.end - self.pos).unwrap_or(usize::MAX));
        self.file.read_exact_at(&mut buf[..n], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Decodes the stored bytes of pack entry `e`, read from `stored`, into `out`: decompressed
/// (capped at the entry's length, so a decompression bomb stops there) when the entry is
/// zstd, its length checked and its bytes hashed and compared with its id as they stream.
/// `path` names the pack in errors; on an error `out` holds bytes that must not be trusted.
pub fn decode_pack_object(
    path: &Path,
    e: &PackEntry,
    stored: &mut dyn Read,
    out: &mut dyn Write,
) -> Result<(), StoreError> {
    let mut sink = HashingSink {
        out,
        hasher: IdHasher::new(),
        written: 0,
        out_failed: false,
    };
    let mut limited = stored.take(e.stored_len);
    // One byte past the declared length tells "longer than it says" from "exactly"; a declared
    // length of 2^64-1 cannot be passed anyway (saturating, never wrapping to 0).
    let cap = e.len.saturating_add(1);
    let copied = if e.zstd {
        let mut decoder = zstd::stream::read::Decoder::new(&mut limited)
            .map_err(|err| bad(path, format!("object {}: {err}", e.id.short(12))))?;
        decoder
            .window_log_max(STREAM_WINDOW_LOG)
            .map_err(|err| bad(path, format!("object {}: {err}", e.id.short(12))))?;
        io::copy(&mut decoder.take(cap), &mut sink)
    } else {
        io::copy(&mut (&mut limited).take(cap), &mut sink)
    };
    copied.map_err(|err| {
        if sink.out_failed {
            // The destination refused the bytes (a full disk): not the pack's fault.
            StoreError::io("write an object decoded from", path, err)
        } else if sink.written > 0 || e.zstd {
            bad(
                path,
                format!("object {} does not decompress: {err}", e.id.short(12)),
            )
        } else {
            StoreError::io("read pack", path, err)
        }
    })?;
    if sink.written != e.len {
        return Err(bad(
            path,
            format!(
                "object {} {} {} bytes, not the {} its index says",
                e.id.short(12),
                if e.zstd { "decompresses to" } else { "stores" },
                if sink.written > e.len {
                    format!("more than {}", e.len)
                } else {
                    sink.written.to_string()
                },
                e.len
            ),
        ));
    }
    let actual = sink.hasher.finish();
    if actual != e.id {
        return Err(corrupt_in_pack(path, &e.id, &actual));
    }
    Ok(())
}

/// Hashes and counts what passes through to `out`.
struct HashingSink<'o> {
    out: &'o mut dyn Write,
    hasher: IdHasher,
    written: u64,
    /// A write to `out` failed (the error is the destination's, not the pack's).
    out_failed: bool,
}

impl Write for HashingSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self
            .out
            .write(buf)
            .inspect_err(|_| self.out_failed = true)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush().inspect_err(|_| self.out_failed = true)
    }
}

impl ObjectSource for PackReader {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.decoded_tree(id, |bytes| Tree::decode(&bytes))
    }

    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        // The view keeps the bytes read (no second copy of a 12 MB encoding).
        self.decoded_tree(id, |bytes| TreeView::decode(bytes.into_owned()))
    }

    fn tree_shape(&self, id: &ObjectId) -> Result<TreeShape, StoreError> {
        self.decoded_tree(id, |bytes| TreeShape::decode(&bytes))
    }

    /// An uncompressed blob is a range of the pack file (positioned reads, no copy); a
    /// compressed one (or any blob of a pack held in memory) is decoded (verified) as it
    /// streams into an unnamed temporary file: memory stays at a 1 MiB read buffer, the write
    /// buffer and the zstd window (`STREAM_WINDOW_LOG`, 8 MiB), whatever the blob's size.
    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        let e = *self.entry(id).ok_or(StoreError::MissingObject(*id))?;
        if let (false, Backing::File(file)) = (e.zstd, &self.file) {
            return Ok(Blob::from_range(Arc::clone(file), e.offset, e.len));
        }
        let tmp_dir = std::env::temp_dir();
        let tmp = tempfile_in_tmp()
            .map_err(|err| StoreError::io("create temporary file", &tmp_dir, err))?;
        let mut stored = io::BufReader::with_capacity(1 << 20, self.stored_reader(&e));
        let mut out = io::BufWriter::with_capacity(1 << 20, &tmp);
        decode_pack_object(&self.path, &e, &mut stored, &mut out)?;
        out.flush()
            .map_err(|err| StoreError::io("write temporary file", &tmp_dir, err))?;
        drop(out);
        Ok(Blob::from_range(Arc::new(tmp), 0, e.len))
    }

    /// The index says how long the blob is: a tree that records another size is refused
    /// before anything is read or decompressed.
    fn blob_of_size(&self, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
        let e = self.entry(id).ok_or(StoreError::MissingObject(*id))?;
        if e.len != size {
            return Err(StoreError::WrongLength {
                id: *id,
                len: e.len,
                recorded: size,
            });
        }
        self.blob(id)
    }
}

/// A pack read in place, over the store that holds its base when it is an update: the
/// objects the pack carries come from the pack, the rest (what the base reaches, unchanged
/// since) from the store. So an update received as a `--since` pack can be mounted or diffed
/// before it is unpacked; any other pack reads as itself.
#[derive(Debug)]
pub struct PackOverStore {
    pack: PackReader,
    store: Option<StoreReader>,
}

impl PackOverStore {
    /// `pack`, over the store whose objects are `objects` when the pack is incremental and
    /// the store holds its base snapshot's record.
    pub fn new(pack: PackReader, objects: Option<&ObjectDir>) -> PackOverStore {
        let store = match (pack.base, objects) {
            (Some(base), Some(objects)) if objects.read_snapshot(&base).is_ok() => {
                Some(objects.reader())
            }
            _ => None,
        };
        PackOverStore { pack, store }
    }

    /// The pack.
    pub fn pack(&self) -> &PackReader {
        &self.pack
    }

    /// Whether objects the pack lacks are read from a store.
    pub fn layered(&self) -> bool {
        self.store.is_some()
    }
}

impl ObjectSource for PackOverStore {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        match (self.pack.tree(id), &self.store) {
            (Err(StoreError::MissingObject(_)), Some(store)) => store.tree(id),
            (found, _) => found,
        }
    }

    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        match (self.pack.tree_view(id), &self.store) {
            (Err(StoreError::MissingObject(_)), Some(store)) => store.tree_view(id),
            (found, _) => found,
        }
    }

    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        match (self.pack.blob(id), &self.store) {
            (Err(StoreError::MissingObject(_)), Some(store)) => store.blob(id),
            (found, _) => found,
        }
    }

    fn blob_of_size(&self, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
        match (self.pack.blob_of_size(id, size), &self.store) {
            (Err(StoreError::MissingObject(_)), Some(store)) => store.blob_of_size(id, size),
            (found, _) => found,
        }
    }
}

/// A pack of exactly `objects` (bytes, stored with zstd?) carrying snapshot `root`: what a
/// hostile sender can write (objects the snapshot does not reach, any declared length).
#[cfg(test)]
pub(crate) fn craft_pack(
    root: ObjectId,
    base: Option<ObjectId>,
    objects: &[(Vec<u8>, bool)],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&PACK_VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(root.as_bytes());
    out.extend_from_slice(&base.map(|b| *b.as_bytes()).unwrap_or([0; 32]));
    let mut index = Vec::new();
    for (bytes, zstd) in objects {
        let stored = if *zstd {
            zstd::bulk::compress(bytes, ZSTD_LEVEL).expect("zstd compresses")
        } else {
            bytes.clone()
        };
        index.push(PackEntry {
            id: ObjectId::of(bytes),
            offset: out.len() as u64,
            stored_len: stored.len() as u64,
            len: bytes.len() as u64,
            zstd: *zstd,
        });
        out.extend_from_slice(&stored);
    }
    index.sort_by_key(|e| e.id);
    let index_offset = out.len() as u64;
    out.extend_from_slice(&encode_index(&index));
    let digest = ObjectId::of(&out);
    out.extend_from_slice(&encode_trailer(index_offset, &digest));
    out
}

/// An unnamed temporary file in the system's temporary directory.
fn tempfile_in_tmp() -> io::Result<File> {
    crate::sys::unnamed_file(&std::env::temp_dir())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use crate::tree::TreeEntry;

    /// A store with one snapshot: a tree holding a compressible file, a small one and a
    /// subdirectory.
    fn fixture() -> (tempfile::TempDir, Store, ObjectId) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let big = vec![b'z'; 10_000];
        let small = b"hello\n".to_vec();
        let file = |name: &str, bytes: &[u8]| store.file_entry_for_test(name, bytes);
        let sub = Tree::from_entries(vec![file("s.txt", &small), file("empty", b"")]).unwrap();
        let sub_id = store.objects().write_tree(&sub).unwrap();
        let root = Tree::from_entries(vec![
            file("big.txt", &big),
            file("hello.txt", &small),
            TreeEntry {
                name: b"sub".to_vec(),
                kind: EntryKind::Dir,
                mode: 0o755,
                size: small.len() as u64,
                id: sub_id,
            },
        ])
        .unwrap();
        let root_id = store.objects().write_tree(&root).unwrap();
        let snap = Snapshot::for_test(root_id, "test");
        let lock = store.write_lock().unwrap();
        let id = store.catalog().commit_snapshot(&lock, &snap, None).unwrap();
        (dir, store, id)
    }

    fn pack_bytes(store: &Store, id: &ObjectId, options: PackOptions) -> Vec<u8> {
        let mut out = Vec::new();
        store
            .packs()
            .write(id, options, &mut out, &mut |_| {})
            .unwrap();
        out
    }

    fn open_bytes(dir: &Path, bytes: &[u8]) -> Result<PackReader, StoreError> {
        let path = dir.join("p.zcpack");
        std::fs::write(&path, bytes).unwrap();
        let reader = PackReader::open(&path)?;
        reader.verify()?;
        Ok(reader)
    }

    #[test]
    fn round_trip_between_two_stores() {
        let (dir, store, id) = fixture();
        let bytes = pack_bytes(&store, &id, PackOptions::default());
        let reader = open_bytes(dir.path(), &bytes).unwrap();
        assert_eq!(reader.root, id);
        assert_eq!(
            reader.entries().len(),
            6,
            "record, 2 trees, 3 distinct blobs (one is shared, one is empty)"
        );
        assert!(
            reader.entries().iter().any(|e| e.zstd),
            "the 10 kB file compresses"
        );
        let other = Store::open_or_create(&dir.path().join("other")).unwrap();
        assert_eq!(other.packs().unpack(&reader).unwrap(), id);
        assert!(other
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
        // A digest pack has the record and trees only.
        let digest = pack_bytes(
            &store,
            &id,
            PackOptions {
                trees_only: true,
                since: None,
            },
        );
        let d = open_bytes(dir.path(), &digest).unwrap();
        assert_eq!(d.entries().len(), 3);
        assert!(d.trees_only);
    }

    #[test]
    fn excluding_packs_split_a_snapshot_and_import_from_several() {
        let (dir, store, id) = fixture();
        let snap = store.objects().read_snapshot(&id).unwrap();
        let root = store.objects().read_tree(&snap.root).unwrap();
        let sub = root.entries().iter().find(|e| e.name == b"sub").unwrap().id;
        // First pack: everything but the subtree and what only it holds.
        let sub_tree = store.objects().read_tree(&sub).unwrap();
        let only_sub: Vec<ObjectId> = sub_tree
            .entries()
            .iter()
            .map(|e| e.id)
            .filter(|i| !root.entries().iter().any(|e| e.id == *i))
            .chain([sub])
            .collect();
        let mut first = Vec::new();
        store
            .packs()
            .write_excluding(&id, &|o| only_sub.contains(o), &mut first, &mut |_| {})
            .unwrap();
        let p1_path = dir.path().join("p1");
        std::fs::write(&p1_path, &first).unwrap();
        let p1 = PackReader::open(&p1_path).unwrap();
        p1.verify().unwrap();
        let in_first: Vec<ObjectId> = p1.entries().iter().map(|e| e.id).collect();
        // Second pack: what the first lacks (descended through every tree, record included).
        let mut second = Vec::new();
        let stats = store
            .packs()
            .write_excluding(&id, &|o| in_first.contains(o), &mut second, &mut |_| {})
            .unwrap();
        assert_eq!(stats.objects, 1 + only_sub.len() as u64, "{stats:?}");
        let p2_path = dir.path().join("p2");
        std::fs::write(&p2_path, &second).unwrap();
        let p2 = PackReader::open(&p2_path).unwrap();
        let record = store.objects().read_verified(&id).unwrap();

        let other = Store::open_or_create(&dir.path().join("other")).unwrap();
        let (missing, _) = other
            .packs()
            .closure_needs(std::slice::from_ref(&p1), &snap.root)
            .unwrap();
        assert_eq!(
            missing,
            vec![sub],
            "the subtree is found nowhere, not descended"
        );
        assert!(matches!(
            other.packs().import(&id, &record, std::slice::from_ref(&p1), &crate::packs::NoWatch),
            Err(StoreError::MissingObject(m)) if m == sub
        ));
        assert!(other
            .catalog()
            .session()
            .unwrap()
            .snapshots()
            .unwrap()
            .is_empty());
        // A record that is not the id's is refused before anything.
        let mut lie = record.clone();
        lie.push(b' ');
        assert!(other
            .packs()
            .import(&id, &lie, &[], &crate::packs::NoWatch)
            .is_err());
        let packs = [p1, p2];
        assert_eq!(
            other
                .packs()
                .import(&id, &record, &packs, &crate::packs::NoWatch)
                .unwrap(),
            id
        );
        assert!(other
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
        assert_eq!(
            other
                .catalog()
                .session()
                .unwrap()
                .snapshots()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused_without_panic() {
        let (dir, store, id) = fixture();
        let bytes = pack_bytes(&store, &id, PackOptions::default());
        for len in 0..bytes.len() {
            let err = open_bytes(dir.path(), &bytes[..len]).expect_err("truncated");
            assert!(err.to_string().contains("p.zcpack"), "{err}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x41;
            assert!(
                open_bytes(dir.path(), &bad).is_err(),
                "flip at {at} accepted"
            );
        }
    }

    /// Rewrites one index entry (and the trailer hash, so only the structure checks can catch it).
    fn tamper(bytes: &[u8], f: &mut dyn FnMut(&mut Vec<PackEntry>)) -> Vec<u8> {
        let n = bytes.len();
        let index_offset = u64::from_le_bytes(bytes[n - 48..n - 40].try_into().unwrap()) as usize;
        let count = u64::from_le_bytes(bytes[index_offset..index_offset + 8].try_into().unwrap());
        let mut entries: Vec<PackEntry> = (0..count as usize)
            .map(|i| {
                let at = index_offset + 8 + i * ENTRY_LEN as usize;
                decode_entry(&bytes[at..at + ENTRY_LEN as usize]).0
            })
            .collect();
        f(&mut entries);
        let mut out = bytes[..index_offset].to_vec();
        out.extend_from_slice(&encode_index(&entries));
        let digest = ObjectId::of(&out);
        out.extend_from_slice(&encode_trailer(index_offset as u64, &digest));
        out
    }

    #[test]
    fn lying_indexes_are_refused_by_name() {
        let (dir, store, id) = fixture();
        let bytes = pack_bytes(&store, &id, PackOptions::default());
        let zstd_at = |e: &Vec<PackEntry>| e.iter().position(|e| e.zstd).unwrap();
        type Tamper = Box<dyn FnMut(&mut Vec<PackEntry>)>;
        let cases: Vec<(&str, Tamper)> = vec![
            (
                "outside the object area",
                Box::new(|e| e[0].offset = 1 << 40),
            ),
            (
                "outside the object area",
                Box::new(|e| e[0].stored_len = u64::MAX),
            ),
            ("overlaps", Box::new(|e| e[1].offset = e[0].offset)),
            ("not sorted", Box::new(|e| e.swap(0, 1))),
            ("twice", Box::new(|e| e[1].id = e[0].id)),
            (
                "claims",
                Box::new(|e| {
                    let i = e.iter().position(|x| !x.zstd).unwrap();
                    e[i].len += 1;
                }),
            ),
            (
                "decompresses to",
                Box::new(move |e| {
                    let i = zstd_at(e);
                    e[i].len = 5; // a bomb against its cap, and a lie
                }),
            ),
            (
                "decompresses to",
                Box::new(move |e| {
                    let i = zstd_at(e);
                    e[i].len += 1;
                }),
            ),
            (
                "hashes to",
                Box::new(|e| {
                    let (a, b) = (e[0].offset, e[0].stored_len);
                    let j = e
                        .iter()
                        .position(|x| !x.zstd && x.stored_len == b && x.offset != a);
                    if let Some(j) = j {
                        e[0].offset = e[j].offset; // points at another object of the same size
                    }
                    e[0].id = ObjectId::of(b"nothing");
                    e.sort_by_key(|x| x.id);
                }),
            ),
        ];
        for (needle, mut f) in cases {
            let bad = tamper(&bytes, &mut *f);
            let err = open_bytes(dir.path(), &bad).expect_err(needle);
            let text = err.to_string();
            assert!(text.contains("p.zcpack"), "{text}");
            assert!(
                text.contains(needle)
                    || text.contains("overlaps")
                    || text.contains("snapshot record"),
                "want {needle:?}: {text}"
            );
        }
        // A huge count: the index size check refuses it before anything is allocated.
        let mut bad = bytes.clone();
        let n = bad.len();
        let io = u64::from_le_bytes(bad[n - 48..n - 40].try_into().unwrap()) as usize;
        bad[io..io + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = PackReader::open(&{
            let p = dir.path().join("huge.zcpack");
            std::fs::write(&p, &bad).unwrap();
            p
        })
        .expect_err("huge count");
        assert!(err.to_string().contains("claims"), "{err}");
    }

    #[test]
    fn since_leaves_out_what_the_base_has() {
        let (dir, store, base) = fixture();
        let snap = store.objects().read_snapshot(&base).unwrap();
        let tree = store.objects().read_tree(&snap.root).unwrap();
        let mut entries = tree.entries().to_vec();
        entries.push(TreeEntry {
            name: b"new.txt".to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size: 3,
            id: store.objects().write_bytes(b"new").unwrap(),
        });
        let root = store
            .objects()
            .write_tree(&Tree::from_entries(entries).unwrap())
            .unwrap();
        let lock = store.write_lock().unwrap();
        let next = store
            .catalog()
            .commit_snapshot(
                &lock,
                &Snapshot {
                    root,
                    created_unix_ns: 2,
                    ..snap
                },
                None,
            )
            .unwrap();
        let bytes = pack_bytes(
            &store,
            &next,
            PackOptions {
                since: Some(base),
                trees_only: false,
            },
        );
        let reader = open_bytes(dir.path(), &bytes).unwrap();
        // The record, the new root tree and the new blob: `sub` and the old blobs stay out.
        assert_eq!(reader.entries().len(), 3);
        assert_eq!(reader.base, Some(base));
        let empty = Store::open_or_create(&dir.path().join("empty")).unwrap();
        let err = empty.packs().unpack(&reader).expect_err("base missing");
        assert!(err.to_string().contains(&base.short(12)), "{err}");
        assert!(empty
            .catalog()
            .session()
            .unwrap()
            .snapshots()
            .unwrap()
            .is_empty());
        let full = pack_bytes(&store, &base, PackOptions::default());
        empty
            .packs()
            .unpack(&open_bytes(dir.path(), &full).unwrap())
            .unwrap();
        let reader = open_bytes(dir.path(), &bytes).unwrap();
        assert_eq!(empty.packs().unpack(&reader).unwrap(), next);
        assert!(empty
            .maintenance()
            .verify(&mut |_, _| {})
            .unwrap()
            .problems
            .is_empty());
    }

    /// A received snapshot never takes over a local name, and one dated in the future (which
    /// would stay `agent/<alias>` over every later local export) is refused.
    #[test]
    fn a_received_record_does_not_take_over_local_refs() {
        let (dir, store, id) = fixture();
        let snap = store.objects().read_snapshot(&id).unwrap();
        let lock = store.write_lock().unwrap();
        let named = store
            .catalog()
            .commit_snapshot(
                &lock,
                &Snapshot {
                    name: Some("prod".into()),
                    created_unix_ns: 5,
                    ..snap.clone()
                },
                None,
            )
            .unwrap();
        let future = store
            .catalog()
            .commit_snapshot(
                &lock,
                &Snapshot {
                    created_unix_ns: i128::from(i64::MAX),
                    ..snap.clone()
                },
                None,
            )
            .unwrap();
        drop(lock);
        let other = Store::open_or_create(&dir.path().join("other")).unwrap();
        let lock = other.write_lock().unwrap();
        let local = other
            .catalog()
            .commit_snapshot(
                &lock,
                &Snapshot {
                    name: Some("prod".into()),
                    created_unix_ns: 9,
                    ..snap
                },
                None,
            )
            .unwrap();
        drop(lock);
        for (id, needle) in [(named, "already names"), (future, "in the future")] {
            let bytes = pack_bytes(&store, &id, PackOptions::default());
            let err = other
                .packs()
                .unpack(&open_bytes(dir.path(), &bytes).unwrap())
                .expect_err(needle);
            assert!(err.to_string().contains(needle), "{err}");
        }
        let cat = other.catalog().session().unwrap();
        assert_eq!(cat.snapshots().unwrap().len(), 1);
        assert_eq!(cat.name_target("prod").unwrap(), Some(local));
    }
    /// Counts the bytes written through it (how much a reader decompressed).
    struct Counting(u64);
    impl Write for Counting {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Issue 18, "the suite must be able to fail": the decompression cap is measured, not only
    /// the final error. A 64 MiB zstd bomb declared as 10 bytes: every streaming reader stops
    /// one byte past the declared length.
    #[test]
    fn a_decompression_bomb_stops_one_byte_past_its_declared_length() {
        let zeros = vec![0u8; 64 << 20];
        let stored = zstd::bulk::compress(&zeros, ZSTD_LEVEL).unwrap();
        let e = PackEntry {
            id: ObjectId::of(&zeros),
            offset: HEADER_LEN,
            stored_len: stored.len() as u64,
            len: 10,
            zstd: true,
        };
        let mut out = Counting(0);
        let err = decode_pack_object(Path::new("bomb.zcpack"), &e, &mut &stored[..], &mut out)
            .expect_err("a bomb");
        assert_eq!(out.0, 11, "decompressed {} bytes", out.0);
        let text = err.to_string();
        assert!(
            text.contains("bomb.zcpack") && text.contains("decompresses to more than 10"),
            "{text}"
        );
    }

    /// Issue 18, item 9: a declared length of 2^64-1 does not overflow the cap (a debug build
    /// panicked); the entry is refused for what it stores.
    #[test]
    fn a_declared_length_of_u64_max_is_refused_without_overflow() {
        for zstd in [false, true] {
            let bytes = b"abc".to_vec();
            let stored = if zstd {
                zstd::bulk::compress(&bytes, ZSTD_LEVEL).unwrap()
            } else {
                bytes.clone()
            };
            let e = PackEntry {
                id: ObjectId::of(&bytes),
                offset: HEADER_LEN,
                stored_len: stored.len() as u64,
                len: u64::MAX,
                zstd,
            };
            let err = decode_pack_object(
                Path::new("max.zcpack"),
                &e,
                &mut &stored[..],
                &mut io::sink(),
            )
            .expect_err("a lie");
            let text = err.to_string();
            assert!(
                text.contains("max.zcpack")
                    && text.contains(&format!("3 bytes, not the {}", u64::MAX)),
                "{text}"
            );
        }
    }

    /// Issue 18, item 3: a tree that records 10 bytes for a blob the index says is 64 MiB is
    /// refused from the index (the frame here is garbage: decompressing it would fail
    /// differently), and a tree or record claiming more than 64 MiB is never read into
    /// memory; a blob streams into its temporary file.
    #[test]
    fn pack_readers_read_no_more_than_the_tree_and_index_allow() {
        let dir = tempfile::tempdir().unwrap();
        let record = Snapshot::for_test(ObjectId::of(b"t"), "x").encode();
        let zeros = vec![0u8; (64 << 20) + 1];
        let objects = vec![(record.clone(), false), (zeros.clone(), true)];
        let mut pack = craft_pack(ObjectId::of(&record), None, &objects);
        // Garble the zeros' frame (after its magic), keeping the trailer valid.
        let n = pack.len();
        let io = u64::from_le_bytes(pack[n - 48..n - 40].try_into().unwrap()) as usize;
        let frame_at = HEADER_LEN as usize + record.len();
        for b in &mut pack[frame_at + 8..io] {
            *b ^= 0x5a;
        }
        let digest = ObjectId::of(&pack[..n - 48]);
        pack[n - 40..n - 8].copy_from_slice(digest.as_bytes());
        let path = dir.path().join("p.zcpack");
        std::fs::write(&path, &pack).unwrap();
        let reader = PackReader::open(&path).unwrap();
        let zeros_id = ObjectId::of(&zeros);
        match reader.blob_of_size(&zeros_id, 10) {
            Err(StoreError::WrongLength { id, len, recorded }) => {
                assert_eq!((id, len, recorded), (zeros_id, (64 << 20) + 1, 10))
            }
            other => panic!("want WrongLength, got {other:?}"),
        }
        let err = reader.read(&zeros_id).expect_err("too large for memory");
        assert!(
            err.to_string().contains("read into memory only up to"),
            "{err}"
        );
        // Intact, the blob streams (decoded into a temporary file) and verifies.
        std::fs::write(&path, craft_pack(ObjectId::of(&record), None, &objects)).unwrap();
        let reader = PackReader::open(&path).unwrap();
        let blob = reader.blob_of_size(&zeros_id, (64 << 20) + 1).unwrap();
        blob.verify(&zeros_id).unwrap();
    }
}
