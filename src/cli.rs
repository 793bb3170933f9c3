//! Command-line parsing (clap derive): one Args struct per subcommand, the global options,
//! and nothing else. DESIGN.md §8 is the contract.

// Doc comments here are the --help text, written for a terminal, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Make ZeroClaw agents portable: snapshot, export, review (FUSE), diff.
#[derive(Debug, Parser)]
#[command(name = "zeroclaw-bundle", version, about, max_term_width = 100)]
pub struct Cli {
    /// Store directory [default: $ZEROCLAW_BUNDLE_STORE, else $XDG_DATA_HOME/zeroclaw-bundle,
    /// else ~/.local/share/zeroclaw-bundle]
    #[arg(long, global = true, value_name = "DIR", env = "ZEROCLAW_BUNDLE_STORE")]
    pub store: Option<PathBuf>,
    /// Print one JSON document instead of text
    #[arg(long, global = true)]
    pub json: bool,
    /// Print less (no progress bars)
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Print more
    #[arg(short, long, global = true)]
    pub verbose: bool,
    /// The command
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Capture an agent and publish its bundle
    Export(ExportArgs),
    /// Capture an agent (or any directory with --dir) into the store
    Snapshot(SnapshotArgs),
    /// List snapshots
    List,
    /// Show one snapshot's record
    Show(RefArgs),
    /// List a directory of a snapshot: SNAPSHOT[:PATH]
    Ls(LsArgs),
    /// Print a file of a snapshot: SNAPSHOT:PATH
    Cat(CatArgs),
    /// Publish a stored snapshot into a directory
    Checkout(CheckoutArgs),
    /// Mount a snapshot read-only (FUSE) to review it with your own tools
    Mount(MountArgs),
    /// Unmount a mount made by `mount`
    Umount(UmountArgs),
    /// Repair a destination left by an interrupted publish
    Recover(RecoverArgs),
    /// Rehash every object and check every snapshot's objects exist
    Verify,
    /// Remove objects no snapshot reaches
    Gc(GcArgs),
    /// Rebuild the catalog from the snapshot records in the store
    Reindex,
    /// Remove a snapshot from the store (its data goes at the next gc)
    Forget(RefArgs),
}

/// `snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// Agent alias to capture (from the install's config.toml)
    #[arg(required_unless_present = "dir", conflicts_with = "dir")]
    pub alias: Option<String>,
    /// Capture this directory instead of an agent (e.g. a received bundle)
    #[arg(long, value_name = "PATH")]
    pub dir: Option<PathBuf>,
    /// ZeroClaw install [default: $ZEROCLAW_HOME, else ~/.zeroclaw]
    #[arg(long, value_name = "DIR", conflicts_with = "dir")]
    pub install: Option<PathBuf>,
    /// Name for the snapshot (usable wherever a snapshot is expected)
    #[arg(long)]
    pub name: Option<String>,
    /// The zeroclaw version recorded in the manifest's provenance (set by `zeroclaw bundle`)
    #[arg(long, value_name = "VERSION", conflicts_with = "dir")]
    pub zeroclaw_version: Option<String>,
}

/// `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Agent alias to export
    pub alias: String,
    /// Destination bundle directory (created if it does not exist)
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// ZeroClaw install [default: $ZEROCLAW_HOME, else ~/.zeroclaw]
    #[arg(long, value_name = "DIR")]
    pub install: Option<PathBuf>,
    /// Replace the destination when it is a bundle or a previous checkout of this tool
    #[arg(long)]
    pub force: bool,
    /// Replace the destination whatever it holds (implies --force): its files are deleted
    #[arg(long)]
    pub replace_any: bool,
    /// The zeroclaw version recorded in the manifest's provenance (set by `zeroclaw bundle`)
    #[arg(long, value_name = "VERSION")]
    pub zeroclaw_version: Option<String>,
}

/// A command taking one snapshot reference.
#[derive(Debug, Args)]
pub struct RefArgs {
    /// Snapshot: full id, unique prefix (8+ hex digits), name, or agent/<alias>
    pub snapshot: String,
}

/// `ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// SNAPSHOT or SNAPSHOT:PATH
    pub target: OsString,
    /// List subdirectories too
    #[arg(short, long)]
    pub recursive: bool,
}

/// `cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    /// SNAPSHOT:PATH
    pub target: OsString,
}

/// `checkout`.
#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// Snapshot to publish
    pub snapshot: String,
    /// Destination directory
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Replace the destination when it is a bundle or a previous checkout of this tool
    #[arg(long)]
    pub force: bool,
    /// Replace the destination whatever it holds (implies --force): its files are deleted
    #[arg(long)]
    pub replace_any: bool,
}

/// `gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep unreachable objects younger than this many seconds (a capture in progress
    /// writes objects before its snapshot record)
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    pub grace: u64,
}

/// `mount`.
#[derive(Debug, Args)]
pub struct MountArgs {
    /// Snapshot to mount
    pub snapshot: String,
    /// An empty directory to mount on
    pub mountpoint: PathBuf,
    /// Return once the mount answers, leaving it served in the background
    #[arg(long)]
    pub daemon: bool,
    /// Let other users see the mount (needs user_allow_other in /etc/fuse.conf unless root)
    #[arg(long)]
    pub allow_other: bool,
    /// Internal: the background half of `--daemon`
    #[arg(long, hide = true)]
    pub daemon_child: bool,
}

/// `umount`.
#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Where a snapshot is mounted
    pub mountpoint: PathBuf,
}

/// `recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The destination of the interrupted publish (`--out` of export or checkout)
    pub dest: PathBuf,
}
