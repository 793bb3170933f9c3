//! Snapshot records: the object that names a root tree and says where it came from.
//!
//! Encoding: the 5 bytes `ZCBS` + version (1), a newline, then one JSON document with fixed
//! field order. The magic lets `reindex` and `gc` recognise a record from its first bytes.
//! A record is written only after every object it reaches is durable (see the crate doc).
//!
//! Records come from other hosts too, so [`Snapshot::decode`] validates every field, not just
//! the syntax: the name grammar ([`name_problem`]), agent aliases (non-empty, no `/`, nothing
//! invisible), labels and skipped paths (nothing invisible: they are stored escaped), and the
//! creation time (0 to `i64::MAX` ns, 1970 to 2262: what a writer can produce). Sources and
//! hosts are free text, escaped whenever printed.

use serde::{Deserialize, Serialize};

use crate::error::{DecodeError, StoreError};
use crate::escape::is_hidden;
use crate::id::ObjectId;

/// Why `name` cannot be a snapshot name, or `None` when it can. A name must not be mistaken
/// for another reference form (an id prefix, `agent/<alias>`) and must print as itself.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("it is empty")
    } else if name.starts_with("agent/") {
        Some("`agent/<alias>` is reserved for an agent's latest snapshot")
    } else if name.chars().any(|c| c.is_whitespace() || is_hidden(c)) {
        Some("it contains whitespace or a control character")
    } else if name.len() >= 8 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
        Some("it looks like a snapshot id prefix")
    } else if name.len() > 255 {
        Some("it is longer than 255 bytes")
    } else {
        None
    }
}

/// Checks a `--name`: it must not be mistaken for an id prefix or an `agent/` ref, nor
/// contain whitespace or control characters (see [`name_problem`]).
pub fn validate_name(name: &str) -> Result<(), StoreError> {
    match name_problem(name) {
        Some(why) => Err(StoreError::BadName(name.to_string(), why)),
        None => Ok(()),
    }
}

/// How far in the future a received record's creation time may lie (clock skew between
/// hosts).
const FUTURE_SKEW_NS: i128 = 24 * 3600 * 1_000_000_000;

/// True when `snapshot` claims a creation time more than [`FUTURE_SKEW_NS`] ahead of this
/// host's clock: it would stay `agent/<alias>` over every later local export.
pub(crate) fn future_dated(snapshot: &Snapshot) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0);
    snapshot.created_unix_ns > now.saturating_add(FUTURE_SKEW_NS)
}

const MAGIC: &[u8; 4] = b"ZCBS";
const VERSION: u8 = 1;

/// The first bytes of every snapshot record (magic + version).
pub const RECORD_PREFIX: &[u8; 5] = b"ZCBS\x01";

/// What was captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotKind {
    /// Any directory (`snapshot --dir`).
    Tree,
    /// A ZeroClaw agent bundle (manifest, config closure, workspace, skills).
    AgentBundle,
}

/// Counts of one captured tree (a workspace, a skill bundle, or a plain directory).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// What this tree is, e.g. `workspace`, `skills/web`, or `.` for a plain directory.
    pub label: String,
    /// Regular files carried.
    pub files: u64,
    /// Bytes carried.
    pub bytes: u64,
    /// Symbolic links skipped.
    pub symlinks: u64,
    /// Sockets, FIFOs and devices skipped.
    pub special: u64,
    /// Regular files with more than one link, skipped.
    pub hard_links: u64,
    /// Entries replaced between classification and open, skipped.
    pub replaced: u64,
    /// Directories that are the store being written to, never entered (a store inside the
    /// captured tree holds the install's raw config as objects). Absent from records that
    /// have none, so older records and their ids are unchanged.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub store: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Tally {
    /// Entries skipped, all reasons together.
    pub fn skipped(&self) -> u64 {
        self.symlinks + self.special + self.hard_links + self.replaced + self.store
    }
}

/// One skipped entry, for the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The path inside the bundle, escaped for display (e.g. `workspace/link`).
    pub path: String,
    /// `symlink`, `special`, `hard_link`, `replaced` or `store`.
    pub reason: String,
}

/// What a capture carried and what it skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureReport {
    /// One tally per captured tree.
    pub trees: Vec<Tally>,
    /// Every skipped entry.
    pub skipped: Vec<Skipped>,
}

/// A snapshot record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The root tree.
    pub root: ObjectId,
    /// Creation time, nanoseconds since the Unix epoch (UTC).
    pub created_unix_ns: i128,
    /// Host name of the machine that captured it.
    pub host: String,
    /// Plain tree or agent bundle.
    pub kind: SnapshotKind,
    /// Where it came from (a path, or `agent <alias> at <install>`).
    pub source: String,
    /// The agent alias, for agent bundles.
    pub agent: Option<String>,
    /// The name given with `--name`, if any.
    pub name: Option<String>,
    /// The previous snapshot of the same source, if any.
    pub parent: Option<ObjectId>,
    /// What was carried and skipped.
    pub report: CaptureReport,
}

#[cfg(test)]
impl Snapshot {
    /// A plain tree snapshot of `root` for tests: fixed time and host, no name, no parent.
    pub(crate) fn for_test(root: ObjectId, source: &str) -> Snapshot {
        Snapshot {
            root,
            created_unix_ns: 1,
            host: "h".into(),
            kind: SnapshotKind::Tree,
            source: source.into(),
            agent: None,
            name: None,
            parent: None,
            report: CaptureReport::default(),
        }
    }
}

impl Snapshot {
    /// The canonical encoding; its blake3 is the snapshot id.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.push(b'\n');
        serde_json::to_writer(&mut out, self).expect("a snapshot record always serializes");
        out
    }

    /// Decodes and validates a record: rejects a bad magic, an unknown version, truncation,
    /// trailing bytes, and any field outside its grammar (see the module doc).
    pub fn decode(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
        let snap = Snapshot::parse(bytes)?;
        snap.validate()?;
        Ok(snap)
    }

    /// Checks every field's grammar (what [`Snapshot::decode`] adds to the syntax).
    pub fn validate(&self) -> Result<(), DecodeError> {
        let bad = |field: &'static str, why: String| Err(DecodeError::BadField { field, why });
        if self.created_unix_ns < 0 || self.created_unix_ns > i128::from(i64::MAX) {
            return bad(
                "created_unix_ns",
                format!("{} is outside 1970..2262", self.created_unix_ns),
            );
        }
        if let Some(name) = &self.name {
            if let Some(why) = name_problem(name) {
                return bad("name", why.to_string());
            }
        }
        if let Some(agent) = &self.agent {
            if agent.is_empty() || agent.contains('/') || agent.chars().any(is_hidden) {
                return bad(
                    "agent",
                    "an alias is non-empty, without '/' or control characters".into(),
                );
            }
        }
        for t in &self.report.trees {
            if t.label.chars().any(is_hidden) {
                return bad("label", "it contains a control character".into());
            }
        }
        for s in &self.report.skipped {
            if s.path.chars().any(is_hidden) || s.reason.chars().any(is_hidden) {
                return bad("skipped", "it contains a control character".into());
            }
        }
        Ok(())
    }

    /// Decodes the syntax only (gc: a record it cannot fully trust still keeps its data).
    pub(crate) fn parse(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
        if bytes.len() < 6 {
            return Err(if MAGIC.starts_with(&bytes[..bytes.len().min(4)]) {
                DecodeError::Truncated
            } else {
                DecodeError::BadMagic
            });
        }
        if &bytes[..4] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        if bytes[4] != VERSION {
            return Err(DecodeError::BadVersion(u32::from(bytes[4])));
        }
        if bytes[5] != b'\n' {
            return Err(DecodeError::BadMagic);
        }
        let body = &bytes[6..];
        let mut stream = serde_json::Deserializer::from_slice(body).into_iter::<Snapshot>();
        let snap = match stream.next() {
            None => return Err(DecodeError::Truncated),
            Some(Err(e)) if e.is_eof() => return Err(DecodeError::Truncated),
            Some(Err(e)) => return Err(DecodeError::Json(e.to_string())),
            Some(Ok(snap)) => snap,
        };
        let consumed = stream.byte_offset();
        if consumed != body.len() {
            return Err(DecodeError::TrailingBytes(body.len() - consumed));
        }
        Ok(snap)
    }

    /// Total files over all tallies.
    pub fn files(&self) -> u64 {
        self.report.trees.iter().map(|t| t.files).sum()
    }

    /// Total bytes over all tallies.
    pub fn bytes(&self) -> u64 {
        self.report.trees.iter().map(|t| t.bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> Snapshot {
        Snapshot {
            root: ObjectId::of(b"root"),
            created_unix_ns: 1_700_000_000_123_456_789,
            host: "host-a".into(),
            kind: SnapshotKind::Tree,
            source: "/srv/agent".into(),
            agent: None,
            name: Some("before".into()),
            parent: None,
            report: CaptureReport {
                trees: vec![Tally {
                    label: ".".into(),
                    files: 2,
                    bytes: 10,
                    symlinks: 1,
                    ..Tally::default()
                }],
                skipped: vec![Skipped {
                    path: "link".into(),
                    reason: "symlink".into(),
                }],
            },
        }
    }

    #[test]
    fn names_that_look_like_refs_are_refused() {
        assert!(validate_name("release-1").is_ok());
        assert!(validate_name("deadbeef").is_err());
        assert!(validate_name("agent/x").is_err());
        assert!(validate_name("a b").is_err());
        assert!(validate_name("").is_err());
    }

    #[test]
    fn round_trip_and_prefix() {
        let s = sample();
        let bytes = s.encode();
        assert!(bytes.starts_with(RECORD_PREFIX));
        assert_eq!(Snapshot::decode(&bytes).unwrap(), s);
        assert_eq!(s.files(), 2);
    }

    #[test]
    fn rejects_malformed() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(Snapshot::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut trailing = bytes.clone();
        trailing.extend_from_slice(b"{}");
        assert_eq!(
            Snapshot::decode(&trailing),
            Err(DecodeError::TrailingBytes(2))
        );
        let mut v2 = bytes.clone();
        v2[4] = 2;
        assert_eq!(Snapshot::decode(&v2), Err(DecodeError::BadVersion(2)));
        assert_eq!(
            Snapshot::decode(b"ZCBT\x01\n{}"),
            Err(DecodeError::BadMagic)
        );
        let unknown = String::from_utf8(bytes)
            .unwrap()
            .replacen('{', "{\"extra\":1,", 1);
        assert!(matches!(
            Snapshot::decode(unknown.as_bytes()),
            Err(DecodeError::Json(_))
        ));
    }

    #[test]
    fn rejects_fields_outside_their_grammar() {
        type Break = Box<dyn Fn(&mut Snapshot)>;
        let cases: Vec<(&str, Break)> = vec![
            (
                "name",
                Box::new(|s| s.name = Some("agent/researcher".into())),
            ),
            (
                "name",
                Box::new(|s| s.name = Some("deadbeefdeadbeef".into())),
            ),
            ("name", Box::new(|s| s.name = Some("\u{1b}[2J".into()))),
            ("name", Box::new(|s| s.name = Some("x\u{202e}y".into()))),
            ("name", Box::new(|s| s.name = Some(String::new()))),
            (
                "created_unix_ns",
                Box::new(|s| s.created_unix_ns = 10i128.pow(30)),
            ),
            (
                "created_unix_ns",
                Box::new(|s| s.created_unix_ns = -(10i128.pow(30))),
            ),
            ("agent", Box::new(|s| s.agent = Some("a/b".into()))),
            ("agent", Box::new(|s| s.agent = Some("\u{7}".into()))),
            (
                "label",
                Box::new(|s| s.report.trees[0].label = "\u{1b}]0;x\u{7}".into()),
            ),
            (
                "skipped",
                Box::new(|s| s.report.skipped[0].path = "a\u{9b}b".into()),
            ),
        ];
        for (field, break_it) in cases {
            let mut s = sample();
            break_it(&mut s);
            match Snapshot::decode(&s.encode()) {
                Err(DecodeError::BadField { field: f, .. }) => assert_eq!(f, field, "{s:?}"),
                other => panic!("{s:?} decoded to {other:?}"),
            }
            assert!(Snapshot::parse(&s.encode()).is_ok());
        }
        let mut fine = sample();
        fine.source = "/tmp/\u{1b}odd".into();
        fine.host = "h\u{7}".into();
        Snapshot::decode(&fine.encode()).unwrap();
    }
}
