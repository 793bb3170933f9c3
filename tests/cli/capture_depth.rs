//! A tree deeper than the store's depth limit (`limits::MAX_DEPTH`, 256 directories below the
//! snapshot root) is refused by the capture itself, naming the path and the limit, before the
//! deepest directory is listed: no snapshot is recorded, no bundle appears and the deepest
//! file's bytes reach no object. A tree exactly at the limit is captured and published.
//! (Before: the capture allowed 1024 levels and publish refused the snapshot afterwards.)

use std::fs;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::limits::MAX_DEPTH;

use crate::export::{export, Install};
use crate::util::*;

const LEAF: &[u8] = b"the deepest leaf DEPTH-MARKER-77\n";

/// `levels` nested `d` directories under `base`, with a file at the bottom.
fn chain(base: &Path, levels: usize) {
    let deepest: PathBuf =
        std::iter::repeat_n("d", levels).fold(base.to_path_buf(), |p, c| p.join(c));
    fs::create_dir_all(&deepest).unwrap();
    write(&deepest.join("leaf"), LEAF);
}

#[test]
fn snapshot_dir_over_the_depth_limit_is_refused_at_capture() {
    let limit = usize::try_from(MAX_DEPTH).unwrap();
    let env = TestEnv::new();
    let at = env.path("at");
    chain(&at, limit);
    let id = env.snapshot(&at);
    env.run(&["ls", "-r", &id]).ok();

    let env = TestEnv::new();
    let over = env.path("over");
    chain(&over, limit + 1);
    let r = env
        .snapshot_with(&over, &[])
        .fails(1, &format!("more than {limit} directories"));
    let deepest = ["d"; 257].join("/");
    assert!(r.stderr().contains(&deepest), "{}", r.describe());
    assert_eq!(env.snapshot_count(), 0, "{}", r.describe());
    assert_nowhere(&env, &[&r], b"DEPTH-MARKER-77", "refused deep capture");
}

#[test]
fn export_over_the_depth_limit_is_refused_at_capture() {
    let limit = usize::try_from(MAX_DEPTH).unwrap();
    // `workspace` is itself one level below the bundle root.
    let env = TestEnv::new();
    let install = Install::new(&env);
    chain(&install.ws().join("deep"), limit - 2);
    let out = env.path("bundle");
    export(&env, &install, &out, &[], &[]).ok();
    assert!(out.join("workspace/deep").is_dir());

    let env = TestEnv::new();
    let install = Install::new(&env);
    chain(&install.ws().join("deep"), limit - 1);
    let out = env.path("bundle");
    let r =
        export(&env, &install, &out, &[], &[]).fails(1, &format!("more than {limit} directories"));
    assert!(
        r.stderr()
            .contains(&format!("workspace/deep/{}", ["d"; 255].join("/"))),
        "{}",
        r.describe()
    );
    assert!(!out.exists(), "a bundle appeared: {}", r.describe());
    assert_eq!(env.snapshot_count(), 0, "{}", r.describe());
    assert_nowhere(&env, &[&r], b"DEPTH-MARKER-77", "refused deep export");
}
