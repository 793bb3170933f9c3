//! Pins that every entry reads back exactly as its tree records it, whichever request
//! answers: READDIRPLUS, LOOKUP, or a GETATTR (forced with `AT_STATX_FORCE_SYNC`), which is
//! answered from the inode table's packed 16-byte node. Sizes on both sides of that node's
//! 48-bit size field (2^48 - 1 and more are kept whole beside it) up to `i64::MAX`, kinds
//! and permission bits; a file whose blob is not its recorded size fails with EIO and serves
//! no byte. A 5,000-entry directory (names of 1 to 200 bytes, non-UTF-8, neighbours in byte
//! order) read through a one-tree cache finds each name's own file, lists in byte order and
//! gives each file its blob id; format-1 trees (no mode field) read the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::fs;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{statx, AtFlags, StatxFlags, CWD};
use zeroclaw_bundle_mount::MountOptions;
use zeroclaw_bundle_store::limits::Expansion;
use zeroclaw_bundle_store::{ObjectId, Tree, TreeEntry};

use crate::util::{errno_of, moded, mount_counting, xattr_id, Env, Mounted};

/// The smallest size the inode table keeps beside its packed node (2^48 - 1).
const SPILLED: u64 = (1 << 48) - 1;

/// The largest size a tree may record (`i64::MAX`, Linux's largest file).
const MAX_SIZE: u64 = i64::MAX as u64;

/// What one path of a stored tree should report through the mount.
#[derive(Debug, Clone)]
struct Expect {
    dir: bool,
    perm: u32,
    size: u64,
    /// A file's blob bytes (which need not be `size` long).
    blob: Option<Vec<u8>>,
    id: ObjectId,
}

/// An entry to store as its tree records it: a file's recorded size need not be its blob's.
enum Rec {
    /// Permission bits, recorded size, the blob's bytes.
    File(u32, u64, &'static [u8]),
    Dir(Vec<(&'static [u8], Rec)>),
}

fn file(name: &'static [u8], mode: u32, size: u64, blob: &'static [u8]) -> (&'static [u8], Rec) {
    (name, Rec::File(mode, size, blob))
}

/// A file whose recorded size is its blob's length.
fn honest(name: &'static [u8], mode: u32, blob: &'static [u8]) -> (&'static [u8], Rec) {
    file(name, mode, blob.len() as u64, blob)
}

fn dir(name: &'static [u8], entries: Vec<(&'static [u8], Rec)>) -> (&'static [u8], Rec) {
    (name, Rec::Dir(entries))
}

/// Writes `root` (format-2 trees, each directory recording the total beneath it) and returns
/// its id and what each path should report (the root is the empty path).
fn store(env: &Env, root: Vec<(&'static [u8], Rec)>) -> (ObjectId, BTreeMap<Vec<u8>, Expect>) {
    let mut expected = BTreeMap::new();
    let entry = store_rec(env, b"", &Rec::Dir(root), b"", &mut expected);
    (entry.id, expected)
}

fn store_rec(
    env: &Env,
    name: &[u8],
    rec: &Rec,
    path: &[u8],
    out: &mut BTreeMap<Vec<u8>, Expect>,
) -> TreeEntry {
    let objects = env.store.objects();
    let (entry, blob) = match rec {
        Rec::File(mode, size, blob) => {
            let id = objects.write_bytes(blob).expect("write blob");
            let entry = TreeEntry::file(name.to_vec(), *mode, *size, id);
            (entry, Some(blob.to_vec()))
        }
        Rec::Dir(children) => {
            let entries = children
                .iter()
                .map(|(child, rec)| store_rec(env, child, rec, &join(path, child), out))
                .collect();
            let tree = Tree::from_entries(entries).expect("valid tree");
            let id = objects.write_tree(&tree).expect("write tree");
            (TreeEntry::dir(name.to_vec(), tree.total_size(), id), None)
        }
    };
    out.insert(
        path.to_vec(),
        Expect {
            dir: blob.is_none(),
            perm: entry.mode,
            size: entry.size,
            blob,
            id: entry.id,
        },
    );
    entry
}

/// `parent/name` as relative path bytes (`name` alone below the root).
fn join(parent: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = parent.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

fn at(m: &Mounted, rel: &[u8]) -> PathBuf {
    if rel.is_empty() {
        m.path.clone()
    } else {
        m.path.join(OsStr::from_bytes(rel))
    }
}

fn shown(rel: &[u8]) -> String {
    String::from_utf8_lossy(rel).into_owned()
}

/// What the stored boundary trees claim to expand to. Their recorded bytes pass the
/// expansion check's 1 TiB, so the walk would refuse the mount; a known expansion within the
/// limits (as a store's expansion record gives) is trusted and not walked again.
fn trusted(opts: MountOptions) -> MountOptions {
    MountOptions {
        known_expansion: Some(Expansion {
            depth: 4,
            entries: 10_000,
            bytes: 0,
        }),
        ..opts
    }
}

/// The attributes `stat` reported for `rel` are exactly the recorded ones.
fn assert_meta(how: &str, rel: &[u8], meta: &fs::Metadata, want: &Expect) {
    let rel = shown(rel);
    assert_eq!(meta.is_dir(), want.dir, "{how} {rel:?}: is_dir");
    assert_eq!(meta.is_file(), !want.dir, "{how} {rel:?}: is_file");
    assert_eq!(
        meta.mode() & 0o7777,
        want.perm,
        "{how} {rel:?}: permission bits"
    );
    assert_eq!(meta.len(), want.size, "{how} {rel:?}: size");
    assert_eq!(
        meta.blocks(),
        want.size.div_ceil(512),
        "{how} {rel:?}: blocks"
    );
}

/// `statx` with `AT_STATX_FORCE_SYNC`: the kernel sends GETATTR whatever it has cached, and
/// the daemon answers from its inode table (the packed node), not from a tree entry.
fn assert_forced_getattr(path: &Path, rel: &[u8], want: &Expect) {
    let rel = shown(rel);
    let st = statx(
        CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW | AtFlags::STATX_FORCE_SYNC,
        StatxFlags::BASIC_STATS,
    )
    .unwrap_or_else(|e| panic!("statx {rel:?}: {e}"));
    let mode = u32::from(st.stx_mode);
    let kind = if want.dir {
        libc::S_IFDIR
    } else {
        libc::S_IFREG
    };
    assert_eq!(mode & libc::S_IFMT, kind, "GETATTR {rel:?}: kind");
    assert_eq!(mode & 0o7777, want.perm, "GETATTR {rel:?}: permission bits");
    assert_eq!(st.stx_size, want.size, "GETATTR {rel:?}: size");
    assert_eq!(
        st.stx_blocks,
        want.size.div_ceil(512),
        "GETATTR {rel:?}: blocks"
    );
}

/// Reading `rel` gives its blob when the blob is its recorded size, and EIO (no byte) when
/// it is not: a passthrough open fails at the open, a daemon open at the first read.
fn assert_reads_or_eio(m: &Mounted, rel: &[u8], want: &Expect) {
    let (Some(blob), path) = (&want.blob, at(m, rel)) else {
        return;
    };
    if blob.len() as u64 == want.size {
        assert_eq!(&fs::read(&path).unwrap(), blob, "{:?}", shown(rel));
        return;
    }
    let mut buf = [0u8; 64];
    let read = fs::File::open(&path).and_then(|mut f| f.read(&mut buf));
    assert_eq!(
        errno_of(&format!("read {:?} (wrong size)", shown(rel)), read),
        libc::EIO
    );
}

/// Every relative path below `root`, listed with `read_dir` alone.
fn list_all(root: &Path) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::from([Vec::new()]);
    let mut dirs = vec![(root.to_path_buf(), Vec::new())];
    while let Some((path, rel)) = dirs.pop() {
        for e in fs::read_dir(&path).unwrap_or_else(|e| panic!("list {path:?}: {e}")) {
            let e = e.unwrap();
            let child = join(&rel, e.file_name().as_bytes());
            if e.file_type().unwrap().is_dir() {
                dirs.push((e.path(), child.clone()));
            }
            out.insert(child);
        }
    }
    out
}

/// Checks every path of `expected` through the mount of `root`: on one mount after a listing
/// (READDIRPLUS), on a fresh one by direct path (LOOKUP), and on both through a forced
/// GETATTR; then statfs's block count (the root's packed size) and every file's read.
fn assert_every_request_reports(env: &Env, root: ObjectId, expected: &BTreeMap<Vec<u8>, Expect>) {
    let opts = trusted(MountOptions::default());
    let Some(m) = env.mount(root, &opts) else {
        return;
    };
    let listed = list_all(&m.path);
    assert_eq!(listed, expected.keys().cloned().collect(), "listed paths");
    for (rel, want) in expected {
        let meta = fs::symlink_metadata(at(&m, rel)).unwrap();
        assert_meta("after a listing", rel, &meta, want);
        assert_forced_getattr(&at(&m, rel), rel, want);
    }
    let st = rustix::fs::statfs(&m.path).unwrap();
    assert_eq!(
        st.f_blocks as u64,
        expected[&b""[..]].size.div_ceil(st.f_frsize as u64),
        "statfs blocks: the root's size"
    );
    drop(m);

    let Some(mut m) = env.mount(root, &opts) else {
        return;
    };
    // Deepest paths first: each is the first request for it and for its directories.
    for (rel, want) in expected.iter().rev() {
        let meta = fs::symlink_metadata(at(&m, rel)).unwrap();
        assert_meta("by path", rel, &meta, want);
    }
    for (rel, want) in expected {
        assert_forced_getattr(&at(&m, rel), rel, want);
        assert_reads_or_eio(&m, rel, want);
        assert_eq!(xattr_id(&at(&m, rel)), want.id.to_hex(), "{:?}", shown(rel));
    }
    let mismatched = expected
        .values()
        .any(|e| e.blob.as_ref().is_some_and(|b| b.len() as u64 != e.size));
    if mismatched {
        assert!(!m.handle().faults().is_empty(), "wrong sizes are reported");
    }
}

#[test]
fn sizes_around_the_packed_48_bits_report_exactly_through_every_request() {
    let env = Env::new();
    let (root, expected) = store(
        &env,
        vec![
            honest(b"key", 0o600, b"secret\n"),
            honest(b"notes.md", 0o644, b"notes\n"),
            honest(b"run.sh", 0o755, b"#!/bin/sh\necho hi\n"),
            // The size's low 32 bits, and bits 32 to 47, each at their edges.
            file(b"low-max", 0o644, (1 << 32) - 1, b"low-max"),
            file(b"high-first", 0o600, 1 << 32, b"high-first"),
            file(
                b"mixed-bits",
                0o755,
                (1 << 47) | (1 << 32) | 0xdead_beef,
                b"mixed",
            ),
            file(b"below-spill", 0o644, SPILLED - 1, b"below"),
            file(b"at-spill", 0o600, SPILLED, b"at"),
            file(b"past-spill", 0o755, SPILLED + 1, b"past"),
            file(b"far", 0o644, 1 << 50, b"far"),
            file(b"farther", 0o600, (1 << 62) + 3, b"farther"),
            // A blob one byte longer, and one byte shorter, than its entry records.
            file(b"longer-blob", 0o644, 4, b"12345"),
            file(b"shorter-blob", 0o644, 6, b"12345"),
            dir(
                b"dir-below-spill",
                vec![file(b"f", 0o644, SPILLED - 1, b"db")],
            ),
            dir(b"dir-at-spill", vec![file(b"f", 0o600, SPILLED, b"ds")]),
            dir(
                b"dir-past-spill",
                vec![file(b"f", 0o755, SPILLED + 1, b"dp")],
            ),
            dir(b"dir-far", vec![file(b"f", 0o644, 1 << 50, b"df")]),
            // No file of its own past 2^48, and more than 2^48 in all.
            dir(
                b"dir-summed-past",
                vec![
                    file(b"p0", 0o644, 1 << 47, b"p0"),
                    file(b"p1", 0o600, 1 << 47, b"p1"),
                    file(b"p2", 0o755, (1 << 47) - 1, b"p2"),
                    honest(b"small.txt", 0o644, b"small beside the huge\n"),
                    dir(b"sub", vec![file(b"q", 0o644, 1 << 47, b"q")]),
                    dir(b"empty", vec![]),
                ],
            ),
        ],
    );
    let past = |rel: &[u8]| expected[rel].size > SPILLED;
    assert!(past(b"") && past(b"dir-summed-past") && !past(b"dir-summed-past/p0"));
    assert_every_request_reports(&env, root, &expected);
}

/// The largest sizes a tree may hold: a file of `i64::MAX` bytes, its directory and the root
/// recording the same.
#[test]
fn the_largest_recordable_size_reports_exactly_through_every_request() {
    let env = Env::new();
    let (root, expected) = store(
        &env,
        vec![dir(b"max", vec![file(b"f", 0o755, MAX_SIZE, b"max")])],
    );
    assert_eq!(expected[&b""[..]].size, MAX_SIZE);
    assert_every_request_reports(&env, root, &expected);
}

const MANY: usize = 5_000;

/// 5,000 distinct names of 1 to 200 bytes (no NUL, no `/`, not `.` or `..`): many not UTF-8,
/// and runs of neighbours in byte order (`a`, `a0`, `a00`, `a\xff`, long shared prefixes).
fn many_names() -> Vec<Vec<u8>> {
    let mut names: BTreeSet<Vec<u8>> = [
        &b"a"[..],
        b"a0",
        b"a00",
        b"a000",
        b"a01",
        b"a\x01",
        b"a\x7f",
        b"a\x80",
        b"a\xff",
        b"a\xff\xff",
        b"aa",
        b"b",
        b"\x01",
        b"\xff",
        b"\xff\xff",
        b"caf\xe9",
        b"-",
        b" ",
        b"...",
        b".a",
    ]
    .iter()
    .map(|n| n.to_vec())
    .collect();
    for len in [2, 100, 199, 200] {
        let mut long = vec![b'a'; len];
        names.insert(long.clone());
        *long.last_mut().unwrap() = b'b';
        names.insert(long.clone());
        *long.last_mut().unwrap() = 0xff;
        names.insert(long);
    }
    let bytes = crate::noise(1 << 20, 11);
    let (mut from, mut n) = (0, 0);
    while names.len() < MANY {
        let len = 1 + n % 200;
        n += 1;
        let name: Vec<u8> = bytes[from..from + len]
            .iter()
            .map(|&b| if b == 0 || b == b'/' { b'_' } else { b })
            .collect();
        from = (from + len) % (bytes.len() - 200);
        if name != b"." && name != b".." {
            names.insert(name);
        }
    }
    names.into_iter().collect()
}

/// Each file's own content: its index and its name in hex.
fn content(index: usize, name: &[u8]) -> Vec<u8> {
    let hex: String = name.iter().map(|b| format!("{b:02x}")).collect();
    format!("{index} {hex}\n").into_bytes()
}

const MODES: [u32; 3] = [0o644, 0o600, 0o755];

#[test]
fn five_thousand_names_each_find_their_own_file_through_a_one_tree_cache() {
    let names = many_names();
    assert!(names.iter().map(Vec::len).collect::<BTreeSet<_>>().len() == 200);
    let many = names
        .iter()
        .enumerate()
        .map(|(i, name)| moded(name, MODES[i % 3], content(i, name)))
        .collect();
    let other = (0..64)
        .map(|i| crate::util::file(format!("o{i:02}"), format!("{i}\n")))
        .collect();
    let env = Env::new();
    let (root, expected) = env.build(vec![
        crate::util::dir("many", many),
        crate::util::dir("other", other),
    ]);
    let Some((m, source)) = mount_counting(&env, root, &expected[&b"many"[..]].id) else {
        return;
    };
    let path = |name: &[u8]| m.path.join("many").join(OsStr::from_bytes(name));

    // Every 250 files, a name never asked for in `other` is looked up: its tree pushes
    // `many`'s out of the one-tree cache, so the next LOOKUP, open or xattr of a file in
    // `many` (in turn) reads `many` again.
    let mut evictions = 0;
    let mut evict = || {
        let o = m.path.join(format!("other/o{evictions:02}"));
        assert!(fs::symlink_metadata(&o).unwrap().is_file());
        evictions += 1;
    };
    // A walk out of name order (2003 is prime to 5,000), from an uncached tree each time.
    for k in 0..MANY {
        let i = k * 2003 % MANY;
        let (name, rel) = (&names[i], join(b"many", &names[i]));
        let p = path(name);
        let evict_before = if k % 250 == 0 { (k / 250) % 3 } else { 3 };
        if evict_before == 0 {
            evict();
        }
        let meta = fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("{:?}: {e}", shown(name)));
        assert_eq!(meta.mode() & 0o7777, MODES[i % 3], "{:?}", shown(name));
        if evict_before == 1 {
            evict();
        }
        let data = fs::read(&p).unwrap_or_else(|e| panic!("{:?}: {e}", shown(name)));
        assert_eq!(
            data,
            content(i, name),
            "{:?}: read another file",
            shown(name)
        );
        if evict_before == 2 {
            evict();
        }
        assert_eq!(
            xattr_id(&p),
            expected[&rel].id,
            "{:?}: blob id",
            shown(name)
        );
    }
    assert!(
        source.reads() >= evictions,
        "many's tree was read again after each eviction"
    );

    // Names between neighbours, and past either end, are not found.
    for absent in [
        &b"a\x00"[..1],
        b"a000\x01",
        b"a\xfe",
        b"a\xff\xff\xff",
        b"\x01\x01",
    ] {
        if !names.iter().any(|n| n == absent) {
            assert_eq!(
                errno_of("stat absent", fs::symlink_metadata(path(absent))),
                libc::ENOENT,
                "{:?}",
                shown(absent)
            );
        }
    }

    let listed: Vec<Vec<u8>> = fs::read_dir(m.path.join("many"))
        .unwrap()
        .map(|e| e.unwrap().file_name().as_bytes().to_vec())
        .collect();
    assert!(
        listed == names,
        "the listing is exactly the names, in byte order"
    );
    for (i, name) in names.iter().enumerate() {
        let want = Expect {
            dir: false,
            perm: MODES[i % 3],
            size: content(i, name).len() as u64,
            blob: None,
            id: ObjectId::of(b""),
        };
        let meta = fs::symlink_metadata(path(name)).unwrap();
        assert_meta("after a listing", name, &meta, &want);
        assert_forced_getattr(&path(name), name, &want);
    }
}

/// Format-1 tree bytes (no mode field), as builds before modes wrote them: `(kind code,
/// name, size, id)` per entry, given in name order.
fn v1_tree(entries: &[(u8, Vec<u8>, u64, ObjectId)]) -> Vec<u8> {
    let mut out = b"ZCBT\x01".to_vec();
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for (kind, name, size, id) in entries {
        out.push(*kind);
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(id.as_bytes());
    }
    out
}

/// Format-1 trees (kept as their own bytes by the tree cache) read through a one-tree cache:
/// every name is found, files show the modes their kinds imply (0644, exec 0755), sizes
/// past the packed 48 bits report exactly, and a wrong-sized blob is EIO.
#[test]
fn format_1_trees_read_back_with_implied_modes_and_exact_sizes() {
    let env = Env::new();
    let objects = env.store.objects();
    let mut expected = BTreeMap::new();
    let mut sub_entries = Vec::new();
    let mut sub_names: Vec<Vec<u8>> = (0..300).map(|i| format!("n{i:03}").into_bytes()).collect();
    sub_names.extend([
        b"a".to_vec(),
        b"a0".to_vec(),
        b"a\xff".to_vec(),
        b"z".to_vec(),
    ]);
    sub_names.sort();
    for (i, name) in sub_names.iter().enumerate() {
        let blob = content(i, name);
        let id = objects.write_bytes(&blob).unwrap();
        let (kind, perm) = if i % 2 == 0 { (1, 0o644) } else { (2, 0o755) };
        sub_entries.push((kind, name.clone(), blob.len() as u64, id));
        let want = Expect {
            dir: false,
            perm,
            size: blob.len() as u64,
            blob: Some(blob),
            id,
        };
        expected.insert(join(b"sub", name), want);
    }
    let sub_size: u64 = sub_entries.iter().map(|e| e.2).sum();
    let sub = objects.write_bytes(&v1_tree(&sub_entries)).unwrap();
    let doc = objects.write_bytes(b"doc\n").unwrap();
    let huge = objects.write_bytes(b"huge").unwrap();
    let run = objects.write_bytes(b"#!/bin/sh\n").unwrap();
    let root_entries = vec![
        (1, b"doc.md".to_vec(), 4, doc),
        (1, b"huge".to_vec(), SPILLED + 1, huge),
        (2, b"run.sh".to_vec(), 10, run),
        (3, b"sub".to_vec(), sub_size, sub),
    ];
    let root = objects.write_bytes(&v1_tree(&root_entries)).unwrap();
    assert_eq!(objects.read_tree(&root).unwrap().format_version(), 1);
    for (rel, perm, blob) in [
        (&b"doc.md"[..], 0o644, Some(&b"doc\n"[..])),
        (b"huge", 0o644, Some(b"huge")),
        (b"run.sh", 0o755, Some(b"#!/bin/sh\n")),
        (b"sub", 0o755, None),
    ] {
        let (_, _, size, id) = root_entries.iter().find(|e| e.1 == rel).unwrap();
        let want = Expect {
            dir: blob.is_none(),
            perm,
            size: *size,
            blob: blob.map(<[u8]>::to_vec),
            id: *id,
        };
        expected.insert(rel.to_vec(), want);
    }
    let total = root_entries.iter().map(|e| e.2).sum();
    let root_expect = Expect {
        dir: true,
        perm: 0o755,
        size: total,
        blob: None,
        id: root,
    };
    expected.insert(Vec::new(), root_expect);

    let opts = trusted(MountOptions {
        tree_cache_entries: 1,
        ..MountOptions::default()
    });
    let Some(m) = env.mount(root, &opts) else {
        return;
    };
    // Alternating between the two trees, so each lookup reads its tree again.
    let (top, below): (Vec<_>, Vec<_>) = expected.iter().partition(|(rel, _)| !rel.contains(&b'/'));
    for (k, (rel, want)) in below.iter().enumerate() {
        let (top_rel, top_want) = top[k % top.len()];
        for (rel, want) in [(*rel, *want), (top_rel, top_want)] {
            let meta = fs::symlink_metadata(at(&m, rel)).unwrap();
            assert_meta("by path", rel, &meta, want);
            assert_forced_getattr(&at(&m, rel), rel, want);
            assert_reads_or_eio(&m, rel, want);
            assert_eq!(xattr_id(&at(&m, rel)), want.id.to_hex(), "{:?}", shown(rel));
        }
    }
    let listed: Vec<Vec<u8>> = fs::read_dir(m.path.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().as_bytes().to_vec())
        .collect();
    assert!(
        listed == sub_names,
        "the listing is exactly the names, in byte order"
    );
}
