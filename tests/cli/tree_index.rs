//! The tree index (`<store>/trees/<root-tree-id>.pack`, shared by the snapshots with that
//! root) through the binary. Pins: every commit path (snapshot, export, unpack, pull) leaves
//! one for its root; a no-op snapshot writes none (the file is untouched) and `gc` keeps it
//! until the last snapshot with its root is forgotten; `diff` reads both sides' trees from the
//! two index files and no tree object (`-v` counts them); a deleted index falls back to the
//! objects silently; a flipped byte, a truncation or another snapshot's index gives the same
//! diff and one notice; `verify` names a bad index and `reindex` rebuilds it; `gc` removes
//! the index of a forgotten snapshot; an older build's per-snapshot index
//! (`trees/<snapshot-id>.pack`) is still read, and `reindex` converts it; a mount lists a
//! snapshot whose subtree objects are gone (its listings come from the index).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use crate::export::{export, Install};
use crate::mount::{fuse_available, mount_daemon};
use crate::remote::Fleet;
use crate::util::{assert_same_tree, bytes, remove_stored, stored_object, write, Run, TestEnv};

/// The tree index of snapshot `id` of `store`: the one of its root tree.
fn index_of(env: &TestEnv, store: &Path, id: &str) -> PathBuf {
    let v = env
        .run(&[
            OsStr::new("--store"),
            store.as_os_str(),
            OsStr::new("--json"),
            OsStr::new("show"),
            OsStr::new(id),
        ])
        .ok()
        .json();
    let root = v["root"].as_str().expect("show names the root tree");
    store.join("trees").join(format!("{root}.pack"))
}

/// The names in `trees/`, sorted.
fn index_names(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(store.join("trees"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every snapshot `list` shows on `store`.
fn listed(env: &TestEnv, store: &Path) -> Vec<String> {
    let v = env
        .run(&[
            OsStr::new("--store"),
            store.as_os_str(),
            OsStr::new("--json"),
            OsStr::new("list"),
        ])
        .ok()
        .json();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot"].as_str().unwrap().to_string())
        .collect()
}

fn assert_indexed(env: &TestEnv, store: &Path, what: &str) {
    let ids = listed(env, store);
    assert!(!ids.is_empty(), "{what}: no snapshot listed");
    for id in ids {
        assert!(
            index_of(env, store, &id).is_file(),
            "{what}: snapshot {id} has no tree index"
        );
    }
}

/// A tree of 12 directories two levels deep, and the same tree with one file changed.
fn two_snapshots(env: &TestEnv) -> (String, String) {
    let src = env.path("src");
    for i in 0..12 {
        write(
            &src.join(format!("d{i:02}/f.txt")),
            format!("file {i}\n").as_bytes(),
        );
        write(&src.join(format!("d{i:02}/sub/g.bin")), &bytes(i, 2_000));
    }
    let a = env.snapshot(&src);
    write(&src.join("d07/sub/g.bin"), b"changed\n");
    let b = env.snapshot(&src);
    (a, b)
}

fn diff_v(env: &TestEnv, a: &str, b: &str) -> Run {
    let r = env.run(&["-v", "diff", a, b]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    r
}

/// (trees from the index, tree objects read) of side `side` in `diff -v` output.
fn side_counts(r: &Run, side: char) -> (u64, u64) {
    let prefix = format!("side {side}: ");
    let line = r
        .stderr()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(str::to_string))
        .unwrap_or_else(|| panic!("no `{prefix}` line\n{}", r.describe()));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    (nums[0], nums[1])
}

#[test]
fn every_commit_path_writes_an_index() {
    let env = TestEnv::new();
    let store = env.path("store");
    // snapshot --dir
    let (a, _) = two_snapshots(&env);
    assert_indexed(&env, &store, "snapshot --dir");
    // export (capture of an agent, then publish)
    let install = Install::new(&env);
    export(&env, &install, &env.path("bundle"), &[], &[]).ok();
    assert_eq!(listed(&env, &store).len(), 3);
    assert_indexed(&env, &store, "export");
    // unpack on another host
    let pack = env.path("a.zcpack");
    env.run(&["pack", &a, "--out", &pack.to_string_lossy()])
        .ok();
    let other = env.path("store-b");
    env.run(&[
        OsStr::new("--store"),
        other.as_os_str(),
        OsStr::new("unpack"),
        pack.as_os_str(),
    ])
    .ok();
    assert_indexed(&env, &other, "unpack");
    // pull from a remote
    let fleet = Fleet::file();
    fleet.host("h1", &[]);
    fleet.host("h2", &[]);
    let src = crate::remote::tree(&fleet.env.path("src"), 3);
    let id = fleet.snapshot("h1", &src);
    fleet.on("h1", &["push", &id]).ok();
    fleet.pull_and_check("h2", &id, &src);
    assert!(
        index_of(&fleet.env, Path::new(&fleet.store("h2")), &id).is_file(),
        "pull wrote no tree index"
    );
}

#[test]
fn diff_reads_two_index_files_and_falls_back_when_one_is_gone_or_bad() {
    let env = TestEnv::new();
    let store = env.path("store");
    let (a, b) = two_snapshots(&env);
    let r = diff_v(&env, &a, &b);
    let want = r.stdout();
    assert_eq!(want, "M\td07/sub/g.bin\n");
    // Both sides: every tree from the index (the expansion check reads all 25 once, the walk
    // the 3 on the changed path, the bundle-file lookup the root twice), not one tree object.
    assert_eq!(side_counts(&r, 'A'), (30, 0), "{}", r.describe());
    assert_eq!(side_counts(&r, 'B'), (30, 0), "{}", r.describe());
    assert!(!r.stderr().contains("notice"), "{}", r.describe());

    // Deleted: the same answer from the objects, and no notice (absence is not an error).
    let ia = index_of(&env, &store, &a);
    let good = fs::read(&ia).unwrap();
    fs::remove_file(&ia).unwrap();
    let r = diff_v(&env, &a, &b);
    assert_eq!(r.stdout(), want);
    assert_eq!(side_counts(&r, 'A'), (0, 30), "{}", r.describe());
    assert!(!r.stderr().contains("notice"), "{}", r.describe());
    env.run(&["verify"]).ok();

    // Damaged in several ways: the same answer, one notice, verify fails naming the index,
    // reindex rebuilds it.
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x20;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a flipped byte", flipped),
        ("a truncation", good[..good.len() - 7].to_vec()),
        (
            "another snapshot's index",
            fs::read(index_of(&env, &store, &b)).unwrap(),
        ),
        ("an empty file", Vec::new()),
    ];
    for (what, bytes) in cases {
        fs::write(&ia, &bytes).unwrap();
        let r = diff_v(&env, &a, &b);
        assert_eq!(r.stdout(), want, "{what}: {}", r.describe());
        assert_eq!(
            r.stderr()
                .matches("notice: the tree index of snapshot")
                .count(),
            1,
            "{what}: {}",
            r.describe()
        );
        assert!(r.stderr().contains(&a[..12]), "{what}: {}", r.describe());
        let (_, objects) = side_counts(&r, 'A');
        assert!(objects > 0, "{what}: {}", r.describe());
        let v = env.run(&["verify"]);
        assert_eq!(v.code(), 1, "{what}: {}", v.describe());
        assert!(
            v.stdout().contains("tree index of snapshot") && v.stdout().contains("reindex"),
            "{what}: {}",
            v.describe()
        );
        env.run(&["reindex"]).ok();
        env.run(&["verify"]).ok();
        assert_eq!(fs::read(&ia).unwrap(), good, "{what}: reindex rebuilt it");
    }
}

#[test]
fn gc_removes_the_index_of_a_forgotten_snapshot() {
    let env = TestEnv::new();
    let store = env.path("store");
    let (a, b) = two_snapshots(&env);
    let (ia, ib) = (index_of(&env, &store, &a), index_of(&env, &store, &b));
    env.run(&["forget", &a]).ok();
    assert!(ia.is_file());
    let v = env.run(&["--json", "gc", "--grace", "0"]).ok().json();
    assert_eq!(v["tree_indexes_removed"].as_u64(), Some(1), "{v}");
    assert!(!ia.exists());
    assert!(ib.is_file());
    env.run(&["verify"]).ok();
}

#[test]
fn a_no_op_snapshot_writes_no_index_and_gc_keeps_the_shared_one() {
    let env = TestEnv::new();
    let store = env.path("store");
    let (_, b) = two_snapshots(&env);
    let index = index_of(&env, &store, &b);
    let before = index_names(&store);
    let stamp = fs::metadata(&index).unwrap().modified().unwrap();
    // Twice more with nothing changed: the same root, its index already there.
    let c = env.snapshot(&env.path("src"));
    let d = env.snapshot(&env.path("src"));
    assert_eq!(listed(&env, &store).len(), 4);
    assert_eq!(index_names(&store), before, "no new index file");
    assert_eq!(index_of(&env, &store, &d), index);
    assert_eq!(fs::metadata(&index).unwrap().modified().unwrap(), stamp);
    // Each reads every tree from it.
    let r = env.run(&["-v", "diff", &b, &d]);
    assert_eq!(r.code(), 0, "{}", r.describe());
    env.run(&["verify"]).ok();
    // gc keeps it while one snapshot with that root lives, and drops it after.
    for id in [&b, &c] {
        env.run(&["forget", id]).ok();
        let v = env.run(&["--json", "gc", "--grace", "0"]).ok().json();
        assert_eq!(v["tree_indexes_removed"].as_u64(), Some(0), "{v}");
        assert!(index.is_file());
    }
    // A mount of the last one, by full id, resolves it without the catalog (the record names
    // the root, whose index is there) and lists it.
    if fuse_available() {
        let mnt = env.path("mnt");
        let _m = mount_daemon(&env, &d, &mnt);
        assert_same_tree(&env.path("src"), &mnt);
    }
    env.run(&["forget", &d]).ok();
    let v = env.run(&["--json", "gc", "--grace", "0"]).ok().json();
    assert_eq!(v["tree_indexes_removed"].as_u64(), Some(1), "{v}");
    assert!(!index.exists());
}

#[test]
fn an_older_per_snapshot_index_is_still_read_and_reindex_converts_it() {
    let env = TestEnv::new();
    let store = env.path("store");
    let (a, b) = two_snapshots(&env);
    // What an older build kept: the snapshot's trees-only pack, named by the snapshot.
    let ia = index_of(&env, &store, &a);
    let legacy = store.join("trees").join(format!("{a}.pack"));
    let digest = env.path("a.digest");
    env.run(&[
        "pack",
        &a,
        "--trees-only",
        "--out",
        &digest.to_string_lossy(),
    ])
    .ok();
    fs::rename(&digest, &legacy).unwrap();
    fs::remove_file(&ia).unwrap();
    let r = diff_v(&env, &a, &b);
    assert_eq!(r.stdout(), "M\td07/sub/g.bin\n");
    assert_eq!(side_counts(&r, 'A'), (30, 0), "{}", r.describe());
    assert!(!r.stderr().contains("notice"), "{}", r.describe());
    let v = env.run(&["--json", "verify"]).ok().json();
    assert_eq!(v["tree_indexes"].as_u64(), Some(2), "{v}");
    let v = env.run(&["--json", "gc", "--grace", "0"]).ok().json();
    assert_eq!(v["tree_indexes_removed"].as_u64(), Some(0), "{v}");
    assert!(legacy.is_file());
    // reindex writes the root's index and removes the older one.
    let v = env.run(&["--json", "reindex"]).ok().json();
    assert_eq!(v["tree_indexes_written"].as_u64(), Some(1), "{v}");
    assert!(ia.is_file() && !legacy.exists());
    assert_eq!(side_counts(&diff_v(&env, &a, &b), 'A'), (30, 0));
}

#[test]
fn a_mount_lists_from_the_index() {
    if !fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let store = env.path("store");
    let (_, b) = two_snapshots(&env);
    // Every tree object except the root goes: only the index can answer the listings.
    let v = env.run(&["--json", "ls", "-r", &b]).ok().json();
    let mut removed = 0;
    for row in v.as_array().unwrap() {
        if row["kind"] == "dir" {
            let hex = row["object"].as_str().unwrap();
            if stored_object(&store, hex).is_some() {
                remove_stored(&store, hex);
                removed += 1;
            }
        }
    }
    assert_eq!(removed, 24);
    let mnt = env.path("mnt");
    let _m = mount_daemon(&env, &b, &mnt);
    // Names, kinds, modes and bytes (blobs still come from the objects).
    assert_same_tree(&env.path("src"), &mnt);
}
