//! How names and host paths appear in the serialized reports (`--json` is their
//! serialization): a name that may not be UTF-8 is never replaced or dropped silently.
//!
//! A name (a path inside a snapshot) is the real text under its key when it is UTF-8 and
//! `null` when it is not; then `<key>_bytes` holds its raw bytes as lowercase hex (only when
//! it is not UTF-8), and a display key holds the escaped form text output prints. A host path
//! is the path itself when it is UTF-8, else its escaped display form (`\xNN`).

use serde::ser::SerializeMap as _;
use serde::Serializer;

/// Serializes a name's fields (`key`, `key_bytes` when it is not UTF-8, `display_key`) into
/// the map `map`.
fn name_entries<M: serde::ser::SerializeMap>(
    map: &mut M,
    key: &str,
    display_key: &str,
    raw: &[u8],
) -> Result<(), M::Error> {
    match std::str::from_utf8(raw) {
        Ok(text) => map.serialize_entry(key, text)?,
        Err(_) => {
            map.serialize_entry(key, &None::<&str>)?;
            let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
            map.serialize_entry(&format!("{key}_bytes"), &hex)?;
        }
    }
    map.serialize_entry(display_key, &zeroclaw_bundle_store::escape_name(raw))
}

/// A path inside a snapshot as `path` (`path_bytes`) and `display`; for `#[serde(flatten)]`.
pub(crate) fn name_or_display<S: Serializer>(raw: &[u8], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(None)?;
    name_entries(&mut map, "path", "display", raw)?;
    map.end()
}
