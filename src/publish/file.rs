//! Staged publish of one file (`pack --out FILE`): the single-file sibling of the tree publish.
//!
//! A new file is written as an unnamed file (`O_TMPFILE`, mode 0666 less the umask, as
//! `File::create` makes it) in its destination's directory, so the final rename is on one
//! filesystem and atomic; where the filesystem has no unnamed files, as a hidden named file
//! beside it (`.NAME.zeroclaw-<noun>-XXXXXX`). Once whole it is flushed, fsynced, given a
//! hidden name (`linkat` cannot replace) and renamed over the destination, so a failed,
//! interrupted or killed write never leaves a partial file at the destination, and (unnamed)
//! no staged file either.
//!
//! Admission, before anything is created: a destination that is, holds or lies inside the
//! store is refused (compared by identity, as the tree publish compares its own); only a
//! regular file is ever replaced (with `force`); a character device or a FIFO (`/dev/null`, a
//! named pipe) is written in place, never replaced, after checking through the opened file that
//! it still is one; anything else (a directory, a block device, a socket) is refused.
//!
//! Cancelling the request's token ([`FileRequest::cancel`]; the binary does on SIGINT/SIGTERM)
//! fails the next write: a staged file is then removed and nothing lands. Writing to stdout is the caller's, not this module's.

use std::error::Error as StdError;
use std::fs;
use std::io::{self, IsTerminal, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::resolve::lies_inside;
use crate::cancel::Cancel;
use crate::sys;

/// Where one file is published.
#[derive(Debug, Clone, Copy)]
pub struct FileRequest<'a> {
    /// The destination as given (`--out`; never `-`: stdout is the caller's).
    pub dest: &'a Path,
    /// `--force`: replace an existing regular file.
    pub force: bool,
    /// The store: a destination that is, holds or lies inside it is refused.
    pub store: &'a Path,
    /// What the file is, in messages and in the hidden staging name (`"pack"`).
    pub noun: &'static str,
    /// Stops the write at its next chunk once cancelled; `None`: nothing stops it.
    pub cancel: Option<&'a Cancel>,
    /// The file holds bytes not every local user may read (a pack of a `0600` file): a new
    /// file is created `0600` instead of 0666 less the umask.
    pub private: bool,
    /// Give the new file exactly this mode and owner (the file it replaces had them: an
    /// import's `config.toml`); `None`: the mode `private` says, owned by the caller.
    pub keep: Option<Keep>,
}

/// The permission bits and owner a replacing file keeps ([`FileRequest::keep`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Permission bits (`0o7777` at most).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// Why a file was not published. Every variant leaves the destination as it was (a device or
/// a FIFO written in place excepted: [`FileError::Incomplete`], [`FileError::StreamWrite`])
/// and no staged file behind.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The destination is the store or a directory that holds it.
    #[error(
        "refusing to write the {noun} to {path}: it is or contains the store {store}; write it \
         outside the store"
    )]
    HoldsStore {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
        /// The store.
        store: PathBuf,
    },
    /// The destination lies inside the store.
    #[error(
        "refusing to write the {noun} to {path}: it is inside the store {store} (it would \
         overwrite the store's own files); write it outside the store"
    )]
    InsideStore {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
        /// The store.
        store: PathBuf,
    },
    /// A regular file is there and `force` was not given.
    #[error("{path} exists; pass --force to replace it")]
    Exists {
        /// The destination as given.
        path: PathBuf,
    },
    /// Something other than a regular file, a character device or a FIFO is there.
    #[error(
        "refusing to write the {noun} to {path}: it is {what}, and only a regular file is \
         replaced (with --force); name a new file, or pass --out - and redirect"
    )]
    NotAFile {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
        /// What is there ("a directory", ...).
        what: &'static str,
    },
    /// A device or FIFO was swapped for something else between the check and the open.
    #[error(
        "refusing to write the {noun} to {path}: it changed while being opened (it is no longer \
         a character device or a FIFO)"
    )]
    Changed {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
    },
    /// The character device is a terminal.
    #[error("refusing to write a {noun} to the terminal {path}; redirect it or pass --out FILE")]
    Terminal {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
    },
    /// An I/O call on the destination or its directory failed.
    #[error("could not {op} {path}")]
    Io {
        /// The verb: "read", "create", "create a file in".
        op: &'static str,
        /// The path it touched.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The device or FIFO could not be opened for writing.
    #[error("could not open {path} for writing")]
    Open {
        /// The destination as given.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The whole unnamed file could not be given its hidden name (`linkat`).
    #[error("could not name the {noun} {path}")]
    Name {
        /// What the file is.
        noun: &'static str,
        /// The hidden name.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The destination names no file (it ends in `..` or `/`).
    #[error("{path} names no file")]
    NoName {
        /// The destination as given.
        path: PathBuf,
    },
    /// Cancelling stopped the write of a staged file: nothing was written.
    #[error("interrupted; nothing was written at {path}")]
    Interrupted {
        /// The destination as given.
        path: PathBuf,
    },
    /// Cancelling stopped the write to a device or FIFO, in place.
    #[error("interrupted; the {noun} written to {path} is incomplete")]
    Incomplete {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
    },
    /// Writing the staged file failed (the writer's error, a full disk, a failed fsync).
    #[error("could not write {path}")]
    Write {
        /// The destination as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// Writing to the device or FIFO failed.
    #[error("could not write the {noun} to {path}")]
    StreamWrite {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The whole staged file could not be named or renamed into place.
    #[error("could not move the {noun} into place at {path}")]
    Land {
        /// What the file is.
        noun: &'static str,
        /// The destination as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

/// A flush or fsync of the output that failed after the writer succeeded (the OS error is part
/// of the message, as the store's I/O errors put it).
#[derive(Debug, thiserror::Error)]
enum OutputError {
    /// Of a staged file, named by `path`.
    #[error("could not {op} {noun} {path}: {error}")]
    Staged {
        op: &'static str,
        noun: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    /// Of a device or FIFO.
    #[error("could not {op} the {noun}: {error}")]
    Stream {
        op: &'static str,
        noun: &'static str,
        error: io::Error,
    },
}

/// Publishes the bytes `write` writes at `req.dest` (see the module doc): staged and renamed
/// over a new or (with `force`) regular file, or written in place into a character device or
/// a FIFO. `write`'s error fails the publish and is its source.
pub fn publish_file<T, E>(
    req: &FileRequest<'_>,
    write: impl FnOnce(&mut dyn Write) -> Result<T, E>,
) -> Result<T, FileError>
where
    E: StdError + Send + Sync + 'static,
{
    let dest = req.dest;
    refuse_in_store(req)?;
    match Existing::at(dest)? {
        Existing::Nothing => {}
        Existing::Regular if req.force => {}
        Existing::Regular => {
            return Err(FileError::Exists {
                path: dest.to_path_buf(),
            })
        }
        Existing::Stream => return write_to_stream(req, write),
        Existing::Other(what) => {
            return Err(FileError::NotAFile {
                noun: req.noun,
                path: dest.to_path_buf(),
                what,
            })
        }
    }
    let (staged, file) = staging_file(dest, req.noun, req.private)?;
    if let Some(keep) = req.keep {
        if let Err(source) = keep_mode_and_owner(&file, keep) {
            staged.discard();
            return Err(FileError::Io {
                op: "set the mode and owner of",
                path: staged.shown(dest),
                source,
            });
        }
    }
    // Ctrl-C stops at the next write: the staged file is removed below, nothing lands.
    let mut out = io::BufWriter::new(StopOnCancel(file, req.cancel));
    let written = write(&mut out)
        .map_err(|e| Box::new(e) as Box<dyn StdError + Send + Sync>)
        .and_then(|s| {
            let failed = |op, error| OutputError::Staged {
                op,
                noun: req.noun,
                path: staged.shown(dest),
                error,
            };
            let StopOnCancel(file, _) = out
                .into_inner()
                .map_err(|e| failed("write", e.into_error()))?;
            file.sync_all().map_err(|e| failed("sync", e))?;
            Ok((s, file))
        });
    let (value, file) = match written {
        Ok(s) => s,
        Err(source) => {
            staged.discard();
            if cancelled(req) {
                return Err(FileError::Interrupted {
                    path: dest.to_path_buf(),
                });
            }
            return Err(FileError::Write {
                path: dest.to_path_buf(),
                source,
            });
        }
    };
    staged
        .land(&file, dest, req.noun)
        .map_err(|source| FileError::Land {
            noun: req.noun,
            path: dest.to_path_buf(),
            source,
        })?;
    Ok(value)
}

/// Gives the staged `file` the mode and owner of `keep` (the owner only when it differs: a
/// caller that is not root can keep its own, never give a file away).
fn keep_mode_and_owner(file: &fs::File, keep: Keep) -> io::Result<()> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let meta = file.metadata()?;
    if meta.uid() != keep.uid || meta.gid() != keep.gid {
        std::os::unix::fs::fchown(file, Some(keep.uid), Some(keep.gid))?;
    }
    file.set_permissions(fs::Permissions::from_mode(keep.mode & 0o7777))
}

/// What the destination names before anything is written.
enum Existing {
    /// Nothing (or a dangling symlink, which is replaced as a new file would be).
    Nothing,
    /// A regular file: replaced with `force`.
    Regular,
    /// A character device or a FIFO: written to in place, never replaced.
    Stream,
    /// Anything else, by name: refused.
    Other(&'static str),
}

impl Existing {
    fn at(out: &Path) -> Result<Existing, FileError> {
        let meta = match fs::metadata(out) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Existing::Nothing),
            Err(source) => {
                return Err(FileError::Io {
                    op: "read",
                    path: out.to_path_buf(),
                    source,
                })
            }
        };
        let t = meta.file_type();
        Ok(if t.is_file() {
            Existing::Regular
        } else if t.is_char_device() || t.is_fifo() {
            Existing::Stream
        } else if t.is_dir() {
            Existing::Other("a directory")
        } else if t.is_block_device() {
            Existing::Other("a block device")
        } else {
            Existing::Other("a socket")
        })
    }
}

/// Writes into the character device or FIFO at `req.dest`, opened for writing without
/// creating or truncating anything (a FIFO's open waits for its reader), and checked once
/// open: a path swapped for a regular file in between is refused, never overwritten.
fn write_to_stream<T, E>(
    req: &FileRequest<'_>,
    write: impl FnOnce(&mut dyn Write) -> Result<T, E>,
) -> Result<T, FileError>
where
    E: StdError + Send + Sync + 'static,
{
    let out = req.dest;
    let file = fs::OpenOptions::new()
        .write(true)
        .open(out)
        .map_err(|source| FileError::Open {
            path: out.to_path_buf(),
            source,
        })?;
    let t = file
        .metadata()
        .map_err(|source| FileError::Io {
            op: "read",
            path: out.to_path_buf(),
            source,
        })?
        .file_type();
    if !(t.is_char_device() || t.is_fifo()) {
        return Err(FileError::Changed {
            noun: req.noun,
            path: out.to_path_buf(),
        });
    }
    if file.is_terminal() {
        return Err(FileError::Terminal {
            noun: req.noun,
            path: out.to_path_buf(),
        });
    }
    let mut w = io::BufWriter::new(StopOnCancel(file, req.cancel));
    let written = write(&mut w)
        .map_err(|e| Box::new(e) as Box<dyn StdError + Send + Sync>)
        .and_then(|s| {
            w.flush().map_err(|error| OutputError::Stream {
                op: "write",
                noun: req.noun,
                error,
            })?;
            Ok(s)
        });
    match written {
        Ok(value) => Ok(value),
        Err(_) if cancelled(req) => Err(FileError::Incomplete {
            noun: req.noun,
            path: out.to_path_buf(),
        }),
        Err(source) => Err(FileError::StreamWrite {
            noun: req.noun,
            path: out.to_path_buf(),
            source,
        }),
    }
}

/// Refuses a destination inside the store, or naming the store or a directory that holds it
/// (however spelled: compared by identity, as `checkout` and `export` compare theirs): the
/// rename into place would replace a store object, the catalog or the marker.
fn refuse_in_store(req: &FileRequest<'_>) -> Result<(), FileError> {
    let (out, store) = (req.dest, req.store);
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // An unresolvable directory fails later, where the file is staged, naming it.
    let Ok(dir) = fs::canonicalize(dir) else {
        return Ok(());
    };
    let resolved = match out.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    };
    if let Ok(canonical) = fs::canonicalize(&resolved) {
        if lies_inside(&fs::canonicalize(store).unwrap_or_default(), &canonical) {
            return Err(FileError::HoldsStore {
                noun: req.noun,
                path: out.to_path_buf(),
                store: store.to_path_buf(),
            });
        }
    }
    if lies_inside(&resolved, store) {
        return Err(FileError::InsideStore {
            noun: req.noun,
            path: out.to_path_buf(),
            store: store.to_path_buf(),
        });
    }
    Ok(())
}

/// True once the request's token was cancelled.
fn cancelled(req: &FileRequest<'_>) -> bool {
    req.cancel.is_some_and(Cancel::is_cancelled)
}

/// A file being written that fails its next write once its token was cancelled.
struct StopOnCancel<'a>(fs::File, Option<&'a Cancel>);

impl Write for StopOnCancel<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(cancel) = self.1 {
            cancel.check().map_err(io::Error::other)?;
        }
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Where a file being written lives until it is whole.
enum Staged {
    /// An unnamed file in the destination's directory (`O_TMPFILE`): a SIGKILL leaves
    /// nothing behind.
    Unnamed { dir: PathBuf },
    /// A hidden named file beside the destination, where the filesystem has no unnamed
    /// files (a SIGKILL leaves it: `.NAME.zeroclaw-<noun>-XXXXXX`).
    Named(PathBuf),
}

impl Staged {
    /// The path an error about the staged file names.
    fn shown(&self, dest: &Path) -> PathBuf {
        match self {
            Staged::Unnamed { .. } => dest.to_path_buf(),
            Staged::Named(tmp) => tmp.clone(),
        }
    }

    /// Removes what a failed write staged.
    fn discard(&self) {
        if let Staged::Named(tmp) = self {
            let _ = fs::remove_file(tmp);
        }
    }

    /// Puts the whole file in place at `dest` (replacing it): an unnamed file gets a hidden
    /// name first (linkat cannot replace), then either is renamed over `dest`.
    fn land(
        &self,
        file: &fs::File,
        dest: &Path,
        noun: &'static str,
    ) -> Result<(), Box<dyn StdError + Send + Sync>> {
        let tmp = match self {
            Staged::Named(tmp) => tmp.clone(),
            Staged::Unnamed { dir } => {
                let tmp = hidden_name(dir, dest, noun)?;
                sys::link_unnamed(file, &tmp).map_err(|source| FileError::Name {
                    noun,
                    path: tmp.clone(),
                    source,
                })?;
                tmp
            }
        };
        fs::rename(&tmp, dest).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            e.into()
        })
    }
}

/// A hidden name beside `dest`: `.NAME.zeroclaw-<noun>-XXXXXX`.
fn hidden_name(dir: &Path, dest: &Path, noun: &str) -> Result<PathBuf, FileError> {
    let name = dest.file_name().ok_or_else(|| FileError::NoName {
        path: dest.to_path_buf(),
    })?;
    Ok(dir.join(format!(
        ".{}.zeroclaw-{noun}-{}",
        name.to_string_lossy(),
        zeroclaw_bundle_store::random_token()
    )))
}

/// A new file in `dest`'s directory (same filesystem, so the final rename is atomic):
/// unnamed where the filesystem allows, else a hidden named one.
fn staging_file(
    dest: &Path,
    noun: &'static str,
    private: bool,
) -> Result<(Staged, fs::File), FileError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mode = if private { 0o600 } else { 0o666 };
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = hidden_name(&dir, dest, noun)?;
    if let Some(file) = sys::create_unnamed_in(&dir, mode).map_err(|source| FileError::Io {
        op: "create a file in",
        path: dir.clone(),
        source,
    })? {
        return Ok((Staged::Unnamed { dir }, file));
    }
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|source| FileError::Io {
            op: "create",
            path: tmp.clone(),
            source,
        })?;
    Ok((Staged::Named(tmp), file))
}
