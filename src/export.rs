//! Agent capture and export: the one path from an install to a bundle. `capture_agent` plans
//! the closure (`agent`), captures the workspace and skill trees through the descriptor-
//! verified reader (`capture`), renders `config.toml` and the manifest from what was carried,
//! and commits the whole bundle tree as one snapshot. `export` is that capture followed by a
//! publish of the snapshot (`publish`), so an export and a later `checkout` of its snapshot
//! write the same bytes.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use indicatif::ProgressBar;
use zeroclaw_bundle_store::{
    resolve_path, EntryKind, ObjectId, Snapshot, SnapshotKind, Store, Tree, TreeEntry,
};

use crate::agent::{
    plan_export, CaptureOutcome, ExportPlan, Install, Provenance, RenderedBundle, TreeSource,
    CONFIG_FILE, MANIFEST_FILE, SKILLS_DIR, WORKSPACE_DIR,
};
use crate::capture::{root, Capture, CaptureStats, TopFilter};
use crate::publish::{check_request, publish, record_destination, PublishRequest, Published};

/// An agent captured into the store.
pub struct AgentSnapshot {
    /// The snapshot id.
    pub id: ObjectId,
    /// Its record.
    pub snapshot: Snapshot,
    /// The rendered bundle files (manifest in structured form for the report).
    pub bundle: RenderedBundle,
    /// Source trees on the host (workspace, skill bundle roots), for overlap refusal.
    pub sources: Vec<PathBuf>,
    /// Skill directories carried, over all bundles.
    pub skills_carried: u64,
    /// Work done (hashed vs. reused from the stat cache).
    pub stats: CaptureStats,
}

/// Where the install is: `--install`, else `$ZEROCLAW_HOME`, else `~/.zeroclaw`.
pub fn install_root(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        return Ok(p.to_path_buf());
    }
    if let Some(h) = std::env::var_os("ZEROCLAW_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .context("no install location: pass --install DIR or set ZEROCLAW_HOME")?;
    Ok(PathBuf::from(home).join(".zeroclaw"))
}

fn open_source(source: &TreeSource) -> Result<Option<OwnedFd>, root::RootError> {
    match source {
        TreeSource::Anchored { anchor, components } => root::open_anchored(anchor, components),
        TreeSource::Configured { path } => root::open_configured(path),
    }
}

/// The host trees an export of `plan` reads (its workspace and skill bundle roots).
fn source_trees(plan: &ExportPlan) -> Vec<PathBuf> {
    std::iter::once(plan.workspace.path())
        .chain(plan.skills.iter().map(|s| s.source.path()))
        .collect()
}

/// Captures agent `alias` of the install at `install_dir` into the store as one snapshot.
pub fn capture_agent(
    store: &Store,
    install_dir: &Path,
    alias: &str,
    name: Option<String>,
    zeroclaw_version: Option<&str>,
    progress: ProgressBar,
) -> Result<AgentSnapshot> {
    let install = Install::load(install_dir)?;
    let plan = plan_export(&install, alias)?;
    capture_plan(store, &install, &plan, name, zeroclaw_version, progress)
}

fn capture_plan(
    store: &Store,
    install: &Install,
    plan: &ExportPlan,
    name: Option<String>,
    zeroclaw_version: Option<&str>,
    progress: ProgressBar,
) -> Result<AgentSnapshot> {
    let alias = plan.alias.as_str();
    let source = format!("agent {alias} at {}", install.root().display());
    let parent = store.catalog()?.latest_of_source(&source)?;
    let mut capture = Capture::begin(
        store,
        format!("agent:{}\0{alias}", install.root().display()),
        progress,
    )?;
    let mut top = Vec::new();

    let workspace = match open_source(&plan.workspace)
        .with_context(|| format!("could not open the workspace of agent {alias}"))?
    {
        Some(fd) => Some(capture.walk(fd, WORKSPACE_DIR, TopFilter::Workspace)?),
        None => None,
    };
    let mut outcome = CaptureOutcome::default();
    if let Some(w) = workspace.filter(|w| w.files > 0) {
        top.push(w.entry(WORKSPACE_DIR.as_bytes().to_vec()));
        if let Some(doc) = plan.identity_document() {
            let found = resolve_path(&store.reader(), &w.id, doc.as_bytes(), "workspace");
            outcome.identity_document_carried = matches!(found, Ok(e) if e.kind.is_file());
        }
    }

    let mut skill_entries = Vec::new();
    let mut skills_carried = 0;
    for skill in &plan.skills {
        let label = format!("{SKILLS_DIR}/{}", skill.alias);
        let fd = open_source(&skill.source)
            .with_context(|| format!("could not open skill bundle `{}`", skill.alias))?;
        let walked = match fd {
            Some(fd) => capture.walk_skill_bundle(fd, &label, &|n| skill.admits(n))?,
            None => None,
        };
        match walked {
            Some(w) => {
                skills_carried += store.read_tree(&w.id)?.entries().len() as u64;
                skill_entries.push(w.entry(skill.alias.as_bytes().to_vec()));
                outcome.carried_skill_bundles.push(skill.alias.clone());
            }
            None => outcome.missing_skill_bundles.push(skill.alias.clone()),
        }
    }
    if !skill_entries.is_empty() {
        let size = skill_entries.iter().map(|e| e.size).sum();
        let id = store.write_tree(&Tree::from_entries(skill_entries)?)?;
        top.push(TreeEntry {
            name: SKILLS_DIR.as_bytes().to_vec(),
            kind: EntryKind::Dir,
            size,
            id,
        });
    }

    let provenance = Provenance::for_export(zeroclaw_version, std::time::SystemTime::now());
    let bundle = plan
        .render(&outcome, &provenance)
        .with_context(|| format!("could not render the bundle of agent {alias}"))?;
    for (file, text) in [
        (CONFIG_FILE, &bundle.config_toml),
        (MANIFEST_FILE, &bundle.manifest_toml),
    ] {
        let id = store.objects().write_bytes(text.as_bytes())?;
        top.push(TreeEntry {
            name: file.as_bytes().to_vec(),
            kind: EntryKind::File,
            size: text.len() as u64,
            id,
        });
    }
    let root = store.write_tree(&Tree::from_entries(top)?)?;
    let stats = capture.stats();
    let (report, cache_update) = capture.finish();
    let snapshot = Snapshot {
        root,
        created_unix_ns: i128::from(crate::clock::now_ns()),
        host: crate::sys::hostname(),
        kind: SnapshotKind::AgentBundle,
        source,
        agent: Some(alias.to_string()),
        name,
        parent,
        report,
    };
    let id = store
        .commit_snapshot(&snapshot, Some(&cache_update))
        .context("could not record the snapshot")?;
    Ok(AgentSnapshot {
        id,
        snapshot,
        bundle,
        sources: source_trees(plan),
        skills_carried,
        stats,
    })
}

/// Captures the agent, then publishes its snapshot to `out`.
pub fn export(
    store: &Store,
    install_dir: &Path,
    alias: &str,
    zeroclaw_version: Option<&str>,
    out: &Path,
    force: bool,
    progress: ProgressBar,
) -> Result<(AgentSnapshot, Published)> {
    let install = Install::load(install_dir)?;
    let plan = plan_export(&install, alias)?;
    let sources = source_trees(&plan);
    let context = || {
        format!(
            "could not publish the bundle of agent {alias} to {}",
            out.display()
        )
    };
    // Refuse a destination before capturing anything (SPEC §7: before anything is created).
    let request = PublishRequest {
        dest: out,
        force,
        sources: &sources,
        store: Some(store.root()),
        reuse: None,
    };
    check_request(&request).with_context(context)?;
    let captured = capture_plan(store, &install, &plan, None, zeroclaw_version, progress)?;
    let published =
        publish_snapshot(store, &captured.snapshot.root, &request).with_context(context)?;
    Ok((captured, published))
}

/// Publishes tree `root` as `request` says, reusing what the previous publish to the same
/// destination left there (hard links instead of copies for unchanged files), and records
/// what this one leaves for the next. The record is only an optimisation: failing to read
/// or write it never fails the publish.
pub fn publish_snapshot(
    store: &Store,
    root: &ObjectId,
    request: &PublishRequest<'_>,
) -> Result<Published> {
    let resolved = check_request(request)?;
    let key = format!("dest:{}", resolved.display());
    let previous = store
        .catalog()
        .and_then(|c| c.load_dest_cache(&key))
        .ok()
        .flatten();
    let reader = store.reader();
    let published = publish(
        &reader,
        root,
        &PublishRequest {
            reuse: previous.as_ref(),
            ..*request
        },
    )?;
    if let Ok(record) = record_destination(&reader, root, &published.dest) {
        let _ = store
            .catalog()
            .and_then(|c| c.store_dest_cache(&key, &record));
    }
    Ok(published)
}
