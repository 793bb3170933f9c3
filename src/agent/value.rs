//! An owned, decor-free TOML value tree with insertion-ordered tables.
//!
//! The install's `config.toml` is parsed with toml_edit and converted into this tree at load, so
//! no comment, whitespace or other formatting of the source can reach a bundle (a comment next to
//! an `api_key` would otherwise travel with it). ZeroClaw's closure is converted into this tree
//! for our stricter layers (name scrub, process flags, credential-looking values) and back.
//! Tables keep insertion order.

use toml_edit::{Datetime, Item, Value};

/// One TOML value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Node {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Datetime(Datetime),
    Array(Vec<Node>),
    Table(Table),
}

impl Node {
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_table(&self) -> Option<&Table> {
        match self {
            Node::Table(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&[Node]> {
        match self {
            Node::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The TOML type name, for error messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Node::Str(_) => "a string",
            Node::Int(_) => "an integer",
            Node::Float(_) => "a float",
            Node::Bool(_) => "a boolean",
            Node::Datetime(_) => "a datetime",
            Node::Array(_) => "an array",
            Node::Table(_) => "a table",
        }
    }
}

/// An insertion-ordered TOML table.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Table {
    entries: Vec<(String, Node)>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Node)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&str, &mut Node)> {
        self.entries.iter_mut().map(|(k, v)| (k.as_str(), v))
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Set `key`, keeping its position when it already exists, appending otherwise.
    pub(crate) fn insert(&mut self, key: impl Into<String>, value: Node) {
        let key = key.into();
        match self.get_mut(&key) {
            Some(slot) => *slot = value,
            None => self.entries.push((key, value)),
        }
    }

    /// Follow `path` through tables only.
    pub(crate) fn lookup(&self, path: &[&str]) -> Option<&Node> {
        let (first, rest) = path.split_first()?;
        let node = self.get(first)?;
        if rest.is_empty() {
            Some(node)
        } else {
            node.as_table()?.lookup(rest)
        }
    }

    /// Convert a parsed toml_edit table, dropping all formatting.
    pub(crate) fn from_toml_edit(table: &toml_edit::Table) -> Self {
        let mut out = Table::new();
        for (key, item) in table.iter() {
            if let Some(node) = node_from_item(item) {
                out.insert(key, node);
            }
        }
        out
    }
}

fn node_from_item(item: &Item) -> Option<Node> {
    match item {
        Item::None => None,
        Item::Value(value) => Some(node_from_value(value)),
        Item::Table(table) => Some(Node::Table(Table::from_toml_edit(table))),
        Item::ArrayOfTables(array) => Some(Node::Array(
            array
                .iter()
                .map(|t| Node::Table(Table::from_toml_edit(t)))
                .collect(),
        )),
    }
}

fn node_from_value(value: &Value) -> Node {
    match value {
        Value::String(s) => Node::Str(s.value().clone()),
        Value::Integer(i) => Node::Int(*i.value()),
        Value::Float(f) => Node::Float(*f.value()),
        Value::Boolean(b) => Node::Bool(*b.value()),
        Value::Datetime(d) => Node::Datetime(*d.value()),
        Value::Array(array) => Node::Array(array.iter().map(node_from_value).collect()),
        Value::InlineTable(table) => {
            let mut out = Table::new();
            for (key, value) in table.iter() {
                out.insert(key, node_from_value(value));
            }
            Node::Table(out)
        }
    }
}

/// A value as one line of TOML-like text: `"s"`, `[1, 2]`, `{k = v}`.
pub(crate) fn inline_text(node: &Node) -> String {
    match node {
        // Raw: the printer escapes what reaches a terminal, JSON escapes for itself.
        Node::Str(s) => format!("\"{s}\""),
        Node::Int(i) => i.to_string(),
        Node::Float(f) => f.to_string(),
        Node::Bool(b) => b.to_string(),
        Node::Datetime(d) => d.to_string(),
        Node::Array(items) => format!(
            "[{}]",
            items.iter().map(inline_text).collect::<Vec<_>>().join(", ")
        ),
        Node::Table(t) => format!(
            "{{{}}}",
            t.iter()
                .map(|(k, v)| format!("{k} = {}", inline_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Dotted path helper: `join_path("a.b", "c") == "a.b.c"`, and `join_path("", "c") == "c"`.
pub(crate) fn join_path(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Visit every string leaf with its dotted path (reference §2.3): array elements are named by
/// their `name` field when they are tables that have one, by their index otherwise.
pub(crate) fn walk_strings<'a>(prefix: &str, node: &'a Node, visit: &mut dyn FnMut(&str, &'a str)) {
    match node {
        Node::Str(s) => visit(prefix, s),
        Node::Table(table) => {
            for (key, child) in table.iter() {
                walk_strings(&join_path(prefix, key), child, visit);
            }
        }
        Node::Array(items) => {
            for (index, child) in items.iter().enumerate() {
                walk_strings(
                    &join_path(prefix, &element_name(index, child)),
                    child,
                    visit,
                );
            }
        }
        _ => {}
    }
}

/// How an array element is addressed in a dotted path.
pub(crate) fn element_name(index: usize, node: &Node) -> String {
    match node
        .as_table()
        .and_then(|t| t.get("name"))
        .and_then(Node::as_str)
    {
        Some(name) => name.to_string(),
        None => index.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_drops_comments_and_keeps_order() {
        let doc: toml_edit::DocumentMut = "b = 1 # secret comment\na = [\"x\", { k = true }]\n[t]\nz = 1\ny = 2\n[[arr]]\nname = \"n\"\n"
            .parse()
            .expect("valid toml");
        let table = Table::from_toml_edit(doc.as_table());
        assert_eq!(
            table.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["b", "a", "t", "arr"]
        );
        let t = table.get("t").and_then(Node::as_table).expect("table");
        assert_eq!(t.iter().map(|(k, _)| k).collect::<Vec<_>>(), ["z", "y"]);
        assert!(format!("{table:?}").contains("Str(\"x\")"));
        assert!(!format!("{table:?}").contains("secret"));
    }

    #[test]
    fn walk_names_array_elements() {
        let doc: toml_edit::DocumentMut =
            "[[s]]\nname = \"gh\"\ncmd = \"x\"\n[[s]]\ncmd = \"y\"\n[t]\nl = [\"p\"]\n"
                .parse()
                .expect("valid toml");
        let node = Node::Table(Table::from_toml_edit(doc.as_table()));
        let mut seen = Vec::new();
        walk_strings("", &node, &mut |p, v| seen.push(format!("{p}={v}")));
        assert_eq!(seen, ["s.gh.name=gh", "s.gh.cmd=x", "s.1.cmd=y", "t.l.0=p"]);
    }
}
