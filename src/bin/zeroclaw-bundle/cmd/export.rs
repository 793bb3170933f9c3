//! `export <ALIAS> --out DIR [--install DIR] [--force]`: capture an agent and publish its
//! bundle, then print the report of SPEC §8 (also used by `snapshot <ALIAS>`).

use anyhow::Result;
use serde_json::json;

use crate::cli::ExportArgs;
use zeroclaw_bundle_store::{escape_text, Tally};

use crate::cmd::{count, human_bytes, Ctx, Outcome};
use zeroclaw_bundle::agent::{install_root, shown_detail};
use zeroclaw_bundle::export::{AgentCaptureOptions, AgentSnapshot, ExportJob};
use zeroclaw_bundle::publish::{Published, Replace, Replaced};

/// Runs `export`: the install and the destination are checked (and the destination
/// claimed) before the store is opened or created, so a typo creates nothing.
pub fn run(args: ExportArgs, ctx: &Ctx) -> Result<Outcome> {
    let install = install_root(args.install.as_deref())?;
    let existing = ctx.existing_store()?;
    let job = ExportJob::prepare(
        existing.as_ref(),
        &ctx.store_path,
        &install,
        &args.alias,
        &args.out,
        Replace::of_flags(args.force, args.replace_any),
    )?;
    // The key is opened (its passphrase asked) once the agent and destination check out, and
    // before anything is captured.
    let signing = super::sign::key_for(&args.sign)?;
    let store = match existing {
        Some(store) => store,
        None => ctx.create_store()?,
    };
    let progress = ctx.term_progress();
    let result = job.run(
        &store,
        AgentCaptureOptions {
            name: None,
            zeroclaw_version: args.zeroclaw_version.as_deref(),
            excludes: &args.exclude,
        },
        &progress,
    );
    drop(progress);
    let (captured, published, replaced) = result?;
    super::sign::sign_after(ctx, &store, &captured.id, signing)?;
    let outcome = report(ctx, &captured, Some((&published, replaced.as_ref())))?;
    if !ctx.quiet && !ctx.json {
        super::checkout::note_cwd_swapped(&args.out);
    }
    Ok(outcome)
}

/// The non-zero skip counts of a tally, e.g. `1 symlink, 2 hard links`.
pub fn skipped_counts(t: &Tally) -> String {
    [
        (t.symlinks, "symlink"),
        (t.special, "special file"),
        (t.hard_links, "hard link"),
        (t.replaced, "entry replaced while reading"),
        (t.store, "the store itself"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| match (*n, *what) {
        (n, "entry replaced while reading") if n != 1 => {
            format!("{n} entries replaced while reading")
        }
        (n, "the store itself") if n != 1 => format!("the store itself ({n} times)"),
        (_, "the store itself") => "the store itself".to_string(),
        (n, what) => count(n, what),
    })
    .collect::<Vec<_>>()
    .join(", ")
}

/// Prints what an agent capture carried, what it asks of the importing operator, what was
/// scrubbed and what could not travel; the snapshot id last.
pub fn report(
    ctx: &Ctx,
    c: &AgentSnapshot,
    published: Option<(&Published, Option<&Replaced>)>,
) -> Result<Outcome> {
    let replaced = published.and_then(|(_, r)| r);
    let published = published.map(|(p, _)| p);
    let m = &c.bundle.manifest;
    let files = c.snapshot.files();
    let bytes = c.snapshot.bytes();
    let bundles = m.skill_bundles.len();
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": c.id,
            "agent": m.root_agent,
            "destination": published.map(|p| crate::cmd::host_path(&p.dest)),
            "reused_files": published.map(|p| p.reused),
            "replaced": replaced,
            "files": files,
            "bytes": bytes,
            "skills_carried": c.skills_carried,
            "skill_bundles": m.skill_bundles,
            "tallies": c.snapshot.report.trees,
            "skipped": c.snapshot.report.skipped,
            "risk_flags": c.grants.iter().map(|f| json!({"kind": f.kind, "path": f.path, "detail": shown_detail(&f.detail), "rule": f.rule})).collect::<Vec<_>>(),
            "required_secrets": m.required_secrets,
            "scrubbed_by_name": c.scrubbed_by_name.iter().map(|(path, rule)| json!({"path": path, "rule": rule})).collect::<Vec<_>>(),
            "credential_looking_values": c.credential_findings.iter().map(|f| json!({"location": f.location, "reason": f.reason.describe()})).collect::<Vec<_>>(),
            "personal_files": c.personal_files,
            "skipped_config_sections": c.degraded_sections,
            "skipped_config_reason": c.degraded_reason,
            "unknown_keys": c.unknown_keys,
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
                escape_text(&m.root_agent),
                p.dest.display()
            )
        }
        None => {
            out += &format!(
                "Captured agent `{}` into the store\n",
                escape_text(&m.root_agent)
            )
        }
    }
    out += &format!(
        "  {}, {} (the whole bundle: workspace, skills, config.toml and the manifest)\n",
        count(files, "file"),
        human_bytes(bytes),
    );
    out += &format!(
        "  {} from {}\n",
        count(c.skills_carried, "skill"),
        count(bundles as u64, "skill bundle"),
    );
    for t in &c.snapshot.report.trees {
        if t.skipped() > 0 {
            out += &format!("  skipped in {}: {}\n", t.label, skipped_counts(t));
        }
    }
    if ctx.verbose {
        for t in &c.snapshot.report.trees {
            out += &format!(
                "  {}: {}, {}\n",
                t.label,
                count(t.files, "file"),
                human_bytes(t.bytes)
            );
        }
        out += &format!(
            "  capture: {} read and hashed ({}), {} unchanged since the last capture (not read)\n",
            count(c.stats.hashed_files, "file"),
            human_bytes(c.stats.hashed_bytes),
            count(c.stats.cached_files, "file")
        );
    }
    if !c.grants.is_empty() {
        out += "\nCapabilities an importing operator is asked to grant:\n";
        for f in &c.grants {
            out += &format!(
                "  - {} at {}: {}\n",
                f.kind.as_str(),
                escape_text(&f.path),
                escape_text(&shown_detail(&f.detail))
            );
        }
    }
    if !c.degraded_sections.is_empty() {
        out += "\nConfig sections ZeroClaw's loader skips as invalid (not exported, as ZeroClaw would not load them):\n";
        for section in &c.degraded_sections {
            out += &format!("  - {}\n", escape_text(section));
        }
        if let Some(reason) = &c.degraded_reason {
            out += &format!("  ZeroClaw's strict loader says: {}\n", escape_text(reason));
        }
    }
    if !c.unknown_keys.is_empty() {
        out += "\nKeys ZeroClaw's schema does not know (ZeroClaw ignores them, so they were left out; a typo?):\n";
        for key in &c.unknown_keys {
            out += &format!("  - {}\n", escape_text(key));
        }
    }
    if !m.required_secrets.is_empty() {
        out += "\nCredentials scrubbed (fill them on the target):\n";
        for p in &m.required_secrets {
            out += &format!("  zeroclaw config set {}\n", escape_text(p));
        }
        for (path, rule) in &c.scrubbed_by_name {
            out += &format!(
                "  note: {} is not a secret field in ZeroClaw's schema; it was scrubbed because of its name ({rule})\n",
                escape_text(path)
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
            out += &format!(
                "  - {} ({}): {}\n",
                escape_text(&d.path),
                d.reason.as_str(),
                escape_text(&d.detail)
            );
        }
    }
    // The same words as the bundle's own headers: one story about secrets.
    out += &format!("\nNote: {}\n", zeroclaw_bundle::agent::secret_story());
    if let Some(p) = published {
        out += &format!(
            "Bundle: {} ({} written, {}{})\n",
            p.dest.display(),
            count(p.files, "file"),
            human_bytes(p.bytes),
            if p.reused > 0 {
                format!(
                    "; {} of them linked unchanged from the previous bundle",
                    p.reused
                )
            } else {
                String::new()
            }
        );
        if let Some(r) = replaced {
            out += &format!("Note: {}\n", r.describe(&p.dest));
        }
    }
    if !ctx.quiet {
        crate::cmd::write_stdout(out.as_bytes())?;
    }
    crate::outln!("{}", c.id)?;
    Ok(Outcome::Success)
}
