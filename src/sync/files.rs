//! The three-way merge of an agent's files: per path, what an update takes, keeps, deletes or
//! finds in conflict, and what a [`Conflicts`] policy makes of the conflicts.
//!
//! Each side is a flattened tree ([`Side`]): relative paths (bytes, `/` between components,
//! no empty, `.` or `..` component) to what is there. Files are compared by blob id and mode,
//! so a mode-only change (the execute bit) is a change. A directory needs an entry only when
//! it is empty; one whose files are listed is implied by them (the plan lists every
//! directory, the merged tree again only the empty ones). Directories compare equal whatever
//! their tree id: they have no content of their own and merge by what is in them, so a path
//! removed on one side and turned from or into a directory on the other is no conflict.
//!
//! Invariants of a plan, which the tests check over random rounds:
//! - a path changed on one side only ends as that side has it, unless it lies inside a
//!   file/directory conflict ([`ConflictKind::FileDirectory`]);
//! - a path changed the same way on both sides is never a conflict of its own;
//! - a path no export carries (the caller's predicate: memory, `MEMORY_SNAPSHOT.md`, ...) is
//!   never written, deleted or replaced, whatever the incoming side holds there;
//! - the merged tree never has a file where it has a directory.
//!
//! A path that is a file on one side and a directory on the other (or under which one side
//! keeps something) makes the whole subtree at that path one conflict, resolved as a unit:
//! all local, all incoming, or local plus the incoming subtree under a conflict-copy name.

use std::collections::{BTreeMap, BTreeSet};

use zeroclaw_bundle_store::{EntryKind, IdHasher, ObjectId, DIR_MODE, MODE_BITS};

use super::{ConflictKind, Conflicts, Stamp};

/// The longest file name Linux file systems take (NAME_MAX): a conflict-copy name is
/// shortened to fit.
const NAME_MAX: usize = 255;

/// What one side has at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// File, exec-file or (empty) directory.
    pub(crate) kind: EntryKind,
    /// Permission bits of a file ([`DIR_MODE`] for a directory).
    pub(crate) mode: u32,
    /// The blob id of a file; not compared for a directory.
    pub(crate) id: ObjectId,
}

impl Entry {
    /// A regular file with permission bits `mode` holding blob `id`.
    pub(crate) fn file(mode: u32, id: ObjectId) -> Entry {
        let mode = mode & MODE_BITS;
        Entry {
            kind: EntryKind::of_file_mode(mode),
            mode,
            id,
        }
    }

    /// A directory (needed in a [`Side`] only when it is empty).
    pub(crate) fn dir() -> Entry {
        Entry {
            kind: EntryKind::Dir,
            mode: DIR_MODE,
            id: ObjectId::from_bytes([0; ObjectId::LEN]),
        }
    }

    fn is_dir(&self) -> bool {
        self.kind == EntryKind::Dir
    }

    /// The same version: the same file content and mode, or both directories.
    fn same(&self, other: &Entry) -> bool {
        (self.is_dir() && other.is_dir()) || self == other
    }
}

/// A flattened tree: path to entry.
pub(crate) type Side = BTreeMap<Vec<u8>, Entry>;

/// What the merge does at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Local and incoming agree (unchanged, changed the same way, or deleted on both sides).
    Same,
    /// Changed only upstream: the incoming entry is written.
    Take(Entry),
    /// Changed only here: the local entry stays.
    Keep(Entry),
    /// Removed upstream and unchanged here: removed.
    Delete,
    /// Removed here and unchanged upstream: stays removed.
    KeepLocalDeletion,
    /// No export carries the path: left as it is here, whatever the incoming side holds.
    Untouched,
    /// Changed differently on both sides (or inside a file/directory conflict).
    Conflict(ConflictKind),
}

/// One conflict: a path, or for [`ConflictKind::FileDirectory`] the subtree at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileConflict {
    /// The conflicting path (the file/directory point of a subtree conflict).
    pub(crate) path: Vec<u8>,
    pub(crate) kind: ConflictKind,
    /// The local entries at `path` and beneath it.
    pub(crate) local: Side,
    /// The incoming entries at `path` and beneath it, except paths no export carries.
    pub(crate) incoming: Side,
    /// The subtree holds a local path no export carries: taking the incoming side would
    /// replace it, so only keep-local and copy resolve it.
    pub(crate) holds_uncarried: bool,
}

/// The three-way plan of an update's files, before any conflict is resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FilePlan {
    /// Every path of any side and its decision.
    pub(crate) paths: BTreeMap<Vec<u8>, Decision>,
    /// The conflicts, by path.
    pub(crate) conflicts: Vec<FileConflict>,
    /// The merged entries of every path outside a conflict.
    settled: Side,
}

/// How a policy resolved one conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resolution {
    KeptLocal,
    TookIncoming,
    /// Local kept, the incoming side written at `to` (a sibling of the conflicting path).
    Copied {
        to: Vec<u8>,
    },
}

/// One resolved conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub(crate) path: Vec<u8>,
    pub(crate) kind: ConflictKind,
    pub(crate) how: Resolution,
}

/// The merged files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergedFiles {
    /// The agent's files after the update (conflict copies included).
    pub(crate) tree: Side,
    /// Every conflict and how it was resolved, by path.
    pub(crate) resolved: Vec<Resolved>,
}

/// Why a conflict stayed unresolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// The policy is [`Conflicts::Refuse`].
    Refused,
    /// Taking the incoming side would replace a local path no export carries.
    Uncarried,
}

/// One conflict the policy left unresolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unresolved {
    pub(crate) path: Vec<u8>,
    pub(crate) kind: ConflictKind,
    pub(crate) why: Why,
}

/// An update refused: nothing may be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    /// The conflicts left unresolved, by path.
    pub(crate) conflicts: Vec<Unresolved>,
}

/// The three-way plan from `base` (last imported), `local` (now) and `incoming` (the new
/// bundle). `uncarried` says which paths no export carries: they are never touched.
pub(crate) fn plan(
    base: &Side,
    local: &Side,
    incoming: &Side,
    uncarried: &dyn Fn(&[u8]) -> bool,
) -> FilePlan {
    // Every directory explicit on every side: a directory made here as an empty one and
    // upstream with files in it is the same change.
    let base = &complete(base.iter());
    let local = &complete(local.iter());
    let incoming = &complete(incoming.iter().filter(|(p, _)| !uncarried(p)));
    let all: BTreeSet<&Vec<u8>> = base
        .keys()
        .chain(local.keys())
        .chain(incoming.keys())
        .collect();
    let mut paths: BTreeMap<Vec<u8>, Decision> = all
        .into_iter()
        .map(|path| {
            let decision = if uncarried(path) {
                Decision::Untouched
            } else {
                classify(base.get(path), local.get(path), incoming.get(path))
            };
            (path.clone(), decision)
        })
        .collect();
    let mut conflicts = Vec::new();
    let mut grouped = BTreeSet::new();
    for root in file_directory_roots(&paths, local, incoming) {
        let members: Vec<Vec<u8>> = at_and_under(&paths, &root)
            .map(|(p, _)| p.clone())
            .collect();
        let mut holds_uncarried = false;
        for path in members {
            if paths[&path] == Decision::Untouched {
                holds_uncarried |= local.contains_key(&path);
            } else {
                paths.insert(
                    path.clone(),
                    Decision::Conflict(ConflictKind::FileDirectory),
                );
            }
            grouped.insert(path);
        }
        conflicts.push(FileConflict {
            kind: ConflictKind::FileDirectory,
            local: at_and_under(local, &root)
                .map(|(p, e)| (p.clone(), *e))
                .collect(),
            incoming: at_and_under(incoming, &root)
                .filter(|(p, _)| !uncarried(p))
                .map(|(p, e)| (p.clone(), *e))
                .collect(),
            path: root,
            holds_uncarried,
        });
    }
    let mut settled = Side::new();
    for (path, decision) in &paths {
        if grouped.contains(path) {
            continue;
        }
        let outcome = match decision {
            Decision::Same | Decision::Keep(_) | Decision::Untouched => local.get(path),
            Decision::Take(entry) => Some(entry),
            Decision::Delete | Decision::KeepLocalDeletion => None,
            Decision::Conflict(kind) => {
                let one = |side: &Side| side.get(path).map(|e| (path.clone(), *e)).into_iter();
                conflicts.push(FileConflict {
                    path: path.clone(),
                    kind: *kind,
                    local: one(local).collect(),
                    incoming: one(incoming).collect(),
                    holds_uncarried: false,
                });
                None
            }
        };
        if let Some(entry) = outcome {
            settled.insert(path.clone(), *entry);
        }
    }
    conflicts.sort_by(|a, b| a.path.cmp(&b.path));
    FilePlan {
        paths,
        conflicts,
        settled,
    }
}

/// `entries` with an entry for every directory their paths imply.
fn complete<'a>(entries: impl Iterator<Item = (&'a Vec<u8>, &'a Entry)>) -> Side {
    let mut side = Side::new();
    for (path, entry) in entries {
        for dir in ancestors(path) {
            side.entry(dir.to_vec()).or_insert_with(Entry::dir);
        }
        side.insert(path.clone(), *entry);
    }
    side
}

/// Drops the directory entries that something beneath implies (a [`Side`] lists a
/// directory only when it is empty).
fn drop_implied(tree: &mut Side) {
    let implied: Vec<Vec<u8>> = tree
        .iter()
        .filter(|(path, entry)| {
            let below = below_prefix(path);
            entry.is_dir()
                && tree
                    .range(below.clone()..)
                    .next()
                    .is_some_and(|(q, _)| q.starts_with(&below))
        })
        .map(|(path, _)| path.clone())
        .collect();
    for path in implied {
        tree.remove(&path);
    }
}

/// The per-path rule: one side changed, that side wins; both the same way, nothing to do;
/// both differently, a conflict.
fn classify(base: Option<&Entry>, local: Option<&Entry>, incoming: Option<&Entry>) -> Decision {
    let same = |a: Option<&Entry>, b: Option<&Entry>| match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same(b),
        _ => false,
    };
    if same(local, incoming) {
        return Decision::Same;
    }
    if same(local, base) {
        return incoming.map_or(Decision::Delete, |e| Decision::Take(*e));
    }
    if same(incoming, base) {
        return local.map_or(Decision::KeepLocalDeletion, |e| Decision::Keep(*e));
    }
    // Removed on one side, turned from or into a directory on the other: a directory holds
    // no content of its own (what is in it merges path by path), so nothing of the removing
    // side is lost when the other side's entry stands.
    let structural = |present: &Entry| present.is_dir() || base.is_some_and(Entry::is_dir);
    match (local, incoming) {
        (None, Some(i)) if structural(i) => return Decision::Take(*i),
        (Some(l), None) if structural(l) => return Decision::Keep(*l),
        _ => {}
    }
    Decision::Conflict(match (base, local, incoming) {
        (_, Some(l), Some(i)) if l.is_dir() != i.is_dir() => ConflictKind::FileDirectory,
        (None, _, _) => ConflictKind::BothAdded,
        (Some(_), None, _) => ConflictKind::DeletedLocally,
        (Some(_), _, None) => ConflictKind::DeletedUpstream,
        (Some(_), Some(_), Some(_)) => ConflictKind::BothModified,
    })
}

/// The topmost paths where the merged tree could hold a file and, at or beneath it, a
/// directory or anything else, counting both sides of every conflict.
fn file_directory_roots(
    paths: &BTreeMap<Vec<u8>, Decision>,
    local: &Side,
    incoming: &Side,
) -> Vec<Vec<u8>> {
    let mut files = BTreeSet::new();
    let mut dirs = BTreeSet::new();
    let mut exist: BTreeSet<&[u8]> = BTreeSet::new();
    for (path, decision) in paths {
        let outcomes = match decision {
            Decision::Same | Decision::Keep(_) | Decision::Untouched => [local.get(path), None],
            Decision::Take(entry) => [Some(entry), None],
            Decision::Delete | Decision::KeepLocalDeletion => [None, None],
            Decision::Conflict(_) => [local.get(path), incoming.get(path)],
        };
        for entry in outcomes.into_iter().flatten() {
            exist.insert(path);
            if entry.is_dir() {
                dirs.insert(path.as_slice());
            } else {
                files.insert(path.as_slice());
            }
        }
    }
    let clashing: BTreeSet<&[u8]> = files
        .into_iter()
        .filter(|path| {
            let below = below_prefix(path);
            dirs.contains(path)
                || exist
                    .range(below.as_slice()..)
                    .next()
                    .is_some_and(|q| q.starts_with(&below))
        })
        .collect();
    clashing
        .iter()
        .filter(|path| !ancestors(path).any(|a| clashing.contains(a)))
        .map(|path| path.to_vec())
        .collect()
}

/// `path` followed by `/`: every path beneath `path` starts with it.
fn below_prefix(path: &[u8]) -> Vec<u8> {
    let mut below = path.to_vec();
    below.push(b'/');
    below
}

/// The proper ancestors of `path` (`a`, `a/b` for `a/b/c`).
fn ancestors(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(move |(i, _)| &path[..i])
}

/// The entries of `map` at `path` and beneath it. (`a-b` and `a.b` sort between `a` and
/// `a/`, so this is two lookups, not one range.)
fn at_and_under<'a, V>(
    map: &'a BTreeMap<Vec<u8>, V>,
    path: &[u8],
) -> impl Iterator<Item = (&'a Vec<u8>, &'a V)> {
    let below = below_prefix(path);
    map.get_key_value(path).into_iter().chain(
        map.range(below.clone()..)
            .take_while(move |(p, _)| p.starts_with(&below)),
    )
}

impl FilePlan {
    /// The merged files under `policy`; `stamp` dates the conflict copies of
    /// [`Conflicts::Copy`]. Refused when a conflict stays unresolved: under
    /// [`Conflicts::Refuse`] every conflict, under [`Conflicts::TakeIncoming`] one that would
    /// replace a local path no export carries.
    pub(crate) fn resolve(&self, policy: Conflicts, stamp: &Stamp) -> Result<MergedFiles, Refused> {
        let unresolved: Vec<Unresolved> = self
            .conflicts
            .iter()
            .filter_map(|c| {
                let why = match policy {
                    Conflicts::Refuse => Why::Refused,
                    Conflicts::TakeIncoming if c.holds_uncarried => Why::Uncarried,
                    _ => return None,
                };
                Some(Unresolved {
                    path: c.path.clone(),
                    kind: c.kind,
                    why,
                })
            })
            .collect();
        if !unresolved.is_empty() {
            return Err(Refused {
                conflicts: unresolved,
            });
        }
        let mut tree = self.settled.clone();
        for conflict in &self.conflicts {
            let side = match policy {
                Conflicts::TakeIncoming => &conflict.incoming,
                _ => &conflict.local,
            };
            tree.extend(side.iter().map(|(p, e)| (p.clone(), *e)));
        }
        // Copies are placed once every kept entry is in: a copy name never lands on one.
        let mut resolved = Vec::new();
        for conflict in &self.conflicts {
            let how = match policy {
                Conflicts::TakeIncoming => Resolution::TookIncoming,
                Conflicts::Copy if !conflict.incoming.is_empty() => Resolution::Copied {
                    to: place_copy(&mut tree, conflict, stamp),
                },
                _ => Resolution::KeptLocal,
            };
            resolved.push(Resolved {
                path: conflict.path.clone(),
                kind: conflict.kind,
                how,
            });
        }
        drop_implied(&mut tree);
        Ok(MergedFiles { tree, resolved })
    }
}

/// Writes the incoming side of `conflict` into `tree` beside the conflicting path, under the
/// first conflict-copy name that is free (or already holds that very file), and returns it.
fn place_copy(tree: &mut Side, conflict: &FileConflict, stamp: &Stamp) -> Vec<u8> {
    let id8 = copy_id(conflict).short(8);
    let (parent, name) = match conflict.path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&conflict.path[..=i], &conflict.path[i + 1..]),
        None => (&[][..], conflict.path.as_slice()),
    };
    let mut n = 1;
    loop {
        let mut to = parent.to_vec();
        to.extend(conflict_name(name, stamp, &id8, n));
        let below = below_prefix(&to);
        let nothing_below = !tree
            .range(below.clone()..)
            .next()
            .is_some_and(|(p, _)| p.starts_with(&below));
        let free = match tree.get(&to) {
            None => nothing_below,
            // The same file copied by an earlier run in the same second.
            Some(there) => nothing_below && conflict.incoming.get(&conflict.path) == Some(there),
        };
        if free {
            for (path, entry) in &conflict.incoming {
                let mut at = to.clone();
                at.extend_from_slice(&path[conflict.path.len()..]);
                tree.insert(at, *entry);
            }
            return to;
        }
        n += 1;
    }
}

/// What a copy name's `<id8>` abbreviates: the incoming file's blob id, or for a subtree an
/// id of its listing.
fn copy_id(conflict: &FileConflict) -> ObjectId {
    match conflict.incoming.get(&conflict.path) {
        Some(entry) if !entry.is_dir() && conflict.incoming.len() == 1 => entry.id,
        _ => {
            let mut hasher = IdHasher::new();
            for (path, entry) in &conflict.incoming {
                hasher.update(&path[conflict.path.len()..]);
                hasher.update(&[0]);
                hasher.update(&entry.mode.to_be_bytes());
                if !entry.is_dir() {
                    hasher.update(entry.id.as_bytes());
                }
            }
            hasher.finish()
        }
    }
}

/// The conflict-copy name of file name `name`: `NAME.sync-conflict-<stamp>-<id8>.EXT`
/// (`a.md` -> `a.sync-conflict-20261204-231500-1a2b3c4d.md`). A name without an extension,
/// or a dotfile such as `.env`, gets the tag at its end. The `n`th attempt (n > 1) appends
/// `-n` to the id. The stem is shortened so the name fits NAME_MAX.
pub(crate) fn conflict_name(name: &[u8], stamp: &Stamp, id8: &str, n: u32) -> Vec<u8> {
    let mut tag = format!(".sync-conflict-{}-{id8}", stamp.as_str());
    if n > 1 {
        tag.push_str(&format!("-{n}"));
    }
    let dot = name
        .iter()
        .rposition(|b| *b == b'.')
        .filter(|&i| i > 0 && i + 1 < name.len() && tag.len() + name.len() - i <= NAME_MAX);
    let (stem, ext) = match dot {
        Some(i) => name.split_at(i),
        None => (name, &[][..]),
    };
    let room = NAME_MAX.saturating_sub(tag.len() + ext.len());
    let mut cut = stem.len().min(room);
    if let Ok(text) = std::str::from_utf8(stem) {
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
    }
    let mut out = stem[..cut].to_vec();
    out.extend_from_slice(tag.as_bytes());
    out.extend_from_slice(ext);
    out
}
