//! The Agent Plugins verbs as a client runs them: `export-plugin` checked before any store is
//! opened or created ([`PreparedPluginExport`]: a typo in the bundle alias, the install or the
//! destination creates nothing). The rules live in `crate::plugin`.

use std::path::{Path, PathBuf};

use super::{Bundles, Error, Replace, Result, Verb};
use crate::plugin::PluginExportJob;
pub use crate::plugin::{LeftOut, PluginExported, PluginReview, PluginServer};

/// An `export-plugin` whose install, skill bundle and destination were checked, and whose
/// destination is claimed: nothing was captured or written, and no store was created.
pub struct PreparedPluginExport {
    job: PluginExportJob,
    alias: String,
    store_path: PathBuf,
    existing: Option<Bundles>,
}

impl Bundles {
    /// Checks an export of skill bundle `alias` of the install at `install` (`None`:
    /// ZeroClaw's default) as an Agent Plugin at `out`, named `name` (default: the alias,
    /// lowercased, `_` as `-`), before the store at `store` is opened or created.
    pub fn prepare_export_plugin(
        store: &Path,
        install: Option<&Path>,
        alias: &str,
        name: Option<&str>,
        out: &Path,
        replace: Replace,
    ) -> Result<PreparedPluginExport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Export, alias, e);
        let install = crate::agent::install_root(install).map_err(|e| fail(e.into()))?;
        let existing = Bundles::open_existing(store)?;
        let job = PluginExportJob::prepare(
            existing.as_ref().map(|b| &b.store),
            store,
            &install,
            alias,
            name,
            out,
            replace,
        )
        .map_err(fail)?;
        Ok(PreparedPluginExport {
            job,
            alias: alias.to_string(),
            store_path: store.to_path_buf(),
            existing,
        })
    }
}

impl PreparedPluginExport {
    /// Opens the store (creating it when there is none), captures the skill bundle, renders
    /// and validates the plugin, and publishes it (staged beside the destination and swapped
    /// in at once; a failed publish forgets the snapshot again).
    pub fn run(self, progress: &dyn super::Progress) -> Result<(Bundles, PluginExported)> {
        let bundles = match self.existing {
            Some(bundles) => bundles,
            None => Bundles::create(&self.store_path)?,
        };
        let exported = self
            .job
            .run(&bundles.store, progress)
            .map_err(|e| Error::new(Verb::Export, self.alias, e))?;
        Ok((bundles, exported))
    }
}
