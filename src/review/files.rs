//! The file half of a review: one walk of a stored snapshot's tree (trees from its tree index,
//! blobs read through the store and verified against their ids) that lists what an operator
//! must see before import: credential-looking files and lines ([`crate::credentials::scan_file`]
//! decides; this module only feeds it), executable files, scripts in skills, personal files,
//! and the counts and sizes of each part of the bundle.
//!
//! Bounded work: a file's bytes are read only when it is at most the caller's cap (files above
//! it are listed as not scanned, with their size) and is text (a NUL in its first 8 KiB makes it
//! binary: its name is still checked, its lines are not); a blob carried at several paths is
//! read once. Names are kept as raw bytes ([`BundlePath`]) and shown through the store's one
//! escaper. Never a value: findings are a path, a line and a reason.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use serde::{Serialize, Serializer};
use zeroclaw_bundle_store::{escape_name, EntryKind, ObjectId, StoreError, TreeEntry};

use crate::agent::{CONFIG_FILE, MANIFEST_FILE, SKILLS_DIR, WORKSPACE_DIR};
use crate::credentials::{scan_file, CredentialReason, FileKind};
use crate::diff::TreeSide;
use crate::export::PERSONAL_FILES;
use crate::progress::{Progress, Totals};

/// Findings listed per file: a file with more (a dump of tokens) is listed with its first ones
/// and a count of the rest, so one file cannot flood the screen or the memory of a review.
pub const FINDINGS_PER_FILE: usize = 10;

/// How much of a file's start decides that it is binary (git's rule: a NUL byte there).
const BINARY_PROBE: usize = 8192;

/// File extensions of scripts an agent's skill may tell it to run.
const SCRIPT_EXTENSIONS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "fish",
    "ksh",
    "py",
    "rb",
    "pl",
    "php",
    "js",
    "mjs",
    "cjs",
    "ts",
    "lua",
    "ps1",
    "bat",
    "cmd",
    "applescript",
    "scpt",
];

/// A path inside the reviewed snapshot, as raw bytes. Serialized under the JSON name rules
/// (`crate::docs::json`): `path` (the name when it is UTF-8, else `null` with `path_bytes` in
/// hex) and `display` (the escaped form text output prints).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct BundlePath(pub Vec<u8>);

impl BundlePath {
    /// The escaped form, as every command prints names.
    pub fn display(&self) -> String {
        escape_name(&self.0)
    }

    fn join(&self, name: &[u8]) -> BundlePath {
        let mut out = self.0.clone();
        if !out.is_empty() {
            out.push(b'/');
        }
        out.extend_from_slice(name);
        BundlePath(out)
    }
}

impl Serialize for BundlePath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        match std::str::from_utf8(&self.0) {
            Ok(text) => map.serialize_entry("path", text)?,
            Err(_) => {
                map.serialize_entry("path", &None::<&str>)?;
                let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
                map.serialize_entry("path_bytes", &hex)?;
            }
        }
        map.serialize_entry("display", &self.display())?;
        map.end()
    }
}

/// A place that looks like it holds a credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CredentialFile {
    /// The file.
    #[serde(flatten)]
    pub path: BundlePath,
    /// The line (1-based); `None`: the file as a whole (its name or place says credentials).
    pub line: Option<u64>,
    /// Why, as a word (`dotenv_file`, `high_entropy_token`, ...).
    pub reason: CredentialReason,
}

/// A file of a skill that an agent may run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkillScript {
    /// The file.
    #[serde(flatten)]
    pub path: BundlePath,
    /// What makes it a script: `executable`, `shebang` or `extension`.
    pub why: &'static str,
}

/// A file with more credential-looking lines than [`FINDINGS_PER_FILE`]: the rest, counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MoreFindings {
    /// The file.
    #[serde(flatten)]
    pub path: BundlePath,
    /// Lines found beyond the ones listed.
    pub more_lines: u64,
}

/// A file whose lines were not scanned because it is over the cap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotScanned {
    /// The file.
    #[serde(flatten)]
    pub path: BundlePath,
    /// Its size.
    pub size: u64,
}

/// Files and bytes of one part of the bundle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Part {
    /// `workspace`, `skills/<alias>`, a top-level file's name, or `other`.
    pub part: String,
    /// Files in it.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// For a skill bundle: the skills (its child directories).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<u64>,
}

/// What the walk found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FileScan {
    /// Credential-looking files and lines, in path order (at most [`FINDINGS_PER_FILE`] a
    /// file).
    pub credentials: Vec<CredentialFile>,
    /// Files with more findings than listed, and how many more.
    pub credentials_more: Vec<MoreFindings>,
    /// Files with an executable bit, in path order.
    pub executables: Vec<BundlePath>,
    /// Scripts under `skills/`, in path order.
    pub skill_scripts: Vec<SkillScript>,
    /// Personal workspace files (`workspace/USER.md`, `workspace/MEMORY.md`).
    pub personal_files: Vec<BundlePath>,
    /// Files over the scan cap: their names were checked, their lines were not.
    pub not_scanned: Vec<NotScanned>,
    /// Binary files (names checked, lines not).
    pub binary_files: u64,
    /// Files whose lines were scanned.
    pub scanned_files: u64,
    /// Files and bytes by part of the bundle.
    pub parts: Vec<Part>,
}

/// What one blob's bytes said under a name of one kind (kept: read once).
struct Read {
    /// Line findings (and a whole-file one, by the kind), the first [`FINDINGS_PER_FILE`].
    findings: Vec<(Option<u64>, CredentialReason)>,
    /// Findings beyond those.
    more: u64,
    binary: bool,
    shebang: bool,
}

/// Why a scan stopped.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A tree or a blob could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The caller's token was cancelled.
    #[error("interrupted: the review stopped while reading the files")]
    Interrupted,
}

/// Walks the tree `root` of `side` (a stored snapshot) and scans it, reading at most `cap`
/// bytes of any file. `progress` hears a `scanning` phase (files and bytes of `total`), and
/// its token stops the walk between files.
pub fn scan(
    side: &dyn TreeSide,
    root: &ObjectId,
    cap: u64,
    total: Totals,
    progress: &dyn Progress,
) -> Result<FileScan, ScanError> {
    progress.begin("scanning", Some(total));
    let result = walk(side, root, cap, progress);
    progress.finish();
    result
}

/// The walk of [`scan`]: every file of the tree, depth first, counted into its part.
fn walk(
    side: &dyn TreeSide,
    root: &ObjectId,
    cap: u64,
    progress: &dyn Progress,
) -> Result<FileScan, ScanError> {
    let mut done = Totals::default();
    let mut out = FileScan::default();
    let mut parts: Vec<Part> = Vec::new();
    let mut read: HashMap<(ObjectId, Option<FileKind>), Read> = HashMap::new();
    let mut stack = vec![(BundlePath(Vec::new()), *root)];
    while let Some((dir, id)) = stack.pop() {
        let tree = side.tree(&id)?;
        for entry in tree.entries() {
            let path = dir.join(&entry.name);
            if entry.kind == EntryKind::Dir {
                if dir.0 == SKILLS_DIR.as_bytes() {
                    let skills = side.tree(&entry.id)?;
                    // A skill bundle holds skills (its child directories); an Agent Plugin's
                    // `skills/<name>/` is one skill itself (its SKILL.md is right there), and
                    // is not counted as a bundle of none.
                    let is_one_skill = skills
                        .entries()
                        .iter()
                        .any(|e| e.kind != EntryKind::Dir && e.name == b"SKILL.md");
                    let n = skills
                        .entries()
                        .iter()
                        .filter(|e| e.kind == EntryKind::Dir)
                        .count();
                    if !is_one_skill {
                        part_of(&mut parts, &path).skills = Some(n as u64);
                    }
                }
                stack.push((path, entry.id));
                continue;
            }
            progress
                .check_cancel()
                .map_err(|_| ScanError::Interrupted)?;
            done.files += 1;
            done.bytes += entry.size;
            progress.advance(done);
            let part = part_of(&mut parts, &path);
            part.files += 1;
            part.bytes += entry.size;
            scan_entry(side, cap, entry, &path, &mut read, &mut out)?;
        }
    }
    sort(&mut out, parts);
    Ok(out)
}

/// Scans one file at `path`: reads it (at most `cap` bytes, once per blob and kind of name) and
/// records in `out` its credential findings, whether it was scanned or binary, and whether it
/// is executable, a script in a skill or a personal file.
fn scan_entry(
    side: &dyn TreeSide,
    cap: u64,
    entry: &TreeEntry,
    path: &BundlePath,
    read: &mut HashMap<(ObjectId, Option<FileKind>), Read>,
    out: &mut FileScan,
) -> Result<(), ScanError> {
    let shown = String::from_utf8_lossy(&path.0).into_owned();
    let kind = FileKind::of(&shown);
    let outcome = if entry.size > cap {
        out.not_scanned.push(NotScanned {
            path: path.clone(),
            size: entry.size,
        });
        None
    } else {
        read_blob(side, cap, entry, kind, &shown, read)?
    };
    // The name rules hold for a file that was not read too (a key over the cap).
    let findings: Vec<(Option<u64>, CredentialReason)> = match outcome {
        Some(r) => {
            if r.binary {
                out.binary_files += 1;
            } else {
                out.scanned_files += 1;
            }
            if r.more > 0 {
                out.credentials_more.push(MoreFindings {
                    path: path.clone(),
                    more_lines: r.more,
                });
            }
            r.findings.clone()
        }
        None => scan_file(&shown, None)
            .into_iter()
            .map(|f| (f.line, f.reason))
            .collect(),
    };
    out.credentials
        .extend(findings.into_iter().map(|(line, reason)| CredentialFile {
            path: path.clone(),
            line,
            reason,
        }));
    if entry.kind == EntryKind::ExecFile {
        out.executables.push(path.clone());
    }
    if path.0.starts_with(format!("{SKILLS_DIR}/").as_bytes()) {
        if let Some(why) = skill_script_why(entry, &shown, outcome) {
            out.skill_scripts.push(SkillScript {
                path: path.clone(),
                why,
            });
        }
    }
    if PERSONAL_FILES
        .iter()
        .any(|f| path.0 == format!("{WORKSPACE_DIR}/{f}").as_bytes())
    {
        out.personal_files.push(path.clone());
    }
    Ok(())
}

/// What the blob of `entry` said under a name of `kind` (`shown`), read on first meeting.
fn read_blob<'r>(
    side: &dyn TreeSide,
    cap: u64,
    entry: &TreeEntry,
    kind: Option<FileKind>,
    shown: &str,
    read: &'r mut HashMap<(ObjectId, Option<FileKind>), Read>,
) -> Result<Option<&'r Read>, ScanError> {
    // A blob is read again only when it is met under a name of another kind
    // (whose line rule differs): rare, and each read is bounded by the cap.
    if let Entry::Vacant(slot) = read.entry((entry.id, kind)) {
        let bytes = side.bytes(&entry.id, entry.size, cap)?.unwrap_or_default();
        let binary = bytes[..bytes.len().min(BINARY_PROBE)].contains(&0);
        let text = (!binary).then(|| String::from_utf8_lossy(&bytes));
        let mut findings: Vec<(Option<u64>, CredentialReason)> = scan_file(shown, text.as_deref())
            .into_iter()
            .map(|f| (f.line, f.reason))
            .collect();
        let more = findings.len().saturating_sub(FINDINGS_PER_FILE) as u64;
        findings.truncate(FINDINGS_PER_FILE);
        slot.insert(Read {
            findings,
            more,
            binary,
            shebang: bytes.starts_with(b"#!"),
        });
    }
    Ok(read.get(&(entry.id, kind)))
}

/// Why a file in `skills/` is a script the agent may run: executable, a shebang (`outcome`:
/// what its bytes said, when read), or a script extension.
fn skill_script_why(
    entry: &TreeEntry,
    shown: &str,
    outcome: Option<&Read>,
) -> Option<&'static str> {
    let extension = std::path::Path::new(shown)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if entry.kind == EntryKind::ExecFile {
        Some("executable")
    } else if outcome.is_some_and(|r| r.shebang) {
        Some("shebang")
    } else if extension.is_some_and(|e| SCRIPT_EXTENSIONS.contains(&e.as_str())) {
        Some("extension")
    } else {
        None
    }
}

/// Sorts every list of `out` by path (findings by path and line) and sets its parts, in
/// their rank.
fn sort(out: &mut FileScan, mut parts: Vec<Part>) {
    out.credentials
        .sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    out.credentials_more.sort_by(|a, b| a.path.cmp(&b.path));
    out.executables.sort();
    out.skill_scripts.sort_by(|a, b| a.path.cmp(&b.path));
    out.personal_files.sort();
    out.not_scanned.sort_by(|a, b| a.path.cmp(&b.path));
    parts.sort_by(|a, b| part_rank(&a.part).cmp(&part_rank(&b.part)));
    out.parts = parts;
}

/// The part a file at `path` belongs to (created on first use).
fn part_of<'p>(parts: &'p mut Vec<Part>, path: &BundlePath) -> &'p mut Part {
    let text = String::from_utf8_lossy(&path.0);
    let mut components = text.split('/');
    let first = components.next().unwrap_or_default();
    let name = match (first, components.next()) {
        (WORKSPACE_DIR, Some(_)) => WORKSPACE_DIR.to_string(),
        (SKILLS_DIR, Some(alias)) => format!("{SKILLS_DIR}/{}", escape_name(alias.as_bytes())),
        (CONFIG_FILE | MANIFEST_FILE, None) => first.to_string(),
        _ => "other".to_string(),
    };
    match parts.iter().position(|p| p.part == name) {
        Some(i) => &mut parts[i],
        None => {
            parts.push(Part {
                part: name,
                ..Part::default()
            });
            parts.last_mut().expect("just pushed")
        }
    }
}

/// Parts in the order a review lists them: the two bundle files, the workspace, each skill
/// bundle by alias, then anything else.
fn part_rank(part: &str) -> (u8, &str) {
    match part {
        MANIFEST_FILE => (0, part),
        CONFIG_FILE => (1, part),
        WORKSPACE_DIR => (2, part),
        "other" => (4, part),
        _ => (3, part),
    }
}

#[cfg(test)]
mod tests {
    use zeroclaw_bundle_store::{Store, Tree, TreeEntry};

    use super::*;
    use crate::diff::SourceSide;

    /// A file to write: its path components, mode and bytes.
    type Spec<'a> = (Vec<&'a str>, u32, &'a [u8]);

    /// Writes `files` (path, mode, bytes) as a tree into `store`: its root id.
    fn tree(store: &Store, files: &[(&str, u32, &[u8])]) -> ObjectId {
        fn dir(store: &Store, files: &[Spec<'_>]) -> (ObjectId, u64) {
            let mut entries = Vec::new();
            let mut subdirs: std::collections::BTreeMap<&str, Vec<Spec<'_>>> = Default::default();
            for (parts, mode, bytes) in files {
                if parts.len() == 1 {
                    let id = store.objects().write_bytes(bytes).unwrap();
                    entries.push(TreeEntry::file(
                        parts[0].as_bytes().to_vec(),
                        *mode,
                        bytes.len() as u64,
                        id,
                    ));
                } else {
                    subdirs
                        .entry(parts[0])
                        .or_default()
                        .push((parts[1..].to_vec(), *mode, bytes));
                }
            }
            for (name, files) in subdirs {
                let (id, size) = dir(store, &files);
                entries.push(TreeEntry::dir(name.as_bytes().to_vec(), size, id));
            }
            let size = entries.iter().map(|e| e.size).sum();
            let id = store
                .objects()
                .write_tree(&Tree::from_entries(entries).unwrap())
                .unwrap();
            (id, size)
        }
        let split: Vec<_> = files
            .iter()
            .map(|(p, m, b)| (p.split('/').collect::<Vec<_>>(), *m, *b))
            .collect();
        dir(store, &split).0
    }

    #[test]
    fn the_walk_bounds_reads_names_every_kind_and_counts_each_part() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("store")).unwrap();
        let token = b"export GH=ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5\n";
        let big = [b"x".repeat(100), token.to_vec()].concat();
        let root = tree(
            &store,
            &[
                ("zeroclaw-agent.toml", 0o644, b"format_version = 1\n"),
                ("workspace/USER.md", 0o644, b"likes tea\n"),
                // The same bytes under a plain name and a key name: each gets its kind's rule.
                ("workspace/a.txt", 0o644, b"plain\n"),
                ("workspace/b.key", 0o644, b"plain\n"),
                ("workspace/big.md", 0o644, &big),
                (
                    "workspace/blob.bin",
                    0o644,
                    b"\0\0ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5",
                ),
                ("workspace/notes.md", 0o644, token),
                ("skills/tools/web/run", 0o755, b"echo\n"),
                ("skills/tools/web/x.py", 0o644, b"print()\n"),
                ("skills/tools/web/SKILL.md", 0o644, b"# web\n"),
            ],
        );
        let source = store.objects().reader();
        let scan = scan(
            &SourceSide(&source),
            &root,
            64,
            Totals::default(),
            &crate::progress::Silent,
        )
        .unwrap();
        let found: Vec<(String, Option<u64>, CredentialReason)> = scan
            .credentials
            .iter()
            .map(|c| (c.path.display(), c.line, c.reason))
            .collect();
        assert_eq!(
            found,
            [
                ("workspace/b.key".into(), None, CredentialReason::KeyFile),
                (
                    "workspace/notes.md".into(),
                    Some(1),
                    CredentialReason::KnownTokenPrefix
                ),
            ],
            "the big file's token is past the cap and the binary's is not scanned"
        );
        assert_eq!(scan.not_scanned.len(), 1);
        assert_eq!(scan.not_scanned[0].path.display(), "workspace/big.md");
        assert_eq!(scan.binary_files, 1);
        assert_eq!(
            scan.executables
                .iter()
                .map(BundlePath::display)
                .collect::<Vec<_>>(),
            ["skills/tools/web/run"]
        );
        assert_eq!(
            scan.skill_scripts
                .iter()
                .map(|s| (s.path.display(), s.why))
                .collect::<Vec<_>>(),
            [
                ("skills/tools/web/run".to_string(), "executable"),
                ("skills/tools/web/x.py".to_string(), "extension"),
            ]
        );
        assert_eq!(
            scan.personal_files
                .iter()
                .map(BundlePath::display)
                .collect::<Vec<_>>(),
            ["workspace/USER.md"]
        );
        let parts: Vec<(&str, u64, Option<u64>)> = scan
            .parts
            .iter()
            .map(|p| (p.part.as_str(), p.files, p.skills))
            .collect();
        assert_eq!(
            parts,
            [
                ("zeroclaw-agent.toml", 1, None),
                ("workspace", 6, None),
                ("skills/tools", 3, Some(1)),
            ]
        );
    }

    #[test]
    fn a_file_full_of_tokens_lists_its_first_findings_and_counts_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("store")).unwrap();
        let dump = "export GH=ghp_aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5\n".repeat(15);
        let root = tree(&store, &[("workspace/dump.sh", 0o644, dump.as_bytes())]);
        let source = store.objects().reader();
        let scan = scan(
            &SourceSide(&source),
            &root,
            1 << 20,
            Totals::default(),
            &crate::progress::Silent,
        )
        .unwrap();
        assert_eq!(scan.credentials.len(), FINDINGS_PER_FILE);
        assert_eq!(scan.credentials[9].line, Some(10));
        assert_eq!(scan.credentials_more.len(), 1);
        assert_eq!(scan.credentials_more[0].more_lines, 5);
    }
}
