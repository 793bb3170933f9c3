//! `checkout SNAPSHOT --out DIR [--force]`: publish a stored snapshot (staged, atomic swap).
//! The argument is read by the grammar every verb reads (`zeroclaw_bundle::source`): a remote ref
//! (`NAME/<id|name|agent/alias>`, NAME a configured remote) is pulled into the store first
//! (verified, as `pull` does), a pack file unpacked first (every object verified, as `unpack`
//! does), then published from there: what is published is always what the store holds. A
//! directory is refused (it is no snapshot: `snapshot --dir` captures it).

use std::ffi::OsStr;
use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::json;
use zeroclaw_bundle_store::{ObjectId, Store};

use crate::cli::CheckoutArgs;
use crate::cmd::{count, human_bytes, Ctx, Outcome};
use zeroclaw_bundle::sign::Trust;
use zeroclaw_bundle::source::{classify, Takes, Target};
use zeroclaw_bundle::{CheckedOut, Replace};

/// After a publish to the current directory (`--out .`): the directory the shell is in was
/// swapped out (and removed), so say how to enter the published one.
pub fn note_cwd_swapped(out: &std::path::Path) {
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
    let reference = classify(&ctx.store_path, OsStr::new(&args.snapshot), Takes::CHECKOUT)?;
    // A pack is unpacked into the store, created if needed (as `unpack` does); anything
    // else needs the store that holds it or names its remote.
    let bundles = match &reference.target {
        Target::Pack { .. } => match ctx.existing_store()? {
            Some(store) => zeroclaw_bundle::Bundles::from_store(store),
            None => zeroclaw_bundle::Bundles::from_store(ctx.create_store()?),
        },
        _ => ctx.bundles()?,
    };
    let store = bundles.store();
    let trust = super::sign::trust_of_args(store.root(), &args.trust)?;
    let id = match &reference.target {
        Target::Remote { spec, .. } => {
            let require = trust.enforcing(&args.snapshot)?;
            let (id, _, report) =
                crate::cmd::remote::pull_ref_checked(store, &args.snapshot, ctx, require)?;
            if !ctx.quiet && !ctx.json {
                crate::note!(
                    "pulled {} from {}: {}, {}, verified",
                    id.short(12),
                    spec.name,
                    count(report.packs, "pack"),
                    human_bytes(report.bytes)
                );
            }
            id
        }
        Target::Pack { file, .. } => unpack(ctx, store, file, &trust)?,
        _ => reference.stored_id(store)?,
    };
    // `--require-signed`: refused before the destination is touched (naming the signers); the
    // library applies the same decision (flags over the store's trust.toml) again.
    super::sign::gate(ctx, store, &id, &trust)?;
    let policy = match trust.enforcing(&args.snapshot)? {
        Some(allowed) => zeroclaw_bundle::TrustPolicy::Require(allowed.clone()),
        None => zeroclaw_bundle::TrustPolicy::Off,
    };
    let bundles = zeroclaw_bundle::Bundles::from_store(store.clone()).with_trust_policy(policy);
    let CheckedOut {
        published,
        replaced,
        ..
    } = bundles.checkout(
        &id.to_hex(),
        &args.out,
        Replace::of_flags(args.force, args.replace_any),
        &ctx.term_progress(),
    )?;
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "destination": crate::cmd::host_path(&published.dest),
            "files": published.files,
            "bytes": published.bytes,
            "reused_files": published.reused,
            "replaced": replaced,
        }))?;
    } else {
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
    }
    Ok(Outcome::Success)
}

/// Unpacks the pack at `path` into `store` (its signatures checked against `trust` before
/// anything is written, as `unpack` does) and returns the snapshot it carried.
fn unpack(ctx: &Ctx, store: &Store, path: &Path, trust: &Trust) -> Result<ObjectId> {
    let policy = match trust.enforcing(&path.display().to_string())? {
        Some(allowed) => zeroclaw_bundle::TrustPolicy::Require(allowed.clone()),
        None => zeroclaw_bundle::TrustPolicy::Off,
    };
    let progress = ctx.term_progress();
    let unpacked = zeroclaw_bundle::Bundles::from_store(store.clone())
        .with_trust_policy(policy)
        .unpack(path, &progress)
        .with_context(|| format!("could not check out {}", path.display()));
    drop(progress);
    let unpacked = unpacked?;
    if !ctx.quiet && !ctx.json {
        crate::note!(
            "unpacked {} from {}: {} new, verified",
            unpacked.id.short(12),
            path.display(),
            count(unpacked.read as u64, "object")
        );
    }
    Ok(unpacked.id)
}
