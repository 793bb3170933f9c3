//! `show SNAPSHOT`: the snapshot record, with its tallies and skipped entries, and who signed
//! it (checked against the allowed signers: `--allowed-signers` or the store's `trust`). The
//! snapshot is any the grammar names: of the store, of a pack file, of a
//! remote (its record and signatures, read in place).

use std::ffi::OsStr;

use anyhow::Result;
use zeroclaw_bundle::{Bundles, ReadVerb, SnapshotKind};
use zeroclaw_bundle_store::escape_text;

use crate::cli::ShowArgs;
use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `show`.
pub fn run(args: ShowArgs, ctx: &Ctx) -> Result<Outcome> {
    let opened =
        Bundles::open_snapshot_at(&ctx.store_path, OsStr::new(&args.snapshot), ReadVerb::Show)?;
    let trust = super::sign::trust_of(
        &ctx.store_path,
        args.signers.allowed_signers.as_deref(),
        false,
    )?;
    let shown = opened.show(trust.allowed.as_ref())?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&shown)?)?;
        return Ok(Outcome::Success);
    }
    let (id, snap, checked) = (shown.snapshot, &shown.record, &shown.signatures);
    if ctx.quiet {
        crate::outln!("{id}")?;
        return Ok(Outcome::Success);
    }
    crate::outln!("snapshot  {id}")?;
    crate::outln!("created   {}", shown.created)?;
    crate::outln!("host      {}", escape_text(&snap.host))?;
    crate::outln!(
        "kind      {}",
        match snap.kind {
            SnapshotKind::Tree => "tree",
            SnapshotKind::AgentBundle => "agent bundle",
        }
    )?;
    crate::outln!("source    {}", escape_text(&snap.source))?;
    if let Some(a) = &snap.agent {
        crate::outln!("agent     {}", escape_text(a))?;
    }
    if let Some(n) = &snap.name {
        crate::outln!("name      {}", escape_text(n))?;
    }
    if let Some(p) = &snap.parent {
        crate::outln!("parent    {p}")?;
    }
    crate::outln!("root      {}", snap.root)?;
    if checked.is_empty() {
        crate::outln!("signature none (unsigned)")?;
    }
    for c in checked {
        crate::outln!("signature {}", c.verdict)?;
    }
    if !snap.report.trees.is_empty() {
        crate::outln!(
            "files     {}, {} in all",
            count(snap.files(), "file"),
            human_bytes(snap.bytes())
        )?;
        let rows: Vec<[String; 3]> = snap
            .report
            .trees
            .iter()
            .map(|t| {
                [
                    escape_text(&t.label),
                    count(t.files, "file"),
                    human_bytes(t.bytes),
                ]
            })
            .collect();
        let w = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
        let (w0, w1, w2) = (w(0), w(1), w(2));
        for (r, t) in rows.iter().zip(&snap.report.trees) {
            let skipped = if t.skipped() > 0 {
                format!("  skipped: {}", super::export::skipped_counts(t))
            } else {
                String::new()
            };
            crate::outln!("  {:<w0$}  {:>w1$}  {:>w2$}{skipped}", r[0], r[1], r[2])?;
        }
    }
    let w = snap
        .report
        .skipped
        .iter()
        .map(|s| s.reason.len())
        .max()
        .unwrap_or(0);
    for s in &snap.report.skipped {
        // Stored escaped at capture (and checked on decode to hold nothing invisible).
        crate::outln!("skipped   {:<w$}  {}", escape_text(&s.reason), s.path)?;
    }
    Ok(Outcome::Success)
}
