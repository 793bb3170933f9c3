//! `mount SNAPSHOT MOUNTPOINT [--daemon]` and `umount MOUNTPOINT`.
//!
//! An update pack (`pack --since`) mounts only over a store that holds its base: without it,
//! the mount is refused naming the base (it would serve a tree of EIO).
//!
//! The foreground mount serves until unmounted or interrupted: SIGINT/SIGTERM unmount cleanly
//! and exit 0 (a busy mount stays up and says so). `--daemon` re-executes this binary in a
//! new session as the server, waits until it reports that the mount answers (a line on a
//! pipe), and returns; interrupted while it waits, it stops the server (which unmounts what
//! it mounted, detached if something holds it: nobody was told of it) and exits 130, killing
//! a server that does not stop within 5 s and removing its stale mount. The catalog is only
//! opened to resolve the snapshot, and not at all for a full snapshot id with a tree index
//! (`Catalog::resolve_indexed`); while mounted, a store lease tells `gc` to keep everything the
//! mount serves. A store snapshot whose root has
//! an expansion record is not walked before the mount answers (the store's `expansion_record`
//! says why that is sound); a pack file and a remote snapshot always are.
//!

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use serde_json::json;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use zeroclaw_bundle_mount::{check_mountpoint, mount, unmount, MountError, MountOptions};
use zeroclaw_bundle_store::{
    ObjectId, ObjectSource, PackOverStore, PackReader, Snapshot, SnapshotSource, Store,
};

use crate::cli::{MountArgs, UmountArgs};
use crate::cmd::{Ctx, Outcome};
use zeroclaw_bundle::remote::{Remote, RemoteSpec, RemoteView};
use zeroclaw_bundle::sign::Trust;
use zeroclaw_bundle::source::{classify, Reference, Takes, Target};

/// The largest tree index a mount reads whole; a larger one is read tree by tree (positioned
/// reads) and never held. A mount that walks every tree before it answers (the expansion
/// check, when the store has no record of the root's expansion) reads it from memory: one
/// read for the 1.4 MB index of the 20,000-file corpus instead of 2,300 small ones. Holding
/// the 18 MB index of the 300,000-file scale tree for the mount's life took the daemon's
/// memory right after mounting from 25 MB to 48 MB.
const INDEX_IN_MEMORY: u64 = 4 << 20;

/// How long after a mount answers (and is reported) its tree index is read whole, when it was
/// not read before answering. Whatever a person or a script runs first on a fresh mount
/// starts its own programs from the same disk; read at once, the index (1.4 MB for the
/// 20,000-file corpus) queued before those reads: from a cold cache, `mount --daemon` then a
/// poll with `mountpoint -q` took 16.9 ms instead of 15.6 (21 alternating rounds;
/// squashfuse_ll 15.6). Until it is read, listings read their trees from the index file.
const INDEX_READ_DELAY: Duration = Duration::from_millis(100);

/// The line the daemon child prints on its stdout once the mount answers.
const READY: &str = "zeroclaw-bundle-mount-ready";
/// The prefix of a line the daemon child prints before [`READY`] with `-v`: what the mount
/// asked of its remote so far, for the parent to say (the child's stderr is gone by then).
const TRAFFIC: &str = "zeroclaw-bundle-mount-traffic";

/// Runs `mount`.
pub fn run(args: MountArgs, ctx: &Ctx) -> Result<Outcome> {
    serve::<Full>(args, ctx)
}

/// What a mount asks that the two binaries answer differently. [`serve`] is built once for
/// each, so the front binary links only [`Front`]'s answers: nothing of the remote stack, the
/// catalog (sled), signature checks (ssh-key and its curves) or TOML, which made up about a
/// third of its code. From a cold cache the kernel reads a binary whole when it starts (this
/// VM reads 8 MiB ahead), so every megabyte it does not hold is time a cold mount saves.
trait Binary {
    /// The trust the mount checks against (`--allowed-signers`, `--require-signed`, the
    /// store's `trust.toml`).
    fn trust(store_root: &Path, args: &MountArgs) -> Result<Trust>;
    /// What the argument names (`zeroclaw_bundle::source`, the grammar every verb reads).
    fn classify(store_root: &Path, arg: &str) -> Result<Reference>;
    /// The snapshot of the store a reference names.
    fn resolve(store: &Store, reference: &Reference) -> Result<ObjectId>;
    /// Opens a remote snapshot ref.
    fn open_remote(
        args: &MountArgs,
        ctx: &Ctx,
        store: &Store,
        spec: RemoteSpec,
        reference: String,
        trust: &Trust,
    ) -> Result<RemoteServed>;
    /// The `--require-signed` gate over the signatures the store keeps for `id`, then who
    /// signed it, as shown at the mount's root.
    fn stored_signatures(ctx: &Ctx, store: &Store, id: &ObjectId, trust: &Trust) -> Result<String>;
    /// The same over signatures from a pack.
    fn carried_signatures(
        ctx: &Ctx,
        id: &ObjectId,
        sigs: &[Vec<u8>],
        trust: &Trust,
    ) -> Result<String>;
    /// Whatever must come before a pack file is checked whole (read through once).
    fn before_pack_check(_pack: &PackReader) -> Result<()> {
        Ok(())
    }
}

/// The full binary: everything.
struct Full;

impl Binary for Full {
    fn trust(store_root: &Path, args: &MountArgs) -> Result<Trust> {
        super::sign::trust_of_args(store_root, &args.trust).map(|t| super::sign::old(&t))
    }

    fn classify(store_root: &Path, arg: &str) -> Result<Reference> {
        Ok(classify(store_root, OsStr::new(arg), Takes::MOUNT)?)
    }

    fn resolve(store: &Store, reference: &Reference) -> Result<ObjectId> {
        Ok(reference.stored_id(store)?)
    }

    /// Served in place: trees from the remote's trees pack, file contents fetched (ranged,
    /// verified) when read.
    fn open_remote(
        args: &MountArgs,
        ctx: &Ctx,
        store: &Store,
        spec: RemoteSpec,
        reference: String,
        trust: &Trust,
    ) -> Result<RemoteServed> {
        let note_ctx = Ctx {
            quiet: ctx.quiet || args.daemon_child,
            ..ctx.clone()
        };
        let remote = Remote::open(&spec, false)?;
        let id = remote.resolve(&reference);
        if !args.daemon_child {
            for line in remote.notices() {
                if !ctx.quiet {
                    crate::note!("notice: {line}");
                }
            }
        }
        let id = id?;
        let sigs = remote.signatures(&id)?;
        super::sign::gate_blobs(&note_ctx, &id, &sigs, trust)?;
        let root_note = super::sign::signed_by_blobs(&id, &sigs, trust)?.0;
        let view = Arc::new(
            RemoteView::open(remote, id, store.objects().tmp_dir(), true)
                .with_context(|| format!("could not open {}/{}", spec.name, id.short(12)))?,
        );
        if !view.has_trees_pack() && !ctx.quiet && !args.daemon_child {
            crate::note!(
                "note: {}/{} has no trees pack (pushed by an older build): \
                 directories are fetched one by one",
                spec.name,
                id.short(12)
            );
        }
        let snap = view.snapshot().clone();
        let traffic = {
            let view = Arc::clone(&view);
            Box::new(move || {
                let remote = view.remote();
                format!("remote {}: {}", remote.name(), remote.traffic())
            })
        };
        Ok(RemoteServed {
            source: view,
            id,
            snap,
            root_note,
            traffic,
        })
    }

    fn stored_signatures(ctx: &Ctx, store: &Store, id: &ObjectId, trust: &Trust) -> Result<String> {
        super::sign::gate(ctx, store, id, trust)?;
        Ok(super::sign::signed_by(store, id, trust)?.0)
    }

    fn carried_signatures(
        ctx: &Ctx,
        id: &ObjectId,
        sigs: &[Vec<u8>],
        trust: &Trust,
    ) -> Result<String> {
        super::sign::gate_blobs(ctx, id, sigs, trust)?;
        Ok(super::sign::signed_by_blobs(id, sigs, trust)?.0)
    }
}

/// What a mount of a remote snapshot ref serves, from [`Binary::open_remote`]. Only trait objects, so
/// that holding and dropping one links nothing of the remote stack.
struct RemoteServed {
    source: Arc<dyn ObjectSource>,
    id: ObjectId,
    snap: Snapshot,
    /// Who signed it, shown at the mount's root.
    root_note: String,
    /// "remote NAME: what was asked of it", said with `-v`.
    traffic: Box<dyn Fn() -> String + Send + Sync>,
}

/// Runs `mount`, with what `B` links.
fn serve<B: Binary>(args: MountArgs, ctx: &Ctx) -> Result<Outcome> {
    if args.daemon {
        return spawn_daemon(&args, ctx);
    }
    // A pack file is served from the pack itself (each object verified as it is read); a
    // snapshot from the store, with a lease that keeps `gc` off what the mount serves.
    // A remote snapshot ref (`NAME/SNAPSHOT`, NAME a configured remote): `B::open_remote`.
    let mut traffic: Option<Box<dyn Fn() -> String + Send + Sync>> = None;
    // Who signed is shown at the mount's root (an xattr) and on stderr; `--require-signed`
    // refuses an unsigned or untrusted snapshot before anything is mounted.
    let trust = B::trust(&ctx.store_path, &args)?;
    let note_ctx = Ctx {
        quiet: ctx.quiet || args.daemon_child,
        ..ctx.clone()
    };
    let root_note: String;
    let mut known_expansion = None;
    // A store snapshot mounted without its walk: its index is read whole once it answers.
    let mut index_after_answering: Option<Arc<SnapshotSource>> = None;
    let reference = B::classify(&ctx.store_path, &args.snapshot)?;
    let pack_given_as = match &reference.target {
        Target::Pack { file, .. } => Some(file),
        _ => None,
    };
    let (source, id, snap, lease): (Arc<dyn ObjectSource>, _, _, _) =
        if let Some(file) = pack_given_as {
            let pack = PackReader::open(file)?;
            B::before_pack_check(&pack)?;
            // Checked whole before anything is served, as `unpack` checks it.
            pack.check_trailer()?;
            let snap = pack.snapshot()?;
            let id = pack.root;
            root_note = B::carried_signatures(&note_ctx, &id, &pack.signatures()?, &trust)?;
            // An incremental pack serves what it does not carry from this store, when the
            // store holds its base. Without the base, every directory and file it does not
            // carry would answer EIO: refused here, naming the base, before anything mounts.
            let existing = ctx.existing_store()?;
            let source = PackOverStore::new(pack, existing.as_ref().map(|s| s.objects()));
            if let (Some(base), false) = (source.pack().base, source.layered()) {
                bail!(
                    "refusing to mount {}: it is an update (`pack --since`) on snapshot {}, \
                     which the store at {} does not hold, so what the update does not carry \
                     could not be read; unpack or pull snapshot {} first, or mount a full pack",
                    args.snapshot,
                    base.short(12),
                    ctx.store_path.display(),
                    base.to_hex()
                );
            }
            let source: Arc<dyn ObjectSource> = Arc::new(source);
            (source, id, snap, None)
        } else {
            let store = ctx.store()?;
            match &reference.target {
                Target::Remote {
                    spec,
                    reference: on_remote,
                    ..
                } => {
                    let (spec, on_remote) = (spec.clone(), on_remote.clone());
                    let served = B::open_remote(&args, ctx, &store, spec, on_remote, &trust)?;
                    root_note = served.root_note;
                    traffic = Some(served.traffic);
                    (served.source, served.id, served.snap, None)
                }
                _ => {
                    // A full id with a tree index skips the catalog (sled's open was the
                    // largest part of a mount's start).
                    let id = B::resolve(&store, &reference)?;
                    root_note = B::stored_signatures(&note_ctx, &store, &id, &trust)?;
                    let snap = store.objects().read_snapshot(&id)?;
                    let lease = store.maintenance().lease(&id, &snap.root)?;
                    // Listings come from the snapshot's tree index (one file) when it has one.
                    // With the root's expansion recorded, nothing walks every tree before
                    // the mount answers: the index is opened for positioned reads (its
                    // header and entries) and read whole once the mount answers.
                    known_expansion = store.index().recorded_expansion(&snap.root);
                    let source = Arc::new(match known_expansion {
                        // Only the root is read before answering (off the index's first
                        // page); the rest of the index once the mount answers.
                        Some(_) => store.index().snapshot_source_answering(&id),
                        None => store.index().snapshot_source_within(&id, INDEX_IN_MEMORY),
                    });
                    if known_expansion.is_some() {
                        index_after_answering = Some(Arc::clone(&source));
                    }
                    (source, id, snap, Some(lease))
                }
            }
        };
    // `mount` checks the mountpoint itself (empty directory, not mounted, FUSE usable); one
    // that cannot even be resolved is reported as that check words it.
    if let Err(e) =
        zeroclaw_bundle::api::refuse_mountpoint_in_store(&args.mountpoint, &ctx.store_path)
    {
        check_mountpoint(&args.mountpoint)?;
        return Err(e);
    }
    let options = MountOptions {
        label: id.short(12),
        allow_other: args.allow_other,
        time: UNIX_EPOCH + Duration::from_nanos(u64::try_from(snap.created_unix_ns).unwrap_or(0)),
        root_note: Some(root_note.clone()),
        known_expansion,
        ..MountOptions::default()
    };
    if args.daemon_child {
        // Where a test interrupts the waiting parent (no-op in normal builds).
        zeroclaw_bundle::hooks::seam(
            "mount-daemon-before-mounting",
            &args.mountpoint.to_string_lossy(),
        );
    }
    let signals = Signals::new([SIGINT, SIGTERM]).context("could not install signal handlers")?;
    let mut handle = mount(source, snap.root, &args.mountpoint, &options)
        .with_context(|| format!("could not mount snapshot {}", id.short(12)))?;
    if let Some(lease) = lease {
        handle.keep_lease(lease);
    }
    let unmounter = handle.unmounter();
    let handler = signals.handle();
    let daemon_child = args.daemon_child;
    // Set once the waiting parent was told the mount answers: before that, nobody knows of the
    // mount, so a signal (the parent stopping this server) takes it down even while in use.
    let reported = Arc::new(AtomicBool::new(false));
    let told = Arc::clone(&reported);
    std::thread::spawn(move || {
        let mut signals = signals;
        for _ in signals.forever() {
            match unmounter.unmount() {
                Ok(()) => break,
                Err(_) if daemon_child && !told.load(Ordering::SeqCst) => {
                    if unmounter.detach().is_ok() {
                        break;
                    }
                }
                Err(MountError::Busy(_)) if !daemon_child => {
                    crate::note!("the mount is busy (a file or directory in it is open); close it and interrupt again");
                }
                Err(_) => {}
            }
        }
    });
    if args.daemon_child {
        // Tell the waiting parent, then stop talking: it closes the pipe after this line.
        let mut out = std::io::stdout().lock();
        if let (Some(traffic), true) = (&traffic, ctx.verbose) {
            let _ = writeln!(out, "{TRAFFIC} {}", traffic());
        }
        reported.store(true, Ordering::SeqCst);
        let _ = writeln!(out, "{READY} {} {id}", std::process::id());
        let _ = out.flush();
        drop(out);
        zeroclaw_bundle::sys::detach_stdio().context("could not detach from the terminal")?;
    } else if ctx.json {
        ctx.print_json(&json!({
            "snapshot": id,
            "mountpoint": crate::cmd::host_path(&args.mountpoint),
            "pid": std::process::id(),
        }))?;
    } else if !ctx.quiet {
        crate::note!(
            "serving snapshot {} read-only at {} (Ctrl-C or `zeroclaw-bundle umount {}` to stop)",
            id.short(12),
            args.mountpoint.display(),
            args.mountpoint.display()
        );
    }
    if let Some(source) = index_after_answering {
        // Answering and reported: the index is read whole off the answering path, so that a
        // walk of the mount (or a cold `find` after the page cache was dropped) reads no tree
        // from the disk, as when the mount read it before answering. A moment later, not at
        // once: see INDEX_READ_DELAY.
        std::thread::spawn(move || {
            std::thread::sleep(INDEX_READ_DELAY);
            source.hold_index_in_memory(INDEX_IN_MEMORY)
        });
    }
    let ended = handle.wait();
    handler.close();
    if let (Some(traffic), true) = (&traffic, ctx.verbose) {
        crate::note!("{}", traffic());
    }
    ended.context("the mount ended with an error")?;
    Ok(Outcome::Success)
}

/// Starts the server in a new session and returns once it reports the mount answering.
fn spawn_daemon(args: &MountArgs, ctx: &Ctx) -> Result<Outcome> {
    let exe = std::env::current_exe().context("could not find this executable to re-run it")?;
    let mut cmd = Command::new(exe);
    // Values joined to their options and, when an operand starts with `-`, the operands after
    // `--`: a store, signers file or mountpoint named `-x` is read as a value, not an option.
    cmd.arg(joined("--store=", &ctx.store_path));
    if ctx.verbose {
        cmd.arg("--verbose");
    }
    cmd.args(["mount", "--daemon-child"]);
    if args.allow_other {
        cmd.arg("--allow-other");
    }
    // The server checks the signatures (and refuses) as a foreground mount does.
    if let Some(file) = &args.trust.allowed_signers {
        cmd.arg(joined("--allowed-signers=", file));
    }
    if args.trust.require_signed {
        cmd.arg("--require-signed");
    }
    let snapshot: std::ffi::OsString = match Path::new(&args.snapshot) {
        p if p.is_file() => std::path::absolute(p)
            .map(|p| p.into_os_string())
            .unwrap_or_else(|_| args.snapshot.clone().into()),
        _ => args.snapshot.clone().into(),
    };
    let dash = |word: &std::ffi::OsStr| word.as_encoded_bytes().starts_with(b"-");
    if dash(&snapshot) || dash(args.mountpoint.as_os_str()) {
        cmd.arg("--");
    }
    cmd.arg(snapshot).arg(&args.mountpoint);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Interrupted while it waits (Ctrl-C, SIGTERM), the server is stopped too: no mount is
    // left that nobody was told about (a mounted server unmounts on SIGTERM). Watched from
    // before the server starts: a signal in between would have ended this process alone.
    let signals = Signals::new([SIGINT, SIGTERM]).context("could not install signal handlers")?;
    let mut child = cmd.spawn().context("could not start the mount server")?;
    // After the spawn (which returns once the server's `exec` succeeded), not before: a
    // warm-up started first held up the spawn itself by two milliseconds (traced: the new
    // process waited in the kernel before its first instruction). Before the watcher's thread
    // is started: a signal meanwhile waits in `signals` for it.
    warm_for_server(args, ctx);
    let watching = signals.handle();
    let server = rustix::process::Pid::from_child(&child);
    let cancel = ctx.cancel.clone();
    let watcher = std::thread::spawn(move || {
        let mut signals = signals;
        if signals.forever().next().is_some() {
            cancel.cancel();
            let _ = rustix::process::kill_process(server, rustix::process::Signal::TERM);
        }
    });
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        stdout
            .read_line(&mut line)
            .context("could not read from the mount server")?;
        match line.trim_end().strip_prefix(TRAFFIC) {
            // With -v: what the mount fetched from its remote before it answered.
            Some(traffic) => crate::note!("{}", traffic.trim_start()),
            None => break,
        }
    }
    // The server answered or ended. A signal that came first (even just before its line)
    // stopped it: the mount is not reported.
    watching.close();
    let _ = watcher.join();
    if ctx.cancel.is_cancelled() {
        let stopped = wait_or_kill(&mut child, SERVER_STOP_WAIT);
        let killed = if stopped {
            ""
        } else {
            // Killed, its mount (if it mounted) is stale: removed, as `umount` would.
            let _ = unmount(&args.mountpoint);
            " (it did not stop in time, so it was killed and its mount removed)"
        };
        bail!(
            "interrupted: the mount server was stopped before {} was reported mounted{killed}",
            args.mountpoint.display()
        );
    }
    if let Some(ready) = line.trim().strip_prefix(READY) {
        drop(child.stderr.take());
        let mut words = ready.split_whitespace();
        let pid = words.next().unwrap_or_default().to_string();
        let id = words.next().unwrap_or_default();
        if ctx.json {
            ctx.print_json(&json!({
                "snapshot": id,
                "mountpoint": crate::cmd::host_path(&args.mountpoint),
                "pid": pid.parse::<u32>().ok(),
            }))?;
        } else if !ctx.quiet {
            crate::note!(
                "mounted at {} (server pid {pid}); `zeroclaw-bundle umount {}` to stop",
                args.mountpoint.display(),
                args.mountpoint.display()
            );
        }
        return Ok(Outcome::Success);
    }
    let out = child
        .wait_with_output()
        .context("could not wait for the mount server")?;
    let msg = String::from_utf8_lossy(&out.stderr);
    let msg = msg.trim().trim_start_matches("error: ");
    if msg.is_empty() {
        bail!(
            "the mount server exited ({}) before the mount answered",
            out.status
        );
    }
    bail!("{msg}");
}

/// While the server starts, reads what it reads first from the store
/// (`zeroclaw_bundle_store::warm_for_mount`: read-only, errors ignored), so that from a cold
/// cache it finds those files in memory; and looks up the store's `trust.toml` and, in the
/// mountpoint, a name it does not hold (the lookup reads the directory's blocks, which the
/// server's emptiness check reads again; nothing in the mountpoint is opened, so the fresh
/// mount is never held busy, and a lookup that comes after the mount is an answered ENOENT).
/// Only for a full snapshot id or an id prefix the records resolve without the catalog
/// (`warm_for_mount_ref`): a name is resolved through the catalog, which is the server's to
/// open. The store is read on the calling thread, which has nothing else to do until the
/// server reports; the mountpoint, a chain of lookups of its own, on a second thread.
fn warm_for_server(args: &MountArgs, ctx: &Ctx) {
    let probe = args.mountpoint.join(zeroclaw_bundle_store::WARM_PROBE_NAME);
    let mountpoint = std::thread::spawn(move || {
        let _ = std::fs::symlink_metadata(probe);
    });
    zeroclaw_bundle_store::warm_for_mount_ref(&ctx.store_path, &args.snapshot);
    let _ = std::fs::symlink_metadata(zeroclaw_bundle::sign::config::file_of(&ctx.store_path));
    let _ = mountpoint.join();
}

/// `option` (ending in `=`) and `value` as one argument.
fn joined(option: &str, value: &Path) -> std::ffi::OsString {
    let mut word = std::ffi::OsString::from(option);
    word.push(value);
    word
}

/// How long an interrupted `mount --daemon` waits for the server it stopped.
const SERVER_STOP_WAIT: Duration = Duration::from_secs(5);

/// Waits up to `wait` for `child` to end; past that, kills it (SIGKILL) and reaps it. Whether
/// it ended by itself.
fn wait_or_kill(child: &mut std::process::Child, wait: Duration) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < wait {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Runs `umount`. It needs no store (nor a place for one): `json` is `--json`.
pub fn run_umount(args: &UmountArgs, json: bool) -> Result<Outcome> {
    if let Err(e) = std::fs::symlink_metadata(&args.mountpoint) {
        if e.kind() == std::io::ErrorKind::NotFound {
            bail!(
                "could not unmount {}: it does not exist",
                args.mountpoint.display()
            );
        }
    }
    unmount(&args.mountpoint)
        .with_context(|| format!("could not unmount {}", args.mountpoint.display()))?;
    if json {
        let out = json!({ "mountpoint": crate::cmd::host_path(&args.mountpoint) });
        crate::outln!("{}", crate::cmd::json::pretty(&out)?)?;
    }
    Ok(Outcome::Success)
}
