//! `verify`: rehash every object and check that every snapshot reaches only present objects.

use anyhow::Result;
use serde_json::json;

use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `verify`; exit 1 when anything is wrong.
pub fn run(ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    // The bar appears once the total is known (no `0 B/0 B` flash before it).
    let mut bar: Option<indicatif::ProgressBar> = None;
    let report = store.verify(&mut |done, total| {
        if total == 0 {
            return;
        }
        let b = bar.get_or_insert_with(|| ctx.progress(Some(total), "verifying", true));
        b.set_length(total);
        b.set_position(done);
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let report = report?;
    if ctx.json {
        ctx.print_json(&json!(report))?;
    } else {
        for p in &report.problems {
            crate::outln!("problem: {p}")?;
        }
        if report.tree_indexes_missing > 0 {
            crate::note!(
                "note: {} without a tree index (not a problem: readers use the objects; \
                 `zeroclaw-bundle reindex` writes them)",
                count(report.tree_indexes_missing, "snapshot")
            );
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
