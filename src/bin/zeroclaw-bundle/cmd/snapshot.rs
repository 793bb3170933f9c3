//! `snapshot <ALIAS> [--install DIR]` (capture an agent's bundle into the store) and
//! `snapshot --dir PATH` (capture any directory), both with `[--name NAME]`.

use anyhow::Result;
use serde_json::json;
use zeroclaw_bundle_store::{ObjectId, Store};

use crate::cli::SnapshotArgs;
use crate::cmd::{count, human_bytes, Ctx, Outcome};
use zeroclaw_bundle::export::DirSnapshot;

/// Runs `snapshot`.
pub fn run(args: SnapshotArgs, ctx: &Ctx) -> Result<Outcome> {
    if let Some(name) = &args.name {
        zeroclaw_bundle_store::validate_name(name)?;
    }
    let Some(dir) = args.dir else {
        let alias = args
            .alias
            .as_deref()
            .expect("clap requires an alias without --dir");
        let install = zeroclaw_bundle::agent::install_root(args.install.as_deref())?;
        let (install, plan) = zeroclaw_bundle::export::load_agent(&install, alias)?;
        let signing = super::sign::key_for(&args.sign)?;
        let store = ctx.create_store()?;
        let named = name_holder(&store, args.name.as_deref());
        let name_copy = args.name.clone();
        let progress = ctx.term_progress();
        let captured = zeroclaw_bundle::export::capture_loaded(
            &store,
            &install,
            &plan,
            zeroclaw_bundle::export::AgentCaptureOptions {
                name: args.name.as_deref(),
                zeroclaw_version: args.zeroclaw_version.as_deref(),
                excludes: &args.exclude,
            },
            &progress,
        );
        drop(progress);
        let captured = captured?;
        super::sign::sign_after(ctx, &store, &captured.id, signing)?;
        let outcome = super::export::report(ctx, &captured, None)?;
        note_moved_name(ctx, name_copy.as_deref(), named, &captured.id);
        return Ok(outcome);
    };
    let dir = zeroclaw_bundle::export::SourceDir::open(&dir)?;
    let signing = super::sign::key_for(&args.sign)?;
    let store = ctx.create_store()?;
    let named = name_holder(&store, args.name.as_deref());
    let progress = ctx.term_progress();
    let captured =
        zeroclaw_bundle::export::capture_dir(&store, dir, args.name.as_deref(), &progress);
    drop(progress);
    let DirSnapshot {
        id,
        snapshot: snap,
        stats,
    } = captured?;
    super::sign::sign_after(ctx, &store, &id, signing)?;
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "root": snap.root,
            "files": snap.files(),
            "bytes": snap.bytes(),
            "report": snap.report,
            "work": stats,
        }))?;
    } else {
        let skipped: u64 = snap.report.trees.iter().map(|t| t.skipped()).sum();
        if !ctx.quiet {
            crate::note!(
                "captured {}, {} from {}{}",
                count(snap.files(), "file"),
                human_bytes(snap.bytes()),
                zeroclaw_bundle_store::escape_text(&snap.source),
                if skipped > 0 {
                    format!(" ({} skipped: see `show`)", count(skipped, "entry"))
                } else {
                    String::new()
                }
            );
        }
        if !ctx.quiet {
            for s in snap.report.skipped.iter().filter(|s| s.reason == "store") {
                crate::note!("not entered: {} is the store itself", s.path);
            }
        }
        if ctx.verbose {
            crate::note!(
                "capture: {} read and hashed ({}), {} unchanged since the last capture (not read)",
                count(stats.hashed_files, "file"),
                human_bytes(stats.hashed_bytes),
                count(stats.cached_files, "file")
            );
        }
        crate::outln!("{id}")?;
    }
    note_moved_name(ctx, snap.name.as_deref(), named, &id);
    Ok(Outcome::Success)
}

/// The snapshot a `--name` points at before this capture, if any. Without `--name` the
/// catalog is not opened (an open of sled costs a log replay and an fsync).
fn name_holder(store: &Store, name: Option<&str>) -> Option<ObjectId> {
    let name = name?;
    store.catalog().session().ok()?.name_target(name).ok()?
}

/// Says so when `--name` moved from another snapshot to this one (on stderr: stdout ends
/// with the id).
fn note_moved_name(ctx: &Ctx, name: Option<&str>, before: Option<ObjectId>, id: &ObjectId) {
    if let (Some(name), Some(old)) = (name, before) {
        if old != *id && !ctx.quiet && !ctx.json {
            crate::note!(
                "the name `{name}` moved from snapshot {} to this one; {} stays in the store, \
                 by its id",
                old.short(16),
                old.short(16)
            );
        }
    }
}
