//! Risk flags (`flags`): what an importing operator is asked to grant.

use super::*;

#[test]
fn case13_stdio_server_flagged() {
    let flags = Fx::base().plan().risk_flags();
    let spawn = flags
        .iter()
        .find(|f| f.kind == RiskKind::ProcessSpawn)
        .expect("process_spawn flag");
    assert_eq!(spawn.path, "mcp.servers.github.command");
    assert!(spawn.detail.contains("npx"));
    assert!(!flags.iter().any(|f| f.path.contains("unrelated")));
}

#[test]
fn case14_permissive_profile_raises_every_flag() {
    let mut fx = Fx::base();
    fx.append(
        r#"
[risk_profiles.guarded]
level = "full"
workspace_only = false
sandbox_enabled = false
block_high_risk_commands = false
require_approval_for_medium_risk = false
shell_env_passthrough = ["AWS_SECRET_ACCESS_KEY"]
allowed_roots = ["/"]
[risk_profiles.guarded.delegation_policy]
mode = "allow"
"#
        .replace(
            "[risk_profiles.guarded]\nlevel",
            "[risk_profiles.guarded_tmp]\nlevel",
        )
        .as_str(),
    );
    // move the permissive profile into place (a TOML table cannot be opened twice)
    let text = fx
        .doc
        .to_string()
        .replace("[risk_profiles.guarded]\n", "")
        .replace("guarded_tmp", "guarded");
    fx.doc = text.parse().expect("parses");
    fx.set(
        &[
            "agents",
            "researcher",
            "workspace",
            "unrestricted_filesystem",
        ],
        "true",
    );
    let plan = fx.plan();
    assert_eq!(
        flags(&plan.risk_flags()),
        [
            ("full_autonomy", "risk_profiles.guarded.level".to_string()),
            (
                "filesystem_escape",
                "risk_profiles.guarded.workspace_only".to_string()
            ),
            (
                "sandbox_disabled",
                "risk_profiles.guarded.sandbox_enabled".to_string()
            ),
            (
                "approval_bypass",
                "risk_profiles.guarded.block_high_risk_commands".to_string()
            ),
            (
                "approval_bypass",
                "risk_profiles.guarded.require_approval_for_medium_risk".to_string()
            ),
            (
                "env_passthrough",
                "risk_profiles.guarded.shell_env_passthrough".to_string()
            ),
            (
                "extra_filesystem_roots",
                "risk_profiles.guarded.allowed_roots".to_string()
            ),
            (
                "delegation_enabled",
                "risk_profiles.guarded.delegation_policy.mode".to_string()
            ),
            (
                "filesystem_escape",
                "agents.researcher.workspace.unrestricted_filesystem".to_string()
            ),
            ("process_spawn", "mcp.servers.github.command".to_string()),
        ]
    );
    let env = plan
        .risk_flags()
        .into_iter()
        .find(|f| f.kind == RiskKind::EnvPassthrough)
        .expect("flag");
    assert!(env.detail.ends_with(": AWS_SECRET_ACCESS_KEY"));
    // the profile travels with the non-default values (and the fragment still validates)
    let reparsed = reparse(&render(&plan).config_toml);
    assert_eq!(
        get(&reparsed, &["risk_profiles", "guarded", "level"]),
        Some(&s("full"))
    );
    assert_eq!(
        get(
            &reparsed,
            &[
                "agents",
                "researcher",
                "workspace",
                "unrestricted_filesystem"
            ]
        ),
        Some(&Node::Bool(true))
    );
}

#[test]
fn case15_full_autonomy_turns_confinement_off() {
    let mut fx = Fx::base();
    fx.set(&["risk_profiles", "guarded", "level"], r#""full""#);
    assert_eq!(
        flags(&fx.plan().risk_flags()),
        [
            ("full_autonomy", "risk_profiles.guarded.level".to_string()),
            (
                "filesystem_escape",
                "risk_profiles.guarded.level".to_string()
            ),
            ("process_spawn", "mcp.servers.github.command".to_string()),
        ]
    );
}

#[test]
fn case16_default_profile_raises_nothing() {
    let mut fx = Fx::base();
    // spelling every default out raises nothing; ZeroClaw 0.8.7's planner prunes values equal
    // to the profile's real default (they read back the same), and keeps an explicit `[]` where
    // the default is not empty (an allowlist pruned away would read back as the default one)
    fx.append(
        "[risk_profiles.spelled]\nlevel = \"supervised\"\nworkspace_only = true\nrequire_approval_for_medium_risk = true\nblock_high_risk_commands = true\nshell_env_passthrough = []\nallowed_roots = []\n[risk_profiles.spelled.delegation_policy]\nmode = \"forbidden\"\n",
    );
    for profile in ["guarded", "spelled"] {
        fx.set(
            &["agents", "researcher", "risk_profile"],
            &format!("{profile:?}"),
        );
        let plan = fx.plan();
        assert_eq!(
            flags(&plan.risk_flags()),
            [("process_spawn", "mcp.servers.github.command".to_string())]
        );
        assert!(
            get(plan.closure(), &["risk_profiles", profile]).is_some(),
            "{profile} carried"
        );
    }
    fx.append("[risk_profiles.empty_allow]\nallowed_commands = []\n");
    fx.set(&["agents", "researcher", "risk_profile"], "\"empty_allow\"");
    let plan = fx.plan();
    assert_eq!(
        get(
            plan.closure(),
            &["risk_profiles", "empty_allow", "allowed_commands"]
        ),
        Some(&Node::Array(Vec::new())),
        "an explicit empty allowlist is kept"
    );
}

#[test]
fn case17_pinned_resources_flagged() {
    let mut fx = Fx::base();
    let servers = fx.doc["mcp"]["servers"]
        .as_array_of_tables_mut()
        .expect("servers");
    let github = servers.iter_mut().next().expect("github first");
    github["pinned_resources"] = toml_edit::value(toml_edit::Array::from_iter(["repo://readme"]));
    let plan = fx.plan();
    let flag = plan
        .risk_flags()
        .into_iter()
        .find(|f| f.kind == RiskKind::UntrustedStartupContext)
        .expect("untrusted_startup_context");
    assert_eq!(flag.path, "mcp.servers.github.pinned_resources");
    assert!(flag.detail.ends_with(": repo://readme"));
}
