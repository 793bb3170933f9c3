//! Hostile trees (issue 8, item 5; issue 12 for `diff`): tree objects written straight into the store, as a pack
//! from another host could bring them. A chain of 20,000 nested trees and a "diamond" of 40
//! trees expanding to 2^40 paths are refused by `checkout`, `ls -r`, `mount` and `diff` with an error
//! naming the snapshot, before anything is written (no staging left, the destination as it
//! was), instead of overflowing the stack or walking forever. A chain exactly at the depth
//! limit still checks out.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use zeroclaw_bundle_store::limits::MAX_DEPTH;
use zeroclaw_bundle_store::{
    CaptureReport, EntryKind, ObjectId, Snapshot, SnapshotKind, Store, Tree, TreeEntry,
};

use crate::util::*;

/// A directory entry; `size` is the total of the files beneath it, as `verify` checks.
fn dir(name: &str, id: ObjectId, size: u64) -> TreeEntry {
    TreeEntry {
        name: name.as_bytes().to_vec(),
        kind: EntryKind::Dir,
        mode: 0o755,
        size,
        id,
    }
}

/// Bytes of the leaf's one file.
const LEAF_BYTES: u64 = 6;

/// A tree holding one 6-byte file `f`.
fn leaf(store: &Store) -> ObjectId {
    let (blob, len) = store.objects().write_from(&mut &b"leaf!\n"[..]).unwrap();
    let file = TreeEntry {
        name: b"f".to_vec(),
        kind: EntryKind::File,
        mode: 0o644,
        size: len,
        id: blob,
    };
    store
        .objects()
        .write_tree(&Tree::from_entries(vec![file]).unwrap())
        .unwrap()
}

/// Records a snapshot of `root` (record object, then catalog entry) and returns its id.
fn commit(store: &Store, root: ObjectId, what: &str) -> String {
    let snap = Snapshot {
        root,
        created_unix_ns: 1_700_000_000_000_000_000,
        host: "hostile".into(),
        kind: SnapshotKind::Tree,
        source: format!("crafted {what}"),
        agent: None,
        name: None,
        parent: None,
        report: CaptureReport::default(),
    };
    let lock = store.write_lock().unwrap();
    store
        .catalog()
        .commit_snapshot(&lock, &snap, None)
        .unwrap()
        .to_hex()
}

/// A chain of `depth` nested directories `d/d/.../d/f`.
fn chain(env: &TestEnv, depth: usize) -> String {
    let store = Store::open_or_create(&env.store).unwrap();
    let mut id = leaf(&store);
    for _ in 0..depth {
        id = store
            .objects()
            .write_tree(&Tree::from_entries(vec![dir("d", id, LEAF_BYTES)]).unwrap())
            .unwrap();
    }
    commit(&store, id, &format!("chain of {depth}"))
}

/// `levels` trees, each naming the next twice: 2^levels paths.
fn diamond(env: &TestEnv, levels: usize) -> String {
    let store = Store::open_or_create(&env.store).unwrap();
    let mut id = leaf(&store);
    let mut size = LEAF_BYTES;
    for _ in 0..levels {
        id = store
            .objects()
            .write_tree(&Tree::from_entries(vec![dir("a", id, size), dir("b", id, size)]).unwrap())
            .unwrap();
        size *= 2;
    }
    commit(&store, id, &format!("diamond of {levels}"))
}

/// Every name in `dir`, hidden ones included.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[track_caller]
fn refused_everywhere(env: &TestEnv, id: &str, limit: &str) {
    let short = &id[..12];
    // checkout to a vacant destination.
    let out = env.path("out");
    fs::create_dir_all(&out).unwrap();
    let r = env
        .run(&[
            "checkout",
            id,
            "--out",
            out.join("vacant").to_str().unwrap(),
        ])
        .fails(1, "too large to expand");
    assert!(r.stderr().contains(short), "{}", r.describe());
    assert!(r.stderr().contains(limit), "{}", r.describe());
    // checkout --force over an existing bundle: it stays as it was.
    let keep = out.join("keep");
    write(&keep.join("mine.txt"), b"mine\n");
    env.run(&[
        "checkout",
        id,
        "--out",
        keep.to_str().unwrap(),
        "--replace-any",
    ])
    .fails(1, "too large to expand");
    assert_eq!(names(&out), ["keep"], "staging or destination left behind");
    assert_eq!(names(&keep), ["mine.txt"]);
    // ls -r.
    let r = env.run(&["ls", "-r", id]).fails(1, "too large to expand");
    assert!(
        r.stderr().contains(&format!("snapshot {short}")),
        "{}",
        r.describe()
    );
    assert!(r.out.stdout.is_empty(), "{}", r.describe());
    // diff against a directory: refused before the walk expands it (exit 2, as diff(1)).
    let empty = env.path("empty");
    fs::create_dir_all(&empty).unwrap();
    let r = env.run(&["diff", id, empty.to_str().unwrap()]);
    assert_eq!(r.code(), 2, "{}", r.describe());
    assert!(
        r.stderr().contains("too large to expand"),
        "{}",
        r.describe()
    );
    assert!(r.stderr().contains(short), "{}", r.describe());
    // Against itself: equal trees are pruned at the root, so nothing is expanded or checked.
    let r = env.run(&["diff", id, id]);
    assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
    // The store itself is fine: verify walks trees once each, whatever they expand to.
    env.run(&["verify"]).ok();
}

#[test]
fn deep_chain_is_refused_not_a_stack_overflow() {
    let env = TestEnv::new();
    let id = chain(&env, 20_000);
    refused_everywhere(&env, &id, "directory depth");
}

#[test]
fn diamond_is_refused_not_walked_forever() {
    let env = TestEnv::new();
    let id = diamond(&env, 40);
    refused_everywhere(&env, &id, "entry count");
}

#[test]
fn chain_at_the_depth_limit_checks_out_and_one_more_is_refused() {
    let env = TestEnv::new();
    let depth = usize::try_from(MAX_DEPTH).unwrap();
    let ok = chain(&env, depth);
    let out = env.path("ok");
    env.run(&["checkout", &ok, "--out", out.to_str().unwrap()])
        .ok();
    let deepest: std::path::PathBuf = std::iter::repeat_n("d", depth).collect();
    assert_eq!(fs::read(out.join(&deepest).join("f")).unwrap(), b"leaf!\n");
    let listed = env.run(&["ls", "-r", &ok]).ok().stdout();
    assert_eq!(listed.lines().count(), depth + 1);
    let over = chain(&env, depth + 1);
    refused_everywhere(&env, &over, "directory depth");
}

#[test]
fn mount_of_a_hostile_tree_is_refused() {
    if !crate::mount::fuse_available() {
        return;
    }
    type Make = fn(&TestEnv) -> String;
    let hostile: [(&str, Make); 2] = [
        ("diamond", |env| diamond(env, 40)),
        ("chain", |env| chain(env, 20_000)),
    ];
    for (what, make) in hostile {
        let env = TestEnv::new();
        let id = make(&env);
        let at = env.path("mnt");
        fs::create_dir_all(&at).unwrap();
        for daemon in [false, true] {
            let mut args = vec![OsStr::new("mount"), OsStr::new(&id), at.as_os_str()];
            if daemon {
                args.push(OsStr::new("--daemon"));
            }
            let r = env.run(&args).fails(1, "refusing to mount");
            assert!(r.stderr().contains(&id[..12]), "{what}: {}", r.describe());
            assert!(
                !crate::mount::mounted(&at),
                "{what}: mounted anyway\n{}",
                r.describe()
            );
        }
        assert!(
            !env.store.join("leases").exists() || names(&env.store.join("leases")).is_empty(),
            "{what}: a lease was left behind"
        );
    }
}
