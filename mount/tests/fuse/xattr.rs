//! Pins: `user.zeroclaw.blake3` on every file and directory is its object id (which is the
//! blake3 of the object file, as `b3sum` prints it); the xattr size-probe protocol; other
//! names are ENODATA; listxattr lists exactly our attribute.

use std::process::Command;

use zeroclaw_bundle_mount::{MountOptions, XATTR_BLAKE3};
use zeroclaw_bundle_store::ObjectId;

use crate::sample;
use crate::util::{errno_of, xattr_id, Env};

/// The blake3 of a file as the independent `b3sum` prints it. Required (`scripts/setup.sh`
/// installs it): the cross-check never falls back to the product's own hash.
fn b3sum(path: &std::path::Path) -> String {
    let out = Command::new("b3sum")
        .arg("--no-names")
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("b3sum is required for this check (run scripts/setup.sh): {e}"));
    assert!(out.status.success(), "b3sum {path:?} failed: {out:?}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

#[test]
fn blake3_xattr_is_the_object_id() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    assert_eq!(xattr_id(&m.path), root.to_hex(), "root is the root tree id");
    for rel in [
        "README.md",
        "skills/big.bin",
        "empty",
        "workspace",
        "workspace/deep",
    ] {
        let id = xattr_id(&m.path.join(rel));
        assert_eq!(id, expected[rel.as_bytes()].id, "{rel}");
        let object = env
            .store
            .objects()
            .path_of(&id.parse::<ObjectId>().expect("hex id"));
        assert_eq!(b3sum(&object), id, "{rel}: b3sum of the object file");
    }
}

#[test]
fn xattr_size_probe_erange_enodata_and_list() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let f = m.path.join("README.md");
    let io = |e: rustix::io::Errno| std::io::Error::from(e);
    assert_eq!(
        rustix::fs::getxattr_query(&f, XATTR_BLAKE3).unwrap(),
        64,
        "size probe"
    );
    let mut small = [0u8; 10];
    let errno = errno_of(
        "short buffer",
        rustix::fs::getxattr(&f, XATTR_BLAKE3, &mut small[..]).map_err(io),
    );
    assert_eq!(errno, libc::ERANGE);
    let mut buf = [0u8; 64];
    assert_eq!(
        rustix::fs::getxattr(&f, XATTR_BLAKE3, &mut buf[..]).unwrap(),
        64,
        "exact fit"
    );
    let errno = errno_of(
        "other name",
        rustix::fs::getxattr(&f, "user.other", &mut buf[..]).map_err(io),
    );
    assert_eq!(errno, libc::ENODATA);
    let want = format!("{XATTR_BLAKE3}\0");
    for p in [f.clone(), m.path.join("workspace")] {
        assert_eq!(rustix::fs::listxattr_query(&p).unwrap(), want.len());
        let mut list = [0u8; 64];
        let n = rustix::fs::listxattr(&p, &mut list[..]).unwrap();
        assert_eq!(&list[..n], want.as_bytes());
        let mut tiny = [0u8; 4];
        let errno = errno_of(
            "short list buffer",
            rustix::fs::listxattr(&p, &mut tiny[..]).map_err(io),
        );
        assert_eq!(errno, libc::ERANGE);
    }
}
