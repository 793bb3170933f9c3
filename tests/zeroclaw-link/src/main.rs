//! A stand-in for ZeroClaw's binary with `zeroclaw bundle ...` added the way ZeroClaw would
//! add it: one variant in its clap `Commands` enum holding `BundleCommands`, one match arm
//! that runs it, each verb one call into `zeroclaw_bundle`'s public API. The install is found
//! and read as ZeroClaw finds and reads it (`ZEROCLAW_CONFIG_DIR`, else `~/.zeroclaw`; parsed
//! and migrated by `zeroclaw_config`), so an alias that is not an agent is refused before
//! anything is captured.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use zeroclaw_bundle::{
    Bundles, Cancel, Cancellable, Change, DiffRequest, DiffSink, MountOptions, Patch, Replace,
    Semantic, Silent, SinkError,
};

/// ZeroClaw's top level, reduced to what this example needs.
#[derive(Parser)]
#[command(name = "zeroclaw")]
struct Cli {
    /// The install directory (default: `$ZEROCLAW_CONFIG_DIR`, else `~/.zeroclaw`).
    #[arg(long, global = true)]
    config_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Snapshot, export, diff, mount and move agent bundles (zeroclaw-bundle).
    Bundle {
        /// The bundle store (default: `<install>/bundles`).
        #[arg(long)]
        store: Option<PathBuf>,
        #[command(subcommand)]
        bundle_command: BundleCommands,
    },
}

/// The `zeroclaw bundle` subcommands.
#[derive(Subcommand)]
enum BundleCommands {
    /// Capture an agent into the store; prints the snapshot id.
    Snapshot {
        /// The agent's alias.
        alias: String,
        /// A name for the snapshot.
        #[arg(long)]
        name: Option<String>,
    },
    /// Capture an agent and publish its bundle at DIR; prints the snapshot id.
    Export {
        /// The agent's alias.
        alias: String,
        /// The bundle directory to write.
        #[arg(long)]
        out: PathBuf,
        /// Replace an earlier bundle there.
        #[arg(long)]
        force: bool,
    },
    /// Compare two snapshots, bundle directories or packs; prints name-status lines.
    Diff { a: String, b: String },
    /// Mount a snapshot read-only at MOUNTPOINT until interrupted.
    Mount {
        snapshot: String,
        mountpoint: PathBuf,
    },
    /// Write a snapshot as one pack file.
    Pack {
        snapshot: String,
        #[arg(long)]
        out: PathBuf,
    },
    /// Upload a snapshot to a remote configured with `zeroclaw-bundle remote add`.
    Push { snapshot: String, remote: String },
    /// Download NAME/SNAPSHOT from a remote.
    Pull { remote_ref: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let install = match cli.config_dir {
        Some(dir) => dir,
        None => default_config_dir()?,
    };
    match cli.command {
        Commands::Bundle {
            store,
            bundle_command,
        } => {
            let store = store.unwrap_or_else(|| install.join("bundles"));
            bundle(&install, &store, bundle_command)
        }
    }
}

/// The one match arm ZeroClaw adds.
fn bundle(install: &Path, store: &Path, command: BundleCommands) -> Result<()> {
    // ZeroClaw's own handler would stop work on Ctrl-C by cancelling this token.
    let cancel = Cancel::new();
    let progress = Cancellable::new(&Silent, cancel.clone());
    match command {
        BundleCommands::Snapshot { alias, name } => {
            require_agent(install, &alias)?;
            let bundles = Bundles::create(store)?;
            let options = zeroclaw_bundle::AgentOptions {
                name,
                ..Default::default()
            };
            let snap = bundles.snapshot_agent(install, &alias, &options, &progress)?;
            println!("{}", snap.id);
        }
        BundleCommands::Export { alias, out, force } => {
            require_agent(install, &alias)?;
            let replace = if force {
                Replace::Bundle
            } else {
                Replace::Nothing
            };
            // The destination is checked and claimed before the store is created: a
            // destination refused creates nothing.
            let job = Bundles::prepare_export(store, Some(install), &alias, &out, replace)?;
            let (_, done) = job.run(&Default::default(), &progress)?;
            println!("{}", done.snapshot.id);
        }
        BundleCommands::Diff { a, b } => {
            // Streamed: each change is printed as the walk finds it. Directories and packs
            // need no store (a scratch one is used when there is none).
            let request = DiffRequest {
                a: a.as_ref(),
                b: b.as_ref(),
                ..Default::default()
            };
            Bundles::diff_in(store, &request, &mut Printed, &progress)?;
        }
        BundleCommands::Mount {
            snapshot,
            mountpoint,
        } => {
            let bundles = Bundles::open(store)?;
            let handle = bundles.mount(&snapshot, &mountpoint, MountOptions::default())?;
            eprintln!("mounted {snapshot} at {}", mountpoint.display());
            // Until unmounted from outside (`zeroclaw-bundle umount`, `fusermount3 -u`).
            handle.wait()?;
        }
        BundleCommands::Pack { snapshot, out } => {
            let bundles = Bundles::open(store)?;
            let packed = bundles.pack(&snapshot, &out, Default::default(), false, &progress)?;
            println!("{}", packed.id);
        }
        BundleCommands::Push { snapshot, remote } => {
            let bundles = Bundles::open(store)?;
            bundles.push(&snapshot, &remote, &progress)?;
        }
        BundleCommands::Pull { remote_ref } => {
            let bundles = Bundles::open(store)?;
            let (id, _) = bundles.pull(&remote_ref, &progress)?;
            println!("{id}");
        }
    }
    Ok(())
}

/// The diff's sink: the semantic section as `~ area item path` lines, then each file change
/// as a name-status line, printed as they come.
struct Printed;

impl DiffSink for Printed {
    fn semantic(&mut self, section: &Semantic) -> Result<(), SinkError> {
        for change in &section.changes {
            println!("~ {} {} {}", change.area, change.item, change.path);
        }
        Ok(())
    }

    fn change(&mut self, change: &Change, _: Option<&Patch>) -> Result<(), SinkError> {
        println!("{:?}\t{}", change.status, change.path);
        Ok(())
    }
}

/// Refuses an alias that is not an agent of the install, read the way ZeroClaw reads it.
fn require_agent(install: &Path, alias: &str) -> Result<()> {
    let path = install.join("config.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let loaded = zeroclaw_config::migration::migrate_to_current_salvaged(&text);
    if !loaded.config.agents.contains_key(alias) {
        let mut known: Vec<_> = loaded.config.agents.keys().cloned().collect();
        known.sort();
        bail!(
            "no agent `{alias}` in {} (agents: {})",
            path.display(),
            known.join(", ")
        );
    }
    Ok(())
}

fn default_config_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("ZEROCLAW_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let home = std::env::var_os("HOME").context("no HOME and no ZEROCLAW_CONFIG_DIR")?;
    Ok(PathBuf::from(home).join(".zeroclaw"))
}
