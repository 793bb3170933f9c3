//! What this crate adds to ZeroClaw's schema, in one place: the credential-name scrub (a
//! defence in depth on top of ZeroClaw's own `#[secret]` masking, by the rule of
//! [`crate::credential_keys`]), the ciphertext check, and which provider families spawn a host
//! process. Everything else about the schema (secret
//! fields, defaults, validation, migration) comes from the pinned `zeroclaw-config` crate.

use super::value::{join_path, Node, Table};
use crate::credential_keys::credential_key_rule;

/// The ZeroClaw release whose `zeroclaw-config` crate this build links (pinned in Cargo.toml):
/// the schema that computes every closure, and the version recorded as the manifest's
/// `provenance.zeroclaw_version`.
pub const ZEROCLAW_VERSION: &str = "0.8.7";

/// `zeroclaw_config::migration::CURRENT_SCHEMA_VERSION` of [`ZEROCLAW_VERSION`]: the newest
/// config schema version this build reads. Older ones are migrated in memory by ZeroClaw's own
/// migration; newer ones are refused by name.
pub const SUPPORTED_SCHEMA_VERSION: u32 = zeroclaw_config::migration::CURRENT_SCHEMA_VERSION;

/// Prefixes of ZeroClaw `SecretStore` ciphertext.
pub(crate) const CIPHERTEXT_PREFIXES: &[&str] = &["enc:", "enc2:"];

/// Provider families that run a host process rather than call an endpoint, in ZeroClaw
/// [`ZEROCLAW_VERSION`]: `(section, family, the binary it runs when binary_path is unset)`.
pub(crate) const SUBPROCESS_PROVIDERS: &[(&str, &str, &str)] = &[
    ("models", "gemini_cli", "gemini"),
    ("models", "grok_cli", "grok"),
    ("models", "kilocli", "kilo"),
    ("tts", "edge", "edge-tts"),
];

/// Keys whose every value is a secret in ZeroClaw's schema (an MCP server's `env` and
/// `headers`, a provider's `extra_headers`), plus the credential-name rules: what a diff never
/// prints a value of. Display only; the scrub itself is ZeroClaw's masking plus the name rules.
pub(crate) fn hidden_in_display(key: &str) -> bool {
    credential_key_rule(key).is_some()
        || ["env", "headers", "extra_headers"].contains(&key.to_ascii_lowercase().as_str())
}

/// What the name scrub blanked: each dotted path with the rule that matched, in closure order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scrubbed {
    pub(crate) by_name: Vec<(String, &'static str)>,
}

/// The defence in depth: under a key whose name says credential, every non-empty string leaf
/// (in arrays and sub-tables too) is blanked; numbers, booleans and dates are never touched
/// (`max_tokens = 4096` stays). Runs on ZeroClaw's closure, after its own secret masking, so a
/// path it reports is one ZeroClaw would have carried as written.
pub(crate) fn scrub_by_name(closure: &mut Table) -> Scrubbed {
    let mut out = Scrubbed::default();
    blank_by_name("", closure, &mut out);
    out
}

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
        let scrubbed = scrub_by_name(&mut closure);
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
            let scrubbed = scrub_by_name(&mut whole);
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
