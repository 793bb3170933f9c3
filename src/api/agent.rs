//! The agent verbs as a client runs them: `export` and `snapshot` checked before any store is
//! opened or created ([`PreparedExport`], [`PreparedAgentSnapshot`], [`PreparedDirSnapshot`]:
//! a typo in an alias, an install or a destination creates nothing), the store a `review`
//! reads in ([`Bundles::open_for_source`]), the install an `import` writes into
//! ([`Bundles::import_install`]). What they report is in `capture_report` and
//! `import_report`.
//!
//! Which verbs may create a store: `export` and `snapshot` (they add to it), `review` of a
//! directory or a pack (it adds the snapshot it reviews), `import` (its source becomes a
//! snapshot); a review of a snapshot or a remote ref needs the store that holds it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use zeroclaw_bundle_store::ObjectId;

use super::{
    AgentOptions, AgentSnapshot, Bundles, DirSnapshot, Error, Exported, Replace, Result,
    ReviewOptions, Verb,
};
use crate::agent::{ExportPlan, Install};
use crate::export::{AgentCaptureOptions, ExportJob, SourceDir};

/// An export whose install, agent and destination were checked, and whose destination is
/// claimed (a second export to it fails at once): nothing was captured or written, and no
/// store was created. [`PreparedExport::run`] does the rest.
///
/// ```
/// use zeroclaw_bundle::{Bundles, Replace, Silent};
/// # let dir = tempfile::tempdir()?;
/// # let install = dir.path().join("install");
/// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
/// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
/// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
/// let store = dir.path().join("store");
/// let out = dir.path().join("bundle");
/// // A misspelt alias is refused before a store exists.
/// let err = Bundles::prepare_export(&store, Some(&install), "codr", &out, Replace::Nothing).unwrap_err();
/// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::Install);
/// assert!(!store.exists());
/// let job = Bundles::prepare_export(&store, Some(&install), "coder", &out, Replace::Nothing)?;
/// let (bundles, exported) = job.run(&Default::default(), &Silent)?;
/// assert_eq!(bundles.resolve("agent/coder")?, exported.snapshot.id);
/// let json = serde_json::to_value(&exported)?;
/// assert_eq!(json["agent"], "coder");
/// assert!(exported.render(false).starts_with("Exported agent `coder` to "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PreparedExport {
    job: ExportJob,
    alias: String,
    store_path: PathBuf,
    existing: Option<Bundles>,
}

/// A capture of an agent whose install and agent were checked (and whose name is valid):
/// nothing was captured, and no store was created. [`PreparedAgentSnapshot::run`] captures.
///
/// ```
/// use zeroclaw_bundle::{AgentOptions, Bundles, Silent};
/// # let dir = tempfile::tempdir()?;
/// # let install = dir.path().join("install");
/// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
/// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
/// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
/// let store = dir.path().join("store");
/// let options = AgentOptions { name: Some("nightly".into()), ..Default::default() };
/// let (_, first) = Bundles::prepare_snapshot_agent(&store, Some(&install), "coder", &options)?.run(&Silent)?;
/// std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "more\n")?;
/// let (bundles, second) = Bundles::prepare_snapshot_agent(&store, Some(&install), "coder", &options)?.run(&Silent)?;
/// // The name moved to the new snapshot; the old one stays, by its id.
/// assert_eq!(second.name_moved.unwrap().from, first.capture.id);
/// assert_eq!(bundles.resolve("nightly")?, second.capture.id);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PreparedAgentSnapshot {
    install: Install,
    plan: ExportPlan,
    options: AgentOptions,
    store_path: PathBuf,
}

/// A capture of a directory whose root is open (and whose name is valid): nothing was
/// captured, and no store was created. [`PreparedDirSnapshot::run`] captures.
///
/// ```
/// use zeroclaw_bundle::{Bundles, Silent};
/// # let dir = tempfile::tempdir()?;
/// let store = dir.path().join("store");
/// // A directory that is not there creates no store.
/// assert!(Bundles::prepare_snapshot_dir(&store, &dir.path().join("nope"), None).is_err());
/// assert!(!store.exists());
/// let tree = dir.path().join("tree");
/// std::fs::create_dir(&tree)?;
/// std::fs::write(tree.join("a.txt"), "a\n")?;
/// let (_, snap) = Bundles::prepare_snapshot_dir(&store, &tree, Some("received"))?.run(&Silent)?;
/// assert_eq!(snap.capture.snapshot.files(), 1);
/// assert_eq!(serde_json::to_value(&snap)?["files"], 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PreparedDirSnapshot {
    dir: SourceDir,
    /// The directory as given (what an error names).
    given: String,
    name: Option<String>,
    store_path: PathBuf,
}

/// A snapshot a capture made, and what its name did.
pub struct Snapshotted<T> {
    /// The capture ([`AgentSnapshot`] or [`DirSnapshot`]).
    pub capture: T,
    /// Set when the snapshot's name pointed at another snapshot before and moved to this one.
    pub name_moved: Option<NameMoved>,
}

/// A name that moved from one snapshot to another (the other stays in the store, by its id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameMoved {
    /// The name.
    pub name: String,
    /// The snapshot it named before.
    pub from: ObjectId,
}

impl std::fmt::Display for NameMoved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the name `{}` moved from snapshot {} to this one; {} stays in the store, by its id",
            self.name,
            self.from.short(16),
            self.from.short(16)
        )
    }
}

/// The `--json` document of a capture is the capture's.
impl<T: Serialize> Serialize for Snapshotted<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.capture.serialize(s)
    }
}

impl std::fmt::Debug for PreparedExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedExport")
            .field("alias", &self.alias)
            .field("store", &self.store_path)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PreparedAgentSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedAgentSnapshot")
            .field("alias", &self.plan.alias)
            .field("options", &self.options)
            .field("store", &self.store_path)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for PreparedDirSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedDirSnapshot")
            .field("dir", &self.given)
            .field("name", &self.name)
            .field("store", &self.store_path)
            .finish_non_exhaustive()
    }
}

impl Bundles {
    /// Checks an export of agent `alias` of the install at `install` (`None`: where ZeroClaw
    /// finds its own, `$ZEROCLAW_CONFIG_DIR` else `~/.zeroclaw`) to `out` before the store at
    /// `store` is opened or created: the install and the agent load, `out` is admitted under
    /// `replace` (never inside the store or the agent's own trees) and claimed. Refused with
    /// [`crate::ErrorKind::Install`] or [`crate::ErrorKind::Destination`], having created
    /// nothing.
    ///
    /// See [`PreparedExport`] for an example.
    pub fn prepare_export(
        store: &Path,
        install: Option<&Path>,
        alias: &str,
        out: &Path,
        replace: Replace,
    ) -> Result<PreparedExport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Export, alias, e);
        let install = crate::agent::install_root(install).map_err(|e| fail(e.into()))?;
        let existing = Bundles::open_existing(store)?;
        let job = ExportJob::prepare(
            existing.as_ref().map(|b| &b.store),
            store,
            &install,
            alias,
            out,
            replace,
        )
        .map_err(fail)?;
        Ok(PreparedExport {
            job,
            alias: alias.to_string(),
            store_path: store.to_path_buf(),
            existing,
        })
    }

    /// Checks a capture of agent `alias` of the install at `install` (`None`: ZeroClaw's
    /// default, as [`Bundles::prepare_export`]) under `options` (a snapshot name must be a
    /// valid one) before the store at `store` is opened or created.
    ///
    /// See [`PreparedAgentSnapshot`] for an example.
    pub fn prepare_snapshot_agent(
        store: &Path,
        install: Option<&Path>,
        alias: &str,
        options: &AgentOptions,
    ) -> Result<PreparedAgentSnapshot> {
        let fail = |e: anyhow::Error| Error::new(Verb::Snapshot, alias, e);
        if let Some(name) = &options.name {
            zeroclaw_bundle_store::validate_name(name).map_err(|e| fail(e.into()))?;
        }
        let install = crate::agent::install_root(install).map_err(|e| fail(e.into()))?;
        let (install, plan) = crate::export::load_agent(&install, alias).map_err(fail)?;
        Ok(PreparedAgentSnapshot {
            install,
            plan,
            options: options.clone(),
            store_path: store.to_path_buf(),
        })
    }

    /// Checks a capture of directory `dir` named `name` (if given, a valid name) before the
    /// store at `store` is opened or created: the directory's root is opened now.
    ///
    /// See [`PreparedDirSnapshot`] for an example.
    pub fn prepare_snapshot_dir(
        store: &Path,
        dir: &Path,
        name: Option<&str>,
    ) -> Result<PreparedDirSnapshot> {
        let fail = |e: anyhow::Error| Error::new(Verb::Snapshot, dir.display().to_string(), e);
        if let Some(name) = name {
            zeroclaw_bundle_store::validate_name(name).map_err(|e| fail(e.into()))?;
        }
        let given = dir.display().to_string();
        let dir = SourceDir::open(dir).map_err(fail)?;
        Ok(PreparedDirSnapshot {
            dir,
            given,
            name: name.map(str::to_string),
            store_path: store.to_path_buf(),
        })
    }

    /// Opens the store at `store` for a verb that reads `source` into it (`review`): a
    /// source spelled as a path that is not there is refused first, creating nothing; an
    /// existing path (a directory or a pack, which the verb adds as a snapshot) opens the
    /// store or creates it; anything else (a snapshot, a remote ref) needs the store to
    /// exist ([`crate::ErrorKind::NoStore`]).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, ErrorKind};
    /// # let dir = tempfile::tempdir()?;
    /// let store = dir.path().join("store");
    /// let err = Bundles::open_for_source(&store, "agent/coder".as_ref()).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NoStore);
    /// assert!(Bundles::open_for_source(&store, "./no-such-bundle".as_ref()).is_err());
    /// assert!(!store.exists());
    /// Bundles::open_for_source(&store, dir.path().as_os_str())?;
    /// assert!(store.exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_for_source(store: &Path, source: &OsStr) -> Result<Bundles> {
        crate::source::refuse_missing_path(source)
            .map_err(|e| Error::new(Verb::Open, source.to_string_lossy(), e.into()))?;
        if Path::new(source).exists() {
            match Bundles::open_existing(store)? {
                Some(bundles) => Ok(bundles),
                None => Bundles::create(store),
            }
        } else {
            Bundles::open(store)
        }
    }

    /// The install an import writes into: `install`, else where ZeroClaw finds its own
    /// (`$ZEROCLAW_CONFIG_DIR` else `~/.zeroclaw`); refused ([`crate::ErrorKind::Install`])
    /// when it has no `config.toml`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let err = zeroclaw_bundle::Bundles::import_install(Some(dir.path())).unwrap_err();
    /// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::Install);
    /// std::fs::write(dir.path().join("config.toml"), "schema_version = 3\n")?;
    /// assert_eq!(zeroclaw_bundle::Bundles::import_install(Some(dir.path()))?, dir.path());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn import_install(install: Option<&Path>) -> Result<PathBuf> {
        let target = install.map(|p| p.display().to_string()).unwrap_or_default();
        let fail = |e: crate::agent::AgentError| Error::new(Verb::Import, target.clone(), e.into());
        let root = crate::agent::install_root(install).map_err(fail)?;
        crate::agent::require_install(&root).map_err(fail)?;
        Ok(root)
    }
}

impl PreparedExport {
    /// Opens the store (creating it when there is none), captures the agent and publishes its
    /// bundle (staged beside the destination and swapped in at once; a failed publish forgets
    /// the snapshot again). Returns the store's handle and what was exported.
    pub fn run(
        self,
        options: &AgentOptions,
        progress: &dyn super::Progress,
    ) -> Result<(Bundles, Exported)> {
        let bundles = match self.existing {
            Some(bundles) => bundles,
            None => Bundles::create(&self.store_path)?,
        };
        let (snapshot, published, replaced) = self
            .job
            .run(
                &bundles.store,
                AgentCaptureOptions {
                    name: None,
                    zeroclaw_version: options.zeroclaw_version.as_deref(),
                    excludes: &options.excludes,
                },
                progress,
            )
            .map_err(|e| Error::new(Verb::Export, self.alias, e))?;
        Ok((
            bundles,
            Exported {
                snapshot,
                published,
                replaced,
            },
        ))
    }
}

impl PreparedAgentSnapshot {
    /// Opens the store (creating it when there is none) and captures the agent into it.
    pub fn run(
        self,
        progress: &dyn super::Progress,
    ) -> Result<(Bundles, Snapshotted<AgentSnapshot>)> {
        let bundles = Bundles::create(&self.store_path)?;
        let name = self.options.name.as_deref();
        let before = name_holder(&bundles, name);
        let capture = crate::export::capture_loaded(
            &bundles.store,
            &self.install,
            &self.plan,
            AgentCaptureOptions {
                name,
                zeroclaw_version: self.options.zeroclaw_version.as_deref(),
                excludes: &self.options.excludes,
            },
            progress,
        )
        .map_err(|e| Error::new(Verb::Snapshot, self.plan.alias.clone(), e))?;
        let name_moved = moved(name, before, &capture.id);
        Ok((
            bundles,
            Snapshotted {
                capture,
                name_moved,
            },
        ))
    }
}

impl PreparedDirSnapshot {
    /// Opens the store (creating it when there is none) and captures the directory into it.
    pub fn run(
        self,
        progress: &dyn super::Progress,
    ) -> Result<(Bundles, Snapshotted<DirSnapshot>)> {
        let bundles = Bundles::create(&self.store_path)?;
        let name = self.name.as_deref();
        let before = name_holder(&bundles, name);
        let capture = crate::export::capture_dir(&bundles.store, self.dir, name, progress)
            .map_err(|e| Error::new(Verb::Snapshot, self.given, e))?;
        let name_moved = moved(name, before, &capture.id);
        Ok((
            bundles,
            Snapshotted {
                capture,
                name_moved,
            },
        ))
    }
}

/// The snapshot `name` points at before a capture, if any. Without a name the catalog is not
/// opened (an open of sled costs a log replay and an fsync).
fn name_holder(bundles: &Bundles, name: Option<&str>) -> Option<ObjectId> {
    let name = name?;
    bundles
        .store
        .catalog()
        .session()
        .ok()?
        .name_target(name)
        .ok()?
}

fn moved(name: Option<&str>, before: Option<ObjectId>, id: &ObjectId) -> Option<NameMoved> {
    match (name, before) {
        (Some(name), Some(from)) if from != *id => Some(NameMoved {
            name: name.to_string(),
            from,
        }),
        _ => None,
    }
}

impl ReviewOptions {
    /// The options of a review that compares with the install at `install`, or (`None`) with
    /// the install ZeroClaw would use when it can be located and exists: a named install that
    /// is not there fails the review; a default one only means nothing to compare with.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let options = zeroclaw_bundle::ReviewOptions::comparing_with(Some(dir.path()));
    /// assert!(options.install_named && options.install.as_deref() == Some(dir.path()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn comparing_with(install: Option<&Path>) -> ReviewOptions {
        ReviewOptions {
            // A default install that cannot even be located (no HOME) only means nothing to
            // compare with.
            install: crate::agent::install_root(install).ok(),
            install_named: install.is_some(),
            ..ReviewOptions::default()
        }
    }
}
