//! The store's housekeeping through the public API: `verify` (rehash every object, walk
//! every snapshot), `gc`, `reindex`, `forget`, and `recover` (what an interrupted publish
//! left beside its destination). Each returns a report that `--json` prints as it
//! serializes, in the documented vocabulary (an object id is `object`, a host path is the
//! path itself when it is UTF-8).

use std::ops::Deref;
use std::path::Path;

use anyhow::Context as _;
use serde::ser::{Error as _, Serialize, SerializeStruct as _, Serializer};
use zeroclaw_bundle_store::{GcReport, ObjectId, ReindexReport, VerifyProblem, VerifyReport};

use super::transfer::host_path;
use super::{Bundles, Error, Result, Verb};
use crate::progress::{Progress, Totals};

pub use crate::publish::{LeftAlone, Recovered};

/// What [`Bundles::verify`] found (the store's [`VerifyReport`], which it derefs to). `--json`
/// prints it as it serializes: the counts, and each problem with its `problem` kind, the
/// `object` it is about, where, and the sentence text output prints (`message`).
#[derive(Debug, Clone)]
pub struct Verified {
    /// The store's report.
    pub report: VerifyReport,
}

impl Deref for Verified {
    type Target = VerifyReport;

    fn deref(&self) -> &VerifyReport {
        &self.report
    }
}

impl Verified {
    /// The snapshots that need a damaged or missing object, each once, in id order: they
    /// come back from another copy of themselves (an unpack or a pull takes what the store
    /// lacks and replaces a damaged tree), not from `reindex`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.verify(&zeroclaw_bundle::Silent)?.damaged().is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn damaged(&self) -> Vec<ObjectId> {
        let mut damaged: Vec<ObjectId> = self
            .report
            .problems
            .iter()
            .filter_map(|p| match p {
                VerifyProblem::CorruptReached { snapshot, .. }
                | VerifyProblem::Missing { snapshot, .. } => Some(*snapshot),
                _ => None,
            })
            .collect();
        damaged.sort();
        damaged.dedup();
        damaged
    }
}

impl Serialize for Verified {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        // The store's type names an object `id`; the vocabulary says `object` everywhere, and
        // each problem carries the sentence text output prints.
        let mut v = serde_json::to_value(&self.report).map_err(S::Error::custom)?;
        if let Some(problems) = v.get_mut("problems").and_then(|p| p.as_array_mut()) {
            for (p, problem) in problems.iter_mut().zip(&self.report.problems) {
                if let Some(m) = p.as_object_mut() {
                    if let Some(id) = m.remove("id") {
                        m.insert("object".into(), id);
                    }
                    m.insert("message".into(), problem.to_string().into());
                }
            }
        }
        v.serialize(s)
    }
}

/// What [`Bundles::forget`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Forgot {
    /// The snapshot forgotten.
    pub snapshot: ObjectId,
    /// A running mount still serves it: its data stays until that mount ends.
    pub served_by_a_mount: bool,
}

impl Serialize for Recovered {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let paths = |list: &[std::path::PathBuf]| -> Vec<String> {
            list.iter().map(|p| host_path(p)).collect()
        };
        let mut m = s.serialize_struct("Recovered", 5)?;
        m.serialize_field("destination", &host_path(&self.dest))?;
        m.serialize_field(
            "restored_from",
            &self.restored_from.as_deref().map(host_path),
        )?;
        m.serialize_field("removed_old", &paths(&self.removed_old))?;
        m.serialize_field("removed_staging", &paths(&self.removed_staging))?;
        m.serialize_field("left_alone", &self.left_alone)?;
        m.end()
    }
}

impl Serialize for LeftAlone {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("LeftAlone", 2)?;
        m.serialize_field("path", &host_path(&self.path))?;
        m.serialize_field("reason", self.reason)?;
        m.end()
    }
}

impl Bundles {
    /// Checks every object of the store against its id and every snapshot's closure; the
    /// problems found are in the report (an empty list: all is well).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.verify(&zeroclaw_bundle::Silent)?.problems.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self, progress: &dyn Progress) -> Result<Verified> {
        let root = self.store.root().display().to_string();
        // The phase begins once its total is known (no `0 B/0 B` before it).
        let mut begun = false;
        let report = self.store.maintenance().verify(&mut |done, total| {
            if total == 0 {
                return;
            }
            if !begun {
                progress.begin(
                    "verifying",
                    Some(Totals {
                        files: 0,
                        bytes: total,
                    }),
                );
                begun = true;
            }
            progress.advance(Totals {
                files: 0,
                bytes: done,
            })
        });
        progress.finish();
        report
            .map(|report| Verified { report })
            .map_err(|e| Error::new(Verb::Verify, root, e.into()))
    }

    /// Removes the objects no snapshot (and no running mount) reaches that are older than
    /// `grace_secs` (a capture in progress writes its objects before its snapshot).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert_eq!(bundles.gc(0)?.removed, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gc(&self, grace_secs: u64) -> Result<GcReport> {
        let root = self.store.root().display().to_string();
        self.store
            .maintenance()
            .gc(grace_secs)
            .map_err(|e| Error::new(Verb::Gc, root, e.into()))
    }

    /// Rebuilds the catalog (the list of snapshots and their names) from the snapshot records,
    /// and writes the tree indexes that are missing or bad. Records left out and names moved
    /// are in the report's problems.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// bundles.snapshot_dir(&tree, Some("empty"), &Silent)?;
    /// assert_eq!(bundles.reindex()?.snapshots, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reindex(&self) -> Result<ReindexReport> {
        let root = self.store.root().display().to_string();
        self.store
            .maintenance()
            .reindex()
            .map_err(|e| Error::new(Verb::Reindex, root, e.into()))
    }

    /// Forgets the snapshot `reference` names: its record and catalog entry go (a running
    /// mount keeps serving it), and [`Bundles::gc`] frees what only it reached once that is
    /// older than the grace period.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, Some("empty"), &Silent)?;
    /// let gone = bundles.forget("empty")?;
    /// assert_eq!((gone.snapshot, gone.served_by_a_mount), (snap.id, false));
    /// assert!(bundles.list()?.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn forget(&self, reference: &str) -> Result<Forgot> {
        let fail = |e: anyhow::Error| Error::new(Verb::Forget, reference, e);
        let id = self
            .stored("forget", reference)
            .map_err(|e| fail(e.into()))?;
        let holders =
            crate::provenance::holders(self.store.root(), &id).map_err(|e| fail(e.into()))?;
        if let Some(first) = holders.first() {
            return Err(fail(anyhow::anyhow!(
                "snapshot {} is what agent {} of {} was last imported from{}: its next update \
                 merges against it, so it is kept; to let it go, remove {} (the agent is then \
                 imported beside, not updated) and forget it again",
                id.short(16),
                first.alias,
                first.install.display(),
                match holders.len() {
                    1 => String::new(),
                    n => format!(
                        " (and {} more agent{})",
                        n - 1,
                        if n == 2 { "" } else { "s" }
                    ),
                },
                first.file.display()
            )));
        }
        let forgotten = self
            .store
            .maintenance()
            .forget(&id)
            .map_err(|e| fail(e.into()))?;
        Ok(Forgot {
            snapshot: id,
            served_by_a_mount: forgotten.served_by_a_mount,
        })
    }

    /// Repairs what an interrupted publish (export, checkout) left beside `dest`: restores the
    /// previous tree of an interrupted two-rename swap, removes stale staging and retired
    /// trees; a leftover that belongs to a publish still running, or to another destination,
    /// is left alone (the report says why). Needs no store.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let dest = dir.path().join("bundle");
    /// std::fs::create_dir(&dest)?;
    /// let done = zeroclaw_bundle::Bundles::recover(&dest)?;
    /// assert!(done.nothing_done() && done.left_alone.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recover(dest: &Path) -> Result<Recovered> {
        crate::publish::recover(dest)
            .with_context(|| format!("could not recover {}", dest.display()))
            .map_err(|e| Error::new(Verb::Recover, dest.display().to_string(), e))
    }
}
