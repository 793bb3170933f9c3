//! Publishing a stored snapshot (`checkout`, the publish half of `export`): the publish itself
//! plus the store's destination record, which lets the next publish to the same destination
//! hard-link unchanged files instead of writing them again, and the `recover` hint after an
//! interrupted publish.

use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{ObjectId, Snapshot, Store};

use crate::progress::{Progress, Totals};

use super::{
    dest_key, publish_to, record_destination, resolve, Admitted, DestState, PublishError,
    Published, LOCK_PREFIX, STAGING_PREFIX,
};

/// The largest tree index a publish reads whole; a larger one is read tree by tree, so a
/// checkout does not hold it: with the whole index of 300,000 files in directories of 1,000
/// (`SCALE_LAYOUTS=medium scripts/scale.sh`) their checkout peaked at 69.3 MiB, tree by tree
/// at 51.6 MiB. The benchmark corpus's index (19,859 files) is 1.4 MiB.
const INDEX_IN_MEMORY: u64 = 4 << 20;

/// Publishes the tree of `snapshot` (whose id is `id`) from `store` at `admitted` (checkout's path and the publish half of
/// export), reusing what the previous publish to the same
/// destination left there (hard links instead of copies for unchanged files), and records
/// what this one leaves for the next. The record is only an optimisation: failing to read
/// or write it never fails the publish.
pub fn publish_snapshot(
    store: &Store,
    id: &ObjectId,
    snapshot: &Snapshot,
    admitted: &Admitted,
    progress: &dyn Progress,
) -> anyhow::Result<Published> {
    let root = &snapshot.root;
    // The store may have been created since the check: refuse it under the destination now
    // that it exists (by identity too), without resolving the destination again.
    resolve::refuse_store_overlap(admitted.given(), admitted.path(), store.root())?;
    let key = dest_key(admitted);
    // Read only when there is a previous tree to reuse from: a checkout into a new
    // directory never opens the catalog for it.
    let load = || store.catalog().load_dest_record(&key).ok().flatten();
    // Filled as the files are staged; its time is set when they all are.
    let mut record = store.catalog().dest_record(0);
    // Trees from the snapshot's tree index (one sequential read) rather than one object
    // file per directory; blobs from the objects. The bound check, the staging walk and
    // the destination record each walk every tree: on the benchmark corpus (2,305 trees),
    // cold, the first walk (the bound check) took about 0.33 s on the tree objects, 3 ms on
    // the index.
    let reader = store.index().snapshot_source_within(id, INDEX_IN_MEMORY);
    // Marked on the token, so whoever stops the process at once can name what `recover`
    // repairs.
    let publishing = progress.cancel().map(|c| c.publishing(admitted.given()));
    progress.begin(
        "publishing",
        Some(Totals {
            files: snapshot.files(),
            bytes: snapshot.bytes(),
        }),
    );
    let state = DestState {
        load: &load,
        record: &mut record,
    };
    let published = publish_to(&reader, root, admitted, Some(state), progress);
    progress.finish();
    let published = published
    .map_err(|e| match e {
        PublishError::Interrupted => {
            let e = anyhow::Error::new(e);
            match leftover_staging(admitted.path()) {
                Some(left) => e.context(format!(
                    "a staging directory was left at {}; remove it with: zeroclaw-bundle recover {}",
                    left.display(),
                    super::shell_quote(admitted.given())
                )),
                None => e,
            }
        }
        e => e.into(),
    })?;
    drop(publishing);
    // A hard-linked file's ctime changed when the previous tree was removed: then the files
    // are statted again where they now are.
    let record = if published.reused == 0 {
        Some(record)
    } else {
        drop(record);
        record_destination(&reader, root, &published.dest, &|at| {
            store.catalog().dest_record(at)
        })
        .ok()
    };
    if let Some(record) = record {
        let _ = store.catalog().store_dest_record(&key, &record);
    }
    Ok(published)
}

/// A staging directory beside `dest` (resolved), if one is left: after an interrupted
/// publish, the hint that `recover` is needed.
fn leftover_staging(dest: &Path) -> Option<PathBuf> {
    let parent = dest.parent()?;
    std::fs::read_dir(parent)
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| {
            let name = e.file_name();
            let name = name.as_encoded_bytes();
            name.starts_with(STAGING_PREFIX.as_bytes())
                && !name.starts_with(LOCK_PREFIX.as_bytes())
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
}

/// Whether snapshot `id` reaches a regular file that not every local user may read (its mode
/// lacks the "others read" bit): a file carrying its bytes (a pack) must then be private too.
pub fn reaches_private_file(
    store: &Store,
    id: &zeroclaw_bundle_store::ObjectId,
) -> Result<bool, zeroclaw_bundle_store::StoreError> {
    let root = store.objects().read_snapshot(id)?.root;
    let mut trees = vec![root];
    while let Some(tree) = trees.pop() {
        for entry in store.objects().read_tree(&tree)?.entries() {
            if entry.kind.is_file() {
                if entry.mode & 0o004 == 0 {
                    return Ok(true);
                }
            } else {
                trees.push(entry.id);
            }
        }
    }
    Ok(false)
}
