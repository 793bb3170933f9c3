//! `sync`: keep imported agents in step with the remote they came from. For each agent (the
//! one named, or every agent whose provenance names a remote) it pulls the newest version
//! (`REMOTE/agent/<bundle alias>`), requires a signature by the store's trust (unless the
//! caller allows unsigned bundles, which must be said), plans the update in place three ways
//! and applies it only when it grants nothing new and has no conflicts. Anything else is held
//! for the operator: nothing is written, and the report carries the plan and how to review it.
//! Safe from a timer: an agent already up to date costs one listing of its remote and writes
//! nothing, and two syncs of one install never run at once (the second fails, naming the
//! lock).

use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::{Error, Verb};
use super::{Bundles, Progress, Result, SignerTrust, TrustPolicy};
use crate::import::update::{ConflictPolicy, UpdatePlan, UpdateRequest};
use crate::provenance::{self, Provenance};
use crate::source::{classify, Takes, Target};

/// The lock two syncs of one install share, below the install root.
const SYNC_LOCK: &str = ".zeroclaw-bundle/sync.lock";

/// What to keep in step.
#[derive(Debug, Clone, Copy)]
pub struct SyncRequest<'a> {
    /// `[REMOTE/]agent/ALIAS`: the bundle agent to follow (without `REMOTE/`, the remote its
    /// import came from). `None`: every agent whose provenance names a remote.
    pub source: Option<&'a str>,
    /// The install root (the directory of `config.toml`).
    pub install: &'a Path,
    /// The local agent to update (`--as`), when more than one follows the same bundle agent.
    pub alias: Option<&'a str>,
    /// Take bundles nobody signed, or signed by a key the store does not trust. Off by
    /// default: a sync requires a signature by the store's allowed signers.
    pub allow_unsigned: bool,
    /// An allowed_signers file instead of the store's.
    pub allowed_signers: Option<&'a Path>,
}

/// What became of one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncOutcome {
    /// The install holds the newest version already; nothing was written.
    UpToDate,
    /// Updated in place.
    Updated,
    /// Held: the newest version grants what the version last imported did not.
    HeldForGrants,
    /// Held: local and upstream changed the same paths or keys differently.
    HeldForConflicts,
    /// Could not be synced (unsigned, unreachable, refused); nothing was written.
    Failed,
}

/// One agent of a sync.
#[derive(Debug, Clone, Serialize)]
pub struct SyncedAgent {
    /// The local agent.
    pub alias: String,
    /// What was pulled (`REMOTE/agent/ALIAS`).
    pub source: String,
    /// What became of it.
    pub outcome: SyncOutcome,
    /// The three-way plan (absent when the sync failed before planning).
    pub plan: Option<UpdatePlan>,
    /// For a held update: the snapshot to review (`zeroclaw-bundle review ID`, or mount it).
    pub review: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// What a sync did, agent by agent.
#[derive(Debug, Clone, Serialize)]
pub struct SyncReport {
    /// The install.
    pub install: PathBuf,
    /// Each agent synced, in the order done.
    pub agents: Vec<SyncedAgent>,
}

impl SyncReport {
    /// The most serious outcome (`Failed` over held over updated over up to date); `UpToDate`
    /// when there was nothing to sync.
    pub fn worst(&self) -> SyncOutcome {
        self.agents
            .iter()
            .map(|a| a.outcome)
            .max()
            .unwrap_or(SyncOutcome::UpToDate)
    }
}

impl Bundles {
    /// Syncs the agents `request` names (see the module doc). Fails before anything is pulled
    /// when no signer is trusted and unsigned bundles were not allowed, when another sync of
    /// the install runs, or when nothing names an agent to follow; an agent that fails is
    /// reported as [`SyncOutcome::Failed`] and the others still sync.
    pub fn sync(&self, request: &SyncRequest<'_>, progress: &dyn Progress) -> Result<SyncReport> {
        let install = request.install;
        let fail = |e: anyhow::Error| Error::new(Verb::Import, install.display().to_string(), e);
        let policy = SignerTrust::resolve(
            self.root(),
            request.allowed_signers,
            !request.allow_unsigned,
        )
        .and_then(|trust| trust.policy("sync"))
        .map_err(|e| {
            fail(anyhow::Error::new(e).context(
                "a sync takes only signed bundles: name the allowed signers with \
                 `zeroclaw-bundle trust --allowed-signers FILE` (or --allowed-signers), or \
                 pass --allow-unsigned",
            ))
        })?;
        let _lock = lock_sync(install).map_err(fail)?;
        let targets = self.sync_targets(request).map_err(fail)?;
        let mut agents = Vec::new();
        for (alias, source) in targets {
            progress.check_cancel().map_err(|e| fail(e.into()))?;
            agents.push(self.sync_one(install, &alias, &source, &policy, progress));
        }
        Ok(SyncReport {
            install: install.to_path_buf(),
            agents,
        })
    }

    /// The agents to sync, as (local alias, `REMOTE/agent/BUNDLE_ALIAS`).
    fn sync_targets(&self, request: &SyncRequest<'_>) -> anyhow::Result<Vec<(String, String)>> {
        let records = provenance::read_all(request.install)?;
        let Some(source) = request.source else {
            let followed: Vec<_> = records
                .iter()
                .filter(|r| request.alias.is_none_or(|a| a == r.alias))
                .filter_map(|r| Some((r.alias.clone(), self.followed_remote(r)?)))
                .collect();
            anyhow::ensure!(
                !followed.is_empty(),
                "no agent of {} was imported from a remote: name one to sync \
                 (`zeroclaw-bundle sync REMOTE/agent/ALIAS`)",
                request.install.display()
            );
            return Ok(followed);
        };
        let (remote, bundle_alias) = match source.split_once("/agent/") {
            Some((remote, alias)) => (Some(remote.to_string()), alias),
            None => match source.strip_prefix("agent/") {
                Some(alias) => (None, alias),
                None => anyhow::bail!(
                    "{source}: a sync follows an agent: give `agent/ALIAS` or \
                     `REMOTE/agent/ALIAS`"
                ),
            },
        };
        let mut mine: Vec<&Provenance> = records
            .iter()
            .filter(|r| r.bundle_alias == bundle_alias)
            .filter(|r| request.alias.is_none_or(|a| a == r.alias))
            .collect();
        let record = match mine.len() {
            1 => mine.remove(0),
            0 => anyhow::bail!(
                "no agent of {} was imported from a bundle of agent {bundle_alias}{}: import it \
                 first (a sync updates an agent in place)",
                request.install.display(),
                request
                    .alias
                    .map(|a| format!(" as {a}"))
                    .unwrap_or_default()
            ),
            _ => anyhow::bail!(
                "agents {} each follow agent {bundle_alias}: name the one to sync with --as",
                mine.iter()
                    .map(|r| r.alias.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let remote = match remote {
            Some(remote) => remote,
            None => self
                .followed_remote(record)
                .and_then(|s| s.split_once('/').map(|(r, _)| r.to_string()))
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "agent {} was not imported from a remote: name one \
                         (`zeroclaw-bundle sync REMOTE/agent/{bundle_alias}`)",
                        record.alias
                    )
                })?,
        };
        Ok(vec![(
            record.alias.clone(),
            format!("{remote}/agent/{bundle_alias}"),
        )])
    }

    /// `REMOTE/agent/BUNDLE_ALIAS` for an agent whose import came from remote REMOTE of this
    /// store; None for any other source.
    fn followed_remote(&self, record: &Provenance) -> Option<String> {
        let reference = classify(self.root(), OsStr::new(&record.source), Takes::IMPORT).ok()?;
        match reference.target {
            Target::Remote { spec, .. } => {
                Some(format!("{}/agent/{}", spec.name, record.bundle_alias))
            }
            _ => None,
        }
    }

    /// Pulls, plans and (when nothing needs the operator) applies the update of one agent.
    fn sync_one(
        &self,
        install: &Path,
        alias: &str,
        source: &str,
        policy: &TrustPolicy,
        progress: &dyn Progress,
    ) -> SyncedAgent {
        let mut agent = SyncedAgent {
            alias: alias.to_string(),
            source: source.to_string(),
            outcome: SyncOutcome::Failed,
            plan: None,
            review: None,
            error: None,
        };
        let require = match policy {
            TrustPolicy::Require(allowed) => Some(allowed),
            _ => None,
        };
        let request = UpdateRequest {
            source: OsStr::new(source),
            install,
            alias: Some(alias),
            conflicts: ConflictPolicy::Refuse,
            accept_grants: false,
            require,
        };
        let plan = match self.update_plan(&request, progress) {
            Ok(plan) => plan,
            Err(e) => {
                agent.error = Some(format!("{e:#}"));
                return agent;
            }
        };
        agent.outcome = if plan.up_to_date {
            SyncOutcome::UpToDate
        } else if plan.refused() {
            SyncOutcome::HeldForConflicts
        } else if plan.grants_unaccepted() {
            SyncOutcome::HeldForGrants
        } else {
            match self.update(&plan, progress) {
                Ok(_) => SyncOutcome::Updated,
                Err(e) => {
                    agent.error = Some(format!("{e:#}"));
                    SyncOutcome::Failed
                }
            }
        };
        if matches!(
            agent.outcome,
            SyncOutcome::HeldForConflicts | SyncOutcome::HeldForGrants
        ) {
            agent.review = Some(plan.incoming.to_hex());
        }
        agent.plan = Some(plan);
        agent
    }
}

/// Takes the install's sync lock (held while the returned file is open); an error naming it
/// when another sync holds it.
fn lock_sync(install: &Path) -> anyhow::Result<File> {
    let path = install.join(SYNC_LOCK);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("could not create {}: {e}", dir.display()))?;
    }
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("could not open {}: {e}", path.display()))?;
    let locked = crate::sys::try_lock_exclusive(file.as_fd())
        .map_err(|e| anyhow::anyhow!("could not lock {}: {e}", path.display()))?;
    anyhow::ensure!(
        locked,
        "another sync of {} is running (it holds {}); nothing was done: run it again when it \
         ends",
        install.display(),
        path.display()
    );
    Ok(file)
}
