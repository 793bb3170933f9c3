//! `ls SNAPSHOT[:PATH] [-r]`: list a directory of a snapshot (kind, size, name; `-v` adds the
//! mode and the id, `--json` has them all). The snapshot is any the grammar names
//! (`zeroclaw_bundle::source`): of the store, of a pack file (read in place), of a remote (its trees
//! only, in place).

use anyhow::Result;
use serde_json::json;
use zeroclaw_bundle_store::limits::check_expansion;
use zeroclaw_bundle_store::{
    escape_name, resolve_path, EntryKind, ObjectId, ObjectSource, TreeEntry,
};

use crate::cli::LsArgs;
use crate::cmd::{Ctx, Outcome};
use zeroclaw_bundle::source::{self, classify, Reference, Takes, Target};

/// Runs `ls`.
pub fn run(args: LsArgs, ctx: &Ctx) -> Result<Outcome> {
    let reference = classify(&ctx.store_path, &args.target, Takes::LS)?;
    let opened = source::open(store_for(ctx, &reference)?.as_ref(), &reference, false)?;
    let path = reference.path().to_vec();
    let reader = opened.source();
    let entry = resolve_path(reader, &opened.snapshot.root, &path, &opened.label)?;
    let start = path.iter().position(|b| *b != b'/').unwrap_or(path.len());
    let end = path
        .iter()
        .rposition(|b| *b != b'/')
        .map_or(start, |i| i + 1);
    let base = &path[start..end.max(start)];
    let mut rows = Vec::new();
    if entry.kind == EntryKind::Dir {
        if args.recursive {
            // Bounded before listing: a hostile tree would otherwise list forever.
            check_expansion(reader, &entry.id, &format!("snapshot {}", opened.label))?;
        }
        list_dir(reader, &entry.id, base, args.recursive, &mut rows)?;
    } else {
        rows.push((entry, path.clone()));
    }
    if ctx.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(e, p)| {
                let mut m = serde_json::Map::new();
                crate::cmd::put_name(&mut m, "path", "display", p);
                m.insert("kind".into(), json!(e.kind));
                m.insert("mode".into(), json!(e.mode_octal()));
                m.insert("size".into(), json!(e.size));
                m.insert("object".into(), json!(e.id));
                serde_json::Value::Object(m)
            })
            .collect();
        ctx.print_json(&json!(v))?;
    } else {
        for (e, p) in rows {
            let p = escape_name(&p);
            let (size, mode) = (e.size, e.mode_octal());
            let k = match e.kind {
                EntryKind::File => "file",
                EntryKind::ExecFile => "exec",
                EntryKind::Dir => "dir ",
            };
            if ctx.verbose {
                crate::outln!("{k} {mode} {size:>12} {} {p}", e.id.short(16))?;
            } else {
                // The default columns stay `kind size name` (scripts split them); the mode
                // shows with -v and in --json.
                crate::outln!("{k} {size:>12} {p}")?;
            }
        }
    }
    Ok(Outcome::Success)
}

/// An entry and its real path (raw bytes: escaped for text, carried as is in `--json`).
type Row = (TreeEntry, Vec<u8>);

fn list_dir(
    source: &dyn ObjectSource,
    tree: &ObjectId,
    prefix: &[u8],
    recursive: bool,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let tree = source.tree(tree)?;
    for e in tree.entries() {
        let mut p = prefix.to_vec();
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(&e.name);
        rows.push((e.clone(), p.clone()));
        if recursive && e.kind == EntryKind::Dir {
            list_dir(source, &e.id, &p, true, rows)?;
        }
    }
    Ok(())
}

/// The store a reference is read with: a pack needs none (an update reads its base from the
/// store when there is one); anything else needs the store that holds it or names its remote.
pub fn store_for(ctx: &Ctx, reference: &Reference) -> Result<Option<zeroclaw_bundle_store::Store>> {
    match reference.target {
        Target::Pack { .. } => ctx.existing_store(),
        _ => Ok(Some(ctx.store()?)),
    }
}
