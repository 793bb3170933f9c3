//! The oracle: for every fixture, ZeroClaw 0.8.7's own export (its planner, `zeroclaw-config`'s
//! `agent_bundle`, driven by the I/O rules of `zeroclaw`'s `src/alias_cli/export.rs`, which this
//! machine's toolchain cannot build and which this file re-enacts step for step) against our
//! real binary's `export`. Compared: both config fragments as ZeroClaw means them (each loaded
//! by ZeroClaw's `Config` and serialized back), required secrets, dropped entries, risk flags,
//! skill bundles, and the file tree (path, bytes, permission bits). Any difference that is not
//! one of our documented deliberate extras fails:
//! - the credential-name scrub: a value ZeroClaw carries under a key named like a credential is
//!   `""` in ours and listed in our `required_secrets`;
//! - `process_spawn` / `env_passthrough` flags on `providers.*` entries whose family starts a
//!   host process;
//! - setuid, setgid and sticky bits are never carried (ZeroClaw copies them).
//!
//! Every fragment we write also loads under ZeroClaw's `Config` deserializer and passes
//! `validate()`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use zeroclaw_config::agent_bundle as zc;
use zeroclaw_config::migration;
use zeroclaw_config::schema::Config;

use crate::util::{chmod, write, TestEnv};
use crate::zeroclaw_real::{build, FIXTURES};

/// Load `text` the way ZeroClaw 0.8.7's `Config::load_or_init` does, minus its writes.
pub(crate) fn zeroclaw_load(root: &Path, text: &str) -> Config {
    let salvaged = migration::migrate_to_current_salvaged(text);
    let mut config = salvaged.config;
    config.config_path = root.join("config.toml");
    config.data_dir = root.join("workspace");
    config.loaded_from = Some(root.join("config.toml"));
    if let Some(profile) = config.risk_profiles.get_mut("default") {
        profile.ensure_default_auto_approve();
    }
    config
}

/// The copy rules of ZeroClaw's `copy_tree`: symlinks, special files and hard links are
/// skipped; directories are created as met; a file keeps its permission bits.
fn zeroclaw_copy_tree(
    source: &Path,
    dest: &Path,
    rel: &Path,
    keep: &dyn Fn(&Path) -> bool,
) -> usize {
    let mut files = 0;
    let Ok(entries) = fs::read_dir(source) else {
        return 0;
    };
    for entry in entries {
        let entry = entry.expect("entry");
        let child = rel.join(entry.file_name());
        if !keep(&child) {
            continue;
        }
        let meta = fs::symlink_metadata(entry.path()).expect("stat");
        let target = dest.join(entry.file_name());
        if meta.is_dir() {
            fs::create_dir(&target).expect("mkdir");
            files += zeroclaw_copy_tree(&entry.path(), &target, &child, keep);
        } else if meta.is_file() && meta.nlink() == 1 {
            fs::copy(entry.path(), &target).expect("copy");
            fs::set_permissions(&target, fs::Permissions::from_mode(meta.mode() & 0o7777))
                .expect("chmod");
            files += 1;
        }
    }
    files
}

/// A bundle as the comparison sees it.
pub(crate) struct Bundle {
    /// `config.toml` as ZeroClaw means it (loaded by its `Config`, serialized back).
    pub(crate) config: toml::Value,
    /// `zeroclaw-agent.toml`.
    pub(crate) manifest: toml::Table,
    /// Every file under `workspace/` and `skills/`: bytes and permission bits.
    pub(crate) files: BTreeMap<String, (Vec<u8>, u32)>,
}

/// ZeroClaw 0.8.7's `agents export` of `alias`, into `out` (`write_bundle`'s steps in order).
pub(crate) fn zeroclaw_export(root: &Path, alias: &str, out: &Path) -> Bundle {
    let text = fs::read_to_string(root.join("config.toml")).expect("config");
    let config = zeroclaw_load(root, &text);
    let mut plan = zc::plan_export(&config, alias).expect("ZeroClaw plans the export");
    fs::create_dir_all(out).expect("out");
    let workspace_dest = out.join("workspace");
    let workspace_source = match &plan.source_boundaries.workspace {
        Some(relative) => plan.source_boundaries.install_root.join(relative),
        None => plan.workspace_source.clone(),
    };
    if fs::symlink_metadata(&workspace_source).is_ok_and(|m| m.is_dir()) {
        fs::create_dir_all(&workspace_dest).expect("workspace");
        zeroclaw_copy_tree(&workspace_source, &workspace_dest, Path::new(""), &|rel| {
            zc::workspace_entry_included(rel)
        });
    }
    let mut without_content = Vec::new();
    let skills_dest = out.join("skills");
    for source in &plan.skill_sources {
        let from = plan.source_boundaries.install_root.join(&source.relative);
        if !fs::symlink_metadata(&from).is_ok_and(|m| m.is_dir()) {
            without_content.push(source.alias.clone());
            continue;
        }
        let bundle_dest = skills_dest.join(&source.alias);
        fs::create_dir_all(&bundle_dest).expect("skills dir");
        let mut carried = 0;
        for entry in fs::read_dir(&from).expect("skills") {
            let entry = entry.expect("entry");
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let meta = fs::symlink_metadata(entry.path()).expect("stat");
            if !source.filter.admits_skill(&name) || !meta.is_dir() {
                continue;
            }
            let skill_dest = bundle_dest.join(&name);
            fs::create_dir(&skill_dest).expect("skill");
            if zeroclaw_copy_tree(&entry.path(), &skill_dest, Path::new(&name), &|_| true) > 0 {
                carried += 1;
            } else {
                fs::remove_dir_all(&skill_dest).expect("rm");
            }
        }
        if carried == 0 {
            fs::remove_dir_all(&bundle_dest).expect("rm");
            without_content.push(source.alias.clone());
        }
    }
    if skills_dest.exists() && fs::read_dir(&skills_dest).expect("skills").next().is_none() {
        fs::remove_dir(&skills_dest).expect("rm skills");
    }
    if let Some(relative) = plan.identity_document.as_deref() {
        if !workspace_dest.join(relative).is_file() {
            zc::record_missing_identity_document(&mut plan);
        }
    }
    let config_toml = zc::render_config_toml(&plan).expect("ZeroClaw renders the closure");
    zc::record_missing_skill_content(&mut plan, &without_content);
    let manifest_toml = zc::render_manifest_toml(
        &plan,
        &zc::Provenance {
            zeroclaw_version: "0.8.7".into(),
            exported_at: "2026-12-01T00:00:00+00:00".into(),
        },
    )
    .expect("manifest");
    fs::write(out.join("config.toml"), &config_toml).expect("write");
    fs::write(out.join("zeroclaw-agent.toml"), &manifest_toml).expect("write");
    read_bundle(out)
}

/// A fragment as ZeroClaw means it: loaded by its `Config`, then serialized back.
fn as_zeroclaw_means_it(text: &str, what: &str) -> toml::Value {
    let config: Config = toml::from_str(text)
        .unwrap_or_else(|e| panic!("{what}: config.toml does not load in ZeroClaw: {e}"));
    config
        .validate()
        .unwrap_or_else(|e| panic!("{what}: config.toml fails ZeroClaw's validate(): {e:#}"));
    toml::Value::try_from(&config).expect("serializes")
}

fn read_bundle(dir: &Path) -> Bundle {
    let config = fs::read_to_string(dir.join("config.toml")).expect("config.toml");
    let manifest = fs::read_to_string(dir.join("zeroclaw-agent.toml")).expect("manifest");
    let mut files = BTreeMap::new();
    for sub in ["workspace", "skills"] {
        collect(&dir.join(sub), sub, &mut files);
    }
    Bundle {
        config: as_zeroclaw_means_it(&config, &dir.display().to_string()),
        manifest: toml::from_str(&manifest).expect("manifest parses"),
        files,
    }
}

fn collect(dir: &Path, rel: &str, out: &mut BTreeMap<String, (Vec<u8>, u32)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let entry = entry.expect("entry");
        let rel = format!("{rel}/{}", entry.file_name().to_string_lossy());
        let meta = fs::symlink_metadata(entry.path()).expect("stat");
        if meta.is_dir() {
            collect(&entry.path(), &rel, out);
        } else {
            let bytes = fs::read(entry.path()).expect("read");
            out.insert(rel, (bytes, meta.mode() & 0o7777));
        }
    }
}

fn strings(manifest: &toml::Table, key: &str) -> Vec<String> {
    manifest
        .get(key)
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().expect("string").to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn entries(manifest: &toml::Table, key: &str, fields: &[&str]) -> Vec<Vec<String>> {
    manifest
        .get(key)
        .and_then(toml::Value::as_array)
        .map(|a| {
            a.iter()
                .map(|t| {
                    fields
                        .iter()
                        .map(|f| t.get(f).and_then(toml::Value::as_str).unwrap_or("").into())
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The value at a dotted path of a serialized config (`mcp.servers.<name>` addresses an array
/// element by its `name`).
fn at<'v>(root: &'v toml::Value, path: &str) -> Option<&'v toml::Value> {
    let mut node = root;
    for segment in path.split('.') {
        node = match node {
            toml::Value::Table(t) => t.get(segment)?,
            toml::Value::Array(items) => items
                .iter()
                .find(|i| i.get("name").and_then(toml::Value::as_str) == Some(segment))?,
            _ => return None,
        };
    }
    Some(node)
}

fn set_empty(root: &mut toml::Value, path: &str) {
    let mut node = root;
    for segment in path.split('.') {
        node = match node {
            toml::Value::Table(t) => match t.get_mut(segment) {
                Some(n) => n,
                None => return,
            },
            toml::Value::Array(items) => match items
                .iter_mut()
                .find(|i| i.get("name").and_then(toml::Value::as_str) == Some(segment))
            {
                Some(n) => n,
                None => return,
            },
            _ => return,
        };
    }
    *node = toml::Value::String(String::new());
}

/// Our export of `alias` (the real binary) and the differences from ZeroClaw's, as a list of
/// human-readable lines; empty means equal up to the deliberate extras.
fn compare(env: &TestEnv, root: &Path, alias: &str, tag: &str) -> Vec<String> {
    compare_installs(env, root, root, alias, tag)
}

/// [`compare`] where ZeroClaw exports from `zeroclaw_root`, a copy of `root` after the
/// filesystem changes ZeroClaw's own loader makes (we export from the untouched `root`).
fn compare_installs(
    env: &TestEnv,
    root: &Path,
    zeroclaw_root: &Path,
    alias: &str,
    tag: &str,
) -> Vec<String> {
    let ours_dir = env.path(&format!("ours-{tag}"));
    let theirs_dir = env.path(&format!("zeroclaw-{tag}"));
    let run = env.run(&[
        "--json",
        "export",
        alias,
        "--install",
        &root.to_string_lossy(),
        "--out",
        &ours_dir.to_string_lossy(),
    ]);
    let run = run.ok();
    let report = run.json();
    let by_name: BTreeSet<String> = report["scrubbed_by_name"]
        .as_array()
        .expect("scrubbed_by_name")
        .iter()
        .map(|e| e["path"].as_str().expect("path").to_string())
        .collect();
    let ours = read_bundle(&ours_dir);
    let theirs = zeroclaw_export(zeroclaw_root, alias, &theirs_dir);
    let mut differences = Vec::new();

    // The fragment, as ZeroClaw means it; the name-scrubbed paths are ours to blank.
    let mut expected = theirs.config.clone();
    for path in &by_name {
        assert!(
            at(&expected, path).is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty())),
            "{tag}: we list {path} as name-scrubbed, but ZeroClaw's fragment holds no value there"
        );
        set_empty(&mut expected, path);
    }
    if ours.config != expected {
        let (a, b) = (
            toml::to_string_pretty(&expected).expect("toml"),
            toml::to_string_pretty(&ours.config).expect("toml"),
        );
        let diff: Vec<String> = similar::TextDiff::from_lines(&a, &b)
            .iter_all_changes()
            .filter(|c| c.tag() != similar::ChangeTag::Equal)
            .map(|c| format!("{}{}", c.tag(), c.value().trim_end()))
            .collect();
        differences.push(format!("config differs:\n{}", diff.join("\n")));
    }

    // Required secrets: ZeroClaw's, plus exactly the name-scrubbed paths.
    let mut expected_secrets: BTreeSet<String> = strings(&theirs.manifest, "required_secrets")
        .into_iter()
        .collect();
    expected_secrets.extend(by_name.iter().cloned());
    let our_secrets: BTreeSet<String> = strings(&ours.manifest, "required_secrets")
        .into_iter()
        .collect();
    if our_secrets != expected_secrets {
        differences.push(format!(
            "required_secrets: ours {our_secrets:?}, expected {expected_secrets:?}"
        ));
    }
    for key in ["skill_bundles"] {
        if strings(&ours.manifest, key) != strings(&theirs.manifest, key) {
            differences.push(format!("{key} differ"));
        }
    }
    let dropped_fields = ["path", "reason", "detail"];
    if entries(&ours.manifest, "dropped", &dropped_fields)
        != entries(&theirs.manifest, "dropped", &dropped_fields)
    {
        differences.push(format!(
            "dropped: ours {:?}\nZeroClaw {:?}",
            entries(&ours.manifest, "dropped", &dropped_fields),
            entries(&theirs.manifest, "dropped", &dropped_fields)
        ));
    }
    // Risk flags: ZeroClaw's in its order, then our provider-process flags.
    let flag_fields = ["kind", "path", "detail"];
    let our_flags = entries(&ours.manifest, "risk_flags", &flag_fields);
    let their_flags = entries(&theirs.manifest, "risk_flags", &flag_fields);
    let (shared, extra) = our_flags.split_at(their_flags.len().min(our_flags.len()));
    if shared != their_flags.as_slice()
        || extra.iter().any(|f| {
            !(f[1].starts_with("providers.")
                && (f[0] == "process_spawn" || f[0] == "env_passthrough"))
        })
    {
        differences.push(format!(
            "risk_flags: ours {our_flags:?}\nZeroClaw {their_flags:?}"
        ));
    }
    // Files: path, bytes, permission bits (ours never carries setuid/setgid/sticky).
    let expected_files: BTreeMap<String, (Vec<u8>, u32)> = theirs
        .files
        .iter()
        .map(|(p, (b, m))| (p.clone(), (b.clone(), m & 0o777)))
        .collect();
    if ours.files != expected_files {
        let listing = |files: &BTreeMap<String, (Vec<u8>, u32)>| -> Vec<String> {
            files
                .iter()
                .map(|(p, (b, m))| format!("{p} {m:o} {} bytes", b.len()))
                .collect()
        };
        differences.push(format!(
            "files: ours {:?}\nZeroClaw {:?}",
            listing(&ours.files),
            listing(&expected_files)
        ));
    }
    differences
}

/// Every real config of tests/zeroclaw with every reachable secret planted, each agent.
#[test]
fn oracle_real_configs_with_planted_secrets() {
    let env = TestEnv::new();
    let mut table = Vec::new();
    for (name, text, agents) in FIXTURES {
        let install = build(&env, name, text, agents);
        for agent in *agents {
            let tag = format!("{name}-{agent}");
            let differences = compare(&env, &install.root, agent, &tag);
            table.push((tag, differences));
        }
    }
    report(&table);
}

/// The pre-v3 installs of the oracle: (name, config text).
pub(crate) const V1_INSTALLS: &[(&str, &str)] = &[
    (
        "fixtures-v1",
        include_str!("../zeroclaw/zeroclaw-config-0.8.7-fixtures-v1.toml"),
    ),
    (
        "demo-v1",
        include_str!("../zeroclaw/demo-zeroclaw.toml.example"),
    ),
    // A single-agent v1 config (the top-level keys of ZeroClaw 0.8.7's own v1 fixture):
    // its migration names the agent `default`, whose workspace is the pre-v3 one.
    (
        "single-agent-v1",
        "api_key = \"sk-v1-test-global\"\ndefault_provider = \"openai\"\n\
         default_model = \"gpt-4o-mini\"\ndefault_temperature = 0.5\n",
    ),
    // The same, with ZeroClaw's split interrupted part way: some entries already in
    // agents/default/workspace (they win), the rest still waiting in workspace/.
    (
        "half-migrated-v1",
        "api_key = \"sk-v1-test-global\"\ndefault_provider = \"openai\"\n\
         default_model = \"gpt-4o-mini\"\ndefault_temperature = 0.5\n",
    ),
];

/// A pre-v3 install of `text` at `install-<name>`, with the single workspace ZeroClaw's first
/// load splits (agent files to agents/default/workspace, `sessions` and `memory` data to
/// data/, `skills` to shared/).
pub(crate) fn build_v1(env: &TestEnv, name: &str, text: &str) -> PathBuf {
    let root = env.path(&format!("install-{name}"));
    write(&root.join("config.toml"), text.as_bytes());
    write(&root.join("workspace/NOTES.md"), b"v1 workspace\n");
    write(&root.join("workspace/notes/plan.md"), b"the plan\n");
    write(&root.join("workspace/sessions/s1.json"), b"{}\n");
    write(
        &root.join("workspace/memory/brain.db"),
        b"SQLite format 3\0",
    );
    write(
        &root.join("workspace/skills/legacy/SKILL.md"),
        b"# legacy\n",
    );
    if name == "half-migrated-v1" {
        let moved = root.join("agents/default/workspace");
        write(&moved.join("NOTES.md"), b"already moved, newer\n");
        write(&moved.join("only_new.md"), b"written after the move\n");
    }
    root
}

/// Schema v1 configs (ZeroClaw 0.8.7's own migration fixture, and a v1 config without
/// `schema_version`): ZeroClaw migrates them in memory and exports; so do we, for every agent
/// the migration yields, and the install is byte-for-byte unchanged afterwards.
#[test]
fn oracle_v1_configs_export_like_zeroclaw_and_leave_the_install_alone() {
    let env = TestEnv::new();
    let mut table = Vec::new();
    for (name, text) in V1_INSTALLS {
        let root = build_v1(&env, name, text);
        let before = snapshot_of(&root);
        // ZeroClaw's side runs on a copy, after its loader's filesystem migration.
        let zeroclaw_root = env.path(&format!("zeroclaw-install-{name}"));
        crate::util::copy_tree(&root, &zeroclaw_root);
        zeroclaw_config::schema::v2::migrate_v2_to_v3_install_filesystem(&zeroclaw_root)
            .expect("ZeroClaw's filesystem migration");
        let config = zeroclaw_load(&zeroclaw_root, text);
        let mut aliases: Vec<&String> = config.agents.keys().collect();
        aliases.sort();
        assert!(!aliases.is_empty(), "{name}: the migration yields no agent");
        for alias in aliases {
            let tag = format!("{name}-{alias}");
            table.push((
                tag.clone(),
                compare_installs(&env, &root, &zeroclaw_root, alias, &tag),
            ));
            if alias == "default" {
                let carried = env.path(&format!("ours-{tag}/workspace/NOTES.md"));
                assert!(
                    carried.exists(),
                    "{tag}: the pre-v3 workspace was not carried"
                );
            }
        }
        assert_eq!(
            snapshot_of(&root),
            before,
            "{name}: the export wrote to the install"
        );
    }
    report(&table);
}

/// One install exercising the I/O rules, at `name` (its agent is `main`): file modes (0600,
/// 0640, 0755, setuid), symlinks, a hard link, a FIFO, memory, an identity document, skill
/// filters, an empty skill, a missing skill bundle; a provider entry ZeroClaw's loader skips
/// (`auth_mode = "oauth"`) reached through a fallback edge; a token under `provider_extra` (our
/// name scrub); the `default` risk profile (ZeroClaw restores its built-in auto-approved tools).
pub(crate) fn build_generated(env: &TestEnv, name: &str) -> PathBuf {
    let root = env.path(name);
    let config = r#"
schema_version = 3

[providers.models.openai.main]
model = "gpt-5"
api_key = "sk-oracle-main-key"
fallback = ["qwen.broken", "anthropic.gone"]

[providers.models.openai.main.provider_extra]
token = "oracle-extra-token"

[providers.models.qwen.broken]
model = "qwen-max"
auth_mode = "oauth"

[risk_profiles.default]
level = "supervised"
auto_approve = ["my_tool"]

[skill_bundles.tools]
include = ["alpha", "empty", "beta"]
exclude = ["beta"]

[skill_bundles.absent]

[agents.main]
model_provider = "openai.main"
risk_profile = "default"
skill_bundles = ["tools", "absent"]

[agents.main.identity]
format = "aieos"
aieos_path = "identity/aieos.json"
"#;
    write(&root.join("config.toml"), config.as_bytes());
    let ws = root.join("agents/main/workspace");
    write(&ws.join("README.md"), b"hello\n");
    write(&ws.join(".env"), b"API=1\n");
    chmod(&ws.join(".env"), 0o600);
    write(&ws.join("shared.txt"), b"group\n");
    chmod(&ws.join("shared.txt"), 0o640);
    write(&ws.join("bin/run.sh"), b"#!/bin/sh\necho hi\n");
    chmod(&ws.join("bin/run.sh"), 0o755);
    write(&ws.join("bin/suid"), b"#!/bin/sh\n");
    chmod(&ws.join("bin/suid"), 0o4755);
    write(&ws.join("identity/aieos.json"), b"{}\n");
    write(&ws.join("memory/brain.db"), b"SQLite format 3\0");
    write(&ws.join("MEMORY_SNAPSHOT.md"), b"core memories\n");
    write(&ws.join("notes/memory/keep.md"), b"travels\n");
    std::os::unix::fs::symlink("/etc/passwd", ws.join("passwd-link")).expect("symlink");
    write(&env.path("outside.txt"), b"host file\n");
    fs::hard_link(env.path("outside.txt"), ws.join("hardlink.txt")).expect("hard link");
    let fifo = ws.join("pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo")
        .success());
    let skills = root.join("shared/skills/tools");
    write(&skills.join("alpha/SKILL.md"), b"# alpha\n");
    write(&skills.join("alpha/run.py"), b"print(1)\n");
    chmod(&skills.join("alpha/run.py"), 0o750);
    write(&skills.join("beta/SKILL.md"), b"# beta (excluded)\n");
    write(&skills.join("gamma/SKILL.md"), b"# gamma (not included)\n");
    fs::create_dir_all(skills.join("empty")).expect("empty skill");
    write(&skills.join("loose.txt"), b"not a skill\n");
    root
}

/// The install of [`build_generated`], exported by ZeroClaw and by us.
#[test]
fn oracle_generated_install_with_every_io_rule() {
    let env = TestEnv::new();
    let root = build_generated(&env, "install");
    let before = snapshot_of(&root);
    let differences = compare(&env, &root, "main", "generated");
    assert_eq!(
        snapshot_of(&root),
        before,
        "the export wrote to the install"
    );
    report(&[("generated".to_string(), differences)]);

    // What this fixture is for, checked on our bundle directly.
    let out = env.path("ours-generated");
    let mode = |rel: &str| fs::metadata(out.join(rel)).expect(rel).permissions().mode() & 0o7777;
    assert_eq!(mode("workspace/.env"), 0o600);
    assert_eq!(mode("workspace/shared.txt"), 0o640);
    assert_eq!(mode("workspace/bin/run.sh"), 0o755);
    assert_eq!(mode("workspace/bin/suid"), 0o755, "setuid is never carried");
    assert_eq!(mode("skills/tools/alpha/run.py"), 0o750);
    let manifest = fs::read_to_string(out.join("zeroclaw-agent.toml")).expect("manifest");
    let config_out = fs::read_to_string(out.join("config.toml")).expect("config");
    // The provider entry ZeroClaw's loader skips is not carried; its fallback edge is
    // reported the way ZeroClaw reports it.
    assert!(!config_out.contains("broken"), "{config_out}");
    let parsed: toml::Table = toml::from_str(&manifest).expect("manifest");
    let dropped = entries(&parsed, "dropped", &["path", "reason", "detail"]);
    assert!(
        dropped.iter().any(
            |d| d[0].starts_with("providers.models.openai.main.fallback")
                && d[1] == "source_missing"
                && d[2].contains("qwen.broken")
        ),
        "the edge to the skipped entry is not dropped as ZeroClaw drops it: {dropped:?}"
    );
    assert!(!config_out.contains("oracle-extra-token"));
    assert!(!config_out.contains("sk-oracle-main-key"));
    // The report names the skipped section and ZeroClaw's reason.
    let report = env
        .run(&[
            "--json",
            "export",
            "main",
            "--install",
            &root.to_string_lossy(),
            "--out",
            &env.path("again").to_string_lossy(),
        ])
        .ok()
        .json();
    assert_eq!(
        report["skipped_config_sections"],
        serde_json::json!(["providers.models.qwen.broken"])
    );
    let reason = report["skipped_config_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("auth_mode"), "{reason}");
    // The default profile carries ZeroClaw's built-in auto-approved tools.
    let fragment: Config = toml::from_str(&config_out).expect("loads");
    let profile = fragment
        .risk_profiles
        .get("default")
        .expect("default profile");
    for tool in zeroclaw_config::schema::default_auto_approve() {
        assert!(profile.auto_approve.contains(&tool), "{tool} missing");
    }
}

/// Every file and directory of `root` with its bytes and metadata that an export could change.
pub(crate) fn snapshot_of(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32, i64)> {
    let mut out = BTreeMap::new();
    for entry in walkdir(root) {
        let meta = fs::symlink_metadata(&entry).expect("stat");
        let bytes = if meta.is_file() {
            fs::read(&entry).expect("read")
        } else {
            Vec::new()
        };
        out.insert(
            entry,
            (
                bytes,
                meta.mode(),
                meta.mtime_nsec() + meta.mtime() * 1_000_000_000,
            ),
        );
    }
    out
}

fn walkdir(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if let Ok(entries) = fs::read_dir(root) {
        for entry in entries {
            let entry = entry.expect("entry");
            let meta = fs::symlink_metadata(entry.path()).expect("stat");
            if meta.is_dir() {
                out.extend(walkdir(&entry.path()));
            } else {
                out.push(entry.path());
            }
        }
    }
    out
}

/// Print the oracle's table, then fail on any difference.
fn report(table: &[(String, Vec<String>)]) {
    let mut failed = false;
    for (fixture, differences) in table {
        if differences.is_empty() {
            eprintln!("oracle: {fixture}: equal");
        } else {
            failed = true;
            eprintln!(
                "oracle: {fixture}: DIFFERENT\n  {}",
                differences.join("\n  ")
            );
        }
    }
    assert!(!failed, "the oracle found differences (above)");
}

/// A bundle written by ZeroClaw's own writer (its layout, its headers, its modes, and the
/// `.zeroclaw-export-old-*` leftover its two-rename publish can leave beside the destination)
/// is snapshotted with `snapshot --dir`, diffed against ours (the semantic section reads it and
/// finds no grant), and mounted: the mount shows its files with their modes.
#[test]
fn a_bundle_written_by_zeroclaw_is_snapshotted_diffed_and_mounted() {
    let env = TestEnv::new();
    let root = env.path("install");
    write(
        &root.join("config.toml"),
        br#"
schema_version = 3
[providers.models.openai.main]
model = "gpt-5"
api_key = "sk-zeroclaw-written"
[risk_profiles.default]
level = "full"
[[mcp.servers]]
name = "files"
transport = "stdio"
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem"]
[mcp_bundles.tools]
servers = ["files"]
[agents.main]
model_provider = "openai.main"
risk_profile = "default"
mcp_bundles = ["tools"]
"#,
    );
    let ws = root.join("agents/main/workspace");
    write(&ws.join("notes.md"), b"notes\n");
    write(&ws.join("key.pem"), b"not really a key\n");
    chmod(&ws.join("key.pem"), 0o600);
    let parent = env.path("received");
    let theirs = parent.join("main-bundle");
    zeroclaw_export(&root, "main", &theirs);
    // The leftover of an interrupted two-rename publish, beside the destination.
    write(
        &parent.join(".zeroclaw-export-old-Ab12Cd/zeroclaw-agent.toml"),
        b"format_version = 1\n",
    );

    let id = env.snapshot(&theirs);
    assert_eq!(
        env.cat(&id, "workspace/notes.md"),
        b"notes\n",
        "the snapshot carries ZeroClaw's files"
    );
    let ours = env.path("ours");
    env.run(&[
        "export",
        "main",
        "--install",
        &root.to_string_lossy(),
        "--out",
        &ours.to_string_lossy(),
    ])
    .ok();
    // Same agent, same grants: the semantic section reads ZeroClaw's bundle and marks no grant.
    let diff = env.run(&[
        "diff",
        "--json",
        &ours.to_string_lossy(),
        &theirs.to_string_lossy(),
    ]);
    assert!(diff.code() == 0 || diff.code() == 1, "{}", diff.describe());
    assert!(
        !diff.stdout().contains("\"grant\":true"),
        "a grant between the same agent's two exports\n{}",
        diff.describe()
    );
    let gate = env.run(&[
        "diff",
        "--exit-on-new-grants",
        "--quiet",
        &ours.to_string_lossy(),
        &theirs.to_string_lossy(),
    ]);
    assert_ne!(gate.code(), 3, "{}", gate.describe());
    // The snapshot of ZeroClaw's bundle checks out with its modes (0600 stays 0600).
    let checkout = env.path("checkout");
    env.run(&["checkout", &id, "--out", &checkout.to_string_lossy()])
        .ok();
    let mode = fs::metadata(checkout.join("workspace/key.pem"))
        .expect("key.pem")
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o600);
    if crate::mount::fuse_available() {
        let at = env.path("mnt");
        let _mounted = crate::mount::mount_daemon(&env, &id, &at);
        crate::util::assert_same_tree(&at, &checkout);
        let mode = fs::metadata(at.join("workspace/key.pem"))
            .expect("key.pem over the mount")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
    }
}

/// One key per credential-name rule the README lists, each under a table ZeroClaw carries
/// verbatim (a provider's `provider_extra`): each is blanked, listed in `required_secrets`, and
/// named with its rule; a value under a harmless key, a number and a boolean stay.
#[test]
fn every_credential_name_rule_blanks_and_names_its_key() {
    let env = TestEnv::new();
    let root = env.path("install");
    let rules = [
        ("token", "key named `token`"),
        ("refresh_token", "key ending in `_token`"),
        ("client_secret", "key containing `secret`"),
        ("db_password", "key containing `password` or `passwd`"),
        ("passwd", "key containing `password` or `passwd`"),
        ("apiKey", "key named `api_key`"),
        ("x-api-key", "key named `api_key`"),
        ("accessToken", "key ending in `_token`"),
        ("aws_credentials", "key containing `credential`"),
        ("session_cookie", "key named `cookie`"),
        ("api_key", "key named `api_key`"),
        ("search_api_key", "key named `api_key`"),
        ("ssh_private_key", "key containing `private_key`"),
        ("bearer_auth", "key starting with `bearer`"),
        ("Authorization", "key named `authorization`"),
        (
            "oauth_client_id",
            "name of a field ZeroClaw's schema marks secret",
        ),
    ];
    let mut config = String::from(
        "schema_version = 3\n[risk_profiles.p]\nlevel = \"supervised\"\n\
         [agents.main]\nmodel_provider = \"openai.main\"\nrisk_profile = \"p\"\n\
         [providers.models.openai.main]\nmodel = \"gpt-5\"\n\
         [providers.models.openai.main.provider_extra]\nregion = \"eu-keep\"\n\
         max_tokens = 4096\nuse_token = true\n",
    );
    for (key, _) in rules {
        config.push_str(&format!("{key} = \"value-of-{key}\"\n"));
    }
    write(&root.join("config.toml"), config.as_bytes());
    let out = env.path("out");
    let run = env
        .run(&[
            "--json",
            "export",
            "main",
            "--install",
            &root.to_string_lossy(),
            "--out",
            &out.to_string_lossy(),
        ])
        .ok();
    let report = run.json();
    let named: BTreeMap<String, String> = report["scrubbed_by_name"]
        .as_array()
        .expect("scrubbed_by_name")
        .iter()
        .map(|e| {
            (
                e["path"].as_str().expect("path").to_string(),
                e["rule"].as_str().expect("rule").to_string(),
            )
        })
        .collect();
    let required: Vec<&str> = report["required_secrets"]
        .as_array()
        .expect("required_secrets")
        .iter()
        .map(|v| v.as_str().expect("string"))
        .collect();
    let bundle = fs::read_to_string(out.join("config.toml")).expect("config.toml");
    for (key, rule) in rules {
        let path = format!("providers.models.openai.main.provider_extra.{key}");
        assert_eq!(named.get(&path).map(String::as_str), Some(rule), "{path}");
        assert!(required.contains(&path.as_str()), "{path} not required");
        assert!(!bundle.contains(&format!("value-of-{key}")), "{key} leaked");
    }
    assert_eq!(named.len(), rules.len(), "{named:?}");
    for kept in ["eu-keep", "4096", "use_token = true"] {
        assert!(bundle.contains(kept), "{kept} lost:\n{bundle}");
    }
}
