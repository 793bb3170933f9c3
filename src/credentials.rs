//! The credential-looking value detector: given a string (a config value or a line of a carried
//! file), says whether it looks like it holds a credential and why, never echoing the value.
//! Export reports what it finds by location (a dotted config path or a bundle file path) under
//! "values that look like credentials"; review will use the same detector.
//!
//! It is a heuristic on purpose and errs towards silence on ordinary text: it looks for a
//! credential-named query parameter in a URL, a password (or a token-like user) in a URL's
//! userinfo, an `Authorization`/`Bearer` value, a PEM private-key header, well-known token
//! prefixes, and long mixed-case alphanumeric runs with high entropy. Hex digests, paths and
//! words do not match.

use std::fmt;

/// Why a value looks like a credential.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialReason {
    /// A URL whose query carries a credential-named parameter (`?token=`, `api_key=`, ...).
    UrlQueryToken,
    /// A URL with a password, or a token as the user, in its userinfo.
    UrlUserinfo,
    /// A `Bearer` token or an `Authorization` header value.
    Bearer,
    /// A PEM private-key block header.
    PrivateKeyHeader,
    /// A token with a well-known issuer prefix (`ghp_`, `sk-`, `xoxb-`, `AKIA`, ...).
    KnownTokenPrefix,
    /// A long, high-entropy mixed-case alphanumeric run.
    HighEntropyToken,
}

impl CredentialReason {
    /// The human text of the reason.
    pub fn describe(self) -> &'static str {
        match self {
            CredentialReason::UrlQueryToken => "URL query token",
            CredentialReason::UrlUserinfo => "URL userinfo",
            CredentialReason::Bearer => "bearer token",
            CredentialReason::PrivateKeyHeader => "private key header",
            CredentialReason::KnownTokenPrefix => "well-known token prefix",
            CredentialReason::HighEntropyToken => "high-entropy token",
        }
    }
}

impl fmt::Display for CredentialReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// One finding: where, and why. The value itself is never kept.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CredentialFinding {
    /// A dotted config path (`mcp.servers.gh.url`) or a bundle file path with its line
    /// (`workspace/notes.md:12`).
    pub location: String,
    /// Why it looks like a credential.
    pub reason: CredentialReason,
}

/// Query parameter names that carry credentials (compared case-insensitively).
const QUERY_NAMES: &[&str] = &[
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth",
    "auth_token",
    "api_key",
    "apikey",
    "key",
    "secret",
    "client_secret",
    "password",
    "pass",
    "pwd",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "private_token",
    "sessionid",
    "session",
];

/// Prefixes issuers put on their tokens.
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xapp-",
    "sk-",
    "sk_live_",
    "rk_live_",
    "AKIA",
    "ASIA",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
];

/// The first reason `value` looks like a credential, if any.
pub fn detect(value: &str) -> Option<CredentialReason> {
    if value.contains("PRIVATE KEY-----") && value.contains("-----BEGIN") {
        return Some(CredentialReason::PrivateKeyHeader);
    }
    if let Some(reason) = detect_bearer(value) {
        return Some(reason);
    }
    for word in value.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>')) {
        if let Some(reason) = detect_url(word) {
            return Some(reason);
        }
    }
    if value
        .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
        .any(has_token_prefix)
    {
        return Some(CredentialReason::KnownTokenPrefix);
    }
    if value.split(|c: char| !is_token_char(c)).any(high_entropy) {
        return Some(CredentialReason::HighEntropyToken);
    }
    None
}

fn detect_bearer(value: &str) -> Option<CredentialReason> {
    let lower = value.to_ascii_lowercase();
    let after = |needle: &str| {
        lower
            .find(needle)
            .map(|at| value[at + needle.len()..].trim_start())
    };
    for needle in ["bearer ", "authorization:", "authorization="] {
        if let Some(rest) = after(needle) {
            let rest = rest
                .strip_prefix("Bearer ")
                .or_else(|| rest.strip_prefix("bearer "))
                .or_else(|| rest.strip_prefix("Basic "))
                .or_else(|| rest.strip_prefix("basic "))
                .unwrap_or(rest)
                .trim_start();
            let token: String = rest.chars().take_while(|c| is_token_char(*c)).collect();
            if token.len() >= 8 && !token.starts_with('$') {
                return Some(CredentialReason::Bearer);
            }
        }
    }
    None
}

fn detect_url(word: &str) -> Option<CredentialReason> {
    let (scheme, rest) = word.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    {
        return None;
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    if let Some((userinfo, _host)) = authority.rsplit_once('@') {
        match userinfo.split_once(':') {
            Some((_, password)) if !password.is_empty() && !password.starts_with('$') => {
                return Some(CredentialReason::UrlUserinfo)
            }
            None if has_token_prefix(userinfo) || high_entropy(userinfo) => {
                return Some(CredentialReason::UrlUserinfo)
            }
            _ => {}
        }
    }
    let query = rest[authority_end..].split_once('?')?.1;
    let query = query.split('#').next().unwrap_or(query);
    for pair in query.split('&') {
        let (name, val) = pair.split_once('=').unwrap_or((pair, ""));
        let name = name.to_ascii_lowercase();
        if !val.is_empty()
            && !val.starts_with('$')
            && !val.starts_with("%7B")
            && !val.starts_with('{')
            && QUERY_NAMES.contains(&name.as_str())
        {
            return Some(CredentialReason::UrlQueryToken);
        }
    }
    None
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '/' | '=')
}

fn has_token_prefix(word: &str) -> bool {
    TOKEN_PREFIXES.iter().any(|p| {
        word.strip_prefix(p).is_some_and(|rest| {
            rest.len() >= 16
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        })
    })
}

/// A run of at least 24 characters of `[A-Za-z0-9_-]` (plus base64's `+/=`) with upper and lower
/// case letters and digits, and at least 4.2 bits of entropy per character. Hex digests (one
/// case), paths (a `/` with text either side of it short of the run), and words fail it.
fn high_entropy(word: &str) -> bool {
    let word = word.trim_end_matches('=');
    if word.len() < 24 || word.len() > 512 {
        return false;
    }
    if word.contains("//") || word.split('/').count() > 2 || word.contains('.') {
        return false;
    }
    let upper = word.chars().filter(char::is_ascii_uppercase).count();
    let lower = word.chars().filter(char::is_ascii_lowercase).count();
    let digits = word.chars().filter(char::is_ascii_digit).count();
    if upper < 2 || lower < 2 || digits < 2 {
        return false;
    }
    let mut counts = [0u32; 128];
    for b in word.bytes() {
        counts[usize::from(b & 0x7f)] += 1;
    }
    let n = word.len() as f64;
    let entropy: f64 = counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum();
    entropy >= 4.2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_kind_of_credential() {
        let cases = [
            (
                "https://kb.example.com/export?format=md&token=abc123",
                CredentialReason::UrlQueryToken,
            ),
            (
                "https://api.example.com/v1?API_KEY=zzz",
                CredentialReason::UrlQueryToken,
            ),
            (
                "postgres://app:hunter2@db.internal:5432/app",
                CredentialReason::UrlUserinfo,
            ),
            (
                "https://ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5@github.com/o/r.git",
                CredentialReason::UrlUserinfo,
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1",
                CredentialReason::Bearer,
            ),
            ("--header=Bearer 1234567890abcdef", CredentialReason::Bearer),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----",
                CredentialReason::PrivateKeyHeader,
            ),
            (
                "export GH=ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5",
                CredentialReason::KnownTokenPrefix,
            ),
            (
                "key: Zx8Qw2Lm4Np6Rt8Vy0Bc3Df5Gh7Jk9",
                CredentialReason::HighEntropyToken,
            ),
        ];
        for (value, reason) in cases {
            assert_eq!(detect(value), Some(reason), "{value}");
        }
    }

    #[test]
    fn ordinary_values_are_not_credentials() {
        for value in [
            "https://docs.example.com/guide?page=2&lang=en",
            "ssh://git@github.com/zeroclaw-labs/zeroclaw.git",
            "https://example.com/search?token=${TOKEN}",
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
            "/usr/local/lib/node_modules/@modelcontextprotocol/server-filesystem",
            "npx -y @modelcontextprotocol/server-github",
            "The agent reads IDENTITY.md and SOUL.md before every turn.",
            "Authorization: Bearer $GITHUB_TOKEN",
            "max_tokens",
            "claude-sonnet-4-20250514",
            "http://host.docker.internal:11434",
            "15d28660ff5bdc29836252648126ce28de86b9df",
            "canopylabs/orpheus-v1-english",
        ] {
            assert_eq!(detect(value), None, "{value}");
        }
    }
}
