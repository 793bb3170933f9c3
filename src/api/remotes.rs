//! Remotes through the public API: configuring them (`remote add|list|remove`), `push` and
//! `pull`, what a remote lists (`list --remote`) and its housekeeping (`remote forget|gc`).
//! The work is `crate::remote`'s; this file resolves names, applies the trust policy (a pull
//! is refused before anything is downloaded), and says what the remote noticed and, for a
//! `-v`, what was asked of it ([`Note::Notice`], [`Note::Traffic`]), failed or not.
//! Credentials never pass through here: the object store reads them from the environment.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context as _};
use serde::ser::{Serialize, SerializeStruct as _, Serializer};
use zeroclaw_bundle_store::{ObjectId, Snapshot};

use super::{Bundles, Error, Result, Verb};
use crate::progress::{Note, Progress};
use crate::remote::{Remote, RemoteError};

pub use crate::remote::{
    GcReport as RemoteGcReport, PullReport, PushReport, RemoteSpec,
    DEFAULT_GRACE_SECS as REMOTE_GC_GRACE_SECS,
};

/// A remote removed by [`Bundles::remove_remote`]. `--json` prints its name only: an entry
/// removed because its URL carries a token must not print it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteRemoved {
    /// The remote's name.
    #[serde(rename = "remote")]
    pub name: String,
    /// The remotes file it was removed from.
    #[serde(skip)]
    pub file: PathBuf,
}

/// A snapshot record removed from a remote by [`Bundles::forget_on_remote`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct RemoteForgotten {
    /// The snapshot.
    pub snapshot: ObjectId,
    /// The remote's name.
    pub remote: String,
}

/// One snapshot a remote lists ([`Bundles::remote_snapshots`]). `--json` prints it as it
/// serializes: `snapshot`, `remote`, `created_unix_ns`, `created`, `kind`, `name`, `agent`,
/// `agent_latest`, `source`, `files`, `bytes`, `root`.
#[derive(Debug, Clone)]
pub struct RemoteSnapshot {
    /// The snapshot.
    pub id: ObjectId,
    /// The remote's name.
    pub remote: String,
    /// Its record.
    pub record: Snapshot,
    /// It is the one `NAME/agent/<alias>` names on the remote: the newest of its agent's
    /// snapshots there (by creation time, ties by id).
    pub agent_latest: bool,
}

impl RemoteSnapshot {
    /// When it was created, RFC 3339 in UTC.
    pub fn created(&self) -> String {
        crate::clock::rfc3339_utc(self.record.created_unix_ns)
    }
}

impl Serialize for RemoteSnapshot {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let r = &self.record;
        let mut m = s.serialize_struct("RemoteSnapshot", 12)?;
        m.serialize_field("snapshot", &self.id)?;
        m.serialize_field("remote", &self.remote)?;
        m.serialize_field("created_unix_ns", &r.created_unix_ns)?;
        m.serialize_field("created", &self.created())?;
        m.serialize_field("kind", &r.kind)?;
        m.serialize_field("name", &r.name)?;
        m.serialize_field("agent", &r.agent)?;
        m.serialize_field("agent_latest", &self.agent_latest)?;
        m.serialize_field("source", &r.source)?;
        m.serialize_field("files", &r.files())?;
        m.serialize_field("bytes", &r.bytes())?;
        m.serialize_field("root", &r.root)?;
        m.end()
    }
}

/// What a remote lists ([`Bundles::remote_snapshots`]).
#[derive(Debug, Clone)]
pub struct RemoteListing {
    /// Its readable snapshots, oldest first.
    pub snapshots: Vec<RemoteSnapshot>,
    /// Records that could not be read; each was named through the progress
    /// ([`Note::Warning`]). A bad record hides nothing else.
    pub unreadable: usize,
}

/// Says through `progress` what the remote's listings ignored (names that are not part of its
/// layout).
fn say_notices(remote: &Remote, progress: &dyn Progress) {
    for line in remote.notices() {
        progress.note(Note::Notice(&line));
    }
}

/// Says through `progress` what was asked of the remote so far.
fn say_traffic(remote: &Remote, progress: &dyn Progress) {
    progress.note(Note::Traffic {
        remote: remote.name(),
        summary: &remote.traffic(),
    });
}

impl Bundles {
    /// Adds the remote `name` at `url` (`s3://BUCKET/PREFIX` or `file:///PATH`; an
    /// S3-compatible server's `endpoint`) to the store's `remotes.toml`; refuses a name already
    /// configured, and a URL or endpoint that carries credentials (they come from the
    /// environment only).
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// let spec = bundles.add_remote("origin", "file:///srv/bundles", None)?;
    /// assert_eq!(bundles.remotes()?, vec![spec]);
    /// assert!(bundles.add_remote("origin", "file:///elsewhere", None).is_err());
    /// assert_eq!(bundles.remove_remote("origin")?.name, "origin");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn add_remote(&self, name: &str, url: &str, endpoint: Option<&str>) -> Result<RemoteSpec> {
        let spec = RemoteSpec {
            name: name.to_string(),
            url: url.to_string(),
            endpoint: endpoint.map(str::to_string),
            encrypted: false,
            key_id: None,
            identity: None,
        };
        crate::remote::add_remote(self.store.root(), &spec)
            .map_err(|e| Error::new(Verb::Remote, name, e.into()))?;
        Ok(spec)
    }

    /// [`Bundles::add_remote`] of an encrypted remote. With `recipients`, the remote (which
    /// must hold no snapshot yet) gets a fresh data key, wrapped to each recipient in its key
    /// file (`keys/keyring.age`); without, it must already have one (another host made it
    /// encrypted). `identity` is the file that opens the key file on this host (none: the
    /// key `sign` uses; `ZEROCLAW_BUNDLE_IDENTITY` overrides it). Everything pushed to it is
    /// then sealed, under keyed names; nothing falls back to plaintext.
    pub fn add_encrypted_remote(
        &self,
        name: &str,
        url: &str,
        endpoint: Option<&str>,
        recipients: Option<&crate::crypt::Recipients>,
        identity: Option<&Path>,
    ) -> Result<RemoteSpec> {
        let fail = |e: anyhow::Error| Error::new(Verb::Remote, name, e);
        let mut spec = RemoteSpec {
            name: name.to_string(),
            url: url.to_string(),
            endpoint: endpoint.map(str::to_string),
            encrypted: false,
            key_id: None,
            identity: identity
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
                .map(|p| p.to_string_lossy().into_owned()),
        };
        // The name is checked free before anything is written to the remote.
        if crate::remote::load_remotes(self.store.root())
            .map_err(|e| fail(e.into()))?
            .iter()
            .any(|r| r.name == name)
        {
            return Err(fail(anyhow!(
                "already configured in {}",
                self.store.root().join("remotes.toml").display()
            )));
        }
        let plain = Remote::open(&spec, true).map_err(|e| fail(e.into()))?;
        let key_id = match recipients {
            Some(to) => plain.seal_new(to).map_err(|e| fail(e.into()))?,
            None if !plain.has_key_file().map_err(|e| fail(e.into()))? => {
                return Err(fail(anyhow!(
                    "it has no key file ({}): make it encrypted with --encrypt-to RECIPIENT",
                    crate::remote::KEY_FILE
                )))
            }
            None => {
                // Opened now: the identity must open its key file, whose key id is pinned.
                spec.encrypted = true;
                let opened = Remote::open(&spec, false).map_err(|e| fail(e.into()))?;
                opened.key_id().unwrap_or_default()
            }
        };
        spec.encrypted = true;
        spec.key_id = Some(key_id);
        crate::remote::add_remote(self.store.root(), &spec)
            .map_err(|e| Error::new(Verb::Remote, name, e.into()))?;
        Ok(spec)
    }

    /// Changes the recipients of the encrypted remote `name`: `add` one, or remove one (then a
    /// new data key generation is made, so what is pushed from now on cannot be read by the
    /// removed recipient; what it already downloaded, or could read before, stays readable to
    /// it). Opens the key file with this host's identity. Returns the recipients now and the
    /// number of data key generations.
    pub fn change_remote_recipients(
        &self,
        name: &str,
        recipient: &str,
        add: bool,
    ) -> Result<(Vec<String>, usize)> {
        let fail = |e: anyhow::Error| Error::new(Verb::Remote, name, e);
        let spec =
            crate::remote::find_remote(self.store.root(), name).map_err(|e| fail(e.into()))?;
        if !spec.encrypted {
            return Err(fail(anyhow!("it is not an encrypted remote")));
        }
        let remote = Remote::open(&spec, false).map_err(|e| fail(e.into()))?;
        let mut now: Vec<String> = remote.recipients().unwrap_or_default().to_vec();
        let given = crate::crypt::Recipients::parse(&[recipient.to_string()])
            .map_err(|e| fail(e.into()))?;
        let texts = given.texts().to_vec();
        if add {
            for t in texts {
                if !now.contains(&t) {
                    now.push(t);
                }
            }
        } else {
            let before = now.len();
            now.retain(|r| !texts.contains(r));
            if now.len() == before {
                return Err(fail(anyhow!(
                    "{recipient:?} is not one of its recipients ({})",
                    now.join("; ")
                )));
            }
            if now.is_empty() {
                return Err(fail(anyhow!(
                    "{recipient:?} is its only recipient: add another first"
                )));
            }
        }
        let to = crate::crypt::Recipients::parse(&now).map_err(|e| fail(e.into()))?;
        let generations = remote.rewrap(&to, !add).map_err(|e| fail(e.into()))?;
        Ok((now, generations))
    }

    /// The remotes configured in the store, in file order.
    ///
    /// See [`Bundles::add_remote`] for an example.
    pub fn remotes(&self) -> Result<Vec<RemoteSpec>> {
        crate::remote::load_remotes(self.store.root()).map_err(|e| {
            Error::new(
                Verb::Remote,
                self.store.root().display().to_string(),
                e.into(),
            )
        })
    }

    /// Removes the remote `name` from the store's `remotes.toml` (an entry that no longer
    /// validates too); nothing on the remote is touched. Fails when no remote has that name.
    ///
    /// See [`Bundles::add_remote`] for an example.
    pub fn remove_remote(&self, name: &str) -> Result<RemoteRemoved> {
        let gone = crate::remote::remove_remote(self.store.root(), name)
            .map_err(|e| Error::new(Verb::Remote, name, e.into()))?;
        Ok(RemoteRemoved {
            name: gone.name,
            file: self.store.root().join("remotes.toml"),
        })
    }

    /// The remote named `name`, or without a name the default: the only one configured, or
    /// the one named `origin`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.remote(None).is_err());
    /// bundles.add_remote("shared", "file:///srv/bundles", None)?;
    /// assert_eq!(bundles.remote(None)?.name, "shared");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote(&self, name: Option<&str>) -> Result<RemoteSpec> {
        let fail = |e: anyhow::Error| Error::new(Verb::Remote, name.unwrap_or_default(), e);
        if let Some(name) = name {
            return crate::remote::find_remote(self.store.root(), name).map_err(|e| fail(e.into()));
        }
        let all = self.remotes()?;
        if all.len() == 1 {
            return Ok(all.into_iter().next().expect("one remote"));
        }
        match all.iter().find(|r| r.name == "origin") {
            Some(r) => Ok(r.clone()),
            None if all.is_empty() => Err(fail(anyhow!(
                "no remote configured; add one with `remote add NAME URL`"
            ))),
            None => Err(fail(anyhow!(
                "several remotes and none named origin; name one: {}",
                all.iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// Uploads snapshot `reference` to the remote named `remote` (configured in this store):
    /// the objects the remote lacks in one pack, then its index, then the snapshot record, so
    /// the remote never lists a snapshot with missing objects; the signatures the store keeps
    /// travel with it. Cancelled through `progress`, which also hears what the remote noticed
    /// and what was asked of it.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let err = bundles.push(&snap.id.to_hex(), "origin", &Silent).unwrap_err();
    /// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::Remote);
    ///
    /// std::fs::create_dir(dir.path().join("remote"))?;
    /// let url = format!("file://{}", dir.path().join("remote").display());
    /// bundles.add_remote("origin", &url, None)?;
    /// let pushed = bundles.push(&snap.id.to_hex(), "origin", &Silent)?;
    /// assert_eq!((pushed.remote.as_str(), pushed.already), ("origin", false));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn push(
        &self,
        reference: &str,
        remote: &str,
        progress: &dyn Progress,
    ) -> Result<PushReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Push, reference, e);
        let id = self.stored("push", reference).map_err(|e| fail(e.into()))?;
        let spec =
            crate::remote::find_remote(self.store.root(), remote).map_err(|e| fail(e.into()))?;
        let handle = open_remote(&spec, true, progress).map_err(fail)?;
        let report = crate::remote::push(&self.store, &handle, &id, progress)
            .with_context(|| format!("could not push {} to {}", id.short(12), spec.name));
        progress.finish();
        say_notices(&handle, progress);
        say_traffic(&handle, progress);
        report.map_err(fail)
    }

    /// Downloads the snapshot the remote ref `NAME/SNAPSHOT` names (a full id, a unique prefix
    /// of 8+ hex digits, a name, or `agent/<alias>`: the newest snapshot of that agent on the
    /// remote) into the store, verified, the signatures the remote keeps for it carried along.
    /// The trust policy is applied to those signatures before anything is downloaded. Returns
    /// its id and what the pull did (who signed, when a signature was required).
    ///
    /// ```
    /// use zeroclaw_bundle::Bundles;
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let err = bundles.pull("origin/agent/coder", &zeroclaw_bundle::Silent).unwrap_err();
    /// assert_eq!(err.kind(), zeroclaw_bundle::ErrorKind::Remote);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pull(
        &self,
        remote_ref: &str,
        progress: &dyn Progress,
    ) -> Result<(ObjectId, PullReport)> {
        let fail = |e: anyhow::Error| Error::new(Verb::Pull, remote_ref, e);
        let Some((name, reference)) = remote_ref.split_once('/') else {
            return Err(fail(anyhow!(
                "{remote_ref:?} is not NAME/SNAPSHOT (for example origin/3f2a9c01 or origin/agent/researcher)"
            )));
        };
        // The remote is configured in the store (`remote add` made it): never created here.
        let spec =
            crate::remote::find_remote(self.store.root(), name).map_err(|e| fail(e.into()))?;
        self.pull_from(&spec, reference, progress).map_err(fail)
    }

    /// Pulls the snapshot `reference` names on the remote `spec` (see [`Bundles::pull`]).
    pub(super) fn pull_from(
        &self,
        spec: &RemoteSpec,
        reference: &str,
        progress: &dyn Progress,
    ) -> anyhow::Result<(ObjectId, PullReport)> {
        let require = self.required_signers()?;
        let handle = open_remote(spec, false, progress)?;
        let id = handle.resolve(reference);
        say_notices(&handle, progress);
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                say_traffic(&handle, progress);
                return Err(e.into());
            }
        };
        let report =
            crate::remote::pull_checked(&self.store, &handle, &id, require.as_ref(), progress)
                .with_context(|| {
                    format!(
                        "could not pull {} from {}; no snapshot was added",
                        id.short(12),
                        spec.name
                    )
                });
        progress.finish();
        say_notices(&handle, progress);
        say_traffic(&handle, progress);
        Ok((id, report?))
    }

    /// The snapshots the remote named `remote` lists, oldest first, each with its record. A
    /// record that cannot be read hides nothing else: it is named through `progress`
    /// ([`Note::Warning`]) and counted in [`RemoteListing::unreadable`].
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, Some("empty"), &Silent)?;
    /// std::fs::create_dir(dir.path().join("remote"))?;
    /// bundles.add_remote("origin", &format!("file://{}", dir.path().join("remote").display()), None)?;
    /// bundles.push("empty", "origin", &Silent)?;
    /// let listed = bundles.remote_snapshots("origin", &Silent)?;
    /// assert_eq!(listed.snapshots[0].id, snap.id);
    /// assert_eq!(listed.snapshots[0].record.name.as_deref(), Some("empty"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remote_snapshots(&self, remote: &str, progress: &dyn Progress) -> Result<RemoteListing> {
        let fail = |e: anyhow::Error| Error::new(Verb::Read, remote, e);
        let spec =
            crate::remote::find_remote(self.store.root(), remote).map_err(|e| fail(e.into()))?;
        let handle = open_remote(&spec, false, progress).map_err(fail)?;
        let mut rows = Vec::new();
        let mut unreadable = 0;
        let listed = list_records(&handle, &mut rows, &mut unreadable, progress);
        say_notices(&handle, progress);
        say_traffic(&handle, progress);
        listed.map_err(|e| fail(e.into()))?;
        rows.sort_by_key(|(_, s)| s.created_unix_ns);
        // `agent/<alias>` resolves to the newest of that agent's snapshots (by creation time,
        // ties by id, as `Remote::resolve` picks): only that row carries it.
        let mut newest: std::collections::HashMap<&str, (i128, ObjectId)> =
            std::collections::HashMap::new();
        for (id, s) in &rows {
            if let Some(a) = &s.agent {
                let key = (s.created_unix_ns, *id);
                let best = newest.entry(a.as_str()).or_insert(key);
                if key > *best {
                    *best = key;
                }
            }
        }
        let snapshots = rows
            .iter()
            .map(|(id, s)| RemoteSnapshot {
                id: *id,
                remote: spec.name.clone(),
                record: s.clone(),
                agent_latest: s
                    .agent
                    .as_deref()
                    .and_then(|a| newest.get(a))
                    .is_some_and(|b| b.1 == *id),
            })
            .collect();
        Ok(RemoteListing {
            snapshots,
            unreadable,
        })
    }

    /// Removes the record of the snapshot `reference` names on the remote `remote`: it stops
    /// being listed and pulled; what only it reached goes at later [`Bundles::remote_gc`]
    /// runs.
    pub fn forget_on_remote(
        &self,
        remote: &str,
        reference: &str,
        progress: &dyn Progress,
    ) -> Result<RemoteForgotten> {
        let fail = |e: anyhow::Error| Error::new(Verb::Remote, remote, e);
        let spec =
            crate::remote::find_remote(self.store.root(), remote).map_err(|e| fail(e.into()))?;
        let handle = open_remote(&spec, false, progress).map_err(fail)?;
        let id = handle.resolve(reference).map_err(|e| fail(e.into()))?;
        say_notices(&handle, progress);
        crate::remote::forget(&handle, &id)
            .with_context(|| format!("could not forget {} on {}", id.short(12), spec.name))
            .map_err(fail)?;
        Ok(RemoteForgotten {
            snapshot: id,
            remote: spec.name,
        })
    }

    /// Collects the garbage of the remote `remote` without a lock, safe while other hosts
    /// push: a pack no snapshot reaches is marked by one run and deleted by a later one once
    /// the mark is older than `grace_secs` (at least twice the push window;
    /// [`REMOTE_GC_GRACE_SECS`] by default).
    pub fn remote_gc(
        &self,
        remote: &str,
        grace_secs: u64,
        progress: &dyn Progress,
    ) -> Result<RemoteGcReport> {
        let fail = |e: anyhow::Error| Error::new(Verb::Remote, remote, e);
        let spec =
            crate::remote::find_remote(self.store.root(), remote).map_err(|e| fail(e.into()))?;
        let handle = open_remote(&spec, false, progress).map_err(fail)?;
        let report = crate::remote::gc(
            &handle,
            self.store.objects().tmp_dir(),
            std::time::Duration::from_secs(grace_secs),
        )
        .with_context(|| format!("could not collect garbage on {}", spec.name))
        .map_err(fail)?;
        say_notices(&handle, progress);
        Ok(report)
    }
}

/// The remote `spec`, its requests stopped by the token of `progress` (none: nothing stops
/// them).
fn open_remote(spec: &RemoteSpec, create: bool, progress: &dyn Progress) -> anyhow::Result<Remote> {
    let handle = Remote::open(spec, create)?;
    Ok(match progress.cancel() {
        Some(cancel) => handle.with_cancel(cancel.clone()),
        None => handle,
    })
}

/// Reads every record the remote lists into `rows`; each bad one is named through `progress`
/// and counted in `bad`.
fn list_records(
    remote: &Remote,
    rows: &mut Vec<(ObjectId, Snapshot)>,
    bad: &mut usize,
    progress: &dyn Progress,
) -> std::result::Result<(), RemoteError> {
    for id in remote.snapshots()? {
        let record = match remote.record(&id) {
            Ok(Some(record)) => record,
            Ok(None) => continue,
            Err(e @ RemoteError::Corrupt { .. }) => {
                *bad += 1;
                progress.note(Note::Warning(&e.to_string()));
                continue;
            }
            Err(e) => return Err(e),
        };
        match Snapshot::decode(&record) {
            Ok(snap) => rows.push((id, snap)),
            Err(e) => {
                *bad += 1;
                progress.note(Note::Warning(&format!(
                    "remote {}: snapshots/{} is not a snapshot record: {e}",
                    remote.name(),
                    id.to_hex()
                )));
            }
        }
    }
    Ok(())
}
