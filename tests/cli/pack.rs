//! `pack` / `unpack` between two stores standing in for two hosts, and packs mounted and diffed
//! without unpacking. Pins: ids equal and checkouts byte-identical after unpack; `--since`
//! carries only new objects; a digest pack diffs against a directory; a pack mount equals the
//! checkout; an unpack killed at random points leaves a store that verifies and lists nothing
//! that misses objects; a corrupt pack imports nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::mount::{fuse_available, mount_daemon, sample};
use crate::util::{assert_same_tree, bytes, write, TestEnv};

fn other(env: &TestEnv, name: &str) -> String {
    env.path(name).to_string_lossy().into_owned()
}

#[test]
fn pack_on_one_store_unpack_on_another() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("notes.md"), b"notes\n");
    write(&src.join("data/big.bin"), &bytes(7, 400_000));
    write(&src.join("data/zeros"), &vec![0u8; 200_000]);
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    let v = env
        .run(&["--json", "pack", &id, "--out", &pack.to_string_lossy()])
        .ok()
        .json();
    assert!(
        v["pack_bytes"].as_u64().unwrap() < 400_000 + 200_000,
        "zeros compress: {v}"
    );
    // Host B.
    let b = other(&env, "store-b");
    let r = env
        .run(&["--store", &b, "unpack", &pack.to_string_lossy()])
        .ok();
    assert_eq!(r.last_line(), id, "the same snapshot id on both hosts");
    env.run(&["--store", &b, "verify"]).ok();
    let out = env.path("checkout-b");
    env.run(&[
        "--store",
        &b,
        "checkout",
        &id,
        "--out",
        &out.to_string_lossy(),
    ])
    .ok();
    assert_same_tree(&src, &out);
    // Through a pipe, and refused on a terminal-less existing file without --force.
    let r = env.run(&["pack", &id, "--out", &pack.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stderr().contains("--force"), "{}", r.describe());
    let c = other(&env, "store-c");
    let piped = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{bin}' --store '{a}' pack {id} --out - | '{bin}' --store '{c}' unpack -",
            bin = env!("CARGO_BIN_EXE_zeroclaw-bundle"),
            a = env.path("store").display(),
        ))
        .output()
        .unwrap();
    assert!(piped.status.success(), "{piped:?}");
    assert_eq!(String::from_utf8_lossy(&piped.stdout).trim(), id);
}

#[test]
fn since_carries_only_new_objects_and_needs_its_base() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..50 {
        write(
            &src.join(format!("f{i}.md")),
            format!("file {i}\n").as_bytes(),
        );
    }
    let base = env.snapshot(&src);
    write(&src.join("f7.md"), b"changed\n");
    let next = env.snapshot(&src);
    let inc = env.path("inc.zcpack");
    let v = env
        .run(&[
            "--json",
            "pack",
            &next,
            "--since",
            &base,
            "--out",
            &inc.to_string_lossy(),
        ])
        .ok()
        .json();
    // The record, the root tree and the one changed blob.
    assert_eq!(
        (v["objects"].as_u64(), v["blobs"].as_u64()),
        (Some(3), Some(1)),
        "{v}"
    );
    let b = other(&env, "store-b");
    let r = env.run(&["--store", &b, "unpack", &inc.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(
        r.stderr().contains(&base[..12]),
        "names the base: {}",
        r.describe()
    );
    assert!(
        r.stderr().contains("nothing was imported"),
        "{}",
        r.describe()
    );
    let full = env.path("full.zcpack");
    env.run(&["pack", &base, "--out", &full.to_string_lossy()])
        .ok();
    env.run(&["--store", &b, "unpack", &full.to_string_lossy()])
        .ok();
    env.run(&["--store", &b, "unpack", &inc.to_string_lossy()])
        .ok();
    env.run(&["--store", &b, "verify"]).ok();
    assert_eq!(
        env.run(&["--store", &b, "cat", &format!("{next}:f7.md")])
            .ok()
            .stdout(),
        "changed\n"
    );
}

#[test]
fn a_digest_pack_diffs_against_what_the_other_host_received() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.md"), b"a\n");
    write(&src.join("d/b.md"), b"b\n");
    let id = env.snapshot(&src);
    let digest = env.path("digest.zcpack");
    let v = env
        .run(&[
            "--json",
            "pack",
            &id,
            "--trees-only",
            "--out",
            &digest.to_string_lossy(),
        ])
        .ok()
        .json();
    assert_eq!(v["blobs"].as_u64(), Some(0), "{v}");
    // The other host has the bundle as a directory, one file edited, and only the digest.
    let received = env.path("received");
    write(&received.join("a.md"), b"a\n");
    write(&received.join("d/b.md"), b"B!\n");
    let b = other(&env, "store-b");
    let r = env.run(&[
        "--store",
        &b,
        "diff",
        &digest.to_string_lossy(),
        &received.to_string_lossy(),
    ]);
    assert_eq!(
        (r.code(), r.stdout().as_str()),
        (1, "M\td/b.md\n"),
        "{}",
        r.describe()
    );
    // A digest pack cannot be unpacked.
    let r = env.run(&["--store", &b, "unpack", &digest.to_string_lossy()]);
    assert!(r.stderr().contains("digest pack"), "{}", r.describe());
}

#[test]
fn a_corrupt_pack_imports_nothing() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.md"), &bytes(1, 50_000));
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let mut data = fs::read(&pack).unwrap();
    let mid = data.len() / 2;
    data[mid] ^= 1;
    fs::write(&pack, &data).unwrap();
    let b = other(&env, "store-b");
    let r = env.run(&["--store", &b, "unpack", &pack.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stderr().contains("p.zcpack"), "{}", r.describe());
    let objects = Path::new(&b).join("objects");
    let count = walk_count(&objects);
    assert_eq!(count, 0, "objects landed from a corrupt pack");
}

/// The LAST object of the pack is damaged and the trailer resealed, so the failure comes
/// after every other object was verified and staged: nothing lands in objects/, no staging
/// directory stays in tmp/, nothing is listed; the intact pack then unpacks.
#[test]
fn a_pack_damaged_in_its_last_object_imports_nothing() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..100 {
        write(&src.join(format!("f{i}.bin")), &bytes(i, 20_000));
    }
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let good = fs::read(&pack).unwrap();
    let mut data = good.clone();
    let n = data.len();
    let index_offset = u64::from_le_bytes(data[n - 48..n - 40].try_into().unwrap()) as usize;
    data[index_offset - 1] ^= 0x20;
    let hex = crate::util::blake3_hex(&data[..n - 48]);
    for (i, byte) in data[n - 40..n - 8].iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    fs::write(&pack, &data).unwrap();
    let b = other(&env, "store-b");
    let r = env.run(&["--store", &b, "unpack", &pack.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(
        r.stderr().contains("p.zcpack") && r.stderr().contains("hashes to"),
        "{}",
        r.describe()
    );
    // The store it was to create is not there at all (first_run.rs pins that).
    assert!(!Path::new(&b).exists(), "a failed unpack created {b}");
    // Into an existing store: nothing lands there either.
    let tiny = env.path("tiny");
    write(&tiny.join("t"), b"t");
    let tiny_id = env
        .run(&[
            "--store",
            &b,
            "-q",
            "snapshot",
            "--dir",
            &tiny.to_string_lossy(),
        ])
        .ok()
        .last_line();
    let held = walk_count(&Path::new(&b).join("objects"));
    let r = env.run(&["--store", &b, "unpack", &pack.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert_eq!(
        walk_count(&Path::new(&b).join("objects")),
        held,
        "objects landed"
    );
    let tmp = fs::read_dir(Path::new(&b).join("tmp")).unwrap().count();
    assert_eq!(tmp, 0, "staging left");
    let listed = env.run(&["--store", &b, "--json", "list"]).ok().json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["snapshot"], tiny_id.as_str(), "{listed}");
    fs::write(&pack, &good).unwrap();
    let r = env
        .run(&["--store", &b, "unpack", &pack.to_string_lossy()])
        .ok();
    assert_eq!(r.last_line(), id);
    env.run(&["--store", &b, "verify"]).ok();
}

fn walk_count(dir: &Path) -> usize {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    rd.map(|e| e.unwrap().path())
        .map(|p| if p.is_dir() { walk_count(&p) } else { 1 })
        .sum()
}

#[test]
fn unpack_killed_at_random_points_leaves_a_consistent_store() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..200 {
        write(
            &src.join(format!("d{}/f{i}.bin", i % 10)),
            &bytes(i, 20_000),
        );
    }
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let runs: u64 = if std::env::var_os("ZCB_LONG").is_some() {
        200
    } else {
        12
    };
    // One whole unpack first: the kills are spread over its duration (debug or release
    // build, busy machine or not), so they land in every phase.
    let started = std::time::Instant::now();
    env.run(&[
        "--store",
        &other(&env, "whole"),
        "unpack",
        &pack.to_string_lossy(),
    ])
    .ok();
    let span = started.elapsed().as_micros().max(1) as u64 * 11 / 10;
    let (mut completed, mut staging_left, mut landed) = (0, 0, 0);
    for i in 0..runs {
        let b = other(&env, &format!("store-{i}"));
        let mut child = env
            .cmd()
            .args(["--store", &b, "unpack", &pack.to_string_lossy()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(i * 7_919 % span));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if status.success() {
            completed += 1;
        }
        if !Path::new(&b).join("STORE").exists() {
            continue; // killed before the store existed
        }
        env.run(&["--store", &b, "verify"]).ok();
        let tmp = Path::new(&b).join("tmp");
        if fs::read_dir(&tmp).unwrap().any(|e| {
            let name = e.unwrap().file_name();
            name.to_string_lossy().starts_with("stage-")
        }) {
            staging_left += 1;
        }
        if walk_count(&Path::new(&b).join("objects")) > 0 {
            landed += 1;
        }
        // A kill while staging leaves only a staging directory under tmp/: gc removes it.
        env.run(&["--store", &b, "gc", "--grace", "0"]).ok();
        let left: Vec<_> = fs::read_dir(Path::new(&b).join("tmp"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "gc left in tmp/: {left:?}");
        env.run(&["--store", &b, "verify"]).ok();
        let listed = env.run(&["--store", &b, "--json", "list"]).ok().json();
        for snap in listed.as_array().unwrap() {
            let sid = snap["snapshot"].as_str().unwrap();
            assert_eq!(sid, id, "only the packed snapshot can appear");
            let out = env.path(&format!("co-{i}"));
            env.run(&[
                "--store",
                &b,
                "checkout",
                sid,
                "--out",
                &out.to_string_lossy(),
            ])
            .ok();
            assert_same_tree(&src, &out);
        }
    }
    eprintln!(
        "{runs} unpacks killed at random points over {span} us: {staging_left} left a staging \
         directory, {landed} had objects in objects/, {completed} had finished"
    );
}

#[test]
fn a_pack_mounts_without_unpacking_and_equals_the_checkout() {
    if !fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let id = sample(&env);
    let pack = env.path("s.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let out = env.path("co");
    env.run(&["checkout", &id, "--out", &out.to_string_lossy()])
        .ok();
    // Mounted from the pack with another, empty store: nothing comes from the first store.
    let empty = TestEnv::new();
    let mnt = empty.path("mnt");
    let _m = mount_daemon(&empty, &pack.to_string_lossy(), &mnt);
    assert_same_tree(&out, &mnt);
}

/// Ctrl-C while a pack is written: exit 130 with one message, and neither the pack nor its
/// staged file is left beside the destination.
#[test]
fn an_interrupted_pack_leaves_nothing() {
    let env = TestEnv::new();
    let (child, out) = start_big_pack(&env, 11);
    let st = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let done = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted; nothing was written"), "{err}");
    let left: Vec<_> = fs::read_dir(&out).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Snapshots one 64 MiB file (bytes of `seed`) as `big`, starts `pack big --out out/big.pack`
/// (stderr piped) and returns it once its staged file is open, with the `out` directory.
fn start_big_pack(env: &TestEnv, seed: u64) -> (std::process::Child, PathBuf) {
    let src = env.path("src");
    write(&src.join("big.bin"), &bytes(seed, 64 << 20));
    env.snapshot_with(&src, &["--name", "big"]).ok();
    let out = env.path("out");
    fs::create_dir(&out).unwrap();
    let mut child = env
        .cmd()
        .args(["pack", "big", "--out"])
        .arg(out.join("big.pack"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_staged_pack(&mut child, &out);
    (child, out)
}

/// Waits until `child` (a `pack --out DIR/FILE`) has its staged file open in `dir`: an unnamed
/// file shows in `/proc/PID/fd` as `DIR/#INODE (deleted)`, a named one in `dir` itself.
fn wait_for_staged_pack(child: &mut std::process::Child, dir: &Path) {
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    for _ in 0..10_000 {
        let open_in_dir = fs::read_dir(&fds)
            .into_iter()
            .flatten()
            .flatten()
            .any(|fd| fs::read_link(fd.path()).is_ok_and(|target| target.starts_with(dir)));
        if open_in_dir || fs::read_dir(dir).unwrap().next().is_some() {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "the pack ended first");
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("no staged pack appeared in {}", dir.display());
}

/// SIGKILL while a pack is written (no handler runs): nothing at all is left beside the
/// destination, not even a hidden staged file (it is an unnamed `O_TMPFILE`).
#[test]
fn a_killed_pack_leaves_nothing() {
    let env = TestEnv::new();
    let (mut child, out) = start_big_pack(&env, 12);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{status:?}"
    );
    let left: Vec<_> = fs::read_dir(&out).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `gc --grace 0` while `unpack -` is still reading its pack from a pipe: gc waits for the
/// import (here: gives up after 300 ms, saying the store is busy) instead of deleting the
/// spooled copy under it; the unpack then completes.
#[test]
fn gc_waits_for_an_unpack_reading_stdin() {
    use std::io::Write as _;
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &bytes(5, 300_000));
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let bytes = fs::read(&pack).unwrap();
    let b = other(&env, "store-b");
    // An existing store (an unpack that creates one stages it beside its path, out of gc's
    // sight, until it succeeds).
    let remote = format!("file://{}", env.path("remote").display());
    env.run(&["--store", &b, "remote", "add", "origin", &remote])
        .ok();
    let mut child = env
        .cmd()
        .args(["--store", &b, "unpack", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&bytes[..bytes.len() / 2]).unwrap();
    stdin.flush().unwrap();
    // The spool exists once the first half arrived.
    let tmp = Path::new(&b).join("tmp");
    for _ in 0..5000 {
        if fs::read_dir(&tmp).is_ok_and(|mut d| d.next().is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let gc = env
        .cmd()
        .args(["--store", &b, "gc", "--grace", "0"])
        .env("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS", "300")
        .output()
        .unwrap();
    let gc_err = String::from_utf8_lossy(&gc.stderr);
    assert_eq!(gc.status.code(), Some(1), "gc must wait: {gc_err}");
    assert!(gc_err.contains("busy"), "{gc_err}");
    stdin.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(stdin);
    let done = child.wait_with_output().unwrap();
    assert!(done.status.success(), "{done:?}");
    assert_eq!(String::from_utf8_lossy(&done.stdout).trim(), id);
    env.run(&["--store", &b, "verify"]).ok();
}

/// A truncated pack piped into `unpack -` is refused naming standard input (not the spooled
/// temporary copy, which is gone by then), imports nothing and leaves nothing in tmp/.
#[test]
fn a_truncated_pack_on_stdin_is_named_as_stdin() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &bytes(6, 200_000));
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let whole = fs::read(&pack).unwrap();
    let b = other(&env, "store-b");
    let out = env
        .cmd()
        .args(["--store", &b, "unpack", "-"])
        .stdin(
            fs::File::open({
                let cut = env.path("cut.zcpack");
                fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
                cut
            })
            .unwrap(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("pack from standard input"), "{err}");
    assert!(!err.contains("/tmp/unpack-"), "names the spool: {err}");
    // The store it was to create (where the spool went) is not there at all.
    assert!(!Path::new(&b).exists(), "a failed unpack created {b}");
}

/// An update (`--since` pack) is diffed and mounted before it is unpacked: what it does not
/// carry comes from the store holding its base. A damaged pack is refused by diff and mount
/// (its trailer), not compared as if whole.
#[test]
fn an_update_pack_is_read_over_its_base_and_a_damaged_pack_is_refused() {
    let env = TestEnv::new();
    let src = env.path("src");
    for d in ["a", "b", "c"] {
        write(&src.join(format!("{d}/f.md")), d.as_bytes());
    }
    let base = env.snapshot(&src);
    write(&src.join("b/f.md"), b"changed");
    let next = env.snapshot(&src);
    let inc = env.path("inc.zcpack");
    env.run(&[
        "pack",
        &next,
        "--since",
        &base,
        "--out",
        &inc.to_string_lossy(),
    ])
    .ok();
    let inc_s = inc.to_string_lossy().into_owned();
    // Against an empty directory: every tree is read, the unchanged ones from the base.
    let empty = env.path("empty");
    fs::create_dir(&empty).unwrap();
    let r = env.run(&["diff", &inc_s, &empty.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    for line in ["D\ta/f.md", "D\tb/f.md", "D\tc/f.md"] {
        assert!(r.stdout().contains(line), "{line}: {}", r.describe());
    }
    let r = env.run(&["diff", "-p", &base, &inc_s]);
    assert!(r.stdout().contains("+changed"), "{}", r.describe());
    // A store without the base cannot: it fails naming no missing store but the object.
    let b = other(&env, "store-b");
    let r = env.run(&["--store", &b, "diff", &inc_s, &empty.to_string_lossy()]);
    assert_eq!(r.code(), 2, "{}", r.describe());
    if fuse_available() {
        let mnt = env.path("mnt");
        let _m = mount_daemon(&env, &inc_s, &mnt);
        assert_eq!(fs::read(mnt.join("a/f.md")).unwrap(), b"a", "from the base");
        assert_eq!(
            fs::read(mnt.join("b/f.md")).unwrap(),
            b"changed",
            "from the pack"
        );
    }
    // One byte of a blob the walk would prune: refused, not "equal".
    let full = env.path("full.zcpack");
    env.run(&["pack", &next, "--out", &full.to_string_lossy()])
        .ok();
    let mut bytes = fs::read(&full).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    fs::write(&full, bytes).unwrap();
    let r = env.run(&["diff", &full.to_string_lossy(), &next]);
    assert_eq!(r.code(), 2, "{}", r.describe());
    assert!(r.stderr().contains("trailer checksum"), "{}", r.describe());
    let mnt2 = env.path("mnt2");
    fs::create_dir(&mnt2).unwrap();
    let r = env.run(&[
        "mount",
        &full.to_string_lossy(),
        &mnt2.to_string_lossy(),
        "--daemon",
    ]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stderr().contains("trailer checksum"), "{}", r.describe());
}
