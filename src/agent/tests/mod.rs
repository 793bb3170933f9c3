//! The planner cases of reference §12.2 against the fixtures of §12.1, built in code. Each test
//! names its case number. Assertions are exact where the contract is exact (closure contents,
//! dropped and risk-flag lists, secret paths), and every test that renders also checks that the
//! fixture's distinctive secret strings appear nowhere in either rendered file.

use std::path::{Path, PathBuf};

use toml_edit::DocumentMut;

use super::value::{Node, Table};
use super::*;

mod bundle;
mod flags;
mod names;
mod plan;
mod render;
mod schema;

// case 11 is layout::tests::workspace_filter_leaves_memory_behind

// case 38 is names::tests (refused_vectors_are_refused, accepted_vectors_are_accepted)

// case 45 is schema::tests::find_ciphertext_names_the_path

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

    #[allow(dead_code)]
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

fn assert_identity_dropped(raw: &str) -> Dropped {
    let mut fx = Fx::base();
    fx.set(
        &["agents", "researcher", "identity", "aieos_path"],
        &toml_string(raw),
    );
    let plan = fx.plan();
    assert_eq!(plan.identity_document(), None, "{raw:?}");
    assert!(get(
        plan.closure(),
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
