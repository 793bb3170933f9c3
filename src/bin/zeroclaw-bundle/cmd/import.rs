//! `import <SOURCE> [--install DIR] [--as ALIAS] [--map KIND.OLD=NEW]... [--dry-run]
//! [--expect ID] [--yes] [--force] [--replace PATH]...`: parses, calls `zeroclaw_bundle::import::plan` and
//! `zeroclaw_bundle::import::apply`, and prints (text or `--json`). The confirmation (a terminal is
//! shown [`summary`] and asked; a pipe needs `--expect` or `--yes`) and the hidden secret
//! prompts live here, never in the library.

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};
use zeroclaw_bundle_store::{escape_message, escape_name, escape_text};

use crate::cli::ImportArgs;
use crate::cmd::{count, host_path, human_bytes, Ctx, Outcome};
use zeroclaw_bundle::agent::shown_detail;
use zeroclaw_bundle::import::{self, Action, ImportPlan, ImportRequest, Imported, MapArg};
use zeroclaw_bundle::progress::Progress as _;

/// Runs `import`.
pub fn run(args: ImportArgs, ctx: &Ctx) -> Result<Outcome> {
    let maps = args
        .map
        .iter()
        .map(|m| MapArg::parse(m))
        .collect::<Result<Vec<_>, _>>()?;
    let install = zeroclaw_bundle::agent::install_root(args.install.as_deref())?;
    zeroclaw_bundle::agent::require_install(&install)?;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.dry_run && args.expect.is_none() && !args.yes && !interactive {
        bail!(
            "refusing to import without a confirmation: stdin is not a terminal; pass --expect ID \
             (the content id `zeroclaw-bundle review` ends with) or --yes"
        );
    }
    // `--require-signed` (or the store's setting): refused before the source is captured.
    let trust = super::sign::trust_of_args(&ctx.store_path, &args.trust)?;
    let require = trust.enforcing(&args.source.to_string_lossy())?;
    let store = ctx.create_store()?;
    let progress = ctx.term_progress();
    let req = ImportRequest {
        require,
        source: &args.source,
        install: &install,
        agent_as: args.agent_as.as_deref(),
        maps: &maps,
        expect: args.expect.as_deref(),
        force: args.force,
        replace: &args.replace,
    };
    let plan = import::plan(&store, &req, &progress);
    progress.finish();
    let plan = plan.with_context(|| {
        format!(
            "could not import {}; nothing was written to the install",
            args.source.to_string_lossy()
        )
    })?;
    if let Some(done) = &plan.up_to_date {
        // Nothing to ask or write: the same content made this agent, still configured.
        if ctx.json {
            let mut doc = plan_json(&plan);
            doc["dry_run"] = Value::Bool(args.dry_run);
            ctx.print_json(&doc)?;
        } else {
            crate::outln!(
                "Up to date: agent {} in {} was imported from this content ({}) at {}; \
                 nothing was written",
                escape_text(&done.alias),
                plan.install.display(),
                plan.content_id.short(16),
                done.imported_at
            )?;
            crate::outln!("{}", plan.content_id)?;
        }
        return Ok(Outcome::Success);
    }
    if args.dry_run {
        if ctx.json {
            let mut doc = plan_json(&plan);
            doc["dry_run"] = Value::Bool(true);
            ctx.print_json(&doc)?;
        } else {
            crate::cmd::write_stdout(render_plan(&plan, true).as_bytes())?;
            crate::outln!("{}", plan.content_id)?;
        }
        return Ok(Outcome::Success);
    }
    if args.expect.is_none() && !args.yes {
        // The whole review of what is about to be imported (the snapshot captured above, not
        // the directory again), then what the import does with it.
        let options = zeroclaw_bundle::review::ReviewOptions {
            install: Some(plan.install.clone()),
            install_named: true,
            allowed: trust.allowed.clone(),
            ..Default::default()
        };
        let progress = ctx.term_progress();
        let review = zeroclaw_bundle::review::review(
            &store,
            std::ffi::OsStr::new(&plan.snapshot.to_hex()),
            &options,
            &progress,
        );
        drop(progress);
        let mut screen = Vec::new();
        zeroclaw_bundle::review::render(&review?, &mut screen)
            .context("could not render the review")?;
        let _ = std::io::stderr().write_all(&screen);
        eprint!("{}", summary(&plan));
        if !ask(&format!(
            "Import agent {} into {}? [y/N] ",
            escape_text(&plan.alias),
            plan.install.display()
        ))? {
            bail!("not imported; nothing was written");
        }
    }
    let mut values = Vec::new();
    if interactive && !args.yes && !plan.secrets.is_empty() {
        let stored = if plan.secrets_encrypted() {
            "typed input is hidden and stored encrypted with the install's key".to_string()
        } else {
            // The mode the import keeps (it writes config.toml with the present file's bits).
            let mode = std::fs::metadata(&plan.config_path)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
                .with_context(|| format!("could not read {}", plan.config_path.display()))?;
            format!(
                "typed input is hidden, but this install sets secrets.encrypt = false: a value \
                 is stored as plain text in {}, {}",
                plan.config_path.display(),
                who_reads(mode)
            )
        };
        crate::note!(
            "{} this agent needs ({stored}; Enter skips one, Ctrl-D skips the rest):",
            count(plan.secrets.len() as u64, "credential"),
        );
        for s in &plan.secrets {
            let line = match zeroclaw_bundle::sys::read_hidden_line(&format!("  {}: ", s.path)) {
                Ok(Some(line)) => line,
                Ok(None) => bail!("no terminal to ask for the value of {} on", s.path),
                // Ctrl-D (or the terminal's input closed): no more values; the rest are left
                // to fill later, as Enter leaves one.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    bail!("interrupted; nothing was written")
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("could not read the value of {}", s.path))
                }
            };
            if ctx.cancel.is_cancelled() {
                bail!("interrupted; nothing was written");
            }
            if !line.is_empty() {
                values.push((s.path.clone(), line));
            }
        }
    }
    let imported = import::apply(&store, &plan, &values, &progress);
    drop(progress);
    let imported = imported.with_context(|| {
        format!(
            "could not import {}; config.toml was not changed",
            args.source.to_string_lossy()
        )
    })?;
    if ctx.json {
        let mut doc = plan_json(&plan);
        doc["dry_run"] = Value::Bool(false);
        doc["secrets_filled"] = json!(imported.secrets_filled);
        doc["secrets_encrypted"] = json!(imported.secrets_encrypted);
        doc["config_mode"] = json!(format!("{:04o}", imported.config_mode));
        doc["provenance"] = host_path(&imported.provenance);
        doc["set_secrets"] = json!(imported
            .secrets_left
            .iter()
            .map(|s| format!("zeroclaw config set {}", s.path))
            .collect::<Vec<_>>());
        ctx.print_json(&doc)?;
    } else {
        crate::cmd::write_stdout(render_done(&plan, &imported).as_bytes())?;
        crate::outln!("{}", imported.content_id)?;
    }
    Ok(Outcome::Success)
}

/// Asks `question` on stderr; true only for an answer starting with `y`.
fn ask(question: &str) -> Result<bool> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("could not read the answer")?;
    Ok(line.trim().to_ascii_lowercase().starts_with('y'))
}

/// What a terminal is shown after the review, before it is asked: what the import does with
/// what was reviewed (the review above lists the grants, the credentials and the content id).
pub fn summary(plan: &ImportPlan) -> String {
    format!(
        "\nImporting agent {} from {} as {} into {}\n",
        escape_text(&plan.bundle_alias),
        escape_text(&plan.source),
        escape_text(&plan.alias),
        plan.install.display()
    )
}

fn grants_text(plan: &ImportPlan) -> String {
    if plan.grants.is_empty() {
        return "Capabilities granted: none\n".to_string();
    }
    let mut out = "Capabilities granted:\n".to_string();
    for f in &plan.grants {
        out += &format!(
            "  - {} at {}: {}\n",
            f.kind.as_str(),
            escape_text(&f.path),
            escape_text(&shown_detail(&f.detail))
        );
    }
    out
}

fn secrets_text(_plan: &ImportPlan, secrets: &[import::SecretPlan]) -> String {
    if secrets.is_empty() {
        return String::new();
    }
    let mut out = "Credentials to fill (the bundle carries none):\n".to_string();
    for s in secrets {
        out += &format!("  zeroclaw config set {}\n", escape_text(&s.path));
    }
    out
}

fn action_word(a: Action) -> &'static str {
    match a {
        Action::Add => "add",
        Action::Namespace => "namespace",
        Action::Reuse => "reuse",
        Action::Map => "map",
        Action::LeftOut => "left out",
    }
}

/// The whole plan as text (`--dry-run`; with `diff`, the config diff too).
fn render_plan(plan: &ImportPlan, diff: bool) -> String {
    let mut out = String::new();
    out += &format!(
        "Import of {} (content id {}) into {}\n",
        escape_text(&plan.source),
        plan.content_id.short(16),
        plan.install.display()
    );
    out += &format!(
        "  agent {} -> {}\n",
        escape_text(&plan.bundle_alias),
        escape_text(&plan.alias)
    );
    out += "Config entries:\n";
    for d in &plan.decisions {
        let line = match d.action {
            Action::Add => d.kind.path_of(&d.local),
            Action::Namespace => format!(
                "{} -> {} ({})",
                d.kind.path_of(&d.bundle),
                d.local,
                match &d.why {
                    _ if d.kind == import::Kind::Agent => "an agent of that name exists",
                    Some(why) => why.as_str(),
                    None => "a different local entry has that name",
                }
            ),
            Action::Reuse => format!("{} (an identical local entry)", d.kind.path_of(&d.local)),
            Action::Map => format!(
                "{} -> {} (--map)",
                d.kind.path_of(&d.bundle),
                d.kind.path_of(&d.local)
            ),
            Action::LeftOut => format!(
                "{} ({})",
                d.kind.path_of(&d.bundle),
                d.why
                    .as_deref()
                    .unwrap_or("nothing the agent reaches references it")
            ),
        };
        out += &format!("  {:<9} {}\n", action_word(d.action), escape_text(&line));
    }
    for n in &plan.notes {
        out += &format!("  note: {}\n", escape_text(n));
    }
    out += "Files:\n";
    if plan.trees.is_empty() {
        out += "  none\n";
    }
    for t in &plan.trees {
        out += &format!(
            "  {} -> {} ({}, {}){}\n",
            escape_text(&t.bundle_path),
            escape_name(t.dest.as_os_str().as_encoded_bytes()),
            count(t.files, "file"),
            human_bytes(t.bytes),
            match t.replaces {
                Some(import::Replacing::EarlierImport) => {
                    " REPLACES the directory there (--force: it holds this tree already)"
                }
                Some(import::Replacing::Named) => {
                    " REPLACES the directory there and deletes what it holds (--replace)"
                }
                None => "",
            }
        );
    }
    let through = if plan.config_target != plan.config_path {
        format!(
            ", a symlink: written through it to {}",
            plan.config_target.display()
        )
    } else {
        String::new()
    };
    out += &format!(
        "Config: {}{through} (written last; the previous one kept as {})\n",
        plan.config_path.display(),
        plan.backup.display()
    );
    if diff {
        // Escaped as `diff -p` escapes a patch: a bidi override or a zero-width character in a
        // value reaches the terminal as `\u{202e}`, never raw (a CR before a line break is
        // the file's line ending, not a character to show).
        out += &escape_message(&plan.config_diff().replace("\r\n", "\n"));
    }
    out += &grants_text(plan);
    if diff {
        out += &secrets_text(plan, &plan.secrets);
    }
    if !plan.dropped.is_empty() {
        out += "Did not travel (from the bundle's manifest):\n";
        for d in &plan.dropped {
            out += &format!("  - {} ({})\n", escape_text(&d.path), d.reason.as_str());
        }
    }
    if diff {
        out += "Dry run: nothing was written.\n";
    }
    out
}

fn render_done(plan: &ImportPlan, done: &Imported) -> String {
    let mut out = render_plan(plan, false);
    out += &format!(
        "Imported agent {} into {}; the previous config.toml is {}\n",
        escape_text(&done.alias),
        plan.install.display(),
        done.backup.display()
    );
    if !done.secrets_filled.is_empty() {
        let filled = done
            .secrets_filled
            .iter()
            .map(|s| escape_text(s))
            .collect::<Vec<_>>()
            .join(", ");
        out += &if done.secrets_encrypted {
            format!("Stored encrypted: {filled}\n")
        } else {
            format!(
                "Stored as plain text (this install sets secrets.encrypt = false): {filled}, in \
                 {}, {}\n",
                plan.config_path.display(),
                who_reads(done.config_mode)
            )
        };
    }
    out += &secrets_text(plan, &done.secrets_left);
    out
}

/// Who can read a file of permission bits `mode`, for a secret stored in it as plain text.
fn who_reads(mode: u32) -> String {
    let who = if mode & 0o004 != 0 {
        "every user of this machine can read it"
    } else if mode & 0o040 != 0 {
        "its owner and its group can read it"
    } else {
        "only its owner can read it"
    };
    format!("mode {mode:04o}: {who}")
}

fn plan_json(plan: &ImportPlan) -> Value {
    json!({
        "snapshot": plan.snapshot,
        "root": plan.content_id,
        "source": plan.source,
        "source_kind": plan.source_kind,
        "agent": plan.alias,
        "bundle_agent": plan.bundle_alias,
        "install": host_path(&plan.install),
        "config": host_path(&plan.config_path),
        "config_file": host_path(&plan.config_target),
        "backup": host_path(&plan.backup),
        "entries": plan.decisions.iter().map(|d| json!({
            "kind": d.kind.word(),
            "bundle": d.bundle,
            "local": d.local,
            "path": (d.action != import::Action::LeftOut).then(|| d.kind.path_of(&d.local)),
            "action": d.action,
            "why": d.why,
        })).collect::<Vec<_>>(),
        "notes": plan.notes,
        "trees": plan.trees.iter().map(|t| json!({
            "bundle_path": t.bundle_path,
            "destination": host_path(&t.dest),
            "files": t.files,
            "bytes": t.bytes,
            "replaces": t.replaces.is_some(),
            "replace_reason": t.replaces.map(import::Replacing::word),
        })).collect::<Vec<_>>(),
        "config_diff": plan.config_diff(),
        "risk_flags": plan.grants.iter().map(|f| json!({"kind": f.kind, "path": f.path, "detail": shown_detail(&f.detail), "rule": f.rule})).collect::<Vec<_>>(),
        "required_secrets": plan.secrets.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
        "set_secrets": plan.secrets.iter().map(|s| format!("zeroclaw config set {}", s.path)).collect::<Vec<_>>(),
        "dropped": plan.dropped,
        "up_to_date": plan.up_to_date.as_ref().map(|d| json!({
            "agent": d.alias,
            "imported_at": d.imported_at,
            "snapshot": d.snapshot,
        })),
    })
}
