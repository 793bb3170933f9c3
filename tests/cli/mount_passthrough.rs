//! `mount` and FUSE passthrough, through the binary, mounting for real (as root, on this
//! kernel): a stored snapshot's mount says `passthrough on` (`-v`, and the root's
//! `user.zeroclaw.passthrough`) and its large raw file reads back byte for byte through `cat`
//! and `cmp`, beside compressed and packed files on the same mount; a corrupt large object
//! fails with EIO; `--no-passthrough`, a pack file's mount and a server in a user namespace
//! (which the kernel does not let register backing files) say `off` and why, and read the same
//! bytes. The first test fails should a mount stop asking the kernel for passthrough.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::mount::{fuse_available, mounted};
use crate::util::*;

/// A raw object (over 256 KiB, random: stored as one loose file).
const LARGE: usize = 6 * 1024 * 1024 + 3;

/// The root's `user.zeroclaw.passthrough`, through `getfattr` (an independent reader).
fn passthrough_xattr(mnt: &Path) -> String {
    let out = Command::new("getfattr")
        .args(["--only-values", "-n", "user.zeroclaw.passthrough"])
        .arg(mnt)
        .output()
        .expect("getfattr (attr package) is installed");
    assert!(out.status.success(), "getfattr: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A tree with a large random file and small compressible ones, snapshotted.
fn mixed(env: &TestEnv) -> (String, Vec<u8>) {
    let src = env.path("src");
    let large = bytes(21, LARGE);
    write(&src.join("large.bin"), &large);
    write(
        &src.join("notes.md"),
        &b"a compressible line\n".repeat(2000),
    );
    for i in 0..20 {
        write(
            &src.join(format!("small/{i}.txt")),
            format!("small file {i}\n").repeat(i + 1).as_bytes(),
        );
    }
    let id = env.snapshot(&src);
    (id, large)
}

/// `mount --daemon` with `extra` flags (before the operands), checked; stderr.
fn mount_with(env: &TestEnv, extra: &[&str], reference: &str, at: &Path) -> String {
    fs::create_dir_all(at).unwrap();
    let mut args: Vec<&OsStr> = extra.iter().map(OsStr::new).collect();
    args.extend([
        OsStr::new("mount"),
        OsStr::new(reference),
        at.as_os_str(),
        OsStr::new("--daemon"),
    ]);
    let r = env.run(&args).ok();
    assert!(mounted(at), "mount returned but {at:?} is not mounted");
    r.stderr()
}

/// Unmounts on drop (and never deletes a live mountpoint).
struct Unmount<'a>(&'a TestEnv, std::path::PathBuf);

impl Drop for Unmount<'_> {
    fn drop(&mut self) {
        if mounted(&self.1) {
            let _ = self.0.run(&[OsStr::new("umount"), self.1.as_os_str()]);
        }
        if mounted(&self.1) {
            let _ = Command::new("umount").arg("-l").arg(&self.1).status();
        }
    }
}

#[test]
fn a_stored_snapshot_passes_its_large_file_through_and_says_so() {
    if !fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let (id, large) = mixed(&env);
    let hex = blake3_hex(&large);
    match stored_object(&env.store, &hex) {
        Some(StoredObject::Loose(p)) if !p.to_string_lossy().ends_with(".zst") => {}
        other => panic!("the large file is stored as one raw object file: {other:?}"),
    }
    let mnt = env.path("mnt");
    let said = mount_with(&env, &["-v"], &id, &mnt);
    let guard = Unmount(&env, mnt.clone());
    assert!(said.contains("passthrough on"), "mount -v said: {said}");
    assert_eq!(passthrough_xattr(&mnt), "on");
    // `cmp` and `cat` read the mounted file; both see the bytes written.
    let src = env.path("src");
    let cmp = Command::new("cmp")
        .arg(src.join("large.bin"))
        .arg(mnt.join("large.bin"))
        .output()
        .unwrap();
    assert!(cmp.status.success(), "cmp: {cmp:?}");
    let cat = Command::new("cat")
        .arg(mnt.join("large.bin"))
        .output()
        .unwrap();
    assert!(cat.status.success(), "cat: {:?}", cat.status);
    assert!(cat.stdout == large, "cat read other bytes");
    // The small (compressed, packed) files of the same mount read through the server.
    assert_same_tree(&src, &mnt);
    assert_eq!(
        passthrough_xattr(&mnt),
        "on",
        "nothing was refused meanwhile"
    );
    drop(guard);

    // Damage the large object (read-only, 0444: made writable first): a fresh mount checks it
    // before handing it to the kernel, and refuses it.
    stored_object(&env.store, &hex)
        .expect("stored")
        .damage(|b| b[LARGE / 3] ^= 0x20);
    mount_with(&env, &[], &id, &mnt);
    let _guard = Unmount(&env, mnt.clone());
    let cat = Command::new("cat")
        .arg(mnt.join("large.bin"))
        .output()
        .unwrap();
    assert!(!cat.status.success(), "cat of a corrupt object succeeded");
    assert!(
        String::from_utf8_lossy(&cat.stderr).contains("Input/output error"),
        "cat: {cat:?}"
    );
    assert!(
        cat.stdout.is_empty(),
        "nothing of the corrupt object is read"
    );
    assert_eq!(
        fs::read(mnt.join("notes.md")).unwrap(),
        b"a compressible line\n".repeat(2000)
    );
}

#[test]
fn no_passthrough_and_a_pack_file_read_through_the_server_and_say_why() {
    if !fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let (id, large) = mixed(&env);
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let r = env
        .run(&[
            OsStr::new("-v"),
            OsStr::new("mount"),
            OsStr::new(&id),
            mnt.as_os_str(),
            OsStr::new("--daemon"),
            OsStr::new("--no-passthrough"),
        ])
        .ok();
    let guard = Unmount(&env, mnt.clone());
    assert!(
        r.stderr()
            .contains("passthrough off: turned off (--no-passthrough)"),
        "{}",
        r.describe()
    );
    assert_eq!(
        passthrough_xattr(&mnt),
        "off: turned off (--no-passthrough)"
    );
    assert!(fs::read(mnt.join("large.bin")).unwrap() == large);
    assert_same_tree(&env.path("src"), &mnt);
    drop(guard);

    let pack = env.path("snap.zcpack");
    env.run(&[
        OsStr::new("pack"),
        OsStr::new(&id),
        OsStr::new("--out"),
        pack.as_os_str(),
    ])
    .ok();
    let said = mount_with(&env, &["-v"], &pack.to_string_lossy(), &mnt);
    let _guard = Unmount(&env, mnt.clone());
    assert!(said.contains("passthrough off: a pack file"), "{said}");
    assert!(
        passthrough_xattr(&mnt).starts_with("off: a pack file is served"),
        "{}",
        passthrough_xattr(&mnt)
    );
    assert!(fs::read(mnt.join("large.bin")).unwrap() == large);
    assert_same_tree(&env.path("src"), &mnt);
}

#[test]
fn a_server_in_a_user_namespace_reads_through_itself_and_says_why() {
    // The kernel registers backing files only for CAP_SYS_ADMIN in the initial user
    // namespace. Root in a new user (and mount) namespace may mount FUSE, but not pass reads
    // through: the mount says so from the start (`-v`, the xattr) and reads the same bytes.
    if !fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let (id, _) = mixed(&env);
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let script = r#"
        set -e
        "$ZB" -v mount "$ID" "$MNT" --daemon
        trap '"$ZB" umount "$MNT"' EXIT
        getfattr --only-values -n user.zeroclaw.passthrough "$MNT"; echo
        cmp "$SRC/large.bin" "$MNT/large.bin"
        diff -r "$SRC" "$MNT"
        getfattr --only-values -n user.zeroclaw.passthrough "$MNT"; echo
    "#;
    let mut c = Command::new("unshare");
    c.args([
        "--user",
        "--map-root-user",
        "--mount",
        "--",
        "sh",
        "-c",
        script,
    ])
    .env("ZB", BIN)
    .env("ZEROCLAW_BUNDLE_STORE", &env.store)
    .env("ID", &id)
    .env("MNT", &mnt)
    .env("SRC", env.path("src"));
    let r = run_within(c, std::time::Duration::from_secs(60));
    if r.code() != 0 && r.stderr().contains("unshare failed") {
        // A host that forbids user namespaces (a sysctl, a container's seccomp profile).
        assert!(std::env::var_os("CI").is_none(), "{}", r.describe());
        eprintln!("SKIPPED: no user namespaces here: {}", r.stderr());
        return;
    }
    let r = r.ok();
    let why = "off: the mount server runs in a user namespace, and the kernel requires \
               CAP_SYS_ADMIN in the initial one to pass reads through";
    assert_eq!(
        r.stdout().lines().collect::<Vec<_>>(),
        [why, why],
        "{}",
        r.describe()
    );
    assert!(
        r.stderr().contains(&format!("passthrough {why}")),
        "{}",
        r.describe()
    );
    assert!(!mounted(&mnt), "the mount was only ever in the namespace");
}
