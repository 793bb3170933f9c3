//! Command-line parsing (clap derive): one Args struct per subcommand, the global options,
//! and nothing else. DESIGN.md §8 is the contract.

// Doc comments here are the --help text, written for a terminal, not rustdoc.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// `--version`: the package version and the git commit it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("ZEROCLAW_BUNDLE_COMMIT"),
    ")"
);

/// The global options as the usage lines show them.
const GLOBAL_USAGE: &str = "[--store DIR] [--json] [-q|-v]";

/// The global options, named once under each subcommand's help instead of repeated.
const GLOBALS: &str = "\
Global options (before or after the command): --store DIR, --json, -q/--quiet, -v/--verbose;
see `zeroclaw-bundle --help`.";

/// Make ZeroClaw agents portable: snapshot an agent (or any directory) into a
/// content-addressed store, export it as a bundle with an atomic publish, review any snapshot
/// read-only through FUSE, diff bundles, and carry them between hosts as packs.
#[derive(Debug, Parser)]
#[command(
    name = "zeroclaw-bundle",
    version = VERSION,
    about = "Make ZeroClaw agents portable: snapshots, bundles published atomically, read-only review (FUSE), diff, packs",
    max_term_width = 100,
    after_help = "\
Global options (before or after the command):
      --store <DIR>  Store directory [default: $ZEROCLAW_BUNDLE_STORE, else
                     $XDG_DATA_HOME/zeroclaw-bundle, else ~/.local/share/zeroclaw-bundle]
      --json         Print one JSON document on stdout instead of text
  -q, --quiet        Print only the id a command makes (no report, no progress bars)
  -v, --verbose      Print more detail: object ids in `ls`, the work capture and publish did

Examples:
  zeroclaw-bundle export researcher --out ./researcher-bundle
  zeroclaw-bundle list
  zeroclaw-bundle show agent/researcher
  zeroclaw-bundle mount agent/researcher /tmp/review --daemon
  zeroclaw-bundle diff agent/researcher ./received-bundle
  zeroclaw-bundle pack agent/researcher --out researcher.zcpack

A store is created only by a command that adds to it (`snapshot`, `export`, `unpack`,
`remote add`); every other command needs one."
)]
pub struct Cli {
    /// Store directory [default: $ZEROCLAW_BUNDLE_STORE, else $XDG_DATA_HOME/zeroclaw-bundle,
    /// else ~/.local/share/zeroclaw-bundle]
    #[arg(
        long,
        global = true,
        hide = true,
        value_name = "DIR",
        env = STORE_ENV
    )]
    pub store: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text
    #[arg(long, global = true, hide = true)]
    pub json: bool,
    /// Print only the id a command makes (no report, no progress bars)
    #[arg(short, long, global = true, hide = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print more detail: object ids in `ls`, the work capture and publish did (files hashed,
    /// reused)
    #[arg(short, long, global = true, hide = true)]
    pub verbose: bool,
    /// The command
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Capture an agent and publish its bundle
    #[command(after_help = "\
Examples:
  zeroclaw-bundle export researcher --out ./researcher-bundle
  zeroclaw-bundle export researcher --install /srv/zeroclaw --out ./b --force

A second export to the same --out while one runs fails at once. A failed export records no
snapshot, so agent/<alias> keeps naming the last export that succeeded.")]
    Export(ExportArgs),
    /// Publish a skill bundle, with its agents' MCP servers, as an Agent Plugin
    #[command(after_help = "\
Examples:
  zeroclaw-bundle export-plugin research_tools --out ./research-tools-plugin
  zeroclaw-bundle export-plugin ops --install /srv/zeroclaw --name acme.ops --out ./ops

Writes an Agent Plugin (agent-plugins.org, spec 1.0.0): skills/<name>/SKILL.md with each
skill's files, mcp.json with the MCP servers the agents that attach the bundle reach (secrets
scrubbed to \"\" and listed, as export scrubs them), and plugin.json. The result must load under
the spec with no diagnostic, or nothing is written.")]
    ExportPlugin(ExportPluginArgs),
    /// Capture an agent (or any directory with --dir) into the store
    #[command(after_help = "\
Examples:
  zeroclaw-bundle snapshot researcher --name before-upgrade
  zeroclaw-bundle snapshot --dir ./received-bundle --name from-alice")]
    Snapshot(SnapshotArgs),
    /// List snapshots (oldest first)
    #[command(after_help = "\
Example:
  zeroclaw-bundle list

NAME is the snapshot's name (from `snapshot --name`); AGENT is the agent it holds, marked
(latest) on the snapshot agent/<alias> names. FILES and SIZE count the snapshot's regular files
and their bytes: what a checkout writes.")]
    List(ListArgs),
    /// Show one snapshot's record
    #[command(after_help = concat!("\
Examples:
  zeroclaw-bundle show agent/researcher
  zeroclaw-bundle show 9dd40880

", "SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them."))]
    Show(ShowArgs),
    /// List a directory of a snapshot: SNAPSHOT[:PATH]
    #[command(after_help = concat!("\
Examples:
  zeroclaw-bundle ls agent/researcher
  zeroclaw-bundle ls -r agent/researcher:workspace

", "SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them."))]
    Ls(LsArgs),
    /// Print a file of a snapshot: SNAPSHOT:PATH
    #[command(after_help = concat!("\
Example:
  zeroclaw-bundle cat agent/researcher:zeroclaw-agent.toml

", "SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them."))]
    Cat(CatArgs),
    /// Publish a stored snapshot into a directory
    #[command(after_help = concat!("\
Examples:
  zeroclaw-bundle checkout agent/researcher --out ./researcher-bundle
  zeroclaw-bundle checkout before-upgrade --out ./restore --force

", "SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them."))]
    Checkout(CheckoutArgs),
    /// Mount a snapshot, a pack file or a remote snapshot read-only (FUSE) to review it with
    /// your own tools
    #[command(after_help = concat!("\
Examples:
  zeroclaw-bundle mount agent/researcher /tmp/review            (Ctrl-C to unmount)
  zeroclaw-bundle mount agent/researcher /tmp/review --daemon   (then `umount /tmp/review`)
  zeroclaw-bundle mount researcher.zcpack /tmp/review           (a pack, served without unpacking)
  zeroclaw-bundle mount origin/agent/researcher /tmp/review     (a remote ref: trees first,
                                                                 file contents fetched when read)

The first argument is a SNAPSHOT of this store, a PACK file (from `pack`; an update pack needs
its base in this store), or a remote ref NAME/<id|name|agent/alias> (NAME from `remote list`).
Needs /dev/fuse and fusermount3 (root, or a user allowed to use FUSE); --allow-other lets
other users see the mount. Mounted by root on Linux 6.9 or later, a stored snapshot's large
files are read by the kernel straight from the store (FUSE passthrough; each object is
verified first); -v says whether the mount does, --no-passthrough turns it off.

", "SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them."))]
    Mount(MountArgs),
    /// Unmount a mount made by `mount`
    #[command(after_help = "\
Example:
  zeroclaw-bundle umount /tmp/review")]
    Umount(UmountArgs),
    /// Repair a destination left by an interrupted publish, or finish a cut-short update
    #[command(
        long_about = "\
Repair a destination left by an interrupted publish, or finish an update cut short.

With DEST: You need it after an export or checkout was killed (or interrupted twice) while
it was publishing: it removes the hidden .zeroclaw-export-* staging and retired trees beside
DEST, puts the previous bundle back when the swap was cut in half, and removes a stale lock
file. An export or checkout interrupted once cleans up by itself, and prints this command
when it could not. Safe to run at any time: it never touches a publish that is still running.

With --install DIR: it finishes every update or rollback of an agent of that install that
was killed after it began to write (its intent is kept in
DIR/.zeroclaw-bundle/updates/ALIAS/pending): the agent's workspace, provenance and config.toml
are brought to the state after the change, so the install is never left half old, half new.
Until then `update`, `rollback` and `import` into that install refuse. It refuses, naming the
path, when config.toml or the workspace was edited since; with nothing pending it says so.",
        after_help = "\
Examples:
  zeroclaw-bundle recover ./researcher-bundle
  zeroclaw-bundle recover --install ~/.zeroclaw"
    )]
    Recover(RecoverArgs),
    /// Rehash every object and check every snapshot's objects exist
    #[command(after_help = "\
Example:
  zeroclaw-bundle verify        (exit 1 when a problem is found)")]
    Verify,
    /// Remove objects no snapshot reaches
    #[command(after_help = "\
Examples:
  zeroclaw-bundle gc
  zeroclaw-bundle gc --grace 0   (also objects of the last hour; only when no capture runs)")]
    Gc(GcArgs),
    /// Rebuild the catalog from the snapshot records in the store
    #[command(after_help = "\
Example:
  zeroclaw-bundle reindex")]
    Reindex,
    /// Remove a snapshot from the store (its data goes at the next gc)
    #[command(after_help = concat!("\
Example:
  zeroclaw-bundle forget before-upgrade && zeroclaw-bundle gc

", "SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them."))]
    Forget(RefArgs),
    /// Compare two snapshots, directories, packs or remote snapshots: changed files, and for
    /// agent bundles what the agent may do (exit 0 equal, 1 different, 2 error)
    Diff(DiffArgs),
    /// Import an agent bundle into a ZeroClaw install: config merged (never overwriting),
    /// files published, config.toml written last with a backup
    #[command(after_help = "\
Examples:
  zeroclaw-bundle review ./coder-bundle                 (note the content id it ends with)
  zeroclaw-bundle import ./coder-bundle --expect 3f2a9c01d4e5b6a7
  zeroclaw-bundle import coder.zcpack --as coder2 --map provider.openai.main=openai.local
  zeroclaw-bundle import origin/agent/coder --dry-run

The source is captured into the store first and imported from that snapshot only; --expect
refuses anything but the content id that was reviewed. Without --expect, a terminal is shown a
summary and asked; a pipe needs --expect or --yes. A newer bundle of an agent imported here
before updates it in place (three ways, as `update` does; exit 3 and 4 as there). An alias that
collides with a different
local entry is namespaced (<alias>_imported), an identical one is reused, and --map KIND.OLD=NEW
points the bundle's references at a local entry instead (KIND: provider, tts_provider,
transcription_provider, risk_profile, runtime_profile, skill_bundle, knowledge_bundle,
mcp_bundle, mcp_server).")]
    Import(ImportArgs),
    /// Update an agent imported before from a newer bundle of it, in place: files and config
    /// entries merged three ways against the version last imported
    #[command(after_help = "\
Examples:
  zeroclaw-bundle update ./coder-bundle --dry-run        (the three-way plan, nothing written)
  zeroclaw-bundle update ./coder-bundle --conflicts copy
  zeroclaw-bundle rollback coder                         (undo it)

Per workspace path and config key: changed only upstream, taken; changed only here, kept;
changed differently on both sides, a conflict. Memory, MEMORY_SNAPSHOT.md and whatever the
export left behind are never touched. Exit status: 0 updated (or up to date), 1 error (or an
Agent Plugin's older version without --allow-downgrade), 3 the update grants something new
and --accept-grants was not given, 4 conflicts refused
(nothing written; choose with --conflicts keep-local|take-incoming|copy).")]
    Update(UpdateArgs),
    /// Restore an agent to the state before its last update (files and config entries)
    Rollback(RollbackArgs),
    /// Keep imported agents in step with their remote: pull, check the signature, update in
    /// place when nothing new is granted and nothing conflicts
    #[command(after_help = "\
Examples:
  zeroclaw-bundle sync                          (every agent imported from a remote)
  zeroclaw-bundle sync origin/agent/coder --install /srv/zeroclaw
  zeroclaw-bundle sync agent/coder --as coder2  (the remote its import came from)

Signatures are required: by the store's allowed signers (`trust --allowed-signers FILE`), or
--allowed-signers; --allow-unsigned takes unsigned bundles. An update that grants something new
or conflicts with a local edit is held: nothing is written, and its plan and review are printed
with the commands to look closer and apply it. An agent already up to date costs one listing of
its remote and writes nothing. Exit status: 0 every agent up to date or updated, 1 an error (an
agent that could not be synced, another sync of the install running), 3 an update held for new
grants, 4 an update held for conflicts.")]
    Sync(SyncArgs),
    /// Write a snapshot and every object it reaches into one self-verifying pack file
    Pack(PackArgs),
    /// Import a pack into the store, verifying every object before anything becomes visible
    Unpack(UnpackArgs),
    /// Configure remote stores (S3-compatible object storage, or a shared directory)
    #[command(subcommand)]
    Remote(RemoteCommand),
    /// Upload a snapshot to a remote store: one pack of what the remote lacks, then the record
    #[command(after_help = "\
Examples:
  zeroclaw-bundle push agent/researcher origin
  zeroclaw-bundle push 3f2a9c01            (the only remote, or the one named origin)

The remote never lists a snapshot before every object it reaches is there: the pack goes up
first, then its index, then the record.

Credentials (S3) come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_SESSION_TOKEN, AWS_REGION), or, when it holds no access key, from the AWS CLI's files:
profile AWS_PROFILE (else default) in ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE) and
~/.aws/config (AWS_CONFIG_FILE). They are never taken from the command line or stored.")]
    Push(PushArgs),
    /// Download a snapshot from a remote store into this one, verifying every object
    #[command(after_help = "\
Examples:
  zeroclaw-bundle pull origin/3f2a9c01
  zeroclaw-bundle pull origin/agent/researcher    (the newest export of that agent on origin)
  zeroclaw-bundle pull origin/before-upgrade      (a name given with `snapshot --name`)
  zeroclaw-bundle list --remote origin

The same remote refs (NAME/<id|name|agent/alias>) work in `mount`, `diff` (with :PATH) and
`checkout` (which pulls the snapshot first).")]
    Pull(PullArgs),
    /// Show everything an operator must accept before importing a bundle: grants, secrets to
    /// fill, what stayed behind, credential-looking files, scripts, personal files, the diff
    /// against an earlier import; then its content id and how to mount it
    #[command(after_help = "\
Examples:
  zeroclaw-bundle review ./researcher-bundle
  zeroclaw-bundle review researcher.zcpack --install /srv/zeroclaw
  zeroclaw-bundle review origin/agent/researcher
  zeroclaw-bundle review agent/researcher --json

The source is made a snapshot of the store first (a directory is captured as `snapshot --dir`
captures it, a pack unpacked, a remote ref pulled) and the review reads that snapshot only: the
content id printed is exactly what was reviewed, the same for the same bundle from a directory,
a pack or a snapshot. Credential-looking values are named by path, line and reason, never
printed. Exit 0 whenever the review was produced, whatever it found.")]
    Review(ReviewArgs),
    /// Sign a snapshot with an SSH key (OpenSSH sshsig, as `ssh-keygen -Y sign` and git make)
    #[command(after_help = "\
Examples:
  zeroclaw-bundle sign agent/researcher                  (the key git signs with, else ~/.ssh/id_ed25519)
  zeroclaw-bundle sign agent/researcher --key ~/.ssh/release_ed25519
  echo <ID> | ssh-keygen -Y sign -n zeroclaw-bundle@snapshot -f KEY > snap.sig
  zeroclaw-bundle sign <ID> --signature snap.sig        (add a signature made elsewhere)

The signed message is the snapshot's full id and a newline, in the namespace
zeroclaw-bundle@snapshot (never valid as a git, file or login signature). Signatures are kept
beside the snapshot (its id never changes), travel in packs and on remotes, and a snapshot may
carry several (author, reviewer). Who is trusted is an allowed_signers file (git's format):
--allowed-signers FILE on show, list, diff, unpack, pull, checkout and mount, or `trust`.
A passphrase-protected key is asked for on the terminal. A public key (--key KEY.pub, or git's
user.signingkey naming one or holding one) hands the signing to `ssh-keygen -Y sign`, as git
does: the key may then live in ssh-agent, on a security key or in a password manager's agent.")]
    Sign(SignArgs),
    /// Show or set the store's signature settings: the allowed_signers file, and whether
    /// unsigned snapshots are refused by default
    #[command(after_help = "\
Examples:
  zeroclaw-bundle trust                                             (show the settings)
  zeroclaw-bundle trust --allowed-signers ~/.config/zeroclaw/allowed_signers
  zeroclaw-bundle trust --require-signed true

Kept in <store>/trust.toml. With require_signed, unpack, pull, checkout, mount and import refuse a
snapshot that no trusted key signed, before it becomes visible (as --require-signed does).")]
    Trust(TrustSetArgs),
}

/// `--sign` of the commands that make or send a snapshot.
#[derive(Debug, Args)]
pub struct SignFlags {
    /// Sign the snapshot (see `sign`): with --key FILE, else the key git signs with, else
    /// ~/.ssh/id_ed25519
    #[arg(long)]
    pub sign: bool,
    /// The key --sign uses: a private key file, or a public key (ssh-keygen signs, through
    /// ssh-agent)
    #[arg(long, value_name = "FILE", requires = "sign")]
    pub key: Option<PathBuf>,
}

/// Who is trusted, for the commands that print who signed.
#[derive(Debug, Args)]
pub struct SignersArgs {
    /// Check signatures against this allowed_signers file (git's format) instead of the one
    /// set with `trust`
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
}

/// `--identity` of the commands that read a pack file, which may be encrypted.
#[derive(Debug, Args)]
pub struct IdentityArg {
    /// Decrypt an encrypted pack (made with `pack --encrypt-to`) with this age identity file
    /// or SSH private key (default: the key `sign` uses, ~/.ssh/id_ed25519); a passphrase is
    /// asked on the terminal
    #[arg(long, value_name = "FILE")]
    pub identity: Option<PathBuf>,
}

/// `--require-signed` of the commands that make a snapshot visible or usable.
#[derive(Debug, Args)]
pub struct RequireArgs {
    /// Check signatures against this allowed_signers file (git's format) instead of the one
    /// set with `trust`
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Refuse the snapshot unless a key the allowed_signers file trusts signed it (the
    /// default when `trust --require-signed true` is set)
    #[arg(long)]
    pub require_signed: bool,
}

/// `sign`.
#[derive(Debug, Args)]
pub struct SignArgs {
    /// Snapshot to sign: id, 8+ hex digit prefix, name, or agent/<alias>
    pub snapshot: String,
    /// The key to sign with: a private key file, or a public key whose private half ssh-agent
    /// holds (ssh-keygen signs) [default: git's user.signingkey when gpg.format is ssh, else
    /// ~/.ssh/id_ed25519]
    #[arg(long, value_name = "FILE", conflicts_with = "signature")]
    pub key: Option<PathBuf>,
    /// Add this signature, made elsewhere with `ssh-keygen -Y sign -n zeroclaw-bundle@snapshot`
    /// over the id and a newline (- reads stdin), instead of signing
    #[arg(long, value_name = "FILE")]
    pub signature: Option<PathBuf>,
}

/// `trust`.
#[derive(Debug, Args)]
pub struct TrustSetArgs {
    /// The allowed_signers file every command checks signatures against
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Refuse unsigned snapshots by default (true or false)
    #[arg(long, value_name = "BOOL")]
    pub require_signed: Option<bool>,
}

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// List the snapshots of this remote instead of the local store
    #[arg(long, value_name = "NAME")]
    pub remote: Option<String>,
    /// Who signed (with -v)
    #[command(flatten)]
    pub signers: SignersArgs,
}

/// `remote`.
#[derive(Debug, Subcommand)]
pub enum RemoteCommand {
    /// Add a remote: NAME and s3://BUCKET/PREFIX or file:///PATH
    #[command(after_help = "\
Examples:
  zeroclaw-bundle remote add origin s3://fleet-bundles/agents
  zeroclaw-bundle remote add minio s3://bundles --endpoint http://127.0.0.1:9000
  zeroclaw-bundle remote add shared file:///srv/bundles

Remotes are kept in <store>/remotes.toml. Credentials are never taken from the command line
or stored: set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_REGION) in the environment,
or use the AWS CLI's ~/.aws/credentials and ~/.aws/config (profile AWS_PROFILE, else default).")]
    Add(RemoteAddArgs),
    /// Change the recipients of an encrypted remote: add one, or remove one (what is pushed
    /// after a removal is under a new data key the removed recipient cannot read)
    #[command(subcommand)]
    Recipients(RecipientsCommand),
    /// List the configured remotes
    List,
    /// Remove a remote from remotes.toml (the remote's data is not touched)
    Remove(RemoteRemoveArgs),
    /// Remove a snapshot's record from a remote (its data goes at later `remote gc` runs)
    #[command(after_help = "\
Examples:
  zeroclaw-bundle remote forget origin 3f2a9c01
  zeroclaw-bundle remote forget origin agent/researcher")]
    Forget(RemoteForgetArgs),
    /// Delete the packs no snapshot on a remote reaches: marked by one run, deleted by a later
    /// run once the mark is older than the grace period; safe while other hosts push
    #[command(after_help = "\
Example:
  zeroclaw-bundle remote gc origin

No lock is taken: a push never relies on a marked pack and writes its record within 6 hours
of reading the marks, and a mark must be older than the grace period (at least twice that)
before its pack is deleted. See README, remote gc.")]
    Gc(RemoteGcArgs),
}

/// `remote forget`.
#[derive(Debug, Args)]
pub struct RemoteForgetArgs {
    /// The remote's name
    pub name: String,
    /// The snapshot: id, 8+ hex digit prefix, name, or agent/<alias> (newest on the remote)
    pub snapshot: String,
}

/// `remote gc`.
#[derive(Debug, Args)]
pub struct RemoteGcArgs {
    /// The remote's name
    pub name: String,
    /// Delete a marked pack only when its mark is older than this many seconds (at least
    /// twice the push window: 43200)
    #[arg(long, default_value_t = zeroclaw_bundle::REMOTE_GC_GRACE_SECS, value_name = "SECONDS")]
    pub grace: u64,
}

/// `remote remove`.
#[derive(Debug, Args)]
pub struct RemoteRemoveArgs {
    /// The remote's name, as `remote list` shows it
    pub name: String,
}

/// `remote add`.
#[derive(Debug, Args)]
pub struct RemoteAddArgs {
    /// The remote's name (letters, digits, . _ -)
    pub name: String,
    /// s3://BUCKET/PREFIX or file:///PATH
    pub url: String,
    /// An S3-compatible server's endpoint (MinIO, Garage, Ceph RGW): http://HOST:PORT
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Make the (empty) remote encrypted to these recipients (age1..., ssh-ed25519 ...,
    /// ssh-rsa ..., or a file of them): everything pushed is sealed, under keyed names
    #[arg(long, value_name = "RECIPIENT", num_args = 1..)]
    pub encrypt_to: Vec<String>,
    /// The remote is already encrypted (another host ran --encrypt-to): use its key file
    #[arg(long, conflicts_with = "encrypt_to")]
    pub encrypted: bool,
    /// The identity that opens the encrypted remote's key file on this host (default: the
    /// key `sign` uses; ZEROCLAW_BUNDLE_IDENTITY overrides it)
    #[arg(long, value_name = "FILE")]
    pub identity: Option<PathBuf>,
}

/// `remote recipients`.
#[derive(Debug, Subcommand)]
pub enum RecipientsCommand {
    /// Add a recipient to an encrypted remote's key file
    Add(RecipientArgs),
    /// Remove a recipient; pushes from now on use a new data key it cannot read
    Remove(RecipientArgs),
}

/// `remote recipients add|remove`.
#[derive(Debug, Args)]
pub struct RecipientArgs {
    /// The remote's name
    pub name: String,
    /// The recipient (age1..., ssh-ed25519 ..., ssh-rsa ..., or a file holding one)
    pub recipient: String,
}

/// `push`.
#[derive(Debug, Args)]
pub struct PushArgs {
    /// Snapshot to push (full id, 8+ hex digit prefix, name, or agent/<alias>)
    pub snapshot: String,
    /// The remote (default: the only one configured, or the one named origin)
    pub remote: Option<String>,
    /// Sign before pushing
    #[command(flatten)]
    pub sign: SignFlags,
}

/// `pull`.
#[derive(Debug, Args)]
pub struct PullArgs {
    /// NAME/SNAPSHOT: the remote and a snapshot id, a unique prefix of 8+ hex digits, a
    /// snapshot name, or agent/<alias> (the newest snapshot of that agent on the remote)
    #[arg(value_name = "NAME/SNAPSHOT")]
    pub target: String,
    /// Signature checks
    #[command(flatten)]
    pub trust: RequireArgs,
}

/// `pack`.
#[derive(Debug, Args)]
#[command(after_help = "\
A pack is one file that proves its own integrity (every object is named by its blake3, and a
trailer checksums the whole file). It can be mounted and diffed without unpacking.

Examples:
  zeroclaw-bundle pack agent/researcher --out researcher.zcpack
  zeroclaw-bundle pack agent/researcher --since 3f2a9c01 --out update.zcpack
  zeroclaw-bundle pack agent/researcher --trees-only --out digest.zcpack
  zeroclaw-bundle pack agent/researcher --out - | ssh host zeroclaw-bundle unpack -

SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them.")]
pub struct PackArgs {
    /// Snapshot to pack (full id, 8+ hex digit prefix, name, or agent/<alias>)
    pub snapshot: String,
    /// The pack file to write, or - for stdout (a character device or a FIFO, such as
    /// /dev/null or a named pipe, is written to in place, never replaced)
    #[arg(long, short, value_name = "FILE")]
    pub out: PathBuf,
    /// Leave out every object this snapshot reaches (the other side must have it)
    #[arg(long, value_name = "SNAPSHOT")]
    pub since: Option<String>,
    /// Only the snapshot record and its trees: a digest the other side can diff against
    #[arg(long)]
    pub trees_only: bool,
    /// Replace FILE if it exists and is a regular file (nothing else is ever replaced)
    #[arg(long)]
    pub force: bool,
    /// Sign before packing (the pack carries the signatures)
    #[command(flatten)]
    pub sign: SignFlags,
    /// Encrypt the pack to these recipients (age1..., ssh-ed25519 ..., ssh-rsa ..., or a file
    /// of them, one a line): a standard age file, which `age -d -i KEY` also opens
    #[arg(long, value_name = "RECIPIENT", num_args = 1..)]
    pub encrypt_to: Vec<String>,
}

/// `unpack`.
#[derive(Debug, Args)]
#[command(after_help = "\
The whole pack is verified (its trailer checksum, every object against its id) before anything
is written; then every object lands, then the snapshot record, then the catalog entry, so an
interrupted unpack leaves no snapshot that misses objects. A pack made with --since needs its
base snapshot in this store first.

Examples:
  zeroclaw-bundle unpack researcher.zcpack
  ssh host zeroclaw-bundle pack agent/researcher --out - | zeroclaw-bundle unpack -")]
pub struct UnpackArgs {
    /// The pack file, or - for stdin
    pub pack: PathBuf,
    /// Signature checks
    #[command(flatten)]
    pub trust: RequireArgs,
    /// An encrypted pack's identity
    #[command(flatten)]
    pub identity: IdentityArg,
}

/// `diff`.
#[derive(Debug, Args)]
#[command(after_help = "\
Each side is a snapshot, optionally limited to a subtree as SNAPSHOT:PATH; a directory (a
published bundle or any tree: a path that exists as a directory is read as one); a PACK file
(from `pack`; a digest pack made with `pack --trees-only` compares by content id); or a remote
ref NAME/SNAPSHOT[:PATH] (NAME from `remote list`; its trees are fetched, never its file
contents). A directory is hashed with the same descriptor-verified reader as a snapshot, but
nothing is written to the store. For two agent bundles, what the agent may do is compared
first (lines marked ! grant something new).

Examples:
  zeroclaw-bundle diff agent/researcher ./received-bundle
  zeroclaw-bundle diff 3f2a9c01 agent/researcher --stat
  zeroclaw-bundle diff old:workspace new:workspace -p
  zeroclaw-bundle diff agent/researcher ./update.zcpack
  zeroclaw-bundle diff agent/researcher origin/agent/researcher
  zeroclaw-bundle diff agent/researcher ./bundle -q --exit-on-new-grants

-q/--quiet (the global option, before or after the command) prints nothing: the exit code says
whether the sides differ. Two exports of an unchanged agent differ only in the manifest's export
time (`provenance.exported_at`): that alone is not a change (exit 0, a note on stderr) unless
--export-time is given.

SNAPSHOT is one of: a full snapshot id; a unique id prefix of 8 or more hex digits; a name given
with `snapshot --name`; or agent/<alias> (the latest snapshot of that agent, from `export` or
`snapshot <ALIAS>`). `zeroclaw-bundle list` shows them.")]
pub struct DiffArgs {
    /// Side A: SNAPSHOT[:PATH], DIR, PACK or NAME/SNAPSHOT[:PATH] (a remote ref)
    pub a: OsString,
    /// Side B: SNAPSHOT[:PATH], DIR, PACK or NAME/SNAPSHOT[:PATH] (a remote ref)
    pub b: OsString,
    /// Per-file size changes and a summary line
    #[arg(long, conflicts_with = "content")]
    pub stat: bool,
    /// Show a unified diff of changed text files (capped per file)
    #[arg(short = 'p', long = "content")]
    pub content: bool,
    /// Exit 3 when side B grants the agent something side A did not (a new risk flag, skill
    /// bundle or MCP server, a widened allowlist); exit 2 when it cannot tell (a side that is
    /// not a whole agent bundle, or holds no file contents: a digest pack, a remote snapshot)
    #[arg(long)]
    pub exit_on_new_grants: bool,
    /// Report a manifest that differs only in its export time (`provenance.exported_at`),
    /// which is otherwise left out of the changes and the exit status
    #[arg(long)]
    pub export_time: bool,
    /// Who signed each side
    #[command(flatten)]
    pub signers: SignersArgs,
    /// An encrypted pack's identity
    #[command(flatten)]
    pub identity: IdentityArg,
}

/// `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The bundle: a bundle directory, a snapshot, a pack file, or NAME/SNAPSHOT (a remote)
    pub source: OsString,
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = install_help())]
    pub install: Option<PathBuf>,
    /// The imported agent's alias in the install (default: its alias in the bundle,
    /// namespaced when taken)
    #[arg(long = "as", value_name = "ALIAS")]
    pub agent_as: Option<String>,
    /// Point the bundle's references to KIND entry OLD at the local entry NEW instead of
    /// importing OLD (repeatable)
    #[arg(long, value_name = "KIND.OLD=NEW")]
    pub map: Vec<String>,
    /// Print the whole plan (config diff, files, namespacing, backup) and write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Refuse unless the content id is this one (the content id `review` prints, in full or a
    /// prefix of 16+ hex digits; a ref or a snapshot id is refused), even if the source changed
    /// since
    #[arg(long, value_name = "ID")]
    pub expect: Option<String>,
    /// Import without asking (needed in a pipe unless --expect is given)
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Replace a workspace or skill directory that holds exactly the tree this import
    /// publishes there (what an interrupted import of the same bundle leaves)
    #[arg(long)]
    pub force: bool,
    /// Replace the directory PATH, deleting what it holds, where the import publishes a
    /// workspace or skill tree (repeatable; the refusal prints the path to pass)
    #[arg(long, value_name = "PATH")]
    pub replace: Vec<PathBuf>,
    /// Update local agent ALIAS in place with this bundle (it must have been imported from a
    /// bundle of the same agent). Without it, a bundle of an agent imported here before
    /// updates that agent; --as NEW imports it beside it instead
    #[arg(long, value_name = "ALIAS", conflicts_with = "agent_as")]
    pub update: Option<String>,
    /// An Agent Plugin only: give local agent AGENT its skills and MCP servers (its
    /// `skill_bundles` and `mcp_bundles` gain the plugin's; the confirmation shows the grants)
    #[arg(long, value_name = "AGENT")]
    pub attach: Option<String>,
    /// How an update in place settles conflicts and new grants
    #[command(flatten)]
    pub merge: MergeArgs,
    /// Who must have signed the bundle
    #[command(flatten)]
    pub trust: RequireArgs,
    /// An encrypted pack's identity
    #[command(flatten)]
    pub identity: IdentityArg,
}

/// `update`.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The newer bundle: a bundle directory, a snapshot, a pack file, or NAME/SNAPSHOT
    pub source: OsString,
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = install_help())]
    pub install: Option<PathBuf>,
    /// The local agent to update (default: the one imported from a bundle of this agent)
    #[arg(long = "as", value_name = "ALIAS")]
    pub agent_as: Option<String>,
    /// How the three-way merge settles conflicts and new grants
    #[command(flatten)]
    pub merge: MergeArgs,
    /// Print the three-way plan and write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Who must have signed the bundle
    #[command(flatten)]
    pub trust: RequireArgs,
}

/// How an update in place (`update`, or `import` of a newer version of an imported agent)
/// settles what its three-way merge cannot decide alone.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// What to do with a path or key changed differently here and upstream
    #[arg(long, value_name = "POLICY", default_value = "refuse",
          value_parser = ["refuse", "keep-local", "take-incoming", "copy"])]
    pub conflicts: String,
    /// Apply even though the update grants something the version last imported did not
    #[arg(long)]
    pub accept_grants: bool,
    /// Apply even though the update goes back to an older version of an Agent Plugin
    #[arg(long)]
    pub allow_downgrade: bool,
}

impl MergeArgs {
    /// The library's policy for `--conflicts`.
    pub fn policy(&self) -> zeroclaw_bundle::ConflictPolicy {
        use zeroclaw_bundle::ConflictPolicy;
        match self.conflicts.as_str() {
            "keep-local" => ConflictPolicy::KeepLocal,
            "take-incoming" => ConflictPolicy::TakeIncoming,
            "copy" => ConflictPolicy::Copy,
            _ => ConflictPolicy::Refuse,
        }
    }
}

/// `sync`.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The agent to follow: REMOTE/agent/ALIAS, or agent/ALIAS (the remote its import came
    /// from); none: every agent imported from a remote
    pub source: Option<String>,
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = install_help())]
    pub install: Option<PathBuf>,
    /// The local agent to update (when more than one follows the same agent)
    #[arg(long = "as", value_name = "ALIAS")]
    pub agent_as: Option<String>,
    /// Check signatures against this allowed_signers file instead of the store's
    #[arg(long, value_name = "FILE")]
    pub allowed_signers: Option<PathBuf>,
    /// Take bundles that no trusted key signed
    #[arg(long)]
    pub allow_unsigned: bool,
}

/// `rollback`.
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The local agent
    pub alias: String,
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = install_help())]
    pub install: Option<PathBuf>,
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
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", conflicts_with = "dir", help = install_help())]
    pub install: Option<PathBuf>,
    /// Name for the snapshot (usable wherever a snapshot is expected). A name already in use
    /// moves to the new snapshot; the old snapshot stays, reachable by its id
    #[arg(long)]
    pub name: Option<String>,
    /// Internal: the zeroclaw version recorded in the manifest's provenance (for ZeroClaw to
    /// pass once it links this tool; ZeroClaw has no `zeroclaw bundle` subcommand yet)
    #[arg(long, value_name = "VERSION", conflicts_with = "dir", hide = true)]
    pub zeroclaw_version: Option<String>,
    /// Leave out bundle entries matching GLOB (repeatable; bundle paths such as
    /// `workspace/USER.md` or `workspace/**/*.log`); each is listed in the manifest's `dropped`,
    /// and a pattern that matches nothing fails the capture
    #[arg(long, value_name = "GLOB", conflicts_with = "dir")]
    pub exclude: Vec<String>,
    /// Sign the new snapshot
    #[command(flatten)]
    pub sign: SignFlags,
}

/// `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Agent alias to export
    pub alias: String,
    /// Destination bundle directory (created if it does not exist)
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = install_help())]
    pub install: Option<PathBuf>,
    /// Replace the destination when it is a bundle or a previous checkout of this tool
    #[arg(long)]
    pub force: bool,
    /// Replace the destination whatever it holds (implies --force): its files are deleted
    #[arg(long)]
    pub replace_any: bool,
    /// Internal: the zeroclaw version recorded in the manifest's provenance (for ZeroClaw to
    /// pass once it links this tool; ZeroClaw has no `zeroclaw bundle` subcommand yet)
    #[arg(long, value_name = "VERSION", hide = true)]
    pub zeroclaw_version: Option<String>,
    /// Leave out bundle entries matching GLOB (repeatable; bundle paths such as
    /// `workspace/USER.md` or `workspace/**/*.log`); each is listed in the manifest's `dropped`,
    /// and a pattern that matches nothing fails the capture
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Sign the new snapshot
    #[command(flatten)]
    pub sign: SignFlags,
}

/// `export-plugin`.
#[derive(Debug, Args)]
pub struct ExportPluginArgs {
    /// Skill bundle alias to export (`[skill_bundles.<alias>]`)
    pub skill_bundle: String,
    /// Destination plugin directory (created if it does not exist)
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    // ZeroClaw install [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = install_help())]
    pub install: Option<PathBuf>,
    /// The plugin name (default: the alias, lowercased, `_` as `-`)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Replace the destination when it is a plugin this tool wrote or a previous checkout
    #[arg(long)]
    pub force: bool,
    /// Replace the destination whatever it holds (implies --force): its files are deleted
    #[arg(long)]
    pub replace_any: bool,
}

/// `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Snapshot: full id, unique prefix (8+ hex digits), name, or agent/<alias>; a PACK file or
    /// a remote ref NAME/SNAPSHOT (its record, read where it is)
    pub snapshot: String,
    /// Who signed
    #[command(flatten)]
    pub signers: SignersArgs,
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
    /// SNAPSHOT[:PATH] (a directory or a file inside the snapshot); a PACK file or a remote ref
    /// NAME/SNAPSHOT[:PATH] (read where it is)
    pub target: OsString,
    /// List subdirectories too
    #[arg(short, long)]
    pub recursive: bool,
}

/// `cat`.
#[derive(Debug, Args)]
pub struct CatArgs {
    /// SNAPSHOT:PATH (a file inside the snapshot), or NAME/SNAPSHOT:PATH (a remote ref: the
    /// file is fetched and verified)
    pub target: OsString,
}

/// `checkout`.
#[derive(Debug, Args)]
pub struct CheckoutArgs {
    /// Snapshot to publish: id, 8+ hex digit prefix, name, or agent/<alias>; a remote ref
    /// NAME/<id|name|agent/alias> (pulled into this store first, verified); or a PACK file
    /// (unpacked into this store first, verified)
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
    /// Signature checks
    #[command(flatten)]
    pub trust: RequireArgs,
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
    /// SNAPSHOT, PACK or NAME/SNAPSHOT: a snapshot (id, 8+ hex digit prefix, name, or
    /// agent/<alias>); a pack file (served from the pack, no unpacking); or a remote ref
    /// NAME/<id|name|agent/alias> (served in place)
    #[arg(value_name = "SNAPSHOT|PACK|NAME/SNAPSHOT")]
    pub snapshot: String,
    /// An empty directory to mount on
    pub mountpoint: PathBuf,
    /// Return once the mount answers, leaving it served in the background
    #[arg(long)]
    pub daemon: bool,
    /// Let other users see the mount (needs user_allow_other in /etc/fuse.conf unless root)
    #[arg(long)]
    pub allow_other: bool,
    /// Read every file through the mount server, never letting the kernel read large files
    /// straight from the store (FUSE passthrough, on by default where the kernel allows it;
    /// `-v` says which)
    #[arg(long)]
    pub no_passthrough: bool,
    /// Internal: the background half of `--daemon`
    #[arg(long, hide = true)]
    pub daemon_child: bool,
    /// Signature checks
    #[command(flatten)]
    pub trust: RequireArgs,
    /// An encrypted pack's identity
    #[command(flatten)]
    pub identity: IdentityArg,
}

/// `umount`.
#[derive(Debug, Args)]
pub struct UmountArgs {
    /// Where a snapshot is mounted
    pub mountpoint: PathBuf,
}

/// `recover`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["dest", "install"])))]
pub struct RecoverArgs {
    /// The destination of the interrupted publish (`--out` of export or checkout)
    pub dest: Option<PathBuf>,
    /// Finish the updates and rollbacks of this ZeroClaw install that were cut short
    #[arg(long, value_name = "DIR", conflicts_with = "dest")]
    pub install: Option<PathBuf>,
}

/// The command line definition: [`Cli`], with the global options (hidden from every option
/// list, so no subcommand repeats them) listed once in the top-level help and pointed to
/// under each subcommand's.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    // The usage lines show the global options (hidden from the option lists): clap's own
    // usage of each subcommand, from a built copy, with them put after the program name.
    let mut built = cmd.clone();
    built.build();
    let with_globals = |usage: String| {
        let usage = usage.trim_start_matches("Usage: ").to_string();
        match usage.strip_prefix("zeroclaw-bundle ") {
            Some(rest) => format!("zeroclaw-bundle {GLOBAL_USAGE} {rest}"),
            None => usage,
        }
    };
    cmd = cmd.override_usage(format!("zeroclaw-bundle {GLOBAL_USAGE} <COMMAND>"));
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        let usage = built
            .find_subcommand_mut(&name)
            .map(|s| with_globals(s.render_usage().to_string()));
        let nested: Vec<(String, String)> = built
            .find_subcommand_mut(&name)
            .map(|s| {
                let names: Vec<String> = s
                    .get_subcommands()
                    .map(|n| n.get_name().to_string())
                    .collect();
                names
                    .into_iter()
                    .filter_map(|n| {
                        let u = s.find_subcommand_mut(&n)?.render_usage().to_string();
                        Some((n, with_globals(u)))
                    })
                    .collect()
            })
            .unwrap_or_default();
        cmd = cmd.mut_subcommand(&name, |mut sub| {
            let after = sub
                .get_after_help()
                .map(|h| format!("{h}\n\n{GLOBALS}"))
                .unwrap_or_else(|| GLOBALS.to_string());
            if let Some(u) = usage {
                sub = sub.override_usage(u);
            }
            // (The built copy also has clap's generated `help` subcommand: skipped.)
            for (n, u) in nested {
                if sub.find_subcommand(&n).is_some() {
                    sub = sub.mut_subcommand(&n, |s| s.override_usage(u));
                }
            }
            sub.after_help(after)
        });
    }
    cmd
}

/// Parses the process's arguments. A command line that parses is matched against the plain
/// definition ([`Cli::command`]); only one that does not, or that asks for help or the version,
/// is matched again against [`command`], which prints it. The same arguments parse the same
/// way under both: [`command`] changes only usage lines and help text, and rendering those for
/// every subcommand took 0.3 ms of the 1.4 ms of CPU a process needed to start and parse (a
/// daemon mount starts two).
///
/// A daemon mount's command lines (the operator's `mount ... --daemon` and the server's
/// `mount --daemon-child ...`) are read first by `parse_mount`, without clap: building the
/// clap definition of every subcommand took 0.4 ms of CPU in each of the two processes, and
/// from a cold page cache 1.3 ms in the first (its code read from the disk), all of it before
/// the mount could start.
pub fn parse() -> Result<Cli, clap::Error> {
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(cli) = parse_mount(&args, std::env::var_os(STORE_ENV)) {
        return Ok(cli);
    }
    if let Ok(matches) = Cli::command().try_get_matches_from(&args) {
        return Cli::from_arg_matches(&matches);
    }
    let matches = command().try_get_matches_from(&args)?;
    Cli::from_arg_matches(&matches)
}

/// The environment variable `--store` defaults to.
pub const STORE_ENV: &str = "ZEROCLAW_BUNDLE_STORE";

/// A `mount` or `umount` command line read without clap, when it is one clap reads the same
/// way: the global options, the command and its operands (two for `mount`, one for `umount`),
/// and `mount`'s flags (`--daemon`, `--daemon-child`, `--allow-other`, `--no-passthrough`,
/// `--allowed-signers FILE`, `--require-signed`), each at most once, all UTF-8, no operand or value that starts
/// with `-`. Anything else (help, a short-flag cluster, `--`, a repeated or unknown flag, a
/// missing operand, `-q` with `-v`, an empty `$ZEROCLAW_BUNDLE_STORE`) is None, and clap parses
/// it (or says why it cannot). `store_env` is `$ZEROCLAW_BUNDLE_STORE`, read by the caller. A
/// test holds the two parsers equal.
///
pub fn parse_mount(args: &[OsString], store_env: Option<OsString>) -> Option<Cli> {
    /// Sets a flag once; a second time is clap's error to report.
    fn once(flag: &mut bool) -> Option<()> {
        (!std::mem::replace(flag, true)).then_some(())
    }
    /// A value (of `--store` or `--allowed-signers`), set once, not starting with `-`.
    fn value(slot: &mut Option<PathBuf>, value: Option<&str>) -> Option<()> {
        let value = value.filter(|v| !v.is_empty() && !v.starts_with('-'))?;
        slot.replace(PathBuf::from(value)).is_none().then_some(())
    }
    let (mut store, mut allowed_signers) = (None, None);
    let (mut json, mut quiet, mut verbose) = (false, false, false);
    // The command word, once seen: "mount" or "umount".
    let mut command: Option<&str> = None;
    let (mut daemon, mut daemon_child, mut allow_other, mut require_signed) =
        (false, false, false, false);
    let mut no_passthrough = false;
    let mut operands: Vec<&str> = Vec::new();
    let mut words = args.iter().skip(1).map(|w| w.to_str());
    while let Some(word) = words.next() {
        let word = word?;
        let (name, inline) = match word.split_once('=') {
            Some((name, v)) if name.starts_with("--") => (name, Some(v)),
            _ => (word, None),
        };
        if inline.is_some() && !matches!(name, "--store" | "--allowed-signers") {
            return None;
        }
        let mut next_value = || match inline {
            Some(v) => Some(v),
            None => words.next().flatten(),
        };
        match name {
            "--store" => value(&mut store, next_value())?,
            "--json" => once(&mut json)?,
            "-q" | "--quiet" => once(&mut quiet)?,
            "-v" | "--verbose" => once(&mut verbose)?,
            "mount" | "umount" if command.is_none() => command = Some(name),
            "--daemon" if in_mount(command) => once(&mut daemon)?,
            "--daemon-child" if in_mount(command) => once(&mut daemon_child)?,
            "--allow-other" if in_mount(command) => once(&mut allow_other)?,
            "--no-passthrough" if in_mount(command) => once(&mut no_passthrough)?,
            "--require-signed" if in_mount(command) => once(&mut require_signed)?,
            "--allowed-signers" if in_mount(command) => value(&mut allowed_signers, next_value())?,
            _ if word.is_empty() || word.starts_with('-') || command.is_none() => return None,
            _ => operands.push(word),
        }
    }
    if quiet && verbose {
        return None;
    }
    // Without --store, a set variable is the value, as clap takes it; an empty one is clap's
    // to judge.
    match store_env {
        Some(env) if store.is_none() && env.is_empty() => return None,
        Some(env) if store.is_none() => store = Some(PathBuf::from(env)),
        _ => {}
    }
    let command = match (command, &operands[..]) {
        (Some("mount"), [snapshot, mountpoint]) => Command::Mount(MountArgs {
            snapshot: snapshot.to_string(),
            mountpoint: PathBuf::from(mountpoint),
            daemon,
            allow_other,
            no_passthrough,
            daemon_child,
            trust: RequireArgs {
                allowed_signers,
                require_signed,
            },
            // `--identity` is clap's to read (an unknown flag here).
            identity: IdentityArg { identity: None },
        }),
        (Some("umount"), [mountpoint]) => Command::Umount(UmountArgs {
            mountpoint: PathBuf::from(mountpoint),
        }),
        _ => return None,
    };
    Some(Cli {
        store,
        json,
        quiet,
        verbose,
        command,
    })
}

/// Whether the command word [`parse_mount`] saw is `mount` (whose flags it reads).
fn in_mount(command: Option<&str>) -> bool {
    command == Some("mount")
}

/// `review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// What to review: a bundle DIR, a SNAPSHOT of the store, a PACK file, or NAME/SNAPSHOT (a
    /// remote ref)
    pub source: OsString,
    // ZeroClaw install to compare with [default: INSTALL_DEFAULT]
    #[arg(long, value_name = "DIR", help = format!(
        "ZeroClaw install to compare with: an agent it imported from an earlier version of this \
         bundle is diffed [default: {}]",
        zeroclaw_bundle::INSTALL_DEFAULT
    ))]
    pub install: Option<PathBuf>,
    /// Who signed
    #[command(flatten)]
    pub signers: SignersArgs,
    /// An encrypted pack's identity
    #[command(flatten)]
    pub identity: IdentityArg,
}

/// The help of `--install` ([`zeroclaw_bundle::INSTALL_DEFAULT`] is its default, in the words
/// every "no install" error uses too).
fn install_help() -> String {
    format!(
        "ZeroClaw install [default: {}]",
        zeroclaw_bundle::INSTALL_DEFAULT
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<OsString> {
        std::iter::once("zeroclaw-bundle")
            .chain(line.split(' ').filter(|w| !w.is_empty()))
            .map(OsString::from)
            .collect()
    }

    /// What clap makes of `args` (ignoring `$ZEROCLAW_BUNDLE_STORE`, which these lines never
    /// leave to the environment: each names `--store` or is compared with no variable set).
    fn by_clap(args: &[OsString]) -> Option<String> {
        let matches = Cli::command().try_get_matches_from(args).ok()?;
        Some(format!("{:?}", Cli::from_arg_matches(&matches).ok()?))
    }

    #[test]
    fn the_mount_parser_reads_what_clap_reads_and_declines_the_rest() {
        let id = "dc42a97a4997e187ebc7f171be1bb509151f1ec944b19d1805587243af479b4e";
        let read_alike = [
            format!("--store /s mount {id} /m --daemon"),
            format!("--store=/s mount {id} /m --daemon"),
            format!("mount {id} /m --daemon --store /s"),
            format!("--store /s --verbose mount --daemon-child {id} /m --allow-other --allowed-signers /a --require-signed"),
            format!("--store /s -q --json mount --daemon {id} m"),
            format!("--store /s mount {id} m -v --allowed-signers=/a"),
            format!("--store /s -v mount {id} /m --no-passthrough --daemon"),
            "--store /s mount agent/researcher ./review".to_string(),
            "--store /s mount ./x.zcpack mount".to_string(),
            "--store /s mount mount m".to_string(),
            "--store /s mount remote/abc m --daemon".to_string(),
            "--store /s mount a=b c=d".to_string(),
            "--store /s umount /m".to_string(),
            "umount m --json --store=/s".to_string(),
            "--store /s -q umount mount".to_string(),
            "--store /s mount umount m".to_string(),
        ];
        for line in &read_alike {
            let args = words(line);
            let fast = parse_mount(&args, None).map(|cli| format!("{cli:?}"));
            assert!(fast.is_some(), "declined: {line}");
            assert_eq!(fast, by_clap(&args), "{line}");
        }
        // Each is clap's: an error clap must report, or a form this parser leaves to it.
        let declined = [
            format!("--store /s mount {id} /m --daemon --daemon"),
            format!("--store /s --store /t mount {id} /m"),
            format!("--store /s mount {id} /m -q -v"),
            format!("--store /s mount {id}"),
            format!("--store /s mount {id} /m /n"),
            format!("--store /s mount {id} /m --bogus"),
            format!("--store /s mount {id} /m -qv"),
            format!("--store /s mount {id} -- /m"),
            format!("--store /s mount {id} /m --help"),
            format!("--store /s mount {id} /m --daemon=yes"),
            format!("--store /s mount {id} /m --no-passthrough --no-passthrough"),
            format!("--store /s mount {id} /m --no-passthrough=yes"),
            format!("--store /s mount {id} /m --allowed-signers"),
            format!("--store /s mount {id} /m --allowed-signers --daemon"),
            format!("--store= mount {id} /m"),
            format!("--store /s list {id}"),
            format!("--store /s {id} mount /m"),
            "--store /s umount /m /n".to_string(),
            "--store /s umount".to_string(),
            "--store /s umount /m --daemon".to_string(),
            "--store /s umount mount /m".to_string(),
            "--store /s umount /m --help".to_string(),
            "--version".to_string(),
            String::new(),
        ];
        for line in &declined {
            assert!(parse_mount(&words(line), None).is_none(), "read: {line}");
        }
        // Clap refuses the ones it must; the rest it reads (and the parser only declined).
        for line in &declined[..5] {
            assert!(by_clap(&words(line)).is_none(), "clap read: {line}");
        }
    }

    #[test]
    fn the_mount_parser_takes_the_store_from_the_environment_as_clap_does() {
        let args = words("mount abc /m --daemon");
        let cli = parse_mount(&args, Some("/from/env".into())).expect("read");
        assert_eq!(cli.store, Some(PathBuf::from("/from/env")));
        let cli = parse_mount(&words("--store /s mount abc /m"), Some("/env".into())).unwrap();
        assert_eq!(cli.store, Some(PathBuf::from("/s")));
        assert!(parse_mount(&args, Some(OsString::new())).is_none());
        assert_eq!(parse_mount(&args, None).unwrap().store, None);
    }

    #[test]
    fn the_mount_parser_declines_an_argument_that_is_not_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let mut args = words("--store /s mount abc");
        args.push(OsString::from_vec(vec![b'm', 0xff]));
        assert!(parse_mount(&args, None).is_none());
    }
}
