//! The intent journal of an update or rollback, and `recover --install`, which finishes one a
//! kill cut short.
//!
//! A change of an agent (`super::update`) first makes its state durable and reachable: both
//! `config.toml` texts in the agent's state directory
//! (`<install>/.zeroclaw-bundle/updates/<alias>/N.before.toml`, `N.after.toml`) and snapshot
//! records of the trees before and after, of the workspace and of each skill directory it
//! replaces, in the store. Then, before its first write to the agent, it writes the intent: `<install>/.zeroclaw-bundle/updates/<alias>/pending`, the state it is
//! going to (its `seq` and `verb` first), staged, renamed into place and made durable with an
//! fsync of the directory. That write is the change's commit point: a change killed before it
//! left the agent as it was; one killed after it is finished by [`recover_install`], which
//! rolls forward to the state after. Each write after the intent is idempotent
//! (`super::update::finish`): the workspace is published again when it still holds the tree
//! before, provenance is written, `config.toml` (after a backup) when it still holds the text
//! before, the state is added to `states.toml`; the intent is removed last, durably.
//!
//! Recovering refuses, naming the path, when `config.toml` or the workspace is neither as
//! before nor as after (someone edited it since the kill): rolling forward would lose that
//! edit. While an intent is pending, `update`, `rollback` and `import` into the install are
//! refused ([`refuse_pending`]): they would plan against a half-written state. Everything here
//! runs under the install's lock, so a `recover` beside a live update fails at once (busy)
//! instead of finishing what is still running.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;
use zeroclaw_bundle_store::Store;

use super::update::{self, State, Tail, UpdateError};
use super::ImportError;
use crate::agent::{Install, CONFIG_FILE};
use crate::progress::Progress;

/// The intent's file name in an agent's state directory.
pub const PENDING_FILE: &str = "pending";

/// What [`crate::Bundles::recover_install`] did.
#[derive(Debug, Clone, Serialize)]
pub struct InstallRecovered {
    /// The install root.
    pub install: PathBuf,
    /// The changes finished, one per agent that had one pending, by alias.
    pub completed: Vec<Completed>,
}

impl InstallRecovered {
    /// Nothing was pending: nothing was done.
    pub fn nothing_done(&self) -> bool {
        self.completed.is_empty()
    }
}

/// One update or rollback finished by [`crate::Bundles::recover_install`]: the agent is now
/// in the state after it.
#[derive(Debug, Clone, Serialize)]
pub struct Completed {
    /// The local agent.
    pub alias: String,
    /// `update` or `rollback`.
    pub verb: String,
    /// The number of the state it went to (in the agent's `states.toml`).
    pub seq: u64,
    /// The trees (`the workspace of agent A`, `skill bundle S`) that still held the files
    /// before and were published again; the others held those after already.
    pub published: Vec<String>,
    /// `config.toml` still held the text before and was written; `false`: it held the text
    /// after already.
    pub config_written: bool,
    /// The backup of `config.toml` written with it.
    pub backup: Option<PathBuf>,
    /// What the killed publish had left beside a tree, removed (or put back).
    pub leftovers: Vec<PathBuf>,
}

/// Writes the intent of the change to `state` in state directory `dir`, durably (see the
/// module doc): the commit point of the change.
pub(super) fn begin(store: &Store, dir: &Path, state: &State) -> Result<(), UpdateError> {
    let file = dir.join(PENDING_FILE);
    let text = toml::to_string(state).map_err(|e| UpdateError::State {
        path: file.clone(),
        message: e.to_string(),
    })?;
    update::write_private(store, &file, &text)?;
    // One fsync of the directory makes the intent's name durable, and with it the names of
    // the state's texts written beside it just before.
    update::sync_dir(dir)
}

/// Removes the intent in state directory `dir` (there or not), durably: the change is done.
pub(super) fn end(dir: &Path) -> Result<(), UpdateError> {
    let file = dir.join(PENDING_FILE);
    match fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(UpdateError::State {
                path: file,
                message: format!("could not remove it: {e}"),
            })
        }
    }
    update::sync_dir(dir)
}

/// The pending intent in state directory `dir`, if any.
fn read(dir: &Path) -> Result<Option<State>, UpdateError> {
    let file = dir.join(PENDING_FILE);
    let text = match crate::sys::read_small_text(&file, 1 << 20, "an update's intent") {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(UpdateError::State {
                path: file,
                message: e.to_string(),
            })
        }
    };
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| UpdateError::State {
            path: file,
            message: e.message().to_string(),
        })
}

/// The agents of install `root` with an intent pending, sorted.
fn pending_aliases(root: &Path) -> io::Result<Vec<String>> {
    let dir = root.join(update::STATES_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        // No state directory (or a file where one would be): no update ever began here.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    let mut aliases = Vec::new();
    for entry in entries {
        let entry = entry?;
        if fs::symlink_metadata(entry.path().join(PENDING_FILE)).is_ok() {
            aliases.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    aliases.sort();
    Ok(aliases)
}

/// Refuses to plan or write into install `root` while an update or rollback of one of its
/// agents is pending (see the module doc).
pub(crate) fn refuse_pending(root: &Path) -> Result<(), ImportError> {
    let states = root.join(update::STATES_DIR);
    let aliases = pending_aliases(root).map_err(|source| ImportError::Read {
        path: states.clone(),
        source,
    })?;
    match aliases.into_iter().next() {
        None => Ok(()),
        Some(alias) => Err(ImportError::Pending {
            intent: update::states_dir(root, &alias).join(PENDING_FILE),
            alias,
            install: root.to_path_buf(),
        }),
    }
}

/// Finishes every update or rollback of install `install` that a kill cut short (see the
/// module doc), agent by agent in alias order; stops at the first that cannot be finished.
/// With nothing pending it does nothing.
pub fn recover_install(
    store: &Store,
    install: &Path,
    progress: &dyn Progress,
) -> Result<InstallRecovered, UpdateError> {
    let root = std::path::absolute(install).unwrap_or_else(|_| install.to_path_buf());
    let config = root.join(CONFIG_FILE);
    fs::symlink_metadata(&config).map_err(|source| ImportError::Read {
        path: config.clone(),
        source,
    })?;
    let aliases = pending_aliases(&root).map_err(|source| ImportError::Read {
        path: root.join(update::STATES_DIR),
        source,
    })?;
    let mut completed = Vec::new();
    for alias in aliases {
        completed.extend(complete(store, &root, &alias, progress)?);
    }
    Ok(InstallRecovered {
        install: root,
        completed,
    })
}

/// Finishes the pending change of agent `alias` of install `root`, under the install's lock;
/// `None` when it was finished meanwhile.
fn complete(
    store: &Store,
    root: &Path,
    alias: &str,
    progress: &dyn Progress,
) -> Result<Option<Completed>, UpdateError> {
    let _lock = update::lock_install(root)?;
    let dir = update::states_dir(root, alias);
    let Some(state) = read(&dir)? else {
        return Ok(None);
    };
    let before = update::read_state_text(&dir, &state.before_config)?;
    let after = update::read_state_text(&dir, &state.after_config)?;
    let edited = |path: PathBuf, remedy: String| UpdateError::Edited {
        path,
        verb: state.verb.clone(),
        alias: alias.to_string(),
        remedy,
    };

    // config.toml: as before (to write) or as after (written); anything else is an edit.
    let config_path = root.join(CONFIG_FILE);
    let config_target = super::config_target(&config_path)?;
    let (now, meta) = super::read_config(&config_target)?;
    if now != before && now != after {
        return Err(edited(
            config_path,
            format!(
                "keep your edit elsewhere, copy {} (as after) or {} (as before) over it, \
                 then run recover again",
                dir.join(&state.after_config).display(),
                dir.join(&state.before_config).display()
            ),
        ));
    }

    let trees = trees_of(root, alias, &state, (&before, &after))?;
    let mut publish = Vec::new();
    let mut leftovers = Vec::new();
    let mut remove = Vec::new();
    for t in trees {
        let cleaned = crate::publish::recover(&t.dir).map_err(|source| ImportError::Publish {
            what: t.what.clone(),
            path: t.dir.clone(),
            source: Box::new(source),
        })?;
        leftovers.extend(
            cleaned
                .restored_from
                .into_iter()
                .chain(cleaned.removed_old)
                .chain(cleaned.removed_staging),
        );
        let tree = update::capture_tree(store, &t.dir, progress)?;
        if tree != t.after_tree && tree != t.before_tree {
            return Err(edited(
                t.dir.clone(),
                format!(
                    "move your edit out of it and put the files after back (`zeroclaw-bundle \
                     checkout {} --out {} --force`), then run recover again",
                    t.after_snapshot.to_hex(),
                    t.dir.display()
                ),
            ));
        }
        if t.remove {
            remove.push(t.dir.clone());
        }
        if tree != t.after_tree {
            publish.push((t.what, t.dir, t.after_tree));
        }
    }

    let tail = Tail {
        root,
        alias,
        state: &state,
        before_config: &before,
        after_config: &after,
        config_path: &config_path,
        config_target: &config_target,
        publish,
        remove,
        write_config: now != after,
        keep: update::keep_of(&meta),
    };
    let backup = update::finish(store, &tail, progress)?;
    Ok(Some(Completed {
        alias: alias.to_string(),
        verb: state.verb.clone(),
        seq: state.seq,
        published: tail.publish.into_iter().map(|(what, ..)| what).collect(),
        config_written: tail.write_config,
        backup,
        leftovers,
    }))
}

/// One tree of a cut-short change, as `recover` settles it.
struct Settled {
    what: String,
    dir: PathBuf,
    before_tree: zeroclaw_bundle_store::ObjectId,
    after_tree: zeroclaw_bundle_store::ObjectId,
    after_snapshot: zeroclaw_bundle_store::ObjectId,
    /// Removed once emptied.
    remove: bool,
}

/// The trees the change in `state` replaces: the workspace (where the install as before, of
/// the `configs` before and after, puts it), then each skill bundle's directory (where the
/// install after puts it, or before when the change drops it).
fn trees_of(
    root: &Path,
    alias: &str,
    state: &State,
    configs: (&str, &str),
) -> Result<Vec<Settled>, UpdateError> {
    let load = |text: &str| {
        Install::from_toml_str(root, text).map_err(|source| ImportError::Install {
            root: root.to_path_buf(),
            source,
        })
    };
    let (install_before, install_after) = (load(configs.0)?, load(configs.1)?);
    let mut trees = vec![Settled {
        what: update::merged_dir_noun(alias),
        dir: update::merged_dir(&install_before, root, alias),
        before_tree: state.before_tree,
        after_tree: state.after_tree,
        after_snapshot: state.after_snapshot,
        remove: false,
    }];
    for skill in &state.skills {
        let installs = [&install_after, &install_before];
        let Some(dir) = update::skill_dir(root, &skill.alias, &installs)? else {
            continue;
        };
        trees.push(Settled {
            what: format!("skill bundle {}", skill.alias),
            dir,
            before_tree: skill.before_tree,
            after_tree: skill.after_tree,
            after_snapshot: skill.after_snapshot,
            remove: skill.remove,
        });
    }
    Ok(trees)
}
