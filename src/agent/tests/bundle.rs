//! Skill bundle sources (`bundle`, `plan`): default and configured directories, hostile aliases, directories outside the install.

use super::*;

#[test]
fn case35_default_directory_planned() {
    let plan = with_skill_bundle("research_tools", &[("exclude", r#"["internal_only"]"#)]).plan();
    assert_eq!(plan.skills.len(), 1);
    let source = &plan.skills[0];
    assert_eq!(source.alias, "research_tools");
    assert_eq!(
        source.source,
        TreeSource::Anchored {
            anchor: PathBuf::from(ROOT),
            components: vec!["shared".into(), "skills".into(), "research_tools".into()],
        }
    );
    assert_eq!(
        source.source.path(),
        PathBuf::from("/zc/shared/skills/research_tools")
    );
    assert!(source.admits("web_search"));
    assert!(!source.admits("internal_only"));
    assert_eq!(
        flags(&plan.risk_flags())[0],
        ("carried_skills", "skill_bundles.research_tools".to_string())
    );
    let bundle = render(&plan);
    assert_eq!(bundle.manifest.skill_bundles, ["research_tools"]);
    assert_eq!(bundle.manifest.risk_flags[0].kind, RiskKind::CarriedSkills);
    assert!(bundle
        .manifest_toml
        .contains("skill_bundles = [\"research_tools\"]\n"));
    assert!(bundle
        .config_toml
        .contains("[skill_bundles.research_tools]\nexclude = [\"internal_only\"]\n"));
}

#[test]
fn case37_hostile_skill_aliases_carry_no_content() {
    for alias in [
        "../../outside",
        "..",
        "nested/alias",
        "..\\outside",
        "/absolute",
        "C:evil",
        "con",
        "NUL",
        "aux",
        "prn",
        "com1",
        "LPT9",
        "nul.md",
        "trailing.",
        "quo\"ted",
        "pipe|d",
        "star*",
    ] {
        let plan = with_skill_bundle(alias, &[]).plan();
        assert!(plan.skills.is_empty(), "{alias:?}");
        assert!(
            !plan
                .risk_flags()
                .iter()
                .any(|f| f.kind == RiskKind::CarriedSkills),
            "{alias:?}"
        );
        let all_dropped = plan.dropped();
        let entry = all_dropped
            .iter()
            .find(|d| d.path == format!("skill_bundles.{alias}"))
            .unwrap_or_else(|| panic!("{alias:?} not dropped"));
        assert_eq!(entry.reason, DropReason::HostSpecific);
        assert!(entry.detail.starts_with("the skill-bundle alias "));
        // the config entry still travels
        assert!(get(plan.closure(), &["skill_bundles", alias]).is_some());
    }
    // a name every target can create renders; one whose default directory escapes shared/ does not
    render(&with_skill_bundle("con", &[]).plan());
    let plan = with_skill_bundle("../../outside", &[]).plan();
    let err = plan
        .render(&CaptureOutcome::default(), &provenance())
        .expect_err("escapes shared/");
    assert!(err.to_string().contains("../../outside.directory"), "{err}");
}

#[test]
fn case40_directory_outside_the_install() {
    let plan = with_skill_bundle(
        "research_tools",
        &[("directory", r#""/srv/zeroclaw/shared/skills/pool""#)],
    )
    .plan();
    assert!(plan.skills.is_empty());
    assert!(get(
        plan.closure(),
        &["skill_bundles", "research_tools", "directory"]
    )
    .is_none());
    let list = dropped(&plan.dropped());
    assert!(list.contains(&(
        "skill_bundles.research_tools.directory".into(),
        "host_specific"
    )));
    assert!(list.contains(&("skills/research_tools".into(), "host_specific")));
    assert!(!plan
        .risk_flags()
        .iter()
        .any(|f| f.kind == RiskKind::CarriedSkills));
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("/srv/zeroclaw"));
}

#[test]
fn absolute_directory_inside_shared_is_carried_without_the_key() {
    // the Unix analogue of case 41: row 11 is recorded, yet the content is planned
    let plan = with_skill_bundle(
        "research_tools",
        &[("directory", r#""/zc/shared/skills/pool""#)],
    )
    .plan();
    assert_eq!(
        dropped(&plan.dropped())[2],
        (
            "skill_bundles.research_tools.directory".to_string(),
            "host_specific"
        )
    );
    assert!(!plan
        .dropped()
        .iter()
        .any(|d| d.path == "skills/research_tools"));
    assert_eq!(plan.skills.len(), 1);
    assert_eq!(
        plan.skills[0].source,
        TreeSource::Anchored {
            anchor: PathBuf::from(ROOT),
            components: vec!["shared".into(), "skills".into(), "pool".into()],
        }
    );
    assert!(get(
        plan.closure(),
        &["skill_bundles", "research_tools", "directory"]
    )
    .is_none());
    render(&plan);
}

#[test]
fn case42_escaping_relative_directories() {
    for directory in [
        "shared/../private-skills",
        "agents/researcher/workspace",
        "shared/missing/../pool",
        "shared/skills/staging/../pool",
    ] {
        let plan =
            with_skill_bundle("research_tools", &[("directory", &toml_string(directory))]).plan();
        assert!(plan.skills.is_empty(), "{directory}");
        assert!(get(
            plan.closure(),
            &["skill_bundles", "research_tools", "directory"]
        )
        .is_none());
        assert!(plan
            .dropped()
            .iter()
            .any(|d| d.path == "skills/research_tools" && d.reason == DropReason::HostSpecific));
        assert!(!plan
            .risk_flags()
            .iter()
            .any(|f| f.kind == RiskKind::CarriedSkills));
        render(&plan);
    }
}

#[test]
fn case43_relative_directory_inside_shared() {
    let plan = with_skill_bundle(
        "research_tools",
        &[("directory", r#""shared/skills/pool/research""#)],
    )
    .plan();
    assert_eq!(plan.skills.len(), 1);
    assert_eq!(
        plan.skills[0].source,
        TreeSource::Anchored {
            anchor: PathBuf::from(ROOT),
            components: ["shared", "skills", "pool", "research"]
                .map(String::from)
                .to_vec(),
        }
    );
    assert_eq!(
        get(
            plan.closure(),
            &["skill_bundles", "research_tools", "directory"]
        ),
        Some(&s("shared/skills/pool/research"))
    );
    render(&plan);
}
