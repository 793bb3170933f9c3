//! `export <ALIAS> --out DIR [--install DIR] [--force]`: capture an agent and publish its
//! bundle, then print the report of SPEC §8 (also used by `snapshot <ALIAS>`).

use anyhow::Result;
use serde_json::json;

use crate::cli::ExportArgs;
use crate::cmd::{human_bytes, Ctx, Outcome};
use crate::export::{export, install_root, AgentCaptureOptions, AgentSnapshot};
use crate::publish::Published;

/// Runs `export`.
pub fn run(args: ExportArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let install = install_root(args.install.as_deref())?;
    let (captured, published) = export(
        &store,
        &install,
        &args.alias,
        AgentCaptureOptions {
            name: None,
            zeroclaw_version: args.zeroclaw_version.as_deref(),
            excludes: &args.exclude,
        },
        &args.out,
        args.force,
        ctx.progress(None, "capturing", false),
    )?;
    report(ctx, &captured, Some(&published))
}

/// Prints what an agent capture carried, what it asks of the importing operator, what was
/// scrubbed and what could not travel; the snapshot id last.
pub fn report(ctx: &Ctx, c: &AgentSnapshot, published: Option<&Published>) -> Result<Outcome> {
    let m = &c.bundle.manifest;
    let files = c.snapshot.files();
    let bytes = c.snapshot.bytes();
    let bundles = m.skill_bundles.len();
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": c.id,
            "agent": m.root_agent,
            "destination": published.map(|p| &p.dest),
            "reused_files": published.map(|p| p.reused),
            "files": files,
            "bytes": bytes,
            "skills_carried": c.skills_carried,
            "skill_bundles": m.skill_bundles,
            "tallies": c.snapshot.report.trees,
            "skipped": c.snapshot.report.skipped,
            "risk_flags": m.risk_flags,
            "required_secrets": m.required_secrets,
            "scrubbed_by_name": c.scrubbed_by_name.iter().map(|(path, rule)| json!({"path": path, "rule": rule})).collect::<Vec<_>>(),
            "credential_looking_values": c.credential_findings.iter().map(|f| json!({"location": f.location, "reason": f.reason.describe()})).collect::<Vec<_>>(),
            "personal_files": c.personal_files,
            "set_secrets": m.required_secrets.iter().map(|p| format!("zeroclaw config set {p}")).collect::<Vec<_>>(),
            "dropped": m.dropped,
            "work": c.stats,
        }))?;
        return Ok(Outcome::Success);
    }
    let mut out = String::new();
    match published {
        Some(p) => {
            out += &format!(
                "Exported agent `{}` to {}\n",
                m.root_agent,
                p.dest.display()
            )
        }
        None => out += &format!("Captured agent `{}` into the store\n", m.root_agent),
    }
    out += &format!(
        "  {files} files, {} KiB; {} skills from {bundles} skill bundle{}\n",
        bytes.div_ceil(1024),
        c.skills_carried,
        if bundles == 1 { "" } else { "s" }
    );
    for t in &c.snapshot.report.trees {
        if t.skipped() > 0 {
            out += &format!(
                "  skipped in {}: {} symlinks, {} special files, {} hard links, {} replaced while reading\n",
                t.label, t.symlinks, t.special, t.hard_links, t.replaced
            );
        }
    }
    if !m.risk_flags.is_empty() {
        out += "\nCapabilities an importing operator is asked to grant:\n";
        for f in &m.risk_flags {
            out += &format!("  - {} at {}: {}\n", f.kind.as_str(), f.path, f.detail);
        }
    }
    if !m.required_secrets.is_empty() {
        out += "\nCredentials scrubbed (fill them on the target):\n";
        for p in &m.required_secrets {
            out += &format!("  zeroclaw config set {p}\n");
        }
        for (path, rule) in &c.scrubbed_by_name {
            out += &format!(
                "  note: {path} is not a secret field in ZeroClaw's schema; it was scrubbed because of its name ({rule})\n"
            );
        }
    }
    if !c.credential_findings.is_empty() {
        out += "\nValues that look like credentials (they travel as written):\n";
        for f in &c.credential_findings {
            out += &format!("  - {}: {}\n", f.location, f.reason.describe());
        }
    }
    if !c.personal_files.is_empty() {
        out += "\nPersonal files that travel (facts about you, long-term memory; leave one out with --exclude):\n";
        for f in &c.personal_files {
            out += &format!("  - {f}\n");
        }
    }
    if !m.dropped.is_empty() {
        out += "\nCould not travel:\n";
        for d in &m.dropped {
            out += &format!("  - {} ({}): {}\n", d.path, d.reason.as_str(), d.detail);
        }
    }
    out += "\nNote: scrubbing blanks the fields the schema marks secret and values under \
            credential-named keys; it is not credential detection (urls, commands and args travel \
            as written).\n";
    out += "Note: files under workspace/ and skills/ are copied as-is; the look for \
            credential-looking values above is a heuristic, not a guarantee.\n";
    if let Some(p) = published {
        out += &format!("Bundle: {} ({})\n", p.dest.display(), human_bytes(p.bytes));
    }
    if !ctx.quiet {
        print!("{out}");
    }
    println!("{}", c.id);
    Ok(Outcome::Success)
}
