//! INTERIM: plain publish into a new directory, replaced by the staged publish (branch
//! `publish`) when it lands.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{EntryKind, ObjectId, ObjectSource};

/// What to publish where.
pub struct PublishRequest<'a> {
    /// Destination.
    pub dest: &'a Path,
    /// Replace a non-empty destination.
    pub force: bool,
    /// Source trees the destination must not overlap.
    pub sources: &'a [PathBuf],
}

/// What was published.
pub struct Published {
    /// Destination.
    pub dest: PathBuf,
    /// Files written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Writes the tree into a new directory.
pub fn publish(
    source: &dyn ObjectSource,
    root: &ObjectId,
    req: &PublishRequest,
) -> anyhow::Result<Published> {
    anyhow::ensure!(!req.dest.exists(), "{} exists", req.dest.display());
    let mut p = Published {
        dest: req.dest.to_path_buf(),
        files: 0,
        bytes: 0,
    };
    fs::create_dir(req.dest)?;
    write(source, root, req.dest, &mut p)?;
    Ok(p)
}

fn write(
    source: &dyn ObjectSource,
    tree: &ObjectId,
    dir: &Path,
    p: &mut Published,
) -> anyhow::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    for e in source.tree(tree)?.entries() {
        let path = dir.join(std::ffi::OsStr::from_bytes(&e.name));
        if e.kind == EntryKind::Dir {
            fs::create_dir(&path)?;
            write(source, &e.id, &path, p)?;
        } else {
            let blob = source.blob(&e.id)?;
            let mut f = fs::File::create(&path)?;
            std::io::copy(&mut blob.verifying_reader(e.id), &mut f)?;
            f.flush()?;
            fs::set_permissions(&path, fs::Permissions::from_mode(e.kind.mode()))?;
            p.files += 1;
            p.bytes += e.size;
        }
    }
    Ok(())
}
