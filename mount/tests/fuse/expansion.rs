//! Pins when the mount walks every tree before it answers (the expansion check): always,
//! unless the caller knows what the tree expands to (a store's expansion record) and that
//! is within the limits; a known expansion past the limits is walked, and refused.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use zeroclaw_bundle_mount::{mount, MountError, MountOptions};
use zeroclaw_bundle_store::limits::{check_expansion, Expansion, MAX_ENTRIES};
use zeroclaw_bundle_store::{
    Blob, ObjectId, ObjectSource, StoreError, StoreReader, Tree, TreeEntry,
};

use crate::util::{dir, file, Env};

/// The store's reader, counting tree reads.
struct Counting {
    inner: StoreReader,
    trees: AtomicU64,
}

impl ObjectSource for Counting {
    fn tree(&self, id: &ObjectId) -> Result<Tree, StoreError> {
        self.trees.fetch_add(1, Ordering::SeqCst);
        self.inner.tree(id)
    }
    fn blob(&self, id: &ObjectId) -> Result<Blob, StoreError> {
        self.inner.blob(id)
    }
}

fn counting(env: &Env) -> Arc<Counting> {
    Arc::new(Counting {
        inner: env.store.objects().reader(),
        trees: AtomicU64::new(0),
    })
}

#[test]
fn a_known_expansion_within_the_limits_skips_the_walk_and_none_walks() {
    let env = Env::new();
    let sub = |i: usize| {
        dir(
            format!("d{i}"),
            vec![dir("inner", vec![file("f", format!("{i}"))])],
        )
    };
    let (root, _) = env.build((0..5).map(sub).collect());
    let known = check_expansion(&env.store.objects().reader(), &root, "test").unwrap();

    let skipping = counting(&env);
    let opts = MountOptions {
        known_expansion: Some(known),
        ..MountOptions::default()
    };
    let Some(m) = env.mount_source(skipping.clone(), root, &opts) else {
        return;
    };
    // The root, read to serve it; no other tree before the mount answered.
    assert_eq!(skipping.trees.load(Ordering::SeqCst), 1);
    assert_eq!(
        std::fs::read_dir(m.path.join("d3/inner")).unwrap().count(),
        1
    );
    drop(m);

    let walking = counting(&env);
    let Some(_m) = env.mount_source(walking.clone(), root, &MountOptions::default()) else {
        return;
    };
    // The root, then its 11 trees walked (the default source has no shapes of its own).
    assert_eq!(walking.trees.load(Ordering::SeqCst), 12);
}

#[test]
fn a_known_expansion_past_the_limits_is_walked_and_a_bomb_refused() {
    let env = Env::new();
    // A diamond: 40 trees, each naming the next twice (2^40 paths).
    let mut id = env
        .store
        .objects()
        .write_tree(&Tree::from_entries(Vec::new()).unwrap())
        .unwrap();
    for _ in 0..40 {
        let tree = Tree::from_entries(vec![
            TreeEntry::dir(b"a".to_vec(), 0, id),
            TreeEntry::dir(b"b".to_vec(), 0, id),
        ])
        .unwrap();
        id = env.store.objects().write_tree(&tree).unwrap();
    }
    let past = Expansion {
        depth: 40,
        entries: MAX_ENTRIES + 1,
        bytes: 0,
    };
    let mnt = tempfile::tempdir().unwrap();
    for known in [None, Some(past)] {
        let opts = MountOptions {
            known_expansion: known,
            ..MountOptions::default()
        };
        match mount(
            Arc::new(env.store.objects().reader()),
            id,
            mnt.path(),
            &opts,
        ) {
            Err(MountError::TooLarge(e)) => {
                assert!(e.to_string().contains("entry count"), "{e}")
            }
            other => panic!("a diamond of 2^40 paths was not refused: {:?}", other.err()),
        }
    }
}
