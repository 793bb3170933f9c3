//! Pins: every kind of write fails with EROFS and changes nothing; the mount carries the
//! safe options (ro, nosuid, nodev, noexec, default_permissions) and names itself; an
//! exec-file cannot be executed from the mount.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use zeroclaw_bundle_mount::{MountOptions, XATTR_BLAKE3};

use crate::sample;
use crate::util::{errno_of, mount_options, walk, Env};

#[test]
fn every_write_fails_with_erofs_and_changes_nothing() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    let Some(mut m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    // Read opens first: each reaches the daemon (and is released), the flush only once (it
    // is answered ENOSYS, and the kernel stops sending flushes).
    let readme = expected[&b"README.md".to_vec()].data.clone().unwrap();
    for _ in 0..20 {
        assert_eq!(fs::read(m.path.join("README.md")).unwrap(), readme);
    }
    assert_eq!(
        settled_file_requests(&mut m, 41),
        41,
        "20 opens, 20 releases and one flush"
    );
    for (what, errno) in write_attempts(&m.path) {
        assert_eq!(errno, libc::EROFS, "{what}: got errno {errno}");
    }
    // Nothing changed.
    assert_eq!(walk(&m.path), expected);
}

/// The second line: with the kernel's `ro` option left off, the daemon itself refuses every
/// write, including write opens after a read-only open of the same file (a daemon answering
/// opens ENOSYS would never see them).
#[test]
fn the_daemon_refuses_writes_without_the_kernel_ro_option() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    let opts = MountOptions {
        kernel_ro: false,
        ..MountOptions::default()
    };
    let Some(mut m) = env.mount(root, &opts) else {
        return;
    };
    let (per_mount, _, _) = mount_options(&m.path);
    assert!(
        per_mount.split(',').any(|o| o == "rw"),
        "the test mount must be rw to test the daemon: {per_mount}"
    );
    // Read opens first: they must keep reaching the daemon afterwards.
    for _ in 0..3 {
        assert_eq!(
            fs::read(m.path.join("README.md")).unwrap(),
            expected[&b"README.md".to_vec()].data.clone().unwrap()
        );
    }
    // Each read open was answered (and released): 3 opens, 3 releases, one flush (ENOSYS).
    assert_eq!(settled_file_requests(&mut m, 7), 7);
    for (what, errno) in write_attempts(&m.path) {
        assert_eq!(errno, libc::EROFS, "{what} without ro: got errno {errno}");
    }
    assert_eq!(walk(&m.path), expected);
}

/// The daemon's count of file requests once it reaches `want` or 5 s pass: the kernel sends a
/// RELEASE after `close` returns.
fn settled_file_requests(m: &mut crate::util::Mounted, want: u64) -> u64 {
    let start = std::time::Instant::now();
    while m.handle().file_requests() < want && start.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    m.handle().file_requests()
}

/// Root can remount the mount `rw` (FUSE allows it): the daemon still refuses every write,
/// write opens included, after read opens and a flush were answered. A daemon that answered
/// opens ENOSYS (`no_open`) let a write open through here, and a shared writable `mmap` then
/// changed what every reader of the mount saw.
#[test]
fn the_daemon_refuses_writes_after_a_remount_rw() {
    let env = Env::new();
    let (root, expected) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let readme = expected[&b"README.md".to_vec()].data.clone().unwrap();
    for _ in 0..3 {
        assert_eq!(fs::read(m.path.join("README.md")).unwrap(), readme);
    }
    rustix::mount::mount_remount(&m.path, rustix::mount::MountFlags::empty(), "")
        .expect("root remounts the FUSE mount rw");
    let (per_mount, _, _) = mount_options(&m.path);
    assert!(
        per_mount.split(',').any(|o| o == "rw"),
        "the remount must have made the mount rw: {per_mount}"
    );
    for (what, errno) in write_attempts(&m.path) {
        assert_eq!(
            errno,
            libc::EROFS,
            "{what} after remount rw: got errno {errno}"
        );
    }
    assert_eq!(fs::read(m.path.join("README.md")).unwrap(), readme);
    assert_eq!(walk(&m.path), expected);
}

/// Tries every kind of write under the mounted `root`; returns what each failed with.
fn write_attempts(root: &Path) -> Vec<(&'static str, i32)> {
    let p = |rel: &str| root.join(rel);
    let readme = p("README.md");
    vec![
        ("create", errno_of("create", fs::File::create(p("new.txt")))),
        (
            "create_new",
            errno_of(
                "create_new",
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(p("n2")),
            ),
        ),
        (
            "open for write",
            errno_of(
                "open for write",
                OpenOptions::new().write(true).open(&readme),
            ),
        ),
        (
            "open for append",
            errno_of("append", OpenOptions::new().append(true).open(&readme)),
        ),
        (
            "open read-write",
            errno_of(
                "read-write",
                OpenOptions::new().read(true).write(true).open(&readme),
            ),
        ),
        (
            "truncate",
            errno_of(
                "truncate",
                OpenOptions::new().write(true).truncate(true).open(&readme),
            ),
        ),
        (
            "mkdir",
            errno_of("mkdir", fs::create_dir(p("workspace/new"))),
        ),
        ("unlink", errno_of("unlink", fs::remove_file(&readme))),
        (
            "rmdir",
            errno_of("rmdir", fs::remove_dir(p("workspace/empty-dir"))),
        ),
        (
            "rename",
            errno_of("rename", fs::rename(&readme, p("workspace/moved.md"))),
        ),
        (
            "rename in place",
            errno_of("rename in place", fs::rename(&readme, p("README2.md"))),
        ),
        ("link", errno_of("link", fs::hard_link(&readme, p("hard")))),
        (
            "symlink",
            errno_of("symlink", std::os::unix::fs::symlink("README.md", p("sym"))),
        ),
        (
            "chmod",
            errno_of(
                "chmod",
                fs::set_permissions(&readme, fs::Permissions::from_mode(0o644)),
            ),
        ),
        (
            "chown",
            errno_of("chown", std::os::unix::fs::chown(&readme, Some(1), Some(1))),
        ),
        (
            "utimes",
            errno_of(
                "utimes",
                fs::File::open(&readme)
                    .unwrap()
                    .set_modified(std::time::SystemTime::now()),
            ),
        ),
        (
            "setxattr",
            errno_of(
                "setxattr",
                rustix::fs::setxattr(&readme, "user.test", b"x", rustix::fs::XattrFlags::empty())
                    .map_err(std::io::Error::from),
            ),
        ),
        (
            "overwrite xattr",
            errno_of(
                "overwrite xattr",
                rustix::fs::setxattr(&readme, XATTR_BLAKE3, b"0", rustix::fs::XattrFlags::empty())
                    .map_err(std::io::Error::from),
            ),
        ),
        (
            "removexattr",
            errno_of(
                "removexattr",
                rustix::fs::removexattr(&readme, XATTR_BLAKE3).map_err(std::io::Error::from),
            ),
        ),
    ]
}

#[test]
fn mount_options_are_safe_and_named() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let opts = MountOptions {
        label: "abc123 def".into(),
        ..MountOptions::default()
    };
    let Some(m) = env.mount(root, &opts) else {
        return;
    };
    let (per_mount, fstype, source_and_super) = mount_options(&m.path);
    let per_mount: Vec<&str> = per_mount.split(',').collect();
    for want in ["ro", "nosuid", "nodev", "noexec", "noatime"] {
        assert!(
            per_mount.contains(&want),
            "{want} missing from {per_mount:?}"
        );
    }
    assert_eq!(fstype, "fuse.zeroclaw-bundle");
    assert!(
        source_and_super.starts_with("zeroclaw-bundle:abc123_def "),
        "{source_and_super}"
    );
    assert!(
        source_and_super.contains("default_permissions"),
        "{source_and_super}"
    );
    assert!(
        !source_and_super.contains("allow_other"),
        "{source_and_super}"
    );
}

#[test]
fn exec_files_cannot_be_executed_from_the_mount() {
    let env = Env::new();
    let (root, _) = env.build(sample());
    let Some(m) = env.mount(root, &MountOptions::default()) else {
        return;
    };
    let script = m.path.join("run.sh");
    let mode = fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "exec-files show as executable");
    let errno = errno_of("exec run.sh", Command::new(&script).status());
    assert_eq!(errno, libc::EACCES, "noexec refuses execve");
    let errno = errno_of(
        "exec skills/tool",
        Command::new(m.path.join("skills/tool")).status(),
    );
    assert_eq!(errno, libc::EACCES);
}
