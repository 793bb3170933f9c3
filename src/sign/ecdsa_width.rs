//! OpenSSH ECDSA private keys whose scalar is written short. OpenSSH writes the private scalar
//! as an mpint, without its leading zero bytes: about one P-256 or P-384 key in 256, and one
//! P-521 key in two, has a scalar shorter than the curve's width. ssh-key 0.6.7 reads only a
//! full-width scalar (or one with a single leading zero) and refuses those keys ("length
//! invalid"). This module rewrites such a key's private section with the scalar at full width
//! and hands the result back to ssh-key, so every check ssh-key makes (the two checkints, the
//! public key against the private section's, the padding) still runs on it.
//!
//! Decryption uses ssh-key's own KDF and cipher; nothing here is cryptography.

use ssh_encoding::{Decode, Encode};
use ssh_key::PrivateKey;
use zeroize::Zeroizing;

const MAGIC: &[u8] = b"openssh-key-v1\0";
/// The line width OpenSSH wraps its private key PEM at.
const PEM_LINE_WIDTH: usize = 70;
/// The block size an unencrypted private section is padded to.
const PLAIN_BLOCK: usize = 8;

/// The parts of an OpenSSH private key file that matter here.
struct Container {
    public: Vec<u8>,
    private: Zeroizing<Vec<u8>>,
    tag: Option<[u8; 16]>,
}

fn parse(text: &[u8]) -> Option<Container> {
    let mut decoder = ssh_encoding::pem::Decoder::new_wrapped(text, PEM_LINE_WIDTH).ok()?;
    if decoder.type_label() != "OPENSSH PRIVATE KEY" {
        return None;
    }
    let mut blob = Zeroizing::new(Vec::new());
    decoder.decode_to_end(&mut blob).ok()?;
    let mut r: &[u8] = blob.strip_prefix(MAGIC)?;
    let _cipher = String::decode(&mut r).ok()?;
    let _kdf = String::decode(&mut r).ok()?;
    let _kdf_options = Vec::<u8>::decode(&mut r).ok()?;
    if u32::decode(&mut r).ok()? != 1 {
        return None;
    }
    let public = Vec::<u8>::decode(&mut r).ok()?;
    let private = Zeroizing::new(Vec::<u8>::decode(&mut r).ok()?);
    let tag = match r.len() {
        0 => None,
        16 => Some(r.try_into().ok()?),
        _ => return None,
    };
    Some(Container {
        public,
        private,
        tag,
    })
}

/// The width of a scalar on `curve` (OpenSSH's curve names).
fn scalar_width(curve: &str) -> Option<usize> {
    match curve {
        "nistp256" => Some(32),
        "nistp384" => Some(48),
        "nistp521" => Some(66),
        _ => None,
    }
}

/// The decrypted ECDSA private section `plain` with its scalar at full width, padded for an
/// unencrypted key, or `None` when it is not an ECDSA private section.
fn widened(plain: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let mut r = plain;
    let check1 = u32::decode(&mut r).ok()?;
    let check2 = u32::decode(&mut r).ok()?;
    let key_type = String::decode(&mut r).ok()?;
    let curve = String::decode(&mut r).ok()?;
    let width = scalar_width(&curve)?;
    if !key_type.starts_with("ecdsa-sha2-") {
        return None;
    }
    let point = Vec::<u8>::decode(&mut r).ok()?;
    let mut scalar = Zeroizing::new(Vec::<u8>::decode(&mut r).ok()?);
    // A positive mpint: at most one leading zero, and that only before a byte with its top bit
    // set. Anything else (a negative number, a scalar too wide) is left to ssh-key's error.
    if scalar.len() == width + 1 && scalar[0] == 0 && scalar[1] >= 0x80 {
        scalar.remove(0);
    }
    if scalar.len() > width
        || scalar
            .first()
            .is_some_and(|b| *b >= 0x80 && scalar.len() < width)
    {
        return None;
    }
    let comment = String::decode(&mut r).ok()?;
    let mut full = Zeroizing::new(vec![0u8; width]);
    full[width - scalar.len()..].copy_from_slice(&scalar);
    let mut out = Zeroizing::new(Vec::with_capacity(plain.len() + width));
    check1.encode(&mut *out).ok()?;
    check2.encode(&mut *out).ok()?;
    key_type.encode(&mut *out).ok()?;
    curve.encode(&mut *out).ok()?;
    point.encode(&mut *out).ok()?;
    full.as_slice().encode(&mut *out).ok()?;
    comment.encode(&mut *out).ok()?;
    let pad = (PLAIN_BLOCK - out.len() % PLAIN_BLOCK) % PLAIN_BLOCK;
    out.extend(1..=pad as u8);
    Some(out)
}

/// An unencrypted key file's binary form holding `public` and the private section `plain`.
fn unencrypted(public: &[u8], plain: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(MAGIC.to_vec());
    "none".encode(&mut *out).ok()?;
    "none".encode(&mut *out).ok()?;
    b"".as_slice().encode(&mut *out).ok()?;
    1u32.encode(&mut *out).ok()?;
    public.encode(&mut *out).ok()?;
    plain.encode(&mut *out).ok()?;
    Some(out)
}

/// The unencrypted key in `text` read with its short ECDSA scalar widened, or `None` when
/// `text` is not such a key (the caller keeps ssh-key's own error).
pub(super) fn read_plain(text: &[u8]) -> Option<PrivateKey> {
    let c = parse(text)?;
    let plain = widened(&c.private)?;
    PrivateKey::from_bytes(&unencrypted(&c.public, &plain)?).ok()
}

/// What decrypting an encrypted key here gave.
pub(super) enum Decrypted {
    /// The key, opened.
    Key(Box<PrivateKey>),
    /// Not an ECDSA key: ssh-key's own `decrypt` opens it.
    NotEcdsa,
    /// The passphrase does not open it (the two checkints differ).
    WrongPassphrase,
    /// Opened, but what it holds cannot be read (ssh-key's reason).
    Unreadable(String),
}

/// Decrypts the ECDSA key `key` (read by ssh-key from `text`) with `passphrase` through
/// ssh-key's KDF and cipher, and reads it with its scalar at full width.
pub(super) fn decrypt(text: &[u8], key: &PrivateKey, passphrase: &[u8]) -> Decrypted {
    if !key.algorithm().is_ecdsa() {
        return Decrypted::NotEcdsa;
    }
    let unreadable = |why: &dyn std::fmt::Display| Decrypted::Unreadable(why.to_string());
    let Some(c) = parse(text) else {
        return unreadable(&"not an OpenSSH private key container");
    };
    let (secret, iv) = match key.kdf().derive_key_and_iv(key.cipher(), passphrase) {
        Ok(derived) => derived,
        Err(e) => return unreadable(&e),
    };
    let mut plain = Zeroizing::new(c.private.to_vec());
    if key
        .cipher()
        .decrypt(&secret, &iv, &mut plain, c.tag)
        .is_err()
    {
        // An authenticated cipher's tag does not match: a wrong passphrase.
        return Decrypted::WrongPassphrase;
    }
    let mut r: &[u8] = &plain;
    if !matches!((u32::decode(&mut r), u32::decode(&mut r)), (Ok(a), Ok(b)) if a == b) {
        return Decrypted::WrongPassphrase;
    }
    let Some(wide) = widened(&plain) else {
        return unreadable(&"its private section is not an ECDSA key's");
    };
    match unencrypted(&c.public, &wide).map(|b| PrivateKey::from_bytes(&b)) {
        Some(Ok(k)) => Decrypted::Key(Box::new(k)),
        Some(Err(e)) => unreadable(&e),
        None => unreadable(&"it cannot be re-encoded"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_scalar_is_widened_a_leading_zero_dropped_and_the_rest_padded() {
        let section = |scalar: &[u8]| {
            let mut s = Vec::new();
            7u32.encode(&mut s).unwrap();
            7u32.encode(&mut s).unwrap();
            "ecdsa-sha2-nistp256".encode(&mut s).unwrap();
            "nistp256".encode(&mut s).unwrap();
            [4u8; 65].as_slice().encode(&mut s).unwrap();
            scalar.encode(&mut s).unwrap();
            "c".encode(&mut s).unwrap();
            s
        };
        let wide = widened(&section(&[0x12; 31])).expect("31 bytes is short");
        assert_eq!(wide.len() % PLAIN_BLOCK, 0);
        let mut r: &[u8] = &wide[8..];
        String::decode(&mut r).unwrap();
        String::decode(&mut r).unwrap();
        Vec::<u8>::decode(&mut r).unwrap();
        let scalar = Vec::<u8>::decode(&mut r).unwrap();
        assert_eq!(scalar.len(), 32);
        assert_eq!((scalar[0], scalar[1]), (0, 0x12));
        assert_eq!(String::decode(&mut r).unwrap(), "c");
        assert!(r.iter().enumerate().all(|(i, b)| *b as usize == i + 1));
        let scalar_of = |wide: &[u8]| {
            let mut r: &[u8] = &wide[8..];
            for _ in 0..3 {
                Vec::<u8>::decode(&mut r).unwrap();
            }
            Vec::<u8>::decode(&mut r).unwrap()
        };
        let full = widened(&section(&[0x12; 32])).expect("full width is kept");
        assert_eq!(scalar_of(&full), [0x12; 32]);
        let lead = widened(&section(&[&[0][..], &[0x90; 32]].concat())).unwrap();
        assert_eq!(
            scalar_of(&lead),
            [0x90; 32],
            "the mpint's leading zero is dropped"
        );
        assert!(
            widened(&section(&[0x90; 31])).is_none(),
            "not a positive mpint"
        );
        assert!(widened(&section(&[0x12; 33])).is_none(), "too wide");
        assert!(widened(b"short").is_none());
    }
}
