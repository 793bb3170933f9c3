//! Every bundle our export writes must import. The property, over every install the tests
//! build from ZeroClaw's real material (each file of `tests/zeroclaw/`, see ORIGIN.md: the
//! v3 ones with every reachable secret planted, as `zeroclaw_real::build` does, the pre-v3 ones
//! with the single workspace ZeroClaw's first load splits) and every generated install the
//! oracle uses, for every agent ZeroClaw loads from it:
//!
//! - (a) export, import into a fresh install (ZeroClaw's own setup), fill the credentials the
//!   import lists (as `zeroclaw config set` would), export again: `diff` of the two bundles
//!   finds nothing (the export time is not a change) but the config entries the first export
//!   dropped, which never reach the target so the second export has nothing to drop, and the
//!   manifest file that lists them;
//! - (b) import beside a copy of its own install (a pre-v3 copy migrated first, as
//!   `zeroclaw config migrate` and ZeroClaw's first load do: import refuses an old schema):
//!   every entry collides and is reused (identical, secrets set aside) or namespaced, the agent
//!   always; the merged config loads under ZeroClaw and passes `validate()`, and the imported
//!   agent exports again.
//!
//! A case that cannot round trip is listed in [`CANNOT`] with its reason, and must still fail
//! exactly there. The counts of installs and agents are printed.
//!
//! Also pinned: an MCP bundle that lists a server it (or another bundle of the agent)
//! excludes imports, as ZeroClaw's `validate()` accepts it; a skill bundle whose alias is a
//! Windows device name imports without content, the plan says so, and ZeroClaw's own export of
//! the result means what its export of the source meant.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::import::onboarded;
use crate::oracle::{build_generated, build_v1, zeroclaw_export, zeroclaw_load, V1_INSTALLS};
use crate::util::{copy_tree, write, Run, TestEnv};
use crate::zeroclaw_real::{build, FIXTURES};

/// The real-material files no other test builds an install from; built here as pre-v3
/// installs (neither has a `schema_version`).
const MORE_REAL: &[(&str, &str)] = &[
    (
        "config-fixtures-v1",
        include_str!("../zeroclaw/config-fixtures-v1.toml"),
    ),
    (
        "scripts-rpi-config",
        include_str!("../zeroclaw/scripts-rpi-config.toml"),
    ),
];

/// The steps of one case, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Our export of the agent from its install.
    Export,
    /// (a) Review and `import --dry-run` into the fresh install agree on grants, entries and
    /// secrets.
    Agree,
    /// (a) The import into a fresh install.
    ImportFresh,
    /// (a) The export of the imported agent from the fresh install.
    ExportAgain,
    /// (a) `diff` of the two exports.
    Diff,
    /// (b) The import beside a copy of the install.
    ImportBeside,
    /// (b) ZeroClaw's loader and `validate()` on the merged config.
    LoadBeside,
    /// (b) The export of the imported agent from the copy.
    ExportBeside,
}

/// Cases that cannot round trip: (install, agent, step, what the failure says, why). Each
/// must still fail there, saying that (a fix makes the entry stale and the test says so).
const CANNOT: &[(&str, &str, Step, &str, &str)] = &[
    (
        "docs-providers-catalog-grok-cli.toml",
        "default",
        Step::ImportBeside,
        "the install's own config fails ZeroClaw's validate(): [dangling_reference] \
         agents.default.channels[0]",
        "the docs snippet binds agent `default` to channel `slack.default` and configures no \
         channel, so the install's own config fails validate() and no config merged into it can \
         pass; import refuses to write it (ZeroClaw boots such an install with a warning, but \
         this is the install's error, not the bundle's)",
    ),
    (
        "docs-providers-catalog-grok-cli.toml",
        "dependabot",
        Step::ImportBeside,
        "the install's own config fails ZeroClaw's validate(): [dangling_reference] \
         agents.default.channels[0]",
        "the same install as above: its own agent `default` fails validate()",
    ),
];

/// One install: its name and root, whether it is pre-v3, its agents as ZeroClaw loads them.
struct Case {
    install: String,
    root: PathBuf,
    pre_v3: bool,
    agents: Vec<String>,
}

/// One agent's result: the config drops the round trip explains, or the first step that
/// failed, with what it said.
struct Outcome {
    install: String,
    agent: String,
    result: Result<Vec<String>, (Step, String)>,
}

fn agents_of(root: &Path) -> (bool, Vec<String>) {
    let text = fs::read_to_string(root.join("config.toml")).expect("config.toml");
    let value: toml::Value = toml::from_str(&text).expect("the config parses");
    let version = zeroclaw_config::migration::detect_version(&value).expect("a schema version");
    let config = zeroclaw_load(root, &text);
    let mut agents: Vec<String> = config.agents.keys().cloned().collect();
    agents.sort();
    (
        version < zeroclaw_config::migration::CURRENT_SCHEMA_VERSION,
        agents,
    )
}

/// Every install of the property, built in `env`.
fn cases(env: &TestEnv) -> Vec<Case> {
    let mut roots: Vec<(String, PathBuf)> = Vec::new();
    for (name, text, agents) in FIXTURES {
        roots.push((name.to_string(), build(env, name, text, agents).root));
    }
    for (name, text) in V1_INSTALLS.iter().chain(MORE_REAL) {
        roots.push((name.to_string(), build_v1(env, name, text)));
    }
    roots.push((
        "generated".to_string(),
        build_generated(env, "install-generated"),
    ));
    roots
        .into_iter()
        .map(|(install, root)| {
            let (pre_v3, agents) = agents_of(&root);
            Case {
                install,
                root,
                pre_v3,
                agents,
            }
        })
        .collect()
}

fn export(env: &TestEnv, install: &Path, agent: &str, out: &Path) -> Run {
    env.run(&[
        "--json",
        "export",
        agent,
        "--install",
        &install.to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
    ])
}

fn import(env: &TestEnv, bundle: &Path, install: &Path) -> Run {
    env.run(&[
        "--json",
        "import",
        &bundle.to_string_lossy(),
        "--install",
        &install.to_string_lossy(),
        "--yes",
    ])
}

fn checked(run: Run, step: Step) -> Result<Run, (Step, String)> {
    if run.code() == 0 {
        Ok(run)
    } else {
        Err((step, run.describe()))
    }
}

/// Sets the string at dotted `path` of `doc` (`mcp.servers.<name>.…` addresses a server by
/// name), as `zeroclaw config set` does.
fn set_dotted(doc: &mut toml_edit::DocumentMut, path: &str, value: &str) -> Result<(), String> {
    use toml_edit::Item;
    let segs: Vec<&str> = path.split('.').collect();
    let (last, parents) = segs.split_last().ok_or("an empty path")?;
    let mut node = doc.as_item_mut();
    let mut i = 0;
    while i < parents.len() {
        node = match node {
            Item::ArrayOfTables(servers) => {
                let t = servers
                    .iter_mut()
                    .find(|t| t.get("name").and_then(Item::as_str) == Some(parents[i]))
                    .ok_or_else(|| format!("{path}: no server {}", parents[i]))?;
                i += 1;
                let key = parents.get(i).ok_or_else(|| format!("{path}: a server"))?;
                t.get_mut(key)
                    .ok_or_else(|| format!("{path}: no {key} in the server"))?
            }
            other => other
                .get_mut(parents[i])
                .ok_or_else(|| format!("{path}: no {}", parents[i]))?,
        };
        i += 1;
    }
    match node {
        Item::ArrayOfTables(servers) => {
            return Err(format!("{path}: ends at the server list {servers:?}"));
        }
        other => other[*last] = toml_edit::value(value),
    }
    Ok(())
}

/// Fills every credential the import's `--json` report lists, with a plain value.
fn fill_secrets(install: &Path, report: &Value) -> Result<(), String> {
    let path = install.join("config.toml");
    let mut doc: toml_edit::DocumentMut = fs::read_to_string(&path)
        .map_err(|e| e.to_string())?
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    let paths = report["required_secrets"]
        .as_array()
        .ok_or("the import report has no required_secrets")?;
    for (n, p) in paths.iter().enumerate() {
        let p = p.as_str().ok_or("a required secret that is no string")?;
        set_dotted(&mut doc, p, &format!("filled-{n}"))?;
    }
    fs::write(&path, doc.to_string()).map_err(|e| e.to_string())
}

/// The changes `diff --json A B` reports that a round trip does not explain; empty when the
/// two bundles are the same as `diff` sees them. Explained: a config entry the first export
/// dropped and the second has nothing to drop (removed from `dropped`), and the manifest file
/// that lists it.
/// Returns (unexplained, explained).
fn unexplained(env: &TestEnv, a: &Path, b: &Path) -> Result<(Vec<String>, Vec<String>), String> {
    let run = env.run(&["--json", "diff", &a.to_string_lossy(), &b.to_string_lossy()]);
    if run.code() != 0 && run.code() != 1 {
        return Err(run.describe());
    }
    let mut left = Vec::new();
    let mut explained = Vec::new();
    for line in run.stdout().lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
        match v["type"].as_str() {
            Some("summary") => {}
            Some("semantic")
                if v["area"] == "manifest"
                    && v["item"] == "dropped"
                    && v.get("new").is_none()
                    && v["old"]["path"].as_str().is_some_and(|p| {
                        !p.starts_with("workspace/") && !p.starts_with("skills/")
                    }) =>
            {
                explained.push(v["old"]["path"].as_str().unwrap_or_default().to_string());
            }
            Some("file") if v["path"] == "zeroclaw-agent.toml" && v["status"] == "M" => {
                if explained.is_empty() {
                    left.push(line.to_string());
                }
            }
            _ => left.push(line.to_string()),
        }
    }
    if run.code() == 1 && explained.is_empty() && left.is_empty() {
        return Err(format!(
            "diff says different and names nothing\n{}",
            run.describe()
        ));
    }
    Ok((left, explained))
}

/// (a) and (b) for `agent` of `case`; the config drops of the first export that the second
/// has nothing to drop.
fn round_trip(env: &TestEnv, case: &Case, agent: &str) -> Result<Vec<String>, (Step, String)> {
    let tag = format!("{}-{agent}", case.install);
    let first = env.path(&format!("a-{tag}"));
    checked(export(env, &case.root, agent, &first), Step::Export)?;

    // (a) Into a fresh install and out again.
    let fresh = onboarded(env, &format!("fresh-{tag}"));
    crate::import_trust::agreement(env, &first, &fresh).map_err(|e| (Step::Agree, e))?;
    let report = checked(import(env, &first, &fresh), Step::ImportFresh)?.json();
    fill_secrets(&fresh, &report).map_err(|e| (Step::ImportFresh, e))?;
    let alias = report["agent"].as_str().unwrap_or(agent).to_string();
    let second = env.path(&format!("b-{tag}"));
    checked(export(env, &fresh, &alias, &second), Step::ExportAgain)?;
    let (left, explained) = unexplained(env, &first, &second).map_err(|e| (Step::Diff, e))?;
    if !left.is_empty() {
        return Err((Step::Diff, left.join("\n")));
    }

    // (b) Beside a copy of its own install.
    let copy = env.path(&format!("copy-{tag}"));
    copy_tree(&case.root, &copy);
    if case.pre_v3 {
        zeroclaw_config::migration::migrate_file_in_place(&copy.join("config.toml")).map_err(
            |e| {
                (
                    Step::ImportBeside,
                    format!("zeroclaw config migrate: {e:#}"),
                )
            },
        )?;
        zeroclaw_config::schema::v2::migrate_v2_to_v3_install_filesystem(&copy)
            .map_err(|e| (Step::ImportBeside, format!("ZeroClaw's first load: {e:#}")))?;
    }
    let skipped = |text: &str| {
        let load = zeroclaw_config::migration::migrate_to_current_salvaged(text);
        let mut all = load.dropped;
        all.extend(load.dropped_security);
        (load.config, all)
    };
    let before = fs::read_to_string(copy.join("config.toml")).expect("config.toml");
    let (_, skipped_before) = skipped(&before);
    let report = checked(import(env, &first, &copy), Step::ImportBeside)?.json();
    let entries = report["entries"].as_array().cloned().unwrap_or_default();
    for e in &entries {
        let collided = match e["action"].as_str() {
            Some("namespace") => true,
            Some("reuse") => e["kind"] != "agent",
            _ => false,
        };
        if !collided {
            return Err((
                Step::ImportBeside,
                format!("an entry beside its own install did not collide: {e}"),
            ));
        }
    }
    // ZeroClaw's loader (which skips a section that does not load, as it skipped the
    // install's own) skips nothing new, and `validate()` passes.
    let text = fs::read_to_string(copy.join("config.toml")).expect("config.toml");
    let (typed, skipped_after) = skipped(&text);
    let new: Vec<&String> = skipped_after
        .iter()
        .filter(|s| !skipped_before.contains(s))
        .collect();
    if !new.is_empty() {
        return Err((
            Step::LoadBeside,
            format!("ZeroClaw's loader skips {new:?} of the merged config\n{text}"),
        ));
    }
    typed
        .validate()
        .map_err(|e| (Step::LoadBeside, format!("validate(): {e:#}\n{text}")))?;
    let imported = report["agent"].as_str().unwrap_or_default().to_string();
    if !typed.agents.contains_key(&imported) {
        return Err((
            Step::LoadBeside,
            format!("ZeroClaw's loader has no agent {imported}"),
        ));
    }
    let third = env.path(&format!("c-{tag}"));
    checked(export(env, &copy, &imported, &third), Step::ExportBeside)?;
    Ok(explained)
}

#[test]
fn every_export_of_every_real_and_generated_install_round_trips() {
    let env = TestEnv::new();
    let cases = cases(&env);
    let installs = cases.len();
    // One thread per install, each with its own store: the cases share nothing.
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let handles: Vec<_> = cases
            .iter()
            .map(|case| {
                scope.spawn(|| {
                    let env = TestEnv::new();
                    case.agents
                        .iter()
                        .map(|agent| Outcome {
                            install: case.install.clone(),
                            agent: agent.clone(),
                            result: round_trip(&env, case, agent),
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a case thread panicked"))
            .collect()
    });
    let agents = outcomes.len();
    let mut problems = Vec::new();
    for case in &cases {
        if case.agents.is_empty() {
            problems.push(format!(
                "{}: ZeroClaw loads no agent from it (list it with its reason)",
                case.install
            ));
        }
    }
    for o in &outcomes {
        let known = CANNOT
            .iter()
            .find(|(i, a, ..)| *i == o.install && *a == o.agent);
        match (&o.result, known) {
            (Ok(explained), None) => eprintln!(
                "roundtrip: {} {}: held (first export's config drops: {explained:?})",
                o.install, o.agent
            ),
            (Err((step, why)), None) => problems.push(format!(
                "{} {}: {step:?} failed:\n{why}",
                o.install, o.agent
            )),
            (Err((step, said)), Some((_, _, expected, needle, why)))
                if step == expected && said.contains(needle) =>
            {
                eprintln!(
                    "roundtrip: {} {}: cannot, at {step:?}: {why}",
                    o.install, o.agent
                );
            }
            (result, Some((_, _, expected, needle, _))) => problems.push(format!(
                "{} {}: listed as failing at {expected:?} with {needle:?}, but {}",
                o.install,
                o.agent,
                match result {
                    Ok(_) => "it held (remove it from CANNOT)".to_string(),
                    Err((step, why)) => format!("{step:?} failed:\n{why}"),
                }
            )),
        }
    }
    let held = outcomes.iter().filter(|o| o.result.is_ok()).count();
    eprintln!(
        "roundtrip: {installs} installs, {agents} agents: {held} round trips held, {} listed \
         as impossible",
        agents - held
    );
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

/// An install of `config` at `install-<name>` with `files` (path, bytes) under its root, as a
/// case of the property.
fn generated(env: &TestEnv, name: &str, config: &str, files: &[(&str, &[u8])]) -> Case {
    let root = env.path(&format!("install-{name}"));
    write(&root.join("config.toml"), config.as_bytes());
    for (path, bytes) in files {
        write(&root.join(path), bytes);
    }
    let (pre_v3, agents) = agents_of(&root);
    Case {
        install: name.to_string(),
        root,
        pre_v3,
        agents,
    }
}

/// The MCP servers ZeroClaw grants `agent` of the install at `root`.
fn granted_servers(root: &Path, agent: &str) -> Vec<String> {
    let text = fs::read_to_string(root.join("config.toml")).expect("config.toml");
    let config = zeroclaw_load(root, &text);
    config
        .mcp_servers_for_agent(agent)
        .into_iter()
        .map(|s| s.name)
        .collect()
}

/// An MCP bundle that lists a server it excludes (`researcher`), and one whose server another
/// bundle of the agent excludes (`wide`: deny wins across bundles). ZeroClaw's exporter leaves
/// the excluded server out and its `validate()` accepts the name left in `servers`; the import
/// takes the bundle as it is, grants the same servers, and the round trip holds. A name in
/// `servers` that no bundle excludes and the bundle does not carry is still refused.
#[test]
fn an_mcp_bundle_listing_a_server_it_excludes_round_trips() {
    let env = TestEnv::new();
    let case = generated(
        &env,
        "mcp-exclude",
        r#"schema_version = 3

[providers.models.openai.main]
model = "gpt-5"
api_key = "sk-roundtrip-main"

[risk_profiles.p]
level = "supervised"

[[mcp.servers]]
name = "github"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]

[[mcp.servers]]
name = "search"
transport = "http"
url = "https://search.example.com/mcp"

[[mcp.servers]]
name = "docs"
command = "docs-mcp"

[mcp_bundles.research]
servers = ["github", "search"]
exclude = ["search"]

[mcp_bundles.more]
servers = ["docs", "search"]

[agents.researcher]
model_provider = "openai.main"
risk_profile = "p"
mcp_bundles = ["research"]

[agents.wide]
model_provider = "openai.main"
risk_profile = "p"
mcp_bundles = ["more", "research"]
"#,
        &[],
    );
    for (agent, servers) in [
        ("researcher", &["github"][..]),
        ("wide", &["docs", "github"][..]),
    ] {
        assert_eq!(granted_servers(&case.root, agent), servers);
        round_trip(&env, &case, agent)
            .unwrap_or_else(|(step, why)| panic!("{agent}: {step:?} failed:\n{why}"));
        let bundle = fs::read_to_string(env.path(&format!("a-mcp-exclude-{agent}/config.toml")))
            .expect("config.toml");
        assert!(!bundle.contains("search.example.com"), "{bundle}");
        assert!(
            bundle.contains("exclude = [\"search\"]"),
            "the bundle keeps its exclude: {bundle}"
        );
        let fresh = env.path(&format!("fresh-mcp-exclude-{agent}"));
        assert_eq!(
            granted_servers(&fresh, agent),
            servers,
            "the imported agent is granted what the source agent was"
        );
    }
    // A name no bundle excludes and the bundle does not carry is a dangling reference.
    let hand_edited = env.path("hand-edited");
    copy_tree(&env.path("a-mcp-exclude-researcher"), &hand_edited);
    let config = hand_edited.join("config.toml");
    let mut doc: toml_edit::DocumentMut = fs::read_to_string(&config)
        .expect("config.toml")
        .parse()
        .expect("parses");
    doc["mcp_bundles"]["research"]["servers"]
        .as_array_mut()
        .expect("servers")
        .push("ghost");
    let edited = doc.to_string();
    fs::write(&config, edited).expect("write");
    let fresh = onboarded(&env, "fresh-ghost");
    let before = fs::read(fresh.join("config.toml")).expect("config.toml");
    let run = import(&env, &hand_edited, &fresh);
    assert_eq!(run.code(), 1, "{}", run.describe());
    assert!(
        run.stderr().contains("dangling reference") && run.stderr().contains("ghost"),
        "{}",
        run.describe()
    );
    assert_eq!(
        fs::read(fresh.join("config.toml")).expect("config.toml"),
        before
    );
}

/// A skill bundle whose alias is a Windows device name (`con`): ZeroClaw's exporter keeps its
/// config entry and drops its content (`skill_bundles.con`, host_specific), and so does ours.
/// The import takes the entry without content, says so in the plan, publishes the other
/// bundle's skills, and the round trip holds; ZeroClaw's own export of the imported agent
/// means what its export of the source agent meant.
#[test]
fn a_skill_bundle_named_like_a_windows_device_imports_without_content() {
    let env = TestEnv::new();
    let case = generated(
        &env,
        "device-alias",
        r#"schema_version = 3

[providers.models.openai.main]
model = "gpt-5"
api_key = "sk-roundtrip-main"

[risk_profiles.p]
level = "supervised"

[skill_bundles.con]

[skill_bundles.tools]

[agents.main]
model_provider = "openai.main"
risk_profile = "p"
skill_bundles = ["con", "tools"]
"#,
        &[
            ("shared/skills/con/console/SKILL.md", b"# console\n"),
            ("shared/skills/tools/alpha/SKILL.md", b"# alpha\n"),
            ("agents/main/workspace/notes.md", b"notes\n"),
        ],
    );
    round_trip(&env, &case, "main").unwrap_or_else(|(step, why)| panic!("{step:?} failed:\n{why}"));
    let bundle = env.path("a-device-alias-main");
    assert!(!bundle.join("skills/con").exists());
    assert!(bundle.join("skills/tools/alpha/SKILL.md").is_file());
    let manifest = fs::read_to_string(bundle.join("zeroclaw-agent.toml")).expect("manifest");
    assert!(
        manifest.contains("path = \"skill_bundles.con\""),
        "{manifest}"
    );

    // The imported install: the entry, no content for it, the other bundle's skills.
    let fresh = env.path("fresh-device-alias-main");
    let text = fs::read_to_string(fresh.join("config.toml")).expect("config.toml");
    let config = zeroclaw_load(&fresh, &text);
    assert!(config.skill_bundles.contains_key("con"), "{text}");
    assert_eq!(config.agents["main"].skill_bundles, ["con", "tools"]);
    assert!(!fresh.join("shared/skills/con").exists());
    assert_eq!(
        fs::read(fresh.join("shared/skills/tools/alpha/SKILL.md")).expect("alpha"),
        b"# alpha\n"
    );

    // The plan says the entry arrives without content, and why (text and JSON).
    let other = onboarded(&env, "fresh-dry-run");
    let dry = |json: bool| {
        let mut args = vec![];
        if json {
            args.push("--json".to_string());
        }
        args.extend([
            "import".to_string(),
            bundle.to_string_lossy().into_owned(),
            "--install".to_string(),
            other.to_string_lossy().into_owned(),
            "--dry-run".to_string(),
        ]);
        env.run(&args).ok()
    };
    let text_run = dry(false);
    assert!(
        text_run
            .stdout()
            .contains("note: skill_bundles.con arrives without content")
            && text_run.stdout().contains("Windows device name"),
        "{}",
        text_run.describe()
    );
    let notes = dry(true).json()["notes"].clone();
    assert!(
        notes.as_array().expect("notes").iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.starts_with("skill_bundles.con arrives"))),
        "{notes}"
    );

    // ZeroClaw's own export of the result means what its export of the source meant.
    let source = zeroclaw_export(&case.root, "main", &env.path("zeroclaw-source"));
    let result = zeroclaw_export(&fresh, "main", &env.path("zeroclaw-result"));
    assert_eq!(result.config, source.config);
    assert_eq!(result.files, source.files);
    for key in ["required_secrets", "skill_bundles", "risk_flags"] {
        assert_eq!(result.manifest.get(key), source.manifest.get(key), "{key}");
    }
    // The same drops, the content of `con` among them, but the one config key ZeroClaw's
    // first export set aside (`delegate_same_risk_profile`), which the imported agent has as
    // exported and its export has nothing to drop.
    let dropped = |b: &crate::oracle::Bundle| -> Vec<String> {
        b.manifest["dropped"]
            .as_array()
            .expect("dropped")
            .iter()
            .map(|d| format!("{} {}", d["path"], d["reason"]))
            .filter(|d| !d.starts_with("\"agents.main.delegate_same_risk_profile\""))
            .collect()
    };
    assert_eq!(dropped(&result), dropped(&source));
    assert!(
        dropped(&result).contains(&"\"skill_bundles.con\" \"host_specific\"".to_string()),
        "{:?}",
        dropped(&result)
    );
}
