//! `rollback ALIAS`: an agent restored to the state before its last update or rollback (the
//! library's `Bundles::rollback`).

use anyhow::{Context, Result};

use crate::cli::RollbackArgs;
use crate::cmd::{Ctx, Outcome};
use zeroclaw_bundle::{Bundles, Progress as _};

/// Runs `rollback`.
pub fn run(args: RollbackArgs, ctx: &Ctx) -> Result<Outcome> {
    let install = Bundles::import_install(args.install.as_deref())?;
    let bundles = ctx.bundles()?;
    let progress = ctx.term_progress();
    let done = bundles.rollback(&install, &args.alias, &progress);
    progress.finish();
    let subject = zeroclaw_bundle::update_subject(&args.alias);
    let done = done.with_context(|| format!("could not roll back {subject}"))?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&done)?)?;
    } else {
        crate::outln!(
            "Rolled back {subject} in {} to the state before its last update or rollback \
             (config.toml before the rollback kept as {}; a second rollback undoes this one)",
            install.display(),
            done.backup.display()
        )?;
    }
    Ok(Outcome::Success)
}
