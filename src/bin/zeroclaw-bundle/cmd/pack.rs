//! `pack <SNAPSHOT> --out FILE|- [--since SNAPSHOT] [--trees-only]` and `unpack FILE|-`:
//! [`Bundles::pack`] (a file staged and renamed into place), [`Bundles::pack_to_stdout`]
//! (`--out -`: it fails when its reader leaves before the end) and [`Bundles::unpack_at`] (the
//! whole pack verified before anything is written, the snapshot record committed last; a
//! store the unpack was to create exists only once it succeeded).

use std::io::{self, Read};

use anyhow::{bail, Context as _, Result};
use zeroclaw_bundle::{Bundles, Identities, PackInput, Packed, Recipients, Verb};

/// The first bytes of an age file (an encrypted pack).
const MAGIC: &[u8] = b"age-encryption.org/v1";

use crate::cli::{PackArgs, UnpackArgs};
use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `pack`.
pub fn run_pack(args: PackArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = Bundles::open_for(&ctx.store_path, Verb::Pack, &args.snapshot)?;
    let id = bundles.resolve_for(Verb::Pack, &args.snapshot)?;
    // Signed first: the pack carries the signatures the store keeps.
    let signing = super::sign::key_for(&args.sign)?;
    super::sign::sign_after(ctx, &bundles, &id, signing)?;
    let options = bundles.pack_options(args.since.as_deref(), args.trees_only)?;
    let to_stdout = args.out.as_os_str() == "-";
    if to_stdout && ctx.json {
        bail!("--json needs --out FILE: with --out -, stdout carries the pack");
    }
    // Recipients are read before anything is written: one that does not parse is named.
    let recipients = match args.encrypt_to.is_empty() {
        true => None,
        false => Some(Recipients::parse(&args.encrypt_to)?),
    };
    let to = recipients.as_ref();
    let progress = ctx.term_progress();
    let packed = if to_stdout {
        bundles.pack_sealed_to_stdout(&id.to_hex(), options, to, &progress)
    } else {
        // Created 0600 when the snapshot holds a file others may not read.
        bundles.pack_sealed(&id.to_hex(), &args.out, options, args.force, to, &progress)
    };
    drop(progress);
    report(ctx, &packed?)
}

/// The report of a `pack`.
fn report(ctx: &Ctx, packed: &Packed) -> Result<Outcome> {
    if ctx.json {
        ctx.print_json(&serde_json::to_value(packed)?)?;
        return Ok(Outcome::Success);
    }
    let stats = &packed.stats;
    if !ctx.quiet {
        crate::note!(
            "packed {} ({}, {}), {} into {}{}",
            count(stats.objects, "object"),
            count(stats.trees, "tree"),
            count(stats.blobs, "blob"),
            human_bytes(stats.bytes),
            human_bytes(stats.pack_bytes),
            match &packed.destination {
                None => String::new(),
                Some(out) => format!(" at {}", out.display()),
            }
        );
    }
    if packed.destination.is_some() {
        crate::outln!("{}", packed.id)?;
    }
    Ok(Outcome::Success)
}

/// Runs `unpack`.
pub fn run_unpack(args: UnpackArgs, ctx: &Ctx) -> Result<Outcome> {
    let from_stdin = args.pack.as_os_str() == "-";
    let what = if from_stdin {
        "the pack from stdin".to_string()
    } else {
        args.pack.display().to_string()
    };
    // `--require-signed`: a pack whose snapshot no trusted key signed is refused before
    // anything is written (a pack file: before the store is even created).
    let policy = super::checkout::trust_policy(&ctx.store_path, &args.trust, &what)?;
    // An encrypted pack is decrypted whole (authenticated) before the unpack reads it.
    let mut decrypting = super::crypt::Decrypting::new(args.identity.identity.as_deref());
    let plain = match from_stdin {
        true => args.pack.clone(),
        false => decrypting.arg(args.pack.as_os_str())?.into(),
    };
    let progress = ctx.noting_progress();
    let stdin = io::stdin();
    let mut stream: Box<dyn Read> = Box::new(stdin.lock());
    if from_stdin {
        // An encrypted pack on stdin: its first bytes say so, and it is decrypted as it is
        // spooled (a changed chunk fails the spool, before anything is imported).
        let mut head = Vec::new();
        (&mut stream)
            .take(MAGIC.len() as u64)
            .read_to_end(&mut head)
            .context("could not read the pack from stdin")?;
        let whole = io::Cursor::new(head.clone()).chain(stream);
        stream = if head == MAGIC {
            Identities::load(args.identity.identity.as_deref())?
                .decrypt_stream(whole, "the pack from stdin")?
        } else {
            Box::new(whole)
        };
    }
    let input = if from_stdin {
        PackInput::Stream(&mut stream)
    } else {
        PackInput::File(&plain)
    };
    let unpacked = Bundles::unpack_at(&ctx.store_path, input, policy, &progress);
    drop(progress);
    let unpacked = unpacked?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&unpacked)?)?;
        return Ok(Outcome::Success);
    }
    if !ctx.quiet {
        crate::note!("{}", unpacked.describe());
    }
    crate::outln!("{}", unpacked.id)?;
    Ok(Outcome::Success)
}
