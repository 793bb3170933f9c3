//! `snapshot <ALIAS> [--install DIR]` (capture an agent's bundle into the store) and
//! `snapshot --dir PATH` (capture any directory), both with `[--name NAME]`.

use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;
use zeroclaw_bundle_store::{Snapshot, SnapshotKind};

use crate::capture::{root, Capture, TopFilter};
use crate::cli::SnapshotArgs;
use crate::cmd::{human_bytes, Ctx, Outcome};

/// Runs `snapshot`.
pub fn run(args: SnapshotArgs, ctx: &Ctx) -> Result<Outcome> {
    if let Some(name) = &args.name {
        zeroclaw_bundle_store::validate_name(name)?;
    }
    let store = ctx.store()?;
    let Some(dir) = args.dir else {
        let alias = args
            .alias
            .as_deref()
            .expect("clap requires an alias without --dir");
        let install = crate::export::install_root(args.install.as_deref())?;
        let captured = crate::export::capture_agent(
            &store,
            &install,
            alias,
            args.name,
            args.zeroclaw_version.as_deref(),
            ctx.progress(None, "capturing", false),
        )?;
        return super::export::report(ctx, &captured, None);
    };
    let source = describe(&dir);
    let fd = root::open_configured(&dir)?
        .with_context(|| format!("{} does not exist", dir.display()))?;
    let parent = store.catalog()?.latest_of_source(&source)?;
    let lock = store.write_lock()?;
    let mut capture = Capture::begin(
        &store,
        &lock,
        format!("dir:{source}"),
        ctx.progress(None, "capturing", false),
    )?;
    let walked = capture.walk(fd, ".", TopFilter::Everything)?;
    let stats = capture.stats();
    let (report, cache_update) = capture.finish();
    let snap = Snapshot {
        root: walked.id,
        created_unix_ns: i128::from(crate::clock::now_ns()),
        host: crate::sys::hostname(),
        kind: SnapshotKind::Tree,
        source,
        agent: None,
        name: args.name,
        parent,
        report,
    };
    crate::hooks::seam("before-commit", &snap.source);
    let id = store
        .commit_snapshot(&lock, &snap, Some(&cache_update))
        .context("could not record the snapshot")?;
    if ctx.json {
        ctx.print_json(&json!({
            "id": id,
            "root": snap.root,
            "files": snap.files(),
            "bytes": snap.bytes(),
            "report": snap.report,
            "work": stats,
        }))?;
    } else {
        let skipped: u64 = snap.report.trees.iter().map(|t| t.skipped()).sum();
        if !ctx.quiet {
            eprintln!(
                "captured {} files, {} from {}{}",
                snap.files(),
                human_bytes(snap.bytes()),
                zeroclaw_bundle_store::escape_text(&snap.source),
                if skipped > 0 {
                    format!(" ({skipped} entries skipped: see `show`)")
                } else {
                    String::new()
                }
            );
        }
        println!("{id}");
    }
    Ok(Outcome::Success)
}

/// The absolute path a snapshot came from: parent canonicalized, last component as given.
fn describe(dir: &Path) -> String {
    let abs = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let resolved = match (abs.parent(), abs.file_name()) {
        (Some(p), Some(n)) => p
            .canonicalize()
            .map(|p| p.join(n))
            .unwrap_or_else(|_| abs.clone()),
        _ => abs.clone(),
    };
    resolved.to_string_lossy().into_owned()
}
