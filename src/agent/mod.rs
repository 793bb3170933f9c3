//! Everything that knows what a ZeroClaw install and agent are: an adapter around ZeroClaw's
//! own schema crate (`zeroclaw-config`, pinned to [`ZEROCLAW_VERSION`]), which loads an
//! install's `config.toml` (migrating old schema versions in memory), plans an export (the
//! config closure with its secret scrub, the `dropped` list, the risk flags, the copy sources)
//! and renders and validates the bundle's `config.toml` and manifest; plus our stricter layers
//! (credential-name scrub, process flags, credential-looking values), the semantic comparison
//! of two bundles, Pure logic over TOML: the only filesystem
//! access is reading `config.toml`; capturing trees and publishing belong to `capture` and
//! `publish`.
//!
//! The flow, as `export` drives it:
//!
//! ```text
//! let install = Install::load(std::path::Path::new("/home/me/.zeroclaw"))?;
//! let plan = plan_export(&install, "researcher")?;
//! // ... capture plan.workspace and plan.skills, then report what was carried:
//! let outcome = CaptureOutcome::default();
//! let bundle = plan.render(&outcome, &Provenance::for_export(None, std::time::SystemTime::now()))?;
//! ```

mod bridge;
mod bundle;
mod compare;
mod error;
mod filter;
mod flags;
mod grants;
mod install;
mod layout;
mod manifest;
// The reference notes' portable-name grammar and its vectors (case 38). Test-only since the
// export uses ZeroClaw's own planner, which applies it; the vectors stay as the record of it.
#[cfg(test)]
mod names;
pub(crate) mod plan;
// Test-only since ZeroClaw's renderers write the bundle files: builds manifests to read back.
#[cfg(test)]
mod render;
mod schema;
mod unknown;
mod value;

pub use bundle::{CaptureOutcome, RenderedBundle};
pub use compare::{
    compare_bundles, compare_configs, mask_manifest_secrets, mask_secrets, SemanticChange,
};
pub use error::{AgentError, INSTALL_DEFAULT};
pub use filter::BundleFilter;
pub use flags::shown_detail;
pub use grants::{bundle_grants, Grant, GrantKind};
pub(crate) use grants::{fragment_change_grants, fragment_grants};
pub(crate) use install::CONFIG_CAP;
pub use install::{install_root, require_install, Install};
pub(crate) use layout::workspace_entry_included;
pub use layout::{CONFIG_FILE, MANIFEST_FILE, SKILLS_DIR, WORKSPACE_DIR};
pub use manifest::{
    manifests_differ_only_in_export_time, rfc3339_utc, secret_story, Dropped, Manifest, Provenance,
    RiskKind, MANIFEST_HEADER,
};
pub use plan::{
    config_entries, fragment_drops, legacy_entry_travels, outside_closure, plan_export, ExportPlan,
    TreeSource,
};
#[cfg(test)]
pub use {
    bundle::CONFIG_HEADER,
    manifest::{DropReason, RiskFlag},
};

#[cfg(test)]
mod closure_fuzz;
#[cfg(test)]
mod tests;
