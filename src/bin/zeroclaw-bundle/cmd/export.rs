//! `export <ALIAS> --out DIR [--install DIR] [--force] [--sign]`: capture an agent and publish
//! its bundle ([`Bundles::prepare_export`], then `run`), sign it when asked, then print the
//! report of SPEC §8 (its text is the library's, shared with `snapshot <ALIAS>`).

use anyhow::Result;
use zeroclaw_bundle::{AgentOptions, Bundles, Replace};

use crate::cli::ExportArgs;
use crate::cmd::{Ctx, Outcome};

/// The skip counts of a tally, as `show` prints them too.
pub use zeroclaw_bundle::skipped_counts;

/// Runs `export`: the install and the destination are checked (and the destination
/// claimed) before the store is opened or created, so a typo creates nothing.
pub fn run(args: ExportArgs, ctx: &Ctx) -> Result<Outcome> {
    let job = Bundles::prepare_export(
        &ctx.store_path,
        args.install.as_deref(),
        &args.alias,
        &args.out,
        Replace::of_flags(args.force, args.replace_any),
    )?;
    // The key is opened (its passphrase asked) once the agent and destination check out, and
    // before anything is captured.
    let key = super::sign::key_for(&args.sign)?;
    let options = AgentOptions {
        zeroclaw_version: args.zeroclaw_version,
        excludes: args.exclude,
        ..Default::default()
    };
    let progress = ctx.term_progress();
    let result = job.run(&options, &progress);
    drop(progress);
    let (bundles, exported) = result?;
    super::sign::sign_after(ctx, &bundles, &exported.snapshot.id, key)?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&exported)?)?;
        return Ok(Outcome::Success);
    }
    if !ctx.quiet {
        crate::cmd::write_stdout(exported.render(ctx.verbose).as_bytes())?;
    }
    crate::outln!("{}", exported.snapshot.id)?;
    if !ctx.quiet {
        super::checkout::note_cwd_swapped(&args.out);
    }
    Ok(Outcome::Success)
}
