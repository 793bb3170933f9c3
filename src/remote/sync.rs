//! `push` and `pull`: the write order that keeps a remote consistent (pack, then its index,
//! then the record) and the fetch-verify-import path back into a local store.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{
    closure_needs, import_from_packs, random_token, write_pack, write_pack_excluding, IdHasher,
    ObjectId, PackOptions, PackReader, Snapshot, Store, StoreError,
};

use super::client::encode_index;
use super::{check_interrupt, Remote, RemoteError};

/// What a push did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushReport {
    /// The snapshot.
    pub snapshot: Option<ObjectId>,
    /// The remote listed it already: nothing was written.
    pub already: bool,
    /// Objects uploaded (in one pack; 0 when the remote held them all).
    pub objects: u64,
    /// Bytes of that pack.
    pub pack_bytes: u64,
    /// The pack's id.
    pub pack: Option<String>,
}

/// What a pull did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullReport {
    /// Packs downloaded.
    pub packs: u64,
    /// Their bytes.
    pub bytes: u64,
}

fn io_err(op: &'static str, path: &Path, e: io::Error) -> RemoteError {
    RemoteError::Io {
        op,
        path: path.to_path_buf(),
        source: e,
    }
}

/// A writer that hashes what it writes (the pack's id is the blake3 of the whole file).
struct Hashing<W: Write> {
    inner: W,
    hasher: IdHasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Removes the files it holds when dropped (the temporary packs of a push or a pull).
struct TempFiles(Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

fn tmp_path(store: &Store, what: &str) -> Result<PathBuf, RemoteError> {
    let dir = store.objects().tmp_dir();
    fs::create_dir_all(dir).map_err(|e| io_err("create", dir, e))?;
    Ok(dir.join(format!("{what}-{}", random_token())))
}

/// Pushes snapshot `id` of `store` to `remote`: one pack of every object the remote's
/// indexes do not list, then the pack's index, then the record (see the module doc).
pub fn push(store: &Store, remote: &Remote, id: &ObjectId) -> Result<PushReport, RemoteError> {
    let record = store.objects().read_verified(id)?;
    store.read_snapshot(id)?;
    let mut report = PushReport {
        snapshot: Some(*id),
        ..PushReport::default()
    };
    let trees_key = format!("trees/{}.zcpack", id.to_hex());
    // Held (shared) from before the first temporary pack in tmp/ until the last upload: a gc
    // waits instead of removing the pack being written or uploaded.
    let _lock = store.write_lock()?;
    if remote.record(id)?.is_some() {
        report.already = true;
        // Pushed by an older build, without its trees pack: add it (derived from the record's
        // trees, so writing it after the record breaks no ordering guarantee).
        if remote.size(&trees_key)?.is_none() {
            upload_trees_pack(store, remote, id, &trees_key)?;
        }
        return Ok(report);
    }
    let indexed = remote.indexed_present()?;
    let tmp = tmp_path(store, "push")?;
    let _cleanup = TempFiles(vec![tmp.clone()]);
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io_err("create", &tmp, e))?;
    let mut w = Hashing {
        inner: BufWriter::new(file),
        hasher: IdHasher::new(),
    };
    let stats = write_pack_excluding(store, id, &|o| indexed.contains_key(o), &mut w, &mut |_| {})?;
    let pack_id = w.hasher.finish().to_hex();
    let file = w
        .inner
        .into_inner()
        .map_err(|e| io_err("write", &tmp, e.into_error()))?;
    file.sync_all().map_err(|e| io_err("sync", &tmp, e))?;
    drop(file);
    check_interrupt()?;
    // Only the record: the remote holds every object already.
    if stats.objects > 1 {
        let reader = PackReader::open(&tmp)?;
        let ids: Vec<ObjectId> = reader.entries().iter().map(|e| e.id).collect();
        let pack_key = format!("packs/{pack_id}.zcpack");
        remote.put_file(&pack_key, &tmp)?;
        crate::hooks::seam("remote-after-pack", &pack_key);
        check_interrupt()?;
        let index_key = format!("index/{pack_id}.idx");
        remote.put_bytes(&index_key, encode_index(&ids))?;
        crate::hooks::seam("remote-after-index", &index_key);
        check_interrupt()?;
        report.objects = stats.objects - 1;
        report.pack_bytes = stats.pack_bytes;
        report.pack = Some(pack_id);
    }
    // The trees-only pack (what a remote diff or mount reads first): named by the snapshot,
    // its bytes a function of the snapshot alone, so a second writer stores the same bytes.
    // Before the record, like every object the record reaches.
    upload_trees_pack(store, remote, id, &trees_key)?;
    crate::hooks::seam("remote-after-trees", &trees_key);
    check_interrupt()?;
    remote.put_bytes(&format!("snapshots/{}", id.to_hex()), record)?;
    Ok(report)
}

/// Writes snapshot `id`'s trees-only pack to a temporary file and uploads it to `key`.
fn upload_trees_pack(
    store: &Store,
    remote: &Remote,
    id: &ObjectId,
    key: &str,
) -> Result<(), RemoteError> {
    let tmp = tmp_path(store, "push-trees")?;
    let _cleanup = TempFiles(vec![tmp.clone()]);
    write_trees_pack(store, id, &tmp)?;
    check_interrupt()?;
    remote.put_file(key, &tmp)
}

/// Writes snapshot `id`'s trees-only pack to the new file `path`, synced.
fn write_trees_pack(store: &Store, id: &ObjectId, path: &Path) -> Result<(), RemoteError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| io_err("create", path, e))?;
    let mut w = BufWriter::new(file);
    write_pack(
        store,
        id,
        PackOptions {
            since: None,
            trees_only: true,
        },
        &mut w,
        &mut |_| {},
    )?;
    let file = w
        .into_inner()
        .map_err(|e| io_err("write", path, e.into_error()))?;
    file.sync_all().map_err(|e| io_err("sync", path, e))
}

/// Pulls snapshot `id` from `remote` into `store`: downloads the packs that hold what the
/// store lacks, verifies each, imports the objects, then commits the record.
pub fn pull(store: &Store, remote: &Remote, id: &ObjectId) -> Result<PullReport, RemoteError> {
    let record_key = format!("snapshots/{}", id.to_hex());
    let record = remote.record(id)?.ok_or_else(|| RemoteError::NoSnapshot {
        name: remote.name().to_string(),
        reference: id.to_hex(),
    })?;
    let snap = Snapshot::decode(&record)
        .map_err(|e| remote.corrupt(&record_key, format!("not a snapshot record: {e}")))?;
    let mut report = PullReport::default();
    // Held (shared) from before the first downloaded pack in tmp/ to the catalog entry: a gc
    // waits instead of removing a pack being read (the import takes it again, shared).
    let _lock = store.write_lock()?;
    let mut packs: Vec<PackReader> = Vec::new();
    let mut fetched: HashSet<String> = HashSet::new();
    let mut indexed: Option<HashMap<ObjectId, String>> = None;
    let mut temps = TempFiles(Vec::new());
    // Each downloaded pack's remote key, to name it instead of its temporary file.
    let mut keys: HashMap<PathBuf, String> = HashMap::new();
    loop {
        let (missing, _) = closure_needs(store, &packs, &snap.root)?;
        if missing.is_empty() {
            break;
        }
        if indexed.is_none() {
            indexed = Some(remote.indexed()?);
        }
        let index = indexed.as_ref().expect("just loaded");
        let mut want = BTreeSet::new();
        for m in &missing {
            match index.get(m) {
                Some(p) if !fetched.contains(p) => {
                    want.insert(p.clone());
                }
                Some(p) => {
                    return Err(remote.corrupt(
                        &format!("index/{p}.idx"),
                        format!("lists object {} but its pack does not hold it", m.short(12)),
                    ))
                }
                None => {
                    return Err(remote.corrupt(
                        &record_key,
                        format!("reaches object {} that no index lists", m.short(12)),
                    ))
                }
            }
        }
        for p in want {
            let local = tmp_path(store, "pull")?;
            temps.0.push(local.clone());
            let key = format!("packs/{p}.zcpack");
            report.bytes += remote.get_file(&key, &local)?;
            keys.insert(local.clone(), key.clone());
            crate::hooks::seam("remote-after-fetch", &key);
            report.packs += 1;
            packs.push(PackReader::open(&local).map_err(|e| named(remote, &keys, e))?);
            fetched.insert(p);
        }
    }
    check_interrupt()?;
    import_from_packs(store, id, &record, &packs).map_err(|e| named(remote, &keys, e))?;
    drop(packs);
    drop(temps);
    Ok(report)
}

/// A bad downloaded pack named by its remote key (`packs/<id>.zcpack` on the remote), not by
/// the temporary file it was fetched into (removed by then).
fn named(remote: &Remote, keys: &HashMap<PathBuf, String>, e: StoreError) -> RemoteError {
    match e {
        StoreError::BadPack { pack, why } => match keys.get(&pack) {
            Some(key) => remote.corrupt(key, format!("not a valid pack: {why}")),
            None => StoreError::BadPack { pack, why }.into(),
        },
        other => other.into(),
    }
}
