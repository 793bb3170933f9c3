//! The manifest `zeroclaw-agent.toml` (SPEC §3, reference §2, §3, §5): its structured form (also
//! serialized for `--json` reports), the `dropped` and `risk_flags` vocabularies with their wire
//! strings, and its deterministic rendering with the fixed header comment.

use std::time::SystemTime;

use serde::Serialize;

use super::error::AgentError;
use super::layout::{BUNDLE_FORMAT_VERSION, MANIFEST_FILE};
#[cfg(test)]
use super::render::{ensure_blank_line_before_sections, to_toml};
use super::value::{Node, Table};

/// What a bundle says about secrets, the same words in both headers and in the export report
/// (see [`secret_story`]): which values were blanked, that everything else travels as written,
/// and that the report's look for credential-looking values is a heuristic. A macro so the
/// headers can be `concat!`ed constants.
macro_rules! secret_story_text {
    () => {
        "\
# Secrets: every field ZeroClaw's schema marks secret, and every value under a
# key named like a credential, was blanked on export and is listed in
# `required_secrets` (fill them on the target). Nothing else was changed: other
# config values (a token in a server's `url`, a credential in its `command` or
# `args`) and the files under workspace/ and skills/ travel as written. The
# export report points out values that look like credentials; that look is a
# heuristic, not a guarantee: nothing here was proven free of secrets.
"
    };
}
pub(crate) use secret_story_text;

/// The secret paragraph of both headers without its comment marks, for the export report.
pub fn secret_story() -> String {
    secret_story_text!()
        .lines()
        .map(|l| l.trim_start_matches('#').trim_start())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The comment header of the manifest, written before the TOML body (reference §2.1).
pub const MANIFEST_HEADER: &str = concat!(
    "\
# ZeroClaw agent bundle manifest.
#
# `required_secrets` lists config paths whose credentials were scrubbed on
# export. `risk_flags` lists capabilities the importing operator is being asked
# to grant (stdio server command lines verbatim). `dropped` lists configuration
# that could not travel.
#
",
    secret_story_text!()
);

/// Why something could not travel. Serialized as the wire string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Names accounts, addresses or paths that exist only on the source host.
    HostSpecific,
    /// Names other agents or groups that will not exist on the target.
    Relational,
    /// An outward-facing surface that must be re-enabled deliberately.
    DefaultClosed,
    /// The agent's private data.
    PrivateData,
    /// Not carried by this format version.
    NotYetPortable,
    /// Referenced content the exporting host did not have.
    SourceMissing,
}

impl DropReason {
    const ALL: [DropReason; 6] = [
        DropReason::HostSpecific,
        DropReason::Relational,
        DropReason::DefaultClosed,
        DropReason::PrivateData,
        DropReason::NotYetPortable,
        DropReason::SourceMissing,
    ];

    /// The reason a wire string names, if it is one of format 1's.
    pub fn from_wire(wire: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == wire)
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::HostSpecific => "host_specific",
            DropReason::Relational => "relational",
            DropReason::DefaultClosed => "default_closed",
            DropReason::PrivateData => "private_data",
            DropReason::NotYetPortable => "not_yet_portable",
            DropReason::SourceMissing => "source_missing",
        }
    }
}

/// A capability the importing operator is asked to grant. Serialized as the wire string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RiskKind {
    /// The bundle carries skill content (instructions that act as code).
    CarriedSkills,
    /// The risk profile's level is `full`.
    FullAutonomy,
    /// Filesystem access is not confined to the workspace.
    FilesystemEscape,
    /// Shell execution is unsandboxed.
    SandboxDisabled,
    /// An approval gate is off.
    ApprovalBypass,
    /// Host environment variables reach shell subprocesses.
    EnvPassthrough,
    /// Extra filesystem roots are granted.
    ExtraFilesystemRoots,
    /// The agent may delegate to other agents.
    DelegationEnabled,
    /// An MCP server starts a local process.
    ProcessSpawn,
    /// Server-controlled text is read into the system prompt at startup.
    UntrustedStartupContext,
}

impl RiskKind {
    const ALL: [RiskKind; 10] = [
        RiskKind::CarriedSkills,
        RiskKind::FullAutonomy,
        RiskKind::FilesystemEscape,
        RiskKind::SandboxDisabled,
        RiskKind::ApprovalBypass,
        RiskKind::EnvPassthrough,
        RiskKind::ExtraFilesystemRoots,
        RiskKind::DelegationEnabled,
        RiskKind::ProcessSpawn,
        RiskKind::UntrustedStartupContext,
    ];

    /// The kind a wire string names, if it is one of format 1's.
    pub fn from_wire(wire: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == wire)
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            RiskKind::CarriedSkills => "carried_skills",
            RiskKind::FullAutonomy => "full_autonomy",
            RiskKind::FilesystemEscape => "filesystem_escape",
            RiskKind::SandboxDisabled => "sandbox_disabled",
            RiskKind::ApprovalBypass => "approval_bypass",
            RiskKind::EnvPassthrough => "env_passthrough",
            RiskKind::ExtraFilesystemRoots => "extra_filesystem_roots",
            RiskKind::DelegationEnabled => "delegation_enabled",
            RiskKind::ProcessSpawn => "process_spawn",
            RiskKind::UntrustedStartupContext => "untrusted_startup_context",
        }
    }
}

/// One `[[dropped]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dropped {
    /// A dotted config path or a bundle-relative content path (`workspace/memory`).
    pub path: String,
    /// Why it stayed behind.
    pub reason: DropReason,
    /// One sentence for the operator.
    pub detail: String,
}

impl Dropped {
    pub(crate) fn new(
        path: impl Into<String>,
        reason: DropReason,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            path: path.into(),
            reason,
            detail: detail.into(),
        }
    }
}

/// One `[[risk_flags]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RiskFlag {
    /// What kind of capability.
    pub kind: RiskKind,
    /// The dotted config path that grants it.
    pub path: String,
    /// One sentence for the operator.
    pub detail: String,
}

impl RiskFlag {
    pub(crate) fn new(kind: RiskKind, path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind,
            path: path.into(),
            detail: detail.into(),
        }
    }
}

/// `[provenance]`: who wrote the bundle and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Provenance {
    /// The ZeroClaw version whose schema computed the closure (the caller may name another).
    pub zeroclaw_version: String,
    /// RFC 3339 UTC.
    pub exported_at: String,
}

impl Provenance {
    /// Provenance for an export at `at`: `zeroclaw_version` if the caller passes one, else the
    /// ZeroClaw release whose schema this build links ([`super::ZEROCLAW_VERSION`]), so an
    /// importer parsing a version reads a ZeroClaw version.
    pub fn for_export(zeroclaw_version: Option<&str>, at: SystemTime) -> Self {
        let zeroclaw_version = zeroclaw_version
            .unwrap_or(super::schema::ZEROCLAW_VERSION)
            .to_string();
        Self {
            zeroclaw_version,
            exported_at: rfc3339_utc(at),
        }
    }
}

/// Whether two manifest files differ, and only in `provenance.exported_at` (two exports of an
/// unchanged agent): each is parsed, that one key removed, and the rest compared as text, so any
/// other difference (a comment, a risk flag, the ZeroClaw version) still counts. A file that is
/// not UTF-8 or not TOML is never "only the time".
pub fn manifests_differ_only_in_export_time(a: &[u8], b: &[u8]) -> bool {
    let without_time = |bytes: &[u8]| -> Option<String> {
        let mut doc: toml_edit::DocumentMut = std::str::from_utf8(bytes).ok()?.parse().ok()?;
        let provenance = doc.get_mut("provenance")?.as_table_like_mut()?;
        provenance.get("exported_at")?.as_str()?;
        provenance.remove("exported_at");
        Some(doc.to_string())
    };
    a != b
        && matches!(
            (without_time(a), without_time(b)),
            (Some(x), Some(y)) if x == y
        )
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` (microseconds; times before 1970 clamp to the epoch).
pub fn rfc3339_utc(at: SystemTime) -> String {
    crate::clock::rfc3339_utc_micros(at)
}

/// The manifest, as written to `zeroclaw-agent.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Manifest {
    /// Always 1.
    pub format_version: i64,
    /// The exported alias.
    pub root_agent: String,
    /// Dotted config paths scrubbed to `""`, sorted and deduplicated.
    pub required_secrets: Vec<String>,
    /// Aliases whose content is under `skills/<alias>/`, in agent reference order.
    pub skill_bundles: Vec<String>,
    /// Who wrote the bundle and when.
    pub provenance: Provenance,
    /// What could not travel, in emission order.
    pub dropped: Vec<Dropped>,
    /// What the importing operator is asked to grant, in emission order.
    pub risk_flags: Vec<RiskFlag>,
}

impl Manifest {
    #[cfg(test)]
    pub(crate) fn new(
        root_agent: &str,
        required_secrets: Vec<String>,
        skill_bundles: Vec<String>,
        provenance: Provenance,
        dropped: Vec<Dropped>,
        risk_flags: Vec<RiskFlag>,
    ) -> Self {
        Self {
            format_version: BUNDLE_FORMAT_VERSION,
            root_agent: root_agent.to_string(),
            required_secrets,
            skill_bundles,
            provenance,
            dropped,
            risk_flags,
        }
    }

    /// Read a `zeroclaw-agent.toml` back (for `show` and `diff` of a bundle). Unknown keys are
    /// ignored; a missing or mistyped key, another format version, or a reason or kind string
    /// format 1 does not define is an error naming the field.
    pub fn from_toml_str(text: &str) -> Result<Manifest, AgentError> {
        let bad = |field: &str, problem: &str| AgentError::InvalidManifest {
            field: field.to_string(),
            problem: problem.to_string(),
        };
        let doc: toml_edit::DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
            bad(
                MANIFEST_FILE,
                &format!("does not parse: {}", e.message().trim()),
            )
        })?;
        let root = Table::from_toml_edit(doc.as_table());
        let string = |t: &Table, key: &str, field: &str| -> Result<String, AgentError> {
            t.get(key)
                .and_then(Node::as_str)
                .map(str::to_string)
                .ok_or_else(|| bad(field, "must be a string"))
        };
        let strings = |key: &str| -> Result<Vec<String>, AgentError> {
            let items = root
                .get(key)
                .and_then(Node::as_array)
                .ok_or_else(|| bad(key, "must be an array of strings"))?;
            items
                .iter()
                .map(|n| {
                    n.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(key, "must be an array of strings"))
                })
                .collect()
        };
        let tables = |key: &str| -> Result<Vec<&Table>, AgentError> {
            let items = root
                .get(key)
                .and_then(Node::as_array)
                .ok_or_else(|| bad(key, "must be an array of tables"))?;
            items
                .iter()
                .map(|n| {
                    n.as_table()
                        .ok_or_else(|| bad(key, "must be an array of tables"))
                })
                .collect()
        };
        match root.get("format_version") {
            Some(Node::Int(BUNDLE_FORMAT_VERSION)) => {}
            Some(Node::Int(v)) => {
                return Err(bad(
                    "format_version",
                    &format!("is {v}; only format 1 is understood"),
                ))
            }
            _ => return Err(bad("format_version", "must be an integer")),
        }
        let provenance = root
            .get("provenance")
            .and_then(Node::as_table)
            .ok_or_else(|| bad("provenance", "must be a table"))?;
        let mut dropped = Vec::new();
        for (i, t) in tables("dropped")?.into_iter().enumerate() {
            let field = |key: &str| format!("dropped[{i}].{key}");
            let reason = string(t, "reason", &field("reason"))?;
            dropped.push(Dropped {
                path: string(t, "path", &field("path"))?,
                reason: DropReason::from_wire(&reason).ok_or_else(|| {
                    bad(
                        &field("reason"),
                        &format!("{reason:?} is not a format 1 reason"),
                    )
                })?,
                detail: string(t, "detail", &field("detail"))?,
            });
        }
        let mut risk_flags = Vec::new();
        for (i, t) in tables("risk_flags")?.into_iter().enumerate() {
            let field = |key: &str| format!("risk_flags[{i}].{key}");
            let kind = string(t, "kind", &field("kind"))?;
            risk_flags.push(RiskFlag {
                kind: RiskKind::from_wire(&kind).ok_or_else(|| {
                    bad(&field("kind"), &format!("{kind:?} is not a format 1 kind"))
                })?,
                path: string(t, "path", &field("path"))?,
                detail: string(t, "detail", &field("detail"))?,
            });
        }
        Ok(Manifest {
            format_version: BUNDLE_FORMAT_VERSION,
            root_agent: string(&root, "root_agent", "root_agent")?,
            required_secrets: strings("required_secrets")?,
            skill_bundles: strings("skill_bundles")?,
            provenance: Provenance {
                zeroclaw_version: string(
                    provenance,
                    "zeroclaw_version",
                    "provenance.zeroclaw_version",
                )?,
                exported_at: string(provenance, "exported_at", "provenance.exported_at")?,
            },
            dropped,
            risk_flags,
        })
    }

    /// Tests: the manifest as text (header, then the body in a fixed key order), to read back
    /// with [`Manifest::from_toml_str`]. Bundles are rendered by ZeroClaw's own
    /// `render_manifest_toml`, never by this.
    #[cfg(test)]
    pub(crate) fn to_toml_string(&self) -> String {
        let strings = |v: &[String]| Node::Array(v.iter().cloned().map(Node::Str).collect());
        let mut root = Table::new();
        root.insert("format_version", Node::Int(self.format_version));
        root.insert("root_agent", Node::Str(self.root_agent.clone()));
        root.insert("required_secrets", strings(&self.required_secrets));
        root.insert("skill_bundles", strings(&self.skill_bundles));
        let mut provenance = Table::new();
        provenance.insert(
            "zeroclaw_version",
            Node::Str(self.provenance.zeroclaw_version.clone()),
        );
        provenance.insert(
            "exported_at",
            Node::Str(self.provenance.exported_at.clone()),
        );
        root.insert("provenance", Node::Table(provenance));
        let dropped = self
            .dropped
            .iter()
            .map(|d| {
                let mut t = Table::new();
                t.insert("path", Node::Str(d.path.clone()));
                t.insert("reason", Node::Str(d.reason.as_str().to_string()));
                t.insert("detail", Node::Str(d.detail.clone()));
                Node::Table(t)
            })
            .collect();
        root.insert("dropped", Node::Array(dropped));
        let flags = self
            .risk_flags
            .iter()
            .map(|f| {
                let mut t = Table::new();
                t.insert("kind", Node::Str(f.kind.as_str().to_string()));
                t.insert("path", Node::Str(f.path.clone()));
                t.insert("detail", Node::Str(f.detail.clone()));
                Node::Table(t)
            })
            .collect();
        root.insert("risk_flags", Node::Array(flags));
        format!(
            "{MANIFEST_HEADER}{}",
            ensure_blank_line_before_sections(&to_toml(&root))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn manifest_reads_back() {
        let m = Manifest::new(
            "researcher",
            vec!["a.b".into()],
            vec!["tools".into()],
            Provenance::for_export(Some("0.8.4"), UNIX_EPOCH),
            vec![Dropped::new(
                "workspace/memory",
                DropReason::NotYetPortable,
                "d",
            )],
            vec![RiskFlag::new(
                RiskKind::ProcessSpawn,
                "mcp.servers.x.command",
                "npx \"q\"",
            )],
        );
        assert_eq!(
            Manifest::from_toml_str(&m.to_toml_string()).expect("reads back"),
            m
        );
        let bad = m
            .to_toml_string()
            .replace("process_spawn", "something_else");
        let err = Manifest::from_toml_str(&bad).expect_err("unknown kind");
        assert_eq!(
            err.to_string(),
            "manifest field risk_flags[0].kind \"something_else\" is not a format 1 kind"
        );
        let v2 = m
            .to_toml_string()
            .replace("format_version = 1", "format_version = 2");
        assert!(Manifest::from_toml_str(&v2).is_err());
    }

    #[test]
    fn rfc3339_formats_utc() {
        assert_eq!(rfc3339_utc(UNIX_EPOCH), "1970-01-01T00:00:00.000000+00:00");
        let t = UNIX_EPOCH + std::time::Duration::new(1_788_516_672, 345_678_000);
        assert_eq!(rfc3339_utc(t), "2026-09-04T10:11:12.345678+00:00");
        let leap = UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        assert_eq!(rfc3339_utc(leap), "2000-02-29T00:00:00.000000+00:00");
    }

    #[test]
    fn provenance_defaults_to_the_linked_zeroclaw() {
        let p = Provenance::for_export(None, UNIX_EPOCH);
        assert_eq!(p.zeroclaw_version, "0.8.7");
        assert_eq!(
            Provenance::for_export(Some("0.8.4"), UNIX_EPOCH).zeroclaw_version,
            "0.8.4"
        );
    }

    #[test]
    fn empty_manifest_renders_empty_lists() {
        let m = Manifest::new(
            "a",
            vec![],
            vec![],
            Provenance::for_export(Some("1"), UNIX_EPOCH),
            vec![],
            vec![],
        );
        let text = m.to_toml_string();
        assert!(text.starts_with(MANIFEST_HEADER));
        let body = &text[MANIFEST_HEADER.len()..];
        assert_eq!(
            body,
            "format_version = 1\nroot_agent = \"a\"\nrequired_secrets = []\nskill_bundles = []\ndropped = []\nrisk_flags = []\n\n[provenance]\nzeroclaw_version = \"1\"\nexported_at = \"1970-01-01T00:00:00.000000+00:00\"\n"
        );
        assert_eq!(
            serde_json::to_value(&m).expect("serializes")["format_version"],
            serde_json::json!(1)
        );
    }
}
