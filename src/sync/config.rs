//! The three-way merge of an agent's config entries (toml_edit): per key of each entry of the
//! agent's closure (`agents.<alias>`, its providers, profiles, skill and MCP bundles, MCP
//! servers), what an update takes, keeps or finds in conflict, and the install's
//! `config.toml` text with only those keys changed.
//!
//! The caller names the entries as dotted TOML keys (`agents.coder`,
//! `providers.models.anthropic.main`, `mcp.servers.filesystem`: a segment below an array of
//! tables picks the element whose `name` is that segment). Inside an entry, tables present on
//! both sides are merged key by key; everything else is a value compared by meaning, not by
//! layout: a leaf, an array, an inline table (`{ a = 1 }` is one value, never merged inside)
//! and an array of tables. Keys outside the entries, and the comments and layout of every
//! key the merge does not change, stay as the local file has them; a replaced value keeps
//! the local comment beside it.
//!
//! Rules per key, as for files: changed on one side only, that side wins; the same change on
//! both, nothing to do; different changes, a conflict, refused or resolved by the
//! [`Conflicts`] policy ([`Conflicts::Copy`] keeps the local value: a key has no "beside").
//! Whether the merged text loads and passes ZeroClaw's `validate()` is the caller's check.

use toml_edit::{ArrayOfTables, DocumentMut, Item, Key, Table, TableLike, Value};

use super::{ConflictKind, Conflicts};

/// Which of the three documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Which {
    Base,
    Local,
    Incoming,
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::Base => "base (last imported)",
            Which::Local => "local",
            Which::Incoming => "incoming",
        })
    }
}

/// Why a config merge gave no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ConfigMergeError {
    #[error("could not parse the {which} config at line {line}, column {column}: {message}")]
    Parse {
        which: Which,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("entry `{path}` is not a dotted TOML key: {message}")]
    EntryPath { path: String, message: String },
    #[error("could not change `{path}` in the local config: {problem}")]
    Shape { path: String, problem: String },
    #[error("{} config key(s) changed here and upstream: {}", .conflicts.len(), listing(.conflicts))]
    Refused { conflicts: Vec<KeyConflict> },
}

/// One conflicting key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyConflict {
    /// The key's path from the document root.
    pub(crate) path: Vec<String>,
    pub(crate) kind: ConflictKind,
}

fn listing(conflicts: &[KeyConflict]) -> String {
    conflicts
        .iter()
        .map(|c| format!("{} ({})", dotted(&c.path), c.kind.describe()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the merge did at one key (keys nobody changed are not listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyAction {
    /// Changed the same way on both sides.
    Same,
    /// Changed (or added) only upstream: the incoming value is written.
    Take,
    /// Removed upstream and unchanged here: removed.
    Delete,
    /// Changed only here: kept.
    Keep,
    /// Removed here and unchanged upstream: stays removed.
    KeepLocalDeletion,
    /// Changed differently on both sides, resolved by the policy.
    Conflict {
        kind: ConflictKind,
        took_incoming: bool,
    },
}

/// One key and what the merge did there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyDecision {
    /// The key's path from the document root.
    pub(crate) path: Vec<String>,
    pub(crate) action: KeyAction,
}

/// The merged config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MergedConfig {
    /// The local `config.toml` with the merge's changes.
    pub(crate) text: String,
    /// Every key something changed at, in merge order.
    pub(crate) decisions: Vec<KeyDecision>,
}

/// A path as TOML writes it (`providers.models."a b".main`).
pub(crate) fn dotted(path: &[String]) -> String {
    path.iter()
        .map(|seg| Key::new(seg.as_str()).display_repr().into_owned())
        .collect::<Vec<_>>()
        .join(".")
}

/// Merges the `entries` of `incoming` into `local`, against `base`. Refused under
/// [`Conflicts::Refuse`] when a key conflicts.
pub(crate) fn merge_config(
    base: &str,
    local: &str,
    incoming: &str,
    entries: &[&str],
    policy: Conflicts,
) -> Result<MergedConfig, ConfigMergeError> {
    let base = parse(base, Which::Base)?;
    let mut doc = parse(local, Which::Local)?;
    let incoming = parse(incoming, Which::Incoming)?;
    let mut merge = Merge {
        policy,
        decisions: Vec::new(),
        conflicts: Vec::new(),
        steps: Vec::new(),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let segs: Vec<String> = Key::parse(entry)
            .map_err(|e| ConfigMergeError::EntryPath {
                path: entry.to_string(),
                message: e.message().trim().to_string(),
            })?
            .iter()
            .map(|k| k.get().to_string())
            .collect();
        let (_, parent) = segs.split_last().ok_or(ConfigMergeError::EntryPath {
            path: entry.to_string(),
            message: "it is empty".to_string(),
        })?;
        let parent_is_array = matches!(
            find(incoming.as_item(), parent),
            Some(Node::Item(Item::ArrayOfTables(_)))
        );
        let mut path = segs.clone();
        merge.key(
            &Place {
                entry: paths.len(),
                entry_len: segs.len(),
            },
            &mut path,
            find(base.as_item(), &segs),
            find(doc.as_item(), &segs),
            find(incoming.as_item(), &segs),
        );
        paths.push((segs, parent_is_array));
    }
    if policy == Conflicts::Refuse && !merge.conflicts.is_empty() {
        return Err(ConfigMergeError::Refused {
            conflicts: merge.conflicts,
        });
    }
    for step in merge.steps {
        let (segs, parent_is_array) = &paths[step.entry];
        apply(&mut doc, segs, *parent_is_array, &step.keys, step.set)?;
    }
    Ok(MergedConfig {
        text: doc.to_string(),
        decisions: merge.decisions,
    })
}

fn parse(text: &str, which: Which) -> Result<DocumentMut, ConfigMergeError> {
    text.parse().map_err(|e: toml_edit::TomlError| {
        let offset = e.span().map_or(0, |s| s.start).min(text.len());
        let before = &text.as_bytes()[..offset];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let column = offset
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        ConfigMergeError::Parse {
            which,
            line,
            column,
            message: e.message().trim().to_string(),
        }
    })
}

/// What one side holds at a key: a standard table (merged key by key) or anything else (a
/// value: leaf, array, inline table, array of tables).
#[derive(Clone, Copy)]
enum Node<'a> {
    Table(&'a Table),
    Item(&'a Item),
}

impl<'a> Node<'a> {
    fn of(item: &'a Item) -> Option<Node<'a>> {
        match item {
            Item::None => None,
            Item::Table(t) => Some(Node::Table(t)),
            other => Some(Node::Item(other)),
        }
    }

    fn child(table: &'a Table, key: &str) -> Option<Node<'a>> {
        table.get(key).and_then(Node::of)
    }

    fn table_like(self) -> Option<&'a dyn TableLike> {
        match self {
            Node::Table(t) => Some(t),
            Node::Item(i) => i.as_table_like(),
        }
    }

    fn to_item(self) -> Item {
        match self {
            Node::Table(t) => Item::Table(t.clone()),
            Node::Item(i) => i.clone(),
        }
    }
}

/// Follows `segs` from `root` through tables (standard or inline) and arrays of tables (by
/// each element's `name`).
fn find<'a>(root: &'a Item, segs: &[String]) -> Option<Node<'a>> {
    let mut node = Node::of(root)?;
    for seg in segs {
        node = match node {
            Node::Table(t) => Node::of(t.get(seg)?)?,
            Node::Item(Item::ArrayOfTables(a)) => {
                Node::Table(a.iter().find(|t| name_of(t) == Some(seg.as_str()))?)
            }
            Node::Item(item) => Node::of(item.as_table_like()?.get(seg)?)?,
        };
    }
    Some(node)
}

fn name_of(table: &Table) -> Option<&str> {
    table.get("name").and_then(Item::as_str)
}

/// Where a step lands: entry `entry` of the caller's list, whose path is the first
/// `entry_len` segments of the key's path.
struct Place {
    entry: usize,
    entry_len: usize,
}

/// One change to the local document: set or remove `keys` (empty: the entry itself).
struct Step {
    entry: usize,
    keys: Vec<String>,
    set: Option<Item>,
}

struct Merge {
    policy: Conflicts,
    decisions: Vec<KeyDecision>,
    conflicts: Vec<KeyConflict>,
    steps: Vec<Step>,
}

impl Merge {
    /// The three-way rule at the key `path`.
    fn key(
        &mut self,
        at: &Place,
        path: &mut Vec<String>,
        base: Option<Node>,
        local: Option<Node>,
        incoming: Option<Node>,
    ) {
        // Tables on both sides merge key by key (and name the very keys that agree).
        if let (Some(Node::Table(l)), Some(Node::Table(i))) = (local, incoming) {
            let b = match base {
                Some(Node::Table(b)) => Some(b),
                _ => None,
            };
            return self.tables(at, path, b, l, i);
        }
        if same(local, incoming) {
            if !same(local, base) {
                self.decide(path, KeyAction::Same);
            }
            return;
        }
        let take = |merge: &mut Merge| {
            merge.steps.push(Step {
                entry: at.entry,
                keys: path[at.entry_len..].to_vec(),
                set: incoming.map(Node::to_item),
            })
        };
        if same(local, base) {
            take(self);
            let action = match incoming {
                Some(_) => KeyAction::Take,
                None => KeyAction::Delete,
            };
            return self.decide(path, action);
        }
        if same(incoming, base) {
            let action = match local {
                Some(_) => KeyAction::Keep,
                None => KeyAction::KeepLocalDeletion,
            };
            return self.decide(path, action);
        }
        let kind = match (base, local, incoming) {
            (None, _, _) => ConflictKind::BothAdded,
            (Some(_), None, _) => ConflictKind::DeletedLocally,
            (Some(_), _, None) => ConflictKind::DeletedUpstream,
            (Some(_), Some(_), Some(_)) => ConflictKind::BothModified,
        };
        let took_incoming = self.policy == Conflicts::TakeIncoming;
        if took_incoming {
            take(self);
        }
        self.conflicts.push(KeyConflict {
            path: path.clone(),
            kind,
        });
        self.decide(
            path,
            KeyAction::Conflict {
                kind,
                took_incoming,
            },
        );
    }

    /// Every key of three tables (local order, then keys new upstream, then keys only the
    /// base has).
    fn tables(
        &mut self,
        at: &Place,
        path: &mut Vec<String>,
        base: Option<&Table>,
        local: &Table,
        incoming: &Table,
    ) {
        let mut keys: Vec<&str> = local.iter().map(|(k, _)| k).collect();
        keys.extend(
            incoming
                .iter()
                .map(|(k, _)| k)
                .filter(|k| !local.contains_key(k)),
        );
        keys.extend(
            base.into_iter()
                .flat_map(|b| b.iter())
                .map(|(k, _)| k)
                .filter(|k| !local.contains_key(k) && !incoming.contains_key(k)),
        );
        for key in keys {
            path.push(key.to_string());
            self.key(
                at,
                path,
                base.and_then(|b| Node::child(b, key)),
                Node::child(local, key),
                Node::child(incoming, key),
            );
            path.pop();
        }
    }

    fn decide(&mut self, path: &[String], action: KeyAction) {
        self.decisions.push(KeyDecision {
            path: path.to_vec(),
            action,
        });
    }
}

fn same(a: Option<Node>, b: Option<Node>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => match (a.table_like(), b.table_like(), a, b) {
            (Some(x), Some(y), _, _) => same_table(x, y),
            (None, None, Node::Item(x), Node::Item(y)) => same_item(x, y),
            _ => false,
        },
        _ => false,
    }
}

/// Equal as TOML means it: same keys and values whatever their order, layout or comments;
/// a standard table equals the inline table of the same keys.
fn same_item(a: &Item, b: &Item) -> bool {
    if let (Some(x), Some(y)) = (a.as_table_like(), b.as_table_like()) {
        return same_table(x, y);
    }
    if let (Item::Value(x), Item::Value(y)) = (a, b) {
        return same_value(x, y);
    }
    match (table_list(a), table_list(b)) {
        (Some(x), Some(y)) => {
            x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| same_table(*p, *q))
        }
        _ => false,
    }
}

/// The tables of an array of tables, or of an array whose elements are all inline tables.
fn table_list(item: &Item) -> Option<Vec<&dyn TableLike>> {
    match item {
        Item::ArrayOfTables(a) => Some(a.iter().map(|t| t as &dyn TableLike).collect()),
        Item::Value(Value::Array(a)) => a
            .iter()
            .map(|v| v.as_inline_table().map(|t| t as &dyn TableLike))
            .collect(),
        _ => None,
    }
}

fn same_table(x: &dyn TableLike, y: &dyn TableLike) -> bool {
    x.iter().count() == y.iter().count()
        && x.iter()
            .all(|(k, i)| y.get(k).is_some_and(|j| !j.is_none() && same_item(i, j)))
}

fn same_value(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::String(a), Value::String(b)) => a.value() == b.value(),
        (Value::Integer(a), Value::Integer(b)) => a.value() == b.value(),
        // NaN equals NaN here: an unchanged `nan` is not a change.
        (Value::Float(a), Value::Float(b)) => {
            a.value() == b.value() || (a.value().is_nan() && b.value().is_nan())
        }
        (Value::Boolean(a), Value::Boolean(b)) => a.value() == b.value(),
        (Value::Datetime(a), Value::Datetime(b)) => a.value() == b.value(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(p, q)| same_value(p, q))
        }
        (Value::InlineTable(a), Value::InlineTable(b)) => same_table(a, b),
        _ => false,
    }
}

/// A table or an array of tables on the way down the local document.
enum Slot<'a> {
    Table(&'a mut Table),
    Array(&'a mut ArrayOfTables),
}

/// Sets or removes `keys` below entry `segs` in `doc` (`keys` empty: the entry itself, its
/// missing parents created, as an array of tables when `parent_is_array`).
fn apply(
    doc: &mut DocumentMut,
    segs: &[String],
    parent_is_array: bool,
    keys: &[String],
    set: Option<Item>,
) -> Result<(), ConfigMergeError> {
    let full: Vec<String> = segs.iter().chain(keys).cloned().collect();
    let shape = |upto: usize, problem: &str| ConfigMergeError::Shape {
        path: dotted(&full[..upto]),
        problem: problem.to_string(),
    };
    let (last, parents) = full.split_last().expect("an entry path has a segment");
    let creating = keys.is_empty() && set.is_some();
    let mut slot = Slot::Table(doc.as_table_mut());
    for (n, seg) in parents.iter().enumerate() {
        let as_array = parent_is_array && keys.is_empty() && n + 1 == parents.len();
        slot = match step(slot, seg, creating, as_array) {
            Ok(Some(next)) => next,
            // Removing what is not there: nothing to do.
            Ok(None) => return Ok(()),
            Err(problem) => return Err(shape(n + 1, problem)),
        };
    }
    let set = set.map(reset_layout);
    match slot {
        Slot::Table(t) => match (t.get_mut(last), set) {
            (Some(old), Some(new)) if !old.is_none() => *old = conform(old, new),
            (_, Some(new)) => {
                t.insert(last, new);
            }
            (_, None) => {
                t.remove(last);
            }
        },
        Slot::Array(a) => {
            let at = a.iter().position(|t| name_of(t) == Some(last.as_str()));
            match (at, set) {
                (Some(i), Some(new)) => {
                    a.replace(
                        i,
                        into_table(new).ok_or_else(|| shape(full.len(), "not a table"))?,
                    );
                }
                (None, Some(new)) => {
                    a.push(into_table(new).ok_or_else(|| shape(full.len(), "not a table"))?)
                }
                (Some(i), None) => {
                    a.remove(i);
                }
                (None, None) => {}
            }
        }
    }
    Ok(())
}

/// One segment down: a table's key, or the element of an array of tables of that name.
/// `Ok(None)` when it is missing and not to be created.
fn step<'a>(
    slot: Slot<'a>,
    seg: &str,
    create: bool,
    as_array: bool,
) -> Result<Option<Slot<'a>>, &'static str> {
    match slot {
        Slot::Table(t) => {
            if t.get(seg).is_none_or(Item::is_none) {
                if !create {
                    return Ok(None);
                }
                let new = if as_array {
                    Item::ArrayOfTables(ArrayOfTables::new())
                } else {
                    let mut table = Table::new();
                    table.set_implicit(true);
                    Item::Table(table)
                };
                t.insert(seg, new);
            }
            match t.get_mut(seg) {
                Some(Item::Table(next)) => Ok(Some(Slot::Table(next))),
                Some(Item::ArrayOfTables(next)) => Ok(Some(Slot::Array(next))),
                _ => Err("it is a value here (an inline table or another value), not a table"),
            }
        }
        Slot::Array(a) => match a.iter_mut().find(|t| name_of(t) == Some(seg)) {
            Some(next) => Ok(Some(Slot::Table(next))),
            None if create => Err("no element of this array of tables has that name"),
            None => Ok(None),
        },
    }
}

/// An incoming item made ready to go into the local document: no comments or positions of
/// the incoming file (new tables render after the local tables around them).
fn reset_layout(mut item: Item) -> Item {
    fn table(t: &mut Table) {
        t.decor_mut().clear();
        t.set_position(None);
        for (mut key, item) in t.iter_mut() {
            key.leaf_decor_mut().clear();
            layout(item);
        }
    }
    fn layout(item: &mut Item) {
        match item {
            Item::Table(t) => table(t),
            Item::ArrayOfTables(a) => a.iter_mut().for_each(table),
            Item::Value(v) => v.decor_mut().clear(),
            Item::None => {}
        }
    }
    layout(&mut item);
    item
}

/// `new` in the local form of `old`: a value keeps the local comment beside it, and a table
/// where the local file had an inline table (or the reverse) takes the local form.
fn conform(old: &Item, new: Item) -> Item {
    match (old, new) {
        (Item::Value(old), Item::Table(t)) => conform(
            &Item::Value(old.clone()),
            Item::Value(Value::InlineTable(t.into_inline_table())),
        ),
        (Item::Value(old), Item::Value(mut v)) => {
            *v.decor_mut() = old.decor().clone();
            Item::Value(v)
        }
        (Item::Table(_), Item::Value(Value::InlineTable(t))) => Item::Table(t.into_table()),
        (_, new) => new,
    }
}

fn into_table(item: Item) -> Option<Table> {
    match item {
        Item::Table(t) => Some(t),
        Item::Value(Value::InlineTable(t)) => Some(t.into_table()),
        _ => None,
    }
}
