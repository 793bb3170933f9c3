//! Destination resolution and the overlap refusals (source trees, the store), all before
//! anything is created.
//!
//! The destination's parent is canonicalized (its nearest existing ancestor, with the missing
//! tail re-appended) and its last component is kept as written, so a symlink *at* the
//! destination is seen by admission and refused rather than followed. A `..` is only accepted
//! where the prefix before it is an existing directory: `missing/..` would otherwise name
//! something that cannot be checked until after it is written.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use super::PublishError;

/// A destination split into its canonical parent and its unresolved last component.
#[derive(Debug, Clone)]
pub(crate) struct Destination {
    /// Canonical parent directory (may not exist yet).
    pub parent: PathBuf,
    /// The last component, as written.
    pub name: OsString,
    /// `parent/name`.
    pub full: PathBuf,
}

/// Refuses a `..` whose prefix is not an existing directory (following symlinks, as the
/// kernel would when it resolves the path).
fn check_dotdot(path: &Path) -> Result<(), PublishError> {
    let mut prefix = PathBuf::new();
    for comp in path.components() {
        if comp == Component::ParentDir {
            let probe = if prefix.as_os_str().is_empty() {
                Path::new(".")
            } else {
                prefix.as_path()
            };
            if !fs::metadata(probe).map(|m| m.is_dir()).unwrap_or(false) {
                return Err(PublishError::DotDotThroughMissing {
                    path: path.to_path_buf(),
                    missing: probe.to_path_buf(),
                });
            }
        }
        prefix.push(comp.as_os_str());
    }
    Ok(())
}

/// Makes `path` absolute, canonicalizes its nearest existing ancestor and re-appends the
/// missing tail. A `..` left in the tail is refused.
pub(crate) fn resolve_path(path: &Path) -> Result<PathBuf, PublishError> {
    check_dotdot(path)?;
    let abs = std::path::absolute(path).map_err(|e| PublishError::io("resolve", path, e))?;
    let comps: Vec<Component<'_>> = abs.components().collect();
    for split in (1..=comps.len()).rev() {
        let prefix: PathBuf = comps[..split].iter().collect();
        match fs::canonicalize(&prefix) {
            Ok(mut resolved) => {
                for comp in &comps[split..] {
                    match comp {
                        Component::Normal(name) => resolved.push(name),
                        Component::CurDir => {}
                        _ => {
                            return Err(PublishError::DotDotThroughMissing {
                                path: path.to_path_buf(),
                                missing: prefix,
                            })
                        }
                    }
                }
                return Ok(resolved);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            Err(e) => return Err(PublishError::io("resolve", prefix, e)),
        }
    }
    Ok(abs)
}

/// Resolves `--out`: canonical parent, last component as written.
pub(crate) fn resolve_destination(dest: &Path) -> Result<Destination, PublishError> {
    check_dotdot(dest)?;
    let abs = std::path::absolute(dest).map_err(|e| PublishError::io("resolve", dest, e))?;
    let (parent, name) = match (abs.components().next_back(), abs.parent()) {
        (Some(Component::Normal(name)), Some(parent)) => (resolve_path(parent)?, name.to_owned()),
        _ => {
            // `.`, `..` or `/` at the end: the whole path exists (check_dotdot saw to that),
            // so resolve it fully and publish under its real name.
            let full = resolve_path(&abs)?;
            match (full.file_name(), full.parent()) {
                (Some(name), Some(parent)) => (parent.to_path_buf(), name.to_owned()),
                _ => {
                    return Err(PublishError::NoParent {
                        path: dest.to_path_buf(),
                    })
                }
            }
        }
    };
    let full = parent.join(&name);
    Ok(Destination { parent, name, full })
}

/// Refuses a destination that contains a source (or is one) or lies inside one. Containment
/// is checked first, so `dest == source` reports "contains".
pub(crate) fn refuse_overlap(
    given: &Path,
    dest: &Path,
    sources: &[PathBuf],
) -> Result<(), PublishError> {
    for source in sources {
        let resolved = resolve_path(source)?;
        if resolved.starts_with(dest) {
            return Err(PublishError::DestContainsSource {
                path: given.to_path_buf(),
                source_tree: source.clone(),
            });
        }
        if dest.starts_with(&resolved) {
            return Err(PublishError::DestInsideSource {
                path: given.to_path_buf(),
                source_tree: source.clone(),
            });
        }
    }
    Ok(())
}

/// (dev, ino) of what `path` names, following symlinks; `None` when it cannot be stat'ed.
fn identity(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Refuses a destination that is the store, contains it, or lies inside it: publishing
/// there would replace or overwrite the store's objects, catalog and marker. Compared both by
/// canonical path and by identity (dev, ino) of every existing ancestor, so a symlinked or
/// bind-mounted spelling of the store is refused too.
pub(crate) fn refuse_store_overlap(
    given: &Path,
    dest: &Path,
    store: &Path,
) -> Result<(), PublishError> {
    let store_resolved = resolve_path(store)?;
    let contains = || PublishError::DestContainsStore {
        path: given.to_path_buf(),
        store: store.to_path_buf(),
    };
    let inside = || PublishError::DestInsideStore {
        path: given.to_path_buf(),
        store: store.to_path_buf(),
    };
    if store_resolved.starts_with(dest) {
        return Err(contains());
    }
    if dest.starts_with(&store_resolved) {
        return Err(inside());
    }
    let Some(store_id) = identity(&store_resolved) else {
        return Ok(());
    };
    if let Some(dest_id) = identity(dest) {
        if store_resolved
            .ancestors()
            .any(|a| identity(a) == Some(dest_id))
        {
            return Err(contains());
        }
    }
    if lies_inside_identity(dest, store_id) {
        return Err(inside());
    }
    Ok(())
}

/// Whether `path` (resolved) is `dir` or lies inside it, compared by the identity (dev, ino)
/// of every existing ancestor, so a symlinked or bind-mounted spelling of `dir` counts.
pub(crate) fn lies_inside(path: &Path, dir: &Path) -> bool {
    identity(dir).is_some_and(|id| lies_inside_identity(path, id))
}

fn lies_inside_identity(path: &Path, dir: (u64, u64)) -> bool {
    path.ancestors().any(|a| identity(a) == Some(dir))
}
