//! The packs room: a snapshot written out as a pack, and packs taken in. A pack is one
//! self-verifying file that carries a snapshot and every object it reaches (the format and
//! its reader are `pack` and `pack_format`, below the rooms, since the objects room keeps its
//! packed objects and the index room its tree indexes in the same format). This room owns no
//! directory of the store: it reads the snapshots the other rooms hold into a pack
//! ([`Packs::write`]: trees from the index room, blobs from the objects, signatures from the
//! catalog), and lands a pack's objects through the objects room's staging and commits its
//! snapshot through the catalog room ([`Packs::unpack`], [`Packs::import`]: see `unpack`).

use std::collections::HashSet;
use std::io::Write;

use crate::catalog::Catalog;
use crate::error::StoreError;
use crate::id::ObjectId;
use crate::index::Index;
use crate::inner::Inner;
use crate::lock::WriteLock;
use crate::objects::ObjectDir;
use crate::pack::{emit, reachable_trees, Emit, PackOptions, PackStats};
use crate::pack_format::FLAG_TREES_ONLY;
use crate::pack_writer::Tuning;
use crate::source::ObjectSource;
use crate::tree::EntryKind;

mod unpack;

pub use unpack::{ImportWatch, NoWatch, UnpackReport};

/// The packs room (see the module doc). Reached through [`crate::Store::packs`].
#[derive(Debug, Clone, Copy)]
pub struct Packs<'s> {
    inner: &'s Inner,
}

impl<'s> Packs<'s> {
    /// The packs room of the store whose shared state is `inner`.
    pub(crate) fn new(inner: &'s Inner) -> Packs<'s> {
        Packs { inner }
    }

    /// The object directory: what a pack's blobs are read from and its objects land in.
    fn objects(&self) -> &'s ObjectDir {
        self.inner.objects()
    }

    /// The index room, whose tree index a pack's trees are read from.
    fn index(&self) -> Index<'s> {
        Index::new(self.inner)
    }

    /// The catalog room: a pack's signatures, and the commit of a received snapshot.
    fn catalog(&self) -> Catalog<'s> {
        Catalog::new(self.inner)
    }

    /// The store lock, shared, for an import (see the crate doc, "gc and writers").
    fn write_lock(&self) -> Result<WriteLock, StoreError> {
        self.inner.write_lock()
    }

    /// Writes snapshot `snapshot_id` as a pack to `out`, calling `progress` with the
    /// uncompressed bytes of each object written. The trees come from the snapshot's tree index
    /// when it has a usable one (one sequential read instead of one object file per tree: most
    /// of a cold pack's start), else from the objects.
    pub fn write(
        &self,
        snapshot_id: &ObjectId,
        options: PackOptions,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PackStats, StoreError> {
        let source = self.index().snapshot_source(snapshot_id);
        self.write_tuned(
            &source,
            snapshot_id,
            options,
            &Tuning::for_host(),
            out,
            progress,
        )
    }

    /// [`Packs::write`], reading the snapshot's trees through `trees_from`, with the blob
    /// pipeline's `tuning` (tests vary the workers and the streaming threshold).
    pub(crate) fn write_tuned(
        &self,
        trees_from: &dyn ObjectSource,
        snapshot_id: &ObjectId,
        options: PackOptions,
        tuning: &Tuning,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PackStats, StoreError> {
        let snapshot = self.objects().read_snapshot(snapshot_id)?;
        let base: HashSet<ObjectId> = match &options.since {
            Some(base_id) => {
                let base = self.objects().read_snapshot(base_id)?;
                let trees = reachable_trees(&self.index().snapshot_source(base_id), &base.root)?;
                let mut ids: HashSet<ObjectId> = trees.iter().map(|(id, _)| *id).collect();
                for (_, tree) in &trees {
                    ids.extend(tree.entries().iter().map(|e| e.id));
                }
                ids
            }
            None => HashSet::new(),
        };
        // Trees the base has are skipped whole: everything below them is in the base too.
        let mut trees = Vec::new();
        let mut blobs = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![snapshot.root];
        while let Some(id) = stack.pop() {
            if base.contains(&id) || !seen.insert(id) {
                continue;
            }
            let tree = trees_from.tree(&id)?;
            for e in tree.entries().iter().rev() {
                match e.kind {
                    EntryKind::Dir => stack.push(e.id),
                    _ if options.trees_only || base.contains(&e.id) => {}
                    _ => {
                        if seen.insert(e.id) {
                            blobs.push((e.id, e.size));
                        }
                    }
                }
            }
            trees.push((id, tree.encode()));
        }

        let flags = if options.trees_only {
            FLAG_TREES_ONLY
        } else {
            0
        };
        // A full pack carries the snapshot's signatures; a digest (or a tree index) does not.
        let signatures: Vec<Vec<u8>> = if options.trees_only {
            Vec::new()
        } else {
            self.catalog()
                .signatures(snapshot_id)?
                .into_iter()
                .map(|s| s.bytes)
                .collect()
        };
        emit(
            self.objects(),
            Emit {
                snapshot_id,
                flags,
                base: options.since,
                trees: &trees,
                blobs: &blobs,
                signatures: &signatures,
            },
            tuning,
            out,
            progress,
        )
    }

    /// Writes snapshot `snapshot_id` as a pack of the record, every tree and every blob
    /// it reaches except those `skip` says the other side already holds (a remote push: `skip`
    /// tests the remote's indexes). Unlike `--since`, every tree is descended even when skipped,
    /// so nothing below a skipped tree is assumed; the record is always written (it names the
    /// pack's root). The pack has no base: [`crate::PackReader::missing`] lists what it leaves out.
    /// The walk reads the trees from the snapshot's tree index ([`Index::snapshot_source`]).
    pub fn write_excluding(
        &self,
        snapshot_id: &ObjectId,
        skip: &dyn Fn(&ObjectId) -> bool,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<PackStats, StoreError> {
        let snapshot = self.objects().read_snapshot(snapshot_id)?;
        // Every tree from the snapshot's tree index when it has a usable one (one file read).
        let source = self.index().snapshot_source(snapshot_id);
        let mut trees = Vec::new();
        let mut blobs = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![snapshot.root];
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            let tree = source.tree(&id)?;
            for e in tree.entries().iter().rev() {
                match e.kind {
                    EntryKind::Dir => stack.push(e.id),
                    _ => {
                        if !skip(&e.id) && seen.insert(e.id) {
                            blobs.push((e.id, e.size));
                        }
                    }
                }
            }
            if !skip(&id) {
                trees.push((id, tree.encode()));
            }
        }
        let tuning = Tuning::for_host();
        // No signatures: a remote keeps them beside its records, not in its packs.
        emit(
            self.objects(),
            Emit {
                snapshot_id,
                flags: 0,
                base: None,
                trees: &trees,
                blobs: &blobs,
                signatures: &[],
            },
            &tuning,
            out,
            progress,
        )
    }
}
