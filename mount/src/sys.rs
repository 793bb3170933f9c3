//! The only module of this crate that talks to the kernel directly (rustix, `/proc`, the
//! `fusermount3` helper): mount table lookups, unmounting, the user ids the view reports, and
//! whether this process holds the capability FUSE passthrough needs.
//!
//! Mount points are compared as absolute paths in this process's mount namespace, the form
//! `/proc/self/mountinfo` prints (see proc_pid_mountinfo(5): field 5, octal-escaped).

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// The mount source (fsname) and FUSE subtype of every mount this crate makes.
pub const FSNAME: &str = "zeroclaw-bundle";
use std::process::Command;

/// One line of `/proc/self/mountinfo`, reduced to what we use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// The mount point, unescaped.
    pub(crate) mount_point: PathBuf,
    /// Filesystem type (`fuse`, `fuse.zeroclaw-bundle`, `ext4`, ...).
    pub(crate) fstype: String,
    /// Mount source (for FUSE: the `fsname`).
    pub(crate) source: String,
}

impl MountEntry {
    /// True for a mount this crate made: a FUSE mount whose source is our fsname.
    pub(crate) fn is_ours(&self) -> bool {
        (self.fstype == "fuse" || self.fstype.starts_with("fuse."))
            && (self.source == FSNAME || self.source.starts_with(&format!("{}:", FSNAME)))
    }
}

/// Undoes mountinfo's octal escapes (`\040` for space, `\011`, `\012`, `\134`).
fn unescape(b: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = (u32::from(oct[0] - b'0') << 6)
                    | (u32::from(oct[1] - b'0') << 3)
                    | u32::from(oct[2] - b'0');
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Parses mountinfo (one mount per line). Bytes, not text: the kernel escapes only space,
/// tab, newline and backslash, so a mount point anywhere on the machine may hold any other
/// byte (`\xff`), and reading the table as UTF-8 failed every mount and unmount.
pub(crate) fn parse_mountinfo(table: &[u8]) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in table.split(|b| *b == b'\n') {
        let fields: Vec<&[u8]> = line.split(|b| *b == b' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == b"-") else {
            continue;
        };
        if fields.len() < 5 || fields.len() < dash + 3 {
            continue;
        }
        out.push(MountEntry {
            mount_point: unescape(fields[4]),
            fstype: String::from_utf8_lossy(fields[dash + 1]).into_owned(),
            source: String::from_utf8_lossy(fields[dash + 2]).into_owned(),
        });
    }
    out
}

/// The mount table of this process's namespace.
pub(crate) fn mounts() -> io::Result<Vec<MountEntry>> {
    Ok(parse_mountinfo(&fs::read("/proc/self/mountinfo")?))
}

/// The topmost mount on `path` (an absolute path), if any. Later lines are mounted on top of
/// earlier ones.
pub(crate) fn mount_at(path: &Path) -> io::Result<Option<MountEntry>> {
    Ok(mounts()?.into_iter().rev().find(|m| m.mount_point == path))
}

/// `path` made absolute without touching the final component (which may be a stale FUSE
/// mount where any stat fails with ENOTCONN): the parent is canonicalized, the name appended.
pub(crate) fn absolute(path: &Path) -> io::Result<PathBuf> {
    let name = path.file_name();
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    match (name, parent) {
        (Some(name), Some(parent)) => Ok(fs::canonicalize(parent)?.join(name)),
        (Some(name), None) => Ok(std::env::current_dir()?.join(name)),
        _ => fs::canonicalize(path),
    }
}

/// True when `path` is a FUSE mount whose server is gone. statfs(2) always goes to the
/// server (a stat may be answered from the kernel's attribute cache, which for our mounts
/// never expires), and a dead connection answers ENOTCONN.
pub(crate) fn is_stale(path: &Path) -> bool {
    matches!(rustix::fs::statfs(path), Err(rustix::io::Errno::NOTCONN))
}

/// An exclusive `flock` on directory `path`, held until the returned descriptor is dropped.
/// Waits up to [`LOCK_WAIT`] for another holder (a mount of the same directory holds it for
/// a few milliseconds); past that, or when `path` cannot be opened as a directory (missing,
/// not one, a stale mount), `None`: the caller goes on without it and its check says what
/// is wrong, so a lock somebody else keeps on the directory never hangs a mount. The lock is
/// on the directory itself, not on what is mounted on it later.
pub(crate) fn lock_directory(path: &Path) -> Option<rustix::fd::OwnedFd> {
    use rustix::fs::{FlockOperation, Mode, OFlags};
    let dir = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let start = std::time::Instant::now();
    loop {
        match rustix::fs::flock(&dir, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Some(dir),
            Err(rustix::io::Errno::WOULDBLOCK) if start.elapsed() < LOCK_WAIT => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            Err(_) => return None,
        }
    }
}

/// How long [`lock_directory`] waits for another holder of the lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The real uid and gid of this process (what the mounted files report as owner).
pub(crate) fn user_ids() -> (u32, u32) {
    (
        rustix::process::getuid().as_raw(),
        rustix::process::getgid().as_raw(),
    )
}

/// True when running with euid 0 (mount(2) and umount(2) work directly).
pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Why this process may not register FUSE backing files (passthrough), when that can be
/// told before trying: the kernel's ioctl requires `CAP_SYS_ADMIN` in the initial user
/// namespace. Read from `/proc/self/status` (`CapEff`, proc_pid_status(5)) and
/// `/proc/self/uid_map` (user_namespaces(7): the initial namespace maps all of 0..2^32-1 onto
/// itself). `None` when neither rules it out, or cannot be read: the kernel then decides at
/// the first registration.
pub(crate) fn passthrough_refusal() -> Option<&'static str> {
    const CAP_SYS_ADMIN: u32 = 21;
    let caps = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        });
    if caps.is_some_and(|caps| caps & (1 << CAP_SYS_ADMIN) == 0) {
        return Some(
            "the mount server lacks CAP_SYS_ADMIN, which the kernel requires to pass reads \
             through (mount as root)",
        );
    }
    let uid_map = fs::read_to_string("/proc/self/uid_map").ok()?;
    let fields: Vec<&str> = uid_map.split_whitespace().collect();
    if fields != ["0", "0", "4294967295"] {
        return Some(
            "the mount server runs in a user namespace, and the kernel requires CAP_SYS_ADMIN \
             in the initial one to pass reads through",
        );
    }
    None
}

/// How an unmount attempt ended.
pub(crate) enum UnmountOutcome {
    /// The mount is gone.
    Done,
    /// EBUSY: something still uses it.
    Busy,
    /// Any other failure, with its text.
    Failed(String),
}

/// Unmounts `path`: umount2(2) when we may, else `fusermount3 -u` (the setuid helper). With
/// `lazy`, MNT_DETACH / `fusermount3 -u -z`: the mount leaves the namespace now and the
/// kernel releases it once the last open file is closed.
pub(crate) fn unmount(path: &Path, lazy: bool) -> UnmountOutcome {
    let flags = if lazy {
        rustix::mount::UnmountFlags::DETACH
    } else {
        rustix::mount::UnmountFlags::empty()
    };
    match rustix::mount::unmount(path, flags) {
        Ok(()) => return UnmountOutcome::Done,
        Err(rustix::io::Errno::BUSY) => return UnmountOutcome::Busy,
        // Non-root users get EPERM: the setuid helper checks that the mount is theirs.
        Err(rustix::io::Errno::PERM) => {}
        Err(e) => return UnmountOutcome::Failed(io::Error::from(e).to_string()),
    }
    let Some(helper) = fusermount() else {
        return UnmountOutcome::Failed(
            "umount(2) needs root and neither fusermount3 nor fusermount is installed".into(),
        );
    };
    let mut cmd = Command::new(&helper);
    cmd.arg(if lazy { "-uz" } else { "-u" }).arg("--").arg(path);
    match cmd.output() {
        Ok(out) if out.status.success() => UnmountOutcome::Done,
        Ok(out) => {
            let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if msg.contains("busy") {
                UnmountOutcome::Busy
            } else {
                UnmountOutcome::Failed(format!("{} -u: {msg}", helper.display()))
            }
        }
        Err(e) => UnmountOutcome::Failed(format!("could not run {}: {e}", helper.display())),
    }
}

/// The FUSE mount helper on `PATH` (`fusermount3`, else `fusermount`).
pub(crate) fn fusermount() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["fusermount3", "fusermount"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Checks that `/dev/fuse` can be opened for reading and writing (what mounting needs).
pub(crate) fn probe_dev_fuse() -> Result<(), String> {
    const DEV: &str = "/dev/fuse";
    match fs::OpenOptions::new().read(true).write(true).open(DEV) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(format!(
            "{DEV} does not exist: load the module (`modprobe fuse`), or in a container pass \
             `--device /dev/fuse` (and `--cap-add SYS_ADMIN`)"
        )),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(format!(
            "{DEV}: permission denied: this user may not use FUSE (check the device's \
             permissions, or the container's device policy)"
        )),
        Err(e) => Err(format!("could not open {DEV}: {e}")),
    }
}

/// Bytes of a path, for comparisons in tests.
#[cfg(test)]
fn bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

/// True when open flags `flags` (as the kernel passed them) ask to truncate the file.
pub(crate) fn truncates(flags: i32) -> bool {
    // The flag bits are the kernel's; reinterpreting the sign bit is what `open(2)` does too.
    rustix::fs::OFlags::from_bits_retain(flags as u32).contains(rustix::fs::OFlags::TRUNC)
}

/// True when `e` is ENOTCONN: the FUSE server behind the path has died.
pub(crate) fn is_not_connected(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::NOTCONN.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_with_escapes_and_optional_fields() {
        let text = b"22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    40 22 0:50 / /tmp/a\\040b\\134c rw,nosuid,nodev,noexec,relatime shared:9 master:2 - fuse zeroclaw-bundle:abc ro,user_id=0\n\
                    garbage line\n\
                    41 22 0:51 / /tmp/\xff\xfe rw - tmpfs none rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 3);
        // A mount point that is not UTF-8 (the kernel does not escape such bytes).
        assert_eq!(bytes(&m[2].mount_point), b"/tmp/\xff\xfe");
        assert_eq!(m[0].mount_point, Path::new("/"));
        assert_eq!(m[0].fstype, "ext4");
        assert!(!m[0].is_ours());
        assert_eq!(bytes(&m[1].mount_point), b"/tmp/a b\\c");
        assert_eq!(m[1].fstype, "fuse");
        assert_eq!(m[1].source, "zeroclaw-bundle:abc");
        assert!(m[1].is_ours());
    }

    #[test]
    fn absolute_keeps_the_last_component_unresolved() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("not-there");
        let abs = absolute(&p).unwrap();
        assert_eq!(abs.file_name().unwrap(), "not-there");
        assert!(abs.is_absolute());
    }
}
