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
//!
//! Files too ([`scan_file`], for `review`): a file whose name or place says it holds
//! credentials ([`FileKind`]: `.env`, `*.pem`, `*.key`, `id_*` private keys, `.git/config`,
//! `.git-credentials`, cloud credential files, `.netrc`) is read with that kind's own line rule
//! (a credential-named `.env` assignment, a git remote URL with userinfo, a `.netrc` password,
//! an AWS secret key), then every line with [`detect`]; a file of such a kind with no line to
//! point at is reported once, by name. Never a value: a finding is a line number and a reason.

use std::fmt;
use std::sync::LazyLock;

use memchr::memmem::Finder;

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
    /// A `.env` file (a credential-named assignment, or the file itself).
    DotenvFile,
    /// A private key or certificate file by its name (`*.pem`, `*.key`, `id_rsa`, ...).
    KeyFile,
    /// A git remote URL with credentials (`.git/config`), or git's credential store.
    GitCredentials,
    /// A cloud provider's credentials file (`.aws/credentials`, gcloud, Azure, Docker, kube).
    CloudCredentials,
    /// A `.netrc` login with its password.
    Netrc,
}

impl CredentialReason {
    /// Every reason, in declaration order (a reason's code is its place here).
    pub const ALL: [CredentialReason; 11] = [
        CredentialReason::UrlQueryToken,
        CredentialReason::UrlUserinfo,
        CredentialReason::Bearer,
        CredentialReason::PrivateKeyHeader,
        CredentialReason::KnownTokenPrefix,
        CredentialReason::HighEntropyToken,
        CredentialReason::DotenvFile,
        CredentialReason::KeyFile,
        CredentialReason::GitCredentials,
        CredentialReason::CloudCredentials,
        CredentialReason::Netrc,
    ];

    /// The reason's one-byte code, as the credential scan's cached verdicts keep it.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The reason with code `code`.
    pub fn from_code(code: u8) -> Option<CredentialReason> {
        CredentialReason::ALL.get(usize::from(code)).copied()
    }

    /// The human text of the reason.
    pub fn describe(self) -> &'static str {
        match self {
            CredentialReason::UrlQueryToken => "URL query token",
            CredentialReason::UrlUserinfo => "URL userinfo",
            CredentialReason::Bearer => "bearer token",
            CredentialReason::PrivateKeyHeader => "private key header",
            CredentialReason::KnownTokenPrefix => "well-known token prefix",
            CredentialReason::HighEntropyToken => "high-entropy token",
            CredentialReason::DotenvFile => ".env file",
            CredentialReason::KeyFile => "key file (*.pem, *.key, id_*)",
            CredentialReason::GitCredentials => "git remote with credentials",
            CredentialReason::CloudCredentials => "cloud credentials file",
            CredentialReason::Netrc => ".netrc login",
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

/// The shortest word [`has_token_prefix`] can accept: the shortest prefix and 16 more. Most
/// words of prose and code are shorter and are turned away on their length alone.
const MIN_PREFIXED_TOKEN: usize = {
    let mut shortest = usize::MAX;
    let mut i = 0;
    while i < TOKEN_PREFIXES.len() {
        if TOKEN_PREFIXES[i].len() < shortest {
            shortest = TOKEN_PREFIXES[i].len();
        }
        i += 1;
    }
    shortest + 16
};

/// The first reason `value` looks like a credential, if any.
pub fn detect(value: &str) -> Option<CredentialReason> {
    // The export report runs this on every line of every carried text file, so the substring
    // checks below use searchers built once (`str::contains` sets one up per call: with the
    // lower-casing copy `detect_bearer` made, a sixth of a first export's CPU).
    static PEM_TAIL: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("PRIVATE KEY-----"));
    static PEM_HEAD: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("-----BEGIN"));
    static SCHEME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("://"));
    let bytes = value.as_bytes();
    if PEM_TAIL.find(bytes).is_some() && PEM_HEAD.find(bytes).is_some() {
        return Some(CredentialReason::PrivateKeyHeader);
    }
    if let Some(reason) = detect_bearer(value) {
        return Some(reason);
    }
    // Only a word with a scheme can be a URL (`detect_url` needs `://`): most lines have none,
    // and splitting every line into words for it was a fifth of a re-export's CPU (the export
    // report scans every carried text file).
    if SCHEME.find(bytes).is_some() {
        for word in value.split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>'))
        {
            if let Some(reason) = detect_url(word) {
                return Some(reason);
            }
        }
    }
    // Both checks below look at runs of token characters of at least MIN_PREFIXED_TOKEN
    // (high_entropy needs 24): a line without such a run (most prose and code) is done here,
    // in one pass over its bytes rather than two splits by `char`.
    if !has_token_run(value, MIN_PREFIXED_TOKEN) {
        return None;
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

/// Whether `value` holds a run of at least `len` [`is_token_char`] bytes (every token
/// character is ASCII, so bytes and characters agree); stops at the first such run.
fn has_token_run(value: &str, len: usize) -> bool {
    /// [`is_token_char`] of each byte, looked up rather than compared.
    static TOKEN_BYTE: [bool; 256] = {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 256 {
            table[b] = is_token_char(b as u8 as char);
            b += 1;
        }
        table
    };
    let mut run = 0;
    value.as_bytes().iter().any(|&b| {
        run = if TOKEN_BYTE[usize::from(b)] {
            run + 1
        } else {
            0
        };
        run >= len
    })
}

/// What a file's name or place says it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// `.env`, `.env.<stage>`, `<name>.env` (not `.env.example` and other templates).
    Dotenv,
    /// `*.pem`, `*.key`, `*.p12`, `*.pfx`, and SSH private keys `id_<type>` (not `*.pub`).
    Key,
    /// A repository's `.git/config`.
    GitConfig,
    /// git's plain-text credential store, `.git-credentials`.
    GitCredentialStore,
    /// `.aws/credentials`, gcloud's and Azure's token files, `.docker/config.json`,
    /// `.kube/config`.
    Cloud,
    /// `.netrc` (or `_netrc`).
    Netrc,
}

impl FileKind {
    /// The kind of the file at `path` (`/`-separated, as a bundle path), if any.
    pub fn of(path: &str) -> Option<FileKind> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let lower = name.to_ascii_lowercase();
        let ends = |suffix: &str| {
            path.ends_with(suffix) && {
                let at = path.len() - suffix.len();
                at == 0 || path.as_bytes()[at - 1] == b'/'
            }
        };
        const TEMPLATES: &[&str] = &["example", "sample", "template", "dist", "defaults"];
        if lower == ".env"
            || lower
                .strip_prefix(".env.")
                .is_some_and(|stage| !TEMPLATES.contains(&stage))
            || (lower.ends_with(".env") && lower.len() > 4)
        {
            return Some(FileKind::Dotenv);
        }
        if ends(".git/config") {
            return Some(FileKind::GitConfig);
        }
        if lower == ".git-credentials" {
            return Some(FileKind::GitCredentialStore);
        }
        if lower == ".netrc" || lower == "_netrc" {
            return Some(FileKind::Netrc);
        }
        if [
            ".aws/credentials",
            "gcloud/application_default_credentials.json",
            "gcloud/credentials.db",
            "gcloud/access_tokens.db",
            ".azure/accessTokens.json",
            ".azure/msal_token_cache.json",
            ".docker/config.json",
            ".kube/config",
        ]
        .iter()
        .any(|s| ends(s))
        {
            return Some(FileKind::Cloud);
        }
        let key_extension = [".pem", ".key", ".p12", ".pfx"]
            .iter()
            .any(|e| lower.ends_with(e) && lower.len() > e.len());
        let ssh_key = [
            "id_rsa",
            "id_dsa",
            "id_ecdsa",
            "id_ed25519",
            "id_ecdsa_sk",
            "id_ed25519_sk",
        ]
        .contains(&lower.as_str());
        if key_extension || ssh_key {
            return Some(FileKind::Key);
        }
        None
    }

    /// The reason a finding of this kind gives.
    pub fn reason(self) -> CredentialReason {
        match self {
            FileKind::Dotenv => CredentialReason::DotenvFile,
            FileKind::Key => CredentialReason::KeyFile,
            FileKind::GitConfig | FileKind::GitCredentialStore => CredentialReason::GitCredentials,
            FileKind::Cloud => CredentialReason::CloudCredentials,
            FileKind::Netrc => CredentialReason::Netrc,
        }
    }

    /// This kind's own rule for one line: whether it holds a credential.
    fn line_holds_credential(self, line: &str) -> bool {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') {
            return false;
        }
        match self {
            FileKind::Dotenv => {
                let line = line.strip_prefix("export ").unwrap_or(line);
                let Some((key, value)) = line.split_once('=') else {
                    return false;
                };
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                !value.is_empty()
                    && !value.starts_with('$')
                    && !value.starts_with('<')
                    && crate::credential_keys::credential_key_rule(key.trim()).is_some()
            }
            FileKind::GitConfig => line
                .split_once('=')
                .filter(|(k, _)| matches!(k.trim(), "url" | "pushurl" | "pushUrl"))
                .is_some_and(|(_, v)| detect_url(v.trim()) == Some(CredentialReason::UrlUserinfo)),
            FileKind::GitCredentialStore => detect_url(line) == Some(CredentialReason::UrlUserinfo),
            FileKind::Netrc => {
                let words: Vec<&str> = line.split_whitespace().collect();
                words
                    .windows(2)
                    .any(|w| matches!(w[0], "password" | "passwd") && !w[1].is_empty())
            }
            FileKind::Cloud => line.split_once(['=', ':']).is_some_and(|(k, v)| {
                let key = k.trim().trim_matches('"').to_ascii_lowercase();
                let v = v.trim().trim_matches(|c| c == '"' || c == ',');
                !v.is_empty()
                    && (matches!(
                        key.as_str(),
                        "aws_secret_access_key"
                            | "aws_session_token"
                            | "auth"
                            | "refresh_token"
                            | "client_secret"
                            | "private_key"
                            | "client-key-data"
                            | "token"
                    ))
            }),
            FileKind::Key => false,
        }
    }
}

/// One credential-looking place in a file: a line (1-based), or the whole file (`None`: its
/// name or place says it holds credentials, and no line of it could be pointed at).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileFinding {
    /// The line, when one is pointed at.
    pub line: Option<u64>,
    /// Why.
    pub reason: CredentialReason,
}

/// The credential-looking places of the file at bundle path `path`: its kind's line rule and
/// [`detect`] on each line of `text` (one finding per line; `None` when the file was not read:
/// binary, or over the caller's size cap), then, for a file whose kind says credentials and no
/// line was found, one finding for the whole file (not for `.git/config`, which holds
/// credentials only in a remote's URL).
pub fn scan_file(path: &str, text: Option<&str>) -> Vec<FileFinding> {
    let kind = FileKind::of(path);
    let mut found = Vec::new();
    // The body of a PEM block is one finding (its header), not one per base64 line.
    let mut in_pem_block = false;
    for (index, line) in text.into_iter().flat_map(str::lines).enumerate() {
        if in_pem_block {
            in_pem_block = !line.contains("-----END");
            continue;
        }
        let reason = match kind {
            Some(k) if k.line_holds_credential(line) => Some(k.reason()),
            _ => detect(line),
        };
        in_pem_block = reason == Some(CredentialReason::PrivateKeyHeader);
        if let Some(reason) = reason {
            found.push(FileFinding {
                line: Some(index as u64 + 1),
                reason,
            });
        }
    }
    // A repository's config is ordinary until a remote carries credentials: never named whole.
    if let Some(kind) = kind.filter(|k| *k != FileKind::GitConfig) {
        if found.is_empty() {
            found.push(FileFinding {
                line: None,
                reason: kind.reason(),
            });
        }
    }
    found
}

fn detect_bearer(value: &str) -> Option<CredentialReason> {
    let after = |needle: &str| {
        find_ignoring_case(value.as_bytes(), needle.as_bytes())
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

/// Where `needle` (lower-case ASCII) first occurs in `hay`, ignoring ASCII case: what
/// `hay.to_ascii_lowercase().find(needle)` says, without the copy (ASCII case changes no
/// byte's place, so the offset is one in `hay` too).
fn find_ignoring_case(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    memchr::memchr2_iter(first, first.to_ascii_uppercase(), hay).find(|&at| {
        hay.get(at + 1..at + needle.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(rest))
    })
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

const fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+' | '/' | '=')
}

fn has_token_prefix(word: &str) -> bool {
    if word.len() < MIN_PREFIXED_TOKEN {
        return false;
    }
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
    fn a_search_ignoring_case_finds_what_a_lowercased_copy_finds() {
        let hays = [
            "Authorization: Bearer abc",
            "x AUTHORIZATION=1 authorization: 2",
            "héllo BEARER tok",
            "bearer",
            "beare",
            "",
            "ÄÖÜ bEaReR ",
        ];
        for hay in hays {
            for needle in ["bearer ", "authorization:", "authorization=", "bearer"] {
                assert_eq!(
                    find_ignoring_case(hay.as_bytes(), needle.as_bytes()),
                    hay.to_ascii_lowercase().find(needle),
                    "{hay:?} {needle:?}"
                );
            }
        }
    }

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

    #[test]
    fn file_kinds_by_name_and_place() {
        for (path, kind) in [
            ("workspace/.env", Some(FileKind::Dotenv)),
            ("workspace/app/.env.production", Some(FileKind::Dotenv)),
            ("workspace/prod.env", Some(FileKind::Dotenv)),
            ("workspace/.env.example", None),
            ("workspace/certs/server.pem", Some(FileKind::Key)),
            ("skills/s/x/tls.key", Some(FileKind::Key)),
            ("workspace/.ssh/id_ed25519", Some(FileKind::Key)),
            ("workspace/.ssh/id_ed25519.pub", None),
            ("workspace/repo/.git/config", Some(FileKind::GitConfig)),
            ("workspace/repo/git/config", None),
            (
                "workspace/.git-credentials",
                Some(FileKind::GitCredentialStore),
            ),
            ("workspace/.aws/credentials", Some(FileKind::Cloud)),
            ("workspace/my.aws/credentials", None),
            ("workspace/.kube/config", Some(FileKind::Cloud)),
            ("workspace/.netrc", Some(FileKind::Netrc)),
            ("workspace/notes.md", None),
            ("workspace/keys.md", None),
            ("workspace/.key", None),
        ] {
            assert_eq!(FileKind::of(path), kind, "{path}");
        }
    }

    #[test]
    fn each_file_kind_points_at_its_line_and_never_keeps_the_value() {
        let cases: [(&str, &str, u64, CredentialReason); 7] = [
            (
                "workspace/.env",
                "# settings\nPORT=8080\nOPENAI_API_KEY=plainvalue123\n",
                3,
                CredentialReason::DotenvFile,
            ),
            (
                "workspace/k.pem",
                "-----BEGIN RSA PRIVATE KEY-----\nZx8Qw2Lm4Np6Rt8Vy0Bc3Df5Gh7Jk9Zx8Qw2Lm4Np6\n-----END RSA PRIVATE KEY-----\n",
                1,
                CredentialReason::PrivateKeyHeader,
            ),
            (
                "workspace/r/.git/config",
                "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://bob:pa55word@git.example.com/r.git\n",
                4,
                CredentialReason::GitCredentials,
            ),
            (
                "workspace/.aws/credentials",
                "[default]\naws_secret_access_key = abcdefgh\n",
                2,
                CredentialReason::CloudCredentials,
            ),
            (
                "workspace/.netrc",
                "machine api.example.com\n  login bob\n  password hunter2\n",
                3,
                CredentialReason::Netrc,
            ),
            (
                "workspace/notes.md",
                "intro\n\nkey: Zx8Qw2Lm4Np6Rt8Vy0Bc3Df5Gh7Jk9\n",
                3,
                CredentialReason::HighEntropyToken,
            ),
            (
                "workspace/.git-credentials",
                "https://bob:ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5@github.com\n",
                1,
                CredentialReason::GitCredentials,
            ),
        ];
        for (path, text, line, reason) in cases {
            let found = scan_file(path, Some(text));
            assert_eq!(
                found,
                vec![FileFinding {
                    line: Some(line),
                    reason
                }],
                "{path}"
            );
        }
    }

    #[test]
    fn a_credential_file_with_no_line_to_point_at_is_named_whole() {
        // A binary DER key (not read), an .env with placeholders only, a certificate.
        assert_eq!(
            scan_file("workspace/tls.key", None),
            vec![FileFinding {
                line: None,
                reason: CredentialReason::KeyFile
            }]
        );
        assert_eq!(
            scan_file("workspace/.env", Some("TOKEN=\nAPI_KEY=${KEY}\n")),
            vec![FileFinding {
                line: None,
                reason: CredentialReason::DotenvFile
            }]
        );
        // Ordinary text and ordinary files: nothing.
        assert!(scan_file("workspace/notes.md", Some("a plan\nmax_tokens = 4096\n")).is_empty());
        assert!(scan_file(
            "workspace/r/.git/config",
            Some("[remote \"o\"]\n\turl = ssh://git@github.com/o/r.git\n")
        )
        .is_empty());
        assert!(scan_file("workspace/photo.png", None).is_empty());
    }
}
