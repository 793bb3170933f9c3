//! The agent verbs as a client runs them: `export` and `snapshot` checked before any store is
//! opened or created ([`PreparedExport`], [`PreparedAgentSnapshot`], [`PreparedDirSnapshot`]:
//! a typo in an alias, an install or a destination creates nothing), the store a `review`
//! reads in ([`Bundles::open_for_source`]), the install an `import` writes into
//! ([`Bundles::import_install`]), and what these verbs report, as data: `Serialize` is the
//! `--json` document (README, "JSON output"), `render` the text an operator reads.
//!
//! Which verbs may create a store: `export` and `snapshot` (they add to it), `review` of a
//! directory or a pack (it adds the snapshot it reviews), `import` (its source becomes a
//! snapshot); a review of a snapshot or a remote ref needs the store that holds it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use zeroclaw_bundle_store::{escape_message, escape_name, escape_text, ObjectId, Skipped, Tally};

use super::json::{host_path, host_path_opt};
use super::{
    AgentOptions, AgentSnapshot, Bundles, CaptureStats, DirSnapshot, Error, Exported, ImportPlan,
    Imported, Published, Replace, Replaced, Result, ReviewOptions, Verb,
};
use crate::agent::{shown_detail, Dropped, ExportPlan, Grant, Install};
use crate::export::{AgentCaptureOptions, ExportJob, SourceDir};
use crate::import::{Action, Kind, Replacing, SecretPlan};
use crate::words::{count, human_bytes};

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
    bundles.store.catalog().ok()?.name_target(name).ok()?
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

// ---- What an agent capture reports ----

/// A capability grant in a report: its detail with credential-looking words named, not shown.
#[derive(Serialize)]
struct GrantDoc<'a> {
    kind: crate::agent::GrantKind,
    path: &'a str,
    detail: String,
    rule: bool,
}

impl<'a> GrantDoc<'a> {
    fn of(g: &'a Grant) -> GrantDoc<'a> {
        GrantDoc {
            kind: g.kind,
            path: &g.path,
            detail: shown_detail(&g.detail),
            rule: g.rule,
        }
    }
}

#[derive(Serialize)]
struct ScrubbedDoc<'a> {
    path: &'a str,
    rule: &'a str,
}

#[derive(Serialize)]
struct FindingDoc<'a> {
    location: &'a str,
    reason: &'static str,
}

/// The `--json` document of `export` and `snapshot <ALIAS>` (the destination fields are
/// `null` for a snapshot).
#[derive(Serialize)]
struct AgentDoc<'a> {
    snapshot: &'a ObjectId,
    agent: &'a str,
    #[serde(serialize_with = "host_path_opt")]
    destination: Option<&'a Path>,
    reused_files: Option<u64>,
    replaced: Option<&'a Replaced>,
    files: u64,
    bytes: u64,
    skills_carried: u64,
    skill_bundles: &'a [String],
    tallies: &'a [Tally],
    skipped: &'a [Skipped],
    risk_flags: Vec<GrantDoc<'a>>,
    required_secrets: &'a [String],
    scrubbed_by_name: Vec<ScrubbedDoc<'a>>,
    credential_looking_values: Vec<FindingDoc<'a>>,
    personal_files: &'a [String],
    skipped_config_sections: &'a [String],
    skipped_config_reason: Option<&'a str>,
    unknown_keys: &'a [String],
    set_secrets: Vec<String>,
    dropped: &'a [Dropped],
    work: &'a CaptureStats,
}

impl<'a> AgentDoc<'a> {
    fn of(c: &'a AgentSnapshot, published: Option<(&'a Published, Option<&'a Replaced>)>) -> Self {
        let m = &c.bundle.manifest;
        AgentDoc {
            snapshot: &c.id,
            agent: &m.root_agent,
            destination: published.map(|(p, _)| p.dest.as_path()),
            reused_files: published.map(|(p, _)| p.reused),
            replaced: published.and_then(|(_, r)| r),
            files: c.snapshot.files(),
            bytes: c.snapshot.bytes(),
            skills_carried: c.skills_carried,
            skill_bundles: &m.skill_bundles,
            tallies: &c.snapshot.report.trees,
            skipped: &c.snapshot.report.skipped,
            risk_flags: c.grants.iter().map(GrantDoc::of).collect(),
            required_secrets: &m.required_secrets,
            scrubbed_by_name: c
                .scrubbed_by_name
                .iter()
                .map(|(path, rule)| ScrubbedDoc { path, rule })
                .collect(),
            credential_looking_values: c
                .credential_findings
                .iter()
                .map(|f| FindingDoc {
                    location: &f.location,
                    reason: f.reason.describe(),
                })
                .collect(),
            personal_files: &c.personal_files,
            skipped_config_sections: &c.degraded_sections,
            skipped_config_reason: c.degraded_reason.as_deref(),
            unknown_keys: &c.unknown_keys,
            set_secrets: set_secrets(&m.required_secrets),
            dropped: &m.dropped,
            work: &c.stats,
        }
    }
}

fn set_secrets<S: AsRef<str>>(paths: impl IntoIterator<Item = S>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| format!("zeroclaw config set {}", p.as_ref()))
        .collect()
}

/// The `--json` document of `snapshot <ALIAS>` (README, "JSON output").
impl Serialize for AgentSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        AgentDoc::of(self, None).serialize(s)
    }
}

/// The `--json` document of `export` (README, "JSON output").
impl Serialize for Exported {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        AgentDoc::of(
            &self.snapshot,
            Some((&self.published, self.replaced.as_ref())),
        )
        .serialize(s)
    }
}

impl AgentSnapshot {
    /// What `snapshot <ALIAS>` prints before the snapshot id: what the capture carried, what
    /// it asks of an importing operator, what was scrubbed and what could not travel; with
    /// `verbose`, the tallies and the work done too.
    pub fn render(&self, verbose: bool) -> String {
        agent_text(self, None, verbose)
    }
}

impl Exported {
    /// What `export` prints before the snapshot id ([`AgentSnapshot::render`], then where the
    /// bundle was published and what it replaced).
    ///
    /// See [`PreparedExport`] for an example.
    pub fn render(&self, verbose: bool) -> String {
        agent_text(
            &self.snapshot,
            Some((&self.published, self.replaced.as_ref())),
            verbose,
        )
    }
}

impl CaptureStats {
    /// The work a capture did, as one line (`capture: 3 files read and hashed (...), ...`).
    ///
    /// ```
    /// let line = zeroclaw_bundle::CaptureStats::default().describe();
    /// assert!(line.starts_with("capture: 0 files read and hashed"));
    /// ```
    pub fn describe(&self) -> String {
        format!(
            "capture: {} read and hashed ({}), {} unchanged since the last capture (not read)",
            count(self.hashed_files, "file"),
            human_bytes(self.hashed_bytes),
            count(self.cached_files, "file")
        )
    }
}

/// The non-zero skip counts of a capture's tally as words (`1 symlink, 2 hard links`), as the
/// reports of `export`, `snapshot` and `show` print them.
///
/// ```
/// let tally = zeroclaw_bundle_store::Tally { symlinks: 1, hard_links: 2, ..Default::default() };
/// assert_eq!(zeroclaw_bundle::skipped_counts(&tally), "1 symlink, 2 hard links");
/// ```
pub fn skipped_counts(t: &Tally) -> String {
    [
        (t.symlinks, "symlink"),
        (t.special, "special file"),
        (t.hard_links, "hard link"),
        (t.replaced, "entry replaced while reading"),
        (t.store, "the store itself"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| match (*n, *what) {
        (n, "entry replaced while reading") if n != 1 => {
            format!("{n} entries replaced while reading")
        }
        (n, "the store itself") if n != 1 => format!("the store itself ({n} times)"),
        (_, "the store itself") => "the store itself".to_string(),
        (n, what) => count(n, what),
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// The text report of an agent capture (and its publish, for an export).
fn agent_text(
    c: &AgentSnapshot,
    published: Option<(&Published, Option<&Replaced>)>,
    verbose: bool,
) -> String {
    let replaced = published.and_then(|(_, r)| r);
    let published = published.map(|(p, _)| p);
    let m = &c.bundle.manifest;
    let mut out = match published {
        Some(p) => format!(
            "Exported agent `{}` to {}\n",
            escape_text(&m.root_agent),
            p.dest.display()
        ),
        None => format!(
            "Captured agent `{}` into the store\n",
            escape_text(&m.root_agent)
        ),
    };
    out += &format!(
        "  {}, {} (the whole bundle: workspace, skills, config.toml and the manifest)\n",
        count(c.snapshot.files(), "file"),
        human_bytes(c.snapshot.bytes()),
    );
    out += &format!(
        "  {} from {}\n",
        count(c.skills_carried, "skill"),
        count(m.skill_bundles.len() as u64, "skill bundle"),
    );
    for t in &c.snapshot.report.trees {
        if t.skipped() > 0 {
            out += &format!("  skipped in {}: {}\n", t.label, skipped_counts(t));
        }
    }
    if verbose {
        for t in &c.snapshot.report.trees {
            out += &format!(
                "  {}: {}, {}\n",
                t.label,
                count(t.files, "file"),
                human_bytes(t.bytes)
            );
        }
        out += &format!("  {}\n", c.stats.describe());
    }
    if !c.grants.is_empty() {
        out += "\nCapabilities an importing operator is asked to grant:\n";
        out += &grant_lines(&c.grants);
    }
    if !c.degraded_sections.is_empty() {
        out += "\nConfig sections ZeroClaw's loader skips as invalid (not exported, as ZeroClaw would not load them):\n";
        for section in &c.degraded_sections {
            out += &format!("  - {}\n", escape_text(section));
        }
        if let Some(reason) = &c.degraded_reason {
            out += &format!("  ZeroClaw's strict loader says: {}\n", escape_text(reason));
        }
    }
    if !c.unknown_keys.is_empty() {
        out += "\nKeys ZeroClaw's schema does not know (ZeroClaw ignores them, so they were left out; a typo?):\n";
        for key in &c.unknown_keys {
            out += &format!("  - {}\n", escape_text(key));
        }
    }
    if !m.required_secrets.is_empty() {
        out += "\nCredentials scrubbed (fill them on the target):\n";
        for p in &m.required_secrets {
            out += &format!("  zeroclaw config set {}\n", escape_text(p));
        }
        for (path, rule) in &c.scrubbed_by_name {
            out += &format!(
                "  note: {} is not a secret field in ZeroClaw's schema; it was scrubbed because of its name ({rule})\n",
                escape_text(path)
            );
        }
    }
    if !c.credential_findings.is_empty() {
        out += "\nValues that look like credentials (they travel as written):\n";
        for f in &c.credential_findings {
            out += &format!("  - {}: {}\n", f.location, f.reason.describe());
        }
    }
    if !c.personal_files.is_empty() {
        out += "\nPersonal files that travel (facts about you, long-term memory; leave one out with --exclude):\n";
        for f in &c.personal_files {
            out += &format!("  - {f}\n");
        }
    }
    if !m.dropped.is_empty() {
        out += "\nCould not travel:\n";
        for d in &m.dropped {
            out += &format!(
                "  - {} ({}): {}\n",
                escape_text(&d.path),
                d.reason.as_str(),
                escape_text(&d.detail)
            );
        }
    }
    // The same words as the bundle's own headers: one story about secrets.
    out += &format!("\nNote: {}\n", crate::agent::secret_story());
    if let Some(p) = published {
        out += &format!(
            "Bundle: {} ({} written, {}{})\n",
            p.dest.display(),
            count(p.files, "file"),
            human_bytes(p.bytes),
            if p.reused > 0 {
                format!(
                    "; {} of them linked unchanged from the previous bundle",
                    p.reused
                )
            } else {
                String::new()
            }
        );
        if let Some(r) = replaced {
            out += &format!("Note: {}\n", r.describe(&p.dest));
        }
    }
    out
}

/// One line per grant (`  - kind at path: detail`), credential-looking words named.
fn grant_lines(grants: &[Grant]) -> String {
    grants
        .iter()
        .map(|f| {
            format!(
                "  - {} at {}: {}\n",
                f.kind.as_str(),
                escape_text(&f.path),
                escape_text(&shown_detail(&f.detail))
            )
        })
        .collect()
}

/// The `--json` document of `snapshot --dir` (README, "JSON output").
impl Serialize for DirSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct DirDoc<'a> {
            snapshot: &'a ObjectId,
            root: &'a ObjectId,
            files: u64,
            bytes: u64,
            report: &'a zeroclaw_bundle_store::CaptureReport,
            work: &'a CaptureStats,
        }
        DirDoc {
            snapshot: &self.id,
            root: &self.snapshot.root,
            files: self.snapshot.files(),
            bytes: self.snapshot.bytes(),
            report: &self.snapshot.report,
            work: &self.stats,
        }
        .serialize(s)
    }
}

// ---- What an import reports ----

/// What `import` reports: its plan, whether it was a dry run, and, once applied, what it
/// did. Its serialization is the `import --json` document (README, "JSON output"); its
/// [`ImportReport::render`] the text `import` prints before the content id.
///
/// ```
/// use zeroclaw_bundle::{Bundles, ImportReport, ImportRequest, Replace, Silent};
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
/// // A dry run: the whole plan, nothing written.
/// let dry = ImportReport { plan: &plan, dry_run: true, imported: None };
/// assert!(dry.render().ends_with("Dry run: nothing was written.\n"));
/// assert_eq!(serde_json::to_value(&dry)?["dry_run"], true);
/// assert!(serde_json::to_value(&plan)?.get("dry_run").is_none());
/// // Applied: the plan and what was written.
/// let imported = bundles.import(&plan, &[], &Silent)?;
/// let done = ImportReport { plan: &plan, dry_run: false, imported: Some(&imported) };
/// assert!(done.render().contains("Imported agent coder into "));
/// assert_eq!(serde_json::to_value(&done)?["agent"], "coder");
/// assert_eq!(serde_json::to_value(&imported)?["written"], true);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ImportReport<'a> {
    /// The plan (an up-to-date one writes nothing: [`ImportPlan::up_to_date`]).
    pub plan: &'a ImportPlan,
    /// Whether nothing was to be written (`--dry-run`).
    pub dry_run: bool,
    /// What the applied import did (`None` for a dry run or an up-to-date plan).
    pub imported: Option<&'a Imported>,
}

#[derive(Serialize)]
struct EntryDoc<'a> {
    kind: &'static str,
    bundle: &'a str,
    local: &'a str,
    path: Option<String>,
    action: Action,
    why: Option<&'a str>,
}

#[derive(Serialize)]
struct TreeDoc<'a> {
    bundle_path: &'a str,
    #[serde(serialize_with = "host_path")]
    destination: &'a Path,
    files: u64,
    bytes: u64,
    replaces: bool,
    replace_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct UpToDateDoc<'a> {
    agent: &'a str,
    imported_at: &'a str,
    snapshot: &'a ObjectId,
}

#[derive(Serialize)]
struct AppliedDoc<'a> {
    secrets_filled: &'a [String],
    secrets_encrypted: bool,
    config_mode: String,
    #[serde(serialize_with = "host_path")]
    provenance: &'a Path,
}

#[derive(Serialize)]
struct ImportDoc<'a> {
    snapshot: &'a ObjectId,
    root: &'a ObjectId,
    source: &'a str,
    source_kind: &'a crate::import::SourceKind,
    agent: &'a str,
    bundle_agent: &'a str,
    #[serde(serialize_with = "host_path")]
    install: &'a Path,
    #[serde(serialize_with = "host_path")]
    config: &'a Path,
    #[serde(serialize_with = "host_path")]
    config_file: &'a Path,
    #[serde(serialize_with = "host_path")]
    backup: &'a Path,
    entries: Vec<EntryDoc<'a>>,
    notes: &'a [String],
    trees: Vec<TreeDoc<'a>>,
    config_diff: String,
    risk_flags: Vec<GrantDoc<'a>>,
    required_secrets: Vec<&'a str>,
    /// The plan's secrets; once applied, those still to fill.
    set_secrets: Vec<String>,
    dropped: &'a [Dropped],
    up_to_date: Option<UpToDateDoc<'a>>,
    /// Absent from a plan's own document (it is not yet a report of `import`).
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<bool>,
    #[serde(flatten)]
    applied: Option<AppliedDoc<'a>>,
}

impl Serialize for ImportReport<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ImportDoc::of(self.plan, Some(self.dry_run), self.imported).serialize(s)
    }
}

/// The plan alone: the `import --json` document without `dry_run` and what an applied import
/// adds.
impl Serialize for ImportPlan {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ImportDoc::of(self, None, None).serialize(s)
    }
}

impl<'a> ImportDoc<'a> {
    fn of(plan: &'a ImportPlan, dry_run: Option<bool>, imported: Option<&'a Imported>) -> Self {
        let left: &[SecretPlan] = match imported {
            Some(done) => &done.secrets_left,
            None => &plan.secrets,
        };
        ImportDoc {
            snapshot: &plan.snapshot,
            root: &plan.content_id,
            source: &plan.source,
            source_kind: &plan.source_kind,
            agent: &plan.alias,
            bundle_agent: &plan.bundle_alias,
            install: &plan.install,
            config: &plan.config_path,
            config_file: &plan.config_target,
            backup: &plan.backup,
            entries: plan
                .decisions
                .iter()
                .map(|d| EntryDoc {
                    kind: d.kind.word(),
                    bundle: &d.bundle,
                    local: &d.local,
                    path: (d.action != Action::LeftOut).then(|| d.kind.path_of(&d.local)),
                    action: d.action,
                    why: d.why.as_deref(),
                })
                .collect(),
            notes: &plan.notes,
            trees: plan
                .trees
                .iter()
                .map(|t| TreeDoc {
                    bundle_path: &t.bundle_path,
                    destination: &t.dest,
                    files: t.files,
                    bytes: t.bytes,
                    replaces: t.replaces.is_some(),
                    replace_reason: t.replaces.map(Replacing::word),
                })
                .collect(),
            config_diff: plan.config_diff(),
            risk_flags: plan.grants.iter().map(GrantDoc::of).collect(),
            required_secrets: plan.secrets.iter().map(|s| s.path.as_str()).collect(),
            set_secrets: set_secrets(left.iter().map(|s| &s.path)),
            dropped: &plan.dropped,
            up_to_date: plan.up_to_date.as_ref().map(|d| UpToDateDoc {
                agent: &d.alias,
                imported_at: &d.imported_at,
                snapshot: &d.snapshot,
            }),
            dry_run,
            applied: imported.map(AppliedDoc::of),
        }
    }
}

impl<'a> AppliedDoc<'a> {
    fn of(done: &'a Imported) -> Self {
        AppliedDoc {
            secrets_filled: &done.secrets_filled,
            secrets_encrypted: done.secrets_encrypted,
            config_mode: format!("{:04o}", done.config_mode),
            provenance: &done.provenance,
        }
    }
}

/// What an applied import did, alone: the agent and content id, where the previous
/// `config.toml` is kept, the secrets filled and those still to fill (`set_secrets`), and
/// whether anything was written. (`import --json` reports it with its plan: [`ImportReport`].)
impl Serialize for Imported {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ImportedDoc<'a> {
            agent: &'a str,
            root: &'a ObjectId,
            #[serde(serialize_with = "host_path")]
            backup: &'a Path,
            set_secrets: Vec<String>,
            written: bool,
            #[serde(flatten)]
            applied: AppliedDoc<'a>,
        }
        ImportedDoc {
            agent: &self.alias,
            root: &self.content_id,
            backup: &self.backup,
            set_secrets: set_secrets(self.secrets_left.iter().map(|s| &s.path)),
            written: self.written,
            applied: AppliedDoc::of(self),
        }
        .serialize(s)
    }
}

impl ImportReport<'_> {
    /// The text `import` prints before the content id: for an up-to-date plan, that nothing
    /// was written; for a dry run, the whole plan (entries and their fates, files, the config
    /// diff with every secret masked, grants, credentials to fill); once applied, the plan
    /// and what was written.
    pub fn render(&self) -> String {
        let plan = self.plan;
        if let Some(done) = &plan.up_to_date {
            return format!(
                "Up to date: agent {} in {} was imported from this content ({}) at {}; \
                 nothing was written\n",
                escape_text(&done.alias),
                plan.install.display(),
                plan.content_id.short(16),
                done.imported_at
            );
        }
        match self.imported {
            Some(done) => render_done(plan, done),
            None => render_plan(plan, self.dry_run),
        }
    }
}

impl ImportPlan {
    /// What a terminal is shown after the review of the source, before it is asked to
    /// confirm: what the import does with what was reviewed.
    pub fn summary(&self) -> String {
        format!(
            "\nImporting agent {} from {} as {} into {}\n",
            escape_text(&self.bundle_alias),
            escape_text(&self.source),
            escape_text(&self.alias),
            self.install.display()
        )
    }

    /// Where a secret typed for this import is stored, in words for the prompt that asks for
    /// it: encrypted with the install's key, or (`secrets.encrypt = false`) as plain text in
    /// `config.toml`, with who can read that file.
    pub fn secret_storage(&self) -> Result<String> {
        if self.secrets_encrypted() {
            return Ok("typed input is hidden and stored encrypted with the install's key".into());
        }
        // The mode the import keeps (it writes config.toml with the present file's bits).
        let mode = std::fs::metadata(&self.config_path)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
            .map_err(|e| {
                Error::new(
                    Verb::Import,
                    self.install.display().to_string(),
                    anyhow::Error::new(e)
                        .context(format!("could not read {}", self.config_path.display())),
                )
            })?;
        Ok(format!(
            "typed input is hidden, but this install sets secrets.encrypt = false: a value \
             is stored as plain text in {}, {}",
            self.config_path.display(),
            who_reads(mode)
        ))
    }
}

fn secrets_text(secrets: &[SecretPlan]) -> String {
    if secrets.is_empty() {
        return String::new();
    }
    let mut out = "Credentials to fill (the bundle carries none):\n".to_string();
    for s in secrets {
        out += &format!("  zeroclaw config set {}\n", escape_text(&s.path));
    }
    out
}

fn action_word(a: Action) -> &'static str {
    match a {
        Action::Add => "add",
        Action::Namespace => "namespace",
        Action::Reuse => "reuse",
        Action::Map => "map",
        Action::LeftOut => "left out",
    }
}

/// The whole plan as text (`--dry-run` adds the config diff and the credentials to fill).
fn render_plan(plan: &ImportPlan, dry_run: bool) -> String {
    let mut out = String::new();
    out += &format!(
        "Import of {} (content id {}) into {}\n",
        escape_text(&plan.source),
        plan.content_id.short(16),
        plan.install.display()
    );
    out += &format!(
        "  agent {} -> {}\n",
        escape_text(&plan.bundle_alias),
        escape_text(&plan.alias)
    );
    out += "Config entries:\n";
    for d in &plan.decisions {
        let line = match d.action {
            Action::Add => d.kind.path_of(&d.local),
            Action::Namespace => format!(
                "{} -> {} ({})",
                d.kind.path_of(&d.bundle),
                d.local,
                match &d.why {
                    _ if d.kind == Kind::Agent => "an agent of that name exists",
                    Some(why) => why.as_str(),
                    None => "a different local entry has that name",
                }
            ),
            Action::Reuse => format!("{} (an identical local entry)", d.kind.path_of(&d.local)),
            Action::Map => format!(
                "{} -> {} (--map)",
                d.kind.path_of(&d.bundle),
                d.kind.path_of(&d.local)
            ),
            Action::LeftOut => format!(
                "{} ({})",
                d.kind.path_of(&d.bundle),
                d.why
                    .as_deref()
                    .unwrap_or("nothing the agent reaches references it")
            ),
        };
        out += &format!("  {:<9} {}\n", action_word(d.action), escape_text(&line));
    }
    for n in &plan.notes {
        out += &format!("  note: {}\n", escape_text(n));
    }
    out += "Files:\n";
    if plan.trees.is_empty() {
        out += "  none\n";
    }
    for t in &plan.trees {
        out += &format!(
            "  {} -> {} ({}, {}){}\n",
            escape_text(&t.bundle_path),
            escape_name(t.dest.as_os_str().as_encoded_bytes()),
            count(t.files, "file"),
            human_bytes(t.bytes),
            match t.replaces {
                Some(Replacing::EarlierImport) => {
                    " REPLACES the directory there (--force: it holds this tree already)"
                }
                Some(Replacing::Named) => {
                    " REPLACES the directory there and deletes what it holds (--replace)"
                }
                None => "",
            }
        );
    }
    let through = if plan.config_target != plan.config_path {
        format!(
            ", a symlink: written through it to {}",
            plan.config_target.display()
        )
    } else {
        String::new()
    };
    out += &format!(
        "Config: {}{through} (written last; the previous one kept as {})\n",
        plan.config_path.display(),
        plan.backup.display()
    );
    if dry_run {
        // Escaped as `diff -p` escapes a patch: a bidi override or a zero-width character in a
        // value reaches the terminal as `\u{202e}`, never raw (a CR before a line break is
        // the file's line ending, not a character to show).
        out += &escape_message(&plan.config_diff().replace("\r\n", "\n"));
    }
    if plan.grants.is_empty() {
        out += "Capabilities granted: none\n";
    } else {
        out += "Capabilities granted:\n";
        out += &grant_lines(&plan.grants);
    }
    if dry_run {
        out += &secrets_text(&plan.secrets);
    }
    if !plan.dropped.is_empty() {
        out += "Did not travel (from the bundle's manifest):\n";
        for d in &plan.dropped {
            out += &format!("  - {} ({})\n", escape_text(&d.path), d.reason.as_str());
        }
    }
    if dry_run {
        out += "Dry run: nothing was written.\n";
    }
    out
}

fn render_done(plan: &ImportPlan, done: &Imported) -> String {
    let mut out = render_plan(plan, false);
    out += &format!(
        "Imported agent {} into {}; the previous config.toml is {}\n",
        escape_text(&done.alias),
        plan.install.display(),
        done.backup.display()
    );
    if !done.secrets_filled.is_empty() {
        let filled = done
            .secrets_filled
            .iter()
            .map(|s| escape_text(s))
            .collect::<Vec<_>>()
            .join(", ");
        out += &if done.secrets_encrypted {
            format!("Stored encrypted: {filled}\n")
        } else {
            format!(
                "Stored as plain text (this install sets secrets.encrypt = false): {filled}, in \
                 {}, {}\n",
                plan.config_path.display(),
                who_reads(done.config_mode)
            )
        };
    }
    out += &secrets_text(&done.secrets_left);
    out
}

/// Who can read a file of permission bits `mode`, for a secret stored in it as plain text.
fn who_reads(mode: u32) -> String {
    let who = if mode & 0o004 != 0 {
        "every user of this machine can read it"
    } else if mode & 0o040 != 0 {
        "its owner and its group can read it"
    } else {
        "only its owner can read it"
    };
    format!("mode {mode:04o}: {who}")
}
