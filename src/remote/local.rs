//! The `file://` backend: object_store's `LocalFileSystem`, except that every read opens its
//! file here, through [`crate::sys::open_regular`]. `LocalFileSystem` opens with a plain
//! open(2), which waits forever on a FIFO (open(2): a read-only open of a FIFO blocks until a
//! writer appears) and reads a device such as `/dev/zero` until the caller gives up: anyone who
//! can write to a shared remote directory could stall every pull. Here a key that is not a
//! regular file is refused at once, naming its path and what it is; a directory is absent, as
//! `LocalFileSystem` has it. The type is decided on the opened descriptor, so nothing swapped
//! in after a check is ever read. Listings, writes, deletes and copies are `LocalFileSystem`'s.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    CopyOptions, Error, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};

/// The `store` of the errors this backend makes itself; `Remote` shows their source alone.
pub(crate) const STORE: &str = "zeroclaw-bundle file remote";

/// `LocalFileSystem` that reads regular files only (see the module doc).
#[derive(Debug)]
pub struct RegularFiles {
    inner: LocalFileSystem,
}

impl RegularFiles {
    /// Wraps `inner`.
    pub fn new(inner: LocalFileSystem) -> RegularFiles {
        RegularFiles { inner }
    }
}

impl fmt::Display for RegularFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RegularFiles({})", self.inner)
    }
}

fn generic(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
    Error::Generic {
        store: STORE,
        source: source.into(),
    }
}

/// What `LocalFileSystem::get_opts` does, on a descriptor [`crate::sys::open_regular`] opened.
fn get_regular(path: PathBuf, location: Path, options: GetOptions) -> Result<GetResult> {
    let file = match crate::sys::open_regular(&path) {
        Ok((file, _)) => file,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory
            ) =>
        {
            return Err(Error::NotFound {
                path: path.display().to_string(),
                source: Box::new(e),
            })
        }
        Err(e) => return Err(generic(format!("{}: {e}", path.display()))),
    };
    let meta = file
        .metadata()
        .map_err(|e| generic(format!("{}: {e}", path.display())))?;
    let size = meta.len();
    let modified = meta
        .modified()
        .map_err(|e| generic(format!("{}: {e}", path.display())))?;
    let micros = modified
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let meta = ObjectMeta {
        location,
        last_modified: modified.into(),
        size,
        // LocalFileSystem's scheme, so a precondition means the same on either.
        e_tag: Some(format!("\"{:x}-{micros:x}-{size:x}\"", meta.ino())),
        version: None,
    };
    options.check_preconditions(&meta)?;
    let range = match &options.range {
        Some(r) => r.as_range(size).map_err(generic)?,
        None => 0..size,
    };
    Ok(GetResult {
        payload: GetResultPayload::File(file, path),
        attributes: Default::default(),
        range,
        meta,
        extensions: Default::default(),
    })
}

#[async_trait]
impl ObjectStore for RegularFiles {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let path = self.inner.path_to_filesystem(location)?;
        let location = location.clone();
        // On the blocking pool, as LocalFileSystem does: a hung network filesystem stalls a
        // pool thread, never the runtime, so an interrupt still ends the command.
        tokio::task::spawn_blocking(move || get_regular(path, location, options)).await?
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}
