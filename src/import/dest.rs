//! Where an import may publish a tree, and what it may replace there. Decided by `plan`,
//! before anything is written; `apply` publishes only what was decided here.
//!
//! **Confinement.** A skill bundle's tree goes inside `<install>/shared` and an agent's
//! workspace inside `<install>/agents`, as ZeroClaw's own layout puts them. A `..` in a
//! configured `directory` (or `workspace.path`) is refused outright: ZeroClaw checks the path
//! lexically (`shared/skills/../x` is "inside `shared`"), while the kernel resolves `..` after
//! a symlink (`shared/skills` linked to another disk), so the tree would land beside the
//! link's target. Then the destination is resolved (the symlinks of what exists followed) and
//! must lie inside the canonical `<install>/shared` (or the canonical `<install>/shared/skills`:
//! an operator who keeps skills on another disk links that directory), resp. the canonical
//! `<install>/agents`. It may never be, or hold, the install root, `shared`, `shared/skills` or
//! `agents` themselves.
//!
//! **Replacement.** A destination that exists is never replaced unless either `--force` was
//! given and it holds exactly the tree this import publishes (what an import of the same
//! bundle that was killed after publishing leaves: a publish swaps a whole tree in, so such a
//! tree is whole), or the operator named it with `--replace PATH`. Anything else there is the
//! operator's and is refused with the flag that would replace it.

use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};

use zeroclaw_bundle_store::{ObjectId, Store};

use super::error::ImportError;
use crate::progress::Silent;
use crate::publish;

/// The install's own directories, resolved (symlinks of what exists followed).
pub(super) struct Homes {
    root: PathBuf,
    shared: PathBuf,
    skills: PathBuf,
    agents: PathBuf,
}

impl Homes {
    /// The homes of the install rooted at `root`.
    pub(super) fn of(root: &Path) -> Result<Homes, ImportError> {
        let resolve = |p: PathBuf| resolve(&p);
        Ok(Homes {
            root: resolve(root.to_path_buf())?,
            shared: resolve(root.join("shared"))?,
            skills: resolve(root.join("shared").join("skills"))?,
            agents: resolve(root.join("agents"))?,
        })
    }

    /// Checks that `dest`, where `what` (a skill bundle) goes, is a place of its own inside
    /// `<install>/shared` (see the module doc). `configured` is the bundle's config field
    /// that placed it (dotted) and its value, when one did.
    pub(super) fn confine_skill(
        &self,
        dest: &Path,
        what: &str,
        configured: Option<(&str, &str)>,
    ) -> Result<(), ImportError> {
        let shown = self.root.join("shared");
        self.confine(
            dest,
            what,
            configured,
            &[&self.shared, &self.skills],
            &shown,
        )
    }

    /// Checks that `dest`, the workspace `what`, lies inside `<install>/agents` (see the
    /// module doc); `configured` as for [`Homes::confine_skill`].
    pub(super) fn confine_workspace(
        &self,
        dest: &Path,
        what: &str,
        configured: Option<(&str, &str)>,
    ) -> Result<(), ImportError> {
        let shown = self.root.join("agents");
        self.confine(dest, what, configured, &[&self.agents], &shown)
    }

    fn confine(
        &self,
        dest: &Path,
        what: &str,
        configured: Option<(&str, &str)>,
        homes: &[&PathBuf],
        shown: &Path,
    ) -> Result<(), ImportError> {
        let refuse = |problem: String| ImportError::Destination {
            what: what.to_string(),
            path: dest.to_path_buf(),
            problem,
        };
        let placed = configured
            .map(|(field, raw)| format!(" (the bundle's {field} = {raw:?} puts it there)"))
            .unwrap_or_default();
        if let Some((field, raw)) = configured {
            if Path::new(raw)
                .components()
                .any(|c| c == Component::ParentDir)
            {
                return Err(refuse(format!(
                    "the bundle's {field} = {raw:?} holds `..`, which is refused: ZeroClaw \
                     checks the path by its spelling, while a symlinked directory before the \
                     `..` sends the tree outside the install; name the directory without `..`"
                )));
            }
        }
        let resolved = resolve(dest)?;
        if !homes.iter().any(|h| resolved.starts_with(h)) {
            return Err(refuse(format!(
                "it resolves to {} (following the install's symlinks), outside {}{placed}; an \
                 import writes only inside it",
                resolved.display(),
                shown.display()
            )));
        }
        let own = [
            (&self.root, "the install root"),
            (&self.shared, "the install's shared directory"),
            (&self.skills, "the install's shared/skills directory"),
            (&self.agents, "the install's agents directory"),
        ];
        if let Some((dir, own)) = own.iter().find(|(dir, _)| dir.starts_with(&resolved)) {
            return Err(refuse(format!(
                "it is or holds {own} {}{placed}; a bundle's tree goes to a directory of its \
                 own below it (--force and --replace do not change this)",
                dir.display()
            )));
        }
        Ok(())
    }
}

/// `path` with the symlinks of what exists followed (the missing tail appended as written).
fn resolve(path: &Path) -> Result<PathBuf, ImportError> {
    publish::resolve_path(path).map_err(|source| ImportError::Publish {
        what: "a destination".to_string(),
        path: path.to_path_buf(),
        source: Box::new(source),
    })
}

/// Why a destination that exists may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replacing {
    /// It holds exactly the tree this import publishes (an earlier import of this bundle,
    /// killed before it wrote `config.toml`, leaves that), and `--force` was given.
    EarlierImport,
    /// The operator named it with `--replace PATH`: whatever it holds is deleted.
    Named,
}

impl Replacing {
    /// Its word in `--json`.
    pub fn word(self) -> &'static str {
        match self {
            Replacing::EarlierImport => "earlier_import",
            Replacing::Named => "named",
        }
    }
}

/// `--force` and the `--replace PATH`s, each remembered by the identity of what it names.
pub(super) struct Replace {
    force: bool,
    named: Vec<(u64, u64)>,
}

impl Replace {
    /// Checks that each of `named` is one of `dests` (the directories the import publishes
    /// into) and exists: a typo, or a path the import does not write, must not go unnoticed.
    pub(super) fn new(
        force: bool,
        named: &[PathBuf],
        dests: &[&Path],
    ) -> Result<Replace, ImportError> {
        let mut ids = Vec::new();
        for path in named {
            let bad = |problem: String| ImportError::BadArgument {
                arg: format!("--replace {}", path.display()),
                problem,
            };
            let Some(id) = identity(path) else {
                return Err(bad(
                    "names nothing that exists (pass a directory the import \
                                publishes into, as the refusal printed it)"
                        .to_string(),
                ));
            };
            if !dests.iter().any(|d| identity(d) == Some(id)) {
                return Err(bad(format!(
                    "is not a directory this import publishes into ({})",
                    if dests.is_empty() {
                        "it publishes none".to_string()
                    } else {
                        dests
                            .iter()
                            .map(|d| d.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                )));
            }
            ids.push(id);
        }
        Ok(Replace { force, named: ids })
    }

    /// What may replace `dest` (`None`: nothing is there), or the refusal that names the
    /// flag that would: `tree` is what the import would publish there, `what` says what.
    pub(super) fn decide(
        &self,
        store: &Store,
        dest: &Path,
        what: &str,
        tree: &ObjectId,
    ) -> Result<Option<Replacing>, ImportError> {
        let Some(id) = identity(dest) else {
            return Ok(None);
        };
        if self.named.contains(&id) {
            return Ok(Some(Replacing::Named));
        }
        let hint = format!(
            "to delete what it holds and publish there, pass --replace {}",
            publish::shell_quote(dest)
        );
        if !self.force {
            return Err(ImportError::Exists {
                path: dest.to_path_buf(),
                what: what.to_string(),
                problem: format!(
                    "if an interrupted import of this bundle left it, pass --force (it replaces \
                     only a directory holding exactly the tree this import publishes); {hint}"
                ),
            });
        }
        if holds_tree(store, dest, tree)? {
            return Ok(Some(Replacing::EarlierImport));
        }
        Err(ImportError::Exists {
            path: dest.to_path_buf(),
            what: what.to_string(),
            problem: format!(
                "it does not hold the tree this import publishes, so it is not what an \
                 interrupted import of this bundle left and --force does not replace it; {hint}"
            ),
        })
    }
}

/// (dev, ino) of what `path` names, its last component not followed.
fn identity(path: &Path) -> Option<(u64, u64)> {
    fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the directory `dir` holds exactly `tree`: hashed as `diff` hashes a directory, and
/// nothing in it skipped (a symlink, a special file or a hard link is not compared, so a
/// directory holding one is not the tree).
pub(super) fn holds_tree(store: &Store, dir: &Path, tree: &ObjectId) -> Result<bool, ImportError> {
    if !fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(false);
    }
    let side =
        crate::diff::side::resolve_side(store, dir.as_os_str(), false, &Silent).map_err(|e| {
            ImportError::Capture {
                arg: dir.display().to_string(),
                source: e.into(),
            }
        })?;
    let whole = side.capture.as_ref().is_none_or(|c| c.skipped.is_empty());
    Ok(whole && side.root.entry.id == *tree)
}
