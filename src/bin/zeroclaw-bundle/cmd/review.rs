//! `review <BUNDLE-DIR|SNAPSHOT|PACK|REMOTE/REF> [--install DIR]`: what an operator must accept
//! before import, on one screen (or one `--json` document; `-q` prints the content id only).
//! The verb is `zeroclaw_bundle::review`; this file resolves the store and the install, calls it and
//! prints. Exit 0 whenever the review was produced, whatever it found.

use std::path::Path;

use anyhow::Result;

use crate::cli::ReviewArgs;
use crate::cmd::{Ctx, Outcome};
use zeroclaw_bundle::review::{render, review, ReviewOptions, SCAN_CAP};
use zeroclaw_bundle::source::refuse_missing_path;

/// Runs `review`.
pub fn run(args: ReviewArgs, ctx: &Ctx) -> Result<Outcome> {
    // A path that is not there is said as such before a store is created or read.
    refuse_missing_path(&args.source)?;
    let named = args.install.is_some();
    // A default install that cannot even be located (no HOME) only means nothing to compare.
    let install = match zeroclaw_bundle::agent::install_root(args.install.as_deref()) {
        Ok(path) => Some(path),
        Err(_) if !named => None,
        Err(e) => return Err(e.into()),
    };
    // A directory or a pack is added to the store (created if needed, as `snapshot --dir` and
    // `unpack` do); a snapshot or remote ref needs the store that holds it or its remote.
    let store = if Path::new(&args.source).exists() {
        match ctx.existing_store()? {
            Some(store) => store,
            None => ctx.create_store()?,
        }
    } else {
        ctx.store()?
    };
    let trust =
        super::sign::trust_of(store.root(), args.signers.allowed_signers.as_deref(), false)?;
    let opts = ReviewOptions {
        install,
        install_named: named,
        scan_cap: SCAN_CAP,
        allowed: trust.allowed,
    };
    let progress = ctx.term_progress();
    let result = review(&store, &args.source, &opts, &progress);
    drop(progress);
    let review = result?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&review)?)?;
    } else if ctx.quiet {
        crate::outln!("{}", review.root)?;
    } else {
        let mut text = Vec::new();
        render(&review, &mut text)?;
        crate::cmd::write_stdout(&text)?;
    }
    Ok(Outcome::Success)
}
