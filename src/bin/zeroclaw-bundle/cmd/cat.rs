//! `cat SNAPSHOT:PATH`: write a file's bytes to stdout, after checking its hash (a corrupt
//! object prints nothing and fails). The snapshot is any the grammar names
//! (`zeroclaw_bundle::source`): of the store, of a pack file, of a remote (the file fetched, verified).

use std::io::{Read, Write};

use anyhow::{bail, Context, Result};
use zeroclaw_bundle_store::{escape_name, resolve_path};

use crate::cli::CatArgs;
use crate::cmd::{stdout_error, Ctx, Outcome};
use zeroclaw_bundle::source::{self, classify, Takes, Target};

/// Runs `cat`.
pub fn run(args: CatArgs, ctx: &Ctx) -> Result<Outcome> {
    if ctx.json {
        bail!(
            "`cat` writes the file's bytes, never JSON; `ls --json SNAPSHOT:PATH` describes the file"
        );
    }
    let reference = classify(&ctx.store_path, &args.target, Takes::CAT)?;
    let path = reference.path().to_vec();
    if path.is_empty() {
        // A snapshot of the store that does not exist is said as every verb says it.
        if let Target::Stored { .. } = &reference.target {
            reference.stored_id(&ctx.store()?)?;
        }
        bail!("`cat` needs SNAPSHOT:PATH (a file inside the snapshot)");
    }
    let opened = source::open(
        super::ls::store_for(ctx, &reference)?.as_ref(),
        &reference,
        true,
    )?;
    let entry = resolve_path(opened.source(), &opened.snapshot.root, &path, &opened.label)?;
    if !entry.kind.is_file() {
        bail!(
            "{} is a directory in snapshot {}",
            escape_name(&path),
            opened.label
        );
    }
    let blob = opened.source().blob_of_size(&entry.id, entry.size)?;
    blob.verify(&entry.id)
        .with_context(|| format!("could not read {}", escape_name(&path)))?;
    let mut out = std::io::stdout().lock();
    let mut reader = blob.verifying_reader(entry.id);
    // Which side failed matters: a read error is a corrupt object, a write error is stdout
    // (EPIPE when the reader went away: quiet, see `cmd::StdoutClosed`).
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader
            .read(&mut buf)
            .with_context(|| format!("could not read {}", escape_name(&path)))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)?;
    Ok(Outcome::Success)
}
