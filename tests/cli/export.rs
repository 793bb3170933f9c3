//! Agent export end to end through the binary (reference §12.4, the cases that apply on
//! Linux): what the capture carries and skips, the memory filter, skill filters, symlinked
//! and replaced roots, races at the seams, source_missing, and that no secret of the source
//! config reaches any byte of the bundle.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use crate::util::*;

pub const SECRETS: [&str; 4] = [
    "sk-ant-DISTINCT-SECRET-A1",
    "sk-DISTINCT-SECRET-B2",
    "ghp_DISTINCT-SECRET-C3",
    "enc2:DISTINCT-CIPHERTEXT-D4",
];

pub struct Install {
    pub root: PathBuf,
}

impl Install {
    pub fn new(env: &TestEnv) -> Install {
        let root = env.path("install");
        let config = format!(
            r#"schema_version = 3

[providers.models.anthropic.main]
api_key = "{a}"
model = "claude-opus-5"
fallback = ["openai.backup"]

[providers.models.openai.backup]
api_key = "{b}"
model = "gpt-backup"

[risk_profiles.guarded]
level = "supervised"

[skill_bundles.research_tools]
exclude = ["internal_only"]

[mcp_bundles.research]
servers = ["github"]

[[mcp.servers]]
name = "github"
command = "npx"
args = ["-y", "server-github"]

[mcp.servers.env]
GITHUB_TOKEN = "{c}"
OTHER_TOKEN = "{d}"

[agents.researcher]
model_provider = "anthropic.main"
risk_profile = "guarded"
skill_bundles = ["research_tools"]
mcp_bundles = ["research"]
"#,
            a = SECRETS[0],
            b = SECRETS[1],
            c = SECRETS[2],
            d = SECRETS[3]
        );
        write(&root.join("config.toml"), config.as_bytes());
        let ws = root.join("agents/researcher/workspace");
        write(&ws.join("IDENTITY.md"), b"# researcher\n");
        write(&ws.join("notes.md"), b"notes\n");
        write(&ws.join("notes/plan.md"), b"plan\n");
        write(
            &ws.join("memory/brain.db"),
            b"SQLite format 3\0home address",
        );
        write(&ws.join("memory/brain.db-wal"), b"SQLite format 3\0");
        write(&ws.join("MEMORY_SNAPSHOT.md"), b"home address");
        let sk = root.join("shared/skills/research_tools");
        write(&sk.join("web_search/SKILL.md"), b"# web search\n");
        write(&sk.join("web_search/run.sh"), b"#!/bin/sh\n");
        chmod(&sk.join("web_search/run.sh"), 0o755);
        write(&sk.join("internal_only/SKILL.md"), b"internal runbook");
        write(&sk.join(".sync-marker"), b"loose");
        write(&env.path("host/secret.txt"), b"HOST SECRET BYTES");
        Install { root }
    }

    pub fn ws(&self) -> PathBuf {
        self.root.join("agents/researcher/workspace")
    }

    pub fn skills(&self) -> PathBuf {
        self.root.join("shared/skills/research_tools")
    }
}

pub fn export(
    env: &TestEnv,
    install: &Install,
    out: &Path,
    extra: &[&str],
    hook: &[(&str, &str)],
) -> Run {
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("--json"),
        OsStr::new("export"),
        OsStr::new("researcher"),
        OsStr::new("--install"),
        install.root.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    env.run_with(&args, hook)
}

fn hook<'a>(seam: &'a str, path: &'a str, cmd: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", path),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", cmd),
    ]
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn bundle_has_layout_and_no_secret_memory_or_host_bytes() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out/bundle");
    fs::create_dir_all(env.path("out")).unwrap();
    let first = export(&env, &install, &out, &[], &[]).ok();
    let v = first.json();
    assert_eq!(
        names(&out),
        ["config.toml", "skills", "workspace", "zeroclaw-agent.toml"]
    );
    assert_eq!(names(&env.path("out")), ["bundle"], "parent clean");
    assert_eq!(
        names(&out.join("workspace")),
        ["IDENTITY.md", "notes", "notes.md"]
    );
    assert_eq!(names(&out.join("skills/research_tools")), ["web_search"]);
    let run = fs::metadata(out.join("skills/research_tools/web_search/run.sh")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(run.permissions().mode() & 0o111, 0o111, "exec bits survive");
    for (path, bytes) in files_under(&out) {
        for s in SECRETS {
            assert!(
                !contains(&bytes, s.as_bytes()),
                "{path} contains secret {s}"
            );
        }
        assert!(
            !bytes.starts_with(b"SQLite format 3\0"),
            "{path} is a SQLite file"
        );
        assert!(!contains(&bytes, b"home address"), "{path} carries memory");
        assert!(
            !contains(&bytes, b"internal runbook"),
            "{path} carries an excluded skill"
        );
    }
    // The closure parses as TOML, its secrets are blank and listed.
    let config = fs::read_to_string(out.join("config.toml")).unwrap();
    let doc: toml_edit::DocumentMut = config.parse().expect("config.toml parses");
    assert_eq!(
        doc["providers"]["models"]["anthropic"]["main"]["api_key"].as_str(),
        Some("")
    );
    let manifest: toml_edit::DocumentMut = fs::read_to_string(out.join("zeroclaw-agent.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let secrets: Vec<_> = manifest["required_secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert!(
        secrets.contains(&"providers.models.anthropic.main.api_key".to_string()),
        "{secrets:?}"
    );
    assert!(
        secrets.contains(&"mcp.servers.github.env.GITHUB_TOKEN".to_string()),
        "{secrets:?}"
    );
    assert!(
        secrets.contains(&"mcp.servers.github.env.OTHER_TOKEN".to_string()),
        "ciphertext scrubbed too: {secrets:?}"
    );
    assert_eq!(manifest["skill_bundles"].as_array().unwrap().len(), 1);
    assert_eq!(v["skills_carried"], 1);
    // And the JSON report tells the operator how to fill them, naming each path.
    let second = export(&env, &install, &env.path("second"), &[], &[]).ok();
    let j = second.json();
    let set: Vec<&str> = j["set_secrets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        set.contains(&"zeroclaw config set providers.models.anthropic.main.api_key"),
        "{j}"
    );
    assert!(
        set.contains(&"zeroclaw config set mcp.servers.github.env.GITHUB_TOKEN"),
        "{j}"
    );
    assert_eq!(names(&env.path("second")), names(&out));
    let third = env
        .run(&[
            OsStr::new("export"),
            OsStr::new("researcher"),
            OsStr::new("--install"),
            install.root.as_os_str(),
            OsStr::new("--out"),
            env.path("third").as_os_str(),
        ])
        .ok();
    let plain = third.stdout();
    // The secrets reached no byte of the store (objects, catalog, tmp) and no output.
    for s in SECRETS {
        assert_nowhere(&env, &[&first, &second, &third], s.as_bytes(), "export");
    }
    assert!(
        plain.contains("zeroclaw config set providers.models.anthropic.main.api_key"),
        "{plain}"
    );
    assert!(plain.contains("process_spawn"), "{plain}");
}

#[test]
fn socket_symlink_and_hard_link_in_workspace_are_skipped_and_counted() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let ws = install.ws();
    let _sock = std::os::unix::net::UnixListener::bind(ws.join("agent.sock")).unwrap();
    std::os::unix::fs::symlink(env.path("host/secret.txt"), ws.join("escape.txt")).unwrap();
    fs::hard_link(env.path("host/secret.txt"), ws.join("borrowed.txt")).unwrap();
    let out = env.path("bundle");
    let v = export(&env, &install, &out, &[], &[]).ok().json();
    let t = &v["tallies"][0];
    assert_eq!(t["label"], "workspace");
    assert_eq!(
        (
            t["files"].as_u64(),
            t["special"].as_u64(),
            t["symlinks"].as_u64(),
            t["hard_links"].as_u64()
        ),
        (Some(3), Some(1), Some(1), Some(1)),
        "{v}"
    );
    for (path, bytes) in files_under(&out) {
        assert!(!contains(&bytes, b"HOST SECRET BYTES"), "{path}");
    }
}

#[test]
fn missing_workspace_is_empty_not_an_error() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    fs::remove_dir_all(install.ws()).unwrap();
    let out = env.path("bundle");
    export(&env, &install, &out, &[], &[]).ok();
    assert!(!out.join("workspace").exists());
    assert!(out.join("config.toml").exists());
}

#[test]
fn absent_or_fully_excluded_skill_bundle_is_source_missing() {
    for variant in ["absent", "only-excluded", "only-symlink"] {
        let env = TestEnv::new();
        let install = Install::new(&env);
        let sk = install.skills();
        match variant {
            "absent" => fs::remove_dir_all(&sk).unwrap(),
            "only-excluded" => fs::remove_dir_all(sk.join("web_search")).unwrap(),
            _ => {
                fs::remove_dir_all(sk.join("web_search")).unwrap();
                write(&sk.join("web_search/placeholder"), b"x");
                fs::remove_file(sk.join("web_search/placeholder")).unwrap();
                std::os::unix::fs::symlink(
                    env.path("host/secret.txt"),
                    sk.join("web_search/SKILL.md"),
                )
                .unwrap();
            }
        }
        let out = env.path("bundle");
        let v = export(&env, &install, &out, &[], &[]).ok().json();
        assert!(!out.join("skills").exists(), "{variant}");
        assert_eq!(v["skill_bundles"], serde_json::json!([]), "{variant}");
        let flags = v["risk_flags"].to_string();
        assert!(!flags.contains("carried_skills"), "{variant}: {flags}");
        let dropped = v["dropped"].as_array().unwrap();
        assert!(
            dropped
                .iter()
                .any(|d| d["path"] == "skills/research_tools" && d["reason"] == "source_missing"),
            "{variant}: {dropped:?}"
        );
    }
}

#[test]
fn symlinked_roots_and_ancestors_are_refused() {
    type Mutation = fn(&TestEnv, &Install);
    let cases: [(&str, Mutation); 5] = [
        ("shared/skills -> outside", |env, i| {
            let skills = i.root.join("shared/skills");
            fs::rename(&skills, env.path("outside-skills")).unwrap();
            std::os::unix::fs::symlink(env.path("outside-skills"), &skills).unwrap();
        }),
        ("shared/skills -> inside", |_env, i| {
            let skills = i.root.join("shared/skills");
            fs::rename(&skills, i.root.join("private-skills")).unwrap();
            std::os::unix::fs::symlink(i.root.join("private-skills"), &skills).unwrap();
        }),
        ("agents -> elsewhere", |_env, i| {
            let agents = i.root.join("agents");
            fs::rename(&agents, i.root.join("elsewhere")).unwrap();
            std::os::unix::fs::symlink(i.root.join("elsewhere"), &agents).unwrap();
        }),
        ("workspace is a symlink", |env, i| {
            fs::rename(i.ws(), env.path("real-ws")).unwrap();
            std::os::unix::fs::symlink(env.path("real-ws"), i.ws()).unwrap();
        }),
        ("skill bundle is a symlink", |env, i| {
            fs::rename(i.skills(), env.path("real-skills")).unwrap();
            std::os::unix::fs::symlink(env.path("real-skills"), i.skills()).unwrap();
        }),
    ];
    for (name, mutate) in cases {
        let env = TestEnv::new();
        let install = Install::new(&env);
        mutate(&env, &install);
        let out = env.path("out/bundle");
        fs::create_dir_all(env.path("out")).unwrap();
        let r = export(&env, &install, &out, &[], &[]);
        assert_eq!(r.code(), 1, "{name}: {}", r.describe());
        assert!(r.stderr().contains("symlink"), "{name}: {}", r.describe());
        assert!(names(&env.path("out")).is_empty(), "{name}: parent clean");
        assert_eq!(env.snapshot_count(), 0);
    }
}

#[test]
fn workspace_that_is_a_file_fails() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    fs::remove_dir_all(install.ws()).unwrap();
    write(&install.ws(), b"not a dir");
    let r = export(&env, &install, &env.path("bundle"), &[], &[]);
    r.fails(1, "is not a directory");
    assert!(!env.path("bundle").exists());
}

#[test]
fn root_component_races_fail() {
    // agents classified as a directory, then swapped for a symlink before the open.
    let env = TestEnv::new();
    let install = Install::new(&env);
    let agents = install.root.join("agents");
    let cmd = format!("mv {0} {0}.aside && ln -s {0}.aside {0}", agents.display());
    let r = export(
        &env,
        &install,
        &env.path("bundle"),
        &[],
        &hook("root-open", "/agents", &cmd),
    );
    r.fails(1, "was replaced while it was being opened");
    assert!(!env.path("bundle").exists());
    // shared/skills swapped whole for another real directory.
    let env = TestEnv::new();
    let install = Install::new(&env);
    let skills = install.root.join("shared/skills");
    let cmd = format!("mv {0} {0}.aside && mkdir {0}", skills.display());
    let r = export(
        &env,
        &install,
        &env.path("bundle"),
        &[],
        &hook("root-open", "shared/skills", &cmd),
    );
    r.fails(1, "replaced");
}

/// A fresh install exported to `bundle` with the `classify-open` hook running the command
/// that `cmd` builds when the walker reaches `path`.
fn raced_export(path: &str, cmd: impl Fn(&TestEnv, &Install) -> String) -> (TestEnv, PathBuf, Run) {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("bundle");
    let cmd = cmd(&env, &install);
    let run = export(
        &env,
        &install,
        &out,
        &[],
        &hook("classify-open", path, &cmd),
    );
    (env, out, run)
}

#[test]
fn entry_races_in_workspace_and_skills() {
    // notes.md becomes a relative symlink to memory (inside the root): fail closed.
    let (env, out, run) = raced_export("workspace/notes.md", |_, i| {
        format!(
            "cd {} && rm notes.md && ln -s memory/brain.db notes.md",
            i.ws().display()
        )
    });
    let run = run.fails(1, "workspace/notes.md was swapped for a symlink");
    assert!(!out.exists());
    assert_nowhere(&env, &[&run], b"home address", "notes.md -> memory");
    // web_search becomes a symlink to the excluded internal_only: fail closed.
    let (env, out, run) = raced_export("skills/research_tools/web_search", |_, i| {
        format!(
            "cd {} && mv web_search ws.aside && ln -s internal_only web_search",
            i.skills().display()
        )
    });
    let run = run.fails(
        1,
        "skills/research_tools/web_search was swapped for a symlink",
    );
    assert!(!out.exists());
    assert_nowhere(&env, &[&run], b"internal runbook", "web_search -> excluded");
    // The admitted skill renamed aside and the excluded one renamed into its place: skipped.
    let (env, out, run) = raced_export("skills/research_tools/web_search", |_, i| {
        format!(
            "cd {} && mv web_search ws.aside && mv internal_only web_search",
            i.skills().display()
        )
    });
    let run = run.ok();
    let v = run.json();
    assert_eq!(v["tallies"][1]["replaced"], 1, "{v}");
    for (path, bytes) in files_under(&out) {
        assert!(!contains(&bytes, b"internal runbook"), "{path}");
    }
    assert_nowhere(
        &env,
        &[&run],
        b"internal runbook",
        "excluded skill renamed in",
    );
    // A host file renamed over notes.md: skipped as replaced, host bytes absent.
    let (env, out, run) = raced_export("workspace/notes.md", |env, i| {
        let ws = i.ws();
        format!(
            "cp {} {1}/h && mv {1}/h {1}/notes.md",
            env.path("host/secret.txt").display(),
            ws.display()
        )
    });
    let run = run.ok();
    let v = run.json();
    assert_eq!(v["tallies"][0]["replaced"], 1, "{v}");
    for (path, bytes) in files_under(&out) {
        assert!(!contains(&bytes, b"HOST SECRET BYTES"), "{path}");
    }
    assert_nowhere(&env, &[&run], b"HOST SECRET BYTES", "host file renamed in");
}

#[test]
fn identity_document_kept_only_when_carried() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let cfg = fs::read_to_string(install.root.join("config.toml")).unwrap()
        + "\n[agents.researcher.identity]\nformat = \"aieos\"\naieos_path = \"identity/aieos.json\"\n";
    fs::write(install.root.join("config.toml"), cfg).unwrap();
    let out = env.path("absent");
    export(&env, &install, &out, &[], &[]).ok();
    assert!(!fs::read_to_string(out.join("config.toml"))
        .unwrap()
        .contains("aieos.json"));
    write(&install.ws().join("identity/aieos.json"), b"{}");
    let out = env.path("present");
    export(&env, &install, &out, &[], &[]).ok();
    assert!(fs::read_to_string(out.join("config.toml"))
        .unwrap()
        .contains("identity/aieos.json"));
    assert!(out.join("workspace/identity/aieos.json").is_file());
}

#[test]
fn unknown_alias_and_bad_config_are_clear_errors() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    env.run(&[
        OsStr::new("export"),
        OsStr::new("nobody"),
        OsStr::new("--install"),
        install.root.as_os_str(),
        OsStr::new("--out"),
        OsStr::new("b"),
    ])
    .fails(1, "researcher");
    fs::write(
        install.root.join("config.toml"),
        "[agents.researcher\nbroken",
    )
    .unwrap();
    env.run(&[
        OsStr::new("export"),
        OsStr::new("researcher"),
        OsStr::new("--install"),
        install.root.as_os_str(),
        OsStr::new("--out"),
        OsStr::new("b"),
    ])
    .fails(1, "line 1");
    assert!(!env.path("b").exists());
}

#[test]
fn reexport_of_unchanged_agent_reads_nothing_again() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let r = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "find {} -type f -exec touch -d '2020-01-01' {{}} +",
            install.root.display()
        ))
        .status()
        .unwrap();
    assert!(r.success());
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let first = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("snapshot"),
            OsStr::new("researcher"),
            OsStr::new("--install"),
            install.root.as_os_str(),
        ])
        .ok()
        .json();
    assert!(
        first["work"]["hashed_files"].as_u64().unwrap() >= 4,
        "{first}"
    );
    let second = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("snapshot"),
            OsStr::new("researcher"),
            OsStr::new("--install"),
            install.root.as_os_str(),
        ])
        .ok()
        .json();
    assert_eq!(second["work"]["hashed_files"], 0, "{second}");
    let list = env.run(&["--json", "show", "agent/researcher"]).ok().json();
    assert_eq!(list["snapshot"], second["snapshot"]);
}

/// Names beginning with `.zeroclaw-export` in `dir` (staging or retired trees).
fn hidden(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(".zeroclaw-export"))
        .collect()
}

#[test]
fn destination_overlapping_a_source_is_refused_before_capture() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let before = read_tree(&install.root);
    let inside = install.ws().join("exports/bundle");
    export(&env, &install, &inside, &[], &[]).fails(1, "is inside the source tree");
    let containing = install.root.join("agents");
    export(&env, &install, &containing, &["--force"], &[]).fails(1, "contains the source tree");
    let skills = install.root.join("shared/skills");
    export(&env, &install, &skills, &["--force"], &[]).fails(1, "contains the source tree");
    assert!(
        read_tree(&install.root) == before,
        "the install is untouched"
    );
    assert_eq!(env.snapshot_count(), 0, "nothing was captured");
    // Through a symlink to the workspace: still inside it.
    std::os::unix::fs::symlink(install.ws(), env.path("ws-link")).unwrap();
    export(&env, &install, &env.path("ws-link/bundle"), &[], &[])
        .fails(1, "inside the source tree");
}

#[test]
fn destination_admission_symlink_file_nonempty_and_force() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    // A symlink to a directory, even with --force: refused, target untouched.
    write(&env.path("target/keep.md"), b"keep");
    std::os::unix::fs::symlink(env.path("target"), env.path("link")).unwrap();
    export(&env, &install, &env.path("link"), &["--force"], &[]).fails(1, "is a symlink");
    assert_eq!(names(&env.path("target")), ["keep.md"]);
    // A regular file: refused, untouched.
    write(&env.path("file"), b"file");
    export(&env, &install, &env.path("file"), &["--force"], &[]).fails(1, "not a directory");
    assert_eq!(fs::read(env.path("file")).unwrap(), b"file");
    // Non-empty without --force: refused, byte-for-byte unchanged.
    let old = env.path("out/bundle");
    write(&old.join("config.toml"), b"old config");
    write(&old.join("leftover.toml"), b"leftover");
    write(&old.join("workspace/notes/gone.md"), b"gone");
    let before = read_tree(&old);
    export(&env, &install, &old, &[], &[]).fails(1, "--force");
    assert!(read_tree(&old) == before);
    // --force replaces bundles and previous checkouts only: this is neither (no manifest).
    export(&env, &install, &old, &["--force"], &[]).fails(1, "--replace-any");
    assert!(read_tree(&old) == before);
    // With --replace-any: exactly the new bundle, nothing of the old one, parent clean, and
    // the report says what was replaced.
    let r = export(&env, &install, &old, &["--replace-any"], &[]).ok();
    assert_eq!(r.json()["replaced"]["kind"], "other", "{}", r.describe());
    assert_eq!(
        names(&old),
        ["config.toml", "skills", "workspace", "zeroclaw-agent.toml"]
    );
    assert!(!old.join("workspace/notes/gone.md").exists());
    assert!(fs::read_to_string(old.join("config.toml"))
        .unwrap()
        .contains("agent bundle"));
    assert_eq!(names(&env.path("out")), ["bundle"]);
}

#[test]
fn destination_appearing_during_publish_is_refused() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out/bundle");
    fs::create_dir_all(env.path("out")).unwrap();
    let cmd = format!(
        "mkdir {0} && echo mine > {0}/someone-elses.md",
        out.display()
    );
    let r = export(
        &env,
        &install,
        &out,
        &[],
        &hook("before-swap", "bundle", &cmd),
    );
    assert_eq!(r.code(), 1, "{}", r.describe());
    assert_eq!(fs::read(out.join("someone-elses.md")).unwrap(), b"mine\n");
    assert_eq!(names(&env.path("out")), ["bundle"], "no staging tree left");
}

#[test]
fn unreadable_file_fails_the_export_and_keeps_the_previous_bundle() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out/bundle");
    export(&env, &install, &out, &[], &[]).ok();
    let before = read_tree(&out);
    write(&install.ws().join("locked.md"), b"locked");
    chmod(&install.ws().join("locked.md"), 0o000);
    // Run as nobody: everything else readable, the store and out writable.
    for p in [
        env.dir.path(),
        env.store.as_path(),
        env.path("out").as_path(),
    ] {
        chmod(p, 0o777);
    }
    let chown = std::process::Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(&env.store)
        .arg(env.path("out"))
        .status()
        .unwrap();
    assert!(chown.success());
    run_as_nobody(
        &env,
        &[
            OsStr::new("export"),
            OsStr::new("researcher"),
            OsStr::new("--install"),
            install.root.as_os_str(),
            OsStr::new("--out"),
            out.as_os_str(),
            OsStr::new("--force"),
        ],
    )
    .fails(1, "workspace/locked.md");
    assert!(
        read_tree(&out) == before,
        "the previous bundle is byte-for-byte intact"
    );
    assert!(hidden(&env.path("out")).is_empty());
}

#[test]
fn kill_during_publish_then_recover_gives_a_whole_bundle() {
    // (seam, exchange disabled?, which bundle `recover` must leave)
    let cases = [
        ("publish-staged", false, "old"),
        ("publish-after-exchange", false, "new"),
        ("publish-after-retire", false, "new"),
        ("publish-after-first-rename", true, "old"),
        ("publish-after-second-rename", true, "new"),
    ];
    for (seam, no_exchange, expect) in cases {
        let env = TestEnv::new();
        let install = Install::new(&env);
        let out = env.path("out/bundle");
        export(&env, &install, &out, &[], &[]).ok();
        let old = read_tree(&out);
        write(&install.ws().join("new-note.md"), b"new");
        let mut env_vars = hook(seam, "bundle", "kill -9 $PPID; sleep 5").to_vec();
        if no_exchange {
            env_vars.push(("ZEROCLAW_BUNDLE_TEST_NO_EXCHANGE", "1"));
        }
        let r = export(&env, &install, &out, &["--force"], &env_vars);
        assert_eq!(
            r.out.status.code(),
            None,
            "{seam}: killed: {}",
            r.describe()
        );
        env.run(&[OsStr::new("recover"), out.as_os_str()]).ok();
        assert!(
            hidden(&env.path("out")).is_empty(),
            "{seam}: {:?}",
            names(&env.path("out"))
        );
        let now = read_tree(&out);
        if expect == "old" {
            assert!(now == old, "{seam}: the previous bundle is back");
        } else {
            assert!(
                out.join("workspace/new-note.md").is_file(),
                "{seam}: the new bundle is whole"
            );
            assert!(out.join("zeroclaw-agent.toml").is_file(), "{seam}");
        }
        let again = env
            .run(&[OsStr::new("recover"), out.as_os_str()])
            .ok()
            .stdout();
        assert!(again.contains("nothing to recover"), "{seam}: {again}");
        env.run(&["verify"]).ok();
    }
}

#[test]
fn reexport_reuses_unchanged_files_but_never_a_modified_one() {
    let env = TestEnv::new();
    let install = Install::new(&env);
    let out = env.path("out/bundle");
    export(&env, &install, &out, &[], &[]).ok();
    // Someone edits a published file in place, same size, and puts its mtime back.
    let notes = out.join("workspace/notes.md");
    let reference = env.path("mtime-ref");
    write(&reference, b"");
    let touch_r = |from: &Path, to: &Path| {
        let st = std::process::Command::new("touch")
            .arg("-r")
            .arg(from)
            .arg(to)
            .status();
        assert!(st.unwrap().success());
    };
    let edit_in_place = || {
        touch_r(&notes, &reference);
        fs::write(&notes, b"NOTES\n").unwrap();
        touch_r(&reference, &notes);
    };
    edit_in_place();
    // Right away (the record is racy: reused files are hashed first), then after the racy
    // window (a matching stat is trusted).
    for pause in [0u64, 2100] {
        std::thread::sleep(std::time::Duration::from_millis(pause));
        let v = export(&env, &install, &out, &["--force"], &[]).ok().json();
        let files = read_tree(&out)
            .values()
            .filter(|n| matches!(n, Node::File { .. }))
            .count() as u64;
        let reused = v["reused_files"].as_u64().unwrap();
        assert!(
            reused > 0 && reused < files,
            "pause {pause}: reused {reused} of {files}: {v}"
        );
        assert_eq!(
            fs::read(&notes).unwrap(),
            b"notes\n",
            "pause {pause}: the edit is undone"
        );
        assert_eq!(
            fs::read(out.join("workspace/IDENTITY.md")).unwrap(),
            b"# researcher\n"
        );
        assert!(hidden(&env.path("out")).is_empty());
        let nlink = std::os::unix::fs::MetadataExt::nlink(
            &fs::metadata(out.join("workspace/IDENTITY.md")).unwrap(),
        );
        assert_eq!(
            nlink, 1,
            "the previous tree is gone, the new one owns the inode"
        );
        edit_in_place();
    }
    // Put the edit back once more, then: the bundle equals a fresh checkout of its snapshot.
    export(&env, &install, &out, &["--force"], &[]).ok();
    let id = env.run(&["--json", "show", "agent/researcher"]).ok().json()["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let fresh = env.path("fresh");
    env.run(&[
        OsStr::new("checkout"),
        OsStr::new(&id),
        OsStr::new("--out"),
        fresh.as_os_str(),
    ])
    .ok();
    assert_same_tree(&fresh, &out);
}
