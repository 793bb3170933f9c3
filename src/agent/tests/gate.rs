//! The gate (`gate`): broken references and malformed fields fail naming the dotted path.

use super::*;

#[test]
fn case23_broken_references_fail_the_gate_naming_the_field() {
    type Breaker = fn(&mut Fx);
    let cases: Vec<(Breaker, &str)> = vec![
        (
            |fx| {
                fx.set(
                    &["agents", "researcher", "model_provider"],
                    r#""anthropic.gone""#,
                );
            },
            "agents.researcher.model_provider",
        ),
        (
            |fx| {
                fx.set(
                    &["agents", "researcher", "classifier_provider"],
                    r#""anthropic.gone""#,
                );
            },
            "agents.researcher.classifier_provider",
        ),
        (
            |fx| {
                fx.set(
                    &["agents", "researcher", "summary_provider"],
                    r#""anthropic.gone""#,
                );
            },
            "agents.researcher.summary_provider",
        ),
        (
            |fx| {
                fx.set(
                    &["agents", "researcher", "tts_provider"],
                    r#""openai.gone""#,
                );
            },
            "agents.researcher.tts_provider",
        ),
        (
            |fx| {
                fx.set(
                    &["agents", "researcher", "transcription_provider"],
                    r#""openai.gone""#,
                );
            },
            "agents.researcher.transcription_provider",
        ),
        (
            |fx| {
                fx.set(&["agents", "researcher", "risk_profile"], r#""gone""#);
            },
            "agents.researcher.risk_profile",
        ),
        (
            |fx| {
                fx.set(&["agents", "researcher", "runtime_profile"], r#""gone""#);
            },
            "agents.researcher.runtime_profile",
        ),
        (
            |fx| {
                fx.set(
                    &[
                        "runtime_profiles",
                        "standard",
                        "context_compression",
                        "summary_provider",
                    ],
                    r#""anthropic.gone""#,
                );
            },
            "runtime_profiles.standard.context_compression.summary_provider",
        ),
        (
            |fx| {
                fx.set(&["agents", "researcher", "skill_bundles"], r#"["gone"]"#);
            },
            "agents.researcher.skill_bundles[0]",
        ),
        (
            |fx| {
                fx.set(
                    &["agents", "researcher", "knowledge_bundles"],
                    r#"["gone"]"#,
                );
            },
            "agents.researcher.knowledge_bundles[0]",
        ),
        (
            |fx| {
                fx.set(&["agents", "researcher", "mcp_bundles"], r#"["gone"]"#);
            },
            "agents.researcher.mcp_bundles[0]",
        ),
    ];
    for (breaker, field) in cases {
        let mut fx = Fx::loaded();
        breaker(&mut fx);
        let plan = fx.plan();
        let plan_for_outcome = all_carried(&plan);
        let err = plan
            .render(&plan_for_outcome, &provenance())
            .expect_err(field);
        match &err {
            AgentError::ClosureInvalid {
                alias, field: got, ..
            } => {
                assert_eq!(alias, "researcher");
                assert_eq!(got, field);
            }
            other => panic!("{field}: unexpected error {other:?}"),
        }
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn gate_requires_a_risk_profile_for_an_enabled_agent() {
    let mut fx = Fx::base();
    fx.remove(&["agents", "researcher", "risk_profile"]);
    let err = fx
        .plan()
        .render(&CaptureOutcome::default(), &provenance())
        .expect_err("no profile");
    assert!(
        matches!(err, AgentError::ClosureInvalid { ref field, .. } if field == "agents.researcher.risk_profile")
    );
    fx.set(&["agents", "researcher", "enabled"], "false");
    let bundle = render(&fx.plan());
    assert!(bundle.config_toml.contains("enabled = false"));
}

#[test]
fn malformed_fields_name_the_path() {
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "skill_bundles"],
        r#""research_tools""#,
    );
    let err = plan_export(&fx.install(), "researcher").expect_err("not a list");
    assert_eq!(
        err.to_string(),
        "config field agents.researcher.skill_bundles must be an array of strings, not a string"
    );
    let mut fx = Fx::base();
    fx.set(&["agents", "researcher", "risk_profile"], "3");
    let err = plan_export(&fx.install(), "researcher").expect_err("not a string");
    assert!(
        err.to_string().contains("agents.researcher.risk_profile"),
        "{err}"
    );
}
