//! `show SNAPSHOT`: the snapshot record, with its tallies and skipped entries.

use anyhow::Result;
use serde_json::json;

use zeroclaw_bundle_store::escape_text;

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
    println!("snapshot  {id}");
    println!("created   {}", rfc3339_utc(snap.created_unix_ns));
    println!("host      {}", escape_text(&snap.host));
    println!(
        "kind      {}",
        match snap.kind {
            zeroclaw_bundle_store::SnapshotKind::Tree => "tree",
            zeroclaw_bundle_store::SnapshotKind::AgentBundle => "agent bundle",
        }
    );
    println!("source    {}", escape_text(&snap.source));
    if let Some(a) = &snap.agent {
        println!("agent     {}", escape_text(a));
    }
    if let Some(n) = &snap.name {
        println!("name      {}", escape_text(n));
    }
    if let Some(p) = &snap.parent {
        println!("parent    {p}");
    }
    println!("root      {}", snap.root);
    for t in &snap.report.trees {
        println!(
            "tree {:<20} {} files, {}; skipped: {} symlinks, {} special, {} hard links, {} replaced",
            escape_text(&t.label),
            t.files,
            human_bytes(t.bytes),
            t.symlinks,
            t.special,
            t.hard_links,
            t.replaced
        );
    }
    for s in &snap.report.skipped {
        // Stored escaped at capture (and checked on decode to hold nothing invisible).
        println!("skipped {:<9} {}", escape_text(&s.reason), s.path);
    }
    Ok(Outcome::Success)
}
