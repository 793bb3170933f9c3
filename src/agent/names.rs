//! The portable-name grammar (SPEC §6, reference §6). It applies to exactly two kinds of name the
//! bundle format controls: skill-bundle aliases (which become `skills/<alias>/`) and every segment
//! of a retained `identity.aieos_path`. It is deliberately not applied to workspace or skill
//! content, nor to the agent alias. Checks run in a fixed order and the first failure wins; its
//! reason is what the `dropped` detail quotes.

use super::layout::{MEMORY_SNAPSHOT_FILE, WORKSPACE_MEMORY_DIR};

/// Characters Windows refuses in a file name (besides the separators and control characters).
const WINDOWS_RESERVED: &[char] = &[':', '<', '>', '"', '|', '?', '*'];

/// Why `name` is not a directory or file name every supported target can create, or `None` when
/// it is. The reason reads after the name: "the skill-bundle alias {reason}".
pub fn unportable_reason(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("is empty");
    }
    if name != name.trim() {
        return Some("has leading or trailing whitespace");
    }
    if name == "." || name == ".." {
        return Some("names a relative directory rather than an entry");
    }
    if name.contains(['/', '\\']) {
        return Some("contains a directory separator");
    }
    if name.contains(WINDOWS_RESERVED) {
        return Some("contains a character Windows does not allow in a filename");
    }
    if name.chars().any(char::is_control) {
        return Some("contains a control character");
    }
    if name.ends_with('.') {
        return Some("ends in a dot, which Windows strips to a different name");
    }
    if is_windows_device_name(name) {
        return Some("is a Windows device name");
    }
    None
}

/// True when `name` passes every check of the grammar.
pub fn is_portable_component(name: &str) -> bool {
    unportable_reason(name).is_none()
}

/// `CON`, `PRN`, `AUX`, `NUL`, `COM0`-`COM9`, `LPT0`-`LPT9`, compared on the stem before the
/// first dot, ASCII case-insensitively: `nul.json` and `com1.tar.gz` match, `com10` does not.
fn is_windows_device_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or(name).to_ascii_uppercase();
    match stem.as_str() {
        "CON" | "PRN" | "AUX" | "NUL" => true,
        _ => {
            let bytes = stem.as_bytes();
            bytes.len() == 4
                && (stem.starts_with("COM") || stem.starts_with("LPT"))
                && bytes[3].is_ascii_digit()
        }
    }
}

/// Check a raw `agents.<a>.identity.aieos_path` and return its normalized `/`-joined form
/// (relative to the workspace), or the detail explaining why it cannot travel.
///
/// Nothing is trimmed: edge whitespace is refused, not repaired. `.` segments are skipped; a `..`
/// anywhere is refused (even one that would stay inside the workspace); a path into the part of
/// the workspace the bundle does not carry (`memory/...`, `MEMORY_SNAPSHOT.md`) is refused.
pub fn portable_identity_path(raw: &str) -> Result<String, String> {
    const EMPTY: &str = "the AIEOS identity document path is empty";
    if raw.is_empty() {
        return Err(EMPTY.to_string());
    }
    if raw.starts_with('/') || std::path::Path::new(raw).is_absolute() {
        return Err(
            "the AIEOS identity document is referenced by a source-host absolute path; \
                    point the imported agent at a path inside its own workspace"
                .to_string(),
        );
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in raw.split('/') {
        if segment == "." {
            continue;
        }
        if segment == ".." {
            return Err(
                "the AIEOS identity document path contains a `..` segment; name the file \
                        by its plain path from the workspace root"
                    .to_string(),
            );
        }
        if let Some(reason) = unportable_reason(segment) {
            return Err(format!(
                "the AIEOS identity document path has a component that {reason} (`{segment}`); \
                 a bundle is opened on hosts other than this one, so it can carry only names \
                 every supported target can materialize"
            ));
        }
        segments.push(segment);
    }
    // With `..` refused above, the lexical resolution under the workspace cannot escape.
    let first = segments.first().copied();
    if first == Some(WORKSPACE_MEMORY_DIR)
        || (segments.len() == 1 && first == Some(MEMORY_SNAPSHOT_FILE))
    {
        return Err(
            "the AIEOS identity document sits in the part of the workspace this bundle \
                    does not carry, so the reference would dangle on the target"
                .to_string(),
        );
    }
    if segments.is_empty() {
        return Err(EMPTY.to_string());
    }
    Ok(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED: &[&str] = &[
        "con",
        "CON",
        "Con",
        "prn",
        "aux",
        "nul",
        "com0",
        "com1",
        "com9",
        "lpt1",
        "LPT9",
        "con.md",
        "nul.json",
        "com1.tar.gz",
        "",
        " spaced",
        "trailing ",
        "trailing.",
        "quo\"ted",
        "pipe|d",
        "star*",
        "../../outside",
        "..",
        "nested/alias",
        "..\\outside",
        "/absolute",
        "C:evil",
    ];

    const ACCEPTED: &[&str] = &[
        "console",
        "com",
        "com10",
        "communication",
        "lpt",
        "auxiliary",
        "nullable",
        "conf.d",
        "my.con",
        "research.tools",
        "research_tools",
        "core",
    ];

    #[test]
    fn refused_vectors_are_refused() {
        for name in REFUSED {
            assert!(!is_portable_component(name), "{name:?} should be refused");
        }
    }

    #[test]
    fn accepted_vectors_are_accepted() {
        for name in ACCEPTED {
            assert_eq!(unportable_reason(name), None, "{name:?} should be accepted");
        }
    }

    #[test]
    fn first_failing_check_gives_the_reason() {
        assert_eq!(unportable_reason(""), Some("is empty"));
        assert_eq!(
            unportable_reason(" x"),
            Some("has leading or trailing whitespace")
        );
        // whitespace wins over the trailing dot
        assert_eq!(
            unportable_reason("x. "),
            Some("has leading or trailing whitespace")
        );
        assert_eq!(
            unportable_reason(".."),
            Some("names a relative directory rather than an entry")
        );
        assert_eq!(
            unportable_reason("a/b"),
            Some("contains a directory separator")
        );
        assert_eq!(
            unportable_reason("a\\b"),
            Some("contains a directory separator")
        );
        assert_eq!(
            unportable_reason("C:evil"),
            Some("contains a character Windows does not allow in a filename")
        );
        assert_eq!(
            unportable_reason("a\u{7}b"),
            Some("contains a control character")
        );
        assert_eq!(
            unportable_reason("a\u{85}b"),
            Some("contains a control character")
        );
        assert_eq!(
            unportable_reason("trailing."),
            Some("ends in a dot, which Windows strips to a different name")
        );
        assert_eq!(unportable_reason("lpt0"), Some("is a Windows device name"));
        // the whole stem must match, not a substring
        assert_eq!(unportable_reason("xcon"), None);
        assert_eq!(unportable_reason("com1x"), None);
        assert_eq!(unportable_reason("com¹"), None);
    }

    #[test]
    fn identity_paths_normalize() {
        assert_eq!(
            portable_identity_path("identity/aieos.json").as_deref(),
            Ok("identity/aieos.json")
        );
        assert_eq!(
            portable_identity_path("./identity/./aieos.json").as_deref(),
            Ok("identity/aieos.json")
        );
        assert_eq!(
            portable_identity_path("notes/memory/x.json").as_deref(),
            Ok("notes/memory/x.json")
        );
    }

    #[test]
    fn identity_paths_refused() {
        for raw in [
            "",
            ".",
            "./",
            "/srv/identities/researcher.json",
            "../outside.json",
            "identity/../../outside.json",
            "..//outside.json",
            "link/../identity.json",
            "identity/sub/../aieos.json",
            "a//b.json",
            "identity/",
            "memory/aieos.json",
            "MEMORY_SNAPSHOT.md",
            " identity/aieos.json",
            "identity/aieos.json ",
            "\tidentity/aieos.json",
        ] {
            assert!(
                portable_identity_path(raw).is_err(),
                "{raw:?} should be refused"
            );
        }
    }

    #[test]
    fn identity_component_failures_name_the_grammar() {
        for raw in [
            "nul",
            "identity/con.json",
            "identity/lpt1.json",
            "identity/report.",
            "identity/report ",
            "identity/pipe|d.json",
            "identity/aieos.json:stream",
            "identity/\u{7}bell.json",
            "..\\outside.json",
            "C:\\Windows\\System32\\config\\sam",
            "C:/Windows/System32/config/sam",
            "\\\\server\\share\\outside.json",
        ] {
            let detail = portable_identity_path(raw).expect_err(raw);
            assert!(
                detail.contains("every supported target can materialize"),
                "{raw:?}: {detail}"
            );
        }
    }
}
