//! Exports of installs built from ZeroClaw's own material (`tests/zeroclaw/`, copied from
//! zeroclaw-labs/zeroclaw at 15d28660, see ORIGIN.md), with a distinct fake secret planted in
//! every field the real schema marks `#[secret]` that the closure can reach. Pins: no planted
//! value reaches a bundle file, a store file (objects or catalog), stdout or stderr; every
//! scrubbed field is listed in `required_secrets`; an `enc2:` install exports; pruning never
//! changes what the fragment means against ZeroClaw's real defaults; schema versions are
//! checked; provider processes raise flags; credential-looking values are reported by location
//! without their value; `--exclude` drops a file and records it.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};

use crate::util::{contains, files_under, write, TestEnv};

const TEMPLATE: &str = include_str!("../zeroclaw/dev-config.template.toml");
const HARNESS: &str = include_str!("../zeroclaw/dev-config.harness-test.toml");
const GROK_CLI: &str = include_str!("../zeroclaw/docs-providers-catalog-grok-cli.toml");
const MULTI_MODEL: &str = include_str!("../zeroclaw/docs-getting-started-multi-model-setup.toml");
const MCP: &str = include_str!("../zeroclaw/docs-tools-mcp.toml");
const V1: &str = include_str!("../zeroclaw/config-fixtures-v1.toml");

/// (fixture file, text, agents to export)
pub(crate) const FIXTURES: &[(&str, &str, &[&str])] = &[
    ("dev-config.template.toml", TEMPLATE, &["default"]),
    ("dev-config.harness-test.toml", HARNESS, &["default"]),
    (
        "docs-providers-catalog-grok-cli.toml",
        GROK_CLI,
        &["default", "dependabot"],
    ),
    (
        "docs-getting-started-multi-model-setup.toml",
        MULTI_MODEL,
        &["local"],
    ),
    ("docs-tools-mcp.toml", MCP, &["assistant"]),
];

/// An install built from a real config with secrets planted; `planted` maps each planted value
/// to the dotted config path that holds it.
pub(crate) struct Planted {
    pub(crate) root: PathBuf,
    planted: BTreeMap<String, String>,
}

fn table_mut<'d>(doc: &'d mut DocumentMut, path: &[&str]) -> &'d mut Table {
    let mut t = doc.as_table_mut();
    for key in path {
        let entry = t.entry(key).or_insert_with(|| {
            let mut new = Table::new();
            new.set_implicit(true);
            Item::Table(new)
        });
        t = entry.as_table_mut().expect("a table on the way");
    }
    t
}

/// Plant `value` at `table.key`, remembering its dotted path.
fn plant(
    planted: &mut BTreeMap<String, String>,
    table: &mut Table,
    path: &str,
    key: &str,
    secret: String,
) {
    table.insert(key, value(secret.clone()));
    planted.insert(secret, format!("{path}.{key}"));
}

/// Plant every `#[secret]` field of a model provider entry of `family` (the schema's table at
/// 15d28660: api_key and extra_headers on every family; qwen/minimax oauth_refresh_token;
/// gemini oauth_client_id/secret).
fn plant_model_provider(
    planted: &mut BTreeMap<String, String>,
    doc: &mut DocumentMut,
    family: &str,
    alias: &str,
    tag: &str,
) {
    let path = format!("providers.models.{family}.{alias}");
    let t = table_mut(doc, &["providers", "models", family, alias]);
    plant(
        planted,
        t,
        &path,
        "api_key",
        format!("PLANTED-{tag}-api-key"),
    );
    let mut headers = InlineTable::new();
    let header = format!("PLANTED-{tag}-header");
    headers.insert("Authorization", header.clone().into());
    t.insert("extra_headers", value(headers));
    planted.insert(header, format!("{path}.extra_headers.Authorization"));
    match family {
        "qwen" | "minimax" => plant(
            planted,
            t,
            &path,
            "oauth_refresh_token",
            format!("op://vault/PLANTED-{tag}-refresh"),
        ),
        "gemini" => {
            plant(
                planted,
                t,
                &path,
                "oauth_client_id",
                format!("PLANTED-{tag}-client-id"),
            );
            // What an encrypted install holds (`secrets.encrypt` defaults to true).
            plant(
                planted,
                t,
                &path,
                "oauth_client_secret",
                format!("enc2:PLANTED-{tag}-client-secret"),
            );
        }
        _ => {}
    }
}

pub(crate) fn build(env: &TestEnv, name: &str, text: &str, agents: &[&str]) -> Planted {
    let mut doc: DocumentMut = text.parse().expect("the real config parses");
    if !doc.contains_key("schema_version") {
        // The docs snippets are fragments of a v3 config (ORIGIN.md).
        doc.insert("schema_version", value(3));
    }
    let root = env.path(&format!("install-{name}"));
    let mut planted = BTreeMap::new();
    // Every provider the fixture configures.
    let families: Vec<(String, Vec<String>)> = doc
        .get("providers")
        .and_then(|p| p.get("models"))
        .and_then(Item::as_table_like)
        .map(|models| {
            models
                .iter()
                .map(|(family, aliases)| {
                    let aliases = aliases
                        .as_table_like()
                        .map(|a| a.iter().map(|(k, _)| k.to_string()).collect())
                        .unwrap_or_default();
                    (family.to_string(), aliases)
                })
                .collect()
        })
        .unwrap_or_default();
    for (family, aliases) in &families {
        for alias in aliases {
            plant_model_provider(
                &mut planted,
                &mut doc,
                family,
                alias,
                &format!("{family}-{alias}"),
            );
        }
    }
    // The family-specific secret fields, reached through a fallback chain from a summary
    // provider, plus a TTS provider that spawns a process and a local whisper endpoint.
    for family in ["qwen", "minimax", "gemini"] {
        plant_model_provider(&mut planted, &mut doc, family, "planted", family);
        table_mut(&mut doc, &["providers", "models", family, "planted"])
            .insert("model", value(format!("{family}-model")));
    }
    let mut chain = Array::new();
    chain.push("minimax.planted");
    chain.push("gemini.planted");
    table_mut(&mut doc, &["providers", "models", "qwen", "planted"])
        .insert("fallback", value(chain));
    let tts = table_mut(&mut doc, &["providers", "tts", "edge", "planted"]);
    plant(
        &mut planted,
        tts,
        "providers.tts.edge.planted",
        "api_key",
        "PLANTED-tts-key".into(),
    );
    let stt = table_mut(
        &mut doc,
        &["providers", "transcription", "local_whisper", "planted"],
    );
    stt.insert("uri", value("http://127.0.0.1:9000/v1/audio"));
    plant(
        &mut planted,
        stt,
        "providers.transcription.local_whisper.planted",
        "bearer_token",
        "PLANTED-whisper-bearer".into(),
    );
    // MCP servers: every env and header value is a secret.
    if let Some(servers) = doc
        .get_mut("mcp")
        .and_then(|m| m.get_mut("servers"))
        .and_then(Item::as_array_of_tables_mut)
    {
        for server in servers.iter_mut() {
            let name = server
                .get("name")
                .and_then(Item::as_str)
                .unwrap_or("?")
                .to_string();
            let mut env_map = InlineTable::new();
            let secret = format!("PLANTED-mcp-{name}-env");
            env_map.insert("API_TOKEN", secret.clone().into());
            server.insert("env", value(env_map));
            planted.insert(secret, format!("mcp.servers.{name}.env.API_TOKEN"));
        }
    }
    for agent in agents {
        let a = table_mut(&mut doc, &["agents", agent]);
        // The docs snippets leave out bindings ZeroClaw's validation requires of an enabled
        // agent (they show one feature each); fill the missing ones, never the present ones.
        let mut needs_profile = false;
        if !a.contains_key("model_provider") {
            a.insert("model_provider", value("qwen.planted"));
        }
        if !a.contains_key("risk_profile") {
            a.insert("risk_profile", value("test_filled"));
            needs_profile = true;
        }
        if needs_profile {
            table_mut(&mut doc, &["risk_profiles", "test_filled"])
                .insert("level", value("supervised"));
        }
        let a = table_mut(&mut doc, &["agents", agent]);
        if !a.contains_key("summary_provider") {
            a.insert("summary_provider", value("qwen.planted"));
        }
        a.insert("tts_provider", value("edge.planted"));
        a.insert("transcription_provider", value("local_whisper.planted"));
        let ws = root.join("ws").join(agent);
        table_mut(&mut doc, &["agents", agent, "workspace"])
            .insert("path", value(ws.to_string_lossy().into_owned()));
        write(&ws.join("IDENTITY.md"), format!("# {agent}\n").as_bytes());
        write(
            &ws.join("USER.md"),
            b"The operator lives at 1 Example Street.\n",
        );
        write(&ws.join("memory/brain.db"), b"SQLite format 3\0memory");
    }
    write(&root.join("config.toml"), doc.to_string().as_bytes());
    Planted { root, planted }
}

fn export(
    env: &TestEnv,
    install: &Path,
    agent: &str,
    out: &Path,
    extra: &[&str],
) -> crate::util::Run {
    let mut args = vec![
        "--json".to_string(),
        "export".into(),
        agent.into(),
        "--install".into(),
        install.to_string_lossy().into_owned(),
        "--out".into(),
        out.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    env.run(&args)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|s| s.as_str().expect("a string").to_string())
        .collect()
}

#[test]
fn real_configs_with_every_secret_planted_leak_nothing_and_list_every_secret() {
    let env = TestEnv::new();
    let mut exports = 0;
    for (name, text, agents) in FIXTURES {
        let install = build(&env, name, text, agents);
        for agent in *agents {
            let out = env.path(&format!("out-{name}-{agent}"));
            let run = export(&env, &install.root, agent, &out, &[]);
            let run = run.ok();
            exports += 1;
            let report = run.json();
            let required = strings(&report["required_secrets"]);
            // Every planted field is a schema secret: the schema table, not the name-based
            // defence in depth, must be what scrubbed it.
            assert_eq!(
                report["scrubbed_by_name"],
                json!([]),
                "{name} agent {agent}: a schema secret was left to the name rule"
            );
            // The grants diff recomputes from config.toml agree with the manifest the export
            // wrote: a bundle against itself is equal, with no "unlisted" grant.
            let same = env.run(&["diff", &out.to_string_lossy(), &out.to_string_lossy()]);
            assert_eq!(same.code(), 0, "{name} agent {agent}: {}", same.describe());
            let bundle_config: DocumentMut = fs::read_to_string(out.join("config.toml"))
                .expect("config.toml")
                .parse()
                .expect("config.toml parses");
            // Nothing planted anywhere: bundle, store (objects and catalog), stdout, stderr.
            let mut haystacks = files_under(&out);
            haystacks.extend(files_under(&env.path("store")));
            haystacks.push(("stdout".into(), run.stdout().into_bytes()));
            haystacks.push(("stderr".into(), run.stderr().into_bytes()));
            for (secret, path) in &install.planted {
                for (file, bytes) in &haystacks {
                    assert!(
                        !contains(bytes, secret.as_bytes()),
                        "{name} agent {agent}: planted {path} leaked into {file}"
                    );
                }
                // A carried provider or server lists every secret field it held.
                let carried = path_is_carried(&bundle_config, path);
                assert_eq!(
                    required.contains(path),
                    carried,
                    "{name} agent {agent}: {path} carried={carried}, required_secrets={required:?}"
                );
            }
            for must in [
                "providers.models.qwen.planted.oauth_refresh_token",
                "providers.models.minimax.planted.oauth_refresh_token",
                "providers.models.gemini.planted.oauth_client_id",
                "providers.models.gemini.planted.oauth_client_secret",
                "providers.tts.edge.planted.api_key",
                "providers.transcription.local_whisper.planted.bearer_token",
            ] {
                assert!(
                    required.iter().any(|r| r == must),
                    "{name}/{agent}: {must} not listed"
                );
            }
            // Personal files are pointed out; memory never travels.
            assert_eq!(report["personal_files"], json!(["workspace/USER.md"]));
            assert!(out.join("workspace/USER.md").exists());
            assert!(!out.join("workspace/memory").exists());
        }
    }
    assert_eq!(exports, 6);
}

/// Whether the table holding dotted `path` (its provider entry or MCP server) is in the bundle.
fn path_is_carried(bundle: &DocumentMut, path: &str) -> bool {
    let parts: Vec<&str> = path.split('.').collect();
    if parts[0] == "mcp" {
        let name = parts[2];
        return bundle
            .get("mcp")
            .and_then(|m| m.get("servers"))
            .and_then(Item::as_array_of_tables)
            .is_some_and(|servers| {
                servers
                    .iter()
                    .any(|s| s.get("name").and_then(Item::as_str) == Some(name))
            });
    }
    let mut item = bundle.as_item();
    for key in &parts[..4] {
        match item.get(key) {
            Some(next) => item = next,
            None => return false,
        }
    }
    true
}

#[test]
fn explicit_empty_allowlists_are_kept_and_read_back_empty() {
    let env = TestEnv::new();
    let text = format!(
        "{HARNESS}\n[risk_profiles.locked]\nallowed_commands = []\nforbidden_paths = []\nauto_approve = []\n"
    );
    let text = text.replace("risk_profile = \"default\"", "risk_profile = \"locked\"");
    let install = build(&env, "locked", &text, &["default"]);
    let out = env.path("out");
    export(&env, &install.root, "default", &out, &[]).ok();
    let config: DocumentMut = fs::read_to_string(out.join("config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let locked = &config["risk_profiles"]["locked"];
    for key in ["allowed_commands", "forbidden_paths", "auto_approve"] {
        assert_eq!(
            locked.get(key).and_then(Item::as_array).map(Array::len),
            Some(0),
            "{key} must travel as an explicit empty list: {config}"
        );
    }
}

#[test]
fn schema_versions_are_checked_by_name() {
    let env = TestEnv::new();
    // v1 (with and without the key) and v2 are migrated in memory by ZeroClaw's own migration
    // and export (the oracle test compares them with ZeroClaw's export); a newer one is refused.
    for (name, text, agent) in [
        ("v1", V1, "simple_agent"),
        (
            "v2",
            &HARNESS.replace("schema_version = 3", "schema_version = 2"),
            "default",
        ),
    ] {
        let root = env.path(&format!("install-{name}"));
        write(&root.join("config.toml"), text.as_bytes());
        export(&env, &root, agent, &env.path(&format!("out-{name}")), &[]).ok();
    }
    let root = env.path("install-v4");
    write(
        &root.join("config.toml"),
        HARNESS
            .replace("schema_version = 3", "schema_version = 4")
            .as_bytes(),
    );
    export(&env, &root, "default", &env.path("out-v4"), &[])
        .fails(1, "schema_version 4, newer than schema version 3");
    assert!(!env.path("out-v4").exists());
}

#[test]
fn grok_cli_provider_raises_process_and_env_flags() {
    let env = TestEnv::new();
    let install = build(&env, "grok", GROK_CLI, &["dependabot"]);
    let out = env.path("out");
    let report = export(&env, &install.root, "dependabot", &out, &[])
        .ok()
        .json();
    let flags: Vec<(String, String, String)> = report["risk_flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["path"].as_str().unwrap().to_string(),
                f["detail"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let spawn = flags
        .iter()
        .find(|f| f.0 == "process_spawn" && f.1 == "providers.models.grok_cli.ops.binary_path")
        .unwrap_or_else(|| panic!("no process_spawn flag: {flags:?}"));
    assert!(
        spawn
            .2
            .contains("/home/you/.grok/bin/grok --tools=Read,Grep"),
        "{spawn:?}"
    );
    assert!(
        spawn.2.contains("/path/to/agents/ops/workspace"),
        "{spawn:?}"
    );
    let env_flag = flags
        .iter()
        .find(|f| {
            f.0 == "env_passthrough" && f.1 == "providers.models.grok_cli.ops.env_passthrough"
        })
        .unwrap_or_else(|| panic!("no env_passthrough flag: {flags:?}"));
    assert!(
        env_flag
            .2
            .contains("AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY"),
        "{env_flag:?}"
    );
    // The planted edge TTS provider spawns edge-tts too.
    assert!(flags
        .iter()
        .any(|f| f.0 == "process_spawn" && f.1 == "providers.tts.edge.planted"));
    let manifest = fs::read_to_string(out.join("zeroclaw-agent.toml")).unwrap();
    assert!(
        manifest.contains("providers.models.grok_cli.ops.env_passthrough"),
        "{manifest}"
    );
}

#[test]
fn credential_looking_values_are_reported_by_location_never_by_value() {
    let env = TestEnv::new();
    let text = format!(
        "{MCP}\n[knowledge_bundles.docs]\nsources = [\"https://kb.example.com/export?format=md&token=KB-QUERY-TOKEN-123\"]\n"
    )
    .replace(
        "mcp_bundles = [\"files\"]",
        "mcp_bundles = [\"files\", \"remote\"]\nknowledge_bundles = [\"docs\"]",
    )
    .replace(
        "[mcp_bundles.files]",
        "[[mcp.servers]]\nname = \"remote\"\ntransport = \"http\"\nurl = \"https://user:URL-USERINFO-PASS@mcp.example.com/mcp\"\n\n[[mcp.servers]]\nname = \"cli\"\ncommand = \"curl\"\nargs = [\"-H\", \"Authorization: Bearer ARGS-BEARER-TOKEN-456\"]\n\n[mcp_bundles.remote]\nservers = [\"remote\", \"cli\"]\n\n[mcp_bundles.files]",
    );
    let install = build(&env, "creds", &text, &["assistant"]);
    write(
        &install.root.join("ws/assistant/notes/deploy.md"),
        b"# deploy\n\nclone https://ci:FILE-USERINFO-PASS@git.example.com/app.git\n",
    );
    let out = env.path("out");
    let run = export(&env, &install.root, "assistant", &out, &[]).ok();
    let report = run.json();
    let found: Vec<(String, String)> = report["credential_looking_values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["location"].as_str().unwrap().to_string(),
                f["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for want in [
        ("knowledge_bundles.docs.sources.0", "URL query token"),
        ("mcp.servers.remote.url", "URL userinfo"),
        ("mcp.servers.cli.args.1", "bearer token"),
        ("workspace/notes/deploy.md:3", "URL userinfo"),
    ] {
        assert!(
            found.iter().any(|(l, r)| l == want.0 && r == want.1),
            "{want:?} not in {found:?}"
        );
    }
    // A re-export reads each unchanged file's findings from the store's verdicts (never the
    // values), and finds the same; so does one whose verdicts file is gone.
    let verdicts = || -> Vec<PathBuf> {
        fs::read_dir(env.store.join("dircache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("verdicts-")
            })
            .collect()
    };
    assert_eq!(verdicts().len(), 1);
    let again = export(&env, &install.root, "assistant", &out, &["--force"]).ok();
    assert_eq!(
        again.json()["credential_looking_values"],
        report["credential_looking_values"]
    );
    let file = fs::read(&verdicts()[0]).unwrap();
    assert!(
        !contains(&file, b"FILE-USERINFO-PASS"),
        "a verdict holds no value"
    );
    fs::remove_file(&verdicts()[0]).unwrap();
    let third = export(&env, &install.root, "assistant", &out, &["--force"]).ok();
    assert_eq!(
        third.json()["credential_looking_values"],
        report["credential_looking_values"]
    );
    // The values travel (by design of format 1) but are never printed.
    let text_run = env.run(&[
        "export",
        "assistant",
        "--install",
        &install.root.to_string_lossy(),
        "--out",
        &env.path("out2").to_string_lossy(),
    ]);
    let text_run = text_run.ok();
    assert!(text_run
        .stdout()
        .contains("Values that look like credentials (they travel as written):"));
    assert!(text_run
        .stdout()
        .contains("mcp.servers.remote.url: URL userinfo"));
    for secret in [
        "KB-QUERY-TOKEN-123",
        "URL-USERINFO-PASS",
        "ARGS-BEARER-TOKEN-456",
        "FILE-USERINFO-PASS",
    ] {
        for r in [&run, &text_run] {
            assert!(
                !r.stdout().contains(secret) && !r.stderr().contains(secret),
                "{secret} printed"
            );
        }
    }
}

#[test]
fn exclude_drops_a_file_and_records_it_and_a_typo_fails() {
    let env = TestEnv::new();
    let install = build(&env, "excl", HARNESS, &["default"]);
    write(&install.root.join("ws/default/logs/a/run.log"), b"log");
    let out = env.path("out");
    let report = export(
        &env,
        &install.root,
        "default",
        &out,
        &[
            "--exclude",
            "workspace/USER.md",
            "--exclude",
            "workspace/**/*.log",
        ],
    )
    .ok()
    .json();
    assert!(!out.join("workspace/USER.md").exists());
    assert!(!out.join("workspace/logs/a/run.log").exists());
    assert!(out.join("workspace/IDENTITY.md").exists());
    assert_eq!(report["personal_files"], json!([]));
    let dropped: Vec<(String, String)> = report["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap().into(),
                d["detail"].as_str().unwrap().into(),
            )
        })
        .collect();
    for path in ["workspace/USER.md", "workspace/logs/a/run.log"] {
        let d = dropped
            .iter()
            .find(|d| d.0 == path)
            .unwrap_or_else(|| panic!("{path} not dropped: {dropped:?}"));
        assert!(d.1.contains("--exclude"), "{d:?}");
    }
    let manifest = fs::read_to_string(out.join("zeroclaw-agent.toml")).unwrap();
    assert!(
        manifest.contains("path = \"workspace/USER.md\""),
        "{manifest}"
    );
    // A pattern that matches nothing (a typo) would let the file travel: the export fails and
    // the previous bundle stays.
    export(
        &env,
        &install.root,
        "default",
        &out,
        &["--force", "--exclude", "workspace/USR.md"],
    )
    .fails(1, "--exclude 'workspace/USR.md' matched nothing");
    assert!(!out.join("workspace/USER.md").exists());
    export(
        &env,
        &install.root,
        "default",
        &out,
        &["--force", "--exclude", "/etc/passwd"],
    )
    .fails(1, "is absolute");
    // A whole tree root can be left out too, and is not also reported missing.
    let whole = env.path("whole");
    let report = export(
        &env,
        &install.root,
        "default",
        &whole,
        &["--exclude", "workspace"],
    )
    .ok()
    .json();
    assert!(!whole.join("workspace").exists());
    let dropped = report["dropped"].as_array().unwrap();
    assert_eq!(
        dropped.iter().filter(|d| d["path"] == "workspace").count(),
        1,
        "{dropped:?}"
    );
}

/// `--install` defaults to the install ZeroClaw 0.8.7 itself would load: `$ZEROCLAW_CONFIG_DIR`
/// before `~/.zeroclaw` and before this tool's own `$ZEROCLAW_HOME`; `$ZEROCLAW_DATA_DIR`
/// names the install it belongs to.
#[test]
fn the_default_install_is_the_one_zeroclaw_loads() {
    let env = TestEnv::new();
    let config = |model: &str| {
        format!(
            "schema_version = 3\n[risk_profiles.p]\n[agents.a]\nmodel_provider = \"openai.m\"\n\
             risk_profile = \"p\"\n[providers.models.openai.m]\nmodel = \"{model}\"\n"
        )
    };
    let home = env.path("home");
    write(
        &home.join(".zeroclaw/config.toml"),
        config("from-home").as_bytes(),
    );
    let chosen = env.path("chosen");
    write(
        &chosen.join("config.toml"),
        config("from-config-dir").as_bytes(),
    );
    let other = env.path("other");
    write(
        &other.join("config.toml"),
        config("from-zeroclaw-home").as_bytes(),
    );
    let model_of = |vars: &[(&str, &str)], out: &str| {
        let out = env.path(out);
        env.run_with(&["export", "a", "--out", &out.to_string_lossy()], vars)
            .ok();
        fs::read_to_string(out.join("config.toml")).expect("config.toml")
    };
    let home_s = home.to_string_lossy().into_owned();
    let chosen_s = chosen.to_string_lossy().into_owned();
    let other_s = other.to_string_lossy().into_owned();
    assert!(model_of(&[("HOME", &home_s)], "o1").contains("from-home"));
    assert!(model_of(
        &[
            ("HOME", &home_s),
            ("ZEROCLAW_CONFIG_DIR", &chosen_s),
            ("ZEROCLAW_HOME", &other_s)
        ],
        "o2"
    )
    .contains("from-config-dir"));
    // ZEROCLAW_DATA_DIR=<install>/data belongs to <install> when it holds config.toml there.
    let data = chosen.join("data");
    fs::create_dir_all(&data).expect("data dir");
    write(
        &data.join("config.toml"),
        config("from-data-dir").as_bytes(),
    );
    assert!(model_of(
        &[
            ("HOME", &home_s),
            ("ZEROCLAW_DATA_DIR", &data.to_string_lossy())
        ],
        "o3"
    )
    .contains("from-data-dir"));
    assert!(
        model_of(&[("HOME", &home_s), ("ZEROCLAW_HOME", &other_s)], "o4")
            .contains("from-zeroclaw-home")
    );
}

/// A config section ZeroClaw's loader skips is named with the loader's reason, whether it is
/// the agent itself, the whole `agents` table, or a section the agent refers to.
#[test]
fn skipped_sections_are_named_with_the_loaders_reason() {
    let env = TestEnv::new();
    for (name, config, needles) in [
        (
            "agent",
            "schema_version = 3\n[agents]\na = 5\n",
            &[
                "config field agents.a",
                "ZeroClaw's loader skips it",
                "integer `5`",
            ][..],
        ),
        (
            "agents",
            "schema_version = 3\nagents = 5\n",
            &["config field agents must be a table", "integer `5`"][..],
        ),
        (
            "profiles",
            "schema_version = 3\nrisk_profiles = \"x\"\n[agents.a]\nrisk_profile = \"default\"\n",
            &[
                "ZeroClaw's loader skipped invalid config sections: risk_profiles",
                "string \"x\"",
            ][..],
        ),
    ] {
        let root = env.path(&format!("install-{name}"));
        write(&root.join("config.toml"), config.as_bytes());
        let run = export(&env, &root, "a", &env.path(&format!("out-{name}")), &[]);
        assert_eq!(run.code(), 1, "{}", run.describe());
        for needle in needles {
            assert!(
                run.stderr().contains(needle),
                "{name}: {needle}\n{}",
                run.describe()
            );
        }
    }
}
