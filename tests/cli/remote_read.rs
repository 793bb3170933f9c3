//! Remote snapshot refs as `diff` and `mount` sides, read in place: a remote diff fetches the
//! record and the trees pack and nothing of the blob packs (requests and bytes counted by the
//! remote's counting wrapper, printed by `-v`); a snapshot pushed without a trees pack (an
//! older build) still diffs, through ranged reads of its packs; a mount of a remote snapshot
//! serves the same tree as a checkout and reading one file fetches that file's range of its
//! pack, not the pack; the ref grammar (a configured remote's name, else a local ref) and its
//! errors. The same checks run against the real S3 server in `remote_s3`.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::mount::{fuse_available, mounted};
use crate::remote::{tree, Fleet};
use crate::util::{assert_same_tree, bytes, write, Run};

/// The per-prefix `(requests, bytes received)` of the `-v` traffic line of remote `origin`.
pub fn traffic(stderr: &str) -> BTreeMap<String, (u64, u64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("remote origin: "))
        .unwrap_or_else(|| panic!("no traffic line in:\n{stderr}"));
    let inner = line
        .split("requests/received/sent: ")
        .nth(1)
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("traffic line has no prefix list: {line}"));
    let mut out = BTreeMap::new();
    if inner == "none" {
        return out;
    }
    for part in inner.split(", ") {
        let (name, counts) = part.split_once(' ').expect("NAME R/xB/yB");
        let mut it = counts.split('/');
        let req: u64 = it.next().unwrap().parse().unwrap();
        let rx: u64 = it.next().unwrap().trim_end_matches('B').parse().unwrap();
        out.insert(name.to_string(), (req, rx));
    }
    out
}

fn size_of(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

/// Host `a` snapshots a tree with two large incompressible files and pushes it; returns the
/// source dir and the id. `extra`: `remote add` options (an S3 endpoint).
fn pushed(f: &Fleet, extra: &[&str]) -> (std::path::PathBuf, String) {
    let src = tree(&f.env.path("src"), 7);
    write(&src.join("big/one.bin"), &bytes(70, 400_000));
    write(&src.join("big/two.bin"), &bytes(71, 400_000));
    f.host("a", extra);
    let id = f.snapshot("a", &src);
    f.on("a", &["push", &id]).ok();
    f.host("b", extra);
    (src, id)
}

/// A remote diff reads the record and the trees pack only. `remote_root`: where the remote's
/// keys are on disk (the `file://` directory or the S3 server's bucket prefix).
pub fn remote_diff_fetches_trees_only(f: &Fleet, extra: &[&str], remote_root: &Path) {
    let (src, id) = pushed(f, extra);
    let trees_pack = remote_root.join(format!("trees/{id}.zcpack"));
    assert!(
        trees_pack.is_file(),
        "push wrote no {}",
        trees_pack.display()
    );
    let record = remote_root.join(format!("snapshots/{id}"));
    let packs_total: u64 = fs::read_dir(remote_root.join("packs"))
        .unwrap()
        .map(|e| size_of(&e.unwrap().path()))
        .sum();

    // Equal: exit 0, on host b whose store has none of it.
    let same = f
        .on(
            "b",
            &[
                "-v",
                "diff",
                &format!("origin/{}", &id[..12]),
                &src.to_string_lossy(),
            ],
        )
        .ok();
    assert_eq!(same.stdout(), "", "{}", same.describe());
    let t = traffic(&same.stderr());
    // Besides the record and the trees pack, one listing of the snapshot's signatures (who
    // signed each side is part of a diff; this one is unsigned, so nothing is received).
    assert_eq!(
        t.keys().map(String::as_str).collect::<Vec<_>>(),
        ["signatures", "snapshots", "trees"],
        "a remote diff touched more than the record, the trees pack and the signature list: {t:?}"
    );
    assert_eq!(t["signatures"], (1, 0), "one signature listing: {t:?}");
    let received: u64 = t.values().map(|(_, rx)| rx).sum();
    assert_eq!(
        received,
        size_of(&trees_pack) + size_of(&record),
        "bytes received: the trees pack and the record, once each ({t:?})"
    );
    let requests: u64 = t.values().map(|(r, _)| r).sum();
    assert!(requests <= 5, "{requests} requests: {t:?}");
    assert!(
        packs_total > 800_000,
        "the blob packs are what was not read"
    );

    // One byte changed, a file added, at depth; a subtree side.
    let changed = f.env.path("changed");
    crate::util::copy_tree(&src, &changed);
    write(&changed.join("deep/a/b/c.txt"), b"host 8\n");
    write(&changed.join("deep/a/new.txt"), b"new\n");
    let r = f
        .on(
            "b",
            &[
                "-v",
                "diff",
                &format!("origin/{id}"),
                &changed.to_string_lossy(),
            ],
        )
        .fails(1, "");
    assert_eq!(
        r.stdout(),
        "M\tdeep/a/b/c.txt\nA\tdeep/a/new.txt\n",
        "{}",
        r.describe()
    );
    assert!(!traffic(&r.stderr()).contains_key("packs"));
    // -p cannot show contents it never fetched: it says so (not "too large").
    let p = f
        .on(
            "b",
            &[
                "diff",
                "-p",
                &format!("origin/{id}"),
                &changed.to_string_lossy(),
            ],
        )
        .fails(1, "");
    assert!(
        p.stdout()
            .contains("Not shown: deep/a/b/c.txt: side A holds no file contents"),
        "{}",
        p.describe()
    );
    let sub = f
        .on(
            "b",
            &[
                "diff",
                &format!("origin/{}:deep/a", &id[..12]),
                &changed.join("deep/a").to_string_lossy(),
            ],
        )
        .fails(1, "");
    assert_eq!(
        sub.stdout(),
        "M\tb/c.txt\nA\tnew.txt\n",
        "{}",
        sub.describe()
    );
    // Against the same snapshot held locally (host a): equal.
    f.on("a", &["diff", &format!("origin/{}", &id[..12]), &id])
        .ok();

    // The grammar: an unknown remote name is said; `agent` cannot be a remote.
    f.on(
        "b",
        &["diff", "nosuch/0123456789ab", &src.to_string_lossy()],
    )
    .fails(2, "\"nosuch\" is not a configured remote");
    f.on(
        "b",
        &[
            "diff",
            &format!("origin/{}", "0".repeat(12)),
            &src.to_string_lossy(),
        ],
    )
    .fails(2, "has no snapshot");
    f.on("b", &["remote", "add", "agent", &f.url])
        .fails(1, "reserved");
}

/// A snapshot without a trees pack (pushed by an older build): the diff reads its trees with
/// ranged GETs from the blob pack, never the whole pack.
pub fn remote_diff_without_trees_pack(f: &Fleet, extra: &[&str], remote_root: &Path) {
    let (src, id) = pushed(f, extra);
    fs::remove_file(remote_root.join(format!("trees/{id}.zcpack"))).unwrap();
    let packs_total: u64 = fs::read_dir(remote_root.join("packs"))
        .unwrap()
        .map(|e| size_of(&e.unwrap().path()))
        .sum();
    let changed = f.env.path("changed");
    crate::util::copy_tree(&src, &changed);
    write(&changed.join("shared/notes.md"), b"other notes\n");
    let r = f
        .on(
            "b",
            &[
                "-v",
                "diff",
                &format!("origin/{id}"),
                &changed.to_string_lossy(),
            ],
        )
        .fails(1, "");
    assert_eq!(r.stdout(), "M\tshared/notes.md\n", "{}", r.describe());
    let t = traffic(&r.stderr());
    let (_, from_packs) = t.get("packs").copied().unwrap_or_default();
    assert!(
        from_packs > 0 && from_packs < 20_000,
        "trees by ranged reads: {from_packs} bytes of {packs_total} ({t:?})"
    );
    // Pushing it again (this build) adds the missing trees pack.
    f.on("a", &["push", &id]).ok();
    assert!(remote_root.join(format!("trees/{id}.zcpack")).is_file());
}

/// Mounts `NAME/SNAP` in the foreground with `-v` on host `b`, runs `inside` on the
/// mountpoint, unmounts, and returns the server's run (its stderr has the traffic line).
pub fn with_remote_mount(f: &Fleet, reference: &str, inside: impl FnOnce(&Path)) -> Run {
    let mnt = f.env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let mut c = f.command("b", &["-v", "mount", reference, &mnt.to_string_lossy()]);
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !mounted(&mnt) {
        assert!(
            Instant::now() < deadline,
            "the remote mount did not come up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inside(&mnt)));
    f.on("b", &["umount", &mnt.to_string_lossy()]).ok();
    let out = child.wait_with_output().unwrap();
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
    Run {
        cmd: format!("mount {reference}"),
        out,
    }
}

/// Reading one file of a mounted remote snapshot fetches its range of the pack (plus the
/// pack's header and index), not the pack; the mounted tree equals the source.
pub fn remote_mount_fetches_what_it_reads(f: &Fleet, extra: &[&str], remote_root: &Path) {
    if !fuse_available() {
        return;
    }
    let (src, id) = pushed(f, extra);
    let reference = format!("origin/{}", &id[..12]);
    let pack: Vec<_> = fs::read_dir(remote_root.join("packs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(pack.len(), 1);
    let pack_size = size_of(&pack[0]);
    let run = with_remote_mount(f, &reference, |mnt| {
        let got = fs::read(mnt.join("big/one.bin")).unwrap();
        assert!(
            got == bytes(70, 400_000),
            "big/one.bin differs when mounted"
        );
    });
    let t = traffic(&run.stderr());
    let (_, from_packs) = t.get("packs").copied().unwrap_or_default();
    // The file's 400 000 bytes, the pack's 80-byte header and its trailer and index (57 bytes
    // an object; 12 objects here) and nothing of big/two.bin.
    assert!(
        (400_000..=400_000 + 80 + 56 + 57 * 20).contains(&from_packs),
        "read {from_packs} bytes of a {pack_size}-byte pack for one 400000-byte file ({t:?})"
    );
    assert!(pack_size > 800_000);

    // The whole mounted tree equals the source (every file fetched, verified, served).
    with_remote_mount(f, &reference, |mnt| assert_same_tree(&src, mnt));
    // No temporary file left behind in b's store.
    let tmp = Path::new(&f.store("b")).join("tmp");
    let left: Vec<_> = fs::read_dir(&tmp)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in {}: {left:?}", tmp.display());
}

#[test]
fn file_remote_diff_fetches_trees_only() {
    let f = Fleet::file();
    let root = f.env.path("remote");
    remote_diff_fetches_trees_only(&f, &[], &root);
}

#[test]
fn file_remote_diff_without_trees_pack_reads_ranges() {
    let f = Fleet::file();
    let root = f.env.path("remote");
    remote_diff_without_trees_pack(&f, &[], &root);
}

#[test]
fn file_remote_mount_fetches_what_it_reads() {
    let f = Fleet::file();
    let root = f.env.path("remote");
    remote_mount_fetches_what_it_reads(&f, &[], &root);
}

/// What a remote holds is checked before it is used: a damaged trees pack fails the diff
/// naming its key (nothing left in tmp/); a damaged file in a blob pack fails that file's
/// read in a mount (EIO) while the other files still read.
#[test]
fn file_remote_damage_is_caught() {
    let f = Fleet::file();
    let root = f.env.path("remote");
    let (src, id) = pushed(&f, &[]);
    let trees_pack = root.join(format!("trees/{id}.zcpack"));
    let good = fs::read(&trees_pack).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    fs::write(&trees_pack, &bad).unwrap();
    let r = f
        .on(
            "b",
            &["diff", &format!("origin/{id}"), &src.to_string_lossy()],
        )
        .fails(2, &format!("trees/{id}.zcpack"));
    assert!(
        r.stderr().contains("does not verify") || r.stderr().contains("is not a pack"),
        "{}",
        r.describe()
    );
    let tmp = Path::new(&f.store("b")).join("tmp");
    assert_eq!(
        fs::read_dir(&tmp).map(|d| d.count()).unwrap_or(0),
        0,
        "left in {}",
        tmp.display()
    );
    fs::write(&trees_pack, &good).unwrap();

    if !fuse_available() {
        return;
    }
    let pack = fs::read_dir(root.join("packs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes_ = fs::read(&pack).unwrap();
    let needle = &bytes(70, 400_000)[..64];
    let at = bytes_
        .windows(64)
        .position(|w| w == needle)
        .expect("big/one.bin is stored raw in the pack");
    bytes_[at + 1000] ^= 1;
    fs::write(&pack, &bytes_).unwrap();
    with_remote_mount(&f, &format!("origin/{id}"), |mnt| {
        let err = fs::read(mnt.join("big/one.bin")).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(5), "EIO for a damaged file: {err}");
        assert!(fs::read(mnt.join("big/two.bin")).unwrap() == bytes(71, 400_000));
    });
}
