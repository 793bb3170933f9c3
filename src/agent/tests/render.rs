//! Rendering: the exact closure and manifest of the base fixture, both files reparsing, the report fields, and what the rendered files say about what the capture carried (`render`, `manifest`).

use super::*;

#[test]
fn base_fixture_renders_the_exact_closure() {
    let plan = Fx::base().plan();
    let bundle = render(&plan);
    let expected = format!(
        "{CONFIG_HEADER}{}",
        r#"[agents.researcher]
delegate_same_risk_profile = false
mcp_bundles = ["research"]
model_provider = "anthropic.main"
risk_profile = "guarded"

[[mcp.servers]]
args = [
    "-y",
    "@modelcontextprotocol/server-github",
]
command = "npx"
name = "github"

[mcp.servers.env]
GITHUB_TOKEN = ""

[mcp_bundles.research]
exclude = ["search"]
servers = [
    "github",
    "search",
]

[providers.models.anthropic.main]
api_key = ""
model = "claude-opus-5"

[risk_profiles.guarded]
"#
    );
    assert_eq!(bundle.config_toml, expected);
    assert_eq!(
        dropped(&bundle.manifest.dropped),
        pairs(&[
            ("agents.researcher.channels", "host_specific"),
            ("agents.researcher.delegate_same_risk_profile", "relational"),
            MEMORY_DROPS[0],
            MEMORY_DROPS[1],
        ])
    );
    assert_eq!(
        bundle.manifest.risk_flags,
        [RiskFlag {
            kind: RiskKind::ProcessSpawn,
            path: "mcp.servers.github.command".into(),
            detail: "starts a local process on the target host: npx -y @modelcontextprotocol/server-github"
                .into(),
        }]
    );
    assert_eq!(
        bundle.manifest.required_secrets,
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "providers.models.anthropic.main.api_key"
        ]
    );
    assert_eq!(
        plan.workspace,
        TreeSource::Anchored {
            anchor: PathBuf::from(ROOT),
            components: vec!["agents".into(), "researcher".into(), "workspace".into()],
        }
    );
    assert!(plan.skills.is_empty());
    // same install state in, same bytes out
    assert_eq!(render(&Fx::base().plan()), bundle);
}

#[test]
fn manifest_renders_in_the_fixed_order() {
    let bundle = render(&Fx::base().plan());
    let body = bundle
        .manifest_toml
        .strip_prefix(MANIFEST_HEADER)
        .expect("manifest starts with the header");
    // ZeroClaw 0.8.7's renderer, keys in name order.
    let expected_start = "format_version = 1\nrequired_secrets = [\n    \"mcp.servers.github.env.GITHUB_TOKEN\",\n    \"providers.models.anthropic.main.api_key\",\n]\nroot_agent = \"researcher\"\nskill_bundles = []\n\n[[dropped]]\ndetail = \"channel bindings name accounts and credentials that exist only on the source install; bind the imported agent to a local channel instead\"\npath = \"agents.researcher.channels\"\nreason = \"host_specific\"\n";
    assert!(body.starts_with(expected_start), "{body}");
    assert!(
        body.contains(
            "\n\n[[risk_flags]]\ndetail = \"starts a local process on the target host: npx -y @modelcontextprotocol/server-github\"\nkind = \"process_spawn\"\npath = \"mcp.servers.github.command\"\n"
        ),
        "{body}"
    );
}

#[test]
fn case09_report_describes_this_agent_not_the_schema() {
    let plan = Fx::base().plan();
    for path in [
        "agents.researcher.delegates",
        "agents.researcher.cron_jobs",
        "agents.researcher.a2a",
    ] {
        assert!(
            !plan.dropped().iter().any(|d| d.path == path),
            "{path} listed"
        );
    }
    // empty lists are removed without a report too
    let mut fx = Fx::base();
    fx.set(&["agents", "researcher", "delegates"], "[]")
        .set(&["agents", "researcher", "cron_jobs"], "[]")
        .set(
            &["agents", "researcher", "a2a"],
            "{ published = false, exposed_skills = [] }",
        );
    let plan = fx.plan();
    assert_eq!(plan.dropped().len(), 4);
    let agent = get(plan.closure(), &["agents", "researcher"])
        .and_then(Node::as_table)
        .expect("agent");
    for key in ["delegates", "cron_jobs", "a2a"] {
        assert!(agent.get(key).is_none());
    }
    // a published a2a surface is reported
    fx.set(&["agents", "researcher", "a2a"], "{ published = true }");
    assert!(fx
        .plan()
        .dropped()
        .iter()
        .any(|d| d.path == "agents.researcher.a2a" && d.reason == DropReason::DefaultClosed));
}

#[test]
fn case21_both_files_reparse() {
    let bundle = render(&Fx::loaded().plan());
    reparse(&bundle.config_toml);
    let manifest = reparse(&bundle.manifest_toml);
    assert_eq!(manifest.get("root_agent"), Some(&s("researcher")));
    assert_eq!(manifest.get("format_version"), Some(&Node::Int(1)));
    assert_eq!(
        manifest
            .get("dropped")
            .and_then(Node::as_array)
            .map(<[Node]>::len),
        Some(bundle.manifest.dropped.len())
    );
}

#[test]
fn case22_closure_has_one_agent_and_validates() {
    for fx in [Fx::base(), Fx::loaded()] {
        let reparsed = reparse(&render(&fx.plan()).config_toml);
        let agents = reparsed
            .get("agents")
            .and_then(Node::as_table)
            .expect("agents");
        assert_eq!(
            agents.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ["researcher"]
        );
        let agent = agents
            .get("researcher")
            .and_then(Node::as_table)
            .expect("agent");
        assert!(agent.get("channels").is_none());
        assert!(agent.get("delegates").is_none());
        assert!(reparsed.get("channels").is_none());
    }
}

#[test]
fn case33_identity_missing_after_capture() {
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "identity", "aieos_path"],
        r#""identity/aieos.json""#,
    );
    let plan = fx.plan();
    assert_eq!(plan.identity_document(), Some("identity/aieos.json"));
    let outcome = CaptureOutcome {
        identity_document_carried: false,
        ..all_carried(&plan)
    };
    let bundle = render_with(&plan, &outcome);
    assert!(!bundle.config_toml.contains("aieos_path"));
    let last = bundle.manifest.dropped.last().expect("entry");
    assert_eq!(last.path, "agents.researcher.identity.aieos_path");
    assert_eq!(last.reason, DropReason::SourceMissing);
    // the identity format travels even when the document does not
    fx.set(
        &["agents", "researcher", "identity", "format"],
        r#""aieos""#,
    );
    let bundle = render_with(&fx.plan(), &outcome);
    assert!(bundle
        .config_toml
        .contains("[agents.researcher.identity]\nformat = \"aieos\"\n"));
}

#[test]
fn case36_missing_skill_content() {
    let plan = with_skill_bundle("research_tools", &[]).plan();
    let outcome = CaptureOutcome {
        carried_skill_bundles: vec![],
        missing_skill_bundles: vec!["research_tools".into()],
        identity_document_carried: true,
        excluded: Vec::new(),
    };
    let bundle = render_with(&plan, &outcome);
    assert!(bundle.manifest.skill_bundles.is_empty());
    assert!(bundle.manifest_toml.contains("skill_bundles = []\n"));
    assert!(!bundle
        .manifest
        .risk_flags
        .iter()
        .any(|f| f.kind == RiskKind::CarriedSkills));
    let last = bundle.manifest.dropped.last().expect("entry");
    assert_eq!(
        (last.path.as_str(), last.reason),
        ("skills/research_tools", DropReason::SourceMissing)
    );
    // its config still travels
    assert!(bundle
        .config_toml
        .contains("[skill_bundles.research_tools]"));
    // a planned bundle the capture did not mention is treated as missing too
    let bundle = render_with(&plan, &CaptureOutcome::default());
    assert!(bundle.manifest.skill_bundles.is_empty());
    // and a bundle the plan never had is refused
    let bogus = CaptureOutcome {
        carried_skill_bundles: vec!["other".into()],
        ..CaptureOutcome::default()
    };
    assert!(matches!(
        plan.render(&bogus, &provenance()),
        Err(AgentError::CaptureMismatch(_))
    ));
}

#[test]
fn case44_reparsed_closure_keeps_the_references() {
    let reparsed = reparse(&render(&Fx::base().plan()).config_toml);
    assert_eq!(
        get(&reparsed, &["agents", "researcher", "model_provider"]),
        Some(&s("anthropic.main"))
    );
    assert_eq!(
        get(&reparsed, &["agents", "researcher", "risk_profile"]),
        Some(&s("guarded"))
    );
    assert!(get(&reparsed, &["agents", "researcher", "channels"]).is_none());
    assert!(get(&reparsed, &["risk_profiles", "guarded"]).is_some());
    assert!(get(&reparsed, &["mcp_bundles", "research"]).is_some());
}

#[test]
fn json_report_uses_wire_strings() {
    let bundle = render(&Fx::base().plan());
    let json = serde_json::to_value(&bundle.manifest).expect("serializes");
    assert_eq!(json["dropped"][0]["reason"], "host_specific");
    assert_eq!(json["risk_flags"][0]["kind"], "process_spawn");
    assert_eq!(json["root_agent"], "researcher");
}
