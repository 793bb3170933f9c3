//! `InodeTable`: FUSE inode numbers for tree entries, assigned on first sight and never
//! reused or changed for the life of the mount.
//!
//! Inode 1 is the snapshot's root. Every other inode is (parent inode, index of the entry in
//! the parent's tree): trees are immutable, so that pair always names the same entry, and the
//! same entry always gets the same number however it is reached (lookup, readdir,
//! readdirplus). The table only grows: memory is 24 bytes per entry the kernel has been told
//! about, plus 4 bytes per entry of each directory that was listed or searched, plus a
//! directory's tree id (about 60 bytes with the map's own) per directory. A file's blob id
//! is not kept: it is its parent's tree entry at the node's index, read through the tree
//! cache when the file is opened (a node with the id took 48 bytes, and a `find` of a
//! million-file tree peaked at 115 MiB). FORGET is ignored on purpose; a number handed out
//! stays valid, so `find -inum` and hard-link heuristics (`du`, `tar`) see stable numbers.

use std::collections::HashMap;

use zeroclaw_bundle_store::{EntryKind, ObjectId, TreeEntry, DIR_MODE, MODE_BITS};

/// The root's inode number (FUSE_ROOT_ID).
pub(crate) const ROOT: u64 = 1;

/// What an inode stands for: one tree entry (or the root). 24 bytes: the table holds one
/// per entry the kernel has seen, 1.2 million of them after a `find` of the scale test's
/// million-file tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Node {
    /// The inode of the directory holding it (the root is its own parent). Inode numbers
    /// count the table's entries, which the expansion limit (`MAX_ENTRIES`, ten million)
    /// keeps far below 2^32. Read it through [`Node::parent`].
    pub(crate) parent: u32,
    /// Its index among its parent's tree entries (0 for the root): where its id is.
    pub(crate) index: u32,
    /// File, exec-file or dir.
    pub(crate) kind: EntryKind,
    /// The permission bits its tree entry records (at most 0o777, so 16 bits hold them).
    pub(crate) mode: u16,
    /// File length, or total file bytes beneath a directory.
    pub(crate) size: u64,
}

impl Node {
    /// The directory holding it (the root is its own parent).
    pub(crate) fn parent(&self) -> u64 {
        u64::from(self.parent)
    }

    /// The node of `entry`, entry `index` of directory inode `dir` (a number this table
    /// handed out, so below 2^32; see `parent`; a tree holds fewer than 2^32 entries).
    pub(crate) fn of(dir: u64, index: usize, entry: &TreeEntry) -> Node {
        Node {
            parent: u32::try_from(dir).unwrap_or(u32::MAX),
            index: u32::try_from(index).unwrap_or(u32::MAX),
            kind: entry.kind,
            // A decoded tree holds no mode beyond 0o777; the mask only makes the cast lossless.
            mode: (entry.mode & MODE_BITS) as u16,
            size: entry.size,
        }
    }
}

/// Inode numbers for entries, see the module doc.
#[derive(Debug)]
pub(crate) struct InodeTable {
    /// `nodes[ino - 1]`.
    nodes: Vec<Node>,
    /// Directory inode -> inode of each of its entries by index (0 = not yet assigned).
    children: HashMap<u64, Box<[u32]>>,
    /// Directory inode -> its tree id (the root's included).
    dir_ids: HashMap<u32, ObjectId>,
}

impl InodeTable {
    /// A table holding only the root (tree `root`, `size` bytes beneath).
    pub(crate) fn new(root: ObjectId, size: u64) -> InodeTable {
        InodeTable {
            nodes: vec![Node {
                parent: ROOT as u32,
                index: 0,
                kind: EntryKind::Dir,
                mode: DIR_MODE as u16,
                size,
            }],
            children: HashMap::new(),
            dir_ids: HashMap::from([(ROOT as u32, root)]),
        }
    }

    /// The node behind `ino`, if that number was handed out.
    pub(crate) fn get(&self, ino: u64) -> Option<Node> {
        let index = usize::try_from(ino.checked_sub(1)?).ok()?;
        self.nodes.get(index).copied()
    }

    /// The tree id of directory inode `ino`, if that number was handed out to a directory.
    pub(crate) fn dir_id(&self, ino: u64) -> Option<ObjectId> {
        self.dir_ids.get(&u32::try_from(ino).ok()?).copied()
    }

    /// The inode of entry `index` of directory `dir`, if already assigned.
    pub(crate) fn child(&self, dir: u64, index: usize) -> Option<u64> {
        let ino = *self.children.get(&dir)?.get(index)?;
        (ino != 0).then_some(u64::from(ino))
    }

    /// The inode of entry `index` (which is `entry`) of directory `dir`, which has `len`
    /// entries; assigned now if it has none yet.
    pub(crate) fn intern(&mut self, dir: u64, len: usize, index: usize, entry: &TreeEntry) -> u64 {
        let slots = self
            .children
            .entry(dir)
            .or_insert_with(|| vec![0; len].into_boxed_slice());
        match slots.get_mut(index) {
            Some(&mut slot) if slot != 0 => u64::from(slot),
            slot => {
                self.nodes.push(Node::of(dir, index, entry));
                let ino = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
                if entry.kind == EntryKind::Dir {
                    self.dir_ids.insert(ino, entry.id);
                }
                // No slot cannot happen for a well-formed caller (index < len of the same
                // immutable tree): the number is then fresh and unshared, not remembered.
                if let Some(slot) = slot {
                    *slot = ino;
                }
                u64::from(ino)
            }
        }
    }

    /// How many inode numbers exist (statfs reports it as the file count).
    pub(crate) fn len(&self) -> u64 {
        self.nodes.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, kind: EntryKind) -> TreeEntry {
        TreeEntry {
            name: name.as_bytes().to_vec(),
            kind,
            mode: kind.implied_mode(),
            size: 7,
            id: ObjectId::of(name.as_bytes()),
        }
    }

    #[test]
    fn numbers_are_stable_and_distinct() {
        let mut t = InodeTable::new(ObjectId::of(b"root"), 14);
        assert_eq!(t.get(ROOT).unwrap().kind, EntryKind::Dir);
        assert_eq!(t.get(0), None);
        assert_eq!(t.child(ROOT, 1), None);
        let b = t.intern(ROOT, 2, 1, &entry("b", EntryKind::Dir));
        let a = t.intern(ROOT, 2, 0, &entry("a", EntryKind::File));
        assert_eq!(t.intern(ROOT, 2, 1, &entry("b", EntryKind::Dir)), b);
        assert_eq!(t.child(ROOT, 0), Some(a));
        assert_ne!(a, b);
        assert!(a > ROOT && b > ROOT);
        let inner = t.intern(b, 1, 0, &entry("a", EntryKind::ExecFile));
        assert_ne!(inner, a);
        assert_eq!(t.get(inner).unwrap().parent(), b);
        assert_eq!(
            (t.get(inner).unwrap().index, t.get(b).unwrap().index),
            (0, 1)
        );
        // Directories keep their tree id; files do not (their parent's tree holds it).
        assert_eq!(t.dir_id(ROOT), Some(ObjectId::of(b"root")));
        assert_eq!(t.dir_id(b), Some(ObjectId::of(b"b")));
        assert_eq!(t.dir_id(a), None);
        assert_eq!(std::mem::size_of::<Node>(), 24);
        assert_eq!(t.len(), 4);
        assert_eq!(t.get(99), None);
    }
}
