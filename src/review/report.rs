//! What a review found: the [`Review`] the verb returns, [`render`](super::render()) prints and
//! `--json` serializes, and its parts (the bundle's statements, the install compared with, one
//! update diff per earlier import). Plain data: nothing here reads the store.

use std::path::PathBuf;

use serde::Serialize;
use zeroclaw_bundle_store::ObjectId;

use super::files::FileScan;
use super::source::ReviewSource;
use crate::agent::{Dropped, Grant, SemanticChange};
use crate::diff::Summary;

/// A review: what the operator must accept before importing the snapshot it names.
#[derive(Clone, Debug, Serialize)]
pub struct Review {
    /// What was reviewed, as given.
    pub source: ReviewSource,
    /// The snapshot reviewed (what `mount` and `import` read).
    pub snapshot: ObjectId,
    /// The content id: the snapshot's root tree (the same for the same bundle however it came).
    pub root: ObjectId,
    /// Files in the snapshot.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Entries the capture of a directory source did not follow (symlinks, special files,
    /// hard links): not in the snapshot, so neither reviewed nor imported.
    pub skipped: Vec<zeroclaw_bundle_store::Skipped>,
    /// The agent bundle's own statements; `None` when the snapshot is not an agent bundle.
    pub bundle: Option<BundleReview>,
    /// Why the snapshot is not read as an agent bundle (no manifest, or one that does not
    /// parse), when it is not.
    pub not_a_bundle: Option<String>,
    /// What an Agent Plugin asks to be accepted, when the snapshot is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<crate::plugin::PluginReview>,
    /// What the file walk found.
    #[serde(flatten)]
    pub scan: FileScan,
    /// The per-file cap of the content scan.
    pub scan_cap: u64,
    /// The install compared with, when one was given or found.
    pub install: Option<InstallReview>,
    /// One diff per agent of the install imported from an earlier version of this bundle.
    pub updates: Vec<UpdateReview>,
    /// Who signed the snapshot reviewed: one verdict per signature it carries (empty:
    /// unsigned), checked against [`super::ReviewOptions::allowed`].
    pub signatures: Vec<crate::sign::Checked>,
    /// The command that mounts what was reviewed, read-only (`<DIR>` is the operator's).
    pub mount: String,
    /// When the source is a newer version of an agent imported into the install compared
    /// with: the three-way plan its import would apply there (taken, kept, conflicts, config
    /// keys, new grants). Set by [`crate::Bundles::review`]; nothing is written to the install.
    pub update_plan: Option<crate::UpdatePlan>,
}

/// What the bundle's manifest and config say.
#[derive(Clone, Debug, Serialize)]
pub struct BundleReview {
    /// The agent's alias in the bundle.
    pub agent: String,
    /// The manifest's format version.
    pub format_version: i64,
    /// The ZeroClaw version the bundle says computed it.
    pub zeroclaw_version: String,
    /// When it was exported (RFC 3339).
    pub exported_at: String,
    /// The capability grants: the manifest's risk flags, then any the config makes that the
    /// manifest does not list (details with credential-looking words named, not printed).
    pub risk_flags: Vec<Grant>,
    /// Why the config's own grants could not be computed (the manifest's are still listed).
    pub grants_unchecked: Option<String>,
    /// Config paths whose secrets were scrubbed: the operator fills them.
    pub required_secrets: Vec<String>,
    /// `zeroclaw config set <path>` for each required secret.
    pub set_secrets: Vec<String>,
    /// What could not travel.
    pub dropped: Vec<Dropped>,
    /// Config the bundle carries although ZeroClaw's exporter never does (a workspace path,
    /// cross-agent grants, delegates, channels, ...: the fragment re-planned by ZeroClaw's
    /// planner drops them): a hand-edited bundle, which `import` refuses.
    pub not_exported: Vec<Dropped>,
    /// Entries of its `config.toml` outside the closure ZeroClaw's planner computes for the
    /// agent (dotted paths: nothing the agent references reaches them): a hand-edited bundle,
    /// which `import` refuses, since a local agent naming them would start using them.
    pub outside_closure: Vec<String>,
    /// Every config entry its `config.toml` carries (dotted paths, sorted): what an import
    /// adds, namespaces, reuses or maps (`import --dry-run` says which).
    pub entries: Vec<String>,
    /// Skill bundles the bundle carries under `skills/`.
    pub skill_bundles: Vec<String>,
}

/// The install a review compared with.
#[derive(Clone, Debug, Serialize)]
pub struct InstallReview {
    /// Its root (the directory of its `config.toml`).
    pub path: PathBuf,
    /// Whether it exists (a default install that does not is said, not an error).
    pub found: bool,
}

/// What the baseline of an update diff is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineKind {
    /// The snapshot the earlier import recorded, found in this store.
    Imported,
    /// That snapshot is not in this store: a fresh capture of the local agent instead.
    FreshCapture,
    /// Neither: no diff.
    None,
}

/// The diff of the reviewed bundle against an agent imported from an earlier version of it.
#[derive(Clone, Debug, Serialize)]
pub struct UpdateReview {
    /// The local agent's alias.
    pub alias: String,
    /// When it was imported.
    pub imported_at: String,
    /// The snapshot that import recorded.
    pub imported_snapshot: ObjectId,
    /// What the diff compares with.
    pub baseline_kind: BaselineKind,
    /// The baseline snapshot (`None` with [`BaselineKind::None`]).
    pub baseline: Option<ObjectId>,
    /// What the operator should know about the baseline (why it is not the imported
    /// snapshot, why there is none, why the semantic section is empty).
    pub note: Option<String>,
    /// The semantic changes (risk flags, secrets, skill bundles, config keys).
    pub changes: Vec<SemanticChange>,
    /// Whether the reviewed bundle grants something the baseline did not.
    pub new_grants: bool,
    /// File totals of the diff.
    pub summary: Summary,
}
