//! `cat SNAPSHOT:PATH`: write a file's bytes to stdout, after checking its hash (a corrupt
//! object prints nothing and fails). The snapshot is any the grammar names: of the store, of
//! a pack file, of a remote (the file fetched, verified).

use std::io::{Read, Write};

use anyhow::{bail, Context, Result};
use zeroclaw_bundle::{Bundles, ReadVerb};
use zeroclaw_bundle_store::escape_name;

use crate::cli::CatArgs;
use crate::cmd::{stdout_error, Ctx, Outcome};

/// Runs `cat`.
pub fn run(args: CatArgs, ctx: &Ctx) -> Result<Outcome> {
    if ctx.json {
        bail!(
            "`cat` writes the file's bytes, never JSON; `ls --json SNAPSHOT:PATH` describes the file"
        );
    }
    let opened = Bundles::open_snapshot_at(&ctx.store_path, &args.target, ReadVerb::Cat)?;
    let mut file = opened.open_file()?;
    let mut out = std::io::stdout().lock();
    // Which side failed matters: a read error is the storage, a write error is stdout
    // (EPIPE when the reader went away: quiet, see `cmd::StdoutClosed`).
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("could not read {}", escape_name(opened.path())))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).map_err(stdout_error)?;
    }
    out.flush().map_err(stdout_error)?;
    Ok(Outcome::Success)
}
