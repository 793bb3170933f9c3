//! Update in place: a newer bundle of an agent this install imported before, merged into that
//! agent three ways instead of imported beside it, and `rollback` of the last update.
//!
//! The three states (`crate::sync`): the base is the snapshot the provenance record names (the
//! bundle last imported; it must be in the store), the local state is a capture of the agent's
//! workspace as it is now and the install's `config.toml`, the incoming state is the new
//! bundle. Files merge per path of the workspace; paths no export carries (ZeroClaw's memory
//! rule, and what the bundles' manifests list as left behind) are never touched. The skill
//! bundles the agent's import added merge the same way, each in its directory (one the update
//! adds is written where the install puts skills; one it drops goes once emptied); a change to
//! a skill bundle the install had of its own is refused, since other agents may load it. Config
//! merges per key of the entries the first import added (`Provenance::entries`, owned), in the
//! install's names: the `--as`, namespacing and `--map` choices of that import carry over, and
//! entries it reused or mapped stay as the install has them.
//!
//! An Agent Plugin imported before updates the same way ([`plan_plugin_against`]): its plugin
//! tree under `shared/plugins/<alias>/` is the directory merged, and the entries its import
//! added (skill bundle, MCP bundle, servers) are the config merged; its record is
//! `plugin.<alias>`, which `rollback` and `recover` take as they take an agent's.
//!
//! [`plan`] writes only to the store (captures, the merged tree); [`apply`] writes, under the
//! install's lock, in this order: the state (both `config.toml` texts, owner-only, in
//! [`STATES_DIR`]`/<alias>`, and snapshot records of the workspace before and after), the
//! intent (`super::journal`: from here on a kill ends, after `recover --install`, in the state
//! after, never in a mix), the workspace and skill directories through the staged publish,
//! the provenance record, a backup of `config.toml`, `config.toml`, the state added to
//! `states.toml`, the intent removed. The last [`KEEP_STATES`] states stay reachable in the store (snapshot records);
//! [`rollback`] merges the last one back the same way (a local edit made since the update is
//! kept, a conflicting one refuses) and records itself as a state, so a rollback can be rolled
//! back.
//!
//! Test hooks (`crate::hooks`): seam `update-step` with path `intent` (before the intent is
//! written), `trees`, `provenance`, `config` (before the backup) and `states` (after
//! `config.toml`), where a test kills an update or rollback.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::fs;
use std::os::fd::AsFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use zeroclaw_bundle_store::{
    CaptureReport, EntryKind, ObjectId, Snapshot, SnapshotKind, Store, StoreError, Tree, TreeEntry,
};

use super::merge::{self, Kind};
use super::{source, ImportError, ImportRequest, SourceKind};
use crate::agent::{rfc3339_utc, Grant, Install, CONFIG_FILE};
use crate::progress::Progress;
use crate::provenance::{self, EntryFate, Provenance};
use crate::publish::{self, FileRequest, Keep, PublishRequest};
use crate::sync::files::{Decision, Entry, Side};
use crate::sync::{self, Conflicts, Stamp};
use crate::sys;

/// How many states (pre-update snapshots and config texts) stay reachable per agent.
pub const KEEP_STATES: usize = 3;

/// Where the update states of the install's agents are kept, inside the install.
pub const STATES_DIR: &str = ".zeroclaw-bundle/updates";

/// What an update does with a path or key changed differently on both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictPolicy {
    /// Refuse the whole update and list the conflicts.
    #[default]
    Refuse,
    /// Keep the local side.
    KeepLocal,
    /// Take the incoming side (the local change is lost).
    TakeIncoming,
    /// Keep the local file and write the incoming one beside it as
    /// `NAME.sync-conflict-<YYYYMMDD-HHMMSS>-<id8>.EXT` (a config key keeps the local value).
    Copy,
}

impl ConflictPolicy {
    fn engine(self) -> Conflicts {
        match self {
            ConflictPolicy::Refuse => Conflicts::Refuse,
            ConflictPolicy::KeepLocal => Conflicts::KeepLocal,
            ConflictPolicy::TakeIncoming => Conflicts::TakeIncoming,
            ConflictPolicy::Copy => Conflicts::Copy,
        }
    }
}

/// What to update where.
#[derive(Debug, Clone, Copy)]
pub struct UpdateRequest<'a> {
    /// The new bundle: a bundle directory, a pack file, `REMOTE/REF`, or a snapshot ref.
    pub source: &'a OsStr,
    /// The install root (the directory of `config.toml`).
    pub install: &'a Path,
    /// The local agent to update (`--as`); by default the one agent whose provenance names
    /// the bundle's agent.
    pub alias: Option<&'a str>,
    /// What to do with conflicts.
    pub conflicts: ConflictPolicy,
    /// The operator accepted the grants the update adds.
    pub accept_grants: bool,
    /// The operator allowed an Agent Plugin's update to an older version (see
    /// [`UpdatePlan::downgrade`]).
    pub allow_downgrade: bool,
    /// Who must have signed the bundle (as for import).
    pub require: Option<&'a crate::sign::AllowedSigners>,
}

impl<'a> UpdateRequest<'a> {
    /// The import request that reads this update's bundle (source, install, agent, signers).
    fn as_import(&self) -> ImportRequest<'a> {
        ImportRequest {
            source: self.source,
            install: self.install,
            agent_as: self.alias,
            require: self.require,
            ..Default::default()
        }
    }
}

/// One conflicting path or key and how the policy resolved it (`None`: unresolved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// The workspace path, or the dotted config key.
    pub path: String,
    /// How the sides differ.
    pub kind: &'static str,
    /// `kept local`, `took incoming`, `copied to PATH`, or `None` when refused.
    pub resolution: Option<String>,
}

/// One config key an update changes or keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyChange {
    /// The dotted key.
    pub key: String,
    /// `take`, `delete`, `keep`, `keep-deletion`, `same`, `conflict`.
    pub action: &'static str,
}

/// Everything an update will do, decided before anything is written.
#[derive(Debug, Clone, Serialize)]
pub struct UpdatePlan {
    /// The source as given.
    pub source: String,
    /// The local agent updated.
    pub alias: String,
    /// Its alias in the bundle.
    pub bundle_alias: String,
    /// The install root.
    pub install: PathBuf,
    /// The snapshot last imported (the merge base).
    pub base: ObjectId,
    /// The snapshot of the new bundle.
    pub incoming: ObjectId,
    /// The new bundle's content id.
    pub content_id: ObjectId,
    /// The install holds this content already: nothing to do.
    pub up_to_date: bool,
    /// Workspace paths changed only upstream, written.
    pub taken: Vec<String>,
    /// Workspace paths removed upstream and unchanged here, removed.
    pub deleted: Vec<String>,
    /// Workspace paths changed only here, kept.
    pub kept: Vec<String>,
    /// Conflicting workspace paths and config keys.
    pub conflicts: Vec<Conflict>,
    /// Config keys something changed at.
    pub config_keys: Vec<KeyChange>,
    /// Grants the incoming bundle has and the base had not (local paths).
    pub new_grants: Vec<Grant>,
    /// The operator accepted `new_grants`.
    pub accept_grants: bool,
    /// The conflict policy.
    pub policy: ConflictPolicy,
    /// What the operator should know that no list above says: for an Agent Plugin, each
    /// component of the incoming version the spec or ZeroClaw refuses (not imported, so an
    /// update drops it where the version before had it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// For an Agent Plugin whose incoming `version` is older than the one imported before (by
    /// SemVer): both versions. Refused unless allowed (`allow_downgrade`): an older version may
    /// bring back what the newer one fixed, and a source that serves an old version is how
    /// that is done to an operator. It is also the first of `notes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downgrade: Option<crate::plugin::VersionChange>,
    /// The operator allowed the downgrade.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_downgrade: bool,
    #[serde(skip)]
    work: Option<Work>,
}

/// Who an update of provenance record `alias` is of, for the operator: `agent ALIAS`, or for
/// an Agent Plugin's record `the Agent Plugin imported as skill bundle S`.
pub fn subject(alias: &str) -> String {
    match crate::plugin::record_skill_alias(alias) {
        Some(skill_alias) => format!("the Agent Plugin imported as skill bundle {skill_alias}"),
        None => format!("agent {alias}"),
    }
}

impl UpdatePlan {
    /// Who the update is of, for the operator (see [`subject`]).
    pub fn subject(&self) -> String {
        subject(&self.alias)
    }

    /// What the incoming version is of, for the operator: `bundle agent A`, or `Agent Plugin
    /// NAME`.
    pub fn incoming_noun(&self) -> String {
        match crate::plugin::plugin_of_bundle_alias(&self.bundle_alias) {
            Some(name) if crate::plugin::record_skill_alias(&self.alias).is_some() => {
                format!("Agent Plugin {name}")
            }
            _ => format!("bundle agent {}", self.bundle_alias),
        }
    }

    /// A conflict the policy left unresolved: [`crate::Bundles::update`] refuses.
    pub fn refused(&self) -> bool {
        self.conflicts.iter().any(|c| c.resolution.is_none())
    }

    /// The update grants something new that was not accepted: [`crate::Bundles::update`] refuses.
    pub fn grants_unaccepted(&self) -> bool {
        !self.new_grants.is_empty() && !self.accept_grants
    }

    /// The plan accepted with `accept_grants`.
    pub fn accepting_grants(mut self, accept: bool) -> UpdatePlan {
        self.accept_grants = accept;
        self
    }

    /// The older version the update goes back to, when that was not allowed:
    /// [`crate::Bundles::update`] refuses.
    pub fn unallowed_downgrade(&self) -> Option<&crate::plugin::VersionChange> {
        self.downgrade.as_ref().filter(|_| !self.allow_downgrade)
    }

    /// The plan with its downgrade allowed (or not).
    pub fn allowing_downgrade(mut self, allow: bool) -> UpdatePlan {
        self.allow_downgrade = allow;
        self
    }
}

/// What the writes of a planned update need.
#[derive(Debug, Clone)]
struct Work {
    config_path: PathBuf,
    config_target: PathBuf,
    old_config: String,
    new_config: String,
    workspace: PathBuf,
    local: Captured,
    merged_tree: ObjectId,
    /// The skill bundles' directories merged beside the workspace.
    skills: Vec<SkillWork>,
    entries: Vec<String>,
    before_record: Provenance,
    after_record: Provenance,
}

impl Work {
    /// The trees the change writes (what, where, which tree), the workspace first: those
    /// whose merged tree is not the one there.
    fn changed_trees(&self, alias: &str) -> Vec<(String, PathBuf, ObjectId)> {
        let workspace = (self.merged_tree != self.local.tree).then(|| {
            (
                merged_dir_noun(alias),
                self.workspace.clone(),
                self.merged_tree,
            )
        });
        let skills = self
            .skills
            .iter()
            .filter(|s| s.merged != s.local.tree)
            .map(|s| (format!("skill bundle {}", s.alias), s.dir.clone(), s.merged));
        workspace.into_iter().chain(skills).collect()
    }

    /// Nothing of the agent changes: every tree and `config.toml` stay as they are.
    fn changes_nothing(&self) -> bool {
        self.merged_tree == self.local.tree
            && self.skills.iter().all(|s| s.merged == s.local.tree)
            && self.new_config == self.old_config
    }
}

/// One skill bundle's directory an update or rollback merges: one the agent's import added.
#[derive(Debug, Clone)]
struct SkillWork {
    /// The local skill bundle.
    alias: String,
    /// Its directory.
    dir: PathBuf,
    /// The directory as captured before.
    local: Captured,
    /// The merged tree written there.
    merged: ObjectId,
    /// The config after does not configure the bundle and nothing is left in its directory:
    /// the directory is removed once emptied.
    remove: bool,
}

/// A workspace as captured: its snapshot record (none when it does not exist) and tree.
#[derive(Debug, Clone, Copy)]
struct Captured {
    snapshot: Option<ObjectId>,
    tree: ObjectId,
}

/// What an applied update or rollback did.
#[derive(Debug, Clone, Serialize)]
pub struct Updated {
    /// The local agent.
    pub alias: String,
    /// Whether the agent was changed (`false` when up to date, or when nothing of it changed
    /// and only the version imported was recorded in its provenance).
    pub written: bool,
    /// The backup of the previous `config.toml` (meaningless when nothing was written).
    pub backup: PathBuf,
    /// The state record `rollback` reads.
    pub states: PathBuf,
}

/// Why an update or rollback was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// The import machinery failed (reading the source, the install, writing).
    #[error(transparent)]
    Import(#[from] ImportError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A provenance record could not be read or written.
    #[error(transparent)]
    Provenance(#[from] crate::provenance::ProvenanceError),
    /// No earlier import to update.
    #[error("{0}")]
    NotImported(String),
    /// The base snapshot is not in the store.
    #[error(
        "the snapshot {snapshot} that agent {alias} was last imported from ({from}) is not in \
         the store, so there is no merge base: pull it (`zeroclaw-bundle pull REMOTE/{short}`) \
         or unpack the pack it came in (`zeroclaw-bundle unpack FILE`), then update again"
    )]
    BaseMissing {
        /// The local agent.
        alias: String,
        /// The snapshot provenance names.
        snapshot: ObjectId,
        /// Its short form.
        short: String,
        /// Where it came from.
        from: String,
    },
    /// Capturing the workspace failed or skipped something an update could not keep.
    #[error("could not capture {}: {message}", path.display())]
    Capture {
        /// The workspace.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// Conflicts left unresolved.
    #[error(
        "{} conflict(s), nothing was written: {}; choose with --conflicts \
         keep-local|take-incoming|copy", .0.len(), .0.join(", ")
    )]
    Conflicts(Vec<String>),
    /// A rollback would overwrite edits made since the change it undoes.
    #[error(
        "{} path(s) or key(s) were edited since the change this rolls back, and rolling back \
         would overwrite them: {}; copy those edits elsewhere and undo them (or remove the \
         files), then roll back again", .0.len(), .0.join(", ")
    )]
    RollbackConflicts(Vec<String>),
    /// New grants not accepted.
    #[error(
        "the update grants what the version last imported did not ({}); nothing was written: \
         review it, then update with --accept-grants", .0.join(", ")
    )]
    NewGrants(Vec<String>),
    /// An update to an older version, not allowed.
    #[error(
        "{0}; nothing was written: an older version may bring back what the newer one fixed; \
         review it, then update with --allow-downgrade"
    )]
    Downgrade(crate::plugin::VersionChange),
    /// A skill bundle's tree changed upstream in a way an update in place cannot carry: the
    /// install's own skill bundle (the first import reused or mapped it rather than adding
    /// it), or one whose directory the update would move.
    #[error(
        "skill bundle {alias} changed since the version last imported, and an update in place \
         cannot carry it: {why}; nothing was written; import the new version beside the agent \
         with `import SOURCE --as NEW`"
    )]
    SkillNotCarried {
        /// The local skill bundle.
        alias: String,
        /// Why not.
        why: String,
    },
    /// The workspace changed between the plan and the writes.
    #[error("{} changed since the update was planned; nothing was written: run it again", .0.display())]
    Changed(PathBuf),
    /// A state record could not be read or written.
    #[error("update state {}: {message}", path.display())]
    State {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A write after the intent failed: the change is half done until `recover` finishes it.
    #[error(
        "{error}; the {verb} of {} is half done: run `zeroclaw-bundle recover \
         --install {}` to finish it",
        subject(alias),
        crate::publish::shell_quote(install)
    )]
    Unfinished {
        /// `update` or `rollback`.
        verb: &'static str,
        /// The local agent.
        alias: String,
        /// The install root.
        install: PathBuf,
        /// The failure, with its causes.
        error: String,
    },
    /// `recover` found the file or workspace changed since the change was cut short: it is
    /// neither as before nor as after, and recovering would overwrite that edit.
    #[error(
        "{} changed since the {verb} of {} was cut short: it is neither as before \
         nor as after the {verb}, so recover will not overwrite it; {remedy}", path.display(),
        subject(alias)
    )]
    Edited {
        /// `config.toml` or the workspace.
        path: PathBuf,
        /// `update` or `rollback`.
        verb: String,
        /// The local agent.
        alias: String,
        /// What to do about it.
        remedy: String,
    },
}

/// Plans the update of a local agent from `req.source` (see the module doc). Writes only to
/// the store.
pub fn plan(
    store: &Store,
    req: &UpdateRequest<'_>,
    progress: &dyn Progress,
) -> Result<UpdatePlan, UpdateError> {
    let target = super::read_target(req.install)?;
    let import_req = req.as_import();
    let (snapshot, kind) =
        super::source::capture(store, import_req.source, import_req.require, progress)?;
    if let Some(root) = super::plugin_root(store, snapshot)? {
        let incoming = IncomingPlugin {
            snapshot,
            root,
            kind,
        };
        let name = crate::plugin::plugin_name(store, &root).map_err(|problem| {
            ImportError::NotABundle {
                snapshot,
                problem: format!("an Agent Plugin the Agent Plugins spec refuses: {problem}"),
            }
        })?;
        let record = plugin_record(&target, &name, req.alias)?.ok_or_else(|| {
            UpdateError::NotImported(format!(
                "Agent Plugin {name} was not imported into {}{}: nothing to update; import it \
                 instead",
                target.root.display(),
                req.alias.map(|a| format!(" as {a}")).unwrap_or_default()
            ))
        })?;
        return plan_plugin_against(store, req, target, &incoming, record, progress);
    }
    let incoming = super::read_bundle(store, &import_req, snapshot, kind, None)?;
    let record = earlier_record(&target, &incoming.manifest.root_agent, req.alias)?;
    plan_against(store, req, target, &incoming, record, progress)
}

/// The provenance record of the agent an import of a bundle of agent `bundle_alias` updates
/// in place instead of importing beside it, or None for an import:
/// - `update` (`--update ALIAS`) names it, and must be an agent imported from a bundle of
///   `bundle_alias` (an error otherwise);
/// - `agent_as` (`--as ALIAS`) naming such an agent updates it; any other `--as` is a new agent;
/// - otherwise the one configured agent imported from a bundle of `bundle_alias`; with more
///   than one, the operator must choose (an error naming them). An agent made by hand has no
///   record, so its namesake is imported beside it, namespaced, as before.
pub(super) fn routed_record(
    target: &super::Target,
    bundle_alias: &str,
    agent_as: Option<&str>,
    update: Option<&str>,
) -> Result<Option<Provenance>, UpdateError> {
    if let Some(alias) = update {
        return earlier_record(target, bundle_alias, Some(alias)).map(Some);
    }
    let configured = |r: &Provenance| target.install.typed.agents.contains_key(&r.alias);
    if let Some(alias) = agent_as {
        return Ok(provenance::read(&target.root, alias)?
            .filter(|r| r.bundle_alias == bundle_alias && configured(r)));
    }
    let mut records = provenance::imports_of(&target.root, bundle_alias)?;
    records.retain(configured);
    match records.len() {
        0 => Ok(None),
        1 => Ok(Some(records.remove(0))),
        _ => Err(UpdateError::NotImported(format!(
            "agents {} of {} were each imported from a bundle of agent {bundle_alias}: name the \
             one to update with --update ALIAS, or import beside them with --as NEW",
            records
                .iter()
                .map(|r| r.alias.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            target.root.display()
        ))),
    }
}

/// The provenance record of the earlier import of Agent Plugin `name` whose skill bundle the
/// install still configures (`alias`, when given, names it: `plugin.<alias>` or its skill
/// bundle `<alias>`); None when there is none. More than one: the operator must choose.
pub(super) fn plugin_record(
    target: &super::Target,
    name: &str,
    alias: Option<&str>,
) -> Result<Option<Provenance>, UpdateError> {
    let mut records =
        provenance::imports_of(&target.root, &crate::plugin::record_bundle_alias(name))?;
    records.retain(|r| {
        let skill_alias = crate::plugin::record_skill_alias(&r.alias).unwrap_or_default();
        target.install.typed.skill_bundles.contains_key(skill_alias)
            && alias.is_none_or(|a| a == r.alias || a == skill_alias)
    });
    match records.len() {
        0 => Ok(None),
        1 => Ok(Some(records.remove(0))),
        _ => Err(UpdateError::NotImported(format!(
            "Agent Plugin {name} was imported into {} more than once (skill bundles {}): name \
             the one to update (`zeroclaw-bundle update SOURCE --install DIR --as \
             SKILL_BUNDLE`)",
            target.root.display(),
            records
                .iter()
                .map(|r| crate::plugin::record_skill_alias(&r.alias).unwrap_or(&r.alias))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// [`plan`] of the bundle `incoming`, already read into the store, against the earlier
/// import `record` made.
pub(super) fn plan_against(
    store: &Store,
    req: &UpdateRequest<'_>,
    target: super::Target,
    incoming: &source::StoredBundle,
    record: Provenance,
    progress: &dyn Progress,
) -> Result<UpdatePlan, UpdateError> {
    let import_req = req.as_import();
    let base = read_base(store, &record)?;
    let source_text = super::source_text(req.source, &incoming.kind);
    let mut plan = UpdatePlan::empty(
        req,
        &record,
        &target,
        (incoming.snapshot, incoming.content_id()),
        source_text.clone(),
    );
    if base.content_id() == incoming.content_id() {
        plan.up_to_date = true;
        return Ok(plan);
    }
    super::check_fragment(&import_req, incoming)?;
    super::check_closure(incoming)?;

    // Names: what the first import decided, and a name for each entry the update adds.
    let names = Names::of(
        &record,
        &base.fragment,
        &incoming.fragment,
        &target.old_config,
    )?;

    // Files.
    let workspace = target.install.typed.agent_workspace_dir(&record.alias);
    let local = capture(store, &workspace, progress)?;
    let mut sizes = HashMap::new();
    let merged_files = plan_workspace(store, (&base, incoming), &local, &mut sizes, &mut plan)?;

    // Config.
    let entries = names.entry_paths();
    let merged_config = plan_config(
        &base.fragment,
        &incoming.fragment,
        &names,
        &entries,
        &target,
        &mut plan,
    )?;
    let after_install = match &merged_config {
        Some(text) => Some(super::check_merged(
            &target.install,
            &target.root,
            &target.config_path,
            text,
        )?),
        None => None,
    };

    // Skill bundles: the trees of those the agent's import added, merged the same way.
    let skills = plan_skills(
        store,
        &SkillInput {
            base: &base,
            incoming,
            names: &names,
            target: &target,
            after: after_install.as_ref(),
        },
        &mut sizes,
        &mut plan,
        progress,
    )?;

    // Grants: what the incoming bundle grants that the base did not, in local names.
    plan.new_grants = new_grants(&base, incoming, &names.names)?;

    let (Some(tree), Some(new_config), Some(skills)) = (merged_files, merged_config, skills) else {
        return Ok(plan);
    };
    let merged_tree = build_tree(store, &tree, &sizes)?;
    let skills = skills
        .into_iter()
        .map(|(planned, side)| {
            let merged = build_tree(store, &side, &sizes)?;
            Ok(SkillWork {
                remove: planned.remove && side.is_empty(),
                merged,
                ..planned
            })
        })
        .collect::<Result<Vec<_>, UpdateError>>()?;
    let after_record = record_after(
        &record,
        incoming.snapshot,
        &incoming.fragment,
        &names,
        source_text,
    )?;
    plan.work = Some(Work {
        config_path: target.config_path,
        config_target: target.config_target,
        old_config: target.old_config,
        new_config,
        workspace,
        local,
        merged_tree,
        skills,
        entries,
        before_record: record,
        after_record,
    });
    Ok(plan)
}

/// An Agent Plugin's newer version, as captured into the store.
#[derive(Debug, Clone)]
pub(super) struct IncomingPlugin {
    /// Its snapshot.
    pub snapshot: ObjectId,
    /// The plugin tree (its content id).
    pub root: ObjectId,
    /// What the source was.
    pub kind: SourceKind,
}

/// [`plan_against`] for an Agent Plugin this install imported before (`record`, alias
/// `plugin.<alias>`): the plugin tree its import wrote under `shared/plugins/<alias>/` merges
/// three ways like a workspace (an edit made here is kept, its skills with it), and the
/// entries the import added (the skill bundle, the MCP bundle, the servers) merge per key,
/// both versions translated under the alias the first import chose, so their fragments name
/// the same entries. A new server or a changed command line is a new grant.
pub(super) fn plan_plugin_against(
    store: &Store,
    req: &UpdateRequest<'_>,
    target: super::Target,
    incoming: &IncomingPlugin,
    record: Provenance,
    progress: &dyn Progress,
) -> Result<UpdatePlan, UpdateError> {
    let base_root = read_base_root(store, &record)?;
    let source_text = super::source_text(req.source, &incoming.kind);
    let mut plan = UpdatePlan::empty(
        req,
        &record,
        &target,
        (incoming.snapshot, incoming.root),
        source_text.clone(),
    );
    if base_root == incoming.root {
        plan.up_to_date = true;
        return Ok(plan);
    }
    let local_alias = crate::plugin::record_skill_alias(&record.alias)
        .unwrap_or(&record.alias)
        .to_string();
    // The alias the first translation chose: its skill bundle's name in the record.
    let alias = record
        .entries
        .keys()
        .find_map(|path| match Kind::parse_prefix(path) {
            Some((Kind::SkillBundle, a)) => Some(a.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| local_alias.clone());
    let translate = |root: &ObjectId, snapshot: ObjectId| {
        crate::plugin::translate_as(store, root, &target.root, &alias).map_err(|problem| {
            ImportError::NotABundle {
                snapshot,
                problem: format!("an Agent Plugin the Agent Plugins spec refuses: {problem}"),
            }
        })
    };
    let base = translate(&base_root, record.snapshot)?;
    let new = translate(&incoming.root, incoming.snapshot)?;
    let names = Names::of(&record, &base.fragment, &new.fragment, &target.old_config)?;
    plan.downgrade =
        crate::plugin::VersionChange::backwards(base.version.as_deref(), new.version.as_deref());
    plan.notes = plan
        .downgrade
        .iter()
        .map(ToString::to_string)
        .chain(new.refused.iter().map(|r| crate::plugin::refused_note(r)))
        .collect();

    // The plugin tree, merged as a workspace is (no memory rule: a plugin carries no memory).
    let dir = merged_dir(&target.install, &target.root, &record.alias);
    let local = capture(store, &dir, progress)?;
    let mut sizes = HashMap::new();
    let trees = ThreeTrees {
        base: Some(base_root),
        local: local.tree,
        incoming: Some(incoming.root),
    };
    let merged_files = plan_files(store, &trees, &|_| false, "", &mut sizes, &mut plan)?;

    // Config: the entries the plugin's import added, per key.
    let entries = names.entry_paths();
    let merged_config = plan_config(
        &base.fragment,
        &new.fragment,
        &names,
        &entries,
        &target,
        &mut plan,
    )?;
    if let Some(text) = &merged_config {
        super::check_merged(&target.install, &target.root, &target.config_path, text)?;
    }
    // What the change grants: a server added, a command or endpoint changed (a server
    // removed grants nothing).
    let grants =
        crate::agent::fragment_change_grants(&base.fragment, &new.fragment).map_err(|e| {
            ImportError::Fragment {
                path: "mcp.servers".into(),
                problem: e.to_string(),
            }
        })?;
    plan.new_grants = localized(grants, &names.names);

    let (Some(tree), Some(new_config)) = (merged_files, merged_config) else {
        return Ok(plan);
    };
    let merged_tree = build_tree(store, &tree, &sizes)?;
    let after_record = record_after(
        &record,
        incoming.snapshot,
        &new.fragment,
        &names,
        source_text,
    )?;
    plan.work = Some(Work {
        config_path: target.config_path,
        config_target: target.config_target,
        old_config: target.old_config,
        new_config,
        workspace: dir,
        local,
        merged_tree,
        skills: Vec::new(),
        entries,
        before_record: record,
        after_record,
    });
    Ok(plan)
}

/// The workspace's merge ([`plan_files`]): the `base` and `incoming` bundles' workspace trees
/// against the `local` capture; paths no export carries stay untouched.
fn plan_workspace(
    store: &Store,
    (base, incoming): (&source::StoredBundle, &source::StoredBundle),
    local: &Captured,
    sizes: &mut HashMap<ObjectId, u64>,
    plan: &mut UpdatePlan,
) -> Result<Option<Side>, UpdateError> {
    let behind = left_behind(&[base, incoming], "workspace/");
    let trees = ThreeTrees {
        base: base.workspace.map(|t| t.id),
        local: local.tree,
        incoming: incoming.workspace.map(|t| t.id),
    };
    plan_files(store, &trees, &|p| uncarried(&behind, p), "", sizes, plan)
}

/// The three trees of one directory's merge (none: empty).
struct ThreeTrees {
    base: Option<ObjectId>,
    local: ObjectId,
    incoming: Option<ObjectId>,
}

/// What [`plan_skills`] reads.
struct SkillInput<'a> {
    base: &'a source::StoredBundle,
    incoming: &'a source::StoredBundle,
    names: &'a Names,
    target: &'a super::Target,
    /// The install as the merged config makes it (none: the config merge was refused).
    after: Option<&'a Install>,
}

/// The skill bundles whose trees changed upstream, merged three ways in their directories:
/// lists in `plan` what each takes, deletes, keeps and conflicts on (paths shown as `skill
/// bundle L: PATH`); each one's work (its `merged` tree not yet written) with its merged
/// side, or `None` when a conflict is left unresolved or the merged config is not known.
/// Refuses a change no update can carry ([`UpdateError::SkillNotCarried`]): the install's
/// own skill bundle, or a directory that moves.
fn plan_skills(
    store: &Store,
    input: &SkillInput<'_>,
    sizes: &mut HashMap<ObjectId, u64>,
    plan: &mut UpdatePlan,
    progress: &dyn Progress,
) -> Result<Option<Vec<(SkillWork, Side)>>, UpdateError> {
    let (base, incoming, names, target) = (input.base, input.incoming, input.names, input.target);
    let aliases: BTreeSet<&String> = base
        .skills
        .iter()
        .chain(&incoming.skills)
        .map(|(alias, _)| alias)
        .collect();
    let mut out = Some(Vec::new());
    let mut new_homes = Vec::new();
    for bundle_alias in aliases {
        let (before, after) = (
            super::skill_tree(base, bundle_alias).map(|t| t.id),
            super::skill_tree(incoming, bundle_alias).map(|t| t.id),
        );
        if before == after {
            continue;
        }
        let key = (Kind::SkillBundle, bundle_alias.clone());
        let local_alias = names
            .names
            .get(&key)
            .cloned()
            .unwrap_or_else(|| bundle_alias.clone());
        let not_carried = |why: String| UpdateError::SkillNotCarried {
            alias: local_alias.clone(),
            why,
        };
        if !names.owned_base.contains(&key) && !names.owned_incoming.contains(&key) {
            return Err(not_carried(
                "it is this install's own skill bundle (the first import used it rather than \
                 adding one), and other agents may load it"
                    .to_string(),
            ));
        }
        let now = skill_dir(&target.root, &local_alias, &[&target.install])?;
        let then = match input.after {
            Some(after) => skill_dir(&target.root, &local_alias, &[after])?,
            None => None,
        };
        if let (Some(now), Some(then)) = (&now, &then) {
            if now != then {
                return Err(not_carried(format!(
                    "its directory would move from {} to {}",
                    now.display(),
                    then.display()
                )));
            }
        }
        let dir = match (now, then.clone()) {
            (Some(dir), _) => Some(dir),
            (None, Some(dir)) => {
                check_new_skill_home(target, input.after, &local_alias, bundle_alias, &dir)?;
                new_homes.push((format!("skill bundle {local_alias}"), dir.clone()));
                Some(dir)
            }
            (None, None) => None,
        };
        let local = match &dir {
            Some(dir) => capture(store, dir, progress)?,
            None => Captured {
                snapshot: None,
                tree: store.objects().write_tree(&empty_tree())?,
            },
        };
        let behind = left_behind(&[base, incoming], &format!("skills/{bundle_alias}/"));
        let skill_uncarried = |p: &[u8]| behind_path(&behind, p);
        let trees = ThreeTrees {
            base: before,
            local: local.tree,
            incoming: after,
        };
        let shown = format!("skill bundle {local_alias}: ");
        let merged = plan_files(store, &trees, &skill_uncarried, &shown, sizes, plan)?;
        match (merged, dir, &mut out) {
            (Some(side), Some(dir), Some(out)) => out.push((
                SkillWork {
                    alias: local_alias,
                    dir,
                    local,
                    merged: local.tree,
                    remove: then.is_none() && input.after.is_some(),
                },
                side,
            )),
            _ => out = None,
        }
    }
    super::check_overlaps(target, &new_homes)?;
    Ok(out)
}

/// Checks the directory `dir` of skill bundle `local_alias`, which the update adds, as an
/// import checks it: inside the install's place for skills (its overlaps with other trees are
/// checked once every new one is known).
fn check_new_skill_home(
    target: &super::Target,
    after: Option<&Install>,
    local_alias: &str,
    bundle_alias: &str,
    dir: &Path,
) -> Result<(), UpdateError> {
    let what = format!("skill bundle {local_alias}");
    let field = format!("skill_bundles.{bundle_alias}.directory");
    let raw = after
        .and_then(|a| a.typed.skill_bundles.get(local_alias))
        .and_then(|b| b.directory.clone());
    let configured = raw.as_deref().map(|raw| (field.as_str(), raw));
    super::dest::Homes::of(&target.root)?.confine_skill(dir, &what, configured)?;
    Ok(())
}

/// The merge base: the bundle `record` names, which must be in the store.
fn read_base(store: &Store, record: &Provenance) -> Result<source::StoredBundle, UpdateError> {
    read_base_root(store, record)?;
    Ok(source::read(store, record.snapshot, SourceKind::Snapshot)?)
}

/// The root tree of the snapshot `record` was last imported from (the merge base); an error
/// that says how to bring it back when the store no longer has it.
fn read_base_root(store: &Store, record: &Provenance) -> Result<ObjectId, UpdateError> {
    match store.objects().read_snapshot(&record.snapshot) {
        Ok(snapshot) => Ok(snapshot.root),
        Err(_) => Err(UpdateError::BaseMissing {
            alias: record.alias.clone(),
            snapshot: record.snapshot,
            short: record.snapshot.short(16),
            from: record.source.clone(),
        }),
    }
}

impl UpdatePlan {
    /// The plan before anything is merged: who, from what, to what, with no change listed.
    fn empty(
        req: &UpdateRequest<'_>,
        record: &Provenance,
        target: &super::Target,
        (incoming, content_id): (ObjectId, ObjectId),
        source: String,
    ) -> UpdatePlan {
        UpdatePlan {
            source,
            alias: record.alias.clone(),
            bundle_alias: record.bundle_alias.clone(),
            install: target.root.clone(),
            base: record.snapshot,
            incoming,
            content_id,
            up_to_date: false,
            taken: Vec::new(),
            deleted: Vec::new(),
            kept: Vec::new(),
            conflicts: Vec::new(),
            config_keys: Vec::new(),
            new_grants: Vec::new(),
            accept_grants: req.accept_grants,
            policy: req.conflicts,
            notes: Vec::new(),
            downgrade: None,
            allow_downgrade: req.allow_downgrade,
            work: None,
        }
    }
}

/// One directory's merge (the workspace, or a skill bundle's directory, its paths shown after
/// `shown`): lists in `plan` the paths taken, deleted and kept and the conflicts; the merged
/// side, or `None` when a conflict is left unresolved. Paths `untouched` holds are never
/// taken, deleted or replaced.
fn plan_files(
    store: &Store,
    trees: &ThreeTrees,
    untouched: &dyn Fn(&[u8]) -> bool,
    shown: &str,
    sizes: &mut HashMap<ObjectId, u64>,
    plan: &mut UpdatePlan,
) -> Result<Option<Side>, UpdateError> {
    let base_side = flatten(store, trees.base, sizes)?;
    let incoming_side = flatten(store, trees.incoming, sizes)?;
    let local_side = flatten(store, Some(trees.local), sizes)?;
    let file_plan = sync::files::plan(&base_side, &local_side, &incoming_side, untouched);
    let show = |path: &[u8]| format!("{shown}{}", String::from_utf8_lossy(path));
    for (path, decision) in &file_plan.paths {
        let is_file = |e: &Entry| e.kind != EntryKind::Dir;
        match decision {
            Decision::Take(e) if is_file(e) => plan.taken.push(show(path)),
            Decision::Delete if base_side.get(path).is_some_and(is_file) => {
                plan.deleted.push(show(path))
            }
            Decision::Keep(e) if is_file(e) => plan.kept.push(show(path)),
            _ => {}
        }
    }
    let stamp = Stamp::from_unix_secs(crate::clock::now_ns() / 1_000_000_000);
    Ok(match file_plan.resolve(plan.policy.engine(), &stamp) {
        Ok(merged) => {
            plan.conflicts
                .extend(merged.resolved.iter().map(|r| Conflict {
                    path: show(&r.path),
                    ..resolved_file_conflict(r)
                }));
            Some(merged.tree)
        }
        Err(refused) => {
            plan.conflicts
                .extend(refused.conflicts.iter().map(|c| Conflict {
                    path: show(&c.path),
                    ..refused_file_conflict(c)
                }));
            None
        }
    })
}

/// A conflict the policy resolved, as the plan lists it (its path as in its directory).
fn resolved_file_conflict(r: &sync::files::Resolved) -> Conflict {
    Conflict {
        path: String::from_utf8_lossy(&r.path).into_owned(),
        kind: r.kind.describe(),
        resolution: Some(match &r.how {
            sync::files::Resolution::KeptLocal => "kept local".to_string(),
            sync::files::Resolution::TookIncoming => "took incoming".to_string(),
            sync::files::Resolution::Copied { to } => {
                format!("copied to {}", String::from_utf8_lossy(to))
            }
        }),
    }
}

/// A conflict left unresolved, as the plan lists it (its path as in its directory).
fn refused_file_conflict(c: &sync::files::Unresolved) -> Conflict {
    Conflict {
        path: String::from_utf8_lossy(&c.path).into_owned(),
        kind: match c.why {
            sync::files::Why::Refused => c.kind.describe(),
            sync::files::Why::Uncarried => "taking upstream would replace a file no export carries",
        },
        resolution: None,
    }
}

/// The config merge, per key of the owned `entries` (dotted local paths): lists in `plan` the keys
/// and conflicts; the merged `config.toml`, or `None` when a conflict is left unresolved.
fn plan_config(
    base_fragment: &str,
    incoming_fragment: &str,
    names: &Names,
    entries: &[String],
    target: &super::Target,
    plan: &mut UpdatePlan,
) -> Result<Option<String>, UpdateError> {
    let base_text = merge::localize(base_fragment, &names.names, &names.owned_base)?;
    let incoming_text = merge::localize(incoming_fragment, &names.names, &names.owned_incoming)?;
    let entry_refs: Vec<&str> = entries.iter().map(String::as_str).collect();
    match sync::config::merge_config(
        &base_text,
        &target.old_config,
        &incoming_text,
        &entry_refs,
        plan.policy.engine(),
    ) {
        Ok(m) => {
            for d in &m.decisions {
                let key = sync::config::dotted(&d.path);
                let action = key_action(d, &key, &mut plan.conflicts);
                plan.config_keys.push(KeyChange { key, action });
            }
            Ok(Some(super::with_line_endings_of(
                &target.old_config,
                m.text,
            )))
        }
        Err(sync::config::ConfigMergeError::Refused { conflicts }) => {
            for c in conflicts {
                plan.conflicts.push(Conflict {
                    path: sync::config::dotted(&c.path),
                    kind: c.kind.describe(),
                    resolution: None,
                });
            }
            Ok(None)
        }
        Err(e) => Err(ImportError::Invalid {
            path: target.config_path.clone(),
            problem: e.to_string(),
        }
        .into()),
    }
}

/// The action word of config key `key`'s decision `d`; a resolved conflict is also listed
/// in `conflicts`.
fn key_action(
    d: &sync::config::KeyDecision,
    key: &str,
    conflicts: &mut Vec<Conflict>,
) -> &'static str {
    match &d.action {
        sync::config::KeyAction::Same => "same",
        sync::config::KeyAction::Take => "take",
        sync::config::KeyAction::Delete => "delete",
        sync::config::KeyAction::Keep => "keep",
        sync::config::KeyAction::KeepLocalDeletion => "keep-deletion",
        sync::config::KeyAction::Conflict {
            kind,
            took_incoming,
        } => {
            conflicts.push(Conflict {
                path: key.to_string(),
                kind: kind.describe(),
                resolution: Some(
                    if *took_incoming {
                        "took incoming"
                    } else {
                        "kept local"
                    }
                    .to_string(),
                ),
            });
            "conflict"
        }
    }
}

/// The provenance record after the update: `record` moved to the incoming snapshot, with the
/// entries of the incoming config fragment in local names.
fn record_after(
    record: &Provenance,
    incoming_snapshot: ObjectId,
    incoming_fragment: &str,
    names: &Names,
    source: String,
) -> Result<Provenance, UpdateError> {
    let mut after = record.clone();
    after.snapshot = incoming_snapshot;
    after.source = source;
    after.imported_at = rfc3339_utc(std::time::SystemTime::now());
    after.tool_version = env!("CARGO_PKG_VERSION").to_string();
    after.entries = names.fates(incoming_fragment)?;
    after.renamed = after
        .entries
        .iter()
        .filter(|(path, fate)| Kind::parse_prefix(path).is_some_and(|(_, a)| a != fate.local))
        .map(|(path, fate)| (path.clone(), fate.local.clone()))
        .collect();
    Ok(after)
}

/// Applies `plan` (see the module doc for the order). Refuses a plan with unresolved
/// conflicts or unaccepted new grants.
pub fn apply(
    store: &Store,
    plan: &UpdatePlan,
    progress: &dyn Progress,
) -> Result<Updated, UpdateError> {
    let states = states_dir(&plan.install, &plan.alias).join(STATES_FILE);
    if plan.up_to_date {
        return Ok(Updated {
            alias: plan.alias.clone(),
            written: false,
            backup: PathBuf::new(),
            states,
        });
    }
    if plan.refused() {
        return Err(UpdateError::Conflicts(
            plan.conflicts
                .iter()
                .filter(|c| c.resolution.is_none())
                .map(|c| format!("{} ({})", c.path, c.kind))
                .collect(),
        ));
    }
    if plan.grants_unaccepted() {
        return Err(UpdateError::NewGrants(
            plan.new_grants.iter().map(|g| g.path.clone()).collect(),
        ));
    }
    if let Some(change) = plan.unallowed_downgrade() {
        return Err(UpdateError::Downgrade(change.clone()));
    }
    let work = plan
        .work
        .as_ref()
        .expect("a plan that is not refused has its work");
    if work.changes_nothing() {
        // Nothing of the agent changes (an export with nothing new in it, or every change
        // already here): only the version imported is recorded, the next update's base and
        // what `sync` compares with. No state, backup or rewrite: a timer syncing an agent
        // whose author re-exports it unchanged leaves nothing behind.
        let _dir = lock_install(&plan.install)?;
        super::journal::refuse_pending(&plan.install)?;
        check_unchanged(store, work, progress)?;
        provenance::write(&plan.install, store.root(), &work.after_record)?;
        return Ok(Updated {
            alias: plan.alias.clone(),
            written: false,
            backup: PathBuf::new(),
            states,
        });
    }
    let backup = write_change(
        store,
        &Change {
            root: &plan.install,
            alias: &plan.alias,
            verb: "update",
            work,
        },
        progress,
    )?;
    Ok(Updated {
        alias: plan.alias.clone(),
        written: true,
        backup,
        states,
    })
}

/// Restores agent `alias` of `install` to the state before its last update (or rollback):
/// its workspace and config entries merged back three ways (a local edit since is kept, a
/// conflicting one refuses), its provenance as it was.
pub fn rollback(
    store: &Store,
    install: &Path,
    alias: &str,
    progress: &dyn Progress,
) -> Result<Updated, UpdateError> {
    let target = super::read_target(install)?;
    let dir = states_dir(&target.root, alias);
    let file = dir.join(STATES_FILE);
    let states = read_states(&file)?;
    let Some(last) = states.state.last() else {
        return Err(UpdateError::NotImported(format!(
            "agent {alias} has no update to roll back in {} (no record at {})",
            target.root.display(),
            file.display()
        )));
    };
    let before_config = read_state_text(&dir, &last.before_config)?;
    let after_config = read_state_text(&dir, &last.after_config)?;
    let workspace = merged_dir(&target.install, &target.root, alias);
    let local = capture(store, &workspace, progress)?;
    let plugin = crate::plugin::record_skill_alias(alias).is_some();
    let untouched = |p: &[u8]| !plugin && uncarried(&[], p);
    let merged_tree = merge_back(
        store,
        &last.after_tree,
        &local.tree,
        &last.before_tree,
        &untouched,
        "",
    )?;
    let new_config = config_back(&target, &last.entries, before_config, &after_config)?;
    let rolled_back = super::check_merged(
        &target.install,
        &target.root,
        &target.config_path,
        &new_config,
    )?;
    let mut skills = Vec::new();
    for skill in &last.skills {
        let installs = [&target.install, &rolled_back];
        let Some(dir) = skill_dir(&target.root, &skill.alias, &installs)? else {
            continue;
        };
        let local = capture(store, &dir, progress)?;
        let shown = format!("skill bundle {}: ", skill.alias);
        let merged = merge_back(
            store,
            &skill.after_tree,
            &local.tree,
            &skill.before_tree,
            &|_| false,
            &shown,
        )?;
        let configured = rolled_back.typed.skill_bundles.contains_key(&skill.alias);
        skills.push(SkillWork {
            alias: skill.alias.clone(),
            dir,
            local,
            remove: !configured && merged == empty_tree_id(store)?,
            merged,
        });
    }
    let current_record =
        provenance::read(&target.root, alias)?.unwrap_or_else(|| last.after_provenance.clone());
    let work = Work {
        config_path: target.config_path,
        config_target: target.config_target,
        old_config: target.old_config,
        new_config,
        workspace,
        local,
        merged_tree,
        skills,
        entries: last.entries.clone(),
        before_record: current_record,
        after_record: last.before_provenance.clone(),
    };
    let backup = write_change(
        store,
        &Change {
            root: &target.root,
            alias,
            verb: "rollback",
            work: &work,
        },
        progress,
    )?;
    Ok(Updated {
        alias: alias.to_string(),
        written: true,
        backup,
        states: file,
    })
}

/// The `config.toml` a rollback writes: `before` (the text before the change) when the
/// install's is still `after` (the text the change wrote); else `before` merged back three
/// ways over the change's `entries`, an edit made since refusing where it conflicts.
fn config_back(
    target: &super::Target,
    entries: &[String],
    before: String,
    after: &str,
) -> Result<String, UpdateError> {
    if target.old_config == after {
        return Ok(before);
    }
    let entries: Vec<&str> = entries.iter().map(String::as_str).collect();
    let merged = sync::config::merge_config(
        after,
        &target.old_config,
        &before,
        &entries,
        Conflicts::Refuse,
    )
    .map_err(|e| match e {
        sync::config::ConfigMergeError::Refused { conflicts } => UpdateError::RollbackConflicts(
            conflicts
                .iter()
                .map(|c| format!("{} ({})", sync::config::dotted(&c.path), c.kind.describe()))
                .collect(),
        ),
        other => UpdateError::Import(ImportError::Invalid {
            path: target.config_path.clone(),
            problem: other.to_string(),
        }),
    })?;
    Ok(super::with_line_endings_of(&target.old_config, merged.text))
}

/// The tree a rollback writes in one directory: the state before (`before`) merged three ways
/// against the state after (`after`, the base) and the directory as it is (`local`), so an
/// edit made since the change is kept; a conflicting one refuses, its path shown after
/// `shown`. Paths `untouched` holds stay as they are.
fn merge_back(
    store: &Store,
    after: &ObjectId,
    local: &ObjectId,
    before: &ObjectId,
    untouched: &dyn Fn(&[u8]) -> bool,
    shown: &str,
) -> Result<ObjectId, UpdateError> {
    let mut sizes = HashMap::new();
    let after_side = flatten(store, Some(*after), &mut sizes)?;
    let before_side = flatten(store, Some(*before), &mut sizes)?;
    let local_side = flatten(store, Some(*local), &mut sizes)?;
    let stamp = Stamp::from_unix_secs(crate::clock::now_ns() / 1_000_000_000);
    let files = sync::files::plan(&after_side, &local_side, &before_side, untouched)
        .resolve(Conflicts::Refuse, &stamp)
        .map_err(|r| {
            UpdateError::RollbackConflicts(
                r.conflicts
                    .iter()
                    .map(|c| {
                        format!(
                            "{shown}{} ({})",
                            String::from_utf8_lossy(&c.path),
                            c.kind.describe()
                        )
                    })
                    .collect(),
            )
        })?;
    build_tree(store, &files.tree, &sizes)
}

/// The provenance record of the agent to update: `alias`'s, or the one record of
/// `bundle_alias` whose agent the install still configures.
fn earlier_record(
    target: &super::Target,
    bundle_alias: &str,
    alias: Option<&str>,
) -> Result<Provenance, UpdateError> {
    let root = &target.root;
    if let Some(alias) = alias {
        let record = provenance::read(root, alias)?.ok_or_else(|| {
            UpdateError::NotImported(format!(
                "agent {alias} of {} was not imported by this tool (no record at {}): there is \
                 no base to merge against; import the bundle instead",
                root.display(),
                provenance::path(root, alias).display()
            ))
        })?;
        if record.bundle_alias != bundle_alias {
            return Err(UpdateError::NotImported(format!(
                "agent {alias} was imported from a bundle of agent {}, and this bundle is of \
                 agent {bundle_alias}: not an update of it",
                record.bundle_alias
            )));
        }
        return Ok(record);
    }
    let mut records = provenance::imports_of(root, bundle_alias)?;
    records.retain(|r| target.install.typed.agents.contains_key(&r.alias));
    match records.len() {
        1 => Ok(records.remove(0)),
        0 => Err(UpdateError::NotImported(format!(
            "no agent of {} was imported from a bundle of agent {bundle_alias}: nothing to \
             update; import it instead",
            root.display()
        ))),
        _ => Err(UpdateError::NotImported(format!(
            "agents {} of {} were each imported from a bundle of agent {bundle_alias}: name \
             the one to update with --as",
            records
                .iter()
                .map(|r| r.alias.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            root.display()
        ))),
    }
}

/// The local names of an update's entries.
struct Names {
    /// (kind, bundle alias) -> local alias, for every entry either bundle references.
    names: BTreeMap<(Kind, String), String>,
    /// The entries the first import added, of the base.
    owned_base: BTreeSet<(Kind, String)>,
    /// Those of the incoming bundle (with the entries the update adds).
    owned_incoming: BTreeSet<(Kind, String)>,
}

impl Names {
    fn of(
        record: &Provenance,
        base_fragment: &str,
        incoming_fragment: &str,
        install: &str,
    ) -> Result<Names, UpdateError> {
        let mut names = BTreeMap::new();
        let mut owned = BTreeSet::new();
        let base_entries = merge::fragment_aliases(base_fragment)?;
        if record.entries.is_empty() {
            // A record from before updates: only the agent is known to be the import's own;
            // every other entry keeps the name the import gave it (renamed, or its own).
            for (kind, alias) in &base_entries {
                let local = record
                    .renamed
                    .get(&kind.path_of(alias))
                    .cloned()
                    .unwrap_or_else(|| alias.clone());
                names.insert((*kind, alias.clone()), local);
            }
            names.insert(
                (Kind::Agent, record.bundle_alias.clone()),
                record.alias.clone(),
            );
            owned.insert((Kind::Agent, record.bundle_alias.clone()));
        } else {
            for (path, fate) in &record.entries {
                let Some((kind, alias)) = Kind::parse_prefix(path) else {
                    continue;
                };
                names.insert((kind, alias.to_string()), fate.local.clone());
                if fate.owned {
                    owned.insert((kind, alias.to_string()));
                }
            }
        }
        let owned_base: BTreeSet<_> = owned
            .iter()
            .filter(|k| base_entries.contains(k))
            .cloned()
            .collect();
        let mut owned_incoming = BTreeSet::new();
        let taken = merge::taken_aliases(install)?;
        for key in merge::fragment_aliases(incoming_fragment)? {
            if names.contains_key(&key) {
                if owned.contains(&key) {
                    owned_incoming.insert(key);
                }
                continue;
            }
            // An entry the update adds: its own name when free, else a fresh one.
            let (kind, alias) = &key;
            let used: BTreeSet<String> = taken
                .iter()
                .filter(|(k, _)| k == kind)
                .map(|(_, a)| a.clone())
                .chain(
                    names
                        .iter()
                        .filter(|((k, _), _)| k == kind)
                        .map(|(_, l)| l.clone()),
                )
                .collect();
            let local = if used.contains(alias) {
                merge::fresh_alias(alias, &used)
            } else {
                alias.clone()
            };
            names.insert(key.clone(), local);
            owned_incoming.insert(key);
        }
        Ok(Names {
            names,
            owned_base,
            owned_incoming,
        })
    }

    /// The dotted local paths of every owned entry, for the config merge.
    fn entry_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .owned_base
            .iter()
            .chain(&self.owned_incoming)
            .map(|key| {
                let local = &self.names[key];
                let segs = if key.0 == Kind::McpServer {
                    vec!["mcp".to_string(), "servers".to_string(), local.clone()]
                } else {
                    key.0.segments(local)
                };
                sync::config::dotted(&segs)
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The provenance entries after the update: those of the incoming bundle.
    fn fates(&self, incoming_fragment: &str) -> Result<BTreeMap<String, EntryFate>, UpdateError> {
        Ok(merge::fragment_aliases(incoming_fragment)?
            .into_iter()
            .filter_map(|key| {
                let local = self.names.get(&key)?.clone();
                let owned = self.owned_incoming.contains(&key);
                Some((key.0.path_of(&key.1), EntryFate { local, owned }))
            })
            .collect())
    }
}

/// Paths under `prefix` (`workspace/`, `skills/<alias>/`) the bundles' manifests list as left
/// behind, relative to it.
fn left_behind(bundles: &[&source::StoredBundle], prefix: &str) -> Vec<String> {
    bundles
        .iter()
        .flat_map(|b| b.manifest.dropped.iter())
        .filter_map(|d| d.path.strip_prefix(prefix).map(str::to_string))
        .collect()
}

/// Whether workspace path `path` is one no export carries: ZeroClaw's memory rule, or at or
/// under a path in `behind`.
fn uncarried(behind: &[String], path: &[u8]) -> bool {
    !crate::agent::workspace_entry_included(&String::from_utf8_lossy(path))
        || behind_path(behind, path)
}

/// Whether `path` is at or under a path in `behind`.
fn behind_path(behind: &[String], path: &[u8]) -> bool {
    let text = String::from_utf8_lossy(path);
    behind.iter().any(|b| {
        text == b.as_str()
            || text
                .strip_prefix(b.as_str())
                .is_some_and(|r| r.starts_with('/'))
    })
}

/// New grants: the incoming bundle's that the base does not have, by kind, path and detail,
/// with local paths.
fn new_grants(
    base: &source::StoredBundle,
    incoming: &source::StoredBundle,
    names: &BTreeMap<(Kind, String), String>,
) -> Result<Vec<Grant>, UpdateError> {
    let grants = |b: &source::StoredBundle| {
        crate::agent::bundle_grants(&b.manifest, &b.fragment).map_err(|source| {
            ImportError::Bundle {
                file: CONFIG_FILE,
                source,
            }
        })
    };
    let key = |g: &Grant| (format!("{:?}", g.kind), g.path.clone(), g.detail.clone());
    let had: BTreeSet<_> = grants(base)?.iter().filter(|g| !g.stale).map(key).collect();
    let added = grants(incoming)?
        .into_iter()
        .filter(|g| !had.contains(&key(g)))
        .collect();
    Ok(localized(added, names))
}

/// `grants` less the stale ones, with local paths.
fn localized(grants: Vec<Grant>, names: &BTreeMap<(Kind, String), String>) -> Vec<Grant> {
    grants
        .into_iter()
        .filter(|g| !g.stale)
        .map(|g| Grant {
            path: localize_path(&g.path, names),
            ..g
        })
        .collect()
}

/// A dotted bundle path in local names (the longest entry prefix that `names` renames).
fn localize_path(path: &str, names: &BTreeMap<(Kind, String), String>) -> String {
    let mut best: Option<(usize, String)> = None;
    for ((kind, alias), local) in names {
        let prefix = kind.path_of(alias);
        let holds = path == prefix
            || path
                .strip_prefix(&prefix)
                .is_some_and(|r| r.starts_with('.') || r.starts_with('['));
        if holds && best.as_ref().is_none_or(|(len, _)| prefix.len() > *len) {
            best = Some((
                prefix.len(),
                format!("{}{}", kind.path_of(local), &path[prefix.len()..]),
            ));
        }
    }
    best.map_or_else(|| path.to_string(), |(_, p)| p)
}

/// Captures the workspace `dir` whole into the store (a snapshot record: the state before);
/// refused when the capture skipped anything (a symlink, a socket), which the publish of the
/// merged tree would not keep. A missing workspace is the empty tree.
fn capture(store: &Store, dir: &Path, progress: &dyn Progress) -> Result<Captured, UpdateError> {
    if fs::symlink_metadata(dir).is_err() {
        let tree = store.objects().write_tree(&empty_tree())?;
        return Ok(Captured {
            snapshot: None,
            tree,
        });
    }
    let fail = |message: String| UpdateError::Capture {
        path: dir.to_path_buf(),
        message,
    };
    let source = crate::export::SourceDir::open(dir).map_err(|e| fail(format!("{e:#}")))?;
    let snap = crate::export::capture_dir(store, source, None, progress)
        .map_err(|e| fail(format!("{e:#}")))?;
    if let Some(first) = snap.snapshot.report.skipped.first() {
        return Err(fail(format!(
            "it holds {} entr{} an update cannot keep (the first: {} {:?}); the merged \
             workspace replaces the directory, so move {} out of it first",
            snap.snapshot.report.skipped.len(),
            if snap.snapshot.report.skipped.len() == 1 {
                "y"
            } else {
                "ies"
            },
            first.path,
            first.reason,
            if snap.snapshot.report.skipped.len() == 1 {
                "it"
            } else {
                "them"
            },
        )));
    }
    Ok(Captured {
        snapshot: Some(snap.id),
        tree: snap.snapshot.root,
    })
}

/// The tree of workspace `dir` as it is now (the empty tree when it does not exist).
pub(super) fn capture_tree(
    store: &Store,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<ObjectId, UpdateError> {
    Ok(capture(store, dir, progress)?.tree)
}

/// The id of the empty tree (written, so it is in the store).
fn empty_tree_id(store: &Store) -> Result<ObjectId, StoreError> {
    store.objects().write_tree(&empty_tree())
}

fn empty_tree() -> Tree {
    Tree::from_entries(Vec::new()).expect("an empty tree is valid")
}

/// Flattens stored tree `tree` (none: empty) into a [`Side`], noting each blob's size.
fn flatten(
    store: &Store,
    tree: Option<ObjectId>,
    sizes: &mut HashMap<ObjectId, u64>,
) -> Result<Side, StoreError> {
    let mut side = Side::new();
    let Some(tree) = tree else {
        return Ok(side);
    };
    let mut stack: Vec<(Vec<u8>, ObjectId)> = vec![(Vec::new(), tree)];
    while let Some((prefix, id)) = stack.pop() {
        for e in store.objects().read_tree(&id)?.entries() {
            let mut path = prefix.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(&e.name);
            if e.kind == EntryKind::Dir {
                side.insert(path.clone(), Entry::dir());
                stack.push((path, e.id));
            } else {
                sizes.insert(e.id, e.size);
                side.insert(path, Entry::file(e.mode, e.id));
            }
        }
    }
    Ok(side)
}

/// A directory being built from a [`Side`].
#[derive(Default)]
struct DirNode {
    files: BTreeMap<Vec<u8>, Entry>,
    dirs: BTreeMap<Vec<u8>, DirNode>,
}

/// Writes the tree objects of `side` (files and empty directories) and returns the root.
fn build_tree(
    store: &Store,
    side: &Side,
    sizes: &HashMap<ObjectId, u64>,
) -> Result<ObjectId, UpdateError> {
    let mut root = DirNode::default();
    for (path, entry) in side {
        let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
        let (last, dirs) = parts.split_last().expect("a path has a component");
        let mut node = &mut root;
        for d in dirs {
            node = node.dirs.entry(d.to_vec()).or_default();
        }
        if entry.kind == EntryKind::Dir {
            node.dirs.entry(last.to_vec()).or_default();
        } else {
            node.files.insert(last.to_vec(), *entry);
        }
    }
    Ok(write_node(store, &root, sizes)?.0)
}

fn write_node(
    store: &Store,
    node: &DirNode,
    sizes: &HashMap<ObjectId, u64>,
) -> Result<(ObjectId, u64), UpdateError> {
    let mut entries = Vec::new();
    let mut total = 0u64;
    for (name, e) in &node.files {
        let size = sizes.get(&e.id).copied().unwrap_or(0);
        total += size;
        entries.push(TreeEntry::file(name.clone(), e.mode, size, e.id));
    }
    for (name, sub) in &node.dirs {
        let (id, size) = write_node(store, sub, sizes)?;
        total += size;
        entries.push(TreeEntry::dir(name.clone(), size, id));
    }
    let tree = Tree::from_entries(entries).map_err(|e| UpdateError::Capture {
        path: PathBuf::from("<merged workspace>"),
        message: e.to_string(),
    })?;
    Ok((store.objects().write_tree(&tree)?, total))
}

/// One write of an update or rollback.
struct Change<'a> {
    root: &'a Path,
    alias: &'a str,
    verb: &'static str,
    work: &'a Work,
}

const STATES_FILE: &str = "states.toml";

/// The record of an agent's last states, newest last.
#[derive(Debug, Default, Serialize, Deserialize)]
struct States {
    #[serde(default)]
    state: Vec<State>,
}

/// One state: what an update or rollback replaced, and what it wrote. The intent journal
/// (`super::journal`) holds one while its change is under way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct State {
    pub(super) seq: u64,
    pub(super) verb: String,
    at: String,
    /// The workspace snapshot before (a snapshot record; none when there was no workspace).
    before_snapshot: Option<ObjectId>,
    pub(super) before_tree: ObjectId,
    /// The snapshot record of the workspace written.
    pub(super) after_snapshot: ObjectId,
    pub(super) after_tree: ObjectId,
    /// `config.toml` before and after, file names in the state directory.
    pub(super) before_config: String,
    pub(super) after_config: String,
    /// The config entries merged (dotted local paths).
    entries: Vec<String>,
    before_provenance: Provenance,
    after_provenance: Provenance,
    /// The skill bundles' directories the change replaced beside the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) skills: Vec<SkillState>,
}

/// What a change replaced in one skill bundle's directory, and what it wrote there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SkillState {
    /// The local skill bundle; its directory is where the install (after the change, or
    /// before it when the change removes it) puts it.
    pub(super) alias: String,
    /// The directory's snapshot before (a snapshot record).
    before_snapshot: ObjectId,
    pub(super) before_tree: ObjectId,
    /// The snapshot record of the tree written.
    pub(super) after_snapshot: ObjectId,
    pub(super) after_tree: ObjectId,
    /// The directory is removed once emptied (see `SkillWork::remove`).
    #[serde(default)]
    pub(super) remove: bool,
}

/// The directory of skill bundle `alias` in the first of `installs` (rooted at `root`) that
/// configures it.
pub(super) fn skill_dir(
    root: &Path,
    alias: &str,
    installs: &[&Install],
) -> Result<Option<PathBuf>, UpdateError> {
    let Some(install) = installs
        .iter()
        .find(|i| i.typed.skill_bundles.contains_key(alias))
    else {
        return Ok(None);
    };
    zeroclaw_config::skill_bundles::resolve_directory(&install.typed, root, alias)
        .map(Some)
        .map_err(|e| {
            ImportError::Invalid {
                path: root.join(CONFIG_FILE),
                problem: format!("skill bundle {alias}: {e}"),
            }
            .into()
        })
}

/// The directory an update of record `alias` merges three ways: agent `alias`'s workspace,
/// or for an Agent Plugin's record (`plugin.<alias>`) the plugin tree the import wrote.
pub(super) fn merged_dir(install: &Install, root: &Path, alias: &str) -> PathBuf {
    match crate::plugin::record_skill_alias(alias) {
        Some(skill_alias) => root.join(crate::plugin::PLUGINS_DIR).join(skill_alias),
        None => install.typed.agent_workspace_dir(alias),
    }
}

/// What [`merged_dir`] is, for the operator.
pub(super) fn merged_dir_noun(alias: &str) -> String {
    match crate::plugin::record_skill_alias(alias) {
        Some(skill_alias) => format!("the Agent Plugin tree of skill bundle {skill_alias}"),
        None => format!("the workspace of agent {alias}"),
    }
}

/// The directory of agent `alias`'s states (and of its intent journal) in install `root`.
pub(super) fn states_dir(root: &Path, alias: &str) -> PathBuf {
    root.join(STATES_DIR).join(alias)
}

fn read_states(file: &Path) -> Result<States, UpdateError> {
    let text = match crate::sys::read_small_text(file, 1 << 20, "an update state file") {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(States::default()),
        Err(e) => {
            return Err(UpdateError::State {
                path: file.to_path_buf(),
                message: e.to_string(),
            })
        }
    };
    toml::from_str(&text).map_err(|e| UpdateError::State {
        path: file.to_path_buf(),
        message: e.message().to_string(),
    })
}

/// The text of state file `name` (a `config.toml` before or after) in state directory `dir`.
pub(super) fn read_state_text(dir: &Path, name: &str) -> Result<String, UpdateError> {
    let path = dir.join(name);
    crate::sys::read_small_text(
        &path,
        crate::agent::CONFIG_CAP,
        "an update state's config.toml",
    )
    .map_err(|e| UpdateError::State {
        path: path.clone(),
        message: e.to_string(),
    })
}

/// Writes `text` at `dest`, atomically and owner-only (not yet durable: see [`sync_dir`]).
pub(super) fn write_private(store: &Store, dest: &Path, text: &str) -> Result<(), UpdateError> {
    let req = FileRequest {
        dest,
        force: true,
        store: store.root(),
        noun: "update state",
        cancel: None,
        private: true,
        keep: None,
    };
    publish::publish_file(&req, |out: &mut dyn std::io::Write| {
        out.write_all(text.as_bytes())
    })
    .map_err(|e| UpdateError::State {
        path: dest.to_path_buf(),
        message: e.to_string(),
    })
}

/// Makes the names in directory `dir` durable (fsync(2) of the directory: a rename or unlink
/// in it survives a crash once this returns).
pub(super) fn sync_dir(dir: &Path) -> Result<(), UpdateError> {
    sys::open_dir_path(dir)
        .and_then(|fd| sys::fsync(&fd))
        .map_err(|e| UpdateError::State {
            path: dir.to_path_buf(),
            message: format!("could not make it durable (fsync): {e}"),
        })
}

/// Commits a snapshot record of tree `root` (so it stays reachable), `what` naming it.
fn record_tree(store: &Store, root: ObjectId, what: String) -> Result<ObjectId, UpdateError> {
    let lock = store.write_lock()?;
    let snap = Snapshot {
        root,
        created_unix_ns: i128::from(crate::clock::now_ns()),
        host: crate::sys::hostname(),
        kind: SnapshotKind::Tree,
        source: what,
        agent: None,
        name: None,
        parent: None,
        report: CaptureReport::default(),
    };
    Ok(store
        .catalog()
        .commit_snapshot_of_source(&lock, snap, None)?
        .0)
}

/// The writes (see the module doc); returns the backup of `config.toml`.
fn write_change(
    store: &Store,
    change: &Change<'_>,
    progress: &dyn Progress,
) -> Result<PathBuf, UpdateError> {
    let work = change.work;
    let root = change.root;
    // Held until the last write: the lock goes with the descriptor.
    let _dir = lock_install(root)?;
    super::journal::refuse_pending(root)?;
    let keep = check_unchanged(store, work, progress)?;

    // 1. The state: both config texts and both trees, kept reachable.
    let state = prepare_state(store, change)?;
    progress
        .check_cancel()
        .map_err(|_| ImportError::Interrupted)?;

    // 2. The intent: from here on, a kill ends (after `recover`) in the state after.
    crate::hooks::seam("update-step", "intent");
    let dir = states_dir(root, change.alias);
    super::journal::begin(store, &dir, &state)?;
    let _changing = progress.cancel().map(|c| c.changing_install(root));

    // 3. The workspace and skill directories, each through the staged publish (unless
    // nothing changes in it).
    crate::hooks::seam("update-step", "trees");
    for (i, (what, dir, tree)) in work.changed_trees(change.alias).into_iter().enumerate() {
        if let Err(e) = publish_tree(store, &dir, tree, progress) {
            return Err(abandon(
                store,
                change,
                &state,
                i == 0,
                publish_error(what, &dir, e),
            ));
        }
    }

    // 4. Provenance, 5. backup, 6. config.toml last, 7. the state kept, the intent done.
    let tail = Tail {
        root,
        alias: change.alias,
        state: &state,
        before_config: &work.old_config,
        after_config: &work.new_config,
        config_path: &work.config_path,
        config_target: &work.config_target,
        publish: Vec::new(),
        remove: work
            .skills
            .iter()
            .filter(|s| s.remove)
            .map(|s| s.dir.clone())
            .collect(),
        write_config: true,
        keep,
    };
    let backup = finish(store, &tail, progress).map_err(|e| unfinished(change, e))?;
    Ok(backup.expect("a change that writes config.toml has a backup"))
}

/// A publish failed after the intent was written: when it was the change's first (`first`)
/// and left its directory as it was (every publish failure but a failed restore or fsync),
/// the intent is withdrawn and nothing was written; otherwise the change is left for
/// `recover` to finish.
fn abandon(
    store: &Store,
    change: &Change<'_>,
    state: &State,
    first: bool,
    failed: (UpdateError, bool),
) -> UpdateError {
    let (error, unchanged) = failed;
    if !(first && unchanged) {
        return unfinished(change, error);
    }
    let dir = states_dir(change.root, change.alias);
    if let Err(e) = super::journal::end(&dir) {
        return unfinished(change, e);
    }
    // Best effort: the state after is no longer going to be.
    let skill_snapshots = state.skills.iter().map(|s| &s.after_snapshot);
    for id in [&state.after_snapshot].into_iter().chain(skill_snapshots) {
        let _ = store.maintenance().forget(id);
    }
    error
}

/// `error`, with what to run to finish the change it cut short.
fn unfinished(change: &Change<'_>, error: UpdateError) -> UpdateError {
    UpdateError::Unfinished {
        verb: change.verb,
        alias: change.alias.to_string(),
        install: change.root.to_path_buf(),
        error: chain(&error),
    }
}

/// `error` and its causes, as `: `-separated text.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Where the agent stands when the writes after the intent run, and what they write.
pub(super) struct Tail<'a> {
    pub(super) root: &'a Path,
    pub(super) alias: &'a str,
    pub(super) state: &'a State,
    pub(super) before_config: &'a str,
    pub(super) after_config: &'a str,
    pub(super) config_path: &'a Path,
    pub(super) config_target: &'a Path,
    /// The trees still as before, to publish as after: what, where, which tree.
    pub(super) publish: Vec<(String, PathBuf, ObjectId)>,
    /// The emptied directories the change removes (skill bundles the config after drops).
    pub(super) remove: Vec<PathBuf>,
    /// `config.toml` still holds the text before: back it up and write the one after.
    pub(super) write_config: bool,
    /// The mode and owner `config.toml` keeps.
    pub(super) keep: Keep,
}

/// The writes after the intent, each one idempotent, so that `recover` finishes a change by
/// running them again: the trees still as before (`tail.publish`), provenance, the backup and
/// `config.toml` (when `tail.write_config`), the state kept, the intent removed. Returns the
/// backup written.
pub(super) fn finish(
    store: &Store,
    tail: &Tail<'_>,
    progress: &dyn Progress,
) -> Result<Option<PathBuf>, UpdateError> {
    let state = tail.state;
    for (what, dir, tree) in &tail.publish {
        publish_tree(store, dir, *tree, progress)
            .map_err(|e| publish_error(what.clone(), dir, e).0)?;
    }
    for dir in &tail.remove {
        remove_emptied(dir)?;
    }
    crate::hooks::seam("update-step", "provenance");
    provenance::write(tail.root, store.root(), &state.after_provenance)?;
    crate::hooks::seam("update-step", "config");
    let backup = if tail.write_config {
        let backup = super::backup_path(tail.config_path);
        let before = tail.before_config.to_string();
        super::write_file(store, &backup, false, tail.keep, None, before)?;
        if tail.after_config != tail.before_config {
            let after = tail.after_config.to_string();
            super::write_file(store, tail.config_target, true, tail.keep, None, after)?;
        }
        Some(backup)
    } else {
        None
    };
    // What the intent's removal must not outlive: the new config.toml and provenance names.
    for file in [
        tail.config_target.to_path_buf(),
        provenance::path(tail.root, tail.alias),
    ] {
        if let Some(dir) = file.parent() {
            sync_dir(dir)?;
        }
    }
    crate::hooks::seam("update-step", "states");
    commit_state(store, tail.root, tail.alias, state)?;
    super::journal::end(&states_dir(tail.root, tail.alias))?;
    Ok(backup)
}

/// Removes the emptied directory `dir` (gone already: done), durably.
fn remove_emptied(dir: &Path) -> Result<(), UpdateError> {
    match fs::remove_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(UpdateError::State {
                path: dir.to_path_buf(),
                message: format!("could not remove the emptied directory: {e}"),
            })
        }
    }
    match dir.parent() {
        Some(parent) => sync_dir(parent),
        None => Ok(()),
    }
}

/// Opens the install directory `root` and takes its exclusive lock (held while the returned
/// descriptor lives); `Busy` when another writer holds it.
pub(super) fn lock_install(root: &Path) -> Result<std::os::fd::OwnedFd, UpdateError> {
    let dir = sys::open_dir_path(root).map_err(|source| ImportError::Read {
        path: root.to_path_buf(),
        source,
    })?;
    if !sys::try_lock_exclusive(dir.as_fd()).map_err(|source| ImportError::Read {
        path: root.to_path_buf(),
        source,
    })? {
        return Err(ImportError::Busy {
            path: root.to_path_buf(),
        }
        .into());
    }
    Ok(dir)
}

/// Checks that `config.toml` and the workspace are as planned; returns the mode and owner
/// the config file keeps.
fn check_unchanged(
    store: &Store,
    work: &Work,
    progress: &dyn Progress,
) -> Result<Keep, UpdateError> {
    let changed_config = || ImportError::ConfigChanged {
        path: work.config_path.clone(),
    };
    if super::config_target(&work.config_path)? != work.config_target {
        return Err(changed_config().into());
    }
    let (now, meta) = super::read_config(&work.config_target)?;
    if now != work.old_config {
        return Err(changed_config().into());
    }
    let again = capture(store, &work.workspace, progress)?;
    if again.tree != work.local.tree {
        return Err(UpdateError::Changed(work.workspace.clone()));
    }
    for skill in &work.skills {
        if capture(store, &skill.dir, progress)?.tree != skill.local.tree {
            return Err(UpdateError::Changed(skill.dir.clone()));
        }
    }
    Ok(keep_of(&meta))
}

/// The mode and owner of `config.toml` as `meta` describes it, which a new one keeps.
pub(super) fn keep_of(meta: &fs::Metadata) -> Keep {
    Keep {
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
    }
}

/// Writes what the state of `change` needs before the intent names it: both `config.toml`
/// texts (durable) and snapshot records of both workspace trees (reachable). Nothing in
/// `states.toml` yet: [`commit_state`] adds the state once the change is done.
fn prepare_state(store: &Store, change: &Change<'_>) -> Result<State, UpdateError> {
    let work = change.work;
    let root = change.root;
    let states_dir = states_dir(root, change.alias);
    fs::create_dir_all(&states_dir).map_err(|e| UpdateError::State {
        path: states_dir.clone(),
        message: e.to_string(),
    })?;
    let states = read_states(&states_dir.join(STATES_FILE))?;
    let seq = states.state.last().map_or(1, |s| s.seq + 1);
    let before_config = format!("{seq}.before.toml");
    let after_config = format!("{seq}.after.toml");
    write_private(store, &states_dir.join(&before_config), &work.old_config)?;
    write_private(store, &states_dir.join(&after_config), &work.new_config)?;
    let place = format!("agent {} at {}", change.alias, root.display());
    let before_snapshot = match work.local.snapshot {
        Some(id) => Some(id),
        None => Some(record_tree(
            store,
            work.local.tree,
            format!("before {} of {place}", change.verb),
        )?),
    };
    let after_snapshot = record_tree(
        store,
        work.merged_tree,
        format!("{} of {place}", change.verb),
    )?;
    let mut skills = Vec::new();
    for skill in &work.skills {
        let place = format!("skill bundle {} at {}", skill.alias, root.display());
        skills.push(SkillState {
            alias: skill.alias.clone(),
            before_snapshot: match skill.local.snapshot {
                Some(id) => id,
                None => record_tree(
                    store,
                    skill.local.tree,
                    format!("before {} of {place}", change.verb),
                )?,
            },
            before_tree: skill.local.tree,
            after_snapshot: record_tree(
                store,
                skill.merged,
                format!("{} of {place}", change.verb),
            )?,
            after_tree: skill.merged,
            remove: skill.remove,
        });
    }
    Ok(State {
        seq,
        verb: change.verb.to_string(),
        at: rfc3339_utc(std::time::SystemTime::now()),
        before_snapshot,
        before_tree: work.local.tree,
        after_snapshot,
        after_tree: work.merged_tree,
        before_config,
        after_config,
        entries: work.entries.clone(),
        before_provenance: work.before_record.clone(),
        after_provenance: work.after_record.clone(),
        skills,
    })
}

/// Adds `state` to the agent's `states.toml` (once: a state already there is not added
/// again), then releases the states beyond the last [`KEEP_STATES`].
fn commit_state(store: &Store, root: &Path, alias: &str, state: &State) -> Result<(), UpdateError> {
    let states_dir = states_dir(root, alias);
    let states_file = states_dir.join(STATES_FILE);
    let mut states = read_states(&states_file)?;
    if states.state.iter().any(|s| s.seq == state.seq) {
        return Ok(());
    }
    states.state.push(state.clone());
    let dropped: Vec<State> = if states.state.len() > KEEP_STATES {
        let n = states.state.len() - KEEP_STATES;
        states.state.drain(..n).collect()
    } else {
        Vec::new()
    };
    let text = toml::to_string(&states).map_err(|e| UpdateError::State {
        path: states_file.clone(),
        message: e.to_string(),
    })?;
    write_private(store, &states_file, &text)?;
    sync_dir(&states_dir)?;
    for old in dropped {
        // Best effort: a state no longer kept releases its snapshots and texts.
        let skill_snapshots = old
            .skills
            .iter()
            .flat_map(|s| [&s.before_snapshot, &s.after_snapshot]);
        for id in old
            .before_snapshot
            .iter()
            .chain([&old.after_snapshot])
            .chain(skill_snapshots)
        {
            let _ = store.maintenance().forget(id);
        }
        let _ = fs::remove_file(states_dir.join(&old.before_config));
        let _ = fs::remove_file(states_dir.join(&old.after_config));
    }
    Ok(())
}

/// Publishes stored tree `tree` in place of the agent's workspace `workspace`, staged.
fn publish_tree(
    store: &Store,
    workspace: &Path,
    tree: ObjectId,
    progress: &dyn Progress,
) -> Result<(), publish::PublishError> {
    let req = PublishRequest {
        dest: workspace,
        force: true,
        sources: &[],
        store: Some(store.root()),
        bundle: super::NO_MARKER,
    };
    let admitted = publish::check(&req)?;
    let reader = store.objects().reader();
    publish::publish_to(&reader, &tree, &admitted, None, progress)?;
    progress.finish();
    Ok(())
}

/// A failed publish of `what` at `dir`, as an update error, and whether it left `dir` as it
/// was (every failure but a failed restore or fsync).
fn publish_error(what: String, dir: &Path, source: publish::PublishError) -> (UpdateError, bool) {
    let unchanged = !matches!(
        source,
        publish::PublishError::RestoreFailed { .. } | publish::PublishError::NotDurable { .. }
    );
    let error = ImportError::Publish {
        what,
        path: dir.to_path_buf(),
        source: Box::new(source),
    };
    (error.into(), unchanged)
}
