//! `mount` / `umount` through the binary, mounting for real: the mounted tree equals a
//! checkout of the same snapshot (names, sizes, modes, bytes); writes fail with EROFS;
//! executables cannot run (noexec); xattr ids match b3sum; `umount` and SIGTERM leave no
//! mount; a concurrent snapshot works while mounted; gc keeps what a live mount serves;
//! every bad mountpoint gets one clear error. Without FUSE these tests fail in CI and skip
//! (with a printed reason) elsewhere.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::util::*;

/// True when FUSE can be used here; panics in CI when it cannot.
pub fn fuse_available() -> bool {
    let ok = Path::new("/dev/fuse").exists() && is_root();
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "FUSE is not usable here (/dev/fuse missing or not root), and CI must run the mount tests"
        );
        eprintln!("SKIPPED: FUSE is not usable here (/dev/fuse missing or not root)");
    }
    ok
}

pub fn mounted(path: &Path) -> bool {
    let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let needle = format!(" {} ", canon.display());
    String::from_utf8_lossy(&fs::read("/proc/self/mountinfo").unwrap())
        .lines()
        .any(|l| l.contains(&needle))
}

/// Unmounts on drop, and never deletes a live mountpoint.
pub(crate) struct Mounted<'a> {
    env: &'a TestEnv,
    path: std::path::PathBuf,
}

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        if mounted(&self.path) {
            let _ = self.env.run(&[OsStr::new("umount"), self.path.as_os_str()]);
        }
        if mounted(&self.path) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.path)
                .status();
        }
    }
}

pub(crate) fn mount_daemon<'a>(env: &'a TestEnv, snapshot: &str, at: &Path) -> Mounted<'a> {
    mount_daemon_with(env, snapshot, at, &[])
}

/// [`mount_daemon`] with `extra` arguments.
pub(crate) fn mount_daemon_with<'a>(
    env: &'a TestEnv,
    snapshot: &str,
    at: &Path,
    extra: &[&str],
) -> Mounted<'a> {
    fs::create_dir_all(at).unwrap();
    let mut args = vec![
        OsStr::new("mount"),
        OsStr::new(snapshot),
        at.as_os_str(),
        OsStr::new("--daemon"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    env.run(&args).ok();
    assert!(mounted(at), "mount returned but {at:?} is not in mountinfo");
    Mounted {
        env,
        path: at.to_path_buf(),
    }
}

/// A fresh env with the sample snapshot, or `None` (after the CI check) without FUSE.
fn sample_if_fuse() -> Option<(TestEnv, String)> {
    if !fuse_available() {
        return None;
    }
    let env = TestEnv::new();
    let id = sample(&env);
    Some((env, id))
}

pub(crate) fn sample(env: &TestEnv) -> String {
    let src = env.path("src");
    write(&src.join("README.md"), b"# hello\n");
    write(&src.join("docs/a.md"), &bytes(3, 100_000));
    write(&src.join("big.bin"), &bytes(4, 3 * 1024 * 1024 + 5));
    write(&src.join("bin/tool.sh"), b"#!/bin/sh\necho ran\n");
    chmod(&src.join("bin/tool.sh"), 0o755);
    write(&src.join("empty"), b"");
    fs::create_dir_all(src.join("empty-dir")).unwrap();
    env.snapshot(&src)
}

#[test]
fn a_daemon_mount_takes_a_store_and_a_mountpoint_named_like_options() {
    // The server's command line names the store as `--store=DIR` and puts the operands after
    // `--` when one starts with `-`: a store `-s` or a mountpoint `-m` is not an option there.
    if !fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("README.md"), b"# dashes\n");
    let bin = |args: &[&str]| {
        let mut c = std::process::Command::new(BIN);
        c.env_remove("ZEROCLAW_BUNDLE_STORE")
            .current_dir(env.dir.path())
            .args(args);
        run_command(c)
    };
    let id = bin(&["--store=-s", "snapshot", "--dir", "src"])
        .ok()
        .last_line();
    fs::create_dir_all(env.path("-m")).unwrap();
    bin(&["--store=-s", "mount", "--daemon", "--", &id, "-m"]).ok();
    let mnt = env.path("-m");
    let served = fs::read(mnt.join("README.md"));
    bin(&["umount", "--", "-m"]).ok();
    assert_eq!(served.unwrap(), b"# dashes\n");
    assert!(!mounted(&mnt));
}

#[test]
fn mounted_tree_equals_checkout_and_is_read_only() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let out = env.path("checkout");
    env.run(&[
        OsStr::new("checkout"),
        OsStr::new(&id),
        OsStr::new("--out"),
        out.as_os_str(),
    ])
    .ok();
    let mnt = env.path("mnt");
    let m = mount_daemon(&env, &id, &mnt);
    assert_same_tree(&out, &mnt);
    // Sizes and modes: the recorded modes, as the checkout wrote them; dirs 0755.
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&mnt.join("README.md")), 0o644);
    assert_eq!(mode(&mnt.join("bin/tool.sh")), 0o755);
    assert_eq!(mode(&mnt.join("docs")), 0o755);
    assert_eq!(
        fs::metadata(mnt.join("big.bin")).unwrap().len(),
        3 * 1024 * 1024 + 5
    );
    // Writes of every kind fail with EROFS and change nothing.
    let erofs = |r: std::io::Result<()>| {
        let e = r.expect_err("a write succeeded on the read-only mount");
        assert_eq!(e.raw_os_error(), Some(30), "{e}");
    };
    erofs(fs::write(mnt.join("new.md"), b"x"));
    erofs(
        fs::OpenOptions::new()
            .append(true)
            .open(mnt.join("README.md"))
            .map(|_| ()),
    );
    erofs(fs::create_dir(mnt.join("newdir")));
    erofs(fs::remove_file(mnt.join("README.md")));
    erofs(fs::rename(mnt.join("README.md"), mnt.join("moved.md")));
    erofs(fs::set_permissions(
        mnt.join("README.md"),
        fs::Permissions::from_mode(0o777),
    ));
    assert_same_tree(&out, &mnt);
    // noexec: the executable cannot run from the mount.
    let e = std::process::Command::new(mnt.join("bin/tool.sh"))
        .output()
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(13), "{e}");
    // The xattr is the object id, which is b3sum of the object file.
    let got = std::process::Command::new("getfattr")
        .args(["--only-values", "-n", "user.zeroclaw.blake3"])
        .arg(mnt.join("docs/a.md"))
        .output()
        .unwrap();
    let xattr = String::from_utf8_lossy(&got.stdout).to_string();
    // Independent of the product's hash: b3sum of the same bytes, then of the object as the
    // store keeps it (raw: these bytes do not compress).
    let plain = env.path("a.md.bytes");
    write(&plain, &bytes(3, 100_000));
    let expect = b3sum(&plain);
    assert_eq!(xattr.trim(), expect);
    let stored = stored_object(&env.store, &expect).expect("the object is stored");
    assert!(!stored.compressed(), "{stored:?}");
    assert_eq!(blake3_hex(&stored.stored_bytes()), expect);
    drop(m);
    assert!(!mounted(&mnt));
}

#[test]
fn umount_and_sigterm_leave_no_mount() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    let m = mount_daemon(&env, &id, &mnt);
    env.run(&[OsStr::new("umount"), mnt.as_os_str()]).ok();
    assert!(!mounted(&mnt));
    drop(m);
    // Foreground mount, then SIGTERM: clean unmount and exit 0.
    let mut c = env.cmd();
    c.args([OsStr::new("mount"), OsStr::new(&id), mnt.as_os_str()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let _guard = Mounted {
        env: &env,
        path: mnt.clone(),
    };
    let start = Instant::now();
    while !mounted(&mnt) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "foreground mount never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fs::read(mnt.join("README.md")).unwrap(), b"# hello\n");
    let pid = child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!mounted(&mnt));
}

#[test]
fn snapshot_and_gc_work_while_mounted_and_gc_keeps_what_is_served() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    let m = mount_daemon(&env, &id, &mnt);
    // The catalog is not held: another capture runs now.
    let other = env.path("other");
    write(&other.join("x.md"), b"x");
    env.snapshot(&other);
    // Forget the mounted snapshot and collect garbage: the mount still reads everything.
    let forgot = env.run(&["forget", &id]).ok();
    assert!(
        forgot.stdout().contains("a running mount still serves it"),
        "{}",
        forgot.describe()
    );
    env.run(&["gc", "--grace", "0"]).ok();
    let big = fs::read(mnt.join("big.bin")).unwrap();
    assert_eq!(big, bytes(4, 3 * 1024 * 1024 + 5));
    assert_eq!(fs::read(mnt.join("docs/a.md")).unwrap(), bytes(3, 100_000));
    // The forgotten record waits in `leases/` while the mount holds it; once unmounted, the
    // next gc removes it and the data only it reached.
    let leases = || -> Vec<String> {
        fs::read_dir(env.store.join("leases"))
            .map(|rd| {
                rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let held = leases();
    assert!(
        held.len() == 1 && held[0].starts_with(&format!("held-{id}")),
        "{held:?}"
    );
    drop(m);
    let r = env.run(&["--json", "gc", "--grace", "0"]).ok();
    assert!(leases().is_empty(), "{:?}", leases());
    assert!(
        r.json()["removed"].as_u64().unwrap() > 0,
        "{}",
        r.describe()
    );
}

#[test]
fn bad_mountpoints_get_one_clear_error() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let try_mount = |at: &Path| {
        env.run(&[
            OsStr::new("mount"),
            OsStr::new(&id),
            at.as_os_str(),
            OsStr::new("--daemon"),
        ])
    };
    try_mount(&env.path("missing")).fails(1, "missing");
    write(&env.path("file"), b"x");
    try_mount(&env.path("file")).fails(1, "not a directory");
    write(&env.path("full/thing"), b"x");
    try_mount(&env.path("full")).fails(1, "not empty");
    // Inside the store (however spelled: directly, through a symlink to the store), even on an
    // empty directory: the mount would hide the store's own files.
    fs::create_dir_all(env.store.join("tmp/mnt")).unwrap();
    std::os::unix::fs::symlink(&env.store, env.path("store-link")).unwrap();
    for at in [env.store.join("tmp/mnt"), env.path("store-link/tmp/mnt")] {
        try_mount(&at).fails(1, "inside the store");
        assert!(
            !String::from_utf8_lossy(&fs::read("/proc/self/mountinfo").unwrap())
                .contains("tmp/mnt"),
            "{}",
            at.display()
        );
    }
    let mnt = env.path("mnt");
    let _m = mount_daemon(&env, &id, &mnt);
    let r = try_mount(&mnt);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stderr().contains("already"), "{}", r.describe());
    env.run(&[OsStr::new("umount"), env.path("full").as_os_str()])
        .fails(1, "full");
}

#[test]
fn a_killed_server_leaves_a_stale_mount_that_is_explained() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    let m = mount_daemon(&env, &id, &mnt);
    let pids = std::process::Command::new("pgrep")
        .args([
            "-f",
            &format!("mount --daemon-child {id} {}", mnt.display()),
        ])
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&pids.stdout).trim().to_string();
    assert!(!pid.is_empty(), "no server process found");
    assert!(std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(Duration::from_millis(200));
    let r = env.run(&[
        OsStr::new("mount"),
        OsStr::new(&id),
        mnt.as_os_str(),
        OsStr::new("--daemon"),
    ]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(
        r.stderr().contains("umount"),
        "the message tells how to clear it: {}",
        r.describe()
    );
    env.run(&[OsStr::new("umount"), mnt.as_os_str()]).ok();
    assert!(!mounted(&mnt));
    drop(m);
}

#[test]
fn a_mountpoint_that_is_not_utf8_mounts_and_others_still_mount_beside_it() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    // The kernel writes such a mount point into mountinfo unescaped; the table was read as
    // UTF-8, which failed this mount after mounting (and left it stale) and every other mount
    // and unmount on the machine while it existed.
    use std::os::unix::ffi::OsStrExt;
    let odd = env.path("odd").join(OsStr::from_bytes(b"m\xff\xfe"));
    let _odd = mount_daemon(&env, &id, &odd);
    assert_eq!(fs::read(odd.join("README.md")).unwrap(), b"# hello\n");
    let plain = env.path("plain");
    let m = mount_daemon(&env, &id, &plain);
    assert_eq!(fs::read(plain.join("README.md")).unwrap(), b"# hello\n");
    env.run(&[OsStr::new("umount"), plain.as_os_str()]).ok();
    assert!(!mounted(&plain));
    drop(m);
    env.run(&[OsStr::new("umount"), odd.as_os_str()]).ok();
    assert!(!mounted(&odd));
}

#[test]
fn a_daemon_mount_from_a_store_that_is_not_there_creates_nothing() {
    // A full id skips the catalog: the server must still find no store, and create none.
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let missing = env.path("no-store");
    let r = env.run_with(
        &[
            OsStr::new("mount"),
            OsStr::new(&id),
            mnt.as_os_str(),
            OsStr::new("--daemon"),
        ],
        &[("ZEROCLAW_BUNDLE_STORE", missing.to_str().unwrap())],
    );
    assert!(!missing.exists(), "{}", r.describe());
    r.fails(1, "no-store");
    assert!(!mounted(&mnt));
    // And a store with no such snapshot: refused, nothing mounted, no lease left.
    let unknown = "0".repeat(64);
    env.run(&[
        OsStr::new("mount"),
        OsStr::new(&unknown),
        mnt.as_os_str(),
        OsStr::new("--daemon"),
    ])
    .fails(1, &unknown[..12]);
    assert!(!mounted(&mnt));
    let leases = fs::read_dir(env.store.join("leases"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(leases, 0);
}

#[test]
fn umount_needs_no_store_location() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    let m = mount_daemon(&env, &id, &mnt);
    // No store, no HOME or XDG_DATA_HOME to find one, and a store setting it cannot use.
    let mut c = std::process::Command::new(BIN);
    c.env_remove("ZEROCLAW_BUNDLE_STORE")
        .env_remove("HOME")
        .env_remove("XDG_DATA_HOME")
        .env("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS", "soon")
        .args([OsStr::new("--json"), OsStr::new("umount"), mnt.as_os_str()]);
    let r = run_command(c).ok();
    assert!(r.stdout().contains("\"mountpoint\""), "{}", r.describe());
    assert!(!mounted(&mnt));
    drop(m);
}

#[test]
fn a_daemon_mount_interrupted_at_any_moment_ends_and_leaves_no_unreported_mount() {
    // Ctrl-C at every moment of a `mount --daemon`'s start: the command always ends; when it
    // did not report the mount (exit 130), nothing is left mounted. (A server stopped right
    // after it mounted used to be told to unmount by a signal it had not set up for yet.)
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let (mut reported, mut stopped) = (0, 0);
    for delay_ms in [0u64, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 50] {
        let mut c = env.cmd();
        c.args([
            OsStr::new("-q"),
            OsStr::new("mount"),
            OsStr::new(&id),
            mnt.as_os_str(),
            OsStr::new("--daemon"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        let mut child = c.spawn().unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("mount --daemon interrupted after {delay_ms} ms did not end in 20 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        if status.success() {
            reported += 1;
            env.run(&[OsStr::new("umount"), mnt.as_os_str()]).ok();
        } else {
            stopped += 1;
            assert!(
                !mounted(&mnt),
                "interrupted after {delay_ms} ms ({status}): a mount nobody was told of is left"
            );
        }
        assert!(!mounted(&mnt));
    }
    eprintln!("{stopped} stopped before reporting, {reported} reported first");
}

#[test]
fn an_interrupted_daemon_mount_stops_its_server_and_leaves_no_mount() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    // The server, before it mounts, sends SIGTERM to the `mount --daemon` waiting for it (its
    // parent), then takes a while: the waiting command must stop it, not leave it to mount.
    for signal in ["TERM", "INT"] {
        let hook = format!("kill -{signal} $(ps -o ppid= -p $PPID); sleep 1");
        let r = env.run_with(
            &[
                OsStr::new("mount"),
                OsStr::new(&id),
                mnt.as_os_str(),
                OsStr::new("--daemon"),
            ],
            &[
                (
                    "ZEROCLAW_BUNDLE_TEST_HOOK_SEAM",
                    "mount-daemon-before-mounting",
                ),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &hook),
            ],
        );
        assert_eq!(r.code(), 130, "{signal}: {}", r.describe());
        assert!(r.stderr().contains("interrupted"), "{}", r.describe());
        // After the hook's sleep would have ended: the server never mounted.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!mounted(&mnt), "{signal}: a mount was left behind");
    }
    // The stopped servers took no lease that outlives them (a lease is a lock on the
    // record, or a lease file gc removes once its process is gone), and mounts work.
    env.run(&["gc"]).ok();
    let leases = fs::read_dir(env.store.join("leases")).map_or(0, |rd| rd.count());
    assert_eq!(leases, 0);
    let _m = mount_daemon(&env, &id, &mnt);
}

#[test]
fn daemon_mounts_of_one_directory_at_once_make_one_mount() {
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let _guard = Mounted {
        env: &env,
        path: mnt.clone(),
    };
    let count = || {
        String::from_utf8_lossy(&fs::read("/proc/self/mountinfo").unwrap())
            .lines()
            .filter(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
            .count()
    };
    for round in 0..3 {
        let children: Vec<_> = (0..3)
            .map(|_| {
                let mut c = env.cmd();
                c.args([
                    OsStr::new("mount"),
                    OsStr::new(&id),
                    mnt.as_os_str(),
                    OsStr::new("--daemon"),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        let outs: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let ok = outs.iter().filter(|o| o.status.success()).count();
        for o in outs.iter().filter(|o| !o.status.success()) {
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("already a mount point"),
                "round {round}: {err}"
            );
        }
        assert_eq!((ok, count()), (1, 1), "round {round}: stacked mounts");
        env.run(&[OsStr::new("umount"), mnt.as_os_str()]).ok();
        assert_eq!(count(), 0);
    }
}

#[test]
fn a_mount_by_an_id_prefix_needs_no_catalog() {
    // The store's records answer an id prefix alone, so a mount by one (what `list` shows)
    // opens no catalog, whose open was most of a warm mount's start: it works while the
    // catalog cannot be opened at all. A name is the catalog's to answer.
    let Some((env, id)) = sample_if_fuse() else {
        return;
    };
    env.run(&["snapshot", "--dir", "src", "--name", "named"])
        .ok();
    let catalog = env.store.join("catalog");
    let away = env.store.join("catalog.away");
    fs::rename(&catalog, &away).unwrap();
    fs::write(&catalog, b"not a catalog").unwrap();
    let mnt = env.path("mnt");
    let m = mount_daemon(&env, &id[..12], &mnt);
    assert_eq!(fs::read(mnt.join("README.md")).unwrap(), b"# hello\n");
    env.run(&[OsStr::new("umount"), mnt.as_os_str()]).ok();
    drop(m);
    let r = env.run(&[
        OsStr::new("mount"),
        OsStr::new("named"),
        mnt.as_os_str(),
        OsStr::new("--daemon"),
    ]);
    r.fails(1, "catalog");
    assert!(!mounted(&mnt));
    fs::remove_file(&catalog).unwrap();
    fs::rename(&away, &catalog).unwrap();
    let _m = mount_daemon(&env, "named", &mnt);
    assert_eq!(fs::read(mnt.join("README.md")).unwrap(), b"# hello\n");
}
