//! The catalog: the only code that names sled. An index over snapshot records (list, names,
//! per-agent latest) in the `snapshots` and `names` trees, the stat caches older versions
//! kept of incremental capture in `stat` (keyed by [`SourceKey`]; read when a source has no
//! cache file yet and removed by its next commit: a cache lives in a file of its own now, see
//! `dircache`), and the destination records of publish in `dest` (keyed by [`DestKey`]). Everything here can be rebuilt from the objects (`reindex`),
//! except the caches and records, which only save work.
//!
//! The catalog's format version is the value of its format key. Format 1 (destination records
//! in `stat`) is migrated in place when opened: each record is copied to `dest`, then removed
//! from `stat`, then the version is written (a crash in between repeats the copy, which is
//! idempotent). Any other value, or a catalog without the key, is set aside and rebuilt.
//!
//! sled holds an exclusive lock on its directory while open, so a [`CatalogSession`] is opened for
//! the moment a command needs it and dropped right after. A second process waits (polling)
//! up to a timeout and then fails with [`StoreError::CatalogBusy`], never a raw lock error.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::dircache::CacheFile;
use super::keys::{DestKey, SourceKey};
use super::records::Records;
use super::refs::{self, RefTable};
use crate::error::StoreError;
use crate::id::ObjectId;
use crate::snapshot::{Snapshot, SnapshotKind};

/// How long to wait for another process to release the catalog, unless
/// `ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS` says otherwise.
const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(20);

/// sled's page cache bound. The catalog is small and opened briefly; its default (1 GiB)
/// would let a large stat-cache update dominate a capture's memory.
const SLED_CACHE_BYTES: u64 = 8 * 1024 * 1024;

/// Written once a new catalog's index is built (see `CatalogSession::from_db`); its value is the
/// catalog's format version.
const FORMAT_KEY: &[u8] = b"zeroclaw-bundle catalog";
/// Format 2: destination records in a tree of their own (`dest`), apart from the capture
/// stat caches (`stat`).
const FORMAT_VALUE: &[u8] = b"2";
/// Format 1 kept destination records in the `stat` tree; opening one migrates it.
const FORMAT_V1: &[u8] = b"1";

/// What `list` shows of a snapshot without loading its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotSummary {
    /// Snapshot id.
    pub id: ObjectId,
    /// Creation time, ns since the epoch.
    pub created_unix_ns: i128,
    /// Plain tree or agent bundle.
    pub kind: SnapshotKind,
    /// Where it came from.
    pub source: String,
    /// Agent alias, if an agent bundle.
    pub agent: Option<String>,
    /// Name, if named.
    pub name: Option<String>,
    /// Files carried.
    pub files: u64,
    /// Bytes carried.
    pub bytes: u64,
    /// Root tree id.
    pub root: ObjectId,
}

impl SnapshotSummary {
    /// The summary of a record.
    pub fn of(id: ObjectId, snap: &Snapshot) -> SnapshotSummary {
        SnapshotSummary {
            id,
            created_unix_ns: snap.created_unix_ns,
            kind: snap.kind,
            source: snap.source.clone(),
            agent: snap.agent.clone(),
            name: snap.name.clone(),
            files: snap.files(),
            bytes: snap.bytes(),
            root: snap.root,
        }
    }
}

/// What to suggest for a reference that matched nothing: the `agent/` ref it may mean, or
/// the forms a reference takes.
fn unknown_hint(reference: &str, all: &[SnapshotSummary]) -> String {
    if all.iter().any(|s| s.agent.as_deref() == Some(reference)) {
        return format!(
            "did you mean `agent/{reference}` (the latest snapshot of agent `{reference}`)?"
        );
    }
    if !reference.is_empty()
        && reference.len() < 8
        && reference.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return format!(
            "an id prefix needs at least 8 hex digits ({} given)",
            reference.len()
        );
    }
    if reference.len() >= 8 && reference.bytes().all(|b| b.is_ascii_hexdigit()) {
        return "no snapshot id starts with it, and no snapshot is named so".to_string();
    }
    "a snapshot is a full id, a unique id prefix of 8+ hex digits, a snapshot name, or \
     agent/<alias>"
        .to_string()
}

/// What to suggest for `agent/<alias>` that matched nothing: the agents the store has.
fn unknown_agent_hint(alias: &str, all: &[SnapshotSummary]) -> String {
    let mut agents: Vec<&str> = all.iter().filter_map(|s| s.agent.as_deref()).collect();
    agents.sort_unstable();
    agents.dedup();
    match agents.len() {
        0 => format!("no snapshot of agent `{alias}`; this store holds no agent snapshot"),
        _ => format!(
            "no snapshot of agent `{alias}`; agents in this store: {}",
            agents
                .iter()
                .map(|a| format!("agent/{a}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One stat-cache entry: what a source file looked like when its blob was last hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatEntry {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Length.
    pub size: u64,
    /// Modification time, ns.
    pub mtime_ns: i64,
    /// Status-change time, ns.
    pub ctime_ns: i64,
    /// Whether it was executable (part of the tree entry).
    pub exec: bool,
    /// The blob id of its content.
    pub id: ObjectId,
}

pub(crate) const STAT_LEN: usize = 8 * 5 + 1 + 32;

impl StatEntry {
    fn encode(&self) -> [u8; STAT_LEN] {
        let mut out = [0u8; STAT_LEN];
        out[0..8].copy_from_slice(&self.dev.to_be_bytes());
        out[8..16].copy_from_slice(&self.ino.to_be_bytes());
        out[16..24].copy_from_slice(&self.size.to_be_bytes());
        out[24..32].copy_from_slice(&self.mtime_ns.to_be_bytes());
        out[32..40].copy_from_slice(&self.ctime_ns.to_be_bytes());
        out[40] = u8::from(self.exec);
        out[41..].copy_from_slice(self.id.as_bytes());
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Option<StatEntry> {
        if b.len() != STAT_LEN {
            return None;
        }
        let u = |r: std::ops::Range<usize>| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[r]);
            a
        };
        let mut id = [0u8; 32];
        id.copy_from_slice(&b[41..]);
        Some(StatEntry {
            dev: u64::from_be_bytes(u(0..8)),
            ino: u64::from_be_bytes(u(8..16)),
            size: u64::from_be_bytes(u(16..24)),
            mtime_ns: i64::from_be_bytes(u(24..32)),
            ctime_ns: i64::from_be_bytes(u(32..40)),
            exec: b[40] != 0,
            id: ObjectId::from_bytes(id),
        })
    }
}

/// The stat cache of one source tree: relative path bytes -> entry.
pub type StatCache = HashMap<Vec<u8>, StatEntry>;

/// What a publish left at a destination, loaded for the next publish there: for each file
/// (bundle-relative path), its stat and blob id right after the publish, and when that was
/// recorded. The next publish to the same destination hard-links files whose stat still
/// matches instead of writing them again. Packed like a source's stat cache (about 4 bytes
/// per file beyond the stored record; a map of owned paths took about 3 times the record).
#[derive(Debug)]
pub struct DestCache {
    entries: SourceStatCache,
    recorded_at_ns: i64,
}

impl DestCache {
    /// The record of `entries` taken at `recorded_at_ns`.
    pub(crate) fn new(entries: SourceStatCache, recorded_at_ns: i64) -> DestCache {
        DestCache {
            entries,
            recorded_at_ns,
        }
    }

    /// The entry recorded for `path`.
    pub fn get(&self, path: &[u8]) -> Option<StatEntry> {
        self.entries.get(path).map(|(_, entry)| entry)
    }

    /// When the stats were taken, ns since the epoch (for the racy rule).
    pub fn recorded_at_ns(&self) -> i64 {
        self.recorded_at_ns
    }

    /// Entries recorded.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no file was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// True when any recorded mtime or ctime has a sub-second part (the filesystem keeps
    /// fine timestamps, so a shorter racy window applies).
    pub fn has_fine_times(&self) -> bool {
        self.entries
            .any_entry(&|e| e.mtime_ns % 1_000_000_000 != 0 || e.ctime_ns % 1_000_000_000 != 0)
    }
}

/// What a publish records at its destination, being made (see [`DestCache`]): the records
/// packed as they are stored, about 75 bytes plus the path per file, in memory or, past a
/// bound, in an unnamed file under the store's `tmp/` (see [`crate::Catalog::dest_record`]).
#[derive(Debug)]
pub struct DestRecord {
    records: Records,
    recorded_at_ns: i64,
}

impl DestRecord {
    /// An empty record whose stats are taken from `recorded_at_ns` on, held in memory.
    pub fn new(recorded_at_ns: i64) -> DestRecord {
        DestRecord {
            records: Records::default(),
            recorded_at_ns,
        }
    }

    /// [`DestRecord::new`], its records spilled to an unnamed file in `dir` past a bound.
    pub(crate) fn spilling_into(recorded_at_ns: i64, dir: &Path) -> DestRecord {
        DestRecord {
            records: Records::spilling_into(dir),
            recorded_at_ns,
        }
    }

    /// Sets the time the stats count from (the racy rule's moment), for a record filled
    /// before that moment was known: a publish stats each file as it stages it and sets the
    /// moment once every file is staged.
    pub fn set_recorded_at(&mut self, recorded_at_ns: i64) {
        self.recorded_at_ns = recorded_at_ns;
    }

    /// When the stats were taken, ns since the epoch.
    pub(crate) fn recorded_at_ns(&self) -> i64 {
        self.recorded_at_ns
    }

    /// Calls `f` with each record, in the order they were pushed.
    pub(crate) fn for_each_record(
        &self,
        f: &mut dyn FnMut(&[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.records.for_each(f)
    }

    /// Records one file (a path too long for the format, 64 KiB, is simply not recorded).
    pub fn push(&mut self, path: &[u8], entry: &StatEntry) {
        self.records.push(path, entry);
    }

    /// Files recorded.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when no file was recorded.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// What a capture leaves as one source's stat cache: the whole new cache (the loaded
/// records it kept and the ones it added, never copied into one buffer: they are written
/// straight from where they are), or nothing when it is unchanged (a no-op capture writes
/// nothing). Built by [`SourceStatCache::into_update`].
#[derive(Debug)]
pub struct StatCacheUpdate {
    /// The source's encoded cache key.
    key: Vec<u8>,
    /// The cache the records come from (`None`: unchanged).
    cache: Option<SourceStatCache>,
    /// A hash-only source's cache: it lives in a file of its own, not here (see `dircache`).
    pub(crate) in_dircache: bool,
}

impl StatCacheUpdate {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.cache.is_none()
    }

    /// The source's encoded key.
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    /// Calls `f` with each record of the new cache: the kept ones in the order they were
    /// stored (path order for a catalog value), then the new ones in the order the capture
    /// added them. Nothing when unchanged.
    pub(crate) fn for_each_record(
        &self,
        f: &mut dyn FnMut(&[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Some(cache) = &self.cache else {
            return Ok(());
        };
        match &cache.stored {
            Stored::Chunks(c) => {
                for (i, at) in c.index.iter().enumerate() {
                    if cache.is_kept(i) {
                        if let Some((_, _, record)) = c.record(*at) {
                            f(record)?;
                        }
                    }
                }
            }
            Stored::File(file) => file.for_each_kept(&|i| cache.is_kept(i), f)?,
        }
        cache.changed.for_each(f)
    }
}

/// The stat cache of one source as a capture uses it: the stored records, one bit per
/// record for "seen again unchanged", and the new or changed records packed the same way
/// (spilled to an unnamed file past a bound when the cache was loaded through
/// [`crate::Catalog::load_source_cache`]). The stored records are either a checked file that
/// stays on disk (see `dircache`: 8 bytes a record in memory) or the catalog value itself
/// (an older version's cache, a destination record: records `{path_len:u16 path entry}`, see
/// `encode_stat_cache`, with an index of record offsets sorted by path, about 4 bytes per file
/// beyond the stored record, where a map of owned paths took about 3 times the record).
pub struct SourceStatCache {
    stored: Stored,
    /// Bit `i`: the record at position `i` was seen again unchanged (kept in the new cache).
    seen: Vec<u64>,
    /// Bits set in `seen`.
    kept: usize,
    /// New or changed records, encoded.
    changed: Records,
}

/// Where the records a cache was loaded with are.
enum Stored {
    /// In memory, from the catalog.
    Chunks(Chunks),
    /// In a cache file, read as asked for.
    File(CacheFile),
}

/// Records held in memory, as sled returned them, with their index.
struct Chunks {
    /// The stored chunks (sharing sled's own copy while the catalog is open, so reading a
    /// cache costs one copy of it, not two). No record spans chunks.
    chunks: Vec<sled::IVec>,
    /// Records as `chunk << 32 | offset`, sorted by path, one per distinct path; a record's
    /// position is its place here.
    index: Vec<u64>,
    /// Where the last lookup hit: a walk asks for a directory's files in name order, which
    /// is path order, so the next one is most often the next record (one comparison instead
    /// of a binary search).
    last: std::cell::Cell<usize>,
}

impl Chunks {
    /// The record at index value `at`: (path, entry bytes, the record's bytes).
    fn record(&self, at: u64) -> Option<(&[u8], &[u8], &[u8])> {
        let chunk = self.chunks.get(usize::try_from(at >> 32).ok()?)?;
        let pos = (at & u64::from(u32::MAX)) as usize;
        let (path, entry, end) = record_at(chunk, pos)?;
        Some((path, entry, &chunk[pos..end]))
    }

    fn path(&self, at: u64) -> &[u8] {
        self.record(at).map(|(p, _, _)| p).unwrap_or_default()
    }

    fn get(&self, path: &[u8]) -> Option<(usize, StatEntry)> {
        let next = self.last.get() + 1;
        let at = match self.index.get(next) {
            Some(at) if self.path(*at) == path => next,
            _ => self
                .index
                .binary_search_by(|at| self.path(*at).cmp(path))
                .ok()?,
        };
        self.last.set(at);
        let (_, entry, _) = self.record(self.index[at])?;
        Some((at, StatEntry::decode(entry)?))
    }
}

impl std::fmt::Debug for SourceStatCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceStatCache")
            .field("entries", &self.len())
            .field("in_file", &matches!(self.stored, Stored::File(_)))
            .field("changed_bytes", &self.changed.len())
            .finish()
    }
}

impl SourceStatCache {
    fn from_chunks(chunks: Vec<sled::IVec>) -> SourceStatCache {
        let mut index = Vec::new();
        for (c, chunk) in chunks.iter().enumerate().take(u32::MAX as usize) {
            let mut pos = 0;
            while let Some((_, entry, end)) = record_at(chunk, pos) {
                let Ok(offset) = u32::try_from(pos) else {
                    break; // a chunk beyond 4 GiB is not a real cache: the rest is dropped
                };
                if StatEntry::decode(entry).is_some() {
                    index.push((c as u64) << 32 | u64::from(offset));
                }
                pos = end;
            }
        }
        let mut stored = Chunks {
            chunks,
            index: Vec::new(),
            last: std::cell::Cell::new(0),
        };
        // Stable: it merges the runs it finds, and a stored cache is one or two runs (the
        // kept records in path order, then the added ones in walk order, which is path order
        // but for a name that is a prefix of its sibling's, and where files of one directory
        // were answered out of order), so this is about one pass, not a full sort.
        index.sort_by(|a, b| stored.path(*a).cmp(stored.path(*b)));
        index.dedup_by(|a, b| stored.path(*a) == stored.path(*b));
        index.shrink_to_fit();
        let seen = vec![0u64; index.len().div_ceil(64)];
        stored.index = index;
        SourceStatCache {
            stored: Stored::Chunks(stored),
            seen,
            kept: 0,
            changed: Records::default(),
        }
    }

    /// The cache whose records stay in the checked file `file` (see `dircache`).
    pub(crate) fn from_file(file: CacheFile) -> SourceStatCache {
        SourceStatCache {
            seen: vec![0u64; file.positions().div_ceil(64)],
            stored: Stored::File(file),
            kept: 0,
            changed: Records::default(),
        }
    }

    /// True when any loaded entry satisfies `pred`.
    fn any_entry(&self, pred: &dyn Fn(&StatEntry) -> bool) -> bool {
        match &self.stored {
            Stored::Chunks(c) => c
                .index
                .iter()
                .filter_map(|at| StatEntry::decode(c.record(*at)?.1))
                .any(|e| pred(&e)),
            Stored::File(file) => {
                let mut any = false;
                // Unreadable: no entry shown (the caller only tunes a window with it).
                let _ = file.for_each_entry(&mut |e| any = any || pred(&e));
                any
            }
        }
    }

    /// Whether the records stay in a cache file (not loaded).
    #[cfg(test)]
    pub(crate) fn in_file(&self) -> bool {
        matches!(self.stored, Stored::File(_))
    }

    /// An empty cache (a source never captured).
    pub fn empty() -> SourceStatCache {
        SourceStatCache::from_chunks(Vec::new())
    }

    /// Entries in the loaded cache.
    pub fn len(&self) -> usize {
        match &self.stored {
            Stored::Chunks(c) => c.index.len(),
            Stored::File(file) => file.len(),
        }
    }

    /// True when the loaded cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry for `path`, with its position (for [`SourceStatCache::keep`]).
    pub fn get(&self, path: &[u8]) -> Option<(usize, StatEntry)> {
        match &self.stored {
            Stored::Chunks(c) => c.get(path),
            Stored::File(file) => file.get(path),
        }
    }

    /// Keeps entry `position` (from [`SourceStatCache::get`]) in the new cache: its file was
    /// seen again unchanged.
    pub fn keep(&mut self, position: usize) {
        if let Some(word) = self.seen.get_mut(position / 64) {
            let bit = 1 << (position % 64);
            if *word & bit == 0 {
                *word |= bit;
                self.kept += 1;
            }
        }
    }

    /// Records a new or changed entry for the new cache. A path too long for the format
    /// (64 KiB) is simply never cached.
    pub fn put(&mut self, path: &[u8], entry: &StatEntry) {
        self.changed.push(path, entry);
    }

    /// Spills the new or changed records to an unnamed file in `dir` past a bound.
    pub(crate) fn spill_into(&mut self, dir: &Path) {
        self.changed.spill_into(dir);
    }

    /// Whether the record at position `i` was kept.
    fn is_kept(&self, i: usize) -> bool {
        self.seen
            .get(i / 64)
            .is_some_and(|word| word & (1 << (i % 64)) != 0)
    }

    /// The new cache: the kept entries plus the new ones; empty when that is exactly the
    /// loaded cache (everything kept, nothing new).
    pub fn into_update(self, source: &SourceKey) -> StatCacheUpdate {
        let in_dircache = matches!(source, SourceKey::Diff(_));
        let key = source.encode();
        let unchanged = self.kept == self.len() && self.changed.is_empty();
        StatCacheUpdate {
            key,
            cache: (!unchanged).then_some(self),
            in_dircache,
        }
    }
}

/// Something that calls its argument with each whole record it holds, in order.
pub(crate) type EachRecord<'a> =
    dyn Fn(&mut dyn FnMut(&[u8]) -> Result<(), StoreError>) -> Result<(), StoreError> + 'a;

/// About how many bytes of records one stored chunk of a source's stat cache holds.
/// Below sled's blob threshold (a quarter of its 512 KiB segment): a chunk stored as a blob
/// is held in sled's page cache at the size of its pointer, so sled never evicts it, and a
/// large cache would sit in memory twice while it is read.
const CHUNK_BYTES: usize = 48 * 1024;

/// What every destination record's key starts with (see [`DestKey`]).
const DEST_PREFIX: &[u8] = b"dest:";
/// Appended to a destination's key for the time its record was taken.
const RECORDED_AT: &[u8] = b"\0recorded-at";

/// The key naming the current generation of a source's cache chunks.
fn generation_key(key: &[u8]) -> Vec<u8> {
    [key, b"\0generation"].concat()
}

/// The key of chunk `part` of generation `generation` of a source's cache.
fn chunk_key(key: &[u8], generation: u64, part: u32) -> Vec<u8> {
    [
        key,
        b"\0chunk\0",
        &generation.to_be_bytes()[..],
        &part.to_be_bytes()[..],
    ]
    .concat()
}

/// The record at `pos`: (path, entry bytes, end), or `None` past the end or in a damaged
/// tail.
pub(crate) fn record_at(bytes: &[u8], pos: usize) -> Option<(&[u8], &[u8], usize)> {
    let len = usize::from(u16::from_be_bytes([*bytes.get(pos)?, *bytes.get(pos + 1)?]));
    let path_end = pos + 2 + len;
    let end = path_end + STAT_LEN;
    Some((
        bytes.get(pos + 2..path_end)?,
        bytes.get(path_end..end)?,
        end,
    ))
}

/// Appends one `{path_len:u16 path entry}` record (none for a path over 64 KiB).
pub(crate) fn push_record(out: &mut Vec<u8>, path: &[u8], entry: &StatEntry) {
    let Ok(len) = u16::try_from(path.len()) else {
        return;
    };
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(path);
    out.extend_from_slice(&entry.encode());
}

/// An open catalog. Drop it as soon as possible: it locks out other processes.
pub struct CatalogSession {
    fresh: bool,
    /// Whether this session changed the snapshot list or the names (the reference table was
    /// removed first and is written again when the session closes; see `refs`).
    refs_changed: Cell<bool>,
    path: PathBuf,
    db: sled::Db,
    snapshots: sled::Tree,
    names: sled::Tree,
    stat: sled::Tree,
    dest: sled::Tree,
}

impl CatalogSession {
    /// Opens (creating) the catalog at `path`, waiting for another process to release it.
    pub(crate) fn open(path: &Path) -> Result<CatalogSession, StoreError> {
        let wait = std::env::var("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_LOCK_WAIT);
        let start = Instant::now();
        let mut delay = Duration::from_millis(5);
        // sled writes a new catalog's `conf` (two writes) before it takes its own lock on
        // `db`. Another process reading it between the two found it torn, took the whole
        // catalog for unreadable and set it aside under its holder, which then failed with
        // ENOENT (CLI test `two_processes_at_once_both_succeed_or_wait`, under load). So
        // opens are serialised by a lock on the catalog directory, held only while sled
        // opens, not while the catalog is used.
        fs::create_dir_all(path).map_err(|e| StoreError::io("create", path, e))?;
        let opening = File::open(path).map_err(|e| StoreError::io("open", path, e))?;
        let existed = path.join("db").exists();
        loop {
            opening
                .lock()
                .map_err(|e| StoreError::io("lock", path, e))?;
            let opened = sled::Config::new()
                .path(path)
                .cache_capacity(SLED_CACHE_BYTES)
                .open();
            let _ = opening.unlock();
            match opened {
                Ok(db) => return CatalogSession::from_db(path, db, existed),
                Err(sled::Error::Io(e)) if is_lock_error(&e) => {
                    if start.elapsed() >= wait {
                        return Err(StoreError::CatalogBusy {
                            path: path.to_path_buf(),
                            waited_ms: start.elapsed().as_millis() as u64,
                        });
                    }
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_millis(100));
                }
                Err(e) => return Err(db_err(path, e)),
            }
        }
    }

    fn from_db(path: &Path, db: sled::Db, existed: bool) -> Result<CatalogSession, StoreError> {
        // sled replays a log whose head is torn as an empty database, silently. A key written
        // once the index is complete (`mark_complete`) tells "new" from "lost": an existing
        // catalog without it is unreadable (or its first rebuild never finished, or it is
        // from a version before the key): it is set aside and rebuilt.
        let format = db.get(FORMAT_KEY).map_err(|e| db_err(path, e))?;
        let fresh = match &format {
            Some(v) if v.as_ref() == FORMAT_VALUE || v.as_ref() == FORMAT_V1 => false,
            Some(v) => {
                return Err(StoreError::CatalogUnreadable {
                    path: path.to_path_buf(),
                    why: format!(
                        "its format version `{}` is not one this build reads",
                        String::from_utf8_lossy(v).escape_default()
                    ),
                })
            }
            None if existed => {
                return Err(StoreError::CatalogUnreadable {
                    path: path.to_path_buf(),
                    why: "it was never completed or lost its head (a torn log)".into(),
                })
            }
            None => true,
        };
        let open = |name: &str| db.open_tree(name).map_err(|e| db_err(path, e));
        let catalog = CatalogSession {
            fresh,
            refs_changed: Cell::new(false),
            path: path.to_path_buf(),
            snapshots: open("snapshots")?,
            names: open("names")?,
            stat: open("stat")?,
            dest: open("dest")?,
            db,
        };
        if format.is_some_and(|v| v.as_ref() == FORMAT_V1) {
            catalog.migrate_from_v1()?;
        }
        Ok(catalog)
    }

    /// Format 1 -> 2: moves the destination records out of the `stat` tree.
    fn migrate_from_v1(&self) -> Result<(), StoreError> {
        let err = |e| self.err(e);
        let mut moved = Vec::new();
        for item in self.stat.scan_prefix(DEST_PREFIX) {
            let (key, value) = item.map_err(err)?;
            self.dest.insert(&key, value).map_err(err)?;
            moved.push(key);
        }
        self.flush()?;
        for key in moved {
            self.stat.remove(key).map_err(err)?;
        }
        self.db.insert(FORMAT_KEY, FORMAT_VALUE).map_err(err)?;
        self.flush()
    }

    /// True for a catalog just created, whose index is not built yet.
    pub(crate) fn is_fresh(&self) -> bool {
        self.fresh
    }

    /// Records that the index is complete (after the first build), durably.
    pub(crate) fn mark_complete(&mut self) -> Result<(), StoreError> {
        self.db
            .insert(FORMAT_KEY, FORMAT_VALUE)
            .map_err(|e| self.err(e))?;
        self.flush()?;
        self.fresh = false;
        Ok(())
    }

    /// Removes the reference table, durably, before this session first changes the snapshot
    /// list or the names (see `refs`): no crash can then leave an old table beside a newer
    /// catalog.
    fn changing_refs(&self) -> Result<(), StoreError> {
        if !self.refs_changed.get() {
            refs::invalidate(&self.path)
                .map_err(|e| StoreError::io("remove", refs::path(&self.path), e))?;
            self.refs_changed.set(true);
        }
        Ok(())
    }

    /// The reference table of the catalog as it is now: every name, and the newest snapshot
    /// of every agent (as [`CatalogSession::resolve`] picks it: the last of the list).
    fn ref_table(&self) -> Result<RefTable, StoreError> {
        let mut names = BTreeMap::new();
        for item in self.names.iter() {
            let (k, v) = item.map_err(|e| self.err(e))?;
            if let (Ok(name), Ok(id)) = (std::str::from_utf8(&k), <[u8; 32]>::try_from(v.as_ref()))
            {
                names.insert(name.to_string(), ObjectId::from_bytes(id).to_hex());
            }
        }
        let mut agents = BTreeMap::new();
        for summary in self.snapshots()? {
            if let Some(alias) = summary.agent {
                agents.insert(alias, summary.id.to_hex());
            }
        }
        Ok(RefTable { names, agents })
    }

    /// Writes the reference table when this session changed what it holds, or found it
    /// missing, after making the catalog durable. Best effort: a table that cannot be
    /// written is absent, and readers ask the catalog.
    fn keep_refs(&self) {
        let missing = !refs::path(&self.path).exists();
        if self.fresh || !(self.refs_changed.get() || missing) {
            return;
        }
        if self.db.flush().is_err() {
            return;
        }
        if let Ok(table) = self.ref_table() {
            let _ = refs::write(&self.path, &table);
        }
    }

    fn err(&self, e: sled::Error) -> StoreError {
        db_err(&self.path, e)
    }

    /// Records a snapshot (and its name) and flushes to disk. A name already on another
    /// snapshot moves to this one (the other is listed without it), so `list` and name
    /// resolution always agree.
    pub fn add_snapshot(&self, id: ObjectId, snap: &Snapshot) -> Result<(), StoreError> {
        self.changing_refs()?;
        if let Some(name) = &snap.name {
            if let Some(previous) = self.name_target(name)?.filter(|p| *p != id) {
                if let Some(v) = self
                    .snapshots
                    .get(previous.as_bytes())
                    .map_err(|e| self.err(e))?
                {
                    if let Ok(mut old) = serde_json::from_slice::<SnapshotSummary>(&v) {
                        old.name = None;
                        let value = serde_json::to_vec(&old).expect("summaries serialize");
                        self.snapshots
                            .insert(previous.as_bytes(), value)
                            .map_err(|e| self.err(e))?;
                    }
                }
            }
        }
        let summary = SnapshotSummary::of(id, snap);
        let value = serde_json::to_vec(&summary).expect("summaries serialize");
        self.snapshots
            .insert(id.as_bytes(), value)
            .map_err(|e| self.err(e))?;
        if let Some(name) = &snap.name {
            self.names
                .insert(name.as_bytes(), id.as_bytes())
                .map_err(|e| self.err(e))?;
        }
        self.flush()
    }

    /// Removes a snapshot and any name pointing at it.
    pub fn remove_snapshot(&self, id: &ObjectId) -> Result<(), StoreError> {
        self.changing_refs()?;
        self.snapshots
            .remove(id.as_bytes())
            .map_err(|e| self.err(e))?;
        for item in self.names.iter() {
            let (k, v) = item.map_err(|e| self.err(e))?;
            if v.as_ref() == id.as_bytes() {
                self.names.remove(k).map_err(|e| self.err(e))?;
            }
        }
        self.flush()
    }

    /// Forgets every snapshot and name (before `reindex`).
    pub fn clear_index(&self) -> Result<(), StoreError> {
        self.changing_refs()?;
        self.snapshots.clear().map_err(|e| self.err(e))?;
        self.names.clear().map_err(|e| self.err(e))?;
        self.flush()
    }

    /// Every snapshot, oldest first.
    pub fn snapshots(&self) -> Result<Vec<SnapshotSummary>, StoreError> {
        let mut out = Vec::new();
        for item in self.snapshots.iter() {
            let (_, v) = item.map_err(|e| self.err(e))?;
            let s: SnapshotSummary =
                serde_json::from_slice(&v).map_err(|e| StoreError::CatalogUnreadable {
                    path: self.path.clone(),
                    why: format!("unreadable snapshot entry: {e}"),
                })?;
            out.push(s);
        }
        out.sort_by(|a, b| {
            a.created_unix_ns
                .cmp(&b.created_unix_ns)
                .then(a.id.cmp(&b.id))
        });
        Ok(out)
    }

    /// The newest snapshot captured from `source` (a new capture's parent).
    pub fn latest_of_source(&self, source: &str) -> Result<Option<ObjectId>, StoreError> {
        Ok(self
            .snapshots()?
            .into_iter()
            .rev()
            .find(|s| s.source == source)
            .map(|s| s.id))
    }

    /// Which snapshot a name points at.
    pub fn name_target(&self, name: &str) -> Result<Option<ObjectId>, StoreError> {
        let v = self.names.get(name.as_bytes()).map_err(|e| self.err(e))?;
        Ok(v.and_then(|v| <[u8; 32]>::try_from(v.as_ref()).ok())
            .map(ObjectId::from_bytes))
    }

    /// Resolves a reference: a full id, a unique prefix of 8+ hex digits, a name, or
    /// `agent/<alias>` (the newest snapshot of that agent).
    pub fn resolve(&self, reference: &str) -> Result<ObjectId, StoreError> {
        if let Some(id) = self.name_target(reference)? {
            return Ok(id);
        }
        let all = self.snapshots()?;
        if let Some(alias) = reference.strip_prefix("agent/") {
            return all
                .iter()
                .rev()
                .find(|s| s.agent.as_deref() == Some(alias))
                .map(|s| s.id)
                .ok_or_else(|| StoreError::UnknownSnapshot {
                    reference: reference.to_string(),
                    hint: unknown_agent_hint(alias, &all),
                });
        }
        let lower = reference.to_ascii_lowercase();
        if lower.len() >= 8 && lower.len() <= 64 && lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            let hits: Vec<_> = all
                .iter()
                .filter(|s| s.id.to_hex().starts_with(&lower))
                .collect();
            match hits.len() {
                0 => {}
                1 => return Ok(hits[0].id),
                _ => {
                    return Err(StoreError::AmbiguousSnapshot {
                        reference: reference.to_string(),
                        candidates: hits
                            .iter()
                            .map(|s| s.id.short(16))
                            .collect::<Vec<_>>()
                            .join(", "),
                    })
                }
            }
        }
        Err(StoreError::UnknownSnapshot {
            reference: reference.to_string(),
            hint: unknown_hint(reference, &all),
        })
    }

    /// Loads the stat cache of one source (`key` names the source tree). A source's cache
    /// is stored as a few values of about `CHUNK_BYTES` each (the current generation's, see
    /// [`CatalogSession::update_stat_cache`]), kept as sled returns them (shared with its page
    /// cache until the catalog is closed): one value per file would make sled build (and
    /// hold) a node per few files, and one value for the whole cache made sled hold two more
    /// copies of it, and a copy into one buffer one more. A cache written by an older version (one
    /// value under `key`) is read as it is and replaced on the next write.
    pub fn load_source_cache(&self, key: &SourceKey) -> Result<SourceStatCache, StoreError> {
        self.load_chunked(&self.stat, &key.encode())
    }

    /// The records chunked under `key` in `tree` (or an older version's single value).
    fn load_chunked(&self, tree: &sled::Tree, key: &[u8]) -> Result<SourceStatCache, StoreError> {
        let Some(generation) = self.cache_generation(tree, key)? else {
            let old = tree.get(key).map_err(|e| self.err(e))?;
            return Ok(SourceStatCache::from_chunks(old.into_iter().collect()));
        };
        let mut chunks = Vec::new();
        for part in 0u32.. {
            let Some(chunk) = tree
                .get(chunk_key(key, generation, part))
                .map_err(|e| self.err(e))?
            else {
                break;
            };
            chunks.push(chunk);
        }
        Ok(SourceStatCache::from_chunks(chunks))
    }

    fn cache_generation(&self, tree: &sled::Tree, key: &[u8]) -> Result<Option<u64>, StoreError> {
        let value = tree.get(generation_key(key)).map_err(|e| self.err(e))?;
        Ok(value
            .and_then(|v| <[u8; 8]>::try_from(v.as_ref()).ok())
            .map(u64::from_be_bytes))
    }

    /// Removes the copy of `update`'s source cache an older version kept here, if any (the
    /// cache now lives in a file: see `Catalog::load_source_cache`). Not flushed: the caller's
    /// session flushes, and a copy that outlives a crash is still a valid cache.
    pub(crate) fn remove_stat_cache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        self.remove_chunked(&self.stat, update.key())
    }

    /// Removes what [`CatalogSession::write_chunked`] wrote under `key` in `tree` (its chunks, then
    /// its generation), and an older version's single value under the key.
    fn remove_chunked(&self, tree: &sled::Tree, key: &[u8]) -> Result<(), StoreError> {
        if let Some(generation) = self.cache_generation(tree, key)? {
            self.remove_chunks(tree, key, generation, 0)?;
            tree.remove(generation_key(key)).map_err(|e| self.err(e))?;
        }
        tree.remove(key).map_err(|e| self.err(e))?;
        Ok(())
    }

    /// Whether this catalog holds no stat cache and no destination record (an older
    /// version's; this one keeps them in files).
    pub(crate) fn holds_no_caches(&self) -> bool {
        self.stat.is_empty() && self.dest.is_empty()
    }

    /// Drops every source's stat cache (after `gc` removed objects a cache may name). The
    /// destination records stay: a reused file is checked against the tree being published,
    /// never looked up in the store.
    pub fn clear_stat_caches(&self) -> Result<(), StoreError> {
        self.stat.clear().map_err(|e| self.err(e))?;
        self.flush()
    }

    /// The record a previous publish left at destination `key`, if any (stored like a
    /// source's cache, in chunks, in the catalog's destination tree; a record written by an
    /// older version, one value under the key, is read as it is and replaced on the next write).
    pub fn load_dest_cache(&self, key: &DestKey) -> Result<Option<DestCache>, StoreError> {
        let key = key.encode();
        let at_key = [&key[..], RECORDED_AT].concat();
        let Some(at) = self.dest.get(at_key).map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        let Ok(at) = <[u8; 8]>::try_from(at.as_ref()) else {
            return Ok(None);
        };
        Ok(Some(DestCache {
            entries: self.load_chunked(&self.dest, &key)?,
            recorded_at_ns: i64::from_be_bytes(at),
        }))
    }

    /// Records what a publish left at destination `key` (replacing any earlier record): the
    /// records in chunks as [`CatalogSession::update_stat_cache`] writes them, then the time they
    /// were taken. A crash between the two leaves the new records with the older time,
    /// which only makes the racy rule stricter.
    pub fn store_dest_cache(&self, key: &DestKey, record: &DestRecord) -> Result<(), StoreError> {
        let key = key.encode();
        self.write_chunked(&self.dest, &key, &|f| record.records.for_each(f))?;
        let at_key = [&key[..], RECORDED_AT].concat();
        self.dest
            .insert(at_key, &record.recorded_at_ns.to_be_bytes()[..])
            .map_err(|e| self.err(e))?;
        self.flush()
    }

    /// Drops the records of the destinations `gone` says no longer exist (each checkout to a
    /// new directory leaves one: the stat of every file it wrote, about 200 bytes a file) and
    /// returns how many. A key that cannot name its destination exactly stays. The chunks go
    /// before the record's time: a crash between leaves a record of nothing, which reuses
    /// nothing and goes at the next gc.
    pub fn remove_dest_records(&self, gone: &dyn Fn(&Path) -> bool) -> Result<u64, StoreError> {
        let mut doomed = Vec::new();
        for item in self.dest.scan_prefix(DEST_PREFIX) {
            let (key, _) = item.map_err(|e| self.err(e))?;
            let Some(base) = key.strip_suffix(RECORDED_AT) else {
                continue;
            };
            if DestKey::decode(base).is_some_and(|path| gone(&path)) {
                doomed.push(base.to_vec());
            }
        }
        for key in &doomed {
            self.remove_chunked(&self.dest, key)?;
            self.dest
                .remove([&key[..], RECORDED_AT].concat())
                .map_err(|e| self.err(e))?;
        }
        if !doomed.is_empty() {
            self.flush()?;
        }
        Ok(doomed.len() as u64)
    }

    /// Writes the cache a capture left for its source (nothing when it is unchanged), as
    /// generation `g + 1`: its chunks first (and any leftover chunk of that generation from
    /// an interrupted write removed), then the generation key flipped to it, then the old
    /// generation (or an older version's single value) removed. A crash at any point leaves
    /// either the old cache or the new one readable.
    pub fn update_stat_cache(&self, update: &StatCacheUpdate) -> Result<(), StoreError> {
        if update.is_empty() {
            return Ok(());
        }
        self.write_chunked(&self.stat, &update.key[..], &|f| update.for_each_record(f))?;
        self.flush()
    }

    /// Writes the whole records `records` gives as the next generation of chunks under `key`
    /// in `tree` (each chunk about [`CHUNK_BYTES`], no record split), see
    /// [`CatalogSession::update_stat_cache`]. Not flushed.
    fn write_chunked(
        &self,
        tree: &sled::Tree,
        key: &[u8],
        records: &EachRecord<'_>,
    ) -> Result<(), StoreError> {
        let old = self.cache_generation(tree, key)?;
        let generation = old.map_or(0, |g| g.wrapping_add(1));
        let err = |e| self.err(e);
        let mut part = 0u32;
        let mut chunk = Vec::with_capacity(CHUNK_BYTES + 1024);
        let mut put = |chunk: &mut Vec<u8>| -> Result<(), StoreError> {
            tree.insert(chunk_key(key, generation, part), &chunk[..])
                .map_err(err)?;
            part += 1;
            chunk.clear();
            Ok(())
        };
        records(&mut |record| {
            chunk.extend_from_slice(record);
            if chunk.len() >= CHUNK_BYTES {
                put(&mut chunk)?;
            }
            Ok(())
        })?;
        if !chunk.is_empty() {
            put(&mut chunk)?;
        }
        self.remove_chunks(tree, key, generation, part)?;
        tree.insert(generation_key(key), &generation.to_be_bytes()[..])
            .map_err(err)?;
        match old {
            Some(old) if old != generation => self.remove_chunks(tree, key, old, 0)?,
            Some(_) => {}
            None => {
                tree.remove(key).map_err(err)?;
            }
        }
        Ok(())
    }

    /// Removes chunks `from..` of one generation of a chunked value in `tree`.
    fn remove_chunks(
        &self,
        tree: &sled::Tree,
        key: &[u8],
        generation: u64,
        from: u32,
    ) -> Result<(), StoreError> {
        for part in from.. {
            let gone = tree
                .remove(chunk_key(key, generation, part))
                .map_err(|e| self.err(e))?;
            if gone.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(|_| ()).map_err(|e| self.err(e))
    }
}

/// `{ path_len:u16 path entry }*`, entries in the fixed [`StatEntry`] layout.
impl Drop for CatalogSession {
    /// Keeps the reference table in step (see `refs`) while sled still holds the catalog's
    /// lock, so no other session can change the catalog between the read and the write.
    fn drop(&mut self) {
        self.keep_refs();
    }
}

#[cfg(test)]
fn encode_stat_cache(cache: &StatCache) -> Vec<u8> {
    let mut out = Vec::with_capacity(cache.len() * (2 + 64 + STAT_LEN));
    for (path, entry) in cache {
        push_record(&mut out, path, entry);
    }
    out
}

/// Decodes [`encode_stat_cache`]; a damaged tail is dropped (the cache only saves work).
#[cfg(test)]
fn decode_stat_cache(bytes: &[u8]) -> StatCache {
    let mut out = StatCache::new();
    let mut pos = 0;
    while let Some((path, entry, end)) = record_at(bytes, pos) {
        if let Some(entry) = StatEntry::decode(entry) {
            out.insert(path.to_vec(), entry);
        }
        pos = end;
    }
    out
}

/// sled 0.34 reports a held lock as `ErrorKind::Other` with the text "could not acquire lock
/// on ..." (config.rs); probing the file's flock instead loses a race (the holder can release
/// it between sled's failure and the probe), so the message is what there is to go on.
fn is_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
        || e.raw_os_error() == Some(11)
        || e.to_string().contains("lock")
}

fn db_err(path: &Path, e: sled::Error) -> StoreError {
    match e {
        // sled reports a torn or short log (what a full disk or a crash mid-write leaves) as
        // corruption, or as an I/O error of these kinds while it replays the log.
        sled::Error::Corruption { .. } | sled::Error::ReportableBug(_) => {
            StoreError::CatalogUnreadable {
                path: path.to_path_buf(),
                why: e.to_string(),
            }
        }
        sled::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
            ) =>
        {
            StoreError::CatalogUnreadable {
                path: path.to_path_buf(),
                why: io.to_string(),
            }
        }
        // Space, permissions and the like: the plain I/O error naming the catalog (no
        // advice to reindex, which would not help).
        sled::Error::Io(io) => StoreError::Io {
            op: "write the catalog",
            path: path.to_path_buf(),
            error: io,
        },
        other => StoreError::Catalog {
            path: path.to_path_buf(),
            why: other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_cache_round_trip_and_damaged_tail() {
        let e = StatEntry {
            dev: 9,
            ino: 8,
            size: 7,
            mtime_ns: 6,
            ctime_ns: 5,
            exec: false,
            id: ObjectId::of(b"y"),
        };
        let cache: StatCache = [(b"a/b".to_vec(), e), (b"c".to_vec(), e)]
            .into_iter()
            .collect();
        let bytes = encode_stat_cache(&cache);
        assert_eq!(decode_stat_cache(&bytes), cache);
        assert_eq!(decode_stat_cache(&bytes[..bytes.len() - 1]).len(), 1);
    }

    /// A capture's cache: lookups by path in a value written unsorted (as older versions
    /// wrote it from a map), keep/put, and the new value holding exactly the kept and new
    /// entries; a capture that keeps everything and adds nothing writes nothing.
    #[test]
    fn source_cache_lookup_keep_put_and_update() {
        let e = |n: u64| StatEntry {
            dev: 1,
            ino: n,
            size: n,
            mtime_ns: 6,
            ctime_ns: 5,
            exec: n.is_multiple_of(2),
            id: ObjectId::of(&n.to_be_bytes()),
        };
        let paths: Vec<Vec<u8>> = (0..500u64)
            .map(|n| format!("d{}/f{}", (n * 7919) % 13, n).into_bytes())
            .collect();
        let mut value = Vec::new();
        for (n, p) in paths.iter().enumerate() {
            push_record(&mut value, p, &e(n as u64));
        }
        let mut cache = SourceStatCache::from_chunks(vec![value.clone().into()]);
        assert_eq!(cache.len(), 500);
        for (n, p) in paths.iter().enumerate() {
            let (_, got) = cache.get(p).expect("present");
            assert_eq!(got, e(n as u64));
        }
        assert!(cache.get(b"d1/missing").is_none());
        assert!(cache.get(b"").is_none());
        // Keep all: no update.
        for p in &paths {
            let (at, _) = cache.get(p).unwrap();
            cache.keep(at);
        }
        assert!(cache.into_update(&SourceKey::Dir("k".into())).is_empty());
        // Keep the even ones, change one, add one.
        // In two chunks, split at a record boundary (as the catalog stores it).
        let mut cut = 0;
        for _ in 0..123 {
            cut = record_at(&value, cut).unwrap().2;
        }
        let mut cache =
            SourceStatCache::from_chunks(vec![value[..cut].into(), value[cut..].into()]);
        for (n, p) in paths.iter().enumerate() {
            if n % 2 == 0 && n != 10 {
                let (at, _) = cache.get(p).unwrap();
                cache.keep(at);
            }
        }
        cache.put(&paths[10], &e(9999));
        cache.put(b"new/file", &e(7));
        let update = cache.into_update(&SourceKey::Dir("k".into()));
        assert!(!update.is_empty());
        // Written as the kept records in path order, then the new ones as they came.
        let mut value = Vec::new();
        update
            .for_each_record(&mut |r| {
                value.extend_from_slice(r);
                Ok(())
            })
            .unwrap();
        let value = &value;
        let (mut pos, mut written) = (0, Vec::new());
        while let Some((path, _, end)) = record_at(value, pos) {
            written.push(path.to_vec());
            pos = end;
        }
        assert_eq!(written.len(), 251);
        assert!(written[..249].is_sorted());
        assert_eq!(written[249..], [paths[10].clone(), b"new/file".to_vec()]);
        // Loading sorts them. Looked up in path order (the next record: one comparison
        // each), in reverse, and with misses in between: the same answers as a binary search.
        let mut order = written.clone();
        order.sort();
        let cache = SourceStatCache::from_chunks(vec![value.clone().into()]);
        for p in order.iter().chain(order.iter().rev()) {
            assert_eq!(cache.get(p).map(|(at, _)| order[at] == *p), Some(true));
            assert!(cache.get(&[&p[..], b"x"].concat()).is_none());
        }
        let new = decode_stat_cache(value);
        let mut want: StatCache = paths
            .iter()
            .enumerate()
            .filter(|(n, _)| n % 2 == 0 && *n != 10)
            .map(|(n, p)| (p.clone(), e(n as u64)))
            .collect();
        want.insert(paths[10].clone(), e(9999));
        want.insert(b"new/file".to_vec(), e(7));
        assert_eq!(new, want);
        // Nothing loaded, nothing seen: an empty update; a damaged tail is dropped.
        assert!(SourceStatCache::empty()
            .into_update(&SourceKey::Dir("k".into()))
            .is_empty());
        let mut one = Vec::new();
        push_record(&mut one, b"a", &e(1));
        push_record(&mut one, b"b", &e(2));
        one.pop();
        let cache = SourceStatCache::from_chunks(vec![one.into()]);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(b"a").map(|(_, x)| x), Some(e(1)));
    }

    /// A source's cache goes through the catalog in chunks: an older version's single value
    /// is read, the first write replaces it with chunks (several, for a large cache), the
    /// next write replaces the generation and removes the old one's chunks.
    #[test]
    fn dest_cache_round_trip_in_chunks_replacing_the_old_format() {
        let dir = tempfile::tempdir().unwrap();
        let c = CatalogSession::open(&dir.path().join("catalog")).unwrap();
        let key = DestKey::new(Path::new("/d"));
        let kb = key.encode();
        let e = |n: u64, mtime_ns: i64| StatEntry {
            dev: 2,
            ino: n,
            size: n,
            mtime_ns,
            ctime_ns: 3_000_000_000,
            exec: n.is_multiple_of(2),
            id: ObjectId::of(&n.to_be_bytes()),
        };
        assert!(c.load_dest_cache(&key).unwrap().is_none());
        // What an older version wrote: one value under the key, and the time.
        let old: StatCache = (0..5u64)
            .map(|n| (format!("old/{n}").into_bytes(), e(n, 7_000_000_000)))
            .collect();
        c.dest.insert(&kb[..], encode_stat_cache(&old)).unwrap();
        c.dest
            .insert([&kb[..], RECORDED_AT].concat(), &9i64.to_be_bytes()[..])
            .unwrap();
        let loaded = c.load_dest_cache(&key).unwrap().expect("recorded");
        assert_eq!((loaded.len(), loaded.recorded_at_ns()), (5, 9));
        assert_eq!(loaded.get(b"old/4"), Some(e(4, 7_000_000_000)));
        assert!(!loaded.has_fine_times());
        // A record of several chunks replaces it; paths pushed out of order are found.
        let mut record = DestRecord::new(11);
        for n in (0..5_000u64).rev() {
            record.push(format!("a/{n:04}").as_bytes(), &e(n, 7_000_000_000));
        }
        record.push(b"a.txt", &e(1, 7_000_000_001));
        assert_eq!(record.len(), 5_001);
        c.store_dest_cache(&key, &record).unwrap();
        assert!(c.dest.get(&kb[..]).unwrap().is_none(), "old value removed");
        assert!(c.dest.get(chunk_key(&kb, 0, 1)).unwrap().is_some());
        let loaded = c.load_dest_cache(&key).unwrap().expect("recorded");
        assert_eq!((loaded.len(), loaded.recorded_at_ns()), (5_001, 11));
        assert_eq!(loaded.get(b"a/0042"), Some(e(42, 7_000_000_000)));
        assert_eq!(loaded.get(b"a.txt"), Some(e(1, 7_000_000_001)));
        assert!(loaded.get(b"old/4").is_none());
        assert!(loaded.has_fine_times(), "a.txt has a sub-second mtime");
        // An empty record is a record of nothing, not an absent one.
        c.store_dest_cache(&key, &DestRecord::new(12)).unwrap();
        let loaded = c.load_dest_cache(&key).unwrap().expect("recorded");
        assert!(loaded.is_empty());
        assert!(c.dest.get(chunk_key(&kb, 0, 0)).unwrap().is_none());
    }

    #[test]
    fn the_records_of_destinations_that_are_gone_are_dropped_whole() {
        let dir = tempfile::tempdir().unwrap();
        let c = CatalogSession::open(&dir.path().join("catalog")).unwrap();
        let e = |n: u64| StatEntry {
            dev: 2,
            ino: n,
            size: n,
            mtime_ns: 7_000_000_000,
            ctime_ns: 3_000_000_000,
            exec: false,
            id: ObjectId::of(&n.to_be_bytes()),
        };
        let (kept, gone) = (Path::new("/out/kept"), Path::new("/out/gone"));
        for dest in [kept, gone] {
            let mut record = DestRecord::new(11);
            for n in 0..5_000u64 {
                record.push(format!("f/{n:04}").as_bytes(), &e(n));
            }
            c.store_dest_cache(&DestKey::new(dest), &record).unwrap();
        }
        // An older version's record (one value) of another gone destination, and a key
        // written lossily for a path that was not UTF-8.
        let old = DestKey::new(Path::new("/out/old")).encode();
        let lossy = "dest:/out/\u{FFFD}".as_bytes().to_vec();
        for k in [&old, &lossy] {
            c.dest.insert(&k[..], &b"x"[..]).unwrap();
            c.dest
                .insert([&k[..], RECORDED_AT].concat(), &9i64.to_be_bytes()[..])
                .unwrap();
        }
        let asked = std::cell::RefCell::new(Vec::new());
        let removed = c
            .remove_dest_records(&|p| {
                asked.borrow_mut().push(p.to_path_buf());
                p != kept
            })
            .unwrap();
        assert_eq!(removed, 2);
        assert_eq!(
            asked.borrow().len(),
            3,
            "the lossy key is never asked about"
        );
        assert_eq!(
            c.load_dest_cache(&DestKey::new(kept))
                .unwrap()
                .unwrap()
                .len(),
            5_000
        );
        for k in [DestKey::new(gone).encode(), old] {
            assert_eq!(c.dest.scan_prefix(&k).count(), 0, "nothing of it is left");
        }
        assert!(c.dest.get(&lossy[..]).unwrap().is_some());
    }

    #[test]
    fn source_cache_chunks_replace_the_old_format_and_older_generations() {
        let dir = tempfile::tempdir().unwrap();
        let c = CatalogSession::open(&dir.path().join("catalog")).unwrap();
        let src = SourceKey::Dir("src".into());
        let e = |n: u64| StatEntry {
            dev: 1,
            ino: n,
            size: n,
            mtime_ns: 6,
            ctime_ns: 5,
            exec: false,
            id: ObjectId::of(&n.to_be_bytes()),
        };
        let old: StatCache = (0..10u64)
            .map(|n| (format!("old/{n}").into_bytes(), e(n)))
            .collect();
        c.stat.insert(b"dir:src", encode_stat_cache(&old)).unwrap();
        let loaded = c.load_source_cache(&src).unwrap();
        assert_eq!(loaded.len(), 10);
        assert_eq!(loaded.get(b"old/3").map(|(_, x)| x), Some(e(3)));
        // A large new cache: several chunks, the old single value removed.
        let mut fresh = SourceStatCache::empty();
        for n in 0..10_000u64 {
            fresh.put(format!("new/{n:05}").as_bytes(), &e(n));
        }
        c.update_stat_cache(&fresh.into_update(&src)).unwrap();
        assert!(c.stat.get(b"dir:src").unwrap().is_none());
        assert!(c.stat.get(chunk_key(b"dir:src", 0, 2)).unwrap().is_some());
        let loaded = c.load_source_cache(&src).unwrap();
        assert_eq!(loaded.len(), 10_000);
        assert_eq!(loaded.get(b"new/04321").map(|(_, x)| x), Some(e(4321)));
        assert!(loaded.get(b"old/3").is_none());
        // A smaller one: generation 1, generation 0's chunks gone.
        let mut small = SourceStatCache::empty();
        small.put(b"x", &e(1));
        c.update_stat_cache(&small.into_update(&src)).unwrap();
        assert!(c.stat.get(chunk_key(b"dir:src", 0, 0)).unwrap().is_none());
        assert!(c.stat.get(chunk_key(b"dir:src", 1, 1)).unwrap().is_none());
        let loaded = c.load_source_cache(&src).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded.get(b"x").map(|(_, x)| x), Some(e(1)));
        // Another source is untouched.
        assert_eq!(
            c.load_source_cache(&SourceKey::Dir("other".into()))
                .unwrap()
                .len(),
            0
        );
    }

    /// A catalog as format 1 wrote it (destination records beside the stat caches in `stat`)
    /// is migrated when opened: its snapshots, names, stat caches and destination records are
    /// all read back, the records now from `dest`; a format this build does not know is
    /// refused as unreadable (the store then sets it aside and rebuilds it, saying so).
    #[test]
    fn a_format_1_catalog_is_migrated_with_its_destination_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog");
        let entry = StatEntry {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: 4,
            ctime_ns: 5,
            exec: false,
            id: ObjectId::of(b"blob"),
        };
        let src = SourceKey::Dir("/srv/src".into());
        let dest = DestKey::new(Path::new("/out/bundle"));
        let snap = summary_snapshot(Some("keep"), None, 1);
        let id = ObjectId::of(b"snap");
        {
            let mut c = CatalogSession::open(&path).unwrap();
            c.add_snapshot(id, &snap).unwrap();
            let mut cache = SourceStatCache::empty();
            cache.put(b"a.md", &entry);
            c.update_stat_cache(&cache.into_update(&src)).unwrap();
            // What format 1's store_dest_cache wrote, in the `stat` tree.
            let mut entries = StatCache::new();
            entries.insert(b"x/y.md".to_vec(), entry);
            c.stat
                .insert(b"dest:/out/bundle", encode_stat_cache(&entries))
                .unwrap();
            c.stat
                .insert(b"dest:/out/bundle\0recorded-at", &77i64.to_be_bytes()[..])
                .unwrap();
            c.mark_complete().unwrap();
            c.db.insert(FORMAT_KEY, FORMAT_V1).unwrap();
            c.flush().unwrap();
        }
        let c = CatalogSession::open(&path).unwrap();
        assert!(!c.is_fresh());
        assert_eq!(
            c.db.get(FORMAT_KEY).unwrap().unwrap().as_ref(),
            FORMAT_VALUE
        );
        let record = c
            .load_dest_cache(&dest)
            .unwrap()
            .expect("the record survived");
        assert_eq!(record.recorded_at_ns, 77);
        assert_eq!(record.get(&b"x/y.md"[..]), Some(entry));
        assert_eq!(
            c.stat.scan_prefix(DEST_PREFIX).count(),
            0,
            "moved, not copied"
        );
        assert_eq!(
            c.load_source_cache(&src).unwrap().get(b"a.md").unwrap().1,
            entry
        );
        assert_eq!(c.resolve("keep").unwrap(), id);
        // Clearing the stat caches (gc) leaves the destination records.
        c.clear_stat_caches().unwrap();
        assert!(c.load_dest_cache(&dest).unwrap().is_some());
        assert!(c.load_source_cache(&src).unwrap().is_empty());
        c.db.insert(FORMAT_KEY, &b"9"[..]).unwrap();
        c.flush().unwrap();
        drop(c);
        match CatalogSession::open(&path) {
            Err(StoreError::CatalogUnreadable { why, .. }) => assert!(why.contains("`9`"), "{why}"),
            other => panic!("a format 9 catalog opened: {:?}", other.map(|_| ())),
        }
    }

    fn summary_snapshot(name: Option<&str>, agent: Option<&str>, created: i128) -> Snapshot {
        Snapshot {
            root: ObjectId::of(b"root"),
            created_unix_ns: created,
            host: "h".into(),
            kind: SnapshotKind::Tree,
            source: "s".into(),
            agent: agent.map(str::to_string),
            name: name.map(str::to_string),
            parent: None,
            report: crate::snapshot::CaptureReport::default(),
        }
    }

    #[test]
    fn refs_resolve_by_id_prefix_name_and_agent_and_report_ambiguity() {
        let dir = tempfile::tempdir().unwrap();
        let cat = CatalogSession::open(&dir.path().join("catalog")).unwrap();
        // Two ids that share their first 9 hex digits (crafted: the catalog indexes any id).
        let mut a = [0u8; 32];
        a[..5].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef, 0x10]);
        let mut b = a;
        b[4] = 0x1f;
        let (a, b) = (ObjectId::from_bytes(a), ObjectId::from_bytes(b));
        cat.add_snapshot(a, &summary_snapshot(Some("first"), Some("bot"), 1))
            .unwrap();
        cat.add_snapshot(b, &summary_snapshot(None, Some("bot"), 2))
            .unwrap();
        let err = cat.resolve("deadbeef1").unwrap_err();
        assert!(
            matches!(&err, StoreError::AmbiguousSnapshot { candidates, .. } if candidates.contains(&a.short(16)) && candidates.contains(&b.short(16))),
            "{err}"
        );
        assert_eq!(cat.resolve("deadbeef10").unwrap(), a);
        assert_eq!(cat.resolve(&b.to_hex()).unwrap(), b);
        assert_eq!(cat.resolve("first").unwrap(), a);
        assert_eq!(
            cat.resolve("agent/bot").unwrap(),
            b,
            "the newest of that agent"
        );
        assert!(matches!(
            cat.resolve("deadbee"),
            Err(StoreError::UnknownSnapshot { .. })
        ));
        assert!(matches!(
            cat.resolve("agent/none"),
            Err(StoreError::UnknownSnapshot { .. })
        ));
    }

    #[test]
    fn stat_entry_round_trip() {
        let e = StatEntry {
            dev: 1,
            ino: 2,
            size: 3,
            mtime_ns: -4,
            ctime_ns: 5,
            exec: true,
            id: ObjectId::of(b"x"),
        };
        assert_eq!(StatEntry::decode(&e.encode()), Some(e));
        assert_eq!(StatEntry::decode(&[0; 3]), None);
    }

    /// Opening waits while another opener holds the catalog directory's lock (sled's
    /// unlocked `conf` writes are never read half-done), and goes on once it is released.
    #[test]
    fn an_open_waits_for_another_opener() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog");
        fs::create_dir(&path).unwrap();
        let opener = File::open(&path).unwrap();
        opener.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiting = {
            let path = path.clone();
            std::thread::spawn(move || {
                let opened = CatalogSession::open(&path).map(|_| ());
                tx.send(opened).unwrap();
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "the catalog opened while another opener held its directory's lock"
        );
        assert!(
            !path.join("conf").exists(),
            "sled ran while the lock was held"
        );
        opener.unlock().unwrap();
        rx.recv().unwrap().unwrap();
        waiting.join().unwrap();
    }

    #[test]
    fn second_open_waits_then_reports_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog");
        let mut held = CatalogSession::open(&path).unwrap();
        held.mark_complete().unwrap();
        std::env::set_var("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS", "150");
        let err = match CatalogSession::open(&path) {
            Err(e) => e,
            Ok(_) => panic!("second open succeeded while the first holds the lock"),
        };
        assert!(matches!(err, StoreError::CatalogBusy { .. }), "{err}");
        drop(held);
        CatalogSession::open(&path).unwrap();
    }
}
