//! Pins that every listing carries its entries' attributes (READDIRPLUS on every chunk, not
//! only the first): after a walk that never stats (`find`), stat-ing each entry (`ls -l`)
//! is answered by the kernel alone, without a LOOKUP per entry reaching the daemon.

use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use zeroclaw_bundle_mount::MountOptions;
use zeroclaw_bundle_store::{Blob, ObjectId, ObjectSource, StoreError, StoreReader, Tree};

use crate::util::{dir, file, Env};

/// The store's reader, counting the reads of one tree.
struct Counting {
    inner: StoreReader,
    watched: ObjectId,
    reads: AtomicU64,
}

impl ObjectSource for Counting {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        if *id == self.watched {
            self.reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.tree(id)
    }
    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.inner.blob(id)
    }
}

#[test]
fn stat_after_a_listing_sends_no_lookup() {
    let env = Env::new();
    // Enough entries that a listing takes many READDIRPLUS chunks (a chunk holds a few
    // hundred), and a second directory whose listing pushes the first out of a one-tree cache.
    let many: Vec<_> = (0..3000)
        .map(|i| file(format!("entry-{i:05}.txt"), format!("{i}\n")))
        .collect();
    let (root, expected) = env.build(vec![dir("many", many), dir("other", vec![file("x", "x")])]);
    let watched: ObjectId = expected[&b"many"[..]].id.parse().unwrap();
    let source = Arc::new(Counting {
        inner: env.store.objects().reader(),
        watched,
        reads: AtomicU64::new(0),
    });
    let opts = MountOptions {
        tree_cache_entries: 1,
        ..MountOptions::default()
    };
    let Some(m) = env.mount_source(source.clone(), root, &opts) else {
        return;
    };

    // `find`: names only.
    let names: Vec<_> = fs::read_dir(m.path.join("many"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 3000);
    assert_eq!(fs::read_dir(m.path.join("other")).unwrap().count(), 1);
    let before = source.reads.load(Ordering::SeqCst);

    // `ls -l`: a LOOKUP of any entry would have to read `many` again (it left the cache).
    for name in &names {
        let meta = fs::symlink_metadata(m.path.join("many").join(name)).unwrap();
        assert!(meta.is_file());
    }
    assert_eq!(
        source.reads.load(Ordering::SeqCst),
        before,
        "stat of listed entries reached the daemon (a LOOKUP per entry)"
    );
}
