//! `pack <SNAPSHOT> --out FILE|- [--since SNAPSHOT] [--trees-only]` and `unpack FILE|-`.
//! A pack file is written as an unnamed file in its destination's directory and named and
//! renamed into place once whole, so a failed, interrupted or killed `pack` never leaves a
//! partial FILE nor a staged file; `unpack` verifies the whole pack before it
//! writes anything, and commits the snapshot record last. Only a regular file is ever replaced
//! (with `--force`): a character device or a FIFO at FILE (`/dev/null`, a named pipe) is
//! written to in place, like stdout, and anything else (a directory, a block device, a socket)
//! is refused.

use std::fs;
use std::io::{self, IsTerminal, Read, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::json;
use zeroclaw_bundle_store::{
    unpack_watched, write_pack, ObjectId, PackOptions, PackReader, PackStats, Store, StoreError,
};

use crate::cli::{PackArgs, UnpackArgs};
use crate::cmd::{count, human_bytes, Ctx, Outcome, StdoutClosed};

/// Runs `pack`.
pub fn run_pack(args: PackArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let id = store.resolve(&args.snapshot)?;
    let since = match &args.since {
        Some(r) => Some(store.resolve(r).with_context(|| format!("--since {r}"))?),
        None => None,
    };
    let options = PackOptions {
        since,
        trees_only: args.trees_only,
    };
    let total = store.read_snapshot(&id)?.bytes();
    let bar = ctx.progress(Some(total), "packing", true);
    let to_stdout = args.out.as_os_str() == "-";
    if to_stdout && ctx.json {
        bail!("--json needs --out FILE: with --out -, stdout carries the pack");
    }
    if to_stdout && io::stdout().is_terminal() {
        bail!("refusing to write a pack to a terminal; redirect it or pass --out FILE");
    }
    let stats = if to_stdout {
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        // A reader that went away (`| head -c`) ends the command quietly, like every other
        // output (see `cmd::StdoutClosed`); the reader's side reports a truncated pack.
        write_pack(&store, &id, options, &mut out, &mut |n| bar.inc(n)).map_err(|e| match e {
            StoreError::PackOutput { ref error, .. }
                if error.kind() == io::ErrorKind::BrokenPipe =>
            {
                anyhow::Error::new(StdoutClosed)
            }
            e => anyhow::Error::new(e).context("could not write the pack to stdout"),
        })?
    } else {
        refuse_out_in_store(&args.out, &ctx.store_path)?;
        match Existing::at(&args.out)? {
            Existing::Nothing => {}
            Existing::Regular if args.force => {}
            Existing::Regular => bail!("{} exists; pass --force to replace it", args.out.display()),
            Existing::Stream => {
                let stats = write_to_stream(&store, &id, options, &args.out, &mut |n| bar.inc(n))?;
                bar.finish_and_clear();
                return report(ctx, &id, since, &args, &stats, Some(&args.out));
            }
            Existing::Other(what) => bail!(
                "refusing to write the pack to {}: it is {what}, and only a regular file is \
                 replaced (with --force); name a new file, or pass --out - and redirect",
                args.out.display()
            ),
        }
        let (staged, file) = staging_file(&args.out)?;
        // Ctrl-C stops at the next write: the staged file is removed below, nothing lands.
        let mut out = io::BufWriter::new(StopOnInterrupt(file));
        let written =
            write_pack(&store, &id, options, &mut out, &mut |n| bar.inc(n)).and_then(|s| {
                let StopOnInterrupt(file) = out.into_inner().map_err(|e| StoreError::Io {
                    op: "write pack",
                    path: staged.shown(&args.out),
                    error: e.into_error(),
                })?;
                file.sync_all().map_err(|e| StoreError::Io {
                    op: "sync pack",
                    path: staged.shown(&args.out),
                    error: e,
                })?;
                Ok((s, file))
            });
        let (stats, file) = match written {
            Ok(s) => s,
            Err(e) => {
                staged.discard();
                if crate::interrupt::requested() {
                    bail!("interrupted; nothing was written at {}", args.out.display());
                }
                return Err(e).with_context(|| format!("could not write {}", args.out.display()));
            }
        };
        staged.land(&file, &args.out).with_context(|| {
            format!(
                "could not move the pack into place at {}",
                args.out.display()
            )
        })?;
        stats
    };
    bar.finish_and_clear();
    report(
        ctx,
        &id,
        since,
        &args,
        &stats,
        (!to_stdout).then_some(args.out.as_path()),
    )
}

/// The report of a `pack` that wrote `stats` (to `out`, or to stdout when `None`).
fn report(
    ctx: &Ctx,
    id: &ObjectId,
    since: Option<ObjectId>,
    args: &PackArgs,
    stats: &PackStats,
    out: Option<&Path>,
) -> Result<Outcome> {
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "destination": crate::cmd::host_path(&args.out),
            "since": since,
            "trees_only": args.trees_only,
            "objects": stats.objects,
            "trees": stats.trees,
            "blobs": stats.blobs,
            "bytes": stats.bytes,
            "pack_bytes": stats.pack_bytes,
        }))?;
    } else if !ctx.quiet {
        crate::note!(
            "packed {} ({}, {}), {} into {}{}",
            count(stats.objects, "object"),
            count(stats.trees, "tree"),
            count(stats.blobs, "blob"),
            human_bytes(stats.bytes),
            human_bytes(stats.pack_bytes),
            match out {
                None => String::new(),
                Some(out) => format!(" at {}", out.display()),
            }
        );
    }
    if out.is_some() && !ctx.json {
        crate::outln!("{id}")?;
    }
    Ok(Outcome::Success)
}

/// What `--out` names before the pack is written.
enum Existing {
    /// Nothing (or a dangling symlink, which the pack replaces as a new file would).
    Nothing,
    /// A regular file: replaced with `--force`.
    Regular,
    /// A character device or a FIFO: written to in place, never replaced.
    Stream,
    /// Anything else, by name: refused.
    Other(&'static str),
}

impl Existing {
    fn at(out: &Path) -> Result<Existing> {
        let meta = match fs::metadata(out) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Existing::Nothing),
            Err(e) => return Err(e).with_context(|| format!("could not read {}", out.display())),
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

/// Writes the pack into the character device or FIFO at `out`, opened for writing without
/// creating or truncating anything (a FIFO's open waits for its reader), and checked once
/// open: a path swapped for a regular file in between is refused, never overwritten.
fn write_to_stream(
    store: &Store,
    id: &ObjectId,
    options: PackOptions,
    out: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<PackStats> {
    let file = fs::OpenOptions::new()
        .write(true)
        .open(out)
        .with_context(|| format!("could not open {} for writing", out.display()))?;
    let t = file
        .metadata()
        .with_context(|| format!("could not read {}", out.display()))?
        .file_type();
    if !(t.is_char_device() || t.is_fifo()) {
        bail!(
            "refusing to write the pack to {}: it changed while being opened (it is no longer \
             a character device or a FIFO)",
            out.display()
        );
    }
    if file.is_terminal() {
        bail!(
            "refusing to write a pack to the terminal {}; redirect it or pass --out FILE",
            out.display()
        );
    }
    let mut w = io::BufWriter::new(StopOnInterrupt(file));
    let stats = write_pack(store, id, options, &mut w, progress).and_then(|s| {
        w.flush()
            .map_err(|error| StoreError::PackOutput { op: "write", error })?;
        Ok(s)
    });
    match stats {
        Ok(stats) => Ok(stats),
        Err(_) if crate::interrupt::requested() => {
            bail!(
                "interrupted; the pack written to {} is incomplete",
                out.display()
            )
        }
        Err(e) => Err(e).with_context(|| format!("could not write the pack to {}", out.display())),
    }
}

/// Refuses `--out` inside the store, or naming the store or a directory that holds it
/// (however spelled: compared by identity, as `checkout` and `export` compare theirs): the
/// rename into place would replace a store object, the catalog or the marker.
fn refuse_out_in_store(out: &Path, store: &Path) -> Result<()> {
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // An unresolvable directory fails later, where the pack is staged, naming it.
    let Ok(dir) = fs::canonicalize(dir) else {
        return Ok(());
    };
    let resolved = match out.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    };
    if let Ok(canonical) = fs::canonicalize(&resolved) {
        if crate::publish::lies_inside(&fs::canonicalize(store).unwrap_or_default(), &canonical) {
            bail!(
                "refusing to write the pack to {}: it is or contains the store {}; write it \
                 outside the store",
                out.display(),
                store.display()
            );
        }
    }
    if crate::publish::lies_inside(&resolved, store) {
        bail!(
            "refusing to write the pack to {}: it is inside the store {} (it would overwrite the \
             store's own files); write it outside the store",
            out.display(),
            store.display()
        );
    }
    Ok(())
}

/// A pack file being written that fails its next write once SIGINT or SIGTERM arrived.
struct StopOnInterrupt(fs::File);

impl Write for StopOnInterrupt {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::interrupt::check().map_err(io::Error::other)?;
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Where a pack being written to a file lives until it is whole.
enum Staged {
    /// An unnamed file in the destination's directory (`O_TMPFILE`): a SIGKILL leaves
    /// nothing behind.
    Unnamed { dir: PathBuf },
    /// A hidden named file beside the destination, where the filesystem has no unnamed
    /// files (a SIGKILL leaves it: `.NAME.zeroclaw-pack-XXXXXX`).
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

    /// Removes what a failed pack staged.
    fn discard(&self) {
        if let Staged::Named(tmp) = self {
            let _ = fs::remove_file(tmp);
        }
    }

    /// Puts the whole pack in place at `dest` (replacing it): an unnamed file gets a hidden
    /// name first (linkat cannot replace), then either is renamed over `dest`.
    fn land(&self, file: &fs::File, dest: &Path) -> Result<()> {
        let tmp = match self {
            Staged::Named(tmp) => tmp.clone(),
            Staged::Unnamed { dir } => {
                let tmp = hidden_name(dir, dest)?;
                crate::sys::link_unnamed(file, &tmp)
                    .with_context(|| format!("could not name the pack {}", tmp.display()))?;
                tmp
            }
        };
        fs::rename(&tmp, dest).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            anyhow::Error::new(e)
        })
    }
}

/// A hidden name beside `dest`: `.NAME.zeroclaw-pack-XXXXXX`.
fn hidden_name(dir: &Path, dest: &Path) -> Result<PathBuf> {
    let name = dest
        .file_name()
        .with_context(|| format!("{} names no file", dest.display()))?;
    Ok(dir.join(format!(
        ".{}.zeroclaw-pack-{}",
        name.to_string_lossy(),
        zeroclaw_bundle_store::random_token()
    )))
}

/// A new file in `dest`'s directory (same filesystem, so the final rename is atomic):
/// unnamed where the filesystem allows, else a hidden named one.
fn staging_file(dest: &Path) -> Result<(Staged, fs::File)> {
    let dir = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = hidden_name(&dir, dest)?;
    if let Some(file) = crate::sys::create_unnamed_in(&dir)
        .with_context(|| format!("could not create a file in {}", dir.display()))?
    {
        return Ok((Staged::Unnamed { dir }, file));
    }
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("could not create {}", tmp.display()))?;
    Ok((Staged::Named(tmp), file))
}

/// Runs `unpack`.
pub fn run_unpack(args: UnpackArgs, ctx: &Ctx) -> Result<Outcome> {
    // A pack file that is not there, or not a pack, creates no store (a typo must not leave
    // one behind): it is opened first. A pack from stdin is spooled into the store first.
    let failed =
        |what: &dyn std::fmt::Display| format!("could not unpack {what}; nothing was imported");
    let opened = if args.pack.as_os_str() == "-" {
        None
    } else {
        Some(PackReader::open(&args.pack).with_context(|| failed(&args.pack.display()))?)
    };
    let store = ctx.create_store()?;
    // Held (shared) from the spooled copy in tmp/ to the catalog entry: a gc waits instead
    // of removing the spool, or objects this import is about to reference.
    let _lock = store.write_lock()?;
    let spooled = match opened {
        Some(_) => None,
        None => Some(spool_stdin(&store)?),
    };
    let progress = ctx.term_progress();
    let watch = crate::progress::ImportProgress::new(&progress);
    let root = std::cell::Cell::new(None);
    let result = (|| -> Result<_> {
        let pack = match opened {
            Some(pack) => pack,
            None => {
                let spool = spooled.as_deref().expect("stdin was spooled");
                PackReader::open(spool).map_err(|e| named_stdin(e, spool))?
            }
        };
        root.set(Some(pack.root));
        let id = unpack_watched(&store, &pack, &watch).map_err(|e| match &spooled {
            Some(spool) => named_stdin(e, spool),
            None => e,
        })?;
        Ok((id, pack.entries().len()))
    })();
    drop(progress);
    if let Some(path) = &spooled {
        let _ = fs::remove_file(path);
    }
    let what = match spooled {
        Some(_) => "the pack from stdin".to_string(),
        None => args.pack.display().to_string(),
    };
    if result.is_err() && crate::interrupt::requested() {
        // The import stopped before its objects landed: its staging directory is gone.
        bail!("interrupted: the unpack stopped; nothing was imported from {what}");
    }
    let (id, objects) = result.with_context(|| match root.get() {
        Some(root) if recorded_not_listed(&store, &root) => format!(
            "could not unpack {what}: its snapshot record {} was written but not catalogued, so \
             `list` does not show it and `gc` keeps its objects; once the cause below is fixed, \
             `zeroclaw-bundle reindex` lists it (then `forget` it if unwanted)",
            root.short(12)
        ),
        _ => failed(&what),
    })?;
    if ctx.json {
        ctx.print_json(&json!({ "snapshot": id, "objects": objects }))?;
    } else {
        if !ctx.quiet {
            crate::note!("unpacked {}, verified", count(objects as u64, "object"));
        }
        crate::outln!("{id}")?;
    }
    Ok(Outcome::Success)
}

/// Whether a failed import got as far as writing snapshot `root`'s record but not its catalog
/// entry (the commit writes the record first; `forget` removes both, so a record the catalog
/// does not list was left by a failed commit). A catalog that cannot be opened lists nothing.
fn recorded_not_listed(store: &Store, root: &ObjectId) -> bool {
    store.objects().has(root)
        && store
            .catalog()
            .and_then(|c| c.resolve(&root.to_hex()))
            .is_err()
}

/// A pack error about the spooled copy of stdin names stdin, not a temporary file the
/// operator never made (and that is removed by the time the message is read).
fn named_stdin(err: StoreError, spool: &Path) -> StoreError {
    match err {
        StoreError::BadPack { pack, why } if pack == spool => StoreError::BadPack {
            pack: PathBuf::from("from standard input"),
            why,
        },
        other => other,
    }
}

/// Copies stdin into a file under the store's tmp/ (a pack is read from its end first).
fn spool_stdin(store: &Store) -> Result<PathBuf> {
    let dir = store.objects().tmp_dir().to_path_buf();
    fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let path = dir.join(format!("unpack-{}", zeroclaw_bundle_store::random_token()));
    let mut file =
        fs::File::create(&path).with_context(|| format!("could not create {}", path.display()))?;
    // Copied in chunks, so a Ctrl-C stops the spool too (the signal handler restarts reads).
    let mut input = io::stdin().lock();
    let mut buf = vec![0u8; 1 << 20];
    let copied = loop {
        if crate::interrupt::requested() {
            let _ = fs::remove_file(&path);
            bail!("interrupted: the unpack stopped; nothing was imported from the pack from stdin");
        }
        match input.read(&mut buf) {
            Ok(0) => break file.flush(),
            Ok(n) => {
                if let Err(e) = file.write_all(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    if let Err(e) = copied {
        let _ = fs::remove_file(&path);
        return Err(e).context("could not read the pack from stdin");
    }
    Ok(path)
}
