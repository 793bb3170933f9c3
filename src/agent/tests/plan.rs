//! The planner's closure (`plan`): which agents, servers, providers, profiles and fallback edges travel, and the dropped list.

use super::*;

#[test]
fn case01_unknown_alias() {
    let err = plan_export(&Fx::loaded().install(), "nobody").expect_err("unknown alias");
    match &err {
        AgentError::UnknownAgent { alias, configured } => {
            assert_eq!(alias, "nobody");
            assert_eq!(configured, &["assistant", "researcher"]);
        }
        other => panic!("unexpected error {other:?}"),
    }
    assert!(err.to_string().contains("assistant, researcher"), "{err}");
}

#[test]
fn case02_only_granted_servers_travel() {
    assert_eq!(server_names(Fx::base().plan().closure()), ["github"]);
}

#[test]
fn case03_duplicate_server_names_collapse_to_the_first() {
    let mut fx = Fx::base();
    fx.append(
        "[[mcp.servers]]\nname = \"github\"\ncommand = \"impostor\"\n[mcp.servers.env]\nGITHUB_TOKEN = \"ghp_theotherone\"\n",
    );
    let plan = fx.plan();
    assert_eq!(server_names(plan.closure()), ["github"]);
    let github_secrets: Vec<&String> = plan
        .required_secrets()
        .iter()
        .filter(|p| p.starts_with("mcp.servers.github"))
        .collect();
    assert_eq!(github_secrets, ["mcp.servers.github.env.GITHUB_TOKEN"]);
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("impostor"));
    assert!(!bundle.manifest_toml.contains("impostor"));
}

#[test]
fn case04_exclude_wins_across_bundles() {
    let mut fx = Fx::base();
    fx.append("[mcp_bundles.extra]\nservers = [\"search\"]\n");
    fx.set(
        &["agents", "researcher", "mcp_bundles"],
        r#"["research", "extra"]"#,
    );
    let plan = fx.plan();
    assert_eq!(server_names(plan.closure()), ["github"]);
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("search.example.com"));
    assert!(!bundle.manifest_toml.contains("search.example.com"));
}

#[test]
fn case08_workspace_overrides_and_grants_are_dropped() {
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "workspace", "path"],
        r#""/srv/custom""#,
    )
    .set(
        &["agents", "researcher", "workspace", "access"],
        r#"{ beta = "read" }"#,
    )
    .set(
        &["agents", "researcher", "workspace", "read_memory_from"],
        r#"["beta"]"#,
    );
    let plan = fx.plan();
    let agent = get(plan.closure(), &["agents", "researcher"])
        .and_then(Node::as_table)
        .expect("agent");
    assert!(agent.get("channels").is_none());
    assert!(
        agent.get("workspace").is_none(),
        "nothing left of workspace: {agent:?}"
    );
    assert_eq!(
        dropped(&plan.dropped()),
        pairs(&[
            ("agents.researcher.channels", "host_specific"),
            ("agents.researcher.delegate_same_risk_profile", "relational"),
            ("agents.researcher.workspace.path", "host_specific"),
            ("agents.researcher.workspace.access", "relational"),
            ("agents.researcher.workspace.read_memory_from", "relational"),
            MEMORY_DROPS[0],
            MEMORY_DROPS[1],
        ])
    );
    assert_eq!(
        plan.workspace,
        TreeSource::Configured {
            path: PathBuf::from("/srv/custom")
        }
    );
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("/srv/custom"));
    assert!(!bundle.config_toml.contains("beta"));
}

#[test]
fn case10_memory_entries_always_listed() {
    for fx in [Fx::base(), Fx::loaded()] {
        let bundle = render(&fx.plan());
        let list = dropped(&bundle.manifest.dropped);
        assert_eq!(&list[list.len() - 2..], pairs(&MEMORY_DROPS).as_slice());
    }
}

#[test]
fn case12_approval_route_removed() {
    let mut fx = Fx::base();
    fx.set(
        &["risk_profiles", "guarded", "approval_route"],
        r#"{ approver_channel = "telegram.ops", on_no_approver = "deny" }"#,
    );
    let plan = fx.plan();
    assert!(plan
        .dropped()
        .iter()
        .any(|d| d.path == "risk_profiles.guarded.approval_route"
            && d.reason == DropReason::HostSpecific));
    let reparsed = reparse(&render(&plan).config_toml);
    assert!(get(&reparsed, &["risk_profiles", "guarded"]).is_some());
    assert!(get(&reparsed, &["risk_profiles", "guarded", "approval_route"]).is_none());
    assert!(!render(&plan).config_toml.contains("telegram.ops"));
}

#[test]
fn case18_tts_provider_carried() {
    let mut fx = Fx::base();
    fx.append("[providers.tts.openai.voice]\napi_key = \"tts-secret-value\"\nvoice = \"alloy\"\n");
    fx.set(
        &["agents", "researcher", "tts_provider"],
        r#""openai.voice""#,
    );
    let plan = fx.plan();
    assert!(get(plan.closure(), &["providers", "tts", "openai", "voice"]).is_some());
    assert!(get(
        plan.closure(),
        &["providers", "models", "anthropic", "main"]
    )
    .is_some());
    assert!(plan
        .required_secrets()
        .contains(&"providers.tts.openai.voice.api_key".to_string()));
    render(&plan);
}

#[test]
fn case19_fallback_provider_carried_and_scrubbed() {
    let mut fx = Fx::base();
    fx.append("[providers.models.openai.backup]\napi_key = \"backup-key-not-real\"\nmodel = \"gpt-backup\"\n");
    fx.set(
        &["providers", "models", "anthropic", "main", "fallback"],
        r#"["openai.backup"]"#,
    );
    let plan = fx.plan();
    assert!(get(plan.closure(), &["providers", "models", "openai", "backup"]).is_some());
    assert!(plan
        .required_secrets()
        .contains(&"providers.models.openai.backup.api_key".to_string()));
    let reparsed = reparse(&render(&plan).config_toml);
    assert_eq!(
        get(
            &reparsed,
            &["providers", "models", "anthropic", "main", "fallback"]
        ),
        Some(&Node::Array(vec![s("openai.backup")]))
    );
}

#[test]
fn case20_unresolved_fallback_edge_removed() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "fallback"],
        r#"["openai.destination_only"]"#,
    );
    let plan = fx.plan();
    let all_dropped = plan.dropped();
    let edge = all_dropped
        .iter()
        .find(|d| d.path == "providers.models.anthropic.main.fallback[0]")
        .expect("edge dropped");
    assert_eq!(edge.reason, DropReason::SourceMissing);
    assert!(edge
        .detail
        .starts_with("fallback \"openai.destination_only\" does not resolve"));
    let reparsed = reparse(&render(&plan).config_toml);
    assert!(get(
        &reparsed,
        &["providers", "models", "anthropic", "main", "fallback"]
    )
    .is_none());
}

#[test]
fn fallback_walk_keeps_resolving_edges_stops_at_depth_three_and_skips_cycles() {
    let mut fx = Fx::base();
    fx.append(
        r#"
[providers.models.openai.a]
model = "a"
fallback = ["b", "", "anthropic.main"]
[providers.models.openai.b]
model = "b"
fallback = ["openai.c"]
[providers.models.openai.c]
model = "c"
fallback = ["openai.d"]
[providers.models.openai.d]
model = "d"
[providers.models.other.dup]
model = "x"
[providers.models.openai.dup]
model = "y"
"#,
    );
    fx.set(
        &["providers", "models", "anthropic", "main", "fallback"],
        r#"["openai.a", "dup", "ghost"]"#,
    );
    let plan = fx.plan();
    let models = get(plan.closure(), &["providers", "models"])
        .and_then(Node::as_table)
        .expect("models");
    let carried: Vec<String> = models
        .iter()
        .flat_map(|(f, e)| {
            e.as_table()
                .into_iter()
                .flat_map(move |e| e.iter().map(|(k, _)| k).map(move |a| format!("{f}.{a}")))
        })
        .collect();
    // main (0) -> a (1) -> b (2) -> c (3); d would be depth 4. The bare `dup` resolves to
    // `openai.dup` in ZeroClaw 0.8.7 (`other` is no provider family its schema knows, so its
    // loader drops that section).
    assert_eq!(
        carried,
        [
            "anthropic.main",
            "openai.a",
            "openai.b",
            "openai.c",
            "openai.dup"
        ]
    );
    // c's edge to d resolves on the source, so it stays as authored
    assert_eq!(
        get(models, &["openai", "c", "fallback"]),
        Some(&Node::Array(vec![s("openai.d")]))
    );
    // a bare alias kept as written; a blank entry kept; the cycle back to main is not followed twice
    assert_eq!(
        get(models, &["openai", "a", "fallback"]),
        Some(&Node::Array(vec![s("b"), s(""), s("anthropic.main")]))
    );
    // the bare `dup` resolves (see above); the unknown `ghost` does not
    assert_eq!(
        get(models, &["anthropic", "main", "fallback"]),
        Some(&Node::Array(vec![s("openai.a"), s("dup")]))
    );
    let all_dropped = plan.dropped();
    let edges: Vec<&str> = all_dropped
        .iter()
        .filter(|d| d.reason == DropReason::SourceMissing)
        .map(|d| d.path.as_str())
        .collect();
    assert_eq!(edges, ["providers.models.anthropic.main.fallback[2]"]);
    render(&plan);
}

#[test]
fn loaded_fixture_exact_outcome() {
    let plan = Fx::loaded().plan();
    assert!(
        plan.skills.is_empty(),
        "outside-install directory plans no content"
    );
    assert_eq!(plan.identity_document(), None);
    assert_eq!(
        dropped(&plan.dropped()),
        pairs(&[
            ("agents.researcher.channels", "host_specific"),
            ("agents.researcher.delegates", "relational"),
            ("agents.researcher.delegate_same_risk_profile", "relational"),
            ("agents.researcher.identity.aieos_path", "host_specific"),
            ("skill_bundles.research_tools.directory", "host_specific"),
            ("skills/research_tools", "host_specific"),
            MEMORY_DROPS[0],
            MEMORY_DROPS[1],
        ])
    );
    let bundle = render(&plan);
    let reparsed = reparse(&bundle.config_toml);
    let top: Vec<&str> = reparsed.iter().map(|(k, _)| k).collect();
    assert_eq!(
        top,
        // Tables in name order (toml without `preserve_order`: deterministic).
        [
            "agents",
            "knowledge_bundles",
            "mcp",
            "mcp_bundles",
            "providers",
            "risk_profiles",
            "runtime_profiles",
            "skill_bundles",
        ]
    );
    let models: Vec<&str> = get(&reparsed, &["providers", "models", "anthropic"])
        .and_then(Node::as_table)
        .expect("anthropic")
        .iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(models, ["classifier", "main", "summarizer"]);
    assert_eq!(
        get(&reparsed, &["skill_bundles", "research_tools"]),
        Some(&Node::Table(Table::new()))
    );
    assert_eq!(
        get(&reparsed, &["knowledge_bundles", "house_docs", "sources"]),
        Some(&Node::Array(vec![
            s("docs/handbook.md"),
            s("https://example.com/kb")
        ]))
    );
    assert_eq!(
        get(&reparsed, &["runtime_profiles", "standard", "agentic"]),
        Some(&Node::Bool(true))
    );
    assert!(!bundle.config_toml.contains("/srv/"));
    assert!(bundle.manifest.skill_bundles.is_empty());
    assert!(!bundle
        .manifest
        .risk_flags
        .iter()
        .any(|f| f.kind == RiskKind::CarriedSkills));
}

#[test]
fn case24_runtime_profile_summary_provider_carried() {
    let mut fx = Fx::base();
    fx.append(
        "[providers.models.anthropic.summarizer]\nmodel = \"claude-haiku\"\n[runtime_profiles.standard.context_compression]\nsummary_provider = \"anthropic.summarizer\"\n",
    );
    fx.set(
        &["agents", "researcher", "runtime_profile"],
        r#""standard""#,
    );
    let plan = fx.plan();
    assert!(get(
        plan.closure(),
        &["providers", "models", "anthropic", "summarizer"]
    )
    .is_some());
    let reparsed = reparse(&render(&plan).config_toml);
    assert_eq!(
        get(
            &reparsed,
            &[
                "runtime_profiles",
                "standard",
                "context_compression",
                "summary_provider"
            ]
        ),
        Some(&s("anthropic.summarizer"))
    );
}

#[test]
fn case25_same_profile_delegation_forced_off() {
    let mut fx = Fx::loaded();
    fx.set(
        &["agents", "researcher", "delegate_same_risk_profile"],
        "true",
    );
    let plan = fx.plan();
    assert!(plan
        .dropped()
        .iter()
        .any(|d| d.path == "agents.researcher.delegate_same_risk_profile"
            && d.reason == DropReason::Relational));
    let reparsed = reparse(&render(&plan).config_toml);
    assert_eq!(
        get(
            &reparsed,
            &["agents", "researcher", "delegate_same_risk_profile"]
        ),
        Some(&Node::Bool(false))
    );
    assert!(get(&reparsed, &["agents", "researcher", "delegates"]).is_none());
    // an explicit false is not reported, and still written
    fx.set(
        &["agents", "researcher", "delegate_same_risk_profile"],
        "false",
    );
    let plan = fx.plan();
    assert!(!plan
        .dropped()
        .iter()
        .any(|d| d.path.ends_with("delegate_same_risk_profile")));
    assert_eq!(
        get(
            plan.closure(),
            &["agents", "researcher", "delegate_same_risk_profile"]
        ),
        Some(&Node::Bool(false))
    );
}

#[test]
fn provider_tables_are_never_pruned() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "uri"],
        r#""https://api.anthropic.com""#,
    )
    .set(
        &["providers", "models", "anthropic", "main", "temperature"],
        "0.7",
    )
    .set(
        &["providers", "models", "anthropic", "main", "extra_headers"],
        "{}",
    );
    let plan = fx.plan();
    let main = get(
        plan.closure(),
        &["providers", "models", "anthropic", "main"],
    )
    .and_then(Node::as_table)
    .expect("main");
    assert_eq!(
        main.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        // ZeroClaw 0.8.7's planner: an empty map equal to its default is not written.
        ["api_key", "model", "temperature", "uri"]
    );
    render(&plan);
}

#[test]
fn workspace_path_relative_to_install_root() {
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "workspace", "path"],
        r#""custom/ws""#,
    );
    assert_eq!(
        fx.plan().workspace,
        TreeSource::Configured {
            path: PathBuf::from("/zc/custom/ws")
        }
    );
}

/// A skill bundle whose alias is a Windows device name keeps its entry in the closure and
/// loses only its content: that drop (`skill_bundles.con`) is no config entry a fragment
/// carries against ZeroClaw's exporter. A config drop at the same dotted path (the host
/// `directory` of bundle `con`, beside a bundle named `con.directory`) still is one.
#[test]
fn fragment_drops_leave_out_the_content_drop_of_a_device_name_alias() {
    let base = "[providers.models.openai.m]\nmodel = \"x\"\n[risk_profiles.p]\n\
                [agents.a]\nmodel_provider = \"openai.m\"\nrisk_profile = \"p\"\n\
                delegate_same_risk_profile = false\n";
    let plain = format!("{base}skill_bundles = [\"con\"]\n[skill_bundles.con]\n");
    assert_eq!(fragment_drops(&plain, "a").expect("loads"), Vec::new());
    let hostile = format!(
        "{base}skill_bundles = [\"con\", \"con.directory\"]\n\
         [skill_bundles.con]\ndirectory = \"/srv/skills\"\n[skill_bundles.\"con.directory\"]\n"
    );
    let drops = fragment_drops(&hostile, "a").expect("loads");
    let paths: Vec<&str> = drops.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(paths, ["skill_bundles.con.directory"], "{drops:?}");
}
