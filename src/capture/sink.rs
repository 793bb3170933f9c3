//! Where a capture puts what it reads: the store (snapshot, export), or nowhere but memory
//! (`diff` of a directory: hash every file and tree exactly as a snapshot would, without writing
//! an object into the store or creating a snapshot). The in-memory side keeps every tree, and the
//! bytes of the files it was asked to keep (small files, for a content diff and the agent bundle
//! files), so a diff can read both sides the same way.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};

use zeroclaw_bundle_store::{IdHasher, ObjectId, Store, StoreError, Tree};

/// Trees and kept blob bytes of a hash-only capture.
#[derive(Debug, Default)]
pub struct MemoryObjects {
    trees: Mutex<HashMap<ObjectId, Tree>>,
    blobs: Mutex<HashMap<ObjectId, Vec<u8>>>,
}

impl MemoryObjects {
    /// A tree the capture hashed.
    pub fn tree(&self, id: &ObjectId) -> Option<Tree> {
        lock(&self.trees).get(id).cloned()
    }

    /// The bytes of a blob the capture kept (`None` when not kept: too large, or not asked).
    pub fn blob(&self, id: &ObjectId) -> Option<Vec<u8>> {
        lock(&self.blobs).get(id).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which blob bytes a hash-only capture keeps in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepBytes {
    /// Only the top-level files (an agent bundle's `config.toml` and manifest), up to the limit.
    TopLevel(u64),
    /// Every file up to the limit (a content diff).
    Every(u64),
}

/// The destination of a capture's objects.
#[derive(Clone, Debug)]
pub enum Sink {
    /// Write every blob and tree into the store (dedup by id).
    Store,
    /// Hash only; trees and the kept bytes go to the shared in-memory set.
    Memory(Arc<MemoryObjects>, KeepBytes),
}

impl Sink {
    /// Whether the capture must read the file at `path` (a stat-cache hit is not enough,
    /// because its bytes are to be kept).
    pub(crate) fn wants_bytes(&self, path: &str) -> bool {
        match self {
            Sink::Store => false,
            Sink::Memory(_, KeepBytes::Every(_)) => true,
            Sink::Memory(_, KeepBytes::TopLevel(_)) => !path.contains('/'),
        }
    }

    /// Stores (or hashes) one file's bytes (`size`: its stat, a guess): its id and length.
    pub(crate) fn put_blob(
        &self,
        store: &Store,
        path: &str,
        reader: &mut dyn Read,
        size: u64,
    ) -> Result<(ObjectId, u64), StoreError> {
        let Sink::Memory(objects, keep) = self else {
            return store.objects().write_from_sized(reader, size);
        };
        let limit = match keep {
            KeepBytes::Every(limit) => Some(*limit),
            KeepBytes::TopLevel(limit) if !path.contains('/') => Some(*limit),
            KeepBytes::TopLevel(_) => None,
        };
        let mut hasher = IdHasher::new();
        let mut kept = Some(Vec::new());
        let mut len = 0u64;
        // About the file's size (zeroed: a 64 KiB buffer per small file was mostly memset).
        let first = usize::try_from(size).map_or(usize::MAX, |n| n.saturating_add(1));
        let mut buf = vec![0u8; first.clamp(64, 64 * 1024)];
        loop {
            let n = reader.read(&mut buf).map_err(|source| StoreError::Io {
                op: "read",
                path: path.into(),
                error: source,
            })?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            len += n as u64;
            kept = match (kept, limit) {
                (Some(mut bytes), Some(limit)) if len <= limit => {
                    bytes.extend_from_slice(&buf[..n]);
                    Some(bytes)
                }
                _ => None,
            };
        }
        let id = hasher.finish();
        if let Some(bytes) = kept.filter(|_| limit.is_some()) {
            lock(&objects.blobs).insert(id, bytes);
        }
        Ok((id, len))
    }

    /// Stores (or hashes) one tree.
    pub(crate) fn put_tree(&self, store: &Store, tree: Tree) -> Result<ObjectId, StoreError> {
        match self {
            Sink::Store => store.objects().write_tree(&tree),
            Sink::Memory(objects, _) => {
                let id = tree.id();
                lock(&objects.trees).insert(id, tree);
                Ok(id)
            }
        }
    }
}
