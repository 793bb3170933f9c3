//! `checkout SNAPSHOT --out DIR [--force]`: publish a stored snapshot (staged, atomic swap).

use anyhow::{Context, Result};
use serde_json::json;

use crate::cli::CheckoutArgs;
use crate::cmd::{human_bytes, Ctx, Outcome};
use crate::export::publish_snapshot;
use crate::publish::PublishRequest;

/// Runs `checkout`.
pub fn run(args: CheckoutArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let id = store.resolve(&args.snapshot)?;
    let snap = store.read_snapshot(&id)?;
    let published = publish_snapshot(
        &store,
        &snap.root,
        &PublishRequest {
            dest: &args.out,
            force: args.force,
            sources: &[],
            store: Some(store.root()),
            reuse: None,
        },
    )
    .with_context(|| {
        format!(
            "could not publish snapshot {} to {}",
            id.short(12),
            args.out.display()
        )
    })?;
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "dest": published.dest,
            "files": published.files,
            "bytes": published.bytes,
            "reused_files": published.reused,
        }))?;
    } else {
        if !ctx.quiet {
            eprintln!(
                "published {} files, {} to {}",
                published.files,
                human_bytes(published.bytes),
                published.dest.display()
            );
        }
        println!("{id}");
    }
    Ok(Outcome::Success)
}
