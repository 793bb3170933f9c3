//! What this crate knows of ZeroClaw's config schema without linking it, in one place: the
//! schema version it reads, the secret fields it scrubs, the defaults the closure is pruned
//! against, and which provider families spawn a host process.
//!
//! Every fact here was read from ZeroClaw's schema source at commit
//! [`ZEROCLAW_SCHEMA_COMMIT`] (zeroclaw-labs/zeroclaw, `crates/zeroclaw-config/src/`:
//! `schema.rs`, `providers.rs`, `scattered_types.rs`, `multi_agent.rs`, `policy.rs`,
//! `migration.rs`; the `#[secret]` attribute of `zeroclaw-macros`). The secret table was derived
//! by walking every struct the closure can reach (the agent entry, risk and runtime profiles,
//! skill/knowledge/mcp bundles, `mcp.servers`, and every provider family slot of
//! `providers.models`, `providers.tts` and `providers.transcription`, following `#[serde(flatten)]`
//! bases) and listing each field marked `#[secret]`; none of the agent, profile or bundle structs
//! has one. When ZeroClaw's schema moves, re-derive the table from the new commit and bump the
//! constant.
//!
//! Two rules keep the fragment meaning what the source meant:
//! - Pruning uses the real `Default` impls, and only for keys whose absence reads back as that
//!   default. Keys that bound what an agent may do are never pruned: a risk profile is kept
//!   whole (allowlists, forbidden paths, approval and sandbox settings, roots, delegation: every
//!   key of it bounds the agent, and its defaults are not empty, so an explicit `[]` pruned away
//!   would read back as ZeroClaw's 23-command allowlist), a runtime profile too (budgets and
//!   delegation depth), and so are the agent's `workspace.unrestricted_filesystem` and
//!   `acp_enable_mcp`. Provider tables are never pruned: a dropped `uri` would silently re-point
//!   an agent at the family's built-in endpoint.
//! - Scrubbing is table-driven from the schema, plus a defence in depth: a non-empty string under
//!   a key whose name says credential is scrubbed in any carried table, and reported with the
//!   rule that matched.

use super::value::{join_path, Node, Table};

/// The ZeroClaw commit whose schema source every fact in this module was read from.
pub const ZEROCLAW_SCHEMA_COMMIT: &str = "15d28660ff5bdc29836252648126ce28de86b9df";

/// `migration::CURRENT_SCHEMA_VERSION` at [`ZEROCLAW_SCHEMA_COMMIT`]: the only config schema
/// version this crate reads. A config without `schema_version` is version 1 (`detect_version`).
pub const SUPPORTED_SCHEMA_VERSION: i64 = 3;

/// The placeholder ZeroClaw's own masking writes; any occurrence is blanked and listed.
pub(crate) const MASKED_SECRET: &str = "***MASKED***";

/// Prefixes of ZeroClaw `SecretStore` ciphertext.
pub(crate) const CIPHERTEXT_PREFIXES: &[&str] = &["enc:", "enc2:"];

/// Whether a secret field holds one value or a map whose every value is a secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Scalar,
    Map,
}

/// One `#[secret]` field of a provider family struct.
struct SecretField {
    /// `models`, `tts` or `transcription` (under `providers.`).
    section: &'static str,
    /// The family slot; `None` for a field of the shared base every family of the section
    /// flattens in (also applied to family names this commit does not know).
    family: Option<&'static str>,
    field: &'static str,
    shape: Shape,
}

const fn base(section: &'static str, field: &'static str, shape: Shape) -> SecretField {
    SecretField {
        section,
        family: None,
        field,
        shape,
    }
}

const fn family(section: &'static str, family: &'static str, field: &'static str) -> SecretField {
    SecretField {
        section,
        family: Some(family),
        field,
        shape: Shape::Scalar,
    }
}

/// Every `#[secret]` field of the provider structs at [`ZEROCLAW_SCHEMA_COMMIT`].
const PROVIDER_SECRETS: &[SecretField] = &[
    // ModelProviderConfig, flattened into every `*ModelProviderConfig`.
    base("models", "api_key", Shape::Scalar),
    base("models", "extra_headers", Shape::Map),
    // Family-specific `#[secret(category = "model_provider")]` fields.
    family("models", "qwen", "oauth_refresh_token"),
    family("models", "minimax", "oauth_refresh_token"),
    family("models", "gemini", "oauth_client_id"),
    family("models", "gemini", "oauth_client_secret"),
    // TtsProviderConfig, flattened into every TTS family.
    base("tts", "api_key", Shape::Scalar),
    // TranscriptionProviderConfig (every cloud family); local_whisper has its own struct.
    base("transcription", "api_key", Shape::Scalar),
    family("transcription", "local_whisper", "bearer_token"),
];

/// `#[secret]` maps of `McpServerConfig`.
const MCP_SERVER_SECRETS: &[&str] = &["env", "headers"];

/// Provider families that run a host process rather than call an endpoint, at
/// [`ZEROCLAW_SCHEMA_COMMIT`]: `(section, family, the binary it runs when binary_path is unset)`.
pub(crate) const SUBPROCESS_PROVIDERS: &[(&str, &str, &str)] = &[
    ("models", "gemini_cli", "gemini"),
    ("models", "grok_cli", "grok"),
    ("models", "kilocli", "kilo"),
    ("tts", "edge", "edge-tts"),
];

/// The name-based defence in depth: which credential-naming rule a key matches, if any
/// (case-insensitive). Only the key's own name counts, never its table's.
pub(crate) fn credential_key_rule(key: &str) -> Option<&'static str> {
    let k = key.to_ascii_lowercase();
    if PROVIDER_SECRETS.iter().any(|f| f.field == k) || MCP_SERVER_SECRETS.contains(&k.as_str()) {
        // A field the schema marks secret in one struct is secret wherever it turns up (a
        // gemini `oauth_client_id` pasted under another family, `headers` under a profile).
        Some("name of a field the schema marks secret")
    } else if k == "token" {
        Some("key named `token`")
    } else if k.ends_with("_token") {
        Some("key ending in `_token`")
    } else if k.contains("secret") {
        Some("key containing `secret`")
    } else if k.contains("password") {
        Some("key containing `password`")
    } else if k == "api_key" || k.ends_with("_api_key") {
        Some("key named `api_key`")
    } else if k.contains("private_key") {
        Some("key containing `private_key`")
    } else if k.starts_with("bearer") {
        Some("key starting with `bearer`")
    } else if k == "authorization" {
        Some("key named `authorization`")
    } else {
        None
    }
}

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

/// `AliasedAgentConfig::default()`, minus the keys that bound the agent (never pruned):
/// `workspace.unrestricted_filesystem`, `acp_enable_mcp`, `delegate_same_risk_profile` (forced
/// to `false` anyway). `channels`, `cron_jobs` and `delegates` are removed before pruning.
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
        (
            "identity",
            Node::Table(table(vec![("format", s("openclaw"))])),
        ),
        // Present so an emptied `workspace` table goes; its bounding
        // `unrestricted_filesystem` is absent here, so it is always kept.
        ("workspace", Node::Table(Table::new())),
    ])
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

/// What the scrub blanked: every dotted path (sorted, deduplicated: `required_secrets`), and
/// the paths only the name-based defence in depth caught, with the rule that matched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scrubbed {
    pub(crate) required: Vec<String>,
    pub(crate) by_name: Vec<(String, &'static str)>,
}

/// Blank every secret field of the closure and every `***MASKED***` leaf, then every non-empty
/// string under a credential-named key, recording each dotted path that held something.
/// Encrypted (`enc:`, `enc2:`) values and `op://` references are blanked like any other
/// non-empty value, since the field is a secret whatever its spelling. A non-string value in a
/// schema secret field is blanked too: it is never copied.
pub(crate) fn scrub_secrets(closure: &mut Table) -> Scrubbed {
    let mut out = Scrubbed::default();
    for section in ["models", "tts", "transcription"] {
        let Some(Node::Table(families)) = closure.lookup_mut(&["providers", section]) else {
            continue;
        };
        for (family, entries) in families.iter_mut() {
            let Node::Table(entries) = entries else {
                continue;
            };
            let fields: Vec<&SecretField> = PROVIDER_SECRETS
                .iter()
                .filter(|f| f.section == section && f.family.is_none_or(|x| x == family))
                .collect();
            for (alias, entry) in entries.iter_mut() {
                let Node::Table(entry) = entry else {
                    continue;
                };
                let path = format!("providers.{section}.{family}.{alias}");
                for f in &fields {
                    match f.shape {
                        Shape::Scalar => blank_field(entry, &path, f.field, &mut out.required),
                        Shape::Map => blank_map(entry, &path, f.field, &mut out.required),
                    }
                }
            }
        }
    }
    if let Some(Node::Array(servers)) = closure.lookup_mut(&["mcp", "servers"]) {
        for (index, server) in servers.iter_mut().enumerate() {
            let name = super::value::element_name(index, server);
            if let Node::Table(server) = server {
                let path = join_path("mcp.servers", &name);
                for field in MCP_SERVER_SECRETS {
                    blank_map(server, &path, field, &mut out.required);
                }
            }
        }
    }
    blank_masked("", closure, &mut out.required);
    blank_by_name("", closure, &mut out);
    out.required.sort();
    out.required.dedup();
    out
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

/// The defence in depth: under a key whose name says credential, every non-empty string leaf
/// (in arrays and sub-tables too) is blanked; numbers, booleans and dates are never touched
/// (`max_tokens = 4096` stays).
fn blank_by_name(prefix: &str, table: &mut Table, out: &mut Scrubbed) {
    for (key, node) in table.iter_mut() {
        let path = join_path(prefix, key);
        match (credential_key_rule(key), node) {
            (Some(rule), node) => blank_strings(&path, node, rule, out),
            (None, Node::Table(t)) => blank_by_name(&path, t, out),
            (None, Node::Array(items)) => {
                for (index, item) in items.iter_mut().enumerate() {
                    let name = super::value::element_name(index, item);
                    if let Node::Table(t) = item {
                        blank_by_name(&join_path(&path, &name), t, out);
                    }
                }
            }
            (None, _) => {}
        }
    }
}

fn blank_strings(path: &str, node: &mut Node, rule: &'static str, out: &mut Scrubbed) {
    match node {
        Node::Str(s) if !s.is_empty() => {
            *node = Node::Str(String::new());
            out.required.push(path.to_string());
            out.by_name.push((path.to_string(), rule));
        }
        Node::Table(t) => {
            for (key, child) in t.iter_mut() {
                blank_strings(&join_path(path, key), child, rule, out);
            }
        }
        Node::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                let name = super::value::element_name(index, item);
                blank_strings(&join_path(path, &name), item, rule, out);
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
        let mut defaults = parse(
            "level = \"supervised\"\nworkspace_only = true\nextra = [\"x\"]\n[delegation_policy]\nmode = \"forbidden\"\n",
        );
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
        let scrubbed = scrub_secrets(&mut closure);
        assert!(scrubbed.by_name.is_empty(), "{:?}", scrubbed.by_name);
        assert_eq!(
            scrubbed.required,
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

    // The family-specific `#[secret(category = "model_provider")]` fields (issue: they travelled
    // in clear) are scrubbed by the schema table on their family; pasted under another family,
    // the name rule still takes them (and says so).
    #[test]
    fn scrub_covers_family_specific_secret_fields() {
        let mut closure = parse(
            r#"
[providers.models.qwen.q]
oauth_refresh_token = "qwen-refresh"
[providers.models.minimax.m]
oauth_refresh_token = "op://vault/minimax"
[providers.models.gemini.g]
oauth_client_id = "gem-id"
oauth_client_secret = "enc2:gem"
model = "gemini-2.5-pro"
[providers.models.openai.o]
oauth_client_id = "pasted-under-openai"
"#,
        );
        let scrubbed = scrub_secrets(&mut closure);
        assert_eq!(
            scrubbed.required,
            [
                "providers.models.gemini.g.oauth_client_id",
                "providers.models.gemini.g.oauth_client_secret",
                "providers.models.minimax.m.oauth_refresh_token",
                "providers.models.openai.o.oauth_client_id",
                "providers.models.qwen.q.oauth_refresh_token",
            ]
        );
        assert_eq!(
            scrubbed.by_name,
            [(
                "providers.models.openai.o.oauth_client_id".to_string(),
                "name of a field the schema marks secret"
            )]
        );
        let text = format!("{closure:?}");
        for secret in [
            "qwen-refresh",
            "op://",
            "gem-id",
            "enc2:gem",
            "pasted-under-openai",
        ] {
            assert!(!text.contains(secret), "{secret} survived: {text}");
        }
        assert!(text.contains("gemini-2.5-pro"));
    }

    #[test]
    fn credential_names_are_scrubbed_by_rule_but_numbers_and_booleans_stay() {
        let mut closure = parse(
            r#"
[runtime_profiles.p]
max_tokens = 4096
auth_token = "tok-1"
use_token = true
[runtime_profiles.p.thinking]
client_secret = "s-2"
Authorization = ["Bearer b-3", ""]
tokenizer = "cl100k"
[knowledge_bundles.k]
sources = ["https://example.com/?token=x"]
"#,
        );
        let scrubbed = scrub_secrets(&mut closure);
        assert_eq!(
            scrubbed.by_name,
            [
                (
                    "runtime_profiles.p.auth_token".to_string(),
                    "key ending in `_token`"
                ),
                (
                    "runtime_profiles.p.thinking.client_secret".to_string(),
                    "key containing `secret`"
                ),
                (
                    "runtime_profiles.p.thinking.Authorization.0".to_string(),
                    "key named `authorization`"
                ),
            ]
        );
        let text = format!("{closure:?}");
        for secret in ["tok-1", "s-2", "b-3"] {
            assert!(!text.contains(secret), "{secret} survived: {text}");
        }
        for kept in ["4096", "Bool(true)", "cl100k", "token=x"] {
            assert!(text.contains(kept), "{kept} lost: {text}");
        }
    }

    /// Every field name ZeroClaw marks `#[secret]` anywhere in its config schema at
    /// [`ZEROCLAW_SCHEMA_COMMIT`] (all structs, not only those the closure reaches).
    const ZEROCLAW_SECRET_FIELD_NAMES: &[&str] = &[
        "access_token",
        "amqp_url",
        "api_key",
        "api_keys",
        "api_token",
        "app_password",
        "app_secret",
        "app_token",
        "auth_header",
        "auth_token",
        "bearer_token",
        "bocha_api_key",
        "bot_token",
        "brave_api_key",
        "channel_access_token",
        "channel_secret",
        "client_cert",
        "client_key",
        "client_secret",
        "config",
        "db_url",
        "embedding_api_key",
        "encrypt_key",
        "env",
        "extra_headers",
        "headers",
        "jina_api_key",
        "nickserv_password",
        "oauth_client_id",
        "oauth_client_secret",
        "oauth_refresh_token",
        "oauth_token",
        "otel_headers",
        "paired_tokens",
        "password",
        "private_key",
        "recovery_key",
        "refresh_token",
        "sasl_password",
        "secret",
        "secrets",
        "server_password",
        "shared_secret",
        "signing_secret",
        "smtp_password",
        "tavily_api_key",
        "token",
        "verification_token",
        "verify_token",
        "webhook_key",
        "webhook_secret",
    ];

    /// The name rule never takes a non-secret value from ZeroClaw's own example configs (the
    /// files of tests/zeroclaw, copied at the pinned commit, v1 ones included): every string
    /// it would blank sits under a field name the real schema marks secret.
    #[test]
    fn name_rule_takes_nothing_but_secrets_from_real_configs() {
        let configs = [
            include_str!("../../tests/zeroclaw/dev-config.template.toml"),
            include_str!("../../tests/zeroclaw/dev-config.harness-test.toml"),
            include_str!("../../tests/zeroclaw/docs-providers-catalog-grok-cli.toml"),
            include_str!("../../tests/zeroclaw/docs-getting-started-multi-model-setup.toml"),
            include_str!("../../tests/zeroclaw/docs-tools-mcp.toml"),
            include_str!("../../tests/zeroclaw/config-fixtures-v1.toml"),
            include_str!("../../tests/zeroclaw/demo-zeroclaw.toml.example"),
            include_str!("../../tests/zeroclaw/scripts-rpi-config.toml"),
        ];
        let mut hits = 0;
        for text in configs {
            let mut whole = parse(text);
            let scrubbed = scrub_secrets(&mut whole);
            for (path, _rule) in &scrubbed.by_name {
                // The key the rule matched is one segment of the path (a map's values sit
                // below it).
                assert!(
                    path.split('.')
                        .any(|segment| ZEROCLAW_SECRET_FIELD_NAMES.contains(&segment)),
                    "the name rule would scrub {path}, which is not under a secret field"
                );
                hits += 1;
            }
        }
        // The v1 fixture is full of channel tokens: the rule is exercised, not vacuous.
        assert!(hits >= 25, "only {hits} hits");
    }
}
