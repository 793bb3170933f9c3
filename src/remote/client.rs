//! One remote opened through `object_store`, with the current-thread tokio runtime that runs
//! its requests; every method blocks until its request is done, or until SIGINT/SIGTERM asks
//! the command to stop: every request runs beside a watcher of the interrupt flag, so a read
//! stuck in the kernel (a hung network filesystem: the local backend reads on tokio's blocking
//! pool) is abandoned at the first signal, and dropping the remote never waits for it. A
//! `file://` remote reads regular files only (see `local`): a FIFO or a device where a key
//! should be is refused at once, never waited on.
//!
//! Listings take only the direct entries of a directory whose names the layout expects;
//! anything else (a `README` under `snapshots/`, a subdirectory) is ignored and named in
//! [`Remote::notices`]. Index files are parsed as they stream in, keeping only the ids the
//! caller asks about: what a pull holds is bounded by what it needs, not by the indexes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::future::Future;
use std::io::{Read, Write};
use std::path::Path as FsPath;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};
use zeroclaw_bundle_store::{read_pack_layout, ObjectId, PackLayout, StoreError};

use super::counting::{Counters, Counting};
use super::sealed::Sealed;
use super::{RemoteError, RemoteSpec};
use crate::cancel::Cancel;
use crate::crypt::{DataKeys, Recipients};

/// The first line of an index file.
pub(crate) const INDEX_HEADER: &str = "zeroclaw-bundle remote index 1";
/// Packs up to this size go up in one request; larger ones as a multipart upload.
const SINGLE_PUT_MAX: u64 = 16 << 20;
/// Multipart part size (S3's minimum is 5 MiB).
const PART: usize = 8 << 20;
/// The bytes of one ranged GET of a pull.
const PULL_PART: u64 = 8 << 20;
/// Ranged GETs of a pull in flight at once.
const PULL_IN_FLIGHT: usize = 8;

/// The bytes of one ranged GET of a pull: [`PULL_PART`], or with the test hooks
/// `ZEROCLAW_BUNDLE_TEST_PULL_PART` (small packs in many parts).
fn pull_part() -> u64 {
    #[cfg(feature = "test-hooks")]
    if let Some(n) = std::env::var("ZEROCLAW_BUNDLE_TEST_PULL_PART")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| *n > 0)
    {
        return n;
    }
    PULL_PART
}
/// An index file is at most this big (32 million ids); a larger one is refused unread.
const MAX_INDEX_BYTES: u64 = 2 << 30;

/// A record is at most this big.
pub(crate) const MAX_RECORD_BYTES: u64 = 16 << 20;
/// A pack's trailer, index count and index entry sizes (the pack format's).
const TRAILER: u64 = 8 + 32 + 8;
const COUNT: u64 = 8;
const ENTRY: u64 = 32 + 8 + 8 + 8 + 1;
/// A pack's header (the pack format's).
const HEADER: u64 = 8 + 4 + 4 + 32 + 32;
/// How often a request in flight looks at the interrupt flag.
const INTERRUPT_POLL: Duration = Duration::from_millis(100);

/// Object -> the pack that holds it, and pack -> how many objects its index lists.
pub(crate) type PackIndexes = (HashMap<ObjectId, String>, HashMap<String, u64>);

/// What a scan of the indexes found for the ids asked about.
#[derive(Debug, Default)]
pub(crate) struct IndexScan {
    /// Each id asked about -> every pack whose index lists it, in index-name order.
    pub found: HashMap<ObjectId, Vec<String>>,
    /// Pack -> how many ids its index lists (all of them, not only those asked about).
    pub listed: HashMap<String, u64>,
}

/// One entry of a listing.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// The last component of its key.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// When it was last written, by the backend's clock (ms since the epoch).
    pub modified_ms: i64,
}

/// The most notices about ignored keys a remote handle names (the rest are counted).
const MAX_NOTICES: usize = 50;

/// Keys listings ignored: the first [`MAX_NOTICES`] lines, and how many more.
#[derive(Default)]
struct Ignored {
    lines: Vec<String>,
    seen: HashSet<String>,
    more: u64,
}

/// A remote store, opened.
pub struct Remote {
    name: String,
    /// `None` only while dropping (see the `Drop` impl).
    rt: Option<tokio::runtime::Runtime>,
    store: Arc<dyn ObjectStore>,
    counters: Counters,
    /// An S3 remote's bucket and endpoint (`None`: AWS's own), for the errors that name them.
    s3: Option<(String, Option<String>)>,
    /// What listings ignored, for [`Remote::notices`].
    ignored: Mutex<Ignored>,
    /// Stops the requests and the steps of a push, pull or gc (see [`Remote::with_cancel`]).
    cancel: Cancel,
    /// The bucket as it is (requests counted, nothing sealed): where the key file lives.
    raw: Arc<dyn ObjectStore>,
    /// An encrypted remote's data keys and the recipients its key file names.
    sealed: Option<(DataKeys, Vec<String>)>,
}

/// The key of an encrypted remote's key file: its data keys, encrypted to its recipients.
pub const KEY_FILE: &str = "keys/keyring.age";
/// The largest key file read.
const KEY_FILE_MAX: u64 = 1 << 20;

impl Drop for Remote {
    fn drop(&mut self) {
        // A request abandoned at a signal may still block a thread of the blocking pool (a
        // hung network filesystem): do not wait for it.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
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
            Arc::new(super::local::RegularFiles::new(
                LocalFileSystem::new_with_prefix(dir).map_err(|e| invalid(e.to_string()))?,
            ))
        };
        let counters = Counters::default();
        let s3 = spec.url.strip_prefix("s3://").map(|rest| {
            let bucket = rest.split_once('/').map_or(rest, |(b, _)| b);
            (bucket.to_string(), spec.endpoint.clone())
        });
        let raw: Arc<dyn ObjectStore> = Arc::new(Counting::new(store, Arc::clone(&counters)));
        let mut remote = Remote {
            name: spec.name.clone(),
            rt: Some(rt),
            store: Arc::clone(&raw),
            counters,
            s3,
            ignored: Mutex::new(Ignored::default()),
            cancel: Cancel::new(),
            raw,
            sealed: None,
        };
        if spec.encrypted {
            remote.seal(spec)?;
        }
        Ok(remote)
    }

    /// Puts the sealing layer of encrypted remote `spec` in front of the bucket: its key file
    /// opened with the identity (`ZEROCLAW_BUNDLE_IDENTITY`, else the configured one) and
    /// checked against the pinned key id. Never a fallback to plaintext: without its key
    /// file, an encrypted remote is refused.
    fn seal(&mut self, spec: &RemoteSpec) -> Result<(), RemoteError> {
        let invalid = |why: String| RemoteError::Invalid {
            name: spec.name.clone(),
            why,
        };
        let identity = std::env::var_os("ZEROCLAW_BUNDLE_IDENTITY")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| spec.identity.as_ref().map(std::path::PathBuf::from));
        let identities = crate::crypt::Identities::load(identity.as_deref())
            .map_err(|e| invalid(format!("it is encrypted, and {e}")))?;
        let bytes = self.get_raw(KEY_FILE)?.ok_or_else(|| {
            invalid(format!(
                "it is configured as encrypted but holds no {KEY_FILE}: refusing to read or \
                 write it without its keys (nothing falls back to plaintext)"
            ))
        })?;
        let (keys, recipients) = DataKeys::unwrap(
            &identities,
            &bytes,
            &format!("remote {} {KEY_FILE}", spec.name),
        )
        .map_err(|e| invalid(e.to_string()))?;
        if let Some(pinned) = &spec.key_id {
            if keys.id() != *pinned {
                return Err(invalid(format!(
                    "its key file {KEY_FILE} holds another data key than the one it had when \
                     it was added here (key id {pinned}): it was replaced, possibly by \
                     someone who can write to the bucket; refusing it"
                )));
            }
        }
        self.store = Arc::new(Sealed::new(Arc::clone(&self.raw), keys.clone()));
        self.sealed = Some((keys, recipients));
        Ok(())
    }

    /// An encrypted remote's key id ([`DataKeys::id`]; `None`: not encrypted).
    pub fn key_id(&self) -> Option<String> {
        self.sealed.as_ref().map(|(k, _)| k.id())
    }

    /// Whether this remote is encrypted.
    pub fn is_encrypted(&self) -> bool {
        self.sealed.is_some()
    }

    /// The bytes of `key` in the bucket as they are (not unsealed), or `None`.
    pub(crate) fn get_raw(&self, key: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        let path = Path::from(key);
        self.run(async {
            let got = match self.raw.get(&path).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.request("read", key, e)),
            };
            if got.meta.size > KEY_FILE_MAX {
                return Err(self.corrupt(
                    key,
                    format!("is {} bytes, over {KEY_FILE_MAX}", got.meta.size),
                ));
            }
            let bytes = got
                .bytes()
                .await
                .map_err(|e| self.request("read", key, e))?;
            Ok(Some(bytes.to_vec()))
        })
    }

    /// Writes `bytes` at `key` in the bucket as they are (already sealed); with `new`, only
    /// when nothing is there (`false`: something was).
    pub(crate) fn put_raw(
        &self,
        key: &str,
        bytes: Vec<u8>,
        new: bool,
    ) -> Result<bool, RemoteError> {
        let path = Path::from(key);
        let opts = PutOptions {
            mode: if new {
                PutMode::Create
            } else {
                PutMode::Overwrite
            },
            ..Default::default()
        };
        self.run(async {
            match self
                .raw
                .put_opts(&path, PutPayload::from(bytes), opts)
                .await
            {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
                Err(e) => Err(self.request("write", key, e)),
            }
        })
    }

    /// Makes this remote encrypted to `recipients`: a fresh data key in a new key file.
    /// Refused when it already has one, or already holds snapshots in plaintext.
    pub(crate) fn seal_new(&self, recipients: &Recipients) -> Result<String, RemoteError> {
        let invalid = |why: String| RemoteError::Invalid {
            name: self.name.clone(),
            why,
        };
        if !self.list("snapshots")?.is_empty() {
            return Err(invalid(
                "it already holds snapshots in plaintext; an encrypted remote starts empty (use \
                 another bucket or prefix)"
                    .into(),
            ));
        }
        let keys = DataKeys::generate();
        let wrapped = keys.wrap(recipients).map_err(|e| invalid(e.to_string()))?;
        if !self.put_raw(KEY_FILE, wrapped, true)? {
            return Err(invalid(format!(
                "it already has a key file ({KEY_FILE}): add it without --encrypt-to but with \
                 --encrypted, or change its recipients with `remote recipients`"
            )));
        }
        Ok(keys.id())
    }

    /// Whether the bucket has an encrypted remote's key file (a push without encryption is
    /// then refused).
    pub(crate) fn has_key_file(&self) -> Result<bool, RemoteError> {
        Ok(self.size_raw(KEY_FILE)?.is_some())
    }

    fn size_raw(&self, key: &str) -> Result<Option<u64>, RemoteError> {
        let path = Path::from(key);
        self.run(async {
            match self.raw.head(&path).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.request("stat", key, e)),
            }
        })
    }

    /// The recipients an encrypted remote's key file names (`None`: not encrypted).
    pub fn recipients(&self) -> Option<&[String]> {
        self.sealed.as_ref().map(|(_, r)| r.as_slice())
    }

    /// Rewrites an encrypted remote's key file for `recipients`; with `rotate`, adds a data
    /// key generation that everything written from now on is encrypted to (what a removed
    /// recipient must not read). The old generations stay in the file, so what was pushed
    /// before stays readable by the recipients left.
    pub(crate) fn rewrap(
        &self,
        recipients: &Recipients,
        rotate: bool,
    ) -> Result<usize, RemoteError> {
        let invalid = |why: String| RemoteError::Invalid {
            name: self.name.clone(),
            why,
        };
        let Some((keys, _)) = &self.sealed else {
            return Err(invalid("it is not encrypted".into()));
        };
        let keys = if rotate { keys.rotated() } else { keys.clone() };
        let wrapped = keys.wrap(recipients).map_err(|e| invalid(e.to_string()))?;
        self.put_raw(KEY_FILE, wrapped, false)?;
        Ok(keys.generations())
    }

    /// This handle with `cancel` stopping its requests and the steps of a push, pull or gc
    /// run through it: they then fail with [`RemoteError::Interrupted`]. Without it, nothing
    /// stops them.
    pub fn with_cancel(mut self, cancel: Cancel) -> Remote {
        self.cancel = cancel;
        self
    }

    /// This handle's token (see [`Remote::with_cancel`]).
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    /// Fails with [`RemoteError::Interrupted`] once this handle's token was cancelled.
    pub(crate) fn check_cancel(&self) -> Result<(), RemoteError> {
        self.cancel.check().map_err(|_| RemoteError::Interrupted)
    }

    /// What this remote was asked so far, in one line (requests and bytes per key prefix).
    pub fn traffic(&self) -> String {
        super::counting::describe(&self.counters)
    }

    /// The remote's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What listings ignored so far (keys that are not part of the layout), one line each;
    /// taken, so each is said once.
    /// At most [`MAX_NOTICES`] are named; the rest are counted in a last line.
    pub fn notices(&self) -> Vec<String> {
        let taken = std::mem::take(&mut *self.ignored.lock().unwrap_or_else(|e| e.into_inner()));
        let mut lines = taken.lines;
        if taken.more > 0 {
            lines.push(format!(
                "remote {}: ignored {} more keys that are not part of the layout (the first \
                 {MAX_NOTICES} are named above)",
                self.name, taken.more
            ));
        }
        lines
    }

    fn ignore(&self, key: &str, why: &str) {
        let line = format!(
            "remote {}: ignored {}: {why}",
            self.name,
            zeroclaw_bundle_store::escape_text(key)
        );
        let mut all = self.ignored.lock().unwrap_or_else(|e| e.into_inner());
        if all.seen.contains(&line) {
            return;
        }
        if all.lines.len() < MAX_NOTICES {
            all.seen.insert(line.clone());
            all.lines.push(line);
        } else {
            // A remote stuffed with junk (thousands of keys under `signatures/<id>/`) costs
            // a counter, not a line each (nor a scan of every line said so far).
            all.more += 1;
        }
    }

    /// Runs `fut` to completion, or fails with [`RemoteError::Interrupted`] once this
    /// handle's token was cancelled (see the module doc).
    fn run<T>(&self, fut: impl Future<Output = Result<T, RemoteError>>) -> Result<T, RemoteError> {
        let rt = self.rt.as_ref().expect("the runtime lives until drop");
        rt.block_on(async {
            let watch = async {
                loop {
                    if self.check_cancel().is_err() {
                        return;
                    }
                    tokio::time::sleep(INTERRUPT_POLL).await;
                }
            };
            let fut = std::pin::pin!(fut);
            let watch = std::pin::pin!(watch);
            match futures_util::future::select(fut, watch).await {
                futures_util::future::Either::Left((r, _)) => r,
                futures_util::future::Either::Right(_) => Err(RemoteError::Interrupted),
            }
        })
    }

    fn request(&self, op: &'static str, key: &str, source: object_store::Error) -> RemoteError {
        RemoteError::Request {
            name: self.name.clone(),
            op,
            key: key.to_string(),
            why: self.explain(&source),
        }
    }

    /// The object store's error as one line. For an S3 remote, the failures an operator
    /// fixes by checking one setting say which (see [`explain_s3`]); anything else is the
    /// object store's own text.
    fn explain(&self, e: &object_store::Error) -> String {
        if let object_store::Error::Generic {
            store: super::local::STORE,
            source,
        } = e
        {
            // Already one line naming the file and what is wrong with it.
            return source.to_string();
        }
        let text = e.to_string();
        let Some((bucket, endpoint)) = &self.s3 else {
            return text;
        };
        let mut refused = false;
        let mut chain = text.clone();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            if c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
            {
                refused = true;
            }
            chain.push_str(": ");
            chain.push_str(&c.to_string());
            cause = c.source();
        }
        explain_s3(&chain, refused, bucket, endpoint.as_deref()).unwrap_or(text)
    }

    pub(crate) fn corrupt(&self, key: &str, why: impl Into<String>) -> RemoteError {
        RemoteError::Corrupt {
            name: self.name.clone(),
            key: key.to_string(),
            why: why.into(),
        }
    }

    /// The direct entries of `dir/` (name, size, time). Anything deeper is ignored and named
    /// in [`Remote::notices`].
    pub(crate) fn list(&self, dir: &str) -> Result<Vec<Listed>, RemoteError> {
        let prefix = Path::from(dir);
        let depth = prefix.parts().count() + 1;
        let mut out = self.run(async {
            let mut stream = self.store.list(Some(&prefix));
            let mut out = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta.map_err(|e| self.request("list", dir, e))?;
                if meta.location.parts().count() != depth {
                    self.ignore(meta.location.as_ref(), "not a direct entry of the layout");
                    continue;
                }
                if let Some(name) = meta.location.filename() {
                    out.push(Listed {
                        name: name.to_string(),
                        size: meta.size,
                        modified_ms: meta.last_modified.timestamp_millis(),
                    });
                }
            }
            Ok(out)
        })?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Every signature key on the remote (`signatures/<snapshot-id>/<name>`), with the snapshot
    /// id and the listing's time; keys of any other shape are named in [`Remote::notices`].
    pub(crate) fn all_signatures(&self) -> Result<Vec<(ObjectId, String, i64)>, RemoteError> {
        let prefix = Path::from("signatures");
        let found = self.run(async {
            let mut stream = self.store.list(Some(&prefix));
            let mut out = Vec::new();
            while let Some(meta) = stream.next().await {
                let meta = meta.map_err(|e| self.request("list", "signatures", e))?;
                let parts: Vec<String> = meta
                    .location
                    .parts()
                    .map(|p| p.as_ref().to_string())
                    .collect();
                match (parts.len(), parts.get(1).and_then(|p| parse_id(p))) {
                    (3, Some(id)) => out.push((
                        id,
                        meta.location.to_string(),
                        meta.last_modified.timestamp_millis(),
                    )),
                    _ => self.ignore(meta.location.as_ref(), "not a signature of the layout"),
                }
            }
            Ok(out)
        })?;
        Ok(found)
    }

    /// The bytes at `key`, or `None` when there is none; refused past `max` bytes.
    fn get(&self, key: &str, max: u64) -> Result<Option<Vec<u8>>, RemoteError> {
        let path = Path::from(key);
        self.run(async {
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
        self.run(async {
            match self.store.head(&path).await {
                Ok(meta) => Ok(Some(meta.size)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(self.request("stat", key, e)),
            }
        })
    }

    /// The last `n` bytes of `key` (all of it when it is shorter) and its size, in one
    /// request (a suffix range).
    pub(crate) fn get_suffix(&self, key: &str, n: u64) -> Result<(Vec<u8>, u64), RemoteError> {
        let path = Path::from(key);
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Suffix(n.max(1))),
            ..Default::default()
        };
        self.run(async {
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
        self.run(async {
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
        self.run(async {
            self.store
                .put(&path, PutPayload::from(bytes))
                .await
                .map(|_| ())
                .map_err(|e| self.request("write", key, e))
        })
    }

    /// Writes `bytes` at `key` only if nothing is there: S3's `If-None-Match: *`, the local
    /// backend's no-replace link (object_store's `PutMode::Create`). `false` when the key
    /// existed (left as it was). A backend without conditional puts gets a plain write:
    /// every caller writes bytes for which a plain overwrite is also safe (see `gc`).
    pub(crate) fn put_new(&self, key: &str, bytes: Vec<u8>) -> Result<bool, RemoteError> {
        let path = Path::from(key);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let first = self.run(async {
            match self
                .store
                .put_opts(&path, PutPayload::from(bytes.clone()), opts)
                .await
            {
                Ok(_) => Ok(Some(true)),
                Err(object_store::Error::AlreadyExists { .. }) => Ok(Some(false)),
                Err(object_store::Error::NotImplemented { .. }) => Ok(None),
                Err(e) => Err(self.request("write", key, e)),
            }
        })?;
        match first {
            Some(created) => Ok(created),
            None => self.put_bytes(key, bytes).map(|()| true),
        }
    }

    /// Removes `key` (already gone is success).
    pub(crate) fn delete(&self, key: &str) -> Result<(), RemoteError> {
        let path = Path::from(key);
        self.run(async {
            match self.store.delete(&path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.request("delete", key, e)),
            }
        })
    }

    /// The backend's clock now (ms since the epoch): the time stamped on a small object
    /// written for the purpose (then removed), as a listing reports it (S3's listing carries
    /// milliseconds, its HEAD only seconds; marks are aged from listings too). Every age `gc`
    /// computes compares two times of this one clock, so the hosts' clocks never matter.
    pub(crate) fn clock_ms(&self) -> Result<i64, RemoteError> {
        let name = format!("clock-{}", zeroclaw_bundle_store::random_token());
        let key = format!("gc/{name}");
        self.put_bytes(&key, b"zeroclaw-bundle remote clock\n".to_vec())?;
        let listed = self.list("gc");
        self.delete(&key)?;
        listed?
            .into_iter()
            .find(|e| e.name == name)
            .map(|e| e.modified_ms)
            .ok_or_else(|| self.corrupt(&key, "was written but is not listed"))
    }

    /// Uploads the local file `file` to `key`: one request, or a multipart upload for a
    /// large file (completed only when every part is in; an abandoned one is never visible).
    /// `sent` hears the bytes handed to the upload so far.
    pub(crate) fn put_file(
        &self,
        key: &str,
        file: &FsPath,
        sent: &dyn Fn(u64),
    ) -> Result<(), RemoteError> {
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
            self.put_bytes(key, bytes)?;
            sent(len);
            return Ok(());
        }
        let path = Path::from(key);
        self.run(async {
            let upload = self
                .store
                .put_multipart(&path)
                .await
                .map_err(|e| self.request("start uploading", key, e))?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
            let mut buf = vec![0u8; PART];
            let mut total = 0u64;
            loop {
                let n = f.read(&mut buf).map_err(|e| io("read", e))?;
                if n == 0 {
                    break;
                }
                if let Err(e) = self.check_cancel() {
                    w.abort().await.ok();
                    return Err(e);
                }
                w.wait_for_capacity(4)
                    .await
                    .map_err(|e| self.request("upload", key, e))?;
                w.write(&buf[..n]);
                total += n as u64;
                sent(total);
            }
            w.finish()
                .await
                .map(|_| ())
                .map_err(|e| self.request("finish uploading", key, e))?;
            sent(len);
            Ok(())
        })
    }

    /// Downloads each `(key, file)` of `jobs` into its local file (created new, the size of
    /// the key): ranged GETs of [`PULL_PART`] bytes, [`PULL_IN_FLIGHT`] at a time across all
    /// the keys, each part streamed to its offset (memory: one chunk per request in flight).
    /// Per job its size, or `None` when the remote has no such key (gone before or during the
    /// download). A part that arrives short, long or at another range (a server that ignores
    /// `Range` answers 200: refused by the object store) fails naming its key. `received`
    /// hears the bytes written so far, over all the jobs.
    pub(crate) fn get_files(
        &self,
        jobs: &[(String, std::path::PathBuf)],
        received: &dyn Fn(u64),
    ) -> Result<Vec<Option<u64>>, RemoteError> {
        // Not synced: a downloaded pack is a temporary file, verified before use; the objects
        // imported from it are made durable by the store's commit.
        self.run(async {
            let sizes: Vec<Result<Option<u64>, RemoteError>> = futures_util::stream::iter(jobs)
                .map(|(key, _)| async move {
                    match self.store.head(&Path::from(key.as_str())).await {
                        Ok(meta) => Ok(Some(meta.size)),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(self.request("download", key, e)),
                    }
                })
                .buffered(PULL_IN_FLIGHT)
                .collect()
                .await;
            let mut files = Vec::with_capacity(jobs.len());
            let mut parts = Vec::new();
            let part = pull_part();
            for (i, ((_, out), size)) in jobs.iter().zip(sizes).enumerate() {
                let Some(size) = size? else {
                    files.push(None);
                    continue;
                };
                let io = |op, e| RemoteError::Io {
                    op,
                    path: out.clone(),
                    source: e,
                };
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(out)
                    .map_err(|e| io("create", e))?;
                f.set_len(size).map_err(|e| io("size", e))?;
                files.push(Some((f, size)));
                let mut start = 0;
                while start < size {
                    let end = size.min(start + part);
                    parts.push((i, start..end));
                    start = end;
                }
            }
            let done = std::cell::Cell::new(0u64);
            let mut gone = vec![false; jobs.len()];
            let files = &files;
            let done = &done;
            let mut fetches = futures_util::stream::iter(parts)
                .map(|(i, range)| async move {
                    let (key, out) = &jobs[i];
                    let Some((file, size)) = &files[i] else {
                        return Ok((i, false));
                    };
                    let found = self
                        .get_part(key, file, out, *size, range, &|n| {
                            done.set(done.get() + n);
                            received(done.get());
                        })
                        .await?;
                    Ok::<_, RemoteError>((i, found))
                })
                .buffer_unordered(PULL_IN_FLIGHT);
            while let Some(fetched) = fetches.next().await {
                let (i, found) = fetched?;
                if !found {
                    gone[i] = true;
                }
            }
            Ok(files
                .iter()
                .zip(gone)
                .map(|(f, gone)| f.as_ref().filter(|_| !gone).map(|(_, size)| *size))
                .collect())
        })
    }

    /// Bytes `range` of `key` (`size` bytes long when the download began) written at their
    /// offset of `file` (the local `out`); `false` when the key is gone. `wrote` hears each
    /// chunk's length.
    async fn get_part(
        &self,
        key: &str,
        file: &File,
        out: &FsPath,
        size: u64,
        range: std::ops::Range<u64>,
        wrote: &dyn Fn(u64),
    ) -> Result<bool, RemoteError> {
        use std::os::unix::fs::FileExt;
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        let got = match self.store.get_opts(&Path::from(key), options).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(self.request("download", key, e)),
        };
        if got.meta.size != size || got.range != range {
            return Err(self.corrupt(
                key,
                format!(
                    "returned range {}..{} of {} bytes for range {}..{} of {size}",
                    got.range.start, got.range.end, got.meta.size, range.start, range.end
                ),
            ));
        }
        let mut stream = got.into_stream();
        let mut at = range.start;
        while let Some(chunk) = stream.next().await {
            self.check_cancel()?;
            let chunk = chunk.map_err(|e| self.request("download", key, e))?;
            let n = chunk.len() as u64;
            if at + n > range.end {
                return Err(self.corrupt(
                    key,
                    format!(
                        "returned more than {} bytes for range {}..{}",
                        range.end - range.start,
                        range.start,
                        range.end
                    ),
                ));
            }
            file.write_all_at(&chunk, at).map_err(|e| RemoteError::Io {
                op: "write",
                path: out.to_path_buf(),
                source: e,
            })?;
            at += n;
            wrote(n);
        }
        if at != range.end {
            return Err(self.corrupt(
                key,
                format!(
                    "returned {} bytes for range {}..{}, not {}",
                    at - range.start,
                    range.start,
                    range.end,
                    range.end - range.start
                ),
            ));
        }
        crate::hooks::seam("pull-part", &format!("{key}@{}", range.start));
        Ok(true)
    }

    /// The snapshot ids the remote lists (`snapshots/<id>`). Other names are ignored and
    /// named in [`Remote::notices`]: one stray file never hides the rest.
    pub fn snapshots(&self) -> Result<Vec<ObjectId>, RemoteError> {
        let mut ids = Vec::new();
        for entry in self.list("snapshots")? {
            match parse_id(&entry.name) {
                Some(id) => ids.push(id),
                None => self.ignore(
                    &format!("snapshots/{}", entry.name),
                    "not named by a snapshot id",
                ),
            }
        }
        Ok(ids)
    }

    /// The signatures the remote keeps for snapshot `id` (`signatures/<id>/<sig-id>.sig`, each
    /// named by the blake3 of its bytes), at most the store's bounds. One whose bytes do not
    /// hash to its name, or that is too large, is left out and named in [`Remote::notices`].
    pub fn signatures(&self, id: &ObjectId) -> Result<Vec<Vec<u8>>, RemoteError> {
        let dir = format!("signatures/{}", id.to_hex());
        let mut out = Vec::new();
        // At most as many downloads as a snapshot carries signatures: a remote stuffed with
        // well-named junk costs a bounded number of requests, not one per key.
        let mut fetched = 0;
        for entry in self.list(&dir)? {
            let key = format!("{dir}/{}", entry.name);
            let Some(sig_id) = entry.name.strip_suffix(".sig").and_then(parse_id) else {
                self.ignore(&key, "not named by a signature id");
                continue;
            };
            if fetched >= zeroclaw_bundle_store::limits::MAX_SIGNATURES {
                self.ignore(&key, "more signatures than a snapshot carries");
                continue;
            }
            fetched += 1;
            let max = zeroclaw_bundle_store::limits::MAX_SIGNATURE_BYTES as u64;
            let bytes = match self.get(&key, max) {
                Ok(Some(b)) => b,
                Ok(None) => continue,
                Err(RemoteError::Corrupt { why, .. }) => {
                    self.ignore(&key, &why);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if ObjectId::of(&bytes) != sig_id {
                self.ignore(&key, "its bytes do not hash to its name");
                continue;
            }
            out.push(bytes);
        }
        Ok(out)
    }

    /// Adds signature `bytes` of snapshot `id` (a conditional write of a name derived from
    /// the bytes: never a read-modify-write, so any number of hosts add at once). `false` when
    /// the remote had it.
    pub(crate) fn put_signature(&self, id: &ObjectId, bytes: &[u8]) -> Result<bool, RemoteError> {
        let key = format!(
            "signatures/{}/{}.sig",
            id.to_hex(),
            ObjectId::of(bytes).to_hex()
        );
        self.put_new(&key, bytes.to_vec())
    }

    /// The record of snapshot `id`, checked against its id; `None` when the remote lacks it.
    pub fn record(&self, id: &ObjectId) -> Result<Option<Vec<u8>>, RemoteError> {
        let key = format!("snapshots/{}", id.to_hex());
        let Some(bytes) = self.get(&key, MAX_RECORD_BYTES)? else {
            return Ok(None);
        };
        check_record(id, &bytes).map_err(|why| self.corrupt(&key, why))?;
        Ok(Some(bytes))
    }

    /// A snapshot of the remote: a full id or a unique prefix of 8+ hex digits;
    /// `agent/<alias>` (the newest snapshot of that agent the remote lists); or a name given
    /// with `snapshot --name` (the newest snapshot of that name). Names come from the
    /// records, each checked against its id; records that cannot be read are skipped here
    /// (`list --remote` names them).
    pub fn resolve(&self, reference: &str) -> Result<ObjectId, RemoteError> {
        let none = || RemoteError::NoSnapshot {
            name: self.name.clone(),
            reference: reference.to_string(),
        };
        let lower = reference.to_ascii_lowercase();
        let hex =
            lower.len() >= 8 && lower.len() <= 64 && lower.bytes().all(|b| b.is_ascii_hexdigit());
        if hex {
            let found: Vec<ObjectId> = self
                .snapshots()?
                .into_iter()
                .filter(|id| id.to_hex().starts_with(&lower))
                .collect();
            return match found.as_slice() {
                [one] => Ok(*one),
                [] => Err(none()),
                many => Err(RemoteError::Invalid {
                    name: self.name.clone(),
                    why: format!(
                        "{reference} matches {} snapshots; give more digits",
                        many.len()
                    ),
                }),
            };
        }
        let alias = reference.strip_prefix("agent/");
        if alias.is_none() {
            if let Err(e) = zeroclaw_bundle_store::validate_name(reference) {
                return Err(RemoteError::Invalid {
                    name: self.name.clone(),
                    why: format!(
                        "{reference:?} is not a snapshot id, a prefix of 8 or more hex digits, \
                         agent/<alias> or a snapshot name ({e})"
                    ),
                });
            }
        }
        let newest = self.newest_by(&NoRecords, |snap| {
            let hit = match alias {
                Some(a) => snap.agent.as_deref() == Some(a),
                None => snap.name.as_deref() == Some(reference),
            };
            hit.then(String::new)
        })?;
        newest.into_values().next().ok_or_else(none)
    }

    /// The newest snapshot of every agent the remote lists (`agent/<alias>` of each), after
    /// one listing: each record comes from `records` when this host holds it, else is fetched
    /// (checked against its id) and handed to [`KnownRecords::keep`]. What `sync` asks once per
    /// remote, so that agents up to date cost one listing.
    pub fn newest_of_agents(
        &self,
        records: &dyn KnownRecords,
    ) -> Result<BTreeMap<String, ObjectId>, RemoteError> {
        self.newest_by(records, |snap| snap.agent.clone())
    }

    /// Per key `key_of` gives a record (None: not counted), the newest snapshot: by creation
    /// time, equal times by id, so every host picks the same. Records that cannot be read are
    /// skipped (`list --remote` names them).
    fn newest_by(
        &self,
        records: &dyn KnownRecords,
        key_of: impl Fn(&zeroclaw_bundle_store::Snapshot) -> Option<String>,
    ) -> Result<BTreeMap<String, ObjectId>, RemoteError> {
        let mut best: BTreeMap<String, (i128, ObjectId)> = BTreeMap::new();
        for id in self.snapshots()? {
            let record = match records.known(&id) {
                Some(bytes) => bytes,
                None => match self.record(&id) {
                    Ok(Some(bytes)) => {
                        records.keep(&id, &bytes);
                        bytes
                    }
                    _ => continue,
                },
            };
            let Ok(snap) = zeroclaw_bundle_store::Snapshot::decode(&record) else {
                continue;
            };
            let Some(key) = key_of(&snap) else {
                continue;
            };
            let rank = (snap.created_unix_ns, id);
            let slot = best.entry(key).or_insert(rank);
            if rank > *slot {
                *slot = rank;
            }
        }
        Ok(best.into_iter().map(|(k, (_, id))| (k, id)).collect())
    }

    /// The packs the remote holds (`packs/<pack>.zcpack`), with their listing entries.
    pub(crate) fn packs(&self) -> Result<HashMap<String, Listed>, RemoteError> {
        Ok(self
            .named_by_pack("packs", ".zcpack")?
            .into_iter()
            .collect())
    }

    /// The entries of `dir` named `<pack-id><suffix>`, as (pack id, entry); any other name is
    /// ignored and named in a notice.
    fn named_by_pack(&self, dir: &str, suffix: &str) -> Result<Vec<(String, Listed)>, RemoteError> {
        let mut out = Vec::new();
        for entry in self.list(dir)? {
            match entry
                .name
                .strip_suffix(suffix)
                .filter(|p| parse_id(p).is_some())
            {
                Some(p) => out.push((p.to_string(), entry.clone())),
                None => self.ignore(
                    &format!("{dir}/{}", entry.name),
                    &format!("not named <pack-id>{suffix}"),
                ),
            }
        }
        Ok(out)
    }

    /// The packs a remote `gc` marked for deletion (`gc/<pack>`), with their entries.
    pub(crate) fn marks(&self) -> Result<HashMap<String, Listed>, RemoteError> {
        let mut out = HashMap::new();
        for entry in self.list("gc")? {
            if parse_id(&entry.name).is_some() {
                out.insert(entry.name.clone(), entry);
            } else if !entry.name.starts_with("clock-") {
                self.ignore(&format!("gc/{}", entry.name), "not named by a pack id");
            }
        }
        Ok(out)
    }

    /// The index files (`index/<pack>.idx`): pack -> entry.
    pub(crate) fn index_files(&self) -> Result<Vec<(String, Listed)>, RemoteError> {
        self.named_by_pack("index", ".idx")
    }

    /// Every indexed object and the first pack (in index-name order) whose index lists it,
    /// and how many ids each index lists: what a remote mount locates blobs with.
    pub(crate) fn indexed_packs(&self) -> Result<PackIndexes, RemoteError> {
        let scan = self.scan_indexes(&|_| true, None)?;
        let map = scan
            .found
            .into_iter()
            .filter_map(|(id, packs)| packs.into_iter().next().map(|p| (id, p)))
            .collect();
        Ok((map, scan.listed))
    }

    /// Reads the indexes (only those of `packs`, when given) as they stream in, keeping the
    /// ids `wanted` accepts: memory is what is kept plus one line, whatever the indexes hold.
    /// A malformed index is an error (a caller that deletes on what indexes say must not
    /// guess); an index listed, then gone, is skipped.
    pub(crate) fn scan_indexes(
        &self,
        wanted: &dyn Fn(&ObjectId) -> bool,
        packs: Option<&HashSet<String>>,
    ) -> Result<IndexScan, RemoteError> {
        let mut scan = IndexScan::default();
        for (pack, entry) in self.index_files()? {
            if packs.is_some_and(|present| !present.contains(&pack)) {
                continue;
            }
            let key = format!("index/{}", entry.name);
            if entry.size > MAX_INDEX_BYTES {
                return Err(self.corrupt(
                    &key,
                    format!("is {} bytes, over {MAX_INDEX_BYTES}", entry.size),
                ));
            }
            let path = Path::from(key.as_str());
            let mut parser = IndexParser::default();
            let mut listed = 0u64;
            let mut keep = |id: ObjectId| {
                listed += 1;
                if wanted(&id) {
                    let packs = scan.found.entry(id).or_default();
                    if !packs.contains(&pack) {
                        packs.push(pack.clone());
                    }
                }
            };
            let gone = self.run(async {
                let got = match self.store.get(&path).await {
                    Ok(g) => g,
                    Err(object_store::Error::NotFound { .. }) => return Ok(true),
                    Err(e) => return Err(self.request("read", &key, e)),
                };
                let mut stream = got.into_stream();
                let mut n = 0u64;
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| self.request("read", &key, e))?;
                    n += chunk.len() as u64;
                    if n > MAX_INDEX_BYTES {
                        return Err(self.corrupt(&key, format!("is over {MAX_INDEX_BYTES} bytes")));
                    }
                    parser
                        .feed(&chunk, &mut keep)
                        .map_err(|why| self.corrupt(&key, why))?;
                }
                parser.finish().map_err(|why| self.corrupt(&key, why))?;
                Ok(false)
            })?;
            if !gone {
                scan.listed.insert(pack.clone(), listed);
            }
        }
        Ok(scan)
    }

    /// The layout of `packs/<pack>.zcpack`, read with ranged GETs: its end (trailer and
    /// index, sized by the `listed` objects its remote index names; one request when that is
    /// right) and its header. `None` when the remote has no such pack.
    pub(crate) fn pack_layout(
        &self,
        pack: &str,
        listed: u64,
    ) -> Result<Option<PackLayout>, RemoteError> {
        let key = format!("packs/{pack}.zcpack");
        if self.size(&key)?.is_none() {
            return Ok(None);
        }
        let guess = TRAILER + COUNT + listed.saturating_mul(ENTRY);
        let (tail, size) = self.get_suffix(&key, guess.min(64 << 20))?;
        let tail_start = size - tail.len() as u64;
        let head = self.get_range(&key, 0..HEADER.min(size))?;
        let mut failed: Option<RemoteError> = None;
        let label = std::path::PathBuf::from(format!("{}:{key}", self.name));
        let layout = read_pack_layout(&label, size, &mut |offset, len| {
            let end = offset + len as u64;
            if offset >= tail_start && end <= size {
                let from = (offset - tail_start) as usize;
                return Ok(tail[from..from + len].to_vec());
            }
            if end <= head.len() as u64 {
                return Ok(head[offset as usize..end as usize].to_vec());
            }
            self.get_range(&key, offset..end).map_err(|e| {
                let msg = e.to_string();
                failed = Some(e);
                StoreError::Io {
                    op: "read",
                    path: label.clone(),
                    error: std::io::Error::other(msg),
                }
            })
        });
        match (layout, failed) {
            (Ok(l), _) => Ok(Some(l)),
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Err(self.corrupt(&key, e.to_string())),
        }
    }
}

/// What to check, in one line, for an S3 error whose whole text (with its causes) is
/// `chain`: S3's error code (`<Code>...</Code>` in the response body) names the setting at
/// fault (the secret key, the access key, the bucket, the clock), a refused connection
/// means no server listens at the endpoint, and a TLS failure says whether the certificate
/// was refused (and why, in rustls's words) or the server does not speak TLS. `None` when the
/// error is none of those.
fn explain_s3(chain: &str, refused: bool, bucket: &str, endpoint: Option<&str>) -> Option<String> {
    let at = endpoint.unwrap_or("the AWS endpoint");
    if refused || chain.contains("Connection refused") || chain.contains("connection refused") {
        return Some(format!(
            "nothing accepts connections at {at} (connection refused): is the S3 server running, \
             and is the remote's --endpoint right (`remote list` shows it)?"
        ));
    }
    if let Some(at_cert) = chain.find("invalid peer certificate") {
        // rustls's words, "invalid peer certificate: <why>" (UnknownIssuer, NotValidForName,
        // Expired, ...), then whatever wraps it.
        let why: Vec<&str> = chain[at_cert..].splitn(3, ": ").take(2).collect();
        return Some(format!(
            "the TLS certificate of {at} was refused ({}): when a private CA signed it, point \
             SSL_CERT_FILE at that CA's certificate or add it to this host's trusted \
             certificates; check that the endpoint's host name is one the certificate names",
            why.join(": ")
        ));
    }
    if chain.contains("corrupt message") || chain.contains("InvalidContentType") {
        return Some(format!(
            "{at} does not answer in TLS: if the server speaks plain HTTP, give the remote an \
             http:// endpoint (`remote add NAME URL --endpoint http://...`)"
        ));
    }
    let code = chain
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code.trim())?;
    let says = match code {
        "SignatureDoesNotMatch" => "the server rejected the request's signature: check the secret \
             key (AWS_SECRET_ACCESS_KEY, or aws_secret_access_key of the profile in \
             ~/.aws/credentials)"
            .to_string(),
        "InvalidAccessKeyId" | "NotSignedUp" => "the server does not know the access key: check \
             the access key id (AWS_ACCESS_KEY_ID, or aws_access_key_id of the profile in \
             ~/.aws/credentials)"
            .to_string(),
        "NoSuchBucket" => format!(
            "there is no bucket {bucket} at {at}: check the bucket name in the remote's URL \
             (`remote list` shows it), or create the bucket"
        ),
        "InvalidBucketName" => format!(
            "{bucket} is not a valid bucket name: check the remote's URL (`remote list` shows it)"
        ),
        "AccessDenied" => format!(
            "access denied: check that the key may read and write bucket {bucket} (its policy)"
        ),
        "RequestTimeTooSkewed" => {
            "the server's clock and this host's differ too much: check this host's clock".into()
        }
        "ExpiredToken" | "InvalidToken" => {
            "the session token is expired or invalid: check AWS_SESSION_TOKEN (or renew it)".into()
        }
        _ => {
            let message = chain
                .split_once("<Message>")
                .and_then(|(_, rest)| rest.split_once("</Message>"))
                .map(|(m, _)| format!(": {}", m.trim()))
                .unwrap_or_default();
            format!("the server answered {code}{message}")
        }
    };
    Some(format!("{says} ({code})"))
}

/// Snapshot records this host already holds (its store), so that a walk of a remote's records
/// fetches only the others, and keeps those it fetched.
pub trait KnownRecords {
    /// The record of snapshot `id`, verified, when this host holds it.
    fn known(&self, id: &ObjectId) -> Option<Vec<u8>>;
    /// A record just fetched from the remote and checked against its id.
    fn keep(&self, id: &ObjectId, record: &[u8]);
}

/// No records held: every record is fetched.
struct NoRecords;

impl KnownRecords for NoRecords {
    fn known(&self, _: &ObjectId) -> Option<Vec<u8>> {
        None
    }

    fn keep(&self, _: &ObjectId, _: &[u8]) {}
}

/// Checks a record's bytes against the id it is stored under (what a remote record must be
/// before anything reads it).
pub fn check_record(id: &ObjectId, bytes: &[u8]) -> Result<(), String> {
    let actual = ObjectId::of(bytes);
    if actual != *id {
        return Err(format!("hashes to {} (corrupt)", actual.short(12)));
    }
    Ok(())
}

/// An index file parsed as it arrives: the header line, then one id per line. Holds at most
/// one line between chunks.
#[derive(Debug, Default)]
pub struct IndexParser {
    line: Vec<u8>,
    /// Lines seen (the header is line 1).
    lines: u64,
}

/// The longest line an index holds (the header; an id is 64).
const MAX_INDEX_LINE: usize = 64;

impl IndexParser {
    /// Feeds the next bytes; each id on a completed line goes to `each`.
    pub fn feed(&mut self, bytes: &[u8], each: &mut dyn FnMut(ObjectId)) -> Result<(), String> {
        let mut rest = bytes;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            self.push(&rest[..nl])?;
            let line = std::mem::take(&mut self.line);
            self.end_line(&line, each)?;
            rest = &rest[nl + 1..];
        }
        self.push(rest)
    }

    fn push(&mut self, part: &[u8]) -> Result<(), String> {
        if self.line.len() + part.len() > MAX_INDEX_LINE {
            return Err(format!(
                "line {} is too long to be an object id",
                self.lines + 1
            ));
        }
        self.line.extend_from_slice(part);
        Ok(())
    }

    fn end_line(&mut self, line: &[u8], each: &mut dyn FnMut(ObjectId)) -> Result<(), String> {
        self.lines += 1;
        if self.lines == 1 {
            if line != INDEX_HEADER.as_bytes() {
                return Err(format!("does not start with {INDEX_HEADER:?}"));
            }
            return Ok(());
        }
        let id = std::str::from_utf8(line)
            .ok()
            .and_then(parse_id)
            .ok_or_else(|| format!("line {} is not an object id", self.lines))?;
        each(id);
        Ok(())
    }

    /// Ends the input: the last line must be complete.
    pub fn finish(self) -> Result<(), String> {
        if self.lines == 0 {
            return Err(format!("does not start with {INDEX_HEADER:?}"));
        }
        if !self.line.is_empty() {
            return Err(format!("line {} is not terminated", self.lines + 1));
        }
        Ok(())
    }
}

/// Parses a whole index file: its ids in order.
#[cfg(any(test, feature = "fuzzing"))]
pub fn parse_index(bytes: &[u8]) -> Result<Vec<ObjectId>, String> {
    let mut ids = Vec::new();
    let mut parser = IndexParser::default();
    parser.feed(bytes, &mut |id| ids.push(id))?;
    parser.finish()?;
    Ok(ids)
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

    #[test]
    fn index_parses_in_any_chunking() {
        let ids: Vec<ObjectId> = (0..5u8).map(|i| ObjectId::of(&[i])).collect();
        let bytes = encode_index(&ids);
        assert_eq!(parse_index(&bytes).unwrap(), ids);
        for step in [1, 2, 7, 64, 65, 66, 1000] {
            let mut p = IndexParser::default();
            let mut got = Vec::new();
            for chunk in bytes.chunks(step) {
                p.feed(chunk, &mut |id| got.push(id)).unwrap();
            }
            p.finish().unwrap();
            assert_eq!(got, ids, "chunks of {step}");
        }
        assert!(parse_index(b"").unwrap_err().contains("does not start"));
        assert!(parse_index(b"nope\n")
            .unwrap_err()
            .contains("does not start"));
        let unterminated = &bytes[..bytes.len() - 1];
        assert!(parse_index(unterminated)
            .unwrap_err()
            .contains("not terminated"));
        let mut long = encode_index(&[]);
        long.extend(std::iter::repeat_n(b'a', 100_000));
        assert!(parse_index(&long).unwrap_err().contains("too long"));
        let mut bad = encode_index(&[]);
        bad.extend_from_slice(b"not-an-id\n");
        assert_eq!(parse_index(&bad).unwrap_err(), "line 2 is not an object id");
    }
}
