//! `SnapshotFs`: the fuser low-level (inode) adapter over an [`ObjectSource`] tree.
//!
//! Invariants:
//! - Content is immutable: entry, attribute and negative-lookup TTLs are effectively
//!   infinite; file opens are answered with FOPEN_KEEP_CACHE (page cache kept across opens);
//!   directory opens and file flushes are answered ENOSYS once so the kernel stops sending
//!   them (`no_opendir`, contents cached with FOPEN_CACHE_DIR; `no_flush`: nothing is ever
//!   dirty), so the kernel asks each question once. A warm read of a whole tree costs an
//!   OPEN and a RELEASE per file (the FLUSH per file is gone: a warm `tar` of the 20,000-file
//!   corpus sent 60,000 requests, now 40,000).
//! - Reads are positioned reads on the blob ([`Blob::read_at`]); no file larger than
//!   [`PASSTHROUGH_MIN_SIZE`] is ever loaded whole. A blob is hashed once, on its first read,
//!   and the verdict is cached per id: a corrupt or wrongly sized object fails every read
//!   with EIO.
//! - The first open of a smaller file (one the store may compress or pack) stores its
//!   verified bytes in the kernel's page cache (FUSE_NOTIFY_STORE) before the open is
//!   answered, so its reads send no READ: a cold `tar` of the 10,000-file bench corpus heard
//!   21,000 requests instead of 31,700 and took 12% less time. A damaged blob stores nothing,
//!   and its READ fails with EIO as above.
//! - FUSE passthrough (see `passthrough`): an open of a file of at least
//!   [`PASSTHROUGH_MIN_SIZE`] bytes, while the mount passes reads through, opens and verifies
//!   the blob at once (a corrupt one fails the open with EIO, and its file is never handed
//!   to the kernel); when the blob is a whole raw object file of the store, that file is
//!   registered as the inode's backing file and the open is answered FOPEN_PASSTHROUGH with
//!   file handle `PASSTHROUGH_FH`: the kernel then reads the object file itself and sends no
//!   READ for that open. Any other open (a smaller file; a compressed, packed or fetched
//!   blob; passthrough off) is answered as above and read through this daemon. Smaller files
//!   are left out because only opening them tells whether the store keeps them raw, loose,
//!   compressed or packed (it compresses and packs objects of up to 256 KiB), and opening one
//!   at every open would cost a warm read more than passthrough saves (once read, their
//!   bytes stay in the mount's page cache: a warm open sends no READ either way).
//! - Nothing is ever written, in two independent lines. First, the mount carries `ro`: the
//!   VFS then refuses every open for writing (O_WRONLY, O_RDWR, O_TRUNC, O_CREAT of a new
//!   name) and every namespace, attribute and xattr change with EROFS before this daemon
//!   hears of it. Second, this handler refuses the same things itself: every open that asks
//!   for write access or truncation, and every mutating operation, answers EROFS. File opens
//!   are therefore always sent to the handler, never answered ENOSYS: the kernel would then
//!   stop sending them (`no_open`), and once root remounted the mount `rw` a write open would
//!   succeed without this check, and a shared writable `mmap` would change the page cache
//!   every reader of the mount sees (tried: a daemon answering opens ENOSYS made the warm
//!   `tar` 5x faster, and a break-it pass did exactly that). The second line is tested on a
//!   real mount without `ro` (`MountOptions::kernel_ro`) and after a remount `rw`.
//! - Memory: trees sit in the bounded [`TreeCache`], each kept as its verified encoding
//!   (`TreeView`: about 57 bytes an entry, no allocation per name); at most `OPEN_BLOBS` object
//!   files are held open for reads; inode numbers grow with the entries the kernel has seen
//!   (see `inodes`).
//! - The first read of a large blob hashes it on the calling FUSE worker (blake3, roughly
//!   1 GB/s); other workers keep serving meanwhile.
//! - Every error goes through [`errno`], the one mapping from [`Fault`] to an errno value.
//!   Damage reported by the object source is also kept in [`Faults`] for the caller.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType,
    Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, Notifier,
    OpenAccMode, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};
use zeroclaw_bundle_store::{Blob, EntryKind, ObjectId, ObjectSource, StoreError, TreeView};

use crate::cache::TreeCache;
use crate::inodes::{InodeTable, Node, ROOT};
use crate::passthrough::{Backings, PASSTHROUGH_FH, XATTR_PASSTHROUGH};

/// The extended attribute carrying an entry's object id (blob id, or tree id for a directory).
pub const XATTR_BLAKE3: &str = "user.zeroclaw.blake3";
/// The root directory's extended attribute carrying [`crate::MountOptions::root_note`] (who
/// signed the snapshot), when the caller gave one.
pub const XATTR_SIGNATURES: &str = "user.zeroclaw.signatures";

/// "Forever" for the kernel's caches (about 136 years; the kernel clamps it anyway).
const TTL: Duration = Duration::from_secs(u32::MAX as u64);
/// Block size reported by stat and statfs: large, so tools read in big chunks.
const BLKSIZE: u32 = 128 * 1024;
/// statfs block unit.
const FRSIZE: u32 = 4096;
/// Longest name Linux passes through the VFS.
const NAME_MAX: u32 = 255;
/// Distinct damage reports kept (the rest are counted only).
const MAX_FAULTS: usize = 64;
/// How many opened object files the daemon keeps for reads (each holds one fd).
const OPEN_BLOBS: usize = 256;
/// File bytes hinted per listed directory.
const PREFETCH_BYTES: u64 = 32 * 1024 * 1024;
/// The smallest file whose opens may be passed through: one byte more than the largest object
/// the store compresses or packs (see the module doc).
pub(crate) const PASSTHROUGH_MIN_SIZE: u64 = 256 * 1024 + 1;

/// Requests heard, for tests that pin what the kernel sends ([`crate::MountHandle`]'s
/// `file_requests` and `read_requests`).
#[derive(Debug, Default)]
pub(crate) struct Requests {
    /// OPEN, FLUSH and RELEASE of files (not directories).
    pub(crate) files: AtomicU64,
    /// READ.
    pub(crate) reads: AtomicU64,
    /// Files whose bytes an open stored in the kernel's page cache (no READ follows).
    pub(crate) stored: AtomicU64,
}

/// Starts the thread that passes prefetch hints to the source; it ends when the file system
/// (the only sender) is dropped.
fn start_prefetcher(source: Arc<dyn ObjectSource>) -> Option<mpsc::SyncSender<Vec<ObjectId>>> {
    let (tx, rx) = mpsc::sync_channel::<Vec<ObjectId>>(256);
    std::thread::Builder::new()
        .name("zeroclaw-prefetch".into())
        .spawn(move || {
            for ids in rx {
                source.prefetch(&ids);
            }
        })
        .ok()?;
    Some(tx)
}

/// The file blobs of `tree` from entry `start` on, in order, until their sizes would pass
/// `budget`.
fn files_within(tree: &TreeView, start: usize, budget: u64) -> Vec<ObjectId> {
    let mut left = budget;
    let mut ids = Vec::new();
    for e in (start..tree.len())
        .filter_map(|index| tree.entry(index))
        .filter(|e| e.kind.is_file())
    {
        if e.size > left {
            break;
        }
        left -= e.size;
        ids.push(e.id);
    }
    ids
}

/// Why an operation fails, before it becomes an errno (see [`errno`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// No such name (or an inode number we never handed out).
    NotFound,
    /// The object is missing, corrupt, malformed, or unreadable.
    Damaged,
    /// Any attempt to change the snapshot.
    ReadOnly,
    /// A directory operation on a file.
    NotADirectory,
    /// A file operation on a directory.
    IsADirectory,
    /// An extended attribute we do not have.
    NoAttribute,
    /// An extended attribute namespace we do not support (anything but `user.`).
    NoNamespace,
    /// The caller's buffer is too small for the value (xattr size protocol).
    TooSmall,
}

/// The one mapping from faults to errno values: not found -> ENOENT, damage -> EIO, any
/// write -> EROFS.
pub(crate) fn errno(fault: Fault) -> Errno {
    match fault {
        Fault::NotFound => Errno::ENOENT,
        Fault::Damaged => Errno::EIO,
        Fault::ReadOnly => Errno::EROFS,
        Fault::NotADirectory => Errno::ENOTDIR,
        Fault::IsADirectory => Errno::EISDIR,
        Fault::NoAttribute => Errno::ENODATA,
        Fault::NoNamespace => Errno::EOPNOTSUPP,
        Fault::TooSmall => Errno::ERANGE,
    }
}

/// Damage seen while serving, kept for the caller to report (the kernel only sees EIO).
#[derive(Debug, Default)]
pub(crate) struct Faults {
    inner: Mutex<(Vec<String>, u64)>,
}

impl Faults {
    fn record(&self, message: String) {
        let mut guard = lock(&self.inner);
        let (list, count) = &mut *guard;
        *count += 1;
        if list.len() < MAX_FAULTS && !list.contains(&message) {
            list.push(message);
        }
    }

    /// Distinct messages (at most 64) and the total number of failures.
    pub(crate) fn snapshot(&self) -> (Vec<String>, u64) {
        lock(&self.inner).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves its map consistent at each step, so a panic in
    // another worker does not make the data unusable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Settings of the view that do not come from the snapshot.
#[derive(Debug, Clone)]
pub(crate) struct View {
    /// Owner reported for every entry.
    pub(crate) uid: u32,
    /// Group reported for every entry.
    pub(crate) gid: u32,
    /// atime, mtime and ctime of every entry.
    pub(crate) time: SystemTime,
    /// Budget of the decoded-tree cache, in entries.
    pub(crate) tree_cache_entries: usize,
    /// The root's [`XATTR_SIGNATURES`] value.
    pub(crate) root_note: Option<String>,
}

/// The read-only filesystem served for one snapshot tree.
pub(crate) struct SnapshotFs {
    source: Arc<dyn ObjectSource>,
    view: View,
    inodes: RwLock<InodeTable>,
    trees: TreeCache,
    /// Blob id -> whether it hashed to its id (checked on first read).
    verified: Mutex<HashMap<ObjectId, bool>>,
    /// Inode -> its opened blob and when it was last read (reads carry file handle 0, so the
    /// blob is found by inode, see `open`). Bounded.
    open_blobs: Mutex<HashMap<u64, (Blob, u64)>>,
    reads: AtomicU64,
    /// Queue of the prefetch thread: subtrees of directories being listed, and files of
    /// directories (see `prefetch_listed`, `prefetch_siblings`).
    prefetch: Option<mpsc::SyncSender<Vec<ObjectId>>>,
    /// Directory inodes whose files were hinted already.
    hinted_dirs: Mutex<std::collections::HashSet<u64>>,
    /// Whether any file was read yet (then listings hint file contents too).
    files_opened: AtomicBool,
    faults: Arc<Faults>,
    /// Requests heard: one flush in the mount's life, no READ for a passthrough open (see
    /// the module doc).
    requests: Arc<Requests>,
    /// Passthrough: the mount's decision and the backing files registered per inode.
    backings: Arc<Backings>,
    /// The session's channel for notifications to the kernel (set once the session exists,
    /// before it serves); `None` until then, and the open stores nothing.
    notifier: Arc<OnceLock<Notifier>>,
    /// File inodes whose bytes an open stored in the kernel's page cache (one bit each).
    stored: Mutex<Vec<u64>>,
}

impl SnapshotFs {
    /// A view of tree `root` (already decoded by the caller, which checks it exists).
    pub(crate) fn new(
        source: Arc<dyn ObjectSource>,
        root: ObjectId,
        root_tree: TreeView,
        view: View,
        faults: Arc<Faults>,
        requests: Arc<Requests>,
        backings: Arc<Backings>,
    ) -> SnapshotFs {
        let source_for_prefetch = Arc::clone(&source);
        let trees = TreeCache::new(view.tree_cache_entries);
        let size = root_tree.total_size();
        trees.insert(root, Arc::new(root_tree));
        SnapshotFs {
            source,
            view,
            inodes: RwLock::new(InodeTable::new(root, size)),
            trees,
            verified: Mutex::new(HashMap::new()),
            open_blobs: Mutex::new(HashMap::new()),
            reads: AtomicU64::new(0),
            prefetch: start_prefetcher(source_for_prefetch),
            hinted_dirs: Mutex::new(std::collections::HashSet::new()),
            files_opened: AtomicBool::new(false),
            faults,
            requests,
            backings,
            notifier: Arc::new(OnceLock::new()),
            stored: Mutex::new(Vec::new()),
        }
    }

    /// Where the session's notifier goes once the session exists (see
    /// [`SnapshotFs::store_in_page_cache`]).
    pub(crate) fn notifier_slot(&self) -> Arc<OnceLock<Notifier>> {
        Arc::clone(&self.notifier)
    }

    /// On the first open of a file read through this daemon, stores its verified bytes in the
    /// kernel's page cache of the inode (FUSE_NOTIFY_STORE) before the open is answered: the
    /// reads that follow find them there and send no READ, so a cold read of a small file
    /// costs one request to this daemon instead of two. Only once per inode (a later open
    /// finds the pages cached, FOPEN_KEEP_CACHE, or, once the kernel dropped them, reads
    /// them through READ as before). Anything that fails here (a damaged blob, a kernel
    /// that refuses) stores nothing and leaves the file to READ, which reports it.
    fn store_in_page_cache(&self, ino: INodeNo, node: &Node) {
        if node.size == 0 || node.size >= PASSTHROUGH_MIN_SIZE {
            return;
        }
        let Some(notifier) = self.notifier.get() else {
            return;
        };
        if !self.first_store(ino.0) {
            return;
        }
        let Ok(blob) = self.blob_of(ino) else {
            return;
        };
        // `blob_of` checked the blob is `node.size` long, and `read_at` fills all it can.
        let mut bytes = vec![0u8; node.size as usize];
        if !matches!(blob.read_at(&mut bytes, 0), Ok(n) if n == bytes.len()) {
            return;
        }
        if notifier.store(ino, 0, &bytes).is_ok() {
            self.requests.stored.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Marks file inode `ino` as stored in the page cache; `false` when it already was.
    fn first_store(&self, ino: u64) -> bool {
        let mut stored = lock(&self.stored);
        let (word, bit) = ((ino / 64) as usize, 1u64 << (ino % 64));
        if stored.len() <= word {
            stored.resize(word + 1, 0);
        }
        let first = stored[word] & bit == 0;
        stored[word] |= bit;
        first
    }

    /// Hints the children of directory `ino` (whose tree is `tree`) as it is listed: its
    /// subdirectory trees (a walk descends next), and, once any file of the mount has been
    /// opened, its files' contents up to [`PREFETCH_BYTES`]. Until a file is opened the
    /// contents are not hinted: a `find` or `ls -R` never reads them, and hinting them would
    /// open every object file and queue its bytes on the disk while the walk runs. Dropped
    /// when the queue is full: prefetching is only an optimisation.
    fn prefetch_listed(&self, ino: INodeNo, tree: &TreeView) {
        let mut ids: Vec<ObjectId> = tree
            .iter()
            .filter(|e| e.kind == EntryKind::Dir)
            .map(|e| e.id)
            .collect();
        if self.files_opened.load(Ordering::Relaxed) && lock(&self.hinted_dirs).insert(ino.0) {
            ids.extend(files_within(tree, 0, PREFETCH_BYTES));
        }
        self.hint(ids);
    }

    /// On the first read of a file in a directory not yet hinted, hints the contents of that
    /// file and of the files after it, up to [`PREFETCH_BYTES`]: a reader that reads one file
    /// of a directory (`tar`, `cp -r`, `rg`) usually reads its siblings next, in listing
    /// order. The first read anywhere also turns on content hints for later listings (see
    /// [`SnapshotFs::prefetch_listed`]). Each directory's files are hinted once. (On the
    /// first read through this daemon, which for a small file is its first open: see
    /// [`SnapshotFs::store_in_page_cache`].)
    fn prefetch_siblings(&self, node: &Node) {
        if self.prefetch.is_none() {
            return;
        }
        self.files_opened.store(true, Ordering::Relaxed);
        if !lock(&self.hinted_dirs).insert(node.parent()) {
            return;
        }
        let Ok((_, tree)) = self.dir_stream(INodeNo(node.parent())) else {
            return;
        };
        self.hint(files_within(&tree, node.index as usize, PREFETCH_BYTES));
    }

    fn hint(&self, ids: Vec<ObjectId>) {
        if let (Some(queue), false) = (&self.prefetch, ids.is_empty()) {
            let _ = queue.try_send(ids);
        }
    }

    /// The verified blob behind file inode `ino`, from the bounded cache of open blobs.
    fn blob_of(&self, ino: INodeNo) -> Result<Blob, Fault> {
        let tick = self.reads.fetch_add(1, Ordering::Relaxed);
        if let Some((blob, last)) = lock(&self.open_blobs).get_mut(&ino.0) {
            *last = tick;
            return Ok(blob.clone());
        }
        let node = self.node(ino)?;
        if node.kind == EntryKind::Dir {
            return Err(Fault::IsADirectory);
        }
        self.prefetch_siblings(&node);
        let blob = self.open_blob(ino.0, &node)?;
        let mut open = lock(&self.open_blobs);
        if open.len() >= OPEN_BLOBS {
            // Evict the least recently read (a linear scan over a small, bounded map).
            if let Some(oldest) = open
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(k, _)| *k)
            {
                open.remove(&oldest);
            }
        }
        open.insert(ino.0, (blob.clone(), tick));
        Ok(blob)
    }

    /// The backing file an open of file `ino` passes its reads through to: the one its inode
    /// already has, else its blob's own file when the mount passes reads through and the blob
    /// is a whole raw object file, verified here first (a damaged blob fails the open). `None`:
    /// the open is read through this daemon (the blob, opened, stays in the cache of open
    /// blobs for those reads). Registering also hints the file's siblings, as a first read
    /// does (a passthrough open sends no READ).
    fn passthrough_open(
        &self,
        ino: INodeNo,
        reply: &ReplyOpen,
    ) -> Result<Option<Arc<fuser::BackingId>>, Fault> {
        if let Some(id) = self.backings.reuse(ino.0) {
            return Ok(Some(id));
        }
        if !self.backings.is_on() {
            return Ok(None);
        }
        let blob = self.blob_of(ino)?;
        Ok(blob
            .backing_file()
            .and_then(|file| self.backings.register(ino.0, reply, file)))
    }

    fn damaged(&self, err: &StoreError) -> Fault {
        self.faults.record(err.to_string());
        Fault::Damaged
    }

    fn node(&self, ino: INodeNo) -> Result<Node, Fault> {
        self.inodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(ino.0)
            .ok_or(Fault::NotFound)
    }

    fn tree(&self, id: &ObjectId) -> Result<Arc<TreeView>, Fault> {
        if let Some(tree) = self.trees.get(id) {
            return Ok(tree);
        }
        let tree = Arc::new(self.source.tree_view(id).map_err(|e| self.damaged(&e))?);
        self.trees.insert(*id, tree.clone());
        Ok(tree)
    }

    /// The tree of directory inode `ino` (only directories have a tree id in the table).
    fn dir_tree(&self, ino: u64) -> Result<Arc<TreeView>, Fault> {
        let id = {
            let table = self.inodes.read().unwrap_or_else(PoisonError::into_inner);
            match (table.dir_id(ino), table.get(ino)) {
                (Some(id), _) => id,
                (None, Some(_)) => return Err(Fault::NotADirectory),
                (None, None) => return Err(Fault::NotFound),
            }
        };
        self.tree(&id)
    }

    /// The object id of inode `ino` (whose node is `node`): a directory's tree id from the
    /// inode table, a file's blob id from its entry in its parent's tree (see `inodes`).
    fn id_of(&self, ino: u64, node: &Node) -> Result<ObjectId, Fault> {
        if node.kind == EntryKind::Dir {
            let table = self.inodes.read().unwrap_or_else(PoisonError::into_inner);
            return table.dir_id(ino).ok_or(Fault::NotFound);
        }
        let tree = self.dir_tree(node.parent())?;
        let entry = tree.entry(node.index as usize);
        entry.map(|e| e.id).ok_or(Fault::NotFound)
    }

    fn attr(&self, ino: u64, node: &Node) -> FileAttr {
        // The recorded permission bits, exactly as a checkout writes them (a 0600 file shows
        // 0600, a directory 0755): a reviewer sees who could read each file once imported.
        // Writes are refused by the mount itself (`ro`, and EROFS from the daemon), not by
        // the mode bits.
        let kind = file_type(node.kind);
        let perm = node.mode & 0o777;
        FileAttr {
            ino: INodeNo(ino),
            size: node.size,
            blocks: node.size.div_ceil(512),
            atime: self.view.time,
            mtime: self.view.time,
            ctime: self.view.time,
            crtime: self.view.time,
            kind,
            perm,
            // 1 for directories too: "subdirectory count unknown", so find/fts do not
            // apply the nlink-2 leaf optimization (btrfs does the same).
            nlink: 1,
            uid: self.view.uid,
            gid: self.view.gid,
            rdev: 0,
            blksize: BLKSIZE,
            flags: 0,
        }
    }

    fn lookup_entry(&self, parent: INodeNo, name: &OsStr) -> Result<(u64, Node), Fault> {
        let tree = self.dir_tree(parent.0)?;
        let name = name.as_bytes();
        let index = tree.find(name).ok_or(Fault::NotFound)?;
        let entry = tree.entry(index).ok_or(Fault::NotFound)?;
        let known = self
            .inodes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .child(parent.0, index);
        let ino = match known {
            Some(ino) => ino,
            None => self
                .inodes
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .intern(parent.0, tree.len(), index, entry),
        };
        let node = Node::of(parent.0, index, entry);
        Ok((ino, node))
    }

    /// Opens the blob of file inode `ino` (whose node is `node`) for reading after checking
    /// its length and (once per id) its hash.
    fn open_blob(&self, ino: u64, node: &Node) -> Result<Blob, Fault> {
        let id = self.id_of(ino, node)?;
        // The size the tree records bounds what is read: a pack refuses another length from
        // its index, before decompressing anything.
        let blob = self
            .source
            .blob_of_size(&id, node.size)
            .map_err(|e| self.damaged(&e))?;
        if blob.len() != node.size {
            self.faults.record(format!(
                "object {} is {} bytes long but its tree records {} bytes",
                id,
                blob.len(),
                node.size
            ));
            return Err(Fault::Damaged);
        }
        let known = lock(&self.verified).get(&id).copied();
        let good = match known {
            Some(good) => good,
            None => {
                // Hash outside the lock: two first opens of one blob may both hash it.
                let good = match blob.verify(&id) {
                    Ok(()) => true,
                    Err(e) => {
                        self.damaged(&e);
                        false
                    }
                };
                lock(&self.verified).insert(id, good);
                good
            }
        };
        if good {
            Ok(blob)
        } else {
            Err(Fault::Damaged)
        }
    }

    /// A directory's node and its (immutable) tree, by inode: no handle is needed, since
    /// the same inode always lists the same entries.
    fn dir_stream(&self, ino: INodeNo) -> Result<(Node, Arc<TreeView>), Fault> {
        let node = self.node(ino)?;
        let tree = self.dir_tree(ino.0)?;
        Ok((node, tree))
    }

    /// Walks the directory stream from `offset` ("." is 0, ".." is 1, entry i is i + 2),
    /// giving `add` each (inode, next offset, name, node) until it reports a full buffer.
    fn list(
        &self,
        ino: INodeNo,
        offset: u64,
        mut add: impl FnMut(u64, u64, &[u8], &Node) -> bool,
    ) -> Result<(), Fault> {
        let (node, tree) = self.dir_stream(ino)?;
        if offset == 0 {
            self.prefetch_listed(ino, &tree);
        }
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let mut table = self.inodes.write().unwrap_or_else(PoisonError::into_inner);
        for position in start..tree.len().saturating_add(2) {
            let next = position as u64 + 1;
            let full = match position {
                0 => add(ino.0, next, b".", &node),
                1 => {
                    let parent = table.get(node.parent()).unwrap_or(node);
                    add(node.parent(), next, b"..", &parent)
                }
                _ => {
                    let index = position - 2;
                    let Some(entry) = tree.entry(index) else {
                        break;
                    };
                    let child = table.intern(ino.0, tree.len(), index, entry);
                    let child_node = Node::of(ino.0, index, entry);
                    add(child, next, entry.name, &child_node)
                }
            };
            if full {
                break;
            }
        }
        Ok(())
    }

    /// The value of xattr `name`. Only the `user.` namespace exists here, as on a kernel
    /// filesystem with only a `user.` handler: any other name (`security.selinux`,
    /// `system.posix_acl_access`, `trusted.*`) is EOPNOTSUPP, answered before any inode
    /// work. `ls -l` asks for the first two of every entry, and on EOPNOTSUPP stops asking
    /// for the rest of the device, where ENODATA costs a round trip per entry and name.
    fn xattr_value(&self, ino: INodeNo, name: &OsStr) -> Result<Vec<u8>, Fault> {
        if !name.as_bytes().starts_with(b"user.") {
            return Err(Fault::NoNamespace);
        }
        let node = self.node(ino)?;
        if name.as_bytes() == XATTR_BLAKE3.as_bytes() {
            Ok(self.id_of(ino.0, &node)?.to_hex().into_bytes())
        } else if let (true, Some(note)) = (
            ino.0 == ROOT && name.as_bytes() == XATTR_SIGNATURES.as_bytes(),
            &self.view.root_note,
        ) {
            Ok(note.as_bytes().to_vec())
        } else if ino.0 == ROOT && name.as_bytes() == XATTR_PASSTHROUGH.as_bytes() {
            Ok(self.backings.status().to_string().into_bytes())
        } else {
            Err(Fault::NoAttribute)
        }
    }
}

/// Answers the xattr size protocol: size 0 asks for the length, a short buffer is ERANGE.
fn reply_xattr(value: &[u8], size: u32, reply: ReplyXattr) {
    let len = u32::try_from(value.len()).unwrap_or(u32::MAX);
    if size == 0 {
        reply.size(len);
    } else if size < len {
        reply.error(errno(Fault::TooSmall));
    } else {
        reply.data(value);
    }
}

fn file_type(kind: EntryKind) -> FileType {
    match kind {
        EntryKind::Dir => FileType::Directory,
        EntryKind::File | EntryKind::ExecFile => FileType::RegularFile,
    }
}

impl Filesystem for SnapshotFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // Each capability separately: an old kernel lacking one still gets the others.
        // READDIRPLUS always, not READDIRPLUS_AUTO: with AUTO the kernel asks for attributes
        // only in a listing's first chunk (and after a stat), so a `find` (which never stats)
        // left the entries without dentries and a later `ls -l` sent one LOOKUP per entry.
        // Measured on the 300,000-file scale tree, `ls -l` of its 100,000-entry directory
        // after a cold `find`: 1.07 to 1.36 s with AUTO, 0.31 to 0.43 s without (the plain
        // directory: 1.25 s); the cold `find` itself grew from 0.46-0.71 s to 0.59-1.07 s
        // (the kernel makes an inode per entry), and was unchanged on the 20,000-file corpus.
        for wanted in [
            InitFlags::FUSE_DO_READDIRPLUS,
            InitFlags::FUSE_PARALLEL_DIROPS,
        ] {
            let _ = config.add_capabilities(wanted);
        }
        // FUSE_PASSTHROUGH with max_stack_depth 1, when wanted and allowed (see
        // `passthrough`); nothing asked above excludes it (the writeback cache would).
        self.backings.init(config);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.lookup_entry(parent, name) {
            Ok((ino, node)) => reply.entry(&TTL, &self.attr(ino, &node), Generation(0)),
            Err(Fault::NotFound) => {
                // A negative entry (node id 0) with a long TTL: the kernel caches the
                // absence and answers ENOENT itself next time (squashfuse_ll does this).
                let mut attr = self.attr(
                    ROOT,
                    &Node {
                        parent: ROOT as u32,
                        index: 0,
                        kind: EntryKind::File,
                        mode: 0o644,
                        size: 0,
                    },
                );
                attr.ino = INodeNo(0);
                reply.entry(&TTL, &attr, Generation(0));
            }
            Err(fault) => reply.error(errno(fault)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.node(ino) {
            Ok(node) => reply.attr(&TTL, &self.attr(ino.0, &node)),
            Err(fault) => reply.error(errno(fault)),
        }
    }

    /// Refuses every open that asks for write access or truncation (EROFS), and directories
    /// (EISDIR). A read-only open of a file of at least [`PASSTHROUGH_MIN_SIZE`] bytes is
    /// passed through when it can be (see the module doc and `passthrough`): it then fails
    /// with EIO when the blob is damaged. Any other is answered with file handle 0 and
    /// FOPEN_KEEP_CACHE, so the page cache survives across opens (content never changes);
    /// at its first open its blob is opened, verified and stored in that page cache (see
    /// [`SnapshotFs::store_in_page_cache`]), else on its first read. Not answered ENOSYS: the
    /// kernel would then stop sending opens at all (`no_open`), and a write open after a
    /// remount `rw` (or on a mount without `ro`) would succeed without this check (see the
    /// module doc).
    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.requests.files.fetch_add(1, Ordering::Relaxed);
        let result = (|| {
            let node = self.node(ino)?;
            if node.kind == EntryKind::Dir {
                return Err(Fault::IsADirectory);
            }
            if flags.acc_mode() != OpenAccMode::O_RDONLY || crate::sys::truncates(flags.0) {
                return Err(Fault::ReadOnly);
            }
            Ok(node)
        })();
        let node = match result {
            Ok(node) => node,
            Err(fault) => return reply.error(errno(fault)),
        };
        if node.size >= PASSTHROUGH_MIN_SIZE {
            match self.passthrough_open(ino, &reply) {
                // No other flag: the kernel fails a passthrough open that carries any but
                // FOPEN_DIRECT_IO, FOPEN_PARALLEL_DIRECT_WRITES and FOPEN_NOFLUSH
                // (FOPEN_PASSTHROUGH_MASK) with EIO; FOPEN_KEEP_CACHE is not among them (the
                // page cache used is the object file's own).
                Ok(Some(id)) => {
                    return reply.opened_passthrough(PASSTHROUGH_FH, FopenFlags::empty(), &id)
                }
                Ok(None) => {}
                Err(fault) => return reply.error(errno(fault)),
            }
        }
        self.store_in_page_cache(ino, &node);
        reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE)
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.requests.reads.fetch_add(1, Ordering::Relaxed);
        let blob = match self.blob_of(ino) {
            Ok(blob) => blob,
            Err(fault) => return reply.error(errno(fault)),
        };
        let want = blob.len().saturating_sub(offset).min(u64::from(size));
        let mut buf = vec![0u8; usize::try_from(want).unwrap_or(0)];
        match blob.read_at(&mut buf, offset) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => {
                self.faults.record(format!("could not read an object: {e}"));
                reply.error(errno(Fault::Damaged));
            }
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.requests.files.fetch_add(1, Ordering::Relaxed);
        // Nothing is ever dirty: ENOSYS once, and the kernel stops sending flushes on close
        // (`no_flush`).
        reply.error(Errno::ENOSYS);
    }

    /// A passthrough open's release counts its inode's backing file down (closed with the
    /// last open, see `passthrough`).
    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.requests.files.fetch_add(1, Ordering::Relaxed);
        if fh == PASSTHROUGH_FH {
            self.backings.release(ino.0);
        }
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Nothing is ever dirty.
        reply.ok();
    }

    /// ENOSYS once, and the kernel stops asking (`no_opendir`, with directory
    /// contents cached: FOPEN_CACHE_DIR is its default then). Listings are served from the
    /// tree cache by inode.
    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.dir_tree(ino.0) {
            Ok(_) => reply.error(Errno::ENOSYS),
            Err(fault) => reply.error(errno(fault)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let result = self.list(ino, offset, |child, next, name, node| {
            reply.add(
                INodeNo(child),
                next,
                file_type(node.kind),
                OsStr::from_bytes(name),
            )
        });
        match result {
            Ok(()) => reply.ok(),
            Err(fault) => reply.error(errno(fault)),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let result = self.list(ino, offset, |child, next, name, node| {
            reply.add(
                INodeNo(child),
                next,
                OsStr::from_bytes(name),
                &TTL,
                &self.attr(child, node),
                Generation(0),
            )
        });
        match result {
            Ok(()) => reply.ok(),
            Err(fault) => reply.error(errno(fault)),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let table = self.inodes.read().unwrap_or_else(PoisonError::into_inner);
        let total = table.get(ROOT).map(|root| root.size).unwrap_or(0);
        // Blocks: the snapshot's file bytes, all used, none free. Files: the entries the
        // kernel has seen so far (counting them all would mean walking the whole snapshot).
        reply.statfs(
            total.div_ceil(u64::from(FRSIZE)),
            0,
            0,
            table.len(),
            0,
            FRSIZE,
            NAME_MAX,
            FRSIZE,
        );
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        match self.xattr_value(ino, name) {
            Ok(value) => reply_xattr(&value, size, reply),
            Err(fault) => reply.error(errno(fault)),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        match self.node(ino) {
            Ok(_) => {
                let mut list = XATTR_BLAKE3.as_bytes().to_vec();
                list.push(0);
                if ino.0 == ROOT && self.view.root_note.is_some() {
                    list.extend_from_slice(XATTR_SIGNATURES.as_bytes());
                    list.push(0);
                }
                if ino.0 == ROOT {
                    list.extend_from_slice(XATTR_PASSTHROUGH.as_bytes());
                    list.push(0);
                }
                reply_xattr(&list, size, reply);
            }
            Err(fault) => reply.error(errno(fault)),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        // Only called without default_permissions; kept consistent with the modes anyway.
        match self.node(ino) {
            Ok(_) if mask.contains(AccessFlags::W_OK) => reply.error(errno(Fault::ReadOnly)),
            Ok(_) => reply.ok(),
            Err(fault) => reply.error(errno(fault)),
        }
    }

    // Everything below would change the snapshot: EROFS.

    fn setattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn mkdir(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(errno(Fault::ReadOnly));
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        // The destination would be in this filesystem (the kernel only forwards
        // same-filesystem copies): a write.
        reply.error(errno(Fault::ReadOnly));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        assert_eq!(errno(Fault::NotFound), Errno::ENOENT);
        assert_eq!(errno(Fault::Damaged), Errno::EIO);
        assert_eq!(errno(Fault::ReadOnly), Errno::EROFS);
        assert_eq!(errno(Fault::NoAttribute), Errno::ENODATA);
        assert_eq!(errno(Fault::NoNamespace), Errno::EOPNOTSUPP);
        assert_eq!(errno(Fault::TooSmall), Errno::ERANGE);
    }

    #[test]
    fn faults_are_deduplicated_and_bounded() {
        let f = Faults::default();
        for i in 0..200 {
            f.record(format!("m{}", i % 100));
        }
        f.record("m0".into());
        let (list, count) = f.snapshot();
        assert_eq!(count, 201);
        assert_eq!(list.len(), MAX_FAULTS);
        assert_eq!(list[0], "m0");
    }
}
