//! One remote opened through `object_store`, with the current-thread tokio runtime that runs
//! its requests; every method blocks until its request is done.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::Path as FsPath;
use std::sync::Arc;

use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use zeroclaw_bundle_store::ObjectId;

use super::counting::{Counters, Counting};
use super::{RemoteError, RemoteSpec};

/// The first line of an index file.
pub(crate) const INDEX_HEADER: &str = "zeroclaw-bundle remote index 1";
/// Packs up to this size go up in one request; larger ones as a multipart upload.
const SINGLE_PUT_MAX: u64 = 16 << 20;
/// Multipart part size (S3's minimum is 5 MiB).
const PART: usize = 8 << 20;
/// An index file is at most this big (32 million ids); a larger one is refused unread.
const MAX_INDEX_BYTES: u64 = 2 << 30;

/// Object -> the pack that holds it, and pack -> how many objects its index lists.
pub(crate) type PackIndexes = (HashMap<ObjectId, String>, HashMap<String, u64>);

/// A remote store, opened.
pub struct Remote {
    name: String,
    rt: tokio::runtime::Runtime,
    store: Arc<dyn ObjectStore>,
    counters: Counters,
}

impl Remote {
    /// Opens `spec`; with `create`, a `file://` remote's directory is made when missing.
    pub fn open(spec: &RemoteSpec, create: bool) -> Result<Remote, RemoteError> {
        super::config::validate(spec)?;
        let invalid = |why: String| RemoteError::Invalid {
            name: spec.name.clone(),
            why,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RemoteError::Io {
                op: "start the I/O runtime for",
                path: spec.url.clone().into(),
                source: e,
            })?;
        let store: Arc<dyn ObjectStore> = if let Some(rest) = spec.url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
            // The environment first, then the AWS files (as the AWS CLI): see `aws`.
            let env = |k: &str| std::env::var(k).ok();
            let files = super::aws::from_files(&env)?;
            let env_keys = env("AWS_ACCESS_KEY_ID").is_some_and(|v| !v.is_empty());
            let mut have_keys = env_keys;
            if !env_keys {
                if let Some((id, secret, token)) = files.keys {
                    b = b.with_access_key_id(id).with_secret_access_key(secret);
                    if let Some(token) = token {
                        b = b.with_token(token);
                    }
                    have_keys = true;
                }
            }
            let env_region = ["AWS_REGION", "AWS_DEFAULT_REGION"]
                .iter()
                .any(|k| env(k).is_some_and(|v| !v.is_empty()));
            if let (false, Some(region)) = (env_region, files.region) {
                b = b.with_region(region);
            }
            if let Some(ep) = &spec.endpoint {
                // Off AWS there is no instance metadata to ask: say what is missing instead.
                if !have_keys {
                    return Err(invalid(format!(
                        "no credentials for {ep}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in \
                         the environment, or a profile in ~/.aws/credentials (AWS_PROFILE, \
                         AWS_SHARED_CREDENTIALS_FILE)"
                    )));
                }
                b = b
                    .with_endpoint(ep)
                    .with_allow_http(ep.starts_with("http://"));
            }
            // The builder's errors quote no secret (they name the missing or bad setting).
            let s3 = b.build().map_err(|e| invalid(e.to_string()))?;
            let prefix = prefix.trim_matches('/');
            if prefix.is_empty() {
                Arc::new(s3)
            } else {
                Arc::new(PrefixStore::new(s3, prefix))
            }
        } else {
            let dir = spec.url.strip_prefix("file://").expect("validated");
            if create {
                std::fs::create_dir_all(dir).map_err(|e| RemoteError::Io {
                    op: "create the remote directory",
                    path: dir.into(),
                    source: e,
                })?;
            }
            if !FsPath::new(dir).is_dir() {
                return Err(invalid(format!(
                    "{dir} is not a directory (a wrong path, or nothing was pushed there yet)"
                )));
            }
            Arc::new(LocalFileSystem::new_with_prefix(dir).map_err(|e| invalid(e.to_string()))?)
        };
        let counters = Counters::default();
        Ok(Remote {
            name: spec.name.clone(),
            rt,
            store: Arc::new(Counting::new(store, Arc::clone(&counters))),
            counters,
        })
    }

    /// What this remote was asked so far, in one line (requests and bytes per key prefix).
    pub fn traffic(&self) -> String {
        super::counting::describe(&self.counters)
    }

    /// The remote's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn request(&self, op: &'static str, key: &str, source: object_store::Error) -> RemoteError {
        RemoteError::Request {
            name: self.name.clone(),
            op,
            key: key.to_string(),
            why: source.to_string(),
        }
    }

    pub(crate) fn corrupt(&self, key: &str, why: impl Into<String>) -> RemoteError {
        RemoteError::Corrupt {
            name: self.name.clone(),
            key: key.to_string(),
            why: why.into(),
        }
    }

    /// The keys under `dir/` (their last component and size).
    fn list(&self, dir: &str) -> Result<Vec<(String, u64)>, RemoteError> {
        let prefix = Path::from(dir);
        self.rt.block_on(async {
            let mut stream = self.store.list(Some(&prefix));
            let mut out = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta.map_err(|e| self.request("list", dir, e))?;
                if let Some(name) = meta.location.filename() {
                    out.push((name.to_string(), meta.size));
                }
            }
            out.sort();
            Ok(out)
        })
    }

    /// The bytes at `key`, or `None` when there is none; refused past `max` bytes.
    fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>, RemoteError> {
        let path = Path::from(key);
        self.rt.block_on(async {
            let got = match self.store.get(&path).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.request("read", key, e)),
            };
            if got.meta.size > max {
                return Err(self.corrupt(key, format!("is {} bytes, over {max}", got.meta.size)));
            }
            let bytes = got
                .bytes()
                .await
                .map_err(|e| self.request("read", key, e))?;
            Ok(Some(bytes.to_vec()))
        })
    }

    /// The size of `key`, or `None` when there is none.
    pub(crate) fn size(&self, key: &str) -> Result<Option<u64>, RemoteError> {
        let path = Path::from(key);
        match self.rt.block_on(self.store.head(&path)) {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.request("stat", key, e)),
        }
    }

    /// The last `n` bytes of `key` (all of it when it is shorter) and its size, in one
    /// request (a suffix range).
    pub(crate) fn get_suffix(&self, key: &str, n: u64) -> Result<(Vec<u8>, u64), RemoteError> {
        let path = Path::from(key);
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Suffix(n.max(1))),
            ..Default::default()
        };
        self.rt.block_on(async {
            let got = self
                .store
                .get_opts(&path, options)
                .await
                .map_err(|e| self.request("read", key, e))?;
            let size = got.meta.size;
            let want = n.max(1).min(size);
            if got.range.end != size || got.range.end - got.range.start != want {
                return Err(self.corrupt(
                    key,
                    format!(
                        "returned range {}..{} for its last {want} of {size} bytes",
                        got.range.start, got.range.end
                    ),
                ));
            }
            let bytes = got
                .bytes()
                .await
                .map_err(|e| self.request("read", key, e))?;
            if bytes.len() as u64 != want {
                return Err(self.corrupt(
                    key,
                    format!("returned {} bytes, not its last {want}", bytes.len()),
                ));
            }
            Ok((bytes.to_vec(), size))
        })
    }

    /// Bytes `range` of `key` (one ranged GET); fails unless exactly that many arrive.
    pub(crate) fn get_range(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
    ) -> Result<Vec<u8>, RemoteError> {
        let mut out = Vec::with_capacity((range.end - range.start) as usize);
        self.get_range_to(key, range, &mut out)?;
        Ok(out)
    }

    /// Streams bytes `range` of `key` (one ranged GET) into `out`; fails unless exactly that
    /// many arrive.
    pub(crate) fn get_range_to(
        &self,
        key: &str,
        range: std::ops::Range<u64>,
        out: &mut dyn Write,
    ) -> Result<(), RemoteError> {
        let want = range.end - range.start;
        if want == 0 {
            return Ok(());
        }
        let path = Path::from(key);
        let options = object_store::GetOptions {
            range: Some(range.clone().into()),
            ..Default::default()
        };
        self.rt.block_on(async {
            let got = self
                .store
                .get_opts(&path, options)
                .await
                .map_err(|e| self.request("read", key, e))?;
            let mut stream = got.into_stream();
            let mut n = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| self.request("read", key, e))?;
                n += chunk.len() as u64;
                if n > want {
                    break;
                }
                out.write_all(&chunk).map_err(|e| RemoteError::Io {
                    op: "write what was read from",
                    path: key.into(),
                    source: e,
                })?;
            }
            if n != want {
                return Err(self.corrupt(
                    key,
                    format!(
                        "returned {n} bytes for range {}..{}, not {want}",
                        range.start, range.end
                    ),
                ));
            }
            Ok(())
        })
    }

    /// Writes `bytes` at `key` (atomic: the key holds all of them or what it held before).
    pub(crate) fn put_bytes(&self, key: &str, bytes: Vec<u8>) -> Result<(), RemoteError> {
        let path = Path::from(key);
        self.rt
            .block_on(self.store.put(&path, PutPayload::from(bytes)))
            .map(|_| ())
            .map_err(|e| self.request("write", key, e))
    }

    /// Uploads the local file `file` to `key`: one request, or a multipart upload for a
    /// large file (completed only when every part is in; an abandoned one is never visible).
    pub(crate) fn put_file(&self, key: &str, file: &FsPath) -> Result<(), RemoteError> {
        let io = |op, e| RemoteError::Io {
            op,
            path: file.to_path_buf(),
            source: e,
        };
        let mut f = File::open(file).map_err(|e| io("open", e))?;
        let len = f.metadata().map_err(|e| io("stat", e))?.len();
        if len <= SINGLE_PUT_MAX {
            let mut bytes = Vec::with_capacity(len as usize);
            f.read_to_end(&mut bytes).map_err(|e| io("read", e))?;
            return self.put_bytes(key, bytes);
        }
        let path = Path::from(key);
        self.rt.block_on(async {
            let upload = self
                .store
                .put_multipart(&path)
                .await
                .map_err(|e| self.request("start uploading", key, e))?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
            let mut buf = vec![0u8; PART];
            loop {
                let n = f.read(&mut buf).map_err(|e| io("read", e))?;
                if n == 0 {
                    break;
                }
                if let Err(e) = super::check_interrupt() {
                    w.abort().await.ok();
                    return Err(e);
                }
                w.wait_for_capacity(4)
                    .await
                    .map_err(|e| self.request("upload", key, e))?;
                w.write(&buf[..n]);
            }
            w.finish()
                .await
                .map(|_| ())
                .map_err(|e| self.request("finish uploading", key, e))
        })
    }

    /// Downloads `key` into the local file `out` (created new); returns its size.
    pub(crate) fn get_file(&self, key: &str, out: &FsPath) -> Result<u64, RemoteError> {
        let io = |op, e| RemoteError::Io {
            op,
            path: out.to_path_buf(),
            source: e,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(out)
            .map_err(|e| io("create", e))?;
        let path = Path::from(key);
        let n = self.rt.block_on(async {
            let got = self
                .store
                .get(&path)
                .await
                .map_err(|e| self.request("download", key, e))?;
            let mut stream = got.into_stream();
            let mut n = 0u64;
            while let Some(chunk) = stream.next().await {
                super::check_interrupt()?;
                let chunk = chunk.map_err(|e| self.request("download", key, e))?;
                f.write_all(&chunk).map_err(|e| io("write", e))?;
                n += chunk.len() as u64;
            }
            Ok::<u64, RemoteError>(n)
        })?;
        // Not synced: a downloaded pack is a temporary file, verified before use; the objects
        // imported from it are made durable by the store's commit.
        Ok(n)
    }

    /// The snapshot ids the remote lists (`snapshots/<id>`).
    pub fn snapshots(&self) -> Result<Vec<ObjectId>, RemoteError> {
        let mut ids = Vec::new();
        for (name, _) in self.list("snapshots")? {
            match parse_id(&name) {
                Some(id) => ids.push(id),
                None => {
                    return Err(self.corrupt(
                        &format!("snapshots/{name}"),
                        "is not named by a snapshot id",
                    ))
                }
            }
        }
        Ok(ids)
    }

    /// The record of snapshot `id`, checked against its id; `None` when the remote lacks it.
    pub fn record(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, RemoteError> {
        let key = format!("snapshots/{}", id.to_hex());
        let Some(bytes) = self.get(&key, 16 << 20)? else {
            return Ok(None);
        };
        let actual = ObjectId::of(&bytes);
        if actual != *id {
            return Err(self.corrupt(&key, format!("hashes to {} (corrupt)", actual.short(12))));
        }
        Ok(Some(bytes))
    }

    /// A snapshot of the remote from a full id or a unique prefix of 8+ hex digits.
    pub fn resolve(&self, reference: &str) -> Result<ObjectId, RemoteError> {
        let none = || RemoteError::NoSnapshot {
            name: self.name.clone(),
            reference: reference.to_string(),
        };
        let lower = reference.to_ascii_lowercase();
        if lower.len() < 8 || lower.len() > 64 || !lower.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(RemoteError::Invalid {
                name: self.name.clone(),
                why: format!(
                    "{reference:?} is not a snapshot id or a prefix of 8 or more hex digits"
                ),
            });
        }
        let found: Vec<ObjectId> = self
            .snapshots()?
            .into_iter()
            .filter(|id| id.to_hex().starts_with(&lower))
            .collect();
        match found.as_slice() {
            [one] => Ok(*one),
            [] => Err(none()),
            many => Err(RemoteError::Invalid {
                name: self.name.clone(),
                why: format!(
                    "{reference} matches {} snapshots; give more digits",
                    many.len()
                ),
            }),
        }
    }

    /// Every indexed object and the pack that holds it (`packs/<pack>.zcpack`), from the
    /// index files; packs without an index are not counted.
    pub fn indexed(&self) -> Result<HashMap<ObjectId, String>, RemoteError> {
        Ok(self.indexed_packs()?.0)
    }

    /// [`Remote::indexed`], counting only indexes whose pack the remote holds (one LIST of
    /// `packs/`, taken before the indexes are read: a pack is whole before its index is
    /// written, so a pack that appears in between only costs a re-upload). What a push
    /// trusts: an index whose pack is gone must not stand for objects nobody can fetch.
    pub fn indexed_present(&self) -> Result<HashMap<ObjectId, String>, RemoteError> {
        let packs: HashSet<String> = self
            .list("packs")?
            .into_iter()
            .filter_map(|(name, _)| name.strip_suffix(".zcpack").map(String::from))
            .collect();
        Ok(self.read_indexes(Some(&packs))?.0)
    }

    /// [`Remote::indexed`], and how many objects each pack's index lists.
    pub(crate) fn indexed_packs(&self) -> Result<PackIndexes, RemoteError> {
        self.read_indexes(None)
    }

    /// Reads every index (only those of `packs`, when given).
    fn read_indexes(&self, packs: Option<&HashSet<String>>) -> Result<PackIndexes, RemoteError> {
        let mut map = HashMap::new();
        let mut counts: HashMap<String, u64> = HashMap::new();
        for (name, size) in self.list("index")? {
            let key = format!("index/{name}");
            let Some(pack) = name.strip_suffix(".idx").filter(|p| parse_id(p).is_some()) else {
                return Err(self.corrupt(&key, "is not named <pack-id>.idx"));
            };
            if packs.is_some_and(|present| !present.contains(pack)) {
                continue;
            }
            if size > MAX_INDEX_BYTES {
                return Err(self.corrupt(&key, format!("is {size} bytes, over {MAX_INDEX_BYTES}")));
            }
            // Listed, then gone: only a remote's own maintenance removes an index.
            let Some(bytes) = self.get(&key, MAX_INDEX_BYTES)? else {
                continue;
            };
            let text = String::from_utf8(bytes).map_err(|_| self.corrupt(&key, "is not UTF-8"))?;
            let mut lines = text.lines();
            if lines.next() != Some(INDEX_HEADER) {
                return Err(self.corrupt(&key, format!("does not start with {INDEX_HEADER:?}")));
            }
            for (i, line) in lines.enumerate() {
                let id = parse_id(line).ok_or_else(|| {
                    self.corrupt(&key, format!("line {} is not an object id", i + 2))
                })?;
                map.entry(id).or_insert_with(|| pack.to_string());
                *counts.entry(pack.to_string()).or_default() += 1;
            }
        }
        Ok((map, counts))
    }
}

/// A 64-digit lowercase hex id.
pub(crate) fn parse_id(text: &str) -> Option<ObjectId> {
    if text.len() != 64 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut raw = [0u8; 32];
    for (i, out) in raw.iter_mut().enumerate() {
        *out = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(ObjectId::from_bytes(raw))
}

/// An index file's bytes for the ids of a pack.
pub(crate) fn encode_index(ids: &[ObjectId]) -> Vec<u8> {
    let mut out = String::with_capacity(INDEX_HEADER.len() + 1 + ids.len() * 65);
    out.push_str(INDEX_HEADER);
    out.push('\n');
    for id in ids {
        out.push_str(&id.to_hex());
        out.push('\n');
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_reject() {
        let id = ObjectId::of(b"x");
        assert_eq!(parse_id(&id.to_hex()), Some(id));
        assert_eq!(parse_id(&id.to_hex().to_uppercase()), None);
        assert_eq!(parse_id(&id.to_hex()[1..]), None);
        assert_eq!(parse_id(&format!("{}0", id.to_hex())), None);
        assert_eq!(parse_id("zz"), None);
        let idx = String::from_utf8(encode_index(&[id])).unwrap();
        assert_eq!(idx, format!("{INDEX_HEADER}\n{}\n", id.to_hex()));
    }
}
