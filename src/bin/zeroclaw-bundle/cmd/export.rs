//! `export <ALIAS> --out DIR [--install DIR] [--force] [--sign]`: capture an agent and publish
//! its bundle ([`Bundles::prepare_export`], then `run`), sign it when asked, then print the
//! report of SPEC §8 (its text is the library's, shared with `snapshot <ALIAS>`).

use anyhow::{Context as _, Result};
use zeroclaw_bundle::{AgentOptions, Bundles, ObjectId, Replace, SigningKey};

use crate::cli::{ExportArgs, SignFlags};
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
    let key = signing_key(&args.sign)?;
    let options = AgentOptions {
        zeroclaw_version: args.zeroclaw_version,
        excludes: args.exclude,
        ..Default::default()
    };
    let progress = ctx.term_progress();
    let result = job.run(&options, &progress);
    drop(progress);
    let (bundles, exported) = result?;
    sign_after(ctx, &bundles, &exported.snapshot.id, key)?;
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

/// `--sign` of `export` and `snapshot`, first half: opens the key (asking for its passphrase)
/// before the command does its work, so a key problem stops it before anything is made.
/// `None` without `--sign`.
pub fn signing_key(flags: &SignFlags) -> Result<Option<SigningKey>> {
    if !flags.sign {
        return Ok(None);
    }
    Ok(Some(SigningKey::open(flags.key.as_deref())?))
}

/// `--sign`, second half: signs `id` with the key [`signing_key`] opened, with a note on
/// stderr (stdout keeps the command's own output, its id last).
pub fn sign_after(
    ctx: &Ctx,
    bundles: &Bundles,
    id: &ObjectId,
    key: Option<SigningKey>,
) -> Result<()> {
    let Some(key) = key else {
        return Ok(());
    };
    let r = bundles
        .sign_with_key(&id.to_hex(), key)
        .with_context(|| format!("could not sign snapshot {}", id.short(12)))?;
    if !ctx.quiet && !ctx.json {
        crate::note!(
            "{} snapshot {} with {} key {}",
            if r.added { "signed" } else { "already signed" },
            id.short(12),
            r.key_type,
            r.fingerprint
        );
    }
    Ok(())
}
