//! What `import` reports, as data: [`ImportReport`] (the plan, whether it was a dry run, what
//! the applied import did) serializes as the `import --json` document (README, "JSON output")
//! and renders the text `import` prints; the plan and the applied import serialize alone too.
//! Every secret value in the config diff is masked; what reaches a terminal is escaped.

use std::path::Path;

use serde::{Serialize, Serializer};
use zeroclaw_bundle_store::{escape_message, escape_name, escape_text, ObjectId};

use super::capture_report::{grant_lines, set_secrets, GrantDoc};
use super::json::host_path;
use super::{Error, ImportPlan, Imported, Result, Verb};
use crate::agent::Dropped;
use crate::import::{Action, Kind, Replacing, SecretPlan};
use crate::words::{count, human_bytes};

/// What `import` reports: its plan, whether it was a dry run, and, once applied, what it
/// did. Its serialization is the `import --json` document (README, "JSON output"); its
/// [`ImportReport::render`] the text `import` prints before the content id.
///
/// ```
/// use zeroclaw_bundle::{Bundles, ImportReport, ImportRequest, Replace, Silent};
/// # let dir = tempfile::tempdir()?;
/// # let install = dir.path().join("install");
/// # std::fs::create_dir_all(install.join("agents/coder/workspace"))?;
/// # std::fs::write(install.join("agents/coder/workspace/NOTES.md"), "notes\n")?;
/// # std::fs::write(install.join("config.toml"), "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n[risk_profiles.default]\n")?;
/// let bundles = Bundles::create(dir.path().join("store"))?;
/// let out = dir.path().join("bundle");
/// bundles.export(&install, "coder", &out, Replace::Nothing, &Default::default(), &Silent)?;
/// let target = dir.path().join("other-install");
/// std::fs::create_dir(&target)?;
/// std::fs::write(target.join("config.toml"), "schema_version = 3\n")?;
/// let request = ImportRequest { source: out.as_os_str(), install: &target, ..Default::default() };
/// let plan = bundles.import_plan(&request, &Silent)?;
/// // A dry run: the whole plan, nothing written.
/// let dry = ImportReport { plan: &plan, dry_run: true, imported: None };
/// assert!(dry.render().ends_with("Dry run: nothing was written.\n"));
/// assert_eq!(serde_json::to_value(&dry)?["dry_run"], true);
/// assert!(serde_json::to_value(&plan)?.get("dry_run").is_none());
/// // Applied: the plan and what was written.
/// let imported = bundles.import(&plan, &[], &Silent)?;
/// let done = ImportReport { plan: &plan, dry_run: false, imported: Some(&imported) };
/// assert!(done.render().contains("Imported agent coder into "));
/// assert_eq!(serde_json::to_value(&done)?["agent"], "coder");
/// assert_eq!(serde_json::to_value(&imported)?["written"], true);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ImportReport<'a> {
    /// The plan (an up-to-date one writes nothing: [`ImportPlan::up_to_date`]).
    pub plan: &'a ImportPlan,
    /// Whether nothing was to be written (`--dry-run`).
    pub dry_run: bool,
    /// What the applied import did (`None` for a dry run or an up-to-date plan).
    pub imported: Option<&'a Imported>,
}

#[derive(Serialize)]
struct EntryDoc<'a> {
    kind: &'static str,
    bundle: &'a str,
    local: &'a str,
    path: Option<String>,
    action: Action,
    why: Option<&'a str>,
}

#[derive(Serialize)]
struct TreeDoc<'a> {
    bundle_path: &'a str,
    #[serde(serialize_with = "host_path")]
    destination: &'a Path,
    files: u64,
    bytes: u64,
    replaces: bool,
    replace_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct UpToDateDoc<'a> {
    agent: &'a str,
    imported_at: &'a str,
    snapshot: &'a ObjectId,
}

#[derive(Serialize)]
struct AppliedDoc<'a> {
    secrets_filled: &'a [String],
    secrets_encrypted: bool,
    config_mode: String,
    #[serde(serialize_with = "host_path")]
    provenance: &'a Path,
}

#[derive(Serialize)]
struct ImportDoc<'a> {
    snapshot: &'a ObjectId,
    root: &'a ObjectId,
    source: &'a str,
    source_kind: &'a crate::import::SourceKind,
    agent: &'a str,
    bundle_agent: &'a str,
    #[serde(serialize_with = "host_path")]
    install: &'a Path,
    #[serde(serialize_with = "host_path")]
    config: &'a Path,
    #[serde(serialize_with = "host_path")]
    config_file: &'a Path,
    #[serde(serialize_with = "host_path")]
    backup: &'a Path,
    entries: Vec<EntryDoc<'a>>,
    notes: &'a [String],
    trees: Vec<TreeDoc<'a>>,
    config_diff: String,
    risk_flags: Vec<GrantDoc<'a>>,
    required_secrets: Vec<&'a str>,
    /// The plan's secrets; once applied, those still to fill.
    set_secrets: Vec<String>,
    dropped: &'a [Dropped],
    up_to_date: Option<UpToDateDoc<'a>>,
    /// Absent from a plan's own document (it is not yet a report of `import`).
    #[serde(skip_serializing_if = "Option::is_none")]
    dry_run: Option<bool>,
    #[serde(flatten)]
    applied: Option<AppliedDoc<'a>>,
}

impl Serialize for ImportReport<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ImportDoc::of(self.plan, Some(self.dry_run), self.imported).serialize(s)
    }
}

/// The plan alone: the `import --json` document without `dry_run` and what an applied import
/// adds.
impl Serialize for ImportPlan {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ImportDoc::of(self, None, None).serialize(s)
    }
}

impl<'a> ImportDoc<'a> {
    fn of(plan: &'a ImportPlan, dry_run: Option<bool>, imported: Option<&'a Imported>) -> Self {
        let left: &[SecretPlan] = match imported {
            Some(done) => &done.secrets_left,
            None => &plan.secrets,
        };
        ImportDoc {
            snapshot: &plan.snapshot,
            root: &plan.content_id,
            source: &plan.source,
            source_kind: &plan.source_kind,
            agent: &plan.alias,
            bundle_agent: &plan.bundle_alias,
            install: &plan.install,
            config: &plan.config_path,
            config_file: &plan.config_target,
            backup: &plan.backup,
            entries: plan
                .decisions
                .iter()
                .map(|d| EntryDoc {
                    kind: d.kind.word(),
                    bundle: &d.bundle,
                    local: &d.local,
                    path: (d.action != Action::LeftOut).then(|| d.kind.path_of(&d.local)),
                    action: d.action,
                    why: d.why.as_deref(),
                })
                .collect(),
            notes: &plan.notes,
            trees: plan
                .trees
                .iter()
                .map(|t| TreeDoc {
                    bundle_path: &t.bundle_path,
                    destination: &t.dest,
                    files: t.files,
                    bytes: t.bytes,
                    replaces: t.replaces.is_some(),
                    replace_reason: t.replaces.map(Replacing::word),
                })
                .collect(),
            config_diff: plan.config_diff(),
            risk_flags: plan.grants.iter().map(GrantDoc::of).collect(),
            required_secrets: plan.secrets.iter().map(|s| s.path.as_str()).collect(),
            set_secrets: set_secrets(left.iter().map(|s| &s.path)),
            dropped: &plan.dropped,
            up_to_date: plan.up_to_date.as_ref().map(|d| UpToDateDoc {
                agent: &d.alias,
                imported_at: &d.imported_at,
                snapshot: &d.snapshot,
            }),
            dry_run,
            applied: imported.map(AppliedDoc::of),
        }
    }
}

impl<'a> AppliedDoc<'a> {
    fn of(done: &'a Imported) -> Self {
        AppliedDoc {
            secrets_filled: &done.secrets_filled,
            secrets_encrypted: done.secrets_encrypted,
            config_mode: format!("{:04o}", done.config_mode),
            provenance: &done.provenance,
        }
    }
}

/// What an applied import did, alone: the agent and content id, where the previous
/// `config.toml` is kept, the secrets filled and those still to fill (`set_secrets`), and
/// whether anything was written. (`import --json` reports it with its plan: [`ImportReport`].)
impl Serialize for Imported {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct ImportedDoc<'a> {
            agent: &'a str,
            root: &'a ObjectId,
            #[serde(serialize_with = "host_path")]
            backup: &'a Path,
            set_secrets: Vec<String>,
            written: bool,
            #[serde(flatten)]
            applied: AppliedDoc<'a>,
        }
        ImportedDoc {
            agent: &self.alias,
            root: &self.content_id,
            backup: &self.backup,
            set_secrets: set_secrets(self.secrets_left.iter().map(|s| &s.path)),
            written: self.written,
            applied: AppliedDoc::of(self),
        }
        .serialize(s)
    }
}

impl ImportReport<'_> {
    /// The text `import` prints before the content id: for an up-to-date plan, that nothing
    /// was written; for a dry run, the whole plan (entries and their fates, files, the config
    /// diff with every secret masked, grants, credentials to fill); once applied, the plan
    /// and what was written.
    pub fn render(&self) -> String {
        let plan = self.plan;
        if let Some(done) = &plan.up_to_date {
            return format!(
                "Up to date: agent {} in {} was imported from this content ({}) at {}; \
                 nothing was written\n",
                escape_text(&done.alias),
                plan.install.display(),
                plan.content_id.short(16),
                done.imported_at
            );
        }
        match self.imported {
            Some(done) => render_done(plan, done),
            None => render_plan(plan, self.dry_run),
        }
    }
}

impl ImportPlan {
    /// What a terminal is shown after the review of the source, before it is asked to
    /// confirm: what the import does with what was reviewed.
    pub fn summary(&self) -> String {
        format!(
            "\nImporting agent {} from {} as {} into {}\n",
            escape_text(&self.bundle_alias),
            escape_text(&self.source),
            escape_text(&self.alias),
            self.install.display()
        )
    }

    /// Where a secret typed for this import is stored, in words for the prompt that asks for
    /// it: encrypted with the install's key, or (`secrets.encrypt = false`) as plain text in
    /// `config.toml`, with who can read that file.
    pub fn secret_storage(&self) -> Result<String> {
        if self.secrets_encrypted() {
            return Ok("typed input is hidden and stored encrypted with the install's key".into());
        }
        // The mode the import keeps (it writes config.toml with the present file's bits).
        let mode = std::fs::metadata(&self.config_path)
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
            .map_err(|e| {
                Error::new(
                    Verb::Import,
                    self.install.display().to_string(),
                    anyhow::Error::new(e)
                        .context(format!("could not read {}", self.config_path.display())),
                )
            })?;
        Ok(format!(
            "typed input is hidden, but this install sets secrets.encrypt = false: a value \
             is stored as plain text in {}, {}",
            self.config_path.display(),
            who_reads(mode)
        ))
    }
}

fn secrets_text(secrets: &[SecretPlan]) -> String {
    if secrets.is_empty() {
        return String::new();
    }
    let mut out = "Credentials to fill (the bundle carries none):\n".to_string();
    for s in secrets {
        out += &format!("  zeroclaw config set {}\n", escape_text(&s.path));
    }
    out
}

fn action_word(a: Action) -> &'static str {
    match a {
        Action::Add => "add",
        Action::Namespace => "namespace",
        Action::Reuse => "reuse",
        Action::Map => "map",
        Action::LeftOut => "left out",
    }
}

/// The whole plan as text (`--dry-run` adds the config diff and the credentials to fill).
fn render_plan(plan: &ImportPlan, dry_run: bool) -> String {
    let mut out = String::new();
    out += &format!(
        "Import of {} (content id {}) into {}\n",
        escape_text(&plan.source),
        plan.content_id.short(16),
        plan.install.display()
    );
    out += &match &plan.plugin {
        Some(name) => format!(
            "  Agent Plugin {} -> skill bundle {}\n",
            escape_text(name),
            escape_text(crate::plugin::record_skill_alias(&plan.alias).unwrap_or(&plan.alias))
        ),
        None => format!(
            "  agent {} -> {}\n",
            escape_text(&plan.bundle_alias),
            escape_text(&plan.alias)
        ),
    };
    out += "Config entries:\n";
    for d in &plan.decisions {
        let line = match d.action {
            Action::Add => d.kind.path_of(&d.local),
            Action::Namespace => format!(
                "{} -> {} ({})",
                d.kind.path_of(&d.bundle),
                d.local,
                match &d.why {
                    _ if d.kind == Kind::Agent => "an agent of that name exists",
                    Some(why) => why.as_str(),
                    None => "a different local entry has that name",
                }
            ),
            Action::Reuse => format!("{} (an identical local entry)", d.kind.path_of(&d.local)),
            Action::Map => format!(
                "{} -> {} (--map)",
                d.kind.path_of(&d.bundle),
                d.kind.path_of(&d.local)
            ),
            Action::LeftOut => format!(
                "{} ({})",
                d.kind.path_of(&d.bundle),
                d.why
                    .as_deref()
                    .unwrap_or("nothing the agent reaches references it")
            ),
        };
        out += &format!("  {:<9} {}\n", action_word(d.action), escape_text(&line));
    }
    for n in &plan.notes {
        out += &format!("  note: {}\n", escape_text(n));
    }
    out += "Files:\n";
    if plan.trees.is_empty() {
        out += "  none\n";
    }
    for t in &plan.trees {
        out += &format!(
            "  {} -> {} ({}, {}){}\n",
            escape_text(&t.bundle_path),
            escape_name(t.dest.as_os_str().as_encoded_bytes()),
            count(t.files, "file"),
            human_bytes(t.bytes),
            match t.replaces {
                Some(Replacing::EarlierImport) => {
                    " REPLACES the directory there (--force: it holds this tree already)"
                }
                Some(Replacing::Named) => {
                    " REPLACES the directory there and deletes what it holds (--replace)"
                }
                None => "",
            }
        );
    }
    let through = if plan.config_target != plan.config_path {
        format!(
            ", a symlink: written through it to {}",
            plan.config_target.display()
        )
    } else {
        String::new()
    };
    out += &format!(
        "Config: {}{through} (written last; the previous one kept as {})\n",
        plan.config_path.display(),
        plan.backup.display()
    );
    if dry_run {
        // Escaped as `diff -p` escapes a patch: a bidi override or a zero-width character in a
        // value reaches the terminal as `\u{202e}`, never raw (a CR before a line break is
        // the file's line ending, not a character to show).
        out += &escape_message(&plan.config_diff().replace("\r\n", "\n"));
    }
    if plan.grants.is_empty() {
        out += "Capabilities granted: none\n";
    } else {
        out += "Capabilities granted:\n";
        out += &grant_lines(&plan.grants);
    }
    if dry_run {
        out += &secrets_text(&plan.secrets);
    }
    if !plan.dropped.is_empty() {
        out += "Did not travel (from the bundle's manifest):\n";
        for d in &plan.dropped {
            out += &format!("  - {} ({})\n", escape_text(&d.path), d.reason.as_str());
        }
    }
    if dry_run {
        out += "Dry run: nothing was written.\n";
    }
    out
}

fn render_done(plan: &ImportPlan, done: &Imported) -> String {
    let mut out = render_plan(plan, false);
    let what = match &plan.plugin {
        Some(name) => format!("Agent Plugin {}", escape_text(name)),
        None => format!("agent {}", escape_text(&done.alias)),
    };
    out += &format!(
        "Imported {what} into {}; the previous config.toml is {}\n",
        plan.install.display(),
        done.backup.display()
    );
    if !done.secrets_filled.is_empty() {
        let filled = done
            .secrets_filled
            .iter()
            .map(|s| escape_text(s))
            .collect::<Vec<_>>()
            .join(", ");
        out += &if done.secrets_encrypted {
            format!("Stored encrypted: {filled}\n")
        } else {
            format!(
                "Stored as plain text (this install sets secrets.encrypt = false): {filled}, in \
                 {}, {}\n",
                plan.config_path.display(),
                who_reads(done.config_mode)
            )
        };
    }
    out += &secrets_text(&done.secrets_left);
    out
}

/// Who can read a file of permission bits `mode`, for a secret stored in it as plain text.
fn who_reads(mode: u32) -> String {
    let who = if mode & 0o004 != 0 {
        "every user of this machine can read it"
    } else if mode & 0o040 != 0 {
        "its owner and its group can read it"
    } else {
        "only its owner can read it"
    };
    format!("mode {mode:04o}: {who}")
}
