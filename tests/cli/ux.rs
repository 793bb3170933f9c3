//! The operator's view (issue 10): every printing command ends quietly (exit 0, nothing on
//! stderr) when its stdout is closed; commands that only read never create a store; `--force`
//! replaces only bundles and previous checkouts; two exports to one destination; SIGINT and
//! SIGTERM during capture and publish; and the messages that used to leave people stuck.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::export::Install;
use crate::util::*;

fn hook<'a>(seam: &'a str, path: &'a str, cmd: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", path),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", cmd),
    ]
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

fn export_args(install: &Install, out: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut a = os(&["export", "researcher", "--install"]);
    a.push(install.root.clone().into());
    a.push("--out".into());
    a.push(out.into());
    a.extend(os(extra));
    a
}

/// Names in `dir` starting with `.zeroclaw-export` (staging, retired trees, lock files).
fn hidden(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".zeroclaw-export"))
        .collect();
    v.sort();
    v
}

/// How a run against a closed stdout ended.
struct Closed {
    cmd: String,
    code: Option<i32>,
    stderr: String,
}

/// Runs `args` with stdout a pipe whose read end is closed before the child starts (every
/// write fails with EPIPE), or, with `read_one`, after reading one byte.
fn run_closed(env: &TestEnv, args: &[OsString], read_one: bool) -> Closed {
    let mut c = env.cmd();
    c.args(args).stdin(Stdio::null()).stderr(Stdio::piped());
    let cmd = format!(
        "{c:?} (stdout closed{})",
        if read_one { " after 1 byte" } else { "" }
    );
    let mut child = if read_one {
        c.stdout(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut one = [0u8; 1];
        let _ = out.read(&mut one);
        drop(out);
        child
    } else {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        c.stdout(writer);
        c.spawn().unwrap()
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    Closed {
        cmd,
        code: status.code(),
        stderr,
    }
}

/// No error, panic or pipe complaint on stderr (the notes a command prints there anyway,
/// like `captured 3 files`, may stay).
fn quiet(stderr: &str) -> bool {
    let lower = stderr.to_lowercase();
    !lower.contains("error") && !lower.contains("panick") && !lower.contains("pipe")
}

#[test]
fn every_printing_command_ends_quietly_on_a_closed_stdout() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    // Enough output that a reader taking one byte closes the pipe mid-stream (> 64 KiB).
    let src = env.path("src");
    for i in 0..3000 {
        write(&src.join(format!("dir/file-{i:05}.md")), b"x");
    }
    write(&src.join("big.bin"), &bytes(7, 300_000));
    env.snapshot_with(&src, &["--name", "base"]).ok();
    env.run(&export_args(&install, &env.path("bundle"), &[]))
        .ok();
    let scratch = |n: &str| env.path(n).into_os_string();
    let mut commands: Vec<Vec<OsString>> = vec![
        os(&["list"]),
        os(&["--json", "list"]),
        os(&["show", "base"]),
        os(&["--json", "show", "agent/researcher"]),
        os(&["show", "agent/researcher"]),
        os(&["ls", "-r", "base"]),
        os(&["--json", "ls", "-r", "base"]),
        os(&["-v", "ls", "-r", "base"]),
        os(&["cat", "base:big.bin"]),
        os(&["verify"]),
        os(&["--json", "verify"]),
        os(&["gc"]),
        os(&["--json", "gc"]),
        os(&["reindex"]),
        os(&["--help"]),
        os(&["export", "--help"]),
        os(&["--version"]),
    ];
    let mut snap = os(&["snapshot", "--dir"]);
    snap.push(src.clone().into());
    commands.push(snap);
    for (i, extra) in [&[][..], &["--json"][..]].iter().enumerate() {
        let mut a = os(extra);
        a.extend(os(&["checkout", "base", "--out"]));
        a.push(scratch(&format!("co{i}")));
        a.push("--force".into());
        commands.push(a);
        let mut a = os(extra);
        a.extend(export_args(
            &install,
            &env.path(&format!("bundle{i}")),
            &["--force"],
        ));
        commands.push(a);
        let mut a = os(extra);
        a.push("recover".into());
        a.push(scratch(&format!("co{i}")));
        commands.push(a);
    }
    let mut runs = 0;
    for args in &commands {
        for read_one in [false, true] {
            let r = run_closed(&env, args, read_one);
            runs += 1;
            assert_eq!(r.code, Some(0), "{}\nstderr: {}", r.cmd, r.stderr);
            assert!(quiet(&r.stderr), "{}\nstderr: {}", r.cmd, r.stderr);
        }
    }
    // `diff` keeps its answer: the sides differ (exit 1), however early the reader left.
    for args in [
        os(&["diff", "base", "agent/researcher"]),
        os(&["diff", "--stat", "base", "agent/researcher"]),
        os(&["--json", "diff", "base", "agent/researcher"]),
    ] {
        for read_one in [false, true] {
            let r = run_closed(&env, &args, read_one);
            runs += 1;
            assert_eq!(r.code, Some(1), "{}\nstderr: {}", r.cmd, r.stderr);
            assert!(quiet(&r.stderr), "{}\nstderr: {}", r.cmd, r.stderr);
        }
    }
    // `pack --out -` is the exception: a pack cut short is no pack, so it fails, and never
    // says "packed" (first_run.rs pins a reader that leaves at any byte).
    for read_one in [false, true] {
        let r = run_closed(&env, &os(&["pack", "base", "--out", "-"]), read_one);
        runs += 1;
        assert_eq!(r.code, Some(1), "{}\nstderr: {}", r.cmd, r.stderr);
        assert!(
            r.stderr.contains("its reader closed the pipe")
                && !r.stderr.contains("packed")
                && !r.stderr.contains("panick"),
            "{}\nstderr: {}",
            r.cmd,
            r.stderr
        );
    }
    // `forget` last (it removes the snapshot the others read).
    let r = run_closed(&env, &os(&["forget", "base"]), false);
    assert_eq!(r.code, Some(0), "{}\nstderr: {}", r.cmd, r.stderr);
    assert!(quiet(&r.stderr), "{}\nstderr: {}", r.cmd, r.stderr);
    assert!(runs >= 40, "{runs}");
    env.run(&["verify"]).ok();
}

#[test]
fn read_only_commands_never_create_a_store() {
    let env = TestEnv::new();
    let typo = env.path("typo-store");
    let store_args = |rest: &[&str]| {
        let mut a = vec![OsString::from("--store"), typo.clone().into()];
        a.extend(os(rest));
        a
    };
    for rest in [
        &["list"][..],
        &["--json", "list"],
        &["show", "agent/x"],
        &["ls", "abcdef01"],
        &["cat", "abcdef01:a"],
        &["checkout", "abcdef01", "--out", "co"],
        &["verify"],
        &["gc"],
        &["reindex"],
        &["forget", "abcdef01"],
        &["mount", "abcdef01", "mnt"],
    ] {
        env.run(&store_args(rest)).fails(1, "no store at");
        assert!(!typo.exists(), "{rest:?} created {}", typo.display());
        assert!(!env.path("co").exists(), "{rest:?}");
    }
    // An unpack of a pack that is not there, or not a pack, creates no store either.
    fs::write(env.path("not-a.pack"), b"garbage").unwrap();
    for (pack, says) in [
        ("no-such.pack", "No such file"),
        ("not-a.pack", "too short to be a pack"),
    ] {
        env.run(&store_args(&["unpack", pack])).fails(1, says);
        assert!(!typo.exists(), "unpack {pack} created {}", typo.display());
    }
    // Nor does a diff of directories or packs (it hashes in a scratch store), and a diff of
    // a snapshot still says there is no store.
    let (d1, d2) = (env.path("d1"), env.path("d2"));
    write(&d1.join("a"), b"a");
    write(&d2.join("a"), b"b");
    let r = env.run(&store_args(&["diff", "d1", "d2"]));
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(r.stdout().contains("M\ta"), "{}", r.describe());
    assert!(!typo.exists(), "diff created {}", typo.display());
    env.run(&store_args(&["diff", "abcdef01", "d1"]))
        .fails(2, "no store at");
    assert!(!typo.exists());
    // A failed export (bad install path) creates neither the default store nor the bundle.
    let data = env.path("xdg");
    fs::create_dir(&data).unwrap();
    let mut c = env.cmd();
    c.env_remove("ZEROCLAW_BUNDLE_STORE")
        .env("XDG_DATA_HOME", &data)
        .env_remove("ZEROCLAW_HOME")
        .args([
            "export",
            "researcher",
            "--install",
            "no-such-install",
            "--out",
            "b",
        ]);
    let r = run_command(c).fails(1, "no-such-install/config.toml does not exist");
    let err = r.stderr();
    // How to name the install, in the one wording of the default (first_run.rs pins it):
    // ZeroClaw's own variable, not this tool's older ZEROCLAW_HOME.
    assert!(
        err.contains("--install") && err.contains("$ZEROCLAW_CONFIG_DIR"),
        "{err}"
    );
    assert_eq!(err.matches("config.toml").count(), 1, "cause once: {err}");
    assert_eq!(fs::read_dir(&data).unwrap().count(), 0, "no store created");
    assert!(!env.path("b").exists());
    // An empty store's list says so.
    let src = env.path("src");
    write(&src.join("a"), b"a");
    let id = env.snapshot(&src);
    env.run(&["forget", &id]).ok();
    let r = env.run(&["list"]).ok();
    assert!(r.stdout().contains("no snapshots"), "{}", r.describe());
    assert_eq!(
        env.run(&["--json", "list"]).ok().json(),
        serde_json::json!([])
    );
}

#[test]
fn force_replaces_bundles_and_checkouts_but_not_other_directories() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    // The operator's own directory.
    let mine = env.path("notempty");
    write(&mine.join("keep.txt"), b"mine");
    let before = read_tree(&mine);
    env.run(&export_args(&install, &mine, &["--force"]))
        .fails(1, "--replace-any");
    assert!(read_tree(&mine) == before, "untouched");
    assert_eq!(env.snapshot_count(), 0, "refused before capturing");
    assert!(hidden(env.dir.path()).is_empty());
    // --replace-any replaces it and the report says what went.
    let r = env
        .run(&export_args(&install, &mine, &["--replace-any"]))
        .ok();
    assert!(
        r.stdout().contains("replaced") && r.stdout().contains("keep.txt"),
        "{}",
        r.describe()
    );
    assert!(!mine.join("keep.txt").exists());
    // A bundle is replaced by --force without fuss, and the report says so.
    let r = env.run(&export_args(&install, &mine, &["--force"])).ok();
    assert!(
        r.stdout().contains("replaced the previous bundle"),
        "{}",
        r.describe()
    );
    // checkout: a previous checkout (recorded in the catalog) is replaced by --force ...
    let src = env.path("src");
    write(&src.join("a.md"), b"a");
    let id = env.snapshot(&src);
    let co = env.path("co");
    env.run(&[
        OsStr::new("checkout"),
        OsStr::new(&id),
        OsStr::new("--out"),
        co.as_os_str(),
    ])
    .ok();
    write(&co.join("extra.md"), b"added by hand");
    let r = env
        .run(&[
            OsStr::new("checkout"),
            OsStr::new(&id),
            OsStr::new("--out"),
            co.as_os_str(),
            OsStr::new("--force"),
        ])
        .ok();
    assert!(
        r.stderr().contains("replaced the previous checkout"),
        "{}",
        r.describe()
    );
    assert!(!co.join("extra.md").exists());
    // ... another directory is not.
    let other = env.path("other");
    write(&other.join("keep.txt"), b"mine");
    env.run(&[
        OsStr::new("checkout"),
        OsStr::new(&id),
        OsStr::new("--out"),
        other.as_os_str(),
        OsStr::new("--force"),
    ])
    .fails(1, "--replace-any");
    assert_eq!(fs::read(other.join("keep.txt")).unwrap(), b"mine");
}

/// Waits (polling, no deadline assertion) for `path` to exist, while `child` runs.
fn wait_for(path: &Path, child: &mut std::process::Child) {
    for _ in 0..6000 {
        if path.exists() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the first process ended ({status}) before reaching the hook");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn two_exports_to_one_destination_and_a_failed_one_moves_no_ref() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out/bundle");
    let first = env.run(&export_args(&install, &out, &[])).ok();
    let first_id = first.last_line();
    let ready = env.path("ready");
    let go = env.path("go");
    let wait = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
        ready.display(),
        go.display()
    );
    for seam in ["classify-open", "publish-write"] {
        for f in [&ready, &go] {
            let _ = fs::remove_file(f);
        }
        // The first export holds inside capture (or publish) at a new file (one it must read
        // and write: an unchanged one may come from the stat cache, or be linked) ...
        let fresh = format!("fresh-{seam}.md");
        write(&install.ws().join(&fresh), seam.as_bytes());
        let mut c = env.cmd();
        c.args(export_args(&install, &out, &["--force"]))
            .envs(hook(seam, &fresh, &wait))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut held = c.spawn().unwrap();
        wait_for(&ready, &mut held);
        // ... so the second fails at once, capturing nothing, and so does a checkout.
        let count = env.snapshot_count();
        env.run(&export_args(&install, &out, &["--force"]))
            .fails(1, "another export or checkout to");
        env.run(&[
            OsStr::new("checkout"),
            OsStr::new(&first_id),
            OsStr::new("--out"),
            out.as_os_str(),
            OsStr::new("--force"),
        ])
        .fails(1, "another export or checkout to");
        assert_eq!(
            env.snapshot_count(),
            count,
            "{seam}: the second captured nothing"
        );
        fs::write(&go, b"").unwrap();
        let done = held.wait_with_output().unwrap();
        assert!(done.status.success(), "{seam}: {done:?}");
        assert!(
            hidden(&env.path("out")).is_empty(),
            "{seam}: {:?}",
            hidden(&env.path("out"))
        );
    }
    // A publish that fails after the capture leaves agent/researcher where it was.
    let before = env.run(&["--json", "show", "agent/researcher"]).ok().json()["snapshot"].clone();
    let count = env.snapshot_count();
    let taken = env.path("out/taken");
    let grab = format!("mkdir {0} && echo theirs > {0}/theirs.md", taken.display());
    let r = env.run_with(
        &export_args(&install, &taken, &[]),
        &hook("before-swap", "taken", &grab),
    );
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert!(
        r.stderr().contains("nothing was recorded"),
        "{}",
        r.describe()
    );
    let after = env.run(&["--json", "show", "agent/researcher"]).ok().json()["snapshot"].clone();
    assert_eq!(before, after, "a failed export moved agent/researcher");
    assert_eq!(env.snapshot_count(), count);
    assert_eq!(fs::read(taken.join("theirs.md")).unwrap(), b"theirs\n");
}

/// The `zeroclaw-bundle recover ...` command printed on stderr, as a shell command line.
fn printed_recover(stderr: &str) -> String {
    let at = stderr
        .find("zeroclaw-bundle recover ")
        .unwrap_or_else(|| panic!("no recover command in: {stderr}"));
    stderr[at..].lines().next().unwrap().trim().to_string()
}

#[test]
fn interrupts_during_capture_and_publish_stop_cleanly() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out/bundle");
    env.run(&export_args(&install, &out, &[])).ok();
    let old = read_tree(&out);
    let count = env.snapshot_count();
    write(&install.ws().join("new.md"), b"new");
    for (seam, signal) in [
        ("classify-open", "INT"),
        ("classify-open", "TERM"),
        ("publish-write", "INT"),
        ("publish-write", "TERM"),
    ] {
        let cmd = format!("kill -{signal} $PPID");
        // At new.md: never captured (every capture here is interrupted) nor published, so
        // both the capture and the publish must read and write it (one signal, as from one
        // Ctrl-C: the hook runs for that file only).
        let r = env.run_with(
            &export_args(&install, &out, &["--force"]),
            &hook(seam, "new.md", &cmd),
        );
        assert_eq!(r.code(), 130, "{seam} {signal}: {}", r.describe());
        let err = r.stderr();
        assert!(err.contains("interrupted"), "{}", r.describe());
        if seam == "classify-open" {
            assert!(err.contains("gc --grace 0"), "{}", r.describe());
        } else {
            assert!(err.contains("destination is unchanged"), "{}", r.describe());
        }
        assert_eq!(err.lines().count(), 1, "one message: {}", r.describe());
        assert!(
            read_tree(&out) == old,
            "{seam} {signal}: the bundle is untouched"
        );
        assert!(
            hidden(&env.path("out")).is_empty(),
            "{seam}: {:?}",
            hidden(&env.path("out"))
        );
        assert_eq!(
            env.snapshot_count(),
            count,
            "{seam} {signal}: nothing recorded"
        );
    }
    // A second signal stops at once (the staging tree stays) and prints the command that
    // cleans up; that command works. One file in the snapshot, so the publish is exactly at
    // the hook when both signals arrive.
    let src = env.path("one");
    write(&src.join("only.md"), b"only");
    let id = env.snapshot(&src);
    let dest = env.path("co dir/it's here");
    let r = env.run_with(
        &[
            OsStr::new("checkout"),
            OsStr::new(&id),
            OsStr::new("--out"),
            dest.as_os_str(),
        ],
        &hook(
            "publish-write",
            "only.md",
            "kill -INT $PPID; kill -TERM $PPID; sleep 2",
        ),
    );
    assert_eq!(r.code(), 130, "{}", r.describe());
    assert!(
        !hidden(&env.path("co dir")).is_empty(),
        "the staging tree is left"
    );
    let line = printed_recover(&r.stderr());
    let fixed = Command::new("sh")
        .arg("-c")
        .arg(line.replacen("zeroclaw-bundle", BIN, 1))
        .env("ZEROCLAW_BUNDLE_STORE", &env.store)
        .current_dir(env.dir.path())
        .output()
        .unwrap();
    assert!(fixed.status.success(), "{line}: {fixed:?}");
    assert!(hidden(&env.path("co dir")).is_empty(), "{line} cleaned up");
    assert!(!dest.exists());
    env.run(&[
        OsStr::new("checkout"),
        OsStr::new(&id),
        OsStr::new("--out"),
        dest.as_os_str(),
    ])
    .ok();
    // gc says what the grace period kept and how to free it.
    env.run(&["forget", &id]).ok();
    let r = env.run(&["gc"]).ok();
    assert!(r.stdout().contains("--grace 0"), "{}", r.describe());
    let r = env.run(&["gc", "--grace", "0"]).ok();
    assert!(!r.stdout().contains("younger"), "{}", r.describe());
}

#[test]
fn error_messages_escape_control_characters_and_say_a_cause_once() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    // An argument: the alias is quoted back in the error.
    let mut a = os(&["export", "res\u{1b}[2Jearcher", "--install"]);
    a.push(install.root.clone().into());
    a.extend(os(&["--out", "b"]));
    let r = env.run(&a).fails(1, "res\\x1b[2Jearcher");
    assert!(!r.stderr().contains('\u{1b}'), "{}", r.describe());
    // A config value: quoted back when the closure does not validate.
    let config = install.root.join("config.toml");
    let text = fs::read_to_string(&config).unwrap();
    let crafted = text.replace(
        "model_provider = \"anthropic.main\"",
        "model_provider = \"anthropic.\\u001b[2J\\u009bmain\"",
    );
    assert_ne!(crafted, text);
    fs::write(&config, crafted).unwrap();
    let r = env
        .run(&export_args(&install, &env.path("b"), &[]))
        .fails(1, "model_provider");
    let err = r.stderr();
    assert!(!err.contains('\u{1b}') && !err.contains('\u{9b}'), "{err}");
    assert!(err.contains("\\x1b[2J\\u{009b}main"), "{err}");
    // A cause is said once, not in the message and again as its source.
    let src = env.path("src");
    write(&src.join("a"), b"a");
    env.snapshot_with(&src, &["--name", "s"]).ok();
    let r = env
        .run(&["checkout", "s", "--out", "/proc/sys/no-such-dir/out"])
        .fails(1, "No such file or directory");
    assert_eq!(
        r.stderr().matches("No such file").count(),
        1,
        "{}",
        r.describe()
    );
}

#[test]
fn messages_say_what_to_do_and_numbers_agree() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("bundle");
    let exported = env
        .run(&{
            let mut a = os(&["--json"]);
            a.extend(export_args(&install, &out, &[]));
            a
        })
        .ok()
        .json();
    env.run(&["show", "dead"])
        .fails(1, "at least 8 hex digits")
        .fails(1, "\nhint: `zeroclaw-bundle list` shows the snapshots");
    env.run(&["show", "researcher"])
        .fails(1, "agent/researcher");
    env.run(&["umount", "no-such-dir"])
        .fails(1, "does not exist");
    let mut c = env.cmd();
    c.env("ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS", "10s").arg("list");
    run_command(c).fails(
        1,
        "ZEROCLAW_BUNDLE_LOCK_TIMEOUT_MS=10s is not a whole number",
    );
    // One snapshot: the same file and byte counts in the export report, list, ls and the
    // published tree.
    let files = exported["files"].as_u64().unwrap();
    let bytes = exported["bytes"].as_u64().unwrap();
    let list = env.run(&["--json", "list"]).ok().json();
    assert_eq!(list[0]["files"].as_u64(), Some(files));
    assert_eq!(list[0]["bytes"].as_u64(), Some(bytes));
    let ls = env
        .run(&["--json", "ls", "-r", "agent/researcher"])
        .ok()
        .json();
    let ls_files: Vec<_> = ls
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] != "dir")
        .collect();
    assert_eq!(ls_files.len() as u64, files, "{ls}");
    let ls_bytes: u64 = ls_files.iter().map(|e| e["size"].as_u64().unwrap()).sum();
    assert_eq!(ls_bytes, bytes);
    let on_disk = read_tree(&out)
        .values()
        .filter(|n| matches!(n, Node::File { .. }))
        .count() as u64;
    assert_eq!(on_disk, files);
    // Text: a header, plurals.
    let text = env.run(&["list"]).ok().stdout();
    assert!(text.starts_with("SNAPSHOT"), "{text}");
    let v = env.run(&["verify"]).ok().stdout();
    assert!(
        v.contains("1 snapshot:") || v.contains("1 snapshot "),
        "{v}"
    );
    let report = env
        .run(&export_args(&install, &env.path("b2"), &[]))
        .ok()
        .stdout();
    assert!(
        report.contains(&format!("{files} files")) && !report.contains("1 symlinks"),
        "{report}"
    );
    // --name reused: the name moves, and the command says so.
    let src = env.path("src");
    write(&src.join("a"), b"a");
    let first = env
        .snapshot_with(&src, &["--name", "keep"])
        .ok()
        .last_line();
    write(&src.join("a"), b"changed");
    let r = env.snapshot_with(&src, &["--name", "keep"]).ok();
    assert!(r.stderr().contains("moved"), "{}", r.describe());
    assert_eq!(
        env.run(&["show", &first]).ok().code(),
        0,
        "the old one stays"
    );
    // -q and -v together are refused.
    env.run(&["-q", "-v", "list"])
        .fails(2, "cannot be used with");
}

#[test]
fn help_has_examples_and_no_repeated_or_internal_options() {
    let env = TestEnv::new();
    let top = env.run(&["--help"]).ok().stdout();
    assert!(
        top.contains("Examples:") && top.contains("--store <DIR>"),
        "{top}"
    );
    // Every command the description names exists.
    for sub in ["diff", "pack", "unpack"] {
        assert!(
            top.contains(&format!("  {sub} ")),
            "{sub} not listed: {top}"
        );
    }
    let takes_snapshot = [
        "show", "ls", "cat", "checkout", "mount", "forget", "diff", "pack",
    ];
    for sub in [
        "export", "snapshot", "list", "show", "ls", "cat", "checkout", "mount", "umount",
        "recover", "verify", "gc", "reindex", "forget", "diff", "pack", "unpack",
    ] {
        let h = env.run(&[sub, "--help"]).ok().stdout();
        assert!(h.contains("Example"), "{sub}: {h}");
        assert!(
            !h.contains("--store <DIR>"),
            "{sub} repeats the globals: {h}"
        );
        assert!(!h.contains("zeroclaw-version"), "{sub}: {h}");
        assert!(h.contains("Global options"), "{sub}: {h}");
        if takes_snapshot.contains(&sub) {
            assert!(h.contains("SNAPSHOT is one of"), "{sub}: {h}");
        }
    }
    let recover = env.run(&["recover", "--help"]).ok().stdout();
    assert!(recover.contains("You need it"), "{recover}");
    let snapshot = env.run(&["snapshot", "--help"]).ok().stdout();
    assert!(snapshot.contains("moves to the new snapshot"), "{snapshot}");
}

/// A tmux session running one command on a terminal; killed on drop.
pub(crate) struct Tmux {
    pub(crate) name: String,
}

impl Tmux {
    /// Starts `script` in a detached 120x20 session, or `None` (skipped) where tmux is missing
    /// outside CI.
    pub(crate) fn start(tag: &str, script: &Path) -> Option<Tmux> {
        let have = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !have {
            assert!(
                std::env::var_os("CI").is_none(),
                "tmux is missing, and CI must run the terminal tests"
            );
            eprintln!("SKIPPED: tmux is missing");
            return None;
        }
        // One name per session, even within one test: a test that starts a second session
        // under the name of the first raced the exit of the server it had just killed
        // ("server exited unexpectedly", seen in CI with three passphrase prompts in a row).
        static SESSIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("zb-{tag}-{}-{n}", std::process::id());
        // A server of its own (`-L`): sessions of tests running at once on the default
        // server raced its exit when another test killed the last session ("server exited
        // unexpectedly").
        let ok = Command::new("tmux")
            .args([
                "-L",
                &name,
                "new-session",
                "-d",
                "-s",
                &name,
                "-x",
                "120",
                "-y",
                "20",
            ])
            .arg(format!("bash {}; sleep 600", script.display()))
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        Some(Tmux { name })
    }

    /// A `tmux` command talking to this session's own server.
    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.name]);
        c
    }

    pub(crate) fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().args(["kill-server"]).status();
    }
}

/// Waits for `path` (polling, no time assertion beyond a generous cap).
pub(crate) fn wait_file(path: &Path) {
    for _ in 0..3000 {
        if path.exists() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{} never appeared", path.display());
}

/// Polls the screen until `want` holds (the bar redraws on a 200 ms tick).
pub(crate) fn screen_until(t: &Tmux, want: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..500 {
        last = t.screen();
        if want(&last) {
            return last;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the screen never showed what was expected:\n{last}");
}

#[test]
fn progress_shows_on_a_terminal_and_never_in_a_pipe() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..20 {
        write(&src.join(format!("f{i:02}")), &bytes(i, 200_000));
    }
    env.snapshot_with(&src, &["--name", "s"]).ok();
    write(&src.join("f00"), b"changed");
    let ready = env.path("ready");
    let go = env.path("go");
    let pause = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
        ready.display(),
        go.display()
    );
    // (what runs, the seam to pause at, the file to pause at (for the capture, a changed one:
    // an unchanged one may come from the stat cache unread), what the screen must show)
    Install::new(&env);
    let cases: [(&str, &str, &str, &[&str]); 3] = [
        (
            "snapshot --dir src",
            "classify-open",
            "f00",
            &["capturing:", " files ("],
        ),
        (
            "checkout s --out co",
            "publish-write",
            "f05",
            &["publishing", "/20 files", "MiB/3.81 MiB", ")"],
        ),
        // The publish half of an export: the library's progress reaches the same bar.
        (
            "export researcher --install install --out ex",
            "publish-write",
            "workspace/notes.md",
            &["publishing", "/7 files", ")"],
        ),
    ];
    for (args, seam, file, expect) in cases {
        for f in [&ready, &go] {
            let _ = fs::remove_file(f);
        }
        let script = env.path("run.sh");
        fs::write(
            &script,
            format!(
                "cd {dir}\nexport ZEROCLAW_BUNDLE_STORE={store} ZEROCLAW_BUNDLE_TEST_HOOK_SEAM={seam} \
                 ZEROCLAW_BUNDLE_TEST_HOOK_PATH={file} ZEROCLAW_BUNDLE_TEST_HOOK_CMD='{pause}'\n\
                 {bin} {args}\necho \"EXIT=$?\"\n",
                dir = env.dir.path().display(),
                store = env.store.display(),
                bin = BIN,
            ),
        )
        .unwrap();
        let Some(t) = Tmux::start(seam, &script) else {
            return;
        };
        wait_file(&ready);
        let seen = screen_until(&t, |s| expect.iter().all(|e| s.contains(e)));
        assert!(!seen.contains("0 B/0 B"), "{seen}");
        fs::write(&go, b"").unwrap();
        let done = screen_until(&t, |s| s.contains("EXIT="));
        assert!(done.contains("EXIT=0"), "{done}");
        assert!(
            !done.contains("capturing:") && !done.contains("publishing"),
            "the bar is cleared: {done}"
        );
    }
    // Ctrl-C on the terminal during a capture: the spinner line is cleared, one message says
    // what happened, exit 130, nothing recorded.
    let count = env.snapshot_count();
    write(&src.join("f01"), b"changed again");
    for f in [&ready, &go] {
        let _ = fs::remove_file(f);
    }
    let script = env.path("run.sh");
    fs::write(
        &script,
        format!(
            "cd {dir}\nexport ZEROCLAW_BUNDLE_STORE={store} ZEROCLAW_BUNDLE_TEST_HOOK_SEAM=classify-open \
             ZEROCLAW_BUNDLE_TEST_HOOK_PATH=f01 ZEROCLAW_BUNDLE_TEST_HOOK_CMD=\"trap '' INT; {pause}\"\n\
             {bin} snapshot --dir src\necho \"EXIT=$?\"\n",
            dir = env.dir.path().display(),
            store = env.store.display(),
            bin = BIN,
        ),
    )
    .unwrap();
    let t = Tmux::start("ctrl-c", &script).expect("tmux ran above");
    wait_file(&ready);
    screen_until(&t, |s| s.contains("capturing:"));
    let sent = t
        .command()
        .args(["send-keys", "-t", &t.name, "C-c"])
        .status()
        .unwrap();
    assert!(sent.success());
    // The hook ignores SIGINT (it stands for a file being read); release it once the
    // terminal has seen the Ctrl-C.
    screen_until(&t, |s| s.contains("^C"));
    fs::write(&go, b"").unwrap();
    let done = screen_until(&t, |s| s.contains("EXIT="));
    assert!(done.contains("EXIT=130"), "{done}");
    assert!(done.contains("interrupted: the capture stopped"), "{done}");
    assert!(
        !done.contains("capturing:"),
        "the spinner line is cleared: {done}"
    );
    drop(t);
    assert_eq!(env.snapshot_count(), count, "nothing recorded");
    // The same work in a pipe: no bar, no carriage return, no escape code.
    let _ = fs::remove_dir_all(env.path("co"));
    for r in [
        env.run(&["snapshot", "--dir", "src"]).ok(),
        env.run(&["checkout", "s", "--out", "co"]).ok(),
        env.run(&["verify"]).ok(),
    ] {
        let err = r.stderr();
        assert!(
            !err.contains('\r') && !err.contains('\x1b') && !err.contains("files ("),
            "{}",
            r.describe()
        );
    }
}
