//! `export-plugin`: a skill bundle of an install, and the MCP servers the agents that attach
//! it reach, published as an Agent Plugin. The closure of each attaching agent is planned by
//! ZeroClaw's planner with our stricter layers (`crate::agent::plan_export`), exactly as
//! `export` plans it, so every MCP secret (`env`, `headers`, credential-named keys) is
//! scrubbed to `""` the same way and listed. The skill bundle is captured through the
//! descriptor-verified reader, `plugin.json` and `mcp.json` are rendered, the tree is loaded
//! by the spec's own loader (not one diagnostic allowed), scanned for credential-looking
//! values, committed as one snapshot and published with `export`'s staged publish.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::{json, Map, Value};
use zeroclaw_bundle_store::{ObjectId, Snapshot, SnapshotKind, SourceKey, Store, Tree, TreeEntry};
use zeroclaw_config::schema::{McpServerConfig, McpTransport};

use super::{mcp, validate_tree, EXTENSION, MANIFEST_FILE, MCP_FILE, SKILLS_DIR};
use crate::agent::plan::SkillSource;
use crate::agent::{plan_export, require_install, ExportPlan, Install};
use crate::capture::{keep_everything, Capture};
use crate::credentials::CredentialFinding;
use crate::export::{commit, open_source, Origin};
use crate::progress::Progress;
use crate::publish::{
    check, check_replacement, publish_snapshot, Admitted, BundleMarker, DestClaim, PublishRequest,
    Published, Replace, Replaced,
};

/// The first line of every `plugin.json` this tool writes: what marks a published plugin for
/// `--force` (any other directory is refused unless `--replace-any`).
const MANIFEST_HEADER: &str =
    "{ \"$schema\": \"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json\",";

/// What marks an exported plugin for `publish`: its manifest, written last.
pub const PLUGIN: BundleMarker = BundleMarker {
    file: MANIFEST_FILE,
    header: MANIFEST_HEADER,
};

/// One MCP server the plugin carries, as an importing operator sees it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PluginServer {
    /// The `mcpServers` member name (ZeroClaw's `mcp.servers` name).
    pub name: String,
    /// `stdio`, `streamable-http` or `sse`.
    pub transport: String,
    /// For `stdio`: the full command line it starts; otherwise the URL it connects to.
    pub target: String,
    /// Environment variables or headers scrubbed to `""`: to fill on import.
    pub secrets: Vec<String>,
}

/// A server the spec cannot carry, left out of `mcp.json`, with the spec parser's reason.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LeftOut {
    /// The `mcp.servers` name.
    pub server: String,
    /// Why (the spec parser's words).
    pub reason: String,
}

/// A skill bundle exported as an Agent Plugin.
#[derive(Debug, Serialize)]
pub struct PluginExported {
    /// The snapshot id of the plugin tree.
    pub id: ObjectId,
    /// The plugin's `name`.
    pub name: String,
    /// The exported skill bundle alias.
    pub skill_bundle: String,
    /// The agents whose MCP servers the plugin carries.
    pub agents: Vec<String>,
    /// Skill names, in `skills/` order.
    pub skills: Vec<String>,
    /// MCP servers in `mcp.json`.
    pub servers: Vec<PluginServer>,
    /// MCP servers the agents reach that the spec cannot carry.
    pub left_out: Vec<LeftOut>,
    /// Dotted config paths scrubbed to `""` (`mcp.servers.<name>.env.<KEY>`).
    pub required_secrets: Vec<String>,
    /// Credential-looking values that travel as written: config paths, then file:line.
    pub credential_findings: Vec<CredentialFinding>,
    /// The publish.
    #[serde(skip)]
    pub published: Published,
    /// The snapshot record.
    #[serde(skip)]
    pub snapshot: Snapshot,
    /// What the publish replaced.
    #[serde(skip)]
    pub replaced: Option<Replaced>,
}

impl PluginExported {
    /// The report as text: what travels, what was scrubbed, what was left out.
    pub fn render(&self) -> String {
        let mut out = format!(
            "exported skill bundle {} as Agent Plugin {} to {}\n",
            self.skill_bundle,
            self.name,
            self.published.dest.display()
        );
        out += &format!(
            "  skills: {}\n",
            if self.skills.is_empty() {
                "none".to_string()
            } else {
                self.skills.join(", ")
            }
        );
        if !self.agents.is_empty() {
            out += &format!("  MCP servers of agents: {}\n", self.agents.join(", "));
        }
        for s in &self.servers {
            let what = if s.transport == "stdio" {
                "starts"
            } else {
                "connects to"
            };
            out += &format!(
                "  mcp server {} ({}): {what} {}\n",
                s.name, s.transport, s.target
            );
        }
        for l in &self.left_out {
            out += &format!("  left out: mcp server {}: {}\n", l.server, l.reason);
        }
        for r in &self.required_secrets {
            out += &format!("  scrubbed (to fill on import): {r}\n");
        }
        for f in &self.credential_findings {
            out += &format!(
                "  warning: {} looks like a credential ({}) and travels as written\n",
                f.location, f.reason
            );
        }
        out += &format!(
            "  {} files, {} bytes\n",
            self.published.files, self.published.bytes
        );
        out
    }
}

/// An `export-plugin` with its install loaded and planned, its destination checked and
/// claimed: nothing has been captured or written yet.
pub struct PluginExportJob {
    install: Install,
    alias: String,
    name: String,
    skills: SkillSource,
    agents: Vec<String>,
    servers: Vec<McpServerConfig>,
    required_secrets: Vec<String>,
    config_findings: Vec<CredentialFinding>,
    out: Admitted,
    replaced: Option<Replaced>,
    _claim: DestClaim,
}

impl PluginExportJob {
    /// Loads the install, plans every agent that attaches skill bundle `alias` (its MCP
    /// servers are theirs), checks `out` and claims it. `name` overrides the plugin name
    /// (default: the alias, lowercased, `_` as `-`).
    pub fn prepare(
        store: Option<&Store>,
        store_path: &Path,
        install_dir: &Path,
        alias: &str,
        name: Option<&str>,
        out: &Path,
        replace: Replace,
    ) -> Result<PluginExportJob> {
        require_install(install_dir)?;
        let install = Install::load(install_dir)?;
        let configured: Vec<String> = {
            let mut v: Vec<String> = install.typed.skill_bundles.keys().cloned().collect();
            v.sort();
            v
        };
        if !install.typed.skill_bundles.contains_key(alias) {
            bail!(
                "skill_bundles.{alias} is not configured in {} (configured: {})",
                install.root().join("config.toml").display(),
                if configured.is_empty() {
                    "none".to_string()
                } else {
                    configured.join(", ")
                }
            );
        }
        let name = plugin_name(alias, name)?;
        let mut agents: Vec<String> = install
            .typed
            .agents
            .iter()
            .filter(|(_, a)| a.skill_bundles.iter().any(|b| b.trim() == alias))
            .map(|(k, _)| k.clone())
            .collect();
        agents.sort();
        if agents.is_empty() {
            bail!(
                "skill bundle {alias} is attached to no agent (agents.<alias>.skill_bundles), so \
                 ZeroClaw's planner gives it no source directory and no MCP servers; attach it \
                 to the agent whose servers the plugin should carry"
            );
        }
        let plans = agents
            .iter()
            .map(|a| plan_export(&install, a).with_context(|| format!("could not plan agent {a}")))
            .collect::<Result<Vec<ExportPlan>>>()?;
        let skills = plans
            .iter()
            .find_map(|p| p.skills.iter().find(|s| s.alias == alias).cloned())
            .with_context(|| {
                format!("ZeroClaw's planner carries no directory for skill bundle {alias}")
            })?;
        let mut servers: BTreeMap<String, McpServerConfig> = BTreeMap::new();
        let mut required_secrets = Vec::new();
        let mut config_findings = Vec::new();
        for plan in &plans {
            for s in closure_servers(plan)? {
                servers.entry(s.name.clone()).or_insert(s);
            }
            required_secrets.extend(
                plan.zeroclaw
                    .required_secrets
                    .iter()
                    .filter(|p| p.starts_with("mcp.servers."))
                    .cloned(),
            );
            config_findings.extend(
                plan.config_findings()
                    .iter()
                    .filter(|f| f.location.starts_with("mcp.servers."))
                    .cloned(),
            );
        }
        required_secrets.sort();
        required_secrets.dedup();
        config_findings.sort_by(|a, b| a.location.cmp(&b.location));
        config_findings.dedup();
        let context = publish_context(alias, out);
        let admitted = check(&PublishRequest {
            dest: out,
            force: replace != Replace::Nothing,
            sources: &[skills.source.path()],
            store: Some(store_path),
            bundle: PLUGIN,
        })
        .with_context(&context)?;
        let claim = admitted.claim().with_context(&context)?;
        let replaced = check_replacement(store, &admitted, replace).with_context(&context)?;
        Ok(PluginExportJob {
            install,
            alias: alias.to_string(),
            name,
            skills,
            agents,
            servers: servers.into_values().collect(),
            required_secrets,
            config_findings,
            out: admitted,
            replaced,
            _claim: claim,
        })
    }

    /// Captures the skill bundle, renders and validates the plugin, commits it as one
    /// snapshot and publishes it. A failed publish forgets the snapshot again.
    pub fn run(self, store: &Store, progress: &dyn Progress) -> Result<PluginExported> {
        let alias = self.alias.clone();
        let source = format!(
            "skill bundle {alias} at {} as Agent Plugin",
            self.install.root().display()
        );
        let lock = store.write_lock()?;
        progress.begin("capturing", None);
        let mut capture = Capture::begin(store, &lock, SourceKey::Dir(source.clone()), progress)?;
        let fd = open_source(&self.skills.source)
            .with_context(|| format!("could not open skill bundle {alias}"))?;
        let walked = match fd {
            Some(fd) => capture.walk_skill_bundle(
                fd,
                SKILLS_DIR,
                &|n| self.skills.admits(n),
                &keep_everything,
            )?,
            None => None,
        };

        let mut entries = Vec::new();
        let Servers {
            members,
            shown,
            left_out,
            zeroclaw_only,
        } = self.render_servers();
        let carried: Vec<&str> = members.iter().map(|(n, _)| n.as_str()).collect();
        let required_secrets = self.secrets_to_fill(&carried);
        let manifest = self.manifest(&required_secrets, zeroclaw_only)?;
        entries.push(file_entry(store, MANIFEST_FILE, manifest.as_bytes())?);
        if !members.is_empty() {
            let text = pretty(&mcp::document(&members))?;
            entries.push(file_entry(store, MCP_FILE, text.as_bytes())?);
        }
        if let Some(w) = &walked {
            entries.push(w.entry(SKILLS_DIR.as_bytes().to_vec()));
        }
        let root = store.objects().write_tree(&Tree::from_entries(entries)?)?;
        let loaded = validate_tree(store, &root).with_context(|| {
            format!(
                "skill bundle {alias} cannot be published as an Agent Plugin; nothing was written"
            )
        })?;
        let mut credential_findings = self.config_findings.clone();
        credential_findings.retain(|f| {
            carried
                .iter()
                .any(|n| f.location.starts_with(&format!("mcp.servers.{n}.")))
        });
        credential_findings.extend(crate::credential_scan::scan_files(store, &root)?);
        let (report, cache_update) = capture.finish();
        let (id, snapshot) = commit(
            store,
            &lock,
            Origin {
                kind: SnapshotKind::Tree,
                source,
                agent: None,
                name: None,
            },
            root,
            report,
            cache_update,
            progress,
        )?;
        drop(lock);
        let published = match publish_snapshot(store, &id, &snapshot, &self.out, progress)
            .with_context(publish_context(&alias, self.out.given()))
        {
            Ok(p) => p,
            Err(e) => {
                let _ = store.maintenance().forget(&id);
                return Err(e.context(format!(
                    "the plugin export of skill bundle {alias} failed; nothing was recorded"
                )));
            }
        };
        Ok(PluginExported {
            id,
            name: self.name.clone(),
            skill_bundle: alias,
            agents: self.agents.clone(),
            skills: loaded.skills.iter().map(|s| s.meta.name.clone()).collect(),
            servers: shown,
            left_out,
            required_secrets,
            credential_findings,
            published,
            snapshot,
            replaced: self.replaced,
        })
    }

    /// The servers as `mcp.json` carries them (the spec cannot carry some: those are left
    /// out, with why), as the report shows them, and their ZeroClaw-only fields.
    fn render_servers(&self) -> Servers {
        let mut out = Servers::default();
        for server in &self.servers {
            match mcp::render(server) {
                Ok(r) => {
                    if !r.zeroclaw_only.is_empty() {
                        out.zeroclaw_only
                            .insert(server.name.clone(), Value::Object(r.zeroclaw_only));
                    }
                    out.members.push((server.name.clone(), r.entry));
                    out.shown.push(shown_server(server));
                }
                Err(reason) => out.left_out.push(LeftOut {
                    server: server.name.clone(),
                    reason,
                }),
            }
        }
        out
    }

    /// The secrets an importer fills, of the `carried` servers: scrubbed by the planner, and
    /// already blank in the install (a secret never filled after an import); sorted.
    fn secrets_to_fill(&self, carried: &[&str]) -> Vec<String> {
        let mut required_secrets: Vec<String> = self
            .required_secrets
            .iter()
            .filter(|p| {
                carried
                    .iter()
                    .any(|n| p.starts_with(&format!("mcp.servers.{n}.")))
            })
            .cloned()
            .collect();
        for server in self
            .servers
            .iter()
            .filter(|s| carried.contains(&s.name.as_str()))
        {
            for (field, map) in [("env", &server.env), ("headers", &server.headers)] {
                for k in map.iter().filter(|(_, v)| v.is_empty()).map(|(k, _)| k) {
                    required_secrets.push(format!("mcp.servers.{}.{field}.{k}", server.name));
                }
            }
        }
        required_secrets.sort();
        required_secrets.dedup();
        required_secrets
    }

    /// `plugin.json`: the spec's fields from the bundle, and in this tool's extension the
    /// bundle alias, the secrets to fill and the ZeroClaw-only server fields.
    fn manifest(
        &self,
        required_secrets: &[String],
        zeroclaw_only: Map<String, Value>,
    ) -> Result<String> {
        let mut ext = Map::new();
        ext.insert("skill_bundle".into(), json!(self.alias));
        if !required_secrets.is_empty() {
            ext.insert("required_secrets".into(), json!(required_secrets));
        }
        if !zeroclaw_only.is_empty() {
            ext.insert("servers".into(), Value::Object(zeroclaw_only));
        }
        let doc = json!({
            "$schema": agent_plugins::PLUGIN_SCHEMA_1_0_0,
            "name": self.name,
            "description": format!("ZeroClaw skill bundle {}", self.alias),
            "keywords": ["zeroclaw"],
            "extensions": { EXTENSION: Value::Object(ext) },
        });
        let text = pretty(&doc)?;
        // The first member on the opening line: the marker `--force` recognizes.
        let rest = text
            .strip_prefix(
                "{\n  \"$schema\": \"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json\",",
            )
            .context("plugin.json did not render with $schema first")?;
        Ok(format!("{MANIFEST_HEADER}{rest}"))
    }
}

/// The plugin name for skill bundle `alias`: `given`, or the alias lowercased with `_` as
/// `-`; it must pass the spec's name grammar (§5.5).
fn plugin_name(alias: &str, given: Option<&str>) -> Result<String> {
    let name = match given {
        Some(n) => n.to_string(),
        None => alias.to_lowercase().replace('_', "-"),
    };
    match agent_plugins::PluginName::parse(&name) {
        Ok(_) => Ok(name),
        Err(e) => bail!(
            "{name:?} is not a valid Agent Plugin name ({e}); give one with --name (1-64 of \
             a-z 0-9 . -, alphanumeric at both ends)"
        ),
    }
}

/// The `mcp.servers` entries of a planned closure, as ZeroClaw's typed config.
fn closure_servers(plan: &ExportPlan) -> Result<Vec<McpServerConfig>> {
    let Some(servers) = plan
        .zeroclaw
        .config
        .get("mcp")
        .and_then(|m| m.get("servers"))
        .and_then(|s| s.as_array())
    else {
        return Ok(Vec::new());
    };
    servers
        .iter()
        .map(|v| {
            v.clone()
                .try_into::<McpServerConfig>()
                .with_context(|| format!("mcp.servers of agent {} does not load", plan.alias))
        })
        .collect()
}

/// What review shows of a carried server: its `env` and `headers` are the credentials it
/// asks for (each value is scrubbed or blank in the plugin).
/// The skill bundle's servers, rendered for the plugin (see `PluginExportJob::render_servers`).
#[derive(Default)]
struct Servers {
    members: Vec<(String, Value)>,
    shown: Vec<PluginServer>,
    left_out: Vec<LeftOut>,
    zeroclaw_only: Map<String, Value>,
}

fn shown_server(server: &McpServerConfig) -> PluginServer {
    let (transport, target) = match server.transport {
        McpTransport::Stdio => (
            "stdio",
            std::iter::once(server.command.as_str())
                .chain(server.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        McpTransport::Http => ("streamable-http", server.url.clone().unwrap_or_default()),
        McpTransport::Sse => ("sse", server.url.clone().unwrap_or_default()),
    };
    let mut secrets: Vec<String> = server
        .env
        .keys()
        .map(|k| format!("env.{k}"))
        .chain(server.headers.keys().map(|k| format!("headers.{k}")))
        .collect();
    secrets.sort();
    PluginServer {
        name: server.name.clone(),
        transport: transport.to_string(),
        target,
        secrets,
    }
}

fn pretty(doc: &Value) -> Result<String> {
    let mut text = serde_json::to_string_pretty(doc)?;
    text.push('\n');
    Ok(text)
}

/// A rendered file at the plugin root (0644, as a plain write would leave it).
fn file_entry(store: &Store, name: &str, bytes: &[u8]) -> Result<TreeEntry> {
    let id = store.objects().write_bytes(bytes)?;
    Ok(TreeEntry::file(
        name.as_bytes().to_vec(),
        0o644,
        bytes.len() as u64,
        id,
    ))
}

fn publish_context(alias: &str, out: &Path) -> impl Fn() -> String {
    let msg = format!(
        "could not publish skill bundle {alias} as an Agent Plugin to {}",
        out.display()
    );
    move || msg.clone()
}
