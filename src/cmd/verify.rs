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
        // An object id is `object` in every `--json` document (the store's type says `id`);
        // each problem also carries the sentence text output prints.
        let mut v = json!(report);
        if let Some(problems) = v["problems"].as_array_mut() {
            for (p, problem) in problems.iter_mut().zip(&report.problems) {
                if let Some(m) = p.as_object_mut() {
                    if let Some(id) = m.remove("id") {
                        m.insert("object".into(), id);
                    }
                    m.insert("message".into(), json!(problem.to_string()));
                }
            }
        }
        ctx.print_json(&v)?;
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
