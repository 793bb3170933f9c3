//! Tree diff: what changed between two trees, walking both in name order and skipping every
//! pair of equal subtree ids (Merkle pruning), so the cost grows with the change, not with the
//! bundle. Either side can be anything that hands out trees by id ([`TreeSide`]): a store
//! snapshot (or a subtree of one), or a directory hashed in memory by a hash-only capture.
//!
//! Changes are reported per file, as git's name-status: `A` added, `D` deleted, `M` modified
//! (content; the mode may have changed too, both sides carry it), `T` kind changed (file <->
//! directory), `X` only the permission bits changed (same content, another mode: `0600` ->
//! `0644`, or the executable bit), and `R` exact renames (a deleted and an added file with the same content id, paired in path
//! order). `M`, `T` and `X` are handed out as the walk finds them; added and deleted files are
//! held until the walk ends so renames can be paired, then handed out in path order.
//!
//! [`side`] resolves what a side argument names (a snapshot, `SNAP:PATH`, a directory hashed on
//! the fly, a pack, a remote ref) and [`compare`] runs a whole diff of two sides (the semantic
//! section, the grants gate, the walk); the `diff` command only parses, calls them and prints.

pub mod compare;
pub mod content;
pub mod side;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use zeroclaw_bundle_store::{
    escape_name, EntryKind, ObjectId, ObjectSource, StoreError, Tree, TreeEntry,
};

use crate::capture::MemoryObjects;

/// One side of a diff: its trees, and the bytes of small files (for content and semantic
/// diffs).
pub trait TreeSide {
    /// The tree with this id.
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError>;
    /// The bytes of a file of at most `limit` bytes, verified against its id; `None` when this
    /// side does not hold them (a hash-only side keeps only what it was asked to).
    fn bytes(&self, id: &ObjectId, size: u64, limit: u64) -> Result<Option<Vec<u8>>, StoreError>;
    /// Hints that these trees will be read soon (so cold reads overlap). Default: nothing.
    fn prefetch(&self, _ids: &[ObjectId]) {}
}

/// A store, a pack, anything that implements the store's [`ObjectSource`].
pub struct SourceSide<'a>(pub &'a dyn ObjectSource);

impl TreeSide for SourceSide<'_> {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.0.tree(id)
    }

    fn prefetch(&self, ids: &[ObjectId]) {
        self.0.prefetch(ids);
    }

    fn bytes(&self, id: &ObjectId, size: u64, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
        if size > limit {
            return Ok(None);
        }
        // A digest pack holds no blobs: its files have ids, not bytes. The size the tree
        // records is all that is read: a blob of another length is refused (a pack refuses
        // it from its index, before decompressing anything).
        let blob = match self.0.blob_of_size(id, size) {
            Err(StoreError::MissingObject(_)) => return Ok(None),
            other => other?,
        };
        blob.verify(id)?;
        let mut buf = vec![0u8; size as usize];
        let mut pos = 0usize;
        while pos < buf.len() {
            let n = blob
                .read_at(&mut buf[pos..], pos as u64)
                .map_err(|source| StoreError::Io {
                    op: "read object",
                    path: id.to_hex().into(),
                    error: source,
                })?;
            if n == 0 {
                break;
            }
            pos += n;
        }
        buf.truncate(pos);
        Ok(Some(buf))
    }
}

/// A directory hashed in memory by a hash-only capture.
pub struct MemorySide<'a>(pub &'a MemoryObjects);

impl TreeSide for MemorySide<'_> {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.0.tree(id).ok_or(StoreError::MissingObject(*id))
    }

    fn bytes(&self, id: &ObjectId, size: u64, limit: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(if size > limit { None } else { self.0.blob(id) })
    }
}

/// The status letter of a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Status {
    /// Added.
    A,
    /// Deleted.
    D,
    /// Modified content.
    M,
    /// Kind changed (file <-> directory).
    T,
    /// Only the permission bits changed (same content).
    X,
    /// Renamed (same content, new path).
    R,
}

/// One side of a changed entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EntryInfo {
    /// `file`, `exec-file` or `dir`.
    pub kind: &'static str,
    /// Permission bits as four octal digits (`0600`); `0755` for a directory.
    pub mode: String,
    /// Bytes (for a directory: the total beneath).
    pub size: u64,
    /// Content or tree id.
    pub id: ObjectId,
}

impl EntryInfo {
    fn of(e: &TreeEntry) -> EntryInfo {
        EntryInfo {
            kind: match e.kind {
                EntryKind::File => "file",
                EntryKind::ExecFile => "exec-file",
                EntryKind::Dir => "dir",
            },
            mode: e.mode_octal(),
            size: e.size,
            id: e.id,
        }
    }
}

/// One change, by path (names escaped as everywhere else: control characters and non-UTF-8
/// bytes as `\xNN`). Its serialization (the `diff --json` line, raw names restored) is in
/// `crate::api`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// What happened.
    pub status: Status,
    /// The path on side B (on side A for a deletion).
    pub path: String,
    /// For a rename, the path on side A.
    pub from: Option<String>,
    /// The entry on side A.
    pub old: Option<EntryInfo>,
    /// The entry on side B.
    pub new: Option<EntryInfo>,
}

/// Totals of a diff.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Changes by status.
    pub added: u64,
    /// Deleted files.
    pub deleted: u64,
    /// Modified files.
    pub modified: u64,
    /// Kind changes.
    pub kind_changed: u64,
    /// Mode-only changes (`X`).
    pub mode_changed: u64,
    /// Renames.
    pub renamed: u64,
    /// Bytes on side B not on side A (added files, growth of modified files).
    pub bytes_added: u64,
    /// Bytes on side A not on side B.
    pub bytes_removed: u64,
    /// Tree objects read from both sides (what Merkle pruning saves shows here).
    pub trees_read: u64,
}

impl Summary {
    /// Whether the two sides differ at all.
    pub fn differs(&self) -> bool {
        self.added
            + self.deleted
            + self.modified
            + self.kind_changed
            + self.mode_changed
            + self.renamed
            > 0
    }

    fn count(&mut self, c: &Change) {
        let old = c.old.as_ref().map_or(0, |e| e.size);
        let new = c.new.as_ref().map_or(0, |e| e.size);
        *self.counter(c.status) += 1;
        if c.status != Status::T {
            self.bytes_added += new.saturating_sub(old);
            self.bytes_removed += old.saturating_sub(new);
        }
    }

    /// Takes back a change the walk counted (one the caller leaves out of its report, such as
    /// a manifest that differs only in its export time).
    pub fn discount(&mut self, c: &Change) {
        let old = c.old.as_ref().map_or(0, |e| e.size);
        let new = c.new.as_ref().map_or(0, |e| e.size);
        let n = self.counter(c.status);
        *n = n.saturating_sub(1);
        if c.status != Status::T {
            self.bytes_added = self.bytes_added.saturating_sub(new.saturating_sub(old));
            self.bytes_removed = self.bytes_removed.saturating_sub(old.saturating_sub(new));
        }
    }

    fn counter(&mut self, status: Status) -> &mut u64 {
        match status {
            Status::A => &mut self.added,
            Status::D => &mut self.deleted,
            Status::M => &mut self.modified,
            Status::T => &mut self.kind_changed,
            Status::X => &mut self.mode_changed,
            Status::R => &mut self.renamed,
        }
    }
}

/// A root to compare: a directory tree or a single file entry.
#[derive(Clone, Debug)]
pub struct Root {
    /// The entry (a synthetic directory entry for a snapshot's root).
    pub entry: TreeEntry,
}

/// Deepest nesting walked before the diff fails: the store's limit for any tree it expands
/// (trees come from other hosts, so depth is attacker-controlled; the walk itself is iterative
/// and this only bounds its memory).
pub const MAX_DEPTH: usize = zeroclaw_bundle_store::limits::MAX_DEPTH as usize;

/// Why a diff failed.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// A side could not hand out a tree.
    #[error("could not read side {side}")]
    Read {
        /// `A` or `B`.
        side: char,
        /// The store's error.
        source: StoreError,
    },
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("side {side} nests deeper than {MAX_DEPTH} directories at {path}")]
    TooDeep {
        /// `A` or `B`.
        side: char,
        /// Where.
        path: String,
    },
    /// The consumer of the changes failed (a closed pipe, say).
    #[error("could not write the changes")]
    Output(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// One open directory pair of the walk.
struct Frame {
    prefix: String,
    a: Vec<TreeEntry>,
    b: Vec<TreeEntry>,
    i: usize,
    j: usize,
}

/// Compares `a` and `b`, handing each change to `emit` (see the module docs for the order),
/// and returns the totals.
pub fn diff(
    a: &dyn TreeSide,
    a_root: &Root,
    b: &dyn TreeSide,
    b_root: &Root,
    emit: &mut dyn FnMut(&Change) -> Result<(), DiffError>,
) -> Result<Summary, DiffError> {
    let mut walk = Walk {
        a,
        b,
        summary: Summary::default(),
        added: BTreeMap::new(),
        deleted: BTreeMap::new(),
        emit,
    };
    let (ea, eb) = (&a_root.entry, &b_root.entry);
    let root_path = if ea.kind == EntryKind::Dir && eb.kind == EntryKind::Dir {
        String::new()
    } else {
        escape_name(if eb.name.is_empty() {
            &ea.name
        } else {
            &eb.name
        })
    };
    let mut children = Vec::new();
    walk.pair(&root_path, Some(ea), Some(eb), &mut children)?;
    for (path, ca, cb) in children {
        walk.dirs(path, ca.as_ref(), cb.as_ref())?;
    }
    walk.finish()
}

struct Walk<'w> {
    a: &'w dyn TreeSide,
    b: &'w dyn TreeSide,
    summary: Summary,
    /// Added and deleted files by path, held for rename pairing.
    added: BTreeMap<String, TreeEntry>,
    deleted: BTreeMap<String, TreeEntry>,
    emit: &'w mut dyn FnMut(&Change) -> Result<(), DiffError>,
}

impl Walk<'_> {
    fn read(&mut self, side: char, id: Option<&ObjectId>) -> Result<Vec<TreeEntry>, DiffError> {
        let Some(id) = id else {
            return Ok(Vec::new());
        };
        self.summary.trees_read += 1;
        let source = if side == 'A' { self.a } else { self.b };
        source
            .tree(id)
            .map(Tree::into_entries)
            .map_err(|source| DiffError::Read { side, source })
    }

    /// Reads a directory pair into a frame, and hints the subdirectories that differ between
    /// the two sides to their stores: those are the trees the walk reads next, and asking for
    /// them together lets a cold walk overlap its reads instead of waiting for each in turn.
    fn frame(
        &mut self,
        prefix: String,
        a: Option<&ObjectId>,
        b: Option<&ObjectId>,
    ) -> Result<Frame, DiffError> {
        let (ea, eb) = (self.read('A', a)?, self.read('B', b)?);
        let differing = |mine: &[TreeEntry], theirs: &[TreeEntry]| -> Vec<ObjectId> {
            mine.iter()
                .filter(|e| e.kind == EntryKind::Dir)
                .filter(|e| {
                    // Entries are sorted by name: a binary search keeps this linear-logarithmic
                    // in huge directories.
                    theirs
                        .binary_search_by(|t| t.name.cmp(&e.name))
                        .map_or(true, |i| theirs[i].id != e.id)
                })
                .map(|e| e.id)
                .collect()
        };
        self.a.prefetch(&differing(&ea, &eb));
        self.b.prefetch(&differing(&eb, &ea));
        Ok(Frame {
            prefix,
            a: ea,
            b: eb,
            i: 0,
            j: 0,
        })
    }

    /// Walks a directory pair (either may be absent) in name order, depth first, without
    /// recursion.
    fn dirs(
        &mut self,
        prefix: String,
        a: Option<&ObjectId>,
        b: Option<&ObjectId>,
    ) -> Result<(), DiffError> {
        if a.is_some() && a == b {
            return Ok(());
        }
        let first = self.frame(prefix, a, b)?;
        let mut stack = vec![first];
        while let Some(frame) = stack.last_mut() {
            let next = match (frame.a.get(frame.i), frame.b.get(frame.j)) {
                (None, None) => {
                    stack.pop();
                    continue;
                }
                (Some(x), Some(y)) if x.name == y.name => {
                    frame.i += 1;
                    frame.j += 1;
                    (Some(x.clone()), Some(y.clone()))
                }
                (Some(x), Some(y)) if x.name < y.name => {
                    frame.i += 1;
                    (Some(x.clone()), None)
                }
                (Some(x), None) => {
                    frame.i += 1;
                    (Some(x.clone()), None)
                }
                (_, Some(y)) => {
                    frame.j += 1;
                    (None, Some(y.clone()))
                }
            };
            let name = next.0.as_ref().or(next.1.as_ref()).map(|e| e.name.clone());
            let path = join(&frame.prefix, &escape_name(&name.unwrap_or_default()));
            let mut children = Vec::new();
            self.pair(&path, next.0.as_ref(), next.1.as_ref(), &mut children)?;
            for (child_path, ca, cb) in children.into_iter().rev() {
                if stack.len() >= MAX_DEPTH {
                    let side = if ca.is_some() { 'A' } else { 'B' };
                    return Err(DiffError::TooDeep {
                        side,
                        path: child_path,
                    });
                }
                let frame = self.frame(child_path, ca.as_ref(), cb.as_ref())?;
                stack.push(frame);
            }
        }
        Ok(())
    }

    /// Compares one name present on either side. Directory pairs to walk are pushed to
    /// `children` (path, A tree, B tree).
    fn pair(
        &mut self,
        path: &str,
        a: Option<&TreeEntry>,
        b: Option<&TreeEntry>,
        children: &mut Vec<(String, Option<ObjectId>, Option<ObjectId>)>,
    ) -> Result<(), DiffError> {
        match (a, b) {
            (Some(x), Some(y)) if x.id == y.id && x.kind == y.kind && x.mode == y.mode => {}
            (Some(x), Some(y)) if x.kind == EntryKind::Dir && y.kind == EntryKind::Dir => {
                children.push((path.to_string(), Some(x.id), Some(y.id)));
            }
            (Some(x), Some(y)) if x.kind.is_file() && y.kind.is_file() => {
                let status = if x.id == y.id { Status::X } else { Status::M };
                self.out(Change {
                    status,
                    path: path.to_string(),
                    from: None,
                    old: Some(EntryInfo::of(x)),
                    new: Some(EntryInfo::of(y)),
                })?;
            }
            (Some(x), Some(y)) => {
                // A file became a directory or the other way round: say so, then list what
                // the directory side holds as added or deleted.
                self.out(Change {
                    status: Status::T,
                    path: path.to_string(),
                    from: None,
                    old: Some(EntryInfo::of(x)),
                    new: Some(EntryInfo::of(y)),
                })?;
                if x.kind == EntryKind::Dir {
                    children.push((path.to_string(), Some(x.id), None));
                } else {
                    children.push((path.to_string(), None, Some(y.id)));
                }
            }
            (Some(x), None) if x.kind == EntryKind::Dir => {
                children.push((path.to_string(), Some(x.id), None));
            }
            (None, Some(y)) if y.kind == EntryKind::Dir => {
                children.push((path.to_string(), None, Some(y.id)));
            }
            (Some(x), None) => {
                self.deleted.insert(path.to_string(), x.clone());
            }
            (None, Some(y)) => {
                self.added.insert(path.to_string(), y.clone());
            }
            (None, None) => {}
        }
        Ok(())
    }

    fn out(&mut self, change: Change) -> Result<(), DiffError> {
        self.summary.count(&change);
        (self.emit)(&change)
    }

    /// Pairs exact renames, then hands out the held additions, deletions and renames in path
    /// order.
    fn finish(mut self) -> Result<Summary, DiffError> {
        let mut by_id: HashMap<ObjectId, Vec<String>> = HashMap::new();
        for (path, e) in &self.deleted {
            by_id.entry(e.id).or_default().push(path.clone());
        }
        for paths in by_id.values_mut() {
            paths.reverse(); // pop() takes them in path order
        }
        let mut held: Vec<Change> = Vec::new();
        let added = std::mem::take(&mut self.added);
        let mut deleted = std::mem::take(&mut self.deleted);
        for (path, e) in added {
            let from = by_id.get_mut(&e.id).and_then(Vec::pop);
            match from.and_then(|f| deleted.remove(&f).map(|old| (f, old))) {
                Some((from, old)) => held.push(Change {
                    status: Status::R,
                    path,
                    from: Some(from),
                    old: Some(EntryInfo::of(&old)),
                    new: Some(EntryInfo::of(&e)),
                }),
                None => held.push(Change {
                    status: Status::A,
                    path,
                    from: None,
                    old: None,
                    new: Some(EntryInfo::of(&e)),
                }),
            }
        }
        for (path, e) in deleted {
            held.push(Change {
                status: Status::D,
                path,
                from: None,
                old: Some(EntryInfo::of(&e)),
                new: None,
            });
        }
        held.sort_by(|x, y| x.path.cmp(&y.path));
        for change in held {
            self.out(change)?;
        }
        Ok(self.summary)
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}/{name}")
    }
}

#[cfg(test)]
mod tests;
