//! `sign` and `trust`, and what the other commands share about signatures: `--sign` after a
//! command made or picked its snapshot ([`sign_after`]), the trust a command checks against
//! ([`trust_of`]: the library applies it) and the one-line "who signed" ([`note_signers`]).
//! The logic is the library's; this file parses and prints.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;
use zeroclaw_bundle_store::ObjectId;

use crate::cli::{RequireArgs, SignArgs, SignFlags, TrustSetArgs};
use crate::cmd::{Ctx, Outcome};
use zeroclaw_bundle::{Bundles, SignReport, Signer, SignerTrust, SigningKey, TrustSettings};

/// Runs `sign`.
pub fn run(args: SignArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let report = match &args.signature {
        Some(path) => bundles.sign_with_signature(&args.snapshot, path)?,
        None => bundles.sign_with_key(&args.snapshot, SigningKey::open(args.key.as_deref())?)?,
    };
    print_report(ctx, &report)?;
    Ok(Outcome::Success)
}

fn print_report(ctx: &Ctx, r: &SignReport) -> Result<()> {
    if ctx.json {
        return ctx.print_json(&serde_json::to_value(r)?);
    }
    if !ctx.quiet {
        crate::outln!(
            "{} snapshot {} with {} key {}",
            if r.added { "signed" } else { "already signed" },
            r.snapshot.short(12),
            r.key_type,
            r.fingerprint
        )?;
        crate::outln!("signature {}", r.signature)?;
    }
    crate::outln!("{}", r.snapshot)?;
    Ok(())
}

/// `--sign` of export, snapshot, pack and push, first half: opens the key (asking for its
/// passphrase) before the command does its work, so a key problem stops it before anything is
/// made. `None` without `--sign`.
pub fn key_for(flags: &SignFlags) -> Result<Option<SigningKey>> {
    if !flags.sign {
        return Ok(None);
    }
    Ok(Some(SigningKey::open(flags.key.as_deref())?))
}

/// `--sign`, second half: signs `id` with the key [`key_for`] opened, with a note on stderr
/// (stdout keeps the command's own output, its id last).
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

/// The trust a command checks against: `--allowed-signers` over the store's setting, and
/// whether signatures are required (flag or setting) ([`SignerTrust::resolve`]). Its notes
/// (a store setting naming a file that cannot be read, lines of the file left out) go to
/// stderr.
pub fn trust_of(store_root: &Path, file: Option<&Path>, require: bool) -> Result<SignerTrust> {
    let trust = SignerTrust::resolve(store_root, file, require)?;
    for n in &trust.notes {
        crate::note!("notice: {n}");
    }
    Ok(trust)
}

/// [`trust_of`] for the commands with `--require-signed`.
pub fn trust_of_args(store_root: &Path, args: &RequireArgs) -> Result<SignerTrust> {
    trust_of(
        store_root,
        args.allowed_signers.as_deref(),
        args.require_signed,
    )
}

/// Says on stderr who signed `id` (nothing when `signers` is empty, or quiet).
pub fn note_signers(ctx: &Ctx, id: &ObjectId, signers: &[Signer]) {
    if ctx.quiet || ctx.json || signers.is_empty() {
        return;
    }
    crate::note!("{}", Signer::signed_by(id, signers));
}

/// Runs `trust`: sets what is given, then prints the settings.
pub fn run_trust(args: TrustSetArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let (settings, notes) =
        bundles.set_trust(args.allowed_signers.as_deref(), args.require_signed)?;
    for n in notes {
        crate::note!("notice: {n}");
    }
    print_settings(ctx, &settings)?;
    Ok(Outcome::Success)
}

fn print_settings(ctx: &Ctx, s: &TrustSettings) -> Result<()> {
    if ctx.json {
        return ctx.print_json(&json!({
            "allowed_signers": s.allowed_signers,
            "require_signed": s.require_signed,
        }));
    }
    crate::outln!(
        "allowed_signers  {}",
        s.allowed_signers
            .as_ref()
            .map(|p| zeroclaw_bundle_store::escape_text(&p.display().to_string()))
            .unwrap_or_else(|| "(none)".into())
    )?;
    crate::outln!("require_signed   {}", s.require_signed)?;
    Ok(())
}
