//! The review screen: one text page in the order an operator decides in (what the bundle is,
//! what it grants, what to fill, what stayed behind, what its files hold, what changed since
//! the earlier import), ending with the content id and the mount command. Every name, path,
//! detail and source goes through the store's escaper; no value a finding points at is ever
//! part of a [`Review`], so none can be printed.

use std::io::{self, Write};

use zeroclaw_bundle_store::escape_text;

use crate::words::{count, human_bytes};

use super::report::{BaselineKind, BundleReview, InstallReview, Review, UpdateReview};

/// Writes the review screen of `review` to `out`.
pub fn render(review: &Review, out: &mut dyn Write) -> io::Result<()> {
    let r = review;
    source_section(r, out)?;
    if let Some(b) = &r.bundle {
        writeln!(out)?;
        grants_section(b, out)?;
        statements_section(b, out)?;
    }
    if let Some(p) = &r.plugin {
        writeln!(out)?;
        plugin_section(p, out)?;
    }
    files_section(r, out)?;
    if let Some(install) = &r.install {
        install_section(r, install, out)?;
    }
    footer(r, out)
}

/// An Agent Plugin's statements: every server it starts or connects to, the credentials each
/// asks for, the grants to accept, and every component the spec refuses.
fn plugin_section(p: &crate::plugin::PluginReview, out: &mut dyn Write) -> io::Result<()> {
    if let Some(why) = &p.rejected {
        writeln!(
            out,
            "Agent Plugin refused as a whole (nothing of it can be imported): {}",
            escape_text(why)
        )?;
        return Ok(());
    }
    let version = p
        .version
        .as_deref()
        .map(|v| format!(" {v}"))
        .unwrap_or_default();
    writeln!(
        out,
        "Agent Plugin `{}`{}",
        escape_text(&p.name),
        escape_text(&version)
    )?;
    if let Some(d) = &p.description {
        writeln!(out, "  {}", escape_text(d))?;
    }
    writeln!(
        out,
        "  skills: {}",
        if p.skills.is_empty() {
            "none".to_string()
        } else {
            escape_text(&p.skills.join(", "))
        }
    )?;
    if p.servers.is_empty() {
        writeln!(out, "  MCP servers: none")?;
    } else {
        writeln!(
            out,
            "  MCP servers (each is a process it starts or a host it connects to):"
        )?;
        for s in &p.servers {
            let what = if s.transport == "stdio" {
                "starts"
            } else {
                "connects to"
            };
            writeln!(
                out,
                "    {} ({}): {what} {}",
                escape_text(&s.name),
                escape_text(&s.transport),
                escape_text(&crate::agent::shown_detail(&s.target))
            )?;
            for c in &s.secrets {
                writeln!(out, "      asks for credential {}", escape_text(c))?;
            }
        }
    }
    if !p.grants.is_empty() {
        writeln!(
            out,
            "  Capabilities granted to an agent it is attached to (accept each):"
        )?;
        for g in &p.grants {
            writeln!(
                out,
                "    - {} at {}: {}",
                g.kind.as_str(),
                escape_text(&g.path),
                escape_text(&g.detail)
            )?;
        }
    }
    if !p.refused.is_empty() {
        writeln!(out, "  Refused by the Agent Plugins spec (never imported):")?;
        for r in &p.refused {
            writeln!(out, "    {}", escape_text(r))?;
        }
    }
    Ok(())
}

/// What was reviewed: the source, the agent, the totals by part, what the capture skipped.
fn source_section(r: &Review, out: &mut dyn Write) -> io::Result<()> {
    let how = match r.source.kind {
        "directory" => "directory, captured into the store",
        "pack" => "pack, unpacked into the store",
        "remote" => "remote snapshot, pulled into the store",
        _ => "snapshot of the store",
    };
    writeln!(out, "Review of {} ({how})", escape_text(&r.source.arg))?;
    match &r.bundle {
        Some(b) => writeln!(
            out,
            "  agent `{}`, bundle format {}, exported {} (ZeroClaw {})",
            escape_text(&b.agent),
            b.format_version,
            escape_text(&b.exported_at),
            escape_text(&b.zeroclaw_version)
        )?,
        None => writeln!(
            out,
            "  {}",
            escape_text(r.not_a_bundle.as_deref().unwrap_or("not an agent bundle"))
        )?,
    }
    writeln!(
        out,
        "  {}, {}",
        count(r.files, "file"),
        human_bytes(r.bytes)
    )?;
    for p in &r.scan.parts {
        let skills = p
            .skills
            .map(|n| format!("{}, ", count(n, "skill")))
            .unwrap_or_default();
        writeln!(
            out,
            "    {}: {skills}{}, {}",
            escape_text(&p.part),
            count(p.files, "file"),
            human_bytes(p.bytes)
        )?;
    }
    if !r.skipped.is_empty() {
        writeln!(
            out,
            "  {} not captured (symlinks, special files and hard links are never followed; they \
             are neither reviewed nor imported):",
            count(r.skipped.len() as u64, "entry")
        )?;
        for s in &r.skipped {
            writeln!(
                out,
                "    {} ({})",
                escape_text(&s.path),
                escape_text(&s.reason)
            )?;
        }
    }
    Ok(())
}

/// The capabilities the bundle grants, each to accept, with what the manifest does not list
/// marked.
fn grants_section(b: &BundleReview, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    if b.risk_flags.is_empty() {
        writeln!(out, "Capabilities the agent is granted: none flagged")?;
    } else {
        writeln!(
            out,
            "Capabilities the agent is granted (accept each; ! marks what the manifest does not list):"
        )?;
        for g in &b.risk_flags {
            let (mark, note) = match (g.listed, g.stale) {
                _ if g.rule => ("-", ""),
                (false, _) => (
                    "!",
                    " [config.toml grants this; the manifest does not list it]",
                ),
                (true, true) => (
                    "-",
                    " [listed in the manifest; config.toml does not grant it]",
                ),
                _ => ("-", ""),
            };
            writeln!(
                out,
                "  {mark} {} at {}: {}{note}",
                g.kind.as_str(),
                escape_text(&g.path),
                escape_text(&g.detail)
            )?;
        }
    }
    if let Some(why) = &b.grants_unchecked {
        writeln!(out, "  warning: {}", escape_text(why))?;
    }
    Ok(())
}

/// The bundle's other statements: config no export carries or outside the closure, secrets to
/// fill, what could not travel, the skill bundles carried.
fn statements_section(b: &BundleReview, out: &mut dyn Write) -> io::Result<()> {
    if !b.not_exported.is_empty() {
        writeln!(
            out,
            "\nConfig no export carries (the bundle was edited by hand; import refuses it):"
        )?;
        for d in &b.not_exported {
            writeln!(
                out,
                "  ! {}: {}",
                escape_text(&d.path),
                escape_text(&d.detail)
            )?;
        }
    }
    if !b.outside_closure.is_empty() {
        writeln!(
            out,
            "\nConfig outside the agent's closure (nothing agent {} references reaches it; a \
             local agent naming it would start using it; import refuses it):",
            escape_text(&b.agent)
        )?;
        for path in &b.outside_closure {
            writeln!(out, "  ! {}", escape_text(path))?;
        }
    }
    if !b.required_secrets.is_empty() {
        writeln!(out, "\nSecrets to fill after import (scrubbed on export):")?;
        for s in &b.set_secrets {
            writeln!(out, "  {}", escape_text(s))?;
        }
    }
    if !b.dropped.is_empty() {
        writeln!(out, "\nCould not travel (not in the bundle):")?;
        for d in &b.dropped {
            writeln!(
                out,
                "  - {} ({}): {}",
                escape_text(&d.path),
                d.reason.as_str(),
                escape_text(&d.detail)
            )?;
        }
    }
    if !b.skill_bundles.is_empty() {
        let shown: Vec<String> = b.skill_bundles.iter().map(|s| escape_text(s)).collect();
        writeln!(
            out,
            "\nSkill bundles carried (instructions the agent follows): {}",
            shown.join(", ")
        )?;
    }
    Ok(())
}

/// What the files hold: credential-looking files and lines, what was not scanned,
/// executables, scripts in skills, personal files.
fn files_section(r: &Review, out: &mut dyn Write) -> io::Result<()> {
    let s = &r.scan;
    writeln!(out)?;
    if s.credentials.is_empty() {
        writeln!(
            out,
            "Credential-looking files and values: none found (a heuristic, not a guarantee)"
        )?;
    } else {
        writeln!(
            out,
            "Credential-looking files and values (they travel as written; values not shown):"
        )?;
        for c in &s.credentials {
            let at = match c.line {
                Some(line) => format!("{}:{line}", c.path.display()),
                None => format!("{} (whole file)", c.path.display()),
            };
            writeln!(out, "  - {at}: {}", c.reason.describe())?;
        }
        for m in &s.credentials_more {
            writeln!(
                out,
                "  - {}: {} more (only the first {} of a file are listed)",
                m.path.display(),
                count(m.more_lines, "line"),
                super::files::FINDINGS_PER_FILE
            )?;
        }
    }
    if !s.not_scanned.is_empty() {
        writeln!(
            out,
            "  not scanned (over {}; names checked only):",
            human_bytes(r.scan_cap)
        )?;
        for n in &s.not_scanned {
            writeln!(out, "    {} ({})", n.path.display(), human_bytes(n.size))?;
        }
    }
    if s.binary_files > 0 {
        writeln!(
            out,
            "  {} not scanned for tokens (binary; names checked only)",
            count(s.binary_files, "binary file")
        )?;
    }
    if !s.executables.is_empty() {
        writeln!(out, "\nExecutable files:")?;
        for e in &s.executables {
            writeln!(out, "  - {}", e.display())?;
        }
    }
    if !s.skill_scripts.is_empty() {
        writeln!(out, "\nScripts in skills (the agent may run them):")?;
        for sc in &s.skill_scripts {
            writeln!(out, "  - {} ({})", sc.path.display(), sc.why)?;
        }
    }
    if !s.personal_files.is_empty() {
        writeln!(
            out,
            "\nPersonal files (facts about a person, long-term memory):"
        )?;
        for p in &s.personal_files {
            writeln!(out, "  - {}", p.display())?;
        }
    }
    Ok(())
}

/// The install compared with: not found, a new agent, or one update per earlier import.
fn install_section(r: &Review, install: &InstallReview, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    let shown = escape_text(&install.path.to_string_lossy());
    if !install.found {
        writeln!(
            out,
            "Install {shown}: not found, so there is no earlier import to compare with"
        )?;
    } else if r.updates.is_empty() {
        match &r.bundle {
            Some(b) => writeln!(
                out,
                "Install {shown}: no agent imported from a bundle of `{}`: a new agent",
                escape_text(&b.agent)
            )?,
            None if r.update_plan.is_some() => writeln!(
                out,
                "Install {shown}: this Agent Plugin was imported here before (its update is \
                 below)"
            )?,
            None if r.plugin.is_some() => writeln!(
                out,
                "Install {shown}: no earlier import of this Agent Plugin: a new one"
            )?,
            None => writeln!(out, "Install {shown}: not compared (not an agent bundle)")?,
        }
    }
    for u in &r.updates {
        update_section(u, out)?;
    }
    Ok(())
}

/// One update: the earlier import, its semantic changes, the file totals, new grants.
fn update_section(u: &UpdateReview, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "Update of agent `{}` (imported {} from snapshot {}):",
        escape_text(&u.alias),
        escape_text(&u.imported_at),
        u.imported_snapshot.short(12)
    )?;
    if let Some(note) = &u.note {
        writeln!(out, "  note: {}", escape_text(note))?;
    }
    if u.baseline_kind == BaselineKind::None {
        return Ok(());
    }
    if u.changes.is_empty() {
        writeln!(out, "  no change in what the agent may do")?;
    } else {
        writeln!(out, "  lines marked ! grant something new:")?;
        for c in &u.changes {
            writeln!(out, "  {}", c.line())?;
        }
    }
    let t = &u.summary;
    writeln!(
        out,
        "  files: {} added, {} modified, {} deleted, {} renamed, {} mode changed",
        t.added,
        t.modified,
        t.deleted,
        t.renamed,
        t.mode_changed + t.kind_changed
    )?;
    if u.new_grants {
        writeln!(
            out,
            "  this update grants the agent something new (marked !)"
        )?;
    }
    Ok(())
}

/// The closing lines: the heuristic's caveat, who signed, the content id, the mount command.
fn footer(r: &Review, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "Note: nothing in a bundle is proven free of secrets; the look for credentials is a \
         heuristic over file names and lines of text files"
    )?;
    writeln!(
        out,
        "Signed: {}",
        escape_text(&crate::sign::summary(&r.signatures))
    )?;
    writeln!(out, "Content id: {}", r.root.to_hex())?;
    writeln!(out, "Read it with your own tools, read-only: {}", r.mount)?;
    Ok(())
}
