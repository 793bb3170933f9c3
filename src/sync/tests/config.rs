//! The config merge's rules, one case each: a local edit survives, the local layout and
//! comments stay, conflicts are listed or resolved, entries come and go, inline tables and
//! arrays are values, MCP servers by name, and a real ZeroClaw config still loads.

use crate::sync::config::{merge_config, ConfigMergeError, KeyAction, KeyConflict, Which};
use crate::sync::{ConflictKind, Conflicts};

const BASE: &str = r#"
[agents.coder]
model_provider = "anthropic.main"
risk_profile = "default"
temperature = 0.2
"#;

const LOCAL: &str = r#"schema_version = 3

# My gateway, hands off.
[gateway]
port   = 42617

# The imported agent, tuned here.
[agents.coder]
model_provider = "anthropic.main"   # keep this one
risk_profile   = "default"
temperature    = 0.7                # warmer here
"#;

fn merge(
    incoming: &str,
    policy: Conflicts,
) -> Result<crate::sync::config::MergedConfig, ConfigMergeError> {
    merge_config(BASE, LOCAL, incoming, &["agents.coder"], policy)
}

fn actions(merged: &crate::sync::config::MergedConfig) -> Vec<(String, KeyAction)> {
    merged
        .decisions
        .iter()
        .map(|d| (d.path.join("."), d.action.clone()))
        .collect()
}

#[test]
fn a_local_edit_survives_an_update_of_another_key_and_the_layout_stays() {
    let incoming = r#"
[agents.coder]
model_provider = "anthropic.fast"
risk_profile = "default"
temperature = 0.2
"#;
    let merged = merge(incoming, Conflicts::Refuse).unwrap();
    assert_eq!(
        merged.text,
        LOCAL.replace(
            "model_provider = \"anthropic.main\"   # keep this one",
            "model_provider = \"anthropic.fast\"   # keep this one"
        )
    );
    assert_eq!(
        actions(&merged),
        [
            ("agents.coder.model_provider".to_string(), KeyAction::Take),
            ("agents.coder.temperature".to_string(), KeyAction::Keep),
        ]
    );
}

#[test]
fn nothing_changed_upstream_leaves_the_text_byte_for_byte() {
    // The same entry, written differently: a value compared by meaning, not by layout.
    let incoming = "[agents.coder]\ntemperature=0.2\nrisk_profile='default'\nmodel_provider=\"anthropic.main\"\n";
    let merged = merge(incoming, Conflicts::Refuse).unwrap();
    assert_eq!(merged.text, LOCAL);
    assert_eq!(
        actions(&merged),
        [("agents.coder.temperature".to_string(), KeyAction::Keep)]
    );
}

#[test]
fn the_same_change_on_both_sides_is_no_conflict() {
    let incoming = BASE.replace("0.2", "0.7");
    let merged = merge(&incoming, Conflicts::Refuse).unwrap();
    assert_eq!(merged.text, LOCAL);
    assert_eq!(
        actions(&merged),
        [("agents.coder.temperature".to_string(), KeyAction::Same)]
    );
}

#[test]
fn a_conflicting_key_is_listed_refused_or_resolved() {
    let incoming = BASE.replace("0.2", "0.9");
    assert_eq!(
        merge(&incoming, Conflicts::Refuse),
        Err(ConfigMergeError::Refused {
            conflicts: vec![KeyConflict {
                path: vec!["agents".into(), "coder".into(), "temperature".into()],
                kind: ConflictKind::BothModified,
            }]
        })
    );
    let err = merge(&incoming, Conflicts::Refuse).unwrap_err().to_string();
    assert_eq!(
        err,
        "1 config key(s) changed here and upstream: agents.coder.temperature (changed here and upstream)"
    );
    for policy in [Conflicts::KeepLocal, Conflicts::Copy] {
        let merged = merge(&incoming, policy).unwrap();
        assert_eq!(merged.text, LOCAL, "{policy:?}");
        assert_eq!(
            actions(&merged),
            [(
                "agents.coder.temperature".to_string(),
                KeyAction::Conflict {
                    kind: ConflictKind::BothModified,
                    took_incoming: false
                }
            )]
        );
    }
    // Taken: the value changes, the local comment beside it stays.
    let merged = merge(&incoming, Conflicts::TakeIncoming).unwrap();
    assert_eq!(
        merged.text,
        LOCAL.replace("0.7                # warmer", "0.9                # warmer")
    );
}

#[test]
fn entries_added_and_removed_upstream() {
    let base =
        "[agents.coder]\nmodel_provider = \"a.b\"\n\n[providers.models.old.x]\nmodel = \"m\"\n";
    let local = "schema_version = 3\n\n[providers.models.old.x]\nmodel = \"m\"\n\n[agents.coder]\nmodel_provider = \"a.b\"\n\n[agents.other]\nmodel_provider = \"z.z\"\n";
    let incoming = "[agents.coder]\nmodel_provider = \"new.y\"\n\n[agents.coder.workspace]\npath = \"w\"\n\n[providers.models.new.y]\nmodel = \"n\"\n";
    let entries = [
        "agents.coder",
        "providers.models.old.x",
        "providers.models.new.y",
    ];
    let merged = merge_config(base, local, incoming, &entries, Conflicts::Refuse).unwrap();
    assert_eq!(
        merged.text,
        // A new table follows the local tables around it: the provider goes where the
        // providers were.
        "schema_version = 3\n\n[providers.models.new.y]\nmodel = \"n\"\n\n[agents.coder]\nmodel_provider = \"new.y\"\n\n[agents.coder.workspace]\npath = \"w\"\n\n[agents.other]\nmodel_provider = \"z.z\"\n"
    );
    assert_eq!(
        actions(&merged),
        [
            ("agents.coder.model_provider".to_string(), KeyAction::Take),
            ("agents.coder.workspace".to_string(), KeyAction::Take),
            ("providers.models.old.x".to_string(), KeyAction::Delete),
            ("providers.models.new.y".to_string(), KeyAction::Take),
        ]
    );
}

#[test]
fn an_entry_removed_here_and_changed_upstream_is_a_conflict() {
    let local = "schema_version = 3\n";
    let incoming = BASE.replace("0.2", "0.3");
    let listed = |r: Result<_, ConfigMergeError>| match r {
        Err(ConfigMergeError::Refused { conflicts }) => conflicts,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        listed(merge_config(
            BASE,
            local,
            &incoming,
            &["agents.coder"],
            Conflicts::Refuse
        )),
        [KeyConflict {
            path: vec!["agents".into(), "coder".into()],
            kind: ConflictKind::DeletedLocally
        }]
    );
    let taken = merge_config(
        BASE,
        local,
        &incoming,
        &["agents.coder"],
        Conflicts::TakeIncoming,
    )
    .unwrap();
    let typed: toml::Table = toml::from_str(&taken.text).unwrap();
    assert_eq!(
        typed["agents"]["coder"]["temperature"].as_float(),
        Some(0.3)
    );
    // Removed here and unchanged upstream: stays removed, no conflict.
    let kept = merge_config(BASE, local, BASE, &["agents.coder"], Conflicts::Refuse).unwrap();
    assert_eq!(kept.text, local);
    assert_eq!(
        actions(&kept),
        [("agents.coder".to_string(), KeyAction::KeepLocalDeletion)]
    );
    // Changed here and removed upstream.
    assert_eq!(
        listed(merge_config(
            BASE,
            LOCAL,
            "",
            &["agents.coder"],
            Conflicts::Refuse
        )),
        [KeyConflict {
            path: vec!["agents".into(), "coder".into()],
            kind: ConflictKind::DeletedUpstream
        }]
    );
}

#[test]
fn an_inline_table_and_an_array_are_single_values() {
    let base = "[agents.coder]\nlimits = { a = 1, b = 1 }\ntools = [\"x\"]\nsame = [1, 2]\n";
    // Here `limits.a` and `tools`, upstream `limits.b` and `tools`: inside one value each.
    let local =
        "[agents.coder]\nlimits = { a = 2, b = 1 }\ntools = [\"x\", \"y\"]\nsame = [ 1,   2 ]\n";
    let incoming =
        "[agents.coder]\nlimits = { a = 1, b = 3 }\ntools = [\"x\", \"z\"]\nsame = [1, 2]\n";
    let Err(ConfigMergeError::Refused { conflicts }) =
        merge_config(base, local, incoming, &["agents.coder"], Conflicts::Refuse)
    else {
        panic!("no conflict")
    };
    let paths: Vec<String> = conflicts.iter().map(|c| c.path.join(".")).collect();
    assert_eq!(paths, ["agents.coder.limits", "agents.coder.tools"]);
    // An inline table here equals the same keys written as a table upstream.
    let incoming = "[agents.coder.limits]\nb = 1\na = 2\n\n[agents.coder]\ntools = [\"x\", \"y\"]\nsame = [1, 2]\n";
    let merged = merge_config(base, local, incoming, &["agents.coder"], Conflicts::Refuse).unwrap();
    assert_eq!(merged.text, local);
}

#[test]
fn a_replaced_inline_value_keeps_the_local_form() {
    let base = "[agents.coder]\nlimits = { a = 1 }\n";
    let local = "[agents.coder]\nlimits = { a = 1 } # mine\n";
    let incoming = "[agents.coder.limits]\na = 5\n";
    let merged = merge_config(base, local, incoming, &["agents.coder"], Conflicts::Refuse).unwrap();
    assert_eq!(merged.text, "[agents.coder]\nlimits = { a = 5 } # mine\n");
}

#[test]
fn an_mcp_server_is_found_by_name() {
    let base = "[[mcp.servers]]\nname = \"fs\"\ncommand = \"npx\"\n";
    let local = "[[mcp.servers]]\nname = \"mine\"\ncommand = \"x\"\n\n[[mcp.servers]]\nname = \"fs\"\ncommand = \"npx\"\nargs = [\"--local\"]\n";
    let incoming = "[[mcp.servers]]\nname = \"fs\"\ncommand = \"bunx\"\n\n[[mcp.servers]]\nname = \"web\"\ncommand = \"w\"\n";
    let entries = ["mcp.servers.fs", "mcp.servers.web"];
    let merged = merge_config(base, local, incoming, &entries, Conflicts::Refuse).unwrap();
    assert_eq!(
        merged.text,
        "[[mcp.servers]]\nname = \"mine\"\ncommand = \"x\"\n\n[[mcp.servers]]\nname = \"fs\"\ncommand = \"bunx\"\nargs = [\"--local\"]\n\n[[mcp.servers]]\nname = \"web\"\ncommand = \"w\"\n"
    );
    // Removed upstream, unchanged here: the element goes, the others stay.
    let merged = merge_config(
        base,
        local,
        "",
        &["mcp.servers.fs"],
        Conflicts::TakeIncoming,
    )
    .unwrap();
    assert_eq!(
        merged.text,
        "[[mcp.servers]]\nname = \"mine\"\ncommand = \"x\"\n"
    );
    // Into a config without any server: an array of tables is created.
    let merged = merge_config(
        "",
        "schema_version = 3\n",
        incoming,
        &entries,
        Conflicts::Refuse,
    )
    .unwrap();
    let typed: toml::Table = toml::from_str(&merged.text).unwrap();
    assert_eq!(
        typed["mcp"]["servers"].as_array().map(Vec::len),
        Some(2),
        "{}",
        merged.text
    );
}

#[test]
fn errors_name_the_document_and_the_path() {
    let err = merge_config(
        BASE,
        "a = 1\n[x\n",
        BASE,
        &["agents.coder"],
        Conflicts::Refuse,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            ConfigMergeError::Parse {
                which: Which::Local,
                line: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("could not parse the local config at line 2"),
        "{err}"
    );
    assert!(matches!(
        merge_config(BASE, LOCAL, BASE, &["agents..x"], Conflicts::Refuse),
        Err(ConfigMergeError::EntryPath { .. })
    ));
    // An entry under a key that is a plain value locally cannot be written.
    let err = merge_config(
        "",
        "agents = 5\n",
        BASE,
        &["agents.coder"],
        Conflicts::Refuse,
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigMergeError::Shape { path, .. } if path == "agents"),
        "{err:?}"
    );
}

#[test]
fn a_real_zeroclaw_config_still_loads_after_a_merge() {
    let local = include_str!("../../../tests/zeroclaw/dev-config.template.toml");
    let base = local;
    let incoming = r#"
[providers.models.ollama.default]
model = "llama3.3"
uri = "http://host.docker.internal:11434"
temperature = 0.7

[agents.default]
enabled = true
model_provider = "ollama.default"
risk_profile = "default"
runtime_profile = "default"

[agents.default.workspace]
path = "/zeroclaw-data/workspace"

[risk_profiles.default]
workspace_only = true

[runtime_profiles.default]
"#;
    let entries = [
        "agents.default",
        "providers.models.ollama.default",
        "risk_profiles.default",
        "runtime_profiles.default",
    ];
    let merged = merge_config(base, local, incoming, &entries, Conflicts::Refuse).unwrap();
    // Everything outside the changed keys, comments included, is the local file's.
    assert_eq!(
        merged.text,
        local
            .replace("model = \"llama3.2\"", "model = \"llama3.3\"")
            .replace(
                "[risk_profiles.default]\n",
                "[risk_profiles.default]\nworkspace_only = true\n"
            )
    );
    let root = std::path::Path::new("/nonexistent-install");
    let install = crate::agent::Install::from_toml_str(root, &merged.text).expect("loads");
    install.typed.validate().expect("validates");
    assert_eq!(install.agent_aliases(), ["default"]);
}
