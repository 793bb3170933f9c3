//! Rendering the two bundle files from a plan and what the capture actually carried
//! (reference §9.1 steps 9-11): the identity document and skill bundles the capture did not carry
//! become `source_missing` entries, the manifest lists only the skill bundles that are under
//! `skills/`, and the config closure must pass the gate before either text is handed back.

use serde::Serialize;

use zeroclaw_config::agent_bundle as zc;

use super::error::AgentError;
use super::layout::SKILLS_DIR;
use super::manifest::{Dropped, Manifest, Provenance, MANIFEST_HEADER};
use super::plan::ExportPlan;

/// The comment header of `config.toml` (reference §4.1).
pub const CONFIG_HEADER: &str = concat!(
    "\
# ZeroClaw agent bundle — config closure.
#
# This is a FRAGMENT, not a complete config.toml. `zeroclaw agents import`
# merges it into the target install; it never replaces the target's config.
# Empty-string values are credentials that were scrubbed on export and must be
# supplied on the target — see `required_secrets` in zeroclaw-agent.toml.
#
",
    super::manifest::secret_story_text!()
);

/// What the capture found, fed back before rendering: the bundle describes what was carried.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaptureOutcome {
    /// Planned skill bundles that contributed at least one skill file under `skills/<alias>/`.
    pub carried_skill_bundles: Vec<String>,
    /// Planned skill bundles with no content (directory absent, empty, or everything filtered
    /// or skipped). A planned bundle in neither list is treated as missing.
    pub missing_skill_bundles: Vec<String>,
    /// Whether `workspace/<identity_document>` was carried as a regular file. Only read when the
    /// plan retains an identity document; `false` drops the reference (`source_missing`).
    pub identity_document_carried: bool,
    /// Entries the operator's `--exclude` patterns left out (`BundleFilter::dropped`).
    pub excluded: Vec<Dropped>,
}

/// The two bundle files, and the manifest in structured form for reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RenderedBundle {
    /// Text of `config.toml`.
    pub config_toml: String,
    /// Text of `zeroclaw-agent.toml`.
    pub manifest_toml: String,
    /// The manifest the text was rendered from.
    pub manifest: Manifest,
}

impl ExportPlan {
    /// Render `(config.toml, zeroclaw-agent.toml)` from what was carried, with ZeroClaw's own
    /// renderers: the identity document and skill bundles the capture did not carry are folded
    /// in the way ZeroClaw's `agents export` folds them, and the closure must load as a
    /// ZeroClaw `Config` and pass its `validate()` on its own before either text is handed back.
    pub fn render(
        &self,
        outcome: &CaptureOutcome,
        provenance: &Provenance,
    ) -> Result<RenderedBundle, AgentError> {
        let planned: Vec<&str> = self.skills.iter().map(|s| s.alias.as_str()).collect();
        for alias in outcome
            .carried_skill_bundles
            .iter()
            .chain(&outcome.missing_skill_bundles)
        {
            if !planned.contains(&alias.as_str()) {
                return Err(AgentError::CaptureMismatch(format!(
                    "skill bundle `{alias}` was not planned for agent '{}'",
                    self.alias
                )));
            }
        }
        if let Some(both) = outcome
            .carried_skill_bundles
            .iter()
            .find(|a| outcome.missing_skill_bundles.contains(a))
        {
            return Err(AgentError::CaptureMismatch(format!(
                "skill bundle `{both}` is reported both carried and missing"
            )));
        }

        let mut plan = self.zeroclaw.clone();
        if plan.identity_document.is_some() && !outcome.identity_document_carried {
            zc::record_missing_identity_document(&mut plan);
        }
        plan.dropped
            .extend(outcome.excluded.iter().map(super::bridge::dropped_to));
        let not_carried = |alias: &&str| !outcome.carried_skill_bundles.iter().any(|c| c == alias);
        // Left out by the operator (`--exclude`): listed as such already, so not also
        // `source_missing`; like a missing one, no longer advertised or flagged.
        let (excluded, missing): (Vec<&str>, Vec<&str>) = planned
            .iter()
            .copied()
            .filter(not_carried)
            .partition(|alias| {
                let path = format!("{SKILLS_DIR}/{alias}");
                outcome.excluded.iter().any(|d| d.path == path)
            });
        for alias in excluded {
            plan.skill_sources.retain(|s| s.alias != alias);
            let flag_path = format!("skill_bundles.{alias}");
            plan.risk_flags
                .retain(|f| f.kind != zc::RiskKind::CarriedSkills || f.path != flag_path);
        }
        let missing: Vec<String> = missing.into_iter().map(str::to_string).collect();
        zc::record_missing_skill_content(&mut plan, &missing);

        let config_toml = with_header(
            CONFIG_HEADER,
            &zc::render_config_toml(&plan).map_err(|e| self.with_skipped_sections(e))?,
        );
        let zc_provenance = zc::Provenance {
            zeroclaw_version: provenance.zeroclaw_version.clone(),
            exported_at: provenance.exported_at.clone(),
        };
        let manifest_toml = with_header(
            MANIFEST_HEADER,
            &zc::render_manifest_toml(&plan, &zc_provenance)
                .map_err(super::bridge::from_zeroclaw)?,
        );
        let manifest = Manifest::from_toml_str(&manifest_toml)?;
        Ok(RenderedBundle {
            manifest_toml,
            config_toml,
            manifest,
        })
    }
}

impl ExportPlan {
    /// A closure that does not validate, with the sections ZeroClaw's loader skipped named:
    /// a reference to a skipped section reads as "not configured", which misleads unless the
    /// skip is said.
    fn with_skipped_sections(&self, err: zc::ExportError) -> AgentError {
        match super::bridge::from_zeroclaw(err) {
            AgentError::ClosureInvalid { alias, problem } if !self.degraded_sections.is_empty() => {
                AgentError::ClosureInvalid {
                    alias,
                    problem: format!(
                        "{problem} (ZeroClaw's loader skipped invalid config sections: {}{})",
                        self.degraded_sections.join(", "),
                        self.degraded_reason
                            .as_deref()
                            .map(|r| format!("; {r}"))
                            .unwrap_or_default()
                    ),
                }
            }
            other => other,
        }
    }
}

/// ZeroClaw's rendering with its leading comment block replaced by ours (which also states our
/// stricter scrub). The TOML body, which is what ZeroClaw reads, is ZeroClaw's byte for byte.
fn with_header(header: &str, rendered: &str) -> String {
    let mut body = rendered;
    while body.starts_with('#') {
        body = body.split_once('\n').map_or("", |(_, rest)| rest);
    }
    format!("{header}{body}")
}
