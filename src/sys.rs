//! The only file of this crate that calls rustix: directory fds, no-follow opens and stats,
//! `renameat2` (NOREPLACE, EXCHANGE), `mkdirat`, `unlinkat`, fsync. Safe wrappers only
//! (`unsafe` is forbidden workspace-wide). Everything takes a directory fd plus a single name
//! component, so callers never re-resolve a path by name; the exceptions take a path the
//! operator gave: anchor directories, and [`read_small_file`], the one reader of config-like
//! files (regular files only, checked on the descriptor, and capped).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, CWD};

/// What a directory entry is, from a no-follow stat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Symbolic link.
    Symlink,
    /// Socket, FIFO, character or block device.
    Special,
}

/// The parts of `struct stat` this crate uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Device id.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Type.
    pub kind: FileKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub perm: u32,
    /// Link count.
    pub nlink: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
    /// Status change time, ns since the epoch.
    pub ctime_ns: i64,
}

impl Stat {
    /// True when `other` is the same object of the same type (dev, ino, kind).
    pub fn same_object(&self, other: &Stat) -> bool {
        self.dev == other.dev && self.ino == other.ino && self.kind == other.kind
    }

    /// True when any execute bit is set.
    pub fn is_executable(&self) -> bool {
        self.perm & 0o111 != 0
    }
}

fn convert(st: rustix::fs::Stat) -> Stat {
    let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
    let kind = match ft {
        rustix::fs::FileType::RegularFile => FileKind::File,
        rustix::fs::FileType::Directory => FileKind::Dir,
        rustix::fs::FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Special,
    };
    Stat {
        dev: st.st_dev,
        ino: st.st_ino,
        kind,
        perm: st.st_mode & 0o7777,
        nlink: st.st_nlink,
        size: u64::try_from(st.st_size).unwrap_or(0),
        mtime_ns: st.st_mtime.saturating_mul(1_000_000_000) + st.st_mtime_nsec as i64,
        ctime_ns: st.st_ctime.saturating_mul(1_000_000_000) + st.st_ctime_nsec as i64,
    }
}

/// Opens a trusted anchor directory by path, following symlinks (the operator's own layout
/// above an install root or a `--dir` argument's parent).
pub fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens directory `name` inside `dir`, refusing a symlink (ELOOP / ENOTDIR otherwise).
pub fn open_dir_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens file `name` inside `dir` for reading, refusing a symlink. O_NONBLOCK keeps a FIFO
/// swapped in after classification from blocking the open; it does not affect regular files.
pub fn open_file_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// What a file of type `ft` is, for a message (`a FIFO`, `a directory`, ...).
fn kind_name(ft: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType as T;
    match ft {
        T::RegularFile => "a regular file",
        T::Directory => "a directory",
        T::Symlink => "a symbolic link",
        T::Fifo => "a FIFO",
        T::Socket => "a socket",
        T::CharacterDevice => "a character device",
        T::BlockDevice => "a block device",
        _ => "a special file",
    }
}

/// `IsADirectory` for a directory (callers that treat one as absent match it), `InvalidInput`
/// for anything else.
fn not_regular(ft: rustix::fs::FileType) -> io::Error {
    let kind = if ft == rustix::fs::FileType::Directory {
        io::ErrorKind::IsADirectory
    } else {
        io::ErrorKind::InvalidInput
    };
    io::Error::new(kind, format!("it is {}, not a regular file", kind_name(ft)))
}

/// Opens `path` for reading when it is a regular file (through symlinks: a config kept in a
/// dotfiles repository is the operator's own layout), and says what it is otherwise (`it is
/// a FIFO, not a regular file`: see `not_regular` for the error kinds). A stat first keeps an open(2) away
/// from devices, where opening alone can act (a tape rewinds, a modem line is raised); the
/// open itself is `O_NONBLOCK` so a FIFO swapped in after that stat cannot block it (open(2):
/// a read-only FIFO open waits for a writer otherwise), and `fstat` of the descriptor decides.
/// `O_NONBLOCK` is cleared before the file is handed out (it means nothing for a regular file,
/// but the caller gets an ordinary descriptor). Also returns the descriptor's stat.
pub fn open_regular(path: &Path) -> io::Result<(File, Stat)> {
    let before = rustix::fs::stat(path)?;
    let ft = rustix::fs::FileType::from_raw_mode(before.st_mode);
    if ft != rustix::fs::FileType::RegularFile {
        return Err(not_regular(ft));
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
    if ft != rustix::fs::FileType::RegularFile {
        return Err(not_regular(ft));
    }
    let flags = rustix::fs::fcntl_getfl(&fd)?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK)?;
    Ok((File::from(fd), convert(st)))
}

/// The one reader of the small files an operator points the tool at (allowed_signers,
/// `trust.toml`, `remotes.toml`, AWS files, keys, signature files, an install's
/// `config.toml`): a regular file only ([`open_regular`]: a FIFO or `/dev/zero` is refused by
/// name, never read), and whole only when it holds at most `cap` bytes. A larger one is an
/// `InvalidData` error naming the cap, refused from its size before anything is read, and
/// never read past `cap + 1` bytes should it grow meanwhile. `what` completes "more than
/// ... can be".
pub fn read_small_file(path: &Path, cap: u64, what: &str) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let too_large = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is larger than {cap} bytes, more than {what} can be"),
        )
    };
    let (file, st) = open_regular(path)?;
    if st.size > cap {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(st.size as usize);
    file.take(cap + 1).read_to_end(&mut out)?;
    if out.len() as u64 > cap {
        return Err(too_large());
    }
    Ok(out)
}

/// [`read_small_file`] of a text file: not UTF-8 is an `InvalidData` error saying so.
pub fn read_small_text(path: &Path, cap: u64, what: &str) -> io::Result<String> {
    String::from_utf8(read_small_file(path, cap, what)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
pub fn stat_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<Stat> {
    Ok(convert(rustix::fs::statat(
        dir,
        name,
        AtFlags::SYMLINK_NOFOLLOW,
    )?))
}

/// `lstat(path)`.
pub fn stat_path(path: &Path) -> io::Result<Stat> {
    Ok(convert(rustix::fs::statat(
        CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
    )?))
}

/// `fstat(fd)`.
pub fn fstat(fd: impl AsFd) -> io::Result<Stat> {
    Ok(convert(rustix::fs::fstat(fd)?))
}

/// The names in directory `dir` (without `.` and `..`), in readdir order: the names of
/// [`read_dir_listing`].
pub fn read_dir_names(dir: BorrowedFd<'_>) -> io::Result<Vec<Vec<u8>>> {
    Ok(read_dir_listing(dir)?
        .into_iter()
        .map(|entry| entry.name.into_vec())
        .collect())
}

/// One entry of a directory listing: its name, and whether the listing's type field says
/// directory. The type is a hint (a filesystem may not fill it in, and the entry can be
/// replaced the moment after): nothing may be decided on it but what to read ahead. 24 bytes,
/// as a `Vec<u8>` name alone is (a boxed name and the flag): a listing of the 100,000-entry
/// directory at scale is held while it is walked, and a no-op capture there peaks near 64 MiB.
pub struct Listed {
    pub name: Box<[u8]>,
    pub says_dir: bool,
}
const _: () = assert!(std::mem::size_of::<Listed>() == std::mem::size_of::<Vec<u8>>());

/// Every entry of `dir` but `.` and `..`, in readdir order, with its type hint. Reads `dir`
/// itself from its start (`getdents64(2)` into a buffer, after rewinding it), where a `Dir`
/// stream would open `.` again, ask its flags and close it: three more syscalls per directory,
/// a fifth of a warm directory diff's system time. So `dir` must not be listed by two threads
/// at once (they would share its offset); no caller does.
pub fn read_dir_listing(dir: BorrowedFd<'_>) -> io::Result<Vec<Listed>> {
    rustix::fs::seek(dir, rustix::fs::SeekFrom::Start(0))?;
    // Far more than one entry (a name is at most 255 bytes), so EINVAL cannot happen.
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut d = rustix::fs::RawDir::new(dir, &mut buf);
    let mut entries = Vec::new();
    while let Some(ent) = d.next() {
        let ent = ent?;
        let name = ent.file_name().to_bytes();
        if name != b"." && name != b".." {
            entries.push(Listed {
                name: name.into(),
                says_dir: ent.file_type() == rustix::fs::FileType::Directory,
            });
        }
    }
    Ok(entries)
}

/// Reads directory `name` of `dir` (opened no-follow) into the kernel's caches: its listing
/// and its entries' no-follow stats, and with `levels` above 1 its subdirectories' the same
/// way, keeping nothing (capture's read-ahead). Streams the listing: no names are collected,
/// and a directory of more than [`WARM_STATS`] entries has only that many stated (the
/// walker states a large directory on several threads itself). Opening a subdirectory
/// no-follow stands for its stat. Failures end it quietly. Returns what it did.
///
/// `claim(ino)` is asked once for each directory before its entries are stated: a directory
/// another call has already read (`false`) is not read again, and below the top level not
/// even opened; its subdirectories are still visited (the starting directory is not listed
/// again when its link count says it has none). The starting directory's number is its
/// `fstat`'s, a subdirectory's is its listing entry's (`d_ino`): a filesystem where the two
/// differ only reads a directory twice. `timed` is told how long the open and first listing
/// read of each directory of the last level took: those are the ones nothing else has read
/// yet, so they tell a cold tree from a warm one.
pub fn warm_dir(
    dir: BorrowedFd<'_>,
    name: &[u8],
    levels: usize,
    claim: &dyn Fn(u64) -> bool,
    timed: &dyn Fn(std::time::Duration),
) -> Warmed {
    let started = std::time::Instant::now();
    let Ok(sub) = open_dir_at(dir, name) else {
        return Warmed::default();
    };
    let Ok(st) = rustix::fs::fstat(&sub) else {
        return Warmed::default();
    };
    let mine = claim(st.st_ino);
    // Read already, and nothing below it to read: a directory's link count is 2 plus its
    // subdirectories on ext4, xfs and tmpfs (btrfs says 1, and is listed).
    if !mine && (levels == 1 || st.st_nlink == 2) {
        return Warmed::default();
    }
    warm_opened(&sub, started, mine, levels, claim, timed)
}

/// [`warm_dir`] of the directory `sub`, opened at `started`; its entries are stated when
/// this call claimed it (`mine`).
fn warm_opened(
    sub: &OwnedFd,
    started: std::time::Instant,
    mine: bool,
    levels: usize,
    claim: &dyn Fn(u64) -> bool,
    timed: &dyn Fn(std::time::Duration),
) -> Warmed {
    let mut warmed = Warmed { dirs: 1, stats: 0 };
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16 * 1024];
    let mut listing = rustix::fs::RawDir::new(sub, &mut buf);
    let mut stated = 0;
    let mut first = levels == 1;
    while let Some(Ok(ent)) = listing.next() {
        if std::mem::take(&mut first) {
            timed(started.elapsed());
        }
        let name = ent.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if levels > 1 && ent.file_type() == rustix::fs::FileType::Directory {
            let below_mine = claim(ent.ino());
            if !below_mine && levels == 2 {
                continue;
            }
            let started = std::time::Instant::now();
            if let Ok(below) = open_dir_at(sub.as_fd(), name) {
                let below = warm_opened(&below, started, below_mine, levels - 1, claim, timed);
                warmed.dirs += below.dirs;
                warmed.stats += below.stats;
            }
        } else if mine && stated < WARM_STATS {
            stated += 1;
            let _ = rustix::fs::statat(sub, name, AtFlags::SYMLINK_NOFOLLOW);
        }
    }
    warmed.stats += stated;
    warmed
}

/// Entries of one directory [`warm_dir`] states, at most: the walker's first batch. The walker
/// states the rest of a larger directory itself, several batches ahead on the worker pool, so
/// more would be stated twice (at 512, a no-op capture of a million files in directories of
/// 1,000 made 1.71 million `fstatat`s; at 64, 1.27 million).
pub const WARM_STATS: usize = 64;

/// What one [`warm_dir`] did: directories listed, entries stated.
#[derive(Debug, Default)]
pub struct Warmed {
    pub dirs: usize,
    pub stats: usize,
}

/// `mkdirat(dir, name, mode)`.
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))?)
}

/// Creates a new file `name` in `dir` (O_EXCL, no-follow) for writing.
pub fn create_file_at(dir: BorrowedFd<'_>, name: &[u8], mode: u32) -> io::Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    Ok(File::from(fd))
}

/// Opens (creating, mode 0600) the lock file `name` in `dir`, never following a symlink.
pub fn open_lock_file_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<File> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    Ok(File::from(fd))
}

/// Sets permission bits on an open fd (the umask does not apply).
pub fn chmod_fd(fd: impl AsFd, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::fchmod(fd, Mode::from_raw_mode(mode))?)
}

/// `fsync(fd)`.
pub fn fsync(fd: impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::fsync(fd)?)
}

/// `renameat2(RENAME_NOREPLACE)`: fails with EEXIST when `new` exists.
pub fn rename_noreplace(
    old_dir: BorrowedFd<'_>,
    old: &[u8],
    new_dir: BorrowedFd<'_>,
    new: &[u8],
) -> io::Result<()> {
    Ok(rustix::fs::renameat_with(
        old_dir,
        old,
        new_dir,
        new,
        RenameFlags::NOREPLACE,
    )?)
}

const UNKNOWN: u8 = 0;
const SUPPORTED: u8 = 1;
const UNSUPPORTED: u8 = 2;
static EXCHANGE_SUPPORT: AtomicU8 = AtomicU8::new(UNKNOWN);

/// `renameat2(RENAME_EXCHANGE)`: atomically swaps two names. Returns `Ok(false)` when the
/// kernel or filesystem does not support it (EINVAL / ENOSYS / EOPNOTSUPP); the answer
/// "unsupported" is cached for the process, as cap-std does for newer syscalls.
pub fn rename_exchange(
    old_dir: BorrowedFd<'_>,
    old: &[u8],
    new_dir: BorrowedFd<'_>,
    new: &[u8],
) -> io::Result<bool> {
    if EXCHANGE_SUPPORT.load(Ordering::Relaxed) == UNSUPPORTED || exchange_disabled_for_tests() {
        return Ok(false);
    }
    match rustix::fs::renameat_with(old_dir, old, new_dir, new, RenameFlags::EXCHANGE) {
        Ok(()) => {
            EXCHANGE_SUPPORT.store(SUPPORTED, Ordering::Relaxed);
            Ok(true)
        }
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::OPNOTSUPP) => {
            EXCHANGE_SUPPORT.store(UNSUPPORTED, Ordering::Relaxed);
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// Tests force the two-rename fallback with `ZEROCLAW_BUNDLE_TEST_NO_EXCHANGE=1` (test-hooks
/// builds only).
fn exchange_disabled_for_tests() -> bool {
    cfg!(feature = "test-hooks") && std::env::var_os("ZEROCLAW_BUNDLE_TEST_NO_EXCHANGE").is_some()
}

/// Removes a file (or, with `dir`, an empty directory) `name` in `dir`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &[u8], is_dir: bool) -> io::Result<()> {
    let flags = if is_dir {
        AtFlags::REMOVEDIR
    } else {
        AtFlags::empty()
    };
    Ok(rustix::fs::unlinkat(dir, name, flags)?)
}

/// Removes `name` in `dir` and everything below it, through fds (never following a symlink).
/// What is not a directory is unlinked as it is (a symlink itself, never its target).
pub fn remove_tree_at(dir: BorrowedFd<'_>, name: &[u8]) -> io::Result<()> {
    let sub = match open_dir_at(dir, name) {
        Ok(sub) => sub,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        // Not a directory (a file, a symlink): unlinked itself.
        Err(e) if is_symlink_refusal(&e) => return unlink_at(dir, name, false),
        Err(e) => return Err(e),
    };
    for child in read_dir_listing(sub.as_fd())? {
        // The listing's type hint saves a stat per file: a non-directory is unlinked at once;
        // a directory the hint missed refuses that (EISDIR) and is removed as one.
        if !child.says_dir {
            match unlink_at(sub.as_fd(), &child.name, false) {
                Ok(()) => continue,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(rustix::io::Errno::ISDIR.raw_os_error()) => {}
                Err(e) => return Err(e),
            }
        }
        remove_tree_at(sub.as_fd(), &child.name)?;
    }
    drop(sub);
    unlink_at(dir, name, true)
}

/// The host name (`uname -n`).
pub fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// True for the errors a no-follow open gives on a symlink (ELOOP, or ENOTDIR with
/// O_DIRECTORY).
pub fn is_symlink_refusal(e: &io::Error) -> bool {
    let code = e.raw_os_error();
    code == Some(rustix::io::Errno::LOOP.raw_os_error())
        || code == Some(rustix::io::Errno::NOTDIR.raw_os_error())
}

/// True for the error opening a socket or a FIFO without a peer gives (ENXIO).
pub fn is_no_such_device(e: &io::Error) -> bool {
    e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error())
}

/// `syncfs(2)` on the filesystem holding `fd`: flushes every dirty file and directory entry of
/// that filesystem in one pass. Since Linux 5.8 it reports writeback errors that happened
/// after `fd` was opened.
pub fn syncfs(fd: impl AsFd) -> io::Result<()> {
    Ok(rustix::fs::syncfs(fd)?)
}

/// `flock(fd, LOCK_EX | LOCK_NB)`: `Ok(true)` when this open file description now holds the
/// lock, `Ok(false)` when another one holds it. The lock goes away with the last fd of the
/// description, so a killed process never leaves it behind.
pub fn try_lock_exclusive(fd: impl AsFd) -> io::Result<bool> {
    match rustix::fs::flock(fd, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// A new unnamed file in directory `dir` (`O_TMPFILE`, `mode` less the umask, as
/// `File::create` makes it with 0666): if the process dies before [`link_unnamed`] names it,
/// the kernel frees it and nothing is left.
/// `Ok(None)` when the filesystem has no unnamed files (the caller stages a named one).
pub fn create_unnamed_in(dir: &Path, mode: u32) -> io::Result<Option<File>> {
    match rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    ) {
        Ok(fd) => Ok(Some(File::from(fd))),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Gives a file from [`create_unnamed_in`] the name `path` (fails when `path` exists): through
/// `/proc/self/fd`, else `AT_EMPTY_PATH` (which needs `CAP_DAC_READ_SEARCH`).
pub fn link_unnamed(file: &File, path: &Path) -> io::Result<()> {
    let proc = format!("/proc/self/fd/{}", file.as_raw_fd());
    match rustix::fs::linkat(CWD, proc.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::NOENT) => Ok(rustix::fs::linkat(
            file,
            "",
            CWD,
            path,
            AtFlags::EMPTY_PATH,
        )?),
        Err(e) => Err(e.into()),
    }
}

/// `linkat(old_dir, old, new_dir, new, 0)`: a second name for a file, never following a
/// symlink at `old`.
pub fn link_at(
    old_dir: BorrowedFd<'_>,
    old: &[u8],
    new_dir: BorrowedFd<'_>,
    new: &[u8],
) -> io::Result<()> {
    Ok(rustix::fs::linkat(
        old_dir,
        old,
        new_dir,
        new,
        AtFlags::empty(),
    )?)
}

/// The process umask, read once from `/proc/self/status` (reading it with umask(2) would
/// mean setting it, which races with other threads). `None` when it cannot be read.
fn umask() -> Option<u32> {
    static UMASK: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("Umask:"))?;
        u32::from_str_radix(line.trim_start_matches("Umask:").trim(), 8).ok()
    })
}

/// What became of the bytes written to a pipe, once its reader took them or left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipeReader {
    /// `fd` is no pipe (a file, a socket, a terminal): nothing to wait for.
    NotAPipe,
    /// The reader took every byte written so far.
    TookAll,
    /// The reader closed its end with `unread` bytes still in the pipe.
    Gone {
        /// Bytes written that no reader will ever see.
        unread: u64,
    },
}

/// Waits until the reader of pipe `fd` (the write end) has taken every byte written to it
/// (`FIONREAD` is 0: ioctl_pipe(2)), or has closed its end with bytes left (poll(2) reports
/// `POLLERR` on a write end without readers), asking `stop` every 50 ms whether to give up
/// (then `Interrupted`). A write that fails with EPIPE says the reader left too; this also
/// catches the last bytes, which fit in the pipe's buffer and so never fail.
pub fn wait_pipe_taken(fd: BorrowedFd<'_>, stop: &dyn Fn() -> bool) -> io::Result<PipeReader> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    if !rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode).is_fifo() {
        return Ok(PipeReader::NotAPipe);
    }
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    loop {
        if rustix::io::ioctl_fionread(fd)? == 0 {
            return Ok(PipeReader::TookAll);
        }
        let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::empty())];
        match poll(&mut fds, Some(&tick)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
        if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) {
            return Ok(match rustix::io::ioctl_fionread(fd)? {
                0 => PipeReader::TookAll,
                unread => PipeReader::Gone { unread },
            });
        }
        if stop() {
            return Err(io::ErrorKind::Interrupted.into());
        }
    }
}

/// True when a file created with `mode` may not end up with exactly `mode` (the umask
/// strips some of its bits, or the umask is unknown), so an explicit `fchmod` is needed.
pub fn umask_alters(mode: u32) -> bool {
    umask().is_none_or(|mask| mask & mode != 0)
}

/// Reads one line from the controlling terminal (`/dev/tty`) with echo off, after writing
/// `prompt` to it (a passphrase: never echoed, never on stdout). The terminal is put in
/// non-canonical mode without signals for the read, so Ctrl-C is seen here as a byte: the
/// terminal is restored and the read fails as interrupted (a SIGINT would otherwise kill the
/// process with echo still off). Backspace and Ctrl-U edit; Ctrl-D on an empty line cancels.
/// The one such reader: the library asks for key passphrases with it, the CLI for secrets.
/// `Ok(None)` when there is no terminal to ask on (a pipe, cron, a service) or stdin is not
/// one: the caller fails with a message instead of hanging.
pub fn read_hidden_line(prompt: &str) -> io::Result<Option<String>> {
    use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions, SpecialCodeIndex};
    use std::io::{IsTerminal, Read, Write};
    if !io::stdin().is_terminal() {
        return Ok(None);
    }
    let tty = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    {
        Ok(t) => t,
        Err(_) => return Ok(None),
    };
    let saved = tcgetattr(&tty)?;
    let mut raw = saved.clone();
    raw.local_modes
        .remove(LocalModes::ECHO | LocalModes::ICANON | LocalModes::ISIG);
    raw.special_codes[SpecialCodeIndex::VMIN] = 1;
    raw.special_codes[SpecialCodeIndex::VTIME] = 0;
    tcsetattr(&tty, OptionalActions::Flush, &raw)?;
    let read = (|| -> io::Result<String> {
        (&tty).write_all(prompt.as_bytes())?;
        (&tty).flush()?;
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            if (&tty).read(&mut byte)? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            match byte[0] {
                b'\r' | b'\n' => break,
                0x03 => return Err(io::ErrorKind::Interrupted.into()),
                0x04 if line.is_empty() => return Err(io::ErrorKind::UnexpectedEof.into()),
                0x7f | 0x08 => {
                    line.pop();
                }
                0x15 => line.clear(),
                b => line.push(b),
            }
        }
        String::from_utf8(line).map_err(|_| io::ErrorKind::InvalidData.into())
    })();
    let _ = (&tty).write_all(b"\n");
    let restored = tcsetattr(&tty, OptionalActions::Flush, &saved);
    let line = read?;
    restored?;
    Ok(Some(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_tree_removes_files_dirs_fifos_and_links_never_what_a_link_names() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("keep"), b"k").unwrap();
        let top = tmp.path().join("top");
        std::fs::create_dir_all(top.join("a/b/c")).unwrap();
        std::fs::create_dir_all(top.join("empty")).unwrap();
        for f in ["f", "a/f", "a/b/f", "a/b/c/f"] {
            std::fs::write(top.join(f), b"x").unwrap();
        }
        std::os::unix::fs::symlink(&outside, top.join("a/dirlink")).unwrap();
        std::os::unix::fs::symlink(outside.join("keep"), top.join("a/b/filelink")).unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            top.join("a/fifo"),
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let parent = open_dir_path(tmp.path()).unwrap();
        remove_tree_at(parent.as_fd(), b"top").unwrap();
        assert!(!top.exists());
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"k");
        // A name that is gone is done; a file or a symlink at the top is unlinked itself.
        remove_tree_at(parent.as_fd(), b"top").unwrap();
        std::fs::write(tmp.path().join("file"), b"x").unwrap();
        std::os::unix::fs::symlink(&outside, tmp.path().join("link")).unwrap();
        remove_tree_at(parent.as_fd(), b"file").unwrap();
        remove_tree_at(parent.as_fd(), b"link").unwrap();
        assert!(!tmp.path().join("file").exists());
        assert!(std::fs::symlink_metadata(tmp.path().join("link")).is_err());
        assert_eq!(std::fs::read(outside.join("keep")).unwrap(), b"k");
    }

    #[test]
    fn warm_dir_reads_two_levels_once_never_through_a_symlink_and_states_at_most_its_cap() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("deep")).unwrap();
        let top = tmp.path().join("top");
        let sub = top.join("sub");
        std::fs::create_dir_all(sub.join("third")).unwrap();
        std::fs::write(top.join("a"), b"").unwrap();
        std::fs::write(sub.join("b"), b"").unwrap();
        std::fs::write(sub.join("third").join("c"), b"").unwrap();
        std::os::unix::fs::symlink(&outside, top.join("link")).unwrap();
        std::os::unix::fs::symlink(&outside, sub.join("link")).unwrap();
        let root = open_dir_path(tmp.path()).unwrap();

        // What each call did: (directories listed, entries stated, directories of the last
        // level timed). Each call has a claim set of its own unless given one.
        let did_with = |claimed: &std::cell::RefCell<std::collections::HashSet<u64>>,
                        dir: BorrowedFd<'_>,
                        name: &[u8],
                        levels| {
            let timed = std::cell::Cell::new(0);
            let claim = |ino| claimed.borrow_mut().insert(ino);
            let w = warm_dir(dir, name, levels, &claim, &|_| timed.set(timed.get() + 1));
            (w.dirs, w.stats, timed.get())
        };
        let did = |dir: BorrowedFd<'_>, name: &[u8], levels| {
            did_with(&Default::default(), dir, name, levels)
        };
        // top and sub opened (sub timed); a, link (top) and b, link, third (sub) stated;
        // third not entered; neither link followed.
        assert_eq!(did(root.as_fd(), b"top", 2), (2, 5, 1));
        assert_eq!(did(root.as_fd(), b"top", 1), (1, 3, 1));
        // The symlink itself is never opened as a directory.
        let top_fd = open_dir_path(&top).unwrap();
        assert_eq!(did(top_fd.as_fd(), b"link", 2), (0, 0, 0));
        assert_eq!(did(root.as_fd(), b"missing", 2), (0, 0, 0));

        // A directory another call has read is not read again: top again states nothing and
        // skips sub unopened; sub as a job of its own states nothing of its own, but reads
        // third, which nothing had read.
        let claimed = Default::default();
        assert_eq!(did_with(&claimed, root.as_fd(), b"top", 2), (2, 5, 1));
        assert_eq!(did_with(&claimed, root.as_fd(), b"top", 2), (1, 0, 0));
        assert_eq!(did_with(&claimed, top_fd.as_fd(), b"sub", 2), (2, 1, 1));
        assert_eq!(did_with(&claimed, top_fd.as_fd(), b"sub", 2), (1, 0, 0));
        assert_eq!(did_with(&claimed, top_fd.as_fd(), b"sub", 1), (0, 0, 0));
        // third, read and without a subdirectory, is not even listed again.
        let sub_fd = open_dir_path(&sub).unwrap();
        assert_eq!(did_with(&claimed, sub_fd.as_fd(), b"third", 2), (0, 0, 0));

        let big = tmp.path().join("big");
        std::fs::create_dir(&big).unwrap();
        for i in 0..WARM_STATS + 20 {
            std::fs::write(big.join(i.to_string()), b"").unwrap();
        }
        assert_eq!(did(root.as_fd(), b"big", 2), (1, WARM_STATS, 0));
    }

    #[test]
    fn small_files_are_regular_files_only_and_capped() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("f");
        std::fs::write(&file, b"twelve bytes").unwrap();
        assert_eq!(read_small_file(&file, 12, "x").unwrap(), b"twelve bytes");
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_small_text(&link, 12, "x").unwrap(), "twelve bytes");
        let e = read_small_file(&file, 11, "a thing").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(
            e.to_string(),
            "it is larger than 11 bytes, more than a thing can be"
        );
        // A FIFO nobody writes: refused at once, not waited on.
        let fifo = tmp.path().join("fifo");
        rustix::fs::mkfifoat(CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        let e = read_small_file(&fifo, 1 << 20, "x").unwrap_err();
        assert_eq!(e.to_string(), "it is a FIFO, not a regular file");
        // Through a symlink to an endless device: refused, never read.
        let zero = tmp.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_small_file(&zero, 1 << 20, "x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "it is a character device, not a regular file"
        );
        let e = read_small_file(tmp.path(), 1 << 20, "x").unwrap_err();
        assert_eq!(e.to_string(), "it is a directory, not a regular file");
        std::fs::write(&file, b"\xff").unwrap();
        assert!(read_small_text(&file, 12, "x").is_err());
        assert_eq!(
            read_small_file(&tmp.path().join("none"), 1, "x")
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        // The descriptor handed out blocks again (O_NONBLOCK cleared).
        std::fs::write(&file, b"x").unwrap();
        let (f, st) = open_regular(&file).unwrap();
        assert_eq!(st.kind, FileKind::File);
        assert!(!rustix::fs::fcntl_getfl(&f)
            .unwrap()
            .contains(OFlags::NONBLOCK));
    }
}
