//! `review <BUNDLE-DIR|SNAPSHOT|PACK|REMOTE/REF> [--install DIR] [--allowed-signers FILE]`:
//! what an operator must accept before import, on one screen (or one `--json` document; `-q`
//! prints the content id only). The verb and its screen are the library's
//! ([`Bundles::review`], [`zeroclaw_bundle::render_review`]); this file opens the store the
//! source needs, calls it and prints. A newer version of an agent imported into the install
//! is followed by the three-way plan its import would apply (`Review::update_plan`). Exit 0
//! whenever the review was produced, whatever it found.

use anyhow::Result;
use zeroclaw_bundle::{Bundles, ReviewOptions, SignerTrust};

use crate::cli::ReviewArgs;
use crate::cmd::{Ctx, Outcome};

/// Runs `review`.
pub fn run(mut args: ReviewArgs, ctx: &Ctx) -> Result<Outcome> {
    let mut decrypting = super::crypt::Decrypting::new(args.identity.identity.as_deref());
    args.source = decrypting.arg(&args.source)?;
    // A path that is not there is said as such before a store is created or read; a
    // directory or a pack is added to the store (created if needed, as `snapshot --dir` and
    // `unpack` do); a snapshot or remote ref needs the store that holds it or its remote.
    let options = ReviewOptions::comparing_with(args.install.as_deref());
    let bundles = Bundles::open_for_source(&ctx.store_path, &args.source)?;
    let trust = SignerTrust::resolve(
        bundles.root(),
        args.signers.allowed_signers.as_deref(),
        false,
    )?;
    for n in &trust.notes {
        crate::note!("notice: {n}");
    }
    let options = ReviewOptions {
        allowed: trust.allowed,
        ..options
    };
    let progress = ctx.term_progress();
    let result = bundles.review(&args.source, &options, &progress);
    drop(progress);
    let review = result?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&review)?)?;
    } else if ctx.quiet {
        crate::outln!("{}", review.root)?;
    } else {
        let mut text = Vec::new();
        zeroclaw_bundle::render_review(&review, &mut text)?;
        crate::cmd::write_stdout(&text)?;
        if let Some(plan) = &review.update_plan {
            crate::outln!(
                "\nImported into {} now, this is the update in place of {} (three ways: \
                 nothing is written by review):",
                plan.install.display(),
                crate::cmd::escape_message(&plan.subject())
            )?;
            super::update::print_plan(plan)?;
        }
    }
    Ok(Outcome::Success)
}
