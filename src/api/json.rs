//! How names travel in the reports' serialization (the `--json` vocabulary, README "JSON
//! output"): a host path is the path itself when it is UTF-8, else its escaped display form
//! (`\xNN`), never a silently replaced byte; a name inside a snapshot, which may be any bytes,
//! is a triple: `key` (the name when it is UTF-8, else `null`), `key_bytes` (lowercase hex, only
//! for a name that is not UTF-8) and a display key holding the escaped form text output prints.

use std::borrow::Cow;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use serde::ser::SerializeMap as _;
use serde::{Serialize, Serializer};

/// A host path (a destination, an install, a directory side) as one JSON string.
pub(crate) fn host_path<S: Serializer, P: AsRef<Path>>(path: &P, s: S) -> Result<S::Ok, S::Error> {
    let path = path.as_ref();
    match path.to_str() {
        Some(text) => s.serialize_str(text),
        None => s.serialize_str(&zeroclaw_bundle_store::escape_name(
            path.as_os_str().as_bytes(),
        )),
    }
}

/// [`host_path`] of a path that may be absent (`null`).
pub(crate) fn host_path_opt<S: Serializer, P: AsRef<Path>>(
    path: &Option<P>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => host_path(p, s),
        None => s.serialize_none(),
    }
}

/// A name inside a snapshot, flattened into the object that holds it as `key`, `key_bytes`
/// (only when not UTF-8) and `display_key`.
pub(crate) struct Name<'a> {
    /// The key of the name itself (`path`, `from`).
    pub key: &'static str,
    /// The key of its escaped form (`display`, `from_display`).
    pub display_key: &'static str,
    /// The raw bytes.
    pub raw: Cow<'a, [u8]>,
}

impl Serialize for Name<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        match std::str::from_utf8(&self.raw) {
            Ok(text) => map.serialize_entry(self.key, text)?,
            Err(_) => {
                map.serialize_entry(self.key, &None::<&str>)?;
                let hex: String = self.raw.iter().map(|b| format!("{b:02x}")).collect();
                map.serialize_entry(&format!("{}_bytes", self.key), &hex)?;
            }
        }
        map.serialize_entry(
            self.display_key,
            &zeroclaw_bundle_store::escape_name(&self.raw),
        )?;
        map.end()
    }
}

/// A path inside a snapshot as `path` (`path_bytes`) and `display`; for a field marked
/// `#[serde(flatten, serialize_with = ...)]`.
pub(crate) fn name_or_display<S: Serializer>(raw: &[u8], s: S) -> Result<S::Ok, S::Error> {
    Name {
        key: "path",
        display_key: "display",
        raw: Cow::Borrowed(raw),
    }
    .serialize(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize)]
    struct Doc<'a> {
        #[serde(serialize_with = "host_path")]
        dest: &'a Path,
        #[serde(flatten)]
        path: Name<'a>,
        #[serde(flatten)]
        from: Option<Name<'a>>,
    }

    #[test]
    fn host_paths_and_names_follow_the_json_rules() {
        let odd = std::ffi::OsStr::from_bytes(b"/tmp/a\xffb");
        let doc = Doc {
            dest: Path::new(odd),
            path: Name {
                key: "path",
                display_key: "display",
                raw: Cow::Borrowed(b"d/\xfe"),
            },
            from: None,
        };
        assert_eq!(
            serde_json::to_value(&doc).unwrap(),
            json!({"dest": "/tmp/a\\xffb", "path": null, "path_bytes": "642ffe", "display": "d/\\xfe"})
        );
        let doc = Doc {
            dest: Path::new("/tmp/x"),
            path: Name {
                key: "path",
                display_key: "display",
                raw: Cow::Borrowed(b"a.md"),
            },
            from: Some(Name {
                key: "from",
                display_key: "from_display",
                raw: Cow::Borrowed(b"b.md"),
            }),
        };
        assert_eq!(
            serde_json::to_value(&doc).unwrap(),
            json!({"dest": "/tmp/x", "path": "a.md", "display": "a.md", "from": "b.md", "from_display": "b.md"})
        );
    }
}
