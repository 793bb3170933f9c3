//! The planner cases of reference §12.2 against the fixtures of §12.1, built in code. Each test
//! names its case number. Assertions are exact where the contract is exact (closure contents,
//! dropped and risk-flag lists, secret paths), and every test that renders also checks that the
//! fixture's distinctive secret strings appear nowhere in either rendered file.

use std::path::{Path, PathBuf};

use toml_edit::DocumentMut;

use super::value::{Node, Table};
use super::*;

const BASE: &str = r#"
schema_version = 3

[risk_profiles.guarded]

[mcp_bundles.research]
servers = ["github", "search"]
exclude = ["search"]

[[mcp.servers]]
name = "github"
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[mcp.servers.env]
GITHUB_TOKEN = "ghp_realsecretvalue"

[[mcp.servers]]
name = "search"
transport = "http"
url = "https://search.example.com/mcp"

[mcp.servers.headers]
Authorization = "Bearer search-header-secret"

[[mcp.servers]]
name = "unrelated"
transport = "stdio"
command = "other"

[providers.models.anthropic.main]
api_key = "sk-ant-realkey" # a comment that mentions comment-secret-text
model = "claude-opus-5"

[agents.researcher]
model_provider = "anthropic.main"
risk_profile = "guarded"
mcp_bundles = ["research"]
channels = ["telegram.work"]
"#;

const LOADED_EXTRA: &str = r#"
[providers.models.anthropic.summarizer]
model = "claude-haiku"

[providers.models.anthropic.classifier]
api_key = "sk-ant-classifier-secret"
model = "claude-mini"

[providers.tts.openai.voice]
api_key = "tts-secret-value"
voice = "alloy"

[runtime_profiles.standard]
agentic = true

[runtime_profiles.standard.context_compression]
summary_provider = "anthropic.summarizer"

[skill_bundles.research_tools]
directory = "/srv/zeroclaw/shared/skills/pool"

[knowledge_bundles.house_docs]
sources = ["docs/handbook.md", "https://example.com/kb"]

[agents.assistant]
model_provider = "anthropic.main"
risk_profile = "guarded"
"#;

/// Every secret the fixtures hold; none may reach a rendered file.
const SECRETS: &[&str] = &[
    "ghp_realsecretvalue",
    "sk-ant-realkey",
    "search-header-secret",
    "comment-secret-text",
    "sk-ant-classifier-secret",
    "tts-secret-value",
    "ghp_theotherone",
    "backup-key-not-real",
    "***MASKED***",
];

const ROOT: &str = "/zc";

struct Fx {
    doc: DocumentMut,
}

impl Fx {
    fn base() -> Fx {
        Fx {
            doc: BASE.parse().expect("base fixture parses"),
        }
    }

    fn loaded() -> Fx {
        let mut fx = Fx::base();
        fx.append(LOADED_EXTRA);
        fx.set(
            &["agents", "researcher", "runtime_profile"],
            r#""standard""#,
        )
        .set(
            &["agents", "researcher", "classifier_provider"],
            r#""anthropic.classifier""#,
        )
        .set(
            &["agents", "researcher", "tts_provider"],
            r#""openai.voice""#,
        )
        .set(
            &["agents", "researcher", "skill_bundles"],
            r#"["research_tools"]"#,
        )
        .set(
            &["agents", "researcher", "knowledge_bundles"],
            r#"["house_docs"]"#,
        )
        .set(&["agents", "researcher", "delegates"], r#"["assistant"]"#)
        .set(
            &["agents", "researcher", "identity", "aieos_path"],
            r#""/srv/identities/researcher.json""#,
        );
        fx
    }

    /// Set the value at `path` (creating tables on the way) from its TOML spelling.
    fn set(&mut self, path: &[&str], value: &str) -> &mut Self {
        let value: toml_edit::Value = value.parse().expect("test value parses");
        let (last, parents) = path.split_last().expect("non-empty path");
        let item = self.parent(parents);
        item[*last] = toml_edit::Item::Value(value);
        self
    }

    fn table(&mut self, path: &[&str]) -> &mut Self {
        let (last, parents) = path.split_last().expect("non-empty path");
        let item = self.parent(parents);
        item[*last] = toml_edit::table();
        self
    }

    fn remove(&mut self, path: &[&str]) -> &mut Self {
        let (last, parents) = path.split_last().expect("non-empty path");
        let item = self.parent(parents);
        if let Some(t) = item.as_table_like_mut() {
            t.remove(last);
        }
        self
    }

    /// The table at `path`, creating missing ones as standard (not inline) tables.
    fn parent(&mut self, path: &[&str]) -> &mut toml_edit::Item {
        let mut item = self.doc.as_item_mut();
        for key in path {
            if item.get(*key).is_none() {
                if let Some(t) = item.as_table_like_mut() {
                    t.insert(key, toml_edit::table());
                }
            }
            item = &mut item[*key];
        }
        item
    }

    fn append(&mut self, text: &str) -> &mut Self {
        let joined = format!("{}\n{text}", self.doc);
        self.doc = joined.parse().expect("appended fixture parses");
        self
    }

    fn install(&self) -> Install {
        Install::from_toml_str(Path::new(ROOT), &self.doc.to_string()).expect("fixture loads")
    }

    fn plan(&self) -> ExportPlan {
        plan_export(&self.install(), "researcher").expect("plans")
    }
}

fn provenance() -> Provenance {
    Provenance {
        zeroclaw_version: "0.8.4".into(),
        exported_at: "2026-09-04T10:11:12.345678+00:00".into(),
    }
}

fn all_carried(plan: &ExportPlan) -> CaptureOutcome {
    CaptureOutcome {
        carried_skill_bundles: plan.skills.iter().map(|s| s.alias.clone()).collect(),
        missing_skill_bundles: Vec::new(),
        identity_document_carried: true,
        excluded: Vec::new(),
    }
}

fn render(plan: &ExportPlan) -> RenderedBundle {
    render_with(plan, &all_carried(plan))
}

fn render_with(plan: &ExportPlan, outcome: &CaptureOutcome) -> RenderedBundle {
    let bundle = plan.render(outcome, &provenance()).expect("renders");
    for secret in SECRETS {
        assert!(
            !bundle.config_toml.contains(secret),
            "{secret} leaked into config.toml"
        );
        assert!(
            !bundle.manifest_toml.contains(secret),
            "{secret} leaked into the manifest"
        );
    }
    bundle
}

fn reparse(text: &str) -> Table {
    let doc: DocumentMut = text.parse().expect("rendered text re-parses");
    Table::from_toml_edit(doc.as_table())
}

fn get<'t>(t: &'t Table, path: &[&str]) -> Option<&'t Node> {
    t.lookup(path)
}

fn s(v: &str) -> Node {
    Node::Str(v.to_string())
}

fn dropped(list: &[Dropped]) -> Vec<(String, &'static str)> {
    list.iter()
        .map(|d| (d.path.clone(), d.reason.as_str()))
        .collect()
}

fn flags(list: &[RiskFlag]) -> Vec<(&'static str, String)> {
    list.iter()
        .map(|f| (f.kind.as_str(), f.path.clone()))
        .collect()
}

fn pairs(items: &[(&str, &'static str)]) -> Vec<(String, &'static str)> {
    items.iter().map(|(p, r)| (p.to_string(), *r)).collect()
}

fn server_names(closure: &Table) -> Vec<String> {
    get(closure, &["mcp", "servers"])
        .and_then(Node::as_array)
        .map(|servers| {
            servers
                .iter()
                .filter_map(|s| s.as_table()?.get("name")?.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

const MEMORY_DROPS: [(&str, &str); 2] = [
    ("workspace/memory", "not_yet_portable"),
    ("workspace/MEMORY_SNAPSHOT.md", "private_data"),
];

// ---- exact shape of the base fixture --------------------------------------------------------

#[test]
fn base_fixture_renders_the_exact_closure() {
    let plan = Fx::base().plan();
    let bundle = render(&plan);
    let expected = format!(
        "{CONFIG_HEADER}{}",
        r#"[agents.researcher]
model_provider = "anthropic.main"
risk_profile = "guarded"
mcp_bundles = ["research"]
delegate_same_risk_profile = false

[risk_profiles.guarded]

[mcp_bundles.research]
servers = [
    "github",
    "search",
]
exclude = ["search"]

[[mcp.servers]]
name = "github"
command = "npx"
args = [
    "-y",
    "@modelcontextprotocol/server-github",
]

[mcp.servers.env]
GITHUB_TOKEN = ""

[providers.models.anthropic.main]
api_key = ""
model = "claude-opus-5"
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
    let expected_start = "format_version = 1\nroot_agent = \"researcher\"\nrequired_secrets = [\n    \"mcp.servers.github.env.GITHUB_TOKEN\",\n    \"providers.models.anthropic.main.api_key\",\n]\nskill_bundles = []\n\n[provenance]\nzeroclaw_version = \"0.8.4\"\nexported_at = \"2026-09-04T10:11:12.345678+00:00\"\n\n[[dropped]]\npath = \"agents.researcher.channels\"\nreason = \"host_specific\"\n";
    assert!(body.starts_with(expected_start), "{body}");
    assert!(
        body.contains(
            "\n\n[[risk_flags]]\nkind = \"process_spawn\"\npath = \"mcp.servers.github.command\"\n"
        ),
        "{body}"
    );
}

// ---- §12.2 cases ------------------------------------------------------------------------------

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
    assert_eq!(server_names(&Fx::base().plan().closure), ["github"]);
}

#[test]
fn case03_duplicate_server_names_collapse_to_the_first() {
    let mut fx = Fx::base();
    fx.append(
        "[[mcp.servers]]\nname = \"github\"\ncommand = \"impostor\"\n[mcp.servers.env]\nGITHUB_TOKEN = \"ghp_theotherone\"\n",
    );
    let plan = fx.plan();
    assert_eq!(server_names(&plan.closure), ["github"]);
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
    assert_eq!(server_names(&plan.closure), ["github"]);
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("search.example.com"));
    assert!(!bundle.manifest_toml.contains("search.example.com"));
}

#[test]
fn case05_no_secret_text_in_the_rendered_config() {
    for fx in [Fx::base(), Fx::loaded()] {
        let bundle = render(&fx.plan());
        for secret in ["ghp_realsecretvalue", "sk-ant-realkey", "***MASKED***"] {
            assert!(!bundle.config_toml.contains(secret));
        }
    }
}

#[test]
fn case06_required_secrets_lists_scrubbed_paths() {
    let plan = Fx::loaded().plan();
    assert_eq!(
        plan.required_secrets(),
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "providers.models.anthropic.classifier.api_key",
            "providers.models.anthropic.main.api_key",
            "providers.tts.openai.voice.api_key",
        ]
    );
}

#[test]
fn case07_provider_key_is_blank() {
    let plan = Fx::base().plan();
    assert_eq!(
        get(
            &plan.closure,
            &["providers", "models", "anthropic", "main", "api_key"]
        ),
        Some(&s(""))
    );
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
    let agent = get(&plan.closure, &["agents", "researcher"])
        .and_then(Node::as_table)
        .expect("agent");
    assert!(agent.get("channels").is_none());
    assert!(
        agent.get("workspace").is_none(),
        "nothing left of workspace: {agent:?}"
    );
    assert_eq!(
        dropped(plan.dropped()),
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
    let agent = get(&plan.closure, &["agents", "researcher"])
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
fn case10_memory_entries_always_listed() {
    for fx in [Fx::base(), Fx::loaded()] {
        let bundle = render(&fx.plan());
        let list = dropped(&bundle.manifest.dropped);
        assert_eq!(&list[list.len() - 2..], pairs(&MEMORY_DROPS).as_slice());
    }
}

// case 11 is layout::tests::workspace_filter_leaves_memory_behind

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
    // spelling every default out raises nothing, and a risk profile is never pruned: every key
    // of it bounds the agent (issue: an explicit `[]` pruned away read back as the real default)
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
        let source = get(&fx.install().config, &["risk_profiles", profile]).cloned();
        assert_eq!(
            get(&plan.closure, &["risk_profiles", profile]),
            source.as_ref(),
            "{profile} carried whole"
        );
    }
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

#[test]
fn case18_tts_provider_carried() {
    let mut fx = Fx::base();
    fx.append("[providers.tts.openai.voice]\napi_key = \"tts-secret-value\"\nvoice = \"alloy\"\n");
    fx.set(
        &["agents", "researcher", "tts_provider"],
        r#""openai.voice""#,
    );
    let plan = fx.plan();
    assert!(get(&plan.closure, &["providers", "tts", "openai", "voice"]).is_some());
    assert!(get(&plan.closure, &["providers", "models", "anthropic", "main"]).is_some());
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
    assert!(get(&plan.closure, &["providers", "models", "openai", "backup"]).is_some());
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
    let edge = plan
        .dropped()
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
    let models = get(&plan.closure, &["providers", "models"])
        .and_then(Node::as_table)
        .expect("models");
    let carried: Vec<String> = models
        .iter()
        .flat_map(|(f, e)| {
            e.as_table()
                .into_iter()
                .flat_map(move |e| e.keys().map(move |a| format!("{f}.{a}")))
        })
        .collect();
    // main (0) -> a (1) -> b (2) -> c (3); d would be depth 4
    assert_eq!(
        carried,
        ["anthropic.main", "openai.a", "openai.b", "openai.c"]
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
    // the ambiguous bare `dup` and the unknown `ghost` do not resolve
    assert_eq!(
        get(models, &["anthropic", "main", "fallback"]),
        Some(&Node::Array(vec![s("openai.a")]))
    );
    let edges: Vec<&str> = plan
        .dropped()
        .iter()
        .filter(|d| d.reason == DropReason::SourceMissing)
        .map(|d| d.path.as_str())
        .collect();
    assert_eq!(
        edges,
        [
            "providers.models.anthropic.main.fallback[1]",
            "providers.models.anthropic.main.fallback[2]"
        ]
    );
    render(&plan);
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
        assert_eq!(agents.keys().collect::<Vec<_>>(), ["researcher"]);
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
fn loaded_fixture_exact_outcome() {
    let plan = Fx::loaded().plan();
    assert!(
        plan.skills.is_empty(),
        "outside-install directory plans no content"
    );
    assert_eq!(plan.identity_document(), None);
    assert_eq!(
        dropped(plan.dropped()),
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
    let top: Vec<&str> = reparsed.keys().collect();
    assert_eq!(
        top,
        [
            "agents",
            "risk_profiles",
            "runtime_profiles",
            "skill_bundles",
            "knowledge_bundles",
            "mcp_bundles",
            "mcp",
            "providers"
        ]
    );
    let models: Vec<&str> = get(&reparsed, &["providers", "models", "anthropic"])
        .and_then(Node::as_table)
        .expect("anthropic")
        .keys()
        .collect();
    assert_eq!(models, ["main", "classifier", "summarizer"]);
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
        &plan.closure,
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
            &plan.closure,
            &["agents", "researcher", "delegate_same_risk_profile"]
        ),
        Some(&Node::Bool(false))
    );
}

fn assert_identity_dropped(raw: &str) -> Dropped {
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "identity", "aieos_path"],
        &toml_string(raw),
    );
    let plan = fx.plan();
    assert_eq!(plan.identity_document(), None, "{raw:?}");
    assert!(get(
        &plan.closure,
        &["agents", "researcher", "identity", "aieos_path"]
    )
    .is_none());
    let entry = plan
        .dropped()
        .iter()
        .find(|d| d.path == "agents.researcher.identity.aieos_path")
        .unwrap_or_else(|| panic!("{raw:?} not dropped"))
        .clone();
    assert_eq!(entry.reason, DropReason::HostSpecific);
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("aieos_path"), "{raw:?}");
    assert!(!bundle.config_toml.contains("outside.json"));
    entry
}

fn toml_string(raw: &str) -> String {
    toml_edit::Value::from(raw).to_string()
}

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
            &plan.closure,
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
    assert!(!bundle.config_toml.contains("[agents.researcher.identity]"));
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

fn with_skill_bundle(alias: &str, entry: &[(&str, &str)]) -> Fx {
    let mut fx = Fx::base();
    fx.table(&["skill_bundles", alias]);
    for (key, value) in entry {
        fx.set(&["skill_bundles", alias, key], value);
    }
    fx.set(
        &["agents", "researcher", "skill_bundles"],
        &format!("[{}]", toml_string(alias)),
    );
    fx
}

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
        let entry = plan
            .dropped()
            .iter()
            .find(|d| d.path == format!("skill_bundles.{alias}"))
            .unwrap_or_else(|| panic!("{alias:?} not dropped"));
        assert_eq!(entry.reason, DropReason::HostSpecific);
        assert!(entry.detail.starts_with("the skill-bundle alias "));
        // the config entry still travels
        assert!(get(&plan.closure, &["skill_bundles", alias]).is_some());
    }
    // a name every target can create renders; one whose default directory escapes shared/ does not
    render(&with_skill_bundle("con", &[]).plan());
    let plan = with_skill_bundle("../../outside", &[]).plan();
    let err = plan
        .render(&CaptureOutcome::default(), &provenance())
        .expect_err("escapes shared/");
    assert!(
        err.to_string()
            .contains("skill_bundles.../../outside.directory"),
        "{err}"
    );
}

// case 38 is names::tests (refused_vectors_are_refused, accepted_vectors_are_accepted)

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

#[test]
fn case40_directory_outside_the_install() {
    let plan = with_skill_bundle(
        "research_tools",
        &[("directory", r#""/srv/zeroclaw/shared/skills/pool""#)],
    )
    .plan();
    assert!(plan.skills.is_empty());
    assert!(get(
        &plan.closure,
        &["skill_bundles", "research_tools", "directory"]
    )
    .is_none());
    let list = dropped(plan.dropped());
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
        dropped(plan.dropped())[2],
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
        &plan.closure,
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
            &plan.closure,
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
            &plan.closure,
            &["skill_bundles", "research_tools", "directory"]
        ),
        Some(&s("shared/skills/pool/research"))
    );
    render(&plan);
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

// case 45 is schema::tests::find_ciphertext_names_the_path

#[test]
fn case46_dedup() {
    let items = ["a", " a ", "", "b"].map(String::from);
    assert_eq!(super::plan::dedup(&items), ["a", "b"]);
}

// ---- SPEC rules beyond ZeroClaw's own cases --------------------------------------------------

#[test]
fn encrypted_and_referenced_secrets_are_blanked() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "api_key"],
        r#""enc2:cafebabe0123""#,
    );
    fx.set(
        &["providers", "models", "anthropic", "main", "extra_headers"],
        r#"{ X-Token = "op://vault/item/token" }"#,
    );
    let plan = fx.plan();
    assert_eq!(
        plan.required_secrets(),
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "providers.models.anthropic.main.api_key",
            "providers.models.anthropic.main.extra_headers.X-Token",
        ]
    );
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("cafebabe"));
    assert!(!bundle.config_toml.contains("op://"));
    assert!(bundle.config_toml.contains("X-Token = \"\""));
}

#[test]
fn ciphertext_outside_a_secret_field_aborts() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "model"],
        r#""enc:0123abcd""#,
    );
    let err = plan_export(&fx.install(), "researcher").expect_err("ciphertext survives");
    match &err {
        AgentError::CiphertextSurvived { path } => {
            assert_eq!(path, "providers.models.anthropic.main.model")
        }
        other => panic!("unexpected {other:?}"),
    }
    // in an mcp server argument too
    let mut fx = Fx::base();
    let servers = fx.doc["mcp"]["servers"]
        .as_array_of_tables_mut()
        .expect("servers");
    servers.iter_mut().next().expect("github")["args"] =
        toml_edit::value(toml_edit::Array::from_iter(["--token", "enc2:ffff"]));
    let err = plan_export(&fx.install(), "researcher").expect_err("ciphertext survives");
    assert!(
        err.to_string().contains("mcp.servers.github.args.1"),
        "{err}"
    );
}

#[test]
fn empty_secrets_are_not_required() {
    let mut fx = Fx::base();
    fx.set(
        &["providers", "models", "anthropic", "main", "api_key"],
        r#""""#,
    );
    let plan = fx.plan();
    assert_eq!(
        plan.required_secrets(),
        ["mcp.servers.github.env.GITHUB_TOKEN"]
    );
}

#[test]
fn transcription_and_http_server_secrets_are_scrubbed() {
    let mut fx = Fx::base();
    fx.append(
        "[providers.transcription.local_whisper.local]\nbearer_token = \"whisper-bearer-secret\"\nuri = \"http://localhost:9000\"\n[mcp_bundles.web]\nservers = [\"search\"]\n",
    );
    fx.set(
        &["agents", "researcher", "transcription_provider"],
        r#""local_whisper.local""#,
    )
    .set(
        &["agents", "researcher", "mcp_bundles"],
        r#"["research", "web"]"#,
    )
    .set(&["mcp_bundles", "research", "exclude"], "[]");
    let plan = fx.plan();
    assert_eq!(server_names(&plan.closure), ["github", "search"]);
    assert_eq!(
        plan.required_secrets(),
        [
            "mcp.servers.github.env.GITHUB_TOKEN",
            "mcp.servers.search.headers.Authorization",
            "providers.models.anthropic.main.api_key",
            "providers.transcription.local_whisper.local.bearer_token",
        ]
    );
    let bundle = render(&plan);
    assert!(!bundle.config_toml.contains("whisper-bearer-secret"));
    // the http server's url is not a secret and travels, as the header warns
    assert!(bundle
        .config_toml
        .contains("url = \"https://search.example.com/mcp\""));
    assert!(bundle.config_toml.contains("transport = \"http\""));
    // only the stdio server spawns a process
    assert_eq!(
        flags(&bundle.manifest.risk_flags),
        [("process_spawn", "mcp.servers.github.command".to_string())]
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
    let main = get(&plan.closure, &["providers", "models", "anthropic", "main"])
        .and_then(Node::as_table)
        .expect("main");
    assert_eq!(
        main.keys().collect::<Vec<_>>(),
        ["api_key", "model", "uri", "temperature", "extra_headers"]
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

#[test]
fn json_report_uses_wire_strings() {
    let bundle = render(&Fx::base().plan());
    let json = serde_json::to_value(&bundle.manifest).expect("serializes");
    assert_eq!(json["dropped"][0]["reason"], "host_specific");
    assert_eq!(json["risk_flags"][0]["kind"], "process_spawn");
    assert_eq!(json["root_agent"], "researcher");
}
