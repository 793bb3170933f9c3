//! FUSE passthrough: the kernel reads a mounted file straight from the store's object file,
//! without a round trip to the mount server per read (Linux 6.9 and later: the
//! `FUSE_PASSTHROUGH` INIT flag, the `FUSE_DEV_IOC_BACKING_OPEN` ioctl, `FOPEN_PASSTHROUGH` in
//! the open reply; fuser's `ReplyOpen::open_backing` and `opened_passthrough`). This module
//! owns the mount's decision ([`Passthrough`]) and the backing files registered with the
//! kernel ([`Backings`]); `fs` decides which opens may use them.
//!
//! Invariants:
//! - What is handed to the kernel is only ever a raw object file of the store, whole
//!   (`Blob::backing_file`), whose blob hashed to its id: `fs` verifies it (once per id, the
//!   cache every read uses) before it registers the file. The store writes such a file once,
//!   makes it read-only and renames it into place; nothing writes it afterwards. The kernel
//!   then reads it with the server's credentials as they were at registration.
//! - Decided once per mount. Off from the start when the caller turned it off, when the
//!   kernel does not offer the INIT flag, or when the server lacks `CAP_SYS_ADMIN` in the
//!   initial user namespace (the kernel refuses the ioctl without it: EPERM). The first refusal of a registration afterwards
//!   (EPERM in a user namespace, ELOOP for a store on a stacked filesystem such as overlayfs,
//!   anything else) turns it off for the rest of the mount, with the kernel's reason: no open
//!   retries the ioctl after that.
//! - One backing id per inode, shared by all of the inode's open files, from its first
//!   passthrough open to the release of its last one. The kernel requires both: every
//!   passthrough open of one inode must name the same backing file (EBUSY otherwise), and the
//!   id must stay registered until the opener has resolved it, which happens after the open
//!   reply is sent (dropped at once, the open can fail with EIO; fuser's `BackingId` doc). An
//!   inode whose id is still registered keeps using it even after the mount turned
//!   passthrough off, since a cached open of an inode that has passthrough opens is refused
//!   (ETXTBSY). Passthrough opens carry file handle [`PASSTHROUGH_FH`], so `release` knows
//!   which opens to count down.
//! - Passthrough and the writeback cache exclude each other in the kernel; this read-only
//!   mount never asks for the writeback cache. `max_stack_depth` is 1: the store must be on a
//!   plain filesystem (depth 0), and the mount itself may still be stacked under overlayfs.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fuser::{BackingId, Errno, FileHandle, InitFlags, KernelConfig, ReplyOpen};

/// The root directory's extended attribute saying whether the mount passes reads through:
/// `on`, or `off: REASON` (see [`Passthrough`]).
pub const XATTR_PASSTHROUGH: &str = "user.zeroclaw.passthrough";

/// The file handle of an open whose reads the kernel passes through (other opens carry 0).
pub(crate) const PASSTHROUGH_FH: FileHandle = FileHandle(1);

/// Whether a mount hands file reads to the kernel (FUSE passthrough). As an option
/// ([`crate::MountOptions::passthrough`]): `On` asks for it wherever the kernel, the
/// privileges and the object allow (the default), `Off` never uses it. As what a mount took
/// ([`crate::MountHandle::passthrough`], the root's [`XATTR_PASSTHROUGH`]): `On` while
/// whole raw objects are passed through, `Off` with the reason otherwise. Its `Display` is the
/// xattr's value: `on`, or `off: REASON`.
///
/// ```
/// use zeroclaw_bundle_mount::Passthrough;
/// assert_eq!(Passthrough::On.to_string(), "on");
/// let off = Passthrough::Off("turned off (--no-passthrough)".into());
/// assert_eq!(off.to_string(), "off: turned off (--no-passthrough)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Passthrough {
    /// Asked for, or in use.
    #[default]
    On,
    /// Not used, and why (a caller's reason, or the kernel's refusal).
    Off(String),
}

impl std::fmt::Display for Passthrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Passthrough::On => f.write_str("on"),
            Passthrough::Off(why) => write!(f, "off: {why}"),
        }
    }
}

impl Passthrough {
    /// The line `zeroclaw-bundle mount -v` prints about it: which path reads take, and why.
    pub fn note(&self) -> String {
        match self {
            Passthrough::On => format!(
                "passthrough on: the kernel reads files over {} KiB straight from the store's \
                 object files, each verified first; the rest is read through the mount server",
                crate::fs::PASSTHROUGH_MIN_SIZE / 1024
            ),
            Passthrough::Off(why) => {
                format!("passthrough off: {why}; every read goes through the mount server")
            }
        }
    }
}

/// A registered backing file and how many open files of its inode use it.
struct Live {
    id: Arc<BackingId>,
    opens: u64,
}

/// The mount's passthrough state: the decision, and the backing ids per inode.
pub(crate) struct Backings {
    /// `On` once INIT granted it (before INIT: what the caller asked for).
    state: Mutex<Passthrough>,
    /// Inode -> its registered backing file (see the module doc).
    live: Mutex<HashMap<u64, Live>>,
    /// Opens answered with passthrough (for tests: see `MountHandle::passed_through`).
    opened: AtomicU64,
    /// Registrations the kernel refused (for tests: one per mount, unless opens raced).
    refused: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section leaves its map or state whole at every step.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Backings {
    /// What the caller asked for; settled at INIT ([`Backings::init`]).
    pub(crate) fn new(wanted: &Passthrough) -> Backings {
        Backings {
            state: Mutex::new(wanted.clone()),
            live: Mutex::new(HashMap::new()),
            opened: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Asks the kernel for passthrough in the INIT reply when it was wanted, the kernel offers
    /// it and this server may register backing files; otherwise records why not.
    pub(crate) fn init(&self, config: &mut KernelConfig) {
        let mut state = lock(&self.state);
        if *state != Passthrough::On {
            return;
        }
        let refused = if !config.capabilities().contains(InitFlags::FUSE_PASSTHROUGH) {
            Some(
                "the kernel does not offer FUSE passthrough (it needs Linux 6.9 or later, \
                 built with CONFIG_FUSE_PASSTHROUGH)"
                    .to_string(),
            )
        } else if let Some(why) = crate::sys::passthrough_refusal() {
            Some(why.to_string())
        } else if let Err(unsupported) = config.add_capabilities(InitFlags::FUSE_PASSTHROUGH) {
            Some(format!(
                "the kernel refused the passthrough flag ({unsupported:?})"
            ))
        } else if let Err(most) = config.set_max_stack_depth(1) {
            Some(format!(
                "the kernel allows a stacking depth of at most {most}, and passthrough needs 1"
            ))
        } else {
            None
        };
        if let Some(why) = refused {
            *state = Passthrough::Off(why);
        }
    }

    /// What the mount takes now.
    pub(crate) fn status(&self) -> Passthrough {
        lock(&self.state).clone()
    }

    /// Whether new backing files may be registered.
    pub(crate) fn is_on(&self) -> bool {
        *lock(&self.state) == Passthrough::On
    }

    /// The backing id inode `ino` already has (an open of it is passed through), counting one
    /// more open of it.
    pub(crate) fn reuse(&self, ino: u64) -> Option<Arc<BackingId>> {
        let mut live = lock(&self.live);
        let entry = live.get_mut(&ino)?;
        entry.opens += 1;
        self.opened.fetch_add(1, Ordering::Relaxed);
        Some(Arc::clone(&entry.id))
    }

    /// Registers `file` (a verified whole object file) as inode `ino`'s backing file, counting
    /// one open of it. On the kernel's refusal, passthrough is off for the rest of the mount
    /// and `None` is returned: the open goes through the server.
    pub(crate) fn register(
        &self,
        ino: u64,
        reply: &ReplyOpen,
        file: &File,
    ) -> Option<Arc<BackingId>> {
        let id = match reply.open_backing(file) {
            Ok(id) => Arc::new(id),
            Err(e) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                let mut state = lock(&self.state);
                if *state == Passthrough::On {
                    *state = Passthrough::Off(refusal(&e));
                }
                return None;
            }
        };
        let mut live = lock(&self.live);
        // Another open of the same inode may have registered one meanwhile: every open of
        // an inode must name the same backing file, so that one wins (ours is closed).
        let entry = live.entry(ino).or_insert(Live { id, opens: 0 });
        entry.opens += 1;
        self.opened.fetch_add(1, Ordering::Relaxed);
        Some(Arc::clone(&entry.id))
    }

    /// A passthrough open of inode `ino` was released: its backing file is closed with the
    /// last one.
    pub(crate) fn release(&self, ino: u64) {
        let done = {
            let mut live = lock(&self.live);
            match live.get_mut(&ino) {
                Some(entry) if entry.opens > 1 => {
                    entry.opens -= 1;
                    None
                }
                Some(_) => live.remove(&ino),
                None => None,
            }
        };
        // Closed (FUSE_DEV_IOC_BACKING_CLOSE) outside the lock.
        drop(done);
    }

    /// Opens answered with passthrough so far.
    pub(crate) fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Registrations the kernel refused so far.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Backings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backings")
            .field("status", &self.status())
            .field("opened", &self.opened())
            .finish_non_exhaustive()
    }
}

/// The reason a refused registration gives, from the ioctl's errno.
fn refusal(e: &std::io::Error) -> String {
    let code = e.raw_os_error().map(Errno::from_i32);
    let why = match code {
        Some(Errno::EPERM) => {
            "the kernel refused to register a backing file (EPERM: passthrough was not \
             enabled at the handshake, or the mount server lacks CAP_SYS_ADMIN in the initial \
             user namespace)"
        }
        Some(Errno::ELOOP) => {
            "the kernel refused to register a backing file (ELOOP: the store is on a stacked \
             filesystem, such as overlayfs)"
        }
        Some(Errno::ENOTTY | Errno::EOPNOTSUPP | Errno::EINVAL) => {
            "the kernel does not support registering backing files"
        }
        _ => "the kernel refused to register a backing file",
    };
    format!("{why}: {e}")
}
