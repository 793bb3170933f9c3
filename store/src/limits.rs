//! Expansion limits: how deep and how large a snapshot tree may expand before any reader
//! (`checkout`, `export`, `ls -r`, `mount`) walks it. The one place the limits live, the
//! bounds of the signatures a snapshot carries ([`MAX_SIGNATURES`] of at most
//! [`MAX_SIGNATURE_BYTES`], shared by the store, packs and remotes) included.
//!
//! Trees are content-addressed, so a few hostile objects can describe an enormous tree: a
//! chain of 20,000 trees each holding the next, or a "diamond" of 40 trees each naming the
//! next twice, which expands to 2^40 paths from 40 small objects. Before a reader expands a
//! tree it calls [`check_expansion`], a walk over tree objects only (no blob is read) that
//! memoizes per tree id its expanded depth, entry count and file bytes, so each distinct tree
//! is read once and the walk costs what the distinct trees cost, however many paths they
//! expand to. The walk keeps its own stack (never recursion) and stops as soon as a limit is
//! passed, so a hostile tree costs at most about [`MAX_ENTRIES`] tree reads.
//!
//! The limits, and why they comfortably hold any real agent:
//!
//! - [`MAX_DEPTH`] = 256 nested directories. Real trees rarely pass 30 levels, and Linux
//!   paths stop at 4096 bytes (`PATH_MAX`), which with two-byte components is about 2,000
//!   levels that no tool can name anyway; 256 also keeps any recursive consumer's stack small.
//! - [`MAX_ENTRIES`] = 10,000,000 entries (files plus directories) after expansion: 33 times the
//!   300,000-file scale target, more than a whole Linux source tree (about 90,000 files)
//!   hundred-fold.
//! - [`MAX_BYTES`] = 1 TiB of file content after expansion (recorded file sizes, summed per
//!   path, so a file reachable by two paths counts twice, as a checkout writes it twice).
//!   An agent's workspace is megabytes to gigabytes; a checkout of more is refused before it
//!   fills a disk.

use std::collections::HashMap;

use crate::error::StoreError;
use crate::id::ObjectId;
use crate::source::ObjectSource;

/// Most directories nested below a snapshot's root (the root itself is depth 0).
pub const MAX_DEPTH: u64 = 256;
/// Most entries (files and directories, counted per path) a snapshot may expand to.
pub const MAX_ENTRIES: u64 = 10_000_000;
/// Most file bytes (recorded sizes, counted per path) a snapshot may expand to: 1 TiB.
pub const MAX_BYTES: u64 = 1 << 40;

/// Largest snapshot tree index read whole into memory (64 MiB); a larger one is read with
/// positioned reads. A tree costs about 80 bytes per entry, so 64 MiB holds the trees of some
/// 800,000 entries: the 300,000-file scale target is read in one go.
pub const MAX_INDEX_IN_MEMORY: u64 = 64 << 20;

/// Largest signature kept, read or carried, in bytes (an armored RSA-16384 sshsig is under
/// 6 KiB).
pub const MAX_SIGNATURE_BYTES: usize = 64 << 10;
/// Most signatures kept, read or carried for one snapshot.
pub const MAX_SIGNATURES: usize = 256;

/// Checks the bounds every carrier of signatures (store, pack, remote) shares: not empty, at
/// most [`MAX_SIGNATURE_BYTES`]. The error completes "the signature ...".
pub fn check_signature_size(bytes: &[u8]) -> Result<(), String> {
    if bytes.is_empty() {
        return Err("is empty".into());
    }
    if bytes.len() > MAX_SIGNATURE_BYTES {
        return Err(format!(
            "is {} bytes; a signature is at most {MAX_SIGNATURE_BYTES} bytes",
            bytes.len()
        ));
    }
    Ok(())
}

/// What a tree expands to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expansion {
    /// Directory levels below the tree (0 for a tree without subdirectories).
    pub depth: u64,
    /// Entries at every level, counted once per path.
    pub entries: u64,
    /// File bytes at every level, counted once per path.
    pub bytes: u64,
}

/// Expands tree `root` over tree objects only and checks it against [`MAX_DEPTH`],
/// [`MAX_ENTRIES`] and [`MAX_BYTES`]. `label` names what is being expanded in the error (for
/// example `snapshot 1a2b3c4d5e6f`).
pub fn check_expansion(
    source: &dyn ObjectSource,
    root: &ObjectId,
    label: &str,
) -> Result<Expansion, StoreError> {
    check_expansion_within(source, root, label, MAX_DEPTH, MAX_ENTRIES, MAX_BYTES)
}

/// [`check_expansion`] with explicit limits (tests use small ones).
pub fn check_expansion_within(
    source: &dyn ObjectSource,
    root: &ObjectId,
    label: &str,
    max_depth: u64,
    max_entries: u64,
    max_bytes: u64,
) -> Result<Expansion, StoreError> {
    let limits = (max_depth, max_entries, max_bytes);
    expand(source, root, label, limits, Unreadable::ExpandsToNothing)
}

/// [`check_expansion`] of a tree whose every tree must be read: one that cannot be read fails
/// the walk with its error instead of expanding to nothing, so the figures are complete. What
/// the store records beside a tree index (`expansion_record`) is computed this way.
pub(crate) fn complete_expansion(
    source: &dyn ObjectSource,
    root: &ObjectId,
    label: &str,
) -> Result<Expansion, StoreError> {
    let limits = (MAX_DEPTH, MAX_ENTRIES, MAX_BYTES);
    expand(source, root, label, limits, Unreadable::Fails)
}

/// Whether `expansion` is within [`MAX_DEPTH`], [`MAX_ENTRIES`] and [`MAX_BYTES`].
pub fn within_limits(expansion: &Expansion) -> bool {
    expansion.depth <= MAX_DEPTH && expansion.entries <= MAX_ENTRIES && expansion.bytes <= MAX_BYTES
}

/// What a walk does with a tree it cannot read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unreadable {
    ExpandsToNothing,
    Fails,
}

fn expand(
    source: &dyn ObjectSource,
    root: &ObjectId,
    label: &str,
    (max_depth, max_entries, max_bytes): (u64, u64, u64),
    unreadable: Unreadable,
) -> Result<Expansion, StoreError> {
    let too_large = |what: &'static str, limit: u64| StoreError::TooLarge {
        label: label.to_string(),
        what,
        limit,
    };
    let mut done: HashMap<ObjectId, Expansion> = HashMap::new();
    // Each frame: a tree id and its decoded entries' subdirectory ids still to expand. A tree
    // is finished when all its subdirectories are in `done`.
    struct Frame {
        id: ObjectId,
        files: Expansion,
        subdirs: Vec<ObjectId>,
        next: usize,
    }
    let open = |id: &ObjectId| -> Result<Frame, StoreError> {
        // A tree that cannot be read (missing, corrupt, malformed) expands to nothing here
        // (unless the walk must be complete): no reader can expand it either, and each
        // reports the damage where it meets it (checkout names the path, a mount answers EIO
        // there and serves the rest).
        let shape = match source.tree_shape(id) {
            Ok(shape) => shape,
            Err(e) if unreadable == Unreadable::Fails => return Err(e),
            Err(_) => {
                return Ok(Frame {
                    id: *id,
                    files: Expansion::default(),
                    subdirs: Vec::new(),
                    next: 0,
                })
            }
        };
        let files = Expansion {
            entries: shape.entries,
            bytes: shape.file_bytes,
            ..Expansion::default()
        };
        let subdirs = shape.subdirs;
        Ok(Frame {
            id: *id,
            files,
            subdirs,
            next: 0,
        })
    };
    // Every distinct tree read is part of the expansion at least once, so the entries of the
    // trees read so far never exceed the expanded count: passing the limit here stops a wide
    // hostile tree before all of it is read.
    let mut read_entries = 0u64;
    let mut open_counted = |id: &ObjectId| -> Result<Frame, StoreError> {
        let frame = open(id)?;
        read_entries = read_entries.saturating_add(frame.files.entries);
        if read_entries > max_entries {
            return Err(too_large("entry count", max_entries));
        }
        Ok(frame)
    };
    let mut stack = vec![open_counted(root)?];
    loop {
        let frame = stack
            .last_mut()
            .expect("the stack holds the root until it is done");
        if let Some(&sub) = frame.subdirs.get(frame.next) {
            frame.next += 1;
            if done.contains_key(&sub) {
                continue;
            }
            // `stack.len()` trees are open: the new one sits at depth `stack.len()`.
            if stack.len() as u64 > max_depth {
                return Err(too_large("directory depth", max_depth));
            }
            stack.push(open_counted(&sub)?);
            continue;
        }
        let frame = stack.pop().expect("a frame was just looked at");
        let mut total = frame.files;
        for sub in &frame.subdirs {
            let child = done[sub];
            total.depth = total.depth.max(child.depth + 1);
            total.entries = total.entries.saturating_add(child.entries);
            total.bytes = total.bytes.saturating_add(child.bytes);
        }
        // Depth is checked against where the tree sits, as it can be reached at several
        // depths: the deepest path from the root is what a reader walks.
        if total.depth.saturating_add(stack.len() as u64) > max_depth {
            return Err(too_large("directory depth", max_depth));
        }
        if total.entries > max_entries {
            return Err(too_large("entry count", max_entries));
        }
        if total.bytes > max_bytes {
            return Err(too_large("total file size", max_bytes));
        }
        if stack.is_empty() {
            return Ok(total);
        }
        done.insert(frame.id, total);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Store;
    use crate::tree::{EntryKind, Tree, TreeEntry};

    fn dir(name: &str, id: ObjectId) -> TreeEntry {
        TreeEntry {
            name: name.as_bytes().to_vec(),
            kind: EntryKind::Dir,
            mode: 0o755,
            size: 0,
            id,
        }
    }

    fn store() -> (tempfile::TempDir, Store) {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&tmp.path().join("s")).unwrap();
        (tmp, store)
    }

    fn leaf(store: &Store, size: u64) -> ObjectId {
        let (blob, len) = store.objects().write_from(&mut &b"hello!"[..]).unwrap();
        assert_eq!(len, 6);
        let file = TreeEntry {
            name: b"f".to_vec(),
            kind: EntryKind::File,
            mode: 0o644,
            size,
            id: blob,
        };
        store
            .objects()
            .write_tree(&Tree::from_entries(vec![file]).unwrap())
            .unwrap()
    }

    #[test]
    fn counts_a_small_tree_exactly() {
        let (_t, store) = store();
        let l = leaf(&store, 6);
        let mid = store
            .objects()
            .write_tree(&Tree::from_entries(vec![dir("a", l), dir("b", l)]).unwrap())
            .unwrap();
        let got = check_expansion(&store.objects().reader(), &mid, "snapshot x").unwrap();
        assert_eq!(
            got,
            Expansion {
                depth: 1,
                entries: 4,
                bytes: 12
            }
        );
    }

    #[test]
    fn diamond_is_refused_after_reading_each_tree_once() {
        let (_t, store) = store();
        let mut id = leaf(&store, 6);
        for _ in 0..64 {
            id = store
                .objects()
                .write_tree(&Tree::from_entries(vec![dir("a", id), dir("b", id)]).unwrap())
                .unwrap();
        }
        let err = check_expansion(&store.objects().reader(), &id, "snapshot dia").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("snapshot dia") && msg.contains("entry count"),
            "{msg}"
        );
    }

    #[test]
    fn deep_chain_is_refused_without_recursion() {
        let (_t, store) = store();
        let mut id = leaf(&store, 6);
        for _ in 0..20_000 {
            id = store
                .objects()
                .write_tree(&Tree::from_entries(vec![dir("d", id)]).unwrap())
                .unwrap();
        }
        let err = check_expansion(&store.objects().reader(), &id, "snapshot deep").unwrap_err();
        assert!(err.to_string().contains("directory depth"), "{err}");
    }

    #[test]
    fn limits_are_inclusive_and_depth_counts_the_deepest_path() {
        let (_t, store) = store();
        let l = leaf(&store, 6);
        let mut chain = l;
        for _ in 0..3 {
            chain = store
                .objects()
                .write_tree(&Tree::from_entries(vec![dir("d", chain)]).unwrap())
                .unwrap();
        }
        // The leaf is reached first at depth 1 (memoized), then at depth 4 through the chain.
        let root = store
            .objects()
            .write_tree(&Tree::from_entries(vec![dir("a", l), dir("b", chain)]).unwrap())
            .unwrap();
        let src = store.objects().reader();
        let got = check_expansion_within(&src, &root, "s", 4, 100, 100).unwrap();
        assert_eq!(got.depth, 4);
        assert!(check_expansion_within(&src, &root, "s", 3, 100, 100).is_err());
        assert_eq!(got.entries, 2 + 1 + 3 + 1);
        assert!(check_expansion_within(&src, &root, "s", 4, got.entries - 1, 100).is_err());
        assert!(check_expansion_within(&src, &root, "s", 4, 100, 11).is_err());
    }

    #[test]
    fn a_damaged_subtree_counts_as_empty_and_is_left_to_the_reader() {
        let (_t, store) = store();
        let l = leaf(&store, 6);
        let root = store
            .objects()
            .write_tree(
                &Tree::from_entries(vec![dir("a", l), dir("b", ObjectId::of(b"gone"))]).unwrap(),
            )
            .unwrap();
        let got = check_expansion(&store.objects().reader(), &root, "s").unwrap();
        assert_eq!(got.entries, 3);
    }

    #[test]
    fn recorded_huge_sizes_are_refused() {
        let (_t, store) = store();
        let l = leaf(&store, u64::MAX / 2);
        let root = store
            .objects()
            .write_tree(&Tree::from_entries(vec![dir("a", l), dir("b", l), dir("c", l)]).unwrap())
            .unwrap();
        let err = check_expansion(&store.objects().reader(), &root, "s").unwrap_err();
        assert!(err.to_string().contains("total file size"), "{err}");
    }
}
