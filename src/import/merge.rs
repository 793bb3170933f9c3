//! The config merge of an import (toml_edit): which entries of a bundle's config fragment are
//! added, namespaced, reused or mapped, with every reference inside the fragment rewritten to
//! the local names, and the install's `config.toml` text with the new entries inserted and
//! everything else (comments, formatting, order of untouched tables) left as it was.
//!
//! ZeroClaw's two import rules (SPEC §9): an entry is never overwritten (an incoming alias that
//! collides with a different local entry becomes `<alias>_imported`, `_imported_2`, ...; an
//! identical one, as ZeroClaw's `Config` means it with secrets set aside, is reused; `--map`
//! points references at a local entry), and a reference that resolves to nothing fails.
//! The kinds and reference fields are those of ZeroClaw 0.8.7's `agent_bundle::plan_export`
//! closure and `Config::validate()`.

use std::collections::{BTreeMap, BTreeSet};

use toml_edit::{ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};
use zeroclaw_config::schema::Config;
use zeroclaw_config::traits::{is_masked_secret, MaskSecrets};

use super::error::ImportError;

/// A kind of aliased config entry an agent's closure can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `agents.<alias>`.
    Agent,
    /// `risk_profiles.<alias>`.
    RiskProfile,
    /// `runtime_profiles.<alias>`.
    RuntimeProfile,
    /// `skill_bundles.<alias>`.
    SkillBundle,
    /// `knowledge_bundles.<alias>`.
    KnowledgeBundle,
    /// `mcp_bundles.<alias>`.
    McpBundle,
    /// An element of `[[mcp.servers]]`, by `name`.
    McpServer,
    /// `providers.models.<family>.<entry>` (alias `family.entry`).
    ModelProvider,
    /// `providers.tts.<family>.<entry>`.
    TtsProvider,
    /// `providers.transcription.<family>.<entry>`.
    TranscriptionProvider,
}

/// Every kind, in merge order (what references come after what it references).
pub const KINDS: [Kind; 10] = [
    Kind::McpServer,
    Kind::ModelProvider,
    Kind::TtsProvider,
    Kind::TranscriptionProvider,
    Kind::McpBundle,
    Kind::KnowledgeBundle,
    Kind::SkillBundle,
    Kind::RuntimeProfile,
    Kind::RiskProfile,
    Kind::Agent,
];

impl Kind {
    /// The word `--map KIND.OLD=NEW` and reports use.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Agent => "agent",
            Kind::RiskProfile => "risk_profile",
            Kind::RuntimeProfile => "runtime_profile",
            Kind::SkillBundle => "skill_bundle",
            Kind::KnowledgeBundle => "knowledge_bundle",
            Kind::McpBundle => "mcp_bundle",
            Kind::McpServer => "mcp_server",
            Kind::ModelProvider => "provider",
            Kind::TtsProvider => "tts_provider",
            Kind::TranscriptionProvider => "transcription_provider",
        }
    }

    /// The dotted config section holding the entries.
    pub fn section(self) -> &'static str {
        match self {
            Kind::Agent => "agents",
            Kind::RiskProfile => "risk_profiles",
            Kind::RuntimeProfile => "runtime_profiles",
            Kind::SkillBundle => "skill_bundles",
            Kind::KnowledgeBundle => "knowledge_bundles",
            Kind::McpBundle => "mcp_bundles",
            Kind::McpServer => "mcp.servers",
            Kind::ModelProvider => "providers.models",
            Kind::TtsProvider => "providers.tts",
            Kind::TranscriptionProvider => "providers.transcription",
        }
    }

    fn is_provider(self) -> bool {
        matches!(
            self,
            Kind::ModelProvider | Kind::TtsProvider | Kind::TranscriptionProvider
        )
    }

    /// The kind a `--map` prefix names: its word or its section.
    pub fn parse_prefix(text: &str) -> Option<(Kind, &str)> {
        let mut best: Option<(Kind, &str, usize)> = None;
        for kind in KINDS {
            for name in [kind.word(), kind.section()] {
                if let Some(rest) = text
                    .strip_prefix(name)
                    .and_then(|r| r.strip_prefix('.'))
                    .filter(|r| !r.is_empty())
                {
                    if best.is_none_or(|(_, _, len)| name.len() > len) {
                        best = Some((kind, rest, name.len()));
                    }
                }
            }
        }
        best.map(|(k, rest, _)| (k, rest))
    }

    /// The dotted config path of entry `alias`.
    pub fn path_of(self, alias: &str) -> String {
        format!("{}.{alias}", self.section())
    }

    /// The key segments of entry `alias` below the root (not for [`Kind::McpServer`]).
    pub(crate) fn segments(self, alias: &str) -> Vec<String> {
        let mut out: Vec<String> = self.section().split('.').map(str::to_string).collect();
        if self.is_provider() {
            let (family, entry) = alias.split_once('.').unwrap_or((alias, ""));
            out.push(family.to_string());
            out.push(entry.to_string());
        } else {
            out.push(alias.to_string());
        }
        out
    }
}

/// What the import does with one entry of the fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Added under its own alias.
    Add,
    /// Added under a new alias: the local one is a different entry.
    Namespace,
    /// Not added: an identical local entry is used.
    Reuse,
    /// Not added: `--map` points its references at a local entry.
    Map,
    /// Not added: only entries that `--map` replaced referenced it, so nothing the imported
    /// agent reaches uses it.
    LeftOut,
}

/// One entry of the fragment and its fate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Its kind.
    pub kind: Kind,
    /// Its alias in the bundle.
    pub bundle: String,
    /// Its alias in the install after the import.
    pub local: String,
    /// What happens.
    pub action: Action,
    /// Why, where the action alone does not say: the first key or file in which the local
    /// entry of that name differs (namespaced), or what referenced a left-out entry.
    pub why: Option<String>,
}

/// A `--map KIND.OLD=NEW`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapArg {
    /// As given.
    pub arg: String,
    /// The kind.
    pub kind: Kind,
    /// The alias in the bundle.
    pub old: String,
    /// The local alias.
    pub new: String,
}

impl MapArg {
    /// Parses `KIND.OLD=NEW` (KIND: `provider`, `risk_profile`, ... or the section,
    /// `providers.models`, `risk_profiles`, ...).
    pub fn parse(arg: &str) -> Result<MapArg, ImportError> {
        let bad = |problem: String| ImportError::BadArgument {
            arg: format!("--map {arg}"),
            problem,
        };
        let (left, new) = arg
            .split_once('=')
            .ok_or_else(|| bad("expected KIND.OLD=NEW".to_string()))?;
        let kinds: Vec<&str> = KINDS
            .iter()
            .filter(|k| **k != Kind::Agent)
            .map(|k| k.word())
            .collect();
        let (kind, old) = Kind::parse_prefix(left.trim()).ok_or_else(|| {
            bad(format!(
                "expected KIND.OLD=NEW with KIND one of {}",
                kinds.join(", ")
            ))
        })?;
        if kind == Kind::Agent {
            return Err(bad(
                "the imported agent is named with --as, not mapped".to_string()
            ));
        }
        let new = new.trim();
        if new.is_empty() {
            return Err(bad("NEW is empty".to_string()));
        }
        Ok(MapArg {
            arg: arg.to_string(),
            kind,
            old: old.trim().to_string(),
            new: new.to_string(),
        })
    }
}

/// An entry of a config document.
#[derive(Debug, Clone)]
struct Entry {
    kind: Kind,
    alias: String,
    item: Item,
}

/// The sections a fragment may hold, by their top-level key.
const TOP: &[&str] = &[
    "agents",
    "risk_profiles",
    "runtime_profiles",
    "skill_bundles",
    "knowledge_bundles",
    "mcp_bundles",
    "mcp",
    "providers",
];

fn lookup<'a>(root: &'a Item, path: &[&str]) -> Option<&'a Item> {
    let mut node = root;
    for seg in path {
        node = node.as_table_like()?.get(seg)?;
    }
    Some(node)
}

/// The aliased entries of `doc`. With `strict` (a fragment), anything else is an error;
/// otherwise (an install) entries of unexpected shape are skipped.
fn collect(doc: &DocumentMut, strict: bool) -> Result<Vec<Entry>, ImportError> {
    let root = doc.as_item();
    let fail = |path: String, problem: &str| ImportError::Fragment {
        path,
        problem: problem.to_string(),
    };
    if strict {
        for (key, _) in doc.as_table().iter() {
            if !TOP.contains(&key) {
                return Err(fail(
                    key.to_string(),
                    "is not part of an agent's closure; an import does not merge it",
                ));
            }
        }
        for (parent, allowed) in [
            ("mcp", &["servers"][..]),
            ("providers", &["models", "tts", "transcription"][..]),
        ] {
            if let Some(t) = lookup(root, &[parent]).and_then(Item::as_table_like) {
                for (key, _) in t.iter() {
                    if !allowed.contains(&key) {
                        return Err(fail(
                            format!("{parent}.{key}"),
                            "is not part of an agent's closure; an import does not merge it",
                        ));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for kind in KINDS {
        let section: Vec<&str> = kind.section().split('.').collect();
        let Some(item) = lookup(root, &section) else {
            continue;
        };
        if kind == Kind::McpServer {
            let elements: Vec<Item> = match item {
                Item::ArrayOfTables(a) => a.iter().map(|t| Item::Table(t.clone())).collect(),
                Item::Value(Value::Array(a)) => a.iter().map(|v| Item::Value(v.clone())).collect(),
                _ if strict => return Err(fail("mcp.servers".into(), "is not an array of tables")),
                _ => continue,
            };
            for (i, element) in elements.into_iter().enumerate() {
                let name = element
                    .as_table_like()
                    .and_then(|t| t.get("name"))
                    .and_then(Item::as_str)
                    .map(str::to_string);
                match name {
                    Some(alias) => out.push(Entry {
                        kind,
                        alias,
                        item: element,
                    }),
                    None if strict => {
                        return Err(fail(format!("mcp.servers[{i}]"), "has no name"));
                    }
                    None => {}
                }
            }
            continue;
        }
        let Some(table) = item.as_table_like() else {
            if strict {
                return Err(fail(kind.section().into(), "is not a table"));
            }
            continue;
        };
        let families: Vec<(String, &Item)> = if kind.is_provider() {
            let mut v = Vec::new();
            for (family, fam) in table.iter() {
                match fam.as_table_like() {
                    Some(ft) => {
                        for (entry, item) in ft.iter() {
                            v.push((format!("{family}.{entry}"), item));
                        }
                    }
                    None if strict => {
                        return Err(fail(
                            format!("{}.{family}", kind.section()),
                            "is not a table",
                        ))
                    }
                    None => {}
                }
            }
            v
        } else {
            table.iter().map(|(k, v)| (k.to_string(), v)).collect()
        };
        for (alias, item) in families {
            if item.as_table_like().is_none() {
                if strict {
                    return Err(fail(kind.path_of(&alias), "is not a table"));
                }
                continue;
            }
            out.push(Entry {
                kind,
                alias,
                item: item.clone(),
            });
        }
    }
    Ok(out)
}

/// A reference field: where it sits in an entry of `owner`, what it names, and whether it is a
/// list; `soft` references (an MCP bundle's `exclude`) may name nothing.
struct RefField {
    owner: Kind,
    path: &'static [&'static str],
    target: Kind,
    soft: bool,
}

const REFS: &[RefField] = &[
    RefField {
        owner: Kind::Agent,
        path: &["risk_profile"],
        target: Kind::RiskProfile,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["runtime_profile"],
        target: Kind::RuntimeProfile,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["skill_bundles"],
        target: Kind::SkillBundle,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["knowledge_bundles"],
        target: Kind::KnowledgeBundle,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["mcp_bundles"],
        target: Kind::McpBundle,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["model_provider"],
        target: Kind::ModelProvider,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["classifier_provider"],
        target: Kind::ModelProvider,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["summary_provider"],
        target: Kind::ModelProvider,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["tts_provider"],
        target: Kind::TtsProvider,
        soft: false,
    },
    RefField {
        owner: Kind::Agent,
        path: &["transcription_provider"],
        target: Kind::TranscriptionProvider,
        soft: false,
    },
    RefField {
        owner: Kind::RuntimeProfile,
        path: &["context_compression", "summary_provider"],
        target: Kind::ModelProvider,
        soft: false,
    },
    RefField {
        owner: Kind::ModelProvider,
        path: &["fallback"],
        target: Kind::ModelProvider,
        soft: false,
    },
    RefField {
        owner: Kind::McpBundle,
        path: &["servers"],
        target: Kind::McpServer,
        soft: false,
    },
    RefField {
        owner: Kind::McpBundle,
        path: &["exclude"],
        target: Kind::McpServer,
        soft: true,
    },
];

/// Rewrites every reference of `entry` (owned by `kind`, at dotted `owner_path`) through
/// `names` (bundle alias -> local alias per kind). An unresolved hard reference is an error,
/// except an MCP server name in `excluded` (see [`excluded_servers`]).
fn rewrite_refs(
    kind: Kind,
    owner_path: &str,
    item: &mut Item,
    names: &BTreeMap<(Kind, String), String>,
    excluded: &BTreeSet<String>,
) -> Result<(), ImportError> {
    for field in REFS.iter().filter(|f| f.owner == kind) {
        let Some(table) = item.as_table_like_mut() else {
            return Ok(());
        };
        let mut node: Option<&mut Item> = None;
        let mut current = table;
        for (i, seg) in field.path.iter().enumerate() {
            let Some(next) = current.get_mut(seg) else {
                break;
            };
            if i + 1 == field.path.len() {
                node = Some(next);
                break;
            }
            match next.as_table_like_mut() {
                Some(t) => current = t,
                None => break,
            }
        }
        let Some(node) = node else {
            continue;
        };
        let dotted = format!("{owner_path}.{}", field.path.join("."));
        let resolve = |value: &str, shown: &str| -> Result<Option<String>, ImportError> {
            let trimmed = value.trim();
            if trimmed.is_empty() {
                return Ok(None);
            }
            match names.get(&(field.target, trimmed.to_string())) {
                Some(local) => Ok(Some(local.clone())),
                None if field.soft => Ok(None),
                // Exactly as written: ZeroClaw compares names untrimmed, so a padded
                // `exclude` entry excludes nothing and the name stays a reference.
                None if field.target == Kind::McpServer && excluded.contains(value) => Ok(None),
                None => Err(ImportError::Dangling {
                    field: shown.to_string(),
                    value: trimmed.to_string(),
                    target: field.target.path_of(trimmed),
                    kind: field.target.word(),
                }),
            }
        };
        match node {
            Item::Value(Value::String(s)) => {
                if let Some(local) = resolve(s.value(), &dotted)? {
                    if local != s.value().as_str() {
                        let decor = s.decor().clone();
                        let mut v = toml_edit::Formatted::new(local);
                        *v.decor_mut() = decor;
                        *s = v;
                    }
                }
            }
            Item::Value(Value::Array(a)) => {
                for (i, v) in a.iter_mut().enumerate() {
                    if let Value::String(s) = v {
                        let shown = format!("{dotted}[{i}]");
                        if let Some(local) = resolve(s.value(), &shown)? {
                            if local != s.value().as_str() {
                                let decor = s.decor().clone();
                                let mut f = toml_edit::Formatted::new(local);
                                *f.decor_mut() = decor;
                                *s = f;
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The MCP server names some MCP bundle of the fragment excludes. ZeroClaw grants an agent
/// no server that any bundle it references excludes, whichever bundle lists it in `servers`
/// ("deny wins", `Config::mcp_servers_for_bundles`), so its exporter never carries that
/// server, and the name left in a bundle's `servers` refers to nothing: it is not a
/// reference (every MCP bundle of a fragment is one its root agent references). Names as
/// written, untrimmed: ZeroClaw matches them exactly, so `exclude = ["shell "]` excludes no
/// `shell`.
fn excluded_servers(incoming: &[Entry]) -> BTreeSet<String> {
    incoming
        .iter()
        .filter(|e| e.kind == Kind::McpBundle)
        .filter_map(|e| e.item.as_table_like()?.get("exclude")?.as_array())
        .flat_map(|a| a.iter().filter_map(|v| v.as_str()))
        .map(str::to_string)
        .collect()
}

/// The entry `item` as ZeroClaw's `Config` means it: loaded alone in a document (defaults
/// filled), secrets masked and then blanked (a scrubbed `""` and a local key compare equal),
/// and the values at the `blank` paths (relative, dotted: the bundle's `required_secrets` of
/// the entry) blanked too.
fn typed(kind: Kind, alias: &str, item: &Item, blank: &[String]) -> Result<toml::Value, String> {
    let mut doc = DocumentMut::new();
    insert(&mut doc, kind, alias, item.clone()).map_err(|e| e.to_string())?;
    let mut config: Config = toml::from_str(&doc.to_string()).map_err(|e| e.to_string())?;
    config.mask_secrets();
    let value = toml::Value::try_from(&config).map_err(|e| e.to_string())?;
    let mut entry = if kind == Kind::McpServer {
        value
            .get("mcp")
            .and_then(|m| m.get("servers"))
            .and_then(toml::Value::as_array)
            .and_then(|a| a.first())
            .cloned()
    } else {
        let mut node = Some(&value);
        for seg in kind.segments(alias) {
            node = node.and_then(|n| n.get(&seg));
        }
        node.cloned()
    }
    .ok_or_else(|| format!("{} does not load", kind.path_of(alias)))?;
    blank_masked(&mut entry);
    for path in blank {
        let mut node = Some(&mut entry);
        for seg in path.split('.') {
            node = node.and_then(|n| n.get_mut(seg));
        }
        if let Some(toml::Value::String(s)) = node {
            s.clear();
        }
    }
    if kind == Kind::McpServer {
        if let Some(t) = entry.as_table_mut() {
            t.remove("name");
        }
    }
    Ok(entry)
}

fn blank_masked(value: &mut toml::Value) {
    match value {
        toml::Value::String(s) if is_masked_secret(s) => s.clear(),
        toml::Value::Array(a) => a.iter_mut().for_each(blank_masked),
        toml::Value::Table(t) => t.iter_mut().for_each(|(_, v)| blank_masked(v)),
        _ => {}
    }
}

/// Clears the decor and document position of every table of `item`, so it renders after the
/// tables already in the document, with default spacing, and carries no comment of the
/// fragment's header.
fn reset_layout(item: &mut Item) {
    match item {
        Item::Table(t) => reset_table(t),
        Item::ArrayOfTables(a) => a.iter_mut().for_each(reset_table),
        Item::Value(v) => {
            v.decor_mut().clear();
        }
        Item::None => {}
    }
}

fn reset_table(t: &mut Table) {
    t.decor_mut().clear();
    t.set_position(None);
    for (mut key, item) in t.iter_mut() {
        key.leaf_decor_mut().clear();
        reset_layout(item);
    }
}

fn implicit_table() -> Item {
    let mut t = Table::new();
    t.set_implicit(true);
    Item::Table(t)
}

fn as_value(item: Item) -> Option<Value> {
    match item {
        Item::Value(v) => Some(v),
        Item::Table(t) => Some(Value::InlineTable(t.into_inline_table())),
        _ => None,
    }
}

/// Inserts `item` as entry `alias` of `kind` into `doc`, creating missing parent tables
/// (implicit: no empty headers). Never replaces: the caller checked the alias is free.
fn insert(doc: &mut DocumentMut, kind: Kind, alias: &str, item: Item) -> Result<(), ImportError> {
    let shape = |path: &str| ImportError::Fragment {
        path: path.to_string(),
        problem: "has a shape in the install an import cannot add to".to_string(),
    };
    if kind == Kind::McpServer {
        let mut item = item;
        if let Some(t) = item.as_table_like_mut() {
            t.insert("name", toml_edit::value(alias));
        }
        let mcp = doc
            .as_table_mut()
            .entry("mcp")
            .or_insert_with(implicit_table);
        let mcp = mcp.as_table_like_mut().ok_or_else(|| shape("mcp"))?;
        match mcp.get_mut("servers") {
            None => {
                let mut a = ArrayOfTables::new();
                let table = match item {
                    Item::Table(t) => t,
                    Item::Value(Value::InlineTable(t)) => t.into_table(),
                    _ => return Err(shape("mcp.servers")),
                };
                a.push(table);
                mcp.insert("servers", Item::ArrayOfTables(a));
            }
            Some(Item::ArrayOfTables(a)) => {
                let table = match item {
                    Item::Table(t) => t,
                    Item::Value(Value::InlineTable(t)) => t.into_table(),
                    _ => return Err(shape("mcp.servers")),
                };
                a.push(table);
            }
            Some(Item::Value(Value::Array(a))) => {
                let value = as_value(item).ok_or_else(|| shape("mcp.servers"))?;
                a.push_formatted(value);
            }
            Some(_) => return Err(shape("mcp.servers")),
        }
        return Ok(());
    }
    let segments = kind.segments(alias);
    let (last, parents) = segments.split_last().expect("an entry path has segments");
    let mut node = doc.as_item_mut();
    let mut walked = Vec::new();
    for seg in parents {
        walked.push(seg.as_str());
        node = match node {
            Item::Table(t) => t.entry(seg).or_insert_with(implicit_table),
            Item::Value(Value::InlineTable(t)) => {
                let v = t
                    .entry(seg)
                    .or_insert_with(|| Value::InlineTable(InlineTable::new()));
                // An inline table's entries are values; walk on through a view as an item.
                return insert_inline(v, &segments[walked.len()..], item)
                    .map_err(|()| shape(&walked.join(".")));
            }
            _ => return Err(shape(&walked.join("."))),
        };
    }
    match node {
        Item::Table(t) => {
            t.insert(last, item);
        }
        Item::Value(Value::InlineTable(t)) => {
            let value = as_value(item).ok_or_else(|| shape(&walked.join(".")))?;
            t.insert(last, value);
        }
        _ => return Err(shape(&walked.join("."))),
    }
    Ok(())
}

/// [`insert`] below an inline table: the rest of the path is inline too.
fn insert_inline(node: &mut Value, rest: &[String], item: Item) -> Result<(), ()> {
    let Value::InlineTable(t) = node else {
        return Err(());
    };
    match rest {
        [last] => {
            t.insert(last, as_value(item).ok_or(())?);
            Ok(())
        }
        [seg, tail @ ..] => {
            let next = t
                .entry(seg)
                .or_insert_with(|| Value::InlineTable(InlineTable::new()));
            insert_inline(next, tail, item)
        }
        [] => Err(()),
    }
}

/// What the merge needs besides the two texts.
pub struct MergeInput<'a> {
    /// The install's `config.toml` text.
    pub install: &'a str,
    /// The bundle's `config.toml` text.
    pub fragment: &'a str,
    /// The bundle's root agent; empty for a fragment without an agent (an Agent Plugin).
    pub root_agent: &'a str,
    /// The bundle's `required_secrets` (bundle names).
    pub required_secrets: &'a [String],
    /// `--as`.
    pub agent_as: Option<&'a str>,
    /// `--map`s.
    pub maps: &'a [MapArg],
    /// Where the content the bundle carries for skill bundle `bundle` first differs from what
    /// local skill bundle `local` holds on disk (`None`: the same; an identical config entry
    /// alone is not enough to reuse it).
    pub skill_content_differs: &'a SkillContentDiffers<'a>,
    /// The install's config.toml (for messages).
    pub config_path: &'a std::path::Path,
}

/// Where the carried content of skill bundle (bundle alias, local alias) first differs from the
/// local one (`None`: the same).
pub type SkillContentDiffers<'a> = dyn Fn(&str, &str) -> Result<Option<String>, ImportError> + 'a;

/// The merge's result.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The new `config.toml` text.
    pub text: String,
    /// Every entry of the fragment and its fate, in merge order.
    pub decisions: Vec<Decision>,
    /// Adjustments worth telling the operator (a namespaced skill bundle's `directory`).
    pub notes: Vec<String>,
}

impl Merged {
    /// The local alias of the bundle's entry (`kind`, `bundle`).
    pub fn local(&self, kind: Kind, bundle: &str) -> Option<&Decision> {
        self.decisions
            .iter()
            .find(|d| d.kind == kind && d.bundle == bundle)
    }

    /// A dotted config path of the bundle (`providers.models.openai.main.api_key`) in local
    /// names, with the decision of the entry that holds it (`None`: no entry holds it).
    pub fn localize(&self, path: &str) -> (String, Option<&Decision>) {
        let mut best: Option<(&Decision, usize)> = None;
        for d in &self.decisions {
            let prefix = d.kind.path_of(&d.bundle);
            let holds = path == prefix
                || path
                    .strip_prefix(&prefix)
                    .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['));
            if holds && best.is_none_or(|(_, len)| prefix.len() > len) {
                best = Some((d, prefix.len()));
            }
        }
        match best {
            Some((d, len)) => (
                format!("{}{}", d.kind.path_of(&d.local), &path[len..]),
                Some(d),
            ),
            None => (path.to_string(), None),
        }
    }
}

/// Merges the fragment into the install's text (see the module doc).
pub fn merge(input: &MergeInput<'_>) -> Result<Merged, ImportError> {
    let (fragment, mut doc) = parse_texts(input)?;
    let sides = read_sides(&fragment, &doc)?;
    check_incoming(input, &sides)?;
    let mut decisions = first_guess(input, &sides)?;
    settle(input, &sides, &mut decisions)?;
    leave_out_unreached(&mut decisions, &sides.incoming, input.root_agent);
    let notes = write_entries(&mut doc, &sides, &decisions)?;
    Ok(Merged {
        text: doc.to_string(),
        decisions,
        notes,
    })
}

/// The two sides of a merge, read: the fragment's entries and what the install already names.
struct Sides {
    /// The fragment's entries, in its own order.
    incoming: Vec<Entry>,
    /// The MCP servers the fragment's MCP bundles exclude.
    excluded: BTreeSet<String>,
    /// The aliases the install defines, by kind.
    taken: BTreeMap<Kind, BTreeSet<String>>,
    /// The install's entries.
    local_items: BTreeMap<(Kind, String), Item>,
    /// Names a local entry references and the install does not define.
    dangling: BTreeSet<(Kind, String)>,
}

/// Parses the fragment and the install's text (the fragment first, so a broken bundle is
/// named before a broken install).
fn parse_texts(input: &MergeInput<'_>) -> Result<(DocumentMut, DocumentMut), ImportError> {
    let fragment: DocumentMut =
        input
            .fragment
            .parse()
            .map_err(|e: toml_edit::TomlError| ImportError::Fragment {
                path: "config.toml".into(),
                problem: format!("is not TOML: {}", e.message().trim()),
            })?;
    let doc: DocumentMut =
        input
            .install
            .parse()
            .map_err(|e: toml_edit::TomlError| ImportError::Invalid {
                path: input.config_path.to_path_buf(),
                problem: format!("it is not TOML: {}", e.message().trim()),
            })?;
    Ok((fragment, doc))
}

/// Collects the entries of both sides and what the install's own entries name.
fn read_sides(fragment: &DocumentMut, doc: &DocumentMut) -> Result<Sides, ImportError> {
    let incoming = collect(fragment, true)?;
    let excluded = excluded_servers(&incoming);
    let local = collect(doc, false)?;
    let mut taken: BTreeMap<Kind, BTreeSet<String>> = BTreeMap::new();
    let mut local_items: BTreeMap<(Kind, String), Item> = BTreeMap::new();
    for e in &local {
        taken.entry(e.kind).or_default().insert(e.alias.clone());
        local_items.insert((e.kind, e.alias.clone()), e.item.clone());
    }
    // Names a local entry references and the install does not define (ZeroClaw only warns of
    // an MCP bundle naming a missing server): an incoming entry of that name would be picked up
    // by that local entry, granting a local agent what its operator never saw. Such an entry is
    // namespaced.
    let mut dangling: BTreeSet<(Kind, String)> = BTreeSet::new();
    for e in &local {
        for (kind, name) in refs_of(e.kind, &e.item) {
            if !taken.get(&kind).is_some_and(|t| t.contains(&name)) {
                dangling.insert((kind, name));
            }
        }
    }
    Ok(Sides {
        incoming,
        excluded,
        taken,
        local_items,
        dangling,
    })
}

/// Refuses a fragment that does not hold exactly its root agent or holds an entry twice, and
/// a `--map` that names an entry either side lacks.
fn check_incoming(input: &MergeInput<'_>, sides: &Sides) -> Result<(), ImportError> {
    let incoming = &sides.incoming;
    let agents: Vec<&Entry> = incoming.iter().filter(|e| e.kind == Kind::Agent).collect();
    // An empty root agent: a fragment without one (an Agent Plugin's skill bundle and MCP
    // servers, `crate::plugin`), which must then hold no agent at all.
    let expected = usize::from(!input.root_agent.is_empty());
    if agents.len() != expected || agents.first().is_some_and(|a| a.alias != input.root_agent) {
        return Err(ImportError::Fragment {
            path: "agents".into(),
            problem: format!(
                "must hold exactly the bundle's root agent {} (it holds {})",
                input.root_agent,
                agents
                    .iter()
                    .map(|e| e.alias.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        });
    }
    let mut seen = BTreeSet::new();
    for e in incoming {
        if !seen.insert((e.kind, e.alias.clone())) {
            return Err(ImportError::Fragment {
                path: e.kind.path_of(&e.alias),
                problem: "appears twice".to_string(),
            });
        }
    }
    for m in input.maps {
        if !seen.contains(&(m.kind, m.old.clone())) {
            return Err(ImportError::BadArgument {
                arg: format!("--map {}", m.arg),
                problem: format!(
                    "the bundle has no {} {} (its config carries no {})",
                    m.kind.word(),
                    m.old,
                    m.kind.path_of(&m.old)
                ),
            });
        }
        if !sides.taken.get(&m.kind).is_some_and(|t| t.contains(&m.new)) {
            return Err(ImportError::BadArgument {
                arg: format!("--map {}", m.arg),
                problem: format!(
                    "{} does not exist in {}",
                    m.kind.path_of(&m.new),
                    input.config_path.display()
                ),
            });
        }
    }
    Ok(())
}

/// The first guess, kind by kind: a mapped entry is mapped, the agent added (or namespaced),
/// every other colliding entry reused, one a local entry dangles to namespaced.
fn first_guess(input: &MergeInput<'_>, sides: &Sides) -> Result<Vec<Decision>, ImportError> {
    let mut decisions: Vec<Decision> = Vec::new();
    for kind in KINDS {
        for e in sides.incoming.iter().filter(|e| e.kind == kind) {
            let map = input
                .maps
                .iter()
                .find(|m| m.kind == kind && m.old == e.alias);
            let exists = |alias: &str| sides.taken.get(&kind).is_some_and(|t| t.contains(alias));
            let (local, action) = if let Some(m) = map {
                (m.new.clone(), Action::Map)
            } else if kind == Kind::Agent {
                match input.agent_as {
                    Some(name) if exists(name) => {
                        return Err(ImportError::AgentExists {
                            alias: name.to_string(),
                            path: input.config_path.to_path_buf(),
                        })
                    }
                    Some(name) => (name.to_string(), Action::Add),
                    None if exists(&e.alias) => (String::new(), Action::Namespace),
                    None => (e.alias.clone(), Action::Add),
                }
            } else if exists(&e.alias) {
                (e.alias.clone(), Action::Reuse)
            } else if sides.dangling.contains(&(kind, e.alias.clone())) {
                (String::new(), Action::Namespace)
            } else {
                (e.alias.clone(), Action::Add)
            };
            let why = (action == Action::Namespace && kind != Kind::Agent).then(|| {
                format!(
                    "a local entry references {} and the install does not define it: under \
                     that name it would reach that entry",
                    kind.path_of(&e.alias)
                )
            });
            decisions.push(Decision {
                kind,
                bundle: e.alias.clone(),
                local,
                action,
                why,
            });
        }
    }
    Ok(decisions)
}

/// From the first guess (every colliding entry reused), namespaces the reused entries that turn
/// out different (which can make others different: a reference changed), until nothing
/// changes. Only ever reuse -> namespace, so it ends.
fn settle(
    input: &MergeInput<'_>,
    sides: &Sides,
    decisions: &mut [Decision],
) -> Result<(), ImportError> {
    loop {
        name_namespaced(sides, decisions);
        let names = local_names(decisions);
        let mut changed = false;
        for slot in decisions.iter_mut() {
            if slot.action != Action::Reuse {
                continue;
            }
            let d = slot.clone();
            if let Some(why) = reuse_differs(input, sides, &d, &names)? {
                slot.action = Action::Namespace;
                slot.local = String::new();
                slot.why = Some(why);
                changed = true;
            }
        }
        if !changed {
            return Ok(());
        }
    }
}

/// Names for namespaced entries that have none yet.
fn name_namespaced(sides: &Sides, decisions: &mut [Decision]) {
    for i in 0..decisions.len() {
        if decisions[i].action == Action::Namespace && decisions[i].local.is_empty() {
            let kind = decisions[i].kind;
            let used: BTreeSet<String> = decisions
                .iter()
                .filter(|d| d.kind == kind && matches!(d.action, Action::Add | Action::Namespace))
                .map(|d| d.local.clone())
                .chain(sides.taken.get(&kind).into_iter().flatten().cloned())
                .chain(
                    sides
                        .dangling
                        .iter()
                        .filter(|(k, _)| *k == kind)
                        .map(|(_, n)| n.clone()),
                )
                .collect();
            decisions[i].local = fresh(&decisions[i].bundle, &used);
        }
    }
}

/// Each decided entry's local name, by (kind, bundle alias).
fn local_names(decisions: &[Decision]) -> BTreeMap<(Kind, String), String> {
    decisions
        .iter()
        .map(|d| ((d.kind, d.bundle.clone()), d.local.clone()))
        .collect()
}

/// Why the reused entry of decision `d` is not the local entry of its name: where its config
/// (references in local `names`, secrets blanked) first differs, or, for a skill bundle, its
/// content; `None` when it is the same.
fn reuse_differs(
    input: &MergeInput<'_>,
    sides: &Sides,
    d: &Decision,
    names: &BTreeMap<(Kind, String), String>,
) -> Result<Option<String>, ImportError> {
    let item = rewritten(sides, d, names)?;
    let blank = blank_of(input, d.kind, &d.bundle);
    let theirs = typed(d.kind, &d.local, &item, &blank);
    let mine = sides
        .local_items
        .get(&(d.kind, d.local.clone()))
        .map(|local| typed(d.kind, &d.local, local, &blank));
    let config_differs = match (theirs, mine) {
        (Ok(a), Some(Ok(b))) => first_difference(&a, &b, &d.kind.path_of(&d.local)),
        (Err(e), _) | (_, Some(Err(e))) => Some(format!("(not comparable: {e})")),
        (_, None) => Some("(no local entry to compare)".to_string()),
    };
    Ok(match config_differs {
        Some(key) => Some(format!("the local entry differs at {key}")),
        None if d.kind == Kind::SkillBundle => (input.skill_content_differs)(&d.bundle, &d.local)?
            .map(|file| format!("the local skill content differs at {file}")),
        None => None,
    })
}

/// The incoming entry of decision `d` with its references in local names.
fn rewritten(
    sides: &Sides,
    d: &Decision,
    names: &BTreeMap<(Kind, String), String>,
) -> Result<Item, ImportError> {
    let mut item = sides
        .incoming
        .iter()
        .find(|e| e.kind == d.kind && e.alias == d.bundle)
        .expect("a decision is about an incoming entry")
        .item
        .clone();
    rewrite_refs(
        d.kind,
        &d.kind.path_of(&d.bundle),
        &mut item,
        names,
        &sides.excluded,
    )?;
    Ok(item)
}

/// The keys below entry (`kind`, `alias`) that the bundle's `required_secrets` lists.
fn blank_of(input: &MergeInput<'_>, kind: Kind, alias: &str) -> Vec<String> {
    let prefix = format!("{}.", kind.path_of(alias));
    input
        .required_secrets
        .iter()
        .filter_map(|p| p.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

/// Writes each added or namespaced entry into `doc` under its local name, in the fragment's
/// own order (ZeroClaw's renderer's, so the new tables read like it); returns the notes.
fn write_entries(
    doc: &mut DocumentMut,
    sides: &Sides,
    decisions: &[Decision],
) -> Result<Vec<String>, ImportError> {
    let names = local_names(decisions);
    let mut notes = Vec::new();
    for e in &sides.incoming {
        let d = decisions
            .iter()
            .find(|d| d.kind == e.kind && d.bundle == e.alias)
            .expect("every incoming entry has a decision");
        if !matches!(d.action, Action::Add | Action::Namespace) {
            continue;
        }
        let mut item = rewritten(sides, d, &names)?;
        if d.kind == Kind::SkillBundle && d.action == Action::Namespace {
            let had = item
                .as_table_like_mut()
                .and_then(|t| t.remove("directory"))
                .is_some();
            if had {
                notes.push(format!(
                    "{}.directory was removed: the namespaced bundle uses the default location \
                     of its new alias",
                    d.kind.path_of(&d.local)
                ));
            }
        }
        reset_layout(&mut item);
        insert(doc, d.kind, &d.local, item)?;
    }
    Ok(notes)
}

/// The hard references of entry `item` of `kind`: (target kind, alias), trimmed, non-empty.
fn refs_of(kind: Kind, item: &Item) -> Vec<(Kind, String)> {
    let mut out = Vec::new();
    for field in REFS.iter().filter(|f| f.owner == kind && !f.soft) {
        let Some(node) = lookup(item, field.path) else {
            continue;
        };
        let mut push = |v: &str| {
            let v = v.trim();
            if !v.is_empty() {
                out.push((field.target, v.to_string()));
            }
        };
        match node {
            Item::Value(Value::String(s)) => push(s.value()),
            Item::Value(Value::Array(a)) => a.iter().filter_map(Value::as_str).for_each(push),
            _ => {}
        }
    }
    out
}

/// Marks [`Action::LeftOut`] every entry that the root agent reaches only through an entry
/// `--map` replaced: the mapped entry's references are the local entry's, so what only it
/// referenced (a fallback provider of a mapped provider, say) would arrive unused, and its
/// secrets would be asked for nothing. Entries the agent reaches otherwise keep their fate.
fn leave_out_unreached(decisions: &mut [Decision], incoming: &[Entry], root_agent: &str) {
    let reach = |through_maps: bool| -> BTreeMap<(Kind, String), String> {
        let mut reached: BTreeMap<(Kind, String), String> = BTreeMap::new();
        let mut stack = vec![(Kind::Agent, root_agent.to_string(), String::new())];
        while let Some((kind, alias, by)) = stack.pop() {
            if reached.contains_key(&(kind, alias.clone())) {
                continue;
            }
            let Some(entry) = incoming.iter().find(|e| e.kind == kind && e.alias == alias) else {
                continue;
            };
            reached.insert((kind, alias.clone()), by);
            let mapped = decisions
                .iter()
                .any(|d| d.kind == kind && d.bundle == alias && d.action == Action::Map);
            if mapped && !through_maps {
                continue;
            }
            for (k, a) in refs_of(kind, &entry.item) {
                stack.push((k, a, kind.path_of(&alias)));
            }
        }
        reached
    };
    let (all, without_maps) = (reach(true), reach(false));
    for d in decisions.iter_mut() {
        let key = (d.kind, d.bundle.clone());
        if let Some(by) = all.get(&key).filter(|_| !without_maps.contains_key(&key)) {
            d.action = Action::LeftOut;
            d.local = String::new();
            d.why = Some(format!(
                "only {by} referenced it, and --map replaced that with a local entry"
            ));
        }
    }
}

/// The first dotted key (below `at`) where two typed entries differ, or `None` when equal.
fn first_difference(a: &toml::Value, b: &toml::Value, at: &str) -> Option<String> {
    match (a, b) {
        (toml::Value::Table(x), toml::Value::Table(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let path = format!("{at}.{k}");
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => first_difference(p, q, &path),
                    _ => Some(path),
                }
            })
        }
        _ if a == b => None,
        _ => Some(at.to_string()),
    }
}

/// The aliases `install` (a `config.toml` text) defines, by kind: what a name an update adds
/// must not take.
pub(crate) fn taken_aliases(install: &str) -> Result<BTreeSet<(Kind, String)>, ImportError> {
    let doc: DocumentMut =
        install
            .parse()
            .map_err(|e: toml_edit::TomlError| ImportError::Fragment {
                path: "config.toml".into(),
                problem: format!("is not TOML: {}", e.message().trim()),
            })?;
    Ok(collect(&doc, false)?
        .into_iter()
        .map(|e| (e.kind, e.alias))
        .collect())
}

/// The aliases a fragment defines, by kind, in its own order.
pub(crate) fn fragment_aliases(fragment: &str) -> Result<Vec<(Kind, String)>, ImportError> {
    let doc = parse_fragment(fragment)?;
    Ok(collect(&doc, true)?
        .into_iter()
        .map(|e| (e.kind, e.alias))
        .collect())
}

/// The entries of `fragment` named in `owned`, each under its local name (`names`, bundle
/// alias -> local alias per kind) with every reference rewritten through `names`, as a
/// document of their own: what an import of the fragment would have added, in the install's
/// names, the side of an update's three-way config merge. A namespaced skill bundle loses its
/// `directory`, as on import.
pub(crate) fn localize(
    fragment: &str,
    names: &BTreeMap<(Kind, String), String>,
    owned: &BTreeSet<(Kind, String)>,
) -> Result<String, ImportError> {
    let doc = parse_fragment(fragment)?;
    let incoming = collect(&doc, true)?;
    let excluded = excluded_servers(&incoming);
    let mut out = DocumentMut::new();
    for e in &incoming {
        let key = (e.kind, e.alias.clone());
        if !owned.contains(&key) {
            continue;
        }
        let local = names.get(&key).cloned().unwrap_or_else(|| e.alias.clone());
        let mut item = e.item.clone();
        rewrite_refs(
            e.kind,
            &e.kind.path_of(&e.alias),
            &mut item,
            names,
            &excluded,
        )?;
        if e.kind == Kind::SkillBundle && local != e.alias {
            if let Some(t) = item.as_table_like_mut() {
                t.remove("directory");
            }
        }
        reset_layout(&mut item);
        insert(&mut out, e.kind, &local, item)?;
    }
    Ok(out.to_string())
}

fn parse_fragment(fragment: &str) -> Result<DocumentMut, ImportError> {
    fragment
        .parse()
        .map_err(|e: toml_edit::TomlError| ImportError::Fragment {
            path: "config.toml".into(),
            problem: format!("is not TOML: {}", e.message().trim()),
        })
}

/// A fresh alias for `alias` (see [`fresh`]).
pub(crate) fn fresh_alias(alias: &str, used: &BTreeSet<String>) -> String {
    fresh(alias, used)
}

/// `<alias>_imported`, then `_imported_2`, ... : the first not in `used` (for a provider,
/// the entry part is suffixed: `openai.main_imported`).
fn fresh(alias: &str, used: &BTreeSet<String>) -> String {
    (1..)
        .map(|n| {
            if n == 1 {
                format!("{alias}_imported")
            } else {
                format!("{alias}_imported_{n}")
            }
        })
        .find(|c| !used.contains(c))
        .expect("an unused name exists")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merged(install: &str, fragment: &str, maps: &[MapArg]) -> Result<Merged, ImportError> {
        merge(&MergeInput {
            install,
            fragment,
            root_agent: "a",
            required_secrets: &["providers.models.openai.p.api_key".to_string()],
            agent_as: None,
            maps,
            skill_content_differs: &|_, _| Ok(None),
            config_path: std::path::Path::new("/zc/config.toml"),
        })
    }

    const FRAGMENT: &str = "# header\n[agents.a]\nmodel_provider = \"openai.p\"\nrisk_profile = \"r\"\n\n[providers.models.openai.p]\napi_key = \"\"\nmodel = \"gpt\"\n\n[risk_profiles.r]\nlevel = \"full\"\n";

    #[test]
    fn colliding_entries_are_namespaced_and_references_follow() {
        let install = "schema_version = 3\n\n# mine\n[agents.a]\nrisk_profile = \"r\"\n\n[risk_profiles.r]\nlevel = \"supervised\"\n";
        let m = merged(install, FRAGMENT, &[]).unwrap();
        let removed = similar::TextDiff::from_lines(install, &m.text)
            .iter_all_changes()
            .any(|c| c.tag() == similar::ChangeTag::Delete);
        assert!(!removed, "the install's own lines must stay: {}", m.text);
        assert!(m.text.contains("[agents.a_imported]"), "{}", m.text);
        assert!(
            m.text.contains("risk_profile = \"r_imported\""),
            "{}",
            m.text
        );
        assert!(m.text.contains("[risk_profiles.r_imported]"), "{}", m.text);
        assert!(!m.text.contains("# header"), "{}", m.text);
        assert!(m.text.contains("[providers.models.openai.p]"), "{}", m.text);
    }

    #[test]
    fn an_identical_entry_is_reused_with_secrets_set_aside() {
        let install = "[providers.models.openai.p]\nmodel = \"gpt\"\napi_key = \"sk-local\"\n";
        let m = merged(install, FRAGMENT, &[]).unwrap();
        let d = m.local(Kind::ModelProvider, "openai.p").unwrap();
        assert_eq!(d.action, Action::Reuse);
        assert_eq!(m.text.matches("[providers.models.openai.p]").count(), 1);
    }

    #[test]
    fn a_dangling_reference_is_named_and_map_must_exist() {
        let fragment = "[agents.a]\nrisk_profile = \"ghost\"\n";
        let err = merged("", fragment, &[]).unwrap_err().to_string();
        assert!(err.contains("agents.a.risk_profile"), "{err}");
        assert!(err.contains("risk_profiles.ghost"), "{err}");
        let map = MapArg::parse("risk_profile.r=nope").unwrap();
        let err = merged("", FRAGMENT, &[map]).unwrap_err().to_string();
        assert!(err.contains("risk_profiles.nope does not exist"), "{err}");
        let map = MapArg::parse("provider.openai.p=openai.mine").unwrap();
        assert_eq!(map.kind, Kind::ModelProvider);
        let install = "[providers.models.openai.mine]\nmodel = \"x\"\n";
        let m = merged(install, FRAGMENT, &[map]).unwrap();
        assert!(
            m.text.contains("model_provider = \"openai.mine\""),
            "{}",
            m.text
        );
        assert!(
            !m.text.contains("[providers.models.openai.p]"),
            "{}",
            m.text
        );
    }
}
