//! `checkout SNAPSHOT --out DIR [--force]`: publish a snapshot ([`Bundles::checkout`]: a
//! remote ref is pulled and a pack file unpacked into the store first, then published from
//! there). `--require-signed`/`--allowed-signers` become the [`TrustPolicy`] the library
//! applies ([`trust_policy`]); what it pulled, unpacked and who signed is printed as it goes.

use std::path::Path;

use anyhow::Result;
use zeroclaw_bundle::{Bundles, CheckedOut, Replace, TrustPolicy, Verb};

use crate::cli::{CheckoutArgs, RequireArgs};
use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// The trust policy of `--require-signed` and `--allowed-signers` over the store's
/// `trust.toml` (at `store_root`): a signature by a key the allowed signers trust is required,
/// or nothing is. `what` names what could not be checked when signatures are required and no
/// allowed_signers file is set.
pub fn trust_policy(store_root: &Path, args: &RequireArgs, what: &str) -> Result<TrustPolicy> {
    Ok(super::sign::trust_of_args(store_root, args)?.policy(what)?)
}

/// After a publish to the current directory (`--out .`): the directory the shell is in was
/// swapped out (and removed), so say how to enter the published one.
pub fn note_cwd_swapped(out: &Path) {
    if out
        .components()
        .all(|c| matches!(c, std::path::Component::CurDir))
    {
        crate::note!(
            "note: your shell is still in the directory the publish replaced (now removed); \
             `cd \"$PWD\"` enters the published one"
        );
    }
}

/// Runs `checkout`.
pub fn run(args: CheckoutArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = Bundles::open_for(&ctx.store_path, Verb::Checkout, &args.snapshot)?;
    let policy = trust_policy(bundles.root(), &args.trust, &args.snapshot)?;
    let progress = ctx.noting_progress();
    let done = bundles.with_trust_policy(policy).checkout(
        &args.snapshot,
        &args.out,
        Replace::of_flags(args.force, args.replace_any),
        &progress,
    );
    drop(progress);
    let done = done?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&done)?)?;
        return Ok(Outcome::Success);
    }
    let CheckedOut {
        id,
        published,
        replaced,
        ..
    } = done;
    if !ctx.quiet {
        crate::note!(
            "published {}, {} to {}",
            count(published.files, "file"),
            human_bytes(published.bytes),
            published.dest.display()
        );
        if ctx.verbose {
            crate::note!(
                "{} of them linked unchanged from the previous checkout",
                count(published.reused, "file")
            );
        }
        if let Some(r) = &replaced {
            crate::note!("{}", r.describe(&published.dest));
        }
        note_cwd_swapped(&args.out);
    }
    crate::outln!("{id}")?;
    Ok(Outcome::Success)
}
