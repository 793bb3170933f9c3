//! `sync`: keep imported agents in step with the remote they came from. For each agent (the
//! one named, or every agent whose provenance names a remote) it pulls the newest version
//! (`REMOTE/agent/<bundle alias>`), requires a signature by the store's trust (unless the
//! caller allows unsigned bundles, which must be said), plans the update in place three ways
//! and applies it only when it grants nothing new and has no conflicts. Anything else is held
//! for the operator: nothing is written, and the report carries the plan and how to review it.
//! Safe from a timer: an agent already up to date costs one listing of its remote and writes
//! nothing, and two syncs of one install never run at once (the second fails, naming the
//! lock).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use zeroclaw_bundle_store::ObjectId;

use super::error::{Error, Verb};
use super::{Bundles, Progress, Result, SignerTrust, TrustPolicy};
use crate::import::update::{ConflictPolicy, UpdatePlan, UpdateRequest};
use crate::provenance::{self, Provenance};
use crate::remote::KnownRecords;
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
    /// The newest snapshot of the agent on the remote (absent when none could be found).
    pub snapshot: Option<ObjectId>,
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
    /// What finding the newest versions asked of each remote (one listing, plus the records
    /// this store did not hold yet): remote name -> requests and bytes. Pulls are not in it.
    pub listings: BTreeMap<String, String>,
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
        // A killed update of this install is finished first (`recover --install`), even when
        // every agent is up to date.
        crate::import::journal::refuse_pending(install).map_err(|e| fail(e.into()))?;
        let targets = self.sync_targets(request).map_err(fail)?;
        // One listing per remote: the newest snapshot of every agent on it.
        let mut newest: BTreeMap<String, anyhow::Result<BTreeMap<String, ObjectId>>> =
            BTreeMap::new();
        let mut listings = BTreeMap::new();
        let mut agents = Vec::new();
        for follow in targets {
            progress.check_cancel().map_err(|e| fail(e.into()))?;
            let listed = newest.entry(follow.remote.clone()).or_insert_with(|| {
                let (newest, traffic) = self.newest_of_agents(&follow.remote);
                listings.extend(traffic.map(|t| (follow.remote.clone(), t)));
                newest
            });
            let newest = match listed {
                Ok(listed) => listed.get(&follow.bundle_alias).copied(),
                Err(e) => {
                    agents.push(follow.failed(format!("{e:#}")));
                    continue;
                }
            };
            agents.push(self.sync_one(install, &follow, newest, &policy, progress));
        }
        Ok(SyncReport {
            install: install.to_path_buf(),
            agents,
            listings,
        })
    }

    /// The newest snapshot of every agent on remote `name` (one listing; the records this
    /// store lacks are fetched once and kept in its objects, a cache `gc` may drop), and what
    /// that asked of the remote.
    fn newest_of_agents(
        &self,
        name: &str,
    ) -> (anyhow::Result<BTreeMap<String, ObjectId>>, Option<String>) {
        let remote = match crate::remote::find_remote(self.root(), name)
            .and_then(|spec| crate::remote::Remote::open(&spec, false))
        {
            Ok(remote) => remote,
            Err(e) => return (Err(e.into()), None),
        };
        let newest = remote.newest_of_agents(&StoreRecords(&self.store));
        (newest.map_err(Into::into), Some(remote.traffic()))
    }

    /// The agents to sync.
    fn sync_targets(&self, request: &SyncRequest<'_>) -> anyhow::Result<Vec<Follow>> {
        let records = provenance::read_all(request.install)?;
        let Some(source) = request.source else {
            let followed: Vec<_> = records
                .iter()
                .filter(|r| request.alias.is_none_or(|a| a == r.alias))
                .filter_map(|r| self.followed_remote(r))
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
                .map(|f| f.remote)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "agent {} was not imported from a remote: name one \
                         (`zeroclaw-bundle sync REMOTE/agent/{bundle_alias}`)",
                        record.alias
                    )
                })?,
        };
        Ok(vec![Follow {
            alias: record.alias.clone(),
            remote,
            bundle_alias: bundle_alias.to_string(),
            imported: record.snapshot,
        }])
    }

    /// What an agent whose import came from a remote of this store follows; None for any
    /// other source, and for an Agent Plugin's record (a remote keeps no "newest version of
    /// plugin P": `update REMOTE/REF` or a second `import` updates a plugin in place).
    fn followed_remote(&self, record: &Provenance) -> Option<Follow> {
        if crate::plugin::record_skill_alias(&record.alias).is_some() {
            return None;
        }
        let reference = classify(self.root(), OsStr::new(&record.source), Takes::IMPORT).ok()?;
        match reference.target {
            Target::Remote { spec, .. } => Some(Follow {
                alias: record.alias.clone(),
                remote: spec.name,
                bundle_alias: record.bundle_alias.clone(),
                imported: record.snapshot,
            }),
            _ => None,
        }
    }

    /// Pulls, plans and (when nothing needs the operator) applies the update of one agent
    /// whose newest snapshot on its remote is `newest`. The snapshot it was last imported from
    /// is up to date without a pull.
    fn sync_one(
        &self,
        install: &Path,
        follow: &Follow,
        newest: Option<ObjectId>,
        policy: &TrustPolicy,
        progress: &dyn Progress,
    ) -> SyncedAgent {
        let mut agent = follow.failed(String::new());
        agent.error = None;
        let Some(newest) = newest else {
            return follow.failed(format!(
                "remote {} has no snapshot of agent {}",
                follow.remote, follow.bundle_alias
            ));
        };
        if newest == follow.imported {
            agent.outcome = SyncOutcome::UpToDate;
            agent.snapshot = Some(newest);
            return agent;
        }
        let source = format!("{}/{}", follow.remote, newest.to_hex());
        agent.snapshot = Some(newest);
        let require = match policy {
            TrustPolicy::Require(allowed) => Some(allowed),
            _ => None,
        };
        let request = UpdateRequest {
            source: OsStr::new(&source),
            install,
            alias: Some(&follow.alias),
            conflicts: ConflictPolicy::Refuse,
            accept_grants: false,
            allow_downgrade: false,
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
                Ok(done) if !done.written => SyncOutcome::UpToDate,
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

/// One agent a sync follows.
struct Follow {
    /// The local agent.
    alias: String,
    /// The remote it follows.
    remote: String,
    /// Its alias on the remote (`agent/<bundle_alias>`).
    bundle_alias: String,
    /// The snapshot it was last imported from.
    imported: ObjectId,
}

impl Follow {
    /// The report of this agent's failed sync.
    fn failed(&self, why: String) -> SyncedAgent {
        SyncedAgent {
            alias: self.alias.clone(),
            source: format!("{}/agent/{}", self.remote, self.bundle_alias),
            outcome: SyncOutcome::Failed,
            snapshot: None,
            plan: None,
            review: None,
            error: Some(why),
        }
    }
}

/// The store's objects as the records a remote walk need not fetch, and where it keeps those
/// it fetched (loose objects no snapshot names: a cache that `gc` drops after its grace).
struct StoreRecords<'s>(&'s zeroclaw_bundle_store::Store);

impl KnownRecords for StoreRecords<'_> {
    fn known(&self, id: &ObjectId) -> Option<Vec<u8>> {
        self.0.objects().read_verified(id).ok()
    }

    fn keep(&self, _id: &ObjectId, record: &[u8]) {
        let _ = self.0.objects().write_bytes(record);
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
