//! Rendering the two bundle files from a plan and what the capture actually carried
//! (reference §9.1 steps 9-11): the identity document and skill bundles the capture did not carry
//! become `source_missing` entries, the manifest lists only the skill bundles that are under
//! `skills/`, and the config closure must pass the gate before either text is handed back.

use serde::Serialize;

use super::error::AgentError;
use super::gate;
use super::manifest::{DropReason, Dropped, Manifest, Provenance};
use super::plan::{carried_skills_flag, ExportPlan};
use super::render::{ensure_blank_line_before_sections, to_toml};
use super::value::Node;

/// The comment header of `config.toml` (reference §4.1).
pub const CONFIG_HEADER: &str = "\
# ZeroClaw agent bundle — config closure.
#
# This is a FRAGMENT, not a complete config.toml. `zeroclaw agents import`
# merges it into the target install; it never replaces the target's config.
# Empty-string values are credentials that were scrubbed on export and must be
# supplied on the target — see `required_secrets` in zeroclaw-agent.toml.
#
# Scrubbing blanks the fields the schema marks secret, and any value under a
# key named like a credential. It is not credential detection: every other
# value here travels as written, so a token in an MCP server's `url`, or a
# credential in its `command` or `args`, is still present.
";

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
    /// Render `(config.toml, zeroclaw-agent.toml)` from what was carried. Runs the closure gate
    /// (reference §4.9, §10) on the rendered fragment: a failing check is an error naming the field.
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

        let mut closure = self.closure.clone();
        let mut dropped = self.dropped.clone();
        dropped.extend(outcome.excluded.iter().cloned());
        if let Some(document) = &self.identity_document {
            if !outcome.identity_document_carried {
                if let Some(Node::Table(identity)) =
                    closure.lookup_mut(&["agents", &self.alias, "identity"])
                {
                    identity.remove("aieos_path");
                    if identity.is_empty() {
                        if let Some(Node::Table(agent)) =
                            closure.lookup_mut(&["agents", &self.alias])
                        {
                            agent.remove("identity");
                        }
                    }
                }
                dropped.push(Dropped::new(
                    format!("agents.{}.identity.aieos_path", self.alias),
                    DropReason::SourceMissing,
                    format!(
                        "the AIEOS identity document `{document}` is not in the exported workspace, \
                         so the reference is dropped rather than shipped pointing at nothing"
                    ),
                ));
            }
        }
        let carried: Vec<&str> = planned
            .iter()
            .copied()
            .filter(|a| outcome.carried_skill_bundles.iter().any(|c| c == a))
            .collect();
        for alias in planned.iter().filter(|a| !carried.contains(a)) {
            let path = format!("skills/{alias}");
            if outcome.excluded.iter().any(|d| d.path == path) {
                continue; // left out by the operator, listed as such already
            }
            dropped.push(Dropped::new(
                path,
                DropReason::SourceMissing,
                "the skill bundle carried no skills from the exporting host: its directory is \
                 absent, or holds nothing the bundle admits. Its config travels, so install the \
                 skills on the target, or re-export from a host that has them",
            ));
        }

        let config_toml = format!(
            "{CONFIG_HEADER}{}",
            ensure_blank_line_before_sections(&to_toml(&closure))
        );
        gate::check(&self.alias, &config_toml)?;

        let mut risk_flags: Vec<_> = carried.iter().map(|a| carried_skills_flag(a)).collect();
        risk_flags.extend(self.policy_flags.iter().cloned());
        let manifest = Manifest::new(
            &self.alias,
            self.required_secrets.clone(),
            carried.iter().map(|a| a.to_string()).collect(),
            provenance.clone(),
            dropped,
            risk_flags,
        );
        Ok(RenderedBundle {
            manifest_toml: manifest.to_toml_string(),
            config_toml,
            manifest,
        })
    }
}
