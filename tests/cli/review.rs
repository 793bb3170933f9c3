//! `review` through the binary. Pins: each credential-looking kind (a `.env` assignment, a PEM
//! private key, an SSH `id_*` key, a binary `.key` named whole, a `.git/config` remote with a
//! password, `.aws/credentials`, `.netrc`, a high-entropy token in a note, a token in a config
//! URL) is named by path, line and reason, and no secret value reaches stdout or stderr, in
//! text or JSON; executables, scripts in skills and personal files are listed; a bundle
//! directory, its snapshot, its pack and a remote ref to it review to the same content id; an update of an agent
//! imported earlier (a provenance record in the install) shows its new grants marked, against
//! the imported snapshot or, when the store lacks it, a fresh capture of the local agent; the
//! printed mount command mounts; a typo'd source or install is one clear error and creates no
//! store.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::*;

/// Values planted in the bundle's files and config: none may be printed.
const PLANTED: &[&str] = &[
    "dotenvSECRETvalue1234",
    "MIIEpAIBAAKCAQEA7planted",
    "b3BlbnNzaC1rZXktdjEplanted",
    "gitPASSWORD99",
    "awsSECRETkey/K7MDENGbPxRfiCYEXAMPLEKEY",
    "netrcPASSWORD77",
    "Zx8Qw2Lm4Np6Rt8Vy0Bc3Df5Gh7Jk9",
    "urlTOKENvalue5150",
];

const CONFIG: &str = r#"schema_version = 3

[providers.models.anthropic.main]
api_key = "sk-ant-api-key-scrubbed-on-export-000"
model = "claude-opus-5"

[risk_profiles.guarded]
level = "supervised"

[skill_bundles.tools]

[mcp_bundles.research]
servers = ["github", "kb"]

[[mcp.servers]]
name = "github"
command = "npx"
args = ["-y", "server-github"]

[[mcp.servers]]
name = "kb"
transport = "http"
url = "https://kb.example.com/mcp?token=urlTOKENvalue5150"

[agents.researcher]
model_provider = "anthropic.main"
risk_profile = "guarded"
skill_bundles = ["tools"]
mcp_bundles = ["research"]
"#;

/// An install with agent `researcher` whose workspace and skill hold every kind of
/// credential-looking file, a script, an executable and the personal files.
fn install(env: &TestEnv, name: &str, config: &str) -> PathBuf {
    let root = env.path(name);
    write(&root.join("config.toml"), config.as_bytes());
    let ws = root.join("agents/researcher/workspace");
    write(&ws.join("IDENTITY.md"), b"# researcher\n");
    write(&ws.join("USER.md"), b"The operator likes tea.\n");
    write(&ws.join("MEMORY.md"), b"Long-term notes.\n");
    write(
        &ws.join(".env"),
        b"# local settings\nPORT=8080\nOPENAI_API_KEY=dotenvSECRETvalue1234\n",
    );
    write(
        &ws.join("certs/server.pem"),
        b"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7planted\n-----END RSA PRIVATE KEY-----\n",
    );
    write(
        &ws.join(".ssh/id_ed25519"),
        b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEplanted\n-----END OPENSSH PRIVATE KEY-----\n",
    );
    write(
        &ws.join("certs/client.key"),
        b"\x30\x82\x04\xa4\x00\x01binary-der",
    );
    write(
        &ws.join("repo/.git/config"),
        b"[core]\n\tbare = false\n[remote \"origin\"]\n\turl = https://bob:gitPASSWORD99@git.example.com/r.git\n",
    );
    write(
        &ws.join(".aws/credentials"),
        b"[default]\naws_access_key_id = placeholder\naws_secret_access_key = awsSECRETkey/K7MDENGbPxRfiCYEXAMPLEKEY\n",
    );
    write(
        &ws.join(".netrc"),
        b"machine api.example.com\n  login bob\n  password netrcPASSWORD77\n",
    );
    write(
        &ws.join("notes.md"),
        b"# notes\n\nthe deploy key: Zx8Qw2Lm4Np6Rt8Vy0Bc3Df5Gh7Jk9\n",
    );
    write(&ws.join("tools/build"), b"make all\n");
    chmod(&ws.join("tools/build"), 0o755);
    let sk = root.join("shared/skills/tools/web");
    write(&sk.join("SKILL.md"), b"# web\n");
    write(&sk.join("run.sh"), b"#!/bin/sh\necho run\n");
    chmod(&sk.join("run.sh"), 0o755);
    write(&sk.join("helper.py"), b"print('helper')\n");
    write(
        &sk.join("fetch"),
        b"#!/usr/bin/env python3\nprint('fetch')\n",
    );
    root
}

/// Exports `researcher` of `install` to `out`: the snapshot id.
fn export(env: &TestEnv, install: &Path, out: &Path) -> String {
    let run = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("export"),
            OsStr::new("researcher"),
            OsStr::new("--install"),
            install.as_os_str(),
            OsStr::new("--out"),
            out.as_os_str(),
            OsStr::new("--force"),
        ])
        .ok();
    run.json()["snapshot"].as_str().unwrap().to_string()
}

fn review(env: &TestEnv, args: &[&OsStr]) -> Run {
    let mut all = vec![OsStr::new("review")];
    all.extend_from_slice(args);
    env.run(&all)
}

fn review_json(env: &TestEnv, args: &[&OsStr]) -> (Run, Value) {
    let mut all = vec![OsStr::new("--json"), OsStr::new("review")];
    all.extend_from_slice(args);
    let run = env.run(&all).ok();
    let v = run.json();
    (run, v)
}

fn assert_no_planted_value(runs: &[&Run]) {
    for run in runs {
        for value in PLANTED {
            assert!(
                !contains(&run.out.stdout, value.as_bytes())
                    && !contains(&run.out.stderr, value.as_bytes()),
                "output shows the planted value {value}\n{}",
                run.describe()
            );
        }
    }
}

fn displays(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array: {v}"))
        .iter()
        .map(|e| e["display"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_credential_kind_is_named_by_path_line_and_reason_never_by_value() {
    let env = TestEnv::new();
    let inst = install(&env, "install", CONFIG);
    let bundle = env.path("bundle");
    export(&env, &inst, &bundle);
    let text = review(&env, &[bundle.as_os_str()]).ok();
    let (json, v) = review_json(&env, &[bundle.as_os_str()]);
    assert_no_planted_value(&[&text, &json]);

    let expected: &[(&str, Option<u64>, &str, &str)] = &[
        ("workspace/.env", Some(3), "dotenv_file", ".env file"),
        (
            "workspace/certs/server.pem",
            Some(1),
            "private_key_header",
            "private key header",
        ),
        (
            "workspace/.ssh/id_ed25519",
            Some(1),
            "private_key_header",
            "private key header",
        ),
        (
            "workspace/certs/client.key",
            None,
            "key_file",
            "key file (*.pem, *.key, id_*)",
        ),
        (
            "workspace/repo/.git/config",
            Some(4),
            "git_credentials",
            "git remote with credentials",
        ),
        (
            "workspace/.aws/credentials",
            Some(3),
            "cloud_credentials",
            "cloud credentials file",
        ),
        ("workspace/.netrc", Some(3), "netrc", ".netrc login"),
        (
            "workspace/notes.md",
            Some(3),
            "high_entropy_token",
            "high-entropy token",
        ),
    ];
    let found = v["credentials"].as_array().unwrap();
    let out = text.stdout();
    for (path, line, reason, words) in expected {
        assert!(
            found.iter().any(|f| f["path"] == *path
                && f["line"].as_u64() == *line
                && f["reason"] == *reason),
            "--json lacks {path}:{line:?} {reason}: {}",
            serde_json::to_string_pretty(&v["credentials"]).unwrap()
        );
        let at = match line {
            Some(n) => format!("  - {path}:{n}: {words}\n"),
            None => format!("  - {path} (whole file): {words}\n"),
        };
        assert!(out.contains(&at), "text lacks {at:?}\n{}", text.describe());
    }
    // The token in a config URL is found where it travels: config.toml, by line.
    let config_line = fs::read_to_string(bundle.join("config.toml"))
        .unwrap()
        .lines()
        .position(|l| l.contains("urlTOKENvalue5150"))
        .expect("the URL travels as written") as u64
        + 1;
    assert!(
        found.iter().any(|f| f["path"] == "config.toml"
            && f["line"].as_u64() == Some(config_line)
            && f["reason"] == "url_query_token"),
        "{}",
        v["credentials"]
    );
    // Ordinary files are not flagged.
    assert!(
        !found.iter().any(|f| f["path"] == "workspace/IDENTITY.md"),
        "{}",
        v["credentials"]
    );

    // Executables, scripts in skills, personal files.
    assert_eq!(
        displays(&v, "executables"),
        ["skills/tools/web/run.sh", "workspace/tools/build"]
    );
    let scripts: Vec<(String, String)> = v["skill_scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["display"].as_str().unwrap().to_string(),
                s["why"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        scripts,
        [
            ("skills/tools/web/fetch".to_string(), "shebang".to_string()),
            (
                "skills/tools/web/helper.py".to_string(),
                "extension".to_string()
            ),
            (
                "skills/tools/web/run.sh".to_string(),
                "executable".to_string()
            ),
        ]
    );
    assert_eq!(
        displays(&v, "personal_files"),
        ["workspace/MEMORY.md", "workspace/USER.md"]
    );
    for needle in [
        "Executable files:\n  - skills/tools/web/run.sh\n  - workspace/tools/build\n",
        "  - skills/tools/web/fetch (shebang)\n",
        "Personal files (facts about a person, long-term memory):\n  - workspace/MEMORY.md\n  - workspace/USER.md\n",
        "  zeroclaw config set providers.models.anthropic.main.api_key\n",
        "process_spawn at mcp.servers.github.command",
    ] {
        assert!(out.contains(needle), "text lacks {needle:?}\n{out}");
    }
    assert_eq!(
        v["bundle"]["required_secrets"],
        serde_json::json!(["providers.models.anthropic.main.api_key"])
    );
    assert_eq!(v["bundle"]["skill_bundles"], serde_json::json!(["tools"]));
    assert_eq!(v["binary_files"], 1, "the DER key is binary");

    // The README's "JSON output" row, in the one vocabulary.
    crate::json_schema::check("review", &v, REVIEW);
    crate::json_schema::no_old_keys("review", &v);
    crate::json_schema::check("review credentials", &found[0], CREDENTIAL);
}

/// README, "JSON output": the `review` document.
const REVIEW: crate::json_schema::Spec = &[
    ("source", "obj"),
    ("snapshot", "id"),
    ("root", "id"),
    ("files", "int"),
    ("bytes", "int"),
    ("skipped", "arr"),
    ("bundle", "obj"),
    ("not_a_bundle", "str?"),
    ("credentials", "arr"),
    ("executables", "arr"),
    ("skill_scripts", "arr"),
    ("personal_files", "arr"),
    ("not_scanned", "arr"),
    ("binary_files", "int"),
    ("scanned_files", "int"),
    ("parts", "arr"),
    ("scan_cap", "int"),
    ("install", "any"),
    ("updates", "arr"),
    ("mount", "str"),
];
const CREDENTIAL: crate::json_schema::Spec = &[
    ("path", "str"),
    ("display", "str"),
    ("line", "any"),
    ("reason", "str"),
];

#[test]
fn a_bundle_dir_its_snapshot_and_its_pack_review_to_one_content_id() {
    let env = TestEnv::new();
    let inst = install(&env, "install", CONFIG);
    let bundle = env.path("bundle");
    let snapshot = export(&env, &inst, &bundle);
    let pack = env.path("researcher.pack");
    env.run(&[
        OsStr::new("pack"),
        OsStr::new(&snapshot),
        OsStr::new("--out"),
        pack.as_os_str(),
    ])
    .ok();
    let mut roots = Vec::new();
    for source in [bundle.as_os_str(), OsStr::new(&snapshot), pack.as_os_str()] {
        let (_, v) = review_json(&env, &[source]);
        let quiet = env
            .run(&[OsStr::new("-q"), OsStr::new("review"), source])
            .ok();
        assert_eq!(quiet.stdout(), format!("{}\n", v["root"].as_str().unwrap()));
        let text = review(&env, &[source]).ok();
        let stdout = text.stdout();
        let lines: Vec<&str> = stdout.lines().collect();
        let n = lines.len();
        assert_eq!(
            lines[n - 2],
            format!("Content id: {}", v["root"].as_str().unwrap()),
            "the content id comes last, then the mount command\n{}",
            text.describe()
        );
        roots.push(v["root"].as_str().unwrap().to_string());
        if source == OsStr::new(&snapshot) || source == pack.as_os_str() {
            // The pack carries the very snapshot record: the same snapshot is reviewed.
            assert_eq!(v["snapshot"], snapshot.as_str());
        }
    }
    assert_eq!(roots[0], roots[1], "directory vs snapshot");
    assert_eq!(roots[1], roots[2], "snapshot vs pack");
    // A remote ref is pulled into another store and reviewed there: the same content id.
    let url = format!("file://{}", env.path("remote").display());
    env.run(&["remote", "add", "origin", &url]).ok();
    env.run(&["push", &snapshot, "origin"]).ok();
    let other = TestEnv::new();
    other.run(&["remote", "add", "origin", &url]).ok();
    let remote_ref = format!("origin/{}", &snapshot[..12]);
    let v = other.run(&["--json", "review", &remote_ref]).ok().json();
    assert_eq!(v["source"]["kind"], "remote");
    assert_eq!(v["snapshot"], snapshot.as_str());
    assert_eq!(v["root"], roots[0].as_str(), "remote vs directory");
    // The directory was captured into the store: its snapshot is listed, holding that root.
    let (_, v) = review_json(&env, &[bundle.as_os_str()]);
    let listed = env.run(&["--json", "list"]).ok().json();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["snapshot"] == v["snapshot"] && s["root"] == v["root"]),
        "{listed}"
    );
}

/// Writes the provenance record an import of `snapshot` as agent `alias` would leave.
fn record_import(install: &Path, alias: &str, snapshot: &str) {
    write(
        &install.join(format!(".zeroclaw-bundle/imports/{alias}.toml")),
        format!(
            "alias = \"{alias}\"\nbundle_alias = \"researcher\"\nsnapshot = \"{snapshot}\"\n\
             source = \"/tmp/researcher-bundle\"\nimported_at = \"2026-11-30T10:00:00+00:00\"\n\
             tool_version = \"0.1.0\"\n"
        )
        .as_bytes(),
    );
}

/// The second version of the agent: full autonomy and a new stdio server.
fn widened(config: &str) -> String {
    config
        .replace("level = \"supervised\"", "level = \"full\"")
        .replace(
            "servers = [\"github\", \"kb\"]",
            "servers = [\"github\", \"kb\", \"shell\"]",
        )
        .replace(
            "[agents.researcher]",
            "[[mcp.servers]]\nname = \"shell\"\ncommand = \"bash\"\nargs = [\"-c\", \"serve\"]\n\n[agents.researcher]",
        )
}

#[test]
fn an_update_shows_its_new_grants_marked() {
    let env = TestEnv::new();
    let source = install(&env, "source", CONFIG);
    let v1 = export(&env, &source, &env.path("v1"));
    // The target install imported v1 as `researcher`.
    let target = install(&env, "target", CONFIG);
    record_import(&target, "researcher", &v1);
    fs::write(source.join("config.toml"), widened(CONFIG)).unwrap();
    let v2_dir = env.path("v2");
    export(&env, &source, &v2_dir);

    let (json, v) = review_json(
        &env,
        &[
            v2_dir.as_os_str(),
            OsStr::new("--install"),
            target.as_os_str(),
        ],
    );
    let updates = v["updates"].as_array().unwrap();
    assert_eq!(updates.len(), 1, "{v}");
    let u = &updates[0];
    assert_eq!(u["alias"], "researcher");
    assert_eq!(u["baseline_kind"], "imported");
    assert_eq!(u["baseline"], v1.as_str());
    assert_eq!(u["new_grants"], true, "{u}");
    let grants: Vec<&str> = u["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["grant"] == true)
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert!(
        grants.iter().any(|p| p.contains("full_autonomy")),
        "{grants:?}"
    );
    assert!(
        grants
            .iter()
            .any(|p| p.contains("process_spawn") && p.contains("shell")),
        "{grants:?}"
    );
    let text = review(
        &env,
        &[
            v2_dir.as_os_str(),
            OsStr::new("--install"),
            target.as_os_str(),
        ],
    )
    .ok();
    let out = text.stdout();
    assert!(
        out.contains("Update of agent `researcher` (imported 2026-11-30T10:00:00+00:00"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("  ! manifest risk flag full_autonomy")),
        "the new grant is marked\n{out}"
    );
    assert!(
        out.contains("this update grants the agent something new"),
        "{out}"
    );
    assert_no_planted_value(&[&json, &text]);

    // v1 against itself: nothing new.
    let (_, same) = review_json(
        &env,
        &[OsStr::new(&v1), OsStr::new("--install"), target.as_os_str()],
    );
    assert_eq!(same["updates"][0]["new_grants"], false, "{same}");

    // An import whose snapshot this store lacks: compared with a fresh capture of the agent.
    let gone = "ab".repeat(32);
    record_import(&target, "researcher", &gone);
    let (_, v) = review_json(
        &env,
        &[
            v2_dir.as_os_str(),
            OsStr::new("--install"),
            target.as_os_str(),
        ],
    );
    let u = &v["updates"][0];
    assert_eq!(u["baseline_kind"], "fresh_capture", "{u}");
    assert!(
        u["note"].as_str().unwrap().contains("not in this store"),
        "{u}"
    );
    assert_eq!(u["new_grants"], true, "{u}");

    // No record of this bundle: a new agent.
    let fresh = install(&env, "fresh", CONFIG);
    let text = review(
        &env,
        &[
            v2_dir.as_os_str(),
            OsStr::new("--install"),
            fresh.as_os_str(),
        ],
    )
    .ok();
    assert!(
        text.stdout()
            .contains("no agent imported from a bundle of `researcher`: a new agent"),
        "{}",
        text.describe()
    );
}

#[test]
fn the_printed_mount_command_mounts_what_was_reviewed() {
    if !crate::mount::fuse_available() {
        return;
    }
    let env = TestEnv::new();
    let inst = install(&env, "install", CONFIG);
    let bundle = env.path("bundle");
    export(&env, &inst, &bundle);
    let text = review(&env, &[bundle.as_os_str()]).ok();
    let last = text.last_line();
    let command = last
        .split(": ")
        .nth(1)
        .unwrap_or_else(|| panic!("no mount command in {last:?}"));
    let words: Vec<&str> = command.split(' ').collect();
    assert_eq!(words[..2], ["zeroclaw-bundle", "mount"], "{last}");
    assert_eq!(words[3], "<DIR>", "{last}");
    let at = env.path("mnt");
    let _mounted = crate::mount::mount_daemon(&env, words[2], &at);
    assert_same_tree(&bundle, &at);
}

#[test]
fn a_typo_is_one_clear_error_and_creates_nothing() {
    let env = TestEnv::new();
    review(&env, &[OsStr::new("./reseacher-bundle")]).fails(1, "reseacher-bundle does not exist");
    assert!(!env.store.exists(), "a typo'd path created a store");
    review(&env, &[OsStr::new("reseacher-bundle")]).fails(1, "no store at");
    let inst = install(&env, "install", CONFIG);
    let bundle = env.path("bundle");
    export(&env, &inst, &bundle);
    review(&env, &[OsStr::new("reseacher-bundle")]).fails(
        1,
        "reseacher-bundle is not a file or directory, so it was read as a snapshot",
    );
    review(&env, &[OsStr::new("agent/reseacher")]).fails(1, "could not review agent/reseacher");
    let before = env.snapshot_count();
    review(
        &env,
        &[
            bundle.as_os_str(),
            OsStr::new("--install"),
            env.path("no-install").as_os_str(),
        ],
    )
    .fails(1, "no ZeroClaw install at");
    assert_eq!(
        env.snapshot_count(),
        before,
        "nothing captured for a typo'd --install"
    );
    // A file that is not a pack.
    let junk = env.path("junk.pack");
    write(&junk, b"not a pack");
    review(&env, &[junk.as_os_str()]).fails(1, "could not unpack");
}
