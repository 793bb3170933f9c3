//! `export-plugin <SKILL_BUNDLE> --out DIR [--install DIR] [--name NAME] [--force]`: publish a
//! skill bundle and its agents' MCP servers as an Agent Plugin
//! ([`Bundles::prepare_export_plugin`], then `run`), then print the library's report.

use anyhow::Result;
use zeroclaw_bundle::{Bundles, Replace};

use crate::cli::ExportPluginArgs;
use crate::cmd::{Ctx, Outcome};

/// Runs `export-plugin`: the install, the bundle and the destination are checked (and the
/// destination claimed) before the store is opened or created.
pub fn run(args: ExportPluginArgs, ctx: &Ctx) -> Result<Outcome> {
    let job = Bundles::prepare_export_plugin(
        &ctx.store_path,
        args.install.as_deref(),
        &args.skill_bundle,
        args.name.as_deref(),
        &args.out,
        Replace::of_flags(args.force, args.replace_any),
    )?;
    let progress = ctx.term_progress();
    let result = job.run(&progress);
    drop(progress);
    let (_, exported) = result?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&exported)?)?;
        return Ok(Outcome::Success);
    }
    if !ctx.quiet {
        crate::cmd::write_stdout(exported.render().as_bytes())?;
    }
    crate::outln!("{}", exported.id)?;
    Ok(Outcome::Success)
}
