//! Pins that every listing carries its entries' attributes (READDIRPLUS on every chunk, not
//! only the first): after a walk that never stats (`find`), stat-ing each entry (`ls -l`)
//! is answered by the kernel alone, without a LOOKUP per entry reaching the daemon. And
//! that a file whose directory's tree left the cache still reads its own bytes and id (the
//! inode table keeps no blob id; the parent's tree is read again).

use std::fs;

use crate::util::{dir, file, mount_counting, Env};

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
    let before = source.reads();

    // `ls -l`: a LOOKUP of any entry would have to read `many` again (it left the cache).
    for name in &names {
        let meta = fs::symlink_metadata(m.path.join("many").join(name)).unwrap();
        assert!(meta.is_file());
    }
    assert_eq!(
        source.reads(),
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
    let before = source.reads();
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
        source.reads() > before,
        "a's tree was read again to find the ids"
    );
}
