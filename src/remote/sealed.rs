//! The object store of an encrypted remote: a real `ObjectStore` in front of the bucket that
//! the rest of `remote` uses as if it held plaintext under plaintext names.
//!
//! - **Names**: the first component of a key (`packs`, `index`, `trees`, `signatures`,
//!   `snapshots`, `gc`) stays; every later one is replaced by its keyed name
//!   ([`DataKeys::name`] of `kind/depth/component`), so no blake3 id, pack id or snapshot id
//!   appears in the bucket, and the layout's depth is kept (listings still tell a direct entry).
//! - **Bytes**: each object is one age file under the remote's newest data key, whose plaintext
//!   is a fixed [`PATH_HEAD`]-byte header holding the object's plaintext key, then its bytes.
//!   The header binds an object to its name: an object copied or moved to another key is
//!   refused as tampered, as is any changed byte (age authenticates each 64 KiB chunk).
//! - **Ranged reads** stay ranged: age's STREAM chunks are fixed-size, so a range of plaintext
//!   is a range of chunks; a read fetches the object's first window once (header, first chunk,
//!   cached per key) and then only the chunks it needs, decrypted through a seekable
//!   [`age::stream::StreamReader`] over what was fetched.
//! - **Listings** return plaintext keys: each listed keyed name is read back from its header
//!   (the first window; a small object is then cached whole, so reading it costs nothing more).
//!   A listed object that fails authentication, or whose header names another key, fails the
//!   listing naming it.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::stream::{BoxStream, StreamExt as _};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetRange, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    UploadPart,
};

use crate::crypt::DataKeys;

/// The bytes of plaintext header (the object's plaintext key, a newline, zero padding) before
/// an object's own bytes.
pub const PATH_HEAD: u64 = 256;
/// age's STREAM: plaintext bytes per chunk, and the same chunk encrypted (a 16-byte tag).
const CHUNK: u64 = 64 << 10;
const SEALED_CHUNK: u64 = CHUNK + 16;
/// The first window of an object read to learn its layout: the age header (one X25519
/// stanza, a few hundred bytes; up to 4 KiB taken), the nonce and the first chunk whole.
const WINDOW: u64 = 4096 + 16 + SEALED_CHUNK;

/// What the first window of an object told.
#[derive(Clone)]
struct Layout {
    /// The age header and nonce (everything before the first chunk).
    head: Vec<u8>,
    /// The object's size in the bucket.
    sealed_size: u64,
    /// The object's own bytes' size (after [`PATH_HEAD`]).
    size: u64,
    /// The object's own bytes, when the window held it whole.
    whole: Option<Arc<Vec<u8>>>,
    /// The bucket's metadata of the object (its time, for listings).
    sealed_meta: ObjectMeta,
}

struct State {
    inner: Arc<dyn ObjectStore>,
    keys: DataKeys,
    /// Keyed key -> plaintext key, for every key named or read back.
    names: Mutex<HashMap<String, String>>,
    /// Keyed key -> layout.
    layouts: Mutex<HashMap<String, Layout>>,
}

/// The sealing wrapper (cheap to clone: listings carry it into their streams).
#[derive(Clone)]
pub struct Sealed(Arc<State>);

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealed({})", self.0.inner)
    }
}

impl fmt::Display for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sealed({})", self.0.inner)
    }
}

fn refuse(key: &str, why: impl fmt::Display) -> object_store::Error {
    object_store::Error::Generic {
        store: "encrypted remote",
        source: format!("{key}: {why}").into(),
    }
}

/// Where age's payload starts: after the header's `--- MAC` line and the 16-byte nonce.
fn payload_start(window: &[u8]) -> Option<u64> {
    let at = window.windows(5).position(|w| w == b"\n--- ")?;
    let end = at + 5 + window[at + 5..].iter().position(|&b| b == b'\n')? + 1;
    Some(end as u64 + 16)
}

/// The plaintext size of an age file of `sealed_size` bytes whose payload starts at `start`.
fn plain_size(sealed_size: u64, start: u64) -> Option<u64> {
    let payload = sealed_size.checked_sub(start)?;
    let rem = payload % SEALED_CHUNK;
    let last = match rem {
        0 => 0,
        r => r.checked_sub(16)?,
    };
    Some(payload / SEALED_CHUNK * CHUNK + last)
}

/// A sparse view of an object: its size, and the pieces of it that were fetched. Reading
/// where nothing was fetched is an error (it never happens: reads ask only for the chunks a
/// range needs).
struct Sparse {
    len: u64,
    pieces: Vec<(u64, Vec<u8>)>,
    pos: u64,
}

impl Read for Sparse {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len || buf.is_empty() {
            return Ok(0);
        }
        for (at, bytes) in &self.pieces {
            let end = at + bytes.len() as u64;
            if (*at..end).contains(&self.pos) {
                let from = (self.pos - at) as usize;
                let n = buf.len().min(bytes.len() - from);
                buf[..n].copy_from_slice(&bytes[from..from + n]);
                self.pos += n as u64;
                return Ok(n);
            }
        }
        Err(io::Error::other(format!(
            "byte {} of the object was not fetched",
            self.pos
        )))
    }
}

impl Seek for Sparse {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.pos = match pos {
            SeekFrom::Start(n) => n,
            SeekFrom::End(d) => self.len.saturating_add_signed(d),
            SeekFrom::Current(d) => self.pos.saturating_add_signed(d),
        };
        Ok(self.pos)
    }
}

impl Sealed {
    /// Wraps `inner`, sealing under `keys`.
    pub fn new(inner: Arc<dyn ObjectStore>, keys: DataKeys) -> Sealed {
        Sealed(Arc::new(State {
            inner,
            keys,
            names: Mutex::new(HashMap::new()),
            layouts: Mutex::new(HashMap::new()),
        }))
    }

    /// The keyed key of plaintext key `plain`.
    fn keyed(&self, plain: &Path) -> Path {
        let parts: Vec<String> = plain.parts().map(|p| p.as_ref().to_string()).collect();
        let Some((kind, rest)) = parts.split_first() else {
            return plain.clone();
        };
        let mut keyed = kind.clone();
        for (depth, part) in rest.iter().enumerate() {
            keyed.push('/');
            keyed.push_str(&self.0.keys.name(&format!("{kind}/{depth}/{part}")));
        }
        let mut names = self.0.names.lock().unwrap_or_else(|e| e.into_inner());
        names.insert(keyed.clone(), plain.to_string());
        Path::from(keyed)
    }

    fn forget(&self, keyed: &Path) {
        let mut layouts = self.0.layouts.lock().unwrap_or_else(|e| e.into_inner());
        layouts.remove(keyed.as_ref());
    }

    /// Checks a decrypted header names `plain`.
    fn check_head(head: &[u8], plain: &str) -> std::result::Result<(), String> {
        let named = head.split(|&b| b == b'\n').next().unwrap_or_default();
        if named == plain.as_bytes() {
            Ok(())
        } else {
            Err(format!(
                "its sealed header names {:?}: an object moved from another key",
                String::from_utf8_lossy(named)
            ))
        }
    }

    /// The layout of the object at `keyed` (plaintext key `plain`, `None`: read it from the
    /// object): one ranged GET of its first window, cached.
    async fn layout(&self, keyed: &Path, plain: Option<&str>) -> Result<(Layout, String)> {
        if let Some(plain) = plain {
            let cached = {
                let layouts = self.0.layouts.lock().unwrap_or_else(|e| e.into_inner());
                layouts.get(keyed.as_ref()).cloned()
            };
            if let Some(l) = cached {
                return Ok((l, plain.to_string()));
            }
        }
        let shown = plain.unwrap_or(keyed.as_ref()).to_string();
        let got = self
            .0
            .inner
            .get_opts(
                keyed,
                GetOptions {
                    range: Some(GetRange::Bounded(0..WINDOW)),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| match e {
                object_store::Error::NotFound { path, source } => {
                    object_store::Error::NotFound { path, source }
                }
                e => e,
            })?;
        let sealed_size = got.meta.size;
        let sealed_meta = got.meta.clone();
        let window = got.bytes().await?.to_vec();
        let tampered = |why: String| refuse(&shown, format!("authentication failed: {why}"));
        let start = payload_start(&window).ok_or_else(|| tampered("no age header".into()))?;
        let age_plain = plain_size(sealed_size, start)
            .filter(|n| *n >= PATH_HEAD)
            .ok_or_else(|| tampered("cut short".into()))?;
        let size = age_plain - PATH_HEAD;
        let (head, whole) = if window.len() as u64 == sealed_size {
            let all = self
                .0
                .keys
                .open(&window, &shown)
                .map_err(|e| refuse(&shown, e))?;
            let (head, rest) = all.split_at(PATH_HEAD as usize);
            (head.to_vec(), Some(Arc::new(rest.to_vec())))
        } else {
            let mut sparse = Sparse {
                len: sealed_size,
                pieces: vec![(0, window.clone())],
                pos: 0,
            };
            let mut head = vec![0u8; PATH_HEAD as usize];
            let mut reader = self
                .0
                .keys
                .reader(&mut sparse, &shown)
                .map_err(|e| refuse(&shown, e))?;
            reader
                .read_exact(&mut head)
                .map_err(|e| tampered(e.to_string()))?;
            (head, None)
        };
        let named = String::from_utf8_lossy(head.split(|&b| b == b'\n').next().unwrap_or_default())
            .into_owned();
        let plain = match plain {
            Some(p) => {
                Self::check_head(&head, p).map_err(|why| refuse(p, why))?;
                p.to_string()
            }
            None => {
                // Read back from a listing: the name must map to the key it was listed at.
                if self.keyed(&Path::from(named.as_str())) != *keyed {
                    return Err(refuse(
                        keyed.as_ref(),
                        format!("its sealed header names {named:?}, which is not kept here"),
                    ));
                }
                named
            }
        };
        let layout = Layout {
            head: window[..start as usize].to_vec(),
            sealed_size,
            size,
            whole,
            sealed_meta,
        };
        let mut layouts = self.0.layouts.lock().unwrap_or_else(|e| e.into_inner());
        layouts.insert(keyed.to_string(), layout.clone());
        Ok((layout, plain))
    }

    /// Bytes `range` of the object's own bytes: the chunks that hold them, one ranged GET.
    async fn read_range(
        &self,
        keyed: &Path,
        plain: &str,
        layout: &Layout,
        range: Range<u64>,
    ) -> Result<Vec<u8>> {
        if let Some(whole) = &layout.whole {
            return Ok(whole[range.start as usize..range.end as usize].to_vec());
        }
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let start = layout.head.len() as u64;
        let (a, b) = (range.start + PATH_HEAD, range.end + PATH_HEAD);
        let (first, last) = (a / CHUNK, (b - 1) / CHUNK);
        let from = start + first * SEALED_CHUNK;
        let to = (start + (last + 1) * SEALED_CHUNK).min(layout.sealed_size);
        let got = self
            .0
            .inner
            .get_opts(
                keyed,
                GetOptions {
                    range: Some(GetRange::Bounded(from..to)),
                    ..Default::default()
                },
            )
            .await?;
        if got.meta.size != layout.sealed_size {
            // Replaced since its layout was read: read afresh next time.
            self.forget(keyed);
            return Err(refuse(plain, "changed while it was read"));
        }
        let chunks = got.bytes().await?.to_vec();
        let mut sparse = Sparse {
            len: layout.sealed_size,
            pieces: vec![(0, layout.head.clone()), (from, chunks)],
            pos: 0,
        };
        let tampered = |why: String| refuse(plain, format!("authentication failed: {why}"));
        let mut reader = self
            .0
            .keys
            .reader(&mut sparse, plain)
            .map_err(|e| refuse(plain, e))?;
        reader
            .seek(SeekFrom::Start(a))
            .map_err(|e| tampered(e.to_string()))?;
        let mut out = vec![0u8; (b - a) as usize];
        reader
            .read_exact(&mut out)
            .map_err(|e| tampered(e.to_string()))?;
        if range.end == layout.size {
            // A range to the end checks the end: an object cut at a chunk boundary ends in a
            // chunk not sealed as the last one.
            let mut more = [0u8; 1];
            match reader.read(&mut more) {
                Ok(0) => {}
                Ok(_) => return Err(tampered("longer than its size".into())),
                Err(e) => return Err(tampered(e.to_string())),
            }
        }
        Ok(out)
    }

    fn meta(plain: &str, layout: &Layout) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(plain),
            size: layout.size,
            e_tag: None,
            version: None,
            ..layout.sealed_meta.clone()
        }
    }

    /// The plaintext an object's age file holds: its header, then `bytes`.
    fn framed(plain: &str, bytes: &[u8]) -> std::result::Result<Vec<u8>, String> {
        if plain.len() as u64 >= PATH_HEAD {
            return Err(format!("key {plain:?} is too long for an encrypted remote"));
        }
        let mut out = Vec::with_capacity(PATH_HEAD as usize + bytes.len());
        out.extend_from_slice(plain.as_bytes());
        out.push(b'\n');
        out.resize(PATH_HEAD as usize, 0);
        out.extend_from_slice(bytes);
        Ok(out)
    }
}

#[async_trait]
impl ObjectStore for Sealed {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let keyed = self.keyed(location);
        let mut bytes = Vec::with_capacity(payload.content_length());
        for part in &payload {
            bytes.extend_from_slice(part);
        }
        let framed =
            Self::framed(location.as_ref(), &bytes).map_err(|e| refuse(location.as_ref(), e))?;
        let sealed = self
            .0
            .keys
            .seal(&framed)
            .map_err(|e| refuse(location.as_ref(), e))?;
        self.forget(&keyed);
        self.0
            .inner
            .put_opts(&keyed, PutPayload::from(sealed), opts)
            .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let keyed = self.keyed(location);
        self.forget(&keyed);
        let framed =
            Self::framed(location.as_ref(), &[]).map_err(|e| refuse(location.as_ref(), e))?;
        let upload = self.0.inner.put_multipart_opts(&keyed, opts).await?;
        let out = Shared::default();
        let mut writer = self
            .0
            .keys
            .writer(out.clone())
            .map_err(|e| refuse(location.as_ref(), e))?;
        writer
            .write_all(&framed)
            .map_err(|e| refuse(location.as_ref(), e))?;
        Ok(Box::new(SealedUpload {
            key: location.to_string(),
            inner: upload,
            writer: Some(writer),
            out,
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let keyed = self.keyed(location);
        let plain = location.to_string();
        let (layout, _) = self.layout(&keyed, Some(&plain)).await?;
        let meta = Self::meta(&plain, &layout);
        let range = match &options.range {
            None => 0..layout.size,
            Some(r) if layout.size == 0 => {
                return Err(refuse(&plain, format!("range {r} of an empty object")));
            }
            Some(r) => r.as_range(layout.size).map_err(|e| refuse(&plain, e))?,
        };
        let bytes = if options.head {
            Vec::new()
        } else {
            self.read_range(&keyed, &plain, &layout, range.clone())
                .await?
        };
        let body = futures_util::stream::once(async move { Ok(bytes::Bytes::from(bytes)) });
        Ok(GetResult {
            payload: GetResultPayload::Stream(body.boxed()),
            meta,
            range,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let this = self.clone();
        let keyed = locations
            .map(move |p| {
                p.map(|p| {
                    let k = this.keyed(&p);
                    this.forget(&k);
                    k
                })
            })
            .boxed();
        let this = self.clone();
        self.0
            .inner
            .delete_stream(keyed)
            .map(move |p| {
                p.map(|k| {
                    let names = this.0.names.lock().unwrap_or_else(|e| e.into_inner());
                    names
                        .get(k.as_ref())
                        .map(|n| Path::from(n.as_str()))
                        .unwrap_or(k)
                })
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let keyed = prefix.map(|p| self.keyed(p));
        let this = self.clone();
        self.0
            .inner
            .list(keyed.as_ref())
            .then(move |meta| {
                let this = this.clone();
                async move {
                    let meta = meta?;
                    let (layout, plain) = this.layout(&meta.location, None).await?;
                    Ok(Sealed::meta(&plain, &layout))
                }
            })
            .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        _offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let key = prefix.map(|p| p.to_string()).unwrap_or_default();
        futures_util::stream::once(async move { Err(not_here(&key, "a listing from an offset")) })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let key = prefix.map(|p| p.to_string()).unwrap_or_default();
        Err(not_here(&key, "a delimited listing"))
    }

    async fn copy_opts(&self, from: &Path, _to: &Path, _options: CopyOptions) -> Result<()> {
        Err(not_here(from.as_ref(), "a copy"))
    }
}

fn not_here(key: &str, what: &str) -> object_store::Error {
    refuse(
        key,
        format!("{what} is not supported on an encrypted remote"),
    )
}

/// A buffer the age writer of a multipart upload writes into, drained part by part.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Shared {
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The least ciphertext sent as one part of a multipart upload (S3's minimum is 5 MiB).
const PART_MIN: usize = 6 << 20;

/// A multipart upload that encrypts as it goes: the ciphertext leaves as a part once at
/// least [`PART_MIN`] bytes of it are written, and the rest as the last part on completion.
struct SealedUpload {
    key: String,
    inner: Box<dyn MultipartUpload>,
    writer: Option<age::stream::StreamWriter<Shared>>,
    out: Shared,
}

impl fmt::Debug for SealedUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SealedUpload({})", self.key)
    }
}

#[async_trait]
impl MultipartUpload for SealedUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let written = match self.writer.as_mut() {
            None => Err(refuse(&self.key, "a part after the upload finished")),
            Some(w) => (&data)
                .into_iter()
                .try_for_each(|part| w.write_all(part))
                .map_err(|e| refuse(&self.key, e)),
        };
        if let Err(e) = written {
            return Box::pin(async move { Err(e) });
        }
        // Parts leave once they are large enough: S3 refuses a part under 5 MiB but the last
        // (the caller's own last part may be small, and age adds the final chunk after it).
        if self.out.len() < PART_MIN {
            return Box::pin(async { Ok(()) });
        }
        self.inner.put_part(PutPayload::from(self.out.take()))
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let writer = self
            .writer
            .take()
            .ok_or_else(|| refuse(&self.key, "completed twice"))?;
        writer.finish().map_err(|e| refuse(&self.key, e))?;
        self.inner
            .put_part(PutPayload::from(self.out.take()))
            .await?;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.writer = None;
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt as _;

    /// A store of one object, for the reads below.
    fn one_object(bytes: &[u8]) -> (Sealed, Arc<object_store::memory::InMemory>) {
        let inner = Arc::new(object_store::memory::InMemory::new());
        let sealed = Sealed::new(inner.clone(), DataKeys::generate());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(sealed.put(
            &Path::from("packs/p.zcpack"),
            PutPayload::from(bytes.to_vec()),
        ))
        .unwrap();
        (sealed, inner)
    }

    fn read(sealed: &Sealed, range: Range<u64>) -> Result<Vec<u8>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let got = sealed
                .get_opts(
                    &Path::from("packs/p.zcpack"),
                    GetOptions {
                        range: Some(GetRange::Bounded(range)),
                        ..Default::default()
                    },
                )
                .await?;
            Ok(got.bytes().await?.to_vec())
        })
    }

    /// Every single-byte change of a sealed object (header, sealed name, payload, tag) is
    /// refused: no read of it returns bytes. Each read is by a fresh handle (a handle caches
    /// what it read of an object: a small object whole).
    #[test]
    fn every_single_byte_flip_of_a_sealed_object_is_refused() {
        let data: Vec<u8> = (0..700).map(|i| (i % 251) as u8).collect();
        let inner = Arc::new(object_store::memory::InMemory::new());
        let keys = DataKeys::generate();
        let fresh = || Sealed::new(inner.clone(), keys.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let name = Path::from("packs/p.zcpack");
        rt.block_on(fresh().put(&name, PutPayload::from(data.clone())))
            .unwrap();
        assert_eq!(read(&fresh(), 0..700).unwrap(), data);
        let keyed = fresh().keyed(&name);
        let whole = rt.block_on(async { inner.get(&keyed).await.unwrap().bytes().await.unwrap() });
        for i in 0..whole.len() {
            let mut flipped = whole.to_vec();
            flipped[i] ^= 0x01;
            rt.block_on(inner.put(&keyed, PutPayload::from(flipped)))
                .unwrap();
            for range in [0..700, 0..1, 699..700] {
                assert!(
                    read(&fresh(), range.clone()).is_err(),
                    "byte {i} of {} flipped, range {range:?} still read",
                    whole.len()
                );
            }
        }
    }

    #[test]
    fn ranges_read_back_and_a_cut_object_is_refused() {
        let data: Vec<u8> = (0..5 * CHUNK as usize + 77)
            .map(|i| (i % 251) as u8)
            .collect();
        let (sealed, inner) = one_object(&data);
        let n = data.len() as u64;
        for r in [0..10, CHUNK - 5..CHUNK + 5, 3 * CHUNK..n, n - 1..n, 0..n] {
            assert_eq!(
                read(&sealed, r.clone()).unwrap(),
                data[r.start as usize..r.end as usize]
            );
        }
        // Cut at a chunk boundary: what is left still decrypts chunk by chunk, but its end
        // is not the sealed end.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let keyed = sealed.keyed(&Path::from("packs/p.zcpack"));
        let whole = rt.block_on(async { inner.get(&keyed).await.unwrap().bytes().await.unwrap() });
        let start = payload_start(&whole).unwrap() as usize;
        let cut = whole[..start + 3 * SEALED_CHUNK as usize].to_vec();
        rt.block_on(inner.put(&keyed, PutPayload::from(cut)))
            .unwrap();
        sealed.forget(&keyed);
        let size = 3 * CHUNK - PATH_HEAD;
        let e = read(&sealed, size - 10..size).unwrap_err();
        assert!(e.to_string().contains("authentication failed"), "{e}");
    }

    #[test]
    fn sizes_follow_age_chunks() {
        // An age file of n plaintext bytes: header, nonce, then chunks of 64 KiB + 16.
        for n in [
            0u64,
            1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            3 * CHUNK,
            3 * CHUNK + 7,
        ] {
            let keys = DataKeys::generate();
            let sealed = keys.seal(&vec![7u8; n as usize]).unwrap();
            let start = payload_start(&sealed).unwrap();
            assert_eq!(plain_size(sealed.len() as u64, start), Some(n), "{n}");
        }
    }
}
