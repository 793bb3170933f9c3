//! The verbs that move a snapshot as one file: `pack` (to a file, staged and renamed into
//! place, or to standard output), `unpack` (from a file or a stream, into this store or into a
//! store that exists only once the unpack succeeded), and `checkout` of every form a snapshot
//! comes in (a pack is unpacked and a remote ref pulled into the store first, so what is
//! published is always what the store holds). The trust policy is applied here before a
//! snapshot becomes visible: over a pack's own signatures before anything is written, over the
//! store's before a checkout touches its destination.
//!
//! Also here: the order every verb over a reference follows ([`Bundles::open_for`]: the
//! argument is read by the grammar before the store is looked at) and the rule of which verbs
//! may create a store.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, IsTerminal as _, Read, Write};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use serde::ser::{Serialize, SerializeStruct as _, Serializer};
use zeroclaw_bundle_store::{
    ObjectId, PackOptions, PackReader, PackStats, Store, StoreError, UnpackReport,
};

use super::{Bundles, Error, Result, TrustPolicy, Verb};
use crate::cancel::Cancel;
use crate::crypt::Recipients;
use crate::progress::{ImportProgress, Note, Progress, Totals};
use crate::publish::{check, check_replacement, publish_snapshot, PublishRequest};
use crate::publish::{Published, Replace, Replaced};
use crate::sign::{AllowedSigners, Signer};
use crate::source::{classify, Takes, Target};
use crate::words::{count, human_bytes};

/// A pack written by [`Bundles::pack`] or [`Bundles::pack_to_stdout`]. `--json` prints it as
/// it serializes: `snapshot`, `destination`, `since`, `trees_only` and the counts of
/// [`PackStats`].
#[derive(Debug, Clone)]
pub struct Packed {
    /// The snapshot packed.
    pub id: ObjectId,
    /// The pack file, as given (`None`: standard output).
    pub destination: Option<PathBuf>,
    /// The snapshot whose objects were left out ([`PackOptions::since`]).
    pub since: Option<ObjectId>,
    /// Only the record and the trees were written ([`PackOptions::trees_only`]).
    pub trees_only: bool,
    /// What was written.
    pub stats: PackStats,
}

impl Serialize for Packed {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let destination = match &self.destination {
            Some(path) => host_path(path),
            None => "-".to_string(),
        };
        let mut m = s.serialize_struct("Packed", 9)?;
        m.serialize_field("snapshot", &self.id)?;
        m.serialize_field("destination", &destination)?;
        m.serialize_field("since", &self.since)?;
        m.serialize_field("trees_only", &self.trees_only)?;
        m.serialize_field("objects", &self.stats.objects)?;
        m.serialize_field("trees", &self.stats.trees)?;
        m.serialize_field("blobs", &self.stats.blobs)?;
        m.serialize_field("bytes", &self.stats.bytes)?;
        m.serialize_field("pack_bytes", &self.stats.pack_bytes)?;
        m.end()
    }
}

/// A pack imported by [`Bundles::unpack`], [`Bundles::unpack_reader`] or
/// [`Bundles::unpack_at`]. `--json` prints it as it serializes (who signed is said in words).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Unpacked {
    /// The snapshot the pack carried, now in the store.
    #[serde(rename = "snapshot")]
    pub id: ObjectId,
    /// Objects the pack lists.
    pub objects: usize,
    /// Objects read from the pack and verified (the snapshot record included): what the
    /// store lacked.
    pub read: usize,
    /// Objects the snapshot needs that the store already held: not read from the pack, so
    /// the pack's copies of them were not checked.
    pub already_present: usize,
    /// Who signed it, when the trust policy required a signature (empty otherwise).
    #[serde(skip)]
    pub signers: Vec<Signer>,
}

impl Unpacked {
    /// What the unpack did, in one sentence that claims no check it did not make: objects the
    /// store already held were not read from the pack.
    ///
    /// ```
    /// # let id = zeroclaw_bundle::ObjectId::of(b"x");
    /// let done = zeroclaw_bundle::Unpacked { id, objects: 3, read: 3, already_present: 0, signers: vec![] };
    /// assert_eq!(done.describe(), "unpacked 3 objects: each read from the pack and verified");
    /// ```
    pub fn describe(&self) -> String {
        let read = count(self.read as u64, "object");
        match self.already_present {
            0 => format!("unpacked {read}: each read from the pack and verified"),
            present => format!(
                "unpacked {read} (read from the pack and verified); {} the store already held \
                 {} not read from the pack, so the pack's copies of {} were not checked",
                count(present as u64, "object"),
                if present == 1 { "was" } else { "were" },
                if present == 1 { "it" } else { "them" },
            ),
        }
    }
}

/// Where a pack to unpack comes from.
pub enum PackInput<'a> {
    /// A pack file.
    File(&'a Path),
    /// A stream (standard input, a pipe): copied into the store's `tmp/` first, since a pack
    /// is read from its end. Messages call it standard input.
    Stream(&'a mut dyn Read),
}

/// A snapshot published by [`Bundles::checkout`]. `--json` prints it as it serializes:
/// `snapshot`, `destination`, `files`, `bytes`, `reused_files`, `replaced`.
#[derive(Debug)]
pub struct CheckedOut {
    /// The snapshot published.
    pub id: ObjectId,
    /// The publish (destination, files, bytes).
    pub published: Published,
    /// What the publish replaced, when it replaced something.
    pub replaced: Option<Replaced>,
    /// Who signed it, when the trust policy required a signature (empty otherwise).
    pub signers: Vec<Signer>,
}

impl Serialize for CheckedOut {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_struct("CheckedOut", 6)?;
        m.serialize_field("snapshot", &self.id)?;
        m.serialize_field("destination", &host_path(&self.published.dest))?;
        m.serialize_field("files", &self.published.files)?;
        m.serialize_field("bytes", &self.published.bytes)?;
        m.serialize_field("reused_files", &self.published.reused)?;
        m.serialize_field("replaced", &self.replaced)?;
        m.end()
    }
}

/// A host path (a destination, a pack) in a `--json` document: the path itself when it is
/// UTF-8, else its escaped display form (`\xNN`), never a silently replaced byte.
pub(super) fn host_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    match path.to_str() {
        Some(text) => text.to_string(),
        None => zeroclaw_bundle_store::escape_name(path.as_os_str().as_bytes()),
    }
}

/// Says who signed `id` as a step, when anyone had to.
pub(super) fn note_signers(progress: &dyn Progress, id: &ObjectId, signers: &[Signer]) {
    if !signers.is_empty() {
        progress.note(Note::Step(&Signer::signed_by(id, signers)));
    }
}

/// What a verb over one reference takes of the grammar ([`Bundles::open_for`]): `checkout`
/// every form that holds a snapshot, any other verb a snapshot of the store.
fn takes(verb: Verb) -> Takes {
    match verb {
        Verb::Checkout => Takes::CHECKOUT,
        _ => Takes::stored(verb.word()),
    }
}

impl Bundles {
    /// Opens the store at `path` for `verb` over the snapshot reference `reference`, in the
    /// order every such verb follows and by the rule of which verbs may create a store. The
    /// reference is read by the grammar first (`checkout` takes a pack file, a remote ref or
    /// a snapshot of the store; any other verb a snapshot of the store), so an argument spelled
    /// as a path that does not exist, or of a form `verb` does not take, is refused before the
    /// store is looked at. Then the store is opened: only `checkout` of a pack file creates a missing store (the
    /// pack's snapshot is unpacked into it); every other verb over a reference fails with
    /// [`crate::ErrorKind::NoStore`] when there is none. (Capture creates a store,
    /// [`Bundles::create`]; an unpack creates one only once it succeeded,
    /// [`Bundles::unpack_at`].)
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, ErrorKind, Verb};
    /// # let dir = tempfile::tempdir()?;
    /// let store = dir.path().join("store");
    /// let err = Bundles::open_for(&store, Verb::Pack, "./missing.zbpack").unwrap_err();
    /// assert!(err.to_string().contains("does not exist"));
    /// let err = Bundles::open_for(&store, Verb::Pack, "agent/coder").unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::NoStore);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_for(path: impl AsRef<Path>, verb: Verb, reference: &str) -> Result<Bundles> {
        let path = path.as_ref();
        let classified = classify(path, OsStr::new(reference), takes(verb))
            .map_err(|e| Error::new(verb, reference, e.into()))?;
        match classified.target {
            Target::Pack { .. } if verb == Verb::Checkout => Bundles::create(path),
            _ => Bundles::open(path),
        }
    }

    /// The id `reference` names, read as `verb` reads a snapshot of this store (a full id, a
    /// unique prefix of 8+ hex digits, a name, `agent/<alias>`): its errors name the verb.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Verb};
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let err = bundles.resolve_for(Verb::Push, "agent/coder").unwrap_err();
    /// assert_eq!(err.verb(), Verb::Push);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn resolve_for(&self, verb: Verb, reference: &str) -> Result<ObjectId> {
        self.stored(verb.word(), reference)
            .map_err(|e| Error::new(verb, reference, e.into()))
    }

    /// The [`PackOptions`] an operator asked for: `since`, a snapshot of this store read as
    /// `pack --since` reads it (its errors say `--since`), and `trees_only`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let bundles = zeroclaw_bundle::Bundles::create(dir.path().join("store"))?;
    /// assert!(bundles.pack_options(None, true)?.trees_only);
    /// let err = bundles.pack_options(Some("agent/coder"), false).unwrap_err();
    /// assert!(err.to_string().contains("--since agent/coder"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pack_options(&self, since: Option<&str>, trees_only: bool) -> Result<PackOptions> {
        let since = since
            .map(|r| {
                self.stored("pack --since", r)
                    .with_context(|| format!("--since {r}"))
                    .map_err(|e| Error::new(Verb::Pack, r, e))
            })
            .transpose()?;
        Ok(PackOptions { since, trees_only })
    }

    /// Writes snapshot `reference` and every object it reaches (or, with
    /// [`PackOptions::since`], those another snapshot does not) into one self-verifying pack
    /// file at `out`, staged and renamed into place (`replace`: an existing regular file may
    /// be replaced; a character device or a FIFO is written in place, never replaced; a
    /// destination inside the store is refused). A pack of a snapshot holding a file others
    /// may not read is created `0600`. The pack carries the signatures the store keeps for the
    /// snapshot.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let pack = dir.path().join("tree.zbpack");
    /// let packed = bundles.pack(&snap.id.to_hex(), &pack, Default::default(), false, &Silent)?;
    /// assert_eq!(packed.stats.blobs, 1);
    ///
    /// let elsewhere = Bundles::create(dir.path().join("other-store"))?;
    /// assert_eq!(elsewhere.unpack(&pack, &Silent)?.id, snap.id);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pack(
        &self,
        reference: &str,
        out: &Path,
        options: PackOptions,
        replace: bool,
        progress: &dyn Progress,
    ) -> Result<Packed> {
        self.pack_sealed(reference, out, options, replace, None, progress)
    }

    /// [`Bundles::pack`], encrypted to `recipients` when given (`pack --encrypt-to`): the file
    /// is then a standard age file of the plain pack (`age -d -i KEY` gives the pack back), and
    /// reading it takes an identity ([`crate::PlainPack::decrypt`]).
    ///
    pub fn pack_sealed(
        &self,
        reference: &str,
        out: &Path,
        options: PackOptions,
        replace: bool,
        recipients: Option<&Recipients>,
        progress: &dyn Progress,
    ) -> Result<Packed> {
        let fail = |e: anyhow::Error| Error::new(Verb::Pack, reference, e);
        let id = self.stored("pack", reference).map_err(|e| fail(e.into()))?;
        let total = self
            .store
            .objects()
            .read_snapshot(&id)
            .map_err(|e| fail(e.into()))?
            .bytes();
        let private = !options.trees_only
            && crate::publish::reaches_private_file(&self.store, &id)
                .map_err(|e| fail(e.into()))?;
        let req = crate::publish::FileRequest {
            dest: out,
            force: replace,
            store: self.store.root(),
            noun: "pack",
            cancel: progress.cancel(),
            private,
            keep: None,
        };
        progress.begin(
            "packing",
            Some(Totals {
                files: 0,
                bytes: total,
            }),
        );
        let mut done = 0;
        let stats = crate::publish::publish_file(&req, |w| {
            let mut write = |w: &mut dyn Write| {
                self.store.packs().write(&id, options, w, &mut |n| {
                    done += n;
                    progress.advance(Totals {
                        files: 0,
                        bytes: done,
                    });
                })
            };
            match recipients {
                None => write(w),
                Some(to) => crate::crypt::encrypt_to(to, w, encrypting, write),
            }
        });
        progress.finish();
        let stats = stats.map_err(|e| fail(e.into()))?;
        Ok(Packed {
            id,
            destination: Some(out.to_path_buf()),
            since: options.since,
            trees_only: options.trees_only,
            stats,
        })
    }

    /// [`Bundles::pack`] to this process's standard output (`pack --out -`), which succeeds
    /// only once the reader took every byte. A reader that goes away first (`| head -c 100`)
    /// fails it: the pack it got is cut short. A write after the reader left fails with EPIPE
    /// (Rust ignores SIGPIPE), but the last bytes fit in the pipe's buffer and never fail, so
    /// the last byte is held back until the reader took all the others, and then the pack
    /// waits until the reader took that one too: a reader that stopped short cannot have taken
    /// the last byte. A file or a socket on stdout is not waited on; a terminal is refused.
    /// Cancelled through `progress`.
    pub fn pack_to_stdout(
        &self,
        reference: &str,
        options: PackOptions,
        progress: &dyn Progress,
    ) -> Result<Packed> {
        self.pack_sealed_to_stdout(reference, options, None, progress)
    }

    /// [`Bundles::pack_to_stdout`], encrypted to `recipients` when given (see
    /// [`Bundles::pack_sealed`]).
    pub fn pack_sealed_to_stdout(
        &self,
        reference: &str,
        options: PackOptions,
        recipients: Option<&Recipients>,
        progress: &dyn Progress,
    ) -> Result<Packed> {
        let fail = |e: anyhow::Error| Error::new(Verb::Pack, reference, e);
        let id = self.stored("pack", reference).map_err(|e| fail(e.into()))?;
        if io::stdout().is_terminal() {
            return Err(fail(anyhow!(
                "refusing to write a pack to a terminal; redirect it or pass --out FILE"
            )));
        }
        let total = self
            .store
            .objects()
            .read_snapshot(&id)
            .map_err(|e| fail(e.into()))?
            .bytes();
        progress.begin(
            "packing",
            Some(Totals {
                files: 0,
                bytes: total,
            }),
        );
        let mut done = 0;
        let stats = pack_to_stdout(
            &self.store,
            &id,
            options,
            recipients,
            progress.cancel(),
            &mut |n| {
                done += n;
                progress.advance(Totals {
                    files: 0,
                    bytes: done,
                });
            },
        );
        progress.finish();
        Ok(Packed {
            id,
            destination: None,
            since: options.since,
            trees_only: options.trees_only,
            stats: stats.map_err(fail)?,
        })
    }

    /// Imports the pack file at `pack` into the store, checking every object against its id;
    /// only what its snapshot reaches is taken, and objects the store holds already are not
    /// read. The trust policy is applied over the signatures the pack carries before anything
    /// is written; the snapshot record is committed last, so a failed unpack leaves no
    /// snapshot (and says so: a record written but not catalogued is named, with how to list
    /// it). Returns the snapshot it carried. Cancelled through `progress`.
    ///
    /// See [`Bundles::pack`] for an example.
    pub fn unpack(&self, pack: &Path, progress: &dyn Progress) -> Result<Unpacked> {
        self.unpack_input(PackInput::File(pack), progress)
    }

    /// [`Bundles::unpack`] of a pack read from `stream` (standard input, a pipe), copied into
    /// the store's `tmp/` first; the trust policy is applied once the copy is whole.
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let pack = dir.path().join("tree.zbpack");
    /// bundles.pack(&snap.id.to_hex(), &pack, Default::default(), false, &Silent)?;
    /// let elsewhere = Bundles::create(dir.path().join("other-store"))?;
    /// let mut stream = std::fs::File::open(&pack)?;
    /// assert_eq!(elsewhere.unpack_reader(&mut stream, &Silent)?.id, snap.id);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unpack_reader(
        &self,
        stream: &mut dyn Read,
        progress: &dyn Progress,
    ) -> Result<Unpacked> {
        self.unpack_input(PackInput::Stream(stream), progress)
    }

    /// [`Bundles::unpack`] into the store at `store`, by the rule of which verbs may create a
    /// store: an unpack into a store that is not there (a missing path, an empty directory)
    /// makes it only if the unpack succeeds. The new store is made beside the path (the same
    /// directory, so the same filesystem) and renamed into place at the end, so a failed
    /// unpack (a damaged pack, an update whose base is missing, a refused signature) leaves no
    /// store behind, nor the directories above it that it made. A pack file that is not there,
    /// or is not a pack, is refused before anything is made. `policy` is the trust policy to
    /// apply ([`TrustPolicy::Store`]: the store's own `trust.toml`, none when there is no
    /// store yet).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, PackInput, Silent, TrustPolicy};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let pack = dir.path().join("tree.zbpack");
    /// bundles.pack(&snap.id.to_hex(), &pack, Default::default(), false, &Silent)?;
    /// let other = dir.path().join("hosts/b/store");
    /// let done = Bundles::unpack_at(&other, PackInput::File(&pack), TrustPolicy::Store, &Silent)?;
    /// assert_eq!(Bundles::open(&other)?.resolve(&done.id.to_hex())?, snap.id);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unpack_at(
        store: impl AsRef<Path>,
        pack: PackInput<'_>,
        policy: TrustPolicy,
        progress: &dyn Progress,
    ) -> Result<Unpacked> {
        let root = store.as_ref();
        let name = input_name(&pack);
        let fail = |e: anyhow::Error| Error::new(Verb::Unpack, name.clone(), e);
        let require = super::required_signers_at(root, &policy).map_err(fail)?;
        // A pack file that is not there, or not a pack, creates no store (a typo must not
        // leave one behind), nor does one whose signatures the policy refuses.
        let mut source = Source::open(pack).map_err(fail)?;
        source
            .gate(require.as_ref(), progress, true)
            .map_err(fail)?;
        let fresh = FreshStore::prepare(root).map_err(fail)?;
        let made = match &fresh {
            FreshStore::Staged { staged, .. } => Bundles::create(staged),
            _ => Bundles::create(root),
        }?;
        let unpacked = source.unpack(&made.store, require.as_ref(), fresh.existed(), progress);
        drop(made);
        match unpacked {
            Ok(done) => {
                fresh.commit().map_err(fail)?;
                Ok(done)
            }
            Err(e) => {
                fresh.discard();
                Err(fail(e))
            }
        }
    }

    /// The unpack of `pack` into this store, the trust policy applied (see [`Bundles::unpack`]).
    fn unpack_input(&self, pack: PackInput<'_>, progress: &dyn Progress) -> Result<Unpacked> {
        let name = input_name(&pack);
        let fail = |e: anyhow::Error| Error::new(Verb::Unpack, name.clone(), e);
        let require = self.required_signers().map_err(fail)?;
        let mut source = Source::open(pack).map_err(fail)?;
        source
            .gate(require.as_ref(), progress, true)
            .map_err(fail)?;
        source
            .unpack(&self.store, require.as_ref(), true, progress)
            .map_err(fail)
    }

    /// Publishes the snapshot `reference` names at `out` (staged, swapped in at once;
    /// `replace` says what may be replaced there). `reference` is read by the grammar as
    /// `checkout` reads it: a snapshot of the store (an id, a prefix, a name,
    /// `agent/<alias>`), a pack file (unpacked into the store first, every object verified,
    /// as [`Bundles::unpack`] does) or a remote ref `NAME/<id|name|agent/alias>` (pulled first,
    /// as [`Bundles::pull`] does); a directory is refused (it is no snapshot). The trust
    /// policy is applied before anything is downloaded or unpacked, and again over the
    /// store's signatures before the destination is touched. What it pulled or unpacked on
    /// the way, and who signed, is said through `progress` ([`Note::Step`]).
    ///
    /// ```
    /// use zeroclaw_bundle::{Bundles, Replace, Silent};
    /// # let dir = tempfile::tempdir()?;
    /// # let tree = dir.path().join("tree");
    /// # std::fs::create_dir(&tree)?;
    /// # std::fs::write(tree.join("a.txt"), "a\n")?;
    /// let bundles = Bundles::create(dir.path().join("store"))?;
    /// let snap = bundles.snapshot_dir(&tree, None, &Silent)?;
    /// let out = dir.path().join("copy");
    /// let done = bundles.checkout(&snap.id.to_hex(), &out, Replace::Nothing, &Silent)?;
    /// assert_eq!((done.id, done.published.files), (snap.id, 1));
    /// assert_eq!(std::fs::read(out.join("a.txt"))?, b"a\n");
    ///
    /// // A pack file is unpacked into the store first.
    /// let pack = dir.path().join("tree.zbpack");
    /// bundles.pack(&snap.id.to_hex(), &pack, Default::default(), false, &Silent)?;
    /// let elsewhere = Bundles::create(dir.path().join("other-store"))?;
    /// let pack_arg = pack.to_str().unwrap();
    /// elsewhere.checkout(pack_arg, &dir.path().join("copy2"), Replace::Nothing, &Silent)?;
    /// assert_eq!(elsewhere.resolve(&snap.id.to_hex())?, snap.id);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn checkout(
        &self,
        reference: &str,
        out: &Path,
        replace: Replace,
        progress: &dyn Progress,
    ) -> Result<CheckedOut> {
        let fail = |e: anyhow::Error| Error::new(Verb::Checkout, reference, e);
        let classified = classify(self.store.root(), OsStr::new(reference), Takes::CHECKOUT)
            .map_err(|e| fail(e.into()))?;
        let id = match &classified.target {
            Target::Remote {
                spec,
                reference: on_remote,
                ..
            } => {
                let (id, report) = self.pull_from(spec, on_remote, progress).map_err(fail)?;
                progress.note(Note::Step(&report.describe()));
                id
            }
            Target::Pack { file, .. } => {
                let unpacked = self
                    .unpack_quietly(file, progress)
                    .with_context(|| format!("could not check out {}", file.display()))
                    .map_err(fail)?;
                progress.note(Note::Step(&format!(
                    "unpacked {} from {}: {} new, verified",
                    unpacked.id.short(12),
                    file.display(),
                    count(unpacked.read as u64, "object")
                )));
                unpacked.id
            }
            _ => classified
                .stored_id(&self.store)
                .map_err(|e| fail(e.into()))?,
        };
        self.publish_stored(&id, out, replace, progress)
            .map_err(fail)
    }

    /// [`Bundles::unpack`] of the pack file `file` on the way to another verb: who signed is
    /// not said here (the verb's own gate over the store's signatures says it).
    fn unpack_quietly(&self, file: &Path, progress: &dyn Progress) -> anyhow::Result<Unpacked> {
        let require = self.required_signers()?;
        let mut source = Source::open(PackInput::File(file))?;
        source.gate(require.as_ref(), progress, false)?;
        source.unpack(&self.store, require.as_ref(), true, progress)
    }

    /// Publishes stored snapshot `id` at `out`: the trust policy first (who signed is said),
    /// then the destination is admitted, claimed, and the snapshot published.
    fn publish_stored(
        &self,
        id: &ObjectId,
        out: &Path,
        replace: Replace,
        progress: &dyn Progress,
    ) -> anyhow::Result<CheckedOut> {
        let context = || {
            format!(
                "could not publish snapshot {} to {}",
                id.short(12),
                out.display()
            )
        };
        // The trust policy, before the destination is touched (its refusal names the
        // snapshot and why).
        let signers = self.gate_stored(id)?;
        note_signers(progress, id, &signers);
        let snap = self.store.objects().read_snapshot(id)?;
        let admitted = check(&PublishRequest {
            dest: out,
            force: replace != Replace::Nothing,
            sources: &[],
            store: Some(self.store.root()),
            bundle: crate::export::BUNDLE,
        })
        .with_context(context)?;
        let _claim = admitted.claim().with_context(context)?;
        let replaced =
            check_replacement(Some(&self.store), &admitted, replace).with_context(context)?;
        let published =
            publish_snapshot(&self.store, id, &snap, &admitted, progress).with_context(context)?;
        Ok(CheckedOut {
            id: *id,
            published,
            replaced,
            signers,
        })
    }
}

/// What messages call a pack input, and an error's target.
fn input_name(pack: &PackInput<'_>) -> String {
    match pack {
        PackInput::File(path) => path.display().to_string(),
        PackInput::Stream(_) => "-".to_string(),
    }
}

/// The message of an unpack that imported nothing.
fn failed(what: &dyn std::fmt::Display) -> String {
    format!("could not unpack {what}; nothing was imported")
}

/// A pack on its way into a store: a file opened already (checked for form, so a missing or
/// damaged file is refused before anything is made), or a stream not read yet.
enum Source<'a> {
    File {
        path: &'a Path,
        reader: Box<PackReader>,
        signers: Vec<Signer>,
    },
    Stream(&'a mut dyn Read),
}

impl<'a> Source<'a> {
    fn open(input: PackInput<'a>) -> anyhow::Result<Source<'a>> {
        Ok(match input {
            PackInput::File(path) => Source::File {
                path,
                reader: Box::new(PackReader::open(path).with_context(|| failed(&path.display()))?),
                signers: Vec::new(),
            },
            PackInput::Stream(stream) => Source::Stream(stream),
        })
    }

    /// The trust policy over a pack file's own signatures, before anything is written (a
    /// stream's are checked once it is spooled). `say`: who signed is said as a step.
    fn gate(
        &mut self,
        require: Option<&AllowedSigners>,
        progress: &dyn Progress,
        say: bool,
    ) -> anyhow::Result<()> {
        let (
            Source::File {
                path,
                reader,
                signers,
            },
            Some(allowed),
        ) = (self, require)
        else {
            return Ok(());
        };
        *signers =
            gate_pack(reader, allowed, progress, say).with_context(|| failed(&path.display()))?;
        Ok(())
    }

    /// The unpack itself, into `store`: the pack (opened, or the stream spooled into the
    /// store first and gated), and every object it needs. `existed`: the store was there
    /// before this unpack (then a failure that wrote the record but not its catalog entry
    /// says so).
    fn unpack(
        self,
        store: &Store,
        require: Option<&AllowedSigners>,
        existed: bool,
        progress: &dyn Progress,
    ) -> anyhow::Result<Unpacked> {
        // Held (shared) from the spooled copy in tmp/ to the catalog entry: a gc waits instead
        // of removing the spool, or objects this import is about to reference.
        let _lock = store.write_lock()?;
        let (opened, spooled, what) = match self {
            Source::File {
                path,
                reader,
                signers,
            } => (Some((*reader, signers)), None, path.display().to_string()),
            Source::Stream(stream) => (
                None,
                Some(spool(store, stream, progress.cancel())?),
                "the pack from stdin".to_string(),
            ),
        };
        let watch = ImportProgress::new(progress);
        let root = std::cell::Cell::new(None);
        let result = (|| -> anyhow::Result<Unpacked> {
            let (pack, signers) = match opened {
                Some(opened) => opened,
                None => {
                    let spool = spooled.as_deref().expect("a stream was spooled");
                    let pack = PackReader::open(spool).map_err(|e| named_stdin(e, spool))?;
                    let signers = match require {
                        Some(allowed) => {
                            let sigs = pack.signatures().map_err(|e| named_stdin(e, spool))?;
                            gate_blobs(&pack.root, &sigs, allowed, progress, true)?
                        }
                        None => Vec::new(),
                    };
                    (pack, signers)
                }
            };
            root.set(Some(pack.root));
            let report: UnpackReport =
                store
                    .packs()
                    .unpack_counted(&pack, &watch)
                    .map_err(|e| match &spooled {
                        Some(spool) => named_stdin(e, spool),
                        None => e,
                    })?;
            Ok(Unpacked {
                id: report.id,
                objects: pack.entries().len(),
                read: report.read,
                already_present: report.present,
                signers,
            })
        })();
        progress.finish();
        if let Some(path) = &spooled {
            let _ = fs::remove_file(path);
        }
        if result.is_err() && progress.cancel().is_some_and(Cancel::is_cancelled) {
            // The import stopped before its objects landed: its staging directory is gone.
            bail!("interrupted: the unpack stopped; nothing was imported from {what}");
        }
        result.with_context(|| match root.get() {
            Some(root) if existed && recorded_not_listed(store, &root) => format!(
                "could not unpack {what}: its snapshot record {} was written but not \
                 catalogued, so `list` does not show it and `gc` keeps its objects; once the \
                 cause below is fixed, `zeroclaw-bundle reindex` lists it (then `forget` it if \
                 unwanted)",
                root.short(12)
            ),
            _ => failed(&what),
        })
    }
}

/// The trust policy over the signatures a pack carries; who signed is said when `say`.
fn gate_pack(
    pack: &PackReader,
    allowed: &AllowedSigners,
    progress: &dyn Progress,
    say: bool,
) -> anyhow::Result<Vec<Signer>> {
    let sigs = pack.signatures()?;
    gate_blobs(&pack.root, &sigs, allowed, progress, say)
}

/// The trust policy over signatures of snapshot `id` received from elsewhere (a pack's
/// section); who signed is said when `say`.
fn gate_blobs(
    id: &ObjectId,
    sigs: &[Vec<u8>],
    allowed: &AllowedSigners,
    progress: &dyn Progress,
    say: bool,
) -> anyhow::Result<Vec<Signer>> {
    let signers = crate::sign::require_signed_blobs(id, sigs, allowed)?;
    if say {
        note_signers(progress, id, &signers);
    }
    Ok(signers)
}

/// Whether a failed import got as far as writing snapshot `root`'s record but not its catalog
/// entry (the commit writes the record first; `forget` removes both, so a record the catalog
/// does not list was left by a failed commit). A catalog that cannot be opened lists nothing.
fn recorded_not_listed(store: &Store, root: &ObjectId) -> bool {
    store.objects().has(root) && store.catalog().resolve(&root.to_hex()).is_err()
}

/// A pack error about the spooled copy of a stream names standard input, not a temporary
/// file the operator never made (and that is removed by the time the message is read).
fn named_stdin(err: StoreError, spool: &Path) -> StoreError {
    match err {
        StoreError::BadPack { pack, why } if pack == spool => StoreError::BadPack {
            pack: PathBuf::from("from standard input"),
            why,
        },
        other => other,
    }
}

/// Copies `stream` into a file under the store's tmp/ (a pack is read from its end first).
/// Copied in chunks, so a cancel stops the spool too.
fn spool(store: &Store, stream: &mut dyn Read, cancel: Option<&Cancel>) -> anyhow::Result<PathBuf> {
    let dir = store.objects().tmp_dir().to_path_buf();
    fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let path = dir.join(format!("unpack-{}", zeroclaw_bundle_store::random_token()));
    let mut file =
        fs::File::create(&path).with_context(|| format!("could not create {}", path.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    let copied = loop {
        if cancel.is_some_and(Cancel::is_cancelled) {
            let _ = fs::remove_file(&path);
            bail!("interrupted: the unpack stopped; nothing was imported from the pack from stdin");
        }
        match stream.read(&mut buf) {
            Ok(0) => break file.flush(),
            Ok(n) => {
                if let Err(e) = file.write_all(&buf[..n]) {
                    break Err(e);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    if let Err(e) = copied {
        let _ = fs::remove_file(&path);
        return Err(e).context("could not read the pack from stdin");
    }
    Ok(path)
}

/// The store an unpack writes into, and what a failure must undo.
enum FreshStore {
    /// A store existed (or the path is something opening it will refuse by name).
    Existing,
    /// The path is an empty directory: the store is made in it, and a failed unpack empties
    /// it again.
    EmptyDir(PathBuf),
    /// Nothing is at the path: the store is made at `staged` beside it (same directory, so
    /// the same filesystem) and renamed to `dest` once the unpack succeeded. `made` are the
    /// missing parent directories this unpack created, outermost first.
    Staged {
        staged: PathBuf,
        dest: PathBuf,
        made: Vec<PathBuf>,
    },
}

impl FreshStore {
    fn prepare(dest: &Path) -> anyhow::Result<FreshStore> {
        match fs::symlink_metadata(dest) {
            Ok(m) if m.is_dir() => {
                let empty = fs::read_dir(dest)
                    .with_context(|| format!("could not read the store {}", dest.display()))?
                    .next()
                    .is_none();
                return Ok(if empty {
                    FreshStore::EmptyDir(dest.to_path_buf())
                } else {
                    FreshStore::Existing
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            _ => return Ok(FreshStore::Existing),
        }
        let Some(name) = dest.file_name() else {
            return Ok(FreshStore::Existing);
        };
        let parent = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut missing = Vec::new();
        let mut up = Some(parent.as_path());
        while let Some(dir) = up.filter(|d| !d.as_os_str().is_empty()) {
            if fs::symlink_metadata(dir).is_ok() {
                break;
            }
            missing.push(dir.to_path_buf());
            up = dir.parent();
        }
        let mut made = Vec::new();
        for dir in missing.into_iter().rev() {
            match fs::create_dir(&dir) {
                Ok(()) => made.push(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    remove_made(&made);
                    return Err(e).with_context(|| format!("could not create {}", dir.display()));
                }
            }
        }
        let staged = parent.join(format!(
            ".{}.unpack-{}",
            name.to_string_lossy(),
            zeroclaw_bundle_store::random_token()
        ));
        Ok(FreshStore::Staged {
            staged,
            dest: dest.to_path_buf(),
            made,
        })
    }

    /// Whether the store existed before this unpack.
    fn existed(&self) -> bool {
        matches!(self, FreshStore::Existing)
    }

    /// After a successful unpack: a staged store is moved into place.
    fn commit(self) -> anyhow::Result<()> {
        let FreshStore::Staged { staged, dest, made } = &self else {
            return Ok(());
        };
        if let Err(e) = fs::rename(staged, dest) {
            let _ = fs::remove_dir_all(staged);
            remove_made(made);
            return Err(e).with_context(|| {
                format!(
                    "could not move the new store into place at {} (did another process create \
                     it meanwhile? then run the unpack again); nothing was imported",
                    dest.display()
                )
            });
        }
        Ok(())
    }

    /// After a failed unpack: whatever it created is removed.
    fn discard(self) {
        match self {
            FreshStore::Existing => {}
            FreshStore::EmptyDir(dir) => {
                if let Ok(entries) = fs::read_dir(&dir) {
                    for entry in entries.flatten() {
                        let path = entry.path();
                        let _ = match entry.file_type() {
                            Ok(t) if t.is_dir() => fs::remove_dir_all(&path),
                            _ => fs::remove_file(&path),
                        };
                    }
                }
            }
            FreshStore::Staged { staged, made, .. } => {
                let _ = fs::remove_dir_all(&staged);
                remove_made(&made);
            }
        }
    }
}

/// Removes the directories an unpack created (outermost first), innermost first; one that
/// is no longer empty stays.
fn remove_made(made: &[PathBuf]) {
    for dir in made.iter().rev() {
        let _ = fs::remove_dir(dir);
    }
}

/// Writes the pack of `id` to stdout, and succeeds only once its reader took every byte (see
/// [`Bundles::pack_to_stdout`]).
fn pack_to_stdout(
    store: &Store,
    id: &ObjectId,
    options: PackOptions,
    recipients: Option<&Recipients>,
    cancel: Option<&Cancel>,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<PackStats> {
    let stdout = io::stdout();
    let fd = stdout.as_fd();
    let cut = |what: String| {
        anyhow!("could not write the pack to stdout: {what}; what it read is not a whole pack")
    };
    let broken = |e: io::Error| match e.kind() {
        io::ErrorKind::BrokenPipe => cut("its reader closed the pipe before the end".into()),
        _ => anyhow::Error::new(e).context("could not write the pack to stdout"),
    };
    let taken = || -> anyhow::Result<()> {
        let stop = || cancel.is_some_and(Cancel::is_cancelled);
        match crate::sys::wait_pipe_taken(fd, &stop) {
            Ok(crate::sys::PipeReader::Gone { unread }) => Err(cut(format!(
                "its reader closed the pipe with {} of the pack unread",
                human_bytes(unread)
            ))),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                bail!("interrupted: the pack to stdout was not taken whole by its reader")
            }
            Err(e) => Err(e).context("could not wait for the reader of stdout"),
        }
    };
    let mut out = HoldLast {
        inner: io::BufWriter::new(stdout.lock()),
        held: None,
    };
    let mut write = |w: &mut dyn Write| store.packs().write(id, options, w, progress);
    let written = match recipients {
        None => write(&mut out),
        Some(to) => crate::crypt::encrypt_to(to, &mut out, encrypting, write),
    };
    let stats = written.map_err(|e| match e {
        StoreError::PackOutput { error, .. } => broken(error),
        e => anyhow::Error::new(e).context("could not write the pack to stdout"),
    })?;
    out.inner.flush().map_err(broken)?;
    taken()?;
    if let Some(last) = out.held.take() {
        out.inner.write_all(&[last]).map_err(broken)?;
        out.inner.flush().map_err(broken)?;
    }
    taken()?;
    Ok(stats)
}

/// An error of the age encryption around a pack, as the pack's output error.
fn encrypting(error: io::Error) -> StoreError {
    StoreError::PackOutput {
        op: "encrypt",
        error,
    }
}

/// A writer that holds back the last byte written through it (see [`pack_to_stdout`]).
struct HoldLast<W: Write> {
    inner: W,
    held: Option<u8>,
}

impl<W: Write> Write for HoldLast<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some((&last, rest)) = buf.split_last() else {
            return Ok(0);
        };
        if let Some(held) = self.held.take() {
            self.inner.write_all(&[held])?;
        }
        self.inner.write_all(rest)?;
        self.held = Some(last);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
