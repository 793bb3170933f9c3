//! `recover DEST`: repair what an interrupted publish left beside DEST (restore the previous
//! tree of an interrupted two-rename swap, remove stale staging and retired trees).
//! `recover --install DIR`: finish the updates and rollbacks of that install's agents that a
//! kill cut short (the library's `Bundles::recover_install`, which owns the rule).

use anyhow::{Context, Result};
use zeroclaw_bundle::{Bundles, InstallRecovered, Progress as _};

use crate::cli::RecoverArgs;
use crate::cmd::{Ctx, Outcome};

/// Runs `recover`.
pub fn run(args: RecoverArgs, ctx: &Ctx) -> Result<Outcome> {
    if let Some(install) = &args.install {
        return run_install(install, ctx);
    }
    let dest = args
        .dest
        .as_deref()
        .expect("clap requires DEST or --install");
    let r = Bundles::recover(dest)?;
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

/// `recover --install DIR`.
fn run_install(install: &std::path::Path, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let progress = ctx.term_progress();
    let done = bundles.recover_install(install, &progress);
    progress.finish();
    let done = done.with_context(|| {
        format!(
            "could not finish what was cut short in {}",
            install.display()
        )
    })?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&done)?)?;
    } else {
        print_install(&done)?;
    }
    Ok(Outcome::Success)
}

fn print_install(done: &InstallRecovered) -> Result<()> {
    if done.nothing_done() {
        crate::outln!(
            "nothing to recover in {}: no update or rollback was cut short",
            done.install.display()
        )?;
        return Ok(());
    }
    for c in &done.completed {
        for p in &c.leftovers {
            crate::outln!("removed what the killed publish left: {}", p.display())?;
        }
        let workspace = if c.published.is_empty() {
            "workspace already in place".to_string()
        } else {
            format!("{} published", c.published.join(", "))
        };
        let config = match (&c.backup, c.config_written) {
            (Some(backup), true) => format!(
                "config.toml written (the one before kept as {})",
                backup.display()
            ),
            _ => "config.toml already in place".to_string(),
        };
        crate::outln!(
            "finished the {} of {} in {} (state {}): {workspace}, {config}",
            c.verb,
            zeroclaw_bundle::update_subject(&c.alias),
            done.install.display(),
            c.seq
        )?;
    }
    Ok(())
}
