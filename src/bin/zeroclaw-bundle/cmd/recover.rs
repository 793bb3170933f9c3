//! `recover DEST`: repair what an interrupted publish left beside DEST (restore the previous
//! tree of an interrupted two-rename swap, remove stale staging and retired trees).

use anyhow::Result;
use zeroclaw_bundle::Bundles;

use crate::cli::RecoverArgs;
use crate::cmd::{Ctx, Outcome};

/// Runs `recover`.
pub fn run(args: RecoverArgs, ctx: &Ctx) -> Result<Outcome> {
    let r = Bundles::recover(&args.dest)?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&r)?)?;
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
