//! What an agent or directory capture reports (`export`, `snapshot`), as data: `Serialize`
//! is the `--json` document (README, "JSON output"), `render` the text `export` and
//! `snapshot <ALIAS>` print before the snapshot id. Names credential-looking words in a
//! grant's detail instead of printing them, and escapes what the operator's terminal shows.

use std::path::Path;

use serde::{Serialize, Serializer};
use zeroclaw_bundle_store::{escape_text, ObjectId, Skipped, Tally};

use super::json::host_path_opt;
use super::{AgentSnapshot, CaptureStats, DirSnapshot, Exported, Published, Replaced};
use crate::agent::{shown_detail, Dropped, Grant};
use crate::words::{count, human_bytes};

/// A capability grant in a report: its detail with credential-looking words named, not shown.
#[derive(Serialize)]
pub(super) struct GrantDoc<'a> {
    kind: crate::agent::GrantKind,
    path: &'a str,
    detail: String,
    rule: bool,
}

impl<'a> GrantDoc<'a> {
    pub(super) fn of(g: &'a Grant) -> GrantDoc<'a> {
        GrantDoc {
            kind: g.kind,
            path: &g.path,
            detail: shown_detail(&g.detail),
            rule: g.rule,
        }
    }
}

#[derive(Serialize)]
struct ScrubbedDoc<'a> {
    path: &'a str,
    rule: &'a str,
}

#[derive(Serialize)]
struct FindingDoc<'a> {
    location: &'a str,
    reason: &'static str,
}

/// The `--json` document of `export` and `snapshot <ALIAS>` (the destination fields are
/// `null` for a snapshot).
#[derive(Serialize)]
struct AgentDoc<'a> {
    snapshot: &'a ObjectId,
    agent: &'a str,
    #[serde(serialize_with = "host_path_opt")]
    destination: Option<&'a Path>,
    reused_files: Option<u64>,
    replaced: Option<&'a Replaced>,
    files: u64,
    bytes: u64,
    skills_carried: u64,
    skill_bundles: &'a [String],
    tallies: &'a [Tally],
    skipped: &'a [Skipped],
    risk_flags: Vec<GrantDoc<'a>>,
    required_secrets: &'a [String],
    scrubbed_by_name: Vec<ScrubbedDoc<'a>>,
    credential_looking_values: Vec<FindingDoc<'a>>,
    personal_files: &'a [String],
    skipped_config_sections: &'a [String],
    skipped_config_reason: Option<&'a str>,
    unknown_keys: &'a [String],
    set_secrets: Vec<String>,
    dropped: &'a [Dropped],
    work: &'a CaptureStats,
}

impl<'a> AgentDoc<'a> {
    fn of(c: &'a AgentSnapshot, published: Option<(&'a Published, Option<&'a Replaced>)>) -> Self {
        let m = &c.bundle.manifest;
        AgentDoc {
            snapshot: &c.id,
            agent: &m.root_agent,
            destination: published.map(|(p, _)| p.dest.as_path()),
            reused_files: published.map(|(p, _)| p.reused),
            replaced: published.and_then(|(_, r)| r),
            files: c.snapshot.files(),
            bytes: c.snapshot.bytes(),
            skills_carried: c.skills_carried,
            skill_bundles: &m.skill_bundles,
            tallies: &c.snapshot.report.trees,
            skipped: &c.snapshot.report.skipped,
            risk_flags: c.grants.iter().map(GrantDoc::of).collect(),
            required_secrets: &m.required_secrets,
            scrubbed_by_name: c
                .scrubbed_by_name
                .iter()
                .map(|(path, rule)| ScrubbedDoc { path, rule })
                .collect(),
            credential_looking_values: c
                .credential_findings
                .iter()
                .map(|f| FindingDoc {
                    location: &f.location,
                    reason: f.reason.describe(),
                })
                .collect(),
            personal_files: &c.personal_files,
            skipped_config_sections: &c.degraded_sections,
            skipped_config_reason: c.degraded_reason.as_deref(),
            unknown_keys: &c.unknown_keys,
            set_secrets: set_secrets(&m.required_secrets),
            dropped: &m.dropped,
            work: &c.stats,
        }
    }
}

pub(super) fn set_secrets<S: AsRef<str>>(paths: impl IntoIterator<Item = S>) -> Vec<String> {
    paths
        .into_iter()
        .map(|p| format!("zeroclaw config set {}", p.as_ref()))
        .collect()
}

/// The `--json` document of `snapshot <ALIAS>` (README, "JSON output").
impl Serialize for AgentSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        AgentDoc::of(self, None).serialize(s)
    }
}

/// The `--json` document of `export` (README, "JSON output").
impl Serialize for Exported {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        AgentDoc::of(
            &self.snapshot,
            Some((&self.published, self.replaced.as_ref())),
        )
        .serialize(s)
    }
}

impl AgentSnapshot {
    /// What `snapshot <ALIAS>` prints before the snapshot id: what the capture carried, what
    /// it asks of an importing operator, what was scrubbed and what could not travel; with
    /// `verbose`, the tallies and the work done too.
    pub fn render(&self, verbose: bool) -> String {
        agent_text(self, None, verbose)
    }
}

impl Exported {
    /// What `export` prints before the snapshot id ([`AgentSnapshot::render`], then where the
    /// bundle was published and what it replaced).
    ///
    /// See [`crate::PreparedExport`] for an example.
    pub fn render(&self, verbose: bool) -> String {
        agent_text(
            &self.snapshot,
            Some((&self.published, self.replaced.as_ref())),
            verbose,
        )
    }
}

impl CaptureStats {
    /// The work a capture did, as one line (`capture: 3 files read and hashed (...), ...`).
    ///
    /// ```
    /// let line = zeroclaw_bundle::CaptureStats::default().describe();
    /// assert!(line.starts_with("capture: 0 files read and hashed"));
    /// ```
    pub fn describe(&self) -> String {
        format!(
            "capture: {} read and hashed ({}), {} unchanged since the last capture (not read)",
            count(self.hashed_files, "file"),
            human_bytes(self.hashed_bytes),
            count(self.cached_files, "file")
        )
    }
}

/// The non-zero skip counts of a capture's tally as words (`1 symlink, 2 hard links`), as the
/// reports of `export`, `snapshot` and `show` print them.
///
/// ```
/// let tally = zeroclaw_bundle_store::Tally { symlinks: 1, hard_links: 2, ..Default::default() };
/// assert_eq!(zeroclaw_bundle::skipped_counts(&tally), "1 symlink, 2 hard links");
/// ```
pub fn skipped_counts(t: &Tally) -> String {
    [
        (t.symlinks, "symlink"),
        (t.special, "special file"),
        (t.hard_links, "hard link"),
        (t.replaced, "entry replaced while reading"),
        (t.store, "the store itself"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| match (*n, *what) {
        (n, "entry replaced while reading") if n != 1 => {
            format!("{n} entries replaced while reading")
        }
        (n, "the store itself") if n != 1 => format!("the store itself ({n} times)"),
        (_, "the store itself") => "the store itself".to_string(),
        (n, what) => count(n, what),
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// The text report of an agent capture (and its publish, for an export).
fn agent_text(
    c: &AgentSnapshot,
    published: Option<(&Published, Option<&Replaced>)>,
    verbose: bool,
) -> String {
    let replaced = published.and_then(|(_, r)| r);
    let published = published.map(|(p, _)| p);
    let m = &c.bundle.manifest;
    let mut out = match published {
        Some(p) => format!(
            "Exported agent `{}` to {}\n",
            escape_text(&m.root_agent),
            p.dest.display()
        ),
        None => format!(
            "Captured agent `{}` into the store\n",
            escape_text(&m.root_agent)
        ),
    };
    out += &format!(
        "  {}, {} (the whole bundle: workspace, skills, config.toml and the manifest)\n",
        count(c.snapshot.files(), "file"),
        human_bytes(c.snapshot.bytes()),
    );
    out += &format!(
        "  {} from {}\n",
        count(c.skills_carried, "skill"),
        count(m.skill_bundles.len() as u64, "skill bundle"),
    );
    for t in &c.snapshot.report.trees {
        if t.skipped() > 0 {
            out += &format!("  skipped in {}: {}\n", t.label, skipped_counts(t));
        }
    }
    if verbose {
        for t in &c.snapshot.report.trees {
            out += &format!(
                "  {}: {}, {}\n",
                t.label,
                count(t.files, "file"),
                human_bytes(t.bytes)
            );
        }
        out += &format!("  {}\n", c.stats.describe());
    }
    out += &asks_and_losses(c);
    // The same words as the bundle's own headers: one story about secrets.
    out += &format!("\nNote: {}\n", crate::agent::secret_story());
    if let Some(p) = published {
        out += &format!(
            "Bundle: {} ({} written, {}{})\n",
            p.dest.display(),
            count(p.files, "file"),
            human_bytes(p.bytes),
            if p.reused > 0 {
                format!(
                    "; {} of them linked unchanged from the previous bundle",
                    p.reused
                )
            } else {
                String::new()
            }
        );
        if let Some(r) = replaced {
            out += &format!("Note: {}\n", r.describe(&p.dest));
        }
    }
    out
}

/// What an agent capture asks of an importing operator, what it scrubbed or left out and what
/// could not travel: the sections of its report between the counts and the closing note.
fn asks_and_losses(c: &AgentSnapshot) -> String {
    let m = &c.bundle.manifest;
    let mut out = String::new();
    if !c.grants.is_empty() {
        out += "\nCapabilities an importing operator is asked to grant:\n";
        out += &grant_lines(&c.grants);
    }
    if !c.degraded_sections.is_empty() {
        out += "\nConfig sections ZeroClaw's loader skips as invalid (not exported, as ZeroClaw would not load them):\n";
        for section in &c.degraded_sections {
            out += &format!("  - {}\n", escape_text(section));
        }
        if let Some(reason) = &c.degraded_reason {
            out += &format!("  ZeroClaw's strict loader says: {}\n", escape_text(reason));
        }
    }
    if !c.unknown_keys.is_empty() {
        out += "\nKeys ZeroClaw's schema does not know (ZeroClaw ignores them, so they were left out; a typo?):\n";
        for key in &c.unknown_keys {
            out += &format!("  - {}\n", escape_text(key));
        }
    }
    if !m.required_secrets.is_empty() {
        out += "\nCredentials scrubbed (fill them on the target):\n";
        for p in &m.required_secrets {
            out += &format!("  zeroclaw config set {}\n", escape_text(p));
        }
        for (path, rule) in &c.scrubbed_by_name {
            out += &format!(
                "  note: {} is not a secret field in ZeroClaw's schema; it was scrubbed because of its name ({rule})\n",
                escape_text(path)
            );
        }
    }
    if !c.credential_findings.is_empty() {
        out += "\nValues that look like credentials (they travel as written):\n";
        for f in &c.credential_findings {
            out += &format!("  - {}: {}\n", f.location, f.reason.describe());
        }
    }
    if !c.personal_files.is_empty() {
        out += "\nPersonal files that travel (facts about you, long-term memory; leave one out with --exclude):\n";
        for f in &c.personal_files {
            out += &format!("  - {f}\n");
        }
    }
    if !m.dropped.is_empty() {
        out += "\nCould not travel:\n";
        for d in &m.dropped {
            out += &format!(
                "  - {} ({}): {}\n",
                escape_text(&d.path),
                d.reason.as_str(),
                escape_text(&d.detail)
            );
        }
    }
    out
}

/// One line per grant (`  - kind at path: detail`), credential-looking words named.
pub(super) fn grant_lines(grants: &[Grant]) -> String {
    grants
        .iter()
        .map(|f| {
            format!(
                "  - {} at {}: {}\n",
                f.kind.as_str(),
                escape_text(&f.path),
                escape_text(&shown_detail(&f.detail))
            )
        })
        .collect()
}

/// The `--json` document of `snapshot --dir` (README, "JSON output").
impl Serialize for DirSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct DirDoc<'a> {
            snapshot: &'a ObjectId,
            root: &'a ObjectId,
            files: u64,
            bytes: u64,
            report: &'a zeroclaw_bundle_store::CaptureReport,
            work: &'a CaptureStats,
        }
        DirDoc {
            snapshot: &self.id,
            root: &self.snapshot.root,
            files: self.snapshot.files(),
            bytes: self.snapshot.bytes(),
            report: &self.snapshot.report,
            work: &self.stats,
        }
        .serialize(s)
    }
}
