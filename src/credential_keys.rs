//! The credential-name rule: whether a key's own name says it holds a credential (`api_key`,
//! `auth_token`, `Authorization`, any field name ZeroClaw's schema marks `#[secret]`), and which
//! rule says so. One rule for every reader of key names: the config scrub and the diff's masking
//! (`agent`), and the `.env` line check of the credential detector (`credentials`). It reads
//! names only, never a value, and depends on no module of this crate.

/// One credential-name rule: how it is reported, and whether a lowercased key matches it.
type NameRule = (&'static str, fn(&str) -> bool);

/// The credential-name rules, in the order they are tried on the key's own name (never its
/// table's), normalized first by [`normalized_key`]: lowercase, with camelCase humps and `-`
/// as `_`, so `apiKey`, `x-api-key` and `accessToken` meet the same rules as `api_key` and
/// `access_token`.
const CREDENTIAL_NAME_RULES: &[NameRule] = &[
    ("key named `token`", |k| k == "token"),
    ("key ending in `_token`", |k| k.ends_with("_token")),
    ("key containing `secret`", |k| k.contains("secret")),
    ("key containing `password` or `passwd`", |k| {
        k.contains("password") || k.contains("passwd")
    }),
    ("key named `api_key`", |k| {
        k == "api_key" || k.ends_with("_api_key")
    }),
    ("key containing `private_key`", |k| {
        k.contains("private_key")
    }),
    ("key starting with `bearer`", |k| k.starts_with("bearer")),
    ("key named `authorization`", |k| k == "authorization"),
    ("key containing `credential`", |k| k.contains("credential")),
    ("key named `cookie`", |k| {
        k == "cookie" || k.ends_with("_cookie")
    }),
];

/// A key as the rules read it: `apiKey` -> `api_key`, `X-Api-Key` -> `x_api_key`,
/// `accessToken` -> `access_token`.
fn normalized_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    let mut previous_lower = false;
    for c in key.chars() {
        if c.is_ascii_uppercase() && previous_lower {
            out.push('_');
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        out.push(if c == '-' {
            '_'
        } else {
            c.to_ascii_lowercase()
        });
    }
    out
}

/// The rule for a key that ZeroClaw's schema marks `#[secret]` in some struct: secret wherever
/// it turns up (a gemini `oauth_client_id` pasted under another family, where that struct does
/// not mark it). The names come from ZeroClaw's own schema (`Config::secret_field_terminals`).
const SCHEMA_SECRET_NAME_RULE: &str = "name of a field ZeroClaw's schema marks secret";

fn schema_secret_names() -> &'static std::collections::HashSet<String> {
    static NAMES: std::sync::OnceLock<std::collections::HashSet<String>> =
        std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        zeroclaw_config::schema::Config::secret_field_terminals()
            .into_iter()
            .map(str::to_ascii_lowercase)
            .collect()
    })
}

/// Which credential-naming rule a key matches, if any.
pub(crate) fn credential_key_rule(key: &str) -> Option<&'static str> {
    let k = normalized_key(key);
    CREDENTIAL_NAME_RULES
        .iter()
        .find(|(_, matches)| matches(&k))
        .map(|(rule, _)| *rule)
        .or_else(|| {
            schema_secret_names()
                .contains(&k)
                .then_some(SCHEMA_SECRET_NAME_RULE)
        })
}
