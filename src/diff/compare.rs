//! A whole diff of two resolved [`Side`]s: the expansion check of each side, the semantic
//! section (what the agent may do, when both sides are whole agent bundles) with the grants
//! gate's fail-closed checks, then the Merkle-pruned walk. The caller gets the semantic section
//! first, then each file change, through a [`DiffSink`]; it prints, this module never does.
//!
//! A manifest that differs only in its export time (`provenance.exported_at`) is not a change
//! unless [`DiffOptions::export_time`] asks for it: it is then left out of the changes handed
//! to the sink and out of the totals, so two exports of an unchanged agent compare equal.

use zeroclaw_bundle_store::StoreError;

use crate::agent::{
    compare_bundles, compare_configs, manifests_differ_only_in_export_time, AgentError,
    SemanticChange, CONFIG_FILE, MANIFEST_FILE,
};
use crate::diff::side::{Side, SideError};
use crate::diff::{diff, Change, DiffError, Status, Summary};

/// What a side lacks when it names the bundle files without their bytes.
const NOT_HELD: &str = "does not hold the bundle's file contents (a digest pack; a remote \
     snapshot, whose diff fetches trees only; an incremental pack whose base is not in this \
     store; or a bundle file over 4 MiB)";

/// An output failure of the caller's sink (a closed pipe, say).
pub type SinkError = Box<dyn std::error::Error + Send + Sync>;

/// How a whole diff runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiffOptions {
    /// `--exit-on-new-grants`: a side whose grants cannot be read is an error, never a pass.
    pub gate: bool,
    /// `--export-time`: a manifest differing only in its export time counts as a change.
    pub export_time: bool,
}

/// Why a whole diff failed.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Side `name` (`A` or `B`), given as `arg`, could not be resolved or checked.
    #[error("side {name} ({arg})")]
    Side {
        /// `A` or `B`.
        name: char,
        /// The side argument as given.
        arg: String,
        /// What failed.
        #[source]
        source: Box<SideError>,
    },
    /// The gate cannot read side `name`'s grants: it names the bundle files without holding
    /// their bytes.
    #[error(
        "--exit-on-new-grants cannot check what the agent may do: side {name} ({label}) \
         {NOT_HELD}; compare a full snapshot, pack or bundle directory instead (`pull` \
         a remote snapshot, `unpack` a pack's base first)"
    )]
    GateNotHeld {
        /// `A` or `B`.
        name: char,
        /// The side's label.
        label: String,
    },
    /// The gate cannot read side `name`'s grants: it is not a whole agent bundle.
    #[error(
        "--exit-on-new-grants cannot check what the agent may do: side {name} ({label}) is \
         not a whole agent bundle (no {MANIFEST_FILE} and {CONFIG_FILE} at its root)"
    )]
    GateNotBundle {
        /// `A` or `B`.
        name: char,
        /// The side's label.
        label: String,
    },
    /// A side's bundle files could not be read.
    #[error(transparent)]
    Read(#[from] StoreError),
    /// The two bundles' manifests or configs could not be compared.
    #[error("could not compare the two agent bundles")]
    Bundles(#[source] AgentError),
    /// The walk failed.
    #[error("could not compare the two sides")]
    Walk(#[source] DiffError),
    /// The sink failed (its own error, unwrapped).
    #[error("{0}")]
    Output(SinkError),
}

impl CompareError {
    /// Side `name`'s error, with the argument it was given as.
    pub fn side(name: char, arg: &std::ffi::OsStr, source: SideError) -> CompareError {
        CompareError::Side {
            name,
            arg: arg.to_string_lossy().into_owned(),
            source: Box::new(source),
        }
    }
}

/// The semantic section: what the two sides' bundle files say.
#[derive(Debug, Clone, Default)]
pub struct Semantic {
    /// The changes (empty unless both sides are whole agent bundles holding their files).
    pub changes: Vec<SemanticChange>,
    /// The two manifests differ in their export time only.
    pub export_time_only: bool,
    /// That manifest is left out of the file changes and the totals (export time only, and
    /// [`DiffOptions::export_time`] not set).
    pub manifest_hidden: bool,
    /// Labels of the sides that name the bundle files without holding their bytes (so the
    /// section is left out; their files are still compared by id), with [`Semantic::NOT_HELD`].
    pub not_held: Vec<String>,
}

impl Semantic {
    /// What a side in [`Semantic::not_held`] lacks, as words.
    pub const NOT_HELD: &'static str = NOT_HELD;

    /// Whether B grants something A did not.
    pub fn new_grants(&self) -> bool {
        self.changes.iter().any(|c| c.grant)
    }
}

/// Where a whole diff hands its results, in order: the semantic section once, then each file
/// change (see [`crate::diff`] for their order).
pub trait DiffSink {
    /// The semantic section (possibly empty), before any file change.
    fn semantic(&mut self, section: &Semantic) -> Result<(), SinkError>;
    /// One file change.
    fn change(&mut self, change: &Change) -> Result<(), SinkError>;
}

/// What a whole diff found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The file totals (without a hidden manifest).
    pub summary: Summary,
    /// Semantic changes handed out.
    pub semantic_changes: usize,
    /// Whether B grants something A did not.
    pub new_grants: bool,
}

/// Runs a whole diff of `a` and `b`: checks each side's expansion (unless the two roots are
/// equal: the walk prunes them), reads the semantic section (failing closed with
/// [`DiffOptions::gate`]), hands it to `sink`, then walks the trees handing `sink` each change.
pub fn compare_sides(
    a: &Side,
    b: &Side,
    opts: DiffOptions,
    sink: &mut dyn DiffSink,
) -> Result<Report, CompareError> {
    // Equal trees are never expanded (the walk prunes them at the root): no check then, which
    // is most of a diff of a directory against its own snapshot.
    if a.root.entry.kind != b.root.entry.kind || a.root.entry.id != b.root.entry.id {
        for (name, side) in [('A', a), ('B', b)] {
            side.check_expansion().map_err(|e| CompareError::Side {
                name,
                arg: side.arg().to_string(),
                source: Box::new(e.into()),
            })?;
        }
    }
    let semantic = semantic(a, b, opts)?;
    sink.semantic(&semantic).map_err(CompareError::Output)?;
    let hide = semantic.manifest_hidden;
    let hidden = |c: &Change| hide && c.status == Status::M && c.path == MANIFEST_FILE;
    let (sa, sb) = (a.tree_side(), b.tree_side());
    let mut left_out = Vec::new();
    let mut summary = diff(sa.as_ref(), &a.root, sb.as_ref(), &b.root, &mut |c| {
        if hidden(c) {
            left_out.push(c.clone());
            return Ok(());
        }
        sink.change(c).map_err(DiffError::Output)
    })
    .map_err(|e| match e {
        DiffError::Output(e) => CompareError::Output(e),
        e => CompareError::Walk(e),
    })?;
    for c in &left_out {
        summary.discount(c);
    }
    Ok(Report {
        summary,
        semantic_changes: semantic.changes.len(),
        new_grants: semantic.new_grants(),
    })
}

/// A side's bundle files.
enum BundleFiles {
    /// Both files, with their bytes.
    Held { manifest: Vec<u8>, config: Vec<u8> },
    /// The side names them without holding their bytes.
    NotHeld,
    /// Not a whole agent bundle (no manifest and config at its root, or a `SNAP:PATH` subtree).
    NotBundle,
}

/// The semantic section, when both sides are whole agent bundles. With `opts.gate`, a side
/// whose grants cannot be read is an error: the gate never passes what it could not check.
fn semantic(a: &Side, b: &Side, opts: DiffOptions) -> Result<Semantic, CompareError> {
    // Two reads of each side's root: the manifest, then the rest (an Agent Plugin's files
    // with the config).
    let files = |s: &Side| -> Result<(BundleFiles, Option<String>), StoreError> {
        let manifest = s.top_file(MANIFEST_FILE)?;
        let [config, plugin, mcp] = s.top_files([
            CONFIG_FILE,
            crate::plugin::MANIFEST_FILE,
            crate::plugin::MCP_FILE,
        ])?;
        let bundle = match (manifest, config) {
            (Some(Some(manifest)), Some(Some(config))) => BundleFiles::Held { manifest, config },
            (Some(None), _) | (_, Some(None)) => BundleFiles::NotHeld,
            _ => BundleFiles::NotBundle,
        };
        // What an Agent Plugin's servers mean to ZeroClaw, when it holds its files' bytes.
        let plugin = match (plugin, mcp) {
            (Some(Some(p)), Some(Some(m))) => crate::plugin::config_of(&p, Some(&m)),
            (Some(Some(p)), None) => crate::plugin::config_of(&p, None),
            _ => None,
        };
        Ok((bundle, plugin))
    };
    let ((fa, pa), (fb, pb)) = (files(a)?, files(b)?);
    if let (BundleFiles::NotBundle, BundleFiles::NotBundle, Some(pa), Some(pb)) = (&fa, &fb, pa, pb)
    {
        // Two Agent Plugins: what their servers mean to ZeroClaw, key by key, each change
        // marked by the one grant model.
        let changes = compare_configs(&pa, &pb).map_err(CompareError::Bundles)?;
        return Ok(Semantic {
            changes,
            ..Semantic::default()
        });
    }
    let mut not_held = Vec::new();
    for (name, side, f) in [('A', a, &fa), ('B', b, &fb)] {
        let label = side.label.clone();
        match f {
            BundleFiles::NotHeld if opts.gate => {
                return Err(CompareError::GateNotHeld { name, label })
            }
            BundleFiles::NotBundle if opts.gate => {
                return Err(CompareError::GateNotBundle { name, label })
            }
            BundleFiles::NotHeld => not_held.push(label),
            _ => {}
        }
    }
    match (fa, fb) {
        (
            BundleFiles::Held {
                manifest: ma,
                config: ca,
            },
            BundleFiles::Held {
                manifest: mb,
                config: cb,
            },
        ) => {
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            let changes = compare_bundles(&text(&ma), &text(&ca), &text(&mb), &text(&cb))
                .map_err(CompareError::Bundles)?;
            let export_time_only = manifests_differ_only_in_export_time(&ma, &mb);
            Ok(Semantic {
                changes,
                export_time_only,
                manifest_hidden: export_time_only && !opts.export_time,
                not_held,
            })
        }
        _ => Ok(Semantic {
            not_held,
            ..Semantic::default()
        }),
    }
}
