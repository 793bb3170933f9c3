//! `push` and `pull`: the write order that keeps a remote consistent (pack, then its index,
//! then the record) and the fetch-verify-import path back into a local store.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use zeroclaw_bundle_store::{
    random_token, EntryKind, IdHasher, ObjectId, PackOptions, PackReader, PackStats, Snapshot,
    Store, StoreError,
};

use super::client::{encode_index, IndexScan};
use super::{Remote, RemoteError};
use crate::progress::{Cancellable, ImportProgress, Progress, Totals};

/// What a push did (`--json` prints it as it serializes).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PushReport {
    /// The snapshot.
    pub snapshot: Option<ObjectId>,
    /// The remote's name.
    pub remote: String,
    /// The remote listed it already: nothing was written.
    pub already: bool,
    /// Objects uploaded (in one pack; 0 when the remote held them all).
    pub objects: u64,
    /// Bytes of that pack.
    pub pack_bytes: u64,
    /// The pack's id.
    pub pack: Option<String>,
    /// Signatures of the snapshot the remote did not have, added.
    pub signatures: u64,
}

/// What a pull did (`--json` prints it as it serializes; who signed is said in words).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PullReport {
    /// The snapshot.
    pub snapshot: Option<ObjectId>,
    /// The remote's name.
    pub remote: String,
    /// Packs downloaded.
    pub packs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Signatures of the snapshot the remote keeps (all carried into the store).
    pub signatures: u64,
    /// Who signed, as the gate found them (empty without one).
    #[serde(skip)]
    pub signers: Vec<crate::sign::Signer>,
}

impl PullReport {
    /// The pull in one sentence: `pulled 3f2a9c01e0b4 from origin: 1 pack, 2.1 KiB, verified`.
    pub fn describe(&self) -> String {
        format!(
            "pulled {} from {}: {}, {}, verified",
            self.snapshot.map(|id| id.short(12)).unwrap_or_default(),
            self.remote,
            crate::words::count(self.packs, "pack"),
            crate::words::human_bytes(self.bytes)
        )
    }
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

/// Every object snapshot `id` reaches (its record, trees and blobs), walked through the
/// store, with each blob's size (0 for the record and the trees): what a push may rely on
/// the remote for, and what its progress counts. Memory: one entry per object.
fn closure_ids(
    store: &Store,
    id: &ObjectId,
    root: &ObjectId,
) -> Result<HashMap<ObjectId, u64>, RemoteError> {
    let mut all = HashMap::from([(*id, 0), (*root, 0)]);
    let mut stack = vec![*root];
    while let Some(t) = stack.pop() {
        for e in store.objects().read_tree(&t)?.entries() {
            let size = if e.kind == EntryKind::Dir { 0 } else { e.size };
            if all.insert(e.id, size).is_none() && e.kind == EntryKind::Dir {
                stack.push(e.id);
            }
        }
    }
    Ok(all)
}

/// Reports an upload or download of a pack as objects and bytes: `ends` holds where each
/// object of the pack ends (sorted), so the bytes moved so far say how many objects are whole.
fn transfer_progress<'a>(progress: &'a dyn Progress, ends: &'a [u64]) -> impl Fn(u64) + 'a {
    move |bytes| {
        let files = ends.partition_point(|end| *end <= bytes) as u64;
        progress.advance(Totals { files, bytes });
    }
}

/// The objects of `closure` the remote verifiably holds: listed by the index of a pack that
/// is present and not marked by a remote `gc`, AND found in that pack's own index (its
/// layout, read with ranged GETs and checked as a local pack is). An index that lies (lists
/// an object its pack lacks) is not trusted: what only it vouches for is uploaded again.
fn verified_held(
    remote: &Remote,
    closure: &HashMap<ObjectId, u64>,
    marks: &HashSet<String>,
) -> Result<HashSet<ObjectId>, RemoteError> {
    let present: HashSet<String> = remote
        .packs()?
        .into_keys()
        .filter(|p| !marks.contains(p))
        .collect();
    let scan = remote.scan_indexes(&|o| closure.contains_key(o), Some(&present))?;
    let mut layouts: HashMap<String, Option<zeroclaw_bundle_store::PackLayout>> = HashMap::new();
    let mut held = HashSet::new();
    for (obj, packs) in &scan.found {
        for p in packs {
            if !layouts.contains_key(p) {
                let listed = scan.listed.get(p).copied().unwrap_or(0);
                // A pack that cannot be read as a pack vouches for nothing.
                let layout = match remote.pack_layout(p, listed) {
                    Ok(l) => l,
                    Err(RemoteError::Corrupt { .. }) => None,
                    Err(e) => return Err(e),
                };
                layouts.insert(p.clone(), layout);
            }
            if layouts[p].as_ref().is_some_and(|l| l.entry(obj).is_some()) {
                held.insert(*obj);
                break;
            }
        }
    }
    Ok(held)
}

/// Pushes snapshot `id` of `store` to `remote`: one pack of every object the remote does not
/// verifiably hold, then the pack's index, then the trees pack, then the record (see the
/// module doc). A snapshot the remote lists already is checked the same way, so a push
/// repairs a record whose objects were lost or only vouched for by a lying index.
///
/// Against a concurrent remote `gc` (see `gc`'s module doc): the push reads the gc marks
/// before anything else, relies on no marked pack, and writes its record only within
/// [`super::gc::push_window`] of that read.
///
/// `progress` hears two phases of objects and bytes: `packing` (the objects the remote lacks,
/// by their content bytes) and `uploading` (the pack's bytes).
pub fn push(
    store: &Store,
    remote: &Remote,
    id: &ObjectId,
    progress: &dyn Progress,
) -> Result<PushReport, RemoteError> {
    let record = store.objects().read_verified(id)?;
    let snap = store.objects().read_snapshot(id)?;
    let mut report = PushReport {
        snapshot: Some(*id),
        remote: remote.name().to_string(),
        ..PushReport::default()
    };
    let trees_key = format!("trees/{}.zcpack", id.to_hex());
    // Held (shared) from before the first temporary pack in tmp/ until the last upload: a gc
    // waits instead of removing the pack being written or uploaded.
    let _lock = store.write_lock()?;
    let started = Instant::now();
    let marks: HashSet<String> = remote.marks()?.into_keys().collect();
    // Never plaintext to an encrypted remote: a bucket with a key file takes sealed pushes only
    // (asked after the first listing, whose errors say what to check about credentials).
    if !remote.is_encrypted() && remote.has_key_file()? {
        return Err(RemoteError::Invalid {
            name: remote.name().to_string(),
            why: format!(
                "it is an encrypted remote (it holds {}) but is configured here without encryption: \
                 refusing to push plaintext to it; add it again with `remote add NAME URL \
                 --encrypted`",
                super::client::KEY_FILE
            ),
        });
    }
    crate::hooks::seam("remote-after-marks", remote.name());
    let listed = remote.record(id)?.is_some();
    let closure = closure_ids(store, id, &snap.root)?;
    let held = verified_held(remote, &closure, &marks)?;
    let tmp = tmp_path(store, "push")?;
    let _cleanup = TempFiles(vec![tmp.clone()]);
    let (stats, pack_id) = write_push_pack(store, id, &held, &closure, &tmp, progress)?;
    remote.check_cancel()?;
    if listed && stats.objects <= 1 {
        report.already = true;
        // Pushed by an older build, without its trees pack: add it (derived from the record's
        // trees, so writing it after the record breaks no ordering guarantee).
        if remote.size(&trees_key)?.is_none() {
            upload_trees_pack(store, remote, id, &trees_key)?;
        }
        // Signatures made since the last push are added to what the remote keeps.
        report.signatures = upload_signatures(store, remote, id)?;
        return Ok(report);
    }
    // Only the record: the remote holds every object already.
    if stats.objects > 1 {
        upload_pack(remote, &tmp, &pack_id, &marks, stats.pack_bytes, progress)?;
        report.objects = stats.objects - 1;
        report.pack_bytes = stats.pack_bytes;
        report.pack = Some(pack_id);
    }
    // The trees-only pack (what a remote diff or mount reads first): named by the snapshot,
    // its bytes a function of the snapshot alone, so a second writer stores the same bytes.
    // Before the record, like every object the record reaches.
    upload_trees_pack(store, remote, id, &trees_key)?;
    crate::hooks::seam("remote-after-trees", &trees_key);
    remote.check_cancel()?;
    check_window(remote, started)?;
    // The signatures before the record, so a puller that sees the record sees them too.
    report.signatures = upload_signatures(store, remote, id)?;
    remote.check_cancel()?;
    // Conditional (the record under an id never changes once written); a record already
    // there holds the same bytes (it hashes to its name).
    let record_key = format!("snapshots/{}", id.to_hex());
    remote.put_new(&record_key, record)?;
    crate::hooks::seam("remote-after-record", &record_key);
    Ok(report)
}

/// Writes the pack of every object of `closure` the remote does not hold (`held`) to the new
/// file `tmp`, synced, hearing the `packing` phase; returns its stats and its id.
fn write_push_pack(
    store: &Store,
    id: &ObjectId,
    held: &HashSet<ObjectId>,
    closure: &HashMap<ObjectId, u64>,
    tmp: &Path,
    progress: &dyn Progress,
) -> Result<(PackStats, String), RemoteError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| io_err("create", tmp, e))?;
    let mut w = Hashing {
        inner: BufWriter::new(file),
        hasher: IdHasher::new(),
    };
    let (objects, bytes) = closure
        .iter()
        .filter(|(o, _)| !held.contains(*o))
        .fold((0, 0), |(n, b), (_, size)| (n + 1, b + size));
    progress.begin_objects(
        "packing",
        Some(Totals {
            files: objects,
            bytes,
        }),
    );
    let mut done = Totals::default();
    let stats = store
        .packs()
        .write_excluding(id, &|o| held.contains(o), &mut w, &mut |n| {
            done.files += 1;
            done.bytes += n;
            progress.advance(done);
            crate::hooks::seam("push-packed", &format!("object-{}", done.files));
        })?;
    progress.finish();
    let pack_id = w.hasher.finish().to_hex();
    let file = w
        .inner
        .into_inner()
        .map_err(|e| io_err("write", tmp, e.into_error()))?;
    file.sync_all().map_err(|e| io_err("sync", tmp, e))?;
    drop(file);
    Ok((stats, pack_id))
}

/// Uploads the pack in `tmp` (id `pack_id`, `pack_bytes` long), hearing the `uploading`
/// phase, then its index: refused when a remote gc has marked a pack of that name.
fn upload_pack(
    remote: &Remote,
    tmp: &Path,
    pack_id: &str,
    marks: &HashSet<String>,
    pack_bytes: u64,
    progress: &dyn Progress,
) -> Result<(), RemoteError> {
    // The same bytes as a pack a gc has marked: relying on it could lose the race with
    // that gc's delete (see `gc`), and a pack's name is its hash, so it cannot be renamed.
    if marks.contains(pack_id) {
        return Err(RemoteError::Invalid {
            name: remote.name().to_string(),
            why: format!(
                "this push's pack packs/{pack_id}.zcpack is marked for deletion by a remote gc (the same objects were pushed before, then forgotten); run `remote gc` after its grace period, then push again"
            ),
        });
    }
    let reader = PackReader::open(tmp)?;
    let ids: Vec<ObjectId> = reader.entries().iter().map(|e| e.id).collect();
    let pack_key = format!("packs/{pack_id}.zcpack");
    let mut ends: Vec<u64> = reader
        .entries()
        .iter()
        .map(|e| e.offset + e.stored_len)
        .collect();
    ends.sort_unstable();
    progress.begin_objects(
        "uploading",
        Some(Totals {
            files: ends.len() as u64,
            bytes: pack_bytes,
        }),
    );
    let sent = remote.put_file(&pack_key, tmp, &transfer_progress(progress, &ends));
    crate::hooks::seam("push-uploaded", &pack_key);
    progress.finish();
    sent?;
    crate::hooks::seam("remote-after-pack", &pack_key);
    remote.check_cancel()?;
    // A plain write: it replaces a lying index of the same name with the pack's truth.
    let index_key = format!("index/{pack_id}.idx");
    remote.put_bytes(&index_key, encode_index(&ids))?;
    crate::hooks::seam("remote-after-index", &index_key);
    remote.check_cancel()?;
    Ok(())
}

/// Refuses to write the record when the push took longer than [`super::gc::push_window`]
/// since it read the gc marks (`started`).
fn check_window(remote: &Remote, started: Instant) -> Result<(), RemoteError> {
    let window = super::gc::push_window();
    if started.elapsed() > window {
        return Err(RemoteError::Invalid {
            name: remote.name().to_string(),
            why: format!(
                "this push took longer than {} s since it read the remote's gc marks, so a remote gc may have deleted what it relies on; its pack is uploaded: push again (it will be quick)",
                window.as_secs()
            ),
        });
    }
    Ok(())
}

/// Adds every signature `store` keeps for snapshot `id` that the remote lacks; returns how many.
fn upload_signatures(store: &Store, remote: &Remote, id: &ObjectId) -> Result<u64, RemoteError> {
    let mut added = 0;
    for sig in store.catalog().signatures(id)? {
        if remote.put_signature(id, &sig.bytes)? {
            added += 1;
        }
    }
    Ok(added)
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
    remote.check_cancel()?;
    remote.put_file(key, &tmp, &|_| {})
}

/// Writes snapshot `id`'s trees-only pack to the new file `path`, synced.
fn write_trees_pack(store: &Store, id: &ObjectId, path: &Path) -> Result<(), RemoteError> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| io_err("create", path, e))?;
    let mut w = BufWriter::new(file);
    store.packs().write(
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
/// store lacks, verifies each, imports the objects, then commits the record, carrying the
/// snapshot's signatures into the store. `progress` hears a `downloading` phase per round of
/// packs (their objects and bytes), then the import's `verifying` phase; the import stops
/// (nothing imported) at SIGINT or SIGTERM. With `require`, the snapshot is refused (before anything is downloaded, so before it has a catalog entry here) unless
/// one of its signatures passes [`crate::sign::require_signed_blobs`] against those signers.
pub fn pull_checked(
    store: &Store,
    remote: &Remote,
    id: &ObjectId,
    require: Option<&crate::sign::AllowedSigners>,
    progress: &dyn Progress,
) -> Result<PullReport, RemoteError> {
    let record_key = format!("snapshots/{}", id.to_hex());
    let record = remote.record(id)?.ok_or_else(|| RemoteError::NoSnapshot {
        name: remote.name().to_string(),
        reference: id.to_hex(),
    })?;
    let signatures = remote.signatures(id)?;
    let signers = match require {
        Some(allowed) => crate::sign::require_signed_blobs(id, &signatures, allowed)?,
        None => Vec::new(),
    };
    let snap = Snapshot::decode(&record)
        .map_err(|e| remote.corrupt(&record_key, format!("not a snapshot record: {e}")))?;
    let mut report = PullReport {
        snapshot: Some(*id),
        remote: remote.name().to_string(),
        signatures: signatures.len() as u64,
        signers,
        ..PullReport::default()
    };
    // Held (shared) from before the first downloaded pack in tmp/ to the catalog entry: a gc
    // waits instead of removing a pack being read (the import takes it again, shared).
    let lock = store.write_lock()?;
    let mut got = Downloads {
        keys: HashMap::new(),
        temps: TempFiles(Vec::new()),
        tried: HashSet::new(),
        packs: Vec::new(),
    };
    loop {
        let (missing, _) = store.packs().closure_needs(&got.packs, &snap.root)?;
        if missing.is_empty() {
            break;
        }
        // The indexes are read as they stream, keeping only what is missing now: memory is
        // bounded by the snapshot, not by the indexes (a walk deeper than the packs fetched
        // so far reads them again).
        let wanted: HashSet<ObjectId> = missing.iter().copied().collect();
        let scan = remote.scan_indexes(&|o| wanted.contains(o), None)?;
        let want = packs_to_fetch(remote, &scan, &missing, &got.tried, &record_key)?;
        download(store, remote, &scan, want, &mut got, &mut report, progress)?;
    }
    remote.check_cancel()?;
    // Beside the record before it is committed (under this pull's lock: gc cannot sweep them
    // in between); an import that fails leaves them for a snapshot gc does not keep.
    store
        .catalog()
        .add_received_signatures(&lock, id, &signatures)?;
    // The import stops on the remote's token, as the transfers before it did.
    let watched = Cancellable::new(progress, remote.cancel().clone());
    let watch = ImportProgress::new(&watched);
    let imported = store.packs().import(id, &record, &got.packs, &watch);
    progress.finish();
    imported.map_err(|e| match e {
        StoreError::Interrupted => RemoteError::Interrupted,
        e => named(remote, &got.keys, e),
    })?;
    drop(got.packs);
    drop(got.temps);
    Ok(report)
}

/// What a pull has downloaded so far. The fields drop in this order, as the pull's own
/// variables did: the keys, the temporary files, the tried packs, then the open packs.
struct Downloads {
    /// Each downloaded pack's remote key, to name it instead of its temporary file.
    keys: HashMap<PathBuf, String>,
    /// The temporary files the packs were downloaded into, removed on drop.
    temps: TempFiles,
    /// Packs downloaded (or found gone): never fetched twice.
    tried: HashSet<String>,
    /// The packs downloaded, open.
    packs: Vec<PackReader>,
}

/// The packs to fetch for the `missing` objects: for each, the first candidate of `scan` not
/// `tried` yet; an object no untried pack's index lists is an error naming the index or the
/// record (`record_key`).
fn packs_to_fetch(
    remote: &Remote,
    scan: &IndexScan,
    missing: &[ObjectId],
    tried: &HashSet<String>,
    record_key: &str,
) -> Result<BTreeSet<String>, RemoteError> {
    let mut want = BTreeSet::new();
    for m in missing {
        let candidates = scan.found.get(m);
        // Every pack whose index lists it is a candidate: one that turned out not to hold
        // it (a lying index) is passed over for the next.
        match candidates.and_then(|c| c.iter().find(|p| !tried.contains(*p))) {
            Some(p) => {
                want.insert(p.clone());
            }
            None => {
                return Err(match candidates.and_then(|c| c.first()) {
                    Some(p) => remote.corrupt(
                        &format!("index/{p}.idx"),
                        format!("lists object {} but its pack does not hold it", m.short(12)),
                    ),
                    None => remote.corrupt(
                        record_key,
                        format!("reaches object {} that no index lists", m.short(12)),
                    ),
                })
            }
        }
    }
    Ok(want)
}

/// Downloads one round of packs (`want`) into `got`, hearing a `downloading` phase; a pack
/// listed by an index and gone from the remote is passed over.
fn download(
    store: &Store,
    remote: &Remote,
    scan: &IndexScan,
    want: BTreeSet<String>,
    got: &mut Downloads,
    report: &mut PullReport,
    progress: &dyn Progress,
) -> Result<(), RemoteError> {
    // The sizes of the packs to fetch, for the progress (one listing per round).
    let sizes = remote.packs()?;
    let total = Totals {
        files: want
            .iter()
            .map(|p| scan.listed.get(p).copied().unwrap_or(0))
            .sum(),
        bytes: want
            .iter()
            .map(|p| sizes.get(p).map_or(0, |l| l.size))
            .sum(),
    };
    progress.begin_objects("downloading", Some(total));
    // All the round's packs at once (their parts in parallel), into temporary files.
    let mut jobs = Vec::with_capacity(want.len());
    for p in &want {
        got.tried.insert(p.clone());
        let local = tmp_path(store, "pull")?;
        got.temps.0.push(local.clone());
        jobs.push((format!("packs/{p}.zcpack"), local));
    }
    let fetched = remote.get_files(&jobs, &|bytes| progress.advance(Totals { files: 0, bytes }))?;
    let mut before = Totals::default();
    for ((p, (key, local)), n) in want.iter().zip(jobs).zip(fetched) {
        // Listed by an index, then gone (a remote gc): another candidate may hold it.
        let Some(n) = n else {
            continue;
        };
        // Objects are counted per pack, once it is whole (its index is at its end).
        before.files += scan.listed.get(p).copied().unwrap_or(0);
        before.bytes += n;
        progress.advance(before);
        report.bytes += n;
        got.keys.insert(local.clone(), key.clone());
        crate::hooks::seam("remote-after-fetch", &key);
        report.packs += 1;
        got.packs
            .push(PackReader::open(&local).map_err(|e| named(remote, &got.keys, e))?);
    }
    progress.finish();
    Ok(())
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
