//! `import`: an agent bundle into a ZeroClaw install, pinned to a content id. The entry is two
//! calls, so a caller can show the plan and ask before anything is written:
//! [`plan`] captures the source into the store (`source`), reads the bundle from that
//! snapshot's objects only, checks `--expect`, merges the config fragment into the install's
//! `config.toml` text (`merge`; the result keeps the file's CRLF line endings when it has
//! them), loads the result with ZeroClaw's own loader and runs its `validate()`, and resolves
//! where the files go and what they may replace (`dest`), all without writing to the install;
//! [`apply`] then writes, in this order:
//!
//! 1. the `workspace/` and `skills/<alias>/` trees, each through the staged publish
//!    (`publish::publish_to`: staged beside the destination, synced, renamed into place);
//! 2. the provenance record (`crate::provenance`);
//! 3. a timestamped backup of `config.toml` beside it (`config.toml.<UTC time>.bak`, in the
//!    install even when `config.toml` is a symlink: the backup holds the install's secrets
//!    and stays out of the directory the link points into, e.g. a dotfiles repository);
//! 4. `config.toml` itself, last: staged, fsynced, renamed over the old one, with the mode and
//!    owner the old one had. A `config.toml` that is a symlink is written through: the file it
//!    resolves to is staged in that file's directory and replaced, the link is kept.
//!
//! A failure before step 4 removes what steps 1-3 created (a destination that was replaced
//! cannot be put back), so `config.toml` is unchanged and nothing half-written is left; a
//! process killed in the middle of a publish leaves a staging directory that
//! `zeroclaw-bundle recover <dest>` removes, and a tree published before the kill, which no
//! config references, is refused by the next import until `--force` (which replaces only a
//! directory holding exactly the tree the import publishes; anything else needs
//! `--replace PATH`). An exclusive `flock` on the install directory keeps two imports apart,
//! and `config.toml` (and where its symlink points) is compared with what was planned just
//! before it is replaced.
//!
//! Test hooks (`crate::hooks`): seam `import-step` with path `trees`, `provenance`, `backup`,
//! `config` before each step.

mod dest;
mod error;
pub mod journal;
pub mod merge;
mod plugin;
pub mod source;
pub mod update;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::fd::AsFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{EntryKind, ObjectId, Store};

use crate::agent::{
    rfc3339_utc, Dropped, Grant, Install, CONFIG_FILE, MANIFEST_FILE, MANIFEST_HEADER,
};
use crate::progress::{Progress, Silent};
use crate::publish::{self, BundleMarker, FileRequest, Keep, PublishRequest};
use crate::{hooks, provenance, sys};

pub use dest::Replacing;
pub use error::ImportError;
pub use merge::{Action, Decision, Kind, MapArg};
pub use source::SourceKind;

/// What to import where.
#[derive(Debug, Clone, Copy)]
pub struct ImportRequest<'a> {
    /// The source: a bundle directory, a pack file, `REMOTE/REF`, or a snapshot ref.
    pub source: &'a OsStr,
    /// The install root (the directory of `config.toml`).
    pub install: &'a Path,
    /// `--as`: the agent's local alias.
    pub agent_as: Option<&'a str>,
    /// `--map KIND.OLD=NEW`s.
    pub maps: &'a [MapArg],
    /// `--expect`: the content id that was reviewed.
    pub expect: Option<&'a str>,
    /// `--force`: replace a workspace or skill directory that holds exactly the tree the
    /// import publishes there (what an interrupted import of the same bundle leaves).
    pub force: bool,
    /// `--replace PATH`s: directories the import may replace whatever they hold (each must
    /// be one it publishes into).
    pub replace: &'a [PathBuf],
    /// `--require-signed` (or the store's `require_signed`): the snapshot must carry a
    /// signature by a key these allowed signers trust, checked before it becomes visible in
    /// the store (as [`crate::Bundles::require_signed`] checks it).
    pub require: Option<&'a crate::sign::AllowedSigners>,
    /// `--update ALIAS`: the bundle is a newer version of local agent ALIAS, which an earlier
    /// import made from a bundle of the same agent; the import is that agent's update in
    /// place (an error when it is not). Without it, an import of a bundle whose agent this
    /// install imported before is an update of that agent anyway (see [`ImportPlan::update`]).
    pub update: Option<&'a str>,
    /// What an update in place does with conflicting paths and keys.
    pub conflicts: update::ConflictPolicy,
    /// The operator accepted the grants an update in place adds.
    pub accept_grants: bool,
    /// The operator allowed an update in place to an older version of an Agent Plugin.
    pub allow_downgrade: bool,
    /// `--attach AGENT`: an Agent Plugin's skill bundle and MCP bundle are added to local agent
    /// AGENT's `skill_bundles` and `mcp_bundles` (without it, no agent reaches them).
    pub attach: Option<&'a str>,
}

/// No source and no install (both empty paths): a base for `ImportRequest { source, install,
/// ..Default::default() }`, which keeps an embedder's code building as options are added.
impl Default for ImportRequest<'_> {
    fn default() -> Self {
        ImportRequest {
            source: OsStr::new(""),
            install: Path::new(""),
            agent_as: None,
            maps: &[],
            expect: None,
            force: false,
            replace: &[],
            require: None,
            update: None,
            conflicts: update::ConflictPolicy::Refuse,
            accept_grants: false,
            allow_downgrade: false,
            attach: None,
        }
    }
}

/// A tree the import publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreePlan {
    /// What it is, for the operator (`the workspace of agent x`).
    pub what: String,
    /// Its path in the bundle (`workspace`, `skills/tools`).
    pub bundle_path: String,
    /// Where it goes.
    pub dest: PathBuf,
    /// The tree.
    pub tree: ObjectId,
    /// Regular files in it.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// A directory is there already, and why it is replaced.
    pub replaces: Option<Replacing>,
}

/// A credential the bundle left blank that the imported config needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretPlan {
    /// The dotted path in the bundle.
    pub bundle_path: String,
    /// The dotted path in the install (after namespacing).
    pub path: String,
}

/// Everything an import will do, decided before anything is written.
#[derive(Debug, Clone)]
pub struct ImportPlan {
    /// The source as given.
    pub source: String,
    /// What it was.
    pub source_kind: SourceKind,
    /// The snapshot imported from.
    pub snapshot: ObjectId,
    /// The content id (the bundle's root tree).
    pub content_id: ObjectId,
    /// The agent's alias in the bundle.
    pub bundle_alias: String,
    /// The agent's alias in the install.
    pub alias: String,
    /// The install root.
    pub install: PathBuf,
    /// Its `config.toml`.
    pub config_path: PathBuf,
    /// The file written: `config_path`, or the file its symlink resolves to.
    pub config_target: PathBuf,
    /// Every config entry of the bundle and its fate.
    pub decisions: Vec<Decision>,
    /// Adjustments the merge made.
    pub notes: Vec<String>,
    /// `config.toml` as read.
    pub old_config: String,
    /// `config.toml` as it will be written (secrets typed at the prompt excepted).
    pub new_config: String,
    /// Where the previous `config.toml` is kept.
    pub backup: PathBuf,
    /// The trees published.
    pub trees: Vec<TreePlan>,
    /// Credentials to fill.
    pub secrets: Vec<SecretPlan>,
    /// The capability grants accepted, with local paths: what a review of the bundle lists
    /// (`crate::agent::bundle_grants`), less those of entries that do not land.
    pub grants: Vec<Grant>,
    /// What the bundle says could not travel.
    pub dropped: Vec<Dropped>,
    /// Whether the install encrypts secrets (`secrets.encrypt`).
    encrypt: bool,
    /// Set when this install already holds this bundle: an earlier import of the same content
    /// made the agent, which is still configured. The plan then changes nothing (no entries,
    /// trees, secrets or grants; `new_config` is `old_config`) and `Bundles::import` writes nothing.
    pub up_to_date: Option<UpToDate>,
    /// Set when the bundle is a newer version of an agent an earlier import made here (its
    /// provenance names the bundle's agent): the import is that agent's update in place,
    /// planned three ways against the bundle it was imported from, and this plan's other
    /// fields describe nothing to write (as for [`ImportPlan::up_to_date`]).
    /// `Bundles::import` applies it under the update's rules: refused conflicts and grants not
    /// accepted ([`update::UpdatePlan::accepting_grants`]) stop it before anything is written.
    pub update: Option<Box<update::UpdatePlan>>,
    /// Set when the source is an Agent Plugin (`crate::plugin`): its name. Then `alias` names
    /// its provenance record (`plugin.<skill bundle>`), not an agent, and no agent is made.
    pub plugin: Option<String>,
}

/// The earlier import that makes an import a no-op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpToDate {
    /// The local agent it made.
    pub alias: String,
    /// When (RFC 3339 UTC).
    pub imported_at: String,
    /// The snapshot it recorded.
    pub snapshot: ObjectId,
}

impl ImportPlan {
    /// The config change as a unified diff (`a/config.toml`, `b/config.toml`), every secret
    /// value masked on both sides on the parsed document (`agent::mask_secrets`): its context
    /// lines are the install's own, which may hold its credentials, and the secrets this
    /// import asks for are masked by path too. Raw text: a terminal needs it escaped.
    pub fn config_diff(&self) -> String {
        let paths: Vec<&str> = self.secrets.iter().map(|s| s.path.as_str()).collect();
        let old = crate::agent::mask_secrets(&self.old_config, &paths);
        let new = crate::agent::mask_secrets(&self.new_config, &paths);
        similar::TextDiff::from_lines(&old, &new)
            .unified_diff()
            .context_radius(2)
            .header("a/config.toml", "b/config.toml")
            .to_string()
    }

    /// Whether a secret typed for this import is stored encrypted with the install's key
    /// (its `secrets.encrypt`); when false it is written into `config.toml` as typed.
    pub fn secrets_encrypted(&self) -> bool {
        self.encrypt
    }

    /// The entries that were renamed on import (namespaced or mapped).
    pub fn renamed(&self) -> impl Iterator<Item = &Decision> {
        self.decisions
            .iter()
            .filter(|d| matches!(d.action, Action::Namespace | Action::Map))
    }
}

/// What an applied import did.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The agent's local alias.
    pub alias: String,
    /// The content id imported.
    pub content_id: ObjectId,
    /// The previous `config.toml`.
    pub backup: PathBuf,
    /// The secrets written (dotted local paths), stored as ZeroClaw stores them: encrypted
    /// when [`Imported::secrets_encrypted`], else as typed.
    pub secrets_filled: Vec<String>,
    /// Whether the filled secrets were encrypted with the install's key (`.secret_key`): the
    /// install's `secrets.encrypt`. When false they are plain text in `config.toml`, readable
    /// by whoever can read that file ([`Imported::config_mode`]).
    pub secrets_encrypted: bool,
    /// The permission bits `config.toml` was written with (the previous file's, kept).
    pub config_mode: u32,
    /// The secrets still to fill.
    pub secrets_left: Vec<SecretPlan>,
    /// The provenance record.
    pub provenance: PathBuf,
    /// Whether anything was written: `false` for an up-to-date plan
    /// ([`ImportPlan::up_to_date`]), which leaves the install as it was (`backup` and
    /// `config_mode` then mean nothing).
    pub written: bool,
}

/// What marks a bundle for the tree publish: never present in a workspace or skill tree, so
/// nothing is written "last" and `--force` decides replacement alone.
const NO_MARKER: BundleMarker = BundleMarker {
    file: MANIFEST_FILE,
    header: MANIFEST_HEADER,
};

/// Plans the import of `req.source` into `req.install` (see the module doc). Writes to the
/// store (the captured source), never to the install.
pub fn plan(
    store: &Store,
    req: &ImportRequest<'_>,
    progress: &dyn Progress,
) -> Result<ImportPlan, ImportError> {
    let expect = check_arguments(req)?;
    let target = read_target(req.install)?;
    let (snapshot, kind) = source::capture(store, req.source, req.require, progress)?;
    if let Some(root) = plugin_root(store, snapshot)? {
        let incoming = update::IncomingPlugin {
            snapshot,
            root,
            kind,
        };
        return plugin::plan(store, req, target, incoming, expect, progress);
    }
    if let Some(agent) = req.attach {
        return Err(ImportError::BadArgument {
            arg: format!("--attach {agent}"),
            problem: "attaches an Agent Plugin; an agent bundle brings its own agent".to_string(),
        });
    }
    let bundle = read_bundle(store, req, snapshot, kind, expect.as_deref())?;
    if let Some(done) = earlier_import(
        store,
        &target.root,
        &target.install,
        &bundle,
        req.agent_as.or(req.update),
    )? {
        return Ok(up_to_date_plan(req, target, &bundle, done));
    }
    let routed = update::routed_record(
        &target,
        &bundle.manifest.root_agent,
        req.agent_as,
        req.update,
    )
    .map_err(|e| ImportError::Update(Box::new(e)))?;
    if let Some(record) = routed {
        return update_plan(store, req, target, &bundle, record, progress);
    }
    check_fragment(req, &bundle)?;
    let merged = merge_fragment(store, req, &target, &bundle)?;
    // After the merge, so a reference that names nothing is reported as itself first.
    check_closure(&bundle)?;
    let alias = merged
        .local(Kind::Agent, &bundle.manifest.root_agent)
        .expect("the merge decided the root agent")
        .local
        .clone();
    let new_config = with_line_endings_of(&target.old_config, merged.text.clone());
    let after = check_merged(
        &target.install,
        &target.root,
        &target.config_path,
        &new_config,
    )?;
    let (places, without_content) = places(&target, &after, &bundle, &merged, &alias)?;
    let homes: Vec<(String, PathBuf)> = places
        .iter()
        .map(|p| (p.what.clone(), p.dest.clone()))
        .collect();
    check_overlaps(&target, &homes)?;
    let trees = tree_plans(store, req, places)?;
    let secrets = secret_plans(&bundle, &merged);
    let grants = local_grants(&bundle, &merged)?;
    let Target {
        root,
        config_path,
        config_target,
        old_config,
        install: _,
    } = target;
    Ok(ImportPlan {
        source: source_text(req.source, &bundle.kind),
        source_kind: bundle.kind.clone(),
        snapshot: bundle.snapshot,
        content_id: bundle.content_id(),
        bundle_alias: bundle.manifest.root_agent.clone(),
        alias,
        backup: backup_path(&config_path),
        install: root,
        config_path,
        config_target,
        decisions: merged.decisions,
        notes: merged.notes.into_iter().chain(without_content).collect(),
        old_config,
        new_config,
        trees,
        secrets,
        grants,
        dropped: bundle.manifest.dropped.clone(),
        encrypt: after.typed.secrets.encrypt,
        up_to_date: None,
        update: None,
        plugin: None,
    })
}

/// The install an import plans against, as read before the source is.
#[derive(Clone)]
pub(crate) struct Target {
    /// The install root, absolute.
    root: PathBuf,
    /// Its `config.toml`.
    config_path: PathBuf,
    /// The file written: `config_path`, or the file its symlink resolves to.
    config_target: PathBuf,
    /// `config.toml` as read.
    old_config: String,
    /// The install it loads as.
    install: Install,
}

/// Checks the arguments that need nothing read: `--as` is a plain name, `--expect` a content
/// id (returned).
fn check_arguments(req: &ImportRequest<'_>) -> Result<Option<String>, ImportError> {
    if let Some(name) = req.agent_as {
        if !zeroclaw_config::agent_bundle::is_safe_path_component(name) || name.contains('.') {
            return Err(ImportError::BadArgument {
                arg: format!("--as {name}"),
                problem: "an agent alias must be a plain name (it names a directory, and no dot)"
                    .to_string(),
            });
        }
    }
    req.expect.map(source::check_expect).transpose()
}

/// Reads and loads the install's `config.toml` (through its symlink), which must be at the
/// schema version this build writes.
fn read_target(install: &Path) -> Result<Target, ImportError> {
    let root = std::path::absolute(install).unwrap_or_else(|_| install.to_path_buf());
    journal::refuse_pending(&root)?;
    let config_path = root.join(CONFIG_FILE);
    let config_target = config_target(&config_path)?;
    // A regular file only, capped: a FIFO or a device in its place is refused, not waited on.
    let old_config =
        crate::sys::read_small_text(&config_target, crate::agent::CONFIG_CAP, "a config.toml")
            .map_err(|source| ImportError::Read {
                path: config_path.clone(),
                source,
            })?;
    let install =
        Install::from_toml_str(&root, &old_config).map_err(|source| ImportError::Install {
            root: root.clone(),
            source,
        })?;
    let supported = zeroclaw_config::migration::CURRENT_SCHEMA_VERSION;
    if install.schema_version() != supported {
        return Err(ImportError::OldSchema {
            path: config_path,
            found: install.schema_version(),
            supported,
        });
    }
    Ok(Target {
        root,
        config_path,
        config_target,
        old_config,
        install,
    })
}

/// The root tree of snapshot `snapshot` when it is an Agent Plugin (a `plugin.json` and no
/// bundle manifest), else None.
pub(super) fn plugin_root(
    store: &Store,
    snapshot: ObjectId,
) -> Result<Option<ObjectId>, ImportError> {
    let root = store.objects().read_snapshot(&snapshot)?.root;
    let plugin = crate::plugin::is_plugin(store, &root)
        && store
            .objects()
            .read_tree(&root)?
            .get(MANIFEST_FILE.as_bytes())
            .is_none();
    Ok(plugin.then_some(root))
}

/// Captures the source into the store, reads the bundle from that snapshot, and checks it is
/// the content `--expect` names.
fn read_bundle(
    store: &Store,
    req: &ImportRequest<'_>,
    snapshot: ObjectId,
    kind: SourceKind,
    expect: Option<&str>,
) -> Result<source::StoredBundle, ImportError> {
    let bundle = source::read(store, snapshot, kind)?;
    if let Some(expect) = expect {
        if !source::matches_expect(&bundle, expect)? {
            return Err(ImportError::NotExpected {
                arg: req.source.to_string_lossy().into_owned(),
                expected: expect.to_string(),
                actual: bundle.content_id(),
            });
        }
    }
    Ok(bundle)
}

/// The plan of an import this install already holds (`done`): it changes nothing.
fn up_to_date_plan(
    req: &ImportRequest<'_>,
    target: Target,
    bundle: &source::StoredBundle,
    done: UpToDate,
) -> ImportPlan {
    let arrived = Arrived {
        kind: bundle.kind.clone(),
        snapshot: bundle.snapshot,
        content_id: bundle.content_id(),
        bundle_alias: bundle.manifest.root_agent.clone(),
    };
    unchanged_plan(req, target, arrived, done)
}

/// What an import read, as a plan that changes nothing names it.
pub(super) struct Arrived {
    pub kind: SourceKind,
    pub snapshot: ObjectId,
    pub content_id: ObjectId,
    pub bundle_alias: String,
}

/// A plan that changes nothing of the install (up to date, or carrying an update in place
/// that `apply` runs instead), for what `arrived` is.
pub(super) fn unchanged_plan(
    req: &ImportRequest<'_>,
    target: Target,
    arrived: Arrived,
    done: UpToDate,
) -> ImportPlan {
    let Target {
        root,
        config_path,
        config_target,
        old_config,
        install,
    } = target;
    ImportPlan {
        source: req.source.to_string_lossy().into_owned(),
        source_kind: arrived.kind,
        snapshot: arrived.snapshot,
        content_id: arrived.content_id,
        bundle_alias: arrived.bundle_alias,
        alias: done.alias.clone(),
        backup: backup_path(&config_path),
        install: root,
        config_path,
        config_target,
        decisions: Vec::new(),
        notes: Vec::new(),
        new_config: old_config.clone(),
        old_config,
        trees: Vec::new(),
        secrets: Vec::new(),
        grants: Vec::new(),
        dropped: Vec::new(),
        encrypt: install.typed.secrets.encrypt,
        up_to_date: Some(done),
        update: None,
        plugin: None,
    }
}

/// The plan of an import that is the update in place of the agent `record` names.
fn update_plan(
    store: &Store,
    req: &ImportRequest<'_>,
    target: Target,
    bundle: &source::StoredBundle,
    record: provenance::Provenance,
    progress: &dyn Progress,
) -> Result<ImportPlan, ImportError> {
    let alias = record.alias.clone();
    let request = update::UpdateRequest {
        source: req.source,
        install: req.install,
        alias: Some(&alias),
        conflicts: req.conflicts,
        accept_grants: req.accept_grants,
        allow_downgrade: req.allow_downgrade,
        require: req.require,
    };
    let summary = target.clone();
    let planned = update::plan_against(store, &request, target, bundle, record, progress)
        .map_err(|e| ImportError::Update(Box::new(e)))?;
    let mut plan = up_to_date_plan(
        req,
        summary,
        bundle,
        UpToDate {
            alias: planned.alias.clone(),
            imported_at: String::new(),
            snapshot: planned.base,
        },
    );
    plan.up_to_date = None;
    plan.update = Some(Box::new(planned));
    Ok(plan)
}

/// Refuses a fragment this import must not take: a root agent whose alias is not a plain name
/// (without `--as`), or config ZeroClaw's exporter never carries.
fn check_fragment(
    req: &ImportRequest<'_>,
    bundle: &source::StoredBundle,
) -> Result<(), ImportError> {
    if req.agent_as.is_none() {
        let name = &bundle.manifest.root_agent;
        if !zeroclaw_config::agent_bundle::is_safe_path_component(name) || name.contains('.') {
            return Err(ImportError::Fragment {
                path: format!("agents.{name}"),
                problem: "is not a plain agent name (the alias names the agent's workspace \
                          directory and its import record; no separator, `..` or dot): \
                          import it under another name with --as NAME"
                    .to_string(),
            });
        }
    }
    let unportable = crate::agent::fragment_drops(&bundle.fragment, &bundle.manifest.root_agent)
        .map_err(|source| ImportError::Bundle {
            file: CONFIG_FILE,
            source,
        })?;
    if let Some(first) = unportable.first() {
        return Err(ImportError::Fragment {
            path: unportable
                .iter()
                .map(|d| d.path.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            problem: format!(
                "{} set, and ZeroClaw's exporter never carries {it} ({}): a bundle that does \
                 would give the agent what the operator of this install never granted; remove \
                 {it} from the bundle's config.toml (grant {it} yourself after the import)",
                if unportable.len() == 1 { "is" } else { "are" },
                first.detail,
                it = if unportable.len() == 1 { "it" } else { "them" },
            ),
        });
    }
    Ok(())
}

/// The source as a plan and provenance name it: a directory or pack by its absolute path,
/// anything else (a snapshot or remote ref) as given.
fn source_text(source: &std::ffi::OsStr, kind: &SourceKind) -> String {
    match kind {
        SourceKind::Directory | SourceKind::Pack => std::path::absolute(source)
            .unwrap_or_else(|_| source.into())
            .to_string_lossy()
            .into_owned(),
        _ => source.to_string_lossy().into_owned(),
    }
}

/// The tree the bundle carries for skill bundle `alias`, when it carries one.
fn skill_tree(bundle: &source::StoredBundle, alias: &str) -> Option<source::Tree> {
    bundle
        .skills
        .iter()
        .find(|(a, _)| a == alias)
        .map(|(_, t)| *t)
}

/// Merges the bundle's fragment into the install's config text (`merge`), telling it where a
/// local skill bundle's content differs from the bundle's.
fn merge_fragment(
    store: &Store,
    req: &ImportRequest<'_>,
    target: &Target,
    bundle: &source::StoredBundle,
) -> Result<merge::Merged, ImportError> {
    let skill_content_differs =
        |bundle_alias: &str, local: &str| -> Result<Option<String>, ImportError> {
            let Some(tree) = skill_tree(bundle, bundle_alias) else {
                return Ok(None);
            };
            let Ok(dir) = zeroclaw_config::skill_bundles::resolve_directory(
                &target.install.typed,
                &target.root,
                local,
            ) else {
                return Ok(Some("its directory (it does not resolve)".to_string()));
            };
            if !dir.is_dir() {
                return Ok(Some(format!("{} (not a directory here)", dir.display())));
            }
            let side = crate::diff::side::resolve_side(store, dir.as_os_str(), false, &Silent)
                .map_err(|e| ImportError::Capture {
                    arg: dir.display().to_string(),
                    source: e.into(),
                })?;
            if side.root.entry.id == tree.id {
                return Ok(None);
            }
            Ok(Some(
                first_tree_difference(store, &side.root.entry.id, &tree.id, "")
                    .unwrap_or_else(|| dir.display().to_string()),
            ))
        };
    merge::merge(&merge::MergeInput {
        install: &target.old_config,
        fragment: &bundle.fragment,
        root_agent: &bundle.manifest.root_agent,
        required_secrets: &bundle.manifest.required_secrets,
        agent_as: req.agent_as,
        maps: req.maps,
        skill_content_differs: &skill_content_differs,
        config_path: &target.config_path,
    })
}

/// Refuses a fragment with entries outside the closure of its root agent.
fn check_closure(bundle: &source::StoredBundle) -> Result<(), ImportError> {
    let outside = crate::agent::outside_closure(&bundle.fragment, &bundle.manifest.root_agent)
        .map_err(|source| ImportError::Bundle {
            file: CONFIG_FILE,
            source,
        })?;
    if !outside.is_empty() {
        return Err(ImportError::Fragment {
            path: outside.join(", "),
            problem: format!(
                "{} outside the closure of agent {} (nothing the agent references reaches \
                 {it}, so ZeroClaw's exporter never writes {it}): an import would add {it} \
                 to this install, where a local agent naming {it} would start using {it}; \
                 remove {it} from the bundle's config.toml",
                if outside.len() == 1 { "is" } else { "are" },
                bundle.manifest.root_agent,
                it = if outside.len() == 1 { "it" } else { "them" },
            ),
        });
    }
    Ok(())
}

/// Where each tree goes, inside the install's place for it (`dest`): the agent's workspace,
/// then each skill bundle the import adds. A skill bundle the bundle carries no content for
/// gets a note (returned) instead of a place.
fn places(
    target: &Target,
    after: &Install,
    bundle: &source::StoredBundle,
    merged: &merge::Merged,
    alias: &str,
) -> Result<(Vec<Place>, Vec<String>), ImportError> {
    let homes = dest::Homes::of(&target.root)?;
    let mut places: Vec<Place> = Vec::new();
    if let Some(ws) = bundle.workspace {
        let what = format!("the workspace of agent {alias}");
        let dest = after.typed.agent_workspace_dir(alias);
        let field = format!("agents.{}.workspace.path", bundle.manifest.root_agent);
        let raw = after
            .typed
            .agents
            .get(alias)
            .and_then(|a| a.workspace.path.as_ref())
            .map(|p| p.to_string_lossy().into_owned());
        let configured = raw.as_deref().map(|raw| (field.as_str(), raw));
        homes.confine_workspace(&dest, &what, configured)?;
        places.push(Place {
            what,
            bundle_path: "workspace".to_string(),
            dest,
            tree: ws.id,
        });
    }
    let mut without_content = Vec::new();
    for d in &merged.decisions {
        if d.kind != Kind::SkillBundle || !matches!(d.action, Action::Add | Action::Namespace) {
            continue;
        }
        let what = format!("skill bundle {}", d.local);
        let dest =
            zeroclaw_config::skill_bundles::resolve_directory(&after.typed, &target.root, &d.local)
                .map_err(|e| ImportError::Invalid {
                    path: target.config_path.clone(),
                    problem: e.to_string(),
                })?;
        // Confined whether or not content comes with it: the entry names where skills go.
        let field = format!("skill_bundles.{}.directory", d.bundle);
        let raw = after
            .typed
            .skill_bundles
            .get(&d.local)
            .and_then(|b| b.directory.clone());
        let configured = raw.as_deref().map(|raw| (field.as_str(), raw));
        homes.confine_skill(&dest, &what, configured)?;
        let Some(tree) = skill_tree(bundle, &d.bundle) else {
            // The entry arrives alone (its source had no content, or ZeroClaw's exporter left
            // it behind, as for an alias that is a Windows device name): say so and where the
            // skills belong.
            let why = bundle
                .manifest
                .dropped
                .iter()
                .find(|x| {
                    x.path == format!("skill_bundles.{}", d.bundle)
                        || x.path == format!("{}/{}", crate::agent::SKILLS_DIR, d.bundle)
                })
                .map_or("its source install had none", |x| x.detail.as_str());
            without_content.push(format!(
                "{} arrives without content: the bundle carries no skills for it ({why}); \
                 its skills belong in {}",
                d.kind.path_of(&d.local),
                dest.display()
            ));
            continue;
        };
        places.push(Place {
            what,
            bundle_path: format!("skills/{}", d.bundle),
            dest,
            tree: tree.id,
        });
    }
    Ok((places, without_content))
}

/// Refuses a place that is not the tree's own: one in (or around) the directory of a skill
/// bundle or the workspace of an agent the install already has (a `directory` inside another
/// bundle's would add skills to every agent using that bundle), or another tree's.
fn check_overlaps(target: &Target, places: &[(String, PathBuf)]) -> Result<(), ImportError> {
    let install = &target.install;
    let mut taken: Vec<(String, PathBuf)> = Vec::new();
    for name in install.typed.skill_bundles.keys() {
        if let Ok(dir) =
            zeroclaw_config::skill_bundles::resolve_directory(&install.typed, &target.root, name)
        {
            taken.push((format!("skill bundle {name}"), dir));
        }
    }
    for name in install.typed.agents.keys() {
        let dir = install.typed.agent_workspace_dir(name);
        taken.push((format!("the workspace of agent {name}"), dir));
    }
    for (i, (place_what, dest)) in places.iter().enumerate() {
        for (what, dir) in taken.iter().chain(&places[i + 1..]) {
            if overlap(dest, dir) {
                return Err(ImportError::Overlaps {
                    path: dest.clone(),
                    what: place_what.clone(),
                    other: format!("{what} at {}", dir.display()),
                });
            }
        }
    }
    Ok(())
}

/// The trees published, each replacing only what the operator allowed (`--force`,
/// `--replace`).
pub(crate) fn tree_plans(
    store: &Store,
    req: &ImportRequest<'_>,
    places: Vec<Place>,
) -> Result<Vec<TreePlan>, ImportError> {
    let dests: Vec<&Path> = places.iter().map(|p| p.dest.as_path()).collect();
    let replace = dest::Replace::new(req.force, req.replace, &dests)?;
    places
        .into_iter()
        .map(|p| tree_plan(store, p, &replace))
        .collect()
}

/// The credentials to fill: those of entries this import adds, in local names.
fn secret_plans(bundle: &source::StoredBundle, merged: &merge::Merged) -> Vec<SecretPlan> {
    bundle
        .manifest
        .required_secrets
        .iter()
        .filter_map(|p| {
            // Only a secret of an entry this import adds: a path no entry of the bundle holds
            // names one of the operator's own entries, whose value is not the bundle's to ask.
            let (path, owner) = merged.localize(p);
            match owner.map(|d| d.action) {
                Some(Action::Add | Action::Namespace) => Some(SecretPlan {
                    bundle_path: p.clone(),
                    path,
                }),
                _ => None,
            }
        })
        .collect()
}

/// The same grants a review lists (one computation), in local names; those of entries that
/// do not land (mapped to a local entry, or left out) are not this import's to grant.
fn local_grants(
    bundle: &source::StoredBundle,
    merged: &merge::Merged,
) -> Result<Vec<Grant>, ImportError> {
    Ok(
        crate::agent::bundle_grants(&bundle.manifest, &bundle.fragment)
            .map_err(|source| ImportError::Bundle {
                file: CONFIG_FILE,
                source,
            })?
            .into_iter()
            .filter(|g| !g.stale)
            .filter_map(|g| {
                let (path, owner) = merged.localize(&g.path);
                match owner.map(|d| d.action) {
                    Some(Action::Map | Action::LeftOut) => None,
                    _ => Some(Grant { path, ..g }),
                }
            })
            .collect(),
    )
}

/// The earlier import of exactly this content whose agent the install still configures (under
/// `--as`, that agent only): the same snapshot, or one with the same content id.
fn earlier_import(
    store: &Store,
    root: &Path,
    install: &Install,
    bundle: &source::StoredBundle,
    agent_as: Option<&str>,
) -> Result<Option<UpToDate>, ImportError> {
    let records = provenance::imports_of(root, &bundle.manifest.root_agent)?;
    Ok(records
        .into_iter()
        .filter(|r| agent_as.is_none_or(|a| a == r.alias))
        .filter(|r| install.typed.agents.contains_key(&r.alias))
        .find(|r| {
            r.snapshot == bundle.snapshot
                || store
                    .objects()
                    .read_snapshot(&r.snapshot)
                    .is_ok_and(|s| s.root == bundle.content_id())
        })
        .map(|r| UpToDate {
            alias: r.alias,
            imported_at: r.imported_at,
            snapshot: r.snapshot,
        }))
}

/// Loads `text` the way the install was loaded (ZeroClaw's migration and loader) and runs
/// ZeroClaw's `validate()`: no section the install's own config did not already lose may be
/// skipped, and the schema version stays the install's.
pub(crate) fn check_merged(
    before: &Install,
    root: &Path,
    config_path: &Path,
    text: &str,
) -> Result<Install, ImportError> {
    let invalid = |problem: String| ImportError::Invalid {
        path: config_path.to_path_buf(),
        problem,
    };
    let after = Install::from_toml_str(root, text).map_err(|e| invalid(e.to_string()))?;
    if after.schema_version() != before.schema_version() {
        return Err(invalid(format!(
            "its schema_version would change from {} to {}",
            before.schema_version(),
            after.schema_version()
        )));
    }
    let lost: Vec<&String> = after
        .degraded_sections()
        .iter()
        .filter(|s| !before.degraded_sections().contains(s))
        .collect();
    if !lost.is_empty() {
        return Err(invalid(format!(
            "ZeroClaw's loader would skip {}: {}",
            lost.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            after.degraded_reason().unwrap_or("it does not load")
        )));
    }
    if let Err(e) = after.typed.validate() {
        let already = before.typed.validate().is_err();
        return Err(invalid(if already {
            format!("the install's own config fails ZeroClaw's validate(): {e:#}")
        } else {
            format!("{e:#}")
        }));
    }
    // An install ZeroClaw refuses to load that the import would make load: the bundle's
    // entries resolve what the install's own entries name (a local agent delegating to, or
    // reading the workspace of, an agent of the bundle's name), which no review showed.
    if let Err(e) = before.typed.validate() {
        return Err(invalid(format!(
            "the install's own config fails ZeroClaw's validate() ({e:#}) and would pass once \
             the bundle's entries are added: they would resolve what the install's own entries \
             name, which no review shows; fix the install's config first"
        )));
    }
    Ok(after)
}

/// The first path (below `prefix`) at which two stored trees differ: a name on one side only,
/// a different kind or mode, or different bytes; `None` when equal or unreadable.
fn first_tree_difference(
    store: &Store,
    a: &ObjectId,
    b: &ObjectId,
    prefix: &str,
) -> Option<String> {
    let (ta, tb) = (
        store.objects().read_tree(a).ok()?,
        store.objects().read_tree(b).ok()?,
    );
    let mut names: Vec<&[u8]> = ta
        .entries()
        .iter()
        .chain(tb.entries())
        .map(|e| e.name.as_slice())
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        let path = format!("{prefix}{}", String::from_utf8_lossy(name));
        match (ta.get(name), tb.get(name)) {
            (Some(x), Some(y)) if x == y => continue,
            (Some(x), Some(y)) if x.kind == EntryKind::Dir && y.kind == EntryKind::Dir => {
                return first_tree_difference(store, &x.id, &y.id, &format!("{path}/"))
                    .or(Some(path));
            }
            _ => return Some(path),
        }
    }
    None
}

/// Whether `a` and `b` are the same directory or one lies inside the other: by their spelling
/// (`..` resolved lexically) or by the identity of what exists (a symlinked spelling).
fn overlap(a: &Path, b: &Path) -> bool {
    let (la, lb) = (
        zeroclaw_config::paths::normalize_lexical(a),
        zeroclaw_config::paths::normalize_lexical(b),
    );
    la.starts_with(&lb)
        || lb.starts_with(&la)
        || publish::lies_inside(a, b)
        || publish::lies_inside(b, a)
}

/// A tree of the bundle and where it goes, before what is there was looked at.
pub(crate) struct Place {
    what: String,
    bundle_path: String,
    dest: PathBuf,
    tree: ObjectId,
}

fn tree_plan(
    store: &Store,
    place: Place,
    replace: &dest::Replace,
) -> Result<TreePlan, ImportError> {
    let Place {
        what,
        bundle_path,
        dest,
        tree,
    } = place;
    let replaces = replace.decide(store, &dest, &what, &tree)?;
    let (files, bytes) = count(store, &tree)?;
    Ok(TreePlan {
        what,
        bundle_path,
        dest,
        tree,
        files,
        bytes,
        replaces,
    })
}

/// The file `config` names: itself, or what its symlinks resolve to (an import writes through
/// the link, so the file ZeroClaw reads is the one that changes).
fn config_target(config: &Path) -> Result<PathBuf, ImportError> {
    let link = fs::symlink_metadata(config).map_err(|source| ImportError::Read {
        path: config.to_path_buf(),
        source,
    })?;
    if !link.file_type().is_symlink() {
        return Ok(config.to_path_buf());
    }
    fs::canonicalize(config).map_err(|source| ImportError::Read {
        path: config.to_path_buf(),
        source,
    })
}

/// `text` with the line endings of `original`: toml_edit ends every line it writes with `\n`
/// (the install's untouched lines too), so when `original`'s lines mostly end in `\r\n`,
/// every `\n` that ends a line of `text` gets its `\r` back. A newline inside a multi-line
/// string is part of the string's value (a TOML parser keeps `\r\n` there as written) and
/// is left as it is: an install's own multi-line strings keep theirs, an imported one keeps
/// the bundle's.
pub(crate) fn with_line_endings_of(original: &str, text: String) -> String {
    let crlf = original.matches("\r\n").count();
    let lf = original.matches('\n').count() - crlf;
    if crlf == 0 || crlf < lf {
        return text;
    }
    #[derive(PartialEq)]
    enum In {
        Line,
        Comment,
        Basic,
        Literal,
        MultiBasic,
        MultiLiteral,
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 16);
    let mut state = In::Line;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let triple = |q: u8| bytes[i..].starts_with(&[q, q, q]);
        match state {
            In::Line | In::Comment if b == b'\n' => {
                if out.last() != Some(&b'\r') {
                    out.push(b'\r');
                }
                state = In::Line;
            }
            In::Line if b == b'#' => state = In::Comment,
            In::Line if b == b'"' || b == b'\'' => {
                let multi = triple(b);
                state = match (b, multi) {
                    (b'"', true) => In::MultiBasic,
                    (b'"', false) => In::Basic,
                    (_, true) => In::MultiLiteral,
                    (_, false) => In::Literal,
                };
                if multi {
                    out.extend_from_slice(&bytes[i..i + 3]);
                    i += 3;
                    continue;
                }
            }
            In::Basic | In::MultiBasic if b == b'\\' => {
                // An escape: the next byte (a quote, a backslash, a line-ending newline) is
                // the string's.
                let end = (i + 2).min(bytes.len());
                out.extend_from_slice(&bytes[i..end]);
                i = end;
                continue;
            }
            In::Basic if b == b'"' => state = In::Line,
            In::Literal if b == b'\'' => state = In::Line,
            In::MultiBasic | In::MultiLiteral => {
                let q = if state == In::MultiBasic { b'"' } else { b'\'' };
                if triple(q) {
                    // The closing quotes, after up to two quotes of content.
                    let run = bytes[i..].iter().take_while(|&&c| c == q).count().min(5);
                    out.extend_from_slice(&bytes[i..i + run]);
                    i += run;
                    state = In::Line;
                    continue;
                }
            }
            _ => {}
        }
        out.push(b);
        i += 1;
    }
    String::from_utf8(out).expect("only `\\r` was added, before a `\\n`")
}

fn count(store: &Store, tree: &ObjectId) -> Result<(u64, u64), ImportError> {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![*tree];
    while let Some(id) = stack.pop() {
        for e in store.objects().read_tree(&id)?.entries() {
            if e.kind == EntryKind::Dir {
                stack.push(e.id);
            } else if e.kind.is_file() {
                files += 1;
                bytes += e.size;
            }
        }
    }
    Ok((files, bytes))
}

/// `config.toml.<UTC time>.bak` beside `config`, not yet taken.
pub(crate) fn backup_path(config: &Path) -> PathBuf {
    let stamp: String = crate::clock::rfc3339_utc(i128::from(crate::clock::now_ns()))
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let name = config
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| CONFIG_FILE.to_string());
    (1..)
        .map(|n| {
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("-{n}")
            };
            config.with_file_name(format!("{name}.{stamp}{suffix}.bak"))
        })
        .find(|p| fs::symlink_metadata(p).is_err())
        .expect("a free backup name exists")
}

/// What [`apply`] created so far, removed again when a later step fails.
#[derive(Default)]
struct Undo {
    paths: Vec<PathBuf>,
}

impl Undo {
    /// Remembers the topmost directory of `path` that does not exist yet (or `path`).
    fn will_create(&mut self, path: &Path) {
        let mut top = None;
        let mut p = Some(path);
        while let Some(cur) = p {
            if fs::symlink_metadata(cur).is_ok() {
                break;
            }
            top = Some(cur.to_path_buf());
            p = cur.parent();
        }
        self.paths.extend(top);
    }

    fn run(self) {
        for p in self.paths.into_iter().rev() {
            let _ = match fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&p),
                Ok(_) => fs::remove_file(&p),
                Err(_) => Ok(()),
            };
        }
    }
}

/// Applies `plan` (see the module doc for the order). `secrets` are values the operator
/// typed, by local dotted path (each must be one of `plan.secrets`): encrypted with the
/// install's key the way ZeroClaw stores them, and written into the new `config.toml`.
pub fn apply(
    store: &Store,
    plan: &ImportPlan,
    secrets: &[(String, String)],
    progress: &dyn Progress,
) -> Result<Imported, ImportError> {
    let root = &plan.install;
    if let Some(planned) = &plan.update {
        let done = update::apply(store, planned, progress)
            .map_err(|e| ImportError::Update(Box::new(e)))?;
        return Ok(Imported {
            alias: done.alias.clone(),
            content_id: plan.content_id,
            backup: done.backup,
            secrets_filled: Vec::new(),
            secrets_encrypted: plan.encrypt,
            config_mode: 0,
            secrets_left: Vec::new(),
            provenance: provenance::path(root, &done.alias),
            written: done.written,
        });
    }
    if let Some(done) = &plan.up_to_date {
        // Nothing to write: the install holds this content already.
        return Ok(Imported {
            alias: done.alias.clone(),
            content_id: plan.content_id,
            backup: plan.backup.clone(),
            secrets_filled: Vec::new(),
            secrets_encrypted: plan.encrypt,
            config_mode: 0,
            secrets_left: Vec::new(),
            provenance: provenance::path(root, &done.alias),
            written: false,
        });
    }
    let dir = sys::open_dir_path(root).map_err(|source| ImportError::Read {
        path: root.clone(),
        source,
    })?;
    if !sys::try_lock_exclusive(dir.as_fd()).map_err(|source| ImportError::Read {
        path: root.clone(),
        source,
    })? {
        return Err(ImportError::Busy { path: root.clone() });
    }
    journal::refuse_pending(root)?;
    let (now, meta) = read_planned_config(plan)?;
    if now != plan.old_config {
        return Err(ImportError::ConfigChanged {
            path: plan.config_path.clone(),
        });
    }
    let keep = Keep {
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
    };
    let mut undo = Undo::default();
    let result = write_all(store, plan, secrets, keep, &mut undo, progress);
    if result.is_err() {
        undo.run();
    }
    result
}

/// `config.toml` as it is now, read from the file the plan decided to write: a symlink that
/// points elsewhere since the plan is a change (`ConfigChanged`).
fn read_planned_config(plan: &ImportPlan) -> Result<(String, fs::Metadata), ImportError> {
    if config_target(&plan.config_path)? != plan.config_target {
        return Err(ImportError::ConfigChanged {
            path: plan.config_path.clone(),
        });
    }
    read_config(&plan.config_target)
}

fn read_config(path: &Path) -> Result<(String, fs::Metadata), ImportError> {
    let read = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    let (file, _) = crate::sys::open_regular(path).map_err(read)?;
    let meta = file.metadata().map_err(read)?;
    let text = std::io::read_to_string(std::io::Read::take(file, crate::agent::CONFIG_CAP + 1))
        .map_err(read)?;
    Ok((text, meta))
}

/// The writes of [`apply`], in order (see the module doc); each records in `undo` what it
/// creates.
fn write_all(
    store: &Store,
    plan: &ImportPlan,
    secrets: &[(String, String)],
    keep: Keep,
    undo: &mut Undo,
    progress: &dyn Progress,
) -> Result<Imported, ImportError> {
    let interrupted = |_| ImportError::Interrupted;
    // Secrets first (in memory): a key ZeroClaw would create is created now, and removed
    // again if the import fails.
    let (text, filled) = seal_secrets(plan, secrets, undo)?;

    progress.check_cancel().map_err(interrupted)?;
    hooks::seam("import-step", "trees");
    publish_trees(store, plan, undo, progress)?;

    hooks::seam("import-step", "provenance");
    progress.check_cancel().map_err(interrupted)?;
    let record = provenance_of(plan);
    let record_path = provenance::path(&plan.install, &plan.alias);
    undo.will_create(&record_path);
    provenance::write(&plan.install, store.root(), &record)?;

    hooks::seam("import-step", "backup");
    progress.check_cancel().map_err(interrupted)?;
    undo.will_create(&plan.backup);
    let cancel = progress.cancel();
    let old = plan.old_config.clone();
    write_file(store, &plan.backup, false, keep, cancel, old)?;

    hooks::seam("import-step", "config");
    progress.check_cancel().map_err(interrupted)?;
    let (now, _) = read_planned_config(plan)?;
    if now != plan.old_config {
        return Err(ImportError::ConfigChanged {
            path: plan.config_path.clone(),
        });
    }
    write_file(store, &plan.config_target, true, keep, None, text)?;
    Ok(Imported {
        alias: plan.alias.clone(),
        content_id: plan.content_id,
        backup: plan.backup.clone(),
        secrets_left: plan
            .secrets
            .iter()
            .filter(|s| !filled.contains(&s.path))
            .cloned()
            .collect(),
        secrets_filled: filled,
        secrets_encrypted: plan.encrypt,
        config_mode: keep.mode,
        provenance: record_path,
        written: true,
    })
}

/// The new `config.toml` with `secrets` encrypted into it (the install's key, created when
/// ZeroClaw would, noted in `undo`), and the paths filled.
fn seal_secrets(
    plan: &ImportPlan,
    secrets: &[(String, String)],
    undo: &mut Undo,
) -> Result<(String, Vec<String>), ImportError> {
    let root = &plan.install;
    let mut text = plan.new_config.clone();
    let mut filled = Vec::new();
    if secrets.is_empty() {
        return Ok((text, filled));
    }
    undo.will_create(&root.join(".secret_key"));
    let store_key = zeroclaw_config::secrets::SecretStore::new(root, plan.encrypt);
    let mut doc: toml_edit::DocumentMut = text.parse().expect("the merged text parses");
    for (path, value) in secrets {
        if !plan.secrets.iter().any(|s| &s.path == path) {
            return Err(ImportError::BadArgument {
                arg: path.clone(),
                problem: "is not a secret this import needs".to_string(),
            });
        }
        let sealed = store_key.encrypt(value).map_err(|e| ImportError::Secret {
            path: path.clone(),
            source: e.into(),
        })?;
        set_path(&mut doc, path, sealed).map_err(|problem| ImportError::Fragment {
            path: path.clone(),
            problem,
        })?;
        filled.push(path.clone());
    }
    text = with_line_endings_of(&plan.old_config, doc.to_string());
    let before =
        Install::from_toml_str(root, &plan.old_config).map_err(|source| ImportError::Install {
            root: root.clone(),
            source,
        })?;
    check_merged(&before, root, &plan.config_path, &text)?;
    Ok((text, filled))
}

/// Publishes each planned tree (workspace, skills) at its destination, staged.
fn publish_trees(
    store: &Store,
    plan: &ImportPlan,
    undo: &mut Undo,
    progress: &dyn Progress,
) -> Result<(), ImportError> {
    let reader = store.objects().reader();
    for t in &plan.trees {
        progress
            .check_cancel()
            .map_err(|_| ImportError::Interrupted)?;
        let req = PublishRequest {
            dest: &t.dest,
            force: t.replaces.is_some(),
            sources: &[],
            store: Some(store.root()),
            bundle: NO_MARKER,
        };
        let publish_err = |source| ImportError::Publish {
            what: t.what.clone(),
            path: t.dest.clone(),
            source: Box::new(source),
        };
        let admitted = publish::check(&req).map_err(publish_err)?;
        undo.will_create(&t.dest);
        publish::publish_to(&reader, &t.tree, &admitted, None, progress).map_err(publish_err)?;
        progress.finish();
    }
    Ok(())
}

/// The provenance record of the import `plan` describes.
fn provenance_of(plan: &ImportPlan) -> provenance::Provenance {
    provenance::Provenance {
        alias: plan.alias.clone(),
        bundle_alias: plan.bundle_alias.clone(),
        snapshot: plan.snapshot,
        source: plan.source.clone(),
        imported_at: rfc3339_utc(std::time::SystemTime::now()),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        renamed: plan
            .renamed()
            .map(|d| (d.kind.path_of(&d.bundle), d.local.clone()))
            .collect::<BTreeMap<_, _>>(),
        entries: plan
            .decisions
            .iter()
            .filter(|d| d.action != Action::LeftOut)
            .map(|d| {
                let fate = provenance::EntryFate {
                    local: d.local.clone(),
                    owned: matches!(d.action, Action::Add | Action::Namespace),
                };
                (d.kind.path_of(&d.bundle), fate)
            })
            .collect(),
    }
}

fn write_file(
    store: &Store,
    dest: &Path,
    force: bool,
    keep: Keep,
    cancel: Option<&crate::cancel::Cancel>,
    text: String,
) -> Result<(), ImportError> {
    let req = FileRequest {
        dest,
        force,
        store: store.root(),
        noun: "config",
        cancel,
        private: keep.mode & 0o077 == 0,
        keep: Some(keep),
    };
    publish::publish_file(&req, |out: &mut dyn std::io::Write| {
        out.write_all(text.as_bytes())
    })
    .map_err(|source| ImportError::Write {
        path: dest.to_path_buf(),
        source: Box::new(source),
    })
}

/// Sets the string at dotted `path` (`mcp.servers.<name>.…` addresses a server by name) of
/// `doc`, keeping the key's formatting.
fn set_path(doc: &mut toml_edit::DocumentMut, path: &str, value: String) -> Result<(), String> {
    use toml_edit::Item;
    let segs: Vec<&str> = path.split('.').collect();
    let mut node: &mut Item = doc.as_item_mut();
    let mut rest: &[&str] = &segs;
    while let Some((seg, tail)) = rest.split_first() {
        node = match node {
            Item::ArrayOfTables(a) => {
                let t = a
                    .iter_mut()
                    .find(|t| t.get("name").and_then(Item::as_str) == Some(*seg))
                    .ok_or("names no server")?;
                let (key, after) = tail.split_first().ok_or("names a server, not a field")?;
                rest = after;
                t.get_mut(key).ok_or("does not exist")?
            }
            other => {
                rest = tail;
                other
                    .as_table_like_mut()
                    .ok_or("is not a table")?
                    .get_mut(seg)
                    .ok_or("does not exist")?
            }
        };
    }
    replace_string(node, value)
}

fn replace_string(item: &mut toml_edit::Item, value: String) -> Result<(), String> {
    match item {
        toml_edit::Item::Value(toml_edit::Value::String(s)) => {
            let decor = s.decor().clone();
            let mut f = toml_edit::Formatted::new(value);
            *f.decor_mut() = decor;
            *s = f;
            Ok(())
        }
        _ => Err("is not a string".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::with_line_endings_of;

    /// toml_edit writes LF for every line but keeps CRLF inside a multi-line string; the
    /// conversion gives every line CRLF again and changes no value, not even one of a
    /// multi-line string with quotes, escapes or `#` in it.
    #[test]
    fn crlf_comes_back_and_no_value_changes() {
        let original = "a = 1\r\ns = '''\r\nl1\r\nl2'''\r\n[t]\r\nx = \"\"\"\r\nm\r\n\"\"\"\r\n";
        let mut doc: toml_edit::DocumentMut = original.parse().expect("parses");
        doc["t"]["y"] = toml_edit::value("new\nline");
        doc["t"]["z"] = toml_edit::value("q \"\"\" and ''' # not \\ a comment\nz\"");
        doc["t"]["w"] = toml_edit::value("it's\nnot''closed''");
        doc["t"]["v"] = toml_edit::value("plain # \"");
        let written = doc.to_string();
        assert!(written.contains("a = 1\n"), "{written:?}");
        let kept = with_line_endings_of(original, written.clone());
        let bare = kept.replace("\r\n", "").matches('\n').count();
        assert_eq!(
            bare, 6,
            "only the new strings' own newlines stay LF: {kept:?}"
        );
        assert!(
            kept.starts_with("a = 1\r\ns = '''\r\nl1\r\nl2'''\r\n"),
            "{kept:?}"
        );
        assert!(kept.ends_with("\r\n"), "{kept:?}");
        let before: toml::Table = toml::from_str(&written).expect("parses");
        let after: toml::Table = toml::from_str(&kept).expect("parses");
        assert_eq!(before, after, "{written:?}\n{kept:?}");
        // Mostly LF: left alone.
        let lf = "a = 1\nb = 2\nc = '''\r\nx'''\n";
        assert_eq!(with_line_endings_of(lf, lf.to_string()), lf);
    }
}
