//! The pack writer's output and its blob pipeline. Every byte of a pack goes to its output
//! through one `HashingWriter` (counted for the offsets, hashed for the trailer; a failed
//! write is `StoreError::PackOutput`). The pipeline reads the blobs of a pack ahead on worker
//! threads, verifies and compresses them there, and hands their stored bytes to the one writer
//! (the caller's thread) strictly in walk order, so a pack is byte for byte the same whatever
//! the number of workers and whichever finishes first. It knows the byte format only through
//! `pack_format`, never `pack` (which calls it).
//!
//! The shape:
//!
//! ```text
//! dispatcher --(job + its own bounded channel)--> workers (open, read, hash, probe, compress)
//!     |                                                |
//!     +--(that channel's receiver, in walk order)--> writer (writes, indexes, trailer hash)
//! ```
//!
//! Invariants:
//! - Order: the dispatcher hands the writer each job's receiver in walk order, and the writer
//!   drains one job completely before the next, so no reorder buffer is needed.
//! - Bounded memory: the dispatcher takes a job's charge (its size, or a streamed object's
//!   chunks in flight) from a byte budget before any worker reads it, and the writer gives it
//!   back once written; charges are taken in walk order, so the job the writer waits for always
//!   has its charge (no deadlock). An object larger than the streaming threshold is never held
//!   whole: it is read, hashed and compressed in chunks and reaches the writer as chunks of one
//!   zstd frame (or raw).
//! - Incompressible data costs no zstd time: a blob larger than the probe is compressed only
//!   when its first [`PROBE`] bytes compress by at least 2% at the same level.
//! - Errors: a worker's failure (missing or corrupt object, read error) reaches the writer in
//!   order and becomes the pack's error, exactly as the one-thread writer reported it; when the
//!   writer stops (an error, a closed pipe, Ctrl-C failing its next write) every thread stops
//!   at its next step and nothing more is read. A streamed object is verified as it streams:
//!   a corrupt one fails the pack after some of its bytes were written (the pack, being
//!   incomplete and without a trailer, is discarded by the caller or refused by any reader).

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Condvar, Mutex};

use crate::error::StoreError;
use crate::id::{IdHasher, ObjectId};
use crate::objects::{Blob, ObjectDir, Stored};
use crate::pack_format::{PackEntry, ZSTD_LEVEL};

/// How many leading bytes of a blob decide whether it is worth compressing.
const PROBE: usize = 128 * 1024;
/// Below this many bytes, zstd cannot win (its frame header alone costs several bytes).
const MIN_COMPRESS: usize = 64;
/// Chunks a streamed object may have queued for the writer.
const STREAM_QUEUE: usize = 4;
/// Objects handed out but not yet written, at most (each holds a channel).
const MAX_JOBS_AHEAD: usize = 512;

/// A failed write of the pack to its output (named by the caller, so no path here).
pub(crate) fn write_err(e: io::Error) -> StoreError {
    StoreError::PackOutput {
        op: "write",
        error: e,
    }
}

/// The pack's bytes as they are written: counted, and hashed for the trailer.
pub(crate) struct HashingWriter<'w> {
    inner: &'w mut dyn Write,
    hasher: IdHasher,
    pub(crate) written: u64,
}

impl<'w> HashingWriter<'w> {
    /// Starts counting and hashing what goes to `inner` (the start of the pack).
    pub(crate) fn new(inner: &'w mut dyn Write) -> HashingWriter<'w> {
        HashingWriter {
            inner,
            hasher: IdHasher::new(),
            written: 0,
        }
    }

    pub(crate) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.inner.write_all(bytes)?;
        self.hasher.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// The hash of everything written so far (what the trailer records).
    pub(crate) fn digest(&self) -> ObjectId {
        self.hasher.finish()
    }

    /// The output, for the bytes that are not hashed (the trailer).
    pub(crate) fn into_inner(self) -> &'w mut dyn Write {
        self.inner
    }
}

/// How the pipeline runs. [`Tuning::for_host`] is what `pack` uses; tests shrink the thresholds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Worker threads (at least 1).
    pub workers: usize,
    /// Bytes read but not yet written, at most (a job larger than this runs alone).
    pub in_flight: u64,
    /// Objects larger than this are streamed in chunks instead of read whole.
    pub stream_over: u64,
    /// Chunk size of a streamed object.
    pub chunk: usize,
}

impl Tuning {
    /// Workers: 4 per core, between 4 and 16 (most of a cold pack is waiting on small reads,
    /// so several must be in flight; the compression is spread over the same threads). 64 MiB
    /// in flight; objects over 8 MiB streamed in 1 MiB chunks.
    pub(crate) fn for_host() -> Tuning {
        Tuning {
            workers: std::thread::available_parallelism().map_or(8, |n| (n.get() * 4).clamp(4, 16)),
            in_flight: 64 << 20,
            stream_over: 8 << 20,
            chunk: 1 << 20,
        }
    }

    /// What a job holds in memory until it is written: the object, or a streamed object's
    /// queued chunks plus the one being read and the one being compressed.
    fn charge(&self, size: u64) -> u64 {
        if size > self.stream_over {
            (STREAM_QUEUE as u64 + 2) * self.chunk as u64
        } else {
            size
        }
    }
}

/// What a worker sends the writer about one blob.
enum Piece {
    /// The whole object's stored bytes.
    Whole {
        stored: Vec<u8>,
        len: u64,
        zstd: bool,
    },
    /// A streamed object starts; its stored bytes follow as chunks.
    Start { zstd: bool },
    /// Stored bytes of a streamed object.
    Chunk(Vec<u8>),
    /// The streamed object ended and hashed to its id.
    End { len: u64 },
    /// The object could not be read or is corrupt: the pack fails with this.
    Failed(StoreError),
}

/// One blob to read, with the channel its pieces go to.
struct Job {
    id: ObjectId,
    size: u64,
    to_writer: SyncSender<Piece>,
}

/// Bytes in flight, taken by the dispatcher and given back by the writer.
struct Budget {
    used: Mutex<u64>,
    freed: Condvar,
    cap: u64,
}

impl Budget {
    /// Waits until `n` more bytes fit (or nothing else is in flight); false once `stop` is set.
    fn take(&self, n: u64, stop: &AtomicBool) -> bool {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used > 0 && *used + n > self.cap {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        *used += n;
        !stop.load(Ordering::Relaxed)
    }

    fn give(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }

    /// Wakes a dispatcher waiting in [`Budget::take`] so it sees the stop flag.
    fn wake(&self) {
        let _used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        self.freed.notify_all();
    }
}

/// Writes `blobs` (read from `store`, verified against their ids, each stored raw or as one
/// zstd frame) to `w` in the given order, adding their index entries and calling `progress`
/// with each object's uncompressed length once it is written.
pub(crate) fn write_blobs(
    objects: &ObjectDir,
    blobs: &[(ObjectId, u64)],
    tuning: &Tuning,
    w: &mut HashingWriter<'_>,
    index: &mut Vec<PackEntry>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), StoreError> {
    if blobs.is_empty() {
        return Ok(());
    }
    let stop = AtomicBool::new(false);
    let budget = Budget {
        used: Mutex::new(0),
        freed: Condvar::new(),
        cap: tuning.in_flight.max(1),
    };
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let (order_tx, order_rx) = mpsc::sync_channel::<Receiver<Piece>>(MAX_JOBS_AHEAD);
    std::thread::scope(|scope| {
        for _ in 0..tuning.workers.max(1) {
            let (job_rx, stop) = (&job_rx, &stop);
            scope.spawn(move || worker(objects, tuning, job_rx, stop));
        }
        let (budget_ref, stop_ref) = (&budget, &stop);
        scope.spawn(move || {
            for (id, size) in blobs {
                if !budget_ref.take(tuning.charge(*size), stop_ref) {
                    break;
                }
                let (to_writer, from_worker) = mpsc::sync_channel(STREAM_QUEUE);
                let job = Job {
                    id: *id,
                    size: *size,
                    to_writer,
                };
                if job_tx.send(job).is_err() || order_tx.send(from_worker).is_err() {
                    break;
                }
            }
            // Dropping `job_tx` here ends the workers once the queue is empty.
        });
        let written = write_in_order(blobs, tuning, &budget, order_rx, w, index, progress);
        // Whatever happened, nothing more is needed: the dispatcher and the workers stop at
        // their next step (the receivers they would send to are gone with `order_rx`).
        stop.store(true, Ordering::Relaxed);
        budget.wake();
        written
    })
}

/// The writer: takes each job's pieces in walk order and writes them.
fn write_in_order(
    blobs: &[(ObjectId, u64)],
    tuning: &Tuning,
    budget: &Budget,
    order_rx: Receiver<Receiver<Piece>>,
    w: &mut HashingWriter<'_>,
    index: &mut Vec<PackEntry>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), StoreError> {
    let stopped = || StoreError::PackOutput {
        op: "write",
        error: io::Error::other("a pack worker stopped unexpectedly"),
    };
    for (id, size) in blobs {
        let pieces = order_rx.recv().map_err(|_| stopped())?;
        match pieces.recv().map_err(|_| stopped())? {
            Piece::Whole { stored, len, zstd } => {
                index.push(PackEntry {
                    id: *id,
                    offset: w.written,
                    stored_len: stored.len() as u64,
                    len,
                    zstd,
                });
                w.write_all(&stored).map_err(write_err)?;
                drop(stored);
                budget.give(tuning.charge(*size));
                progress(len);
            }
            Piece::Start { zstd } => {
                let offset = w.written;
                let len = loop {
                    match pieces.recv().map_err(|_| stopped())? {
                        Piece::Chunk(bytes) => w.write_all(&bytes).map_err(write_err)?,
                        Piece::End { len } => break len,
                        Piece::Failed(e) => return Err(e),
                        Piece::Whole { .. } | Piece::Start { .. } => return Err(stopped()),
                    }
                };
                index.push(PackEntry {
                    id: *id,
                    offset,
                    stored_len: w.written - offset,
                    len,
                    zstd,
                });
                budget.give(tuning.charge(*size));
                progress(len);
            }
            Piece::Failed(e) => return Err(e),
            Piece::Chunk(_) | Piece::End { .. } => return Err(stopped()),
        }
    }
    Ok(())
}

/// One worker: takes jobs until the queue closes, skipping them once the writer stopped.
fn worker(objects: &ObjectDir, tuning: &Tuning, jobs: &Mutex<Receiver<Job>>, stop: &AtomicBool) {
    // A context per worker, reused for every object (creating one per object costs more than
    // compressing a small file).
    let mut zstd = zstd::bulk::Compressor::new(ZSTD_LEVEL).map_err(|e| e.to_string());
    let mut probe_buf = Vec::with_capacity(zstd::zstd_safe::compress_bound(PROBE));
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        if stop.load(Ordering::Relaxed) {
            continue;
        }
        let z = match zstd.as_mut() {
            Ok(z) => z,
            Err(why) => {
                let e = io::Error::other(why.clone());
                let _ = job.to_writer.send(Piece::Failed(StoreError::PackOutput {
                    op: "start zstd for",
                    error: e,
                }));
                continue;
            }
        };
        let result = if job.size > tuning.stream_over {
            stream(objects, &job, tuning, z, &mut probe_buf, stop)
        } else {
            whole(objects, &job, z, &mut probe_buf)
                .and_then(|piece| job.to_writer.send(piece).map_err(|_| Sent::WriterGone))
        };
        if let Err(Sent::Failed(e)) = result {
            let _ = job.to_writer.send(Piece::Failed(e));
        }
    }
}

/// Why a worker stopped a job.
enum Sent {
    /// The object failed: the writer must report it.
    Failed(StoreError),
    /// The writer is gone (it failed or stopped): nothing to report.
    WriterGone,
}

impl From<StoreError> for Sent {
    fn from(e: StoreError) -> Sent {
        Sent::Failed(e)
    }
}

/// Opens a blob and checks its length against the tree's.
fn open(objects: &ObjectDir, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
    check_len(objects.open_blob(id)?, id, size)
}

/// `blob`, when it has the length the tree records.
fn check_len(blob: Blob, id: &ObjectId, size: u64) -> Result<Blob, StoreError> {
    if blob.len() != size {
        return Err(StoreError::CorruptObject {
            id: *id,
            actual: ObjectId::of(b""),
        });
    }
    Ok(blob)
}

/// Fills `buf` from `pos` of `blob` (the blob's length was checked, so a short read means the
/// object shrank underneath: an error).
fn read_full(blob: &Blob, id: &ObjectId, buf: &mut [u8], pos: u64) -> Result<(), StoreError> {
    let mut done = 0;
    while done < buf.len() {
        let n = blob
            .read_at(&mut buf[done..], pos + done as u64)
            .map_err(|e| StoreError::io("read object", id.to_hex(), e))?;
        if n == 0 {
            return Err(StoreError::io(
                "read object",
                id.to_hex(),
                io::Error::new(io::ErrorKind::UnexpectedEof, "object shorter than recorded"),
            ));
        }
        done += n;
    }
    Ok(())
}

/// True when `head` (the first bytes of an object) compresses by at least 2% at the pack's level.
fn worth_compressing(z: &mut zstd::bulk::Compressor<'_>, head: &[u8], buf: &mut Vec<u8>) -> bool {
    buf.clear();
    match z.compress_to_buffer(head, buf) {
        Ok(n) => (n as u64) * 100 < (head.len() as u64) * 98,
        Err(_) => false,
    }
}

/// A blob up to the streaming threshold: read whole, verified, compressed when that pays.
fn whole(
    objects: &ObjectDir,
    job: &Job,
    z: &mut zstd::bulk::Compressor<'_>,
    probe_buf: &mut Vec<u8>,
) -> Result<Piece, Sent> {
    let blob = match objects.open_stored_of_len(&job.id, job.size)? {
        Stored::Compressed { frame, bytes } if job.size <= PROBE as u64 => {
            return copy_frame(job, frame, &bytes)
        }
        stored => check_len(stored.into_blob()?, &job.id, job.size)?,
    };
    let len = usize::try_from(job.size).expect("streaming threshold fits in memory");
    let mut bytes = vec![0u8; len];
    read_full(&blob, &job.id, &mut bytes, 0)?;
    let actual = ObjectId::of(&bytes);
    if actual != job.id {
        return Err(StoreError::CorruptObject { id: job.id, actual }.into());
    }
    let try_it =
        len >= MIN_COMPRESS && (len <= PROBE || worth_compressing(z, &bytes[..PROBE], probe_buf));
    let compressed = if try_it {
        z.compress(&bytes).ok().filter(|c| c.len() < bytes.len())
    } else {
        None
    };
    Ok(match compressed {
        Some(stored) => Piece::Whole {
            stored,
            len: job.size,
            zstd: true,
        },
        None => Piece::Whole {
            stored: bytes,
            len: job.size,
            zstd: false,
        },
    })
}

/// A blob of at most [`PROBE`] bytes the store keeps compressed: its frame goes into the pack
/// as it is, once its decoded bytes are verified. zstd is deterministic, and the store keeps a
/// frame only when it is shorter than the bytes, so this is exactly the frame [`whole`] would
/// make from them: a pack is byte for byte the same whichever form the store keeps. (A larger
/// one goes through [`whole`]'s probe, which may store it raw.) Saves compressing every
/// small text file again: a pack of the bench corpus (19,859 files, 602 MiB) took 1.00 s of
/// CPU instead of 1.68 s (medians of 5 interleaved rounds, same pack bytes).
fn copy_frame(job: &Job, frame: Vec<u8>, bytes: &[u8]) -> Result<Piece, Sent> {
    if bytes.len() as u64 != job.size {
        // As `check_len` reports it.
        return Err(StoreError::CorruptObject {
            id: job.id,
            actual: ObjectId::of(b""),
        }
        .into());
    }
    let actual = ObjectId::of(bytes);
    if actual != job.id {
        return Err(StoreError::CorruptObject { id: job.id, actual }.into());
    }
    Ok(Piece::Whole {
        stored: frame,
        len: job.size,
        zstd: true,
    })
}

/// A blob over the streaming threshold: read, hashed and (when its first bytes compress)
/// compressed into one zstd frame a chunk at a time, each chunk sent as soon as it is ready.
fn stream(
    objects: &ObjectDir,
    job: &Job,
    tuning: &Tuning,
    z: &mut zstd::bulk::Compressor<'_>,
    probe_buf: &mut Vec<u8>,
    stop: &AtomicBool,
) -> Result<(), Sent> {
    let blob = open(objects, &job.id, job.size)?;
    let chunk = tuning.chunk.max(PROBE);
    let mut buf = vec![0u8; chunk];
    let first = chunk.min(usize::try_from(job.size).unwrap_or(usize::MAX));
    read_full(&blob, &job.id, &mut buf[..first], 0)?;
    let zstd = worth_compressing(z, &buf[..PROBE.min(first)], probe_buf);
    let send = |piece| job.to_writer.send(piece).map_err(|_| Sent::WriterGone);
    send(Piece::Start { zstd })?;
    let mut hasher = IdHasher::new();
    let mut sink = ChunkSink {
        to_writer: &job.to_writer,
        buf: Vec::with_capacity(chunk),
        chunk,
    };
    let gone = |_: io::Error| Sent::WriterGone;
    let mut encoder = if zstd {
        // The frame records the object's length, as a whole-buffer compression does.
        let mut e = zstd::stream::raw::Encoder::new(ZSTD_LEVEL)
            .map_err(|e| StoreError::io("start zstd for", job.id.to_hex(), e))?;
        e.set_pledged_src_size(Some(job.size))
            .map_err(|e| StoreError::io("start zstd for", job.id.to_hex(), e))?;
        Some(e)
    } else {
        None
    };
    let mut pos = 0u64;
    let mut n = first;
    loop {
        hasher.update(&buf[..n]);
        match encoder.as_mut() {
            Some(e) => compress_into(e, &buf[..n], &mut sink, &job.id)?,
            None => sink.write_all(&buf[..n]).map_err(gone)?,
        }
        pos += n as u64;
        if pos >= job.size {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            return Err(Sent::WriterGone);
        }
        n = chunk.min(usize::try_from(job.size - pos).unwrap_or(usize::MAX));
        read_full(&blob, &job.id, &mut buf[..n], pos)?;
    }
    if let Some(e) = encoder.as_mut() {
        finish_into(e, &mut sink, &job.id)?;
    }
    let actual = hasher.finish();
    if actual != job.id {
        return Err(StoreError::CorruptObject { id: job.id, actual }.into());
    }
    sink.flush().map_err(gone)?;
    send(Piece::End { len: job.size })
}

/// Feeds `input` to the zstd stream, passing its output to `sink`.
fn compress_into(
    e: &mut zstd::stream::raw::Encoder<'_>,
    mut input: &[u8],
    sink: &mut ChunkSink<'_>,
    id: &ObjectId,
) -> Result<(), Sent> {
    use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
    let mut out = vec![0u8; zstd::zstd_safe::CCtx::out_size()];
    while !input.is_empty() {
        let mut inb = InBuffer::around(input);
        let mut outb = OutBuffer::around(&mut out[..]);
        e.run(&mut inb, &mut outb)
            .map_err(|err| StoreError::io("compress object", id.to_hex(), err))?;
        let (consumed, produced) = (inb.pos(), outb.pos());
        sink.write_all(&out[..produced])
            .map_err(|_| Sent::WriterGone)?;
        input = &input[consumed..];
    }
    Ok(())
}

/// Ends the zstd frame, passing the rest of its output to `sink`.
fn finish_into(
    e: &mut zstd::stream::raw::Encoder<'_>,
    sink: &mut ChunkSink<'_>,
    id: &ObjectId,
) -> Result<(), Sent> {
    use zstd::stream::raw::{Operation, OutBuffer};
    let mut out = vec![0u8; zstd::zstd_safe::CCtx::out_size()];
    loop {
        let mut outb = OutBuffer::around(&mut out[..]);
        let left = e
            .finish(&mut outb, true)
            .map_err(|err| StoreError::io("compress object", id.to_hex(), err))?;
        let produced = outb.pos();
        sink.write_all(&out[..produced])
            .map_err(|_| Sent::WriterGone)?;
        if left == 0 {
            return Ok(());
        }
    }
}

/// Gathers a streamed object's stored bytes into chunks and sends each full one to the writer.
struct ChunkSink<'t> {
    to_writer: &'t SyncSender<Piece>,
    buf: Vec<u8>,
    chunk: usize,
}

impl Write for ChunkSink<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let room = self.chunk - self.buf.len();
        let n = room.min(bytes.len());
        self.buf.extend_from_slice(&bytes[..n]);
        if self.buf.len() == self.chunk {
            self.flush()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let full = std::mem::replace(&mut self.buf, Vec::with_capacity(self.chunk));
        self.to_writer
            .send(Piece::Chunk(full))
            .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

#[cfg(test)]
mod tests {
    //! Pins: the pipeline writes the same bytes as one worker in walk order (whatever the
    //! workers, the budget, or which read finishes first); objects over the streaming threshold
    //! arrive whole and verified; the probe stores incompressible data raw; a worker's error is
    //! the pack's error, the first in walk order.

    use super::*;
    use crate::handle::Store;
    use crate::pack::{PackOptions, PackReader};
    use crate::snapshot::Snapshot;
    use crate::tree::{EntryKind, Tree, TreeEntry};
    use std::collections::HashMap;

    /// Deterministic incompressible bytes (xorshift64*).
    fn random(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// Compressible text-like bytes.
    fn text(len: usize, seed: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 64);
        let mut i = seed;
        while out.len() < len {
            out.extend_from_slice(format!("line {i} of a note, seed {seed}\n").as_bytes());
            i += 1;
        }
        out.truncate(len);
        out
    }

    struct Fixture {
        _dir: tempfile::TempDir,
        store: Store,
        snapshot: ObjectId,
        contents: HashMap<ObjectId, Vec<u8>>,
    }

    /// A store with one snapshot of `dirs` directories, each holding `files`; `extra` adds
    /// files to the root.
    fn fixture(dirs: usize, files: &[Vec<u8>], extra: &[(&str, Vec<u8>)]) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_or_create(&dir.path().join("s")).unwrap();
        let mut contents = HashMap::new();
        let mut file = |name: String, bytes: &[u8]| {
            let id = store.objects().write_bytes(bytes).unwrap();
            contents.insert(id, bytes.to_vec());
            TreeEntry {
                name: name.into_bytes(),
                kind: EntryKind::File,
                mode: 0o644,
                size: bytes.len() as u64,
                id,
            }
        };
        let mut root = Vec::new();
        for d in 0..dirs {
            let entries = files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    // Each directory's files differ, so every one is its own object.
                    let mut bytes = f.clone();
                    if !bytes.is_empty() {
                        bytes[0] = bytes[0].wrapping_add(d as u8);
                    }
                    file(format!("f{i}"), &bytes)
                })
                .collect();
            let tree = Tree::from_entries(entries).unwrap();
            root.push(TreeEntry {
                name: format!("d{d:03}").into_bytes(),
                kind: EntryKind::Dir,
                mode: 0o755,
                size: 0,
                id: store.objects().write_tree(&tree).unwrap(),
            });
        }
        for (name, bytes) in extra {
            root.push(file(name.to_string(), bytes));
        }
        root.sort_by(|a, b| a.name.cmp(&b.name));
        let root_id = store
            .objects()
            .write_tree(&Tree::from_entries(root).unwrap())
            .unwrap();
        let snap = Snapshot::for_test(root_id, "test");
        let lock = store.write_lock().unwrap();
        let snapshot = store.catalog().commit_snapshot(&lock, &snap, None).unwrap();
        Fixture {
            _dir: dir,
            store,
            snapshot,
            contents,
        }
    }

    fn pack(f: &Fixture, tuning: &Tuning) -> Result<Vec<u8>, StoreError> {
        let mut out = Vec::new();
        let mut progressed = 0;
        f.store.packs().write_tuned(
            &f.store.objects().reader(),
            &f.snapshot,
            PackOptions::default(),
            tuning,
            &mut out,
            &mut |n| progressed += n,
        )?;
        let reader = open(f, &out);
        let total: u64 = reader.entries().iter().map(|e| e.len).sum();
        assert_eq!(
            progressed, total,
            "progress reports every object's bytes once"
        );
        Ok(out)
    }

    /// Opens pack bytes, verifies them, and checks every blob against what was stored.
    fn open(f: &Fixture, bytes: &[u8]) -> PackReader {
        let path = f
            ._dir
            .path()
            .join(format!("p{}.zcpack", crate::sys::random_token()));
        std::fs::write(&path, bytes).unwrap();
        let reader = PackReader::open(&path).unwrap();
        reader.verify().unwrap();
        for (id, want) in &f.contents {
            assert!(reader.read(id).unwrap() == *want, "blob {id} round-trips");
        }
        reader
    }

    fn tuning(workers: usize) -> Tuning {
        Tuning {
            workers,
            ..Tuning::for_host()
        }
    }

    fn mixed_files() -> Vec<Vec<u8>> {
        vec![
            Vec::new(),
            b"hi\n".to_vec(),
            text(3000, 1),
            random(5000, 2),
            text(200 * 1024, 3),
            random(300 * 1024, 4),
        ]
    }

    #[test]
    fn any_number_of_workers_writes_the_same_bytes_as_one() {
        let f = fixture(40, &mixed_files(), &[]);
        let one = pack(&f, &tuning(1)).unwrap();
        for workers in [2, 3, 8, 16] {
            assert!(
                pack(&f, &tuning(workers)).unwrap() == one,
                "{workers} workers"
            );
        }
        // A budget smaller than any object: one job in flight at a time, same bytes.
        let starved = Tuning {
            in_flight: 1,
            ..tuning(8)
        };
        assert!(pack(&f, &starved).unwrap() == one, "a one-byte budget");
        assert!(
            pack(&f, &Tuning::for_host()).unwrap() == one,
            "packed again"
        );
    }

    #[test]
    fn objects_over_the_streaming_threshold_are_streamed_whole_and_verified() {
        // 9 MiB objects under the real tuning (over its 8 MiB threshold) ...
        let big_text = text(9 << 20, 7);
        let big_random = random(9 << 20, 8);
        let f = fixture(
            3,
            &mixed_files(),
            &[
                ("big.txt", big_text.clone()),
                ("big.bin", big_random.clone()),
            ],
        );
        let host = pack(&f, &Tuning::for_host()).unwrap();
        let reader = open(&f, &host);
        let entry = |bytes: &[u8]| *reader.entry(&ObjectId::of(bytes)).unwrap();
        let t = entry(&big_text);
        assert!(
            t.zstd && t.stored_len < t.len / 4,
            "text is one zstd frame: {t:?}"
        );
        let r = entry(&big_random);
        assert!(
            !r.zstd && r.stored_len == r.len,
            "random data is stored raw: {r:?}"
        );
        assert!(
            pack(&f, &tuning(1)).unwrap() == host,
            "one worker, same bytes"
        );

        // ... and a threshold so small that most objects stream, in many chunks.
        let small = Tuning {
            workers: 4,
            in_flight: 1 << 20,
            stream_over: 4096,
            chunk: PROBE,
        };
        let streamed = pack(&f, &small).unwrap();
        let reader = open(&f, &streamed);
        let e = *reader.entry(&ObjectId::of(&big_text)).unwrap();
        assert!(e.zstd && e.stored_len < e.len / 4, "{e:?}");
        assert!(
            pack(
                &f,
                &Tuning {
                    workers: 1,
                    ..small
                }
            )
            .unwrap()
                == streamed
        );
    }

    #[test]
    fn data_whose_start_does_not_compress_is_stored_raw() {
        // Random first 128 KiB, then text: the one-thread writer compressed it whole.
        let mut mixed = random(PROBE, 9);
        mixed.extend_from_slice(&text(PROBE, 10));
        let f = fixture(
            0,
            &[],
            &[("mixed", mixed.clone()), ("t", text(PROBE * 2, 11))],
        );
        let reader = open(&f, &pack(&f, &tuning(2)).unwrap());
        let e = *reader.entry(&ObjectId::of(&mixed)).unwrap();
        assert!(!e.zstd && e.stored_len == e.len, "{e:?}");
        let e = *reader.entry(&ObjectId::of(&text(PROBE * 2, 11))).unwrap();
        assert!(e.zstd, "{e:?}");
    }

    /// Blob ids in walk order (the order a pack stores them).
    fn walk_order(f: &Fixture) -> Vec<ObjectId> {
        let bytes = pack(f, &tuning(1)).unwrap();
        let reader = open(f, &bytes);
        let mut entries: Vec<_> = reader
            .entries()
            .iter()
            .filter(|e| f.contents.contains_key(&e.id))
            .copied()
            .collect();
        entries.sort_by_key(|e| e.offset);
        entries.into_iter().map(|e| e.id).collect()
    }

    #[test]
    fn a_missing_object_fails_the_pack_naming_the_first_in_walk_order() {
        let f = fixture(30, &mixed_files(), &[]);
        let order = walk_order(&f);
        for id in [order[7], order[order.len() - 3], order[order.len() - 1]] {
            std::fs::remove_file(f.store.objects().file_of(&id).unwrap()).unwrap();
        }
        for workers in [1, 8] {
            match pack(&f, &tuning(workers)) {
                Err(StoreError::MissingObject(id)) => assert_eq!(id, order[7], "{workers}"),
                other => panic!("{workers} workers: {:?}", other.map(|b| b.len())),
            }
        }
    }

    /// Flips one byte in the middle of an object's file (same length).
    fn corrupt(store: &Store, id: &ObjectId) {
        use std::os::unix::fs::{FileExt, PermissionsExt};
        let path = store.objects().file_of(id).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        file.write_all_at(b"\xff\x00", len / 2).unwrap();
    }

    #[test]
    fn a_corrupt_object_fails_the_pack_whole_or_streamed() {
        let big = text(2 << 20, 12);
        let f = fixture(10, &mixed_files(), &[("big", big.clone())]);
        let order = walk_order(&f);
        let small = Tuning {
            stream_over: 1 << 20,
            ..tuning(4)
        };
        corrupt(&f.store, &ObjectId::of(&big));
        match pack(&f, &small) {
            Err(StoreError::CorruptObject { id, .. }) => assert_eq!(id, ObjectId::of(&big)),
            other => panic!("streamed: {:?}", other.map(|b| b.len())),
        }
        let victim = order[order.len() / 2];
        assert_ne!(victim, ObjectId::of(&big));
        corrupt(&f.store, &victim);
        match pack(&f, &tuning(8)) {
            Err(StoreError::CorruptObject { id, .. }) => {
                let first = order
                    .iter()
                    .find(|o| **o == victim || **o == ObjectId::of(&big))
                    .unwrap();
                assert_eq!(id, *first);
            }
            other => panic!("whole: {:?}", other.map(|b| b.len())),
        }
    }

    #[test]
    fn a_writer_that_fails_stops_the_pipeline() {
        /// Accepts `left` bytes, then fails like a closed pipe.
        struct Closing {
            left: usize,
        }
        impl Write for Closing {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.left == 0 {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                let n = buf.len().min(self.left);
                self.left -= n;
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let f = fixture(20, &mixed_files(), &[("big", random(3 << 20, 13))]);
        let small = Tuning {
            stream_over: 1 << 20,
            in_flight: 2 << 20,
            ..tuning(8)
        };
        for left in [0, 100, 300_000, 2_000_000, 5_000_000] {
            let mut out = Closing { left };
            let r = f.store.packs().write_tuned(
                &f.store.objects().reader(),
                &f.snapshot,
                PackOptions::default(),
                &small,
                &mut out,
                &mut |_| {},
            );
            match r {
                Err(StoreError::PackOutput { error, .. }) => {
                    assert_eq!(error.kind(), io::ErrorKind::BrokenPipe, "after {left}")
                }
                other => panic!("after {left}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_pack_reads_its_trees_from_the_snapshot_tree_index() {
        // (pack.rs's walk, pinned here beside the writer's other tests.) With a tree object
        // gone from objects/, only the snapshot's tree index can supply it: one read instead
        // of one object file per tree, which is most of a cold pack's start.
        let f = fixture(5, &mixed_files(), &[]);
        let root = f.store.objects().read_snapshot(&f.snapshot).unwrap().root;
        assert!(f.store.index().tree_index_path(&root).exists());
        let sub = f.store.objects().read_tree(&root).unwrap().entries()[2].id;
        std::fs::remove_file(f.store.objects().file_of(&sub).unwrap()).unwrap();
        let mut out = Vec::new();
        f.store
            .packs()
            .write(&f.snapshot, PackOptions::default(), &mut out, &mut |_| {})
            .unwrap();
        assert!(open(&f, &out).entry(&sub).is_some());
    }
}
