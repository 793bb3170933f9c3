//! `diff <A> <B> [--stat | -p] [--exit-on-new-grants] [--export-time]` (and the global `-q`):
//! what changed between two snapshots, subtrees of snapshots (`SNAP:PATH`) or directories. For
//! two agent bundles, the semantic section (what the agent may do) comes first, then the files.
//! Exit 0 when equal, 1 when different, 2 on error (main), 3 with `--exit-on-new-grants` when B
//! grants something new. The gate fails closed: a side whose grants cannot be read (not a whole
//! agent bundle, or no file contents: a digest pack, a remote snapshot) is an error, never a
//! pass. A manifest that differs only in its export time is not a change unless
//! `--export-time` asks for it: two exports of an unchanged agent compare equal.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use serde_json::json;
use zeroclaw_bundle_store::limits::check_expansion;
use zeroclaw_bundle_store::{
    escape_text, resolve_path, EntryKind, ObjectId, ObjectSource, PackOverStore, PackReader,
    SnapshotSource, SourceKey, Store, TreeEntry,
};

use crate::agent::{
    compare_bundles, manifests_differ_only_in_export_time, mask_secret_lines, SemanticChange,
    CONFIG_FILE, MANIFEST_FILE,
};
use crate::capture::{keep_everything, root, Capture, KeepBytes, MemoryObjects, Sink};
use crate::cli::DiffArgs;
use crate::cmd::{escape_message, split_target, stdout_error, Ctx, Outcome, StdoutClosed};
use crate::diff::content::{unified, Shown, CONTENT_CAP};
use crate::diff::{diff, Change, DiffError, MemorySide, Root, SourceSide, Status, TreeSide};
use crate::progress::Progress;
use crate::remote::{parse_remote_ref, Remote, RemoteView};

/// Bundle files above this are not read for the semantic section.
const BUNDLE_FILE_CAP: u64 = 4 << 20;

/// One resolved side.
struct Side {
    label: String,
    root: Root,
    source: SideSource,
    /// Whether the side is a whole tree (not `SNAP:PATH` with a path), so bundle files sit at
    /// its root.
    whole: bool,
    /// What an expansion check names (a side read from trees someone else wrote); `None` for
    /// a directory, which was walked for real.
    expands: Option<String>,
    /// What the `--json` summary says of the side: its kind, full ids, the path it names.
    described: serde_json::Map<String, serde_json::Value>,
}

/// A side's `--json` description: `kind`, then `fields`, then `root` (the compared tree or
/// file's object id, full) and `label` (the short form text output uses).
fn describe(
    kind: &str,
    fields: serde_json::Value,
    root: &TreeEntry,
    label: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("kind".into(), json!(kind));
    if let serde_json::Value::Object(f) = fields {
        m.extend(f);
    }
    m.insert("root".into(), json!(root.id));
    m.insert("label".into(), json!(label));
    m
}

/// Adds `path` (with `path_bytes` and `display`) for a side limited to a subtree.
fn with_subtree(
    mut m: serde_json::Map<String, serde_json::Value>,
    sub: &[u8],
) -> serde_json::Map<String, serde_json::Value> {
    if !sub.is_empty() {
        crate::cmd::put_name(&mut m, "path", "display", sub);
    }
    m
}

enum SideSource {
    /// A stored snapshot: trees from its tree index (one file), blobs from the objects.
    Store(SnapshotSource),
    /// A pack, over this store when it is an update whose base the store holds.
    Pack(PackOverStore),
    Memory(Arc<MemoryObjects>),
    /// A remote snapshot: trees only (its file contents are never fetched by a diff).
    Remote(Box<RemoteView>),
}

impl Side {
    fn tree_side(&self) -> Box<dyn TreeSide + '_> {
        match &self.source {
            SideSource::Store(r) => Box::new(SourceSide(r)),
            SideSource::Pack(p) => Box::new(SourceSide(p)),
            SideSource::Memory(m) => Box::new(MemorySide(m)),
            SideSource::Remote(r) => Box::new(SourceSide(r.as_ref())),
        }
    }

    /// Checks that the side's tree expands within the limits before the walk expands it (a
    /// shared-subtree bomb would otherwise list more paths than exist), see
    /// [`check_expansion`].
    fn check_expansion(&self) -> Result<()> {
        let Some(label) = &self.expands else {
            return Ok(());
        };
        if self.root.entry.kind != EntryKind::Dir {
            return Ok(());
        }
        let source: &dyn ObjectSource = match &self.source {
            SideSource::Store(r) => r,
            SideSource::Pack(p) => p,
            SideSource::Remote(r) => r.as_ref(),
            SideSource::Memory(_) => return Ok(()),
        };
        check_expansion(source, &self.root.entry.id, label)?;
        Ok(())
    }

    /// Whether the side holds file contents (a digest pack and a remote side hold ids only).
    fn holds_contents(&self) -> bool {
        match &self.source {
            SideSource::Pack(p) => !p.pack().trees_only,
            SideSource::Remote(_) => false,
            SideSource::Store(_) | SideSource::Memory(_) => true,
        }
    }

    /// A top-level file of this side: `None` when there is no such file (or the side is a
    /// subtree), `Some(None)` when the side names it but does not hold its bytes (a digest
    /// pack, or a file over the cap).
    fn top_file(&self, name: &str) -> Result<Option<Option<Vec<u8>>>> {
        if !self.whole || self.root.entry.kind != EntryKind::Dir {
            return Ok(None);
        }
        let side = self.tree_side();
        let tree = side.tree(&self.root.entry.id)?;
        let Some(e) = tree.get(name.as_bytes()).filter(|e| e.kind.is_file()) else {
            return Ok(None);
        };
        Ok(Some(side.bytes(&e.id, e.size, BUNDLE_FILE_CAP)?))
    }
}

/// Runs `diff`.
pub fn run(args: DiffArgs, ctx: &Ctx) -> Result<Outcome> {
    // `-q` is the global option (before or after the command): it prints nothing, so asking
    // for an output form with it is a mistake said at once.
    if ctx.quiet && (args.stat || args.content) {
        bail!("-q/--quiet prints nothing: it cannot be combined with --stat or -p");
    }
    // A side spelled as a path that is not there is said as such, before a store is needed
    // and before it could be read as a snapshot or a remote ref (`./x` is no remote `.`).
    for (name, arg) in [('A', &args.a), ('B', &args.b)] {
        refuse_missing_path(arg)
            .with_context(|| format!("side {name} ({})", arg.to_string_lossy()))?;
    }
    // Directory and pack sides need no store, but a directory's stat cache lives in one (a
    // second diff of the same directory is then a stat walk). Without a store at the given
    // path, they use a scratch store in a temporary directory, dropped at the end: a diff
    // creates no store (a typo in --store must not leave one). Snapshot and remote sides need
    // the store: without it, "no store at PATH".
    let mut _scratch = None;
    let store = match ctx.existing_store()? {
        Some(store) => store,
        None if [&args.a, &args.b].iter().all(|s| Path::new(s).exists()) => {
            let dir = tempfile::Builder::new()
                .prefix("zeroclaw-bundle-diff-")
                .tempdir()
                .context("could not create a scratch store for the diff")?;
            let store = Store::open_or_create(&dir.path().join("store"))?;
            _scratch = Some(dir);
            store
        }
        None => ctx.store()?,
    };
    let a = resolve_side(&store, &args.a, args.content, ctx)
        .with_context(|| format!("side A ({})", args.a.to_string_lossy()))?;
    let b = resolve_side(&store, &args.b, args.content, ctx)
        .with_context(|| format!("side B ({})", args.b.to_string_lossy()))?;
    // Equal trees are never expanded (the walk prunes them at the root): no check then, which
    // is most of a diff of a directory against its own snapshot.
    if a.root.entry.kind != b.root.entry.kind || a.root.entry.id != b.root.entry.id {
        for (name, side, arg) in [('A', &a, &args.a), ('B', &b, &args.b)] {
            side.check_expansion()
                .with_context(|| format!("side {name} ({})", arg.to_string_lossy()))?;
        }
    }
    let Semantic {
        changes: semantic,
        export_time_only,
    } = semantic_changes(&a, &b, args.exit_on_new_grants, ctx)?;
    // Two exports of an unchanged agent differ in `provenance.exported_at` only: unless asked,
    // that manifest is left out of the changes, the summary and the exit status (and said).
    let hide_manifest = export_time_only && !args.export_time;
    if hide_manifest && !ctx.quiet {
        crate::note!(
            "note: {MANIFEST_FILE} differs only in its export time (provenance.exported_at), \
             which is not counted as a change; --export-time reports it"
        );
    }
    let hidden = |c: &Change| hide_manifest && c.status == Status::M && c.path == MANIFEST_FILE;
    let grants = semantic.iter().any(|c| c.grant);
    let out = std::io::stdout();
    let mut out = out.lock();
    let mode = if ctx.quiet {
        Mode::Quiet
    } else if ctx.json {
        Mode::Json
    } else if args.stat {
        Mode::Stat
    } else if args.content {
        Mode::Content
    } else {
        Mode::NameStatus
    };
    let mut printer = Printer {
        out: &mut out,
        mode,
        a: &a,
        b: &b,
        stat_rows: Vec::new(),
    };
    let outcome = |differs: bool| {
        if args.exit_on_new_grants && grants {
            Outcome::NewGrants
        } else if differs {
            Outcome::Different
        } else {
            Outcome::Success
        }
    };
    // The consumer of the output went away (`| head`): stop quietly, as every command does,
    // but keep the answer: output stops only once there was a change to print, so the exit
    // code still says "different" (or "new grants"), never "equal".
    let closed = |e: std::io::Error, differs: bool| -> Result<Outcome> {
        let e = stdout_error(e);
        if e.is::<StdoutClosed>() {
            Ok(outcome(differs))
        } else {
            Err(e)
        }
    };
    if let Err(e) = printer.semantic(&semantic) {
        return closed(e, true);
    }
    let (sa, sb) = (a.tree_side(), b.tree_side());
    let mut left_out = Vec::new();
    let summary = match diff(sa.as_ref(), &a.root, sb.as_ref(), &b.root, &mut |c| {
        if hidden(c) {
            left_out.push(c.clone());
            return Ok(());
        }
        printer.change(c).map_err(|e| DiffError::Output(e.into()))
    }) {
        Ok(mut summary) => {
            for c in &left_out {
                summary.discount(c);
            }
            summary
        }
        Err(DiffError::Output(e)) => match e.downcast::<std::io::Error>() {
            Ok(io) => return closed(*io, true),
            Err(e) => return Err(anyhow::anyhow!(e)),
        },
        Err(e) => return Err(e).context("could not compare the two sides"),
    };
    let differs = summary.differs() || !semantic.is_empty();
    if let Err(e) = printer.summary(&summary, grants).and_then(|()| out.flush()) {
        return closed(e, differs);
    }
    if ctx.verbose {
        for (name, side) in [('A', &a), ('B', &b)] {
            match &side.source {
                SideSource::Store(source) => {
                    let s = source.stats();
                    crate::note!(
                        "side {name}: {} trees from its tree index ({}), {} tree objects read",
                        s.trees_from_index,
                        if s.index_used { "used" } else { "not used" },
                        s.trees_from_objects
                    );
                }
                SideSource::Remote(r) => {
                    crate::note!("remote {}: {}", r.remote().name(), r.remote().traffic());
                }
                _ => {}
            }
        }
    }
    Ok(outcome(differs))
}

/// Refuses a side spelled as a path (`/x`, `./x`, `../x`, `.`, `..`, `~/x`) that does not exist:
/// it can only have meant a path, so "not a snapshot" or "no remote named `.`" would mislead.
fn refuse_missing_path(arg: &OsStr) -> Result<()> {
    let bytes = arg.as_encoded_bytes();
    let path_like = [&b"/"[..], b"./", b"../", b"~/"]
        .iter()
        .any(|p| bytes.starts_with(p))
        || bytes == b"."
        || bytes == b"..";
    if !path_like {
        return Ok(());
    }
    let path = Path::new(arg);
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() && !path.exists() => {
            bail!(
                "{} is a symlink to a path that does not exist",
                path.display()
            )
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("{} does not exist", path.display())
        }
        Err(e) => Err(e).with_context(|| format!("could not read {}", path.display())),
    }
}

/// A side argument: an existing directory, an existing file (a pack, or a digest pack), else
/// `SNAPSHOT[:PATH]`.
fn resolve_side(store: &Store, arg: &OsStr, keep_all: bool, ctx: &Ctx) -> Result<Side> {
    let path = Path::new(arg);
    if path.is_dir() {
        return capture_dir(store, path, keep_all, ctx);
    }
    if path.is_file() {
        let pack = PackReader::open(path)?;
        // The whole pack is checked first, as `unpack` checks it: a damaged pack is refused,
        // never compared (an object the walk prunes would otherwise go unread).
        pack.check_trailer()?;
        let snapshot = pack.snapshot()?;
        // An incremental pack reads what it does not carry from this store, when the store
        // holds its base (an update diffed before it is unpacked).
        let pack = PackOverStore::new(pack, Some(store));
        let label = format!("{} ({})", pack.pack().root.short(12), path.display());
        let entry = TreeEntry::dir(Vec::new(), snapshot.bytes(), snapshot.root);
        let described = describe(
            "pack",
            json!({"pack": crate::cmd::host_path(path), "snapshot": pack.pack().root}),
            &entry,
            &label,
        );
        return Ok(Side {
            label,
            described,
            root: Root { entry },
            source: SideSource::Pack(pack),
            whole: true,
            expands: Some(format!("pack {}", path.display())),
        });
    }
    let (reference, sub) = split_target(arg);
    if let Some((spec, snap)) = parse_remote_ref(store.root(), &reference)? {
        return remote_side(store, spec, &snap, &sub);
    }
    // A full id names its record directly: no catalog session (what a script comparing two
    // known snapshots passes, and what the other host sent). Anything else is resolved by
    // the catalog.
    let direct = reference
        .parse::<ObjectId>()
        .ok()
        .filter(|id| store.read_snapshot(id).is_ok());
    let id = match direct {
        Some(id) => Ok(id),
        None => store.resolve(&reference),
    }
    .with_context(|| match reference.split_once('/') {
        Some((name, _)) if name != "agent" => format!(
            "{} is not a file or directory, and {name:?} is not a configured remote (`remote list`), \
             so it was read as a snapshot of this store",
            arg.to_string_lossy()
        ),
        _ => format!(
            "{} is not a file or directory, so it was read as a snapshot",
            arg.to_string_lossy()
        ),
    })?;
    let snapshot = store.read_snapshot(&id)?;
    let reader = store.snapshot_source(&id);
    let entry = if sub.is_empty() {
        TreeEntry::dir(Vec::new(), snapshot.bytes(), snapshot.root)
    } else {
        resolve_path(&reader, &snapshot.root, &sub, &reference)?
    };
    let label = if sub.is_empty() {
        id.short(12)
    } else {
        format!("{}:{}", id.short(12), String::from_utf8_lossy(&sub))
    };
    let described = with_subtree(
        describe("snapshot", json!({"snapshot": id}), &entry, &label),
        &sub,
    );
    Ok(Side {
        label,
        described,
        root: Root { entry },
        source: SideSource::Store(reader),
        whole: sub.is_empty() || sub.iter().all(|b| *b == b'/'),
        expands: Some(format!("snapshot {}", id.short(12))),
    })
}

/// A remote snapshot ref (`NAME/SNAPSHOT[:PATH]`): its record and trees pack, never a blob.
fn remote_side(
    store: &Store,
    spec: crate::remote::RemoteSpec,
    snap: &str,
    sub: &[u8],
) -> Result<Side> {
    let remote = Remote::open(&spec, false)?;
    let id = remote.resolve(snap)?;
    let view = RemoteView::open(remote, id, store.objects().tmp_dir(), false)?;
    let label = format!("{}/{}", spec.name, id.short(12));
    let root = view.snapshot().root;
    let entry = if sub.is_empty() {
        TreeEntry::dir(Vec::new(), view.snapshot().bytes(), root)
    } else {
        resolve_path(&view, &root, sub, &label)?
    };
    let expands = Some(format!("remote snapshot {label}"));
    let label = if sub.is_empty() {
        label
    } else {
        format!("{label}:{}", String::from_utf8_lossy(sub))
    };
    let described = with_subtree(
        describe(
            "remote",
            json!({"remote": spec.name, "snapshot": id}),
            &entry,
            &label,
        ),
        sub,
    );
    Ok(Side {
        label,
        described,
        root: Root { entry },
        source: SideSource::Remote(Box::new(view)),
        whole: sub.is_empty() || sub.iter().all(|b| *b == b'/'),
        expands,
    })
}

/// Hashes a directory with the capture's reader, writing nothing to the store. Its stat
/// cache lives under a `diff:` key of its own, so a second diff of the same directory is a stat
/// walk, and a snapshot's cache never names an object this capture did not write.
fn capture_dir(store: &Store, dir: &Path, keep_all: bool, ctx: &Ctx) -> Result<Side> {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let fd = root::open_configured(&abs)?
        .with_context(|| format!("{} does not exist", abs.display()))?;
    let objects = Arc::new(MemoryObjects::default());
    let keep = if keep_all {
        KeepBytes::Every(CONTENT_CAP)
    } else {
        KeepBytes::TopLevel(BUNDLE_FILE_CAP)
    };
    // Nothing is written to the objects, but the capture API takes the store's shared lock
    // for the stat cache it keeps.
    let lock = store.write_lock()?;
    let progress = ctx.term_progress();
    progress.begin("hashing", None);
    let mut capture = Capture::begin(store, &lock, SourceKey::Diff(abs.clone()), &progress)?
        .with_sink(Sink::Memory(Arc::clone(&objects), keep));
    let walked = capture.walk(fd, ".", &keep_everything)?;
    let work = capture.stats();
    let (report, update) = capture.finish();
    if ctx.verbose {
        crate::note!(
            "directory {}: {} file(s) hashed, {} from its stat cache",
            abs.display(),
            work.hashed_files,
            work.cached_files
        );
    }
    // What the reader refuses to follow is not compared: say so, or a symlink planted in a
    // received bundle would be invisible here.
    if !report.skipped.is_empty() && !ctx.quiet {
        crate::note!(
            "note: {} entr{} of {} not compared (the reader skips symlinks, special files and hard links):",
            report.skipped.len(),
            if report.skipped.len() == 1 { "y" } else { "ies" },
            abs.display()
        );
        for s in report.skipped.iter().take(20) {
            crate::note!("  {} ({})", s.path, s.reason);
        }
        if report.skipped.len() > 20 {
            crate::note!("  ... and {} more", report.skipped.len() - 20);
        }
    }
    // Only an optimisation: a failure to record it never fails the diff, and an unchanged
    // cache costs no catalog write.
    let _ = store.update_source_cache(&update);
    let entry = TreeEntry::dir(Vec::new(), walked.size, walked.id);
    let label = abs.display().to_string();
    Ok(Side {
        described: describe(
            "directory",
            json!({"directory": crate::cmd::host_path(&abs)}),
            &entry,
            &label,
        ),
        label,
        root: Root { entry },
        source: SideSource::Memory(objects),
        whole: true,
        expands: None,
    })
}

/// What the two sides' bundle files say.
struct Semantic {
    /// The semantic section (empty unless both sides are whole agent bundles).
    changes: Vec<SemanticChange>,
    /// Whether the two manifests differ in their export time only.
    export_time_only: bool,
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

/// The semantic section, when both sides are whole agent bundles. A side that names the
/// bundle files without holding their bytes (a digest pack) is said on stderr: its files are
/// still compared by id. With `gate` (`--exit-on-new-grants`), a side whose grants cannot be
/// read is an error: the gate never passes what it could not check.
fn semantic_changes(a: &Side, b: &Side, gate: bool, ctx: &Ctx) -> Result<Semantic> {
    const NOT_HELD: &str = "does not hold the bundle's file contents (a digest pack; a remote \
         snapshot, whose diff fetches trees only; an incremental pack whose base is not in this \
         store; or a bundle file over 4 MiB)";
    let files = |s: &Side| -> Result<BundleFiles> {
        Ok(
            match (s.top_file(MANIFEST_FILE)?, s.top_file(CONFIG_FILE)?) {
                (Some(Some(manifest)), Some(Some(config))) => {
                    BundleFiles::Held { manifest, config }
                }
                (Some(None), _) | (_, Some(None)) => BundleFiles::NotHeld,
                _ => BundleFiles::NotBundle,
            },
        )
    };
    let (fa, fb) = (files(a)?, files(b)?);
    for (name, side, f) in [('A', a, &fa), ('B', b, &fb)] {
        match f {
            BundleFiles::NotHeld if gate => bail!(
                "--exit-on-new-grants cannot check what the agent may do: side {name} ({}) \
                 {NOT_HELD}; compare a full snapshot, pack or bundle directory instead (`pull` \
                 a remote snapshot, `unpack` a pack's base first)",
                side.label
            ),
            BundleFiles::NotBundle if gate => bail!(
                "--exit-on-new-grants cannot check what the agent may do: side {name} ({}) is \
                 not a whole agent bundle (no {MANIFEST_FILE} and {CONFIG_FILE} at its root)",
                side.label
            ),
            BundleFiles::NotHeld if !ctx.quiet => crate::note!(
                "note: {} {NOT_HELD}, so the agent section is left out; its files are compared \
                 by content id",
                side.label
            ),
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
                .context("could not compare the two agent bundles")?;
            Ok(Semantic {
                changes,
                export_time_only: manifests_differ_only_in_export_time(&ma, &mb),
            })
        }
        _ => Ok(Semantic {
            changes: Vec::new(),
            export_time_only: false,
        }),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    NameStatus,
    Stat,
    Content,
    Json,
    Quiet,
}

struct Printer<'p, W: Write> {
    out: &'p mut W,
    mode: Mode,
    a: &'p Side,
    b: &'p Side,
    stat_rows: Vec<(String, String)>,
}

impl<W: Write> Printer<'_, W> {
    fn semantic(&mut self, changes: &[SemanticChange]) -> std::io::Result<()> {
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => {
                for c in changes {
                    let mut v = serde_json::to_value(c).map_err(std::io::Error::other)?;
                    v["type"] = json!("semantic");
                    writeln!(self.out, "{v}")?;
                }
                Ok(())
            }
            _ if changes.is_empty() => Ok(()),
            _ => {
                writeln!(
                    self.out,
                    "Agent bundle changes (lines marked ! grant something new):"
                )?;
                for c in changes {
                    let mark = if c.grant { "!" } else { " " };
                    let what = match (&c.old, &c.new) {
                        (None, Some(n)) if c.item == "key" => format!("added: {n}"),
                        (Some(o), None) if c.item == "key" => format!("removed (was {o})"),
                        (Some(o), Some(n)) => format!("{o} -> {n}"),
                        (None, Some(n)) if n.text == c.path => "added".to_string(),
                        (None, Some(n)) => format!("added: {n}"),
                        (Some(_), None) => "removed".to_string(),
                        (None, None) => String::new(),
                    };
                    let note = if c.note.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", c.note)
                    };
                    // Paths and values come from the bundles' config: escaped, so a crafted
                    // value cannot move the cursor or fake a line.
                    writeln!(
                        self.out,
                        "{mark} {} {} {}: {}{}",
                        c.area,
                        c.item.replace('_', " "),
                        escape_text(&c.path),
                        escape_text(&what),
                        escape_text(&note)
                    )?;
                }
                writeln!(self.out)
            }
        }
    }

    fn change(&mut self, c: &Change) -> std::io::Result<()> {
        let letter = format!("{:?}", c.status);
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => writeln!(self.out, "{}", change_json(c)),
            Mode::NameStatus => match &c.from {
                Some(from) => writeln!(self.out, "{letter}\t{from} -> {}", c.path),
                None => writeln!(self.out, "{letter}\t{}", c.path),
            },
            Mode::Stat => {
                let old = c.old.as_ref().map_or(0, |e| e.size);
                let new = c.new.as_ref().map_or(0, |e| e.size);
                let name = match &c.from {
                    Some(from) => format!("{from} -> {}", c.path),
                    None => c.path.clone(),
                };
                let delta = new as i128 - old as i128;
                let detail = match c.status {
                    Status::T => format!("{} -> {}", kind(c, true), kind(c, false)),
                    Status::X => format!("mode {} -> {}", mode(c, true), mode(c, false)),
                    _ => format!("{old} -> {new} bytes ({delta:+})"),
                };
                self.stat_rows.push((name, detail));
                Ok(())
            }
            Mode::Content => {
                match &c.from {
                    Some(from) => writeln!(self.out, "{letter}\t{from} -> {}", c.path)?,
                    None => writeln!(self.out, "{letter}\t{}", c.path)?,
                }
                self.content(c)
            }
        }
    }

    fn content(&mut self, c: &Change) -> std::io::Result<()> {
        if !matches!(c.status, Status::A | Status::D | Status::M) {
            return Ok(());
        }
        let a_lacks = c.old.is_some() && !self.a.holds_contents();
        let b_lacks = c.new.is_some() && !self.b.holds_contents();
        if a_lacks || b_lacks {
            return writeln!(
                self.out,
                "Not shown: {}: side {} holds no file contents (a digest pack or a remote snapshot)",
                c.path,
                if a_lacks { "A" } else { "B" }
            );
        }
        let read = |side: &Side, e: Option<&crate::diff::EntryInfo>| -> Option<Option<Vec<u8>>> {
            let e = e?;
            if e.kind == "dir" {
                return None;
            }
            Some(
                side.tree_side()
                    .bytes(&e.id, e.size, CONTENT_CAP)
                    .ok()
                    .flatten(),
            )
        };
        let old = read(self.a, c.old.as_ref());
        let new = read(self.b, c.new.as_ref());
        let too_large = matches!(old, Some(None)) || matches!(new, Some(None));
        // A TOML file (a bundle's or an install's config) shows no secret value: the agent
        // section says "(set, not shown)", and the patch must not print it a line later.
        let mask = |bytes: Option<Vec<u8>>| match bytes {
            Some(b) if c.path.ends_with(".toml") => match String::from_utf8(b) {
                Ok(text) => Some(mask_secret_lines(&text).into_bytes()),
                Err(e) => Some(e.into_bytes()),
            },
            other => other,
        };
        let shown = if too_large {
            Shown::TooLarge
        } else {
            unified(
                &c.path,
                mask(old.flatten()).as_deref(),
                mask(new.flatten()).as_deref(),
            )
        };
        match shown {
            // Escape sequences inside a file reach the terminal escaped (`\x1b`).
            Shown::Text(t) => write!(self.out, "{}", escape_message(&t)),
            Shown::Binary => writeln!(self.out, "Binary files differ: {}", c.path),
            Shown::TooLarge => writeln!(
                self.out,
                "Not shown: {} is over {} KiB on one side",
                c.path,
                CONTENT_CAP / 1024
            ),
        }
    }

    fn summary(&mut self, s: &crate::diff::Summary, grants: bool) -> std::io::Result<()> {
        match self.mode {
            Mode::Quiet => Ok(()),
            Mode::Json => {
                let mut v = serde_json::to_value(s).map_err(std::io::Error::other)?;
                v["type"] = json!("summary");
                v["a"] = serde_json::Value::Object(self.a.described.clone());
                v["b"] = serde_json::Value::Object(self.b.described.clone());
                v["new_grants"] = json!(grants);
                writeln!(self.out, "{v}")
            }
            Mode::Stat => {
                let width = self.stat_rows.iter().map(|(n, _)| n.chars().count()).max();
                for (name, detail) in &self.stat_rows {
                    writeln!(self.out, " {name:<w$} | {detail}", w = width.unwrap_or(0))?;
                }
                writeln!(
                    self.out,
                    " {} changed: {} added, {} modified, {} deleted, {} renamed, {} kind, {} mode; +{} -{} bytes",
                    plural(
                        s.added + s.deleted + s.modified + s.renamed + s.kind_changed + s.mode_changed,
                        "file"
                    ),
                    s.added,
                    s.modified,
                    s.deleted,
                    s.renamed,
                    s.kind_changed,
                    s.mode_changed,
                    s.bytes_added,
                    s.bytes_removed
                )
            }
            _ => Ok(()),
        }
    }
}

/// A file change as one `--json` line: `type`, `status`, the path under the name rules of
/// [`crate::cmd::put_name`] (`path`, `path_bytes`, `display`; for a rename also `from`,
/// `from_bytes`, `from_display`), and each side's `kind`, `mode`, `size` and `object`.
fn change_json(c: &Change) -> serde_json::Value {
    use zeroclaw_bundle_store::unescape_name;
    let mut m = serde_json::Map::new();
    m.insert("type".into(), json!("file"));
    m.insert("status".into(), json!(c.status));
    // The walk joins escaped names; the escape is reversible (`\\` for a backslash).
    crate::cmd::put_name(&mut m, "path", "display", &unescape_name(&c.path));
    if let Some(from) = &c.from {
        crate::cmd::put_name(&mut m, "from", "from_display", &unescape_name(from));
    }
    for (key, e) in [("old", &c.old), ("new", &c.new)] {
        if let Some(e) = e {
            m.insert(
                key.into(),
                json!({"kind": e.kind, "mode": e.mode, "size": e.size, "object": e.id}),
            );
        }
    }
    serde_json::Value::Object(m)
}

fn kind(c: &Change, old: bool) -> &'static str {
    let e = if old { &c.old } else { &c.new };
    e.as_ref().map_or("-", |e| e.kind)
}

fn mode(c: &Change, old: bool) -> &str {
    let e = if old { &c.old } else { &c.new };
    e.as_ref().map_or("-", |e| e.mode.as_str())
}

fn plural(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}
