//! `verify`: rehash every object and check that every snapshot reaches only present objects.
//! A damaged or missing object is named once, with each snapshot that needs it and how to get
//! it back (unpack or pull that snapshot again).

use anyhow::Result;

use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `verify`; exit 1 when anything is wrong.
pub fn run(ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let progress = ctx.term_progress();
    let report = bundles.verify(&progress);
    drop(progress);
    let report = report?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&report)?)?;
    } else {
        for p in &report.problems {
            crate::outln!("problem: {p}")?;
        }
        // How a damaged or lost object comes back: from another copy of a snapshot that
        // reaches it (an import takes what the store lacks, and replaces a damaged tree), not
        // from `reindex`, which rebuilds the catalog and the tree indexes from the objects.
        for snapshot in report.damaged() {
            crate::note!(
                "hint: snapshot {} comes back from another copy of it: `zeroclaw-bundle unpack` \
                 a pack of it made where it verifies, or `zeroclaw-bundle pull REMOTE/{}` again \
                 (a corrupt tree is replaced; remove a corrupt file object from objects/ first)",
                snapshot.short(12),
                snapshot.to_hex()
            );
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
