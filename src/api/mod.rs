//! The public API: a store handle ([`Bundles`]) with one method per verb, typed errors
//! ([`Error`]: verb, target, kind, cause chain), a [`Progress`] trait and a [`Cancel`] token
//! passed in. This is what ZeroClaw links for `zeroclaw bundle ...`, and what the
//! `zeroclaw-bundle` binary's commands call; everything behind it is `pub(crate)`.
//!
//! The library never installs signal handlers or reads other process-global state: a caller
//! that wants Ctrl-C to stop a capture trips the [`Cancel`] token it passed in (through
//! [`Progress::cancel`], e.g. with [`Cancellable`]); the work then fails with
//! [`ErrorKind::Interrupted`] after unwinding its cleanups (no half-written bundle, nothing
//! recorded).
//!
//! Each method re-checks its inputs as the binary does (destinations are admitted before
//! anything is captured, a snapshot reference is resolved once) and returns what the binary
//! prints, as data.

mod error;
mod mount;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use zeroclaw_bundle_store::{resolve_path, EntryKind, ObjectSource, Store};

pub use crate::agent::{Grant, GrantKind, Manifest, RenderedBundle, RiskKind, SemanticChange};
pub use crate::cancel::{Cancel, Interrupted};
pub use crate::capture::CaptureStats;
pub use crate::credentials::CredentialFinding;
pub use crate::diff::compare::{DiffOptions, Semantic};
pub use crate::diff::{Change, Status, Summary};
pub use crate::export::{AgentSnapshot, DirSnapshot};
pub use crate::import::{ImportPlan, ImportRequest, Imported, MapArg};
pub use crate::progress::{Cancellable, Progress, Silent, Totals};
pub use crate::publish::{Published, Replace, Replaced};
pub use crate::remote::{PullReport, PushReport};
pub use crate::review::{Review, ReviewOptions};
pub use crate::sign::{AllowedSigners, SignReport, Signer};
pub use error::{Error, ErrorKind, Verb};
pub use mount::{
    MountError, MountNote, MountReport, MountRequest, Mounted, PreparedMount, RemoteTraffic,
    Unmounted, Unmounter,
};
pub use zeroclaw_bundle_mount::{MountHandle, MountOptions};
pub use zeroclaw_bundle_store::{
    GcReport, ObjectId, PackOptions, PackStats, Snapshot, SnapshotSummary, TreeEntry, VerifyReport,
};

use crate::diff::compare::{compare_sides, DiffSink, Report, SinkError};
use crate::diff::side::{paths_only, refuse_missing_path, resolve_side, scratch_store};
use crate::export::{AgentCaptureOptions, ExportJob, SourceDir, BUNDLE};
use crate::publish::{check, check_replacement, publish_snapshot, PublishRequest};
use crate::source::{classify, ReferenceError, Takes};

/// The result type of the public API.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the operator chose for an agent capture ([`Bundles::snapshot_agent`],
/// [`Bundles::export`]).
///
/// ```
/// let options = zeroclaw_bundle::AgentOptions {
///     excludes: vec!["drafts/**".into()],
///     ..Default::default()
/// };
/// assert!(options.name.is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// A name for the snapshot (as `snapshot --name`); ignored by `export`.
    pub name: Option<String>,
    /// The ZeroClaw version recorded as the exporter's (default: the schema this build reads).
    pub zeroclaw_version: Option<String>,
    /// Workspace paths left out (`--exclude` globs, relative to the workspace).
    pub excludes: Vec<String>,
}

/// An agent exported by [`Bundles::export`]: its snapshot and where it was published.
pub struct Exported {
    /// The capture (snapshot id, record, manifest, what was scrubbed and flagged).
    pub snapshot: AgentSnapshot,
    /// The publish (destination, files, bytes).
    pub published: Published,
    /// What the publish replaced, when it replaced something.
    pub replaced: Option<Replaced>,
}

/// A snapshot published by [`Bundles::checkout`].
#[derive(Debug)]
pub struct CheckedOut {
    /// The snapshot published.
    pub id: ObjectId,
    /// The publish (destination, files, bytes).
    pub published: Published,
    /// What the publish replaced, when it replaced something.
    pub replaced: Option<Replaced>,
}

/// The comparison of two sides by [`Bundles::diff`]: the semantic section of two agent bundles
/// (grants, secrets, dropped entries, config keys) and the tree changes in path order.
#[derive(Debug, Clone)]
pub struct Diff {
    semantic: Semantic,
    changes: Vec<Change>,
    summary: Summary,
    new_grants: bool,
}

impl Diff {
    /// True when the sides differ (a tree change or a semantic change).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn differs(&self) -> bool {
        self.summary.differs() || !self.semantic.changes.is_empty()
    }

    /// The semantic changes between two agent bundles (empty for plain trees).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn semantic(&self) -> impl Iterator<Item = &SemanticChange> {
        self.semantic.changes.iter()
    }

    /// The semantic section whole (with what could not be compared and why).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn semantic_section(&self) -> &Semantic {
        &self.semantic
    }

    /// The tree changes, in path order (name-status: added, modified, deleted, kind change).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter()
    }

    /// Counts of the changes.
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// True when side B grants the agent something side A did not.
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn new_grants(&self) -> bool {
        self.new_grants
    }
}

/// A pack written by [`Bundles::pack`].
#[derive(Debug, Clone)]
pub struct Packed {
    /// The snapshot packed.
    pub id: ObjectId,
    /// What was written.
    pub stats: PackStats,
}

/// A pack imported by [`Bundles::unpack`].
#[derive(Debug, Clone, Copy)]
pub struct Unpacked {
    /// The snapshot the pack carried, now in the store.
    pub id: ObjectId,
    /// Objects the pack lists.
    pub objects: usize,
    /// Objects read from the pack and verified (the snapshot record included): what the
    /// store lacked.
    pub read: usize,
    /// Objects the snapshot needs that the store already held: not read from the pack, so
    /// the pack's copies of them were not checked.
    pub already_present: usize,
}

/// A store of snapshots: the handle every verb works on.
///
/// ```
/// use zeroclaw_bundle::{Bundles, Silent};
/// # let dir = tempfile::tempdir()?;
/// # let install = dir.path().join("install");
/// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
/// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
/// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
/// let bundles = Bundles::create(dir.path().join("store"))?;
/// let snap = bundles.snapshot_agent(&install, "coder", &Default::default(), &Silent)?;
/// assert_eq!(bundles.resolve("agent/coder")?, snap.id);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Bundles {
    store: Store,
    trust: TrustPolicy,
}

/// Which signatures a [`Bundles`] requires before a snapshot becomes visible in the store or is
/// acted on: [`Bundles::checkout`], [`Bundles::mount`], [`Bundles::unpack`], [`Bundles::pull`]
/// and [`Bundles::import_plan`] apply it themselves, so every program linking the library
/// enforces what the operator set with `zeroclaw-bundle trust`. Only code turns it off
/// ([`TrustPolicy::Off`] through [`Bundles::with_trust_policy`]).
///
/// ```
/// use zeroclaw_bundle::{Bundles, ErrorKind, Replace, Silent, TrustPolicy};
/// # let dir = tempfile::tempdir()?;
/// # let tree = dir.path().join("tree");
/// # std::fs::create_dir(&tree)?;
/// let store = dir.path().join("store");
/// let bundles = Bundles::create(&store)?;
/// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
/// // The operator requires signatures (`zeroclaw-bundle trust --require-signed true`).
/// std::fs::write(dir.path().join("allowed_signers"), "")?;
/// std::fs::write(store.join("trust.toml"), "allowed_signers = \"../allowed_signers\"\nrequire_signed = true\n")?;
/// let err = bundles.checkout(&snap.id.to_hex(), &dir.path().join("out"), Replace::Nothing, &Silent).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Untrusted);
/// // An embedder that decides otherwise says so in code.
/// let bundles = bundles.with_trust_policy(TrustPolicy::Off);
/// bundles.checkout(&snap.id.to_hex(), &dir.path().join("out"), Replace::Nothing, &Silent)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub enum TrustPolicy {
    /// The store's own `trust.toml` (`require_signed`, `allowed_signers`), read at each verb:
    /// the default of every handle.
    #[default]
    Store,
    /// A signature by a key these allowed signers trust is required, whatever the store says.
    Require(AllowedSigners),
    /// No signature is required: the embedder turned the policy off.
    Off,
}

impl std::fmt::Debug for Bundles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundles")
            .field("root", &self.root())
            .finish()
    }
}

impl Bundles {
    /// Opens the store at `path`; fails with [`ErrorKind::NoStore`] when there is none (a
    /// missing path or an empty directory).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// let bundles = zeroclaw_bundle::Bundles::open(dir.path().join("store"))?;
    /// assert!(bundles.list()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Bundles> {
        let path = path.as_ref();
        Bundles::open_existing(path)?.ok_or_else(|| error::no_store(path.to_path_buf()))
    }

    /// The store at `path` when there is one: a missing path or an empty directory is no
    /// store; anything else is opened (and refused when it is not a store).
    #[doc(hidden)] // TRANSITION
    pub fn open_existing(path: &Path) -> Result<Option<Bundles>> {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Ok(m) if m.is_dir() && is_empty_dir(path) => Ok(None),
            _ => Bundles::create(path).map(Some),
        }
    }

    /// Opens the store at `path`, creating it (owner-only) when it is not there.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.root().join("STORE").exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(path: impl AsRef<Path>) -> Result<Bundles> {
        let path = path.as_ref();
        let store = Store::open_or_create(path)
            .with_context(|| format!("could not open the store {}", path.display()))
            .map_err(|e| Error::new(Verb::Open, path.display().to_string(), e))?;
        Ok(Bundles {
            store,
            trust: TrustPolicy::Store,
        })
    }

    /// The store's directory.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.root().ends_with("store"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn root(&self) -> &Path {
        self.store.root()
    }

    /// The handle of a store the command layer opened already.
    #[doc(hidden)] // TRANSITION
    pub fn from_store(store: Store) -> Bundles {
        Bundles {
            store,
            trust: TrustPolicy::Store,
        }
    }

    /// This handle with `policy` instead of the store's own (see [`TrustPolicy`]).
    pub fn with_trust_policy(self, policy: TrustPolicy) -> Bundles {
        Bundles {
            trust: policy,
            ..self
        }
    }

    /// The trust policy this handle applies.
    pub fn trust_policy(&self) -> &TrustPolicy {
        &self.trust
    }

    /// The allowed signers a snapshot must be signed by under this handle's policy (`None`:
    /// nothing required). With [`TrustPolicy::Store`], the store's `trust.toml` is read now:
    /// requiring signatures with no `allowed_signers` set, or a file that cannot be read, is
    /// an error (the policy fails closed).
    fn required_signers(&self) -> anyhow::Result<Option<AllowedSigners>> {
        match &self.trust {
            TrustPolicy::Off => Ok(None),
            TrustPolicy::Require(allowed) => Ok(Some(allowed.clone())),
            TrustPolicy::Store => {
                let settings = crate::sign::load_trust(self.store.root())?;
                if !settings.require_signed {
                    return Ok(None);
                }
                let file = settings.allowed_signers.ok_or_else(|| {
                    anyhow::anyhow!(
                        "{} requires signatures but names no allowed_signers file; set one \
                         with `zeroclaw-bundle trust --allowed-signers FILE`",
                        crate::sign::config::file_of(self.store.root()).display()
                    )
                })?;
                Ok(Some(AllowedSigners::load(&file)?))
            }
        }
    }

    /// Refuses snapshot `id` unless this handle's policy is met by the signatures the store
    /// keeps for it.
    fn gate_stored(&self, id: &ObjectId) -> anyhow::Result<()> {
        if let Some(allowed) = self.required_signers()? {
            crate::sign::require_signed(&self.store, id, &allowed)?;
        }
        Ok(())
    }

    /// The store itself, for the command layer's reads below the verbs.
    #[doc(hidden)] // TRANSITION
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store, for a command layer that works below the verbs.
    #[doc(hidden)] // TRANSITION
    pub fn into_store(self) -> Store {
        self.store
    }

    /// The id a snapshot reference names: a full id, a unique prefix of at least 8 hex digits,
    /// a name, or `agent/<alias>` (the latest snapshot of that agent).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// let err = bundles.resolve("agent/coder").unwrap_err();
    /// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::UnknownSnapshot);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve(&self, reference: &str) -> Result<ObjectId> {
        self.stored("resolve", reference)
            .map_err(|e| Error::new(Verb::Read, reference, e.into()))
    }

    /// The snapshot of the store `reference` names, read by the grammar every verb reads
    /// ([`crate::source`]) as `verb` takes it: a snapshot of this store (a full id, a unique
    /// prefix of 8+ hex digits, a name, `agent/<alias>`). A directory, a pack file or a
    /// remote ref is refused naming its form and what makes it one (capture, unpack, pull).
    fn stored(
        &self,
        verb: &'static str,
        reference: &str,
    ) -> std::result::Result<ObjectId, ReferenceError> {
        classify(
            self.store.root(),
            OsStr::new(reference),
            Takes::stored(verb),
        )?
        .stored_id(&self.store)
    }

    /// Captures agent `alias` of the install at `install` (the directory of its `config.toml`)
    /// into the store: the bundle ZeroClaw's `agents export` would write, read through
    /// descriptor-verified opens. An unchanged file is not read again (the stat cache).
    ///
    /// ```
    /// use zeroclaw_bundle::{AgentOptions, Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let install = dir.path().join("install");
    /// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
    /// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
    /// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let options = AgentOptions { name: Some("before-upgrade".into()), ..Default::default() };
    /// let snap = bundles.snapshot_agent(&install, "coder", &options, &Silent)?;
    /// assert_eq!(snap.bundle.manifest.root_agent, "coder");
    /// assert_eq!(bundles.resolve("before-upgrade")?, snap.id);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot_agent(
        &self,
        install: &Path,
        alias: &str,
        options: &AgentOptions,
        progress: &dyn Progress,
    ) -> Result<AgentSnapshot> {
        let fail = |e| Error::new(Verb::Snapshot, alias, e);
        if let Some(name) = &options.name {
            zeroclaw_bundle_store::validate_name(name).map_err(|e| fail(e.into()))?;
        }
        let (install, plan) = crate::export::load_agent(install, alias).map_err(fail)?;
        crate::export::capture_loaded(
            &self.store,
            &install,
            &plan,
            AgentCaptureOptions {
                name: options.name.as_deref(),
                zeroclaw_version: options.zeroclaw_version.as_deref(),
                excludes: &options.excludes,
            },
            progress,
        )
        .map_err(fail)
    }

    /// Captures directory `dir` whole (a received bundle, say) into the store, named `name`
    /// if given.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// let tree = dir.path().join("received");
    /// std::fs::create_dir(&tree)?;
    /// std::fs::write(tree.join("README.md"), "hello\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, Some("received"), &Silent)?;
    /// assert_eq!(snap.snapshot.files(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot_dir(
        &self,
        dir: &Path,
        name: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<DirSnapshot> {
        let fail = |e| Error::new(Verb::Snapshot, dir.display().to_string(), e);
        if let Some(name) = name {
            zeroclaw_bundle_store::validate_name(name).map_err(|e| fail(e.into()))?;
        }
        let source = SourceDir::open(dir).map_err(fail)?;
        crate::export::capture_dir(&self.store, source, name, progress).map_err(fail)
    }

    /// Captures agent `alias` and publishes its bundle at `out`: staged beside it and swapped
    /// in at once, never half-written. `out` is checked (and claimed against a concurrent
    /// export) before anything is captured; `replace` says what may be replaced there.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Replace, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let install = dir.path().join("install");
    /// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
    /// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
    /// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let out = dir.path().join("coder-bundle");
    /// let done = bundles.export(&install, "coder", &out, Replace::Nothing, &Default::default(), &Silent)?;
    /// assert!(out.join("zeroclaw-agent.toml").is_file());
    /// assert_eq!(std::fs::read(out.join("workspace/NOTES.md"))?, b"notes\n");
    /// assert_eq!(done.published.files, done.snapshot.snapshot.files());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn export(
        &self,
        install: &Path,
        alias: &str,
        out: &Path,
        replace: Replace,
        options: &AgentOptions,
        progress: &dyn Progress,
    ) -> Result<Exported> {
        let fail = |e| Error::new(Verb::Export, alias, e);
        let job = ExportJob::prepare(
            Some(&self.store),
            self.store.root(),
            install,
            alias,
            out,
            replace,
        )
        .map_err(fail)?;
        let (snapshot, published, replaced) = job
            .run(
                &self.store,
                AgentCaptureOptions {
                    name: None,
                    zeroclaw_version: options.zeroclaw_version.as_deref(),
                    excludes: &options.excludes,
                },
                progress,
            )
            .map_err(fail)?;
        Ok(Exported {
            snapshot,
            published,
            replaced,
        })
    }

    /// Publishes the snapshot `reference` names at `out` (staged, swapped in at once).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Replace, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let out = dir.path().join("copy");
    /// let done = bundles.checkout(&snap.id.to_hex(), &out, Replace::Nothing, &Silent)?;
    /// assert_eq!((done.id, done.published.files), (snap.id, 1));
    /// assert_eq!(std::fs::read(out.join("a.txt"))?, b"a\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn checkout(
        &self,
        reference: &str,
        out: &Path,
        replace: Replace,
        progress: &dyn Progress,
    ) -> Result<CheckedOut> {
        let id = self
            .stored("checkout", reference)
            .map_err(|e| Error::new(Verb::Checkout, reference, e.into()))?;
        let fail = |e| Error::new(Verb::Checkout, reference, e);
        let context = || {
            format!(
                "could not publish snapshot {} to {}",
                id.short(12),
                out.display()
            )
        };
        // The trust policy, before the destination is touched.
        self.gate_stored(&id).with_context(context).map_err(fail)?;
        let snap = self.store.read_snapshot(&id).map_err(|e| fail(e.into()))?;
        let admitted = check(&PublishRequest {
            dest: out,
            force: replace != Replace::Nothing,
            sources: &[],
            store: Some(self.store.root()),
            bundle: BUNDLE,
        })
        .with_context(context)
        .map_err(fail)?;
        let _claim = admitted.claim().with_context(context).map_err(fail)?;
        let replaced = check_replacement(Some(&self.store), &admitted, replace)
            .with_context(context)
            .map_err(fail)?;
        let published = publish_snapshot(&self.store, &id, &snap, &admitted, progress)
            .with_context(context)
            .map_err(fail)?;
        Ok(CheckedOut {
            id,
            published,
            replaced,
        })
    }

    /// Every snapshot in the store, oldest first.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, Some("empty"), &Silent)?;
    /// let listed = bundles.list()?;
    /// assert_eq!((listed[0].id, listed[0].name.as_deref()), (snap.id, Some("empty")));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn list(&self) -> Result<Vec<SnapshotSummary>> {
        let root = self.store.root().display().to_string();
        self.store
            .catalog()
            .and_then(|c| c.snapshots())
            .map_err(|e| Error::new(Verb::Read, root, e.into()))
    }

    /// The snapshot `reference` names: its id and its record (source, host, time, report).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// bundles.snapshot_dir(&tree, Some("empty"), &Silent)?;
    /// let (_, record) = bundles.show("empty")?;
    /// assert_eq!(record.name.as_deref(), Some("empty"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn show(&self, reference: &str) -> Result<(ObjectId, Snapshot)> {
        let fail =
            |e: zeroclaw_bundle_store::StoreError| Error::new(Verb::Read, reference, e.into());
        let id = self
            .stored("show", reference)
            .map_err(|e| Error::new(Verb::Read, reference, e.into()))?;
        let snap = self.store.read_snapshot(&id).map_err(fail)?;
        Ok((id, snap))
    }

    /// The entries of the directory at `path` (bytes, `/`-separated; empty for the root) in
    /// snapshot `reference`, in name order; for a file, that one entry.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir_all(tree.join("docs"))?;
    /// # std::fs::write(tree.join("docs/a.md"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let entries = bundles.ls(&snap.id.to_hex(), b"docs")?;
    /// assert_eq!(entries[0].name, b"a.md");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ls(&self, reference: &str, path: &[u8]) -> Result<Vec<TreeEntry>> {
        let fail =
            |e: zeroclaw_bundle_store::StoreError| Error::new(Verb::Read, reference, e.into());
        let id = self
            .stored("ls", reference)
            .map_err(|e| Error::new(Verb::Read, reference, e.into()))?;
        let snap = self.store.read_snapshot(&id).map_err(fail)?;
        let reader = self.store.snapshot_source(&id);
        let entry = resolve_path(&reader, &snap.root, path, &id.short(12)).map_err(fail)?;
        if entry.kind != EntryKind::Dir {
            return Ok(vec![entry]);
        }
        let tree = reader.tree(&entry.id).map_err(fail)?;
        Ok(tree.entries().to_vec())
    }

    /// Writes the bytes of the file at `path` in snapshot `reference` to `out`, verified
    /// against its id as they are read; returns the byte count.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "hello\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let mut bytes = Vec::new();
    /// bundles.cat(&snap.id.to_hex(), b"a.txt", &mut bytes)?;
    /// assert_eq!(bytes, b"hello\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cat(&self, reference: &str, path: &[u8], out: &mut dyn Write) -> Result<u64> {
        let fail = |e: anyhow::Error| Error::new(Verb::Read, reference, e);
        let id = self.stored("cat", reference).map_err(|e| fail(e.into()))?;
        let snap = self.store.read_snapshot(&id).map_err(|e| fail(e.into()))?;
        let reader = self.store.snapshot_source(&id);
        let entry =
            resolve_path(&reader, &snap.root, path, &id.short(12)).map_err(|e| fail(e.into()))?;
        if entry.kind == EntryKind::Dir {
            return Err(fail(anyhow::anyhow!(
                "{} is a directory in snapshot {}",
                zeroclaw_bundle_store::escape_name(path),
                id.short(12)
            )));
        }
        let blob = self
            .store
            .objects()
            .open_blob(&entry.id)
            .map_err(|e| fail(e.into()))?;
        let shown = zeroclaw_bundle_store::escape_name(path);
        // Checked whole first: a damaged file writes nothing rather than a prefix.
        blob.verify(&entry.id)
            .with_context(|| format!("could not read {shown}"))
            .map_err(fail)?;
        std::io::copy(&mut blob.verifying_reader(entry.id), out)
            .with_context(|| {
                format!(
                    "could not read {} of snapshot {}",
                    zeroclaw_bundle_store::escape_name(path),
                    id.short(12)
                )
            })
            .map_err(fail)
    }

    /// Compares two sides, each a snapshot reference, a bundle directory (captured on the fly
    /// through the same verified reader), a pack file, or a remote ref `NAME/SNAPSHOT`. For
    /// two agent bundles the result also has the semantic section (grants, secrets, config).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent, Status};
    /// # let dir = tempfile::tempdir()?;
    /// let tree = dir.path().join("tree");
    /// std::fs::create_dir(&tree)?;
    /// std::fs::write(tree.join("a.txt"), "one\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let before = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// std::fs::write(tree.join("a.txt"), "two\n")?;
    /// let diff = bundles.diff(before.id.to_hex().as_ref(), tree.as_os_str(), Default::default(), &Silent)?;
    /// assert!(diff.differs() && !diff.new_grants());
    /// let change = diff.changes().next().unwrap();
    /// assert_eq!((change.status, change.path.as_str()), (Status::M, "a.txt"));
    /// assert_eq!(diff.semantic().count(), 0);
    /// assert_eq!(diff.summary().modified, 1);
    /// assert!(diff.semantic_section().not_held.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff(
        &self,
        a: &OsStr,
        b: &OsStr,
        options: DiffOptions,
        progress: &dyn Progress,
    ) -> Result<Diff> {
        let target = format!("{} {}", a.to_string_lossy(), b.to_string_lossy());
        let fail = |e: anyhow::Error| Error::new(Verb::Diff, target.clone(), e);
        let sides = [('A', a), ('B', b)]
            .into_iter()
            .map(|(name, arg)| {
                refuse_missing_path(arg)
                    .and_then(|()| resolve_side(&self.store, arg, false, progress))
                    .map_err(|e| crate::diff::compare::CompareError::side(name, arg, e))
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| fail(e.into()))?;
        let mut sink = Collect::default();
        let report: Report =
            compare_sides(&sides[0], &sides[1], options, &mut sink).map_err(|e| fail(e.into()))?;
        Ok(Diff {
            semantic: sink.semantic,
            changes: sink.changes,
            summary: report.summary,
            new_grants: report.new_grants,
        })
    }

    /// [`Bundles::diff`] of two paths (bundle directories or packs) without a store: a scratch
    /// store is used and dropped.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    /// std::fs::create_dir(&a)?;
    /// std::fs::create_dir(&b)?;
    /// std::fs::write(b.join("new.txt"), "new\n")?;
    /// let diff = Bundles::diff_paths(&a, &b, &Silent)?;
    /// assert_eq!(diff.summary().added, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff_paths(a: &Path, b: &Path, progress: &dyn Progress) -> Result<Diff> {
        let target = format!("{} {}", a.display(), b.display());
        if !paths_only(&[a.as_os_str(), b.as_os_str()]) {
            return Err(Error::new(
                Verb::Diff,
                target,
                anyhow::anyhow!("diff_paths compares two paths (directories or pack files)"),
            ));
        }
        let (_dir, store) =
            scratch_store().map_err(|e| Error::new(Verb::Diff, target, e.into()))?;
        Bundles::from_store(store).diff(
            a.as_os_str(),
            b.as_os_str(),
            DiffOptions::default(),
            progress,
        )
    }

    /// Writes snapshot `reference` and every object it reaches (or, with
    /// [`PackOptions::since`], those another snapshot does not) into one self-verifying pack
    /// file at `out`, staged and renamed into place (`replace`: an existing file may be
    /// replaced). A pack of a snapshot holding a file others may not read is created `0600`.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let pack = dir.path().join("tree.zbpack");
    /// let packed = bundles.pack(&snap.id.to_hex(), &pack, Default::default(), false, &Silent)?;
    /// assert_eq!(packed.stats.blobs, 1);
    ///
    /// let elsewhere = Bundles::create(dir.path().join("other-store"))?;
    /// assert_eq!(elsewhere.unpack(&pack, &Silent)?.id, snap.id);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pack(
        &self,
        reference: &str,
        out: &Path,
        options: PackOptions,
        replace: bool,
        progress: &dyn Progress,
    ) -> Result<Packed> {
        let fail = |e: anyhow::Error| Error::new(Verb::Pack, reference, e);
        let id = self.stored("pack", reference).map_err(|e| fail(e.into()))?;
        let total = self
            .store
            .read_snapshot(&id)
            .map_err(|e| fail(e.into()))?
            .bytes();
        let private = !options.trees_only
            && crate::publish::reaches_private_file(&self.store, &id)
                .map_err(|e| fail(e.into()))?;
        let req = crate::publish::FileRequest {
            dest: out,
            force: replace,
            store: self.store.root(),
            noun: "pack",
            cancel: progress.cancel(),
            private,
            keep: None,
        };
        progress.begin(
            "packing",
            Some(Totals {
                files: 0,
                bytes: total,
            }),
        );
        let mut done = 0;
        let stats = crate::publish::publish_file(&req, |w| {
            zeroclaw_bundle_store::write_pack(&self.store, &id, options, w, &mut |n| {
                done += n;
                progress.advance(Totals {
                    files: 0,
                    bytes: done,
                });
            })
        });
        progress.finish();
        let stats = stats.map_err(|e| fail(e.into()))?;
        Ok(Packed { id, stats })
    }

    /// Imports the pack file at `pack` into the store, checking every object against its id;
    /// only what its snapshot reaches is taken. Returns the snapshot it carried.
    ///
    /// See [`Bundles::pack`] for an example.
    pub fn unpack(&self, pack: &Path, progress: &dyn Progress) -> Result<Unpacked> {
        let fail = |e: anyhow::Error| Error::new(Verb::Unpack, pack.display().to_string(), e);
        let context = || format!("could not unpack {}; nothing was imported", pack.display());
        let reader = zeroclaw_bundle_store::PackReader::open(pack)
            .with_context(context)
            .map_err(fail)?;
        // The trust policy over the signatures the pack carries, before anything is written.
        (|| -> anyhow::Result<()> {
            if let Some(allowed) = self.required_signers()? {
                let sigs = reader.signatures()?;
                crate::sign::require_signed_blobs(&reader.root, &sigs, &allowed)?;
            }
            Ok(())
        })()
        .with_context(context)
        .map_err(fail)?;
        let _lock = self.store.write_lock().map_err(|e| fail(e.into()))?;
        let watch = crate::progress::ImportProgress::new(progress);
        let report = zeroclaw_bundle_store::unpack_counted(&self.store, &reader, &watch)
            .with_context(context)
            .map_err(fail)?;
        Ok(Unpacked {
            id: report.id,
            objects: reader.entries().len(),
            read: report.read,
            already_present: report.present,
        })
    }

    /// Uploads snapshot `reference` to the remote named `remote` (configured in this store):
    /// the objects the remote lacks in one pack, then its index, then the snapshot record, so
    /// the remote never lists a snapshot with missing objects. Cancelled through `progress`.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let err = bundles.push(&snap.id.to_hex(), "origin", &Silent).unwrap_err();
    /// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::Remote);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn push(
        &self,
        reference: &str,
        remote: &str,
        progress: &dyn Progress,
    ) -> Result<PushReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Push, reference, e);
        let id = self.stored("push", reference).map_err(|e| fail(e.into()))?;
        let spec =
            crate::remote::find_remote(self.store.root(), remote).map_err(|e| fail(e.into()))?;
        let mut handle = crate::remote::Remote::open(&spec, true).map_err(|e| fail(e.into()))?;
        if let Some(cancel) = progress.cancel() {
            handle = handle.with_cancel(cancel.clone());
        }
        crate::remote::push(&self.store, &handle, &id, progress)
            .with_context(|| format!("could not push {} to {}", id.short(12), spec.name))
            .map_err(fail)
    }

    /// Downloads the snapshot the remote ref `NAME/SNAPSHOT` names (e.g. `origin/agent/coder`)
    /// into the store, verified; returns its id and what the pull did.
    ///
    /// ```
    /// use zeroclaw_bundle::Bundles;
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let err = bundles.pull("origin/agent/coder", &zeroclaw_bundle::Silent).unwrap_err();
    /// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::Remote);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pull(
        &self,
        remote_ref: &str,
        progress: &dyn Progress,
    ) -> Result<(ObjectId, PullReport)> {
        let fail = |e: anyhow::Error| Error::new(Verb::Pull, remote_ref, e);
        let Some((name, reference)) = remote_ref.split_once('/') else {
            return Err(fail(anyhow::anyhow!(
                "{remote_ref:?} is not NAME/SNAPSHOT (for example origin/3f2a9c01 or origin/agent/researcher)"
            )));
        };
        let spec =
            crate::remote::find_remote(self.store.root(), name).map_err(|e| fail(e.into()))?;
        let mut handle = crate::remote::Remote::open(&spec, false).map_err(|e| fail(e.into()))?;
        if let Some(cancel) = progress.cancel() {
            handle = handle.with_cancel(cancel.clone());
        }
        let id = handle.resolve(reference).map_err(|e| fail(e.into()))?;
        let require = self.required_signers().map_err(fail)?;
        let report =
            crate::remote::pull_checked(&self.store, &handle, &id, require.as_ref(), progress)
                .with_context(|| {
                    format!(
                        "could not pull {} from {}; no snapshot was added",
                        id.short(12),
                        spec.name
                    )
                })
                .map_err(fail)?;
        Ok((id, report))
    }

    /// Checks every object of the store against its id and every snapshot's closure; the
    /// problems found are in the report (an empty list: all is well).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.verify(&zeroclaw_bundle::Silent)?.problems.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self, progress: &dyn Progress) -> Result<VerifyReport> {
        let root = self.store.root().display().to_string();
        // The phase begins once its total is known (no `0 B/0 B` before it).
        let mut begun = false;
        let report = self.store.verify(&mut |done, total| {
            if total == 0 {
                return;
            }
            if !begun {
                progress.begin(
                    "verifying",
                    Some(Totals {
                        files: 0,
                        bytes: total,
                    }),
                );
                begun = true;
            }
            progress.advance(Totals {
                files: 0,
                bytes: done,
            })
        });
        progress.finish();
        report.map_err(|e| Error::new(Verb::Verify, root, e.into()))
    }

    /// Removes the objects no snapshot (and no running mount) reaches that are older than
    /// `grace_secs` (a capture in progress writes its objects before its snapshot).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert_eq!(bundles.gc(0)?.removed, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gc(&self, grace_secs: u64) -> Result<GcReport> {
        let root = self.store.root().display().to_string();
        self.store
            .gc(grace_secs)
            .map_err(|e| Error::new(Verb::Gc, root, e.into()))
    }

    /// Reviews `source` (a bundle directory, snapshot, pack or remote ref): everything an
    /// operator must accept before importing it (grants, secrets to fill, credential-looking
    /// files by path and reason, scripts, personal files, the diff against an earlier import
    /// into `options.install`). The source becomes a snapshot of the store first; the review's
    /// `root` is the content id `import` pins with [`ImportRequest::expect`].
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Replace, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let install = dir.path().join("install");
    /// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
    /// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
    /// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let out = dir.path().join("bundle");
    /// bundles.export(&install, "coder", &out, Replace::Nothing, &Default::default(), &Silent)?;
    /// let review = bundles.review(out.as_os_str(), &Default::default(), &Silent)?;
    /// let mut screen = Vec::new();
    /// zeroclaw_bundle::render_review(&review, &mut screen)?;
    /// assert!(String::from_utf8(screen)?.contains(&review.root.to_hex()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn review(
        &self,
        source: &OsStr,
        options: &ReviewOptions,
        progress: &dyn Progress,
    ) -> Result<Review> {
        crate::review::review(&self.store, source, options, progress)
            .map_err(|e| Error::new(Verb::Review, source.to_string_lossy(), e.into()))
    }

    /// Plans the import of `request.source` into `request.install`: the source is captured
    /// into the store, its config fragment merged into the install's (namespacing collisions,
    /// reusing identical entries, following `--map`s) and the result loaded and validated by
    /// ZeroClaw's own schema. Writes nothing to the install (a dry run prints this plan).
    ///
    /// See [`Bundles::import`] for an example.
    pub fn import_plan(
        &self,
        request: &ImportRequest<'_>,
        progress: &dyn Progress,
    ) -> Result<ImportPlan> {
        let fail = |e: anyhow::Error| Error::new(Verb::Import, request.source.to_string_lossy(), e);
        // The request's own signers win; otherwise this handle's policy applies.
        let policy = match request.require {
            Some(_) => None,
            None => self.required_signers().map_err(fail)?,
        };
        let request = ImportRequest {
            require: request.require.or(policy.as_ref()),
            ..*request
        };
        crate::import::plan(&self.store, &request, progress).map_err(|e| fail(e.into()))
    }

    /// Imports what [`Bundles::import_plan`] planned: the bundle's trees through the staged
    /// publish, the provenance record, then `config.toml` last, atomically, keeping a backup.
    /// `secrets` are values the operator typed for [`ImportPlan::secrets`], by dotted path,
    /// stored encrypted the way ZeroClaw stores them.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, ImportRequest, Replace, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let install = dir.path().join("install");
    /// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
    /// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
    /// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let out = dir.path().join("bundle");
    /// bundles.export(&install, "coder", &out, Replace::Nothing, &Default::default(), &Silent)?;
    /// let target = dir.path().join("other-install");
    /// std::fs::create_dir(&target)?;
    /// std::fs::write(target.join("config.toml"), "schema_version = 3\n")?;
    /// let request = ImportRequest { source: out.as_os_str(), install: &target, ..Default::default() };
    /// let plan = bundles.import_plan(&request, &Silent)?;
    /// let imported = bundles.import(&plan, &[], &Silent)?;
    /// assert_eq!(imported.alias, "coder");
    /// assert!(std::fs::read_to_string(target.join("config.toml"))?.contains("[agents.coder]"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn import(
        &self,
        plan: &ImportPlan,
        secrets: &[(String, String)],
        progress: &dyn Progress,
    ) -> Result<Imported> {
        crate::import::apply(&self.store, plan, secrets, progress)
            .map_err(|e| Error::new(Verb::Import, plan.install.display().to_string(), e.into()))
    }

    /// Signs snapshot `reference` with the OpenSSH key file `key` (sshsig, as
    /// `ssh-keygen -Y sign` makes it, over the snapshot id in this tool's namespace): a private
    /// key file, or a public key, whose signing is handed to `ssh-keygen -Y sign` (its private
    /// half in ssh-agent, on a security key, or beside it). The signature is kept beside the
    /// snapshot and travels in packs and on remotes.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// let key = dir.path().join("id_ed25519");
    /// let made = std::process::Command::new("ssh-keygen")
    ///     .args(["-q", "-t", "ed25519", "-N", "", "-C", "alice@example.com", "-f"]).arg(&key).status()?;
    /// assert!(made.success());
    /// let tree = dir.path().join("tree");
    /// std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// bundles.sign(&snap.id.to_hex(), &key)?;
    ///
    /// let public = std::fs::read_to_string(key.with_extension("pub"))?;
    /// let allowed = dir.path().join("allowed_signers");
    /// std::fs::write(&allowed, format!("alice@example.com {public}"))?;
    /// let signers = bundles.require_signed(&snap.id.to_hex(), &allowed)?;
    /// assert_eq!(signers[0].principals, "alice@example.com");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sign(&self, reference: &str, key: &Path) -> Result<SignReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Sign, reference, e);
        let id = self.stored("sign", reference).map_err(|e| fail(e.into()))?;
        let choice = crate::sign::key::choose_key(Some(key)).map_err(|e| fail(e.into()))?;
        crate::sign::sign(&self.store, &id, &crate::sign::SignWith::Key(choice))
            .map_err(|e| fail(e.into()))
    }

    /// Who signed snapshot `reference` with a key the `allowed_signers` file (git's format)
    /// trusts; fails, naming the snapshot and the reason, when none did (unsigned, a bad
    /// signature, an unknown key, an expired entry, another namespace).
    ///
    /// See [`Bundles::sign`] for an example.
    pub fn require_signed(&self, reference: &str, allowed_signers: &Path) -> Result<Vec<Signer>> {
        let fail = |e: anyhow::Error| Error::new(Verb::Sign, reference, e);
        let id = self
            .stored("require-signed", reference)
            .map_err(|e| fail(e.into()))?;
        let allowed =
            crate::sign::AllowedSigners::load(allowed_signers).map_err(|e| fail(e.into()))?;
        crate::sign::require_signed(&self.store, &id, &allowed).map_err(|e| fail(e.into()))
    }
}

/// Writes the text screen of `review` (what `zeroclaw-bundle review` prints) to `out`.
///
/// See [`Bundles::review`] for an example.
pub fn render_review(review: &Review, out: &mut dyn Write) -> std::io::Result<()> {
    crate::review::render(review, out)
}

/// Collects what [`compare_sides`] streams.
#[derive(Default)]
struct Collect {
    semantic: Semantic,
    changes: Vec<Change>,
}

impl DiffSink for Collect {
    fn semantic(&mut self, section: &Semantic) -> std::result::Result<(), SinkError> {
        self.semantic = section.clone();
        Ok(())
    }

    fn change(&mut self, change: &Change) -> std::result::Result<(), SinkError> {
        self.changes.push(change.clone());
        Ok(())
    }
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
}
