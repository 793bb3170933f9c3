//! Identity document paths (`names`, `layout`): hostile or non-portable paths are dropped, retained ones normalized.

use super::*;

#[test]
fn case26_traversing_identity_paths_dropped() {
    for raw in [
        "../outside.json",
        "identity/../../outside.json",
        "..//outside.json",
    ] {
        assert_identity_dropped(raw);
    }
}

#[test]
fn case27_cross_platform_hostile_identity_paths_dropped() {
    for raw in [
        "..\\outside.json",
        "identity\\..\\..\\outside.json",
        "C:\\Windows\\System32\\config\\sam",
        "C:/Windows/System32/config/sam",
        "\\\\server\\share\\outside.json",
        "identity/aieos.json:stream",
        "identity/\u{7}bell.json",
    ] {
        assert_identity_dropped(raw);
    }
}

#[test]
fn case28_29_retained_identity_is_normalized() {
    for raw in [
        "identity/aieos.json",
        "./identity/aieos.json",
        "identity/./aieos.json",
    ] {
        let mut fx = Fx::base();
        fx.set(
            &["agents", "researcher", "identity", "aieos_path"],
            &toml_string(raw),
        );
        let plan = fx.plan();
        assert_eq!(plan.identity_document(), Some("identity/aieos.json"));
        let value = get(
            plan.closure(),
            &["agents", "researcher", "identity", "aieos_path"],
        )
        .and_then(Node::as_str)
        .expect("kept");
        assert_eq!(value, "identity/aieos.json");
        assert!(!value.contains(['\\', ':']) && !value.starts_with('/'));
        assert!(value
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != ".."));
        let bundle = render(&plan);
        assert!(bundle
            .config_toml
            .contains("aieos_path = \"identity/aieos.json\"\n"));
        assert!(!plan.dropped().iter().any(|d| d.path.contains("aieos_path")));
    }
}

#[test]
fn case30_edge_whitespace_dropped_not_trimmed() {
    for raw in [
        " identity/aieos.json",
        "identity/aieos.json ",
        "\tidentity/aieos.json",
    ] {
        assert_identity_dropped(raw);
    }
}

#[test]
fn case31_inner_parent_segments_dropped() {
    for raw in ["link/../identity.json", "identity/sub/../aieos.json"] {
        assert_identity_dropped(raw);
    }
}

#[test]
fn case32_identity_inside_memory_dropped() {
    let entry = assert_identity_dropped("memory/aieos.json");
    assert!(entry.detail.contains("does not carry"));
    assert_identity_dropped("MEMORY_SNAPSHOT.md");
}

#[test]
fn case34_absolute_identity_dropped_relative_travels() {
    let entry = assert_identity_dropped("/srv/identities/researcher.json");
    assert!(entry.detail.contains("absolute"));
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "identity", "aieos_path"],
        r#""identity/researcher.json""#,
    );
    let bundle = render(&fx.plan());
    assert!(bundle
        .config_toml
        .contains("aieos_path = \"identity/researcher.json\""));
}

#[test]
fn case39_identity_segments_follow_the_grammar() {
    for raw in [
        "nul",
        "identity/con.json",
        "identity/lpt1.json",
        "identity/report.",
        "identity/report ",
        "identity/pipe|d.json",
    ] {
        let entry = assert_identity_dropped(raw);
        assert!(
            entry
                .detail
                .contains("every supported target can materialize"),
            "{raw:?}"
        );
    }
}
