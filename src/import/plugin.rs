//! The import of an Agent Plugin, planned with this module's machinery: what it writes is
//! decided by `crate::plugin` (its translation: a skill bundle, `mcp.servers` entries and an
//! `mcp_bundles` entry, the plugin tree under `shared/plugins/<alias>/`); here it is pinned to
//! `--expect`, merged (never overwriting: a server named like a local one is namespaced),
//! attached to an agent only with `--attach`, loaded by ZeroClaw's loader and `validate()`,
//! and planned for the same `apply` as an agent import (staged publish, provenance, backup,
//! atomic `config.toml`). A plugin of a name the install imported before is updated in place
//! instead (`super::update::plan_plugin_against`), never imported beside itself.

use std::collections::BTreeSet;

use toml_edit::{Array, DocumentMut, Item, Value};
use zeroclaw_bundle_store::{ObjectId, Store};

use crate::progress::Progress;

use super::merge::{self, Action, Kind};
use super::update;
use super::{
    backup_path, check_merged, tree_plans, with_line_endings_of, ImportError, ImportPlan,
    ImportRequest, Place, SecretPlan, Target,
};

/// Plans the import of the Agent Plugin `incoming`: an update in place of the earlier import
/// of a plugin of the same name the install still configures, else a new one.
pub(super) fn plan(
    store: &Store,
    req: &ImportRequest<'_>,
    target: Target,
    incoming: update::IncomingPlugin,
    expect: Option<String>,
    progress: &dyn Progress,
) -> Result<ImportPlan, ImportError> {
    let (snapshot, root) = (incoming.snapshot, incoming.root);
    check_request(req, root, expect.as_deref())?;
    let taken: BTreeSet<String> = merge::taken_aliases(&target.old_config)?
        .into_iter()
        .filter(|(k, _)| matches!(k, Kind::SkillBundle | Kind::McpBundle))
        .map(|(_, a)| a)
        .collect();
    let translated =
        crate::plugin::translate(store, &root, &target.root, &taken).map_err(|problem| {
            ImportError::NotABundle {
                snapshot,
                problem: format!("an Agent Plugin the Agent Plugins spec refuses: {problem}"),
            }
        })?;
    if let Some(record) = update::plugin_record(&target, &translated.name, None)
        .map_err(|e| ImportError::Update(Box::new(e)))?
    {
        return update_plan(
            store,
            req,
            target,
            incoming,
            record,
            &translated.name,
            progress,
        );
    }
    let (merged, skill_alias, mcp_alias) = merge_translated(req, &target, &translated)?;
    let mut text = merged.text.clone();
    if let Some(agent) = req.attach {
        text = attach(&text, agent, &skill_alias, mcp_alias.as_deref(), &target)?;
    }
    let new_config = with_line_endings_of(&target.old_config, text);
    let after = check_merged(
        &target.install,
        &target.root,
        &target.config_path,
        &new_config,
    )?;
    let trees = tree_plans(
        store,
        req,
        vec![Place {
            what: format!("Agent Plugin {}", translated.name),
            bundle_path: String::new(),
            dest: target
                .root
                .join(crate::plugin::PLUGINS_DIR)
                .join(&skill_alias),
            tree: root,
        }],
    )?;
    let secrets = translated
        .required_secrets
        .iter()
        .map(|p| SecretPlan {
            bundle_path: p.clone(),
            path: merged.localize(p).0,
        })
        .collect();
    // What an agent attached to it is granted: the one grant model over the servers, in
    // local names.
    let mut grants =
        crate::agent::fragment_grants(&translated.fragment).map_err(|e| ImportError::Fragment {
            path: "mcp.servers".into(),
            problem: e.to_string(),
        })?;
    for g in &mut grants {
        g.path = merged.localize(&g.path).0;
    }
    let notes = notes_of(
        &translated.refused,
        req.attach,
        &skill_alias,
        mcp_alias.as_deref(),
        &merged.notes,
    );
    let super::Target {
        root: install,
        config_path,
        config_target,
        old_config,
        install: _,
    } = target;
    Ok(ImportPlan {
        source: super::source_text(req.source, &incoming.kind),
        source_kind: incoming.kind,
        snapshot,
        content_id: root,
        bundle_alias: crate::plugin::record_bundle_alias(&translated.name),
        // Never an agent's alias (an agent alias has no dot): the provenance record of the
        // plugin lives beside the agents' and never replaces one.
        alias: format!("{}{skill_alias}", crate::plugin::RECORD_PREFIX),
        backup: backup_path(&config_path),
        install,
        config_path,
        config_target,
        decisions: merged.decisions,
        notes,
        old_config,
        new_config,
        trees,
        secrets,
        grants,
        dropped: Vec::new(),
        encrypt: after.typed.secrets.encrypt,
        up_to_date: None,
        update: None,
        plugin: Some(translated.name.clone()),
    })
}

/// The plan of an import of a plugin this install imported before (`record`): its update in
/// place (`update::plan_plugin_against`), or nothing when it holds this version already.
/// `--attach` is refused here: an update changes only what the plugin's import added.
fn update_plan(
    store: &Store,
    req: &ImportRequest<'_>,
    target: Target,
    incoming: update::IncomingPlugin,
    record: crate::provenance::Provenance,
    name: &str,
    progress: &dyn Progress,
) -> Result<ImportPlan, ImportError> {
    let skill_alias = crate::plugin::record_skill_alias(&record.alias)
        .unwrap_or(&record.alias)
        .to_string();
    if let Some(agent) = req.attach {
        return Err(ImportError::BadArgument {
            arg: format!("--attach {agent}"),
            problem: format!(
                "Agent Plugin {name} is imported already, as skill bundle {skill_alias}, so this \
                 import updates it in place and attaches nothing: add {skill_alias} to \
                 agents.{agent}.skill_bundles (and mcp_bundles) in config.toml, or import it \
                 without --attach first"
            ),
        });
    }
    let request = update::UpdateRequest {
        source: req.source,
        install: req.install,
        alias: Some(&record.alias),
        conflicts: req.conflicts,
        accept_grants: req.accept_grants,
        allow_downgrade: req.allow_downgrade,
        require: req.require,
    };
    let summary = target.clone();
    let planned =
        update::plan_plugin_against(store, &request, target, &incoming, record.clone(), progress)
            .map_err(|e| ImportError::Update(Box::new(e)))?;
    let arrived = super::Arrived {
        kind: incoming.kind,
        snapshot: incoming.snapshot,
        content_id: incoming.root,
        bundle_alias: crate::plugin::record_bundle_alias(name),
    };
    let done = super::UpToDate {
        alias: record.alias,
        imported_at: record.imported_at,
        snapshot: record.snapshot,
    };
    let mut plan = super::unchanged_plan(req, summary, arrived, done);
    plan.plugin = Some(name.to_string());
    if !planned.up_to_date {
        plan.up_to_date = None;
        plan.update = Some(Box::new(planned));
    }
    Ok(plan)
}

/// Merges the plugin's translated fragment into the install's config (never overwriting, a
/// plugin's skills never reusing a local bundle): the merge, and the local aliases of its
/// skill bundle and (when it has servers) its MCP bundle.
fn merge_translated(
    req: &ImportRequest<'_>,
    target: &Target,
    translated: &crate::plugin::PluginFragment,
) -> Result<(merge::Merged, String, Option<String>), ImportError> {
    let never_reused = |_: &str, _: &str| -> Result<Option<String>, ImportError> {
        Ok(Some(
            "an Agent Plugin's skills are never reused".to_string(),
        ))
    };
    let merged = merge::merge(&merge::MergeInput {
        install: &target.old_config,
        fragment: &translated.fragment,
        root_agent: "",
        required_secrets: &translated.required_secrets,
        agent_as: None,
        maps: req.maps,
        skill_content_differs: &never_reused,
        config_path: &target.config_path,
    })?;
    let local = |kind: Kind| {
        merged
            .local(kind, &translated.alias)
            .filter(|d| d.action != Action::LeftOut)
            .map(|d| d.local.clone())
    };
    let skill_alias = local(Kind::SkillBundle).unwrap_or_else(|| translated.alias.clone());
    let mcp_alias = local(Kind::McpBundle);
    Ok((merged, skill_alias, mcp_alias))
}

/// Refuses what an import of an Agent Plugin cannot honour: an `--expect` the content id
/// does not start with, and `--as`/`--update` (they name an agent of an agent bundle).
fn check_request(
    req: &ImportRequest<'_>,
    root: ObjectId,
    expect: Option<&str>,
) -> Result<(), ImportError> {
    if let Some(expect) = expect {
        if !root.to_hex().starts_with(expect) {
            return Err(ImportError::NotExpected {
                arg: req.source.to_string_lossy().into_owned(),
                expected: expect.to_string(),
                actual: root,
            });
        }
    }
    for (flag, given) in [("--as", req.agent_as), ("--update", req.update)] {
        if let Some(v) = given {
            return Err(ImportError::BadArgument {
                arg: format!("{flag} {v}"),
                problem: "names an agent of an agent bundle; an Agent Plugin has none (use \
                          --attach AGENT to give a local agent its skills and servers)"
                    .to_string(),
            });
        }
    }
    Ok(())
}

/// The plan's notes: what was refused, which agent is attached (or that none is), then the
/// merge's own.
fn notes_of(
    refused: &[String],
    attach: Option<&str>,
    skill_alias: &str,
    mcp_alias: Option<&str>,
    merge_notes: &[String],
) -> Vec<String> {
    let mut notes: Vec<String> = refused
        .iter()
        .map(|r| crate::plugin::refused_note(r))
        .collect();
    notes.push(match attach {
        Some(agent) => format!(
            "agent {agent} is attached: its skill_bundles gain {skill_alias}{}",
            mcp_alias
                .map(|m| format!(" and its mcp_bundles gain {m} (the servers above)"))
                .unwrap_or_default()
        ),
        None => format!(
            "no agent reaches skill bundle {skill_alias}{}: --attach AGENT gives one them",
            mcp_alias
                .map(|m| format!(" or MCP bundle {m}"))
                .unwrap_or_default()
        ),
    });
    notes.extend(merge_notes.iter().cloned());
    notes
}

/// `text` with `skill_alias` (and `mcp_alias`) added to agent `agent`'s `skill_bundles`
/// (and `mcp_bundles`); the agent must be configured.
fn attach(
    text: &str,
    agent: &str,
    skill_alias: &str,
    mcp_alias: Option<&str>,
    target: &Target,
) -> Result<String, ImportError> {
    let bad = |problem: String| ImportError::BadArgument {
        arg: format!("--attach {agent}"),
        problem,
    };
    if !target.install.typed.agents.contains_key(agent) {
        return Err(bad(format!(
            "no agent {agent} in {} (configured: {})",
            target.config_path.display(),
            target.install.agent_aliases().join(", ")
        )));
    }
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| bad(format!("config.toml is not TOML: {e}")))?;
    let table = doc
        .get_mut("agents")
        .and_then(|a| a.get_mut(agent))
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| bad(format!("agents.{agent} is not a table")))?;
    for (field, alias) in [
        ("skill_bundles", Some(skill_alias)),
        ("mcp_bundles", mcp_alias),
    ] {
        let Some(alias) = alias else { continue };
        let item = table
            .entry(field)
            .or_insert(Item::Value(Value::Array(Array::new())));
        let list = item
            .as_array_mut()
            .ok_or_else(|| bad(format!("agents.{agent}.{field} is not an array")))?;
        if !list.iter().any(|v| v.as_str() == Some(alias)) {
            list.push(alias);
        }
    }
    Ok(doc.to_string())
}
