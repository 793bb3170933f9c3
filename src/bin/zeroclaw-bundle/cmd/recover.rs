//! `recover DEST`: repair what an interrupted publish left beside DEST (restore the previous
//! tree of an interrupted two-rename swap, remove stale staging and retired trees).

use anyhow::{Context, Result};
use serde_json::json;

use crate::cli::RecoverArgs;
use crate::cmd::{host_path, Ctx, Outcome};
use zeroclaw_bundle::publish::recover;

/// Runs `recover`.
pub fn run(args: RecoverArgs, ctx: &Ctx) -> Result<Outcome> {
    let r = recover(&args.dest)
        .with_context(|| format!("could not recover {}", args.dest.display()))?;
    if ctx.json {
        ctx.print_json(&json!({
            "destination": host_path(&r.dest),
            "restored_from": r.restored_from.as_deref().map(host_path),
            "removed_old": r.removed_old.iter().map(|p| host_path(p)).collect::<Vec<_>>(),
            "removed_staging": r.removed_staging.iter().map(|p| host_path(p)).collect::<Vec<_>>(),
            "left_alone": r.left_alone.iter().map(|l| json!({"path": host_path(&l.path), "reason": l.reason})).collect::<Vec<_>>(),
        }))?;
        return Ok(Outcome::Success);
    }
    if let Some(from) = &r.restored_from {
        crate::outln!("restored {} from {}", r.dest.display(), from.display())?;
    }
    for p in &r.removed_old {
        crate::outln!("removed the previous tree {}", p.display())?;
    }
    for p in &r.removed_staging {
        crate::outln!("removed the staging tree {}", p.display())?;
    }
    for l in &r.left_alone {
        crate::outln!("left {} alone: {}", l.path.display(), l.reason)?;
    }
    if r.nothing_done() && r.left_alone.is_empty() {
        crate::outln!("nothing to recover at {}", r.dest.display())?;
    }
    Ok(Outcome::Success)
}
