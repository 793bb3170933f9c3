//! A remote snapshot read in place: [`RemoteView`] is an [`ObjectSource`] over what a remote
//! holds, fetching only what its reader asks for, so `diff` and `mount` take a remote
//! snapshot ref (`NAME/SNAPSHOT`) without pulling it.
//!
//! Trees come from the snapshot's trees-only pack (`trees/<snapshot-id>.zcpack`, which `push`
//! writes before the record): one download, verified whole (trailer and every object) before
//! any tree is used. A snapshot pushed by an older build has none; its trees are then read
//! one by one with ranged GETs from the packs that hold them. Blobs (for a mount; a diff
//! never asks) are ranged GETs of exactly their stored bytes, decompressed with the cap the
//! pack index gives, hashed and compared with their id before they are served, and kept in
//! unnamed files under `<store>/tmp/` (bounded; gone when the last reader drops them).
//!
//! Where a remote ref is recognised ([`parse_remote_ref`]): an argument that names an
//! existing file or directory is that path (callers check this first); otherwise
//! `NAME/SNAPSHOT[:PATH]` is a remote ref only when `NAME` is a remote configured in this
//! store. `agent/<alias>` stays a local ref (`remote add` refuses the name `agent`).

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::io::{self, BufWriter, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zeroclaw_bundle_store::{
    decode_pack_object, random_token, Blob, ObjectId, ObjectSource, PackEntry, PackLayout,
    PackReader, Snapshot, StoreError, Tree, TreeView,
};

use super::{Remote, RemoteError};

/// A trees pack larger than this is refused unread.
const MAX_TREES_PACK: u64 = 4 << 30;
/// A tree larger than this (uncompressed) is refused (fallback path).
const MAX_TREE: u64 = 256 << 20;
/// Fetched blobs kept for re-reads, in bytes of their temporary files.
const BLOB_CACHE: u64 = 256 << 20;
/// Trees kept by the fallback path.
const TREE_CACHE: usize = 4096;

/// An unnamed temporary file in `dir` (created, then unlinked: nothing is left behind).
fn anonymous_file(dir: &Path) -> io::Result<File> {
    fs::create_dir_all(dir)?;
    let path = dir.join(format!("remote-{}", random_token()));
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    fs::remove_file(&path)?;
    Ok(file)
}

use super::client::PackIndexes as Indexed;

struct BlobCache {
    files: HashMap<ObjectId, (Arc<File>, u64)>,
    order: VecDeque<ObjectId>,
    bytes: u64,
}

/// A remote snapshot, read in place (see the module doc).
pub struct RemoteView {
    remote: Remote,
    id: ObjectId,
    snapshot: Snapshot,
    trees: Option<PackReader>,
    blobs: bool,
    tmp: PathBuf,
    index: Mutex<Option<Arc<Indexed>>>,
    layouts: Mutex<HashMap<String, Arc<PackLayout>>>,
    tree_cache: Mutex<HashMap<ObjectId, Tree>>,
    blob_cache: Mutex<BlobCache>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RemoteView {
    /// Opens snapshot `id` of `remote`: reads its record and its trees pack (verified).
    /// `blobs` says whether file contents may be fetched (a mount) or not (a diff: the view
    /// then holds ids only, like a digest pack). `tmp` is the local store's `tmp/`.
    pub fn open(
        remote: Remote,
        id: ObjectId,
        tmp: &Path,
        blobs: bool,
    ) -> Result<RemoteView, RemoteError> {
        let record_key = format!("snapshots/{}", id.to_hex());
        let record = remote.record(&id)?.ok_or_else(|| RemoteError::NoSnapshot {
            name: remote.name().to_string(),
            reference: id.to_hex(),
        })?;
        let snapshot = Snapshot::decode(&record)
            .map_err(|e| remote.corrupt(&record_key, format!("not a snapshot record: {e}")))?;
        let trees = Self::fetch_trees(&remote, &id, tmp)?;
        Ok(RemoteView {
            remote,
            id,
            snapshot,
            trees,
            blobs,
            tmp: tmp.to_path_buf(),
            index: Mutex::new(None),
            layouts: Mutex::new(HashMap::new()),
            tree_cache: Mutex::new(HashMap::new()),
            blob_cache: Mutex::new(BlobCache {
                files: HashMap::new(),
                order: VecDeque::new(),
                bytes: 0,
            }),
        })
    }

    /// Downloads and verifies `trees/<id>.zcpack`; `None` when the remote has none.
    pub(crate) fn fetch_trees(
        remote: &Remote,
        id: &ObjectId,
        tmp: &Path,
    ) -> Result<Option<PackReader>, RemoteError> {
        let key = format!("trees/{}.zcpack", id.to_hex());
        let Some(size) = remote.size(&key)? else {
            return Ok(None);
        };
        if size > MAX_TREES_PACK {
            return Err(remote.corrupt(&key, format!("is {size} bytes, over {MAX_TREES_PACK}")));
        }
        // Into an unnamed file, reopened through its /proc/self/fd link: a kill at any point
        // leaves nothing behind in tmp/.
        let io = |op, e| RemoteError::Io {
            op,
            path: tmp.to_path_buf(),
            source: e,
        };
        let mut file = anonymous_file(tmp).map_err(|e| io("create a temporary file in", e))?;
        {
            let mut w = BufWriter::new(&mut file);
            remote.get_range_to(&key, 0..size, &mut w)?;
            w.flush().map_err(|e| io("write a temporary file in", e))?;
        }
        let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        let pack = PackReader::open(&link)
            .map_err(|e| remote.corrupt(&key, format!("is not a pack: {e}")))?;
        drop(file);
        pack.verify()
            .map_err(|e| remote.corrupt(&key, format!("does not verify: {e}")))?;
        if pack.root != *id || !pack.trees_only {
            return Err(remote.corrupt(
                &key,
                format!(
                    "is not the trees-only pack of snapshot {} (it carries {}{})",
                    id.short(12),
                    pack.root.short(12),
                    if pack.trees_only { "" } else { ", with blobs" }
                ),
            ));
        }
        Ok(Some(pack))
    }

    /// The snapshot's record.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The remote.
    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// Whether the trees came from the snapshot's trees pack (else: ranged reads of packs,
    /// for a snapshot pushed by an older build).
    pub fn has_trees_pack(&self) -> bool {
        self.trees.is_some()
    }

    fn label(&self) -> PathBuf {
        PathBuf::from(format!("{}/{}", self.remote.name(), self.id.short(12)))
    }

    fn as_store_error(&self, e: RemoteError) -> StoreError {
        StoreError::Io {
            op: "read remote snapshot",
            path: self.label(),
            error: io::Error::other(e.to_string()),
        }
    }

    /// The remote's indexes (object -> pack), read once.
    fn index(&self) -> Result<Arc<Indexed>, RemoteError> {
        let mut slot = lock(&self.index);
        if let Some(map) = slot.as_ref() {
            return Ok(Arc::clone(map));
        }
        let map = Arc::new(self.remote.indexed_packs()?);
        *slot = Some(Arc::clone(&map));
        Ok(map)
    }

    /// The pack holding `id` and its index entry.
    fn locate(&self, id: &ObjectId) -> Result<Option<(String, PackEntry)>, RemoteError> {
        let index = self.index()?;
        let Some(pack) = index.0.get(id) else {
            return Ok(None);
        };
        let listed = index.1.get(pack).copied().unwrap_or(0);
        let layout = self.layout(pack, listed)?;
        let key = format!("packs/{pack}.zcpack");
        let entry = *layout.entry(id).ok_or_else(|| {
            self.remote.corrupt(
                &format!("index/{pack}.idx"),
                format!(
                    "lists object {} but its pack does not hold it",
                    id.short(12)
                ),
            )
        })?;
        Ok(Some((key, entry)))
    }

    /// The layout of `packs/<pack>.zcpack` (ranged GETs; see [`Remote::pack_layout`]).
    fn layout(&self, pack: &str, listed: u64) -> Result<Arc<PackLayout>, RemoteError> {
        if let Some(l) = lock(&self.layouts).get(pack) {
            return Ok(Arc::clone(l));
        }
        let key = format!("packs/{pack}.zcpack");
        let layout = self
            .remote
            .pack_layout(pack, listed)?
            .ok_or_else(|| self.remote.corrupt(&key, "is listed by an index but gone"))?;
        let layout = Arc::new(layout);
        lock(&self.layouts).insert(pack.to_string(), Arc::clone(&layout));
        Ok(layout)
    }

    /// Fetches, decodes and verifies one object into `out`.
    fn fetch_into(
        &self,
        key: &str,
        entry: &PackEntry,
        out: &mut dyn Write,
    ) -> Result<(), StoreError> {
        let mut stored = anonymous_file(&self.tmp).map_err(|e| StoreError::Io {
            op: "create a temporary file in",
            path: self.tmp.clone(),
            error: e,
        })?;
        let range = entry.offset..entry.offset + entry.stored_len;
        {
            let mut w = BufWriter::new(&mut stored);
            self.remote
                .get_range_to(key, range, &mut w)
                .map_err(|e| self.as_store_error(e))?;
            w.flush().map_err(|e| StoreError::Io {
                op: "write a temporary file in",
                path: self.tmp.clone(),
                error: e,
            })?;
        }
        stored.rewind().map_err(|e| StoreError::Io {
            op: "read a temporary file in",
            path: self.tmp.clone(),
            error: e,
        })?;
        let label = PathBuf::from(format!("{}:{key}", self.remote.name()));
        decode_pack_object(&label, entry, &mut io::BufReader::new(stored), out)
    }

    /// A tree read with a ranged GET of the pack that holds it (no trees pack).
    fn ranged_tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        if let Some(t) = lock(&self.tree_cache).get(id) {
            return Ok(t.clone());
        }
        let (key, entry) = self
            .locate(id)
            .map_err(|e| self.as_store_error(e))?
            .ok_or(StoreError::MissingObject(*id))?;
        if entry.len > MAX_TREE {
            return Err(self.as_store_error(self.remote.corrupt(
                &key,
                format!(
                    "object {} claims {} bytes, over a tree's {MAX_TREE}",
                    id.short(12),
                    entry.len
                ),
            )));
        }
        let mut bytes = Vec::new();
        self.fetch_into(&key, &entry, &mut bytes)?;
        let tree = Tree::decode(&bytes).map_err(|why| StoreError::Malformed {
            id: *id,
            what: "tree",
            why,
        })?;
        let mut cache = lock(&self.tree_cache);
        if cache.len() >= TREE_CACHE {
            cache.clear();
        }
        cache.insert(*id, tree.clone());
        Ok(tree)
    }
}

impl ObjectSource for RemoteView {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        match &self.trees {
            Some(pack) => pack.tree(id),
            None => self.ranged_tree(id),
        }
    }

    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        match &self.trees {
            Some(pack) => pack.tree_view(id),
            None => self.ranged_tree(id).map(|tree| TreeView::of(&tree)),
        }
    }

    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        if !self.blobs {
            return Err(StoreError::MissingObject(*id));
        }
        if let Some((file, len)) = lock(&self.blob_cache).files.get(id) {
            return Ok(Blob::from_range(Arc::clone(file), 0, *len));
        }
        let (key, entry) = self
            .locate(id)
            .map_err(|e| self.as_store_error(e))?
            .ok_or(StoreError::MissingObject(*id))?;
        let tmp_err = |e| StoreError::Io {
            op: "write a temporary file in",
            path: self.tmp.clone(),
            error: e,
        };
        let mut file = anonymous_file(&self.tmp).map_err(tmp_err)?;
        {
            let mut w = BufWriter::new(&mut file);
            self.fetch_into(&key, &entry, &mut w)?;
            w.flush().map_err(tmp_err)?;
        }
        let file = Arc::new(file);
        let mut cache = lock(&self.blob_cache);
        while cache.bytes + entry.len > BLOB_CACHE {
            let Some(old) = cache.order.pop_front() else {
                break;
            };
            if let Some((_, n)) = cache.files.remove(&old) {
                cache.bytes -= n;
            }
        }
        if entry.len <= BLOB_CACHE && !cache.files.contains_key(id) {
            cache.files.insert(*id, (Arc::clone(&file), entry.len));
            cache.order.push_back(*id);
            cache.bytes += entry.len;
        }
        Ok(Blob::from_range(file, 0, entry.len))
    }
}
