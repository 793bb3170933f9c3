//! `remote add|list|remove`, `push`, `pull` and `list --remote`: thin wrappers over `zeroclaw_bundle::remote`
//! that resolve names and print. Nothing here sees a credential: the object store reads them
//! from the environment.

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::cli::{
    PullArgs, PushArgs, RemoteAddArgs, RemoteCommand, RemoteForgetArgs, RemoteGcArgs,
};
use crate::cmd::{human_bytes, Ctx, Outcome};
use zeroclaw_bundle::remote::{self, Remote, RemoteSpec};
use zeroclaw_bundle_store::escape_text;

/// Runs `remote add|list|remove`.
pub fn run_remote(cmd: RemoteCommand, ctx: &Ctx) -> Result<Outcome> {
    match cmd {
        RemoteCommand::Add(args) => add(args, ctx),
        RemoteCommand::Remove(args) => {
            let store = ctx.store()?;
            let gone = remote::remove_remote(store.root(), &args.name)?;
            if ctx.json {
                ctx.print_json(&json!({"remote": gone.name}))?;
            } else if !ctx.quiet {
                // Not the URL: an entry removed because it carries a token must not print it.
                crate::note!(
                    "removed remote {} from {}; nothing on the remote was touched",
                    gone.name,
                    store.root().join("remotes.toml").display()
                );
            }
            Ok(Outcome::Success)
        }
        RemoteCommand::List => {
            // Like every command that only reads: no store is an error, not an empty list.
            let store = ctx.store()?;
            let remotes = remote::load_remotes(store.root())?;
            if remotes.is_empty() && !ctx.json && !ctx.quiet {
                crate::note!(
                    "no remotes in the store {}; add one with `remote add NAME URL`",
                    store.root().display()
                );
            }
            if ctx.json {
                let rows: Vec<_> = remotes
                    .iter()
                    .map(|r| json!({"remote": r.name, "url": r.url, "endpoint": r.endpoint}))
                    .collect();
                ctx.print_json(&json!(rows))?;
                return Ok(Outcome::Success);
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
        RemoteCommand::Forget(args) => forget(args, ctx),
        RemoteCommand::Gc(args) => gc(args, ctx),
    }
}

/// With `-v`, says on stderr what the command asked of the remote so far (requests and bytes
/// per key prefix), as `diff` and `mount` do.
pub fn say_traffic(remote: &Remote, ctx: &Ctx) {
    if ctx.verbose {
        crate::note!("remote {}: {}", remote.name(), remote.traffic());
    }
}

/// Says on stderr what the remote's listings ignored (names that are not part of its layout).
pub fn say_notices(remote: &Remote, ctx: &Ctx) {
    for line in remote.notices() {
        if !ctx.quiet {
            crate::note!("notice: {line}");
        }
    }
}

fn forget(args: RemoteForgetArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let spec = remote::find_remote(store.root(), &args.name)?;
    let remote = Remote::open(&spec, false)?.with_cancel(ctx.cancel.clone());
    let id = remote.resolve(&args.snapshot)?;
    say_notices(&remote, ctx);
    remote::forget(&remote, &id)
        .with_context(|| format!("could not forget {} on {}", id.short(12), spec.name))?;
    if ctx.json {
        ctx.print_json(&json!({"snapshot": id, "remote": spec.name}))?;
    } else {
        if !ctx.quiet {
            crate::note!(
                "forgot {} on {}: its record is gone; `remote gc {}` removes what only it reached",
                id.short(12),
                spec.name,
                spec.name
            );
        }
        crate::outln!("{id}")?;
    }
    Ok(Outcome::Success)
}

fn gc(args: RemoteGcArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let spec = remote::find_remote(store.root(), &args.name)?;
    let remote = Remote::open(&spec, false)?.with_cancel(ctx.cancel.clone());
    let r = remote::gc(
        &remote,
        store.objects().tmp_dir(),
        std::time::Duration::from_secs(args.grace),
    )
    .with_context(|| format!("could not collect garbage on {}", spec.name))?;
    say_notices(&remote, ctx);
    if ctx.json {
        let mut v = json!(r);
        v["remote"] = json!(spec.name);
        ctx.print_json(&v)?;
        return Ok(Outcome::Success);
    }
    crate::outln!(
        "{}: {} snapshots reach {} objects in {} packs; deleted {} packs ({}), {} indexes, {} trees packs; marked {} packs (deleted by a gc after {} s), {} marked earlier and younger than that, {} marks removed",
        spec.name,
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
            "note: {} snapshots on {} have no trees pack (pushed by an older build): every pack \
             was kept; `push` of each adds it",
            r.unwalked,
            spec.name
        );
    }
    Ok(Outcome::Success)
}

fn add(args: RemoteAddArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.create_store()?;
    let spec = RemoteSpec {
        name: args.name,
        url: args.url,
        endpoint: args.endpoint,
    };
    remote::add_remote(store.root(), &spec)?;
    if ctx.json {
        ctx.print_json(&json!({"remote": spec.name, "url": spec.url, "endpoint": spec.endpoint}))?;
    } else if !ctx.quiet {
        crate::note!("added remote {} ({})", spec.name, spec.url);
    }
    Ok(Outcome::Success)
}

/// The remote named `name`, or the default: the only one, or the one named origin.
fn pick(store_root: &std::path::Path, name: Option<&str>) -> Result<RemoteSpec> {
    if let Some(name) = name {
        return Ok(remote::find_remote(store_root, name)?);
    }
    let all = remote::load_remotes(store_root)?;
    if all.len() == 1 {
        return Ok(all.into_iter().next().expect("one"));
    }
    match all.iter().find(|r| r.name == "origin") {
        Some(r) => Ok(r.clone()),
        None if all.is_empty() => bail!("no remote configured; add one with `remote add NAME URL`"),
        None => bail!(
            "several remotes and none named origin; name one: {}",
            all.iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Runs `push`.
pub fn run_push(args: PushArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let id = zeroclaw_bundle::source::classify(
        store.root(),
        std::ffi::OsStr::new(&args.snapshot),
        zeroclaw_bundle::source::Takes::stored("push"),
    )?
    .stored_id(&store)?;
    let spec = pick(store.root(), args.remote.as_deref())?;
    // Signed first: the push carries every signature the store keeps.
    let signing = super::sign::key_for(&args.sign)?;
    super::sign::sign_after(ctx, &store, &id, signing)?;
    let remote = Remote::open(&spec, true)?.with_cancel(ctx.cancel.clone());
    let progress = ctx.term_progress();
    let report = remote::push(&store, &remote, &id, &progress)
        .with_context(|| format!("could not push {} to {}", id.short(12), spec.name));
    drop(progress);
    say_notices(&remote, ctx);
    say_traffic(&remote, ctx);
    let report = report?;
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "remote": spec.name,
            "already": report.already,
            "objects": report.objects,
            "pack_bytes": report.pack_bytes,
            "pack": report.pack,
            "signatures": report.signatures,
        }))?;
    } else {
        if !ctx.quiet {
            if report.already {
                crate::note!("{} already has {}", spec.name, id.short(12));
                if report.signatures > 0 {
                    crate::note!(
                        "added {} to {}",
                        crate::cmd::count(report.signatures, "signature"),
                        spec.name
                    );
                }
            } else {
                crate::note!(
                    "pushed {} to {}: {} in one pack of {}",
                    id.short(12),
                    spec.name,
                    crate::cmd::count(report.objects, "new object"),
                    human_bytes(report.pack_bytes)
                );
            }
        }
        crate::outln!("{id}")?;
    }
    Ok(Outcome::Success)
}

/// Pulls the remote ref `target` (`NAME/<id|name|agent/alias>`) into `store`, refusing a snapshot no key of `require` signed (`--require-signed`) before
/// anything is downloaded.
pub fn pull_ref_checked(
    store: &zeroclaw_bundle_store::Store,
    target: &str,
    ctx: &Ctx,
    require: Option<&zeroclaw_bundle::sign::AllowedSigners>,
) -> Result<(
    zeroclaw_bundle_store::ObjectId,
    RemoteSpec,
    remote::PullReport,
)> {
    let Some((name, reference)) = target.split_once('/') else {
        bail!(
            "{target:?} is not NAME/SNAPSHOT (for example origin/3f2a9c01 or origin/agent/researcher)"
        );
    };
    // The remote is configured in the store (`remote add` made it): never create one here.
    let spec = remote::find_remote(store.root(), name)?;
    let remote = Remote::open(&spec, false)?.with_cancel(ctx.cancel.clone());
    let id = remote.resolve(reference);
    say_notices(&remote, ctx);
    let id = match id {
        Ok(id) => id,
        Err(e) => {
            say_traffic(&remote, ctx);
            return Err(e.into());
        }
    };
    let progress = ctx.term_progress();
    let report = remote::pull_checked(store, &remote, &id, require, &progress).with_context(|| {
        format!(
            "could not pull {} from {}; no snapshot was added",
            id.short(12),
            spec.name
        )
    });
    drop(progress);
    say_notices(&remote, ctx);
    say_traffic(&remote, ctx);
    Ok((id, spec, report?))
}

/// Runs `pull NAME/SNAPSHOT`.
pub fn run_pull(args: PullArgs, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let trust = super::sign::trust_of_args(store.root(), &args.trust)?;
    let require = trust.enforcing(&args.target)?;
    let (id, spec, report) = pull_ref_checked(&store, &args.target, ctx, require)?;
    if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "remote": spec.name,
            "packs": report.packs,
            "bytes": report.bytes,
            "signatures": report.signatures,
        }))?;
    } else {
        if !ctx.quiet {
            crate::note!(
                "pulled {} from {}: {}, {}, verified",
                id.short(12),
                spec.name,
                crate::cmd::count(report.packs, "pack"),
                human_bytes(report.bytes)
            );
            super::sign::note_signers(ctx, &id, &report.signers);
        }
        crate::outln!("{id}")?;
    }
    Ok(Outcome::Success)
}

/// Runs `list --remote NAME`: the remote's snapshots with their creation time and name.
pub fn run_list_remote(name: &str, ctx: &Ctx) -> Result<Outcome> {
    let store = ctx.store()?;
    let spec = remote::find_remote(store.root(), name)?;
    let remote = Remote::open(&spec, false)?.with_cancel(ctx.cancel.clone());
    let mut rows = Vec::new();
    // A bad record hides nothing else: the good ones are listed, each bad one is named on
    // stderr, and the exit status is 1.
    let mut bad = 0usize;
    let listed = list_records(&remote, name, &mut rows, &mut bad);
    say_notices(&remote, ctx);
    say_traffic(&remote, ctx);
    listed?;
    let outcome = if bad == 0 {
        Outcome::Success
    } else {
        Outcome::Failure
    };
    rows.sort_by_key(|(_, s)| s.created_unix_ns);
    print_remote_rows(name, &rows, bad, ctx)?;
    Ok(outcome)
}

/// Reads every record the remote lists into `rows`; each bad one is named on stderr and
/// counted in `bad`.
fn list_records(
    remote: &Remote,
    name: &str,
    rows: &mut Vec<(
        zeroclaw_bundle_store::ObjectId,
        zeroclaw_bundle_store::Snapshot,
    )>,
    bad: &mut usize,
) -> Result<()> {
    for id in remote.snapshots()? {
        let record = match remote.record(&id) {
            Ok(Some(record)) => record,
            Ok(None) => continue,
            Err(e @ remote::RemoteError::Corrupt { .. }) => {
                *bad += 1;
                crate::note!("warning: {e}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        match zeroclaw_bundle_store::Snapshot::decode(&record) {
            Ok(snap) => rows.push((id, snap)),
            Err(e) => {
                *bad += 1;
                crate::note!(
                    "warning: remote {name}: snapshots/{} is not a snapshot record: {e}",
                    id.to_hex()
                );
            }
        }
    }
    Ok(())
}

/// Prints `list --remote`'s rows (oldest first).
fn print_remote_rows(
    name: &str,
    rows: &[(
        zeroclaw_bundle_store::ObjectId,
        zeroclaw_bundle_store::Snapshot,
    )],
    bad: usize,
    ctx: &Ctx,
) -> Result<()> {
    // `agent/<alias>` resolves to the newest of that agent's snapshots (by creation time,
    // ties by id, as `Remote::resolve` picks): only that row carries it.
    let mut newest: std::collections::HashMap<&str, (i128, zeroclaw_bundle_store::ObjectId)> =
        std::collections::HashMap::new();
    for (id, s) in rows {
        if let Some(a) = &s.agent {
            let key = (s.created_unix_ns, *id);
            let best = newest.entry(a.as_str()).or_insert(key);
            if key > *best {
                *best = key;
            }
        }
    }
    let latest = |id: &zeroclaw_bundle_store::ObjectId, s: &zeroclaw_bundle_store::Snapshot| {
        s.agent
            .as_deref()
            .and_then(|a| newest.get(a))
            .is_some_and(|b| b.1 == *id)
    };
    if ctx.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(id, s)| {
                json!({
                    "snapshot": id,
                    "remote": name,
                    "created_unix_ns": s.created_unix_ns,
                    "created": zeroclaw_bundle::clock::rfc3339_utc(s.created_unix_ns),
                    "kind": s.kind,
                    "name": s.name,
                    "agent": s.agent,
                    "agent_latest": latest(id, s),
                    "source": s.source,
                    "files": s.files(),
                    "bytes": s.bytes(),
                    "root": s.root,
                })
            })
            .collect();
        ctx.print_json(&json!(v))?;
        return Ok(());
    }
    if rows.is_empty() && bad == 0 {
        crate::outln!("no snapshots on {name}")?;
    }
    let table: Vec<[String; super::list::COLUMNS]> = rows
        .iter()
        .map(|(id, s)| {
            [
                id.short(16),
                zeroclaw_bundle::clock::rfc3339_utc(s.created_unix_ns),
                super::list::name_cell(s.name.as_deref()),
                super::list::agent_cell(s.agent.as_deref(), latest(id, s)),
                s.files().to_string(),
                crate::cmd::human_bytes(s.bytes()),
                zeroclaw_bundle_store::escape_text(&s.source),
            ]
        })
        .collect();
    if !table.is_empty() {
        super::list::print_snapshot_table(&table)?;
    }
    if bad > 0 {
        crate::note!("{bad} unreadable snapshot record(s) on {name} (named above)");
    }
    Ok(())
}
