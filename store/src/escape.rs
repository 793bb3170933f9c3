//! The one escaper for everything printed that came from outside: entry names, paths,
//! snapshot names, sources, hosts, labels. A crafted name must not reach a terminal raw
//! (`ESC[2J` would clear the operator's screen and fake output), and a non-UTF-8 name must
//! stay exact. Spelling:
//!
//! - `\` is doubled (`\\`), so every backslash in the output starts an escape;
//! - ASCII control characters (U+0000–U+001F, U+007F) and bytes that are not UTF-8 become
//!   `\xNN` (one byte each);
//! - other control and invisible-formatting characters that are valid UTF-8 (the C1 controls
//!   U+0080–U+009F, bidirectional overrides and isolates, zero-width characters, line and
//!   paragraph separators) become `\u{NNNN}`, so `\xNN` always means one raw byte.
//!
//! [`unescape_name`] reverses it exactly: `unescape_name(&escape_name(b)) == b` for every byte
//! string (fuzzed). Input is read byte by byte: any text, however malformed, unescapes without
//! panicking (an escape that is not well formed stays literal).

/// True for characters printed as `\u{..}`: valid UTF-8 but invisible or terminal-active
/// (every control character, DEL and the C1 controls included; bidirectional overrides and
/// isolates; zero-width characters; line and paragraph separators; the BOM). The CLI's JSON
/// writer spells the same set as `\uXXXX` escapes.
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'   // zero-width space/joiners, LRM, RLM
            | '\u{2028}'..='\u{202E}' // line/paragraph separators, bidi embeddings/overrides
            | '\u{2060}'..='\u{2069}' // word joiner, invisible operators, bidi isolates
            | '\u{FEFF}'              // zero-width no-break space (BOM)
        )
}

/// Escapes raw bytes for display (see the module doc for the spelling).
pub fn escape_name(name: &[u8]) -> String {
    let mut out = String::with_capacity(name.len());
    for chunk in name.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                push_visible(&mut out, c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Pushes `c`, spelled `\xNN` when it is an ASCII control and `\u{NNNN}` when hidden.
fn push_visible(out: &mut String, c: char) {
    if c.is_ascii_control() {
        out.push_str(&format!("\\x{:02x}", u32::from(c)));
    } else if is_hidden(c) {
        out.push_str(&format!("\\u{{{:04x}}}", u32::from(c)));
    } else {
        out.push(c);
    }
}

/// Escapes text (a snapshot name, a source, a host, a label) for display.
pub fn escape_text(text: &str) -> String {
    escape_name(text.as_bytes())
}

/// Escapes a message (an error with its causes) for a terminal: control and invisible
/// characters as [`escape_name`] spells them, except line breaks and tabs, which a message
/// uses for layout. Backslashes stay single: a message is read by a person, never parsed
/// back, and the names inside it were escaped already where it was built.
pub fn escape_message(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' || c == '\t' {
            out.push(c);
        } else {
            push_visible(&mut out, c);
        }
    }
    out
}

fn hex(b: u8) -> Option<u32> {
    char::from(b).to_digit(16)
}

/// Reverses [`escape_name`]: `\\`, `\xNN` (one raw byte) and `\u{N..}` (a character, UTF-8).
pub fn unescape_name(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            match bytes.get(i + 1) {
                Some(b'\\') => {
                    out.push(b'\\');
                    i += 2;
                    continue;
                }
                Some(b'x') => {
                    if let (Some(hi), Some(lo)) = (
                        bytes.get(i + 2).copied().and_then(hex),
                        bytes.get(i + 3).copied().and_then(hex),
                    ) {
                        out.push((hi * 16 + lo) as u8);
                        i += 4;
                        continue;
                    }
                }
                Some(b'u') if bytes.get(i + 2) == Some(&b'{') => {
                    let digits = bytes[i + 3..]
                        .iter()
                        .take_while(|b| b.is_ascii_hexdigit())
                        .count();
                    let close = i + 3 + digits;
                    if (1..=6).contains(&digits) && bytes.get(close) == Some(&b'}') {
                        let value = bytes[i + 3..close]
                            .iter()
                            .fold(0u32, |v, b| v * 16 + hex(*b).unwrap_or(0));
                        if let Some(c) = char::from_u32(value) {
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                            i = close + 1;
                            continue;
                        }
                    }
                }
                _ => {}
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

/// The other spelling an older `ls` printed for a name: it showed the C1 controls U+0080–U+009F
/// as `\x80`..`\x9f`, which [`unescape_name`] reads as one raw byte. Returns the name with
/// every such lone byte (one that is not part of valid UTF-8) replaced by the character, or
/// `None` when there is none. Lookups try it when the exact name is absent.
pub fn c1_alternative(name: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(name.len() + 4);
    let mut changed = false;
    for chunk in name.utf8_chunks() {
        out.extend_from_slice(chunk.valid().as_bytes());
        for &b in chunk.invalid() {
            if (0x80..=0x9f).contains(&b) {
                out.extend_from_slice(&[0xc2, b]);
                changed = true;
            } else {
                out.push(b);
            }
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_keep_layout_and_lose_terminal_controls() {
        assert_eq!(
            escape_message("a\tb\nc: \u{1b}[2J \u{9b}x \u{202e}y C:\\dir"),
            "a\tb\nc: \\x1b[2J \\u{009b}x \\u{202e}y C:\\dir"
        );
        assert_eq!(escape_message("\r\u{7f}"), "\\x0d\\x7f");
    }

    #[test]
    fn spellings() {
        assert_eq!(escape_name(b"caf\xe9"), "caf\\xe9");
        assert_eq!(escape_name("café".as_bytes()), "café");
        assert_eq!(escape_name(b"\x1b[2J"), "\\x1b[2J");
        assert_eq!(escape_name("nel\u{85}".as_bytes()), "nel\\u{0085}");
        assert_eq!(escape_name("a\u{202e}b".as_bytes()), "a\\u{202e}b");
        assert_eq!(escape_name(b"back\\slash"), "back\\\\slash");
        assert_eq!(escape_text("tab\there"), "tab\\x09here");
    }

    #[test]
    fn round_trips_including_the_ambiguous_pair() {
        for name in [
            &b"plain"[..],
            b"caf\xe9",
            b"back\\slash",
            b"tab\there",
            b"\\x41",
            b"\\u{41}",
            "nel\u{85}".as_bytes(),
            b"nel\x85",
            b"\xc2",
            b"\\",
            b"\\\\x",
            "\u{feff}\u{2066}".as_bytes(),
        ] {
            assert_eq!(unescape_name(&escape_name(name)), name, "{name:?}");
        }
    }

    #[test]
    fn malformed_escapes_stay_literal_and_never_panic() {
        assert_eq!(unescape_name("\\x1é"), "\\x1é".as_bytes());
        assert_eq!(unescape_name("\\xé"), "\\xé".as_bytes());
        assert_eq!(unescape_name("\\u{110000}"), b"\\u{110000}");
        assert_eq!(unescape_name("\\u{d800}"), b"\\u{d800}");
        assert_eq!(unescape_name("\\u{"), b"\\u{");
        assert_eq!(unescape_name("\\u{1234567}"), b"\\u{1234567}");
        assert_eq!(unescape_name("end\\"), b"end\\");
        assert_eq!(unescape_name("\\x4"), b"\\x4");
        assert_eq!(unescape_name("\\x41"), b"A");
        assert_eq!(unescape_name("\\u{e9}"), "é".as_bytes());
    }

    #[test]
    fn c1_alternative_maps_lone_bytes_only() {
        assert_eq!(
            c1_alternative(b"nel\x85"),
            Some("nel\u{85}".as_bytes().to_vec())
        );
        assert_eq!(c1_alternative(b"caf\xe9"), None);
        assert_eq!(c1_alternative("nel\u{85}".as_bytes()), None);
    }
}
