//! Pins: a corrupt blob, a missing blob and a corrupt tree answer EIO (and are reported
//! through `MountHandle::faults`) while the rest of the snapshot still reads; unknown names
//! are ENOENT; an unreadable root tree refuses the mount.

use std::fs;
use std::sync::Arc;

use zeroclaw_bundle_mount::{mount, MountError, MountOptions};
use zeroclaw_bundle_store::ObjectId;

use crate::sample;
use crate::util::{corrupt, errno_of, skip_or_fail, Env};

#[test]
fn damaged_objects_answer_eio_and_the_rest_still_reads() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    corrupt(&env, &expected[&b"README.md"[..]].id);
    corrupt(&env, &expected[&b"workspace/deep"[..]].id);
    let notes = expected[&b"workspace/notes.md"[..]]
        .id
        .parse::<ObjectId>()
        .unwrap();
    fs::remove_file(env.store.objects().path_of(&notes)).unwrap();
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let p = |rel: &str| m.path.join(rel);
    for _ in 0..2 {
        // Twice: the second open answers from the cached verdict.
        assert_eq!(
            errno_of("read corrupt", fs::read(p("README.md"))),
            libc::EIO
        );
    }
    // Same blob under another name: same verdict.
    assert_eq!(
        errno_of("read corrupt twin", fs::read(p("skills/same-as-readme.md"))),
        libc::EIO
    );
    assert_eq!(
        errno_of("read missing", fs::read(p("workspace/notes.md"))),
        libc::EIO
    );
    assert_eq!(
        errno_of("list corrupt tree", fs::read_dir(p("workspace/deep"))),
        libc::EIO
    );
    // Metadata comes from the parent's (intact) tree, so stat still works.
    assert!(fs::metadata(p("workspace/deep")).unwrap().is_dir());
    assert_eq!(fs::read(p("run.sh")).unwrap(), b"#!/bin/sh\necho hi\n");
    assert_eq!(fs::read(p("skills/big.bin")).unwrap().len(), crate::BIG);
    let faults = m.handle().faults();
    let text = faults.join("\n");
    assert!(text.contains("corrupt"), "{text}");
    assert!(text.contains("missing"), "{text}");
}

#[test]
fn unknown_names_are_enoent() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    for _ in 0..2 {
        // Twice: the second answer comes from the kernel's negative entry cache.
        assert_eq!(
            errno_of("stat unknown", fs::metadata(m.path.join("nope"))),
            libc::ENOENT
        );
        assert_eq!(
            errno_of(
                "open unknown",
                fs::File::open(m.path.join("workspace/nope.md"))
            ),
            libc::ENOENT
        );
    }
    assert_eq!(
        errno_of("below a file", fs::metadata(m.path.join("README.md/x"))),
        libc::ENOTDIR
    );
    // The names next to the unknown ones are unaffected.
    assert!(fs::metadata(m.path.join("workspace/notes.md")).is_ok());
}

#[test]
fn unreadable_root_refuses_the_mount() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    fs::remove_file(env.store.objects().path_of(&root)).unwrap();
    let mnt = tempfile::tempdir().unwrap();
    match mount(
        Arc::new(env.store.objects().reader()),
        root,
        mnt.path(),
        &MountOptions::default(),
    ) {
        Err(MountError::Root { root: r, .. }) => assert_eq!(r, root),
        Err(e @ MountError::FuseUnavailable { .. }) => skip_or_fail(&e.to_string()),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("mounted a snapshot whose root tree is missing"),
    }
    assert!(!crate::util::is_mounted(mnt.path()));
}
