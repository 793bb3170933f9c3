//! The update verbs of the public API: [`Bundles::update_plan`], [`Bundles::update`] and
//! [`Bundles::rollback`], thin over `crate::import::update`, which owns the rules (three-way
//! merge against the snapshot last imported, the grants gate, the kept states).

use std::path::Path;

use super::{Bundles, Error, Progress, Result, Verb};
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
        let policy = match request.require {
            Some(_) => None,
            None => self.required_signers().map_err(fail)?,
        };
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
}
