//! `TreeView`: a verified tree kept as its encoding and read entry by entry, for a reader
//! that holds many trees for long (the mount's tree cache).
//!
//! A decoded [`Tree`] costs 72 bytes an entry plus an allocation for each name: about 20 MB
//! for a directory of 200,000 entries, and 200,000 small allocations that the allocator's
//! arenas keep after it is dropped. A view keeps the encoding the reader read (about 57
//! bytes an entry) and one record start per entry, checked by the same decoder as
//! [`Tree::decode`]: exactly the objects `Tree::decode` accepts have a view, and every entry
//! reads back as the decoded tree's.

use crate::error::DecodeError;
use crate::tree::{
    decode_into, fixed_record_len, name_at, record_at, EntrySink, Tree, TreeEntryRef, HEADER_LEN,
};

/// A verified tree's encoding, with where each entry's record starts. See the module doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeView {
    bytes: Vec<u8>,
    /// Byte offset of each entry's record, in name order.
    starts: Vec<usize>,
    version: u8,
}

impl Drop for TreeView {
    /// 12 MB of encoding for a directory of 200,000 entries: freed without raising the
    /// allocator's mmap threshold (see [`crate::heap`]).
    fn drop(&mut self) {
        crate::heap::release(std::mem::take(&mut self.bytes));
        crate::heap::release(std::mem::take(&mut self.starts));
    }
}

impl TreeView {
    /// Checks a tree object's encoding as [`Tree::decode`] does (the same errors) and keeps
    /// it.
    pub fn decode(mut bytes: Vec<u8>) -> Result<TreeView, DecodeError> {
        struct Starts(Vec<usize>);
        impl EntrySink<'_> for Starts {
            fn reserve(&mut self, n: usize) {
                self.0.reserve_exact(n);
            }
            fn push(&mut self, at: usize, _: TreeEntryRef<'_>) {
                self.0.push(at);
            }
        }
        let mut starts = Starts(Vec::new());
        let version = decode_into(&bytes, &mut starts)?;
        // Kept for long: no spare capacity (a decompressed encoding grew by doubling).
        bytes.shrink_to_fit();
        Ok(TreeView {
            bytes,
            starts: starts.0,
            version,
        })
    }

    /// The view of a decoded tree (its encoding, in its format).
    pub fn of(tree: &Tree) -> TreeView {
        let version = tree.format_version();
        let fixed = fixed_record_len(version);
        let mut starts = Vec::with_capacity(tree.entries().len());
        let mut at = HEADER_LEN;
        for e in tree.entries() {
            starts.push(at);
            at += fixed + e.name.len();
        }
        TreeView {
            bytes: tree.encode(),
            starts,
            version,
        }
    }

    /// How many entries it has.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Entry `index` in name order, or `None` past the end.
    pub fn entry(&self, index: usize) -> Option<TreeEntryRef<'_>> {
        record_at(&self.bytes, *self.starts.get(index)?, self.version)
    }

    /// The entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = TreeEntryRef<'_>> + '_ {
        (0..self.len()).filter_map(|index| self.entry(index))
    }

    /// The index of the entry named exactly `name` (binary search), or `None`.
    pub fn find(&self, name: &[u8]) -> Option<usize> {
        self.starts
            .binary_search_by(|&at| {
                name_at(&self.bytes, at, self.version)
                    .unwrap_or_default()
                    .cmp(name)
            })
            .ok()
    }

    /// Total file bytes beneath this directory (as [`Tree::total_size`]).
    pub fn total_size(&self) -> u64 {
        self.iter().map(|e| e.size).sum()
    }

    /// The encoding's format (as [`Tree::format_version`]).
    pub fn format_version(&self) -> u8 {
        self.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::ObjectId;
    use crate::tree::{EntryKind, TreeEntry, FIXED_RECORD_LEN};

    fn sample() -> Tree {
        let mut entries = vec![
            TreeEntry::file(b"b.txt".to_vec(), 0o600, 7, ObjectId::of(b"b")),
            TreeEntry::dir(b"a".to_vec(), 9, ObjectId::of(b"a")),
            TreeEntry::file(b"run.sh".to_vec(), 0o755, 2, ObjectId::of(b"r")),
        ];
        for i in 0..300u32 {
            let name = format!("n{i:05}-{}", "x".repeat((i % 40) as usize));
            entries.push(TreeEntry::file(
                name.into_bytes(),
                0o644,
                u64::from(i),
                ObjectId::of(&i.to_be_bytes()),
            ));
        }
        Tree::from_entries(entries).unwrap()
    }

    fn assert_same(view: &TreeView, tree: &Tree) {
        assert_eq!(view.len(), tree.entries().len());
        let read: Vec<TreeEntry> = view.iter().map(|e| e.to_entry()).collect();
        assert_eq!(read, tree.entries());
        for (index, e) in tree.entries().iter().enumerate() {
            assert_eq!(view.entry(index), Some(e.borrowed()));
            assert_eq!(view.find(&e.name), Some(index), "{}", e.display_name());
        }
        assert_eq!(view.entry(view.len()), None);
        assert_eq!(view.find(b"absent"), None);
        assert_eq!(view.find(b""), None);
        assert_eq!(view.total_size(), tree.total_size());
        assert_eq!(view.format_version(), tree.format_version());
    }

    #[test]
    fn a_view_reads_back_every_entry_of_the_decoded_tree() {
        let tree = sample();
        let decoded = TreeView::decode(tree.encode()).unwrap();
        assert_same(&decoded, &tree);
        assert_eq!(TreeView::of(&tree), decoded);
        let empty = Tree::from_entries(Vec::new()).unwrap();
        let view = TreeView::decode(empty.encode()).unwrap();
        assert!(view.is_empty());
        assert_same(&view, &empty);
    }

    #[test]
    fn a_format_1_tree_reads_back_with_its_implied_modes() {
        // Format 1: "ZCBT" 1 count, then { kind name_len name size id }.
        let mut bytes = b"ZCBT\x01\x00\x00\x00\x02".to_vec();
        for (kind, name) in [(2u8, &b"go"[..]), (1, b"readme")] {
            bytes.push(kind);
            bytes.extend_from_slice(&(name.len() as u16).to_be_bytes());
            bytes.extend_from_slice(name);
            bytes.extend_from_slice(&5u64.to_be_bytes());
            bytes.extend_from_slice(ObjectId::of(name).as_bytes());
        }
        let tree = Tree::decode(&bytes).unwrap();
        let view = TreeView::decode(bytes.clone()).unwrap();
        assert_same(&view, &tree);
        assert_eq!(view.entry(0).unwrap().kind, EntryKind::ExecFile);
        assert_eq!(view.entry(0).unwrap().mode, 0o755);
        assert_eq!(TreeView::of(&tree), view);
    }

    #[test]
    fn a_view_refuses_what_decode_refuses_with_the_same_error() {
        let good = sample().encode();
        let mut unsorted = good.clone();
        // Swap the first two names' first bytes: "a" and "b.txt" -> "b" and "a.txt".
        let first = HEADER_LEN + 5;
        let second = HEADER_LEN + FIXED_RECORD_LEN + 1 + 5;
        unsorted.swap(first, second);
        let mut trailing = good.clone();
        trailing.push(0);
        for bad in [
            good[..good.len() - 1].to_vec(),
            unsorted,
            trailing,
            b"ZCBT\x09".to_vec(),
        ] {
            let want = Tree::decode(&bad).unwrap_err();
            assert_eq!(TreeView::decode(bad).unwrap_err(), want);
        }
    }
}
