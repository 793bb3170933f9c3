//! A real `ObjectStore` in front of the remote's store that forwards every call and counts
//! requests and bytes per top-level key prefix (`snapshots`, `trees`, `index`, `packs`), so
//! `-v` can say what a command fetched and the tests can prove a remote diff reads trees only.
//! It changes nothing it forwards.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// Requests and bytes of one key prefix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Requests sent (a listing counts once, however many pages it takes).
    pub requests: u64,
    /// Bytes received (the body of each read).
    pub received: u64,
    /// Bytes sent (the body of each single-request write; multipart parts are not counted).
    pub sent: u64,
}

/// The shared counters: top-level prefix -> tally.
pub type Counters = Arc<Mutex<BTreeMap<String, Tally>>>;

/// The counting wrapper.
#[derive(Debug)]
pub struct Counting {
    inner: Arc<dyn ObjectStore>,
    counters: Counters,
}

impl Counting {
    /// Wraps `inner`; its counts land in `counters`.
    pub fn new(inner: Arc<dyn ObjectStore>, counters: Counters) -> Counting {
        Counting { inner, counters }
    }

    fn count(&self, location: Option<&Path>, received: u64, sent: u64) {
        let prefix = location
            .and_then(|p| p.parts().next())
            .map(|p| p.as_ref().to_string())
            .unwrap_or_default();
        let mut all = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let t = all.entry(prefix).or_default();
        t.requests += 1;
        t.received += received;
        t.sent += sent;
    }
}

impl fmt::Display for Counting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Counting {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.count(Some(location), 0, payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.count(Some(location), 0, 0);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        // A head request returns no body (its result still names the whole range).
        let head = options.head;
        let got = self.inner.get_opts(location, options).await;
        let received = match &got {
            Ok(r) if !head => r.range.end - r.range.start,
            _ => 0,
        };
        self.count(Some(location), received, 0);
        got
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.count(None, 0, 0);
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count(prefix, 0, 0);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.count(prefix, 0, 0);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.count(prefix, 0, 0);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.count(Some(to), 0, 0);
        self.inner.copy_opts(from, to, options).await
    }
}

/// One line for `-v`: `N requests (snapshots 1, trees 1), X received, Y sent`.
pub fn describe(counters: &Counters) -> String {
    let all = counters.lock().unwrap_or_else(|e| e.into_inner());
    let mut total = Tally::default();
    let mut parts = Vec::new();
    for (prefix, t) in all.iter() {
        total.requests += t.requests;
        total.received += t.received;
        total.sent += t.sent;
        let name = if prefix.is_empty() { "-" } else { prefix };
        parts.push(format!("{name} {}/{}B/{}B", t.requests, t.received, t.sent));
    }
    format!(
        "{} requests, {} bytes received, {} bytes sent (per prefix requests/received/sent: {})",
        total.requests,
        total.received,
        total.sent,
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    )
}
