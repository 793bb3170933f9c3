//! Pins: the mounted tree is exactly the stored tree (names incl. non-UTF-8, kinds, sizes,
//! modes, bytes, ids), owned by the mounting user, with stable inode numbers; positioned
//! reads at any offset return the right bytes.

use std::fs;
use std::os::unix::fs::{DirEntryExt, FileExt, MetadataExt};

use zeroclaw_bundle_mount::MountOptions;

use crate::util::{walk, Env};
use crate::{noise, sample, BIG};

#[test]
fn mounted_tree_equals_what_was_stored() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let seen = walk(&m.path);
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "names differ"
    );
    for (path, want) in &expected {
        assert_eq!(&seen[path], want, "{}", String::from_utf8_lossy(path));
    }
    let meta = fs::metadata(&m.path).unwrap();
    assert_eq!(meta.uid(), rustix::process::getuid().as_raw());
    assert_eq!(meta.gid(), rustix::process::getgid().as_raw());
    assert_eq!(meta.ino(), 1, "the root is inode 1");
}

#[test]
fn inode_numbers_are_stable_and_match_readdir() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let ws = m.path.join("workspace");
    let first: Vec<(std::ffi::OsString, u64)> = fs::read_dir(&ws)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), e.ino())
        })
        .collect();
    assert_eq!(first.len(), 3);
    for (name, ino) in &first {
        assert_eq!(fs::symlink_metadata(ws.join(name)).unwrap().ino(), *ino);
    }
    // A second listing and lookups by path give the same numbers.
    let again: Vec<_> = fs::read_dir(&ws)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), e.ino())
        })
        .collect();
    assert_eq!(first, again);
    let leaf = ws.join("deep/deeper/leaf.txt");
    assert_eq!(
        fs::metadata(&leaf).unwrap().ino(),
        fs::metadata(&leaf).unwrap().ino()
    );
    // Distinct entries with equal content are still distinct inodes.
    let a = fs::metadata(m.path.join("README.md")).unwrap().ino();
    let b = fs::metadata(m.path.join("skills/same-as-readme.md"))
        .unwrap()
        .ino();
    assert_ne!(a, b);
}

#[test]
fn positioned_reads_return_the_right_bytes() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let want = noise(BIG, 7);
    let f = fs::File::open(m.path.join("skills/big.bin")).unwrap();
    for (pos, len) in [
        (0usize, 1usize),
        (1, 4095),
        (4095, 3),
        (131_071, 200_000),
        (BIG - 10, 10),
        (BIG - 1, 100),
    ] {
        let mut buf = vec![0u8; len];
        let n = f.read_at(&mut buf, pos as u64).unwrap();
        let end = (pos + len).min(BIG);
        assert_eq!(n, end - pos, "read at {pos}");
        assert_eq!(&buf[..n], &want[pos..end], "bytes at {pos}");
    }
    let mut buf = [0u8; 8];
    assert_eq!(
        f.read_at(&mut buf, BIG as u64 + 5).unwrap(),
        0,
        "past the end"
    );
}

/// Issue 17 (file modes): a file shows exactly the permission bits its tree entry records, as
/// a checkout writes them: a `0600` key is 0600, unreadable by group and others through the
/// mount too; directories 0755.
#[test]
fn recorded_modes_show_exactly() {
    use crate::util::{dir, moded};
    let env = Env::new();
    let (root, expected) = env.build(vec![
        moded(".env", 0o600, "API_KEY=x\n"),
        moded("shared.conf", 0o640, "a = 1\n"),
        moded("run.sh", 0o755, "#!/bin/sh\n"),
        moded("mine.sh", 0o700, "#!/bin/sh\n"),
        dir(
            "sub",
            vec![moded("plain.md", 0o644, "p\n"), moded("none", 0, "")],
        ),
    ]);
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let mode = |p: &str| fs::metadata(m.path.join(p)).unwrap().mode() & 0o7777;
    assert_eq!(mode(".env"), 0o600);
    assert_eq!(mode("shared.conf"), 0o640);
    assert_eq!(mode("run.sh"), 0o755);
    assert_eq!(mode("mine.sh"), 0o700);
    assert_eq!(mode("sub"), 0o755);
    assert_eq!(mode("sub/plain.md"), 0o644);
    assert_eq!(mode("sub/none"), 0);
    let seen = walk(&m.path);
    assert_eq!(seen, expected);
    assert_eq!(fs::read(m.path.join(".env")).unwrap(), b"API_KEY=x\n");
}
