//! The stat caches of captures: one file per source at `<store>/dircache/<blake3 of the
//! key>` (a `snapshot` or `export` source, and a hash-only `diff` of a directory,
//! [`SourceKey::Diff`], whose ids name no stored object and whose key says so), outside the
//! catalog. Opening sled replays its log, builds its metrics and starts its I/O threads:
//! measured on the benchmark corpus (4,972 files) that cost about a fifth of a diff of a
//! directory, as much as `git status` spends on its index. And sled holds everything
//! inserted into or read from it in memory: a 300,000-file cache (about 30 MB) written
//! through it kept 30 MB more for the rest of the session, which took a first capture of
//! such a tree past 64 MiB. A file is written in pieces instead, and never loaded whole:
//! one pass checks it and keeps 8 bytes a record (a keyed hash of the path and the
//! record's offset), and a capture reads the records it asks for from the file, through a
//! few windows (at 1.2 million files the records are 122 MB; loaded whole they took a no-op
//! snapshot to 179 MiB).
//!
//! A cache only saves work, so nothing here is synced or locked beyond the store's writer
//! lock the capture already holds: a file is written to `tmp/` and renamed into place (two
//! captures at once: the last rename wins, both files are whole). A snapshot's cache is
//! written after the commit made every blob it names durable; `gc` removes every cache file
//! before it removes any object. A file that is missing, torn, foreign (another key, another
//! format) or fails its checksum reads as an empty cache: the next capture hashes the
//! directory again and rewrites it. A source whose cache an older version kept in the
//! catalog is read from there until its next commit writes the file (see
//! `Catalog::load_source_cache`).
//!
//! Looking there costs a catalog session (sled replays its log, starts its threads and
//! builds its page tables), on every first capture of a source and every first publish to a
//! destination. So a store whose catalog holds none says so: the empty file
//! [`NO_CATALOG_CACHES`] at its root, made with every new store, and by any lookup or `gc`
//! that finds the catalog's caches and records all gone. It is a hint that only saves work: a
//! cache an older build writes into the catalog after it is made is not read, and that source
//! is hashed again, as after `gc`.
//!
//! The destination records of publishes (the stat of each file a checkout or export wrote)
//! are files of the same shape at `<store>/destcache/<blake3 of the key>` ([`DEST_MAGIC`],
//! the time the stats were taken after the key), written and read the same way; sled held
//! them whole (a checkout of 1.2 million files peaked at 163 MiB). An older version's record
//! in the catalog is read while there is no whole file.
//!
//! Format: [`MAGIC`], the key's length (u32 big-endian) and bytes, the records (the catalog's
//! `{path_len:u16 path entry}` encoding), then the blake3 of everything before it (32 bytes).
//! The records are in no required order (the index does not need one); a writer puts the
//! kept ones in the old file's order, then the new ones in walk order, which keeps the
//! file in about the order the next walk asks.

use std::cell::{Cell, RefCell};
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::keys::{DestKey, SourceKey};
use super::session::{
    record_at, CatalogSession, DestCache, DestRecord, EachRecord, SourceStatCache, StatCacheUpdate,
    StatEntry, STAT_LEN,
};
use super::Catalog;
use crate::error::StoreError;
use crate::id::{IdHasher, ObjectId};
use crate::sys::{self, random_token};

/// The directory of these caches, below the store root.
pub(crate) const DIR: &str = "dircache";
/// What every cache file starts with (the format version is its last byte).
const MAGIC: &[u8] = b"zeroclaw-bundle dircache 1\n";
/// The directory of the destination records, below the store root (not cleared by `gc`
/// with the caches: a record is checked against the tree being published, never looked up
/// in the store).
pub(crate) const DEST_DIR: &str = "destcache";
/// What every destination record file starts with; its key is followed by the time the
/// stats were taken (i64 big-endian ns), then the records.
const DEST_MAGIC: &[u8] = b"zeroclaw-bundle destcache 1\n";
/// The file at the store's root saying its catalog holds no stat cache and no destination
/// record (see the module doc).
pub(crate) const NO_CATALOG_CACHES: &str = "catalog.no-caches";
/// A cache file above this is not read (a real one holds about 100 bytes per file).
const MAX_FILE: u64 = 1 << 32;
/// Bytes read at a time while a cache file is checked.
const PIECE: usize = 64 * 1024;

/// Makes [`NO_CATALOG_CACHES`] at `root`. A hint: failing to make it only leaves the
/// lookups in the catalog.
pub(crate) fn mark_no_catalog_caches(root: &Path) {
    let _ = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(root.join(NO_CATALOG_CACHES));
}

impl Catalog<'_> {
    /// Whether the catalog may still hold an older version's stat caches or destination
    /// records (no [`NO_CATALOG_CACHES`] at the root).
    pub(crate) fn may_hold_caches(&self) -> bool {
        fs::symlink_metadata(self.root().join(NO_CATALOG_CACHES)).is_err()
    }

    /// Marks the store when `session` shows its catalog holds no cache and no record.
    pub(crate) fn mark_if_cache_free(&self, session: &CatalogSession) {
        if session.holds_no_caches() {
            mark_no_catalog_caches(self.root());
        }
    }

    /// An older version's record of destination `key` in the catalog, when it may hold one.
    fn catalog_dest_record(&self, key: &DestKey) -> Result<Option<DestCache>, StoreError> {
        if !self.may_hold_caches() {
            return Ok(None);
        }
        let session = self.session()?;
        let record = session.load_dest_cache(key)?;
        self.mark_if_cache_free(&session);
        Ok(record)
    }

    /// Where the cache of `key` lives.
    fn dircache_path(&self, key: &[u8]) -> PathBuf {
        self.root().join(DIR).join(ObjectId::of(key).to_hex())
    }

    /// The cache of source `key`: `None` when there is no file, empty when it is unusable
    /// (see the module doc). Fails only when the file exists and cannot be read
    /// (permissions, an I/O error), naming it. Checked and indexed in one pass (see
    /// [`read_index`]); the records stay in the file and are read as the capture asks.
    pub(crate) fn load_dircache(
        &self,
        key: &SourceKey,
    ) -> Result<Option<SourceStatCache>, StoreError> {
        let key = key.encode();
        let path = self.dircache_path(&key);
        // Not followed and never blocking: the cache is a regular file this tool wrote, and a
        // symlink to `/dev/zero` or a FIFO put in its place must not fill memory or hang the
        // capture. Whatever is not a regular file of at most `MAX_FILE` bytes is no cache.
        let read = sys::open_regular(&path).and_then(|file| match file {
            None => Ok(None),
            Some(file) => read_index(file, &header(MAGIC, &key), 0, &path),
        });
        match read {
            Ok(Some((cache, _))) => Ok(Some(SourceStatCache::from_file(cache))),
            Ok(None) => Ok(Some(SourceStatCache::empty())),
            // Nothing there (also when `dircache` is not a directory: the write then fails
            // too, quietly, and each capture hashes again).
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(StoreError::io("read stat cache", path, e)),
        }
    }

    /// Removes every cache file (`gc`, before it removes objects a cache may name).
    pub(crate) fn clear_dircaches(&self) -> Result<(), StoreError> {
        let dir = self.root().join(DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StoreError::io("read", &dir, e)),
        };
        for entry in entries {
            let path = entry.map_err(|e| StoreError::io("read", &dir, e))?.path();
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", &path, e)),
            }
        }
        Ok(())
    }

    /// Writes the cache a capture left (nothing when it is unchanged): to `tmp/`, then
    /// renamed over the old one.
    pub(crate) fn write_dircache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        if update.is_empty() {
            return Ok(());
        }
        let key = update.key();
        self.replace_dircache_file(&self.dircache_path(key), "dircache", &|tmp| {
            write_file(tmp, &header(MAGIC, key), &[], &|f| {
                update.for_each_record(f)
            })
        })
    }

    /// Where the record of destination `key` lives.
    fn dest_path(&self, key: &[u8]) -> PathBuf {
        self.root().join(DEST_DIR).join(ObjectId::of(key).to_hex())
    }

    /// The record a previous publish left at destination `key`, if any: its file under
    /// `destcache/`, checked and indexed like a source's cache (its records stay in the
    /// file); without a whole one, what an older version kept in the catalog. Fails only
    /// when the catalog cannot be opened or read.
    pub fn load_dest_record(&self, key: &DestKey) -> Result<Option<DestCache>, StoreError> {
        let encoded = key.encode();
        let path = self.dest_path(&encoded);
        let read = sys::open_regular(&path).and_then(|file| match file {
            None => Ok(None),
            Some(file) => read_index(file, &header(DEST_MAGIC, &encoded), 8, &path),
        });
        if let Ok(Some((cache, at))) = read {
            let at = <[u8; 8]>::try_from(&at[..]).map_or(0, i64::from_be_bytes);
            return Ok(Some(DestCache::new(SourceStatCache::from_file(cache), at)));
        }
        self.catalog_dest_record(key)
    }

    /// Whether a publish left a record at destination `key` (a whole file's header, or an
    /// older version's record in the catalog), without reading the records.
    pub fn has_dest_record(&self, key: &DestKey) -> Result<bool, StoreError> {
        let encoded = key.encode();
        let head = header(DEST_MAGIC, &encoded);
        let path = self.dest_path(&encoded);
        if let Ok(Some(file)) = sys::open_regular(&path) {
            let mut got = vec![0u8; head.len()];
            if matches!(read_full(&mut &file, &mut got), Ok(true)) && got == head {
                return Ok(true);
            }
        }
        Ok(self.catalog_dest_record(key)?.is_some())
    }

    /// Records what a publish left at destination `key`, replacing any earlier record: a
    /// file under `destcache/` (records streamed from where they were collected, never
    /// through sled: at 1.2 million files sled held the 122 MB it was given, and a checkout
    /// peaked at 163 MiB). An older version's record in the catalog is left alone: the
    /// file is read first, and `gc` removes both.
    pub fn store_dest_record(&self, key: &DestKey, record: &DestRecord) -> Result<(), StoreError> {
        let encoded = key.encode();
        let at = record.recorded_at_ns().to_be_bytes();
        self.replace_dircache_file(&self.dest_path(&encoded), "destcache", &|tmp| {
            write_file(tmp, &header(DEST_MAGIC, &encoded), &at, &|f| {
                record.for_each_record(f)
            })
        })
    }

    /// Removes the record files of destinations `gone` says no longer exist, and files
    /// that are no record (torn, foreign); returns how many records went. A key that cannot
    /// name its destination exactly stays (see [`DestKey::decode`]).
    pub(crate) fn remove_dest_files(
        &self,
        gone: &dyn Fn(&Path) -> bool,
    ) -> Result<u64, StoreError> {
        let dir = self.root().join(DEST_DIR);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(StoreError::io("read", &dir, e)),
        };
        let mut removed = 0;
        for entry in entries {
            let path = entry.map_err(|e| StoreError::io("read", &dir, e))?.path();
            let doomed = match dest_file_key(&path) {
                Some(key) => match DestKey::decode(&key) {
                    Some(dest) if gone(&dest) => {
                        removed += 1;
                        true
                    }
                    _ => false,
                },
                None => true,
            };
            if doomed {
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(StoreError::io("remove", &path, e)),
                }
            }
        }
        Ok(removed)
    }

    /// Writes a file of `dircache/` or `destcache/` whole: `write` fills a new file under `tmp/` (named
    /// `<tag>-<token>`), which is then renamed to `dest` (two writers at once: the last
    /// rename wins, both files are whole). A failure leaves nothing in `tmp/`.
    pub(crate) fn replace_dircache_file(
        &self,
        dest: &Path,
        tag: &str,
        write: &dyn Fn(&Path) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let dir = dest.parent().unwrap_or(self.root());
        fs::create_dir_all(dir).map_err(|e| StoreError::io("create", dir, e))?;
        let tmp = self
            .objects()
            .tmp_dir()
            .join(format!("{tag}-{}", random_token()));
        let written = write(&tmp)
            .and_then(|()| fs::rename(&tmp, dest).map_err(|e| StoreError::io("rename", dest, e)));
        if written.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        written
    }
}

/// The bytes a cache file of `key` starts with.
fn header(magic: &[u8], key: &[u8]) -> Vec<u8> {
    [magic, &(key.len() as u32).to_be_bytes()[..], key].concat()
}

/// The key a destination record file names, from its header; `None` when it is no record
/// file (foreign, torn in its header, not a regular file).
fn dest_file_key(path: &Path) -> Option<Vec<u8>> {
    let file = sys::open_regular(path).ok()??;
    let mut input = io::BufReader::new(file);
    let mut head = vec![0u8; DEST_MAGIC.len() + 4];
    if !read_full(&mut input, &mut head).ok()? || &head[..DEST_MAGIC.len()] != DEST_MAGIC {
        return None;
    }
    let len = u32::from_be_bytes(head[DEST_MAGIC.len()..].try_into().ok()?);
    let mut key = vec![0u8; usize::try_from(len).ok()?.min(1 << 16)];
    read_full(&mut input, &mut key).ok()?.then_some(key)
}

/// Writes a cache file at `path`: `head` (see [`header`]), `extra`, the records `records`
/// gives, then the checksum (see the format above), streaming: the records are never
/// gathered in one buffer.
fn write_file(
    path: &Path,
    head: &[u8],
    extra: &[u8],
    records: &EachRecord<'_>,
) -> Result<(), StoreError> {
    let failed = |e| StoreError::io("write", path, e);
    // 256 KiB writes: the corpus's 2 MB cache went out in 250 writes of 8 KiB.
    let mut out = io::BufWriter::with_capacity(1 << 18, fs::File::create(path).map_err(failed)?);
    let mut sum = IdHasher::new();
    let mut put = |out: &mut io::BufWriter<fs::File>, bytes: &[u8]| {
        sum.update(bytes);
        out.write_all(bytes).map_err(failed)
    };
    put(&mut out, head)?;
    put(&mut out, extra)?;
    records(&mut |record| put(&mut out, record))?;
    out.write_all(sum.finish().as_bytes()).map_err(failed)?;
    out.flush().map_err(failed)
}

/// A whole, checksummed cache file starting with `want_head` then `extra` bytes (returned),
/// indexed for lookups that read its records from
/// the file as they are asked for; `None` for anything else (torn, foreign, another key, a
/// failed checksum). One sequential pass hashes the file and keeps, per record, 32 bits of a
/// keyed hash of its path and its offset (8 bytes a record: 10 MB at 1.2 million files, where
/// the records themselves are 122 MB). The file is never written in place (a new cache is
/// renamed over it), so the open file keeps the bytes the pass checked.
fn read_index(
    file: fs::File,
    want_head: &[u8],
    extra: usize,
    path: &Path,
) -> io::Result<Option<(CacheFile, Vec<u8>)>> {
    let len = file.metadata()?.len();
    let header = (want_head.len() + extra) as u64;
    if len > MAX_FILE || len < header + 32 {
        return Ok(None);
    }
    let end = len - 32;
    let mut input = io::BufReader::with_capacity(PIECE, (&file).take(len));
    let mut sum = IdHasher::new();
    let mut head = vec![0u8; header as usize];
    if !read_full(&mut input, &mut head)? {
        return Ok(None);
    }
    sum.update(&head);
    if head[..want_head.len()] != *want_head {
        return Ok(None);
    }
    let extra = head.split_off(want_head.len());
    let hasher = std::collections::hash_map::RandomState::new();
    let mut slots = Vec::new();
    let mut left = end - header;
    // Offset (from the first record) of `block[0]`.
    let mut block_at = 0u64;
    let mut block: Vec<u8> = Vec::with_capacity(2 * PIECE);
    while left > 0 {
        let start = block.len();
        let want = (PIECE as u64).min(left) as usize;
        block.resize(start + want, 0);
        if !read_full(&mut input, &mut block[start..])? {
            return Ok(None);
        }
        sum.update(&block[start..]);
        left -= want as u64;
        let mut pos = 0;
        while let Some((record_path, _, next)) = record_at(&block, pos) {
            // Below `MAX_FILE`, so every offset fits.
            let offset = u32::try_from(block_at + pos as u64).unwrap_or(u32::MAX);
            slots.push(slot(&hasher, record_path, offset));
            pos = next;
        }
        block.drain(..pos);
        block_at += pos as u64;
    }
    let mut stored = [0u8; 32];
    if !block.is_empty() || !read_full(&mut input, &mut stored)? {
        return Ok(None);
    }
    if sum.finish().as_bytes() != &stored {
        return Ok(None);
    }
    drop(input);
    slots.sort_unstable();
    slots.shrink_to_fit();
    let cache = CacheFile {
        file,
        path: path.to_path_buf(),
        start: header,
        records: end - header,
        slots,
        hasher,
        windows: RefCell::new(Vec::new()),
        used: Cell::new(0),
        cursor: Cell::new(0),
    };
    Ok(Some((cache, extra)))
}

/// The index slot of a record: 32 bits of the keyed hash of its path, then its offset. Keyed
/// per load, so names chosen to collide cannot be made to (a run of equal hashes is searched
/// record by record).
fn slot(hasher: &std::collections::hash_map::RandomState, path: &[u8], offset: u32) -> u64 {
    use std::hash::BuildHasher;
    (hasher.hash_one(path) >> 32) << 32 | u64::from(offset)
}

/// Bytes of records one window of a [`CacheFile`] holds: more than the longest record (a
/// 64 KiB path and its entry).
const WINDOW: usize = 128 * 1024;
/// Windows a [`CacheFile`] keeps: the walk asks for records in about the order they were
/// written, and for a directory's own record after its files.
const WINDOWS: usize = 4;
/// The shortest record (an empty path and its entry): record offsets divided by it are
/// distinct, so they number the "kept" bits.
pub(crate) const MIN_RECORD: u64 = 2 + STAT_LEN as u64;

/// A checked cache file being used by a capture (see [`read_index`]): its records are read
/// from the file through a few windows of [`WINDOW`] bytes when asked for. Memory: 8 bytes a
/// record and the windows, never the records.
pub(crate) struct CacheFile {
    file: fs::File,
    /// For error messages.
    path: PathBuf,
    /// Where the records start in the file.
    start: u64,
    /// Bytes of records.
    records: u64,
    /// `hash32 << 32 | offset` per record, sorted.
    slots: Vec<u64>,
    hasher: std::collections::hash_map::RandomState,
    /// (offset, bytes, last use) of the records read.
    windows: RefCell<Vec<(u64, Vec<u8>, u64)>>,
    /// Lookups so far (the windows' clock).
    used: Cell<u64>,
    /// The offset just past the last record found: the walk most often asks for the next
    /// record next, found there without hashing its path.
    cursor: Cell<u64>,
}

impl CacheFile {
    /// Records in the file.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// How many "kept" bits the records need (see [`MIN_RECORD`]).
    pub(crate) fn positions(&self) -> usize {
        self.records.div_ceil(MIN_RECORD) as usize
    }

    /// The entry for `path` and its position (its offset over [`MIN_RECORD`]).
    pub(crate) fn get(&self, path: &[u8]) -> Option<(usize, StatEntry)> {
        let cursor = self.cursor.get();
        if let Some(found) = self.probe(cursor, path) {
            return Some(found);
        }
        let want = slot(&self.hasher, path, 0) >> 32;
        let first = self.first_slot(want);
        self.slots[first..]
            .iter()
            .take_while(|s| *s >> 32 == want)
            .find_map(|s| self.probe(s & u64::from(u32::MAX), path))
    }

    /// The first slot whose hash is `want` or more. The hashes are uniform, so the slot is
    /// near `want / 2^32` of the way through: searched outwards from there (a few nearby
    /// cache lines), not by bisecting all of them (about 20 probes, most of them cache
    /// misses, which made a no-op capture of 400,000 files a tenth slower).
    fn first_slot(&self, want: u64) -> usize {
        let n = self.slots.len();
        if n == 0 {
            return 0;
        }
        let key = |i: usize| self.slots[i] >> 32;
        let guess = (((u128::from(want) * n as u128) >> 32) as usize).min(n - 1);
        // Every slot below `lo` is below `want`; every one from `hi` on is not.
        let (mut lo, mut hi) = (0, n);
        let mut step = 1;
        if key(guess) < want {
            lo = guess + 1;
            while guess + step < n {
                if key(guess + step) >= want {
                    hi = guess + step;
                    break;
                }
                lo = guess + step + 1;
                step *= 2;
            }
        } else {
            hi = guess;
            while step <= guess {
                if key(guess - step) < want {
                    lo = guess - step + 1;
                    break;
                }
                hi = guess - step;
                step *= 2;
            }
        }
        lo + self.slots[lo..hi].partition_point(|s| s >> 32 < want)
    }

    /// The entry of the record at `offset` when its path is `path`; moves the cursor past it.
    /// An unreadable file reads as a miss (a cache only saves work).
    fn probe(&self, offset: u64, path: &[u8]) -> Option<(usize, StatEntry)> {
        if offset >= self.records {
            return None;
        }
        let clock = self.used.get() + 1;
        self.used.set(clock);
        let mut windows = self.windows.borrow_mut();
        let hit = windows.iter().position(|(at, bytes, _)| {
            offset >= *at && record_at(bytes, (offset - at) as usize).is_some()
        });
        let w = match hit {
            Some(w) => w,
            None => {
                let len = (WINDOW as u64).min(self.records - offset) as usize;
                let w = if windows.len() < WINDOWS {
                    windows.push((offset, vec![0u8; WINDOW], 0));
                    windows.len() - 1
                } else {
                    let oldest = windows.iter().enumerate().min_by_key(|(_, w)| w.2);
                    oldest.map_or(0, |(w, _)| w)
                };
                let (at, bytes, _) = &mut windows[w];
                bytes.resize(len, 0);
                if self.file.read_exact_at(bytes, self.start + offset).is_err() {
                    bytes.clear();
                    return None;
                }
                *at = offset;
                w
            }
        };
        let (at, bytes, last) = &mut windows[w];
        *last = clock;
        let (found, entry, next) = record_at(bytes, (offset - *at) as usize)?;
        if found != path {
            return None;
        }
        self.cursor.set(*at + next as u64);
        Some(((offset / MIN_RECORD) as usize, StatEntry::decode(entry)?))
    }

    /// Calls `f` with each record whose position `keep` accepts, in file order.
    pub(crate) fn for_each_kept(
        &self,
        keep: &dyn Fn(usize) -> bool,
        f: &mut dyn FnMut(&[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let failed = |e| StoreError::io("read stat cache", &self.path, e);
        let mut block = vec![0u8; 2 * WINDOW];
        let mut carried = 0;
        let mut at = 0u64;
        // Offset of `block[0]`.
        let mut block_at = 0u64;
        while at < self.records {
            let want = (block.len() - carried).min((self.records - at) as usize);
            self.file
                .read_exact_at(&mut block[carried..carried + want], self.start + at)
                .map_err(failed)?;
            at += want as u64;
            let filled = carried + want;
            let mut pos = 0;
            while let Some((_, _, end)) = record_at(&block[..filled], pos) {
                if keep(((block_at + pos as u64) / MIN_RECORD) as usize) {
                    f(&block[pos..end])?;
                }
                pos = end;
            }
            block.copy_within(pos..filled, 0);
            carried = filled - pos;
            block_at += pos as u64;
        }
        Ok(())
    }

    /// Calls `f` with every entry, in file order.
    pub(crate) fn for_each_entry(&self, f: &mut dyn FnMut(StatEntry)) -> Result<(), StoreError> {
        self.for_each_kept(&|_| true, &mut |record| {
            if let Some((_, entry, _)) = record_at(record, 0) {
                if let Some(entry) = StatEntry::decode(entry) {
                    f(entry);
                }
            }
            Ok(())
        })
    }
}

/// Fills `buf`; false when the input ends first.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<bool> {
    match input.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::session::StatEntry;
    use super::*;
    use crate::catalog::DestRecord;
    use crate::handle::Store;
    use std::path::Path;

    /// The cache of `key`, which must have a file (damaged or not).
    fn load(store: &Store, key: &SourceKey) -> SourceStatCache {
        store
            .catalog()
            .load_dircache(key)
            .unwrap()
            .expect("a cache file")
    }

    fn entry(size: u64) -> StatEntry {
        StatEntry {
            dev: 1,
            ino: 2,
            size,
            mtime_ns: 3,
            ctime_ns: 4,
            exec: false,
            id: ObjectId::of(b"x"),
        }
    }

    #[test]
    fn round_trip_and_every_damage_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let key = SourceKey::Diff("/srv/bundle".into());
        assert!(
            store.catalog().load_dircache(&key).unwrap().is_none(),
            "no file, no cache"
        );
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(5));
        cache.put(b"b/c.md", &entry(7));
        store
            .catalog()
            .write_dircache(&cache.into_update(&key))
            .unwrap();
        let loaded = load(&store, &key);
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded.get(b"b/c.md").unwrap().1, entry(7));
        // Unchanged: no write (the file keeps its bytes even if it were damaged).
        let path = store.catalog().dircache_path(&key.encode());
        let before = fs::read(&path).unwrap();
        let mut again = load(&store, &key);
        for p in [&b"a.md"[..], b"b/c.md"] {
            let (at, _) = again.get(p).unwrap();
            again.keep(at);
        }
        assert!(again.into_update(&key).is_empty());
        // Another key never reads this file's records, even at its path.
        let other = SourceKey::Diff("/srv/other".into());
        fs::copy(&path, store.catalog().dircache_path(&other.encode())).unwrap();
        assert!(load(&store, &other).is_empty());
        // Torn, flipped, foreign format: empty, never an error, never a wrong entry.
        for damaged in [
            before[..before.len() - 1].to_vec(),
            before[..10].to_vec(),
            Vec::new(),
            {
                let mut b = before.clone();
                let n = b.len();
                b[n - 40] ^= 1;
                b
            },
            [b"zeroclaw-bundle dircache 9\n", &before[MAGIC.len()..]].concat(),
        ] {
            fs::write(&path, &damaged).unwrap();
            assert!(load(&store, &key).is_empty());
        }
        // Not a regular file: a symlink (even to a whole cache of this key), a FIFO (would
        // block the read) or a device (`/dev/zero` would fill memory) reads as no cache,
        // promptly.
        let whole = dir.path().join("whole-cache");
        fs::write(&whole, &before).unwrap();
        for target in [whole.as_path(), Path::new("/dev/zero")] {
            fs::remove_file(&path).unwrap();
            std::os::unix::fs::symlink(target, &path).unwrap();
            assert!(load(&store, &key).is_empty(), "{target:?}");
        }
        fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(load(&store, &key).is_empty());
        fs::remove_file(&path).unwrap();
        // No temp file is left behind.
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
        // `dircache` not a directory: nothing to read; the write fails naming the path, and
        // leaves no temp file either.
        fs::remove_dir_all(store.root().join(DIR)).unwrap();
        fs::write(store.root().join(DIR), b"").unwrap();
        assert!(store.catalog().load_dircache(&key).unwrap().is_none());
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(5));
        let err = store
            .catalog()
            .write_dircache(&cache.into_update(&key))
            .unwrap_err();
        assert!(err.to_string().contains(DIR), "{err}");
        assert_eq!(fs::read_dir(store.objects().tmp_dir()).unwrap().count(), 0);
    }

    /// A cache of a directory of 200,000 files (and a few elsewhere) is read from its file as
    /// asked for: every entry is found in walk order and out of it, a missing one is not, and
    /// the update keeps exactly the entries marked kept plus the new ones.
    #[test]
    fn a_large_directory_is_found_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let key = SourceKey::Diff("/srv/big".into());
        let name = |i: u32| format!("big/entry-{i:06}.txt").into_bytes();
        let mut cache = SourceStatCache::empty();
        cache.put(b"a.md", &entry(1));
        for i in 0..200_000 {
            cache.put(&name(i), &entry(u64::from(i) + 10));
        }
        cache.put(b"big/", &entry(2));
        cache.put(b"z/last.md", &entry(3));
        store
            .catalog()
            .write_dircache(&cache.into_update(&key))
            .unwrap();
        // The search from the interpolated guess agrees with a bisection everywhere.
        let path = store.catalog().dircache_path(&key.encode());
        let file = fs::File::open(&path).unwrap();
        let (indexed, _) = read_index(file, &header(MAGIC, &key.encode()), 0, &path)
            .unwrap()
            .unwrap();
        let hashes = indexed.slots.iter().map(|s| s >> 32);
        let probes = hashes.flat_map(|h| [h, h + 1, h.saturating_sub(1)]);
        for want in probes.chain([0, u64::from(u32::MAX), 1 << 31]) {
            let bisected = indexed.slots.partition_point(|s| s >> 32 < want);
            assert_eq!(indexed.first_slot(want), bisected, "{want}");
        }
        let mut loaded = load(&store, &key);
        assert_eq!(loaded.len(), 200_003);
        assert!(loaded.in_file(), "{loaded:?}");
        // In walk order: a directory's files, then its own record.
        for i in 0..200_000 {
            let (at, got) = loaded.get(&name(i)).unwrap();
            assert_eq!(got, entry(u64::from(i) + 10));
            if i % 1000 != 7 {
                loaded.keep(at);
            }
        }
        let (at, got) = loaded.get(b"big/").unwrap();
        assert_eq!(got, entry(2));
        loaded.keep(at);
        // Out of order, far apart, and the same one twice.
        for i in [199_999, 3, 150_000, 3, 0] {
            assert_eq!(loaded.get(&name(i)).unwrap().1, entry(u64::from(i) + 10));
        }
        assert_eq!(loaded.get(b"z/last.md").unwrap().1, entry(3));
        assert_eq!(loaded.get(b"a.md").unwrap().1, entry(1));
        assert!(loaded.get(b"big/entry-200000.txt").is_none());
        assert!(loaded.get(b"big/entry-00000.txt").is_none());
        assert!(loaded.get(b"").is_none());
        loaded.put(b"new.md", &entry(4));
        store
            .catalog()
            .write_dircache(&loaded.into_update(&key))
            .unwrap();
        let again = load(&store, &key);
        // 200,000 - 200 dropped + `big/` + `new.md`.
        assert_eq!(again.len(), 199_802);
        assert!(again.get(&name(7)).is_none());
        assert!(again.get(b"a.md").is_none(), "not kept");
        assert_eq!(again.get(&name(8)).unwrap().1, entry(18));
        assert_eq!(again.get(b"new.md").unwrap().1, entry(4));
        assert_eq!(again.get(b"big/").unwrap().1, entry(2));
    }

    /// A file written by an earlier version (records in path order, then the new ones in walk
    /// order; the format has not changed) is read as it is: its records in any order, a path
    /// stored twice found once.
    #[test]
    fn a_file_in_any_order_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let key = SourceKey::Diff("/srv/old".into());
        let encoded = key.encode();
        let mut bytes = [MAGIC, &(encoded.len() as u32).to_be_bytes()[..], &encoded].concat();
        let mut records = Vec::new();
        for (path, size) in [
            (&b"b/x.md"[..], 5),
            (b"a/", 6),
            (b"a/y.md", 7),
            (b"a/y.md", 7),
            (b"", 8),
            (b"a", 9),
        ] {
            super::super::session::push_record(&mut records, path, &entry(size));
        }
        bytes.extend_from_slice(&records);
        let sum = ObjectId::of(&bytes);
        bytes.extend_from_slice(sum.as_bytes());
        fs::create_dir_all(store.root().join(DIR)).unwrap();
        fs::write(store.catalog().dircache_path(&encoded), &bytes).unwrap();
        let mut loaded = load(&store, &key);
        for (path, size) in [(&b"a/y.md"[..], 7), (b"b/x.md", 5), (b"a/", 6), (b"a", 9)] {
            let (at, got) = loaded.get(path).unwrap();
            assert_eq!(got, entry(size), "{}", String::from_utf8_lossy(path));
            loaded.keep(at);
        }
        assert!(loaded.get(b"a/z.md").is_none());
        // The empty path and the second copy were not kept: the new file drops them.
        store
            .catalog()
            .write_dircache(&loaded.into_update(&key))
            .unwrap();
        let again = load(&store, &key);
        assert_eq!(again.len(), 4);
        assert!(again.get(b"").is_none());
        assert_eq!(again.get(b"a/y.md").unwrap().1, entry(7));
    }

    /// A destination's record goes to a file of its own (never through sled) and is read
    /// from it in place; without a whole file, an older version's record in the catalog is
    /// read; gc's sweep removes the files of destinations that are gone and files that are
    /// no record.
    #[test]
    fn a_destination_record_is_a_file_read_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let catalog = store.catalog();
        let (here, gone) = (dir.path().join("here"), dir.path().join("gone"));
        let key = DestKey::new(&here);
        assert!(catalog.load_dest_record(&key).unwrap().is_none());
        assert!(!catalog.has_dest_record(&key).unwrap());
        let mut record = DestRecord::new(1234);
        for i in 0..5000u64 {
            record.push(format!("workspace/f{i}").as_bytes(), &entry(i));
        }
        catalog.store_dest_record(&key, &record).unwrap();
        let loaded = catalog.load_dest_record(&key).unwrap().expect("recorded");
        assert_eq!((loaded.len(), loaded.recorded_at_ns()), (5000, 1234));
        assert_eq!(loaded.get(b"workspace/f4321"), Some(entry(4321)));
        assert!(loaded.get(b"workspace/f5000").is_none());
        assert!(catalog.has_dest_record(&key).unwrap());
        // Nothing of it went into the catalog.
        assert!(catalog
            .session()
            .unwrap()
            .load_dest_cache(&key)
            .unwrap()
            .is_none());
        // A torn file: the older version's record in the catalog is read instead, in a store
        // an older version made (a new one says its catalog holds none, and is not asked).
        let path = catalog.dest_path(&key.encode());
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let mut old = DestRecord::new(99);
        old.push(b"workspace/old", &entry(7));
        catalog
            .session()
            .unwrap()
            .store_dest_cache(&key, &old)
            .unwrap();
        assert!(catalog.load_dest_record(&key).unwrap().is_none());
        fs::remove_file(store.root().join(NO_CATALOG_CACHES)).unwrap();
        let loaded = catalog
            .load_dest_record(&key)
            .unwrap()
            .expect("the catalog's");
        assert_eq!((loaded.len(), loaded.recorded_at_ns()), (1, 99));
        assert!(catalog.may_hold_caches(), "it holds one");
        fs::write(&path, &bytes).unwrap();
        // The sweep: a gone destination's file goes, a present one's stays, a foreign file goes.
        catalog
            .store_dest_record(&DestKey::new(&gone), &DestRecord::new(5))
            .unwrap();
        fs::write(store.root().join(DEST_DIR).join("stray"), b"not a record").unwrap();
        let removed = catalog.remove_dest_files(&|p| p == gone).unwrap();
        assert_eq!(removed, 1);
        let left: Vec<_> = fs::read_dir(store.root().join(DEST_DIR))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(left, vec![path]);
        // gc's clearing of the stat caches leaves the records.
        catalog.clear_dircaches().unwrap();
        assert_eq!(catalog.load_dest_record(&key).unwrap().unwrap().len(), 5000);
    }
}
