//! `ls SNAPSHOT[:PATH] [-r]`: list a directory of a snapshot (kind, size, name; `-v` adds the
//! mode and the id, `--json` has them all). The snapshot is any the grammar names: of the
//! store, of a pack file (read in place), of a remote (its trees only, in place).

use anyhow::Result;
use zeroclaw_bundle::{Bundles, EntryKind, ReadVerb};
use zeroclaw_bundle_store::escape_name;

use crate::cli::LsArgs;
use crate::cmd::{Ctx, Outcome};

/// Runs `ls`.
pub fn run(args: LsArgs, ctx: &Ctx) -> Result<Outcome> {
    let opened = Bundles::open_snapshot_at(&ctx.store_path, &args.target, ReadVerb::Ls)?;
    let rows = opened.ls(args.recursive)?;
    if ctx.json {
        return ctx
            .print_json(&serde_json::to_value(&rows)?)
            .map(|()| Outcome::Success);
    }
    for row in rows {
        let p = escape_name(&row.path);
        let size = row.size;
        let k = match row.kind {
            EntryKind::File => "file",
            EntryKind::ExecFile => "exec",
            EntryKind::Dir => "dir ",
        };
        if ctx.verbose {
            crate::outln!("{k} {} {size:>12} {} {p}", row.mode, row.object.short(16))?;
        } else {
            // The default columns stay `kind size name` (scripts split them); the mode
            // shows with -v and in --json.
            crate::outln!("{k} {size:>12} {p}")?;
        }
    }
    Ok(Outcome::Success)
}
