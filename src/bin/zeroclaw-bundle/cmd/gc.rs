//! `gc`, `reindex` and `forget`: the store housekeeping commands.

use anyhow::Result;

use crate::cli::{GcArgs, RefArgs};
use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `gc`.
pub fn run_gc(args: GcArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let spinner = ctx.spinner("collecting garbage");
    let r = bundles.gc(args.grace);
    crate::cmd::clear_progress(&[&spinner]);
    let r = r?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&r)?)?;
    } else {
        crate::outln!(
            "removed {} ({}); kept {} reachable from a snapshot or a running mount",
            count(r.removed, "unreachable object"),
            human_bytes(r.freed_bytes),
            count(r.reachable, "object"),
        )?;
        if r.temp_removed > 0 {
            crate::outln!(
                "removed {} ({}) from tmp/ (left by an interrupted or killed command)",
                count(r.temp_removed, "temporary entry"),
                human_bytes(r.temp_freed_bytes),
            )?;
        }
        if r.tree_indexes_removed > 0 {
            crate::outln!(
                "removed {} of snapshots that are gone",
                indexes(r.tree_indexes_removed)
            )?;
        }
        if r.duplicates_removed > 0 {
            crate::outln!(
                "removed {} ({}) that a pack also holds",
                count(r.duplicates_removed, "loose copy"),
                human_bytes(r.duplicate_bytes),
            )?;
        }
        if r.packs_merged > 0 {
            crate::outln!("merged {}", count(r.packs_merged, "small object pack"))?;
        }
        if r.signatures_removed > 0 {
            crate::outln!(
                "removed {} of snapshots that are gone",
                count(r.signatures_removed, "signature")
            )?;
        }
        if r.dest_records_removed > 0 {
            crate::outln!(
                "removed {} of checkout or export directories that are gone",
                count(r.dest_records_removed, "record")
            )?;
        }
        if r.young_kept > 0 {
            crate::outln!(
                "kept {} ({}) that no snapshot reaches because {} younger than the grace \
                 period ({} s: a capture in progress writes its objects before its snapshot); \
                 `zeroclaw-bundle gc --grace 0` frees them when no capture is running",
                count(r.young_kept, "object"),
                human_bytes(r.young_kept_bytes),
                if r.young_kept == 1 {
                    "it is"
                } else {
                    "they are"
                },
                args.grace
            )?;
        }
    }
    Ok(Outcome::Success)
}

/// Runs `reindex`.
pub fn run_reindex(ctx: &Ctx) -> Result<Outcome> {
    let r = ctx.bundles()?.reindex()?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&r)?)?;
    } else {
        for p in &r.problems {
            crate::note!("warning: {p}");
        }
        crate::outln!("reindexed {} snapshots", r.snapshots)?;
        if r.tree_indexes_written > 0 {
            crate::outln!("wrote {} (missing or bad)", indexes(r.tree_indexes_written))?;
        }
    }
    Ok(Outcome::Success)
}

fn indexes(n: u64) -> String {
    if n == 1 {
        "1 tree index".into()
    } else {
        format!("{n} tree indexes")
    }
}

/// Runs `forget`.
pub fn run_forget(args: RefArgs, ctx: &Ctx) -> Result<Outcome> {
    let gone = ctx.bundles()?.forget(&args.snapshot)?;
    let (id, served) = (gone.snapshot, gone.served_by_a_mount);
    if ctx.json {
        ctx.print_json(&serde_json::to_value(gone)?)?;
    } else if served {
        crate::outln!(
            "forgot {id}; a running mount still serves it: `zeroclaw-bundle gc` frees its data \
             once that mount ends (`zeroclaw-bundle umount MOUNTPOINT`)"
        )?;
    } else {
        crate::outln!(
            "forgot {id}; `zeroclaw-bundle gc` frees its data once it is older than the grace \
             period (`gc --grace 0` at once, when no capture is running)"
        )?;
    }
    Ok(Outcome::Success)
}
