//! The export planner (SPEC §5, reference §4.2, §7.3, §8): from an install and an alias, the
//! config closure (sanitized agent entry, the profiles, bundles, granted MCP servers and every
//! provider it reaches, including model-provider fallbacks to depth 3), scrubbed of secrets, plus
//! the `dropped` entries, the policy risk flags and the copy sources. Planning is pure: it never
//! touches the filesystem, and it never fails on a dangling reference (the closure gate, run when
//! rendering, does). It fails only on an unknown alias, a malformed field it must read, or
//! ciphertext that survives the scrub.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use super::error::AgentError;
use super::flags::{policy_flags, provider_flags, server_flags};
use super::install::Install;
use super::manifest::{DropReason, Dropped, RiskFlag, RiskKind};
use super::names::{portable_identity_path, unportable_reason};
use super::schema;
use super::value::{FieldError, Node, Table};
use crate::credentials::CredentialFinding;

/// Maximum depth of the model-provider fallback walk (roots are depth 0).
pub const MAX_FALLBACK_DEPTH: usize = 3;

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
    /// Whether the skill directory `skill_dir_name` of this bundle travels.
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
    pub(crate) identity_document: Option<String>,
    pub(crate) closure: Table,
    pub(crate) required_secrets: Vec<String>,
    pub(crate) scrubbed_by_name: Vec<(String, &'static str)>,
    pub(crate) config_findings: Vec<CredentialFinding>,
    pub(crate) dropped: Vec<Dropped>,
    pub(crate) policy_flags: Vec<RiskFlag>,
}

impl ExportPlan {
    /// The retained identity document, relative to the workspace (`identity/aieos.json`): the
    /// capture reports whether it was carried as a regular file.
    pub fn identity_document(&self) -> Option<&str> {
        self.identity_document.as_deref()
    }

    /// Dotted config paths scrubbed to `""`, sorted and deduplicated.
    pub fn required_secrets(&self) -> &[String] {
        &self.required_secrets
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

    /// The `dropped` entries known before the capture (the capture may add `source_missing`).
    pub fn dropped(&self) -> &[Dropped] {
        &self.dropped
    }

    /// The risk flags as planned: one `carried_skills` per planned skill bundle, then the
    /// policy and server flags. Rendering removes the skill flags of bundles that carried nothing.
    pub fn risk_flags(&self) -> Vec<RiskFlag> {
        let mut flags: Vec<RiskFlag> = self
            .skills
            .iter()
            .map(|s| carried_skills_flag(&s.alias))
            .collect();
        flags.extend(self.policy_flags.iter().cloned());
        flags
    }
}

pub(crate) fn carried_skills_flag(alias: &str) -> RiskFlag {
    RiskFlag::new(
        RiskKind::CarriedSkills,
        format!("skill_bundles.{alias}"),
        "the bundle carries this skill bundle's content from the exporting install; skills are \
         instructions the agent reads and act as code it may run",
    )
}

/// Plan the export of agent `alias` (reference §4.2).
pub fn plan_export(install: &Install, alias: &str) -> Result<ExportPlan, AgentError> {
    let config = &install.config;
    check_schema_version(config)?;
    let agent = find_agent(install, alias)?;
    let mut planner = Planner {
        config,
        root: install.root(),
        alias,
        agent,
        agent_path: format!("agents.{alias}"),
        closure: Table::new(),
        dropped: Vec::new(),
    };
    let identity_document = planner.carry_agent_entry()?;
    let workspace = workspace_source(install.root(), alias, agent)?;
    let profile_summary_provider = planner.carry_profiles()?;
    let skills = planner.carry_bundles()?;
    let granted = planner.carry_granted_servers()?;
    planner.carry_model_providers(profile_summary_provider)?;
    planner.carry_media_providers()?;
    let scrubbed = planner.scrub()?;
    let config_findings = credential_findings(&planner.closure);
    planner.drop_memory();
    let mut flags = policy_flags(config, alias, agent);
    flags.extend(server_flags(&granted));
    flags.extend(provider_flags(&planner.closure));
    Ok(ExportPlan {
        alias: alias.to_string(),
        workspace,
        skills,
        identity_document,
        closure: planner.closure,
        required_secrets: scrubbed.required,
        scrubbed_by_name: scrubbed.by_name,
        config_findings,
        dropped: planner.dropped,
        policy_flags: flags,
    })
}

/// `[agents.<alias>]`: a clear error for an unknown alias (listing the configured ones) or a
/// malformed table.
fn find_agent<'c>(install: &'c Install, alias: &str) -> Result<&'c Table, AgentError> {
    let agents = match install.config.get("agents") {
        None => None,
        Some(Node::Table(t)) => Some(t),
        Some(other) => {
            return Err(invalid(
                "agents",
                format!("must be a table, not {}", other.type_name()),
            ))
        }
    };
    match agents.and_then(|a| a.get(alias)) {
        Some(Node::Table(t)) => Ok(t),
        Some(other) => Err(invalid(
            &format!("agents.{alias}"),
            format!("must be a table, not {}", other.type_name()),
        )),
        None => Err(AgentError::UnknownAgent {
            alias: alias.to_string(),
            configured: install.agent_aliases(),
        }),
    }
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

/// Refuse a config whose `schema_version` this crate does not read (schema module: the pinned
/// version). ZeroClaw reads a missing key as version 1 and migrates older versions in memory;
/// that migration rewrites whole sections, so an older config is refused by name instead of
/// being half understood.
fn check_schema_version(config: &Table) -> Result<(), AgentError> {
    let found = match config.get("schema_version") {
        None => 1,
        Some(Node::Int(v)) if *v >= 1 => *v,
        Some(Node::Int(v)) => {
            return Err(invalid(
                "schema_version",
                format!("must be a positive integer, not {v}"),
            ))
        }
        Some(other) => {
            return Err(invalid(
                "schema_version",
                format!("must be a positive integer, not {}", other.type_name()),
            ))
        }
    };
    match found.cmp(&schema::SUPPORTED_SCHEMA_VERSION) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Greater => Err(AgentError::SchemaTooNew {
            found,
            supported: schema::SUPPORTED_SCHEMA_VERSION,
        }),
        std::cmp::Ordering::Less => Err(AgentError::SchemaTooOld {
            found,
            supported: schema::SUPPORTED_SCHEMA_VERSION,
            implicit: config.get("schema_version").is_none(),
        }),
    }
}

/// The closure being built for one agent: each step of [`plan_export`] is a method.
struct Planner<'a> {
    config: &'a Table,
    root: &'a Path,
    alias: &'a str,
    agent: &'a Table,
    agent_path: String,
    closure: Table,
    dropped: Vec<Dropped>,
}

impl Planner<'_> {
    /// Step 1: the agent entry, sanitized and pruned. Returns the retained identity document.
    fn carry_agent_entry(&mut self) -> Result<Option<String>, AgentError> {
        let (entry, identity_document) = self.sanitize_agent(self.alias, self.agent)?;
        self.closure.insert_at(
            &["agents", self.alias],
            Node::Table(schema::prune(&entry, &schema::agent_defaults())),
        );
        Ok(identity_document)
    }

    /// Step 2: the risk and runtime profiles, carried whole (their keys bound the agent); the
    /// risk profile's `approval_route` is dropped. Returns the runtime profile's
    /// `context_compression.summary_provider`, a provider root.
    fn carry_profiles(&mut self) -> Result<Option<String>, AgentError> {
        let (config, agent) = (self.config, self.agent);
        if let Some(r) = trimmed(agent.opt_str("risk_profile", &self.agent_path)?) {
            if let Some(profile) = config.table_at(&["risk_profiles", r])? {
                let mut carried = profile.clone();
                if carried.remove("approval_route").is_some() {
                    self.dropped.push(Dropped::new(
                        format!("risk_profiles.{r}.approval_route"),
                        DropReason::HostSpecific,
                        "the approval route names a source-install channel and approver; it is removed \
                         so a same-named target channel cannot silently receive this agent's approvals. \
                         Removing it also removes the source profile's distinct-approver policy, so \
                         rebind one on the target before enabling the agent when that separation is required",
                    ));
                }
                self.closure
                    .insert_at(&["risk_profiles", r], Node::Table(carried));
            }
        }
        let mut summary_provider = None;
        if let Some(p) = trimmed(agent.opt_str("runtime_profile", &self.agent_path)?) {
            if let Some(profile) = config.table_at(&["runtime_profiles", p])? {
                self.closure
                    .insert_at(&["runtime_profiles", p], Node::Table(profile.clone()));
                if let Some(cc) = profile.get("context_compression").and_then(Node::as_table) {
                    summary_provider = cc
                        .opt_str(
                            "summary_provider",
                            &format!("runtime_profiles.{p}.context_compression"),
                        )?
                        .map(str::to_string);
                }
            }
        }
        Ok(summary_provider)
    }

    /// Step 3: the skill, knowledge and MCP bundles the agent names; returns the planned skill
    /// sources.
    fn carry_bundles(&mut self) -> Result<Vec<SkillSource>, AgentError> {
        let mut skills = Vec::new();
        for b in dedup(&self.agent.str_list("skill_bundles", &self.agent_path)?) {
            if let Some(source) = self.carry_skill_bundle(&b)? {
                skills.push(source);
            }
        }
        for (section, defaults) in [
            ("knowledge_bundles", schema::knowledge_bundle_defaults()),
            ("mcp_bundles", schema::mcp_bundle_defaults()),
        ] {
            for name in dedup(&self.agent.str_list(section, &self.agent_path)?) {
                if let Some(t) = self.config.table_at(&[section, &name])? {
                    self.closure
                        .insert_at(&[section, &name], Node::Table(schema::prune(t, &defaults)));
                }
            }
        }
        Ok(skills)
    }

    /// Step 4: the MCP servers the agent's bundles actually grant (returned for the flags).
    fn carry_granted_servers(&mut self) -> Result<Vec<(String, Table)>, AgentError> {
        let bundles = dedup(&self.agent.str_list("mcp_bundles", &self.agent_path)?);
        let granted = granted_servers(self.config, &bundles)?;
        if !granted.is_empty() {
            let carried = granted
                .iter()
                .map(|(_, server)| {
                    Node::Table(schema::prune(server, &schema::mcp_server_defaults()))
                })
                .collect();
            self.closure
                .insert_at(&["mcp", "servers"], Node::Array(carried));
        }
        Ok(granted)
    }

    /// Step 5: every model provider the agent names, with its fallback chain.
    fn carry_model_providers(
        &mut self,
        profile_summary_provider: Option<String>,
    ) -> Result<(), AgentError> {
        let mut roots = Vec::new();
        for field in ["model_provider", "classifier_provider", "summary_provider"] {
            if let Some(r) = self.agent.opt_str(field, &self.agent_path)? {
                roots.push(r.to_string());
            }
        }
        roots.extend(profile_summary_provider);
        let mut carried = HashSet::new();
        for r in &roots {
            self.visit_model_provider(r, 0, &mut Vec::new(), &mut carried);
        }
        Ok(())
    }

    /// Step 6: the TTS and transcription providers the agent names.
    fn carry_media_providers(&mut self) -> Result<(), AgentError> {
        for (field, section) in [
            ("tts_provider", "tts"),
            ("transcription_provider", "transcription"),
        ] {
            let Some(reference) = trimmed(self.agent.opt_str(field, &self.agent_path)?) else {
                continue;
            };
            let Some((family, name)) = reference.split_once('.') else {
                continue;
            };
            if family.is_empty() || name.is_empty() {
                continue;
            }
            if let Some(t) = self
                .config
                .table_at(&["providers", section, family, name])?
            {
                self.closure.insert_at(
                    &["providers", section, family, name],
                    Node::Table(t.clone()),
                );
            }
        }
        Ok(())
    }

    /// Step 7: scrub, then make sure no ciphertext survived anywhere.
    fn scrub(&mut self) -> Result<schema::Scrubbed, AgentError> {
        let scrubbed = schema::scrub_secrets(&mut self.closure);
        if let Some(path) = schema::find_ciphertext(&self.closure) {
            return Err(AgentError::CiphertextSurvived { path });
        }
        Ok(scrubbed)
    }

    /// Step 8: memory never travels in format 1.
    fn drop_memory(&mut self) {
        self.dropped.push(Dropped::new(
            "workspace/memory",
            DropReason::NotYetPortable,
            "the memory store is a live SQLite database in WAL mode, which cannot be copied as files \
             without risking a torn or stale snapshot; bundle format 1 does not carry it",
        ));
        self.dropped.push(Dropped::new(
            "workspace/MEMORY_SNAPSHOT.md",
            DropReason::PrivateData,
            "the memory snapshot is an export of the agent's core memories, which an agent re-hydrates \
             its store from; it stays with the store it came from",
        ));
    }

    /// Rows 1-9 of the `dropped` table: remove what names the source host or its other agents,
    /// force `delegate_same_risk_profile = false`, keep a portable `aieos_path` normalized.
    fn sanitize_agent(
        &mut self,
        alias: &str,
        agent: &Table,
    ) -> Result<(Table, Option<String>), AgentError> {
        let mut entry = agent.clone();
        let at = |field: &str| format!("agents.{alias}.{field}");
        let removals: [(&str, DropReason, &str); 3] = [
            (
                "channels",
                DropReason::HostSpecific,
                "channel bindings name accounts and credentials that exist only on the source \
                 install; bind the imported agent to a local channel instead",
            ),
            (
                "delegates",
                DropReason::Relational,
                "the delegate roster names sibling agents that will not exist on the target install",
            ),
            (
                "cron_jobs",
                DropReason::NotYetPortable,
                "scheduled jobs are not carried by bundle format 1; re-create them on the target",
            ),
        ];
        for (field, reason, detail) in removals {
            if entry.remove(field).is_some_and(|n| n.is_non_empty()) {
                self.dropped.push(Dropped::new(at(field), reason, detail));
            }
        }
        if let Some(a2a) = entry.remove("a2a") {
            let published = a2a.as_table().is_some_and(|t| {
                t.get("published").is_some_and(Node::is_non_empty)
                    || t.get("exposed_skills").is_some_and(Node::is_non_empty)
            });
            if published {
                self.dropped.push(Dropped::new(
                    at("a2a"),
                    DropReason::DefaultClosed,
                    "A2A publication is an outward-facing surface; the imported agent arrives \
                     unpublished and must be published deliberately",
                ));
            }
        }
        if entry
            .get("delegate_same_risk_profile")
            .and_then(Node::as_bool)
            != Some(false)
        {
            self.dropped.push(Dropped::new(
                at("delegate_same_risk_profile"),
                DropReason::Relational,
                "auto-delegation to same-profile peers is on for this agent (ZeroClaw's default \
                 when the key is unset); it would reach agents on the target install that this \
                 agent has never been paired with, so the bundle sets it to false and the \
                 imported agent arrives with no delegate reach",
            ));
        }
        entry.insert("delegate_same_risk_profile", Node::Bool(false));

        let mut identity_document = None;
        if let Some(Node::Table(identity)) = entry.get_mut("identity") {
            if let Some(raw) = identity.remove("aieos_path") {
                let checked = match raw.as_str() {
                    Some(raw) => portable_identity_path(raw),
                    None => Err(format!(
                        "the AIEOS identity document path is {}, not a path",
                        raw.type_name()
                    )),
                };
                match checked {
                    Ok(normalized) => {
                        identity.insert("aieos_path", Node::Str(normalized.clone()));
                        identity_document = Some(normalized);
                    }
                    Err(detail) => {
                        self.dropped.push(Dropped::new(
                            at("identity.aieos_path"),
                            DropReason::HostSpecific,
                            detail,
                        ));
                    }
                }
            }
        }

        if let Some(Node::Table(ws)) = entry.get_mut("workspace") {
            let removals: [(&str, DropReason, &str); 3] = [
                (
                    "path",
                    DropReason::HostSpecific,
                    "the workspace override is a source-host absolute path; the imported agent \
                     uses the target's default workspace location",
                ),
                (
                    "access",
                    DropReason::Relational,
                    "cross-agent filesystem grants name sibling agents that will not exist on the \
                     target install",
                ),
                (
                    "read_memory_from",
                    DropReason::Relational,
                    "cross-agent memory grants name sibling agents that will not exist on the \
                     target install",
                ),
            ];
            for (field, reason, detail) in removals {
                if ws.remove(field).is_some_and(|n| n.is_non_empty()) {
                    self.dropped.push(Dropped::new(
                        at(&format!("workspace.{field}")),
                        reason,
                        detail,
                    ));
                }
            }
        }
        Ok((entry, identity_document))
    }

    /// Carry `skill_bundles.<b>` and plan its content (reference §7.3, dropped rows 11-13).
    fn carry_skill_bundle(&mut self, b: &str) -> Result<Option<SkillSource>, AgentError> {
        let config = self.config;
        let Some(source_entry) = config.table_at(&["skill_bundles", b])? else {
            return Ok(None);
        };
        let entry_path = format!("skill_bundles.{b}");
        let mut carried = schema::prune(source_entry, &schema::skill_bundle_defaults());
        let directory = source_entry
            .opt_str("directory", &entry_path)?
            .filter(|d| !d.trim().is_empty());
        if directory.is_some_and(host_anchored) {
            carried.remove("directory");
            self.dropped.push(Dropped::new(
                format!("{entry_path}.directory"),
                DropReason::HostSpecific,
                "the bundle directory is a source-host absolute path, and the target requires \
                 bundle directories inside its own install; the imported bundle uses the target's \
                 default location for this alias",
            ));
        }
        let source =
            self.plan_skill_source(b, directory, source_entry, &entry_path, &mut carried)?;
        self.closure
            .insert_at(&["skill_bundles", b], Node::Table(carried));
        Ok(source)
    }

    fn plan_skill_source(
        &mut self,
        b: &str,
        directory: Option<&str>,
        source_entry: &Table,
        entry_path: &str,
        carried: &mut Table,
    ) -> Result<Option<SkillSource>, AgentError> {
        if let Some(reason) = unportable_reason(b) {
            self.dropped.push(Dropped::new(
                entry_path,
                DropReason::HostSpecific,
                format!(
                    "the skill-bundle alias {reason}, so it is not a directory name every target \
                     can create for the bundle's content; rename the bundle to a plain name"
                ),
            ));
            return Ok(None);
        }
        let resolved = match directory {
            None => self.root.join("shared").join("skills").join(b),
            Some(d) if Path::new(d).is_absolute() => PathBuf::from(d),
            Some(d) => self.root.join(d),
        };
        let traverses =
            directory.is_some_and(|d| Path::new(d).components().any(|c| c == Component::ParentDir));
        let components = normalize_lexical(&resolved)
            .strip_prefix(normalize_lexical(self.root))
            .ok()
            .filter(|rel| !traverses && rel.starts_with("shared"))
            .and_then(|rel| {
                rel.components()
                    .map(|c| match c {
                        Component::Normal(s) => s.to_str().map(str::to_string),
                        _ => None,
                    })
                    .collect::<Option<Vec<String>>>()
            });
        let Some(components) = components else {
            carried.remove("directory");
            self.dropped.push(Dropped::new(
                format!("skills/{b}"),
                DropReason::HostSpecific,
                "the bundle's directory is not a plain path inside the install's shared tree, so \
                 its content is not the install's to export and is not carried; its config travels \
                 without the directory, and the skills must be installed at the target's default \
                 location for this alias",
            ));
            return Ok(None);
        };
        Ok(Some(SkillSource {
            alias: b.to_string(),
            source: TreeSource::Anchored {
                anchor: self.root.to_path_buf(),
                components,
            },
            include: source_entry.str_list("include", entry_path)?,
            exclude: source_entry.str_list("exclude", entry_path)?,
        }))
    }

    /// One step of the fallback walk (reference §8): carry the provider once, drop its edges
    /// that do not resolve on the source, and follow the rest up to depth 3, skipping cycles.
    fn visit_model_provider(
        &mut self,
        reference: &str,
        depth: usize,
        path: &mut Vec<String>,
        carried: &mut HashSet<String>,
    ) {
        if depth > MAX_FALLBACK_DEPTH {
            return;
        }
        let config = self.config;
        let models = config
            .lookup(&["providers", "models"])
            .and_then(Node::as_table);
        let Some((family, name, entry)) =
            models.and_then(|m| find_model_provider(m, reference.trim()))
        else {
            return;
        };
        let key = format!("{family}.{name}");
        if path.contains(&key) {
            return;
        }
        if carried.insert(key.clone()) {
            let mut copy = entry.clone();
            if let Some(Node::Array(fallbacks)) = entry.get("fallback") {
                let mut kept = Vec::new();
                for (index, fallback) in fallbacks.iter().enumerate() {
                    let resolves = fallback.as_str().is_some_and(|r| {
                        r.trim().is_empty()
                            || models
                                .and_then(|m| find_model_provider(m, r.trim()))
                                .is_some()
                    });
                    if resolves {
                        kept.push(fallback.clone());
                    } else {
                        let shown = match fallback.as_str() {
                            Some(r) => format!("{r:?}"),
                            None => format!("({})", fallback.type_name()),
                        };
                        self.dropped.push(Dropped::new(
                            format!("providers.models.{key}.fallback[{index}]"),
                            DropReason::SourceMissing,
                            format!(
                                "fallback {shown} does not resolve on the exporting install, so the \
                                 edge is removed rather than allowing a same-named target-local \
                                 provider to change the imported agent's endpoint or credentials"
                            ),
                        ));
                    }
                }
                if kept.is_empty() {
                    copy.remove("fallback");
                } else {
                    copy.insert("fallback", Node::Array(kept));
                }
            }
            self.closure
                .insert_at(&["providers", "models", family, name], Node::Table(copy));
        }
        path.push(key);
        if let Some(Node::Array(fallbacks)) = entry.get("fallback") {
            for fallback in fallbacks.iter().filter_map(Node::as_str) {
                self.visit_model_provider(fallback, depth + 1, path, carried);
            }
        }
        path.pop();
    }
}

/// `ModelProviders::find_by_name`: `family.alias`, or a bare alias that is unique across families.
pub(crate) fn find_model_provider<'t>(
    models: &'t Table,
    reference: &str,
) -> Option<(&'t str, &'t str, &'t Table)> {
    if reference.is_empty() {
        return None;
    }
    if let Some((family, alias)) = reference.split_once('.') {
        let (f, entries) = models.iter().find(|(f, _)| *f == family)?;
        let (a, entry) = entries.as_table()?.iter().find(|(a, _)| *a == alias)?;
        return Some((f, a, entry.as_table()?));
    }
    let mut found = None;
    for (family, entries) in models.iter() {
        let Some(entries) = entries.as_table() else {
            continue;
        };
        for (a, entry) in entries.iter() {
            if a == reference {
                if found.is_some() {
                    return None; // ambiguous
                }
                found = Some((family, a, entry.as_table()?));
            }
        }
    }
    found
}

/// The servers granted by the agent's MCP bundles: the union of their `servers` in first-seen
/// order minus the union of their `exclude` (deny wins), each resolved to the first
/// `[[mcp.servers]]` entry of that name. Unknown bundles and names grant nothing.
fn granted_servers(config: &Table, bundles: &[String]) -> Result<Vec<(String, Table)>, AgentError> {
    let mut names: Vec<String> = Vec::new();
    let mut denied: HashSet<String> = HashSet::new();
    for m in bundles {
        let Some(bundle) = config.table_at(&["mcp_bundles", m])? else {
            continue;
        };
        let path = format!("mcp_bundles.{m}");
        for s in bundle.str_list("servers", &path)? {
            if !names.contains(&s) {
                names.push(s);
            }
        }
        denied.extend(bundle.str_list("exclude", &path)?);
    }
    names.retain(|n| !denied.contains(n));
    let servers: &[Node] = match config.lookup(&["mcp", "servers"]) {
        None => &[],
        Some(Node::Array(items)) => items,
        Some(other) => {
            return Err(invalid(
                "mcp.servers",
                format!("must be an array of tables, not {}", other.type_name()),
            ))
        }
    };
    let mut granted = Vec::new();
    for name in names {
        let first = servers
            .iter()
            .filter_map(Node::as_table)
            .find(|s| s.get("name").and_then(Node::as_str) == Some(name.as_str()));
        if let Some(server) = first {
            granted.push((name, server.clone()));
        }
    }
    Ok(granted)
}

/// The workspace source: `workspace.path` when set (relative to the install root), else the
/// anchored default `agents/<alias>/workspace`.
fn workspace_source(root: &Path, alias: &str, agent: &Table) -> Result<TreeSource, AgentError> {
    let ws_path = format!("agents.{alias}.workspace");
    let configured = match agent.get("workspace") {
        Some(Node::Table(ws)) => ws.opt_str("path", &ws_path)?.filter(|p| !p.is_empty()),
        _ => None,
    };
    if let Some(p) = configured {
        let p = Path::new(p);
        let path = if p.is_absolute() {
            p.to_path_buf()
        } else {
            root.join(p)
        };
        return Ok(TreeSource::Configured { path });
    }
    let plain = !alias.is_empty()
        && alias != "."
        && alias != ".."
        && !alias.contains(['/', '\0'])
        && !(cfg!(windows) && alias.contains('\\'));
    if !plain {
        return Err(invalid(
            &format!("agents.{alias}"),
            "cannot name a directory under the install's agents/ tree, so its default workspace \
             cannot be located; set `workspace.path` for it",
        ));
    }
    Ok(TreeSource::Anchored {
        anchor: root.to_path_buf(),
        components: vec![
            "agents".to_string(),
            alias.to_string(),
            "workspace".to_string(),
        ],
    })
}

/// A directory whose first component is a root or a drive/UNC prefix, on any host.
fn host_anchored(directory: &str) -> bool {
    let bytes = directory.as_bytes();
    directory.starts_with(['/', '\\'])
        || Path::new(directory).has_root()
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
}

/// Resolve `.` and `..` without touching the filesystem.
pub(crate) fn normalize_lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Trim, skip empty entries, keep the first occurrence (reference §12.2 case 46).
pub(crate) fn dedup(items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let item = item.trim();
        if !item.is_empty() && !out.iter().any(|o| o == item) {
            out.push(item.to_string());
        }
    }
    out
}

fn trimmed(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|s| !s.is_empty())
}

impl From<FieldError> for AgentError {
    fn from(e: FieldError) -> Self {
        AgentError::InvalidField {
            field: e.field,
            problem: e.problem,
        }
    }
}

pub(crate) fn invalid(field: &str, problem: impl Into<String>) -> AgentError {
    AgentError::InvalidField {
        field: field.to_string(),
        problem: problem.into(),
    }
}
