//! `ObjectId`: the name of every object in the store, the blake3 hash of its exact bytes.
//!
//! The hash function is an implementation detail of this module: callers see a 32-byte id,
//! its 64-digit lowercase hex form, and a streaming [`IdHasher`]. So `b3sum` of any object
//! file prints the object's own name.
//!
//! This module depends on no other module of the crate. Parsing a hex id fails with
//! `StoreError::BadObjectId`, so the `FromStr` impl that names that error lives with
//! it in `error`; the hex grammar itself is `ObjectId::from_hex` here.

use std::fmt;

/// The blake3 hash of an object's bytes: the object's name in the store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectId([u8; 32]);

impl ObjectId {
    /// Length of the raw id in bytes.
    pub const LEN: usize = 32;

    /// The id of `bytes`.
    pub fn of(bytes: &[u8]) -> ObjectId {
        ObjectId(*blake3::hash(bytes).as_bytes())
    }

    /// Builds an id from its raw 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> ObjectId {
        ObjectId(bytes)
    }

    /// The raw 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The 64-digit lowercase hex form (what `b3sum` prints).
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 0xf)]));
        }
        s
    }

    /// The id whose 64-digit lowercase hex form is `s`, or `None` when `s` is not one.
    pub(crate) fn from_hex(s: &str) -> Option<ObjectId> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in s.as_bytes().chunks(2).enumerate() {
            out[i] = (hex_val(pair[0])? << 4) | hex_val(pair[1])?;
        }
        Some(ObjectId(out))
    }

    /// The id a reference names when it is a whole id: 64 hex digits, in either case. The one
    /// form of a snapshot reference that needs no catalog to resolve.
    pub fn from_full_ref(reference: &str) -> Option<ObjectId> {
        ObjectId::from_hex(&reference.to_ascii_lowercase())
    }

    /// The first `n` hex digits, for short display.
    pub fn short(&self, n: usize) -> String {
        let mut hex = self.to_hex();
        hex.truncate(n.min(64));
        hex
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectId({})", self.short(16))
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl serde::Serialize for ObjectId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> serde::Deserialize<'de> for ObjectId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ObjectId, D::Error> {
        let s = String::deserialize(d)?;
        // The same text as `StoreError::BadObjectId` (a test in `error` pins it).
        ObjectId::from_hex(&s)
            .ok_or_else(|| serde::de::Error::custom(format_args!("not an object id: {s:?}")))
    }
}

/// Streaming hasher producing an [`ObjectId`]; hashes as bytes go by, so a file is read once.
#[derive(Default, Clone)]
pub struct IdHasher(blake3::Hasher);

impl IdHasher {
    /// A fresh hasher.
    pub fn new() -> IdHasher {
        IdHasher(blake3::Hasher::new())
    }

    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The id of everything fed so far.
    pub fn finish(&self) -> ObjectId {
        ObjectId(*self.0.finalize().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip_and_known_vector() {
        // b3sum of the empty input.
        let empty = ObjectId::of(b"");
        assert_eq!(
            empty.to_hex(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(empty.to_hex().parse::<ObjectId>().unwrap(), empty);
        assert!("AF1349".parse::<ObjectId>().is_err());
        assert!("zz".repeat(32).parse::<ObjectId>().is_err());
    }

    #[test]
    fn streaming_equals_one_shot() {
        let mut h = IdHasher::new();
        h.update(b"hello ");
        h.update(b"world");
        assert_eq!(h.finish(), ObjectId::of(b"hello world"));
    }
}
