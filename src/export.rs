//! Capture and export: the one path from a source to a snapshot, and from an install to a
//! bundle. `capture_agent` plans the closure (`agent`), captures the workspace and skill trees
//! through the descriptor-verified reader (`capture`), renders `config.toml` and the manifest
//! from what was carried, and commits the whole bundle tree as one snapshot; `capture_dir`
//! captures any directory whole. Both record through one `commit` (snapshot record, catalog
//! entry, stat cache). An export (`ExportJob`) checks and claims its destination first, then
//! captures and publishes the snapshot (`publish::publish_snapshot`), so an export and a later
//! `checkout` of its snapshot write the same bytes.

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use zeroclaw_bundle_store::{
    escape_name, resolve_path, CaptureReport, ObjectId, Snapshot, SnapshotKind, SourceKey,
    StatCacheUpdate, Store, Tally, Tree, TreeEntry, WriteLock,
};

use crate::agent::{
    legacy_entry_travels, plan_export, BundleFilter, CaptureOutcome, ExportPlan, Install,
    Provenance, RenderedBundle, TreeSource, CONFIG_FILE, MANIFEST_FILE, MANIFEST_HEADER,
    SKILLS_DIR, WORKSPACE_DIR,
};
use crate::capture::{keep_everything, root, Capture, CaptureError, CaptureStats, Keep, Walked};
use crate::credentials::CredentialFinding;
use crate::progress::Progress;
use crate::publish::{
    check, check_replacement, publish_snapshot, Admitted, BundleMarker, DestClaim, PublishRequest,
    Published, Replace, Replaced,
};

/// What marks an agent bundle for `publish` (which knows nothing of agents): the manifest,
/// written last, and recognized by its header when `--force` replaces a directory.
pub const BUNDLE: BundleMarker = BundleMarker {
    file: MANIFEST_FILE,
    header: MANIFEST_HEADER,
};

/// An agent captured into the store.
pub struct AgentSnapshot {
    /// The snapshot id.
    pub id: ObjectId,
    /// Its record.
    pub snapshot: Snapshot,
    /// The rendered bundle files (manifest in structured form for the report).
    pub bundle: RenderedBundle,
    /// What the bundle grants an importing agent (`crate::agent::bundle_grants`: the same list
    /// review and import show).
    pub grants: Vec<crate::agent::Grant>,
    /// Source trees on the host (workspace, skill bundle roots), for overlap refusal.
    pub sources: Vec<PathBuf>,
    /// Skill directories carried, over all bundles.
    pub skills_carried: u64,
    /// Work done (hashed vs. reused from the stat cache).
    pub stats: CaptureStats,
    /// Paths scrubbed only by the credential-name rule, with the rule (also in the manifest's
    /// `required_secrets`).
    pub scrubbed_by_name: Vec<(String, &'static str)>,
    /// Values that look like credentials and travel as written: dotted config paths of the
    /// closure, then bundle file paths with their line. Never the values.
    pub credential_findings: Vec<CredentialFinding>,
    /// Workspace files ZeroClaw's templates describe as facts about the human or long-term
    /// memory (`USER.md`, `MEMORY.md`) that this bundle carries.
    pub personal_files: Vec<String>,
    /// Sections of the install's `config.toml` that ZeroClaw's loader skips as invalid (the
    /// export saw the install as ZeroClaw does, without them).
    pub degraded_sections: Vec<String>,
    /// ZeroClaw's strict loader's reason, when a section is skipped.
    pub degraded_reason: Option<String>,
    /// Keys of the exported entries ZeroClaw's schema does not know, left out of the bundle
    /// (dotted paths: a typo such as `providers.models.openai.main.base_urll`).
    pub unknown_keys: Vec<String>,
}

/// What the operator chose for one agent capture.
#[derive(Clone, Copy, Debug, Default)]
pub struct AgentCaptureOptions<'a> {
    /// A name for the snapshot (`snapshot --name`).
    pub name: Option<&'a str>,
    /// The zeroclaw version recorded in the manifest's provenance.
    pub zeroclaw_version: Option<&'a str>,
    /// `--exclude` patterns (bundle paths, globs).
    pub excludes: &'a [String],
}

/// Workspace files ZeroClaw's templates describe as personal: facts about the human
/// (`USER.md`) and the agent's long-term memory (`MEMORY.md`).
pub const PERSONAL_FILES: &[&str] = &["USER.md", "MEMORY.md"];

pub(crate) fn open_source(source: &TreeSource) -> Result<Option<OwnedFd>, root::RootError> {
    match source {
        TreeSource::Anchored { anchor, components } => root::open_anchored(anchor, components),
        TreeSource::Configured { path } => root::open_configured(path),
    }
}

/// The host trees an export of `plan` reads (its workspace and skill bundle roots).
fn source_trees(plan: &ExportPlan) -> Vec<PathBuf> {
    std::iter::once(plan.workspace.path())
        .chain(plan.legacy_workspace.iter().map(TreeSource::path))
        .chain(plan.skills.iter().map(|s| s.source.path()))
        .collect()
}

/// Loads the install at `install_dir` and plans the export of agent `alias`, without
/// touching the store (a bad install path creates nothing).
pub fn load_agent(install_dir: &Path, alias: &str) -> Result<(Install, ExportPlan)> {
    crate::agent::require_install(install_dir)?;
    let install = Install::load(install_dir)?;
    let plan = plan_export(&install, alias)?;
    Ok((install, plan))
}

/// Captures agent `plan.alias` of an install loaded with [`load_agent`] into the store as one
/// snapshot.
pub fn capture_loaded(
    store: &Store,
    install: &Install,
    plan: &ExportPlan,
    options: AgentCaptureOptions<'_>,
    progress: &dyn Progress,
) -> Result<AgentSnapshot> {
    let alias = plan.alias.as_str();
    let filter = BundleFilter::new(options.excludes)?;
    let keep = |path: &str| filter.keeps(path);
    let source = format!("agent {alias} at {}", install.root().display());
    let lock = store.write_lock()?;
    progress.begin("capturing", None);
    let mut capture = Capture::begin(
        store,
        &lock,
        SourceKey::Agent {
            install: install.root().to_path_buf(),
            alias: alias.to_string(),
        },
        progress,
    )?;
    let mut top = Vec::new();

    // `--exclude workspace` (or `skills/<alias>`) leaves a whole tree out: it is not opened.
    let workspace = capture_workspace(store, &mut capture, plan, &keep)?;
    let mut outcome = CaptureOutcome::default();
    if let Some(w) = workspace.filter(|w| w.files > 0) {
        top.push(w.entry(WORKSPACE_DIR.as_bytes().to_vec()));
        if let Some(doc) = plan.identity_document() {
            let found = resolve_path(
                &store.objects().reader(),
                &w.id,
                doc.as_bytes(),
                "workspace",
            );
            outcome.identity_document_carried = matches!(found, Ok(e) if e.kind.is_file());
        }
    }
    let (skills, skills_carried) = capture_skills(store, &mut capture, plan, &keep, &mut outcome)?;
    top.extend(skills);
    check_excludes_matched(&filter, alias)?;
    outcome.excluded = filter.dropped();
    let personal_files = personal_files(store, workspace.as_ref())?;

    let provenance = Provenance::for_export(options.zeroclaw_version, std::time::SystemTime::now());
    let bundle = plan
        .render(&outcome, &provenance)
        .with_context(|| format!("could not render the bundle of agent {alias}"))?;
    top.extend(rendered_entries(store, &bundle)?);
    let root = store.objects().write_tree(&Tree::from_entries(top)?)?;
    let stats = capture.stats();
    let (mut report, cache_update) = capture.finish();
    // The two rendered files are part of the bundle too: with their tally, a snapshot's file
    // and byte counts (report, `list`, `show`) are those of the whole bundle, the same numbers
    // a checkout writes.
    report.trees.push(Tally {
        label: format!("{CONFIG_FILE} + {MANIFEST_FILE}"),
        files: 2,
        bytes: (bundle.config_toml.len() + bundle.manifest_toml.len()) as u64,
        ..Tally::default()
    });
    // The credential scan reads the bundle's text files back from the store (its page cache,
    // just written) while the commit waits on the disk for its syncs: a cold first export of
    // the benchmark corpus spent about a tenth of its time on each, one after the other. A
    // failed scan fails the export after the commit, as a failed publish does: the snapshot
    // is whole either way.
    let (committed, scanned) = std::thread::scope(|scope| {
        let scan = scope.spawn(|| crate::credential_scan::scan_files(store, &root));
        let committed = commit(
            store,
            &lock,
            Origin {
                kind: SnapshotKind::AgentBundle,
                source,
                agent: Some(alias.to_string()),
                name: options.name.map(str::to_string),
            },
            root,
            report,
            cache_update,
            progress,
        );
        let scanned = scan
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (committed, scanned)
    });
    let (id, snapshot) = committed?;
    let mut credential_findings = plan.config_findings().to_vec();
    credential_findings.extend(scanned?);
    // What an importing operator is asked to accept, computed as review and import compute
    // it; the bundle was just rendered and validated by ZeroClaw, so it loads.
    let grants = crate::agent::bundle_grants(&bundle.manifest, &bundle.config_toml)?;
    Ok(AgentSnapshot {
        id,
        snapshot,
        grants,
        bundle,
        sources: source_trees(plan),
        skills_carried,
        stats,
        scrubbed_by_name: plan.scrubbed_by_name().to_vec(),
        credential_findings,
        personal_files,
        degraded_sections: plan.degraded_sections().to_vec(),
        degraded_reason: plan.degraded_reason().map(str::to_string),
        unknown_keys: plan.unknown_keys().to_vec(),
    })
}

/// Captures the agent's workspace, unless `keep` leaves it out, together with what a pre-v3
/// install still holds for it; `None` when there is neither.
fn capture_workspace(
    store: &Store,
    capture: &mut Capture<'_>,
    plan: &ExportPlan,
    keep: Keep<'_>,
) -> Result<Option<Walked>> {
    let alias = plan.alias.as_str();
    if !keep(WORKSPACE_DIR) {
        return Ok(None);
    }
    let opened = open_source(&plan.workspace)
        .with_context(|| format!("could not open the workspace of agent {alias}"))?;
    // A pre-v3 install ZeroClaw has not started since: its agent entries still sit in
    // `<install>/workspace`, where ZeroClaw's first load would move them from (each
    // top-level entry whose place in `agents/default/workspace` is free; it never clobbers).
    let legacy = match &plan.legacy_workspace {
        Some(source) => open_source(source)
            .with_context(|| format!("could not open the pre-v3 workspace of agent {alias}"))?,
        None => None,
    };
    let walk_legacy = |capture: &mut Capture, fd, taken: &HashSet<String>| {
        let keep_legacy = |path: &str| {
            let rel = path.strip_prefix("workspace/").unwrap_or("");
            let top = rel.split('/').next().unwrap_or(rel);
            keep(path) && (rel.is_empty() || (legacy_entry_travels(top) && !taken.contains(top)))
        };
        capture.walk(fd, WORKSPACE_DIR, &keep_legacy)
    };
    Ok(match (opened, legacy) {
        (Some(fd), None) => Some(capture.walk(fd, WORKSPACE_DIR, keep)?),
        (Some(fd), Some(legacy)) => {
            let moved = capture.walk(fd, WORKSPACE_DIR, keep)?;
            let moved_tree = store.objects().read_tree(&moved.id)?;
            let taken: HashSet<String> = moved_tree
                .entries()
                .iter()
                .map(|e| escape_name(&e.name))
                .collect();
            let left = walk_legacy(capture, legacy, &taken)?;
            let mut entries = moved_tree.entries().to_vec();
            entries.extend(
                store
                    .objects()
                    .read_tree(&left.id)?
                    .entries()
                    .iter()
                    .cloned(),
            );
            Some(Walked {
                id: store.objects().write_tree(&Tree::from_entries(entries)?)?,
                size: moved.size + left.size,
                files: moved.files + left.files,
            })
        }
        (None, Some(legacy)) => Some(walk_legacy(capture, legacy, &HashSet::new())?),
        (None, None) => None,
    })
}

/// Captures each skill bundle of the plan that `keep` does not leave out, noting in `outcome`
/// which were carried and which were missing; returns the `skills/` entry (none when nothing
/// was carried) and how many skill directories were carried.
fn capture_skills(
    store: &Store,
    capture: &mut Capture<'_>,
    plan: &ExportPlan,
    keep: Keep<'_>,
    outcome: &mut CaptureOutcome,
) -> Result<(Option<TreeEntry>, u64)> {
    let mut skill_entries = Vec::new();
    let mut skills_carried = 0;
    for skill in &plan.skills {
        let label = format!("{SKILLS_DIR}/{}", skill.alias);
        let fd = if keep(&label) {
            open_source(&skill.source)
                .with_context(|| format!("could not open skill bundle `{}`", skill.alias))?
        } else {
            None
        };
        let walked = match fd {
            Some(fd) => capture.walk_skill_bundle(fd, &label, &|n| skill.admits(n), keep)?,
            None => None,
        };
        match walked {
            Some(w) => {
                skills_carried += store.objects().read_tree(&w.id)?.entries().len() as u64;
                skill_entries.push(w.entry(skill.alias.as_bytes().to_vec()));
                outcome.carried_skill_bundles.push(skill.alias.clone());
            }
            None => outcome.missing_skill_bundles.push(skill.alias.clone()),
        }
    }
    if skill_entries.is_empty() {
        return Ok((None, skills_carried));
    }
    let size = skill_entries.iter().map(|e| e.size).sum();
    let id = store
        .objects()
        .write_tree(&Tree::from_entries(skill_entries)?)?;
    Ok((
        Some(TreeEntry::dir(SKILLS_DIR.as_bytes().to_vec(), size, id)),
        skills_carried,
    ))
}

/// Refuses an `--exclude` pattern that matched nothing: a misspelt one would let the file
/// travel.
fn check_excludes_matched(filter: &BundleFilter, alias: &str) -> Result<()> {
    let unmatched = filter.unmatched();
    if !unmatched.is_empty() {
        bail!(
            "--exclude '{}' matched nothing in the bundle of agent {alias}, so nothing was \
             written (a misspelt pattern would let the file travel); check the spelling: \
             patterns are bundle paths such as workspace/USER.md",
            unmatched.join("', '")
        );
    }
    Ok(())
}

/// The [`PERSONAL_FILES`] the captured workspace carries, as bundle paths.
fn personal_files(store: &Store, workspace: Option<&Walked>) -> Result<Vec<String>> {
    Ok(match workspace {
        Some(w) if w.files > 0 => {
            let tree = store.objects().read_tree(&w.id)?;
            PERSONAL_FILES
                .iter()
                .filter(|f| {
                    tree.entries()
                        .iter()
                        .any(|e| e.name == f.as_bytes() && e.kind.is_file())
                })
                .map(|f| format!("{WORKSPACE_DIR}/{f}"))
                .collect()
        }
        _ => Vec::new(),
    })
}

/// Writes the rendered `config.toml` and manifest to the store; returns their tree entries.
fn rendered_entries(store: &Store, bundle: &RenderedBundle) -> Result<Vec<TreeEntry>> {
    let mut entries = Vec::new();
    for (file, text) in [
        (CONFIG_FILE, &bundle.config_toml),
        (MANIFEST_FILE, &bundle.manifest_toml),
    ] {
        let id = store.objects().write_bytes(text.as_bytes())?;
        // Rendered here, not copied: 0644, as a plain write of them would leave them.
        entries.push(TreeEntry::file(
            file.as_bytes().to_vec(),
            0o644,
            text.len() as u64,
            id,
        ));
    }
    Ok(entries)
}

/// Where a snapshot came from; [`commit`] stamps the time and the host.
pub(crate) struct Origin {
    pub(crate) kind: SnapshotKind,
    pub(crate) source: String,
    pub(crate) agent: Option<String>,
    pub(crate) name: Option<String>,
}

/// The one commit of every capture (`capture_agent`, `capture_dir`): the snapshot record of
/// tree `root` (written, with everything it reaches, before this), then its catalog entry and
/// the capture's stat-cache changes. Cancelling `progress`'s token during the capture stops it
/// here at the latest: nothing is recorded.
pub(crate) fn commit(
    store: &Store,
    lock: &WriteLock,
    origin: Origin,
    root: ObjectId,
    report: CaptureReport,
    cache_update: StatCacheUpdate,
    progress: &dyn Progress,
) -> Result<(ObjectId, Snapshot)> {
    let snapshot = Snapshot {
        root,
        created_unix_ns: i128::from(crate::clock::now_ns()),
        host: crate::sys::hostname(),
        kind: origin.kind,
        source: origin.source,
        agent: origin.agent,
        name: origin.name,
        // Set from the catalog when the record is added: the latest snapshot of this source.
        parent: None,
        report,
    };
    progress
        .check_cancel()
        .map_err(|_| CaptureError::Interrupted)?;
    crate::hooks::seam("before-commit", &snapshot.source);
    store
        .catalog()
        .commit_snapshot_of_source(lock, snapshot, Some(cache_update))
        .context("could not record the snapshot")
}

/// A directory to capture (`snapshot --dir`), opened before the store is touched, so a
/// missing directory creates nothing.
pub struct SourceDir {
    fd: OwnedFd,
    source: String,
}

impl SourceDir {
    /// Opens `dir` (its root through the descriptor-verified reader) and describes it as the
    /// absolute path it came from: parent canonicalized, last component as given.
    pub fn open(dir: &Path) -> Result<SourceDir> {
        let source = describe_dir(dir);
        let fd = root::open_configured(dir)?
            .with_context(|| format!("{} does not exist", dir.display()))?;
        Ok(SourceDir { fd, source })
    }
}

/// A directory captured into the store.
pub struct DirSnapshot {
    /// The snapshot id.
    pub id: ObjectId,
    /// Its record.
    pub snapshot: Snapshot,
    /// Work done (hashed vs. reused from the stat cache).
    pub stats: CaptureStats,
}

/// Captures directory `dir` whole into the store as one snapshot named `name` (if given).
pub fn capture_dir(
    store: &Store,
    dir: SourceDir,
    name: Option<&str>,
    progress: &dyn Progress,
) -> Result<DirSnapshot> {
    let SourceDir { fd, source } = dir;
    let lock = store.write_lock()?;
    progress.begin("capturing", None);
    let mut capture = Capture::begin(store, &lock, SourceKey::Dir(source.clone()), progress)?;
    let walked = capture.walk(fd, ".", &keep_everything)?;
    let stats = capture.stats();
    let (report, cache_update) = capture.finish();
    let (id, snapshot) = commit(
        store,
        &lock,
        Origin {
            kind: SnapshotKind::Tree,
            source,
            agent: None,
            name: name.map(str::to_string),
        },
        walked.id,
        report,
        cache_update,
        progress,
    )?;
    Ok(DirSnapshot {
        id,
        snapshot,
        stats,
    })
}

/// The absolute path a snapshot came from: parent canonicalized, last component as given.
fn describe_dir(dir: &Path) -> String {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let resolved = match (abs.parent(), abs.file_name()) {
        (Some(p), Some(n)) => p
            .canonicalize()
            .map(|p| p.join(n))
            .unwrap_or_else(|_| abs.clone()),
        _ => abs.clone(),
    };
    resolved.to_string_lossy().into_owned()
}

/// An export with its install loaded, its destination checked and claimed: nothing has been
/// captured or written yet.
pub struct ExportJob {
    install: Install,
    plan: ExportPlan,
    out: Admitted,
    replaced: Option<Replaced>,
    _claim: DestClaim,
}

impl ExportJob {
    /// Loads agent `alias` of the install at `install_dir`, checks `out` (overlap, admission,
    /// the replace policy) and claims it, so a second export to `out` fails at once. `store`
    /// is the existing store, if any (never created here); `store_path` is where it is or will
    /// be (a destination that overlaps it is refused).
    pub fn prepare(
        store: Option<&Store>,
        store_path: &Path,
        install_dir: &Path,
        alias: &str,
        out: &Path,
        replace: Replace,
    ) -> Result<ExportJob> {
        let (install, plan) = load_agent(install_dir, alias)?;
        let sources = source_trees(&plan);
        let context = publish_context(alias, out);
        // Refuse a destination before capturing anything (SPEC §7: before anything is created).
        let admitted = check(&PublishRequest {
            dest: out,
            force: replace != Replace::Nothing,
            sources: &sources,
            store: Some(store_path),
            bundle: BUNDLE,
        })
        .with_context(&context)?;
        let claim = admitted.claim().with_context(&context)?;
        let replaced = check_replacement(store, &admitted, replace).with_context(&context)?;
        Ok(ExportJob {
            install,
            plan,
            out: admitted,
            replaced,
            _claim: claim,
        })
    }

    /// Captures the agent into `store`, then publishes its snapshot. When the publish fails,
    /// the snapshot is forgotten again, so `agent/<alias>` keeps naming the latest export that
    /// succeeded (its data goes at the next `gc`).
    pub fn run(
        self,
        store: &Store,
        options: AgentCaptureOptions<'_>,
        progress: &dyn Progress,
    ) -> Result<(AgentSnapshot, Published, Option<Replaced>)> {
        let alias = self.plan.alias.clone();
        let context = publish_context(&alias, self.out.given());
        let captured = capture_loaded(
            store,
            &self.install,
            &self.plan,
            AgentCaptureOptions {
                name: None,
                ..options
            },
            progress,
        )?;
        match publish_snapshot(store, &captured.id, &captured.snapshot, &self.out, progress)
            .with_context(&context)
        {
            Ok(published) => Ok((captured, published, self.replaced)),
            Err(e) => {
                let kept = match store.maintenance().forget(&captured.id) {
                    Ok(_) => String::new(),
                    Err(f) => format!(
                        " (and its snapshot {} could not be forgotten: {f}; \
                         `zeroclaw-bundle forget {}` removes it)",
                        captured.id.short(12),
                        captured.id.short(12)
                    ),
                };
                Err(e.context(format!(
                    "the export of agent {alias} failed; nothing was recorded{kept}"
                )))
            }
        }
    }
}

fn publish_context(alias: &str, out: &Path) -> impl Fn() -> String {
    let msg = format!(
        "could not publish the bundle of agent {alias} to {}",
        out.display()
    );
    move || msg.clone()
}
