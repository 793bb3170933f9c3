//! `snapshot <ALIAS> [--install DIR]` (capture an agent's bundle into the store) and
//! `snapshot --dir PATH` (capture any directory), both with `[--name NAME] [--sign]`: checked
//! before the store is created ([`Bundles::prepare_snapshot_agent`],
//! [`Bundles::prepare_snapshot_dir`]), captured, signed when asked, printed.

use anyhow::Result;
use zeroclaw_bundle::{AgentOptions, Bundles, NameMoved};

use super::sign::{key_for, sign_after};
use crate::cli::SnapshotArgs;
use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `snapshot`.
pub fn run(args: SnapshotArgs, ctx: &Ctx) -> Result<Outcome> {
    let Some(dir) = args.dir else {
        let alias = args
            .alias
            .as_deref()
            .expect("clap requires an alias without --dir");
        let options = AgentOptions {
            name: args.name,
            zeroclaw_version: args.zeroclaw_version,
            excludes: args.exclude,
        };
        let job = Bundles::prepare_snapshot_agent(
            &ctx.store_path,
            args.install.as_deref(),
            alias,
            &options,
        )?;
        let key = key_for(&args.sign)?;
        let progress = ctx.term_progress();
        let result = job.run(&progress);
        drop(progress);
        let (bundles, done) = result?;
        let c = &done.capture;
        sign_after(ctx, &bundles, &c.id, key)?;
        if ctx.json {
            ctx.print_json(&serde_json::to_value(&done)?)?;
        } else {
            if !ctx.quiet {
                crate::cmd::write_stdout(c.render(ctx.verbose).as_bytes())?;
            }
            crate::outln!("{}", c.id)?;
        }
        note_moved_name(ctx, done.name_moved.as_ref());
        return Ok(Outcome::Success);
    };
    let job = Bundles::prepare_snapshot_dir(&ctx.store_path, &dir, args.name.as_deref())?;
    let key = key_for(&args.sign)?;
    let progress = ctx.term_progress();
    let result = job.run(&progress);
    drop(progress);
    let (bundles, done) = result?;
    let (id, snap, stats) = (
        &done.capture.id,
        &done.capture.snapshot,
        &done.capture.stats,
    );
    sign_after(ctx, &bundles, id, key)?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&done)?)?;
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
            for s in snap.report.skipped.iter().filter(|s| s.reason == "store") {
                crate::note!("not entered: {} is the store itself", s.path);
            }
        }
        if ctx.verbose {
            crate::note!("{}", stats.describe());
        }
        crate::outln!("{id}")?;
    }
    note_moved_name(ctx, done.name_moved.as_ref());
    Ok(Outcome::Success)
}

/// Says so when `--name` moved from another snapshot to this one (on stderr: stdout ends
/// with the id).
fn note_moved_name(ctx: &Ctx, moved: Option<&NameMoved>) {
    if let Some(moved) = moved {
        if !ctx.quiet && !ctx.json {
            crate::note!("{moved}");
        }
    }
}
