//! `verify`: rehash every object and check that every snapshot reaches only present objects.

use anyhow::Result;
use serde_json::json;

use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `verify`; exit 1 when anything is wrong.
pub fn run(ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let bar = ctx.progress(Some(0), "verifying", true);
    let report = store.verify(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    if ctx.json {
        ctx.print_json(&json!(report))?;
    } else {
        for p in &report.problems {
            crate::outln!("problem: {p}")?;
        }
        crate::outln!(
            "verified {} ({}) and {}: {}",
            count(report.objects, "object"),
            human_bytes(report.bytes),
            count(report.snapshots, "snapshot"),
            if report.problems.is_empty() {
                "ok".to_string()
            } else {
                count(report.problems.len() as u64, "problem")
            }
        )?;
    }
    Ok(if report.problems.is_empty() {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}
