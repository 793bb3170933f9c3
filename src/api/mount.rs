//! Mounting a snapshot read-only through FUSE: [`Bundles::mount`], and the steps it is made of
//! for a caller that serves a mount itself ([`Bundles::prepare_mount`], [`PreparedMount::mount`],
//! [`Mounted::serve`]), as the `zeroclaw-bundle mount` command does, in the foreground or as the
//! server of `mount --daemon`.
//!
//! What can be mounted is what the reference grammar names as a snapshot (`crate::source`): a
//! snapshot of the store (an id, a prefix, a name, `agent/ALIAS`), a pack file (served from the
//! pack itself, each object verified as it is read; an update pack over the store that holds
//! its base), or a remote ref `REMOTE/REF` (served in place: trees from the remote's trees
//! pack, file contents fetched, ranged and verified, when read). The trust policy is applied
//! before anything is mounted, whatever the form: a snapshot it refuses is never served.
//!
//! A stored snapshot's mount keeps the work before it answers small, since a person waits for
//! it: a full id with a tree index, or an id prefix the store's records answer alone, is
//! resolved without opening the catalog (its open was the largest part of a warm mount's
//! start; a name is the catalog's to answer); the store holds a lease that tells `gc` to keep
//! everything the mount serves; a root whose expansion the store recorded is not walked
//! before the mount answers (the store's `expansion_record` says why that is sound), while a
//! pack file and a remote snapshot always are; and the tree index is read whole into memory
//! (`INDEX_IN_MEMORY`) only once the mount answers, a moment later (`INDEX_READ_DELAY`).
//!
//! Reads of a stored snapshot's large files are passed through to the kernel where it allows
//! (see [`Passthrough`]); a pack file or a remote snapshot is read through the mount server.
//!
//! The library installs no signal handlers and never daemonizes: a caller that stops a mount
//! on a signal unmounts it through [`Mounted::unmounter`] from the thread that waits for the
//! signal; [`Mounted::serve`] then returns.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context as _;
use zeroclaw_bundle_store::{
    Lease, ObjectSource, PackOverStore, PackReader, Snapshot, SnapshotSource, Store,
};

use super::error::{Error, Verb};
use super::{Bundles, ObjectId, Result, Signer, TrustPolicy};
use crate::sign::{self, Trust};
use crate::source::{classify, Takes, Target};
use zeroclaw_bundle_mount::{check_mountpoint, MountHandle, MountOptions};

pub use zeroclaw_bundle_mount::{MountError, Passthrough, Unmounter};

/// The largest tree index a mount reads whole; a larger one is read tree by tree (positioned
/// reads) and never held. A mount that walks every tree before it answers (the expansion
/// check, when the store has no record of the root's expansion) reads it from memory: one
/// read for the 1.4 MB index of the 20,000-file corpus instead of 2,300 small ones. Holding
/// the 18 MB index of the 300,000-file scale tree for the mount's life took the daemon's
/// memory right after mounting from 25 MB to 48 MB.
const INDEX_IN_MEMORY: u64 = 4 << 20;

/// How long after a mount answers its tree index is read whole, when it was not read before
/// answering. Whatever a person or a script runs first on a fresh mount starts its own
/// programs from the same disk; read at once, the index (1.4 MB for the 20,000-file corpus)
/// queued before those reads: from a cold cache, `mount --daemon` then a poll with
/// `mountpoint -q` took 16.9 ms instead of 15.6 (21 alternating rounds; squashfuse_ll 15.6).
/// Until it is read, listings read their trees from the index file.
const INDEX_READ_DELAY: Duration = Duration::from_millis(100);

/// The test seam a mount passes once everything is resolved and checked, right before it
/// mounts (a no-op in normal builds).
const BEFORE_MOUNTING: &str = "mount-daemon-before-mounting";

/// What to mount, where, and the signature checks asked for beside the handle's
/// [`TrustPolicy`] (the command line's `--allowed-signers FILE` and `--require-signed`).
///
/// ```
/// let request = zeroclaw_bundle::MountRequest::new("agent/coder", "/tmp/review".as_ref());
/// assert!(!request.require_signed && request.allowed_signers.is_none());
/// ```
pub struct MountRequest<'a> {
    /// A snapshot of the store (an id, a unique prefix of 8+ hex digits, a name,
    /// `agent/ALIAS`), a pack file, or a remote ref `REMOTE/REF`.
    pub reference: &'a str,
    /// An empty directory outside the store.
    pub mountpoint: &'a Path,
    /// How to mount. Left at their defaults, the label becomes the snapshot's short id, the
    /// time every entry reports its creation time, and the root's note who signed it.
    pub options: MountOptions,
    /// The allowed_signers file signatures are judged against, in place of the store's
    /// `allowed_signers` (`--allowed-signers FILE`). Under [`TrustPolicy::Require`] the
    /// policy's signers are used and this is not read.
    pub allowed_signers: Option<&'a Path>,
    /// Require a signature by a key the allowed signers trust even when the store's
    /// `trust.toml` does not (`--require-signed`). [`TrustPolicy::Require`] always requires
    /// one.
    pub require_signed: bool,
    /// Told what the mount has to say on the way, before it fails or mounts (see
    /// [`MountNote`]); ignored by default.
    pub notes: &'a dyn Fn(MountNote),
}

impl<'a> MountRequest<'a> {
    /// A mount of `reference` at `mountpoint` with the default options, no signature checks
    /// beyond the handle's policy, and its notes ignored.
    pub fn new(reference: &'a str, mountpoint: &'a Path) -> MountRequest<'a> {
        MountRequest {
            reference,
            mountpoint,
            options: MountOptions::default(),
            allowed_signers: None,
            require_signed: false,
            notes: &ignore,
        }
    }
}

impl std::fmt::Debug for MountRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountRequest")
            .field("reference", &self.reference)
            .field("mountpoint", &self.mountpoint)
            .field("options", &self.options)
            .field("allowed_signers", &self.allowed_signers)
            .field("require_signed", &self.require_signed)
            .finish_non_exhaustive()
    }
}

/// Ignores a note (the default of [`MountRequest::notes`]).
fn ignore(_: MountNote) {}

/// What a mount says on the way, for a caller that shows it ([`MountRequest::notes`]). Its
/// `Display` is the line the `zeroclaw-bundle` binary prints.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum MountNote {
    /// About the allowed_signers file: a line it left out, or a store setting that could not
    /// be read while nothing required signatures (they are then judged by unknown keys).
    Trust(String),
    /// A remote's listing ignored keys that are not part of its layout.
    Remote(String),
    /// The remote snapshot has no trees pack (pushed by an older build): its directories are
    /// fetched one by one.
    NoTreesPack {
        /// `REMOTE/SHORT-ID`.
        snapshot: String,
    },
    /// A required signature was found: who signed it.
    Signed {
        /// The snapshot.
        id: ObjectId,
        /// The trusted signers.
        signers: Vec<Signer>,
    },
}

impl std::fmt::Display for MountNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MountNote::Trust(line) | MountNote::Remote(line) => write!(f, "notice: {line}"),
            MountNote::NoTreesPack { snapshot } => write!(
                f,
                "note: {snapshot} has no trees pack (pushed by an older build): directories \
                 are fetched one by one"
            ),
            MountNote::Signed { id, signers } => {
                f.write_str(&crate::sign::Signer::signed_by(id, signers))
            }
        }
    }
}

/// A mount resolved, checked against the trust policy and opened, not mounted yet
/// ([`Bundles::prepare_mount`]); [`PreparedMount::mount`] mounts it. Dropped, it mounts
/// nothing and releases the store's lease.
pub struct PreparedMount {
    id: ObjectId,
    root: ObjectId,
    source: Arc<dyn ObjectSource>,
    mountpoint: PathBuf,
    options: MountOptions,
    lease: Option<Lease>,
    /// A store snapshot mounted without its walk: its index is read whole once it answers.
    index_later: Option<Arc<SnapshotSource>>,
    traffic: Option<RemoteTraffic>,
    reference: String,
}

/// A live mount made by [`PreparedMount::mount`]: unmounted when dropped (lazily when busy).
pub struct Mounted {
    handle: MountHandle,
    id: ObjectId,
    mountpoint: PathBuf,
    signed_by: String,
    traffic: Option<RemoteTraffic>,
    reference: String,
}

impl std::fmt::Debug for PreparedMount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedMount")
            .field("id", &self.id)
            .field("mountpoint", &self.mountpoint)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted")
            .field("id", &self.id)
            .field("handle", &self.handle)
            .field("signed_by", &self.signed_by)
            .finish_non_exhaustive()
    }
}

/// What a mount of a remote snapshot asked of its remote so far, in one line
/// (`remote NAME: ...`, requests and bytes per kind of key): [`Mounted::traffic`].
#[derive(Clone)]
pub struct RemoteTraffic(Arc<dyn Fn() -> String + Send + Sync>);

impl std::fmt::Display for RemoteTraffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}

impl std::fmt::Debug for RemoteTraffic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RemoteTraffic").finish()
    }
}

/// A mount as `--json` reports it: the snapshot served, the mountpoint as given, and the
/// process that serves it.
///
/// ```
/// # let id = zeroclaw_bundle::ObjectId::from_bytes([7; 32]);
/// let report = zeroclaw_bundle::MountReport {
///     snapshot: id,
///     mountpoint: "/tmp/review".into(),
///     pid: Some(42),
/// };
/// let json = serde_json::to_value(&report)?;
/// assert_eq!(json["mountpoint"], "/tmp/review");
/// assert_eq!(json["pid"], 42);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, serde::Serialize)]
pub struct MountReport {
    /// The snapshot served.
    pub snapshot: ObjectId,
    /// The mountpoint, as given (a path that is not UTF-8 in its escaped form, `\xNN`).
    #[serde(serialize_with = "host_path")]
    pub mountpoint: PathBuf,
    /// The process serving the mount.
    pub pid: Option<u32>,
}

/// An unmount done by [`Bundles::unmount`], as `--json` reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Unmounted {
    /// The mountpoint, as given (a path that is not UTF-8 in its escaped form, `\xNN`).
    #[serde(serialize_with = "host_path")]
    pub mountpoint: PathBuf,
}

/// A host path in a JSON document: the path when it is UTF-8, else its escaped display form
/// (`\xNN`), never a replaced byte.
fn host_path<S: serde::Serializer>(path: &Path, s: S) -> std::result::Result<S::Ok, S::Error> {
    use std::os::unix::ffi::OsStrExt as _;
    match path.to_str() {
        Some(text) => s.serialize_str(text),
        None => s.serialize_str(&zeroclaw_bundle_store::escape_name(
            path.as_os_str().as_bytes(),
        )),
    }
}

/// Where the store of a mount is: a handle already open, or a path opened only when the
/// reference needs a store (a pack is mounted without one).
enum StoreAt<'a> {
    Open(&'a Store),
    Path(&'a Path),
}

impl StoreAt<'_> {
    fn root(&self) -> &Path {
        match self {
            StoreAt::Open(store) => store.root(),
            StoreAt::Path(path) => path,
        }
    }

    /// The store; "no store at PATH" when there is none.
    fn open(&self) -> Result<Store> {
        match self {
            StoreAt::Open(store) => Ok((*store).clone()),
            StoreAt::Path(path) => Ok(Bundles::open(path)?.into_store()),
        }
    }

    /// The store when there is one (a missing path or an empty directory is none).
    fn existing(&self) -> Result<Option<Store>> {
        match self {
            StoreAt::Open(store) => Ok(Some((*store).clone())),
            StoreAt::Path(path) => Ok(Bundles::open_existing(path)?.map(Bundles::into_store)),
        }
    }
}

impl Bundles {
    /// Mounts `reference` read-only at `mountpoint` (an empty directory outside the store)
    /// through FUSE, so a person can read it with their own tools: a snapshot of the store, a
    /// pack file or a remote ref (see [`MountRequest::reference`]). The trust policy is
    /// applied first: a snapshot it refuses is not mounted ([`crate::ErrorKind::Untrusted`]).
    /// The returned handle unmounts on drop (lazily when busy); the store keeps every object
    /// a mount of a stored snapshot serves until then. Fails on a reference that names
    /// nothing, a damaged pack, an update pack whose base the store lacks, an unusable
    /// mountpoint, or a system without FUSE.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, MountOptions, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let mnt = dir.path().join("mnt");
    /// std::fs::create_dir(&mnt)?;
    /// let mut mounted = bundles.mount(&snap.id.to_hex(), &mnt, MountOptions::default())?;
    /// assert_eq!(std::fs::read(mnt.join("a.txt"))?, b"a\n");
    /// mounted.unmount()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mount(
        &self,
        reference: &str,
        mountpoint: &Path,
        options: MountOptions,
    ) -> Result<MountHandle> {
        let request = MountRequest {
            options,
            ..MountRequest::new(reference, mountpoint)
        };
        Ok(self.prepare_mount(&request)?.mount()?.into_handle())
    }

    /// The first half of [`Bundles::mount`]: resolves `request.reference`, applies the trust
    /// policy (with the request's own checks), opens what will be served and checks the
    /// mountpoint, mounting nothing. Refuses what [`Bundles::mount`] refuses.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, MountRequest, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let mnt = dir.path().join("mnt");
    /// std::fs::create_dir(&mnt)?;
    /// let prepared = bundles.prepare_mount(&MountRequest::new(&snap.id.to_hex(), &mnt))?;
    /// assert_eq!(prepared.id(), snap.id);
    /// let mounted = prepared.mount()?;
    /// let stop = mounted.unmounter();
    /// let reader = std::thread::spawn(move || {
    ///     let text = std::fs::read(mnt.join("a.txt"));
    ///     stop.unmount().map(|()| text)
    /// });
    /// mounted.serve()?; // until the reader unmounts it
    /// assert_eq!(reader.join().unwrap()??, b"a\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare_mount(&self, request: &MountRequest<'_>) -> Result<PreparedMount> {
        prepare(StoreAt::Open(&self.store), &self.trust, request)
    }

    /// [`Bundles::prepare_mount`] of the store at `store` under its own trust policy
    /// ([`TrustPolicy::Store`]), opening the store only when the reference needs it: a pack
    /// file is mounted without a store (over the store when it is an update whose base the
    /// store holds). Fails with [`crate::ErrorKind::NoStore`] when a snapshot of a store or a
    /// remote ref is named and there is no store.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, ErrorKind, MountRequest};
    /// # let dir = tempfile::tempdir()?;
    /// let request = MountRequest::new("agent/coder", dir.path());
    /// let err = Bundles::prepare_mount_at(&dir.path().join("no-store"), &request).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NoStore);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn prepare_mount_at(store: &Path, request: &MountRequest<'_>) -> Result<PreparedMount> {
        prepare(StoreAt::Path(store), &TrustPolicy::Store, request)
    }

    /// Reads, and drops, what a mount of `reference` from the store at `store` on
    /// `mountpoint` reads before it answers, so that a mount another process is starting
    /// finds it in memory: the snapshot's record, the root's expansion record, the tree
    /// index's first page, the store's marker, lock and `trust.toml`, and the mountpoint's
    /// directory. For `mount --daemon`, whose waiting process has nothing else to do while its
    /// server starts. Read-only: nothing is opened for writing, created, locked or listed in
    /// the mountpoint (which is never held busy), every error is ignored, and a name is left
    /// alone (it is resolved through the catalog, which is the server's to open).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// zeroclaw_bundle::Bundles::warm_mount(&dir.path().join("store"), "agent/coder", dir.path());
    /// assert!(!dir.path().join("store").exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn warm_mount(store: &Path, reference: &str, mountpoint: &Path) {
        // The mountpoint, a chain of lookups of its own, on a second thread (a lookup of a
        // name it does not hold reads its directory's blocks without opening it); the store
        // on this one.
        let probe = mountpoint.join(zeroclaw_bundle_store::WARM_PROBE_NAME);
        let looked_up = std::thread::spawn(move || {
            let _ = std::fs::symlink_metadata(probe);
        });
        zeroclaw_bundle_store::warm_for_mount_ref(store, reference);
        let _ = std::fs::symlink_metadata(sign::config::file_of(store));
        let _ = looked_up.join();
    }

    /// Unmounts the mount at `mountpoint` (made by [`Bundles::mount`], `zeroclaw-bundle mount`
    /// or another process's), needing no store. A mount in use stays mounted and fails
    /// ([`MountError::Busy`] in the chain); so does a path that is no mount of this tool.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let err = zeroclaw_bundle::Bundles::unmount(&dir.path().join("missing")).unwrap_err();
    /// assert!(err.to_string().contains("does not exist"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unmount(mountpoint: &Path) -> Result<Unmounted> {
        let fail = |e: anyhow::Error| Error::new(Verb::Mount, mountpoint.display().to_string(), e);
        if let Err(e) = std::fs::symlink_metadata(mountpoint) {
            if e.kind() == std::io::ErrorKind::NotFound {
                return Err(fail(anyhow::anyhow!(
                    "could not unmount {}: it does not exist",
                    mountpoint.display()
                )));
            }
        }
        zeroclaw_bundle_mount::unmount(mountpoint)
            .with_context(|| format!("could not unmount {}", mountpoint.display()))
            .map_err(fail)?;
        Ok(Unmounted {
            mountpoint: mountpoint.to_path_buf(),
        })
    }
}

/// [`Bundles::prepare_mount`] over `store` under `policy`.
fn prepare(
    store: StoreAt<'_>,
    policy: &TrustPolicy,
    request: &MountRequest<'_>,
) -> Result<PreparedMount> {
    let reference = request.reference;
    let fail = |e: anyhow::Error| Error::new(Verb::Mount, reference, e);
    let notes = request.notes;
    // Who signed is shown at the mount's root (an xattr); a policy that requires signatures
    // refuses an unsigned or untrusted snapshot before anything is mounted.
    let trust = trust_of(store.root(), policy, request).map_err(fail)?;
    let classified = classify(store.root(), std::ffi::OsStr::new(reference), Takes::MOUNT)
        .map_err(|e| fail(e.into()))?;
    let opened = match &classified.target {
        Target::Pack { file, .. } => open_pack(&store, file, reference, &trust, notes)?,
        Target::Remote {
            spec,
            reference: on_remote,
            ..
        } => {
            let local = store.open()?;
            open_remote(&local, spec, on_remote, &trust, notes).map_err(fail)?
        }
        _ => {
            let local = store.open()?;
            // A name, `agent/ALIAS` or an id prefix is answered without opening the catalog
            // when the store can (`Catalog::resolve_without_catalog`): the catalog's open was
            // most of a mount's start (a daemon's server answered in 12.3 ms by a 12-digit
            // prefix of the bench's 10,000-file snapshot, 3.4 ms without it).
            let id = classified.stored_id(&local).map_err(|e| fail(e.into()))?;
            open_stored(&local, id, &trust, notes).map_err(fail)?
        }
    };
    // `mount` checks the mountpoint itself (empty directory, not mounted, FUSE usable); one
    // that cannot even be resolved is reported as that check words it.
    if let Err(e) = refuse_mountpoint_in_store(request.mountpoint, store.root()) {
        check_mountpoint(request.mountpoint).map_err(|e| fail(e.into()))?;
        return Err(fail(e));
    }
    let options = &request.options;
    let time = match options.time == UNIX_EPOCH {
        true => {
            UNIX_EPOCH
                + Duration::from_nanos(u64::try_from(opened.snap.created_unix_ns).unwrap_or(0))
        }
        false => options.time,
    };
    let options = MountOptions {
        label: match options.label.is_empty() {
            true => opened.id.short(12),
            false => options.label.clone(),
        },
        time,
        root_note: Some(
            options
                .root_note
                .clone()
                .unwrap_or_else(|| opened.signed_by.clone()),
        ),
        known_expansion: options.known_expansion.or(opened.known_expansion),
        passthrough: match (&options.passthrough, opened.passthrough_off) {
            (Passthrough::On, Some(why)) => Passthrough::Off(why.to_string()),
            (asked, _) => asked.clone(),
        },
        ..options.clone()
    };
    // Where a test interrupts the waiting `mount --daemon` (no-op in normal builds).
    crate::hooks::seam(BEFORE_MOUNTING, &request.mountpoint.to_string_lossy());
    Ok(PreparedMount {
        id: opened.id,
        root: opened.snap.root,
        source: opened.source,
        mountpoint: request.mountpoint.to_path_buf(),
        options,
        lease: opened.lease,
        index_later: opened.index_later,
        traffic: opened.traffic,
        reference: reference.to_string(),
    })
}

/// What a mount serves, opened and checked.
struct Opened {
    id: ObjectId,
    snap: Snapshot,
    source: Arc<dyn ObjectSource>,
    signed_by: String,
    lease: Option<Lease>,
    known_expansion: Option<zeroclaw_bundle_store::limits::Expansion>,
    index_later: Option<Arc<SnapshotSource>>,
    traffic: Option<RemoteTraffic>,
    /// Why reads are never passed through to the kernel, whatever the options: the source
    /// has no whole object files of the store to hand over.
    passthrough_off: Option<&'static str>,
}

/// The signature checks of a mount: `policy`, with the request's file and requirement over
/// the store's `trust.toml` (as the command line's flags are read). A store setting naming a
/// file that cannot be read does not stop a mount that requires nothing (the signers then
/// show as unknown keys, with a note); it does stop one that requires signatures, and a file
/// the request names always does.
fn trust_of(
    root: &Path,
    policy: &TrustPolicy,
    request: &MountRequest<'_>,
) -> anyhow::Result<Trust> {
    let notes = request.notes;
    let honour_store = match policy {
        TrustPolicy::Require(allowed) => {
            return Ok(Trust {
                allowed: Some(allowed.clone()),
                require: true,
            })
        }
        TrustPolicy::Store => true,
        TrustPolicy::Off => false,
    };
    let (file, require) = (request.allowed_signers, request.require_signed);
    let (trust, found) = match Trust::resolve(root, file, require) {
        Ok(found) => found,
        Err(e)
            if file.is_none()
                && !require
                && !(honour_store && sign::load_trust(root)?.require_signed) =>
        {
            notes(MountNote::Trust(format!(
                "{e}; signatures are shown as by unknown keys (fix it with \
                 `zeroclaw-bundle trust --allowed-signers FILE`)"
            )));
            (Trust::default(), Vec::new())
        }
        Err(e) => return Err(e.into()),
    };
    for line in found {
        notes(MountNote::Trust(line));
    }
    Ok(match honour_store {
        true => trust,
        false => Trust { require, ..trust },
    })
}

/// Applies `trust` to the signatures of snapshot `id` (refusing it when a required one is
/// missing, telling who signed when one is found) and returns who signed it, as the mount's
/// root shows it.
fn judged(
    id: &ObjectId,
    signatures: &[Vec<u8>],
    trust: &Trust,
    notes: &dyn Fn(MountNote),
) -> anyhow::Result<String> {
    if let Some(allowed) = trust.enforcing(&format!("snapshot {id}"))? {
        let signers = sign::require_signed_blobs(id, signatures, allowed)?;
        if !signers.is_empty() {
            notes(MountNote::Signed { id: *id, signers });
        }
    }
    let checked = sign::check_all(id, signatures, trust.allowed.as_ref());
    Ok(sign::summary(&checked))
}

/// A pack file, served from itself (checked whole first, as `unpack` checks it), over the
/// store when it is an update whose base the store holds.
fn open_pack(
    store: &StoreAt<'_>,
    file: &Path,
    reference: &str,
    trust: &Trust,
    notes: &dyn Fn(MountNote),
) -> Result<Opened> {
    let fail = |e: anyhow::Error| Error::new(Verb::Mount, reference, e);
    let pack = PackReader::open(file).map_err(|e| fail(e.into()))?;
    pack.check_trailer().map_err(|e| fail(e.into()))?;
    let snap = pack.snapshot().map_err(|e| fail(e.into()))?;
    let id = pack.root;
    let signatures = pack.signatures().map_err(|e| fail(e.into()))?;
    let signed_by = judged(&id, &signatures, trust, notes).map_err(fail)?;
    // An incremental pack serves what it does not carry from this store, when the store
    // holds its base. Without the base, every directory and file it does not carry would
    // answer EIO: refused here, naming the base, before anything mounts.
    let source = PackOverStore::new(pack, store.existing()?.as_ref().map(|s| s.objects()));
    if let (Some(base), false) = (source.pack().base, source.layered()) {
        return Err(fail(anyhow::anyhow!(
            "refusing to mount {reference}: it is an update (`pack --since`) on snapshot {}, \
             which the store at {} does not hold, so what the update does not carry could \
             not be read; unpack or pull snapshot {} first, or mount a full pack",
            base.short(12),
            store.root().display(),
            base.to_hex()
        )));
    }
    Ok(Opened {
        id,
        snap,
        source: Arc::new(source),
        signed_by,
        lease: None,
        known_expansion: None,
        index_later: None,
        traffic: None,
        passthrough_off: Some(
            "a pack file is served: its objects are read from the pack through the mount server",
        ),
    })
}

/// A remote snapshot ref, served in place: trees from the remote's trees pack, file contents
/// fetched (ranged, verified) when read.
fn open_remote(
    store: &Store,
    spec: &crate::remote::RemoteSpec,
    on_remote: &str,
    trust: &Trust,
    notes: &dyn Fn(MountNote),
) -> anyhow::Result<Opened> {
    let remote = crate::remote::Remote::open(spec, false)?;
    let id = remote.resolve(on_remote);
    for line in remote.notices() {
        notes(MountNote::Remote(line));
    }
    let id = id?;
    let signatures = remote.signatures(&id)?;
    let signed_by = judged(&id, &signatures, trust, notes)?;
    let view = Arc::new(
        crate::remote::RemoteView::open(remote, id, store.objects().tmp_dir(), true)
            .with_context(|| format!("could not open {}/{}", spec.name, id.short(12)))?,
    );
    if !view.has_trees_pack() {
        notes(MountNote::NoTreesPack {
            snapshot: format!("{}/{}", spec.name, id.short(12)),
        });
    }
    let snap = view.snapshot().clone();
    let traffic = {
        let view = Arc::clone(&view);
        RemoteTraffic(Arc::new(move || {
            let remote = view.remote();
            format!("remote {}: {}", remote.name(), remote.traffic())
        }))
    };
    Ok(Opened {
        id,
        snap,
        source: view,
        signed_by,
        lease: None,
        known_expansion: None,
        index_later: None,
        traffic: Some(traffic),
        passthrough_off: Some(
            "a remote snapshot is served: its files are fetched through the mount server",
        ),
    })
}

/// Snapshot `id` of `store`, with a lease that keeps `gc` off what the mount serves.
/// Listings come from the snapshot's tree index (one file) when it has one. With the root's
/// expansion recorded, nothing walks every tree before the mount answers: only the root is
/// read before answering (off the index's first page), the rest of the index once the mount
/// answers ([`PreparedMount::mount`]).
fn open_stored(
    store: &Store,
    id: ObjectId,
    trust: &Trust,
    notes: &dyn Fn(MountNote),
) -> anyhow::Result<Opened> {
    let signatures: Vec<Vec<u8>> = store
        .catalog()
        .signatures(&id)?
        .into_iter()
        .map(|s| s.bytes)
        .collect();
    let signed_by = judged(&id, &signatures, trust, notes)?;
    let snap = store.objects().read_snapshot(&id)?;
    let lease = store.maintenance().lease(&id, &snap.root)?;
    let known_expansion = store.index().recorded_expansion(&snap.root);
    let source = Arc::new(match known_expansion {
        Some(_) => store.index().snapshot_source_answering(&id),
        None => store.index().snapshot_source_within(&id, INDEX_IN_MEMORY),
    });
    Ok(Opened {
        id,
        snap,
        index_later: known_expansion.map(|_| Arc::clone(&source)),
        source,
        signed_by,
        lease: Some(lease),
        known_expansion,
        traffic: None,
        passthrough_off: None,
    })
}

/// Refuses a mountpoint inside the store: a mount there would hide the store's own files.
fn refuse_mountpoint_in_store(mountpoint: &Path, store: &Path) -> anyhow::Result<()> {
    let canonical = std::fs::canonicalize(mountpoint)
        .with_context(|| format!("could not resolve {}", mountpoint.display()))?;
    if crate::publish::lies_inside(&canonical, store) {
        anyhow::bail!(
            "refusing to mount on {}: it lies inside the store at {} (a mount there would \
             hide the store's own files); mount on an empty directory outside the store",
            mountpoint.display(),
            store.display()
        );
    }
    Ok(())
}

impl PreparedMount {
    /// The snapshot that will be served.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// Mounts it, and returns once the mount answers (the kernel's handshake answered, the
    /// serving threads started). A stored snapshot mounted without a walk has its tree index
    /// read whole a moment later (`INDEX_READ_DELAY`), off the answering path. Fails when
    /// the mountpoint became unusable meanwhile or FUSE is missing; nothing is left mounted.
    pub fn mount(self) -> Result<Mounted> {
        let fail = |e: anyhow::Error| Error::new(Verb::Mount, self.reference.as_str(), e);
        let mut handle =
            zeroclaw_bundle_mount::mount(self.source, self.root, &self.mountpoint, &self.options)
                .with_context(|| format!("could not mount snapshot {}", self.id.short(12)))
                .map_err(fail)?;
        if let Some(lease) = self.lease {
            handle.keep_lease(lease);
        }
        if let Some(source) = self.index_later {
            // Answering: the index is read whole off the answering path, so that a walk of
            // the mount (or a cold `find` after the page cache was dropped) reads no tree
            // from the disk, as when the mount read it before answering. A moment later, not
            // at once: see INDEX_READ_DELAY.
            std::thread::spawn(move || {
                std::thread::sleep(INDEX_READ_DELAY);
                source.hold_index_in_memory(INDEX_IN_MEMORY)
            });
        }
        Ok(Mounted {
            handle,
            id: self.id,
            mountpoint: self.mountpoint,
            signed_by: self.options.root_note.unwrap_or_default(),
            traffic: self.traffic,
            reference: self.reference,
        })
    }
}

impl Mounted {
    /// The snapshot served.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// Who signed it, as the mount's root shows it (`unsigned`, or each signature's verdict).
    pub fn signed_by(&self) -> &str {
        &self.signed_by
    }

    /// What the mount asked of its remote so far (a mount of a remote ref only).
    pub fn traffic(&self) -> Option<RemoteTraffic> {
        self.traffic.clone()
    }

    /// Whether the mount passes reads of large whole objects through to the kernel (FUSE
    /// passthrough), or why not: as its root's `user.zeroclaw.passthrough` says, and
    /// [`Passthrough::note`] is the line `mount -v` prints. Off from the start for a pack file
    /// or a remote snapshot (no whole object file of the store to hand over), when the
    /// options turned it off, or when the kernel or the privileges do not allow it.
    pub fn passthrough(&self) -> Passthrough {
        self.handle.passthrough()
    }

    /// The mount as `--json` reports it, served by this process.
    pub fn report(&self) -> MountReport {
        MountReport {
            snapshot: self.id,
            mountpoint: self.mountpoint.clone(),
            pid: Some(std::process::id()),
        }
    }

    /// Something that unmounts this mount from another thread (on a signal, say), which
    /// makes [`Mounted::serve`] return. A mount in use stays mounted and its `unmount` fails
    /// with [`MountError::Busy`]; its `detach` takes it away even then.
    pub fn unmounter(&self) -> Unmounter {
        self.handle.unmounter()
    }

    /// Unmounts now. A mount still in use fails with [`MountError::Busy`] in the chain and
    /// stays mounted (retry, or drop it to detach it lazily).
    pub fn unmount(&mut self) -> Result<()> {
        self.handle
            .unmount()
            .with_context(|| format!("could not unmount {}", self.mountpoint.display()))
            .map_err(|e| Error::new(Verb::Mount, self.reference.as_str(), e))
    }

    /// Serves the mount until it is asked to stop: unmounted through an [`Unmounter`], by
    /// `zeroclaw-bundle umount`, `fusermount3 -u` or `umount`. A connection that was aborted
    /// instead leaves no stale mount behind. Fails when serving failed.
    pub fn serve(self) -> Result<()> {
        let reference = self.reference;
        self.handle
            .wait()
            .context("the mount ended with an error")
            .map_err(|e| Error::new(Verb::Mount, reference, e))
    }

    /// The handle of the mount itself.
    pub fn into_handle(self) -> MountHandle {
        self.handle
    }
}
