//! The `allowed_signers` file of OpenSSH and git (`man ssh-keygen`, ALLOWED SIGNERS): which
//! keys this host trusts, for which principals, namespaces and time window. This module parses
//! it and answers one question: which entries accept a given public key, for a namespace, now.
//!
//! Each line: `principals [options] keytype base64-key [comment]`; empty lines and lines
//! starting with `#` are ignored; fields are separated by spaces, double quotes protect spaces
//! and commas. Options (case-insensitive, comma-separated, values in double quotes as OpenSSH
//! requires): `namespaces="pattern-list"`, `valid-after="TIME"`, `valid-before="TIME"`
//! (`YYYYMMDD[Z]` or `YYYYMMDDHHMM[SS][Z]`, `UTC` for `Z`), and
//! `cert-authority`, which this tool does not support: such a line is left out with a notice
//! (zeroclaw-bundle verifies signatures made by plain keys, not certificates). Patterns follow
//! ssh_config(5) PATTERNS: `*`, `?`, and `!` negation in a comma-separated list.
//!
//! A time without `Z` is in the local time zone, which this tool does not read: such a bound is
//! applied only when the answer is the same in every time zone (more than 14 hours away);
//! within that margin the entry is refused with a message asking for a `Z` time.

use std::path::{Path, PathBuf};

use ssh_key::public::KeyData;
use ssh_key::PublicKey;

use super::SignError;

/// One usable line of an allowed_signers file.
#[derive(Clone, Debug)]
pub struct AllowedSigner {
    /// The line number (from 1), for messages.
    pub line: usize,
    /// The principals field as written (a pattern list: `alice@example.com,bob@*`).
    pub principals: String,
    /// `namespaces=` when given.
    pub namespaces: Option<String>,
    /// `valid-after=`, as written and as seconds since the epoch (see [`Bound`]).
    pub valid_after: Option<Bound>,
    /// `valid-before=`.
    pub valid_before: Option<Bound>,
    /// The key.
    pub key: KeyData,
}

/// A time bound: seconds since the epoch, exact (`Z`) or in an unknown local time zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    /// The text as written.
    pub text: String,
    /// The time read as UTC.
    pub secs: i64,
    /// Written with `Z` (UTC); otherwise local time, offset unknown (within -12h..+14h).
    pub utc: bool,
}

/// The most a local time zone's offset from UTC can be, either way (UTC-12 .. UTC+14).
const TZ_MARGIN: i64 = 14 * 3600;

/// The largest allowed_signers file read (about 300 000 ed25519 lines).
const FILE_CAP: u64 = 64 << 20;

/// A parsed allowed_signers file (git's and OpenSSH's format: principals, options, key).
///
/// ```
/// use std::path::Path;
/// let line = "alice@example.com namespaces=\"zeroclaw-bundle@snapshot\" ssh-ed25519 \
///     AAAAC3NzaC1lZDI1NTE5AAAAIGk/Gd2Bw5C0J3qHf3qYk9Kk1o3f0lS8kTzX5Q0sV3bG\n";
/// let allowed = zeroclaw_bundle::AllowedSigners::parse(Path::new("allowed_signers"), line);
/// assert!(allowed.is_ok());
/// ```
#[derive(Clone, Debug, Default)]
pub struct AllowedSigners {
    /// The file.
    pub path: PathBuf,
    /// Its usable entries.
    pub entries: Vec<AllowedSigner>,
    /// Lines left out, one sentence each (`cert-authority`).
    pub notes: Vec<String>,
}

/// Why an entry that lists a key does not accept it here and now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `namespaces=` does not match.
    Namespace(String),
    /// Before `valid-after`.
    NotYetValid(String),
    /// After `valid-before`.
    Expired(String),
    /// A local-time bound too close to now to decide without the time zone.
    AmbiguousTime(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Namespace(list) => {
                write!(
                    f,
                    "its allowed_signers entry limits it to namespaces={list}"
                )
            }
            Refusal::NotYetValid(t) => write!(f, "its allowed_signers entry is valid-after={t}"),
            Refusal::Expired(t) => {
                write!(f, "its allowed_signers entry expired (valid-before={t})")
            }
            Refusal::AmbiguousTime(t) => write!(
                f,
                "its allowed_signers entry's time {t} has no Z and is within 14 hours of now, \
                 so it depends on a local time zone this tool does not read (write it in UTC: \
                 {t}Z)"
            ),
        }
    }
}

impl AllowedSigners {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<AllowedSigners, SignError> {
        let text = crate::sys::read_small_file(path, FILE_CAP, "an allowed_signers file").map_err(
            |e| SignError::Io {
                op: "read the allowed signers file",
                path: path.to_path_buf(),
                source: e,
            },
        )?;
        let text = String::from_utf8(text).map_err(|_| SignError::AllowedSigners {
            path: path.to_path_buf(),
            line: 0,
            why: "is not UTF-8 text".into(),
        })?;
        AllowedSigners::parse(path, &text)
    }

    /// Parses `text` (the content of `path`, which names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<AllowedSigners, SignError> {
        let mut out = AllowedSigners {
            path: path.to_path_buf(),
            ..AllowedSigners::default()
        };
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |why: String| SignError::AllowedSigners {
                path: path.to_path_buf(),
                line: i + 1,
                why,
            };
            match parse_line(line).map_err(err)? {
                Parsed::Entry(mut e) => {
                    e.line = i + 1;
                    out.entries.push(*e);
                }
                Parsed::CertAuthority => out.notes.push(format!(
                    "{} line {}: cert-authority entries are not supported (zeroclaw-bundle \
                     verifies signatures made by plain keys, not certificates); left out",
                    path.display(),
                    i + 1
                )),
            }
        }
        Ok(out)
    }

    /// The entries that list `key`, each with why it does not accept a signature in
    /// `namespace` at `now` (seconds since the epoch), or `None` when it accepts it.
    pub fn lookup(
        &self,
        key: &KeyData,
        namespace: &str,
        now: i64,
    ) -> Vec<(&AllowedSigner, Option<Refusal>)> {
        self.entries
            .iter()
            .filter(|e| e.key == *key)
            .map(|e| (e, e.refusal(namespace, now)))
            .collect()
    }
}

impl AllowedSigner {
    /// Why this entry does not accept a signature in `namespace` at `now`, if it does not.
    pub fn refusal(&self, namespace: &str, now: i64) -> Option<Refusal> {
        if let Some(list) = &self.namespaces {
            if !match_pattern_list(namespace, list) {
                return Some(Refusal::Namespace(list.clone()));
            }
        }
        if let Some(b) = &self.valid_after {
            // Valid at or after the instant, which lies in secs-14h..secs+12h when local.
            let (early, late) = b.window();
            if now < early {
                return Some(Refusal::NotYetValid(b.text.clone()));
            }
            if now < late {
                return Some(Refusal::AmbiguousTime(b.text.clone()));
            }
        }
        if let Some(b) = &self.valid_before {
            let (early, late) = b.window();
            if now > late {
                return Some(Refusal::Expired(b.text.clone()));
            }
            if now > early {
                return Some(Refusal::AmbiguousTime(b.text.clone()));
            }
        }
        None
    }
}

impl Bound {
    /// The earliest and latest instant the bound can mean (equal for a UTC time).
    fn window(&self) -> (i64, i64) {
        if self.utc {
            (self.secs, self.secs)
        } else {
            // Local time = UTC + offset, offset in -12h..+14h: UTC = local - offset.
            (self.secs - TZ_MARGIN, self.secs + 12 * 3600)
        }
    }
}

enum Parsed {
    Entry(Box<AllowedSigner>),
    CertAuthority,
}

/// Splits a line into fields at unquoted whitespace; quotes are kept in the field.
fn fields(line: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut start = None;
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => {
                quoted = !quoted;
                start.get_or_insert(i);
            }
            c if c.is_whitespace() && !quoted => {
                if let Some(s) = start.take() {
                    out.push(&line[s..i]);
                }
            }
            _ => {
                start.get_or_insert(i);
            }
        }
    }
    if quoted {
        return Err("has an unterminated double quote".into());
    }
    if let Some(s) = start {
        out.push(&line[s..]);
    }
    Ok(out)
}

fn unquote(text: &str) -> String {
    text.replace('"', "")
}

/// Whether a field is a key type (so not options): what OpenSSH's key types start with.
fn is_key_type(field: &str) -> bool {
    ["ssh-", "ecdsa-", "sk-", "rsa-"]
        .iter()
        .any(|p| field.starts_with(p))
}

fn parse_line(line: &str) -> Result<Parsed, String> {
    let f = fields(line)?;
    let principals = f.first().map(|p| unquote(p)).unwrap_or_default();
    if principals.is_empty() {
        return Err("has no principals".into());
    }
    let (options, key_at) = match f.get(1) {
        Some(o) if !is_key_type(o) => (Some(*o), 2),
        Some(_) => (None, 1),
        None => return Err("has no key (principals [options] keytype base64-key)".into()),
    };
    let mut entry = AllowedSigner {
        line: 0,
        principals,
        namespaces: None,
        valid_after: None,
        valid_before: None,
        key: KeyData::Ed25519(ssh_key::public::Ed25519PublicKey([0; 32])),
    };
    let mut cert_authority = false;
    if let Some(options) = options {
        for opt in split_options(options)? {
            let (name, value) = match opt.split_once('=') {
                Some((n, v)) => (n.to_ascii_lowercase(), Some(v)),
                None => (opt.to_ascii_lowercase(), None),
            };
            let known = ["namespaces", "valid-after", "valid-before"].contains(&name.as_str());
            let value = match value {
                Some(v) if known => Some(quoted_value(&name, v)?),
                other => other.map(str::to_string),
            };
            match (name.as_str(), value) {
                ("cert-authority", None) => cert_authority = true,
                ("namespaces", Some(v)) => entry.namespaces = Some(v),
                ("valid-after", Some(v)) => entry.valid_after = Some(parse_time(&v)?),
                ("valid-before", Some(v)) => entry.valid_before = Some(parse_time(&v)?),
                _ => return Err(format!("has an unknown option {opt:?}")),
            }
        }
    }
    if let (Some(after), Some(before)) = (&entry.valid_after, &entry.valid_before) {
        // OpenSSH refuses such a line too.
        if before.secs <= after.secs {
            return Err(format!(
                "has valid-before={} that is not after valid-after={}",
                before.text, after.text
            ));
        }
    }
    let (Some(kind), Some(b64)) = (f.get(key_at), f.get(key_at + 1)) else {
        return Err("has no key (principals [options] keytype base64-key)".into());
    };
    if cert_authority {
        return Ok(Parsed::CertAuthority);
    }
    let key = PublicKey::from_openssh(&format!("{kind} {b64}"))
        .map_err(|e| format!("has a key that cannot be read ({kind}: {e})"))?;
    entry.key = key.key_data().clone();
    Ok(Parsed::Entry(Box::new(entry)))
}

/// The value of option `name=value`, which OpenSSH requires in double quotes
/// (`namespaces="git"`, `valid-before="20300101Z"`): `ssh-keygen -Y verify` refuses a line
/// whose value is not quoted, so it is refused here too rather than read differently.
fn quoted_value(name: &str, value: &str) -> Result<String, String> {
    match value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .filter(|v| !v.contains('"'))
    {
        Some(inner) => Ok(inner.to_string()),
        None => Err(format!(
            "has {name}={value} without double quotes; OpenSSH reads only {name}=\"...\" \
             (write {name}=\"{}\")",
            unquote(value)
        )),
    }
}

/// Splits an options field at commas outside double quotes.
fn split_options(options: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (i, c) in options.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&options[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&options[start..]);
    if out.iter().any(|o| o.is_empty()) {
        return Err(format!("has an empty option in {options:?}"));
    }
    Ok(out)
}

/// `YYYYMMDD[Z]` or `YYYYMMDDHHMM[SS][Z]`, read as UTC (see [`Bound`]); as OpenSSH, `UTC`
/// (any case) may stand for `Z`.
pub(crate) fn parse_time(text: &str) -> Result<Bound, String> {
    let bad = || format!("has a time {text:?} that is not YYYYMMDD[Z] or YYYYMMDDHHMM[SS][Z]");
    let upper = text.to_ascii_uppercase();
    let (digits, utc) = match (upper.strip_suffix("UTC"), upper.strip_suffix('Z')) {
        (Some(d), _) | (None, Some(d)) => (&text[..d.len()], true),
        (None, None) => (text, false),
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(bad());
    }
    let n = |r: std::ops::Range<usize>| -> i64 { digits[r].parse().unwrap_or(-1) };
    let (y, mo, d) = (n(0..4), n(4..6), n(6..8));
    let (h, mi, s) = match digits.len() {
        8 => (0, 0, 0),
        12 => (n(8..10), n(10..12), 0),
        _ => (n(8..10), n(10..12), n(12..14)),
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    Ok(Bound {
        text: text.to_string(),
        secs: days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s,
        utc,
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// ssh_config(5) PATTERNS: a comma-separated list of patterns with `*` and `?`; a pattern
/// starting with `!` that matches makes the whole list fail; otherwise any match succeeds.
pub fn match_pattern_list(text: &str, list: &str) -> bool {
    let mut matched = false;
    for pattern in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match pattern.strip_prefix('!') {
            Some(neg) if glob(text.as_bytes(), neg.as_bytes()) => return false,
            Some(_) => {}
            None => matched |= glob(text.as_bytes(), pattern.as_bytes()),
        }
    }
    matched
}

fn glob(text: &[u8], pattern: &[u8]) -> bool {
    match (pattern.first(), text.first()) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some(b'*'), _) => {
            glob(text, &pattern[1..]) || (!text.is_empty() && glob(&text[1..], pattern))
        }
        (Some(b'?'), Some(_)) => glob(&text[1..], &pattern[1..]),
        (Some(p), Some(t)) if p == t => glob(&text[1..], &pattern[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICZrGQ/wo3NTm/Sray2FiyF73DnVjo2md3C9I1p5uEwl";

    fn parse(text: &str) -> Result<AllowedSigners, SignError> {
        AllowedSigners::parse(Path::new("allowed_signers"), text)
    }

    #[test]
    fn man_page_lines_parse() {
        // The shapes of `man ssh-keygen`, ALLOWED SIGNERS (with a real key).
        let text = format!(
            "# Comments allowed at start of line\n\
             user1@example.com,user2@example.com {ED}\n\
             # A certificate authority, trusted for all principals in a domain.\n\
             *@example.com cert-authority {ED}\n\
             # A key that is accepted only for file signing.\n\
             user2@example.com namespaces=\"file\" {ED}\n\
             \n\
             \"quoted principal\" valid-after=\"20200101\",valid-before=\"20991231235959Z\" {ED} a comment\n"
        );
        let a = parse(&text).unwrap();
        assert_eq!(a.entries.len(), 3, "{a:?}");
        assert_eq!(a.notes.len(), 1, "cert-authority is left out with a notice");
        assert!(a.notes[0].contains("line 4"));
        assert_eq!(
            a.entries[0].principals,
            "user1@example.com,user2@example.com"
        );
        assert_eq!(a.entries[0].line, 2);
        assert_eq!(a.entries[1].namespaces.as_deref(), Some("file"));
        assert_eq!(a.entries[2].principals, "quoted principal");
        assert!(!a.entries[2].valid_after.as_ref().unwrap().utc);
        assert!(a.entries[2].valid_before.as_ref().unwrap().utc);
        let key = a.entries[0].key.clone();
        assert_eq!(
            a.lookup(&key, "zeroclaw-bundle@snapshot", 1_800_000_000)
                .len(),
            3
        );
    }

    #[test]
    fn bad_lines_name_their_line() {
        for (text, why) in [
            ("alice@example.com", "no key"),
            (&format!("alice bogus=1 {ED}") as &str, "unknown option"),
            ("alice ssh-ed25519 AAAAnotbase64!", "cannot be read"),
            (&format!("alice valid-before=\"2020\" {ED}"), "YYYYMMDD"),
            // Unquoted values: `ssh-keygen -Y verify` refuses the line.
            (
                &format!("alice valid-before=20300101Z {ED}"),
                "without double quotes",
            ),
            (
                &format!("alice namespaces=file {ED}"),
                "without double quotes",
            ),
            (
                &format!("alice valid-after=\"20300101Z\",valid-before=\"20200101Z\" {ED}"),
                "not after valid-after",
            ),
            (&format!("alice namespaces=\"a {ED}"), "unterminated"),
        ] {
            let e = parse(&format!("# c\n{text}\n")).unwrap_err().to_string();
            assert!(e.contains("line 2") && e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn namespaces_and_time_windows() {
        let a = parse(&format!(
            "a namespaces=\"zeroclaw-bundle@*,!*@test\" {ED}\n\
             b valid-before=\"20200101Z\" {ED}\n\
             c valid-after=\"20990101Z\" {ED}\n\
             d valid-before=\"20300101\" {ED}\n"
        ))
        .unwrap();
        let e = &a.entries;
        let now = parse_time("20250601Z").unwrap().secs;
        assert_eq!(e[0].refusal("zeroclaw-bundle@snapshot", now), None);
        assert!(matches!(
            e[0].refusal("git", now),
            Some(Refusal::Namespace(_))
        ));
        assert!(matches!(
            e[0].refusal("zeroclaw-bundle@test", now),
            Some(Refusal::Namespace(_))
        ));
        assert_eq!(
            e[1].refusal("x", now),
            Some(Refusal::Expired("20200101Z".into()))
        );
        assert_eq!(
            e[2].refusal("x", now),
            Some(Refusal::NotYetValid("20990101Z".into()))
        );
        // A local time far from now decides; one within 14 hours does not.
        assert_eq!(e[3].refusal("x", now), None);
        let close = parse_time("20300101Z").unwrap().secs - 3600;
        assert!(matches!(
            e[3].refusal("x", close),
            Some(Refusal::AmbiguousTime(_))
        ));
        assert!(matches!(
            e[3].refusal("x", close + 2 * 86400),
            Some(Refusal::Expired(_))
        ));
    }

    #[test]
    fn times_and_patterns() {
        assert_eq!(parse_time("19700101Z").unwrap().secs, 0);
        assert_eq!(
            parse_time("20300101utc").unwrap().secs,
            parse_time("20300101z").unwrap().secs
        );
        assert!(parse_time("20300101UTC").unwrap().utc);
        assert_eq!(parse_time("20000301Z").unwrap().secs, 951_868_800);
        assert_eq!(parse_time("202403151230Z").unwrap().secs, 1_710_505_800);
        assert_eq!(parse_time("20240315123005Z").unwrap().secs, 1_710_505_805);
        assert!(parse_time("20241301Z").is_err());
        assert!(parse_time("2024031Z").is_err());
        assert!(match_pattern_list("alice@example.com", "*@example.com"));
        assert!(match_pattern_list("file", "git,file"));
        assert!(!match_pattern_list("file", "git"));
        assert!(!match_pattern_list("a@b", "*,!a@*"));
        assert!(match_pattern_list("abc", "a?c"));
        assert!(!match_pattern_list("abbc", "a?c"));
    }
}
