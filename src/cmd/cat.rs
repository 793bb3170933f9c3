//! `cat SNAPSHOT:PATH`: write a file's bytes to stdout, after checking its hash (a corrupt
//! object prints nothing and fails).

use std::io::{Read, Write};

use anyhow::{bail, Context, Result};
use zeroclaw_bundle_store::{escape_name, resolve_path};

use crate::cli::CatArgs;
use crate::cmd::{split_target, stdout_error, Ctx, Outcome};

/// Runs `cat`.
pub fn run(args: CatArgs, ctx: &Ctx) -> Result<Outcome> {
    if ctx.json {
        bail!(
            "`cat` writes the file's bytes, never JSON; `ls --json SNAPSHOT:PATH` describes the file"
        );
    }
    let store = ctx.store()?;
    let (reference, path) = split_target(&args.target);
    if path.is_empty() {
        bail!("`cat` needs SNAPSHOT:PATH (a file inside the snapshot)");
    }
    let id = store.resolve(&reference)?;
    let snap = store.read_snapshot(&id)?;
    let entry = resolve_path(&store.reader(), &snap.root, &path, &id.short(12))?;
    if !entry.kind.is_file() {
        bail!(
            "{} is a directory in snapshot {}",
            escape_name(&path),
            id.short(12)
        );
    }
    let blob = store.objects().open_blob(&entry.id)?;
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
