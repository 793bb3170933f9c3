//! `pack <SNAPSHOT> --out FILE|- [--since SNAPSHOT] [--trees-only]` and `unpack FILE|-`.
//! A pack file is published by `publish::publish_file` (staged in its destination's directory,
//! renamed into place once whole; only a regular file is replaced, with `--force`; a character
//! device or a FIFO is written in place; a destination in the store is refused); `--out -`
//! writes stdout here. `unpack` verifies the whole pack before it writes anything, and commits
//! the snapshot record last.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::json;
use zeroclaw_bundle_store::{
    unpack_counted, write_pack, ObjectId, PackOptions, PackReader, PackStats, Store, StoreError,
    UnpackReport,
};

use crate::cli::{PackArgs, UnpackArgs};
use crate::cmd::{count, human_bytes, Ctx, Outcome, StdoutClosed};
use crate::source::{classify, Takes};

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
        let total = store.read_snapshot(&id)?.bytes();
        let bar = ctx.progress(Some(total), "packing", true);
        let stdout = io::stdout();
        let mut out = io::BufWriter::new(stdout.lock());
        // A reader that went away (`| head -c`) ends the command quietly, like every other
        // output (see `cmd::StdoutClosed`); the reader's side reports a truncated pack.
        let stats =
            write_pack(&store, &id, options, &mut out, &mut |n| bar.inc(n)).map_err(|e| match e {
                StoreError::PackOutput { ref error, .. }
                    if error.kind() == io::ErrorKind::BrokenPipe =>
                {
                    anyhow::Error::new(StdoutClosed)
                }
                e => anyhow::Error::new(e).context("could not write the pack to stdout"),
            });
        bar.finish_and_clear();
        stats?
    } else {
        // The public API's pack: staged and renamed into place; created 0600 when the snapshot
        // holds a file others may not read.
        let progress = ctx.term_progress();
        let packed = crate::Bundles::from_store(store.clone()).pack(
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
    let failed =
        |what: &dyn std::fmt::Display| format!("could not unpack {what}; nothing was imported");
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
    let store = ctx.create_store()?;
    // Held (shared) from the spooled copy in tmp/ to the catalog entry: a gc waits instead
    // of removing the spool, or objects this import is about to reference.
    let _lock = store.write_lock()?;
    let spooled = match opened {
        Some(_) => None,
        None => Some(spool_stdin(&store, &ctx.cancel)?),
    };
    let progress = ctx.term_progress();
    let watch = crate::progress::ImportProgress::new(&progress);
    let root = std::cell::Cell::new(None);
    let result = (|| -> Result<_> {
        let pack = match opened {
            Some(pack) => pack,
            None => {
                let spool = spooled.as_deref().expect("stdin was spooled");
                let pack = PackReader::open(spool).map_err(|e| named_stdin(e, spool))?;
                let sigs = pack.signatures().map_err(|e| named_stdin(e, spool))?;
                super::sign::gate_blobs(ctx, &pack.root, &sigs, &trust)?;
                pack
            }
        };
        root.set(Some(pack.root));
        let report = unpack_counted(&store, &pack, &watch).map_err(|e| match &spooled {
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
    let (report, objects) = result.with_context(|| match root.get() {
        Some(root) if recorded_not_listed(&store, &root) => format!(
            "could not unpack {what}: its snapshot record {} was written but not catalogued, so \
             `list` does not show it and `gc` keeps its objects; once the cause below is fixed, \
             `zeroclaw-bundle reindex` lists it (then `forget` it if unwanted)",
            root.short(12)
        ),
        _ => failed(&what),
    })?;
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
fn spool_stdin(store: &Store, cancel: &crate::cancel::Cancel) -> Result<PathBuf> {
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
