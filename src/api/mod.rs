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

mod agent;
mod capture_report;
mod diff;
mod error;
mod import_report;
mod json;
mod maintenance;
mod mount;
mod plugin;
mod read;
mod remotes;
mod signing;
mod sync;
mod transfer;
mod trust;
mod update;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use zeroclaw_bundle_store::Store;

pub use crate::agent::INSTALL_DEFAULT;
pub use crate::agent::{Grant, GrantKind, Manifest, RenderedBundle, RiskKind, SemanticChange};
pub use crate::cancel::{Cancel, Interrupted};
pub use crate::capture::CaptureStats;
pub use crate::credentials::CredentialFinding;
pub use crate::crypt::{is_encrypted_file, CryptError, Identities, PlainPack, Recipients};
pub use crate::diff::compare::{DiffOptions, Semantic};
pub use crate::diff::{Change, Status, Summary};
pub use crate::export::{AgentSnapshot, DirSnapshot};
pub use crate::import::journal::{Completed, InstallRecovered};
pub use crate::import::update::{
    subject as update_subject, ConflictPolicy, UpdatePlan, UpdateRequest, Updated,
};
pub use crate::import::{ImportPlan, ImportRequest, Imported, MapArg};
pub use crate::plugin::VersionChange;
pub use crate::progress::{Cancellable, Note, Progress, Silent, Totals};
pub use crate::publish::{shell_quote, Published, Replace, Replaced};
pub use crate::review::{Review, ReviewOptions};
pub use crate::sign::{AllowedSigners, SignReport, Signer, TrustSettings};
pub use crate::sys::read_hidden_line;
pub use agent::{
    NameMoved, PreparedAgentSnapshot, PreparedDirSnapshot, PreparedExport, Snapshotted,
};
pub use capture_report::skipped_counts;
pub use diff::{
    Diff, DiffCollector, DiffLine, DiffReport, DiffRequest, DiffSide, DiffSink, DirCapture, Patch,
    Shown, SideKind, SideStats, SignedSide, SinkError, CONTENT_CAP,
};
pub use error::{Error, ErrorKind, Verb};
pub use import_report::ImportReport;
pub use maintenance::{Forgot, LeftAlone, Recovered, Verified};
pub use mount::{
    MountError, MountNote, MountReport, MountRequest, Mounted, Passthrough, PreparedMount,
    RemoteTraffic, Unmounted, Unmounter,
};
pub use plugin::{LeftOut, PluginExported, PluginReview, PluginServer, PreparedPluginExport};
pub use read::{FileBytes, ListEntry, Listed, OpenedSnapshot, ReadVerb, ShownSnapshot};
pub use remotes::{
    PullReport, PushReport, RemoteForgotten, RemoteGcReport, RemoteListing, RemoteRemoved,
    RemoteSnapshot, RemoteSpec, REMOTE_GC_GRACE_SECS,
};
pub use signing::{Checked, SignerTrust, SigningKey, Verdict};
pub use sync::{SyncOutcome, SyncReport, SyncRequest, SyncedAgent};
pub use transfer::{CheckedOut, PackInput, Packed, Unpacked};
pub use zeroclaw_bundle_mount::{MountHandle, MountOptions};
pub use zeroclaw_bundle_store::{
    EntryKind, GcReport, ObjectId, PackOptions, PackStats, ReindexReport, Snapshot, SnapshotKind,
    SnapshotSummary, TreeEntry, VerifyProblem, VerifyReport,
};

use crate::export::{AgentCaptureOptions, ExportJob, SourceDir};
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
    pub(crate) fn open_existing(path: &Path) -> Result<Option<Bundles>> {
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
    pub(crate) fn from_store(store: Store) -> Bundles {
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
        required_signers_at(self.store.root(), &self.trust)
    }

    /// This handle's required signers for a request that names none (`given`: the request's
    /// own, which win); the caller uses `given.or(returned.as_ref())`.
    fn unless_given(
        &self,
        given: Option<&AllowedSigners>,
    ) -> anyhow::Result<Option<AllowedSigners>> {
        match given {
            Some(_) => Ok(None),
            None => self.required_signers(),
        }
    }

    /// Refuses snapshot `id` unless this handle's policy is met by the signatures the store
    /// keeps for it; returns who signed (empty when nothing is required).
    fn gate_stored(&self, id: &ObjectId) -> anyhow::Result<Vec<Signer>> {
        match self.required_signers()? {
            Some(allowed) => Ok(crate::sign::require_signed(&self.store, id, &allowed)?),
            None => Ok(Vec::new()),
        }
    }

    /// The store, for a command layer that works below the verbs.
    pub(crate) fn into_store(self) -> Store {
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
            .session()
            .and_then(|c| c.snapshots())
            .map_err(|e| Error::new(Verb::Read, root, e.into()))
    }

    /// The snapshot `reference` names: its id and its record (source, host, time, report).
    /// Any form [`Bundles::open_snapshot`] reads with [`ReadVerb::Show`].
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
        let opened = self.open_snapshot(OsStr::new(reference), ReadVerb::Show)?;
        Ok((opened.id(), opened.record().clone()))
    }

    /// The entries of `reference` (`SNAPSHOT[:PATH]`, any form [`Bundles::open_snapshot`]
    /// reads): the directory's, in name order, or that one file.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir_all(tree.join("docs"))?;
    /// # std::fs::write(tree.join("docs/a.md"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let entries = bundles.ls(&format!("{}:docs", snap.id), false)?;
    /// assert_eq!(entries[0].path, b"docs/a.md");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ls(&self, reference: &str, recursive: bool) -> Result<Vec<Listed>> {
        self.open_snapshot(OsStr::new(reference), ReadVerb::Ls)?
            .ls(recursive)
    }

    /// Writes the bytes of the file `reference` names (`SNAPSHOT:PATH`) to `out`, verified
    /// against its id; returns the byte count.
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
    /// bundles.cat(&format!("{}:a.txt", snap.id), &mut bytes)?;
    /// assert_eq!(bytes, b"hello\n");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cat(&self, reference: &str, out: &mut dyn Write) -> Result<u64> {
        self.open_snapshot(OsStr::new(reference), ReadVerb::Cat)?
            .cat(out)
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
        let mut review = crate::review::review(&self.store, source, options, progress)
            .map_err(|e| Error::new(Verb::Review, source.to_string_lossy(), e.into()))?;
        let comparable = review.install.is_some() || review.plugin.is_some();
        if let (Some(install), true) = (&options.install, comparable) {
            // The plan writes only to the store (a capture of the agent's workspace or the
            // plugin's tree); one that cannot be made (not an update, or refused) leaves the
            // review as it is: the import says why.
            let request = crate::UpdateRequest {
                source,
                install,
                alias: None,
                conflicts: crate::ConflictPolicy::Refuse,
                accept_grants: false,
                allow_downgrade: false,
                require: None,
            };
            review.update_plan = self
                .update_plan(&request, progress)
                .ok()
                .filter(|p| !p.up_to_date);
        }
        Ok(review)
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
        let policy = self.unless_given(request.require).map_err(fail)?;
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
        self.sign_with_key(reference, SigningKey::open(Some(key))?)
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

/// The allowed signers `policy` requires of a snapshot of the store at `root` (which need not
/// exist: then it has no `trust.toml`); see [`Bundles::required_signers`].
fn required_signers_at(
    root: &Path,
    policy: &TrustPolicy,
) -> anyhow::Result<Option<AllowedSigners>> {
    match policy {
        TrustPolicy::Off => Ok(None),
        TrustPolicy::Require(allowed) => Ok(Some(allowed.clone())),
        TrustPolicy::Store => {
            let settings = crate::sign::load_trust(root)?;
            if !settings.require_signed {
                return Ok(None);
            }
            let file = settings.allowed_signers.ok_or_else(|| {
                anyhow::anyhow!(
                    "{} requires signatures but names no allowed_signers file; set one \
                     with `zeroclaw-bundle trust --allowed-signers FILE`",
                    crate::sign::config::file_of(root).display()
                )
            })?;
            Ok(Some(AllowedSigners::load(&file)?))
        }
    }
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none())
}
