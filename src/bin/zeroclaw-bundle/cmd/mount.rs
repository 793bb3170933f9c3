//! `mount SNAPSHOT|PACK|NAME|agent/ALIAS|REMOTE/REF MOUNTPOINT [--daemon]` and `umount
//! MOUNTPOINT`. What is mounted, the trust policy, the store's lease and what is read before
//! the mount answers are the library's ([`Bundles::prepare_mount_at`]); this file parses,
//! prints, daemonizes and maps signals.
//!
//! With `-v` the mount says which path its reads take (FUSE passthrough on, or off and why:
//! the library's [`Passthrough::note`]) and, for a remote, what it fetched; `--daemon`'s
//! server passes those lines to the waiting parent, which prints them.
//!
//! The foreground mount serves until unmounted or interrupted: SIGINT/SIGTERM unmount cleanly
//! and exit 0 (a busy mount stays up and says so). `--daemon` re-executes this binary in a
//! new session as the server, waits until it reports that the mount answers (a line on a
//! pipe), and returns; interrupted while it waits, it stops the server (which unmounts what
//! it mounted, detached if something holds it: nobody was told of it) and exits 130, killing
//! a server that does not stop within 5 s and removing its stale mount.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use zeroclaw_bundle::{
    Bundles, MountError, MountNote, MountReport, MountRequest, ObjectId, Passthrough,
};

use crate::cli::{MountArgs, UmountArgs};
use crate::cmd::{Ctx, Outcome};

/// The line the daemon child prints on its stdout once the mount answers.
const READY: &str = "zeroclaw-bundle-mount-ready";
/// The prefix of a line the daemon child prints before [`READY`] with `-v`, for the parent to
/// say (the child's stderr is gone by then): which path reads take, what the mount asked of
/// its remote so far.
const VERBOSE: &str = "zeroclaw-bundle-mount-verbose";

/// Runs `mount`.
pub fn run(mut args: MountArgs, ctx: &Ctx) -> Result<Outcome> {
    if args.daemon {
        return spawn_daemon(&args, ctx);
    }
    // An encrypted pack is decrypted whole (authenticated) into a private copy, kept until
    // the mount ends.
    let mut decrypting = super::crypt::Decrypting::new(args.identity.identity.as_deref());
    args.snapshot = decrypting.arg_string(&args.snapshot)?;
    // The server of `--daemon` says nothing on the way (its stderr reaches the operator only
    // when it fails), but what concerns the allowed signers.
    let quiet = ctx.quiet || args.daemon_child;
    let notes = |note: MountNote| {
        let said = match &note {
            MountNote::Trust(_) => true,
            MountNote::Signed { .. } => !quiet && !ctx.json,
            _ => !quiet,
        };
        if said {
            crate::note!("{note}");
        }
    };
    let mut request = MountRequest::new(&args.snapshot, &args.mountpoint);
    request.options.allow_other = args.allow_other;
    if args.no_passthrough {
        request.options.passthrough = Passthrough::Off("turned off (--no-passthrough)".into());
    }
    request.allowed_signers = args.trust.allowed_signers.as_deref();
    request.require_signed = args.trust.require_signed;
    request.notes = &notes;
    let prepared = Bundles::prepare_mount_at(&ctx.store_path, &request)?;
    let signals = Signals::new([SIGINT, SIGTERM]).context("could not install signal handlers")?;
    let mounted = prepared.mount()?;
    let unmounter = mounted.unmounter();
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
    let traffic = mounted.traffic();
    // With -v: which path reads take, settled by now (the kernel's handshake is answered).
    let read_path = mounted.passthrough().note();
    if args.daemon_child {
        // Tell the waiting parent, then stop talking: it closes the pipe after this line.
        let mut out = std::io::stdout().lock();
        if ctx.verbose {
            let _ = writeln!(out, "{VERBOSE} {read_path}");
            if let Some(traffic) = &traffic {
                let _ = writeln!(out, "{VERBOSE} {traffic}");
            }
        }
        reported.store(true, Ordering::SeqCst);
        let _ = writeln!(out, "{READY} {} {}", std::process::id(), mounted.id());
        let _ = out.flush();
        drop(out);
        detach_stdio().context("could not detach from the terminal")?;
    } else if ctx.json {
        ctx.print_json(&serde_json::to_value(mounted.report())?)?;
    } else if !ctx.quiet {
        crate::note!(
            "serving snapshot {} read-only at {} (Ctrl-C or `zeroclaw-bundle umount {}` to stop)",
            mounted.id().short(12),
            args.mountpoint.display(),
            args.mountpoint.display()
        );
    }
    if ctx.verbose && !args.daemon_child {
        crate::note!("{read_path}");
    }
    let ended = mounted.serve();
    handler.close();
    if let (Some(traffic), true) = (&traffic, ctx.verbose) {
        crate::note!("{traffic}");
    }
    ended?;
    Ok(Outcome::Success)
}

/// Points stdout and stderr at `/dev/null`: the daemon's server after it reported readiness
/// (the parent closed the pipes, and a write there would fail).
fn detach_stdio() -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let null = rustix::fs::open("/dev/null", OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::stdio::dup2_stdout(&null)?;
    rustix::stdio::dup2_stderr(&null)?;
    Ok(())
}

/// Starts the server in a new session and returns once it reports the mount answering.
fn spawn_daemon(args: &MountArgs, ctx: &Ctx) -> Result<Outcome> {
    let mut cmd = server_command(args, ctx)?;
    // Interrupted while it waits (Ctrl-C, SIGTERM), the server is stopped too: no mount is
    // left that nobody was told about (a mounted server unmounts on SIGTERM). Watched from
    // before the server starts: a signal in between would have ended this process alone.
    let signals = Signals::new([SIGINT, SIGTERM]).context("could not install signal handlers")?;
    let mut child = cmd.spawn().context("could not start the mount server")?;
    // After the spawn (which returns once the server's `exec` succeeded), not before: a
    // warm-up started first held up the spawn itself by two milliseconds (traced: the new
    // process waited in the kernel before its first instruction). Before the watcher's thread
    // is started: a signal meanwhile waits in `signals` for it.
    Bundles::warm_mount(&ctx.store_path, &args.snapshot, &args.mountpoint);
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
    let stdout = child
        .stdout
        .take()
        .context("the mount server has no stdout")?;
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        stdout
            .read_line(&mut line)
            .context("could not read from the mount server")?;
        match line.trim_end().strip_prefix(VERBOSE) {
            // With -v: which path reads take, what the mount fetched from its remote before it
            // answered.
            Some(said) => crate::note!("{}", said.trim_start()),
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
            let _ = Bundles::unmount(&args.mountpoint);
            " (it did not stop in time, so it was killed and its mount removed)"
        };
        bail!(
            "interrupted: the mount server was stopped before {} was reported mounted{killed}",
            args.mountpoint.display()
        );
    }
    if let Some(ready) = line.trim().strip_prefix(READY) {
        drop(child.stderr.take());
        return report_ready(ready, args, ctx);
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

/// The command line of the mount server a `--daemon` mount starts: this binary, run again as
/// `mount --daemon-child` with the same store, flags and operands, in a process group of its
/// own, its stdout a pipe for the READY line.
fn server_command(args: &MountArgs, ctx: &Ctx) -> Result<Command> {
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
    if args.no_passthrough {
        cmd.arg("--no-passthrough");
    }
    // The server checks the signatures (and refuses) as a foreground mount does.
    if let Some(file) = &args.trust.allowed_signers {
        cmd.arg(joined("--allowed-signers=", file));
    }
    if args.trust.require_signed {
        cmd.arg("--require-signed");
    }
    if let Some(file) = &args.identity.identity {
        cmd.arg(joined(
            "--identity=",
            &std::path::absolute(file).unwrap_or(file.clone()),
        ));
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
    Ok(cmd)
}

/// Reports a mount the server said is ready (`READY PID ID`): as JSON, or a note naming the
/// server and how to stop it.
fn report_ready(ready: &str, args: &MountArgs, ctx: &Ctx) -> Result<Outcome> {
    let mut words = ready.split_whitespace();
    let pid = words.next().unwrap_or_default().to_string();
    let id = words.next().unwrap_or_default();
    if ctx.json {
        let report = MountReport {
            snapshot: ObjectId::from_full_ref(id)
                .with_context(|| format!("the mount server reported {id:?}, not an id"))?,
            mountpoint: args.mountpoint.clone(),
            pid: pid.parse::<u32>().ok(),
        };
        ctx.print_json(&serde_json::to_value(report)?)?;
    } else if !ctx.quiet {
        crate::note!(
            "mounted at {} (server pid {pid}); `zeroclaw-bundle umount {}` to stop",
            args.mountpoint.display(),
            args.mountpoint.display()
        );
    }
    Ok(Outcome::Success)
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
    let unmounted = Bundles::unmount(&args.mountpoint)?;
    if json {
        let out = serde_json::to_value(unmounted)?;
        crate::outln!("{}", crate::cmd::json::pretty(&out)?)?;
    }
    Ok(Outcome::Success)
}
