//! `InodeTable`: FUSE inode numbers for tree entries, assigned on first sight and never
//! reused or changed for the life of the mount.
//!
//! Inode 1 is the snapshot's root. Every other inode is (parent inode, index of the entry in
//! the parent's tree): trees are immutable, so that pair always names the same entry, and the
//! same entry always gets the same number however it is reached (lookup, readdir,
//! readdirplus). The table only grows: memory is 16 bytes per entry the kernel has been told
//! about ([`Packed`]), plus 4 bytes per entry of each directory that was listed or searched,
//! plus a directory's tree id (about 60 bytes with the map's own) per directory. A file's blob
//! id is not kept: it is its parent's tree entry at the node's index, read through the tree
//! cache when the file is opened (a node with the id took 48 bytes, and a `find` of a
//! million-file tree peaked at 115 MiB). FORGET is ignored on purpose; a number handed out
//! stays valid, so `find -inum` and hard-link heuristics (`du`, `tar`) see stable numbers.

use std::collections::HashMap;

use zeroclaw_bundle_store::{EntryKind, ObjectId, TreeEntryRef, DIR_MODE, MODE_BITS};

/// The root's inode number (FUSE_ROOT_ID).
pub(crate) const ROOT: u64 = 1;

/// What an inode stands for: one tree entry (or the root), as the table hands it out. The
/// table keeps it as a 16-byte [`Packed`]: it holds one per entry the kernel has seen, 1.2
/// million of them after a `find` of the scale test's million-file tree.
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
    pub(crate) fn of(dir: u64, index: usize, entry: TreeEntryRef<'_>) -> Node {
        Node {
            parent: u32::try_from(dir).unwrap_or(u32::MAX),
            index: u32::try_from(index).unwrap_or(u32::MAX),
            kind: entry.kind,
            // A checked tree holds no mode beyond 0o777; the mask only makes the cast lossless.
            mode: (entry.mode & MODE_BITS) as u16,
            size: entry.size,
        }
    }
}

/// A [`Node`] as the table keeps it: 16 bytes instead of 24. The size takes 48 bits; a larger
/// one (256 TiB beneath a directory) is [`SIZE_SPILLED`] here and kept whole in
/// `InodeTable::large_sizes`.
#[derive(Debug, Clone, Copy)]
struct Packed {
    parent: u32,
    index: u32,
    /// The size's low 32 bits.
    size_low: u32,
    /// The size's bits 32 to 47.
    size_high: u16,
    /// The permission bits (9) and, above them, the kind's encoding code
    /// ([`EntryKind::code`]).
    kind_mode: u16,
}

/// The 48-bit size that says "the whole size is in `large_sizes`".
const SIZE_SPILLED: u64 = (1 << 48) - 1;

/// Where the kind sits in `Packed::kind_mode`, above the nine permission bits.
const KIND_SHIFT: u32 = 9;

impl Packed {
    /// `node` packed, and whether its size did not fit (the caller keeps it whole).
    fn of(node: &Node) -> (Packed, bool) {
        let spilled = node.size >= SIZE_SPILLED;
        let size = if spilled { SIZE_SPILLED } else { node.size };
        let packed = Packed {
            parent: node.parent,
            index: node.index,
            // Truncations on purpose: the low 32 bits, then bits 32 to 47 (below 2^48 here).
            size_low: size as u32,
            size_high: (size >> 32) as u16,
            kind_mode: u16::from(node.kind.code()) << KIND_SHIFT | (node.mode & 0o777),
        };
        (packed, spilled)
    }

    /// The node, its size read from `large` when it did not fit.
    fn unpack(&self, large: impl FnOnce() -> Option<u64>) -> Node {
        let size = u64::from(self.size_high) << 32 | u64::from(self.size_low);
        Node {
            parent: self.parent,
            index: self.index,
            // Only `of` wrote it, from a kind: the code is always one.
            kind: u8::try_from(self.kind_mode >> KIND_SHIFT)
                .ok()
                .and_then(|code| EntryKind::from_code(code).ok())
                .unwrap_or(EntryKind::File),
            mode: self.kind_mode & 0o777,
            size: if size == SIZE_SPILLED {
                large().unwrap_or(size)
            } else {
                size
            },
        }
    }
}

/// Adds `node` to `nodes` (`large_sizes` keeps its size when it does not fit) under the next
/// inode number, and returns that number.
fn push(nodes: &mut Vec<Packed>, large_sizes: &mut HashMap<u32, u64>, node: Node) -> u32 {
    let (packed, spilled) = Packed::of(&node);
    nodes.push(packed);
    let ino = u32::try_from(nodes.len()).unwrap_or(u32::MAX);
    if spilled {
        large_sizes.insert(ino, node.size);
    }
    ino
}

/// Inode numbers for entries, see the module doc.
#[derive(Debug)]
pub(crate) struct InodeTable {
    /// `nodes[ino - 1]`.
    nodes: Vec<Packed>,
    /// Inode -> size, for the nodes whose size does not fit a [`Packed`].
    large_sizes: HashMap<u32, u64>,
    /// Directory inode -> inode of each of its entries by index (0 = not yet assigned).
    children: HashMap<u64, Box<[u32]>>,
    /// Directory inode -> its tree id (the root's included).
    dir_ids: HashMap<u32, ObjectId>,
}

impl InodeTable {
    /// A table holding only the root (tree `root`, `size` bytes beneath).
    pub(crate) fn new(root: ObjectId, size: u64) -> InodeTable {
        let mut table = InodeTable {
            nodes: Vec::new(),
            large_sizes: HashMap::new(),
            children: HashMap::new(),
            dir_ids: HashMap::from([(ROOT as u32, root)]),
        };
        push(
            &mut table.nodes,
            &mut table.large_sizes,
            Node {
                parent: ROOT as u32,
                index: 0,
                kind: EntryKind::Dir,
                mode: DIR_MODE as u16,
                size,
            },
        );
        table
    }

    /// The node behind `ino`, if that number was handed out.
    pub(crate) fn get(&self, ino: u64) -> Option<Node> {
        let index = usize::try_from(ino.checked_sub(1)?).ok()?;
        let packed = self.nodes.get(index)?;
        Some(packed.unpack(|| self.large_sizes.get(&u32::try_from(ino).ok()?).copied()))
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
    pub(crate) fn intern(
        &mut self,
        dir: u64,
        len: usize,
        index: usize,
        entry: TreeEntryRef<'_>,
    ) -> u64 {
        let slots = self
            .children
            .entry(dir)
            .or_insert_with(|| vec![0; len].into_boxed_slice());
        match slots.get_mut(index) {
            Some(&mut slot) if slot != 0 => u64::from(slot),
            slot => {
                let ino = push(
                    &mut self.nodes,
                    &mut self.large_sizes,
                    Node::of(dir, index, entry),
                );
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
    use zeroclaw_bundle_store::TreeEntry;

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
        let b = t.intern(ROOT, 2, 1, entry("b", EntryKind::Dir).borrowed());
        let a = t.intern(ROOT, 2, 0, entry("a", EntryKind::File).borrowed());
        assert_eq!(
            t.intern(ROOT, 2, 1, entry("b", EntryKind::Dir).borrowed()),
            b
        );
        assert_eq!(t.child(ROOT, 0), Some(a));
        assert_ne!(a, b);
        assert!(a > ROOT && b > ROOT);
        let inner = t.intern(b, 1, 0, entry("a", EntryKind::ExecFile).borrowed());
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
        assert_eq!(std::mem::size_of::<Packed>(), 16);
        assert_eq!(t.len(), 4);
        assert_eq!(t.get(99), None);
    }

    #[test]
    fn nodes_come_back_as_they_went_in_whatever_their_size() {
        let mut t = InodeTable::new(ObjectId::of(b"root"), u64::MAX);
        assert_eq!(t.get(ROOT).unwrap().size, u64::MAX);
        let sizes = [
            0,
            1,
            u64::from(u32::MAX) + 1,
            SIZE_SPILLED - 1,
            SIZE_SPILLED,
            1 << 60,
        ];
        let kinds = [EntryKind::File, EntryKind::ExecFile, EntryKind::Dir];
        for (i, size) in sizes.into_iter().enumerate() {
            let kind = kinds[i % 3];
            let e = TreeEntry {
                size,
                ..entry(&format!("e{i}"), kind)
            };
            let ino = t.intern(ROOT, sizes.len(), i, e.borrowed());
            let node = t.get(ino).unwrap();
            assert_eq!(node, Node::of(ROOT, i, e.borrowed()), "entry {i}");
            assert_eq!((node.size, node.kind), (size, kind));
            assert_eq!(u32::from(node.mode), kind.implied_mode());
        }
        // Only the sizes that do not fit 48 bits are kept whole.
        assert_eq!(t.large_sizes.len(), 3);
    }
}
