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
    plan_export, BundleFilter, CaptureOutcome, ExportPlan, Install, Provenance, RenderedBundle,
    TreeSource, CONFIG_FILE, MANIFEST_FILE, SKILLS_DIR, WORKSPACE_DIR,
};
use crate::capture::{root, Capture, CaptureStats};
use crate::credentials::CredentialFinding;
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
    /// Paths scrubbed only by the credential-name rule, with the rule (also in the manifest's
    /// `required_secrets`).
    pub scrubbed_by_name: Vec<(String, &'static str)>,
    /// Values that look like credentials and travel as written: dotted config paths of the
    /// closure, then bundle file paths with their line. Never the values.
    pub credential_findings: Vec<CredentialFinding>,
    /// Workspace files ZeroClaw's templates describe as facts about the human or long-term
    /// memory (`USER.md`, `MEMORY.md`) that this bundle carries.
    pub personal_files: Vec<String>,
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

/// Carried files larger than this are not scanned for credential-looking values.
const SCAN_LIMIT: u64 = 1 << 20;

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
    options: AgentCaptureOptions<'_>,
    progress: ProgressBar,
) -> Result<AgentSnapshot> {
    let install = Install::load(install_dir)?;
    let plan = plan_export(&install, alias)?;
    let filter = BundleFilter::new(options.excludes)?;
    capture_plan(store, &install, &plan, options, &filter, progress)
}

fn capture_plan(
    store: &Store,
    install: &Install,
    plan: &ExportPlan,
    options: AgentCaptureOptions<'_>,
    filter: &BundleFilter,
    progress: ProgressBar,
) -> Result<AgentSnapshot> {
    let alias = plan.alias.as_str();
    let keep = |path: &str| filter.keeps(path);
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
        Some(fd) => Some(capture.walk(fd, WORKSPACE_DIR, &keep)?),
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
            Some(fd) => capture.walk_skill_bundle(fd, &label, &|n| skill.admits(n), &keep)?,
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

    let unmatched = filter.unmatched();
    if !unmatched.is_empty() {
        anyhow::bail!(
            "--exclude '{}' matched nothing in the bundle of agent {alias}, so nothing was \
             written (a misspelt pattern would let the file travel); check the spelling: \
             patterns are bundle paths such as workspace/USER.md",
            unmatched.join("', '")
        );
    }
    outcome.excluded = filter.dropped();
    let personal_files = match &workspace {
        Some(w) if w.files > 0 => {
            let tree = store.read_tree(&w.id)?;
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
    };

    let provenance = Provenance::for_export(options.zeroclaw_version, std::time::SystemTime::now());
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
    let mut credential_findings = plan.config_findings().to_vec();
    credential_findings.extend(scan_files(store, &root)?);
    let stats = capture.stats();
    let (report, cache_update) = capture.finish();
    let snapshot = Snapshot {
        root,
        created_unix_ns: i128::from(crate::clock::now_ns()),
        host: crate::sys::hostname(),
        kind: SnapshotKind::AgentBundle,
        source,
        agent: Some(alias.to_string()),
        name: options.name.map(str::to_string),
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
        scrubbed_by_name: plan.scrubbed_by_name().to_vec(),
        credential_findings,
        personal_files,
    })
}

/// Scans the carried text files of a bundle tree (up to [`SCAN_LIMIT`] each; a file with a NUL
/// in its first 8 KiB is binary and skipped) for credential-looking values, line by line. The
/// two bundle files are skipped: the closure was scanned by dotted path when planning.
fn scan_files(store: &Store, root: &ObjectId) -> Result<Vec<CredentialFinding>> {
    let mut findings = Vec::new();
    let mut stack = vec![(String::new(), *root)];
    while let Some((prefix, id)) = stack.pop() {
        let tree = store.read_tree(&id)?;
        for entry in tree.entries() {
            let name = zeroclaw_bundle_store::escape_name(&entry.name);
            let path = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            match entry.kind {
                EntryKind::Dir => stack.push((path, entry.id)),
                _ if prefix.is_empty() => {}
                _ if entry.size > SCAN_LIMIT => {}
                _ => {
                    let bytes = store.objects().read_verified(&entry.id)?;
                    if bytes[..bytes.len().min(8192)].contains(&0) {
                        continue;
                    }
                    let text = String::from_utf8_lossy(&bytes);
                    for (index, line) in text.lines().enumerate() {
                        if let Some(reason) = crate::credentials::detect(line) {
                            findings.push(CredentialFinding {
                                location: format!("{path}:{}", index + 1),
                                reason,
                            });
                        }
                    }
                }
            }
        }
    }
    findings.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(findings)
}

/// Captures the agent, then publishes its snapshot to `out`.
pub fn export(
    store: &Store,
    install_dir: &Path,
    alias: &str,
    options: AgentCaptureOptions<'_>,
    out: &Path,
    force: bool,
    progress: ProgressBar,
) -> Result<(AgentSnapshot, Published)> {
    let install = Install::load(install_dir)?;
    let plan = plan_export(&install, alias)?;
    let filter = BundleFilter::new(options.excludes)?;
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
        reuse: None,
    };
    check_request(&request).with_context(context)?;
    let captured = capture_plan(store, &install, &plan, options, &filter, progress)?;
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
