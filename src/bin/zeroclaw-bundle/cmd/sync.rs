//! `sync [SOURCE] [--install DIR] [--as ALIAS] [--allowed-signers FILE] [--allow-unsigned]`:
//! calls [`Bundles::sync`] and prints what became of each agent; a held update is printed
//! with its three-way plan, its review and the commands to look closer and apply it. Exit 0
//! when every agent is up to date or updated, 1 on an error, 3 when an update is held for new
//! grants, 4 for conflicts.

use anyhow::{Context as _, Result};
use zeroclaw_bundle::{
    AllowedSigners, Bundles, Progress as _, SignerTrust, SyncOutcome, SyncRequest, SyncedAgent,
};

use crate::cli::SyncArgs;
use crate::cmd::{escape_message, Ctx, Outcome};

/// Runs `sync`.
pub fn run(args: SyncArgs, ctx: &Ctx) -> Result<Outcome> {
    let install = Bundles::import_install(args.install.as_deref())?;
    let bundles = Bundles::create(&ctx.store_path)?;
    let request = SyncRequest {
        source: args.source.as_deref(),
        install: &install,
        alias: args.agent_as.as_deref(),
        allow_unsigned: args.allow_unsigned,
        allowed_signers: args.allowed_signers.as_deref(),
    };
    let progress = ctx.term_progress();
    let report = bundles.sync(&request, &progress);
    progress.finish();
    let report = report.with_context(|| format!("could not sync {}", install.display()))?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&report)?)?;
    } else {
        // The review of a held update names its signers by the store's trust (or the file
        // given), as the sync checked them.
        let allowed = SignerTrust::resolve(&ctx.store_path, args.allowed_signers.as_deref(), false)
            .ok()
            .and_then(|t| t.allowed);
        if ctx.verbose {
            for (remote, traffic) in &report.listings {
                crate::note!("remote {}: {traffic}", escape_message(remote));
            }
        }
        for agent in &report.agents {
            print_agent(ctx, &bundles, &install, allowed.clone(), agent)?;
        }
    }
    Ok(match report.worst() {
        SyncOutcome::UpToDate | SyncOutcome::Updated => Outcome::Success,
        SyncOutcome::HeldForGrants => Outcome::NewGrants,
        SyncOutcome::HeldForConflicts => Outcome::Conflicts,
        SyncOutcome::Failed => Outcome::Failure,
    })
}

/// Prints one agent's line, and for a held update its plan, review and next commands.
fn print_agent(
    ctx: &Ctx,
    bundles: &Bundles,
    install: &std::path::Path,
    allowed: Option<AllowedSigners>,
    agent: &SyncedAgent,
) -> Result<()> {
    let esc = |s: &str| escape_message(s);
    let (alias, source) = (esc(&agent.alias), esc(&agent.source));
    let content = || agent.snapshot.map(|id| id.short(16)).unwrap_or_default();
    match agent.outcome {
        SyncOutcome::UpToDate => {
            crate::outln!("agent {alias}: up to date with {source} (snapshot {})", content())
        }
        SyncOutcome::Updated => crate::outln!(
            "agent {alias}: updated from {source} (snapshot {}; undo with `zeroclaw-bundle rollback {alias}`)",
            content()
        ),
        SyncOutcome::Failed => {
            let why = agent.error.as_deref().unwrap_or("unknown error");
            crate::note!("error: agent {alias}: not synced from {source}: {}", esc(why));
            Ok(())
        }
        SyncOutcome::HeldForGrants | SyncOutcome::HeldForConflicts => {
            let why = match agent.outcome {
                SyncOutcome::HeldForGrants => "grants what the version last imported did not",
                _ => "conflicts with a local edit",
            };
            crate::outln!("agent {alias}: held, nothing written: the newest version from {source} {why}")?;
            if let Some(plan) = &agent.plan {
                super::update::print_plan(plan)?;
            }
            let Some(id) = agent.review.as_deref() else {
                return Ok(());
            };
            let screen = super::import::rendered_review(ctx, bundles, id, install, allowed)?;
            crate::cmd::write_stdout(&screen)?;
            crate::outln!(
                "  apply it: zeroclaw-bundle update {source} --install {} --as {alias} {}",
                install.display(),
                match agent.outcome {
                    SyncOutcome::HeldForGrants => "--accept-grants",
                    _ => "--conflicts keep-local|take-incoming|copy",
                }
            )
        }
    }
}
