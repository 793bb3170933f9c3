//! The reference grammar, read in one place: what an argument naming "something to read"
//! names, for every verb that takes one (`diff`, `review`, `import`, `mount`, `checkout`,
//! `ls`, `cat`, `show`, `pack`, and the [`crate::Bundles`] methods over a stored snapshot).
//!
//! ```text
//! DIR | PACK | SNAPSHOT | NAME | agent/ALIAS | REMOTE/REF   [:PATH where the verb reads one]
//! ```
//!
//! [`classify`] decides, in this order, touching nothing but `lstat`/`stat` and the store's
//! `remotes.toml`:
//!
//! 1. An argument spelled as a path (`/x`, `./x`, `../x`, `~/x`, `.`, `..`) is a path: one that
//!    does not exist is [`ReferenceError::Missing`] (never read as a snapshot, nor as a remote
//!    named `.`).
//! 2. An existing directory is [`Target::Dir`], an existing file [`Target::Pack`], when the verb
//!    takes that form. A verb that does not refuses a path-spelled one at once
//!    ([`ReferenceError::NotTaken`]); a bare word (`bundle`) is then read as a snapshot of the
//!    store, and refused naming the form only if the store has no snapshot of that name: a
//!    checkout into `./before-upgrade` does not stop `checkout before-upgrade` from working.
//! 3. `:PATH` is split off at the first `:` for a verb that reads a path inside a snapshot
//!    (`diff`, `ls`, `cat`): `PACK:PATH` when what comes before is an existing file. A verb
//!    that does not takes the argument whole (a name may hold a `:`), and says it takes no
//!    `:PATH` only when nothing answers to the whole.
//! 4. `REMOTE/REF`, `REMOTE` a remote configured in the store, is [`Target::Remote`] (`agent`
//!    can be no remote's name).
//! 5. Anything else is [`Target::Stored`]: a full id or a unique prefix of 8+ hex digits, a
//!    name, or `agent/ALIAS`, resolved by [`Reference::stored_id`].
//!
//! Errors are one vocabulary ([`ReferenceError`]) whatever the verb: the verb's name and the
//! forms it takes are the only words that change.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use zeroclaw_bundle_store::{
    unescape_name, ObjectId, ObjectSource, PackOverStore, PackReader, Snapshot, SnapshotSource,
    Store, StoreError,
};

use crate::remote::{Remote, RemoteError, RemoteSpec, RemoteView};

/// The largest tree index a stored snapshot opened here (for `diff`, `ls`, `cat`, `show`) is
/// read whole; a larger one is read tree by tree. A `diff` of two snapshots of 1.2 million
/// files (`SCALE_LAYOUTS=million scripts/scale.sh`) held both 62 MiB indexes whole and peaked
/// at 177 MiB; tree by tree it reads only the trees that differ. The benchmark corpus's index
/// (10,000 files) is under 1 MiB, read whole as before.
const INDEX_IN_MEMORY: u64 = 4 << 20;

/// A form of the grammar, for what a verb takes and what an error names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// An existing directory.
    Dir,
    /// An existing file (a pack).
    Pack,
    /// A snapshot of the store: id, prefix, name, `agent/ALIAS`.
    Stored,
    /// `REMOTE/REF`.
    Remote,
}

impl Form {
    /// The form, as an error names it.
    fn noun(self) -> &'static str {
        match self {
            Form::Dir => "a directory",
            Form::Pack => "a pack file",
            Form::Stored => "a snapshot of this store (SNAPSHOT, NAME or agent/ALIAS)",
            Form::Remote => "a remote ref (REMOTE/REF)",
        }
    }

    /// What makes an argument of this form one a verb over stored snapshots takes.
    fn first(self) -> &'static str {
        match self {
            Form::Dir => "capture it first: zeroclaw-bundle snapshot --dir",
            Form::Pack => "unpack it first: zeroclaw-bundle unpack",
            Form::Remote => "pull it first: zeroclaw-bundle pull",
            Form::Stored => "",
        }
    }
}

/// The forms a verb takes, and its name (what errors say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Takes {
    /// The verb, as typed (`diff`, `ls`).
    pub verb: &'static str,
    /// DIR.
    pub dir: bool,
    /// PACK.
    pub pack: bool,
    /// REMOTE/REF.
    pub remote: bool,
    /// `:PATH`, a path inside the snapshot.
    pub path: bool,
}

impl Takes {
    /// `diff`: every form, with `:PATH`.
    pub const DIFF: Takes = Takes::every("diff", true);
    /// `review`: every form, no path.
    pub const REVIEW: Takes = Takes::every("review", false);
    /// `import`: every form, no path.
    pub const IMPORT: Takes = Takes::every("import", false);
    /// `ls`: what holds a tree, with `:PATH`.
    pub const LS: Takes = Takes::snapshots("ls", true);
    /// `cat`: what holds a tree, with `:PATH`.
    pub const CAT: Takes = Takes::snapshots("cat", true);
    /// `show`: what holds a snapshot record.
    pub const SHOW: Takes = Takes::snapshots("show", false);
    /// `mount`: what holds a tree (a pack and a remote snapshot are served in place).
    pub const MOUNT: Takes = Takes::snapshots("mount", false);
    /// `checkout`: what holds a tree (a pack is unpacked, a remote snapshot pulled, first).
    pub const CHECKOUT: Takes = Takes::snapshots("checkout", false);

    /// Every form.
    const fn every(verb: &'static str, path: bool) -> Takes {
        Takes {
            verb,
            dir: true,
            pack: true,
            remote: true,
            path,
        }
    }

    /// Every form but a directory (which is no snapshot).
    const fn snapshots(verb: &'static str, path: bool) -> Takes {
        Takes {
            dir: false,
            ..Takes::every(verb, path)
        }
    }

    /// A snapshot of the store only (`SNAPSHOT | NAME | agent/ALIAS`), no path.
    pub const fn stored(verb: &'static str) -> Takes {
        Takes {
            verb,
            dir: false,
            pack: false,
            remote: false,
            path: false,
        }
    }

    fn takes(&self, form: Form) -> bool {
        match form {
            Form::Dir => self.dir,
            Form::Pack => self.pack,
            Form::Remote => self.remote,
            Form::Stored => true,
        }
    }

    /// The forms taken, as words (`a pack file, a snapshot of this store (...) or a remote ref
    /// (REMOTE/REF)`).
    fn described(&self) -> String {
        let forms: Vec<&str> = [Form::Dir, Form::Pack, Form::Stored, Form::Remote]
            .into_iter()
            .filter(|f| self.takes(*f))
            .map(Form::noun)
            .collect();
        match forms.split_last() {
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// What an argument names (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An existing directory, as given.
    Dir(PathBuf),
    /// An existing file, as given: a pack (opening it says whether it is one), and a path
    /// inside its snapshot (`PACK:PATH`; empty: the whole).
    Pack {
        /// The file.
        file: PathBuf,
        /// Raw path bytes inside the snapshot (empty: the whole).
        path: Vec<u8>,
    },
    /// A snapshot of a configured remote, and a path inside it (empty: the whole).
    Remote {
        /// The remote.
        spec: RemoteSpec,
        /// The snapshot reference on it (id, prefix, name, `agent/ALIAS`).
        reference: String,
        /// Raw path bytes inside the snapshot (empty: the whole).
        path: Vec<u8>,
    },
    /// A snapshot of the store, and a path inside it (empty: the whole).
    Stored {
        /// The reference (id, prefix, name, `agent/ALIAS`).
        reference: String,
        /// Raw path bytes inside the snapshot (empty: the whole).
        path: Vec<u8>,
    },
}

/// A classified argument: what it names, and what it was.
#[derive(Debug, Clone)]
pub struct Reference {
    /// What the argument names.
    pub target: Target,
    /// The argument as given (lossy), for messages.
    arg: String,
    /// The verb and its forms.
    takes: Takes,
    /// A bare word that is also an existing path of a form the verb does not take: said if
    /// the store has no snapshot of that name.
    shadows: Option<(Form, PathBuf)>,
}

/// Why an argument names nothing the verb can read.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    /// An argument spelled as a path names nothing.
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    /// An argument spelled as a path is a symlink to nothing.
    #[error("{} is a symlink to a path that does not exist", .0.display())]
    DanglingSymlink(PathBuf),
    /// An argument spelled as a path could not be looked at.
    #[error("could not read {}", path.display())]
    Stat {
        /// The path.
        path: PathBuf,
        /// What `lstat` said.
        #[source]
        source: std::io::Error,
    },
    /// A form the verb does not take.
    #[error("{arg} is {noun}, which `{verb}` does not take (it takes {takes}){first}")]
    NotTaken {
        /// The argument as given.
        arg: String,
        /// The verb.
        verb: &'static str,
        /// The form, as words.
        noun: &'static str,
        /// What the verb takes, as words.
        takes: String,
        /// What makes it one the verb takes (`; pull it first: ...`), or nothing.
        first: String,
    },
    /// `X:PATH` given to a verb that reads no path inside a snapshot, and `X:PATH` whole is
    /// no snapshot either.
    #[error(
        "`{verb}` takes no :PATH (only diff, ls and cat read a path inside a snapshot), \
         and {arg} names no snapshot whole"
    )]
    PathNotTaken {
        /// The argument as given.
        arg: String,
        /// The verb.
        verb: &'static str,
        /// Why the whole named nothing (none for a remote ref: never asked).
        #[source]
        source: Option<Box<StoreError>>,
    },
    /// Neither a file, a directory nor a remote ref, and no snapshot of this store; the
    /// reference's first component (`name`) could have been meant as a remote.
    #[error(
        "{arg} is not a file or directory, and {name:?} is not a configured remote (`remote list`), \
         so it was read as a snapshot of this store"
    )]
    NotRemote {
        /// The argument as given.
        arg: String,
        /// What would have been the remote's name.
        name: String,
        /// Why the snapshot lookup failed.
        #[source]
        source: Box<StoreError>,
    },
    /// Neither a file nor a directory, and no snapshot of this store.
    #[error("{arg} is not a file or directory, so it was read as a snapshot")]
    NotSnapshot {
        /// The argument as given.
        arg: String,
        /// Why the snapshot lookup failed.
        #[source]
        source: Box<StoreError>,
    },
    /// The store's `remotes.toml` could not be read (its words: the file and what is wrong).
    #[error("{0}")]
    Remotes(String),
    /// The store failed (an ambiguous prefix, a busy catalog).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ReferenceError {
    /// The store's error under this one, if any (what a hint is chosen by).
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            ReferenceError::NotRemote { source, .. }
            | ReferenceError::NotSnapshot { source, .. } => Some(source),
            ReferenceError::PathNotTaken { source, .. } => source.as_deref(),
            ReferenceError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// Whether `arg` is spelled as a path (`/x`, `./x`, `../x`, `~/x`, `.`, `..`): it can only
/// mean a path.
fn path_like(arg: &OsStr) -> bool {
    let bytes = arg.as_bytes();
    [&b"/"[..], b"./", b"../", b"~/"]
        .iter()
        .any(|p| bytes.starts_with(p))
        || bytes == b"."
        || bytes == b".."
}

/// Refuses an argument spelled as a path that does not exist (or is a dangling symlink): it
/// can only have meant a path, so "not a snapshot" or "no remote named `.`" would mislead.
/// `PACK:PATH` (an existing file, then `:`) names a path that exists (whether the verb reads
/// paths is said by [`classify`]). Step 1 of [`classify`], for a verb that says it before it
/// opens a store.
pub fn refuse_missing_path(arg: &OsStr) -> Result<(), ReferenceError> {
    if !path_like(arg) || pack_with_path(arg).is_some() {
        return Ok(());
    }
    let path = Path::new(arg);
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() && !path.exists() => {
            Err(ReferenceError::DanglingSymlink(path.to_path_buf()))
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ReferenceError::Missing(path.to_path_buf()))
        }
        Err(source) => Err(ReferenceError::Stat {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether `arg` names an existing path (a directory, a file, `PACK:PATH`): what needs no
/// store to be read.
pub fn names_a_path(arg: &OsStr) -> bool {
    Path::new(arg).exists() || pack_with_path(arg).is_some()
}

/// `PACK:PATH`: an argument that is no existing path, whose part before the first `:` is an
/// existing file.
fn pack_with_path(arg: &OsStr) -> Option<(PathBuf, Vec<u8>)> {
    if Path::new(arg).exists() {
        return None;
    }
    let bytes = arg.as_bytes();
    let colon = bytes.iter().position(|b| *b == b':')?;
    let file = Path::new(OsStr::from_bytes(&bytes[..colon]));
    if !file.is_file() {
        return None;
    }
    Some((file.to_path_buf(), split_target(arg).1))
}

/// Splits `REF[:PATH]` at the first `:` into the reference and the raw path bytes. A UTF-8
/// path may spell non-UTF-8 bytes as `\xNN` (how `ls` shows them). A `.` component is dropped
/// (`snap:./d/f` is `snap:d/f`): no tree holds an entry named `.`.
pub fn split_target(target: &OsStr) -> (String, Vec<u8>) {
    let bytes = target.as_bytes();
    match bytes.iter().position(|b| *b == b':') {
        Some(i) => {
            let reference = String::from_utf8_lossy(&bytes[..i]).into_owned();
            let path = &bytes[i + 1..];
            let path = match std::str::from_utf8(path) {
                Ok(text) => unescape_name(text),
                Err(_) => path.to_vec(),
            };
            let path = if path.split(|b| *b == b'/').any(|c| c == b".") {
                let kept: Vec<&[u8]> = path.split(|b| *b == b'/').filter(|c| *c != b".").collect();
                kept.join(&b'/')
            } else {
                path
            };
            (reference, path)
        }
        None => (String::from_utf8_lossy(bytes).into_owned(), Vec::new()),
    }
}

/// Classifies `arg` for the verb `takes` describes (see the module docs), with the remotes
/// configured in the store at `store_root` (which need not exist: then there are none).
pub fn classify(store_root: &Path, arg: &OsStr, takes: Takes) -> Result<Reference, ReferenceError> {
    classify_with(arg, takes, |name| {
        let remotes = crate::remote::load_remotes(store_root)
            .map_err(|e| ReferenceError::Remotes(e.to_string()))?;
        Ok(remotes.into_iter().find(|r| r.name == name))
    })
}

/// [`classify`], with `remote` saying which configured remote (if any) a name is: asked only
/// for an argument with a `/` that names no existing path. A caller that cannot read the
/// store's remotes answers with an error of its own.
pub fn classify_with<E: From<ReferenceError>>(
    arg: &OsStr,
    takes: Takes,
    remote: impl FnOnce(&str) -> Result<Option<RemoteSpec>, E>,
) -> Result<Reference, E> {
    let given = arg.to_string_lossy().into_owned();
    if let Some((file, path)) = pack_with_path(arg) {
        let reference = Reference {
            target: Target::Pack { file, path },
            arg: given.clone(),
            takes,
            shadows: None,
        };
        // Spelled as a path, it can only be `PACK:PATH`; a bare word may be a name holding a
        // `:`, for a verb that takes the argument whole.
        match (takes.pack && takes.path, path_like(arg)) {
            (true, _) => return Ok(reference),
            (false, true) if !takes.pack => return Err(reference.not_taken(Form::Pack).into()),
            (false, true) => return Err(reference.path_not_taken(None).into()),
            (false, false) => {}
        }
    }
    refuse_missing_path(arg)?;
    let path = Path::new(arg);
    let existing = if path.is_dir() {
        Some(Form::Dir)
    } else if path.is_file() {
        Some(Form::Pack)
    } else {
        None
    };
    let mut shadows = None;
    if let Some(form) = existing {
        let reference = Reference {
            target: match form {
                Form::Dir => Target::Dir(path.to_path_buf()),
                _ => Target::Pack {
                    file: path.to_path_buf(),
                    path: Vec::new(),
                },
            },
            arg: given.clone(),
            takes,
            shadows: None,
        };
        if takes.takes(form) {
            return Ok(reference);
        }
        if path_like(arg) {
            return Err(reference.not_taken(form).into());
        }
        shadows = Some((form, path.to_path_buf()));
    }
    let (reference, sub) = if takes.path {
        split_target(arg)
    } else {
        (given.clone(), Vec::new())
    };
    let named = |target| Reference {
        target,
        arg: given.clone(),
        takes,
        shadows: shadows.clone(),
    };
    if let Some((name, on_remote)) = reference.split_once('/') {
        if !name.is_empty() && !on_remote.is_empty() && name != "agent" {
            if let Some(spec) = remote(name)? {
                let found = named(Target::Remote {
                    spec,
                    reference: on_remote.to_string(),
                    path: sub,
                });
                if !takes.remote {
                    return Err(found.not_taken(Form::Remote).into());
                }
                // A remote snapshot's name may hold a `:` too, but it is never looked up:
                // what a verb without paths was given is most likely a path.
                if !takes.path && on_remote.contains(':') {
                    return Err(found.path_not_taken(None).into());
                }
                return Ok(found);
            }
        }
    }
    Ok(named(Target::Stored {
        reference,
        path: sub,
    }))
}

impl Reference {
    /// The argument as given (lossy).
    pub fn arg(&self) -> &str {
        &self.arg
    }

    /// The path inside the snapshot (`:PATH`; empty for the whole, and for a directory).
    pub fn path(&self) -> &[u8] {
        match &self.target {
            Target::Dir(_) => &[],
            Target::Pack { path, .. }
            | Target::Remote { path, .. }
            | Target::Stored { path, .. } => path,
        }
    }

    /// The snapshot a [`Target::Stored`] reference names: a full id with a tree index
    /// directly (no catalog session: `Catalog::resolve_indexed` says why that is sound), else
    /// through the catalog. Any other target is refused naming its form.
    pub fn stored_id(&self, store: &Store) -> Result<ObjectId, ReferenceError> {
        match &self.target {
            Target::Stored { reference, .. } => store
                .catalog()
                .resolve_indexed(reference)
                .map_err(|e| self.unresolved(e)),
            Target::Dir(_) => Err(self.not_taken(Form::Dir)),
            Target::Pack { .. } => Err(self.not_taken(Form::Pack)),
            Target::Remote { .. } => Err(self.not_taken(Form::Remote)),
        }
    }

    /// Says why a [`Target::Stored`] reference named no snapshot (`error`, from the store):
    /// the path it also is, when the verb does not take that form; that the verb takes no
    /// `:PATH`; or how it was read (as a snapshot, its first component not being a remote).
    /// Any other error of the store is passed as it is (an ambiguous prefix says so itself).
    pub fn unresolved(&self, error: StoreError) -> ReferenceError {
        let Target::Stored { reference, .. } = &self.target else {
            return ReferenceError::Store(error);
        };
        if !matches!(error, StoreError::UnknownSnapshot { .. }) {
            return ReferenceError::Store(error);
        }
        if let Some((form, _)) = &self.shadows {
            return self.not_taken(*form);
        }
        let arg = self.arg.clone();
        let source = Box::new(error);
        if !self.takes.path && reference.contains(':') {
            return self.path_not_taken(Some(source));
        }
        match reference.split_once('/') {
            Some((name, _)) if name != "agent" => ReferenceError::NotRemote {
                arg,
                name: name.to_string(),
                source,
            },
            _ => ReferenceError::NotSnapshot { arg, source },
        }
    }

    /// The error for a `:PATH` given to a verb that reads none (`source`: why the whole named
    /// no snapshot, when it was asked).
    fn path_not_taken(&self, source: Option<Box<StoreError>>) -> ReferenceError {
        ReferenceError::PathNotTaken {
            arg: self.arg.clone(),
            verb: self.takes.verb,
            source,
        }
    }

    /// The error for a form the verb does not take.
    fn not_taken(&self, form: Form) -> ReferenceError {
        // What is of that form: the pack file of `PACK:PATH`, else the argument.
        let named = match &self.target {
            Target::Pack { file, .. } => file.to_string_lossy().into_owned(),
            _ => self.arg.clone(),
        };
        let first = match form {
            Form::Stored => String::new(),
            _ => format!(
                "; {} {}",
                form.first(),
                crate::publish::shell_quote(Path::new(&named))
            ),
        };
        ReferenceError::NotTaken {
            arg: named,
            verb: self.takes.verb,
            noun: form.noun(),
            takes: self.takes.described(),
            first,
        }
    }
}

/// Where an opened snapshot is read from.
pub enum Held {
    /// A snapshot of the store: trees from its tree index (one file), blobs from the objects.
    Store(SnapshotSource),
    /// A pack, over the store when it is an update whose base the store holds.
    Pack(PackOverStore),
    /// A remote's snapshot, read in place (trees from its trees pack; blobs fetched when read,
    /// if it was opened for them).
    Remote(Box<RemoteView>),
}

/// A snapshot a [`Reference`] names, opened where it is (a pack is not unpacked, a remote
/// snapshot not pulled): what `ls`, `cat` and `show` read.
pub struct Opened {
    /// The snapshot.
    pub id: ObjectId,
    /// Its record.
    pub snapshot: Snapshot,
    /// Where its trees and blobs are read from.
    pub held: Held,
    /// What messages call it: a short id, `REMOTE/id`, `id (PACK)`.
    pub label: String,
    store: Option<Store>,
}

/// Why a snapshot could not be opened where it is.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The argument names nothing the verb reads.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The store or the pack failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The remote failed.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// A snapshot of a store was named, and no store was given.
    #[error("{0} names a snapshot of a store, and there is no store to read it from")]
    NoStore(String),
}

impl Opened {
    /// The snapshot's trees and blobs.
    pub fn source(&self) -> &dyn ObjectSource {
        match &self.held {
            Held::Store(s) => s,
            Held::Pack(p) => p,
            Held::Remote(r) => r.as_ref(),
        }
    }

    /// The signatures carried with the snapshot (opaque bytes): the store's, the pack's
    /// section, the remote's.
    pub fn signatures(&self) -> Result<Vec<Vec<u8>>, OpenError> {
        Ok(match (&self.held, &self.store) {
            (Held::Store(_), Some(store)) => store
                .catalog()
                .signatures(&self.id)?
                .into_iter()
                .map(|s| s.bytes)
                .collect(),
            (Held::Store(_), None) => Vec::new(),
            (Held::Pack(p), _) => p.pack().signatures()?,
            (Held::Remote(r), _) => r.remote().signatures(&self.id)?,
        })
    }
}

/// Opens the snapshot `reference` names where it is: a pack (checked whole first, as
/// `unpack` checks it; over `store` when it is an update whose base the store holds), a
/// remote's snapshot (its record and trees; with `blobs`, file contents are fetched when
/// read), a snapshot of `store`. A directory is no snapshot: refused naming its form.
pub fn open(
    store: Option<&Store>,
    reference: &Reference,
    blobs: bool,
) -> Result<Opened, OpenError> {
    let need_store = || store.ok_or_else(|| OpenError::NoStore(reference.arg.clone()));
    let (id, snapshot, held, label) = match &reference.target {
        Target::Pack { file, .. } => {
            let pack = PackReader::open(file)?;
            pack.check_trailer()?;
            let snapshot = pack.snapshot()?;
            let id = pack.root;
            let label = format!("{} ({})", id.short(12), file.display());
            (
                id,
                snapshot,
                Held::Pack(PackOverStore::new(pack, store.map(|s| s.objects()))),
                label,
            )
        }
        Target::Remote {
            spec,
            reference: on_remote,
            ..
        } => {
            let store = need_store()?;
            let remote = Remote::open(spec, false)?;
            let id = remote.resolve(on_remote)?;
            let view = RemoteView::open(remote, id, store.objects().tmp_dir(), blobs)?;
            let snapshot = view.snapshot().clone();
            let label = format!("{}/{}", spec.name, id.short(12));
            (id, snapshot, Held::Remote(Box::new(view)), label)
        }
        Target::Stored { .. } | Target::Dir(_) => {
            let store = need_store()?;
            let id = reference.stored_id(store)?;
            let snapshot = store.objects().read_snapshot(&id)?;
            let held = Held::Store(store.index().snapshot_source_within(&id, INDEX_IN_MEMORY));
            (id, snapshot, held, id.short(12))
        }
    };
    Ok(Opened {
        id,
        snapshot,
        held,
        label,
        store: store.cloned(),
    })
}

/// The store's error in one link of a cause chain, looked for through the grammar's own
/// wrappers (which hold it boxed): what a hint, or an [`crate::ErrorKind`], is chosen by.
pub fn store_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a StoreError> {
    e.downcast_ref::<StoreError>()
        .or_else(|| e.downcast_ref::<Box<StoreError>>().map(|b| &**b))
        .or_else(|| {
            e.downcast_ref::<ReferenceError>()
                .and_then(ReferenceError::store_error)
        })
        .or_else(|| match e.downcast_ref::<OpenError>() {
            Some(OpenError::Store(s)) => Some(s),
            Some(OpenError::Reference(r)) => r.store_error(),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> RemoteSpec {
        RemoteSpec {
            name: name.into(),
            url: "file:///nowhere".into(),
            endpoint: None,
            encrypted: false,
            key_id: None,
            identity: None,
        }
    }

    fn classify_in(dir: &Path, arg: &str, takes: Takes) -> Result<Reference, ReferenceError> {
        let arg = dir.join(arg);
        classify_with(arg.as_os_str(), takes, |_| Ok::<_, ReferenceError>(None))
    }

    fn bare(arg: &str, takes: Takes) -> Result<Reference, ReferenceError> {
        classify_with(OsStr::new(arg), takes, |name| {
            Ok::<_, ReferenceError>((name == "origin").then(|| spec("origin")))
        })
    }

    #[test]
    fn each_form_is_told_apart_in_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("p.zbpack"), b"x").unwrap();
        let d = classify_in(dir.path(), "d", Takes::DIFF).unwrap();
        assert_eq!(d.target, Target::Dir(dir.path().join("d")));
        let p = classify_in(dir.path(), "p.zbpack", Takes::DIFF).unwrap();
        let file = dir.path().join("p.zbpack");
        assert_eq!(
            p.target,
            Target::Pack {
                file: file.clone(),
                path: Vec::new()
            }
        );
        let inside = classify_in(dir.path(), "p.zbpack:./w/a.md", Takes::LS).unwrap();
        assert_eq!(
            inside.target,
            Target::Pack {
                file,
                path: b"w/a.md".to_vec()
            }
        );
        let e = classify_in(dir.path(), "p.zbpack:w", Takes::SHOW).unwrap_err();
        assert!(matches!(e, ReferenceError::PathNotTaken { .. }), "{e}");
        let e = classify_in(dir.path(), "p.zbpack:w", Takes::stored("pack")).unwrap_err();
        assert!(
            e.to_string().contains("is a pack file, which `pack`"),
            "{e}"
        );
        let missing = classify_in(dir.path(), "nope", Takes::DIFF).unwrap_err();
        assert!(matches!(missing, ReferenceError::Missing(_)), "{missing}");
        let r = bare("origin/agent/coder:docs/a.md", Takes::DIFF).unwrap();
        assert_eq!(
            r.target,
            Target::Remote {
                spec: spec("origin"),
                reference: "agent/coder".into(),
                path: b"docs/a.md".to_vec()
            }
        );
        let s = bare("agent/coder:docs", Takes::LS).unwrap();
        assert_eq!(
            s.target,
            Target::Stored {
                reference: "agent/coder".into(),
                path: b"docs".to_vec()
            }
        );
        // Without paths, a name may hold a `:`.
        let whole = bare("release:1", Takes::SHOW).unwrap();
        assert_eq!(
            whole.target,
            Target::Stored {
                reference: "release:1".into(),
                path: Vec::new()
            }
        );
        let e = bare("origin/abc:x", Takes::REVIEW).unwrap_err();
        assert!(e.to_string().contains("`review` takes no :PATH"), "{e}");
    }

    #[test]
    fn a_form_the_verb_does_not_take_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        let e = classify_in(dir.path(), "d", Takes::stored("pack")).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("is a directory, which `pack` does not take"),
            "{text}"
        );
        assert!(text.contains("snapshot --dir"), "{text}");
        let e = bare("origin/x", Takes::stored("pack")).unwrap_err();
        assert!(e.to_string().contains("pull it first"), "{e}");
        assert_eq!(
            Takes::MOUNT.described(),
            "a pack file, a snapshot of this store (SNAPSHOT, NAME or agent/ALIAS) or a remote \
             ref (REMOTE/REF)"
        );
    }
}
