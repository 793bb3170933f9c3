//! `ObjectSource`: reading trees and blobs by id, whatever holds them (the store's object
//! directory, or later a pack file). Readers (mount, diff, checkout) take this trait, so a pack
//! reader plugs in without changing them.

use crate::error::StoreError;
use crate::escape::{c1_alternative, escape_name};
use crate::id::ObjectId;
use crate::objects::Blob;
use crate::tree::{EntryKind, Tree, TreeEntry, TreeShape};
use crate::tree_view::TreeView;

/// Anything that can hand out trees and blobs by id.
pub trait ObjectSource: Send + Sync {
    /// Reads, verifies and decodes a tree.
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError>;
    /// A tree's shape (`limits`' expansion check): read and verified as [`ObjectSource::tree`]
    /// does, the same errors, without a copy of any name. A source holding its trees in
    /// memory says so faster than through a decoded [`Tree`].
    fn tree_shape(&self, id: &ObjectId) -> Result<TreeShape, StoreError> {
        self.tree(id).map(|tree| TreeShape::of(&tree))
    }
    /// A tree kept as its encoding ([`TreeView`]), read and verified as
    /// [`ObjectSource::tree`] does, with the same errors: for a reader that holds trees for
    /// long (a mount). A source reading the encoding gives it without decoding; the default
    /// encodes the decoded tree.
    fn tree_view(&self, id: &ObjectId) -> Result<TreeView, StoreError> {
        self.tree(id).map(|tree| TreeView::of(&tree))
    }
    /// Opens a blob for positioned reads (verify with [`Blob::verify`] when needed).
    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError>;
    /// Opens a blob that a tree records as `size` bytes, failing with
    /// [`StoreError::WrongLength`] when it is another length. A source that knows a length
    /// before reading (a pack's index) checks it first, so a tree that claims 10 bytes never
    /// makes a reader decompress a gigabyte; the default opens the blob and compares.
    fn blob_of_size(&self, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
        of_recorded_size(id, self.blob(id)?, size)
    }
    /// Hints that these objects will be read soon (a mount passes a directory's children
    /// as it lists them), so a cold read finds them on their way into memory. Best effort;
    /// the default does nothing.
    fn prefetch(&self, _ids: &[ObjectId]) {}
}

/// Finds the entry at `path` (components separated by `/`, raw bytes) below tree `root`.
/// The empty path (or `/`) names the root itself, returned as a synthetic directory entry.
pub fn resolve_path(
    source: &dyn ObjectSource,
    root: &ObjectId,
    path: &[u8],
    snapshot_label: &str,
) -> Result<TreeEntry, StoreError> {
    let mut current = TreeEntry::dir(Vec::new(), 0, *root);
    for part in path.split(|b| *b == b'/').filter(|p| !p.is_empty()) {
        let not_found = || StoreError::NoSuchPath {
            path: escape_name(path),
            snapshot: snapshot_label.to_string(),
        };
        if current.kind != EntryKind::Dir {
            return Err(not_found());
        }
        let tree = source.tree(&current.id)?;
        // `\x85` as older versions printed U+0085 is accepted back (see `c1_alternative`).
        let found = tree
            .get(part)
            .or_else(|| c1_alternative(part).and_then(|alt| tree.get(&alt)));
        current = found.cloned().ok_or_else(not_found)?;
    }
    if current.name.is_empty() {
        current.size = source.tree(root)?.total_size();
    }
    Ok(current)
}

/// `blob` when it is `size` bytes long, else [`StoreError::WrongLength`] naming object `id`.
pub(crate) fn of_recorded_size(id: &ObjectId, blob: Blob, size: u64) -> Result<Blob, StoreError> {
    if blob.len() != size {
        return Err(StoreError::WrongLength {
            id: *id,
            len: blob.len(),
            recorded: size,
        });
    }
    Ok(blob)
}
