//! `review`: everything an operator must accept before importing a bundle, computed from one
//! stored snapshot. [`review`] first makes its source a snapshot of the store ([`source`]: a
//! directory is captured the way `snapshot --dir` captures it, a pack is unpacked, a remote ref
//! pulled, a snapshot ref resolved), then reads only that snapshot: the manifest and
//! `config.toml` (grants, recomputed from the config by ZeroClaw's planner too; required
//! secrets; dropped entries; carried skill bundles), every file through the store ([`files`]:
//! credential-looking files and lines, executables, scripts in skills, personal files, counts
//! and sizes), and, when the install already holds an agent imported from an earlier version
//! of this bundle ([`crate::provenance`]), the semantic diff against what was imported, new
//! grants marked. [`render`] prints the one screen; `--json` serializes [`Review`].
//!
//! The content id of a review is the snapshot's root tree id: the same bundle reviewed from a
//! directory, a snapshot or a pack has the same one (the snapshot records around it differ in
//! time and source), and `import --expect` compares it. The mount command names the snapshot.
//! Nothing here prints, installs a signal handler, or writes outside the store.

pub mod files;
mod render;
mod report;
pub mod source;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{ObjectId, Store, StoreError};

use crate::agent::{bundle_grants, shown_detail, Grant, Manifest, CONFIG_FILE, MANIFEST_FILE};
use crate::diff::compare::{compare_sides, DiffOptions, DiffSink, Semantic, SinkError};
use crate::diff::side::resolve_side;
use crate::diff::{Change, SourceSide, Summary, TreeSide};
use crate::progress::Progress;
use crate::provenance::{self, ProvenanceError};

pub use render::render;
pub use report::{BaselineKind, BundleReview, InstallReview, Review, UpdateReview};
pub use source::SourceError;

/// Files larger than this are not read for the credential scan (their names still are).
pub const SCAN_CAP: u64 = 1 << 20;

/// What the operator asked of a review beyond its source.
#[derive(Clone, Debug)]
pub struct ReviewOptions {
    /// The install to compare with (resolved the way other commands resolve it), when any.
    pub install: Option<PathBuf>,
    /// Whether `install` was named (`--install`): then a missing install is an error; a
    /// default one that does not exist only means there is nothing to compare with.
    pub install_named: bool,
    /// The per-file cap of the content scan (`SCAN_CAP`).
    pub scan_cap: u64,
    /// Whom to trust when saying who signed the snapshot (`None`: every signature is by an
    /// unknown key).
    pub allowed: Option<crate::sign::AllowedSigners>,
}

impl Default for ReviewOptions {
    fn default() -> Self {
        ReviewOptions {
            install: None,
            install_named: false,
            scan_cap: SCAN_CAP,
            allowed: None,
        }
    }
}

/// Why a review could not be produced (what it finds never fails it).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The source could not be made a snapshot of the store.
    #[error("could not review {arg}")]
    Source {
        /// The source as given.
        arg: String,
        /// What failed.
        #[source]
        source: Box<SourceError>,
    },
    /// The reviewed snapshot could not be read.
    #[error("could not read snapshot {snapshot} of the store")]
    Read {
        /// Its id (short).
        snapshot: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The caller's token was cancelled while the files were read.
    #[error("interrupted: the review of snapshot {snapshot} stopped before it was complete")]
    Interrupted {
        /// The snapshot being reviewed (short id); it stays in the store.
        snapshot: String,
    },
    /// `--install` names no ZeroClaw install.
    #[error(
        "no ZeroClaw install at {}: {} does not exist (the review compares with the agents \
         this install imported; leave --install out to review without it)",
        .0.display(),
        .0.join(CONFIG_FILE).display()
    )]
    NoInstall(PathBuf),
    /// The install's import records could not be read.
    #[error(transparent)]
    Provenance(#[from] ProvenanceError),
    /// The Agent Plugin in the snapshot could not be read.
    #[error("could not review the Agent Plugin in snapshot {snapshot}")]
    Plugin {
        /// Its id (short).
        snapshot: String,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The snapshot's signatures could not be read.
    #[error("could not read the signatures of snapshot {snapshot}")]
    Signatures {
        /// Its id (short).
        snapshot: String,
        /// What failed.
        #[source]
        source: crate::sign::SignError,
    },
}

/// Reviews `source` (a bundle directory, a snapshot ref, a pack file or a remote ref): makes it
/// a snapshot of `store` first (see [`source::resolve`]), then computes the review from that
/// snapshot alone. `progress` sees the capture, unpack or pull, and its token stops them.
pub fn review(
    store: &Store,
    source: &OsStr,
    opts: &ReviewOptions,
    progress: &dyn Progress,
) -> Result<Review, ReviewError> {
    // A named install that is not there is a typo: said before anything is captured.
    if let Some(install) = &opts.install {
        if opts.install_named && !install.join(CONFIG_FILE).exists() {
            return Err(ReviewError::NoInstall(install.clone()));
        }
    }
    let (snapshot, described) =
        source::resolve(store, source, crate::source::Takes::REVIEW, None, progress).map_err(
            |e| ReviewError::Source {
                arg: source.to_string_lossy().into_owned(),
                source: Box::new(e),
            },
        )?;
    let read_err = |source| ReviewError::Read {
        snapshot: snapshot.short(12),
        source,
    };
    let record = store.objects().read_snapshot(&snapshot).map_err(read_err)?;
    let reader = store.index().snapshot_source(&snapshot);
    let side = SourceSide(&reader);
    let total = crate::progress::Totals {
        files: record.files(),
        bytes: record.bytes(),
    };
    let scan = match files::scan(&side, &record.root, opts.scan_cap, total, progress) {
        Ok(scan) => scan,
        Err(files::ScanError::Store(e)) => return Err(read_err(e)),
        Err(files::ScanError::Interrupted) => {
            return Err(ReviewError::Interrupted {
                snapshot: snapshot.short(12),
            })
        }
    };
    let (bundle, mut not_a_bundle) = bundle_review(&side, &record.root).map_err(read_err)?;
    // Not an agent bundle but an Agent Plugin: what its servers and skills ask to be accepted.
    let plugin = match bundle.is_none() && crate::plugin::is_plugin(store, &record.root) {
        true => {
            not_a_bundle = Some(
                "an Agent Plugin (agent-plugins.org): its skills and MCP servers are below"
                    .to_string(),
            );
            Some(
                crate::plugin::review_tree(store, &record.root).map_err(|e| {
                    ReviewError::Plugin {
                        snapshot: snapshot.short(12),
                        source: e.into(),
                    }
                })?,
            )
        }
        false => None,
    };
    let mut updates = Vec::new();
    let install = match &opts.install {
        Some(path) => {
            let found = path.join(CONFIG_FILE).exists();
            if let (true, Some(b)) = (found, &bundle) {
                for record in provenance::imports_of(path, &b.agent)? {
                    updates.push(update_review(store, path, &record, &snapshot, progress));
                }
            }
            Some(InstallReview {
                path: path.clone(),
                found,
            })
        }
        None => None,
    };
    // Who signed what was reviewed (a pack's or a remote's signatures came in with it).
    let signatures =
        crate::sign::check_stored(store, &snapshot, opts.allowed.as_ref()).map_err(|source| {
            ReviewError::Signatures {
                snapshot: snapshot.short(12),
                source,
            }
        })?;
    Ok(Review {
        source: described,
        snapshot,
        root: record.root,
        files: record.files(),
        bytes: record.bytes(),
        skipped: record.report.skipped.clone(),
        bundle,
        not_a_bundle,
        plugin,
        scan,
        scan_cap: opts.scan_cap,
        install,
        updates,
        signatures,
        mount: format!("zeroclaw-bundle mount {} <DIR>", snapshot.to_hex()),
        update_plan: None,
    })
}

/// The manifest's and config's statements, or why the snapshot is not an agent bundle.
fn bundle_review(
    side: &dyn TreeSide,
    root: &ObjectId,
) -> Result<(Option<BundleReview>, Option<String>), StoreError> {
    let tree = side.tree(root)?;
    let file = |name: &str| -> Result<Option<Option<Vec<u8>>>, StoreError> {
        match tree.get(name.as_bytes()).filter(|e| e.kind.is_file()) {
            Some(e) => side
                .bytes(&e.id, e.size, crate::diff::side::BUNDLE_FILE_CAP)
                .map(Some),
            None => Ok(None),
        }
    };
    let (manifest, config) = (file(MANIFEST_FILE)?, file(CONFIG_FILE)?);
    let manifest = match manifest {
        None => {
            return Ok((
                None,
                Some(format!(
                    "no {MANIFEST_FILE} at its root: not an agent bundle (its files are \
                     reviewed all the same)"
                )),
            ))
        }
        Some(None) => {
            return Ok((
                None,
                Some(format!(
                    "its {MANIFEST_FILE} is over {} MiB: not read as an agent bundle",
                    crate::diff::side::BUNDLE_FILE_CAP >> 20
                )),
            ))
        }
        Some(Some(bytes)) => bytes,
    };
    let manifest = match Manifest::from_toml_str(&String::from_utf8_lossy(&manifest)) {
        Ok(m) => m,
        Err(e) => {
            return Ok((
                None,
                Some(format!(
                    "its {MANIFEST_FILE} is not a format-1 manifest ({e}): not read as an \
                     agent bundle"
                )),
            ))
        }
    };
    let mut grants_unchecked = None;
    let mut risk_flags: Vec<Grant> = match &config {
        Some(Some(bytes)) => match bundle_grants(&manifest, &String::from_utf8_lossy(bytes)) {
            Ok(grants) => grants,
            Err(e) => {
                grants_unchecked = Some(format!(
                    "the grants of its {CONFIG_FILE} could not be computed ({e}); the \
                     manifest's are listed, but an import may grant more"
                ));
                manifest_grants(&manifest)
            }
        },
        Some(None) => {
            grants_unchecked = Some(format!(
                "its {CONFIG_FILE} is over {} MiB and was not read; the manifest's grants are \
                 listed, but an import may grant more",
                crate::diff::side::BUNDLE_FILE_CAP >> 20
            ));
            manifest_grants(&manifest)
        }
        None => {
            grants_unchecked = Some(format!(
                "it has no {CONFIG_FILE}; the manifest's grants are listed"
            ));
            manifest_grants(&manifest)
        }
    };
    for g in &mut risk_flags {
        g.detail = shown_detail(&g.detail);
    }
    let not_exported = match &config {
        Some(Some(bytes)) => {
            crate::agent::fragment_drops(&String::from_utf8_lossy(bytes), &manifest.root_agent)
                .unwrap_or_default()
        }
        _ => Vec::new(),
    };
    let (outside_closure, entries) = match &config {
        Some(Some(bytes)) => {
            let text = String::from_utf8_lossy(bytes);
            (
                crate::agent::outside_closure(&text, &manifest.root_agent).unwrap_or_default(),
                crate::agent::config_entries(&text),
            )
        }
        _ => (Vec::new(), Vec::new()),
    };
    let m = manifest;
    Ok((
        Some(BundleReview {
            agent: m.root_agent,
            format_version: m.format_version,
            zeroclaw_version: m.provenance.zeroclaw_version,
            exported_at: m.provenance.exported_at,
            risk_flags,
            grants_unchecked,
            set_secrets: m
                .required_secrets
                .iter()
                .map(|p| format!("zeroclaw config set {p}"))
                .collect(),
            required_secrets: m.required_secrets,
            dropped: m.dropped,
            not_exported,
            outside_closure,
            entries,
            skill_bundles: m.skill_bundles,
        }),
        None,
    ))
}

fn manifest_grants(m: &Manifest) -> Vec<Grant> {
    m.risk_flags
        .iter()
        .map(|f| Grant::of_flag(f, true, false))
        .collect()
}

/// The diff against the agent `record` says was imported: against its recorded snapshot when
/// the store holds it, else against a fresh capture of the local agent, else none (said). A
/// failure here never fails the review: the update section says what could not be compared.
fn update_review(
    store: &Store,
    install: &Path,
    record: &provenance::Provenance,
    reviewed: &ObjectId,
    progress: &dyn Progress,
) -> UpdateReview {
    let mut out = UpdateReview {
        alias: record.alias.clone(),
        imported_at: record.imported_at.clone(),
        imported_snapshot: record.snapshot,
        baseline_kind: BaselineKind::None,
        baseline: None,
        note: None,
        changes: Vec::new(),
        new_grants: false,
        summary: Summary::default(),
    };
    if store.objects().read_snapshot(&record.snapshot).is_ok() {
        out.baseline_kind = BaselineKind::Imported;
        out.baseline = Some(record.snapshot);
    } else {
        let capture = crate::export::load_agent(install, &record.alias).and_then(|(i, plan)| {
            crate::export::capture_loaded(
                store,
                &i,
                &plan,
                crate::export::AgentCaptureOptions::default(),
                progress,
            )
        });
        match capture {
            Ok(c) => {
                out.baseline_kind = BaselineKind::FreshCapture;
                out.baseline = Some(c.id);
                out.note = Some(format!(
                    "the imported snapshot {} is not in this store; compared with a fresh \
                     capture of the local agent {} instead (names the import namespaced \
                     show as changes)",
                    record.snapshot.short(12),
                    record.alias
                ));
            }
            Err(e) => {
                out.note = Some(format!(
                    "the imported snapshot {} is not in this store, and the local agent {} \
                     could not be captured ({e:#}): no baseline to compare with",
                    record.snapshot.short(12),
                    record.alias
                ));
                return out;
            }
        }
    }
    let baseline = out.baseline.expect("set above");
    match diff_snapshots(store, &baseline, reviewed, progress) {
        Ok((semantic, summary)) => {
            out.new_grants = semantic.new_grants();
            if semantic.changes.is_empty() && !semantic.not_held.is_empty() {
                out.note.get_or_insert_with(|| {
                    format!("the semantic diff was left out: {}", Semantic::NOT_HELD)
                });
            }
            out.changes = semantic.changes;
            out.summary = summary;
        }
        Err(e) => {
            out.note = Some(format!(
                "could not compare with {}: {e}",
                baseline.short(12)
            ));
        }
    }
    out
}

/// The whole diff (semantic section and file totals) of two stored snapshots.
fn diff_snapshots(
    store: &Store,
    a: &ObjectId,
    b: &ObjectId,
    progress: &dyn Progress,
) -> Result<(Semantic, Summary), String> {
    let side = |id: &ObjectId| {
        resolve_side(store, OsStr::new(&id.to_hex()), false, progress).map_err(|e| error_chain(&e))
    };
    let (sa, sb) = (side(a)?, side(b)?);
    struct Collect(Semantic);
    impl DiffSink for Collect {
        fn semantic(&mut self, section: &Semantic) -> Result<(), SinkError> {
            self.0 = section.clone();
            Ok(())
        }
        fn change(&mut self, _: &Change) -> Result<(), SinkError> {
            Ok(())
        }
    }
    let mut sink = Collect(Semantic::default());
    let report =
        compare_sides(&sa, &sb, DiffOptions::default(), &mut sink).map_err(|e| error_chain(&e))?;
    Ok((sink.0, report.summary))
}

/// An error with its causes, `: `-joined (as `main` prints them).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}
