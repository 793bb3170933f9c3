//! The state every room of the store shares: where the store is, and its object directory
//! (whose clones share the packer of a capture in progress). The handle ([`crate::Store`])
//! owns one; each room borrows it for as long as it is used.
//!
//! Only the objects room lies below this module: a room reaches another by building it over
//! the same state, never through the handle, so no room depends on the handle or on the
//! crate root.

use std::path::{Path, PathBuf};

use crate::error::StoreError;
use crate::lock::{self, WriteLock};
use crate::objects::ObjectDir;

/// The store's root and object directory: paths only, no open file, no lock held.
#[derive(Debug, Clone)]
pub(crate) struct Inner {
    root: PathBuf,
    objects: ObjectDir,
}

impl Inner {
    /// The state of the store at `root`: nothing is read or created (the handle's
    /// `open_or_create` checks and makes the layout; `warm` reads without opening).
    pub(crate) fn at(root: &Path) -> Inner {
        Inner {
            root: root.to_path_buf(),
            objects: ObjectDir::new(root),
        }
    }

    /// The store directory.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The object directory.
    pub(crate) fn objects(&self) -> &ObjectDir {
        &self.objects
    }

    /// The store lock, shared, for a writer (see the crate doc, "gc and writers").
    pub(crate) fn write_lock(&self) -> Result<WriteLock, StoreError> {
        lock::shared(&self.root, "write a snapshot")
    }
}
