//! `diff` in the public API: a streaming diff ([`Bundles::diff_stream`]) that hands a
//! [`DiffSink`] each side as it is resolved, who signed them, the semantic section, then each
//! file change (with its patch when asked) as the walk finds it, so a caller prints a huge
//! diff as it goes; and the collected form ([`Bundles::diff`], [`Diff`]) built on it. Both
//! read every reference form of the one grammar (`DIR | PACK | SNAPSHOT | NAME | agent/ALIAS
//! | REMOTE/REF[:PATH]`). [`Bundles::diff_in`] holds the rule of a diff and its store: it
//! creates none (directories and packs are hashed in a scratch store when there is none).
//!
//! The `--json` lines of `diff` are the serializations of [`DiffLine`]: one per change, then
//! the summary ([`DiffReport`]), README "JSON output".

use std::ffi::OsStr;
use std::path::Path;

use serde::{Serialize, Serializer};
use zeroclaw_bundle_store::{unescape_name, ObjectId};

use super::json::{host_path_opt, Name};
use super::{
    Bundles, Change, DiffOptions, Error, Progress, Result, Semantic, SemanticChange, SignerTrust,
    Summary, Verb,
};
use crate::diff::compare::{compare_sides, CompareError, Report};
use crate::diff::content::patch;
use crate::diff::side::{paths_only, refuse_missing_path, resolve_side, scratch_store, Side};
use crate::sign::Checked;

/// An output failure of a [`DiffSink`] (a closed pipe, say), handed back unchanged in the
/// error's cause chain.
pub use crate::diff::compare::SinkError;
pub use crate::diff::content::{Patch, Shown, CONTENT_CAP};
pub use crate::diff::side::{DirCapture, SideKind, SideStats};

/// What a diff of two sides compares, and how.
///
/// ```
/// let request = zeroclaw_bundle::DiffRequest {
///     a: "agent/coder".as_ref(),
///     b: "./coder-bundle".as_ref(),
///     patches: true,
///     ..Default::default()
/// };
/// assert!(!request.options.gate && !request.signatures);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct DiffRequest<'a> {
    /// Side A: `SNAPSHOT[:PATH]`, a directory, a pack file, or `REMOTE/SNAPSHOT[:PATH]`.
    pub a: &'a OsStr,
    /// Side B, as side A.
    pub b: &'a OsStr,
    /// The grants gate and the export-time rule.
    pub options: DiffOptions,
    /// Hand each content change its patch (`-p`): a directory side then keeps the bytes of its
    /// small files while it is hashed.
    pub patches: bool,
    /// Check who signed each side and hand it to [`DiffSink::signatures`] (only when a side
    /// carries a signature).
    pub signatures: bool,
    /// The allowed_signers file the signers are checked against, over the store's setting.
    pub allowed_signers: Option<&'a Path>,
}

/// One side of a diff as resolved: what a caller says about it (its label, its `--json`
/// description, what hashing a directory skipped, what reading it cost).
#[derive(Clone, Debug)]
pub struct DiffSide {
    /// `A` or `B`.
    pub name: char,
    /// The short form text output uses (a short id, `id:path`, a path, `remote/id`).
    pub label: String,
    /// What the side is.
    pub kind: SideKind,
    /// The id of the compared tree (or file).
    pub root: ObjectId,
    /// For a directory side: what hashing it did and what the reader did not follow.
    pub capture: Option<DirCapture>,
    /// What reading the side cost (trees from its index or objects, a remote's traffic):
    /// `None` for a pack or a directory.
    pub stats: Option<SideStats>,
}

impl DiffSide {
    fn of(name: char, side: &Side) -> DiffSide {
        DiffSide {
            name,
            label: side.label.clone(),
            kind: side.kind.clone(),
            root: side.root.entry.id,
            capture: side.capture.clone(),
            stats: side.stats(),
        }
    }
}

/// A side's `--json` description: `kind`, its fields, `root` (the compared tree or file's
/// object id, full) and `label` (the short form text output uses), then `path` (with
/// `path_bytes` and `display`) for a side limited to a subtree.
impl Serialize for DiffSide {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct SideDoc<'a> {
            kind: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            remote: Option<&'a str>,
            #[serde(
                skip_serializing_if = "Option::is_none",
                serialize_with = "host_path_opt"
            )]
            pack: Option<&'a Path>,
            #[serde(
                skip_serializing_if = "Option::is_none",
                serialize_with = "host_path_opt"
            )]
            directory: Option<&'a Path>,
            #[serde(skip_serializing_if = "Option::is_none")]
            snapshot: Option<&'a ObjectId>,
            root: &'a ObjectId,
            label: &'a str,
            #[serde(flatten)]
            path: Option<Name<'a>>,
        }
        fn sub(path: &[u8]) -> Option<Name<'_>> {
            (!path.is_empty()).then(|| Name {
                key: "path",
                display_key: "display",
                raw: path.into(),
            })
        }
        let mut doc = SideDoc {
            kind: "",
            remote: None,
            pack: None,
            directory: None,
            snapshot: None,
            root: &self.root,
            label: &self.label,
            path: None,
        };
        match &self.kind {
            SideKind::Snapshot { id, path } => {
                doc.kind = "snapshot";
                doc.snapshot = Some(id);
                doc.path = sub(path);
            }
            SideKind::Pack { path, snapshot } => {
                doc.kind = "pack";
                doc.pack = Some(path);
                doc.snapshot = Some(snapshot);
            }
            SideKind::Directory { path } => {
                doc.kind = "directory";
                doc.directory = Some(path);
            }
            SideKind::Remote {
                remote,
                snapshot,
                path,
            } => {
                doc.kind = "remote";
                doc.remote = Some(remote);
                doc.snapshot = Some(snapshot);
                doc.path = sub(path);
            }
        }
        doc.serialize(s)
    }
}

/// Who signed one side of a diff.
#[derive(Clone, Debug, Serialize)]
pub struct SignedSide {
    /// `a` or `b`.
    #[serde(serialize_with = "lowercase")]
    pub side: char,
    /// The side's label (as [`DiffSide::label`]).
    #[serde(skip)]
    pub label: String,
    /// The side's snapshot (`None` for a directory, which is no snapshot).
    pub snapshot: Option<ObjectId>,
    /// One verdict per signature it carries (empty: unsigned; `None`: not a snapshot).
    pub signatures: Option<Vec<Checked>>,
}

fn lowercase<S: Serializer>(c: &char, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&c.to_ascii_lowercase().to_string())
}

impl SignedSide {
    /// Who signed, in words: `unsigned`, each signature's verdict, or that a directory
    /// carries none.
    pub fn summary(&self) -> String {
        match &self.signatures {
            None => "not a snapshot (a directory carries no signatures)".to_string(),
            Some(checked) => crate::sign::summary(checked),
        }
    }
}

/// Where a streaming diff hands what it finds, in this order: each side once it is resolved
/// (A, then B), who signed them (when asked and a side carries a signature), the semantic
/// section, then each file change as the walk finds it. An error a method returns stops the
/// diff; [`Bundles::diff_stream`] fails with it in its cause chain.
pub trait DiffSink {
    /// A side was resolved (before anything is compared).
    fn side(&mut self, side: &DiffSide) -> std::result::Result<(), SinkError> {
        let _ = side;
        Ok(())
    }

    /// Who signed sides A and B, with what the operator should know about the allowed
    /// signers read (lines left out, a store setting that could not be read).
    fn signatures(
        &mut self,
        sides: &[SignedSide; 2],
        notes: &[String],
    ) -> std::result::Result<(), SinkError> {
        let _ = (sides, notes);
        Ok(())
    }

    /// The semantic section (possibly empty), before any file change.
    fn semantic(&mut self, section: &Semantic) -> std::result::Result<(), SinkError>;

    /// One file change, with its patch when [`DiffRequest::patches`] asked for it and the
    /// change has content to show (an added, deleted or modified file).
    fn change(
        &mut self,
        change: &Change,
        patch: Option<&Patch>,
    ) -> std::result::Result<(), SinkError>;
}

/// What a whole diff found, once the walk ended. Its serialization is the summary line of
/// `diff --json`: the totals, both sides described, and whether B grants something new.
#[derive(Clone, Debug, Serialize)]
pub struct DiffReport {
    /// The file totals (without a manifest that differs only in its export time, unless
    /// asked).
    #[serde(flatten)]
    pub summary: Summary,
    /// How many semantic changes were handed out.
    #[serde(skip)]
    pub semantic_changes: usize,
    /// Whether B grants the agent something A did not.
    pub new_grants: bool,
    /// Side A, with what reading it cost.
    pub a: DiffSide,
    /// Side B, with what reading it cost.
    pub b: DiffSide,
}

impl DiffReport {
    /// True when the sides differ (a file change or a semantic change).
    pub fn differs(&self) -> bool {
        self.summary.differs() || self.semantic_changes > 0
    }
}

/// One line of `diff --json`, tagged by `type`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum DiffLine<'a> {
    /// Who signed one side.
    Signatures(&'a SignedSide),
    /// A semantic change.
    Semantic(&'a SemanticChange),
    /// A file change.
    File(&'a Change),
    /// The totals, last.
    Summary(&'a DiffReport),
}

/// A file change in `--json`: `status`, the path under the name rules (`path`, `path_bytes`,
/// `display`; for a rename also `from`, `from_bytes`, `from_display`), and each side's `kind`,
/// `mode`, `size` and `object`.
impl Serialize for Change {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct EntryDoc<'a> {
            kind: &'static str,
            mode: &'a str,
            size: u64,
            object: &'a ObjectId,
        }
        #[derive(Serialize)]
        struct ChangeDoc<'a> {
            status: super::Status,
            #[serde(flatten)]
            path: Name<'a>,
            #[serde(flatten)]
            from: Option<Name<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            old: Option<EntryDoc<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            new: Option<EntryDoc<'a>>,
        }
        fn entry(e: &crate::diff::EntryInfo) -> EntryDoc<'_> {
            EntryDoc {
                kind: e.kind,
                mode: &e.mode,
                size: e.size,
                object: &e.id,
            }
        }
        // The walk joins escaped names; the escape is reversible (`\\` for a backslash).
        ChangeDoc {
            status: self.status,
            path: Name {
                key: "path",
                display_key: "display",
                raw: unescape_name(&self.path).into(),
            },
            from: self.from.as_ref().map(|from| Name {
                key: "from",
                display_key: "from_display",
                raw: unescape_name(from).into(),
            }),
            old: self.old.as_ref().map(entry),
            new: self.new.as_ref().map(entry),
        }
        .serialize(s)
    }
}

impl Semantic {
    /// What the operator should know about the section that is not a change, one sentence
    /// each: a side that names the bundle files without holding them (the section is then
    /// left out), a manifest that differs only in its export time (not counted).
    ///
    /// ```
    /// assert!(zeroclaw_bundle::Semantic::default().notes().is_empty());
    /// ```
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .not_held
            .iter()
            .map(|label| {
                format!(
                    "{label} {}, so the agent section is left out; its files are compared \
                     by content id",
                    Semantic::NOT_HELD
                )
            })
            .collect();
        // Two exports of an unchanged agent differ in `provenance.exported_at` only: unless
        // asked, that manifest is left out of the changes, the summary and the exit status.
        if self.manifest_hidden {
            notes.push(format!(
                "{} differs only in its export time (provenance.exported_at), which is not \
                 counted as a change; --export-time reports it",
                crate::agent::MANIFEST_FILE
            ));
        }
        notes
    }
}

/// The comparison of two sides by [`Bundles::diff`]: the semantic section of two agent bundles
/// (grants, secrets, dropped entries, config keys) and the tree changes in path order.
#[derive(Debug, Clone)]
pub struct Diff {
    semantic: Semantic,
    changes: Vec<Change>,
    summary: Summary,
    new_grants: bool,
}

/// The collected diff: `semantic` (the semantic changes), `changes` (the file changes, as
/// `diff --json` writes them), the totals, and `new_grants`.
impl Serialize for Diff {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct DiffDoc<'a> {
            semantic: &'a [SemanticChange],
            changes: &'a [Change],
            #[serde(flatten)]
            summary: &'a Summary,
            new_grants: bool,
        }
        DiffDoc {
            semantic: &self.semantic.changes,
            changes: &self.changes,
            summary: &self.summary,
            new_grants: self.new_grants,
        }
        .serialize(s)
    }
}

impl Diff {
    /// True when the sides differ (a tree change or a semantic change).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn differs(&self) -> bool {
        self.summary.differs() || !self.semantic.changes.is_empty()
    }

    /// The semantic changes between two agent bundles (empty for plain trees).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn semantic(&self) -> impl Iterator<Item = &SemanticChange> {
        self.semantic.changes.iter()
    }

    /// The semantic section whole (with what could not be compared and why).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn semantic_section(&self) -> &Semantic {
        &self.semantic
    }

    /// The tree changes, in path order (name-status: added, modified, deleted, kind change).
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter()
    }

    /// Counts of the changes.
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// True when side B grants the agent something side A did not.
    ///
    /// See [`Bundles::diff`] for an example.
    pub fn new_grants(&self) -> bool {
        self.new_grants
    }
}

/// The walk's sink: the caller's, with each change's patch read from the two sides.
struct Patching<'s> {
    a: &'s Side,
    b: &'s Side,
    patches: bool,
    sink: &'s mut dyn DiffSink,
}

impl crate::diff::compare::DiffSink for Patching<'_> {
    fn semantic(&mut self, section: &Semantic) -> std::result::Result<(), SinkError> {
        self.sink.semantic(section)
    }

    fn change(&mut self, change: &Change) -> std::result::Result<(), SinkError> {
        let patch = if self.patches {
            patch(self.a, self.b, change)
        } else {
            None
        };
        self.sink.change(change, patch.as_ref())
    }
}

impl Bundles {
    /// Compares two sides, each a snapshot reference, a bundle directory (captured on the fly
    /// through the same verified reader), a pack file, or a remote ref `NAME/SNAPSHOT`. For
    /// two agent bundles the result also has the semantic section (grants, secrets, config).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent, Status};
    /// # let dir = tempfile::tempdir()?;
    /// let tree = dir.path().join("tree");
    /// std::fs::create_dir(&tree)?;
    /// std::fs::write(tree.join("a.txt"), "one\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let before = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// std::fs::write(tree.join("a.txt"), "two\n")?;
    /// let diff = bundles.diff(before.id.to_hex().as_ref(), tree.as_os_str(), Default::default(), &Silent)?;
    /// assert!(diff.differs() && !diff.new_grants());
    /// let change = diff.changes().next().unwrap();
    /// assert_eq!((change.status, change.path.as_str()), (Status::M, "a.txt"));
    /// assert_eq!(diff.semantic().count(), 0);
    /// assert_eq!(diff.summary().modified, 1);
    /// assert!(diff.semantic_section().not_held.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff(
        &self,
        a: &OsStr,
        b: &OsStr,
        options: DiffOptions,
        progress: &dyn Progress,
    ) -> Result<Diff> {
        let mut sink = DiffCollector::default();
        let request = DiffRequest {
            a,
            b,
            options,
            ..Default::default()
        };
        let report = self.diff_stream(&request, &mut sink, progress)?;
        Ok(Diff {
            semantic: sink.semantic,
            changes: sink.changes,
            summary: report.summary,
            new_grants: report.new_grants,
        })
    }

    /// [`Bundles::diff`] of two paths (bundle directories or packs) without a store: a scratch
    /// store is used and dropped.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    /// std::fs::create_dir(&a)?;
    /// std::fs::create_dir(&b)?;
    /// std::fs::write(b.join("new.txt"), "new\n")?;
    /// let diff = Bundles::diff_paths(&a, &b, &Silent)?;
    /// assert_eq!(diff.summary().added, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff_paths(a: &Path, b: &Path, progress: &dyn Progress) -> Result<Diff> {
        let target = format!("{} {}", a.display(), b.display());
        if !paths_only(&[a.as_os_str(), b.as_os_str()]) {
            return Err(Error::new(
                Verb::Diff,
                target,
                anyhow::anyhow!("diff_paths compares two paths (directories or pack files)"),
            ));
        }
        let (_dir, store) =
            scratch_store().map_err(|e| Error::new(Verb::Diff, target, e.into()))?;
        Bundles::from_store(store).diff(
            a.as_os_str(),
            b.as_os_str(),
            DiffOptions::default(),
            progress,
        )
    }

    /// A streaming diff in the store at `store`, which it never creates: the store when there
    /// is one; else, when both sides are paths (directories or packs), a scratch store dropped
    /// at the end; else [`crate::ErrorKind::NoStore`]. A side spelled as a path that is not
    /// there is refused first. See [`Bundles::diff_stream`].
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, DiffRequest, ErrorKind, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// let store = dir.path().join("store");
    /// let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    /// std::fs::create_dir(&a)?;
    /// std::fs::create_dir(&b)?;
    /// let request = DiffRequest { a: a.as_os_str(), b: b.as_os_str(), ..Default::default() };
    /// let mut sink = zeroclaw_bundle::DiffCollector::default();
    /// assert!(!Bundles::diff_in(&store, &request, &mut sink, &Silent)?.differs());
    /// assert!(!store.exists());
    /// let request = DiffRequest { a: "agent/coder".as_ref(), ..request };
    /// let err = Bundles::diff_in(&store, &request, &mut sink, &Silent).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NoStore);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff_in(
        store: &Path,
        request: &DiffRequest<'_>,
        sink: &mut dyn DiffSink,
        progress: &dyn Progress,
    ) -> Result<DiffReport> {
        refuse_missing_sides(request)?;
        match Bundles::open_existing(store)? {
            Some(bundles) => bundles.diff_stream(request, sink, progress),
            None if paths_only(&[request.a, request.b]) => {
                let (_dir, scratch) = scratch_store()
                    .map_err(|e| Error::new(Verb::Diff, target(request), e.into()))?;
                // Dropped (at the end of this statement) before its directory.
                Bundles::from_store(scratch).diff_stream(request, sink, progress)
            }
            None => Bundles::open(store)?.diff_stream(request, sink, progress),
        }
    }

    /// Compares the two sides `request` names, handing `sink` what it finds as it goes (see
    /// [`DiffSink`] for the order); returns the totals and both sides described. With
    /// [`DiffOptions::gate`], a side whose grants cannot be read (not a whole agent bundle, or
    /// a side holding no file contents) fails the diff: the gate never passes what it could
    /// not check.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Change, DiffRequest, DiffSink, Patch, Semantic, Silent, SinkError};
    /// struct Lines(Vec<String>);
    /// impl DiffSink for Lines {
    ///     fn semantic(&mut self, _: &Semantic) -> Result<(), SinkError> { Ok(()) }
    ///     fn change(&mut self, c: &Change, patch: Option<&Patch>) -> Result<(), SinkError> {
    ///         self.0.push(format!("{:?}\t{} {}", c.status, c.path, patch.is_some()));
    ///         Ok(())
    ///     }
    /// }
    /// # let dir = tempfile::tempdir()?;
    /// let tree = dir.path().join("tree");
    /// std::fs::create_dir(&tree)?;
    /// std::fs::write(tree.join("a.txt"), "one\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let before = bundles.snapshot_dir(&tree, None, &Silent)?.id.to_hex();
    /// std::fs::write(tree.join("a.txt"), "two\n")?;
    /// let request = DiffRequest { a: before.as_ref(), b: tree.as_os_str(), patches: true, ..Default::default() };
    /// let mut lines = Lines(Vec::new());
    /// let report = bundles.diff_stream(&request, &mut lines, &Silent)?;
    /// assert_eq!(lines.0, ["M\ta.txt true"]);
    /// assert_eq!((report.summary.modified, report.b.label.as_str()), (1, tree.to_str().unwrap()));
    /// assert_eq!(serde_json::to_value(&report)?["a"]["kind"], "snapshot");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff_stream(
        &self,
        request: &DiffRequest<'_>,
        sink: &mut dyn DiffSink,
        progress: &dyn Progress,
    ) -> Result<DiffReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Diff, target(request), e);
        let output = |e: SinkError| fail(CompareError::Output(e).into());
        refuse_missing_sides(request)?;
        let mut sides = Vec::with_capacity(2);
        for (name, arg) in [('A', request.a), ('B', request.b)] {
            let side = resolve_side(&self.store, arg, request.patches, progress);
            // Each side's progress ends with it (a bar is not left over the notes about it).
            progress.finish();
            let side = side.map_err(|e| fail(CompareError::side(name, arg, e).into()))?;
            sink.side(&DiffSide::of(name, &side)).map_err(output)?;
            sides.push(side);
        }
        let (a, b) = (&sides[0], &sides[1]);
        if request.signatures {
            if let Some((signed, notes)) = self.signed(a, b, request).map_err(fail)? {
                sink.signatures(&signed, &notes).map_err(output)?;
            }
        }
        let mut patching = Patching {
            a,
            b,
            patches: request.patches,
            sink,
        };
        let report: Report =
            compare_sides(a, b, request.options, &mut patching).map_err(|e| fail(e.into()))?;
        Ok(DiffReport {
            summary: report.summary,
            semantic_changes: report.semantic_changes,
            new_grants: report.new_grants,
            a: DiffSide::of('A', a),
            b: DiffSide::of('B', b),
        })
    }

    /// Who signed sides `a` and `b`, checked against the allowed signers `request` and the
    /// store name; `None` when neither carries a signature (an unsigned pair says nothing, and
    /// reads no trust settings).
    fn signed(
        &self,
        a: &Side,
        b: &Side,
        request: &DiffRequest<'_>,
    ) -> anyhow::Result<Option<([SignedSide; 2], Vec<String>)>> {
        let mut found = Vec::with_capacity(2);
        for (name, side) in [('A', a), ('B', b)] {
            let sigs = side
                .signatures()
                .map_err(|e| CompareError::side(name, OsStr::new(side.arg()), e))?;
            found.push((name, side, sigs));
        }
        if found
            .iter()
            .all(|(_, _, s)| s.as_ref().is_none_or(|(_, v)| v.is_empty()))
        {
            return Ok(None);
        }
        let trust = SignerTrust::resolve(self.root(), request.allowed_signers, false)?;
        let signed = found.into_iter().map(|(name, side, sigs)| SignedSide {
            side: name,
            label: side.label.clone(),
            snapshot: sigs.as_ref().map(|(id, _)| *id),
            signatures: sigs
                .as_ref()
                .map(|(id, v)| crate::sign::check_all(id, v, trust.allowed.as_ref())),
        });
        let [a, b]: [SignedSide; 2] = signed
            .collect::<Vec<_>>()
            .try_into()
            .map_err(|_| anyhow::anyhow!("two sides were resolved"))?;
        Ok(Some(([a, b], trust.notes)))
    }
}

/// Refuses a side spelled as a path that is not there, before a store is needed (and before
/// it could be read as a snapshot or a remote ref: `./x` is no remote `.`).
fn refuse_missing_sides(request: &DiffRequest<'_>) -> Result<()> {
    for (name, arg) in [('A', request.a), ('B', request.b)] {
        refuse_missing_path(arg).map_err(|e| {
            Error::new(
                Verb::Diff,
                target(request),
                CompareError::side(name, arg, e).into(),
            )
        })?;
    }
    Ok(())
}

fn target(request: &DiffRequest<'_>) -> String {
    format!(
        "{} {}",
        request.a.to_string_lossy(),
        request.b.to_string_lossy()
    )
}

/// A [`DiffSink`] that keeps what it is handed: the sides, who signed them, the semantic
/// section and every change (patches dropped).
#[derive(Debug, Default)]
pub struct DiffCollector {
    /// The sides, as resolved.
    pub sides: Vec<DiffSide>,
    /// Who signed them, when a side carries a signature.
    pub signatures: Option<[SignedSide; 2]>,
    /// The semantic section.
    pub semantic: Semantic,
    /// The file changes, in the order handed out.
    pub changes: Vec<Change>,
}

impl DiffSink for DiffCollector {
    fn side(&mut self, side: &DiffSide) -> std::result::Result<(), SinkError> {
        self.sides.push(side.clone());
        Ok(())
    }

    fn signatures(
        &mut self,
        sides: &[SignedSide; 2],
        _: &[String],
    ) -> std::result::Result<(), SinkError> {
        self.signatures = Some(sides.clone());
        Ok(())
    }

    fn semantic(&mut self, section: &Semantic) -> std::result::Result<(), SinkError> {
        self.semantic = section.clone();
        Ok(())
    }

    fn change(&mut self, change: &Change, _: Option<&Patch>) -> std::result::Result<(), SinkError> {
        self.changes.push(change.clone());
        Ok(())
    }
}
