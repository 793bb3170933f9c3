//! The store crate's only use of rustix: `syncfs(2)`, read-ahead hints, a random token for
//! temp names, no-follow opens of the store's own files, and unnamed temporary files; and the
//! listing of a store directory that may not exist yet.

use std::fs::{self, File};
use std::io;
use std::path::Path;

use crate::error::StoreError;

/// Flushes the whole filesystem holding `path` (data and metadata); reports writeback errors.
pub fn syncfs(path: &Path) -> io::Result<()> {
    let dir = File::open(path)?;
    rustix::fs::syncfs(&dir).map_err(io::Error::from)
}

/// `posix_fadvise(WILLNEED)` on the whole file: starts reading it into the page cache in
/// the background. Only a hint; errors are ignored.
pub fn will_need(file: &File) {
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::WillNeed);
}

/// `posix_fadvise(WILLNEED)` on `len` bytes of `file` from `offset` (a packed object). Only a
/// hint; errors are ignored.
pub fn will_need_range(file: &File, offset: u64, len: u64) {
    if let Some(len) = std::num::NonZeroU64::new(len) {
        let _ = rustix::fs::fadvise(file, offset, Some(len), rustix::fs::Advice::WillNeed);
    }
}

/// Whether the process `pid` (as a file name carries it: a lease file's, a staged marker's)
/// is alive: `/proc/<pid>` exists. An empty name is no process.
pub fn process_alive(pid: &str) -> bool {
    !pid.is_empty() && Path::new("/proc").join(pid).exists()
}

/// Six random alphanumerics from the kernel's generator: unique names for temp files, lease
/// files and staging directories (uniqueness, not secrecy).
pub fn random_token() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut raw = [0u8; 6];
    let mut filled = 0;
    while filled < raw.len() {
        match rustix::rand::getrandom(&mut raw[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => {
                // Fall back to time and pid: uniqueness, not secrecy, is what temp names need.
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0)
                    ^ u128::from(std::process::id());
                for (i, b) in raw.iter_mut().enumerate() {
                    *b = (t >> (i * 8)) as u8;
                }
                filled = raw.len();
            }
        }
    }
    raw.iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

/// Opens `path` for reading when it is a regular file, without following a final symlink and
/// without blocking on a FIFO (`O_NOFOLLOW | O_NONBLOCK`, then `fstat` of what was opened, so
/// nothing can be swapped in between): for files of the store's own, which only a regular file
/// may be. `None` when `path` is a symlink, a FIFO, a device or a directory.
pub fn open_regular(path: &Path) -> io::Result<Option<File>> {
    use rustix::fs::{Mode, OFlags};
    let file = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::LOOP) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(file.metadata()?.is_file().then_some(file))
}

/// At most `limit` bytes of `path` when it is a regular file, opened as [`open_regular`]
/// opens it; `None` when it is not one. For the store's own small files (the marker, an
/// expansion record): a symlink to `/dev/zero` or a FIFO there must not hang the reader.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let Some(file) = open_regular(path)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// A new file in `dir` that has no name (`O_TMPFILE`, mode 0600): the kernel frees it when
/// its fd is closed, so nothing is left behind even by a killed process. Where the filesystem
/// does not support `O_TMPFILE`, a file created under a random name and unlinked at once.
pub fn unnamed_file(dir: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::open(
        dir,
        OFlags::RDWR | OFlags::TMPFILE | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    ) {
        Ok(fd) => return Ok(File::from(fd)),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
        }
        Err(e) => return Err(e.into()),
    }
    let path = dir.join(format!("unnamed-{}-{}", std::process::id(), random_token()));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

/// The entries of directory `dir`, read as they are asked for (a reader may stop early), none
/// when it does not exist (a store directory made on first use: `signatures/`, `trees/`,
/// `leases/`); any other failure names the directory.
pub(crate) fn list_dir(
    dir: &Path,
) -> Result<impl Iterator<Item = Result<fs::DirEntry, StoreError>>, StoreError> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => Some(rd),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(StoreError::io("list", dir, e)),
    };
    let dir = dir.to_path_buf();
    Ok(rd
        .into_iter()
        .flatten()
        .map(move |ent| ent.map_err(|e| StoreError::io("list", &dir, e))))
}
