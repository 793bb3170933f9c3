//! Keys of the exported entries that ZeroClaw's schema does not know. ZeroClaw's serde
//! ignores a key it has no field for (a typo such as `base_urll`, or `base_url` where the
//! schema says `uri`), so the typed config, and with it the bundle, silently lacks it: this
//! module finds those keys so the export report can name them.
//!
//! A key of an install entry the closure carries (`agents.<a>`, the profiles and bundles,
//! `providers.<section>.<family>.<entry>`, `mcp.servers` by name) is a candidate when the
//! closure's entry lacks it. A candidate is unknown only when ZeroClaw's `Config`, loading the
//! entry alone, means the same with the key as without it, and the same again when the key
//! holds a value of another type (a field the schema has refuses that, or means something else
//! by it): so a key at its default (`fallback = []`, skipped when serialized), an alias serde
//! accepts, or a field the planner drops on purpose (listed as `dropped`) is never reported.
//! Only an install at the current schema version is checked: an older one is migrated first,
//! and its keys are not the schema's paths.

use zeroclaw_config::schema::Config;

use super::bridge::table_to_zeroclaw;
use super::install::Install;
use super::value::join_path;

/// The dotted paths of keys in the install's entries that the closure lacks because ZeroClaw's
/// schema does not know them, sorted.
pub(crate) fn unknown_keys(install: &Install, closure: &toml::Table) -> Vec<String> {
    if install.schema_version() != super::schema::SUPPORTED_SCHEMA_VERSION {
        return Vec::new();
    }
    let raw = table_to_zeroclaw(&install.config);
    let mut out = Vec::new();
    for (place, path, closure_entry) in entries(closure) {
        let Some(raw_entry) = place.find(&raw) else {
            continue;
        };
        let mut found = Vec::new();
        unknown_in(
            &place,
            raw_entry,
            raw_entry,
            closure_entry,
            &mut Vec::new(),
            &mut found,
        );
        for keys in found {
            let mut dotted = path.clone();
            for k in &keys {
                dotted = join_path(&dotted, k);
            }
            out.push(dotted);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Where an entry sits in a config: a table path, or an element of `mcp.servers` by name.
pub(super) enum Place {
    Table(Vec<String>),
    McpServer(String),
}

impl Place {
    fn find<'a>(&self, config: &'a toml::Table) -> Option<&'a toml::Table> {
        match self {
            Place::Table(path) => {
                let mut node = config;
                for seg in path {
                    node = node.get(seg)?.as_table()?;
                }
                Some(node)
            }
            Place::McpServer(name) => mcp_servers(config)
                .into_iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t),
        }
    }

    /// A config that holds `entry` alone at this place.
    fn alone(&self, entry: toml::Table) -> toml::Table {
        let mut config = toml::Table::new();
        config.insert(
            "schema_version".into(),
            toml::Value::Integer(i64::from(super::schema::SUPPORTED_SCHEMA_VERSION)),
        );
        match self {
            Place::Table(path) => {
                let mut value = toml::Value::Table(entry);
                for seg in path.iter().rev() {
                    let mut t = toml::Table::new();
                    t.insert(seg.clone(), value);
                    value = toml::Value::Table(t);
                }
                if let toml::Value::Table(t) = value {
                    config.extend(t);
                }
            }
            Place::McpServer(_) => {
                let mut mcp = toml::Table::new();
                mcp.insert(
                    "servers".into(),
                    toml::Value::Array(vec![toml::Value::Table(entry)]),
                );
                config.insert("mcp".into(), toml::Value::Table(mcp));
            }
        }
        config
    }
}

/// The `mcp.servers` of a config by name (an array of tables, or a table by name).
fn mcp_servers(config: &toml::Table) -> Vec<(String, &toml::Table)> {
    let servers = config
        .get("mcp")
        .and_then(toml::Value::as_table)
        .and_then(|t| t.get("servers"));
    match servers {
        Some(toml::Value::Array(items)) => items
            .iter()
            .filter_map(toml::Value::as_table)
            .filter_map(|t| Some((t.get("name")?.as_str()?.to_string(), t)))
            .collect(),
        Some(toml::Value::Table(t)) => t
            .iter()
            .filter_map(|(n, v)| Some((n.clone(), v.as_table()?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The aliased entries of the closure: where each sits, its dotted path, and its table.
pub(super) fn entries(closure: &toml::Table) -> Vec<(Place, String, &toml::Table)> {
    let mut out = Vec::new();
    let table = |path: &[&str]| -> Option<&toml::Table> {
        let mut node = closure;
        for seg in path {
            node = node.get(*seg)?.as_table()?;
        }
        Some(node)
    };
    for section in [
        "agents",
        "risk_profiles",
        "runtime_profiles",
        "skill_bundles",
        "knowledge_bundles",
        "mcp_bundles",
    ] {
        for (alias, entry) in table(&[section]).into_iter().flat_map(|t| t.iter()) {
            if let Some(entry) = entry.as_table() {
                out.push((
                    Place::Table(vec![section.to_string(), alias.clone()]),
                    join_path(section, alias),
                    entry,
                ));
            }
        }
    }
    for section in ["models", "tts", "transcription"] {
        for (family, entries) in table(&["providers", section])
            .into_iter()
            .flat_map(|t| t.iter())
        {
            for (alias, entry) in entries.as_table().into_iter().flat_map(|t| t.iter()) {
                if let Some(entry) = entry.as_table() {
                    let path = ["providers", section, family, alias].map(str::to_string);
                    let dotted = path.iter().fold(String::new(), |p, k| join_path(&p, k));
                    out.push((Place::Table(path.to_vec()), dotted, entry));
                }
            }
        }
    }
    for (name, entry) in mcp_servers(closure) {
        out.push((
            Place::McpServer(name.clone()),
            join_path("mcp.servers", &name),
            entry,
        ));
    }
    out
}

/// The key paths (within `entry`) of the keys of `raw` (the table at `prefix` in `entry`)
/// that `carried` lacks and the schema does not know. A table the schema knows is searched
/// further (against an empty table when `carried` lacks it: all its keys may be defaults).
fn unknown_in(
    place: &Place,
    entry: &toml::Table,
    raw: &toml::Table,
    carried: &toml::Table,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let empty = toml::Table::new();
    for (key, value) in raw {
        prefix.push(key.clone());
        match (value, carried.get(key)) {
            (toml::Value::Table(r), Some(toml::Value::Table(c))) => {
                unknown_in(place, entry, r, c, prefix, out)
            }
            (_, Some(_)) => {}
            (value, None) => {
                if !known(place, entry, prefix) {
                    out.push(prefix.clone());
                } else if let toml::Value::Table(r) = value {
                    unknown_in(place, entry, r, &empty, prefix, out);
                }
            }
        }
        prefix.pop();
    }
}

/// Whether ZeroClaw's schema knows the key at `keys` of `entry` (see the module doc). An entry
/// that does not load alone is taken as known: nothing is claimed about it.
fn known(place: &Place, entry: &toml::Table, keys: &[String]) -> bool {
    // Through text, with the one deserializer and serializer of `Config` the rest of the
    // crate uses (`toml::from_str`, `toml::to_string`): a second pair over `toml::Value`
    // doubled the schema's generated code in the binary, most of what a cold start reads.
    let means = |entry: toml::Table| -> Option<toml::Value> {
        let text = toml::to_string(&place.alone(entry)).ok()?;
        let config: Config = toml::from_str(&text).ok()?;
        toml::from_str::<toml::Table>(&toml::to_string(&config).ok()?)
            .ok()
            .map(toml::Value::Table)
    };
    let Some(with) = means(entry.clone()) else {
        return true;
    };
    let (Some(without), Some(other)) = (
        means(edited(entry, keys, None)),
        means(edited(entry, keys, Some(other_type(entry, keys)))),
    ) else {
        return true;
    };
    with != without || with != other
}

/// A value of another type than the one at `keys`.
fn other_type(entry: &toml::Table, keys: &[String]) -> toml::Value {
    let mut node = entry;
    for k in &keys[..keys.len() - 1] {
        match node.get(k).and_then(toml::Value::as_table) {
            Some(t) => node = t,
            None => break,
        }
    }
    match keys.last().and_then(|k| node.get(k)) {
        Some(toml::Value::Table(_)) => toml::Value::Integer(0),
        _ => {
            let mut t = toml::Table::new();
            t.insert("zeroclaw_bundle_probe".into(), toml::Value::Integer(0));
            toml::Value::Table(t)
        }
    }
}

/// `entry` with the key at `keys` removed (`None`) or set to `value`.
fn edited(entry: &toml::Table, keys: &[String], value: Option<toml::Value>) -> toml::Table {
    let mut entry = entry.clone();
    let mut node = &mut entry;
    for k in &keys[..keys.len() - 1] {
        match node.get_mut(k).and_then(toml::Value::as_table_mut) {
            Some(t) => node = t,
            None => return entry.clone(),
        }
    }
    let last = &keys[keys.len() - 1];
    match value {
        Some(v) => {
            node.insert(last.clone(), v);
        }
        None => {
            node.remove(last);
        }
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn unknown(text: &str) -> Vec<String> {
        let install = Install::from_toml_str(Path::new("/zc"), text).expect("loads");
        let plan = zeroclaw_config::agent_bundle::plan_export(&install.typed, "a").expect("plans");
        unknown_keys(&install, &plan.config)
    }

    #[test]
    fn a_typo_is_named_and_a_known_key_at_its_default_is_not() {
        let text = "schema_version = 3\n\
            [providers.models.openai.main]\nmodel = \"m\"\nbase_urll = \"http://x\"\n\
            fallback = []\ntemperature = 0.5\n\
            [agents.a]\nmodel_provider = \"openai.main\"\nenabled = true\nchannels = []\n\
            [agents.a.identity]\nformatt = \"aieos\"\n";
        assert_eq!(
            unknown(text),
            [
                "agents.a.identity.formatt",
                "providers.models.openai.main.base_urll"
            ]
        );
    }

    #[test]
    fn an_install_without_unknown_keys_has_none() {
        let text = "schema_version = 3\n\
            [providers.models.openai.main]\nmodel = \"m\"\nuri = \"http://x\"\n\
            [agents.a]\nmodel_provider = \"openai.main\"\n";
        assert!(unknown(text).is_empty());
    }
}
