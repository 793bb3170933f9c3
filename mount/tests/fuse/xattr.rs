//! Pins: `user.zeroclaw.blake3` on every file and directory is its object id (which is the
//! blake3 of the object file, as `b3sum` prints it); the xattr size-probe protocol; other
//! `user.` names are ENODATA and every other namespace EOPNOTSUPP (so `ls -l` stops asking
//! per entry); listxattr lists exactly our attribute; `ls -l` lists names, sizes and modes
//! exactly, without a complaint.

use std::process::Command;

use zeroclaw_bundle_mount::{MountOptions, XATTR_BLAKE3};
use zeroclaw_bundle_store::ObjectId;

use crate::sample;
use crate::util::{dir, errno_of, exec, file, xattr_id, Env};

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

/// Namespaces other than `user.` are not supported, as on a kernel filesystem with only a
/// `user.` handler: EOPNOTSUPP, which `ls -l` caches per device (ENODATA would make it ask
/// again for each entry, a round trip each).
#[test]
fn other_namespaces_are_unsupported() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let io = |e: rustix::io::Errno| std::io::Error::from(e);
    for rel in ["README.md", "workspace", ""] {
        let p = m.path.join(rel);
        for name in [
            "security.selinux",
            "system.posix_acl_access",
            "system.posix_acl_default",
            "trusted.overlay.opaque",
        ] {
            let mut buf = [0u8; 256];
            let errno = errno_of(
                &format!("getxattr {rel:?} {name}"),
                rustix::fs::lgetxattr(&p, name, &mut buf[..]).map_err(io),
            );
            assert_eq!(errno, libc::EOPNOTSUPP, "{rel:?} {name}");
        }
        // Our own namespace still answers: the id, or ENODATA for another name.
        assert_eq!(xattr_id(&p).len(), 64, "{rel:?}");
        let mut buf = [0u8; 64];
        let errno = errno_of(
            "user.other",
            rustix::fs::getxattr(&p, "user.other", &mut buf[..]).map_err(io),
        );
        assert_eq!(errno, libc::ENODATA, "{rel:?}");
    }
}

/// `ls -l` over a mounted directory of many entries prints exactly what was stored: every
/// name, its size and mode, in order, with nothing on stderr (EOPNOTSUPP for ACLs and
/// security labels is "none", not an error, to ls).
#[test]
fn ls_long_listing_is_exact() {
    let env = Env::new();
    let mut entries = Vec::new();
    for i in 0..600 {
        let name = format!("entry-{i:04}");
        entries.push(match i % 10 {
            0 => exec(&name, "#!/bin/sh\n".repeat(i % 7 + 1)),
            1 => dir(&name, vec![file("inner", "x".repeat(i))]),
            _ => file(&name, "y".repeat(i * 3)),
        });
    }
    let (root, _) = env.build(vec![dir("many", entries)]);
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    for pass in ["fresh", "cached"] {
        let out = Command::new("ls")
            .args(["-l", "--time-style=+", "-n"])
            .arg(m.path.join("many"))
            .env("LC_ALL", "C")
            .output()
            .expect("run ls");
        assert!(out.status.success(), "{pass}: ls -l failed: {out:?}");
        assert!(out.stderr.is_empty(), "{pass}: ls -l complained: {out:?}");
        let text = String::from_utf8(out.stdout).expect("utf-8");
        let mut lines = text.lines();
        assert!(
            lines.next().is_some_and(|l| l.starts_with("total ")),
            "{pass}: {text}"
        );
        let mut got = 0;
        for (i, line) in lines.enumerate() {
            // mode links uid gid size name (the empty time style leaves a double space)
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 6, "{pass}: {line:?}");
            let (mode, size) = match i % 10 {
                0 => ("-rwxr-xr-x", 10 * (i % 7 + 1)),
                1 => ("drwxr-xr-x", i),
                _ => ("-rw-r--r--", i * 3),
            };
            assert_eq!(f[0], mode, "{pass}: {line:?}");
            assert_eq!(f[4], size.to_string(), "{pass}: {line:?}");
            assert_eq!(f[5], format!("entry-{i:04}"), "{pass}: {line:?}");
            got += 1;
        }
        assert_eq!(got, 600, "{pass}: {text}");
    }
}
