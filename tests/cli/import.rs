//! `import` (issue 19, second half). Pins: an import into an install as ZeroClaw's setup leaves
//! it lands the agent, its workspace and skills (modes kept), a config that ZeroClaw's `Config`
//! loads and `validate()`s, with the old config kept as a backup and the config's mode kept;
//! colliding aliases of every kind are namespaced with every reference rewritten, the install's
//! own entries and comments untouched; an identical entry is reused; `--map` points at a local
//! entry (and must name one); `--dry-run` writes nothing (every byte and mtime compared);
//! `--expect` refuses a directory changed since review, and takes only a content id (a ref
//! matched the capture it was to check); a dangling reference fails by name and
//! writes nothing; a full disk leaves the install as it was; a kill at each step leaves
//! `config.toml` unchanged and the next import (after `recover`) works; a pipe without
//! `--expect`/`--yes` is refused; the round trip (export, import, export) gives the same
//! bundle up to provenance and the same closure under ZeroClaw's planner, for our bundles and
//! for bundles written by ZeroClaw's own exporter.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use zeroclaw_config::agent_bundle as zc;
use zeroclaw_config::schema::Config;

use crate::export::{export, Install};
use crate::oracle::{snapshot_of, zeroclaw_export, zeroclaw_load};
use crate::util::{chmod, write, Run, TestEnv};

/// An install as ZeroClaw leaves it after its setup: its own `Config::default()` saved by its
/// own `save()` (pruned to the operator's choices), nothing else.
pub(crate) fn onboarded(env: &TestEnv, name: &str) -> PathBuf {
    let root = env.path(name);
    fs::create_dir_all(&root).unwrap();
    let config = Config {
        config_path: root.join("config.toml"),
        data_dir: root.join("workspace"),
        ..Default::default()
    };
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(config.save())
        .expect("ZeroClaw saves its default config");
    assert!(root.join("config.toml").is_file());
    root
}

pub(crate) fn import(env: &TestEnv, source: &Path, install: &Path, extra: &[&str]) -> Run {
    let mut args = vec![
        "import".to_string(),
        source.to_string_lossy().into_owned(),
        "--install".to_string(),
        install.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    env.run(&args)
}

/// Every path under `root` with its bytes and permission bits (directories: no bytes).
pub(crate) fn state(root: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    snapshot_of(root)
        .into_iter()
        .map(|(p, (bytes, mode, _))| (p, (bytes, mode)))
        .collect()
}

/// The bundle of `researcher` from the standard test install, exported by us.
pub(crate) fn our_bundle(env: &TestEnv) -> (Install, PathBuf) {
    let install = Install::new(env);
    let out = env.path("bundle");
    export(env, &install, &out, &[], &[]).ok();
    (install, out)
}

/// The content id and the snapshot id a dry run reports for `bundle`.
fn reviewed(env: &TestEnv, bundle: &Path, install: &Path) -> (String, String) {
    let run = env.run(&[
        "--json",
        "import",
        &bundle.to_string_lossy(),
        "--install",
        &install.to_string_lossy(),
        "--dry-run",
    ]);
    let json = run.ok().json();
    (
        json["root"].as_str().expect("root").to_string(),
        json["snapshot"].as_str().expect("snapshot").to_string(),
    )
}

pub(crate) fn loads(root: &Path) -> Config {
    let text = fs::read_to_string(root.join("config.toml")).unwrap();
    let config: Config = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("the imported config does not load in ZeroClaw: {e}\n{text}"));
    config
        .validate()
        .unwrap_or_else(|e| panic!("the imported config fails validate(): {e:#}\n{text}"));
    zeroclaw_load(root, &text)
}

/// Asserts that `diff A B` of two bundles finds nothing but the one entry a round trip cannot
/// keep: the first export forced `delegate_same_risk_profile = false` and listed that as
/// dropped; the imported agent already has it false, so its export has nothing to drop. The
/// export time is not a change (diff leaves it out).
fn same_up_to_provenance(env: &TestEnv, a: &Path, b: &Path) {
    let diff = env.run(&["diff", &a.to_string_lossy(), &b.to_string_lossy()]);
    let changes: Vec<String> = diff
        .stdout()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Agent bundle changes"))
        .map(str::to_string)
        .collect();
    let expected = [
        "manifest dropped agents.researcher.delegate_same_risk_profile (relational): removed",
        "M\tzeroclaw-agent.toml",
    ];
    assert!(
        changes.is_empty() || changes == expected,
        "{}",
        diff.describe()
    );
}

/// What an operator does after the import: `zeroclaw config set` each listed secret (here a
/// plain value written into the config, as ZeroClaw does with `secrets.encrypt = false`).
fn fill_secrets(root: &Path, run: &Run) {
    let path = root.join("config.toml");
    let mut doc: toml_edit::DocumentMut = fs::read_to_string(&path).unwrap().parse().unwrap();
    for (n, line) in run.stdout().lines().enumerate() {
        let Some(dotted) = line.trim().strip_prefix("zeroclaw config set ") else {
            continue;
        };
        let segs: Vec<&str> = dotted.split('.').collect();
        let mut node = doc.as_item_mut();
        let mut i = 0;
        while i + 1 < segs.len() {
            node = match node {
                toml_edit::Item::ArrayOfTables(servers) => {
                    let t = servers
                        .iter_mut()
                        .find(|t| t.get("name").and_then(|v| v.as_str()) == Some(segs[i]))
                        .expect("server");
                    i += 1;
                    t.get_mut(segs[i]).expect("key")
                }
                other => other.get_mut(segs[i]).expect("key"),
            };
            i += 1;
        }
        node[segs[segs.len() - 1]] = toml_edit::value(format!("filled-{n}"));
    }
    fs::write(&path, doc.to_string()).unwrap();
}

/// ZeroClaw's planner's closure of `alias`: config, secrets, flags (paths), skill sources.
fn closure(root: &Path, alias: &str) -> (toml::Table, Vec<String>, Vec<String>, Vec<String>) {
    let config = loads(root);
    let plan = zc::plan_export(&config, alias).expect("ZeroClaw plans the export");
    (
        plan.config,
        plan.required_secrets,
        plan.risk_flags
            .iter()
            .map(|f| format!("{:?} {}", f.kind, f.path))
            .collect(),
        plan.skill_sources
            .iter()
            .map(|s| format!("{} {}", s.alias, s.relative.display()))
            .collect(),
    )
}

#[test]
fn import_into_an_onboarded_install_round_trips() {
    let env = TestEnv::new();
    let (x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    chmod(&y.join("config.toml"), 0o640);
    let before = fs::read(y.join("config.toml")).unwrap();
    let (id, _) = reviewed(&env, &bundle, &y);
    let run = import(&env, &bundle, &y, &["--expect", &id[..16]]).ok();
    let out = run.stdout();
    assert_eq!(run.last_line(), id, "{}", run.describe());
    // In a pipe, the secrets are lines to run, never prompts.
    assert!(
        out.contains("zeroclaw config set providers.models.anthropic.main.api_key"),
        "{out}"
    );
    assert!(out.contains("Capabilities granted"), "{out}");

    let config = loads(&y);
    assert!(config.agents.contains_key("researcher"));
    let meta = fs::metadata(y.join("config.toml")).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640, "the config keeps its mode");
    let backups: Vec<PathBuf> = fs::read_dir(&y)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".bak"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(fs::read(&backups[0]).unwrap(), before);
    let ws = y.join("agents/researcher/workspace");
    assert_eq!(fs::read(ws.join("notes/plan.md")).unwrap(), b"plan\n");
    assert!(!ws.join("memory").exists());
    let run_sh = y.join("shared/skills/research_tools/web_search/run.sh");
    assert_eq!(fs::metadata(&run_sh).unwrap().mode() & 0o777, 0o755);
    assert!(y.join(".zeroclaw-bundle/imports/researcher.toml").is_file());
    // No secret of X reached Y.
    for secret in crate::export::SECRETS {
        let text = fs::read_to_string(y.join("config.toml")).unwrap();
        assert!(!text.contains(secret));
    }

    // Export again from Y once the secrets are filled: the same bundle up to provenance, the
    // same closure.
    fill_secrets(&y, &run);
    let again = env.path("again");
    let rerun = env.run(&[
        "export",
        "researcher",
        "--install",
        &y.to_string_lossy(),
        "--out",
        &again.to_string_lossy(),
    ]);
    rerun.ok();
    same_up_to_provenance(&env, &bundle, &again);
    // (Required secrets differ by design: X has its keys, Y has none to scrub yet.)
    let (xc, _, xf, xk) = closure(&x.root, "researcher");
    let (yc, _, yf, yk) = closure(&y, "researcher");
    assert_eq!((xf, xk), (yf, yk));
    // The config closure as ZeroClaw means it (secrets blank on both sides).
    assert_eq!(xc, yc);
}

#[test]
fn a_pipe_needs_expect_or_yes_and_a_second_import_runs_after_it() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let before = state(&y);
    import(&env, &bundle, &y, &[]).fails(1, "--expect");
    assert_eq!(state(&y), before);
    import(&env, &bundle, &y, &["--yes"]).ok();
    // The same bundle again is up to date (tests/cli/update.rs); as a second agent it runs
    // after the first: the agent is added, everything else identical and reused.
    let run = import(&env, &bundle, &y, &["--yes", "--as", "researcher_imported"]).ok();
    assert!(
        run.stdout().contains("researcher_imported"),
        "{}",
        run.describe()
    );
    let text = fs::read_to_string(y.join("config.toml")).unwrap();
    assert_eq!(text.matches("[risk_profiles.guarded]").count(), 1, "{text}");
    assert_eq!(text.matches("[[mcp.servers]]").count(), 1, "{text}");
    assert!(y
        .join("agents/researcher_imported/workspace/notes.md")
        .is_file());
    loads(&y);
}

pub(crate) const CROWDED: &str = r#"schema_version = 3

# The operator's own notes: kept.
[providers.models.anthropic.main]
model = "claude-local"   # a different model
api_key = "sk-local-anthropic"

[risk_profiles.guarded]
level = "full"

[skill_bundles.research_tools]
include = ["local_only"]

[mcp_bundles.research]
servers = ["github"]

[[mcp.servers]]
name = "github"
command = "local-github-mcp"

[agents.researcher]
model_provider = "anthropic.main"
risk_profile = "guarded"
mcp_bundles = ["research"]
skill_bundles = ["research_tools"]
"#;

#[test]
fn colliding_aliases_of_every_kind_are_namespaced_and_references_follow() {
    let env = TestEnv::new();
    let (x, bundle) = our_bundle(&env);
    let y = env.path("y");
    write(&y.join("config.toml"), CROWDED.as_bytes());
    write(
        &y.join("shared/skills/research_tools/local_only/SKILL.md"),
        b"# mine\n",
    );
    write(&y.join("agents/researcher/workspace/mine.md"), b"mine\n");
    let before = state(&y);
    let run = import(&env, &bundle, &y, &["--yes"]).ok();
    let text = fs::read_to_string(y.join("config.toml")).unwrap();
    // Nothing of the install's own text is gone or changed: only lines were added.
    let removed: Vec<String> = similar::TextDiff::from_lines(CROWDED, &text)
        .iter_all_changes()
        .filter(|c| c.tag() == similar::ChangeTag::Delete)
        .map(|c| c.value().to_string())
        .collect();
    assert!(removed.is_empty(), "removed {removed:?}\n{text}");
    assert!(text.contains("# The operator's own notes: kept."));
    assert!(text.contains("# a different model"));
    // Every old file is as it was.
    for (path, value) in &before {
        if path != &y.join("config.toml") && path.is_file() {
            assert_eq!(&state(&y)[path], value, "{}", path.display());
        }
    }
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let old: toml::Table = toml::from_str(CROWDED).unwrap();
    for section in ["agents", "risk_profiles", "skill_bundles", "mcp_bundles"] {
        for (k, v) in old[section].as_table().unwrap() {
            assert_eq!(&doc[section][k], v, "{section}.{k} changed");
        }
    }
    let agent = &doc["agents"]["researcher_imported"];
    assert_eq!(agent["risk_profile"].as_str(), Some("guarded_imported"));
    assert_eq!(
        agent["model_provider"].as_str(),
        Some("anthropic.main_imported")
    );
    assert_eq!(
        agent["skill_bundles"].as_array().unwrap()[0].as_str(),
        Some("research_tools_imported")
    );
    assert_eq!(
        agent["mcp_bundles"].as_array().unwrap()[0].as_str(),
        Some("research_imported")
    );
    assert_eq!(
        doc["mcp_bundles"]["research_imported"]["servers"]
            .as_array()
            .unwrap()[0]
            .as_str(),
        Some("github_imported")
    );
    let servers = doc["mcp"]["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[1]["name"].as_str(), Some("github_imported"));
    // The fallback edge of the namespaced provider reaches the provider it was carried with.
    let provider = &doc["providers"]["models"]["anthropic"]["main_imported"];
    assert_eq!(
        provider["fallback"].as_array().unwrap()[0].as_str(),
        Some("openai.backup")
    );
    // Files at the namespaced places; the install's own untouched.
    assert!(y
        .join("shared/skills/research_tools_imported/web_search/run.sh")
        .is_file());
    assert!(y
        .join("agents/researcher_imported/workspace/notes.md")
        .is_file());
    let out = run.stdout();
    assert!(
        out.contains("zeroclaw config set providers.models.anthropic.main_imported.api_key"),
        "{out}"
    );
    // ZeroClaw's planner: the imported agent's closure is the original's, up to the names the
    // import namespaced.
    let (yc, ..) = closure(&y, "researcher_imported");
    let (xc, ..) = closure(&x.root, "researcher");
    let rename = |t: &toml::Table| toml::to_string(t).unwrap().replace("_imported", "");
    assert_eq!(rename(&yc), rename(&xc));
}

#[test]
fn an_identical_entry_is_reused_and_map_points_at_a_local_entry() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = env.path("y");
    let config = "schema_version = 3\n\n[risk_profiles.guarded]\nlevel = \"supervised\"\n\n\
                  [providers.models.openai.backup]\nmodel = \"gpt-backup\"\napi_key = \"sk-mine\"\n\n\
                  [providers.models.openai.local]\nmodel = \"gpt-local\"\n";
    write(&y.join("config.toml"), config.as_bytes());
    // --map to an entry that does not exist: refused by name, nothing written.
    let before = state(&y);
    import(
        &env,
        &bundle,
        &y,
        &["--yes", "--map", "provider.anthropic.main=openai.nowhere"],
    )
    .fails(1, "providers.models.openai.nowhere does not exist");
    assert_eq!(state(&y), before);
    let run = import(
        &env,
        &bundle,
        &y,
        &["--yes", "--map", "provider.anthropic.main=openai.local"],
    )
    .ok();
    let text = fs::read_to_string(y.join("config.toml")).unwrap();
    assert_eq!(text.matches("[risk_profiles.guarded]").count(), 1, "{text}");
    assert_eq!(
        text.matches("[providers.models.openai.backup]").count(),
        1,
        "{text}"
    );
    assert!(!text.contains("anthropic"), "{text}");
    assert!(!text.contains("guarded_imported"), "{text}");
    let doc: toml::Table = toml::from_str(&text).unwrap();
    assert_eq!(
        doc["agents"]["researcher"]["model_provider"].as_str(),
        Some("openai.local")
    );
    // The reused and mapped entries keep their own keys: nothing to fill for them.
    let out = run.stdout();
    assert!(!out.contains("openai.backup.api_key"), "{out}");
    assert!(!out.contains("anthropic.main.api_key"), "{out}");
    assert!(out.contains("mcp.servers.github.env.GITHUB_TOKEN"), "{out}");
    loads(&y);
}

#[test]
fn dry_run_writes_nothing_and_shows_the_plan() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = env.path("y");
    write(&y.join("config.toml"), CROWDED.as_bytes());
    let before = snapshot_of(&y);
    let run = import(&env, &bundle, &y, &["--dry-run"]).ok();
    assert_eq!(snapshot_of(&y), before, "a dry run wrote to the install");
    let out = run.stdout();
    for needle in [
        "+[agents.researcher_imported]",
        "--- a/config.toml",
        "namespace",
        ".bak",
        "agents/researcher_imported/workspace",
        "Dry run: nothing was written.",
    ] {
        assert!(out.contains(needle), "{needle:?} missing:\n{out}");
    }
    let json = env
        .run(&[
            "--json",
            "import",
            &bundle.to_string_lossy(),
            "--install",
            &y.to_string_lossy(),
            "--dry-run",
        ])
        .ok()
        .json();
    assert_eq!(json["dry_run"], true);
    assert_eq!(json["agent"], "researcher_imported");
    assert_eq!(snapshot_of(&y), before);
}

#[test]
fn expect_refuses_a_bundle_changed_since_review() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let (content, snapshot) = reviewed(&env, &bundle, &y);
    write(
        &bundle.join("workspace/notes.md"),
        b"changed after review\n",
    );
    let before = state(&y);
    import(&env, &bundle, &y, &["--expect", &content]).fails(1, "changed since it was reviewed");
    assert_eq!(state(&y), before);
    // What was reviewed is in the store: imported by its snapshot id, it is still exactly
    // the reviewed content, whatever the directory holds now.
    // A prefix of 8 hex digits (32 bits) is matched by a few billion tries at a changed file:
    // refused as an argument, before anything is captured.
    import(&env, Path::new(&snapshot), &y, &["--expect", &content[..8]])
        .fails(1, "at least 16 hex digits");
    assert_eq!(state(&y), before);
    import(
        &env,
        Path::new(&snapshot),
        &y,
        &["--expect", &content[..16]],
    )
    .ok();
    assert_eq!(
        fs::read(y.join("agents/researcher/workspace/notes.md")).unwrap(),
        b"notes\n"
    );
}

/// `--expect` pins a content id only. A ref was no pin: the source is captured first and
/// becomes `agent/<alias>`, so `--expect agent/researcher` matched the very bundle it was to
/// check, and a pack swapped after review for another export of the agent was imported. A ref
/// is refused before anything is captured; a snapshot id is refused with a word on which id to
/// pass.
#[test]
fn expect_takes_a_content_id_never_a_ref_or_a_snapshot_id() {
    let env = TestEnv::new();
    let (x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let (content, snapshot) = reviewed(&env, &bundle, &y);

    // The pack reviewed was swapped for another export of the same agent: unpacked into the
    // receiving store, it is that store's agent/researcher.
    write(&x.ws().join("notes.md"), b"swapped after review\n");
    let swapped = export(&env, &x, &env.path("swapped"), &[], &[]).ok().json()["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    env.run(&["pack", &swapped, "--out", "swapped.zcpack"]).ok();
    let before = state(&y);
    let recv = env.path("recv");
    let run = env
        .run(&[
            "--store",
            recv.to_str().unwrap(),
            "import",
            "swapped.zcpack",
            "--install",
            y.to_str().unwrap(),
            "--expect",
            "agent/researcher",
        ])
        .fails(
            1,
            "--expect agent/researcher: is not a content id; pass the content id `review` \
             printed",
        );
    assert!(run.stderr().contains("no pin"), "{}", run.describe());
    assert_eq!(state(&y), before);
    let recv_list = env.run(&["--store", recv.to_str().unwrap(), "-q", "list"]);
    assert!(
        !recv_list.stdout().contains(&swapped),
        "captured before the argument was checked\n{}",
        recv_list.describe()
    );
    write(
        &bundle.join("workspace/notes.md"),
        b"changed after review\n",
    );
    let before = state(&y);
    let listed = env.run(&["-q", "list"]).ok().stdout();
    for reference in ["agent/researcher", "researcher", "HEAD"] {
        let run = import(&env, &bundle, &y, &["--expect", reference]).fails(
            1,
            &format!(
                "--expect {reference}: is not a content id; pass the content id `review` printed"
            ),
        );
        assert!(run.stderr().contains("no pin"), "{}", run.describe());
        assert_eq!(state(&y), before);
        assert_eq!(env.run(&["-q", "list"]).ok().stdout(), listed, "captured");
    }
    import(&env, &bundle, &y, &["--expect", &"f".repeat(65)]).fails(1, "longer than a content id");
    // The reviewed snapshot by its snapshot id: the right content, the wrong id to pin.
    let run = import(&env, Path::new(&snapshot), &y, &["--expect", &snapshot]).fails(
        1,
        "is the snapshot id of the source, not its content id; pass the content id review \
         printed",
    );
    assert!(run.stderr().contains(&content), "{}", run.describe());
    assert_eq!(state(&y), before);
    // The content id (in any case) imports exactly what was reviewed.
    import(
        &env,
        Path::new(&snapshot),
        &y,
        &["--expect", &content.to_ascii_uppercase()],
    )
    .ok();
    assert_eq!(
        fs::read(y.join("agents/researcher/workspace/notes.md")).unwrap(),
        b"notes\n"
    );
}

#[test]
fn a_dangling_reference_fails_by_name_and_writes_nothing() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let config = bundle.join("config.toml");
    let text = fs::read_to_string(&config).unwrap();
    let text = text.replace("risk_profile = \"guarded\"", "risk_profile = \"ghost\"");
    fs::write(&config, text).unwrap();
    let y = onboarded(&env, "y");
    let before = snapshot_of(&y);
    import(&env, &bundle, &y, &["--yes"])
        .fails(1, "agents.researcher.risk_profile")
        .fails(1, "risk_profiles.ghost");
    assert_eq!(snapshot_of(&y), before);
}

#[test]
fn a_full_disk_leaves_the_install_as_it_was() {
    let mut env = TestEnv::new();
    let Some(disk) = crate::full_disk::Tmpfs::mount(&env.path("disk"), "4m") else {
        return;
    };
    env.store = env.path("store");
    let (_x, bundle) = our_bundle(&env);
    write(
        &bundle.join("workspace/big.bin"),
        &crate::util::bytes(7, 1_500_000),
    );
    let y = disk.path.join("y");
    write(&y.join("config.toml"), CROWDED.as_bytes());
    let mut failures = 0;
    for left in [8u64, 200, 1200, 1600] {
        let filler = disk.fill(left);
        let before = state(&y);
        let run = import(&env, &bundle, &y, &["--yes"]);
        let _ = fs::remove_file(&filler);
        if run.code() == 0 {
            // Enough room after all: undo it for the next round.
            fs::write(y.join("config.toml"), CROWDED).unwrap();
            let _ = fs::remove_dir_all(y.join("agents"));
            let _ = fs::remove_dir_all(y.join("shared"));
            let _ = fs::remove_dir_all(y.join(".zeroclaw-bundle"));
            for e in fs::read_dir(&y).unwrap() {
                let p = e.unwrap().path();
                if p.to_string_lossy().ends_with(".bak") {
                    fs::remove_file(p).unwrap();
                }
            }
            continue;
        }
        assert_eq!(run.code(), 1, "{}", run.describe());
        assert!(
            run.stderr().contains("No space left on device"),
            "left {left} KiB: {}",
            run.describe()
        );
        assert_eq!(state(&y), before, "left {left} KiB: the install changed");
        failures += 1;
    }
    assert!(
        failures > 0,
        "the disk never filled: the test tested nothing"
    );
}

#[test]
fn a_kill_at_each_step_leaves_config_unchanged_and_recover_then_import_works() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    for (seam, path) in [
        ("import-step", "trees"),
        ("before-swap", "workspace"),
        ("import-step", "provenance"),
        ("import-step", "backup"),
        ("import-step", "config"),
    ] {
        let y = env.path(&format!("y-{seam}-{path}"));
        write(&y.join("config.toml"), CROWDED.as_bytes());
        let run = env.run_with(
            &[
                "import",
                &bundle.to_string_lossy(),
                "--install",
                &y.to_string_lossy(),
                "--yes",
            ],
            &[
                ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", path),
                ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -9 $PPID"),
            ],
        );
        assert_ne!(run.code(), 0, "{seam} {path}: {}", run.describe());
        assert_eq!(
            fs::read_to_string(y.join("config.toml")).unwrap(),
            CROWDED,
            "{seam} {path}: config.toml changed"
        );
        // What a killed publish leaves, `recover` removes; then the import runs (a tree that
        // was already published, which no config names, needs --force).
        let ws = y.join("agents/researcher_imported/workspace");
        env.run(&["recover", &ws.to_string_lossy()]);
        import(&env, &bundle, &y, &["--yes", "--force"]).ok();
        loads(&y);
        let leftovers: Vec<String> = fs::read_dir(y.join("agents/researcher_imported"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(leftovers, ["workspace"], "{seam} {path}");
    }
}

#[test]
fn a_bundle_written_by_zeroclaw_imports_like_ours() {
    let env = TestEnv::new();
    let x = Install::new(&env);
    let theirs = env.path("zeroclaw-bundle");
    zeroclaw_export(&x.root, "researcher", &theirs);
    let ours = env.path("our-bundle");
    export(&env, &x, &ours, &[], &[]).ok();
    let y1 = onboarded(&env, "y1");
    let y2 = onboarded(&env, "y2");
    let filled = import(&env, &theirs, &y1, &["--yes"]).ok();
    import(&env, &ours, &y2, &["--yes"]).ok();
    let (c1, _, f1, k1) = closure(&y1, "researcher");
    let (c2, _, f2, k2) = closure(&y2, "researcher");
    let (cx, _, fx, kx) = closure(&x.root, "researcher");
    assert_eq!(
        c1, c2,
        "ZeroClaw's bundle imports to another closure than ours"
    );
    assert_eq!(c1, cx);
    assert_eq!((&f1, &k1), (&fx, &kx));
    assert_eq!((f1, k1), (f2, k2));
    let files = |root: &Path| {
        let mut m: BTreeMap<PathBuf, (Vec<u8>, u32)> = BTreeMap::new();
        for sub in ["agents/researcher/workspace", "shared/skills"] {
            for (p, v) in state(&root.join(sub)) {
                m.insert(p.strip_prefix(root).unwrap().to_path_buf(), v);
            }
        }
        m
    };
    assert_eq!(files(&y1), files(&y2));
    // And exported again from Y1 (secrets filled), it is our bundle up to provenance.
    fill_secrets(&y1, &filled);
    let again = env.path("again");
    env.run(&[
        "export",
        "researcher",
        "--install",
        &y1.to_string_lossy(),
        "--out",
        &again.to_string_lossy(),
    ])
    .ok();
    same_up_to_provenance(&env, &ours, &again);
}

/// On a terminal (a pty from util-linux `script`): the summary is shown and the answer asked,
/// each secret is asked for with the echo off, and a typed one is stored the way ZeroClaw
/// stores secrets (`enc2:`, decrypted by ZeroClaw's own `SecretStore` with the install's key,
/// which is `0600`); it never appears on the terminal or in the store.
#[test]
fn on_a_terminal_it_asks_and_stores_a_typed_secret_encrypted() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let inner = format!(
        "{} import {} --install {}",
        crate::util::BIN,
        bundle.display(),
        y.display()
    );
    let Ok(mut child) = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("ZEROCLAW_BUNDLE_STORE", &env.store)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI needs util-linux `script`"
        );
        eprintln!("skipped: no `script` to make a terminal");
        return;
    };
    let secret = "typed-secret-value-4711";
    {
        // The answer, then the secrets in the manifest's order (two MCP server env values,
        // anthropic.main, openai.backup): the first two skipped, the third typed.
        let mut stdin = child.stdin.take().unwrap();
        for line in ["y", "", "", secret] {
            std::thread::sleep(std::time::Duration::from_millis(700));
            writeln!(stdin, "{line}").unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
    }
    let out = child.wait_with_output().unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("[y/N]"), "{shown}");
    assert!(!shown.contains(secret), "the secret was echoed:\n{shown}");
    assert!(crate::util::files_under(&env.store)
        .iter()
        .all(|(_, bytes)| !crate::util::contains(bytes, secret.as_bytes())));
    let text = fs::read_to_string(y.join("config.toml")).unwrap();
    assert!(!text.contains(secret));
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let sealed = doc["providers"]["models"]["anthropic"]["main"]["api_key"]
        .as_str()
        .unwrap();
    assert!(sealed.starts_with("enc2:"), "{text}");
    let store = zeroclaw_config::secrets::SecretStore::new(&y, true);
    assert_eq!(store.decrypt(sealed).unwrap(), secret);
    let key = fs::metadata(y.join(".secret_key")).unwrap();
    assert_eq!(key.mode() & 0o777, 0o600);
    assert!(
        shown.contains("Stored encrypted: providers.models.anthropic.main.api_key"),
        "{shown}"
    );
    assert!(
        shown.contains("zeroclaw config set providers.models.openai.backup.api_key"),
        "{shown}"
    );
}

/// Copies `bundle` to `name` with its config fragment and manifest edited by `edit`.
pub(crate) fn hostile(
    env: &TestEnv,
    bundle: &Path,
    name: &str,
    edit: impl Fn(String, String) -> (String, String),
) -> PathBuf {
    let out = env.path(name);
    crate::util::copy_tree(bundle, &out);
    let config = fs::read_to_string(out.join("config.toml")).unwrap();
    let manifest = fs::read_to_string(out.join("zeroclaw-agent.toml")).unwrap();
    let (config, manifest) = edit(config, manifest);
    fs::write(out.join("config.toml"), config).unwrap();
    fs::write(out.join("zeroclaw-agent.toml"), manifest).unwrap();
    out
}

/// A hand-edited fragment must not reach outside what an export carries: an agent alias that
/// is a path (`../..`) would put the workspace and the import record outside the install; a
/// `workspace.path` would publish the workspace anywhere (`--force`: replace anything); and
/// cross-agent grants (`workspace.access`, `read_memory_from`, `delegates`) naming a local
/// agent pass ZeroClaw's `validate()` once that agent exists. ZeroClaw's exporter never writes
/// any of them; the import refuses each by name and writes nothing.
#[test]
fn a_fragment_carrying_what_no_export_carries_is_refused() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = env.path("y");
    write(&y.join("config.toml"), CROWDED.as_bytes());
    write(&y.join("agents/researcher/workspace/mine.md"), b"mine\n");
    let before = snapshot_of(&y);
    let outside = env.path("outside");
    let place = outside.to_string_lossy().into_owned();
    let cases: Vec<(&str, PathBuf, &str)> = vec![
        (
            "workspace path",
            hostile(&env, &bundle, "b1", |c, m| {
                let c = format!("{c}\n[agents.researcher.workspace]\npath = \"{place}\"\n");
                (c, m)
            }),
            "agents.researcher.workspace.path",
        ),
        (
            "cross-agent grants",
            hostile(&env, &bundle, "b2", |c, m| {
                let c = c.replace(
                    "[agents.researcher]\n",
                    "[agents.researcher]\ndelegates = [\"researcher\"]\n",
                );
                let c = format!(
                    "{c}\n[agents.researcher.workspace]\naccess = {{ researcher = \"read_write\" }}\n\
                     read_memory_from = [\"researcher\"]\n"
                );
                (c, m)
            }),
            "agents.researcher.delegates, agents.researcher.workspace.access, \
             agents.researcher.workspace.read_memory_from",
        ),
        (
            "alias that is a path",
            hostile(&env, &bundle, "b3", |c, m| {
                let evil = "../../outside";
                (
                    c.replace("agents.researcher", &format!("agents.\"{evil}\"")),
                    m.replace(
                        "root_agent = \"researcher\"",
                        &format!("root_agent = \"{evil}\""),
                    ),
                )
            }),
            "is not a plain agent name",
        ),
    ];
    // The review shows them before the import is tried, in text and JSON.
    let grants = &cases[1].1;
    let text = env.run(&[OsStr::new("review"), grants.as_os_str()]).ok();
    assert!(
        text.stdout().contains("Config no export carries")
            && text
                .stdout()
                .contains("! agents.researcher.workspace.access"),
        "{}",
        text.describe()
    );
    let json = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("review"),
            grants.as_os_str(),
        ])
        .ok()
        .json();
    let listed: Vec<&str> = json["bundle"]["not_exported"]
        .as_array()
        .expect("not_exported")
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [
            "agents.researcher.delegates",
            "agents.researcher.workspace.access",
            "agents.researcher.workspace.read_memory_from"
        ]
    );
    let honest = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("review"),
            bundle.as_os_str(),
        ])
        .ok()
        .json();
    assert_eq!(honest["bundle"]["not_exported"], serde_json::json!([]));
    for (what, source, needle) in cases {
        import(&env, &source, &y, &["--yes", "--force"]).fails(1, needle);
        assert_eq!(snapshot_of(&y), before, "{what}: the install changed");
        assert!(!outside.exists(), "{what}: wrote {}", outside.display());
    }
}

/// A skill bundle `directory` inside the directory of one of the install's own skill bundles
/// would add the carried skills to every local agent using that bundle (ZeroClaw's
/// `validate()` only asks for a unique directory inside `shared/`); one that holds it would
/// replace it under `--force`. Both are refused, `--force` or not, and nothing is written.
#[test]
fn a_skill_directory_inside_or_around_a_local_bundle_is_refused() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = env.path("y");
    write(
        &y.join("config.toml"),
        b"schema_version = 3\n\n# mine\n[skill_bundles.tools]\ndirectory = \"shared/team/tools\"\n",
    );
    write(&y.join("shared/team/tools/good/SKILL.md"), b"# mine\n");
    let before = snapshot_of(&y);
    for (name, directory) in [
        ("inside", "shared/team/tools/research_tools"),
        ("around", "shared/team"),
    ] {
        let source = hostile(&env, &bundle, name, |c, m| {
            let c = c.replace(
                "[skill_bundles.research_tools]\n",
                &format!("[skill_bundles.research_tools]\ndirectory = \"{directory}\"\n"),
            );
            assert!(c.contains(directory), "{c}");
            (c, m)
        });
        import(&env, &source, &y, &["--yes", "--force"])
            .fails(1, "would lie inside or hold skill bundle tools");
        assert_eq!(snapshot_of(&y), before, "{name}: the install changed");
    }
}

/// The plan's config diff shows context lines of the install's own config: a credential the
/// install keeps in plain text beside where the new entries go is masked there, in the text
/// and in `--json`, and so is one of the bundle's own values under a credential-named key.
#[test]
fn the_config_diff_never_shows_a_credential_of_the_install() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = env.path("y");
    let local = "sk-local-NEVER-SHOWN-9931";
    write(
        &y.join("config.toml"),
        format!(
            "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-local\"\n\
             api_key = \"{local}\"\n"
        )
        .as_bytes(),
    );
    let run = import(&env, &bundle, &y, &["--dry-run"]).ok();
    assert!(
        run.stdout()
            .contains("+[providers.models.anthropic.main_imported]"),
        "{}",
        run.describe()
    );
    let json = env
        .run(&[
            "--json",
            "import",
            &bundle.to_string_lossy(),
            "--install",
            &y.to_string_lossy(),
            "--dry-run",
        ])
        .ok();
    for out in [run.stdout(), json.stdout(), run.stderr(), json.stderr()] {
        assert!(
            !out.contains(local),
            "a credential of the install was shown:\n{out}"
        );
    }
    assert!(json.json()["config_diff"]
        .as_str()
        .unwrap()
        .contains("model = \"claude-local\""));
}

/// The import reads and writes provenance in `.zeroclaw-bundle/` of the install: when that is
/// a file, the import fails, leaves the install as it was, and says why once (the OS error is
/// not repeated).
#[test]
fn a_provenance_directory_that_is_a_file_fails_cleanly() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    write(&y.join(".zeroclaw-bundle"), b"not a directory\n");
    let before = state(&y);
    // The plan reads the install's import records (is this content imported already?), so
    // it fails there, before anything is published.
    let run = import(&env, &bundle, &y, &["--yes"]).fails(1, ".zeroclaw-bundle/imports");
    assert_eq!(
        run.stderr().matches("Not a directory").count(),
        1,
        "{}",
        run.describe()
    );
    assert!(
        run.stderr().contains("nothing was written to the install"),
        "{}",
        run.describe()
    );
    assert_eq!(state(&y), before, "the install changed");
}
