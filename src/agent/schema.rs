//! What this crate knows of ZeroClaw's config schema without linking it: the schema defaults the
//! closure is pruned against (reference §4.8), and the secret fields it scrubs (§4.3).
//!
//! Defaults are deliberately partial. Pruning a key whose default is not known for certain could
//! change what the fragment means once read back, while keeping it only makes the fragment more
//! verbose, so a field is listed here only when its default is documented. Provider tables are
//! never pruned: a dropped `uri` would silently re-point an agent at the family's built-in
//! endpoint.

use super::value::{join_path, Node, Table};

/// The placeholder ZeroClaw's own masking writes; any occurrence is blanked and listed.
pub(crate) const MASKED_SECRET: &str = "***MASKED***";

/// Prefixes of ZeroClaw `SecretStore` ciphertext.
pub(crate) const CIPHERTEXT_PREFIXES: &[&str] = &["enc:", "enc2:"];

fn s(v: &str) -> Node {
    Node::Str(v.to_string())
}

fn empty_list() -> Node {
    Node::Array(Vec::new())
}

fn table(entries: Vec<(&str, Node)>) -> Table {
    let mut t = Table::new();
    for (k, v) in entries {
        t.insert(k, v);
    }
    t
}

/// `AliasedAgentConfig::default()` as far as it is documented.
pub(crate) fn agent_defaults() -> Table {
    table(vec![
        ("enabled", Node::Bool(true)),
        ("model_provider", s("")),
        ("classifier_provider", s("")),
        ("summary_provider", s("")),
        ("tts_provider", s("")),
        ("transcription_provider", s("")),
        ("risk_profile", s("")),
        ("runtime_profile", s("")),
        ("skill_bundles", empty_list()),
        ("knowledge_bundles", empty_list()),
        ("mcp_bundles", empty_list()),
        ("channels", empty_list()),
        ("cron_jobs", empty_list()),
        ("delegates", empty_list()),
        ("delegate_same_risk_profile", Node::Bool(true)),
        (
            "identity",
            Node::Table(table(vec![("format", s("openclaw"))])),
        ),
        (
            "workspace",
            Node::Table(table(vec![("unrestricted_filesystem", Node::Bool(false))])),
        ),
    ])
}

/// `RiskProfileConfig::default()`: supervised, confined to the workspace, both approval gates
/// on, nothing passed through, no extra roots, delegation forbidden, `sandbox_enabled` unset.
pub(crate) fn risk_profile_defaults() -> Table {
    table(vec![
        ("level", s("supervised")),
        ("workspace_only", Node::Bool(true)),
        ("allowed_commands", empty_list()),
        ("forbidden_paths", empty_list()),
        ("require_approval_for_medium_risk", Node::Bool(true)),
        ("block_high_risk_commands", Node::Bool(true)),
        ("shell_env_passthrough", empty_list()),
        ("auto_approve", empty_list()),
        ("always_ask", empty_list()),
        ("allowed_roots", empty_list()),
        (
            "delegation_policy",
            Node::Table(table(vec![("mode", s("forbidden"))])),
        ),
        ("allowed_tools", empty_list()),
        ("excluded_tools", empty_list()),
        ("firejail_args", empty_list()),
    ])
}

/// `RuntimeProfileConfig::default()`: not documented field by field, so nothing is pruned.
pub(crate) fn runtime_profile_defaults() -> Table {
    Table::new()
}

/// `SkillBundleConfig::default()` (`directory` is optional and has no serialized default).
pub(crate) fn skill_bundle_defaults() -> Table {
    table(vec![("include", empty_list()), ("exclude", empty_list())])
}

/// `KnowledgeBundleConfig::default()`.
pub(crate) fn knowledge_bundle_defaults() -> Table {
    table(vec![("sources", empty_list()), ("tags", empty_list())])
}

/// `McpBundleConfig::default()`.
pub(crate) fn mcp_bundle_defaults() -> Table {
    table(vec![("servers", empty_list()), ("exclude", empty_list())])
}

/// `McpServerConfig::default()`; `name` is never pruned.
pub(crate) fn mcp_server_defaults() -> Table {
    table(vec![
        ("transport", s("stdio")),
        ("args", empty_list()),
        ("env", Node::Table(Table::new())),
        ("headers", Node::Table(Table::new())),
        ("pinned_resources", empty_list()),
    ])
}

/// Remove from `actual` every value equal to its default (reference §4.8): `schema_version` is
/// always kept; a key absent from `defaults` is kept as is and not recursed into; two tables
/// recurse and the key goes when the pruned sub-table is empty; anything else goes when equal.
pub(crate) fn prune(actual: &Table, defaults: &Table) -> Table {
    let mut out = Table::new();
    for (key, value) in actual.iter() {
        if key == "schema_version" {
            out.insert(key, value.clone());
            continue;
        }
        match (value, defaults.get(key)) {
            (_, None) => out.insert(key, value.clone()),
            (Node::Table(sub), Some(Node::Table(sub_default))) => {
                let pruned = prune(sub, sub_default);
                if !pruned.is_empty() {
                    out.insert(key, Node::Table(pruned));
                }
            }
            (_, Some(default)) if value == default => {}
            _ => out.insert(key, value.clone()),
        }
    }
    out
}

/// Blank every secret field of the closure (reference §4.3) and every `***MASKED***` leaf,
/// pushing each dotted path that held something. Encrypted (`enc:`, `enc2:`) values and `op://`
/// references are blanked like any other non-empty value, since the field is a secret whatever
/// its spelling. A non-string value in a secret field is blanked too: it is never copied.
pub(crate) fn scrub_secrets(closure: &mut Table, required: &mut Vec<String>) {
    if let Some(Node::Table(families)) = closure.lookup_mut(&["providers", "models"]) {
        for_each_entry(families, "providers.models", &mut |path, entry| {
            blank_field(entry, path, "api_key", required);
            blank_map(entry, path, "extra_headers", required);
        });
    }
    if let Some(Node::Table(families)) = closure.lookup_mut(&["providers", "tts"]) {
        for_each_entry(families, "providers.tts", &mut |path, entry| {
            blank_field(entry, path, "api_key", required);
        });
    }
    if let Some(Node::Table(families)) = closure.lookup_mut(&["providers", "transcription"]) {
        for_each_entry(families, "providers.transcription", &mut |path, entry| {
            blank_field(entry, path, "api_key", required);
            // `local_whisper` is the family that has it; blanking it anywhere is harmless.
            blank_field(entry, path, "bearer_token", required);
        });
    }
    if let Some(Node::Array(servers)) = closure.lookup_mut(&["mcp", "servers"]) {
        for (index, server) in servers.iter_mut().enumerate() {
            let name = super::value::element_name(index, server);
            if let Node::Table(server) = server {
                let path = join_path("mcp.servers", &name);
                blank_map(server, &path, "env", required);
                blank_map(server, &path, "headers", required);
            }
        }
    }
    blank_masked("", closure, required);
    required.sort();
    required.dedup();
}

/// Call `f` on each `<family>.<alias>` table under a provider section.
fn for_each_entry(families: &mut Table, prefix: &str, f: &mut dyn FnMut(&str, &mut Table)) {
    for (family, entries) in families.iter_mut() {
        let Node::Table(entries) = entries else {
            continue;
        };
        for (alias, entry) in entries.iter_mut() {
            if let Node::Table(entry) = entry {
                f(&format!("{prefix}.{family}.{alias}"), entry);
            }
        }
    }
}

fn blank_field(table: &mut Table, prefix: &str, key: &str, required: &mut Vec<String>) {
    if let Some(node) = table.get_mut(key) {
        blank(node, &join_path(prefix, key), required);
    }
}

/// A secret map: every value is a secret; a map that is not a table is blanked whole.
fn blank_map(table: &mut Table, prefix: &str, key: &str, required: &mut Vec<String>) {
    let path = join_path(prefix, key);
    match table.get_mut(key) {
        Some(Node::Table(map)) => {
            for (k, v) in map.iter_mut() {
                blank(v, &join_path(&path, k), required);
            }
        }
        Some(node) => blank(node, &path, required),
        None => {}
    }
}

fn blank(node: &mut Node, path: &str, required: &mut Vec<String>) {
    match node {
        Node::Str(s) if s.is_empty() => {}
        _ => {
            *node = Node::Str(String::new());
            required.push(path.to_string());
        }
    }
}

fn blank_masked(prefix: &str, table: &mut Table, required: &mut Vec<String>) {
    for (key, node) in table.iter_mut() {
        let path = join_path(prefix, key);
        blank_masked_node(&path, node, required);
    }
}

fn blank_masked_node(path: &str, node: &mut Node, required: &mut Vec<String>) {
    match node {
        Node::Str(s) if s == MASKED_SECRET => {
            *node = Node::Str(String::new());
            required.push(path.to_string());
        }
        Node::Table(t) => blank_masked(path, t, required),
        Node::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                let name = super::value::element_name(index, item);
                blank_masked_node(&join_path(path, &name), item, required);
            }
        }
        _ => {}
    }
}

/// The first string leaf (in rendering order) that is `SecretStore` ciphertext, by dotted path.
pub(crate) fn find_ciphertext(root: &Table) -> Option<String> {
    let mut found = None;
    super::value::walk_strings("", &Node::Table(root.clone()), &mut |path, value| {
        if found.is_none() && CIPHERTEXT_PREFIXES.iter().any(|p| value.starts_with(p)) {
            found = Some(path.to_string());
        }
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Table {
        let doc: toml_edit::DocumentMut = text.parse().expect("valid toml");
        Table::from_toml_edit(doc.as_table())
    }

    #[test]
    fn prune_follows_the_rules() {
        let actual = parse(
            "schema_version = 1\nlevel = \"supervised\"\nworkspace_only = false\nextra = []\n[delegation_policy]\nmode = \"forbidden\"\n[env]\nK = \"v\"\n",
        );
        let mut defaults = risk_profile_defaults();
        defaults.insert("schema_version", Node::Int(1));
        defaults.insert("env", Node::Table(Table::new()));
        let pruned = prune(&actual, &defaults);
        assert_eq!(
            pruned.keys().collect::<Vec<_>>(),
            ["schema_version", "workspace_only", "extra", "env"]
        );
    }

    // reference §12.2 case 45
    #[test]
    fn find_ciphertext_names_the_path() {
        let root = parse("[providers]\napi_key = \"enc2:deadbeef\"\n");
        assert_eq!(find_ciphertext(&root).as_deref(), Some("providers.api_key"));
        assert_eq!(
            find_ciphertext(&parse("a = [\"x\", \"enc:1\"]\n")).as_deref(),
            Some("a.1")
        );
        assert_eq!(find_ciphertext(&parse("a = \"op://vault/item\"\n")), None);
    }

    #[test]
    fn scrub_blanks_every_secret_shape() {
        let mut closure = parse(
            r#"
[[mcp.servers]]
name = "gh"
env = { TOKEN = "t1", EMPTY = "" }
headers = "not-a-map"
[providers.models.openai.main]
api_key = "enc2:abc"
extra_headers = { X = "op://vault/x" }
[providers.tts.openai.v]
api_key = 42
[providers.transcription.local_whisper.w]
bearer_token = "b"
api_key = ""
[other]
v = "***MASKED***"
"#,
        );
        let mut required = Vec::new();
        scrub_secrets(&mut closure, &mut required);
        assert_eq!(
            required,
            [
                "mcp.servers.gh.env.TOKEN",
                "mcp.servers.gh.headers",
                "other.v",
                "providers.models.openai.main.api_key",
                "providers.models.openai.main.extra_headers.X",
                "providers.transcription.local_whisper.w.bearer_token",
                "providers.tts.openai.v.api_key",
            ]
        );
        let text = format!("{closure:?}");
        for secret in [
            "t1",
            "enc2:abc",
            "op://",
            "42",
            "\"b\"",
            "MASKED",
            "not-a-map",
        ] {
            assert!(!text.contains(secret), "{secret} survived: {text}");
        }
    }
}
