//! The semantic diff of two agent bundles: what changed in what the agent may do, from their
//! manifests and `config.toml` fragments. Manifest changes (risk flags, required secrets,
//! dropped entries, carried skill bundles, root agent, format version; provenance is ignored)
//! and config changes key by key as dotted paths. Secret values are never shown: a path the
//! manifest lists as a required secret, or one the schema or the credential-name rule marks,
//! is shown as `(scrubbed)` or `(set, not shown)`.
//!
//! A change that grants the agent something new is marked `grant`: an added risk flag (or one
//! whose detail changed: a different command line is a different grant), an added skill
//! bundle, a new MCP server, a bounding list of a risk profile widened (an allowlist gains an
//! entry or is removed so the default applies, a denylist loses one), or a provider's or
//! server's endpoint changed. Risk flags are recomputed from each side's `config.toml`, not
//! read from its manifest alone: a config edited after export cannot hide a grant, and one
//! that grants what its manifest does not list is marked as such.

use std::collections::BTreeMap;

use serde::Serialize;

use super::error::AgentError;
use super::flags::config_flags;
use super::grants::{key_grant, keyed, leaves, Flags};
use super::manifest::{Manifest, RiskFlag, RiskKind};
use super::schema::hidden_in_display;
use super::value::{inline_text, join_path, Node, Table};
use crate::credential_keys::credential_key_rule;

/// One semantic change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SemanticChange {
    /// `manifest` or `config`.
    pub area: &'static str,
    /// What changed: `risk_flag`, `required_secret`, `dropped`, `skill_bundle`, `root_agent`,
    /// `format_version`, or `key` for a config value.
    pub item: &'static str,
    /// The dotted path (or `kind at path` for a risk flag).
    pub path: String,
    /// The value on side A (absent: not there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old: Option<SideValue>,
    /// The value on side B (absent: not there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new: Option<SideValue>,
    /// Whether B grants the agent something A did not.
    pub grant: bool,
    /// Whether the path is a secret: its values are never shown, `old` and `new` then say
    /// only `"scrubbed"` (empty) or `"set"`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub secret: bool,
    /// Why it is a grant, or other context.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl SemanticChange {
    /// The change as one line of text (`diff` and `review` print it): `! ` for a grant, then
    /// area, item, path and what changed, with its note; paths and values escaped, so a crafted
    /// value cannot move the cursor or fake a line.
    pub fn line(&self) -> String {
        use zeroclaw_bundle_store::escape_text;
        let mark = if self.grant { "!" } else { " " };
        let what = match (&self.old, &self.new) {
            (None, Some(n)) if self.item == "key" => format!("added: {n}"),
            (Some(o), None) if self.item == "key" => format!("removed (was {o})"),
            (Some(o), Some(n)) => format!("{o} -> {n}"),
            (None, Some(n)) if n.text == self.path => "added".to_string(),
            (None, Some(n)) => format!("added: {n}"),
            (Some(_), None) => "removed".to_string(),
            (None, None) => String::new(),
        };
        let note = if self.note.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.note)
        };
        format!(
            "{mark} {} {} {}: {}{}",
            self.area,
            self.item.replace('_', " "),
            escape_text(&self.path),
            escape_text(&what),
            escape_text(&note)
        )
    }
}

/// One side's value of a semantic change: text output prints `text` (TOML-like, `"(set, not
/// shown)"` for a secret), `--json` carries `json`, the value itself (a string, number,
/// boolean, array or object; a datetime as its TOML text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SideValue {
    /// What text output prints.
    pub text: String,
    /// What `--json` carries.
    pub json: serde_json::Value,
}

impl SideValue {
    /// A string value (a risk flag's detail, a path, a name).
    fn text(s: &str) -> SideValue {
        SideValue {
            text: s.to_string(),
            json: serde_json::Value::String(s.to_string()),
        }
    }
}

impl std::fmt::Display for SideValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for SideValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

/// Compares two bundles given the texts of their manifests and `config.toml` files.
pub fn compare_bundles(
    a_manifest: &str,
    a_config: &str,
    b_manifest: &str,
    b_config: &str,
) -> Result<Vec<SemanticChange>, AgentError> {
    let ma = Manifest::from_toml_str(a_manifest)?;
    let mb = Manifest::from_toml_str(b_manifest)?;
    let (ta, tb) = (parse(a_config, "A")?, parse(b_config, "B")?);
    // What each side's config grants, planned once per side.
    let made_a = config_flags(a_config, &ta, &ma.root_agent)?;
    let made_b = config_flags(b_config, &tb, &mb.root_agent)?;
    let mut out = Vec::new();
    unlisted_flags(&mb, &made_b, &mut out);
    manifest_changes(
        &ma,
        &mb,
        &effective_flags(&ma, &made_a),
        &effective_flags(&mb, &made_b),
        &mut out,
    );
    let secrets: Vec<&str> = ma
        .required_secrets
        .iter()
        .chain(&mb.required_secrets)
        .map(String::as_str)
        .collect();
    config_changes(&leaves(&ta), &leaves(&tb), &secrets, &mut out);
    Ok(out)
}

/// Compares two config fragments that have no agent (what an Agent Plugin's `mcp.json`
/// means to ZeroClaw, `crate::plugin`): key by key, each change marked by the one grant rule
/// table ([`key_grant`]), environment and header values masked.
pub fn compare_configs(a_config: &str, b_config: &str) -> Result<Vec<SemanticChange>, AgentError> {
    let (ta, tb) = (parse(a_config, "A")?, parse(b_config, "B")?);
    let mut out = Vec::new();
    config_changes(&leaves(&ta), &leaves(&tb), &[], &mut out);
    Ok(out)
}

/// What a side grants: the flags its `config.toml` yields (what an import would run; a
/// hand-edited config cannot hide a grant behind an unchanged manifest), plus the manifest's
/// `carried_skills` flags (carried content, not config).
fn effective_flags(manifest: &Manifest, made: &[RiskFlag]) -> Flags {
    let mut flags = keyed(made);
    flags.extend(keyed(
        manifest
            .risk_flags
            .iter()
            .filter(|f| f.kind == RiskKind::CarriedSkills),
    ));
    flags
}

/// Where side B's manifest and its own `config.toml` disagree (one was edited after export):
/// a grant the config makes and the manifest does not list is marked, whatever side A holds;
/// a flag the manifest lists and the config does not make is said, unmarked.
fn unlisted_flags(manifest: &Manifest, made: &[RiskFlag], out: &mut Vec<SemanticChange>) {
    let listed = keyed(
        manifest
            .risk_flags
            .iter()
            .filter(|f| f.kind != RiskKind::CarriedSkills),
    );
    let made = keyed(made);
    for (key, detail) in &made {
        if listed.get(key) != Some(detail) {
            out.push(SemanticChange {
                grant: true,
                note: "config.toml grants this but the bundle's manifest does not list it \
                       (edited after export)"
                    .into(),
                ..change(
                    "manifest",
                    "unlisted_risk_flag",
                    key.clone(),
                    None,
                    Some(detail.clone()),
                )
            });
        }
    }
    for (key, detail) in &listed {
        if made.get(key) != Some(detail) {
            out.push(SemanticChange {
                note: "the bundle's manifest lists this but its config.toml does not grant it \
                       (edited after export)"
                    .into(),
                ..change(
                    "manifest",
                    "stale_risk_flag",
                    key.clone(),
                    Some(detail.clone()),
                    None,
                )
            });
        }
    }
}

fn parse(text: &str, side: &str) -> Result<Table, AgentError> {
    let doc: toml_edit::DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| AgentError::InvalidManifest {
                field: format!("config.toml of side {side}"),
                problem: format!("is not valid TOML: {}", e.message().trim()),
            })?;
    Ok(Table::from_toml_edit(doc.as_table()))
}

fn change(
    area: &'static str,
    item: &'static str,
    path: String,
    old: Option<String>,
    new: Option<String>,
) -> SemanticChange {
    valued(
        area,
        item,
        path,
        old.as_deref().map(SideValue::text),
        new.as_deref().map(SideValue::text),
    )
}

fn valued(
    area: &'static str,
    item: &'static str,
    path: String,
    old: Option<SideValue>,
    new: Option<SideValue>,
) -> SemanticChange {
    SemanticChange {
        area,
        item,
        path,
        old,
        new,
        grant: false,
        secret: false,
        note: String::new(),
    }
}

fn manifest_changes(
    a: &Manifest,
    b: &Manifest,
    fa: &Flags,
    fb: &Flags,
    out: &mut Vec<SemanticChange>,
) {
    if a.format_version != b.format_version {
        let number = |v: &dyn std::fmt::Display, n: serde_json::Value| SideValue {
            text: v.to_string(),
            json: n,
        };
        out.push(valued(
            "manifest",
            "format_version",
            "format_version".into(),
            Some(number(&a.format_version, a.format_version.into())),
            Some(number(&b.format_version, b.format_version.into())),
        ));
    }
    if a.root_agent != b.root_agent {
        out.push(change(
            "manifest",
            "root_agent",
            "root_agent".into(),
            Some(a.root_agent.clone()),
            Some(b.root_agent.clone()),
        ));
    }
    for (key, detail) in fb {
        match fa.get(key) {
            None => out.push(SemanticChange {
                grant: true,
                note: "new capability grant".into(),
                ..change(
                    "manifest",
                    "risk_flag",
                    key.clone(),
                    None,
                    Some(detail.clone()),
                )
            }),
            Some(old) if old != detail => out.push(SemanticChange {
                grant: true,
                note: "the granted capability changed".into(),
                ..change(
                    "manifest",
                    "risk_flag",
                    key.clone(),
                    Some(old.clone()),
                    Some(detail.clone()),
                )
            }),
            Some(_) => {}
        }
    }
    for (key, detail) in fa {
        if !fb.contains_key(key) {
            out.push(change(
                "manifest",
                "risk_flag",
                key.clone(),
                Some(detail.clone()),
                None,
            ));
        }
    }
    set_changes(
        "required_secret",
        &a.required_secrets,
        &b.required_secrets,
        false,
        out,
    );
    // A dropped entry is `path (reason)` in text and `{"path", "reason"}` in JSON.
    let dropped = |m: &Manifest| -> Vec<(String, SideValue)> {
        m.dropped
            .iter()
            .map(|d| {
                let text = format!("{} ({})", d.path, d.reason.as_str());
                let json = serde_json::json!({"path": d.path, "reason": d.reason.as_str()});
                (text.clone(), SideValue { text, json })
            })
            .collect()
    };
    let (da, db) = (dropped(a), dropped(b));
    for (text, v) in db.iter().filter(|(t, _)| !da.iter().any(|(x, _)| x == t)) {
        out.push(valued(
            "manifest",
            "dropped",
            text.clone(),
            None,
            Some(v.clone()),
        ));
    }
    for (text, v) in da.iter().filter(|(t, _)| !db.iter().any(|(x, _)| x == t)) {
        out.push(valued(
            "manifest",
            "dropped",
            text.clone(),
            Some(v.clone()),
            None,
        ));
    }
    set_changes(
        "skill_bundle",
        &a.skill_bundles,
        &b.skill_bundles,
        true,
        out,
    );
}

fn set_changes(
    item: &'static str,
    a: &[String],
    b: &[String],
    added_is_grant: bool,
    out: &mut Vec<SemanticChange>,
) {
    for x in b.iter().filter(|x| !a.contains(x)) {
        let mut c = change("manifest", item, x.clone(), None, Some(x.clone()));
        if added_is_grant {
            c.grant = true;
            c.note = "new skill bundle carried".into();
        }
        out.push(c);
    }
    for x in a.iter().filter(|x| !b.contains(x)) {
        out.push(change("manifest", item, x.clone(), Some(x.clone()), None));
    }
}

fn is_secret(path: &str, secrets: &[&str]) -> bool {
    secrets.contains(&path)
        || secrets.iter().any(|s| path.starts_with(&format!("{s}.")))
        || path
            .split('.')
            .any(|segment| credential_key_rule(segment).is_some())
        || path.contains(".env.")
        || path.contains(".headers.")
        || path.contains(".extra_headers.")
}

fn show(path: &str, node: &Node, secrets: &[&str]) -> SideValue {
    if is_secret(path, secrets) {
        let (text, json) = match node {
            Node::Str(s) if s.is_empty() => ("(scrubbed)", "scrubbed"),
            _ => ("(set, not shown)", "set"),
        };
        return SideValue {
            text: text.into(),
            json: json.into(),
        };
    }
    SideValue {
        text: inline_text(node),
        json: to_json(node),
    }
}

/// A config value as JSON: the value itself, not its TOML text. A datetime is its TOML
/// text; a float JSON cannot carry (nan, inf) is its TOML text too.
fn to_json(node: &Node) -> serde_json::Value {
    use serde_json::Value;
    match node {
        Node::Str(s) => Value::String(s.clone()),
        Node::Int(i) => Value::from(*i),
        Node::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())),
        Node::Bool(b) => Value::Bool(*b),
        Node::Datetime(d) => Value::String(d.to_string()),
        Node::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        Node::Table(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.to_string(), to_json(v))).collect())
        }
    }
}

fn config_changes(
    a: &BTreeMap<String, Node>,
    b: &BTreeMap<String, Node>,
    secrets: &[&str],
    out: &mut Vec<SemanticChange>,
) {
    let servers = |m: &BTreeMap<String, Node>| -> Vec<String> {
        let mut names: Vec<String> = m
            .keys()
            .filter_map(|k| k.strip_prefix("mcp.servers."))
            .filter_map(|rest| rest.split('.').next())
            .map(str::to_string)
            .collect();
        names.dedup();
        names
    };
    let (sa, sb) = (servers(a), servers(b));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let (x, y) = (a.get(key), b.get(key));
        if x == y {
            continue;
        }
        let mut c = valued(
            "config",
            "key",
            key.clone(),
            x.map(|n| show(key, n, secrets)),
            y.map(|n| show(key, n, secrets)),
        );
        c.secret = is_secret(key, secrets);
        let new_server = key
            .strip_prefix("mcp.servers.")
            .and_then(|r| r.split('.').next())
            .is_some_and(|server| {
                sb.iter().any(|s| s == server) && !sa.iter().any(|s| s == server)
            });
        if let Some((_, note)) = key_grant(key, x, y, new_server) {
            c.grant = true;
            c.note = note;
        }
        out.push(c);
    }
}

/// What a masked value reads as (`diff -p`, the import's config diff): a TOML string, so the
/// masked text still parses.
const NOT_SHOWN: &str = "(not shown: a secret field)";

/// What a whole text reads as when it does not parse as TOML: its secret values cannot be told
/// from the rest, so none of it is shown.
const UNPARSED: &str =
    "(not shown: this text does not parse as TOML, so its secret values cannot be told apart)\n";

/// A TOML text with every secret value replaced by `"(not shown: a secret field)"`, for the
/// two places that print a config: `diff -p` and the import's config diff. Masked on the parsed
/// document (toml_edit), not line by line, so a multi-line string, a header with a comment,
/// an inline table, an array of tables, a dotted key (`a.api_key = ...`) and a quoted key are
/// all seen as TOML sees them. A value is secret when its key is named like a credential or
/// like a table of secrets (`hidden_in_display`: the credential-name rules, ZeroClaw's
/// `#[secret]` field names, `env`, `headers`, `extra_headers`), when it lies anywhere under
/// such a key (every leaf of `[mcp.servers.env]` or `env = { T = { U = "..." } }`; the inner
/// keys stay, the values go), or when its dotted path is one of `secret_paths` or lies under
/// one (an import passes the secrets its bundle names; an array-of-tables element is named by
/// its `name`, else its index, as in every dotted path of this crate). An empty string (an
/// already scrubbed value) stays as it is; every other scalar is replaced, its comment and
/// spacing kept, and the rest of the text keeps its formatting byte for byte. A text that does
/// not parse is replaced whole by one line that says so: no byte of a secret value is ever
/// returned.
pub fn mask_secrets(text: &str, secret_paths: &[&str]) -> String {
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else {
        return UNPARSED.to_string();
    };
    mask_table_like(doc.as_table_mut(), "", false, secret_paths);
    doc.to_string()
}

/// [`mask_secrets`] for a bundle's manifest (`zeroclaw-agent.toml`): its top-level
/// `required_secrets`, an array of the config paths whose credentials were scrubbed (names,
/// not values), is shown as written although its key is named like a secret. Anything else in
/// the file is masked as [`mask_secrets`] masks it, and so is a `required_secrets` of another
/// shape than an array of strings (no manifest writes one).
pub fn mask_manifest_secrets(text: &str) -> String {
    let Ok(mut doc) = text.parse::<toml_edit::DocumentMut>() else {
        return UNPARSED.to_string();
    };
    let listed = doc
        .get("required_secrets")
        .and_then(toml_edit::Item::as_array)
        .is_some_and(|a| a.iter().all(|v| v.as_str().is_some()));
    for (key, item) in doc.as_table_mut().iter_mut() {
        if listed && key.get() == "required_secrets" {
            continue;
        }
        let path = join_path("", key.get());
        let secret = child_secret(false, key.get(), &path, &[]);
        mask_item(item, &path, secret, &[]);
    }
    doc.to_string()
}

/// Whether `path` is one of `paths` or lies under one.
fn named_secret(path: &str, paths: &[&str]) -> bool {
    paths.iter().any(|p| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    })
}

fn child_secret(secret: bool, key: &str, path: &str, paths: &[&str]) -> bool {
    secret || hidden_in_display(key) || named_secret(path, paths)
}

fn mask_table_like(
    table: &mut dyn toml_edit::TableLike,
    prefix: &str,
    secret: bool,
    paths: &[&str],
) {
    for (key, item) in table.iter_mut() {
        let path = join_path(prefix, key.get());
        let secret = child_secret(secret, key.get(), &path, paths);
        mask_item(item, &path, secret, paths);
    }
}

fn mask_item(item: &mut toml_edit::Item, path: &str, secret: bool, paths: &[&str]) {
    use toml_edit::Item;
    match item {
        Item::None => {}
        Item::Value(v) => mask_value(v, path, secret, paths),
        Item::Table(t) => mask_table_like(t, path, secret, paths),
        Item::ArrayOfTables(tables) => {
            for (index, t) in tables.iter_mut().enumerate() {
                let name = match t.get("name").and_then(|n| n.as_str()) {
                    Some(name) => name.to_string(),
                    None => index.to_string(),
                };
                let element = join_path(path, &name);
                let secret = secret || named_secret(&element, paths);
                mask_table_like(t, &element, secret, paths);
            }
        }
    }
}

fn mask_value(value: &mut toml_edit::Value, path: &str, secret: bool, paths: &[&str]) {
    use toml_edit::Value;
    match value {
        Value::InlineTable(t) => {
            for (key, v) in t.iter_mut() {
                let path = join_path(path, key.get());
                let secret = child_secret(secret, key.get(), &path, paths);
                mask_value(v, &path, secret, paths);
            }
        }
        Value::Array(items) => {
            for (index, v) in items.iter_mut().enumerate() {
                let name = match v.as_inline_table().and_then(|t| t.get("name")) {
                    Some(n) => n.as_str().map_or(index.to_string(), str::to_string),
                    None => index.to_string(),
                };
                let element = join_path(path, &name);
                let secret = secret || named_secret(&element, paths);
                mask_value(v, &element, secret, paths);
            }
        }
        Value::String(s) if s.value().is_empty() => {}
        scalar if secret => {
            let decor = scalar.decor().clone();
            *scalar = Value::from(NOT_SHOWN);
            *scalar.decor_mut() = decor;
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {

    /// A manifest's `required_secrets` (config paths) is shown as written, in its place; a
    /// secret-looking value elsewhere in it, or a `required_secrets` that is no list of paths,
    /// is still masked.
    #[test]
    fn a_manifest_shows_its_required_secrets_and_masks_the_rest() {
        let text = "format_version = 1\nrequired_secrets = [\n    \"a.api_key\", # note\n]\nroot_agent = \"a\"\n\n[provenance]\napi_key = \"LEAK-1\"\n";
        let masked = super::mask_manifest_secrets(text);
        assert!(masked.starts_with("format_version = 1\nrequired_secrets = [\n    \"a.api_key\", # note\n]\nroot_agent"), "{masked}");
        assert!(!masked.contains("LEAK"), "{masked}");
        let odd = "required_secrets = \"LEAK-2\"\n";
        assert!(!super::mask_manifest_secrets(odd).contains("LEAK"));
        let nested = "required_secrets = [{ token = \"LEAK-3\" }]\n";
        assert!(!super::mask_manifest_secrets(nested).contains("LEAK"));
    }
    /// Every shape a secret value can take in TOML: no byte of any value marked `LEAK` is
    /// left (each carries a distinct marker, so the failure names the shape), every other
    /// line stays as written, and the masked text still parses.
    #[test]
    fn secrets_are_masked_on_the_parsed_document() {
        let text = r#"schema_version = 3 # top
[providers.models.openai.x]
api_key = "sk-LEAK-basic"
model = "gpt"
scrubbed_token = ""
prompt = """
plain multi-line text stays
"""
client_secret = """
LEAK-multi-basic-1
LEAK-multi-basic-2"""
private_key = '''
LEAK-multi-literal
'''

[providers.models.openai.x.env] # a note on the env
OPENAI_ORG = "LEAK-under-commented-header"

[mcp]
[[mcp.servers]]
name = "fs"
command = "npx"
env = { TOKEN = "LEAK-inline", NESTED = { DEEP = "LEAK-nested" }, LIST = ["LEAK-in-array"] }
[[mcp.servers]]
name = "git"
headers = { Authorization = "Bearer LEAK-header" }
[mcp.servers.env]
SEARCH = "LEAK-aot-subtable"

[channels]
telegram.bot_token = "LEAK-dotted"
"auth_token" = 'LEAK-quoted'
webhook_secret = 4711000999
plain = "kept-value"
# api_key = "a comment stays"
[gateway]
"by-path".hidden = "LEAK-under-named"
"#;
        let masked = super::mask_secrets(text, &["gateway.by-path"]);
        assert!(!masked.contains("LEAK"), "{masked}");
        assert!(
            !masked.contains("4711000999"),
            "a number under a secret key: {masked}"
        );
        for kept in [
            "schema_version = 3 # top\n",
            "model = \"gpt\"\n",
            "scrubbed_token = \"\"\n",
            "prompt = \"\"\"\nplain multi-line text stays\n\"\"\"\n",
            "[providers.models.openai.x.env] # a note on the env\n",
            "name = \"fs\"\n",
            "command = \"npx\"\n",
            "plain = \"kept-value\"\n",
            "# api_key = \"a comment stays\"\n",
            "TOKEN = \"(not shown: a secret field)\"",
            "DEEP = \"(not shown: a secret field)\"",
        ] {
            assert!(masked.contains(kept), "{kept:?} is gone: {masked}");
        }
        let parsed: toml_edit::DocumentMut = masked.parse().expect("the masked text parses");
        assert_eq!(
            parsed["providers"]["models"]["openai"]["x"]["private_key"].as_str(),
            Some("(not shown: a secret field)")
        );
    }

    /// A secret named by path only (a required secret the bundle lists under a key that no
    /// rule names), an array-of-tables element named by its `name`, and a text that does not
    /// parse: none of its bytes come back.
    #[test]
    fn named_paths_and_unparsable_text_are_masked() {
        let text = "[[mcp.servers]]\nname = \"s\"\nvar = \"LEAK-by-path\"\nother = \"kept\"\n[x]\ncode = \"LEAK-x\"\ncodex = \"kept2\"\n";
        let masked = super::mask_secrets(text, &["mcp.servers.s.var", "x.code"]);
        assert!(!masked.contains("LEAK"), "{masked}");
        assert!(masked.contains("other = \"kept\"") && masked.contains("codex = \"kept2\""));
        let broken = "api_key = \"\"\"LEAK-unterminated\n[x\n";
        let masked = super::mask_secrets(broken, &[]);
        assert!(!masked.contains("LEAK"), "{masked}");
        assert!(masked.contains("does not parse as TOML"), "{masked}");
    }

    use super::*;

    const MANIFEST_A: &str = r#"format_version = 1
root_agent = "r"
required_secrets = ["providers.models.anthropic.main.api_key"]
skill_bundles = []
dropped = []
risk_flags = []

[provenance]
zeroclaw_version = "x"
exported_at = "2026-01-01T00:00:00.000000+00:00"
"#;

    #[test]
    fn a_removed_allowlist_and_a_new_endpoint_are_grants() {
        let config_a = "[risk_profiles.g]\nallowed_commands = []\n[providers.models.openai.x]\nmodel = \"m\"\nbase_url = \"https://api.openai.com/v1\"\n";
        let config_b = "[risk_profiles.g]\n[providers.models.openai.x]\nmodel = \"m\"\nbase_url = \"https://collector.example/v1\"\n";
        let changes = compare_bundles(MANIFEST_A, config_a, MANIFEST_A, config_b).expect("valid");
        let text = format!("{changes:#?}");
        for path in [
            "risk_profiles.g.allowed_commands",
            "providers.models.openai.x.base_url",
        ] {
            let c = changes
                .iter()
                .find(|c| c.path == path)
                .unwrap_or_else(|| panic!("{path} missing: {text}"));
            assert!(c.grant, "{path}: {text}");
        }
        // The other way: the allowlist comes back empty, the endpoint moves back; a changed
        // endpoint is a grant either way (requests go somewhere else), an allowlist that
        // appears is not.
        let back = compare_bundles(MANIFEST_A, config_b, MANIFEST_A, config_a).expect("valid");
        let allow = back
            .iter()
            .find(|c| c.path == "risk_profiles.g.allowed_commands")
            .expect("listed");
        assert!(!allow.grant, "{back:#?}");
    }

    #[test]
    fn grants_and_secrets() {
        let manifest_b = MANIFEST_A
            .replace(
                "required_secrets = [\"providers.models.anthropic.main.api_key\"]",
                "required_secrets = [\"mcp.servers.fs.env.TOKEN\", \"providers.models.anthropic.main.api_key\"]",
            )
            .replace("2026-01-01", "2026-02-02")
            .replace("risk_flags = []\n", "")
            + "\n[[risk_flags]]\nkind = \"process_spawn\"\npath = \"mcp.servers.fs.command\"\ndetail = \"starts npx\"\n";
        let config_a = "[risk_profiles.g]\nallowed_commands = [\"ls\"]\nforbidden_paths = [\"/etc\", \"/root\"]\n[providers.models.anthropic.main]\napi_key = \"\"\nmodel = \"m1\"\n";
        let config_b = "[risk_profiles.g]\nallowed_commands = [\"ls\", \"rm\"]\nforbidden_paths = [\"/etc\"]\n[providers.models.anthropic.main]\napi_key = \"sk-leaked\"\nmodel = \"m2\"\n[[mcp.servers]]\nname = \"fs\"\ncommand = \"npx\"\nenv = { TOKEN = \"\" }\n[agents.r]\nmcp_bundles = [\"t\"]\n[mcp_bundles.t]\nservers = [\"fs\"]\n";
        let changes = compare_bundles(MANIFEST_A, config_a, &manifest_b, config_b).expect("valid");
        let text = format!("{changes:?}");
        assert!(!text.contains("sk-leaked"), "{text}");
        assert!(!text.contains("2026-02-02"), "provenance ignored: {text}");
        let grant = |path: &str| {
            changes
                .iter()
                .find(|c| c.path == path)
                .unwrap_or_else(|| panic!("{path} missing: {text}"))
                .grant
        };
        assert!(grant("process_spawn at mcp.servers.fs.command"));
        assert!(grant("risk_profiles.g.allowed_commands"));
        assert!(grant("risk_profiles.g.forbidden_paths"));
        assert!(grant("mcp.servers.fs.command"));
        assert!(!grant("providers.models.anthropic.main.model"));
        assert!(!grant("mcp.servers.fs.env.TOKEN"));
        let key = changes
            .iter()
            .find(|c| c.path == "providers.models.anthropic.main.api_key")
            .expect("secret change listed");
        assert_eq!(
            key.old.as_ref().map(|v| v.text.as_str()),
            Some("(scrubbed)")
        );
        assert_eq!(
            key.new.as_ref().map(|v| v.text.as_str()),
            Some("(set, not shown)")
        );
        assert!(key.secret);
        let json = serde_json::to_value(key).expect("serializes");
        assert_eq!(json["old"], "scrubbed", "{json}");
        assert_eq!(json["new"], "set", "{json}");
        let model = changes
            .iter()
            .find(|c| c.path == "risk_profiles.g.allowed_commands")
            .expect("listed");
        let json = serde_json::to_value(model).expect("serializes");
        assert_eq!(
            json["new"],
            serde_json::json!(["ls", "rm"]),
            "a JSON value: {json}"
        );
        assert!(changes
            .iter()
            .any(|c| c.item == "required_secret" && c.path == "mcp.servers.fs.env.TOKEN"));
    }
}
