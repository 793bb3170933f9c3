//! `list`: every snapshot, oldest first, under a header. FILES and SIZE count the regular
//! files of the snapshot's tree and their bytes (what a checkout writes). NAME is the
//! snapshot's name, else `agent/<alias>` on the one snapshot that ref resolves to (the agent's
//! newest), else `-`. With `-v`, each row is followed by who signed the snapshot (checked
//! against the allowed signers: `--allowed-signers` or the store's `trust` setting).

use std::collections::HashMap;

use anyhow::Result;

use zeroclaw_bundle_store::{escape_text, ObjectId};

use crate::cli::SignersArgs;
use crate::clock::rfc3339_utc;
use crate::cmd::{human_bytes, Ctx, Outcome};

/// Runs `list`.
pub fn run(ctx: &Ctx, signers: &SignersArgs) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let store = bundles.store();
    let snaps = bundles.list()?;
    let trust = match ctx.verbose {
        true => Some(super::sign::trust_of(
            store.root(),
            signers.allowed_signers.as_deref(),
            false,
        )?),
        false => None,
    };
    if ctx.json {
        // The catalog's own field is `id`; `--json` names a snapshot id `snapshot` everywhere.
        let mut rows = Vec::with_capacity(snaps.len());
        for s in &snaps {
            let mut v = serde_json::to_value(s)?;
            if let Some(m) = v.as_object_mut() {
                m.remove("id");
                m.insert("snapshot".into(), serde_json::json!(s.id));
                m.insert(
                    "created".into(),
                    serde_json::json!(rfc3339_utc(s.created_unix_ns)),
                );
                if let Some(trust) = &trust {
                    let (_, checked) = super::sign::signed_by(store, &s.id, trust)?;
                    m.insert("signatures".into(), checked);
                }
            }
            rows.push(v);
        }
        ctx.print_json(&serde_json::Value::Array(rows))?;
        return Ok(Outcome::Success);
    }
    if ctx.quiet {
        // Only the ids, oldest first: what a script loops over.
        for s in &snaps {
            crate::outln!("{}", s.id)?;
        }
        return Ok(Outcome::Success);
    }
    if snaps.is_empty() {
        crate::outln!(
            "no snapshots in {} (`zeroclaw-bundle snapshot` or `export` makes one)",
            store.root().display()
        )?;
        return Ok(Outcome::Success);
    }
    // `agent/<alias>` resolves to the agent's newest snapshot (the last of the list, which is
    // oldest first by creation time, then id): only that row carries it.
    let mut newest: HashMap<&str, ObjectId> = HashMap::new();
    for s in &snaps {
        if let Some(a) = &s.agent {
            newest.insert(a.as_str(), s.id);
        }
    }
    let rows: Vec<[String; 6]> = snaps
        .iter()
        .map(|s| {
            let label = match (&s.name, &s.agent) {
                (Some(n), _) => escape_text(n),
                (None, Some(a)) if newest.get(a.as_str()) == Some(&s.id) => {
                    format!("agent/{}", escape_text(a))
                }
                _ => "-".to_string(),
            };
            [
                s.id.short(16),
                rfc3339_utc(s.created_unix_ns),
                label,
                s.files.to_string(),
                human_bytes(s.bytes),
                escape_text(&s.source),
            ]
        })
        .collect();
    match &trust {
        None => print_snapshot_table(&rows)?,
        Some(trust) => {
            let mut extra = Vec::with_capacity(snaps.len());
            for s in &snaps {
                extra.push(format!(
                    "signatures: {}",
                    super::sign::signed_by(store, &s.id, trust)?.0
                ));
            }
            print_table(&rows, Some(&extra))?;
        }
    }
    Ok(Outcome::Success)
}

/// The table of `list` (and `list --remote`): one row per snapshot under a header, columns
/// padded to the widest cell, counts right-aligned.
pub(crate) fn print_snapshot_table(rows: &[[String; 6]]) -> Result<()> {
    print_table(rows, None)
}

/// [`print_snapshot_table`], each row followed by its line of `extra` (indented) when given.
fn print_table(rows: &[[String; 6]], extra: Option<&[String]>) -> Result<()> {
    let header = ["SNAPSHOT", "CREATED", "NAME", "FILES", "SIZE", "SOURCE"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..6).map(width).collect();
    let line = |r: &[&str; 6]| {
        format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:>w3$}  {:>w4$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4]
        )
    };
    crate::outln!("{}", line(&header))?;
    for (i, r) in rows.iter().enumerate() {
        crate::outln!("{}", line(&[&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]))?;
        if let Some(e) = extra.and_then(|e| e.get(i)) {
            crate::outln!("  {e}")?;
        }
    }
    Ok(())
}
