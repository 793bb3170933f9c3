//! The source of an import, captured into the store first: a bundle directory (captured like
//! `snapshot --dir`), a pack file (unpacked, every id checked), a remote ref (pulled), or a
//! snapshot of the store. Everything after this reads the snapshot's objects, never the
//! directory again, so what is imported is exactly the content id that was checked against
//! `--expect` (the grammar every verb reads: `crate::source`).

use std::ffi::OsStr;

use zeroclaw_bundle_store::{EntryKind, ObjectId, Snapshot, Store};

use crate::agent::{Manifest, CONFIG_FILE, MANIFEST_FILE, SKILLS_DIR, WORKSPACE_DIR};
use crate::progress::Progress;
use crate::review::source::{resolve, SourceError};
use crate::sign::AllowedSigners;
use crate::source::Takes;

use super::error::ImportError;

/// Bundle files above this are refused (a manifest or fragment is a few KiB).
const BUNDLE_FILE_CAP: u64 = 4 << 20;

/// What the source argument named.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A directory, captured.
    Directory,
    /// A pack file, unpacked.
    Pack,
    /// A remote snapshot, pulled.
    Remote,
    /// A snapshot already in the store.
    Snapshot,
}

/// A bundle in the store, read from its objects.
#[derive(Debug, Clone)]
pub struct StoredBundle {
    /// The snapshot.
    pub snapshot: ObjectId,
    /// Its record.
    pub record: Snapshot,
    /// What the source was.
    pub kind: SourceKind,
    /// The manifest.
    pub manifest: Manifest,
    /// The config fragment's text.
    pub fragment: String,
    /// The `workspace/` tree, when the bundle carries one.
    pub workspace: Option<Tree>,
    /// Each `skills/<alias>/` tree, by alias.
    pub skills: Vec<(String, Tree)>,
}

/// A tree of the bundle: its id and totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    /// The tree id.
    pub id: ObjectId,
    /// Bytes of its files.
    pub bytes: u64,
}

impl StoredBundle {
    /// The content id: the bundle's root tree (the same for every capture of the same bytes
    /// and modes, unlike the snapshot id, which records when and where).
    pub fn content_id(&self) -> ObjectId {
        self.record.root
    }
}

/// Captures `arg` into `store` through the one source resolver `review` uses (see the
/// module doc) and returns the snapshot id and kind.
/// With `require`, the snapshot must carry a signature these allowed signers trust, checked
/// before it becomes visible in the store: a pack's section before it is unpacked, a remote's
/// signatures before anything is pulled, a stored snapshot's own; a directory (which carries
/// none) is refused before it is captured.
pub fn capture(
    store: &Store,
    arg: &OsStr,
    require: Option<&AllowedSigners>,
    progress: &dyn Progress,
) -> Result<(ObjectId, SourceKind), ImportError> {
    let shown = arg.to_string_lossy().into_owned();
    let (id, source) =
        resolve(store, arg, Takes::IMPORT, require, progress).map_err(|e| match e {
            SourceError::Refused(e) => ImportError::Sign(e),
            SourceError::UnsignedDirectory { .. } => {
                ImportError::UnsignedDirectory { arg: shown.clone() }
            }
            SourceError::Pull { source, .. } => ImportError::Remote(*source),
            e => ImportError::Capture {
                arg: shown.clone(),
                source: e.into(),
            },
        })?;
    let kind = match source.kind {
        "directory" => SourceKind::Directory,
        "pack" => SourceKind::Pack,
        "remote" => SourceKind::Remote,
        _ => SourceKind::Snapshot,
    };
    if kind == SourceKind::Directory {
        // The capture's progress phase is over; the import's own phases follow.
        progress.finish();
    }
    Ok((id, kind))
}

/// Reads the bundle of snapshot `id` from the store's objects.
pub fn read(store: &Store, id: ObjectId, kind: SourceKind) -> Result<StoredBundle, ImportError> {
    let record = store.objects().read_snapshot(&id)?;
    let not = |problem: String| ImportError::NotABundle {
        snapshot: id,
        problem,
    };
    let root = store.objects().read_tree(&record.root)?;
    let file = |name: &str| -> Result<String, ImportError> {
        let entry = root
            .get(name.as_bytes())
            .filter(|e| e.kind.is_file())
            .ok_or_else(|| not(format!("it has no {name} at its root")))?;
        if entry.size > BUNDLE_FILE_CAP {
            return Err(not(format!("its {name} is {} bytes", entry.size)));
        }
        let bytes = store.objects().read_verified(&entry.id)?;
        String::from_utf8(bytes).map_err(|_| not(format!("its {name} is not UTF-8")))
    };
    let manifest_text = file(MANIFEST_FILE)?;
    let fragment = file(CONFIG_FILE)?;
    let manifest =
        Manifest::from_toml_str(&manifest_text).map_err(|source| ImportError::Bundle {
            file: MANIFEST_FILE,
            source,
        })?;
    let tree_of = |id: ObjectId, size: u64| Tree { id, bytes: size };
    let dir = |tree: &zeroclaw_bundle_store::Tree, name: &str, what: &str| match tree
        .get(name.as_bytes())
    {
        None => Ok(None),
        Some(e) if e.kind == EntryKind::Dir => Ok(Some(tree_of(e.id, e.size))),
        Some(_) => Err(not(format!("its {what} is not a directory"))),
    };
    let workspace = dir(&root, WORKSPACE_DIR, WORKSPACE_DIR)?;
    let mut skills = Vec::new();
    if let Some(skills_dir) = dir(&root, SKILLS_DIR, SKILLS_DIR)? {
        let tree = store.objects().read_tree(&skills_dir.id)?;
        for entry in tree.entries() {
            let alias = String::from_utf8(entry.name.clone())
                .map_err(|_| not("a skills/ entry is not UTF-8".to_string()))?;
            if !manifest.skill_bundles.contains(&alias) {
                return Err(not(format!(
                    "skills/{alias} is not one of the manifest's skill_bundles"
                )));
            }
            if entry.kind != EntryKind::Dir {
                return Err(not(format!("skills/{alias} is not a directory")));
            }
            skills.push((alias, tree_of(entry.id, entry.size)));
        }
    }
    for alias in &manifest.skill_bundles {
        if !skills.iter().any(|(a, _)| a == alias) {
            return Err(not(format!(
                "the manifest lists skill bundle {alias} but skills/{alias} is missing"
            )));
        }
    }
    Ok(StoredBundle {
        snapshot: id,
        record,
        kind,
        manifest,
        fragment,
        workspace,
        skills,
    })
}

/// The fewest hex digits `--expect` takes: 64 bits. The pin guards against a source changed
/// after review, by someone who may make the new content's id start like the reviewed one's;
/// 8 hex digits (32 bits) are found by trying a few billion variants of a file, 16 are not.
pub const EXPECT_MIN_HEX: usize = 16;

/// Checks `--expect` before anything is captured: the content id `review` printed, in full or
/// as a prefix of at least [`EXPECT_MIN_HEX`] hex digits. Anything else is refused: a ref
/// (`agent/researcher`) is no pin, since the source becomes that ref when it is captured and
/// would match itself; a shorter prefix can be matched by content made to match it.
/// Returns the id (prefix) in lowercase.
pub fn check_expect(expect: &str) -> Result<String, ImportError> {
    let given = expect.trim();
    let bad = |problem: String| ImportError::BadArgument {
        arg: format!("--expect {expect}"),
        problem,
    };
    let hex = !given.is_empty() && given.chars().all(|c| c.is_ascii_hexdigit());
    if !hex {
        return Err(bad(format!(
            "is not a content id; pass the content id `review` printed (64 hex digits, or a \
             prefix of {EXPECT_MIN_HEX} or more): a ref or a name is no pin, since the source \
             becomes that ref when it is captured and would match itself"
        )));
    }
    if given.len() < EXPECT_MIN_HEX {
        return Err(bad(format!(
            "an id prefix needs at least {EXPECT_MIN_HEX} hex digits (a shorter one can be \
             matched by content made to match it); pass the content id review printed"
        )));
    }
    if given.len() > 64 {
        return Err(bad(
            "is longer than a content id (64 hex digits); pass the content id review printed"
                .to_string(),
        ));
    }
    Ok(given.to_ascii_lowercase())
}

/// Whether `expect` (as [`check_expect`] returned it) is the content id of `bundle` or a
/// prefix of it. `Err` when it is not, but names the bundle's snapshot instead: that is a
/// mistake of hand, said so (the content id is what review prints and what is pinned).
pub fn matches_expect(bundle: &StoredBundle, expect: &str) -> Result<bool, ImportError> {
    if bundle.content_id().to_hex().starts_with(expect) {
        return Ok(true);
    }
    if bundle.snapshot.to_hex().starts_with(expect) {
        return Err(ImportError::BadArgument {
            arg: format!("--expect {expect}"),
            problem: format!(
                "is the snapshot id of the source, not its content id; pass the content id \
                 review printed (here {})",
                bundle.content_id()
            ),
        });
    }
    Ok(false)
}
