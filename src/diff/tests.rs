//! Tree diff cases against trees written into a temporary store: equal, one byte changed,
//! added, removed, renamed, mode-only (exec bit, `0600` -> `0644`) and kind changes at depth,
//! and Merkle pruning (an unchanged subtree is never read).

use std::collections::BTreeMap;

use zeroclaw_bundle_store::{ObjectId, Store, Tree, TreeEntry};

use super::*;

/// A tree described as path -> (content, exec); directories are implied.
type Spec<'a> = &'a [(&'a str, &'a str, bool)];

/// The same with each file's mode.
type ModeSpec<'a> = &'a [(&'a str, &'a str, u32)];

fn write(store: &Store, spec: Spec<'_>) -> ObjectId {
    let modes: Vec<(&str, &str, u32)> = spec
        .iter()
        .map(|(p, c, exec)| (*p, *c, if *exec { 0o755 } else { 0o644 }))
        .collect();
    write_modes(store, &modes)
}

fn write_modes(store: &Store, spec: ModeSpec<'_>) -> ObjectId {
    fn build(store: &Store, files: &BTreeMap<Vec<u8>, Node>) -> (ObjectId, u64) {
        let mut entries = Vec::new();
        let mut total = 0;
        for (name, node) in files {
            match node {
                Node::File(content, mode) => {
                    let id = store.objects().write_bytes(content.as_bytes()).unwrap();
                    total += content.len() as u64;
                    entries.push(TreeEntry::file(
                        name.clone(),
                        *mode,
                        content.len() as u64,
                        id,
                    ));
                }
                Node::Dir(children) => {
                    let (id, size) = build(store, children);
                    total += size;
                    entries.push(TreeEntry::dir(name.clone(), size, id));
                }
            }
        }
        let id = store
            .objects()
            .write_tree(&Tree::from_entries(entries).unwrap())
            .unwrap();
        (id, total)
    }
    enum Node {
        File(String, u32),
        Dir(BTreeMap<Vec<u8>, Node>),
    }
    let mut root: BTreeMap<Vec<u8>, Node> = BTreeMap::new();
    for (path, content, mode) in spec {
        let parts: Vec<&str> = path.split('/').collect();
        let mut dir = &mut root;
        for p in &parts[..parts.len() - 1] {
            let node = dir
                .entry(p.as_bytes().to_vec())
                .or_insert_with(|| Node::Dir(BTreeMap::new()));
            dir = match node {
                Node::Dir(d) => d,
                Node::File(..) => panic!("file in the way"),
            };
        }
        dir.insert(
            parts[parts.len() - 1].as_bytes().to_vec(),
            Node::File(content.to_string(), *mode),
        );
    }
    build(store, &root).0
}

fn root(id: ObjectId) -> Root {
    Root {
        entry: TreeEntry::dir(Vec::new(), 0, id),
    }
}

fn run(store: &Store, a: Spec<'_>, b: Spec<'_>) -> (Vec<String>, Summary) {
    run_ids(store, write(store, a), write(store, b))
}

fn run_ids(store: &Store, ia: ObjectId, ib: ObjectId) -> (Vec<String>, Summary) {
    let reader = store.objects().reader();
    let mut seen = Vec::new();
    let summary = diff(
        &SourceSide(&reader),
        &root(ia),
        &SourceSide(&reader),
        &root(ib),
        &mut |c| {
            seen.push(match &c.from {
                Some(f) => format!("{:?} {f} -> {}", c.status, c.path),
                None => format!("{:?} {}", c.status, c.path),
            });
            Ok(())
        },
    )
    .unwrap();
    (seen, summary)
}

const BASE: Spec<'static> = &[
    ("a/b/c/deep.md", "deep", false),
    ("a/b/c/tool.sh", "#!/bin/sh", true),
    ("a/x.md", "x", false),
    ("big/1.md", "one", false),
    ("big/2.md", "two", false),
    ("top.md", "top", false),
];

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_or_create(&dir.path().join("s")).unwrap();
    (dir, store)
}

#[test]
fn identical_trees_read_no_tree_at_all() {
    let (_d, s) = store();
    let (seen, summary) = run(&s, BASE, BASE);
    assert!(seen.is_empty());
    assert!(!summary.differs());
    assert_eq!(
        summary.trees_read, 0,
        "equal roots are pruned before reading"
    );
}

#[test]
fn each_kind_of_change_at_depth() {
    let (_d, s) = store();
    let b: Spec<'_> = &[
        ("a/b/c/deep.md", "deeP", false),      // M: one byte
        ("a/b/c/tool.sh", "#!/bin/sh", false), // X: exec bit only
        ("a/b/c/new.md", "new", false),        // A
        ("a/y.md", "x", false),                // R a/x.md -> a/y.md
        ("big/1.md", "one", false),
        ("big/2.md", "two", false),
        ("top.md/now-a-dir.md", "d", false), // T: file -> dir, and its file added
    ];
    let (seen, summary) = run(&s, BASE, b);
    assert_eq!(
        seen,
        [
            "M a/b/c/deep.md",
            "X a/b/c/tool.sh",
            "T top.md",
            "A a/b/c/new.md",
            "R a/x.md -> a/y.md",
            "A top.md/now-a-dir.md",
        ]
    );
    assert_eq!(
        (
            summary.added,
            summary.modified,
            summary.renamed,
            summary.mode_changed,
            summary.kind_changed
        ),
        (2, 1, 1, 1, 1)
    );
    // `big` is equal on both sides: never read. Read: the two roots, a, a/b, a/b/c on both
    // sides, and the new directory top.md on side B.
    assert_eq!(summary.trees_read, 9);
}

/// Issue 17: a change of the permission bits alone (`0600` -> `0644`, no execute bit
/// involved) is an `X`, with both modes on the change; content and mode together are an `M`.
#[test]
fn a_mode_only_change_is_an_x_with_both_modes() {
    let (_d, s) = store();
    let a = write_modes(
        &s,
        &[
            ("k/.env", "K=1", 0o600),
            ("k/b", "b", 0o640),
            ("c", "c", 0o600),
        ],
    );
    let b = write_modes(
        &s,
        &[
            ("k/.env", "K=1", 0o644),
            ("k/b", "b", 0o640),
            ("c", "C", 0o644),
        ],
    );
    let (seen, summary) = run_ids(&s, a, b);
    assert_eq!(seen, ["M c", "X k/.env"]);
    assert_eq!((summary.mode_changed, summary.modified), (1, 1));
    let reader = s.objects().reader();
    let mut changes = Vec::new();
    diff(
        &SourceSide(&reader),
        &root(a),
        &SourceSide(&reader),
        &root(b),
        &mut |c| {
            changes.push(c.clone());
            Ok(())
        },
    )
    .unwrap();
    let modes: Vec<(String, String)> = changes
        .iter()
        .map(|c| {
            let (old, new) = (c.old.as_ref().unwrap(), c.new.as_ref().unwrap());
            (old.mode.clone(), new.mode.clone())
        })
        .collect();
    assert_eq!(
        modes,
        [
            ("0600".into(), "0644".into()),
            ("0600".into(), "0644".into())
        ]
    );
    assert_eq!(changes[1].old.as_ref().unwrap().kind, "file");
}

#[test]
fn removed_directory_lists_its_files_and_a_renamed_copy_pairs_once() {
    let (_d, s) = store();
    let b: Spec<'_> = &[
        ("a/b/c/deep.md", "deep", false),
        ("a/b/c/tool.sh", "#!/bin/sh", true),
        ("a/x.md", "x", false),
        ("moved/1.md", "one", false),
        ("moved/2.md", "two", false),
        ("top.md", "top", false),
        ("zz-copy.md", "one", false),
    ];
    let (seen, _) = run(&s, BASE, b);
    assert_eq!(
        seen,
        [
            "R big/1.md -> moved/1.md",
            "R big/2.md -> moved/2.md",
            "A zz-copy.md",
        ]
    );
}

#[test]
fn a_deep_chain_is_walked_without_recursion_and_bounded() {
    let (_d, s) = store();
    // 5,000 nested directories differing only at the bottom: no stack overflow, and refused
    // past the store's depth limit.
    let mut a = s
        .objects()
        .write_tree(
            &Tree::from_entries(vec![TreeEntry::file(
                b"f".to_vec(),
                0o644,
                1,
                s.objects().write_bytes(b"1").unwrap(),
            )])
            .unwrap(),
        )
        .unwrap();
    let mut b = s
        .objects()
        .write_tree(
            &Tree::from_entries(vec![TreeEntry::file(
                b"f".to_vec(),
                0o644,
                1,
                s.objects().write_bytes(b"2").unwrap(),
            )])
            .unwrap(),
        )
        .unwrap();
    for _ in 0..5_000 {
        for id in [&mut a, &mut b] {
            *id = s
                .objects()
                .write_tree(
                    &Tree::from_entries(vec![TreeEntry::dir(b"d".to_vec(), 1, *id)]).unwrap(),
                )
                .unwrap();
        }
    }
    let reader = s.objects().reader();
    let err = diff(
        &SourceSide(&reader),
        &root(a),
        &SourceSide(&reader),
        &root(b),
        &mut |_| Ok(()),
    )
    .expect_err("deeper than the bound");
    assert!(
        err.to_string()
            .contains(&format!("nests deeper than {MAX_DEPTH}")),
        "{err}"
    );
}

/// Issue 18, item 3: `diff -p` reads no more than the size the tree records. A file recorded
/// as 10 bytes whose blob holds 1,000 is refused by its length (the old reader returned all
/// 1,000 bytes, and through a pack decompressed all of them first).
#[test]
fn content_bytes_stop_at_the_size_the_tree_records() {
    let (_dir, store) = store();
    let id = store.objects().write_bytes(&[b'x'; 1000]).unwrap();
    let reader = store.objects().reader();
    let side = SourceSide(&reader);
    match side.bytes(&id, 10, 1 << 20) {
        Err(StoreError::WrongLength { len, recorded, .. }) => {
            assert_eq!((len, recorded), (1000, 10))
        }
        other => panic!("want WrongLength, got {other:?}"),
    }
    assert_eq!(side.bytes(&id, 1000, 1 << 20).unwrap().unwrap().len(), 1000);
}
