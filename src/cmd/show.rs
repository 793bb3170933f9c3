//! `show SNAPSHOT`: the snapshot record, with its tallies and skipped entries.

use anyhow::Result;
use serde_json::json;

use crate::cli::RefArgs;
use crate::clock::rfc3339_utc;
use crate::cmd::{human_bytes, Ctx, Outcome};

/// Runs `show`.
pub fn run(args: RefArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let id = store.resolve(&args.snapshot)?;
    let snap = store.read_snapshot(&id)?;
    if ctx.json {
        let mut v = serde_json::to_value(&snap)?;
        v["id"] = json!(id);
        v["created"] = json!(rfc3339_utc(snap.created_unix_ns));
        ctx.print_json(&v)?;
        return Ok(Outcome::Success);
    }
    crate::outln!("snapshot  {id}")?;
    crate::outln!("created   {}", rfc3339_utc(snap.created_unix_ns))?;
    crate::outln!("host      {}", snap.host)?;
    crate::outln!(
        "kind      {}",
        match snap.kind {
            zeroclaw_bundle_store::SnapshotKind::Tree => "tree",
            zeroclaw_bundle_store::SnapshotKind::AgentBundle => "agent bundle",
        }
    )?;
    crate::outln!("source    {}", snap.source)?;
    if let Some(a) = &snap.agent {
        crate::outln!("agent     {a}")?;
    }
    if let Some(n) = &snap.name {
        crate::outln!("name      {n}")?;
    }
    if let Some(p) = &snap.parent {
        crate::outln!("parent    {p}")?;
    }
    crate::outln!("root      {}", snap.root)?;
    for t in &snap.report.trees {
        crate::outln!(
            "tree {:<20} {} files, {}; skipped: {} symlinks, {} special, {} hard links, {} replaced",
            t.label,
            t.files,
            human_bytes(t.bytes),
            t.symlinks,
            t.special,
            t.hard_links,
            t.replaced
        )?;
    }
    for s in &snap.report.skipped {
        crate::outln!("skipped {:<9} {}", s.reason, s.path)?;
    }
    Ok(Outcome::Success)
}
