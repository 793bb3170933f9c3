//! `list`: every snapshot, oldest first.

use anyhow::Result;

use zeroclaw_bundle_store::escape_text;

use crate::clock::rfc3339_utc;
use crate::cmd::{human_bytes, Ctx, Outcome};

/// Runs `list`.
pub fn run(ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let snaps = store.catalog()?.snapshots()?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&snaps)?)?;
        return Ok(Outcome::Success);
    }
    for s in snaps {
        let label = match (&s.name, &s.agent) {
            (Some(n), _) => escape_text(n),
            (None, Some(a)) => format!("agent/{}", escape_text(a)),
            (None, None) => "-".to_string(),
        };
        println!(
            "{}  {}  {:<16} {:>7} files {:>10}  {}",
            s.id.short(16),
            rfc3339_utc(s.created_unix_ns),
            label,
            s.files,
            human_bytes(s.bytes),
            escape_text(&s.source)
        );
    }
    Ok(Outcome::Success)
}
