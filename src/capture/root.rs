//! Opening capture roots without trusting a path twice (SPEC §4 "Roots", reference §9.5).
//!
//! Three shapes: a plain `--dir` argument (its parent is trusted, its last component must be a
//! real directory), an *anchored* root walked component by component from the install root
//! (a symlink at ANY component is refused, wherever it points), and a *configured* workspace
//! path (only its last component is checked). Each step classifies with a no-follow stat
//! through the previous directory's fd, opens no-follow through the same fd, and compares
//! (dev, ino) of what it opened with what it classified.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::hooks;
use crate::sys::{self, FileKind};

/// Why a root could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The root itself is a symlink.
    #[error("{path} is a symlink; a capture never follows it, because it would carry whatever it points at as this tree: point at the real directory instead")]
    Symlinked {
        /// The root as given.
        path: PathBuf,
    },
    /// A component above the root (inside the install) is a symlink.
    #[error("{path} is not reachable through real directories: {at} is a symlink, so the capture cannot prove what it would carry")]
    Escaped {
        /// The root.
        path: PathBuf,
        /// The symlinked component.
        at: PathBuf,
    },
    /// The root is not a directory.
    #[error("{path} exists but is not a directory")]
    NotADirectory {
        /// The root.
        path: PathBuf,
    },
    /// The root changed between classification and open.
    #[error("{path} was replaced while it was being opened; run the capture again")]
    Replaced {
        /// The root.
        path: PathBuf,
    },
    /// The root path cannot be bound (it ends in `..`, `/` or similar).
    #[error("{path} does not end in a plain directory name, so the capture cannot bind what it reads to what it checked; give the resolved directory")]
    Unresolvable {
        /// The root as given.
        path: PathBuf,
    },
    /// Any other I/O failure, with the path.
    #[error("could not open {path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// Opens `path` as a capture root: parent followed (the operator's choice), last component
/// refused if it is a symlink. `Ok(None)` when it does not exist.
pub fn open_configured(path: &Path) -> Result<Option<OwnedFd>, RootError> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| RootError::Io {
                path: path.to_path_buf(),
                source,
            })?
            .join(path)
    };
    let (Some(parent), Some(Component::Normal(last))) =
        (abs.parent(), abs.components().next_back())
    else {
        return Err(RootError::Unresolvable {
            path: path.to_path_buf(),
        });
    };
    let parent_fd = match sys::open_dir_path(parent) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(RootError::Io {
                path: parent.to_path_buf(),
                source,
            })
        }
    };
    step(&parent_fd, last.as_bytes(), path, true, path)
}

/// Walks `components` from `anchor` (followed: symlinks above the install root are the
/// operator's), refusing a symlink at every component. `Ok(None)` when a component is absent.
pub fn open_anchored(anchor: &Path, components: &[String]) -> Result<Option<OwnedFd>, RootError> {
    let full: PathBuf = components
        .iter()
        .fold(anchor.to_path_buf(), |p, c| p.join(c));
    let mut dir = sys::open_dir_path(anchor).map_err(|source| RootError::Io {
        path: anchor.to_path_buf(),
        source,
    })?;
    let mut walked = anchor.to_path_buf();
    for (i, c) in components.iter().enumerate() {
        if matches!(c.as_str(), "" | "." | "..") || c.contains('/') {
            return Err(RootError::Escaped {
                path: full.clone(),
                at: walked.join(c),
            });
        }
        walked.push(c);
        hooks::seam("root-component", &walked.to_string_lossy());
        let last = i + 1 == components.len();
        match step(&dir, c.as_bytes(), &walked, last, &full)? {
            Some(next) => dir = next,
            None => return Ok(None),
        }
    }
    Ok(Some(dir))
}

/// One component: classify no-follow, open no-follow, compare identity.
fn step(
    parent: &OwnedFd,
    name: &[u8],
    walked: &Path,
    last: bool,
    root: &Path,
) -> Result<Option<OwnedFd>, RootError> {
    let io_err = |source| RootError::Io {
        path: walked.to_path_buf(),
        source,
    };
    let classified = match sys::stat_at(parent.as_fd(), name) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(e)),
    };
    match classified.kind {
        FileKind::Symlink if last => {
            return Err(RootError::Symlinked {
                path: root.to_path_buf(),
            })
        }
        FileKind::Symlink => {
            return Err(RootError::Escaped {
                path: root.to_path_buf(),
                at: walked.to_path_buf(),
            })
        }
        FileKind::Dir => {}
        _ => {
            return Err(RootError::NotADirectory {
                path: walked.to_path_buf(),
            })
        }
    }
    hooks::seam("root-open", &walked.to_string_lossy());
    let opened = match sys::open_dir_at(parent.as_fd(), name) {
        Ok(fd) => fd,
        Err(e) if sys::is_symlink_refusal(&e) || e.kind() == io::ErrorKind::NotFound => {
            return Err(RootError::Replaced {
                path: walked.to_path_buf(),
            })
        }
        Err(e) => return Err(io_err(e)),
    };
    let actual = sys::fstat(&opened).map_err(io_err)?;
    if !actual.same_object(&classified) {
        return Err(RootError::Replaced {
            path: walked.to_path_buf(),
        });
    }
    Ok(Some(opened))
}
