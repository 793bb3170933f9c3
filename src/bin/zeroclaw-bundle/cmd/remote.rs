//! `remote add|list|remove|forget|gc`, `push`, `pull` and `list --remote`: each converts its
//! arguments, calls [`Bundles`] and prints. Nothing here sees a credential: the object store
//! reads them from the environment. What the library notes on the way is printed by
//! [`Ctx::noting_progress`].

use anyhow::Result;
use zeroclaw_bundle::{Bundles, Recipients, RemoteListing, Verb};

use crate::cli::{PullArgs, PushArgs, RecipientsCommand, RemoteAddArgs, RemoteCommand};
use crate::cmd::{count, human_bytes, Ctx, Outcome};

/// Runs `remote add|list|remove|forget|gc` and `remote recipients add|remove`.
pub fn run_remote(cmd: RemoteCommand, ctx: &Ctx) -> Result<Outcome> {
    match cmd {
        RemoteCommand::Add(args) => add(args, ctx),
        RemoteCommand::Recipients(change) => recipients(change, ctx),
        RemoteCommand::Remove(args) => remove(args, ctx),
        RemoteCommand::List => list(ctx),
        RemoteCommand::Forget(args) => forget(args, ctx),
        RemoteCommand::Gc(args) => gc(args, ctx),
    }
}

/// Runs `remote recipients add|remove`.
fn recipients(change: RecipientsCommand, ctx: &Ctx) -> Result<Outcome> {
    let (args, add) = match change {
        RecipientsCommand::Add(a) => (a, true),
        RecipientsCommand::Remove(a) => (a, false),
    };
    let (now, generations) =
        ctx.bundles()?
            .change_remote_recipients(&args.name, &args.recipient, add)?;
    if ctx.json {
        ctx.print_json(&serde_json::json!({
            "remote": args.name,
            "recipients": now,
            "data_key_generations": generations,
        }))?;
    } else if !ctx.quiet {
        crate::note!(
            "remote {}: {} now ({}){}",
            args.name,
            count(now.len() as u64, "recipient"),
            now.join("; "),
            if add {
                String::new()
            } else {
                format!(
                    "; pushes from now on use data key generation {generations}, which \
                     the removed recipient cannot read (what it could read before, it \
                     still can: re-push to a new encrypted remote to rotate everything)"
                )
            }
        );
    }
    Ok(Outcome::Success)
}

/// Runs `remote remove`.
fn remove(args: crate::cli::RemoteRemoveArgs, ctx: &Ctx) -> Result<Outcome> {
    let gone = ctx.bundles()?.remove_remote(&args.name)?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&gone)?)?;
    } else if !ctx.quiet {
        // Not the URL: an entry removed because it carries a token must not print it.
        crate::note!(
            "removed remote {} from {}; nothing on the remote was touched",
            gone.name,
            gone.file.display()
        );
    }
    Ok(Outcome::Success)
}

/// Runs `remote list`.
fn list(ctx: &Ctx) -> Result<Outcome> {
    // Like every command that only reads: no store is an error, not an empty list.
    let bundles = ctx.bundles()?;
    let remotes = bundles.remotes()?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&remotes)?)?;
        return Ok(Outcome::Success);
    }
    if remotes.is_empty() && !ctx.quiet {
        crate::note!(
            "no remotes in the store {}; add one with `remote add NAME URL`",
            bundles.root().display()
        );
    }
    for r in &remotes {
        let (name, url) = (escape_text(&r.name), escape_text(&r.url));
        match &r.endpoint {
            Some(ep) => crate::outln!("{name}\t{url}\t(endpoint {})", escape_text(ep))?,
            None => crate::outln!("{name}\t{url}")?,
        }
    }
    Ok(Outcome::Success)
}

/// Runs `remote forget`.
fn forget(args: crate::cli::RemoteForgetArgs, ctx: &Ctx) -> Result<Outcome> {
    let progress = ctx.noting_progress();
    let gone = ctx
        .bundles()?
        .forget_on_remote(&args.name, &args.snapshot, &progress)?;
    drop(progress);
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&gone)?)?;
        return Ok(Outcome::Success);
    }
    if !ctx.quiet {
        crate::note!(
            "forgot {} on {}: its record is gone; `remote gc {}` removes what only it reached",
            gone.snapshot.short(12),
            gone.remote,
            gone.remote
        );
    }
    crate::outln!("{}", gone.snapshot)?;
    Ok(Outcome::Success)
}

/// Runs `remote gc`.
fn gc(args: crate::cli::RemoteGcArgs, ctx: &Ctx) -> Result<Outcome> {
    let progress = ctx.noting_progress();
    let r = ctx
        .bundles()?
        .remote_gc(&args.name, args.grace, &progress)?;
    drop(progress);
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&r)?)?;
        return Ok(Outcome::Success);
    }
    crate::outln!(
        "{}: {} snapshots reach {} objects in {} packs; deleted {} packs ({}), {} indexes, {} trees packs; marked {} packs (deleted by a gc after {} s), {} marked earlier and younger than that, {} marks removed",
        r.remote,
        r.snapshots,
        r.reachable,
        r.live_packs,
        r.deleted_packs,
        human_bytes(r.deleted_bytes),
        r.deleted_indexes,
        r.deleted_trees,
        r.marked,
        args.grace,
        r.marked_young,
        r.unmarked
    )?;
    if r.unwalked > 0 {
        crate::note!(
            "note: {} snapshots on {} have no trees pack (pushed by an older build): \
             every pack was kept; `push` of each adds it",
            r.unwalked,
            r.remote
        );
    }
    Ok(Outcome::Success)
}

/// Runs `remote add`: the one remote command that creates a store.
fn add(args: RemoteAddArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = Bundles::create(&ctx.store_path)?;
    let spec = if args.encrypt_to.is_empty() && !args.encrypted {
        bundles.add_remote(&args.name, &args.url, args.endpoint.as_deref())?
    } else {
        // Recipients are read before anything is written: one that does not parse is named.
        let recipients = match args.encrypt_to.is_empty() {
            true => None,
            false => Some(Recipients::parse(&args.encrypt_to)?),
        };
        bundles.add_encrypted_remote(
            &args.name,
            &args.url,
            args.endpoint.as_deref(),
            recipients.as_ref(),
            args.identity.as_deref(),
        )?
    };
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&spec)?)?;
    } else if !ctx.quiet {
        crate::note!("added remote {} ({})", spec.name, spec.url);
    }
    Ok(Outcome::Success)
}

/// Runs `push`.
pub fn run_push(args: PushArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let id = bundles.resolve_for(Verb::Push, &args.snapshot)?;
    let spec = bundles.remote(args.remote.as_deref())?;
    // Signed first: the push carries every signature the store keeps.
    let signing = super::sign::key_for(&args.sign)?;
    super::sign::sign_after(ctx, &bundles, &id, signing)?;
    let progress = ctx.noting_progress();
    let report = bundles.push(&id.to_hex(), &spec.name, &progress);
    drop(progress);
    let report = report?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&report)?)?;
        return Ok(Outcome::Success);
    }
    if !ctx.quiet {
        if report.already {
            crate::note!("{} already has {}", spec.name, id.short(12));
            if report.signatures > 0 {
                crate::note!(
                    "added {} to {}",
                    count(report.signatures, "signature"),
                    spec.name
                );
            }
        } else {
            crate::note!(
                "pushed {} to {}: {} in one pack of {}",
                id.short(12),
                spec.name,
                count(report.objects, "new object"),
                human_bytes(report.pack_bytes)
            );
        }
    }
    crate::outln!("{id}")?;
    Ok(Outcome::Success)
}

/// Runs `pull NAME/SNAPSHOT`.
pub fn run_pull(args: PullArgs, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let policy = super::checkout::trust_policy(bundles.root(), &args.trust, &args.target)?;
    let progress = ctx.noting_progress();
    let pulled = bundles
        .with_trust_policy(policy)
        .pull(&args.target, &progress);
    drop(progress);
    let (id, report) = pulled?;
    if ctx.json {
        ctx.print_json(&serde_json::to_value(&report)?)?;
        return Ok(Outcome::Success);
    }
    if !ctx.quiet {
        crate::note!("{}", report.describe());
        super::sign::note_signers(ctx, &id, &report.signers);
    }
    crate::outln!("{id}")?;
    Ok(Outcome::Success)
}

/// Runs `list --remote NAME`: the remote's snapshots with their creation time and name. A bad
/// record hides nothing else: the good ones are listed, each bad one is named on stderr, and
/// the exit status is 1.
pub fn run_list_remote(name: &str, ctx: &Ctx) -> Result<Outcome> {
    let bundles = ctx.bundles()?;
    let progress = ctx.noting_progress();
    let listing = bundles.remote_snapshots(name, &progress);
    drop(progress);
    let listing = listing?;
    print_remote_rows(name, &listing, ctx)?;
    Ok(if listing.unreadable == 0 {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// Prints `list --remote`'s rows (oldest first).
fn print_remote_rows(name: &str, listing: &RemoteListing, ctx: &Ctx) -> Result<()> {
    if ctx.json {
        return ctx.print_json(&serde_json::to_value(&listing.snapshots)?);
    }
    if listing.snapshots.is_empty() && listing.unreadable == 0 {
        crate::outln!("no snapshots on {name}")?;
    }
    let table: Vec<[String; super::list::COLUMNS]> = listing
        .snapshots
        .iter()
        .map(|s| {
            let r = &s.record;
            [
                s.id.short(16),
                s.created(),
                super::list::name_cell(r.name.as_deref()),
                super::list::agent_cell(r.agent.as_deref(), s.agent_latest),
                r.files().to_string(),
                human_bytes(r.bytes()),
                escape_text(&r.source),
            ]
        })
        .collect();
    if !table.is_empty() {
        super::list::print_snapshot_table(&table)?;
    }
    if listing.unreadable > 0 {
        crate::note!(
            "{} unreadable snapshot record(s) on {name} (named above)",
            listing.unreadable
        );
    }
    Ok(())
}

/// Text from a remote or a record, escaped for the terminal.
fn escape_text(text: &str) -> String {
    zeroclaw_bundle_store::escape_text(text)
}
