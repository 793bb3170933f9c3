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
