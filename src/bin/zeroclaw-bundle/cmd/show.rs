//! `show SNAPSHOT`: the snapshot record, with its tallies and skipped entries, and who signed
//! it (checked against the allowed signers: `--allowed-signers` or the store's `trust`). The
//! snapshot is any the grammar names (`zeroclaw_bundle::source`): of the store, of a pack file, of a
//! remote (its record and signatures, read in place).

use std::ffi::OsStr;

use anyhow::Result;
use serde_json::json;

use zeroclaw_bundle_store::escape_text;

use crate::cli::ShowArgs;
use crate::cmd::{count, human_bytes, Ctx, Outcome};
use zeroclaw_bundle::clock::rfc3339_utc;
use zeroclaw_bundle::source::{self, classify, Takes, Target};

/// Runs `show`.
pub fn run(args: ShowArgs, ctx: &Ctx) -> Result<Outcome> {
    let reference = classify(&ctx.store_path, OsStr::new(&args.snapshot), Takes::SHOW)?;
    let trust = super::sign::trust_of(
        &ctx.store_path,
        args.signers.allowed_signers.as_deref(),
        false,
    )?;
    let (id, snap, checked) = match &reference.target {
        // A snapshot of the store: the public API's `show`.
        Target::Stored { .. } => {
            let bundles = ctx.bundles()?;
            let store = bundles.store();
            let id = reference.stored_id(store)?;
            let (id, snap) = bundles.show(&id.to_hex())?;
            let checked = zeroclaw_bundle::sign::check_stored(store, &id, trust.allowed.as_ref())?;
            (id, snap, checked)
        }
        // A pack's or a remote's record, read where it is.
        _ => {
            let store = super::ls::store_for(ctx, &reference)?;
            let opened = source::open(store.as_ref(), &reference, false)?;
            let sigs = opened.signatures()?;
            let checked =
                zeroclaw_bundle::sign::check_all(&opened.id, &sigs, trust.allowed.as_ref());
            (opened.id, opened.snapshot, checked)
        }
    };
    if ctx.json {
        let mut v = serde_json::to_value(&snap)?;
        v["snapshot"] = json!(id);
        v["signatures"] = serde_json::to_value(&checked)?;
        v["created"] = json!(rfc3339_utc(snap.created_unix_ns));
        ctx.print_json(&v)?;
        return Ok(Outcome::Success);
    }
    if ctx.quiet {
        crate::outln!("{id}")?;
        return Ok(Outcome::Success);
    }
    crate::outln!("snapshot  {id}")?;
    crate::outln!("created   {}", rfc3339_utc(snap.created_unix_ns))?;
    crate::outln!("host      {}", escape_text(&snap.host))?;
    crate::outln!(
        "kind      {}",
        match snap.kind {
            zeroclaw_bundle_store::SnapshotKind::Tree => "tree",
            zeroclaw_bundle_store::SnapshotKind::AgentBundle => "agent bundle",
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
    for c in &checked {
        crate::outln!("signature {}", zeroclaw_bundle::sign::describe(&c.verdict))?;
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
