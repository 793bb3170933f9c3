//! The tests that need a test hook (`test-hooks` builds): each runs the publish in a child
//! process, this test binary re-executed on `child_entry`, because the hooks read
//! process-wide environment variables and the other tests run in parallel threads. Races at
//! `before-swap` must be refused with the destination untouched; a `kill -9` at any step
//! followed by `recover` must leave the complete old or the complete new tree and no hidden
//! directory.

use std::os::unix::process::ExitStatusExt;

use super::*;

// ---------------------------------------------------------------------------------------
// Child processes (for hooks)

const CHILD_ENV: &str = "ZB_PUBLISH_TEST_CHILD";

/// Not a test of its own: the body a child process runs (see `run_child`), ignored so it
/// never counts as a pass; `run_child` runs it with `--ignored`.
#[test]
#[ignore = "child-process entry point, run by run_child"]
fn child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let store = Store::open_or_create(Path::new(&var("ZB_STORE"))).unwrap();
    let root: ObjectId = var("ZB_ROOT").parse().unwrap();
    let dest = PathBuf::from(var("ZB_DEST"));
    let sources: Vec<PathBuf> = var("ZB_SOURCES")
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    let req = PublishRequest {
        dest: &dest,
        force: var("ZB_FORCE") == "1",
        sources: &sources,
        store: None,
        bundle: crate::export::BUNDLE,
    };
    match publish(&store.objects().reader(), &root, &req) {
        Ok(p) => {
            // What the publish left behind, for the tests that check it (`$TMPROOT/child-left`).
            if let (Some(left), Ok(tmp)) = (&p.retired_left, std::env::var("TMPROOT")) {
                fs::write(
                    Path::new(&tmp).join("child-left"),
                    left.display().to_string(),
                )
                .unwrap();
            }
            println!("CHILD-RESULT ok exchange={}", p.used_exchange)
        }
        Err(e) => println!("CHILD-RESULT err {:#}", anyhow::Error::new(e)),
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Child {
    Killed,
    Ok { exchange: bool },
    Err(String),
}

struct ChildRun {
    root: ObjectId,
    dest: PathBuf,
    force: bool,
    sources: Vec<PathBuf>,
    seam: String,
    seam_path: Option<String>,
    cmd: String,
    no_exchange: bool,
    /// An injected failure (`crate::hooks::fault`): step and optional path suffix.
    fault: Option<(&'static str, Option<&'static str>)>,
}

fn run_child(env: &Env, run: &ChildRun) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "publish::tests::hooked::child_entry",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, "1")
    .env("ZB_STORE", env.store.root())
    .env("ZB_ROOT", run.root.to_hex())
    .env("ZB_DEST", &run.dest)
    .env("ZB_FORCE", if run.force { "1" } else { "0" })
    .env(
        "ZB_SOURCES",
        run.sources
            .iter()
            .map(|s| s.display().to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .env("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", &run.seam)
    .env("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &run.cmd)
    .env("DEST", &run.dest)
    .env("TMPROOT", env.tmp.path());
    match &run.seam_path {
        Some(p) => cmd.env("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", p),
        None => cmd.env_remove("ZEROCLAW_BUNDLE_TEST_HOOK_PATH"),
    };
    cmd.env_remove("ZEROCLAW_BUNDLE_TEST_FAULT")
        .env_remove("ZEROCLAW_BUNDLE_TEST_FAULT_PATH")
        .env_remove("ZEROCLAW_BUNDLE_TEST_FAULT_ERRNO");
    if let Some((step, path)) = run.fault {
        cmd.env("ZEROCLAW_BUNDLE_TEST_FAULT", step);
        if let Some(p) = path {
            cmd.env("ZEROCLAW_BUNDLE_TEST_FAULT_PATH", p);
        }
    }
    if run.no_exchange {
        cmd.env("ZEROCLAW_BUNDLE_TEST_NO_EXCHANGE", "1");
    } else {
        cmd.env_remove("ZEROCLAW_BUNDLE_TEST_NO_EXCHANGE");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.signal() == Some(9) {
        return Child::Killed;
    }
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("CHILD-RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| {
            panic!(
                "child gave no result: {:?}\nstdout:\n{stdout}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    if let Some(rest) = line.strip_prefix("ok exchange=") {
        Child::Ok {
            exchange: rest == "true",
        }
    } else {
        Child::Err(line.strip_prefix("err ").unwrap_or(line).to_string())
    }
}

fn child(root: &ObjectId, dest: &Path, force: bool, seam: &str, cmd: &str) -> ChildRun {
    ChildRun {
        root: *root,
        dest: dest.to_path_buf(),
        force,
        sources: Vec::new(),
        seam: seam.to_string(),
        seam_path: None,
        cmd: cmd.to_string(),
        no_exchange: false,
        fault: None,
    }
}

// ---------------------------------------------------------------------------------------
// What a publish writes

#[test]
fn manifest_is_written_last() {
    let env = Env::new();
    let dest = env.path("out/bundle");
    let log = env.path("seen.txt");
    // When the manifest is about to be written, every other file is already staged.
    let cmd = format!(
        "cd \"$TMPROOT/out\" && find . -type f | sort > '{}'",
        log.display()
    );
    let mut run = child(&env.new_id, &dest, false, "publish-write", &cmd);
    run.seam_path = Some("zeroclaw-agent.toml".into());
    assert_eq!(run_child(&env, &run), Child::Ok { exchange: false });
    let seen = fs::read_to_string(&log).unwrap();
    let files: Vec<&str> = seen.lines().collect();
    assert_eq!(files.len(), 7, "{seen}");
    assert!(
        files.iter().all(|f| !f.ends_with("zeroclaw-agent.toml")),
        "{seen}"
    );
    assert!(
        files.iter().all(|f| f.starts_with("./.zeroclaw-export-")),
        "{seen}"
    );
}

// ---------------------------------------------------------------------------------------
// Races at the swap (hooks, in a child process)

#[test]
fn destination_that_appeared_is_refused() {
    let env = Env::new();
    fs::create_dir_all(env.path("out")).unwrap();
    let dest = env.path("out/bundle");
    let cmd = "mkdir \"$DEST\" && echo mine > \"$DEST/someone-elses.md\"";
    let got = run_child(&env, &child(&env.new_id, &dest, false, "before-swap", cmd));
    let Child::Err(msg) = got else {
        panic!("expected a refusal, got {got:?}")
    };
    assert!(
        msg.contains("did not exist when the publish started"),
        "{msg}"
    );
    assert_eq!(fs::read(dest.join("someone-elses.md")).unwrap(), b"mine\n");
    assert_eq!(names(&dest), ["someone-elses.md"]);
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

#[test]
fn destination_replaced_by_another_directory_is_refused() {
    for no_exchange in [false, true] {
        let env = Env::new();
        let dest = env.with_old_bundle();
        let cmd = "mv \"$DEST\" \"$TMPROOT/moved-aside\" && mkdir \"$DEST\" && echo other > \"$DEST/other.md\"";
        let mut run = child(&env.new_id, &dest, true, "before-swap", cmd);
        run.no_exchange = no_exchange;
        let got = run_child(&env, &run);
        let Child::Err(msg) = got else {
            panic!("expected a refusal, got {got:?}")
        };
        assert!(
            msg.contains("not the directory this publish checked"),
            "{msg}"
        );
        assert_eq!(listing(&env.path("moved-aside")), expected(&env.old));
        assert_eq!(names(&dest), ["other.md"]);
        assert_eq!(names(&env.path("out")), ["bundle"]);
    }
}

/// The seam between the swap-time re-check and the rename: a destination replaced there is
/// only caught by the identity check of what the rename moved out, on both swap paths.
#[test]
fn destination_replaced_between_recheck_and_rename_is_refused() {
    for no_exchange in [false, true] {
        let env = Env::new();
        let dest = env.with_old_bundle();
        let cmd = "mv \"$DEST\" \"$TMPROOT/moved-aside\" && mkdir \"$DEST\" && echo other > \"$DEST/other.md\"";
        let mut run = child(&env.new_id, &dest, true, "publish-before-rename", cmd);
        run.no_exchange = no_exchange;
        let got = run_child(&env, &run);
        let Child::Err(msg) = got else {
            panic!("no_exchange {no_exchange}: expected a refusal, got {got:?}")
        };
        assert!(
            msg.contains("not the directory this publish checked"),
            "no_exchange {no_exchange}: {msg}"
        );
        assert_eq!(listing(&env.path("moved-aside")), expected(&env.old));
        assert_eq!(names(&dest), ["other.md"], "no_exchange {no_exchange}");
        assert_eq!(
            fs::read(dest.join("other.md")).unwrap(),
            b"other\n",
            "no_exchange {no_exchange}"
        );
        assert_eq!(
            names(&env.path("out")),
            ["bundle"],
            "no_exchange {no_exchange}"
        );
    }
}

/// The same seam for an empty destination (admitted without --force): replaced by another
/// empty directory, or given a file, it is refused and kept.
#[test]
fn empty_destination_changed_between_recheck_and_rename_is_refused() {
    for no_exchange in [false, true] {
        for (cmd, needle, kept) in [
            (
                "rmdir \"$DEST\" && mkdir \"$DEST\" && touch \"$DEST/.keep\"",
                "not the directory this publish checked",
                ".keep",
            ),
            (
                "echo arrived > \"$DEST/arrived.md\"",
                "not any more",
                "arrived.md",
            ),
        ] {
            let env = Env::new();
            let dest = env.path("out/bundle");
            fs::create_dir_all(&dest).unwrap();
            let mut run = child(&env.new_id, &dest, false, "publish-before-rename", cmd);
            run.no_exchange = no_exchange;
            let got = run_child(&env, &run);
            let Child::Err(msg) = got else {
                panic!("no_exchange {no_exchange}, {cmd}: expected a refusal, got {got:?}")
            };
            assert!(
                msg.contains(needle),
                "no_exchange {no_exchange}, {cmd}: {msg}"
            );
            assert_eq!(names(&dest), [kept], "no_exchange {no_exchange}, {cmd}");
            assert_eq!(names(&env.path("out")), ["bundle"], "{cmd}");
        }
    }
}

/// A vacant destination that appears between the re-check and the rename is refused by
/// RENAME_NOREPLACE.
#[test]
fn destination_appearing_right_before_the_rename_is_refused() {
    let env = Env::new();
    fs::create_dir_all(env.path("out")).unwrap();
    let dest = env.path("out/bundle");
    let cmd = "mkdir \"$DEST\" && echo mine > \"$DEST/someone-elses.md\"";
    let got = run_child(
        &env,
        &child(&env.new_id, &dest, false, "publish-before-rename", cmd),
    );
    let Child::Err(msg) = got else {
        panic!("expected a refusal, got {got:?}")
    };
    assert!(
        msg.contains("did not exist when the publish started"),
        "{msg}"
    );
    assert_eq!(names(&dest), ["someone-elses.md"]);
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

#[test]
fn empty_destination_that_gained_a_file_is_refused() {
    for no_exchange in [false, true] {
        let env = Env::new();
        let dest = env.path("out/bundle");
        fs::create_dir_all(&dest).unwrap();
        let cmd = "echo arrived > \"$DEST/arrived.md\"";
        let mut run = child(&env.new_id, &dest, false, "before-swap", cmd);
        run.no_exchange = no_exchange;
        let got = run_child(&env, &run);
        let Child::Err(msg) = got else {
            panic!("expected a refusal, got {got:?}")
        };
        assert!(msg.contains("not any more"), "{msg}");
        assert_eq!(names(&dest), ["arrived.md"]);
        assert_eq!(fs::read(dest.join("arrived.md")).unwrap(), b"arrived\n");
        assert_eq!(names(&env.path("out")), ["bundle"]);
    }
}

#[test]
fn destination_that_became_a_source_is_refused() {
    let env = Env::new();
    let ws = env.path("home/workspace");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("IDENTITY.md"), "me").unwrap();
    let dest = env.path("out/bundle");
    fs::create_dir_all(&dest).unwrap();
    let mut run = child(
        &env.new_id,
        &dest,
        true,
        "before-swap",
        "rmdir \"$DEST\" && mv \"$TMPROOT/home/workspace\" \"$DEST\"",
    );
    run.sources = vec![ws.clone()];
    let got = run_child(&env, &run);
    let Child::Err(msg) = got else {
        panic!("expected a refusal, got {got:?}")
    };
    assert!(msg.contains("one of the trees this publish read"), "{msg}");
    assert_eq!(names(&dest), ["IDENTITY.md"]);
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

#[test]
fn two_rename_fallback_replaces_like_exchange() {
    let env = Env::new();
    let dest = env.with_old_bundle();
    let mut run = child(&env.new_id, &dest, true, "none", "true");
    run.no_exchange = true;
    assert_eq!(run_child(&env, &run), Child::Ok { exchange: false });
    assert_eq!(listing(&dest), expected(&env.new));
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

// ---------------------------------------------------------------------------------------
// A failure at each step keeps the old bundle (injected with `hooks::fault`)

/// Every step of stage and swap whose failure is an error (not a crash): the staging
/// directory, a subdirectory, a file's creation and its writes (first file, a big one, the
/// manifest written last), the final chmod, the syncfs, and the renames of each swap path.
const FAILING_STEPS: [(&str, Option<&str>); 9] = [
    ("staging-create", None),
    ("mkdir", Some("workspace")),
    ("mkdir", Some("web_search")),
    ("create", Some("config.toml")),
    ("write", Some("big.bin")),
    ("create", Some("zeroclaw-agent.toml")),
    ("chmod", None),
    ("syncfs", None),
    ("rename", None),
];

#[track_caller]
fn fails_with_injected_error(env: &Env, run: &ChildRun, what: &str) {
    let got = run_child(env, run);
    let Child::Err(msg) = got else {
        panic!("{what}: expected the injected failure, got {got:?}")
    };
    assert!(msg.contains("Input/output error"), "{what}: {msg}");
}

#[test]
fn a_failure_at_each_step_keeps_the_old_bundle() {
    let mut tried = 0;
    for no_exchange in [false, true] {
        let fallback_only: &[(&str, Option<&str>)] = if no_exchange {
            &[("rename-first", None), ("rename-second", None)]
        } else {
            &[]
        };
        for &(step, path) in FAILING_STEPS.iter().chain(fallback_only) {
            let what = format!("{step} {path:?} no_exchange={no_exchange}");
            let env = Env::new();
            let dest = env.with_old_bundle();
            let mut run = child(&env.new_id, &dest, true, "none", "true");
            run.no_exchange = no_exchange;
            run.fault = Some((step, path));
            fails_with_injected_error(&env, &run, &what);
            assert_eq!(listing(&dest), expected(&env.old), "{what}");
            assert_eq!(names(&env.path("out")), ["bundle"], "{what}: leftovers");
            // Nothing to recover, and the next publish goes through.
            assert!(recover(&dest).unwrap().nothing_done(), "{what}");
            run.fault = None;
            assert_eq!(
                run_child(&env, &run),
                Child::Ok {
                    exchange: !no_exchange
                },
                "{what}"
            );
            assert_eq!(listing(&dest), expected(&env.new), "{what}");
            tried += 1;
        }
    }
    assert_eq!(tried, 2 * FAILING_STEPS.len() + 2);
}

#[test]
fn a_failure_at_each_step_leaves_a_vacant_destination_vacant() {
    for &(step, path) in &FAILING_STEPS {
        let what = format!("{step} {path:?}");
        let env = Env::new();
        fs::create_dir_all(env.path("out")).unwrap();
        let dest = env.path("out/bundle");
        let mut run = child(&env.new_id, &dest, false, "none", "true");
        run.fault = Some((step, path));
        fails_with_injected_error(&env, &run, &what);
        assert!(!dest.exists(), "{what}");
        assert!(names(&env.path("out")).is_empty(), "{what}: leftovers");
    }
}

// ---------------------------------------------------------------------------------------
// Crashes (kill -9 at each step), then recover

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Old,
    New,
}

fn crash_then_recover(seam: &str, seam_path: Option<&str>, no_exchange: bool, want: After) {
    let env = Env::new();
    let dest = env.with_old_bundle();
    let mut run = child(&env.new_id, &dest, true, seam, "kill -9 $PPID");
    run.no_exchange = no_exchange;
    run.seam_path = seam_path.map(str::to_string);
    let got = run_child(&env, &run);
    assert_eq!(
        got,
        Child::Killed,
        "seam {seam} (no_exchange {no_exchange}) was not reached"
    );
    let rec = recover(&dest).unwrap();
    let have = listing(&dest);
    let (want_listing, other) = match want {
        After::Old => (expected(&env.old), expected(&env.new)),
        After::New => (expected(&env.new), expected(&env.old)),
    };
    assert!(
        have == want_listing,
        "seam {seam} (no_exchange {no_exchange}): want {want:?}, got {}; recover: {rec:?}",
        if have == other {
            "the other tree"
        } else {
            "a mixture"
        }
    );
    assert_eq!(names(&env.path("out")), ["bundle"], "seam {seam}: {rec:?}");
    assert!(rec.left_alone.is_empty(), "{rec:?}");
    // A second recover has nothing to do.
    assert!(recover(&dest).unwrap().nothing_done());
}

#[test]
fn crash_at_each_step_of_the_exchange_path() {
    for (seam, path, want) in [
        ("publish-admitted", None, After::Old),
        ("publish-write", Some("big.bin"), After::Old),
        ("publish-write", Some("zeroclaw-agent.toml"), After::Old),
        ("publish-staged", None, After::Old),
        ("before-swap", None, After::Old),
        ("publish-after-exchange", None, After::New),
        ("publish-after-retire", None, After::New),
        ("publish-after-remove", None, After::New),
    ] {
        crash_then_recover(seam, path, false, want);
    }
}

#[test]
fn crash_at_each_step_of_the_two_rename_fallback() {
    for (seam, path, want) in [
        ("publish-write", Some("run.sh"), After::Old),
        ("publish-staged", None, After::Old),
        ("before-swap", None, After::Old),
        ("publish-after-first-rename", None, After::Old),
        ("publish-after-second-rename", None, After::New),
        ("publish-after-remove", None, After::New),
    ] {
        crash_then_recover(seam, path, true, want);
    }
}

#[test]
fn crash_while_publishing_to_a_vacant_destination() {
    for (seam, published) in [("publish-staged", false), ("publish-after-rename", true)] {
        let env = Env::new();
        let dest = env.path("out/bundle");
        let run = child(&env.new_id, &dest, false, seam, "kill -9 $PPID");
        assert_eq!(run_child(&env, &run), Child::Killed, "seam {seam}");
        recover(&dest).unwrap();
        if published {
            assert_eq!(listing(&dest), expected(&env.new));
            assert_eq!(names(&env.path("out")), ["bundle"]);
        } else {
            assert!(!dest.exists());
            assert!(names(&env.path("out")).is_empty());
        }
    }
}

/// Issue 18, "the suite must be able to fail": the identity re-check just before the rename.
/// The destination is replaced at `before-swap` (before the re-check); the rename is armed to
/// fail (an injected fault), so reaching it would say so: the refusal must come from the
/// re-check, with the rename never attempted and the replacement untouched.
#[test]
fn destination_replaced_before_the_recheck_never_reaches_the_rename() {
    for no_exchange in [false, true] {
        let env = Env::new();
        let dest = env.with_old_bundle();
        let cmd = "mv \"$DEST\" \"$TMPROOT/moved-aside\" && mkdir \"$DEST\" && echo other > \"$DEST/other.md\"";
        let mut run = child(&env.new_id, &dest, true, "before-swap", cmd);
        run.no_exchange = no_exchange;
        run.fault = Some(("rename", None));
        let got = run_child(&env, &run);
        let Child::Err(msg) = got else {
            panic!("no_exchange {no_exchange}: expected a refusal, got {got:?}")
        };
        assert!(
            msg.contains("not the directory this publish checked")
                && !msg.contains("swap the staged"),
            "no_exchange {no_exchange}: the rename was reached: {msg}"
        );
        assert_eq!(names(&dest), ["other.md"]);
        assert_eq!(listing(&env.path("moved-aside")), expected(&env.old));
        assert_eq!(names(&env.path("out")), ["bundle"]);
    }
}

/// Issue 18, "the suite must be able to fail": the identity check before the old tree is
/// deleted. The retired directory is replaced by a victim at the seam after retiring it
/// (`publish-after-retire` with exchange, `publish-after-second-rename` without): the
/// victim survives, and the publish names it as left over.
#[test]
fn a_retired_directory_replaced_before_removal_survives_and_is_named() {
    for (seam, no_exchange) in [
        ("publish-after-retire", false),
        ("publish-after-second-rename", true),
    ] {
        let env = Env::new();
        let dest = env.with_old_bundle();
        let cmd = "cd \"$(dirname \"$DEST\")\" && for d in .zeroclaw-export-old-*; do \
                   mv \"$d\" \"$TMPROOT/real-old\" && mkdir \"$d\" && echo victim > \"$d/victim.md\"; done";
        let mut run = child(&env.new_id, &dest, true, seam, cmd);
        run.no_exchange = no_exchange;
        let got = run_child(&env, &run);
        assert_eq!(
            got,
            Child::Ok {
                exchange: !no_exchange
            },
            "{seam}"
        );
        let left = fs::read_to_string(env.path("child-left"))
            .unwrap_or_else(|_| panic!("{seam}: no directory named as left over"));
        let left = PathBuf::from(left);
        assert_eq!(
            fs::read(left.join("victim.md")).ok().as_deref(),
            Some(&b"victim\n"[..]),
            "{seam}: the victim was removed"
        );
        assert!(
            left.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".zeroclaw-export-old-"),
            "{seam}: {}",
            left.display()
        );
        assert_eq!(listing(&env.path("real-old")), expected(&env.old), "{seam}");
        assert_eq!(listing(&dest), expected(&env.new), "{seam}");
    }
}
