//! `gc`, `reindex` and `forget`: the store housekeeping commands.

use anyhow::Result;
use serde_json::json;

use crate::cli::{GcArgs, RefArgs};
use crate::cmd::{human_bytes, Ctx, Outcome};

/// Runs `gc`.
pub fn run_gc(args: GcArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let r = store.gc(args.grace)?;
    if ctx.json {
        ctx.print_json(&json!(r))?;
    } else {
        println!(
            "removed {} objects ({}), kept {} reachable and {} unreachable younger than {} s",
            r.removed,
            human_bytes(r.freed_bytes),
            r.reachable,
            r.young_kept,
            args.grace
        );
    }
    Ok(Outcome::Success)
}

/// Runs `reindex`.
pub fn run_reindex(ctx: &Ctx) -> Result<Outcome> {
    let r = ctx.store()?.reindex()?;
    if ctx.json {
        ctx.print_json(&json!(r))?;
    } else {
        for p in &r.problems {
            eprintln!("warning: {p}");
        }
        println!("reindexed {} snapshots", r.snapshots);
    }
    Ok(Outcome::Success)
}

/// Runs `forget`.
pub fn run_forget(args: RefArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let id = store.resolve(&args.snapshot)?;
    store.forget(&id)?;
    if ctx.json {
        ctx.print_json(&json!({ "forgotten": id }))?;
    } else {
        println!("forgot {id} (run `gc` to free its data)");
    }
    Ok(Outcome::Success)
}
