//! `update SOURCE`: a newer bundle of an imported agent merged into it in place (the library's
//! `Bundles::update_plan` and `Bundles::update`); prints the three-way plan. Exit 3 when the
//! update grants something new without `--accept-grants`, 4 when conflicts are refused.

use std::io::IsTerminal as _;

use anyhow::{Context, Result};

use crate::cli::UpdateArgs;
use crate::cmd::{Ctx, Outcome};
use zeroclaw_bundle::{Bundles, Progress as _, TrustPolicy, UpdatePlan, UpdateRequest};

/// Runs `update`.
pub fn run(args: UpdateArgs, ctx: &Ctx) -> Result<Outcome> {
    let install = Bundles::import_install(args.install.as_deref())?;
    let trust = super::sign::trust_of_args(&ctx.store_path, &args.trust)?;
    let policy = trust.policy(&args.source.to_string_lossy())?;
    let require = match &policy {
        TrustPolicy::Require(allowed) => Some(allowed),
        _ => None,
    };
    let bundles = ctx.bundles()?;
    let conflicts = args.merge.policy();
    let req = UpdateRequest {
        source: &args.source,
        install: &install,
        alias: args.agent_as.as_deref(),
        conflicts,
        accept_grants: args.merge.accept_grants,
        allow_downgrade: args.merge.allow_downgrade,
        require,
    };
    let progress = ctx.term_progress();
    let plan = bundles.update_plan(&req, &progress);
    progress.finish();
    let plan = plan.with_context(|| {
        format!(
            "could not update from {}; nothing was written to the install",
            args.source.to_string_lossy()
        )
    })?;
    let ask = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    settle(ctx, &bundles, plan, args.dry_run, ask)
}

/// Prints an update's three-way plan (or that the agent is up to date), then applies it
/// unless it is a dry run: conflicts refused exit 4; grants the version last imported did
/// not have exit 3 unless accepted (`--accept-grants`, or `ask`: a terminal answers yes
/// after seeing them); an Agent Plugin's older version exits 1 unless allowed
/// (`--allow-downgrade`, or a terminal's yes). `import` of another version of an imported
/// agent or plugin ends here too.
pub fn settle(
    ctx: &Ctx,
    bundles: &Bundles,
    plan: UpdatePlan,
    dry_run: bool,
    ask: bool,
) -> Result<Outcome> {
    let install = plan.install.clone();
    if plan.up_to_date {
        if ctx.json {
            ctx.print_json(&serde_json::to_value(&plan)?)?;
        } else {
            crate::outln!(
                "Up to date: {} in {} holds {}",
                plan.subject(),
                install.display(),
                plan.content_id.to_hex()
            )?;
        }
        return Ok(Outcome::Success);
    }
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&plan)?)?;
    } else if ctx.quiet {
        // Only what stops the update or asks for a yes: conflicts refused, grants, notes.
        print_what_stops(&plan)?;
    } else {
        print_plan(&plan)?;
    }
    if plan.refused() {
        crate::note!(
            "error: conflicts refused, nothing was written; choose with --conflicts \
             keep-local|take-incoming|copy"
        );
        return Ok(Outcome::Conflicts);
    }
    let plan = match plan.grants_unaccepted() && ask && !dry_run {
        true => {
            let yes = super::ask(&format!(
                "The update grants what the version last imported did not (listed `! grant` \
                 above). Apply it to agent {}? [y/N] ",
                crate::cmd::escape_message(&plan.alias)
            ))?;
            plan.accepting_grants(yes)
        }
        false => plan,
    };
    if plan.grants_unaccepted() {
        crate::note!(
            "error: the update grants what the version last imported did not; nothing was \
             written: review it, then update with --accept-grants"
        );
        return Ok(Outcome::NewGrants);
    }
    // Asked before it is refused, as grants are: the question names the older version.
    let question = plan
        .unallowed_downgrade()
        .filter(|_| ask && !dry_run)
        .map(|change| {
            format!(
                "The update is {}. Apply it to {}? [y/N] ",
                crate::cmd::escape_message(&change.to_string()),
                crate::cmd::escape_message(&plan.subject())
            )
        });
    let plan = match question {
        Some(question) => {
            let yes = super::ask(&question)?;
            plan.allowing_downgrade(yes)
        }
        None => plan,
    };
    if let Some(change) = plan.unallowed_downgrade() {
        crate::note!(
            "error: the update is {}; nothing was written: review it, then update with \
             --allow-downgrade",
            crate::cmd::escape_message(&change.to_string())
        );
        return Ok(Outcome::Failure);
    }
    if dry_run {
        return Ok(Outcome::Success);
    }
    let progress = ctx.term_progress();
    let done = bundles.update(&plan, &progress);
    progress.finish();
    let done = done.with_context(|| format!("could not update {}", plan.subject()))?;
    if !ctx.json {
        crate::outln!(
            "Updated {} in {} (previous config.toml kept as {}; undo with `zeroclaw-bundle rollback {} --install {}`)",
            plan.subject(),
            install.display(),
            done.backup.display(),
            done.alias,
            zeroclaw_bundle::shell_quote(&install)
        )?;
    }
    Ok(Outcome::Success)
}

pub fn print_plan(plan: &UpdatePlan) -> Result<()> {
    let esc = |s: &str| crate::cmd::escape_message(s);
    crate::outln!(
        "Update of {} ({}) from {}",
        esc(&plan.subject()),
        esc(&plan.incoming_noun()),
        esc(&plan.source)
    )?;
    for (label, paths) in [
        ("take", &plan.taken),
        ("delete", &plan.deleted),
        ("keep", &plan.kept),
    ] {
        for p in paths {
            crate::outln!("  {label:<8} {}", esc(p))?;
        }
    }
    for k in &plan.config_keys {
        crate::outln!("  config   {} ({})", esc(&k.key), k.action)?;
    }
    for c in &plan.conflicts {
        crate::outln!(
            "  CONFLICT {} ({}): {}",
            esc(&c.path),
            c.kind,
            c.resolution.as_deref().unwrap_or("refused")
        )?;
    }
    print_grants_and_notes(plan)
}

/// The plan's lines under `--quiet`: the conflicts left unresolved, the grants, the notes.
fn print_what_stops(plan: &UpdatePlan) -> Result<()> {
    let esc = |s: &str| crate::cmd::escape_message(s);
    for c in plan.conflicts.iter().filter(|c| c.resolution.is_none()) {
        crate::outln!("  CONFLICT {} ({}): refused", esc(&c.path), c.kind)?;
    }
    print_grants_and_notes(plan)
}

fn print_grants_and_notes(plan: &UpdatePlan) -> Result<()> {
    let esc = |s: &str| crate::cmd::escape_message(s);
    for g in &plan.new_grants {
        crate::outln!("  ! grant  {}: {}", esc(&g.path), esc(&g.detail))?;
    }
    for n in &plan.notes {
        crate::outln!("  note: {}", esc(n))?;
    }
    Ok(())
}
