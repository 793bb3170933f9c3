//! The export planner: an adapter around ZeroClaw 0.8.7's own planner
//! (`zeroclaw_config::agent_bundle::plan_export`), which computes the config closure (the
//! sanitized agent entry, its profiles, bundles, granted MCP servers and every provider it
//! reaches with the fallback chains), scrubs every field the schema marks secret, and lists the
//! `dropped` entries, the risk flags and the copy sources. This module turns its plan into the
//! sources our descriptor-verified capture walks, and adds the layers that are stricter on
//! purpose (each listed in `crate::docs::bundle`):
//! - the credential-name scrub: a non-empty string under a key named like a credential is
//!   blanked anywhere in the closure and listed in `required_secrets` with its rule (ZeroClaw
//!   carries, for example, a token under a provider's `provider_extra` table verbatim);
//! - `process_spawn` and `env_passthrough` flags for provider families that start a host
//!   process;
//! - credential-looking values that still travel, reported by dotted path (never the value);
//! - the sections ZeroClaw's loader skips as invalid, named for the report.
//!
//! Planning is pure: it never touches the filesystem. It fails on an unknown alias, an agent
//! whose section the loader skips, or ciphertext that survives the scrub; a dangling reference
//! fails later, when the closure is rendered and validated by ZeroClaw's `Config::validate()`.

use std::path::{Component, Path, PathBuf};

use zeroclaw_config::agent_bundle as zc;

use super::bridge::{dropped_from, flag_to, from_zeroclaw, table_from_zeroclaw, table_to_zeroclaw};
use super::error::AgentError;
use super::flags::provider_flags;
use super::install::Install;
use super::manifest::Dropped;
use super::schema;
use super::value::{Node, Table};
use crate::credentials::CredentialFinding;

/// Where a tree the bundle carries lives on the source host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeSource {
    /// Walk from the install root through these components, refusing a symlink at every
    /// component (e.g. `["agents", "<a>", "workspace"]` or `["shared", "skills", "<b>"]`).
    /// Every component is a plain name (no separator, not `.` or `..`).
    Anchored {
        /// The install root (symlinks above it are the operator's and are followed).
        anchor: PathBuf,
        /// The components below the anchor.
        components: Vec<String>,
    },
    /// A configured absolute path (a relative config path is resolved against the install
    /// root); only its last component is checked for a symlink.
    Configured {
        /// The path as configured, made absolute.
        path: PathBuf,
    },
}

impl TreeSource {
    /// The lexical path this source names (for overlap checks and messages).
    pub fn path(&self) -> PathBuf {
        match self {
            TreeSource::Anchored { anchor, components } => {
                let mut p = anchor.clone();
                p.extend(components);
                p
            }
            TreeSource::Configured { path } => path.clone(),
        }
    }
}

/// One planned skill bundle: its portable alias, where its content lives, and its filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillSource {
    /// The skill-bundle alias (passes the portable-name grammar); content goes to `skills/<alias>/`.
    pub alias: String,
    /// Always anchored at the install root, under `shared/`.
    pub source: TreeSource,
    /// Skill directory names admitted; empty admits all.
    pub include: Vec<String>,
    /// Skill directory names refused; always wins over `include`.
    pub exclude: Vec<String>,
}

impl SkillSource {
    /// Whether the skill directory `skill_dir_name` of this bundle travels (ZeroClaw's
    /// `SkillBundleConfig::admits_skill`).
    pub fn admits(&self, skill_dir_name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|n| n == skill_dir_name))
            && !self.exclude.iter().any(|n| n == skill_dir_name)
    }
}

/// Everything the export of one agent needs, before anything is captured.
#[derive(Clone, Debug)]
pub struct ExportPlan {
    /// The exported agent alias.
    pub alias: String,
    /// Where the workspace lives.
    pub workspace: TreeSource,
    /// One per planned skill bundle, in agent reference order.
    pub skills: Vec<SkillSource>,
    /// A pre-v3 install's single workspace (`<install>/workspace`), for agent `default` only:
    /// ZeroClaw's loader moves its entries into `agents/default/workspace` the first time it
    /// loads a v1 or v2 config (`schema::v2::migrate_v2_to_v3_install_filesystem`). An export
    /// never writes to the install, so when `workspace` is absent the capture reads the entries
    /// that move would put there from where they still are ([`legacy_entry_travels`]).
    pub legacy_workspace: Option<TreeSource>,
    /// ZeroClaw's own plan, with our stricter layers already applied to its closure,
    /// `required_secrets` and risk flags.
    pub(crate) zeroclaw: zc::ExportPlan,
    pub(crate) scrubbed_by_name: Vec<(String, &'static str)>,
    pub(crate) config_findings: Vec<CredentialFinding>,
    pub(crate) degraded_sections: Vec<String>,
    pub(crate) degraded_reason: Option<String>,
    pub(crate) unknown_keys: Vec<String>,
    /// `zeroclaw.config` as this module's tree (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    closure: Table,
}

impl ExportPlan {
    /// The retained identity document, relative to the workspace (`identity/aieos.json`): the
    /// capture reports whether it was carried as a regular file.
    pub fn identity_document(&self) -> Option<&str> {
        self.zeroclaw.identity_document.as_deref()
    }

    /// Dotted config paths scrubbed to `""`, sorted and deduplicated.
    #[cfg(test)]
    pub fn required_secrets(&self) -> &[String] {
        &self.zeroclaw.required_secrets
    }

    /// Scrubbed paths that no schema secret field covers, caught by the credential-name rule
    /// (`*_token`, `*secret*`, ...), with the rule that matched. Also in `required_secrets`.
    pub fn scrubbed_by_name(&self) -> &[(String, &'static str)] {
        &self.scrubbed_by_name
    }

    /// Values of the scrubbed closure that look like credentials (they travel as written), by
    /// dotted config path. Never the values themselves.
    pub fn config_findings(&self) -> &[CredentialFinding] {
        &self.config_findings
    }

    /// Config sections of the install that ZeroClaw's loader skips as invalid (dotted paths):
    /// the export sees the install as ZeroClaw does, without them.
    pub fn degraded_sections(&self) -> &[String] {
        &self.degraded_sections
    }

    /// Keys of the exported entries that ZeroClaw's schema does not know (dotted paths): its
    /// loader ignores them, so the bundle does not carry them (a typo such as `base_urll`).
    pub fn unknown_keys(&self) -> &[String] {
        &self.unknown_keys
    }

    /// The closure as planned (ZeroClaw's, with our scrub applied), as this module's tree.
    #[cfg(test)]
    pub(crate) fn closure(&self) -> &Table {
        &self.closure
    }

    /// Why ZeroClaw's strict loader refuses the install's config, when a section is skipped
    /// (its own words, naming the field).
    pub fn degraded_reason(&self) -> Option<&str> {
        self.degraded_reason.as_deref()
    }

    /// The `dropped` entries known before the capture (the capture may add `source_missing`).
    #[cfg(test)]
    pub fn dropped(&self) -> Vec<Dropped> {
        self.zeroclaw.dropped.iter().map(dropped_from).collect()
    }

    /// The risk flags as planned: one `carried_skills` per planned skill bundle, then the
    /// policy and server flags, then ours. Rendering removes the skill flags of bundles that
    /// carried nothing.
    #[cfg(test)]
    pub fn risk_flags(&self) -> Vec<super::manifest::RiskFlag> {
        self.zeroclaw
            .risk_flags
            .iter()
            .map(super::bridge::flag_from)
            .collect()
    }
}

/// The config entries of a bundle's fragment that ZeroClaw's exporter never writes: the
/// fragment is loaded by ZeroClaw's `Config` and planned again by ZeroClaw's planner for
/// `root_agent`, and every config path the planner drops is returned (the agent's
/// `workspace.path`, `workspace.access`, `workspace.read_memory_from`, `channels`, `delegates`,
/// `cron_jobs`, `a2a`, `delegate_same_risk_profile = true`, an `identity.aieos_path` outside
/// the workspace, a risk profile's `approval_route`, ...). An export of ours or of ZeroClaw
/// re-plans to nothing here; a fragment that carries one of them was written by hand, and an
/// import would hand the agent a place or a local agent the operator never granted. Content
/// drops (`workspace/...`, `skills/...`) are not config and are left out. A fragment ZeroClaw
/// cannot load, or without the agent, is an error. So is the drop ZeroClaw records at
/// `skill_bundles.<alias>` for an alias that is no portable directory name (a Windows device
/// name such as `con`): the planner keeps that entry in the closure and drops only its
/// content, so it is a content drop too.
pub fn fragment_drops(text: &str, root_agent: &str) -> Result<Vec<Dropped>, AgentError> {
    let typed: zeroclaw_config::schema::Config =
        toml::from_str(text).map_err(|e| AgentError::InvalidField {
            field: "config.toml".to_string(),
            problem: format!(
                "does not load under ZeroClaw {}'s schema: {}",
                schema::ZEROCLAW_VERSION,
                e.to_string().replace('\n', " ")
            ),
        })?;
    let plan = zc::plan_export(&typed, root_agent).map_err(from_zeroclaw)?;
    // One content drop per carried entry with such an alias; counted, so that a config drop
    // at the same dotted path (`skill_bundles.con.directory` of bundle `con` beside a bundle
    // named `con.directory`) is still returned.
    let mut content_drops: Vec<String> = plan
        .config
        .get("skill_bundles")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flat_map(|bundles| bundles.keys())
        .filter(|alias| !zc::is_safe_path_component(alias))
        .map(|alias| format!("skill_bundles.{alias}"))
        .collect();
    let mut is_content_drop = |path: &str| match content_drops.iter().position(|p| p == path) {
        Some(i) => {
            content_drops.swap_remove(i);
            true
        }
        None => false,
    };
    Ok(plan
        .dropped
        .iter()
        .filter(|d| {
            !d.path
                .starts_with(&format!("{}/", super::layout::WORKSPACE_DIR))
                && !d
                    .path
                    .starts_with(&format!("{}/", super::layout::SKILLS_DIR))
                && !is_content_drop(&d.path)
        })
        .map(dropped_from)
        .collect())
}

/// The config entries of a bundle's fragment outside the closure ZeroClaw's planner computes
/// for `root_agent` (dotted paths: `mcp.servers.shell`, `knowledge_bundles.x`, ...): entries
/// nothing the agent references reaches. An export never writes one; an import would add them
/// where a local agent that already names them (a dangling MCP server name, say) would start
/// using them, so an import refuses them and a review shows them. A fragment ZeroClaw cannot
/// load is an error; one without the agent has no closure to compare with (empty).
pub fn outside_closure(text: &str, root_agent: &str) -> Result<Vec<String>, AgentError> {
    let not_loaded = |e: &dyn std::fmt::Display| AgentError::InvalidField {
        field: "config.toml".to_string(),
        problem: format!(
            "does not load under ZeroClaw {}'s schema: {}",
            schema::ZEROCLAW_VERSION,
            e.to_string().replace('\n', " ")
        ),
    };
    let typed: zeroclaw_config::schema::Config =
        toml::from_str(text).map_err(|e| not_loaded(&e))?;
    if !typed.agents.contains_key(root_agent) {
        return Ok(Vec::new());
    }
    let raw: toml::Table = toml::from_str(text).map_err(|e| not_loaded(&e))?;
    let plan = zc::plan_export(&typed, root_agent).map_err(from_zeroclaw)?;
    let closure = entry_paths(&plan.config);
    Ok(entry_paths(&raw)
        .into_iter()
        .filter(|p| !closure.contains(p))
        .collect())
}

/// The aliased config entries a bundle's `config.toml` carries, as dotted paths (see
/// [`outside_closure`] for the shapes), sorted; a text that is not TOML carries none.
pub fn config_entries(text: &str) -> Vec<String> {
    toml::from_str::<toml::Table>(text)
        .map(|t| entry_paths(&t).into_iter().collect())
        .unwrap_or_default()
}

/// The dotted paths of the aliased entries of a config table (the one enumeration of
/// entries, `unknown::entries`, which the unknown-key report walks too).
fn entry_paths(config: &toml::Table) -> std::collections::BTreeSet<String> {
    super::unknown::entries(config)
        .into_iter()
        .map(|(_, path, _)| path)
        .collect()
}

/// Plan the export of agent `alias` with ZeroClaw's planner, then apply our stricter layers.
pub fn plan_export(install: &Install, alias: &str) -> Result<ExportPlan, AgentError> {
    if !install.typed.agents.contains_key(alias) {
        if install.writes_agent(alias) {
            return Err(AgentError::InvalidField {
                field: format!("agents.{alias}"),
                problem: format!(
                    "is in config.toml but ZeroClaw's loader skips it as invalid ({}), so \
                     ZeroClaw would not run this agent; fix the section and export again",
                    install
                        .degraded_reason()
                        .unwrap_or("the section does not load")
                ),
            });
        }
        if let Some(agents) = install
            .config
            .get("agents")
            .filter(|n| n.as_table().is_none())
        {
            return Err(AgentError::InvalidField {
                field: "agents".to_string(),
                problem: format!(
                    "must be a table of agents, not {}, so ZeroClaw's loader skips it ({})",
                    agents.type_name(),
                    install
                        .degraded_reason()
                        .unwrap_or("the section does not load")
                ),
            });
        }
        return Err(AgentError::UnknownAgent {
            alias: alias.to_string(),
            configured: install.agent_aliases(),
        });
    }
    let mut zeroclaw = zc::plan_export(&install.typed, alias).map_err(from_zeroclaw)?;
    let unknown_keys = super::unknown::unknown_keys(install, &zeroclaw.config);

    // Our stricter layers, on ZeroClaw's closure.
    let mut closure = table_from_zeroclaw(&zeroclaw.config)?;
    let scrubbed = schema::scrub_by_name(&mut closure);
    if let Some(path) = schema::find_ciphertext(&closure) {
        return Err(AgentError::CiphertextSurvived { path });
    }
    zeroclaw.config = table_to_zeroclaw(&closure);
    zeroclaw
        .required_secrets
        .extend(scrubbed.by_name.iter().map(|(path, _)| path.clone()));
    zeroclaw.required_secrets.sort();
    zeroclaw.required_secrets.dedup();
    zeroclaw
        .risk_flags
        .extend(provider_flags(&closure).iter().map(flag_to));
    let config_findings = credential_findings(&closure);

    let root = install.root();
    let workspace = match &zeroclaw.source_boundaries.workspace {
        Some(relative) => TreeSource::Anchored {
            anchor: root.to_path_buf(),
            components: plain_components(relative, &format!("agents.{alias}"))?,
        },
        None => {
            let configured = &zeroclaw.workspace_source;
            TreeSource::Configured {
                path: if configured.is_absolute() {
                    configured.clone()
                } else {
                    root.join(configured)
                },
            }
        }
    };
    let skills = zeroclaw
        .skill_sources
        .iter()
        .map(|s| {
            Ok(SkillSource {
                alias: s.alias.clone(),
                source: TreeSource::Anchored {
                    anchor: root.to_path_buf(),
                    components: plain_components(
                        &s.relative,
                        &format!("skill_bundles.{}", s.alias),
                    )?,
                },
                include: s.filter.include.clone(),
                exclude: s.filter.exclude.clone(),
            })
        })
        .collect::<Result<Vec<_>, AgentError>>()?;
    let default_anchored = matches!(&workspace, TreeSource::Anchored { components, .. }
        if components == &["agents", "default", "workspace"]);
    let legacy_workspace = (install.schema_version() < super::schema::SUPPORTED_SCHEMA_VERSION
        && default_anchored)
        .then(|| TreeSource::Anchored {
            anchor: root.to_path_buf(),
            components: vec!["workspace".to_string()],
        });
    Ok(ExportPlan {
        alias: alias.to_string(),
        workspace,
        skills,
        legacy_workspace,
        zeroclaw,
        scrubbed_by_name: scrubbed.by_name,
        config_findings,
        degraded_sections: install.degraded_sections().to_vec(),
        degraded_reason: install.degraded_reason().map(str::to_string),
        unknown_keys,
        closure,
    })
}

/// Whether a top-level entry of a pre-v3 `<install>/workspace` is one ZeroClaw's filesystem
/// migration moves into `agents/default/workspace` (its dispatch table sends `sessions`,
/// `state`, `plugins`, `devices.db` and `memory` to `data/`, and `skills` to `shared/`).
pub fn legacy_entry_travels(top_level_name: &str) -> bool {
    matches!(
        zeroclaw_config::schema::v2::v2_workspace_toplevel_dest(top_level_name),
        zeroclaw_config::schema::v2::V2WorkspaceDest::AgentDefault
    )
}

/// The components of an install-relative source path, each a plain name: ZeroClaw's planner
/// normalizes them lexically; anything else is refused rather than walked.
fn plain_components(relative: &Path, field: &str) -> Result<Vec<String>, AgentError> {
    let mut out = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => match name.to_str() {
                Some(name) => out.push(name.to_string()),
                None => {
                    return Err(AgentError::InvalidField {
                        field: field.to_string(),
                        problem: format!("names a directory that is not UTF-8: {relative:?}"),
                    })
                }
            },
            _ => {
                return Err(AgentError::InvalidField {
                    field: field.to_string(),
                    problem: format!(
                        "cannot name a directory under the install root: {}",
                        relative.display()
                    ),
                })
            }
        }
    }
    if out.is_empty() {
        return Err(AgentError::InvalidField {
            field: field.to_string(),
            problem: "names the install root itself, not a directory under it".to_string(),
        });
    }
    Ok(out)
}

/// Values of the scrubbed closure that look like credentials, by dotted path.
fn credential_findings(closure: &Table) -> Vec<CredentialFinding> {
    let mut found = Vec::new();
    super::value::walk_strings("", &Node::Table(closure.clone()), &mut |path, value| {
        if let Some(reason) = crate::credentials::detect(value) {
            found.push(CredentialFinding {
                location: path.to_string(),
                reason,
            });
        }
    });
    found
}
