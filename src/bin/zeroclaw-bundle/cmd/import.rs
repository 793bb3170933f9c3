//! `import <SOURCE> [--install DIR] [--as ALIAS] [--map KIND.OLD=NEW]... [--dry-run]
//! [--expect ID] [--yes] [--force] [--replace PATH]... [--require-signed]
//! [--allowed-signers FILE]`: parses, calls [`Bundles::import_plan`] and [`Bundles::import`]
//! (the trust policy the flags make is the handle's), and prints the library's report (text
//! or `--json`). The terminal lives here, never in the library: the confirmation (a terminal
//! is shown the review and [`ImportPlan::summary`] and asked; a pipe needs `--expect` or
//! `--yes`) and the hidden secret prompts, whose answers the library takes as data.

use std::io::{IsTerminal as _, Write as _};

use anyhow::{bail, Context as _, Result};
use zeroclaw_bundle::{
    Bundles, ImportPlan, ImportReport, ImportRequest, MapArg, Progress as _, ReviewOptions,
    SignerTrust,
};
use zeroclaw_bundle_store::escape_text;

use crate::cli::ImportArgs;
use crate::cmd::{count, Ctx, Outcome};

/// Runs `import`.
pub fn run(args: ImportArgs, ctx: &Ctx) -> Result<Outcome> {
    let maps = args
        .map
        .iter()
        .map(|m| MapArg::parse(m))
        .collect::<Result<Vec<_>, _>>()?;
    let install = Bundles::import_install(args.install.as_deref())?;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.dry_run && args.expect.is_none() && !args.yes && !interactive {
        bail!(
            "refusing to import without a confirmation: stdin is not a terminal; pass --expect ID \
             (the content id `zeroclaw-bundle review` ends with) or --yes"
        );
    }
    // `--require-signed` (or the store's setting) is the handle's policy: refused before the
    // source is captured.
    let trust = SignerTrust::resolve(
        &ctx.store_path,
        args.trust.allowed_signers.as_deref(),
        args.trust.require_signed,
    )?;
    for n in &trust.notes {
        crate::note!("notice: {n}");
    }
    let policy = trust.policy(&args.source.to_string_lossy())?;
    let bundles = Bundles::create(&ctx.store_path)?.with_trust_policy(policy);
    // An encrypted pack is decrypted whole (authenticated) before anything is captured.
    let mut decrypting = super::crypt::Decrypting::new(args.identity.identity.as_deref());
    let source = decrypting.arg(&args.source).with_context(|| {
        format!(
            "could not import {}; nothing was written to the install",
            args.source.to_string_lossy()
        )
    })?;
    let progress = ctx.term_progress();
    let request = ImportRequest {
        require: None,
        source: &source,
        install: &install,
        agent_as: args.agent_as.as_deref(),
        maps: &maps,
        expect: args.expect.as_deref(),
        force: args.force,
        replace: &args.replace,
        update: args.update.as_deref(),
        conflicts: args.merge.policy(),
        accept_grants: args.merge.accept_grants,
        allow_downgrade: args.merge.allow_downgrade,
        attach: args.attach.as_deref(),
    };
    let plan = bundles.import_plan(&request, &progress);
    progress.finish();
    let plan = plan.with_context(|| {
        format!(
            "could not import {}; nothing was written to the install",
            args.source.to_string_lossy()
        )
    })?;
    if let Some(update) = plan.update {
        // A newer version of an agent imported here before: its update in place.
        let mut update = *update;
        if !args.dry_run && args.expect.is_none() && !args.yes {
            confirm_update(ctx, &bundles, &update, trust.allowed)?;
            // The question named an older version as such: the yes allows it.
            update = update.allowing_downgrade(true);
        }
        return super::update::settle(ctx, &bundles, update, args.dry_run, interactive);
    }
    if plan.up_to_date.is_some() || args.dry_run {
        // Nothing to ask or write: a dry run, or the same content made this agent, still
        // configured.
        let report = ImportReport {
            plan: &plan,
            dry_run: args.dry_run,
            imported: None,
        };
        print_report(ctx, &report, &plan.content_id)?;
        return Ok(Outcome::Success);
    }
    if args.expect.is_none() && !args.yes {
        confirm(ctx, &bundles, &plan, trust.allowed)?;
    }
    let values = if interactive && !args.yes && !plan.secrets.is_empty() {
        ask_secrets(ctx, &plan)?
    } else {
        Vec::new()
    };
    let imported = bundles.import(&plan, &values, &progress);
    drop(progress);
    let imported = imported.with_context(|| {
        format!(
            "could not import {}; config.toml was not changed",
            args.source.to_string_lossy()
        )
    })?;
    let report = ImportReport {
        plan: &plan,
        dry_run: false,
        imported: Some(&imported),
    };
    print_report(ctx, &report, &imported.content_id)?;
    Ok(Outcome::Success)
}

/// Prints `report`: its `--json` document, or its text and then the content id.
fn print_report(
    ctx: &Ctx,
    report: &ImportReport<'_>,
    content_id: &zeroclaw_bundle::ObjectId,
) -> Result<()> {
    if ctx.json {
        return ctx.print_json(&serde_json::to_value(report)?);
    }
    crate::cmd::write_stdout(report.render().as_bytes())?;
    crate::outln!("{content_id}")
}

/// The review of stored snapshot `id` (what changed since the last import into `install`;
/// signers named by `allowed`), rendered as `review` prints it.
pub fn rendered_review(
    ctx: &Ctx,
    bundles: &Bundles,
    id: &str,
    install: &std::path::Path,
    allowed: Option<zeroclaw_bundle::AllowedSigners>,
) -> Result<Vec<u8>> {
    let options = ReviewOptions {
        allowed,
        ..ReviewOptions::comparing_with(Some(install))
    };
    let progress = ctx.term_progress();
    let review = bundles.review(id.as_ref(), &options, &progress);
    drop(progress);
    let mut screen = Vec::new();
    zeroclaw_bundle::render_review(&review?, &mut screen).context("could not render the review")?;
    Ok(screen)
}

/// Shows a terminal the whole review of what is about to be imported (the snapshot captured
/// by the plan, not the directory again), then what the import does with it, and asks.
fn confirm(
    ctx: &Ctx,
    bundles: &Bundles,
    plan: &ImportPlan,
    allowed: Option<zeroclaw_bundle::AllowedSigners>,
) -> Result<()> {
    let screen = rendered_review(
        ctx,
        bundles,
        &plan.snapshot.to_hex(),
        &plan.install,
        allowed,
    )?;
    let _ = std::io::stderr().write_all(&screen);
    eprint!("{}", plan.summary());
    let what = match &plan.plugin {
        Some(name) => format!("Agent Plugin {}", escape_text(name)),
        None => format!("agent {}", escape_text(&plan.alias)),
    };
    if !super::ask(&format!(
        "Import {what} into {}? [y/N] ",
        plan.install.display()
    ))? {
        bail!("not imported; nothing was written");
    }
    Ok(())
}

/// Shows a terminal the review of the newer version, then asks whether to plan its update
/// in place of the agent (the three-way plan and any new grant are shown next).
fn confirm_update(
    ctx: &Ctx,
    bundles: &Bundles,
    plan: &zeroclaw_bundle::UpdatePlan,
    allowed: Option<zeroclaw_bundle::AllowedSigners>,
) -> Result<()> {
    let screen = rendered_review(
        ctx,
        bundles,
        &plan.incoming.to_hex(),
        &plan.install,
        allowed,
    )?;
    let _ = std::io::stderr().write_all(&screen);
    let which = match &plan.downgrade {
        Some(change) => format!(
            "an OLDER version ({}; {} was imported)",
            escape_text(&change.incoming),
            escape_text(&change.imported)
        ),
        None => "a newer version".to_string(),
    };
    if !super::ask(&format!(
        "This is {which} of {}, imported into {} before: update it in place? [y/N] ",
        escape_text(&plan.subject()),
        plan.install.display()
    ))? {
        bail!("not updated; nothing was written");
    }
    Ok(())
}

/// Asks the terminal for each credential the plan needs, input hidden: Enter skips one,
/// Ctrl-D the rest. Returns the values typed, by dotted path.
fn ask_secrets(ctx: &Ctx, plan: &ImportPlan) -> Result<Vec<(String, String)>> {
    let stored = plan.secret_storage()?;
    crate::note!(
        "{} this agent needs ({stored}; Enter skips one, Ctrl-D skips the rest):",
        count(plan.secrets.len() as u64, "credential"),
    );
    let mut values = Vec::new();
    for s in &plan.secrets {
        let line = match zeroclaw_bundle::read_hidden_line(&format!("  {}: ", s.path)) {
            Ok(Some(line)) => line,
            Ok(None) => bail!("no terminal to ask for the value of {} on", s.path),
            // Ctrl-D (or the terminal's input closed): no more values; the rest are left
            // to fill later, as Enter leaves one.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                bail!("interrupted; nothing was written")
            }
            Err(e) => {
                return Err(e).with_context(|| format!("could not read the value of {}", s.path))
            }
        };
        if ctx.cancel.is_cancelled() {
            bail!("interrupted; nothing was written");
        }
        if !line.is_empty() {
            values.push((s.path.clone(), line));
        }
    }
    Ok(values)
}
