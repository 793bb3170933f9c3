//! What a publish may replace (`--force`, `--replace-any`): a bundle (it holds the marker file
//! its caller names in `BundleMarker`), a previous checkout (its destination record is in the
//! store's catalog), or with `--replace-any` any directory. Decided before anything is captured
//! or written. Publish knows nothing of what a bundle holds: the caller (`export`, `checkout`)
//! says which file marks one.

use std::path::Path;

use zeroclaw_bundle_store::{escape_name, Store};

use super::{dest_key, Admitted, PublishError};

/// What marks a directory as a bundle, as the caller defines it: a regular file `file` at its
/// root whose first bytes are `header`'s first line (and which is at least `header` long). The
/// same file is written last when a tree is published (SPEC §1), so a bundle whose marker is
/// present is whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BundleMarker {
    /// The marker file's name at the bundle root.
    pub file: &'static str,
    /// The text the marker file starts with.
    pub header: &'static str,
}

impl BundleMarker {
    /// True when `dir` holds this marker (a regular file, not followed through a symlink,
    /// starting with the header's first line).
    pub fn marks(&self, dir: &Path) -> bool {
        use std::io::Read;
        let path = dir.join(self.file);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return false;
        };
        if !meta.is_file() {
            return false;
        }
        let mut head = vec![0u8; self.header.len()];
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok()
            && head.starts_with(self.header.lines().next().unwrap_or("#").as_bytes())
    }
}

/// What `--force` and `--replace-any` allow at an existing, non-empty destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replace {
    /// Refuse a non-empty destination.
    Nothing,
    /// `--force`: replace a bundle, or a previous checkout recorded in the catalog.
    Bundle,
    /// `--replace-any`: replace any directory.
    Anything,
}

impl Replace {
    /// The policy of the two flags.
    pub fn of_flags(force: bool, replace_any: bool) -> Replace {
        match (force, replace_any) {
            (_, true) => Replace::Anything,
            (true, false) => Replace::Bundle,
            (false, false) => Replace::Nothing,
        }
    }
}

/// What was at the destination before a publish replaced it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Replaced {
    /// A bundle (it holds the caller's `BundleMarker`).
    Bundle,
    /// A previous checkout of this tool (recorded in the store's catalog).
    Checkout,
    /// Another directory, replaced because of `--replace-any`; a few of its entries.
    Other {
        /// The first entries (by name), for the report.
        entries: Vec<String>,
        /// How many entries it had at the top.
        count: usize,
    },
}

impl Replaced {
    /// One line for the report.
    pub fn describe(&self, dest: &Path) -> String {
        match self {
            Replaced::Bundle => format!("replaced the previous bundle at {}", dest.display()),
            Replaced::Checkout => {
                format!("replaced the previous checkout at {}", dest.display())
            }
            Replaced::Other { entries, count } => format!(
                "replaced {} (not a bundle; {} entr{} at its top: {}{}) because of --replace-any",
                dest.display(),
                count,
                if *count == 1 { "y" } else { "ies" },
                entries.join(", "),
                if *count > entries.len() { ", ..." } else { "" }
            ),
        }
    }
}

/// Decides, before anything is captured or written, whether the publish may replace what is
/// at `dest`: `Ok(None)` when nothing is there (or it is empty), `Ok(Some(what))` when the
/// policy allows replacing it, an error naming the flag that would otherwise. A bundle is what
/// the request's `BundleMarker` marks; `store` (when one exists) is asked whether `dest` is a
/// previous checkout.
pub fn check_replacement(
    store: Option<&Store>,
    admitted: &Admitted,
    replace: Replace,
) -> Result<Option<Replaced>, PublishError> {
    let dest = admitted.given();
    let Ok(entries) = std::fs::read_dir(admitted.path()) else {
        // Absent, or not a directory: admission says what is wrong with it.
        return Ok(None);
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| escape_name(e.file_name().as_encoded_bytes()))
        .collect();
    if names.is_empty() {
        return Ok(None);
    }
    names.sort();
    if replace == Replace::Nothing {
        // Admission refuses it with the message that names --force.
        return Ok(None);
    }
    if admitted.bundle.marks(admitted.path()) {
        return Ok(Some(Replaced::Bundle));
    }
    let recorded = store.is_some_and(|s| {
        s.catalog()
            .has_dest_record(&dest_key(admitted))
            .unwrap_or(false)
    });
    if recorded {
        return Ok(Some(Replaced::Checkout));
    }
    let count = names.len();
    if replace != Replace::Anything {
        return Err(PublishError::NotReplaceable {
            path: dest.to_path_buf(),
            entries: names.iter().take(5).cloned().collect::<Vec<_>>().join(", "),
            more: if count > 5 { ", ..." } else { "" },
        });
    }
    names.truncate(5);
    Ok(Some(Replaced::Other {
        entries: names,
        count,
    }))
}
