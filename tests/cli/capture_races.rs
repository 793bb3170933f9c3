//! Races at the capture seams, driven by the test hooks: an entry swapped between
//! classification and open (for a symlink: the capture fails closed; for another file or
//! directory: skipped and counted as replaced; for a hard link: skipped as a hard link), and
//! a root replaced while being opened. After a failed capture the catalog lists nothing new,
//! and the host bytes reached no file of the store (objects, catalog, tmp) and no output.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

use crate::util::*;

fn hooked_snapshot(env: &TestEnv, src: &Path, seam: &str, path: &str, cmd: &str) -> Run {
    env.run_with(
        &[
            OsStr::new("--json"),
            OsStr::new("snapshot"),
            OsStr::new("--dir"),
            src.as_os_str(),
        ],
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", path),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", cmd),
        ],
    )
}

fn setup(env: &TestEnv) -> std::path::PathBuf {
    let src = env.path("src");
    write(&src.join("a.md"), b"a");
    write(&src.join("victim.md"), b"innocent");
    write(&src.join("dir/inner.md"), b"inner");
    write(&env.path("host/secret.txt"), b"HOST SECRET");
    write(&env.path("other.md"), b"other file");
    src
}

fn list_len(env: &TestEnv) -> usize {
    env.snapshot_count()
}

#[test]
fn file_swapped_for_symlink_fails_closed() {
    let env = TestEnv::new();
    let src = setup(&env);
    let cmd = format!(
        "rm {0}/victim.md && ln -s {1} {0}/victim.md",
        src.display(),
        env.path("host/secret.txt").display()
    );
    let r = hooked_snapshot(&env, &src, "classify-open", "victim.md", &cmd)
        .fails(1, "victim.md was swapped for a symlink");
    assert_eq!(list_len(&env), 0);
    assert_nowhere(&env, &[&r], b"HOST SECRET", "file -> symlink");
}

#[test]
fn directory_swapped_for_symlink_fails_closed() {
    let env = TestEnv::new();
    let src = setup(&env);
    let cmd = format!(
        "mv {0}/dir {0}/dir.away && ln -s {1} {0}/dir",
        src.display(),
        env.path("host").display()
    );
    let r = hooked_snapshot(&env, &src, "classify-open", "dir", &cmd)
        .fails(1, "dir was swapped for a symlink");
    assert_eq!(list_len(&env), 0);
    assert_nowhere(&env, &[&r], b"HOST SECRET", "dir -> symlink");
}

#[test]
fn file_swapped_for_another_file_is_skipped_and_counted() {
    let env = TestEnv::new();
    let src = setup(&env);
    let cmd = format!(
        "mv {} {}/victim.md",
        env.path("other.md").display(),
        src.display()
    );
    let r = hooked_snapshot(&env, &src, "classify-open", "victim.md", &cmd).ok();
    let v = r.json();
    assert_eq!(v["report"]["trees"][0]["replaced"], 1, "{v}");
    assert_eq!(v["report"]["skipped"][0]["path"], "victim.md", "{v}");
    assert_nowhere(&env, &[&r], b"other file", "file -> other file");
    let id = v["snapshot"].as_str().unwrap();
    env.run(&["cat".to_string(), format!("{id}:victim.md")])
        .fails(1, "no such file");
}

#[test]
fn directory_swapped_for_another_directory_is_skipped_and_counted() {
    let env = TestEnv::new();
    let src = setup(&env);
    let cmd = format!("mv {0}/dir {0}/dir.away && mkdir {0}/dir", src.display());
    let v = hooked_snapshot(&env, &src, "classify-open", "dir", &cmd)
        .ok()
        .json();
    assert_eq!(v["report"]["trees"][0]["replaced"], 1, "{v}");
}

#[test]
fn file_swapped_for_a_hard_link_is_skipped_as_a_hard_link() {
    let env = TestEnv::new();
    let src = setup(&env);
    let cmd = format!(
        "rm {0}/victim.md && ln {1} {0}/victim.md",
        src.display(),
        env.path("host/secret.txt").display()
    );
    let r = hooked_snapshot(&env, &src, "classify-open", "victim.md", &cmd).ok();
    let v = r.json();
    assert_eq!(v["report"]["trees"][0]["hard_links"], 1, "{v}");
    assert_nowhere(&env, &[&r], b"HOST SECRET", "file -> hard link");
    let id = v["snapshot"].as_str().unwrap();
    let ls = env.run(&["ls", "-r", id]).ok().stdout();
    assert!(!ls.contains("victim.md"), "{ls}");
}

#[test]
fn root_swapped_for_a_symlink_while_opened_fails() {
    let env = TestEnv::new();
    let src = setup(&env);
    let cmd = format!(
        "mv {0} {0}.away && ln -s {1} {0}",
        src.display(),
        env.path("host").display()
    );
    let r = hooked_snapshot(&env, &src, "root-open", "src", &cmd)
        .fails(1, "was replaced while it was being opened");
    assert_eq!(list_len(&env), 0);
    assert_nowhere(&env, &[&r], b"HOST SECRET", "root -> symlink");
    fs::remove_file(&src).unwrap();
}

/// The walker does not wait at a directory's end for its files, so answers from workers
/// arrive in any order. What is reported must not depend on it: here `a/victim.md`'s worker
/// is held for a second, so `b/victim.md`'s swap is seen first, yet the capture names
/// `a/victim.md`, the first in walk order (as a walker that waited would have).
#[test]
fn the_failure_reported_is_the_first_in_walk_order_not_the_first_to_arrive() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a/victim.md"), b"a");
    write(&src.join("b/victim.md"), b"b");
    write(&env.path("host/secret.txt"), b"HOST SECRET");
    let cmd = format!(
        "case \"$HOOK_PATH\" in a/*) sleep 1;; esac; rm {0}/\"$HOOK_PATH\" && ln -s {1} {0}/\"$HOOK_PATH\"",
        src.display(),
        env.path("host/secret.txt").display()
    );
    let r = hooked_snapshot(&env, &src, "classify-open", "victim.md", &cmd)
        .fails(1, "a/victim.md was swapped for a symlink");
    assert!(!r.stderr().contains("b/victim.md"), "{}", r.describe());
    assert_eq!(list_len(&env), 0);
    assert_nowhere(&env, &[&r], b"HOST SECRET", "two swaps");
}

/// Skips are reported in walk order even when a worker's skip (a file replaced while it was
/// opened, in `a/`) comes back after the walker has moved on and skipped a symlink in `b/`.
#[test]
fn skips_are_reported_in_walk_order_whatever_order_the_workers_answer_in() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a/x.md"), b"x");
    write(&src.join("b/keep.md"), b"keep");
    std::os::unix::fs::symlink("keep.md", src.join("b/link")).unwrap();
    write(&env.path("other.md"), b"other file");
    let cmd = format!(
        "sleep 1; mv {} {}/a/x.md",
        env.path("other.md").display(),
        src.display()
    );
    let v = hooked_snapshot(&env, &src, "classify-open", "a/x.md", &cmd)
        .ok()
        .json();
    let skipped: Vec<(&str, &str)> = v["report"]["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        skipped,
        [("a/x.md", "replaced"), ("b/link", "symlink")],
        "{v}"
    );
}
