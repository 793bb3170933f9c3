//! The update verbs of the public API: [`Bundles::update_plan`], [`Bundles::update`],
//! [`Bundles::rollback`] and [`Bundles::recover_install`], thin over `crate::import::update`,
//! which owns the rules (three-way merge against the snapshot last imported, the grants gate,
//! the kept states), and `crate::import::journal` (the intent journal that a kill cut short).

use std::path::Path;

use super::{Bundles, Error, Progress, Result, Verb};
use crate::import::journal::{self, InstallRecovered};
use crate::import::update::{self, UpdatePlan, UpdateRequest, Updated};

impl Bundles {
    /// Plans the update in place of the local agent that an earlier import made from a bundle
    /// of the same agent (or of `request.alias`): the three-way plan of its workspace files
    /// and config entries (taken, kept, conflicts, config keys) and the grants it adds.
    /// Captures into the store; writes nothing to the install.
    pub fn update_plan(
        &self,
        request: &UpdateRequest<'_>,
        progress: &dyn Progress,
    ) -> Result<UpdatePlan> {
        let fail = |e: anyhow::Error| Error::new(Verb::Import, request.source.to_string_lossy(), e);
        let policy = self.unless_given(request.require).map_err(fail)?;
        let request = UpdateRequest {
            require: request.require.or(policy.as_ref()),
            ..*request
        };
        update::plan(&self.store, &request, progress).map_err(|e| fail(e.into()))
    }

    /// Applies what [`Bundles::update_plan`] planned: the previous state recorded (for
    /// [`Bundles::rollback`]), the workspace through the staged publish, `config.toml` last.
    /// Refuses a plan with unresolved conflicts, or with new grants not accepted
    /// ([`UpdatePlan::accepting_grants`]).
    pub fn update(&self, plan: &UpdatePlan, progress: &dyn Progress) -> Result<Updated> {
        update::apply(&self.store, plan, progress)
            .map_err(|e| Error::new(Verb::Import, plan.install.display().to_string(), e.into()))
    }

    /// Restores agent `alias` of `install` to the state before its last update or rollback
    /// (workspace files and config entries; a local edit made since is kept, a conflicting
    /// one refuses).
    pub fn rollback(
        &self,
        install: &Path,
        alias: &str,
        progress: &dyn Progress,
    ) -> Result<Updated> {
        update::rollback(&self.store, install, alias, progress)
            .map_err(|e| Error::new(Verb::Import, install.display().to_string(), e.into()))
    }

    /// Finishes every update or rollback of install `install` that was cut short (killed
    /// after it began to write): each such agent is rolled forward to the state after its
    /// change. Refuses, naming the path, when `config.toml` or the agent's workspace was
    /// edited since (neither as before nor as after the change). With nothing pending it
    /// does nothing ([`InstallRecovered::nothing_done`]).
    pub fn recover_install(
        &self,
        install: &Path,
        progress: &dyn Progress,
    ) -> Result<InstallRecovered> {
        journal::recover_install(&self.store, install, progress)
            .map_err(|e| Error::new(Verb::Recover, install.display().to_string(), e.into()))
    }
}
