//! Issue 22 (operator UX, round 2), items 1, 2, 3, 7, 8, 9, 10 and 16. Pins: `demo.sh` finds the
//! binary where cargo put it (never `./target`) and builds no S3 server; `diff
//! --exit-on-new-grants` fails closed (exit 2 with the reason, also with `-q`) when a side
//! cannot show its grants (a digest pack, a remote snapshot, a plain tree); `pack --out` writes
//! character devices and FIFOs in place and `--force` replaces regular files only; an update
//! pack without its base is not mounted; `diff A B -q` is the global `-q`; two exports of an
//! unchanged agent compare equal unless `--export-time`; `verify` on a corrupt root tree names
//! that object the same way every run, never blames the tree index or suggests `reindex`, and
//! an unpack of the snapshot brings it back; a side spelled as a missing path says so.

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use crate::export::Install;
use crate::util::{is_root, run_command, stored_object, write, TestEnv, BIN};

/// Exports the test install's agent to `out`, returning the snapshot id.
fn export(env: &TestEnv, install: &Install, out: &Path) -> String {
    env.run(&[
        "export",
        "researcher",
        "--install",
        &install.root.to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
    ])
    .ok()
    .last_line()
}

/// The install granted a stdio MCP server that runs `bash -c serve`.
fn grant_shell(install: &Install) {
    let path = install.root.join("config.toml");
    let config = fs::read_to_string(&path).unwrap();
    let config = config.replace(
        "servers = [\"github\"]",
        "servers = [\"github\", \"shell\"]",
    )
        + "\n[[mcp.servers]]\nname = \"shell\"\ncommand = \"bash\"\nargs = [\"-c\", \"serve\"]\n";
    fs::write(&path, config).unwrap();
}

#[test]
fn grants_gate_fails_closed_when_a_side_cannot_show_its_grants() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let before = export(&env, &install, &env.path("before"));
    grant_shell(&install);
    let after = export(&env, &install, &env.path("after"));
    // The full snapshots: the gate sees the grant.
    let r = env.run(&["diff", "-q", "--exit-on-new-grants", &before, &after]);
    assert_eq!(r.code(), 3, "{}", r.describe());

    // A digest pack of B: names the files, holds no bytes.
    let digest = env.path("after.digest");
    env.run(&[
        "pack",
        &after,
        "--trees-only",
        "--out",
        &digest.to_string_lossy(),
    ])
    .ok();
    let digest = digest.to_string_lossy().into_owned();
    for quiet in [false, true] {
        let mut args = vec!["diff", "--exit-on-new-grants", &before, &digest];
        if quiet {
            args.push("-q");
        }
        let r = env.run(&args);
        assert_eq!(r.code(), 2, "{}", r.describe());
        assert_eq!(r.stdout(), "", "{}", r.describe());
        assert!(
            r.stderr()
                .contains("--exit-on-new-grants cannot check what the agent may do: side B")
                && r.stderr().contains("file contents"),
            "{}",
            r.describe()
        );
    }
    // Without the gate, the digest still compares by content id.
    let r = env.run(&["diff", "-q", &before, &digest]);
    assert_eq!(r.code(), 1, "{}", r.describe());

    // A remote snapshot: trees only.
    let url = format!("file://{}", env.path("remote").display());
    env.run(&["remote", "add", "origin", &url]).ok();
    env.run(&["push", &after]).ok();
    let remote = format!("origin/{}", &after[..12]);
    let r = env.run(&["diff", "--exit-on-new-grants", "-q", &before, &remote]);
    assert_eq!(r.code(), 2, "{}", r.describe());
    assert!(r.stderr().contains("cannot check"), "{}", r.describe());

    // A side that is not a whole agent bundle (a subtree) cannot pass the gate either.
    let r = env.run(&[
        "diff",
        "--exit-on-new-grants",
        &format!("{before}:workspace"),
        &format!("{after}:workspace"),
    ]);
    assert_eq!(r.code(), 2, "{}", r.describe());
    assert!(
        r.stderr().contains("is not a whole agent bundle"),
        "{}",
        r.describe()
    );
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn pack_out_writes_devices_and_fifos_in_place_and_force_replaces_regular_files_only() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.md"), b"a\n");
    write(&src.join("d/b.md"), b"b\n");
    let id = env.snapshot(&src);
    let file = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &file.to_string_lossy()])
        .ok();
    let expected = fs::read(&file).unwrap();

    // /dev/null: written to, never "pass --force" (which would invite replacing it).
    let r = env.run(&["pack", &id, "--out", "/dev/null"]).ok();
    assert!(!r.stderr().contains("--force"), "{}", r.describe());
    assert!(
        fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device(),
        "/dev/null was replaced"
    );

    // A FIFO, with --force: still a FIFO, and its reader got the whole pack.
    let fifo = env.path("fifo");
    mkfifo(&fifo);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read(fifo).unwrap())
    };
    env.run(&["pack", &id, "--out", &fifo.to_string_lossy(), "--force"])
        .ok();
    assert_eq!(reader.join().unwrap(), expected);
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A character device node made in the temp dir (root only: mknod needs CAP_MKNOD).
    if is_root() {
        let dev = env.path("null-node");
        let status = Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "3"])
            .status()
            .expect("mknod");
        assert!(status.success());
        env.run(&["pack", &id, "--out", &dev.to_string_lossy(), "--force"])
            .ok();
        let t = fs::symlink_metadata(&dev).unwrap().file_type();
        assert!(t.is_char_device(), "the device node was replaced: {t:?}");
    } else {
        eprintln!("not root: the mknod device node case is skipped");
    }

    // A directory is refused, --force or not, naming it.
    let dir = env.path("a-dir");
    fs::create_dir(&dir).unwrap();
    env.run(&["pack", &id, "--out", &dir.to_string_lossy(), "--force"])
        .fails(1, "it is a directory");
    // A regular file: --force replaces it, without --force it is refused.
    env.run(&["pack", &id, "--out", &file.to_string_lossy()])
        .fails(1, "pass --force to replace it");
    fs::write(&file, b"old").unwrap();
    env.run(&["pack", &id, "--out", &file.to_string_lossy(), "--force"])
        .ok();
    assert_eq!(fs::read(&file).unwrap(), expected);
}

#[test]
fn an_update_pack_without_its_base_is_not_mounted() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.md"), b"a\n");
    write(&src.join("d/b.md"), b"b\n");
    let base = env.snapshot(&src);
    write(&src.join("a.md"), b"changed\n");
    let update = env.snapshot(&src);
    let pack = env.path("update.zcpack");
    env.run(&[
        "pack",
        &update,
        "--since",
        &base,
        "--out",
        &pack.to_string_lossy(),
    ])
    .ok();
    let mnt = env.path("mnt");
    fs::create_dir(&mnt).unwrap();
    let other = env.path("other-store");
    for daemon in [false, true] {
        let mut args = vec![
            "--store".to_string(),
            other.to_string_lossy().into_owned(),
            "mount".to_string(),
            pack.to_string_lossy().into_owned(),
            mnt.to_string_lossy().into_owned(),
        ];
        if daemon {
            args.push("--daemon".to_string());
        }
        let r = env
            .run(&args)
            .fails(1, &format!("snapshot {}", &base[..12]));
        assert!(r.stderr().contains("refusing to mount"), "{}", r.describe());
        assert!(
            !String::from_utf8_lossy(&fs::read("/proc/self/mountinfo").unwrap())
                .contains(&*mnt.to_string_lossy()),
            "mounted anyway\n{}",
            r.describe()
        );
    }
}

#[test]
fn diff_takes_the_global_quiet_after_the_command() {
    let env = TestEnv::new();
    let a = env.path("a");
    let b = env.path("b");
    write(&a.join("f"), b"1\n");
    write(&b.join("f"), b"2\n");
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    for args in [
        vec!["diff", &a, &b, "-q"],
        vec!["diff", "-q", &a, &b],
        vec!["-q", "diff", &a, &b],
        vec!["diff", &a, &b, "--quiet"],
    ] {
        let r = env.run(&args);
        assert_eq!((r.code(), r.stdout().as_str()), (1, ""), "{}", r.describe());
    }
    let r = env.run(&["diff", &a, &a, "-q"]);
    assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
    env.run(&["diff", &a, &b, "-q", "--stat"])
        .fails(2, "cannot be combined");
}

#[test]
fn two_exports_of_an_unchanged_agent_compare_equal_unless_asked() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let first = export(&env, &install, &env.path("one"));
    let second = export(&env, &install, &env.path("two"));
    assert_ne!(first, second, "the export time is in the manifest");
    let (one, two) = (env.path("one"), env.path("two"));
    let (one, two) = (one.to_string_lossy(), two.to_string_lossy());
    for (x, y) in [(first.as_str(), second.as_str()), (&*one, &*two)] {
        let r = env.run(&["diff", x, y]);
        assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
        assert!(
            r.stderr().contains("differs only in its export time"),
            "{}",
            r.describe()
        );
        let r = env.run(&["diff", x, y, "--export-time"]);
        assert_eq!(
            (r.code(), r.stdout().as_str()),
            (1, "M\tzeroclaw-agent.toml\n"),
            "{}",
            r.describe()
        );
        let r = env.run(&["--json", "diff", x, y]);
        assert_eq!(r.code(), 0, "{}", r.describe());
        let summary: serde_json::Value =
            serde_json::from_str(r.stdout().lines().last().unwrap()).unwrap();
        assert_eq!(summary["modified"], 0, "{}", r.describe());
    }
    // A real change is still a change, and the manifest's time alone is not listed with it.
    write(
        &install.root.join("agents/researcher/workspace/new.md"),
        b"new\n",
    );
    let third = export(&env, &install, &env.path("three"));
    let r = env.run(&["diff", &first, &third]);
    assert_eq!(
        (r.code(), r.stdout().as_str()),
        (1, "A\tworkspace/new.md\n"),
        "{}",
        r.describe()
    );
}

#[test]
fn verify_names_a_corrupt_root_tree_and_how_to_get_it_back() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..4 {
        write(&src.join(format!("d/f{i}.md")), format!("{i}\n").as_bytes());
        write(&src.join(format!("t{i}.md")), format!("t{i}\n").as_bytes());
    }
    let id = env.snapshot(&src);
    let pack = env.path("snap.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let root = env.run(&["--json", "show", &id]).ok().json()["root"]
        .as_str()
        .unwrap()
        .to_string();
    stored_object(&env.store, &root)
        .expect("the root tree is stored")
        .damage(|bytes| bytes[10] ^= 0x55);

    let first = env.run(&["verify"]);
    let second = env.run(&["verify"]);
    for r in [&first, &second] {
        assert_eq!(r.code(), 1, "{}", r.describe());
        let all = r.stdout() + &r.stderr();
        assert!(
            r.stdout().contains(&format!("object {root} is corrupt")),
            "{}",
            r.describe()
        );
        assert!(!all.contains("tree index"), "{}", r.describe());
        assert!(!all.contains("reindex"), "{}", r.describe());
        assert!(
            r.stderr().contains("unpack") && r.stderr().contains("pull"),
            "{}",
            r.describe()
        );
    }
    assert_eq!(first.stdout(), second.stdout(), "two runs, two stories");
    // What the hint says works: unpacking the snapshot again replaces the corrupt tree.
    env.run(&["unpack", &pack.to_string_lossy()]).ok();
    env.run(&["verify"]).ok();
}

#[test]
fn a_missing_path_side_says_it_does_not_exist() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("f"), b"f\n");
    // Without a store, and with one (where `./x` was read as a remote named ".").
    for with_store in [false, true] {
        if with_store {
            env.snapshot(&src);
        }
        for missing in ["./nonexistent", "../nonexistent-too", "/nonexistent/x"] {
            let r = env
                .run(&["diff", "agent/x", missing])
                .fails(2, &format!("{missing} does not exist"));
            assert!(!r.stderr().contains("remote"), "{}", r.describe());
        }
    }
}

#[test]
fn demo_finds_the_binary_where_cargo_puts_it_and_builds_no_s3_server() {
    let env = TestEnv::new();
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A copy of the scripts in a tree with no ./target: the binary is wherever cargo says.
    let root = env.path("checkout");
    fs::create_dir_all(root.join("scripts")).unwrap();
    for s in ["demo.sh", "setup.sh", "sample-install.sh"] {
        fs::copy(here.join("scripts").join(s), root.join("scripts").join(s)).unwrap();
    }
    // A stand-in cargo that logs its arguments and reports the real binary, behind a wrapper
    // that logs each run, at a target dir of its own (as CARGO_TARGET_DIR would).
    let bin = env.path("stub-bin");
    let target = env.path("elsewhere/release");
    fs::create_dir_all(&bin).unwrap();
    fs::create_dir_all(&target).unwrap();
    let log = env.path("cargo.log");
    let runs = env.path("runs.log");
    let exe = target.join("zeroclaw-bundle");
    let script = |path: &Path, text: String| {
        fs::write(path, text).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    };
    script(
        &exe,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{BIN}' \"$@\"\n",
            runs.display()
        ),
    );
    script(
        &bin.join("cargo"),
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\n[ \"$1\" = build ] || exit 0\n\
             echo '{{\"reason\":\"compiler-artifact\",\"executable\":null}}'\n\
             echo '{{\"reason\":\"compiler-artifact\",\"executable\":\"{}\"}}'\n\
             echo '{{\"reason\":\"build-finished\",\"success\":true}}'\n",
            log.display(),
            exe.display()
        ),
    );
    let mut c = Command::new("bash");
    c.arg(root.join("scripts/demo.sh"))
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
        )
        .env("CARGO_HOME", env.path("cargo-home"))
        .env("TMPDIR", env.dir.path())
        .env_remove("ZEROCLAW_BUNDLE_STORE");
    let r = run_command(c);
    let cargo = fs::read_to_string(&log).unwrap_or_default();
    assert!(!cargo.contains("install"), "cargo install ran:\n{cargo}");
    assert!(
        cargo.contains("build --release"),
        "{cargo}\n{}",
        r.describe()
    );
    let ran = fs::read_to_string(&runs).unwrap_or_default();
    assert!(
        ran.contains("export researcher"),
        "the demo did not run the binary cargo reported\n{}",
        r.describe()
    );
    assert_eq!(r.code(), 0, "{}", r.describe());
}
