//! Deterministic TOML text for the two bundle files, in the shape `toml::to_string_pretty`
//! gives ZeroClaw (reference §2.1, §4.1, §4.10): a table's plain values first, then its
//! sub-tables and arrays of tables as `[a.b]` / `[[a.b]]` sections in insertion order; tables
//! holding only sub-tables get no header of their own; arrays with more than one element are
//! written one element per line; a blank line precedes every section header.
//!
//! Strings are always written as basic strings with every control character escaped, so no
//! rendered line can start with `[` unless it is a header and the text re-parses to the same
//! tree. Same tree in, same bytes out.

use std::fmt::Write as _;

use super::value::{Node, Table};

/// Render `root` as a TOML document body.
pub(crate) fn to_toml(root: &Table) -> String {
    let mut out = String::new();
    write_table(&mut out, &[], root, false);
    out
}

/// A node that becomes a section rather than a `key = value` line.
fn is_section(node: &Node) -> bool {
    match node {
        Node::Table(_) => true,
        Node::Array(items) => {
            !items.is_empty() && items.iter().all(|n| matches!(n, Node::Table(_)))
        }
        _ => false,
    }
}

fn write_table(out: &mut String, path: &[String], table: &Table, array_element: bool) {
    let has_values = table.iter().any(|(_, v)| !is_section(v));
    let has_sections = table.iter().any(|(_, v)| is_section(v));
    let header = !path.is_empty() && (array_element || has_values || !has_sections);
    if header {
        if !out.is_empty() && !out.ends_with("\n\n") {
            out.push('\n');
        }
        let dotted = path.iter().map(|k| key(k)).collect::<Vec<_>>().join(".");
        if array_element {
            let _ = writeln!(out, "[[{dotted}]]");
        } else {
            let _ = writeln!(out, "[{dotted}]");
        }
    }
    for (k, v) in table.iter().filter(|(_, v)| !is_section(v)) {
        let _ = writeln!(out, "{} = {}", key(k), value(v, true));
    }
    for (k, v) in table.iter().filter(|(_, v)| is_section(v)) {
        let mut child_path = path.to_vec();
        child_path.push(k.to_string());
        match v {
            Node::Table(t) => write_table(out, &child_path, t, false),
            Node::Array(items) => {
                for item in items {
                    if let Node::Table(t) = item {
                        write_table(out, &child_path, t, true);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A key: bare when it is made only of `A-Za-z0-9_-`, quoted otherwise.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        k.to_string()
    } else {
        string(k)
    }
}

fn value(node: &Node, top_level: bool) -> String {
    match node {
        Node::Str(s) => string(s),
        Node::Int(i) => i.to_string(),
        Node::Float(f) => float(*f),
        Node::Bool(b) => b.to_string(),
        Node::Datetime(d) => d.to_string(),
        Node::Array(items) if items.is_empty() => "[]".to_string(),
        Node::Array(items) if top_level && items.len() > 1 => {
            let mut s = String::from("[\n");
            for item in items {
                let _ = writeln!(s, "    {},", value(item, false));
            }
            s.push(']');
            s
        }
        Node::Array(items) => {
            let inner: Vec<String> = items.iter().map(|n| value(n, false)).collect();
            format!("[{}]", inner.join(", "))
        }
        Node::Table(t) if t.is_empty() => "{}".to_string(),
        Node::Table(t) => {
            let inner: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key(k), value(v, false)))
                .collect();
            format!("{{ {} }}", inner.join(", "))
        }
    }
}

fn float(f: f64) -> String {
    if f.is_nan() {
        "nan".to_string()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        // Debug always keeps a fraction or an exponent (`1.0`, `1e300`), both valid TOML floats.
        format!("{f:?}")
    }
}

/// A TOML basic string with `"`, `\` and every control character escaped.
fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Before any line that starts with `[`, insert an empty line unless the previous line was blank
/// (the start counts as blank); every output line ends with `\n` (reference §4.10).
pub(crate) fn ensure_blank_line_before_sections(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut previous_blank = true;
    for line in text.lines() {
        if line.starts_with('[') && !previous_blank {
            out.push('\n');
        }
        out.push_str(line);
        out.push('\n');
        previous_blank = line.trim().is_empty();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Table {
        let doc: toml_edit::DocumentMut = text.parse().expect("rendered text re-parses");
        Table::from_toml_edit(doc.as_table())
    }

    #[test]
    fn round_trips_and_is_stable() {
        let source = "top = 1\nlist = [\"a\", \"b\"]\none = [\"x\"]\n[a.b]\ns = \"q\\\"uote\\\\ \\u0007 \\n[x]\"\nf = 1.5\nn = -3\nbig = 1e300\nd = 1979-05-27T07:32:00Z\n[a.b.inner]\nk = { x = 1, \"odd key\" = [] }\n[[srv]]\nname = \"gh\"\n[srv.env]\nT = \"\"\n[[srv]]\nname = \"two\"\n[empty]\n";
        let table = parse(source);
        let text = to_toml(&table);
        assert_eq!(parse(&text), table, "{text}");
        assert_eq!(to_toml(&parse(&text)), text);
        assert!(
            text.contains("list = [\n    \"a\",\n    \"b\",\n]\n"),
            "{text}"
        );
        assert!(text.contains("one = [\"x\"]\n"), "{text}");
        assert!(
            !text.contains("[a]\n"),
            "implicit parent gets no header: {text}"
        );
        assert!(text.contains("\n\n[a.b]\n"), "{text}");
        assert!(
            text.contains("\n\n[[srv]]\nname = \"gh\"\n\n[srv.env]\nT = \"\"\n"),
            "{text}"
        );
        assert!(
            text.contains("\n\n[empty]\n"),
            "an empty table keeps its header: {text}"
        );
        assert!(text.starts_with("top = 1\n"));
    }

    #[test]
    fn blank_lines_before_sections() {
        assert_eq!(
            ensure_blank_line_before_sections("[a]\nx = 1\n[b]\n\n[c]"),
            "[a]\nx = 1\n\n[b]\n\n[c]\n"
        );
    }
}
