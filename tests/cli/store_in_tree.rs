//! A store inside the captured tree (break-it pass, issue 8 / SPEC safety): the store's root
//! directory is never entered by a capture, wherever it sits in the tree and however the store
//! path is spelled (directly or through a symlink). It is reported as skipped (reason
//! `store`, counted in the tallies), and no byte of the store, in particular the raw config
//! it holds as an object, reaches the bundle or the snapshot.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use crate::export::{export, Install, SECRETS};
use crate::util::*;

/// The store paths to try: the nested store spelled directly, and through a symlink outside
/// the tree to the directory holding it (the store itself refuses to be a symlink). The same
/// store: the first spelling creates it.
fn spellings(env: &TestEnv, nested: &Path) -> Vec<(PathBuf, &'static str)> {
    let link = env.path("parent-link");
    fs::create_dir_all(nested.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(nested.parent().unwrap(), &link).unwrap();
    vec![
        (nested.to_path_buf(), "direct"),
        (link.join(nested.file_name().unwrap()), "symlink"),
    ]
}

#[test]
fn export_never_carries_a_store_inside_the_workspace() {
    let env0 = TestEnv::new();
    let install = Install::new(&env0);
    let nested = install.ws().join("deep/.zcb");
    for (store, how) in spellings(&env0, &nested) {
        let env = TestEnv {
            dir: tempfile::tempdir_in(env0.dir.path()).unwrap(),
            store: store.clone(),
        };
        // The store holds the install's raw config.toml as an object first.
        env.run(&[
            OsStr::new("snapshot"),
            OsStr::new("--dir"),
            install.root.as_os_str(),
        ])
        .ok();
        let out = env.path("bundle");
        let v = export(&env, &install, &out, &[], &[]).ok().json();
        let ws = v["tallies"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["label"] == "workspace")
            .unwrap_or_else(|| panic!("{how}: no workspace tally in {v}"));
        assert_eq!(ws["store"].as_u64(), Some(1), "{how}: {v}");
        let skipped = v.to_string();
        assert!(
            skipped.contains("workspace/deep/.zcb") && skipped.contains("\"store\""),
            "{how}: the store is not named as skipped: {v}"
        );
        assert!(!out.join("workspace/deep/.zcb").exists(), "{how}");
        for (path, bytes) in files_under(&out) {
            for secret in SECRETS {
                assert!(!contains(&bytes, secret.as_bytes()), "{how}: {path}");
            }
            assert!(!path.contains(".zcb"), "{how}: {path} carried");
        }
        // The human report names it too.
        let human = env
            .run(&[
                OsStr::new("export"),
                OsStr::new("researcher"),
                OsStr::new("--install"),
                install.root.as_os_str(),
                OsStr::new("--out"),
                env.path("bundle2").as_os_str(),
            ])
            .ok();
        assert!(
            human.describe().contains("the store itself"),
            "{how}: {}",
            human.describe()
        );
        env.run(&["verify"]).ok();
    }
}

#[test]
fn snapshot_dir_never_carries_a_store_inside_it() {
    let env0 = TestEnv::new();
    let tree = env0.path("tree");
    write(&tree.join("a.txt"), b"alpha\n");
    write(&tree.join("sub/b.txt"), b"beta\n");
    let nested = tree.join("sub/inner/.zcb");
    let secret_dir = env0.path("secret");
    write(&secret_dir.join("config.toml"), SECRETS[0].as_bytes());
    for (store, how) in spellings(&env0, &nested) {
        let env = TestEnv {
            dir: tempfile::tempdir_in(env0.dir.path()).unwrap(),
            store,
        };
        env.snapshot(&secret_dir);
        let v = env.snapshot_json(&tree);
        let id = v["snapshot"].as_str().unwrap().to_string();
        assert_eq!(v["files"].as_u64(), Some(2), "{how}: {v}");
        assert_eq!(
            v["report"]["trees"][0]["store"].as_u64(),
            Some(1),
            "{how}: {v}"
        );
        assert_eq!(
            v["report"]["skipped"][0]["path"], "sub/inner/.zcb",
            "{how}: {v}"
        );
        assert_eq!(v["report"]["skipped"][0]["reason"], "store", "{how}: {v}");
        let human = env.snapshot_with(&tree, &[]).ok();
        assert!(
            human.describe().contains("the store itself"),
            "{how}: {}",
            human.describe()
        );
        let listed = env.run(&["ls", "-r", &id]).ok().stdout();
        assert!(!listed.contains(".zcb"), "{how}: {listed}");
        let out = env.path("co");
        env.run(&[
            OsStr::new("checkout"),
            OsStr::new(&id),
            OsStr::new("--out"),
            out.as_os_str(),
        ])
        .ok();
        let files = files_under(&out);
        assert_eq!(files.len(), 2, "{how}: {files:?}");
        for (path, bytes) in files {
            assert!(!contains(&bytes, SECRETS[0].as_bytes()), "{how}: {path}");
        }
        env.run(&["verify"]).ok();
    }
}
