//! Operator UX round 2 (issue 22, items 4, 5, 6, 12, 13 and 14): `push`, `pull` and `unpack`
//! draw bars of objects and bytes on a terminal (seen through tmux) and nothing in a pipe;
//! Ctrl-C (SIGINT) or SIGTERM during `unpack` stops with 130 and leaves no staging directory,
//! and `gc` says what it freed from `tmp/` after a killed one; only the commands that add to a
//! store create one; `-v` prints the remote traffic of `push`, `pull`, `list --remote` and
//! `mount --daemon`; `forget` then `reindex` leaves a moved name where it went; `list` labels
//! `agent/<alias>` on the snapshot that ref resolves to only. (Item 15, S3 errors, is pinned
//! in `remote_s3` against the real server.)

use std::fs;
use std::path::{Path, PathBuf};

use crate::export::Install;
use crate::remote::Fleet;
use crate::util::*;
use crate::ux::{screen_until, wait_file, Tmux};

/// A directory of `n` files of 300 KB each (incompressible), and its snapshot's id.
fn big_snapshot(env: &TestEnv, n: usize) -> (PathBuf, String) {
    let src = env.path("big");
    for i in 0..n {
        write(&src.join(format!("f{i:03}")), &bytes(i as u64 + 7, 300_000));
    }
    let id = env.snapshot(&src);
    (src, id)
}

/// `pack ID --out NAME` in the env's directory, returning the pack's path.
fn pack(env: &TestEnv, id: &str, name: &str) -> PathBuf {
    let out = env.path(name);
    env.run(&["pack", id, "--out", &out.to_string_lossy()]).ok();
    out
}

/// The entries of `<store>/tmp` (none when it does not exist).
fn tmp_entries(store: &Path) -> Vec<String> {
    fs::read_dir(store.join("tmp"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `args` (a shell command line, the store set) on a tmux terminal, paused at the hook
/// `seam` at `path` until the screen shows every string of `expect`; then lets it finish and
/// checks it exited 0 with the bar cleared.
fn see_bar(env: &TestEnv, store: &Path, args: &str, seam: &str, path: &str, expect: &[&str]) {
    let (ready, go) = (env.path("ready"), env.path("go"));
    for f in [&ready, &go] {
        let _ = fs::remove_file(f);
    }
    let pause = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done",
        ready.display(),
        go.display()
    );
    let script = env.path("run.sh");
    fs::write(
        &script,
        format!(
            "cd {dir}\nexport ZEROCLAW_BUNDLE_STORE={store} ZEROCLAW_BUNDLE_TEST_HOOK_SEAM={seam} \
             ZEROCLAW_BUNDLE_TEST_HOOK_PATH={path} ZEROCLAW_BUNDLE_TEST_HOOK_CMD='{pause}'\n\
             {bin} {args}\necho \"EXIT=$?\"\n",
            dir = env.dir.path().display(),
            store = store.display(),
            bin = BIN,
        ),
    )
    .unwrap();
    let Some(t) = Tmux::start(seam, &script) else {
        return;
    };
    wait_file(&ready);
    let seen = screen_until(&t, |s| expect.iter().all(|e| s.contains(e)));
    assert!(!seen.contains("0 B/0 B"), "{args}: {seen}");
    fs::write(&go, b"").unwrap();
    let done = screen_until(&t, |s| s.contains("EXIT="));
    assert!(done.contains("EXIT=0"), "{args}: {done}");
    assert!(
        !done.contains(expect[0]),
        "{args}: the bar is cleared: {done}"
    );
}

#[test]
fn push_pull_and_unpack_show_bars_on_a_terminal_and_never_in_a_pipe() {
    let f = Fleet::file();
    let env = &f.env;
    let (_, id) = big_snapshot(env, 24);
    let file = pack(env, &id, "big.zcpack");
    let remote = env.path("remote");
    fs::create_dir_all(&remote).unwrap();
    let add = |store: &Path| {
        env.run(&[
            "--store",
            &store.to_string_lossy(),
            "remote",
            "add",
            "origin",
            &format!("file://{}", remote.display()),
        ])
        .ok();
    };
    // unpack: the verification, objects and bytes of the total.
    let unpacked = env.path("unpacked");
    see_bar(
        env,
        &unpacked,
        &format!("unpack {}", file.display()),
        "import-verified",
        "object-3",
        &["verifying", "/25 objects", " MiB (", ")"],
    );
    // push: the pack being written, then its upload.
    add(&env.store);
    see_bar(
        env,
        &env.store,
        &format!("push {id}"),
        "push-packed",
        "object-3",
        &["packing", "/26 objects", " MiB (", ")"],
    );
    let remote2 = env.path("remote2");
    fs::create_dir_all(&remote2).unwrap();
    env.run(&[
        "remote",
        "add",
        "second",
        &format!("file://{}", remote2.display()),
    ])
    .ok();
    see_bar(
        env,
        &env.store,
        &format!("push {id} second"),
        "push-uploaded",
        "",
        &["uploading", "26/26 objects", " MiB ("],
    );
    // pull: the download, then the verification.
    for (host, seam, path, expect) in [
        (
            "p1",
            "remote-after-fetch",
            "",
            &["downloading", "/26 objects", " MiB ("][..],
        ),
        (
            "p2",
            "import-verified",
            "object-3",
            &["verifying", "/25 objects", " MiB ("][..],
        ),
    ] {
        let store = env.path(host);
        add(&store);
        see_bar(
            env,
            &store,
            &format!("pull origin/{id}"),
            seam,
            path,
            expect,
        );
        env.run(&["--store", &store.to_string_lossy(), "verify"])
            .ok();
    }
    // The same work in a pipe: no bar, no carriage return, no escape code.
    let piped = env.path("piped");
    add(&piped);
    let on = |args: &[&str]| {
        let mut all = vec!["--store", piped.to_str().unwrap()];
        all.extend(args);
        env.run(&all).ok()
    };
    let other = env.path("other-src");
    write(&other.join("x"), &bytes(99, 100_000));
    let other_id = {
        let r = on(&["snapshot", "--dir", &other.to_string_lossy()]);
        r.last_line()
    };
    let fresh = env.path("p3");
    add(&fresh);
    for r in [
        on(&["unpack", &file.to_string_lossy()]),
        on(&["push", &other_id]),
        env.run(&[
            "--store",
            fresh.to_str().unwrap(),
            "pull",
            &format!("origin/{id}"),
        ])
        .ok(),
    ] {
        let err = r.stderr();
        let bar = [
            "verifying",
            "packing",
            "uploading",
            "downloading",
            "left)",
            "estimating)",
        ];
        assert!(
            !err.contains('\r') && !err.contains('\x1b') && !bar.iter().any(|b| err.contains(b)),
            "{}",
            r.describe()
        );
    }
}

#[test]
fn an_interrupted_unpack_stops_cleanly_and_gc_says_what_it_freed_from_tmp() {
    let env = TestEnv::new();
    let (_, id) = big_snapshot(&env, 40);
    let file = pack(&env, &id, "big.zcpack");
    let target = env.path("target-store");
    let store_arg = target.to_string_lossy().into_owned();
    let unpack = ["--store", &store_arg, "unpack", file.to_str().unwrap()];
    // Into an existing store: one the unpack creates is staged beside its path and removed
    // whole when it stops (first_run.rs).
    let remote = format!("file://{}", env.path("remote").display());
    env.run(&["--store", &store_arg, "remote", "add", "origin", &remote])
        .ok();
    for signal in ["INT", "TERM"] {
        let cmd = format!("kill -{signal} $PPID");
        let r = env.run_with(
            &unpack,
            &[
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "import-verified"),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", "object-5"),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &cmd),
            ],
        );
        assert_eq!(r.code(), 130, "{signal}: {}", r.describe());
        let err = r.stderr();
        assert!(
            err.contains("interrupted") && err.contains("nothing was imported"),
            "{}",
            r.describe()
        );
        assert_eq!(err.lines().count(), 1, "one message: {}", r.describe());
        assert!(
            tmp_entries(&target).is_empty(),
            "{signal}: left in tmp/: {:?}",
            tmp_entries(&target)
        );
        let listed = env.run(&["--store", &store_arg, "--json", "list"]).ok();
        assert_eq!(
            listed.json(),
            serde_json::json!([]),
            "{signal}: nothing listed"
        );
    }
    // A kill (no cleanup possible) leaves the staging directory; gc removes it and says how
    // much it freed.
    let r = env.run_with(
        &unpack,
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "import-verified"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", "object-30"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -KILL $PPID"),
        ],
    );
    assert_ne!(r.code(), 0, "{}", r.describe());
    let left = tmp_entries(&target);
    assert!(
        left.iter().any(|e| e.starts_with("stage-")),
        "a killed unpack leaves its staging directory: {left:?}"
    );
    let gc = env.run(&["--store", &store_arg, "gc"]).ok();
    let out = gc.stdout();
    assert!(
        out.contains("removed 1 temporary entry (") && out.contains("MiB) from tmp/"),
        "{}",
        gc.describe()
    );
    assert!(tmp_entries(&target).is_empty());
    let v = env
        .run(&["--store", &store_arg, "--json", "gc"])
        .ok()
        .json();
    assert_eq!(v["temp_freed_bytes"].as_u64(), Some(0), "{v}");
    // And the unpack then completes.
    env.run(&unpack).ok();
    env.run(&["--store", &store_arg, "verify"]).ok();
}

#[test]
fn only_the_commands_that_add_to_a_store_create_one() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a"), b"a");
    let id = env.snapshot(&src);
    let file = pack(&env, &id, "a.zcpack");
    let missing = env.path("missing-store");
    let on = |args: &[&str]| {
        let mut all = vec!["--store", missing.to_str().unwrap()];
        all.extend(args);
        env.run(&all)
    };
    for args in [
        &["remote", "list"][..],
        &["--json", "remote", "list"],
        &["remote", "remove", "origin"],
        &["push", "abcdef01"],
        &["pull", "origin/abcdef01"],
        &["list", "--remote", "origin"],
    ] {
        on(args).fails(1, "no store at");
        assert!(!missing.exists(), "{args:?} created a store");
    }
    // The message names the rule, as the README states it.
    let r = on(&["remote", "list"]);
    assert!(
        r.stderr()
            .contains("`snapshot`, `export`, `unpack` or `remote add`"),
        "{}",
        r.describe()
    );
    // An existing store with no remotes says so (stdout stays empty for scripts).
    let empty = env.run(&["remote", "list"]).ok();
    assert_eq!(empty.stdout(), "");
    assert!(
        empty.stderr().contains("no remotes"),
        "{}",
        empty.describe()
    );
    // unpack and remote add create one.
    on(&["unpack", &file.to_string_lossy()]).ok();
    assert!(missing.join("STORE").exists());
    let other = env.path("other-store");
    env.run(&[
        "--store",
        &other.to_string_lossy(),
        "remote",
        "add",
        "origin",
        "file:///nowhere",
    ])
    .ok();
    assert!(other.join("STORE").exists());
}

/// The `remote origin: N requests, ...` line of `-v`.
fn traffic(r: &Run) -> bool {
    r.stderr()
        .lines()
        .any(|l| l.starts_with("remote origin: ") && l.contains(" requests, "))
}

#[test]
fn verbose_prints_remote_traffic_for_push_pull_list_and_daemon_mount() {
    let f = Fleet::file();
    let src = crate::remote::tree(&f.env.path("src"), 3);
    f.host("a", &[]);
    let id = f.snapshot("a", &src);
    let push = f.on("a", &["-v", "push", &id]).ok();
    assert!(traffic(&push), "{}", push.describe());
    f.host("b", &[]);
    let list = f.on("b", &["-v", "list", "--remote", "origin"]).ok();
    assert!(traffic(&list), "{}", list.describe());
    let pull = f.on("b", &["pull", "-v", &format!("origin/{id}")]).ok();
    assert!(traffic(&pull), "{}", pull.describe());
    // Without -v, none.
    let quiet = f.on("b", &["list", "--remote", "origin"]).ok();
    assert!(!traffic(&quiet), "{}", quiet.describe());
    if !crate::mount::fuse_available() {
        return;
    }
    let mnt = f.env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let mount = f
        .on(
            "b",
            &[
                "-v",
                "mount",
                &format!("origin/{id}"),
                &mnt.to_string_lossy(),
                "--daemon",
            ],
        )
        .ok();
    let mounted = crate::mount::mounted(&mnt);
    let _ = f.on("b", &["umount", &mnt.to_string_lossy()]);
    assert!(mounted, "{}", mount.describe());
    assert!(traffic(&mount), "{}", mount.describe());
    assert!(
        mount.stderr().contains("trees "),
        "the trees pack was read: {}",
        mount.describe()
    );
}

#[test]
fn forget_then_reindex_leaves_a_moved_name_where_it_went() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a"), b"one");
    let first = env
        .snapshot_with(&src, &["--name", "prod"])
        .ok()
        .last_line();
    write(&src.join("a"), b"two");
    let second = env
        .snapshot_with(&src, &["--name", "prod"])
        .ok()
        .last_line();
    assert_ne!(first, second);
    env.run(&["forget", "prod"]).ok();
    env.run(&["show", "prod"]).fails(1, "prod");
    env.run(&["reindex"]).ok();
    env.run(&["show", "prod"]).fails(1, "prod");
    let v = env.run(&["--json", "list"]).ok().json();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    assert_eq!(rows[0]["snapshot"].as_str(), Some(first.as_str()), "{v}");
    assert!(rows[0]["name"].is_null(), "the name stays off: {v}");
}

#[test]
fn list_labels_agent_alias_on_the_snapshot_it_resolves_to_only() {
    let f = Fleet::file();
    let env = &f.env;
    let install = Install::new(env);
    f.host("a", &[]);
    let snap = |note: &[u8]| {
        write(&install.ws().join("note.md"), note);
        f.on(
            "a",
            &[
                "snapshot",
                "researcher",
                "--install",
                &install.root.to_string_lossy(),
            ],
        )
        .ok()
        .last_line()
    };
    let ids = [snap(b"1"), snap(b"2"), snap(b"3")];
    // The newest (captured last) is what agent/researcher resolves to.
    let resolved = ids[2].clone();
    let shown = f.on("a", &["show", "agent/researcher"]).ok();
    assert!(shown.stdout().contains(&resolved), "{}", shown.describe());
    let labelled = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.contains("researcher (latest)"))
            .map(|l| l.to_string())
            .collect()
    };
    let list = f.on("a", &["list"]).ok();
    let rows = labelled(&list.stdout());
    assert_eq!(rows.len(), 1, "{}", list.describe());
    assert!(rows[0].starts_with(&resolved[..16]), "{}", list.describe());
    for id in &ids {
        f.on("a", &["push", id]).ok();
    }
    let list = f.on("a", &["list", "--remote", "origin"]).ok();
    let rows = labelled(&list.stdout());
    assert_eq!(rows.len(), 1, "{}", list.describe());
    assert!(rows[0].starts_with(&resolved[..16]), "{}", list.describe());
    // The same table as `list`: a header, then files and size on every row (issue 22, 19).
    let header = list.stdout().lines().next().unwrap_or_default().to_string();
    for column in [
        "SNAPSHOT", "CREATED", "NAME", "AGENT", "FILES", "SIZE", "SOURCE",
    ] {
        assert!(header.contains(column), "{}", list.describe());
    }
    assert_eq!(
        header,
        f.on("a", &["list"])
            .ok()
            .stdout()
            .lines()
            .next()
            .unwrap_or_default(),
        "list and list --remote share one table"
    );
}
