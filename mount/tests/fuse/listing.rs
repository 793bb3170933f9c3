//! Pins that every listing carries its entries' attributes (READDIRPLUS on every chunk, not
//! only the first): after a walk that never stats (`find`), stat-ing each entry (`ls -l`)
//! is answered by the kernel alone, without a LOOKUP per entry reaching the daemon. And
//! that a file whose directory's tree left the cache still reads its own bytes and id (the
//! inode table keeps no blob id; the parent's tree is read again).

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

/// Mounts `root` with a one-tree cache, through a source that counts the reads of tree
/// `watched` (hex); `None` where FUSE is unavailable outside CI.
fn mount_counting(
    env: &Env,
    root: ObjectId,
    watched: &str,
) -> Option<(crate::util::Mounted, Arc<Counting>)> {
    let source = Arc::new(Counting {
        inner: env.store.objects().reader(),
        watched: watched.parse().unwrap(),
        reads: AtomicU64::new(0),
    });
    let opts = MountOptions {
        tree_cache_entries: 1,
        ..MountOptions::default()
    };
    let m = env.mount_source(source.clone(), root, &opts)?;
    Some((m, source))
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
    let Some((m, source)) = mount_counting(&env, root, &expected[&b"many"[..]].id) else {
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

/// A file's blob id is not kept in the inode table: it is the file's entry in its parent's
/// tree. Read after that tree has left a one-tree cache, every file still gives its own
/// bytes and its own id (`user.zeroclaw.blake3`), found by reading the parent's tree again.
#[test]
fn a_file_whose_directory_left_the_tree_cache_reads_its_own_bytes_and_id() {
    let env = Env::new();
    let files = |d: &str| -> Vec<_> {
        (0..50)
            .map(|i| file(format!("f{i:02}"), format!("{d} {i}\n")))
            .collect()
    };
    let (root, expected) = env.build(vec![dir("a", files("a")), dir("b", files("b"))]);
    let Some((m, source)) = mount_counting(&env, root, &expected[&b"a"[..]].id) else {
        return;
    };
    // Every entry listed and stated, `a` first: all inodes are handed out, and the cache
    // holds `b`'s tree.
    for d in ["a", "b"] {
        for e in fs::read_dir(m.path.join(d)).unwrap() {
            assert!(fs::symlink_metadata(e.unwrap().path()).unwrap().is_file());
        }
    }
    let before = source.reads.load(Ordering::SeqCst);
    for i in (0..50).rev() {
        let rel = format!("a/f{i:02}");
        assert_eq!(
            fs::read_to_string(m.path.join(&rel)).unwrap(),
            format!("a {i}\n"),
            "{rel}"
        );
        assert_eq!(
            crate::util::xattr_id(&m.path.join(&rel)),
            expected[rel.as_bytes()].id,
            "{rel}"
        );
    }
    assert!(
        source.reads.load(Ordering::SeqCst) > before,
        "a's tree was read again to find the ids"
    );
}
