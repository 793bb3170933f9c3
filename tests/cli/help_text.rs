//! What the help, the version and the bundle's own comments must say (issue 22 items 17 and
//! 18): `diff --help` and `mount --help` name packs and remote refs, `push --help` the `~/.aws`
//! files, every usage line shows the global options, `--version` the git commit, README's
//! synopsis every verb and flag an operator reaches for; and one story about secret scanning
//! in the manifest header, the `config.toml` header and the export report.

use std::ffi::OsStr;
use std::fs;
use std::process::Command;

use crate::export::Install;
use crate::util::*;

fn help(env: &TestEnv, args: &[&str]) -> String {
    env.run(args).ok().stdout()
}

#[track_caller]
fn has(text: &str, needles: &[&str], what: &str) {
    for n in needles {
        assert!(text.contains(n), "{what} lacks {n:?}:\n{text}");
    }
}

#[test]
fn help_names_packs_remote_refs_aws_files_and_the_global_options() {
    let env = TestEnv::new();
    let diff = help(&env, &["diff", "--help"]);
    has(
        &diff,
        &[
            "PACK",
            "NAME/SNAPSHOT[:PATH]",
            "remote ref",
            ".zcpack",
            "origin/",
        ],
        "diff --help",
    );
    let mount = help(&env, &["mount", "--help"]);
    has(
        &mount,
        &[
            "PACK",
            "NAME/SNAPSHOT",
            "remote ref",
            ".zcpack",
            "origin/",
            "--allow-other",
            "--no-passthrough",
        ],
        "mount --help",
    );
    let push = help(&env, &["push", "--help"]);
    has(
        &push,
        &["~/.aws/credentials", "~/.aws/config", "AWS_PROFILE"],
        "push --help",
    );
    let globals = "[--store DIR] [--json] [-q|-v]";
    has(
        &help(&env, &["--help"]),
        &[&format!("Usage: zeroclaw-bundle {globals} <COMMAND>")],
        "--help",
    );
    for (args, usage) in [
        (&["diff", "--help"][..], "diff [OPTIONS] <A> <B>"),
        (
            &["export", "--help"][..],
            "export [OPTIONS] --out <DIR> <ALIAS>",
        ),
        (
            &["remote", "add", "--help"][..],
            "remote add [OPTIONS] <NAME> <URL>",
        ),
        (&["remote", "--help"][..], "remote <COMMAND>"),
    ] {
        let text = help(&env, args);
        has(
            &text,
            &[&format!("Usage: zeroclaw-bundle {globals} {usage}")],
            &args.join(" "),
        );
    }
    // A usage error shows the same line.
    env.run(&["diff"])
        .fails(2, &format!("zeroclaw-bundle {globals} diff"));
}

#[test]
fn version_names_the_git_commit() {
    let env = TestEnv::new();
    let v = env.run(&["--version"]).ok().stdout();
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(head) => assert_eq!(
            v.trim(),
            format!(
                "zeroclaw-bundle {} (commit {head})",
                env!("CARGO_PKG_VERSION")
            )
        ),
        None => assert!(
            v.contains("(commit ") || v.contains("(unknown commit)"),
            "{v}"
        ),
    }
}

#[test]
fn readme_synopsis_has_every_verb_and_flag() {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("zeroclaw-bundle [--store DIR]")
        .expect("synopsis");
    let synopsis = &readme[start..start + readme[start..].find("```").unwrap()];
    has(
        synopsis,
        &[
            "remote remove NAME",
            "pack <SNAPSHOT> --out FILE|- [--force]",
            "[--exclude GLOB]",
            "[--allow-other] [--no-passthrough]",
            "remote forget",
            "remote gc",
            "list [--remote NAME]",
        ],
        "README synopsis",
    );
}

/// The paragraph about secrets, as the bundle's comments carry it, without the `# ` marks.
fn story(comment: &str) -> String {
    let start = comment.find("# Secrets:").expect("the secrets paragraph");
    comment[start..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn the_bundle_tells_one_story_about_secret_scanning() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out");
    let r = env
        .run(&[
            OsStr::new("export"),
            OsStr::new("researcher"),
            OsStr::new("--install"),
            install.root.as_os_str(),
            OsStr::new("--out"),
            out.as_os_str(),
        ])
        .ok();
    let manifest = fs::read_to_string(out.join("zeroclaw-agent.toml")).unwrap();
    let config = fs::read_to_string(out.join("config.toml")).unwrap();
    let (m, c) = (story(&manifest), story(&config));
    assert_eq!(m, c, "the two headers tell different stories");
    has(
        &m,
        &[
            "schema marks secret",
            "key named like a credential",
            "travel as written",
            "heuristic, not a guarantee",
        ],
        "the secrets paragraph",
    );
    // The report says the same words (its line wrapping aside).
    let report = r.stdout().split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        report.contains(&m),
        "the report tells another story:\n{report}\n---\n{m}"
    );
    for text in [&manifest, &config, &r.stdout()] {
        assert!(
            !text.contains("None of it is"),
            "an old claim survives:\n{text}"
        );
    }
}
