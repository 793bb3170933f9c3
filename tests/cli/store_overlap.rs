//! `--out` into the store (issue 8, item 4; issue 18, item 9 for `pack`): a destination that is
//! the store, contains it, or lies inside it, spelled directly, through a symlink or through
//! `..`, is refused by `checkout`, `export` and `pack` (with or without `--force`) before
//! anything is written, and the store still verifies and lists every snapshot afterwards.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use crate::export::{export, Install};
use crate::util::*;

/// Every entry under `dir` with its size, for a before/after comparison of the store.
fn inventory(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for (k, v) in read_tree(dir) {
        let size = match v {
            Node::File { content, .. } => content.len() as u64,
            _ => 0,
        };
        out.push((String::from_utf8_lossy(&k).into_owned(), size));
    }
    out
}

#[track_caller]
fn assert_store_intact(env: &TestEnv, ids: &[String], before: &[(String, u64)], what: &str) {
    let objects_before: Vec<_> = before
        .iter()
        .filter(|(k, _)| k.starts_with("objects/"))
        .collect();
    let after = inventory(&env.store);
    let objects_after: Vec<_> = after
        .iter()
        .filter(|(k, _)| k.starts_with("objects/"))
        .collect();
    assert_eq!(objects_before, objects_after, "{what}: objects changed");
    assert!(env.store.join("STORE").is_file(), "{what}: marker gone");
    env.run(&["verify"]).ok();
    let listed = env.run(&["--json", "list"]).ok().json();
    let listed: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["snapshot"].as_str().unwrap().to_string())
        .collect();
    for id in ids {
        assert!(listed.contains(id), "{what}: {id} no longer listed");
        env.run(&["ls", "-r", id]).ok();
    }
}

fn hostile_destinations(env: &TestEnv) -> Vec<(PathBuf, bool, &'static str)> {
    let s = &env.store;
    let link = env.path("store-link");
    if !link.exists() {
        std::os::unix::fs::symlink(s, &link).unwrap();
    }
    let objects = fs::read_dir(s.join("objects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .expect("an object fan-out directory");
    vec![
        (s.clone(), false, "is or contains the store"),
        (s.clone(), true, "is or contains the store"),
        (s.join("objects"), true, "is inside the store"),
        (s.join("catalog"), true, "is inside the store"),
        (s.join("leases/x"), false, "is inside the store"),
        (
            env.dir.path().to_path_buf(),
            true,
            "is or contains the store",
        ),
        (s.join("tmp/x"), false, "is inside the store"),
        (objects, true, "is inside the store"),
        (s.join("objects/zz-new"), false, "is inside the store"),
        // Other spellings: through a symlink to the store, and through `..`.
        (link.clone(), true, "is or contains the store"),
        (link.join("objects"), true, "is inside the store"),
        (link.join("tmp/new"), false, "is inside the store"),
        (s.join("objects/../catalog"), true, "is inside the store"),
        (s.join("objects/.."), true, "is or contains the store"),
    ]
}

#[test]
fn checkout_into_the_store_is_refused() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"alpha\n");
    write(&src.join("d/b.txt"), b"beta\n");
    let id = env.snapshot(&src);
    let before = inventory(&env.store);
    for (dest, force, needle) in hostile_destinations(&env) {
        let mut args = vec![
            OsStr::new("checkout"),
            OsStr::new(&id),
            OsStr::new("--out"),
            dest.as_os_str(),
        ];
        if force {
            args.push(OsStr::new("--force"));
        }
        let what = format!("checkout --out {} force={force}", dest.display());
        env.run(&args).fails(1, needle);
        assert_store_intact(&env, std::slice::from_ref(&id), &before, &what);
        assert!(
            !env.store.join("tmp/x").exists() && !env.store.join("leases/x").exists(),
            "{what}: something was created"
        );
    }
    // A destination beside the store (a prefix of its name, not an ancestor) is fine.
    let beside = PathBuf::from(format!("{}-out", env.store.display()));
    env.run(&[
        OsStr::new("checkout"),
        OsStr::new(&id),
        OsStr::new("--out"),
        beside.as_os_str(),
    ])
    .ok();
    assert_same_tree(&src, &beside);
}

#[test]
fn export_into_the_store_is_refused_before_capture() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    // A first export creates the store and a snapshot to protect.
    let first = export(&env, &install, &env.path("bundle"), &[], &[]).ok();
    let id = first.json()["snapshot"].as_str().unwrap().to_string();
    let before = inventory(&env.store);
    let snapshots = env.snapshot_count();
    for (dest, force, needle) in hostile_destinations(&env) {
        let extra: &[&str] = if force { &["--force"] } else { &[] };
        let what = format!("export --out {} force={force}", dest.display());
        export(&env, &install, &dest, extra, &[]).fails(1, needle);
        assert_store_intact(&env, std::slice::from_ref(&id), &before, &what);
        assert_eq!(env.snapshot_count(), snapshots, "{what}: captured anyway");
    }
}

/// Unmounts a bind mount on drop.
struct Bind(PathBuf);

impl Drop for Bind {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// A bind mount of the store has other paths but the same (dev, ino): the refusal compares
/// identities, so `--out` through it is refused too. Needs root to bind-mount (fails in CI
/// without it).
#[test]
fn destination_through_a_bind_mount_of_the_store_is_refused() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"alpha\n");
    let id = env.snapshot(&src);
    let before = inventory(&env.store);
    let bind = env.path("bind");
    fs::create_dir_all(&bind).unwrap();
    let mounted = std::process::Command::new("mount")
        .arg("--bind")
        .arg(&env.store)
        .arg(&bind)
        .output();
    if !matches!(&mounted, Ok(o) if o.status.success()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "cannot bind-mount here (needs root), and CI must run this test: {mounted:?}"
        );
        eprintln!("SKIPPED: cannot bind-mount here (needs root): {mounted:?}");
        return;
    }
    let _guard = Bind(bind.clone());
    for (dest, needle) in [
        (bind.join("objects"), "is inside the store"),
        (bind.join("tmp/x"), "is inside the store"),
        (bind.clone(), "is or contains the store"),
    ] {
        let what = format!("checkout --out {} --force", dest.display());
        env.run(&[
            OsStr::new("checkout"),
            OsStr::new(&id),
            OsStr::new("--out"),
            dest.as_os_str(),
            OsStr::new("--force"),
        ])
        .fails(1, needle);
        assert_store_intact(&env, std::slice::from_ref(&id), &before, &what);
    }
}

/// Issue 18, item 9: `pack --out` into the store (over a store object, into its catalog, its
/// tmp/, through a symlink or `..`) is refused like `checkout`'s, and the store is untouched.
#[test]
fn pack_into_the_store_is_refused() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"alpha\n");
    let id = env.snapshot(&src);
    let before = inventory(&env.store);
    let s = &env.store;
    let link = env.path("store-link");
    std::os::unix::fs::symlink(s, &link).unwrap();
    let object = before
        .iter()
        .find(|(k, _)| k.starts_with("objects/") && k.len() > 20)
        .map(|(k, _)| s.join(k))
        .expect("an object file");
    let inside = "is inside the store";
    let cases = [
        (object.clone(), inside),
        (s.join("catalog/db"), inside),
        (s.join("tmp/p.zcpack"), inside),
        (s.join("STORE"), inside),
        (link.join("objects/p.zcpack"), inside),
        (s.join("objects/../trees/p.zcpack"), inside),
        (s.clone(), "is or contains the store"),
        (env.dir.path().to_path_buf(), "is or contains the store"),
    ];
    for (dest, needle) in cases {
        let what = format!("pack --out {} --force", dest.display());
        env.run(&[
            OsStr::new("pack"),
            OsStr::new(&id),
            OsStr::new("--out"),
            dest.as_os_str(),
            OsStr::new("--force"),
        ])
        .fails(1, needle);
        assert_store_intact(&env, std::slice::from_ref(&id), &before, &what);
    }
    // Beside the store is fine.
    let beside = PathBuf::from(format!("{}-p.zcpack", env.store.display()));
    env.run(&[
        OsStr::new("pack"),
        OsStr::new(&id),
        OsStr::new("--out"),
        beside.as_os_str(),
    ])
    .ok();
}
