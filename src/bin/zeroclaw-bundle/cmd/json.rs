//! The one writer of `--json` text. JSON's own escaping leaves DEL (U+007F), the C1 controls,
//! bidirectional overrides and zero-width characters raw, and a `--json` document is often read
//! on a terminal (`| less`, a CI log): a name carrying U+202E would reorder what the operator
//! sees. So every character that the display escaper ([`zeroclaw_bundle_store::is_hidden`])
//! spells `\u{..}` is written here as a JSON `\uXXXX` escape instead: the document's *values*
//! are unchanged (any JSON parser reads back the exact string, `path` stays the real name and
//! `display` its escaped form), only the bytes on the wire are plain visible text.

use std::io::{self, Write};

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter, PrettyFormatter};

/// `value` as one JSON document on a line (`diff --json` writes one per change).
pub fn line(value: &impl Serialize) -> io::Result<String> {
    write(value, CompactFormatter)
}

/// `value` as an indented JSON document (what every other `--json` prints).
pub fn pretty(value: &impl Serialize) -> io::Result<String> {
    write(value, PrettyFormatter::new())
}

fn write<F: Formatter>(value: &impl Serialize, inner: F) -> io::Result<String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Visible(inner));
    value.serialize(&mut ser).map_err(io::Error::other)?;
    String::from_utf8(out).map_err(io::Error::other)
}

/// A formatter that escapes hidden characters inside strings and leaves everything else to
/// `F` (layout and JSON's own escapes).
struct Visible<F>(F);

impl<F: Formatter> Formatter for Visible<F> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if zeroclaw_bundle_store::is_hidden(c) {
                self.0.write_string_fragment(writer, &fragment[start..i])?;
                // Every hidden character lies in the Basic Multilingual Plane.
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        self.0.write_string_fragment(writer, &fragment[start..])
    }

    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn end_object_key<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_key(w)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn hidden_characters_are_escaped_and_values_unchanged() {
        let value =
            json!({"na\u{7f}me": ["a\u{202e}b", "\u{200b}", "tab\t", "café \\ \"q\" \u{85}"]});
        for text in [super::line(&value).unwrap(), super::pretty(&value).unwrap()] {
            for raw in ['\u{7f}', '\u{202e}', '\u{200b}', '\u{85}', '\t'] {
                assert!(!text.contains(raw), "{raw:?} raw in {text}");
            }
            assert!(
                text.contains("a\\u202eb") && text.contains("na\\u007fme"),
                "{text}"
            );
            assert!(text.contains("café"), "{text}");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value);
        }
        assert_eq!(super::line(&json!({"a": [1, 2]})).unwrap(), "{\"a\":[1,2]}");
        assert_eq!(
            super::pretty(&json!({"a": [1]})).unwrap(),
            serde_json::to_string_pretty(&json!({"a": [1]})).unwrap()
        );
    }
}
