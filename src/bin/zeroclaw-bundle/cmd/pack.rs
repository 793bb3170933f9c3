//! `pack <SNAPSHOT> --out FILE|- [--since SNAPSHOT] [--trees-only]` and `unpack FILE|-`.
//! A pack file is published by `publish::publish_file` (staged in its destination's directory,
//! renamed into place once whole; only a regular file is replaced, with `--force`; a character
//! device or a FIFO is written in place; a destination in the store is refused); `--out -`
//! writes stdout here. `unpack` verifies the whole pack before it writes anything, and commits
//! the snapshot record last.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::json;
use zeroclaw_bundle_store::{
    ObjectId, PackOptions, PackReader, PackStats, Store, StoreError, UnpackReport,
};

use crate::cli::{PackArgs, UnpackArgs};
use crate::cmd::{count, human_bytes, Ctx, Outcome};
use zeroclaw_bundle::source::{classify, Takes};

/// Runs `pack`.
pub fn run_pack(args: PackArgs, ctx: &Ctx) -> Result<Outcome> {
    let reference = classify(&ctx.store_path, OsStr::new(&args.snapshot), Takes::PACK)?;
    let store = ctx.store()?;
    let id = reference.stored_id(&store)?;
    // Signed first: the pack carries the signatures the store keeps.
    let signing = super::sign::key_for(&args.sign)?;
    super::sign::sign_after(ctx, &store, &id, signing)?;
    let since = match &args.since {
        Some(r) => Some(
            classify(
                &ctx.store_path,
                OsStr::new(r),
                Takes::stored("pack --since"),
            )
            .and_then(|since| since.stored_id(&store))
            .with_context(|| format!("--since {r}"))?,
        ),
        None => None,
    };
    let options = PackOptions {
        since,
        trees_only: args.trees_only,
    };
    let to_stdout = args.out.as_os_str() == "-";
    if to_stdout && ctx.json {
        bail!("--json needs --out FILE: with --out -, stdout carries the pack");
    }
    if to_stdout && io::stdout().is_terminal() {
        bail!("refusing to write a pack to a terminal; redirect it or pass --out FILE");
    }
    let stats = if to_stdout {
        let total = store.objects().read_snapshot(&id)?.bytes();
        let bar = ctx.progress(Some(total), "packing", true);
        let stats = pack_to_stdout(&store, &id, options, ctx, &mut |n| bar.inc(n));
        bar.finish_and_clear();
        stats?
    } else {
        // The public API's pack: staged and renamed into place; created 0600 when the snapshot
        // holds a file others may not read.
        let progress = ctx.term_progress();
        let packed = zeroclaw_bundle::Bundles::from_store(store.clone()).pack(
            &id.to_hex(),
            &args.out,
            options,
            args.force,
            &progress,
        );
        drop(progress);
        packed?.stats
    };
    report(
        ctx,
        &id,
        since,
        &args,
        &stats,
        (!to_stdout).then_some(args.out.as_path()),
    )
}

/// Writes the pack to stdout, and succeeds only once its reader took every byte. A reader
/// that goes away first (`| head -c 100`) fails the command (exit 1, "packed" is never
/// said): the pack it got is cut short. A write after the reader left fails with EPIPE (Rust
/// ignores SIGPIPE), but the last bytes fit in the pipe's buffer and never fail, so the last
/// byte is held back until the reader took all the others, and then the command waits until
/// the reader took that one too ([`zeroclaw_bundle::sys::wait_pipe_taken`]): a reader that stopped
/// short cannot have taken the last byte. A file or a socket on stdout is not waited on.
fn pack_to_stdout(
    store: &Store,
    id: &ObjectId,
    options: PackOptions,
    ctx: &Ctx,
    progress: &mut dyn FnMut(u64),
) -> Result<PackStats> {
    let stdout = io::stdout();
    let fd = stdout.as_fd();
    let cut = |what: String| {
        anyhow::anyhow!(
            "could not write the pack to stdout: {what}; what it read is not a whole pack"
        )
    };
    let broken = |e: io::Error| match e.kind() {
        io::ErrorKind::BrokenPipe => cut("its reader closed the pipe before the end".into()),
        _ => anyhow::Error::new(e).context("could not write the pack to stdout"),
    };
    let taken = || -> Result<()> {
        let stop = || ctx.cancel.is_cancelled();
        match zeroclaw_bundle::sys::wait_pipe_taken(fd, &stop) {
            Ok(zeroclaw_bundle::sys::PipeReader::Gone { unread }) => Err(cut(format!(
                "its reader closed the pipe with {} of the pack unread",
                human_bytes(unread)
            ))),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                bail!("interrupted: the pack to stdout was not taken whole by its reader")
            }
            Err(e) => Err(e).context("could not wait for the reader of stdout"),
        }
    };
    let mut out = HoldLast {
        inner: io::BufWriter::new(stdout.lock()),
        held: None,
    };
    let stats = store
        .packs()
        .write(id, options, &mut out, progress)
        .map_err(|e| match e {
            StoreError::PackOutput { error, .. } => broken(error),
            e => anyhow::Error::new(e).context("could not write the pack to stdout"),
        })?;
    out.inner.flush().map_err(broken)?;
    taken()?;
    if let Some(last) = out.held.take() {
        out.inner.write_all(&[last]).map_err(broken)?;
        out.inner.flush().map_err(broken)?;
    }
    taken()?;
    Ok(stats)
}

/// A writer that holds back the last byte written through it (see [`pack_to_stdout`]).
struct HoldLast<W: Write> {
    inner: W,
    held: Option<u8>,
}

impl<W: Write> Write for HoldLast<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some((&last, rest)) = buf.split_last() else {
            return Ok(0);
        };
        if let Some(held) = self.held.take() {
            self.inner.write_all(&[held])?;
        }
        self.inner.write_all(rest)?;
        self.held = Some(last);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
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

/// Runs `unpack`.
pub fn run_unpack(args: UnpackArgs, ctx: &Ctx) -> Result<Outcome> {
    // A pack file that is not there, or not a pack, creates no store (a typo must not leave
    // one behind): it is opened first. A pack from stdin is spooled into the store first.
    let opened = if args.pack.as_os_str() == "-" {
        None
    } else {
        Some(PackReader::open(&args.pack).with_context(|| failed(&args.pack.display()))?)
    };
    // `--require-signed`: a pack whose snapshot no trusted key signed is refused before
    // anything is written (a pack file: before the store is even created).
    let trust = super::sign::trust_of_args(&ctx.store_path, &args.trust)?;
    if let Some(pack) = &opened {
        let sigs = pack
            .signatures()
            .with_context(|| failed(&args.pack.display()))?;
        super::sign::gate_blobs(ctx, &pack.root, &sigs, &trust)
            .with_context(|| failed(&args.pack.display()))?;
    }
    // A store this unpack creates exists only once the unpack succeeded: a pack that fails
    // (an incremental one whose base is missing, a damaged one) leaves nothing behind.
    let fresh = FreshStore::prepare(&ctx.store_path)?;
    let store = match &fresh {
        FreshStore::Staged { staged, .. } => zeroclaw_bundle::Bundles::create(staged)?.into_store(),
        _ => ctx.create_store()?,
    };
    let unpacked = unpack_into(&store, opened, &trust, &args, ctx, &fresh);
    drop(store);
    let (report, objects) = match unpacked {
        Ok(done) => {
            fresh.commit()?;
            done
        }
        Err(e) => {
            fresh.discard();
            return Err(e);
        }
    };
    let id = report.id;
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "objects": objects,
            "read": report.read,
            "already_present": report.present,
        }))?;
    } else {
        if !ctx.quiet {
            crate::note!("{}", unpacked_line(&report));
        }
        crate::outln!("{id}")?;
    }
    Ok(Outcome::Success)
}

/// The message of an unpack that imported nothing.
fn failed(what: &dyn std::fmt::Display) -> String {
    format!("could not unpack {what}; nothing was imported")
}

/// The unpack itself, into `store`: the pack (`opened`, or stdin spooled into the store),
/// its trust gate, and every object it needs. Returns the report and how many objects the
/// pack lists.
fn unpack_into(
    store: &Store,
    opened: Option<PackReader>,
    trust: &zeroclaw_bundle::sign::Trust,
    args: &UnpackArgs,
    ctx: &Ctx,
    fresh: &FreshStore,
) -> Result<(UnpackReport, usize)> {
    // Held (shared) from the spooled copy in tmp/ to the catalog entry: a gc waits instead
    // of removing the spool, or objects this import is about to reference.
    let _lock = store.write_lock()?;
    let spooled = match opened {
        Some(_) => None,
        None => Some(spool_stdin(store, &ctx.cancel)?),
    };
    let progress = ctx.term_progress();
    let watch = zeroclaw_bundle::progress::ImportProgress::new(&progress);
    let root = std::cell::Cell::new(None);
    let result = (|| -> Result<_> {
        let pack = match opened {
            Some(pack) => pack,
            None => {
                let spool = spooled.as_deref().expect("stdin was spooled");
                let pack = PackReader::open(spool).map_err(|e| named_stdin(e, spool))?;
                let sigs = pack.signatures().map_err(|e| named_stdin(e, spool))?;
                super::sign::gate_blobs(ctx, &pack.root, &sigs, trust)?;
                pack
            }
        };
        root.set(Some(pack.root));
        let report = store
            .packs()
            .unpack_counted(&pack, &watch)
            .map_err(|e| match &spooled {
                Some(spool) => named_stdin(e, spool),
                None => e,
            })?;
        Ok((report, pack.entries().len()))
    })();
    drop(progress);
    if let Some(path) = &spooled {
        let _ = fs::remove_file(path);
    }
    let what = match spooled {
        Some(_) => "the pack from stdin".to_string(),
        None => args.pack.display().to_string(),
    };
    if result.is_err() && ctx.cancel.is_cancelled() {
        // The import stopped before its objects landed: its staging directory is gone.
        bail!("interrupted: the unpack stopped; nothing was imported from {what}");
    }
    result.with_context(|| match root.get() {
        Some(root) if fresh.existed() && recorded_not_listed(store, &root) => format!(
            "could not unpack {what}: its snapshot record {} was written but not catalogued, so \
             `list` does not show it and `gc` keeps its objects; once the cause below is fixed, \
             `zeroclaw-bundle reindex` lists it (then `forget` it if unwanted)",
            root.short(12)
        ),
        _ => failed(&what),
    })
}

/// The store `unpack` writes into, and what a failure must undo.
enum FreshStore {
    /// A store existed (or the path is something `open` will refuse by name).
    Existing,
    /// The path is an empty directory: the store is made in it, and a failed unpack empties
    /// it again.
    EmptyDir(PathBuf),
    /// Nothing is at the path: the store is made at `staged` beside it (same directory, so
    /// the same filesystem) and renamed to `dest` once the unpack succeeded. `made` are the
    /// missing parent directories this unpack created, outermost first.
    Staged {
        staged: PathBuf,
        dest: PathBuf,
        made: Vec<PathBuf>,
    },
}

impl FreshStore {
    fn prepare(dest: &Path) -> Result<FreshStore> {
        match fs::symlink_metadata(dest) {
            Ok(m) if m.is_dir() => {
                let empty = fs::read_dir(dest)
                    .with_context(|| format!("could not read the store {}", dest.display()))?
                    .next()
                    .is_none();
                return Ok(if empty {
                    FreshStore::EmptyDir(dest.to_path_buf())
                } else {
                    FreshStore::Existing
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            _ => return Ok(FreshStore::Existing),
        }
        let Some(name) = dest.file_name() else {
            return Ok(FreshStore::Existing);
        };
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut missing = Vec::new();
        let mut up = Some(parent.as_path());
        while let Some(dir) = up.filter(|d| !d.as_os_str().is_empty()) {
            if fs::symlink_metadata(dir).is_ok() {
                break;
            }
            missing.push(dir.to_path_buf());
            up = dir.parent();
        }
        let mut made = Vec::new();
        for dir in missing.into_iter().rev() {
            match fs::create_dir(&dir) {
                Ok(()) => made.push(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    remove_made(&made);
                    return Err(e).with_context(|| format!("could not create {}", dir.display()));
                }
            }
        }
        let staged = parent.join(format!(
            ".{}.unpack-{}",
            name.to_string_lossy(),
            zeroclaw_bundle_store::random_token()
        ));
        Ok(FreshStore::Staged {
            staged,
            dest: dest.to_path_buf(),
            made,
        })
    }

    /// Whether the store existed before this unpack.
    fn existed(&self) -> bool {
        matches!(self, FreshStore::Existing)
    }

    /// After a successful unpack: a staged store is moved into place.
    fn commit(self) -> Result<()> {
        let FreshStore::Staged { staged, dest, made } = &self else {
            return Ok(());
        };
        if let Err(e) = fs::rename(staged, dest) {
            let _ = fs::remove_dir_all(staged);
            remove_made(made);
            return Err(e).with_context(|| {
                format!(
                    "could not move the new store into place at {} (did another process create \
                     it meanwhile? then run the unpack again); nothing was imported",
                    dest.display()
                )
            });
        }
        Ok(())
    }

    /// After a failed unpack: whatever it created is removed.
    fn discard(self) {
        match self {
            FreshStore::Existing => {}
            FreshStore::EmptyDir(dir) => {
                if let Ok(entries) = fs::read_dir(&dir) {
                    for entry in entries.flatten() {
                        let path = entry.path();
                        let _ = match entry.file_type() {
                            Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
                            _ => fs::remove_file(&path),
                        };
                    }
                }
            }
            FreshStore::Staged { staged, made, .. } => {
                let _ = fs::remove_dir_all(&staged);
                remove_made(&made);
            }
        }
    }
}

/// Removes the directories an unpack created (outermost first), innermost first; one that
/// is no longer empty stays.
fn remove_made(made: &[PathBuf]) {
    for dir in made.iter().rev() {
        let _ = fs::remove_dir(dir);
    }
}

/// What `unpack` says it did: objects the store already held were not read from the pack, so
/// their copies in it were not checked, and the line must not claim they were.
fn unpacked_line(report: &UnpackReport) -> String {
    let read = count(report.read as u64, "object");
    match report.present {
        0 => format!("unpacked {read}: each read from the pack and verified"),
        present => format!(
            "unpacked {read} (read from the pack and verified); {} the store already held \
             {} not read from the pack, so the pack's copies of {} were not checked",
            count(present as u64, "object"),
            if present == 1 { "was" } else { "were" },
            if present == 1 { "it" } else { "them" },
        ),
    }
}

/// Whether a failed import got as far as writing snapshot `root`'s record but not its catalog
/// entry (the commit writes the record first; `forget` removes both, so a record the catalog
/// does not list was left by a failed commit). A catalog that cannot be opened lists nothing.
fn recorded_not_listed(store: &Store, root: &ObjectId) -> bool {
    store.objects().has(root)
        && store
            .catalog()
            .session()
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
fn spool_stdin(store: &Store, cancel: &zeroclaw_bundle::cancel::Cancel) -> Result<PathBuf> {
    let dir = store.objects().tmp_dir().to_path_buf();
    fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let path = dir.join(format!("unpack-{}", zeroclaw_bundle_store::random_token()));
    let mut file =
        fs::File::create(&path).with_context(|| format!("could not create {}", path.display()))?;
    // Copied in chunks, so a Ctrl-C stops the spool too (the signal handler restarts reads).
    let mut input = io::stdin().lock();
    let mut buf = vec![0u8; 1 << 20];
    let copied = loop {
        if cancel.is_cancelled() {
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
