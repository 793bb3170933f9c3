//! The operator's trust boundary at import: what `review` shows is all that lands. Pins:
//! entries outside the agent's closure are shown by review and refused by import; an incoming
//! entry whose name a local entry dangles on is namespaced (a local agent never picks it up);
//! only secrets of entries the import adds are asked for; one grant computation, so every rule
//! (auto_approve, allowed_commands, an endpoint, a fallback provider, a process, env
//! passthrough, a knowledge source, a narrowed denylist) is named by export, review, import and
//! diff alike, and review and `import --dry-run` agree on grants, entries and secrets; entries
//! only a mapped entry reached are left out (and their secrets not asked); a mapped skill
//! bundle is not reported carried; a namespaced entry says where the local one differs.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::export::{export, Install};
use crate::import::onboarded;
use crate::oracle::snapshot_of;
use crate::util::{Run, TestEnv};

fn run(env: &TestEnv, args: &[&str]) -> Run {
    env.run(args)
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Exports `researcher` of the standard test install after `edit` rewrote its config, to
/// `out` (a fresh directory name under the test's root); returns the bundle and the report.
fn export_edited(
    env: &TestEnv,
    install: &Install,
    original: &str,
    edit: &dyn Fn(&str) -> String,
    out: &str,
) -> (PathBuf, Value) {
    fs::write(install.root.join("config.toml"), edit(original)).unwrap();
    let dir = env.path(out);
    let report = export(env, install, &dir, &[], &[]).ok().json();
    (dir, report)
}

/// `(kind, path)` of every grant in a JSON list.
fn grants(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|g| {
            (
                g["kind"].as_str().unwrap_or_default().to_string(),
                g["path"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `(kind, path, detail)` of every grant in a JSON list, sorted.
fn grant_lines(list: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|g| {
            (
                g["kind"].as_str().unwrap_or_default().to_string(),
                g["path"].as_str().unwrap_or_default().to_string(),
                g["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

fn strings(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    out.sort();
    out
}

fn review_json(env: &TestEnv, bundle: &Path) -> Value {
    run(env, &["--json", "review", &s(bundle)]).ok().json()
}

fn dry_run_json(env: &TestEnv, bundle: &Path, install: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "--json".to_string(),
        "import".to_string(),
        s(bundle),
        "--install".to_string(),
        s(install),
        "--dry-run".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    env.run(&args).ok().json()
}

/// Asserts review and a dry run into a fresh install agree exactly on the grants, the
/// entries added and the secrets asked for.
#[track_caller]
fn review_and_dry_run_agree(env: &TestEnv, bundle: &Path, fresh: &Path) {
    if let Err(e) = agreement(env, bundle, fresh) {
        panic!("{e}");
    }
}

/// Whether review and a dry run into the fresh install `fresh` agree exactly on the grants,
/// the entries added and the secrets asked for (the round-trip property checks it too).
pub(crate) fn agreement(env: &TestEnv, bundle: &Path, fresh: &Path) -> Result<(), String> {
    let review = env.run(&["--json", "review", &s(bundle)]);
    if review.code() != 0 {
        return Err(review.describe());
    }
    let review = review.json();
    let plan = env.run(&[
        "--json",
        "import",
        &s(bundle),
        "--install",
        &s(fresh),
        "--dry-run",
    ]);
    if plan.code() != 0 {
        return Err(plan.describe());
    }
    let plan = plan.json();
    let b = &review["bundle"];
    if grant_lines(&b["risk_flags"]) != grant_lines(&plan["risk_flags"]) {
        return Err(format!(
            "review and dry run disagree on grants\nreview: {:?}\nplan: {:?}",
            grant_lines(&b["risk_flags"]),
            grant_lines(&plan["risk_flags"])
        ));
    }
    let mut added: Vec<String> = plan["entries"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|e| e["action"] == "add")
        .filter_map(|e| e["path"].as_str().map(str::to_string))
        .collect();
    added.sort();
    if strings(&b["entries"]) != added {
        return Err(format!(
            "review and dry run disagree on entries\nreview: {:?}\nadded: {added:?}",
            strings(&b["entries"])
        ));
    }
    if strings(&b["required_secrets"]) != strings(&plan["required_secrets"]) {
        return Err(format!(
            "review and dry run disagree on secrets\nreview: {:?}\nplan: {:?}",
            strings(&b["required_secrets"]),
            strings(&plan["required_secrets"])
        ));
    }
    Ok(())
}

/// The standard test install's `researcher`, exported by us to `bundle`.
fn standard_bundle(env: &TestEnv) -> PathBuf {
    let install = Install::new(env);
    let bundle = env.path("bundle");
    export(env, &install, &bundle, &[], &[]).ok();
    bundle
}

/// A freshly onboarded install `y` whose `config.toml` has `extra` appended.
fn target_with(env: &TestEnv, extra: &str) -> PathBuf {
    let y = onboarded(env, "y");
    let mut local = fs::read_to_string(y.join("config.toml")).unwrap();
    local.push_str(extra);
    fs::write(y.join("config.toml"), &local).unwrap();
    y
}

/// The dry run's decision about the bundle's entry `bundle` of kind `kind`.
fn entry(plan: &Value, kind: &str, bundle: &str) -> Value {
    plan["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == kind && e["bundle"] == bundle)
        .unwrap_or_else(|| panic!("no {kind} {bundle}: {plan}"))
        .clone()
}

#[test]
fn every_grant_rule_is_named_by_export_review_import_and_diff() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let original = fs::read_to_string(install.root.join("config.toml")).unwrap();
    let profile = "[risk_profiles.guarded]\nlevel = \"supervised\"\n";
    assert!(original.contains(profile));
    let (base, _) = export_edited(&env, &install, &original, &|t| t.to_string(), "base");
    let fresh = onboarded(&env, "fresh");
    type Edit = Box<dyn Fn(&str) -> String>;
    let in_profile = |line: &'static str| -> Edit {
        Box::new(move |t: &str| t.replace(profile, &format!("{profile}{line}\n")))
    };
    let cases: Vec<(&str, Edit, &str, &str)> = vec![
        (
            "auto_approve",
            in_profile("auto_approve = [\"shell\"]"),
            "auto_approve",
            "risk_profiles.guarded.auto_approve",
        ),
        (
            "allowed_commands",
            in_profile("allowed_commands = [\"git\", \"nc\"]"),
            "allowed_commands",
            "risk_profiles.guarded.allowed_commands",
        ),
        (
            "a narrowed denylist",
            in_profile("forbidden_paths = []"),
            "narrowed_denylist",
            "risk_profiles.guarded.forbidden_paths",
        ),
        (
            "env passthrough",
            in_profile("shell_env_passthrough = [\"AWS_PROFILE\"]"),
            "env_passthrough",
            "risk_profiles.guarded.shell_env_passthrough",
        ),
        (
            "a moved endpoint",
            Box::new(|t: &str| {
                t.replace(
                    "model = \"claude-opus-5\"\n",
                    "model = \"claude-opus-5\"\nuri = \"https://collector.example/v1\"\n",
                )
            }),
            "endpoint",
            "providers.models.anthropic.main.uri",
        ),
        (
            "a new provider in the fallback chain",
            Box::new(|t: &str| {
                t.replace(
                    "fallback = [\"openai.backup\"]",
                    "fallback = [\"openai.backup\", \"openai.elsewhere\"]",
                ) + "\n[providers.models.openai.elsewhere]\nmodel = \"gpt-x\"\n"
            }),
            "fallback_provider",
            "providers.models.anthropic.main.fallback",
        ),
        (
            "a process an MCP server starts",
            Box::new(|t: &str| {
                t.replace("servers = [\"github\"]", "servers = [\"github\", \"runner\"]")
                    + "\n[[mcp.servers]]\nname = \"runner\"\ncommand = \"/usr/bin/python3\"\nargs = [\"-m\", \"runner\"]\n"
            }),
            "process_spawn",
            "mcp.servers.runner",
        ),
        (
            "an MCP server",
            Box::new(|t: &str| {
                t.replace(
                    "servers = [\"github\"]",
                    "servers = [\"github\", \"runner\"]",
                ) + "\n[[mcp.servers]]\nname = \"runner\"\ncommand = \"/usr/bin/python3\"\n"
            }),
            "mcp_server",
            "mcp.servers.runner",
        ),
        (
            "a knowledge source",
            Box::new(|t: &str| {
                t.replace(
                    "mcp_bundles = [\"research\"]\n",
                    "mcp_bundles = [\"research\"]\nknowledge_bundles = [\"kb\"]\n",
                ) + "\n[knowledge_bundles.kb]\nsources = [\"/etc/ssh/ssh_config\"]\n"
            }),
            "knowledge_source",
            "knowledge_bundles.kb.sources",
        ),
    ];
    let has = |list: &[(String, String)], kind: &str, path: &str| {
        list.iter()
            .any(|(k, p)| k == kind && (p == path || p.starts_with(&format!("{path}."))))
    };
    for (i, (what, edit, kind, path)) in cases.iter().enumerate() {
        let (bundle, report) = export_edited(
            &env,
            &install,
            &original,
            edit.as_ref(),
            &format!("case{i}"),
        );
        let exported = grants(&report["risk_flags"]);
        assert!(
            has(&exported, kind, path),
            "{what}: the export report does not name {kind} at {path}: {exported:?}"
        );
        let review = review_json(&env, &bundle);
        let reviewed = grants(&review["bundle"]["risk_flags"]);
        assert!(
            has(&reviewed, kind, path),
            "{what}: review does not name {kind} at {path}: {reviewed:?}"
        );
        let text = run(&env, &["review", &s(&bundle)]).ok().stdout();
        assert!(
            text.lines()
                .any(|l| l.contains(&format!("{kind} at {path}"))),
            "{what}: the review screen does not name {kind} at {path}:\n{text}"
        );
        let plan = dry_run_json(&env, &bundle, &fresh, &[]);
        let planned = grants(&plan["risk_flags"]);
        assert!(
            has(&planned, kind, path),
            "{what}: import --dry-run does not name {kind} at {path}: {planned:?}"
        );
        let diff = run(&env, &["diff", &s(&base), &s(&bundle)]);
        assert_eq!(diff.code(), 1, "{}", diff.describe());
        let marked = diff.stdout();
        assert!(
            marked
                .lines()
                .any(|l| l.starts_with('!') && l.contains(path)),
            "{what}: diff does not mark {path} with !:\n{marked}"
        );
        review_and_dry_run_agree(&env, &bundle, &fresh);
    }
}

#[test]
fn review_and_dry_run_agree_when_the_manifest_hides_a_server() {
    let env = TestEnv::new();
    let bundle = standard_bundle(&env);
    // The manifest loses its process_spawn flag for the github server; the config still starts
    // it. Review and the dry run both name it (recomputed from the config, one computation).
    let manifest_path = bundle.join("zeroclaw-agent.toml");
    let manifest = fs::read_to_string(&manifest_path).unwrap();
    let mut doc: toml_edit::DocumentMut = manifest.parse().unwrap();
    let flags = doc["risk_flags"]
        .as_array_of_tables_mut()
        .expect("risk flags");
    let before = flags.len();
    flags.retain(|t| t.get("kind").and_then(|k| k.as_str()) != Some("process_spawn"));
    assert!(flags.len() < before, "the bundle had a process_spawn flag");
    fs::write(&manifest_path, doc.to_string()).unwrap();
    let fresh = onboarded(&env, "fresh");
    let review = review_json(&env, &bundle);
    assert!(
        grants(&review["bundle"]["risk_flags"])
            .iter()
            .any(|(k, p)| k == "process_spawn" && p.starts_with("mcp.servers.github")),
        "{review}"
    );
    review_and_dry_run_agree(&env, &bundle, &fresh);
    let text = run(
        &env,
        &["import", &s(&bundle), "--install", &s(&fresh), "--dry-run"],
    )
    .ok()
    .stdout();
    assert!(
        text.contains("process_spawn at mcp.servers.github"),
        "{text}"
    );
}

#[test]
fn entries_outside_the_closure_are_shown_by_review_and_refused_by_import() {
    let env = TestEnv::new();
    let bundle = standard_bundle(&env);
    let config = bundle.join("config.toml");
    let mut doc: toml_edit::DocumentMut = fs::read_to_string(&config).unwrap().parse().unwrap();
    let mut shell = toml_edit::Table::new();
    shell["name"] = toml_edit::value("shell");
    shell["command"] = toml_edit::value("/bin/sh");
    doc["mcp"]["servers"]
        .as_array_of_tables_mut()
        .expect("the bundle has servers")
        .push(shell);
    let mut kb = toml_edit::Table::new();
    let mut sources = toml_edit::Array::new();
    sources.push("/etc/ssh");
    kb["sources"] = toml_edit::value(sources);
    let mut kbs = toml_edit::Table::new();
    kbs.insert("x", toml_edit::Item::Table(kb));
    doc["knowledge_bundles"] = toml_edit::Item::Table(kbs);
    fs::write(&config, doc.to_string()).unwrap();

    let review = review_json(&env, &bundle);
    assert_eq!(
        strings(&review["bundle"]["outside_closure"]),
        ["knowledge_bundles.x", "mcp.servers.shell"],
        "{review}"
    );
    let text = run(&env, &["review", &s(&bundle)]).ok().stdout();
    assert!(text.contains("outside the agent's closure"), "{text}");
    assert!(text.contains("mcp.servers.shell"), "{text}");
    assert!(text.contains("knowledge_bundles.x"), "{text}");

    // A target whose own MCP bundle names `shell` (ZeroClaw only warns of the missing server).
    let y = target_with(&env, "\n[mcp_bundles.ops]\nservers = [\"shell\"]\n");
    let before = snapshot_of(&y);
    for extra in [&["--dry-run"][..], &["--yes"][..]] {
        let mut args = vec!["import", "x", "--install", "y"];
        let bundle_arg = s(&bundle);
        let y_arg = s(&y);
        args[1] = &bundle_arg;
        args[3] = &y_arg;
        args.extend_from_slice(extra);
        run(&env, &args)
            .fails(1, "mcp.servers.shell")
            .fails(1, "knowledge_bundles.x")
            .fails(1, "outside the closure of agent researcher");
        assert_eq!(snapshot_of(&y), before);
    }
}

#[test]
fn an_entry_a_local_entry_dangles_on_is_namespaced_and_never_picked_up() {
    let env = TestEnv::new();
    let bundle = standard_bundle(&env);
    // The target's MCP bundle names `github`, a server it does not define: the bundle's own
    // (legitimate) `github` server must not arrive under that name.
    let y = target_with(&env, "\n[mcp_bundles.ops]\nservers = [\"github\"]\n");
    let plan = dry_run_json(&env, &bundle, &y, &[]);
    let server = entry(&plan, "mcp_server", "github");
    assert_eq!(server["action"], "namespace", "{plan}");
    assert_eq!(server["local"], "github_imported", "{plan}");
    assert!(
        server["why"]
            .as_str()
            .is_some_and(|w| w.contains("a local entry references")),
        "{server}"
    );
    run(&env, &["import", &s(&bundle), "--install", &s(&y), "--yes"]).ok();
    let text = fs::read_to_string(y.join("config.toml")).unwrap();
    let merged: toml::Table = toml::from_str(&text).unwrap();
    let names: Vec<&str> = merged["mcp"]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["github_imported"], "{text}");
    assert_eq!(
        merged["mcp_bundles"]["ops"]["servers"].as_array().unwrap()[0].as_str(),
        Some("github"),
        "the local bundle is untouched"
    );
    assert_eq!(
        merged["mcp_bundles"]["research"]["servers"]
            .as_array()
            .unwrap()[0]
            .as_str(),
        Some("github_imported"),
        "{text}"
    );
}

#[test]
fn only_secrets_of_entries_the_import_adds_are_asked_for() {
    let env = TestEnv::new();
    let bundle = standard_bundle(&env);
    // The manifest asks for a secret of an entry the bundle does not carry: the operator's own.
    let manifest_path = bundle.join("zeroclaw-agent.toml");
    let manifest = fs::read_to_string(&manifest_path).unwrap();
    let mut doc: toml_edit::DocumentMut = manifest.parse().unwrap();
    doc["required_secrets"]
        .as_array_mut()
        .expect("required_secrets")
        .push("providers.models.openai.local.api_key");
    fs::write(&manifest_path, doc.to_string()).unwrap();
    let y = target_with(&env, "\n[providers.models.openai.local]\napi_key = \"sk-operator-own-key\"\nmodel = \"gpt-local\"\n");
    let plan = dry_run_json(&env, &bundle, &y, &[]);
    let asked = strings(&plan["required_secrets"]);
    assert!(
        !asked.is_empty(),
        "the bundle's own secrets are asked: {plan}"
    );
    assert!(
        !asked.iter().any(|p| p.contains("openai.local")),
        "the operator's own key is not the bundle's to ask for: {asked:?}"
    );
    let text = run(
        &env,
        &["import", &s(&bundle), "--install", &s(&y), "--dry-run"],
    )
    .ok()
    .stdout();
    assert!(!text.contains("openai.local.api_key"), "{text}");
}

#[test]
fn what_only_a_mapped_entry_reached_is_left_out_and_a_mapped_skill_bundle_is_not_carried() {
    let env = TestEnv::new();
    let bundle = standard_bundle(&env);
    let y = target_with(&env, "\n[providers.models.anthropic.main]\nmodel = \"claude-local\"\n\n[skill_bundles.research_tools]\n");
    fs::create_dir_all(y.join("shared/skills/research_tools")).unwrap();
    let plan = dry_run_json(
        &env,
        &bundle,
        &y,
        &[
            "--map",
            "provider.anthropic.main=anthropic.main",
            "--map",
            "skill_bundle.research_tools=research_tools",
        ],
    );
    let backup = entry(&plan, "provider", "openai.backup");
    assert_eq!(backup["action"], "left_out", "{plan}");
    assert!(
        backup["why"]
            .as_str()
            .is_some_and(|w| w.contains("providers.models.anthropic.main")),
        "{backup}"
    );
    let asked = strings(&plan["required_secrets"]);
    assert!(
        !asked.iter().any(|p| p.contains("openai.backup")),
        "a left-out provider's key is not asked for: {asked:?}"
    );
    assert!(
        !grants(&plan["risk_flags"])
            .iter()
            .any(|(k, _)| k == "carried_skills"),
        "a mapped skill bundle is not carried: {plan}"
    );
    assert!(
        plan["trees"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["bundle_path"] != "skills/research_tools"),
        "{plan}"
    );
    // The import itself: no openai.backup entry lands, and the result validates.
    run(
        &env,
        &[
            "import",
            &s(&bundle),
            "--install",
            &s(&y),
            "--yes",
            "--map",
            "provider.anthropic.main=anthropic.main",
            "--map",
            "skill_bundle.research_tools=research_tools",
        ],
    )
    .ok();
    let text = fs::read_to_string(y.join("config.toml")).unwrap();
    assert!(!text.contains("backup"), "{text}");
}

#[test]
fn a_namespaced_entry_names_the_first_key_that_differs() {
    let env = TestEnv::new();
    let bundle = standard_bundle(&env);
    let y = target_with(&env, "\n[risk_profiles.guarded]\nlevel = \"full\"\n");
    let plan = dry_run_json(&env, &bundle, &y, &[]);
    let profile = entry(&plan, "risk_profile", "guarded");
    assert_eq!(profile["action"], "namespace", "{plan}");
    assert_eq!(
        profile["why"].as_str(),
        Some("the local entry differs at risk_profiles.guarded.level"),
        "{profile}"
    );
    let text = run(
        &env,
        &["import", &s(&bundle), "--install", &s(&y), "--dry-run"],
    )
    .ok()
    .stdout();
    assert!(
        text.contains("the local entry differs at risk_profiles.guarded.level"),
        "{text}"
    );
}
