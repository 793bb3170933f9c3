//! `list`: every snapshot, oldest first, under a header. FILES and SIZE count the regular
//! files of the snapshot's tree and their bytes (what a checkout writes). NAME is the
//! snapshot's name and AGENT the alias of the agent it holds (`-` for none), as `--json` says
//! them (`name`, `agent`); the one snapshot `agent/<alias>` resolves to (the agent's newest)
//! reads `<alias> (latest)`, `"agent_latest": true` in JSON. With `-v`, each row is followed
//! by who signed the snapshot (checked against the allowed signers: `--allowed-signers` or the
//! store's `trust` setting).

use anyhow::Result;
use zeroclaw_bundle::words::human_bytes;
use zeroclaw_bundle_store::escape_text;

use crate::cli::SignersArgs;
use crate::cmd::{Ctx, Outcome};

/// Runs `list`.
pub fn run(ctx: &Ctx, signers: &SignersArgs) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let trust = match ctx.verbose {
        true => Some(super::sign::trust_of(
            bundles.root(),
            signers.allowed_signers.as_deref(),
            false,
        )?),
        false => None,
    };
    let allowed = trust.as_ref().and_then(|t| t.allowed.as_ref());
    let snaps = bundles.list_entries(trust.is_some(), allowed)?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&snaps)?)?;
        return Ok(Outcome::Success);
    }
    if ctx.quiet {
        // Only the ids, oldest first: what a script loops over.
        for s in &snaps {
            crate::outln!("{}", s.snapshot)?;
        }
        return Ok(Outcome::Success);
    }
    if snaps.is_empty() {
        crate::outln!(
            "no snapshots in {} (`zeroclaw-bundle snapshot` or `export` makes one)",
            bundles.root().display()
        )?;
        return Ok(Outcome::Success);
    }
    let rows: Vec<[String; COLUMNS]> = snaps
        .iter()
        .map(|s| {
            [
                s.snapshot.short(16),
                s.created.clone(),
                name_cell(s.name.as_deref()),
                agent_cell(s.agent.as_deref(), s.agent_latest),
                s.files.to_string(),
                human_bytes(s.bytes),
                escape_text(&s.source),
            ]
        })
        .collect();
    let extra: Option<Vec<String>> = trust.as_ref().map(|_| {
        snaps
            .iter()
            .map(|s| format!("signatures: {}", s.signed_by().unwrap_or_default()))
            .collect()
    });
    print_table(&rows, extra.as_deref())?;
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
