//! `list`: every snapshot, oldest first, under a header. FILES and SIZE count the regular
//! files of the snapshot's tree and their bytes (what a checkout writes). NAME is the
//! snapshot's name and AGENT the alias of the agent it holds (`-` for none), as `--json` says
//! them (`name`, `agent`); the one snapshot `agent/<alias>` resolves to (the agent's newest)
//! reads `<alias> (latest)`, `"agent_latest": true` in JSON. With `-v`, each row is followed
//! by who signed the snapshot (checked against the allowed signers: `--allowed-signers` or the
//! store's `trust` setting).

use std::collections::HashMap;

use anyhow::Result;

use zeroclaw_bundle_store::{escape_text, ObjectId};

use crate::cli::SignersArgs;
use crate::cmd::{human_bytes, Ctx, Outcome};
use zeroclaw_bundle::clock::rfc3339_utc;

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
    // `agent/<alias>` resolves to the agent's newest snapshot (the last of the list, which is
    // oldest first by creation time, then id): only that row is its latest.
    let mut newest: HashMap<&str, ObjectId> = HashMap::new();
    for s in &snaps {
        if let Some(a) = &s.agent {
            newest.insert(a.as_str(), s.id);
        }
    }
    let latest = |s: &zeroclaw_bundle_store::SnapshotSummary| {
        s.agent
            .as_deref()
            .is_some_and(|a| newest.get(a) == Some(&s.id))
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
                m.insert("agent_latest".into(), serde_json::json!(latest(s)));
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
    let rows: Vec<[String; COLUMNS]> = snaps
        .iter()
        .map(|s| {
            [
                s.id.short(16),
                rfc3339_utc(s.created_unix_ns),
                name_cell(s.name.as_deref()),
                agent_cell(s.agent.as_deref(), latest(s)),
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

/// The columns of `list`'s table.
pub(crate) const COLUMNS: usize = 7;

/// The NAME cell: the snapshot's name (`name` in JSON), `-` for none.
pub(crate) fn name_cell(name: Option<&str>) -> String {
    name.map_or_else(|| "-".to_string(), escape_text)
}

/// The AGENT cell: the alias of the agent the snapshot holds (`agent` in JSON), `-` for none;
/// `<alias> (latest)` on the snapshot `agent/<alias>` names (`agent_latest` in JSON).
pub(crate) fn agent_cell(agent: Option<&str>, latest: bool) -> String {
    match agent {
        Some(a) if latest => format!("{} (latest)", escape_text(a)),
        Some(a) => escape_text(a),
        None => "-".to_string(),
    }
}

/// The table of `list` (and `list --remote`): one row per snapshot under a header, columns
/// padded to the widest cell, counts right-aligned.
pub(crate) fn print_snapshot_table(rows: &[[String; COLUMNS]]) -> Result<()> {
    print_table(rows, None)
}

/// [`print_snapshot_table`], each row followed by its line of `extra` (indented) when given.
fn print_table(rows: &[[String; COLUMNS]], extra: Option<&[String]>) -> Result<()> {
    let header = [
        "SNAPSHOT", "CREATED", "NAME", "AGENT", "FILES", "SIZE", "SOURCE",
    ];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([header[i].len()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..COLUMNS).map(width).collect();
    let line = |r: [&str; COLUMNS]| {
        format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {:>w4$}  {:>w5$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5]
        )
    };
    crate::outln!("{}", line(header))?;
    for (i, r) in rows.iter().enumerate() {
        crate::outln!("{}", line(std::array::from_fn(|c| r[c].as_str())))?;
        if let Some(e) = extra.and_then(|e| e.get(i)) {
            crate::outln!("  {e}")?;
        }
    }
    Ok(())
}
