//! `diff`: the real binary between snapshots, subtrees and directories. Pins: each change kind
//! at depth with its letter; `SNAP:PATH`; a checkout diffs equal to its snapshot; JSON lines
//! stream and end with a summary; `-p` is capped and names binary files; the semantic section
//! marks a new stdio MCP server as a grant and a new provider key as a required secret without
//! printing any secret; diffing a directory adds nothing to the store; exit codes 0/1/2/3.

use std::fs;
use std::path::Path;

use crate::export::Install;
use crate::util::{chmod, copy_tree, read_tree, write, TestEnv};

fn tree(env: &TestEnv, name: &str, files: &[(&str, &[u8])]) -> std::path::PathBuf {
    let root = env.path(name);
    fs::create_dir_all(&root).unwrap();
    for (path, content) in files {
        write(&root.join(path), content);
    }
    root
}

const BASE: &[(&str, &[u8])] = &[
    ("a/b/c/deep.md", b"deep\n"),
    ("a/b/c/tool.sh", b"#!/bin/sh\n"),
    ("a/x.md", b"x\n"),
    ("big/1.md", b"one\n"),
    ("top.md", b"top\n"),
];

#[test]
fn every_change_kind_at_depth_with_exit_codes() {
    let env = TestEnv::new();
    let a = tree(&env, "a", BASE);
    chmod(&a.join("a/b/c/tool.sh"), 0o755);
    let sa = env.snapshot(&a);
    let b = tree(
        &env,
        "b",
        &[
            ("a/b/c/deep.md", b"deeP\n"),
            ("a/b/c/tool.sh", b"#!/bin/sh\n"),
            ("a/b/c/new.md", b"new\n"),
            ("a/y.md", b"x\n"),
            ("big/1.md", b"one\n"),
            ("top.md/inside.md", b"now a dir\n"),
        ],
    );
    let sb = env.snapshot(&b);
    let r = env.run(&["diff", &sa, &sb]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert_eq!(
        r.stdout(),
        "M\ta/b/c/deep.md\nX\ta/b/c/tool.sh\nT\ttop.md\nA\ta/b/c/new.md\nR\ta/x.md -> a/y.md\nA\ttop.md/inside.md\n"
    );
    // Equal: exit 0, nothing printed.
    let r = env.run(&["diff", &sa, &sa]);
    assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
    // Error: exit 2 (diff(1)), naming the side.
    let r = env.run(&["diff", &sa, "deadbeefdeadbeef"]);
    assert_eq!(r.code(), 2, "{}", r.describe());
    assert!(r.stderr().contains("side B"), "{}", r.describe());
    // --quiet prints nothing, keeps the code.
    let r = env.run(&["diff", "--quiet", &sa, &sb]);
    assert_eq!((r.code(), r.stdout().as_str()), (1, ""), "{}", r.describe());
    // --stat: one row per file and a summary.
    let r = env.run(&["diff", "--stat", &sa, &sb]);
    assert!(r.stdout().contains("a/b/c/deep.md"), "{}", r.describe());
    assert!(
        r.stdout()
            .contains("6 files changed: 2 added, 1 modified, 0 deleted, 1 renamed, 1 kind, 1 mode"),
        "{}",
        r.describe()
    );
}

#[test]
fn subtree_and_directory_sides() {
    let env = TestEnv::new();
    let a = tree(&env, "a", BASE);
    let sa = env.snapshot(&a);
    // SNAP:PATH limits a side to a subtree.
    let b = tree(
        &env,
        "b",
        &[("c/deep.md", b"deep\n"), ("c/tool.sh", b"#!/bin/sh\n")],
    );
    let sb = env.snapshot(&b);
    let r = env.run(&["diff", &format!("{sa}:a/b"), &sb]);
    assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
    let r = env.run(&[
        "diff",
        &format!("{sa}:a/b/c/deep.md"),
        &format!("{sb}:c/deep.md"),
    ]);
    assert_eq!(r.code(), 0, "{}", r.describe());
    // A checkout of a snapshot diffs equal to it, both ways, and diffing a directory adds no
    // snapshot and no object to the store.
    let out = env.path("out");
    env.run(&["checkout", &sa, "--out", &out.to_string_lossy()])
        .ok();
    let before_snaps = env.snapshot_count();
    let objects = || read_tree(&env.path("store/objects")).len();
    let before_objects = objects();
    fs::write(out.join("extra.md"), b"only in the directory\n").unwrap();
    let r = env.run(&["diff", &sa, &out.to_string_lossy()]);
    assert_eq!(
        (r.code(), r.stdout().as_str()),
        (1, "A\textra.md\n"),
        "{}",
        r.describe()
    );
    fs::remove_file(out.join("extra.md")).unwrap();
    // A symlink planted in the directory is not followed, and not silently ignored either.
    std::os::unix::fs::symlink("/etc/passwd", out.join("planted")).unwrap();
    let r = env.run(&["diff", &sa, &out.to_string_lossy()]);
    assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
    assert!(r.stderr().contains("planted (symlink)"), "{}", r.describe());
    fs::remove_file(out.join("planted")).unwrap();
    for (x, y) in [
        (sa.clone(), out.to_string_lossy().into_owned()),
        (out.to_string_lossy().into_owned(), sa.clone()),
    ] {
        let r = env.run(&["diff", &x, &y]);
        assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
    }
    assert_eq!(env.snapshot_count(), before_snaps);
    assert_eq!(objects(), before_objects, "a directory diff wrote objects");
}

#[test]
fn json_lines_and_capped_content() {
    let env = TestEnv::new();
    let big_a = "line\n".repeat(60_000);
    let big_b = format!("{big_a}one more\n");
    let a = tree(
        &env,
        "a",
        &[
            ("notes.md", b"one\ntwo\nthree\n"),
            ("blob.bin", b"\0\x01\x02"),
            ("big.txt", big_a.as_bytes()),
        ],
    );
    let b = tree(
        &env,
        "b",
        &[
            ("notes.md", b"one\n2\nthree\n"),
            ("blob.bin", b"\0\x01\x03"),
            ("big.txt", big_b.as_bytes()),
        ],
    );
    let (sa, sb) = (env.snapshot(&a), env.snapshot(&b));
    let r = env.run(&["--json", "diff", &sa, &sb]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    let lines: Vec<serde_json::Value> = r
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON document"))
        .collect();
    assert_eq!(lines.len(), 4, "{}", r.stdout());
    assert!(lines[..3]
        .iter()
        .all(|v| v["type"] == "file" && v["status"] == "M"));
    assert_eq!(lines[3]["type"], "summary");
    assert_eq!(lines[3]["modified"], 3);
    for side in [sa.as_str(), b.to_str().unwrap()] {
        let r = env.run(&["diff", "-p", side, &sb]);
        if side == sa {
            let text = r.stdout();
            assert!(text.contains("--- a/notes.md\n+++ b/notes.md\n"), "{text}");
            assert!(text.contains("-two\n+2\n"), "{text}");
            assert!(text.contains("Binary files differ: blob.bin"), "{text}");
            assert!(
                text.contains("Not shown: big.txt is over 256 KiB"),
                "{text}"
            );
            assert!(!text.contains("one more"), "{text}");
        } else {
            assert_eq!((r.code(), r.stdout().as_str()), (0, ""), "{}", r.describe());
        }
    }
}

/// The sample agent exported twice: once as is, once with a new stdio MCP server granted and a
/// new provider key.
#[test]
fn semantic_diff_marks_new_grants_and_never_prints_secrets() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let export = |out: &Path| {
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
    };
    let before = export(&env.path("before"));
    let config = fs::read_to_string(install.root.join("config.toml")).unwrap();
    let config = config.replace("servers = [\"github\"]", "servers = [\"github\", \"shell\"]")
        + "\n[[mcp.servers]]\nname = \"shell\"\ncommand = \"bash\"\nargs = [\"-c\", \"serve\"]\n\n[providers.models.openai.extra]\napi_key = \"sk-NEW-PROVIDER-SECRET\"\nmodel = \"gpt\"\n";
    let config = config.replace(
        "model_provider = \"anthropic.main\"",
        "model_provider = \"anthropic.main\"\nclassifier_provider = \"openai.extra\"",
    );
    fs::write(install.root.join("config.toml"), config).unwrap();
    let after = export(&env.path("after"));
    let before_dir = env.path("before").to_string_lossy().into_owned();
    for (x, y) in [
        (before.as_str(), after.as_str()),
        (before_dir.as_str(), after.as_str()),
    ] {
        let r = env.run(&["diff", x, y]);
        assert_eq!(r.code(), 1, "{}", r.describe());
        let text = r.stdout();
        assert!(
            text.contains("! manifest risk flag process_spawn at mcp.servers.shell.command: added: starts a local process on the target host: bash -c serve [new capability grant]"),
            "{text}"
        );
        assert!(
            text.contains(
                "  manifest required secret providers.models.openai.extra.api_key: added"
            ),
            "{text}"
        );
        assert!(text.contains("[new MCP server `shell`]"), "{text}");
        assert!(
            text.contains("config key providers.models.openai.extra.api_key: added: (scrubbed)"),
            "{text}"
        );
        assert!(text.contains("M\tconfig.toml"), "{text}");
        assert!(!text.contains("sk-NEW-PROVIDER-SECRET"), "{text}");
        let r = env.run(&["--json", "diff", x, y]);
        assert!(!r.stdout().contains("sk-NEW-PROVIDER-SECRET"));
        assert!(r
            .stdout()
            .lines()
            .any(|l| l.contains("\"grant\":true") && l.contains("mcp.servers.shell.command")));
        let r = env.run(&["diff", "--quiet", "--exit-on-new-grants", x, y]);
        assert_eq!((r.code(), r.stdout().as_str()), (3, ""), "{}", r.describe());
    }
    // Going back removes the grant: different, but no new grant.
    let r = env.run(&["diff", "--quiet", "--exit-on-new-grants", &after, &before]);
    assert_eq!(r.code(), 1, "{}", r.describe());

    // A bundle whose config.toml was edited after export (its manifest untouched): the grants
    // come from the config, so the edit cannot hide them, and the mismatch is said.
    let edited = env.path("edited");
    copy_tree(&env.path("before"), &edited);
    let config = fs::read_to_string(edited.join("config.toml")).unwrap();
    // ZeroClaw's planner writes a profile's default level implicitly, so the edit states it.
    let hand_edited = config
        .replace("command = \"npx\"", "command = \"bash\"")
        .replace("level = \"supervised\"\n", "")
        .replace(
            "[risk_profiles.guarded]\n",
            "[risk_profiles.guarded]\nlevel = \"full\"\n",
        );
    assert_eq!(hand_edited.matches("bash").count(), 1, "{config}");
    assert!(hand_edited.contains("level = \"full\""), "{config}");
    fs::write(edited.join("config.toml"), hand_edited).unwrap();
    let r = env.run(&[
        "diff",
        "--exit-on-new-grants",
        &before_dir,
        &edited.to_string_lossy(),
    ]);
    assert_eq!(r.code(), 3, "{}", r.describe());
    let text = r.stdout();
    for line in [
        "! manifest unlisted risk flag full_autonomy at risk_profiles.guarded.level",
        "! manifest risk flag full_autonomy at risk_profiles.guarded.level: added",
        "! manifest risk flag process_spawn at mcp.servers.github.command: starts a local process on the target host: npx -y server-github -> starts a local process on the target host: bash -y server-github",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }

    // `-p` prints no secret value of a TOML file (a value pasted into a received bundle's
    // config, or a whole install against its bundle) and no raw escape sequence of any file.
    let leaky = env.path("leaky");
    copy_tree(&env.path("before"), &leaky);
    let config = fs::read_to_string(leaky.join("config.toml")).unwrap();
    let pasted = config.replacen("api_key = \"\"", "api_key = \"sk-PASTED-LEAK\"", 1);
    assert_ne!(pasted, config);
    fs::write(leaky.join("config.toml"), pasted).unwrap();
    write(
        &leaky.join("workspace/esc.txt"),
        b"a\x1b[2J\x1b]0;title\x07b\n",
    );
    let r = env.run(&["diff", "-p", &before_dir, &leaky.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    let text = r.stdout();
    assert!(!text.contains("PASTED-LEAK"), "{text}");
    assert!(
        text.contains("+api_key = \"(not shown: a secret field)\""),
        "{text}"
    );
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
    assert!(text.contains("+a\\x1b[2J\\x1b]0;title\\x07b"), "{text}");
    let r = env.run(&["diff", "-p", &before_dir, &install.root.to_string_lossy()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    for secret in crate::export::SECRETS {
        assert!(!r.stdout().contains(secret), "{secret} in {}", r.stdout());
    }

    // A crafted config value (escape sequences that would clear the reviewer's screen and
    // fake a line) reaches neither the export report nor the diff raw: it is escaped.
    let config = fs::read_to_string(install.root.join("config.toml")).unwrap();
    let crafted = config.replace(
        "command = \"bash\"",
        "command = \"bash\\u001b[2J\\u001b[31mFAKE\"",
    );
    assert_ne!(crafted, config);
    fs::write(install.root.join("config.toml"), crafted).unwrap();
    let out = env.path("crafted").to_string_lossy().into_owned();
    let report = env
        .run(&[
            "export",
            "researcher",
            "--install",
            &install.root.to_string_lossy(),
            "--out",
            &out,
        ])
        .ok()
        .stdout();
    assert!(!report.contains('\x1b'), "{report}");
    assert!(report.contains("bash\\x1b[2J\\x1b[31mFAKE"), "{report}");
    let r = env.run(&["diff", &after, &out]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    let text = r.stdout();
    assert!(!text.contains('\x1b'), "{text}");
    assert!(
        text.contains(
            "config key mcp.servers.shell.command: \"bash\" -> \"bash\\x1b[2J\\x1b[31mFAKE\""
        ),
        "{text}"
    );
}

/// A directory diffed against a snapshot named by its full id never opens the catalog (sled's
/// open costs about as much as the whole stat walk): the catalog stays byte for byte as it
/// was, while the directory's stat cache (a file of its own) still makes the second diff a
/// stat walk, and a change, or a damaged cache, is still seen.
#[test]
fn directory_diff_leaves_the_catalog_alone_and_reuses_its_stat_cache() {
    let env = TestEnv::new();
    let a = tree(&env, "a", BASE);
    let sa = env.snapshot(&a);
    let a_s = a.to_string_lossy().into_owned();
    // Past the racy window (2 s): files this young are always rehashed.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let catalog = || read_tree(&env.path("store/catalog"));
    let before = catalog();
    let cache_files = || -> Vec<_> {
        fs::read_dir(env.path("store/dircache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    // The snapshot's own cache (its directories' trees, its files being too young).
    let snapshot_caches = cache_files();
    let diff = |want_code: i32, want_out: &str, want_note: &str| {
        let r = env.run(&["-v", "diff", &sa, &a_s]);
        assert_eq!(
            (r.code(), r.stdout().as_str()),
            (want_code, want_out),
            "{}",
            r.describe()
        );
        assert!(r.stderr().contains(want_note), "{}", r.describe());
    };
    // A top-level file is always read (the agent section compares bundle files' bytes).
    diff(0, "", "5 file(s) hashed, 0 from its stat cache");
    diff(0, "", "1 file(s) hashed, 4 from its stat cache");
    assert!(before == catalog(), "a directory diff changed the catalog");
    // Same size, new bytes: seen (the file is racy now, and its times changed anyway).
    write(&a.join("a/x.md"), b"X\n");
    diff(1, "M\ta/x.md\n", "2 file(s) hashed, 3 from its stat cache");
    write(&a.join("a/x.md"), b"x\n");
    // A damaged cache file reads as empty: everything is hashed again, nothing is missed.
    let caches: Vec<_> = cache_files()
        .into_iter()
        .filter(|p| !snapshot_caches.contains(p))
        .collect();
    assert_eq!(caches.len(), 1, "the diff's cache: {caches:?}");
    let bytes = fs::read(&caches[0]).unwrap();
    fs::write(&caches[0], &bytes[..bytes.len() / 2]).unwrap();
    diff(0, "", "5 file(s) hashed, 0 from its stat cache");
    assert!(before == catalog(), "a directory diff changed the catalog");
}
