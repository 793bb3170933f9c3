//! Agent Plugins end to end through the binary: `export-plugin` writes a plugin the spec's
//! own loader (the `agent-plugins` crate) loads without a diagnostic, with every MCP secret
//! scrubbed and listed and a server the spec cannot carry left out and named; a skill the
//! spec would skip refuses the whole export before anything is written.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::util::*;

const GITHUB_TOKEN: &str = "ghp_PLUGIN-SECRET-TOKEN-1";
const SEARCH_BEARER: &str = "Bearer PLUGIN-SECRET-BEARER-2";

/// An install whose agent `researcher` attaches skill bundle `research_tools` and reaches
/// three MCP servers: a stdio one (`npx`), an https one, and one the spec cannot carry (an
/// absolute host command).
pub fn plugin_install(env: &TestEnv) -> PathBuf {
    let root = env.path("install");
    let config = format!(
        r#"schema_version = 3

[providers.models.anthropic.main]
model = "claude-opus-5"

[risk_profiles.guarded]
level = "supervised"

[skill_bundles.research_tools]
exclude = ["internal-only"]

[mcp_bundles.research]
servers = ["github", "search", "root-shell"]

[[mcp.servers]]
name = "github"
command = "npx"
args = ["-y", "server-github"]
tool_timeout_secs = 30

[mcp.servers.env]
GITHUB_TOKEN = "{GITHUB_TOKEN}"

[[mcp.servers]]
name = "search"
transport = "http"
url = "https://search.example.com/mcp"

[mcp.servers.headers]
Authorization = "{SEARCH_BEARER}"

[[mcp.servers]]
name = "root-shell"
command = "/usr/local/bin/root-shell"

[agents.researcher]
model_provider = "anthropic.main"
risk_profile = "guarded"
skill_bundles = ["research_tools"]
mcp_bundles = ["research"]
"#
    );
    write(&root.join("config.toml"), config.as_bytes());
    write(
        &root.join("agents/researcher/workspace/IDENTITY.md"),
        b"# researcher\n",
    );
    let sk = root.join("shared/skills/research_tools");
    write(
        &sk.join("web-search/SKILL.md"),
        b"---\nname: web-search\ndescription: Search the web and cite sources.\n---\n\n# Web search\n\nRun `scripts/run.sh`.\n",
    );
    write(
        &sk.join("web-search/scripts/run.sh"),
        b"#!/bin/sh\necho search\n",
    );
    chmod(&sk.join("web-search/scripts/run.sh"), 0o755);
    write(
        &sk.join("internal-only/SKILL.md"),
        b"---\nname: internal-only\ndescription: not exported\n---\n",
    );
    root
}

pub fn export_plugin(env: &TestEnv, install: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("--json"),
        OsStr::new("export-plugin"),
        OsStr::new("research_tools"),
        OsStr::new("--install"),
        install.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
    ];
    args.extend(extra.iter().map(OsStr::new));
    env.run(&args)
}

#[test]
fn exported_plugin_loads_under_the_spec_crate_with_no_diagnostics() {
    let env = TestEnv::new();
    let install = plugin_install(&env);
    let out = env.path("plugin");
    let run = export_plugin(&env, &install, &out, &[]).ok();
    let report = run.json();

    let loaded = agent_plugins::load_dir(&out).expect("the exported plugin loads");
    assert!(
        loaded.diagnostics.is_empty(),
        "diagnostics: {:?}",
        loaded.diagnostics
    );
    assert_eq!(loaded.manifest.name.to_string(), "research-tools");
    let skills: Vec<&str> = loaded.skills.iter().map(|s| s.meta.name.as_str()).collect();
    assert_eq!(skills, ["web-search"], "the bundle's exclude filter holds");
    let agent_plugins::McpOutcome::Configured(mcp) = &loaded.mcp else {
        panic!("mcp.json not configured: {:?}", loaded.mcp);
    };
    let names: Vec<&str> = mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "search"]);
    // The skill's own files travel beside it, with their mode.
    let script = out.join("skills/web-search/scripts/run.sh");
    assert_eq!(
        std::fs::read(&script).expect("script"),
        b"#!/bin/sh\necho search\n"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&script)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777,
        0o755
    );

    // Scrubbed exactly as export scrubs, and listed.
    let mcp_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("mcp.json")).expect("mcp.json"))
            .expect("json");
    assert_eq!(mcp_json["mcpServers"]["github"]["env"]["GITHUB_TOKEN"], "");
    assert_eq!(
        mcp_json["mcpServers"]["search"]["headers"]["Authorization"],
        ""
    );
    assert_eq!(
        report["required_secrets"],
        serde_json::json!([
            "mcp.servers.github.env.GITHUB_TOKEN",
            "mcp.servers.search.headers.Authorization"
        ])
    );
    assert_nowhere(&env, &[&run], GITHUB_TOKEN.as_bytes(), "the github token");
    assert_nowhere(
        &env,
        &[&run],
        b"PLUGIN-SECRET-BEARER-2",
        "the search bearer",
    );
    // The server the spec cannot carry is named, with the spec's reason.
    assert_eq!(report["left_out"][0]["server"], "root-shell");
    assert!(
        report["left_out"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("bare executable name")),
        "{report}"
    );
    assert!(!contains(
        &std::fs::read(out.join("mcp.json")).expect("mcp.json"),
        b"root-shell"
    ));
    // What review will show: the command line each stdio server starts.
    assert_eq!(report["servers"][0]["target"], "npx -y server-github");
    assert_eq!(
        report["servers"][1]["target"],
        "https://search.example.com/mcp"
    );
    // ZeroClaw-only fields ride in the manifest's extension.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("plugin.json")).expect("plugin.json"))
            .expect("json");
    assert_eq!(
        manifest["extensions"]["org.zeroclaw.bundle"]["servers"]["github"]["tool_timeout_secs"],
        30
    );
}

#[test]
fn export_plugin_refuses_a_skill_the_spec_would_skip_and_writes_nothing() {
    let env = TestEnv::new();
    let install = plugin_install(&env);
    write(
        &install.join("shared/skills/research_tools/no_frontmatter/SKILL.md"),
        b"# just a heading\n",
    );
    let out = env.path("plugin");
    let run = export_plugin(&env, &install, &out, &[]);
    let run = run.fails(1, "skills/no_frontmatter/");
    assert!(
        run.stderr().contains("nothing was written"),
        "{}",
        run.describe()
    );
    assert!(!out.exists(), "nothing at the destination");
}

#[test]
fn export_plugin_force_replaces_its_own_plugin_only() {
    let env = TestEnv::new();
    let install = plugin_install(&env);
    let out = env.path("plugin");
    export_plugin(&env, &install, &out, &[]).ok();
    export_plugin(&env, &install, &out, &["--force"]).ok();
    let other = env.path("other");
    write(
        &other.join("plugin.json"),
        b"{\"name\": \"someone-else\"}\n",
    );
    export_plugin(&env, &install, &other, &["--force"]).fails(1, "other");
    assert_eq!(
        std::fs::read(other.join("plugin.json")).expect("kept"),
        b"{\"name\": \"someone-else\"}\n"
    );
}

/// A copy of vendored plugin `name` (tests/plugins/ORIGIN.md) in the test's directory.
fn real_plugin(env: &TestEnv, name: &str) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/plugins")
        .join(name);
    let to = env.path(&format!("plugins/{name}"));
    std::fs::create_dir_all(env.path("plugins")).expect("mkdir");
    copy_tree(&from, &to);
    to
}

fn review_json(env: &TestEnv, dir: &Path) -> serde_json::Value {
    env.run(&[OsStr::new("--json"), OsStr::new("review"), dir.as_os_str()])
        .ok()
        .json()
}

fn refused_lines(review: &serde_json::Value) -> Vec<String> {
    review["plugin"]["refused"]
        .as_array()
        .unwrap_or_else(|| panic!("no refused list: {review}"))
        .iter()
        .map(|r| r.as_str().expect("string").to_string())
        .collect()
}

fn server_names(review: &serde_json::Value) -> Vec<String> {
    review["plugin"]["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("no servers: {review}"))
        .iter()
        .map(|s| s["name"].as_str().expect("name").to_string())
        .collect()
}

#[test]
fn review_of_a_published_plugin_shows_every_server_it_starts() {
    let env = TestEnv::new();
    let dir = real_plugin(&env, "core");
    let r = review_json(&env, &dir);
    assert_eq!(r["plugin"]["name"], "agent-plugins-conformance", "{r}");
    assert_eq!(
        r["plugin"]["skills"],
        serde_json::json!(["conformance-guide"])
    );
    // A plugin's `skills/<name>/` is one skill, not a skill bundle of none.
    let parts = r["parts"].to_string();
    assert!(
        parts.contains("skills/conformance-guide") && !parts.contains("\"skills\":0"),
        "{parts}"
    );
    // As published without its probe-workdir, `relative` names a cwd that is not there.
    assert_eq!(server_names(&r), ["default", "root", "data"], "{r}");
    assert!(
        refused_lines(&r)
            .iter()
            .any(|l| l.contains("mcp.json#relative") && l.contains("./probe-workdir")),
        "{r}"
    );
    let default = &r["plugin"]["servers"][0]["target"];
    assert!(
        default.as_str().is_some_and(|t| t
            .starts_with("node '${PLUGIN_ROOT}/dist/probe.mjs' default 'arg with spaces' ''")
            && t.ends_with("(in ${PLUGIN_ROOT})")),
        "the full command line, every argument: {default}"
    );
    let kinds: Vec<&str> = r["plugin"]["grants"]
        .as_array()
        .expect("grants")
        .iter()
        .map(|g| g["kind"].as_str().expect("kind"))
        .collect();
    assert!(
        kinds.contains(&"mcp_server") && kinds.contains(&"process_env"),
        "{kinds:?}"
    );

    std::fs::create_dir(dir.join("probe-workdir")).expect("mkdir");
    write(&dir.join("probe-workdir/README.md"), b"work dir\n");
    let r = review_json(&env, &dir);
    assert_eq!(
        server_names(&r),
        ["default", "relative", "root", "data"],
        "{r}"
    );
    let text = env
        .run(&[OsStr::new("review"), dir.as_os_str()])
        .ok()
        .stdout();
    assert!(
        text.contains("Agent Plugin `agent-plugins-conformance` 0.1.0"),
        "{text}"
    );
    assert!(text.contains("relative (stdio): starts node '${PLUGIN_ROOT}/dist/probe.mjs' relative (in ./probe-workdir)"), "{text}");
}

#[test]
fn review_refuses_each_containment_case_at_its_narrowest_boundary() {
    let env = TestEnv::new();
    let dir = real_plugin(&env, "recovery");
    // As the conformance suite does at run time: a link out of the root.
    std::os::unix::fs::symlink("..", dir.join("escape-link")).expect("symlink");
    let r = review_json(&env, &dir);
    assert_eq!(server_names(&r), ["recovery-valid"], "{r}");
    let refused = refused_lines(&r);
    for (place, why) in [
        ("mcp.json#recovery-invalid", "command"),
        ("mcp.json#recovery-cwd-escape", "./.."),
        ("mcp.json#recovery-cwd-data-escape", "${PLUGIN_DATA}/.."),
        (
            "mcp.json#recovery-cwd-symlink-escape",
            "./escape-link is not a directory inside",
        ),
        ("mcp.json#recovery-unknown-field", "conformanceUnknown"),
        ("mcp.json#recovery-env-plugin-root", "PLUGIN_ROOT"),
        ("mcp.json#recovery-env-plugin-data", "PLUGIN_DATA"),
        ("mcp.json#recovery-http-fragment", "fragment"),
        ("mcp.json#recovery-http-duplicate-headers", "more than once"),
        ("skills/conformance-recovery-invalid/", "YAML"),
        ("plugin.json", "conformanceUnknown"),
    ] {
        assert!(
            refused.iter().any(|l| l.contains(place) && l.contains(why)),
            "{place} ({why}) not refused: {refused:#?}"
        );
    }
    assert_eq!(
        r["plugin"]["skills"],
        serde_json::json!(["conformance-recovery-valid"])
    );

    // `../` in a command, and a bundled command that is a symlink out of the root.
    let mcp = std::fs::read_to_string(dir.join("mcp.json")).expect("mcp.json");
    let mcp = mcp
        .replacen(
            "\"command\": \"node\",\n      \"args\": [\"${PLUGIN_ROOT}/dist/probe.mjs\"]",
            "\"command\": \"./../escape-command-posix\"",
            1,
        )
        .replacen(
            "\"type\": \"stdio\"\n    }",
            "\"type\": \"stdio\",\n      \"command\": \"./bin/tool\"\n    }",
            1,
        );
    write(&dir.join("mcp.json"), mcp.as_bytes());
    std::fs::create_dir(dir.join("bin")).expect("mkdir");
    std::os::unix::fs::symlink("/bin/sh", dir.join("bin/tool")).expect("symlink");
    let r = review_json(&env, &dir);
    let refused = refused_lines(&r);
    assert!(server_names(&r).is_empty(), "{r}");
    assert!(
        refused.iter().any(|l| l.contains("mcp.json#recovery-valid") && l.contains("outside the plugin root")),
        "../ in a command: {refused:#?}"
    );
    assert!(
        refused
            .iter()
            .any(|l| l.contains("mcp.json#recovery-invalid")
                && l.contains("./bin/tool is not a file inside")),
        "a symlinked command: {refused:#?}"
    );
}

#[test]
fn review_of_a_plugin_with_a_broken_mcp_json_keeps_its_skill() {
    let env = TestEnv::new();
    let dir = real_plugin(&env, "invalid-mcp");
    let r = review_json(&env, &dir);
    assert_eq!(
        r["plugin"]["skills"],
        serde_json::json!(["conformance-invalid-mcp-valid"])
    );
    assert!(server_names(&r).is_empty());
    assert!(
        refused_lines(&r)
            .iter()
            .any(|l| l.contains("mcp-disabled") && l.contains("mcp.json")),
        "{r}"
    );
}

#[test]
fn review_refuses_a_whole_plugin_with_an_unknown_schema_or_a_bad_name() {
    let env = TestEnv::new();
    let dir = real_plugin(&env, "core");
    let manifest = std::fs::read_to_string(dir.join("plugin.json")).expect("read");
    for (bad, needle) in [
        (manifest.replace("1.0.0/plugin", "9.0.0/plugin"), "9.0.0"),
        (
            manifest.replace("\"agent-plugins-conformance\"", "\"Bad_Name\""),
            "Bad_Name",
        ),
    ] {
        write(&dir.join("plugin.json"), bad.as_bytes());
        let r = review_json(&env, &dir);
        let rejected = r["plugin"]["rejected"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"));
        assert!(rejected.contains(needle), "{rejected}");
        assert!(server_names(&r).is_empty());
    }
}

#[test]
fn diff_of_two_plugin_versions_marks_a_new_server_and_a_changed_command() {
    let env = TestEnv::new();
    let a = real_plugin(&env, "core");
    let b = env.path("core-v2");
    copy_tree(&a, &b);
    let mcp = std::fs::read_to_string(b.join("mcp.json")).expect("read");
    let mcp = mcp.replacen("\"command\": \"node\"", "\"command\": \"bash\"", 1).replacen(
        "\"mcpServers\": {",
        "\"mcpServers\": {\n    \"exfil\": {\"type\": \"streamable-http\", \"url\": \"https://exfil.example.com/mcp\"},",
        1,
    );
    write(&b.join("mcp.json"), mcp.as_bytes());
    let r = env.run(&[OsStr::new("diff"), a.as_os_str(), b.as_os_str()]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    let text = r.stdout();
    let marked = |needle: &str| {
        text.lines()
            .any(|l| l.starts_with('!') && l.contains(needle))
    };
    assert!(
        marked("mcp.servers.default.command"),
        "changed command: {text}"
    );
    assert!(marked("mcp.servers.exfil"), "new server: {text}");
    assert!(
        !marked("mcp.servers.root"),
        "an unchanged server is no grant: {text}"
    );
    // The same diff in the other direction removes: no new grant there.
    let r = env.run(&[
        OsStr::new("diff"),
        OsStr::new("--exit-on-new-grants"),
        b.as_os_str(),
        a.as_os_str(),
    ]);
    assert!(
        !r.stdout()
            .lines()
            .any(|l| l.starts_with('!') && l.contains("exfil")),
        "{}",
        r.describe()
    );
}

/// Hostile plugins at review: a `SKILL.md` symlinked to `/etc/passwd` is never read (the
/// capture does not follow it; the spec's loader skips the skill, named); 10,000 skills load;
/// a 100 MB `plugin.json` refuses the whole plugin with its size named. Nothing is written
/// outside the store.
#[test]
fn hostile_plugins_at_review() {
    let env = TestEnv::new();
    let dir = real_plugin(&env, "core");
    std::fs::create_dir(dir.join("skills/passwd")).expect("mkdir");
    std::os::unix::fs::symlink("/etc/passwd", dir.join("skills/passwd/SKILL.md")).expect("ln");
    let run = env
        .run(&[OsStr::new("--json"), OsStr::new("review"), dir.as_os_str()])
        .ok();
    let r = run.json();
    assert_eq!(
        r["plugin"]["skills"],
        serde_json::json!(["conformance-guide"]),
        "{r}"
    );
    assert!(
        refused_lines(&r)
            .iter()
            .any(|l| l.contains("skills/passwd/")),
        "the skill is refused, named: {r}"
    );
    let passwd = std::fs::read("/etc/passwd").expect("passwd");
    let first = passwd.split(|b| *b == b'\n').next().expect("a line");
    assert_nowhere(&env, &[&run], first, "/etc/passwd's first line");
    std::fs::remove_dir_all(dir.join("skills/passwd")).expect("rm");

    let many = env.path("many");
    write(
        &many.join("plugin.json"),
        b"{\"$schema\": \"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json\", \"name\": \"many\"}",
    );
    for i in 0..10_000 {
        let name = format!("s{i:05}");
        write(
            &many.join(format!("skills/{name}/SKILL.md")),
            format!("---\nname: {name}\ndescription: skill {i}\n---\n").as_bytes(),
        );
    }
    let mut c = env.cmd();
    c.args([OsStr::new("--json"), OsStr::new("review"), many.as_os_str()]);
    let r = run_within(c, std::time::Duration::from_secs(120))
        .ok()
        .json();
    assert_eq!(r["plugin"]["skills"].as_array().map(Vec::len), Some(10_000));

    let big = env.path("big");
    let mut manifest = b"{\"$schema\": \"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json\", \"name\": \"big\", \"description\": \"".to_vec();
    manifest.resize(100 << 20, b'a');
    manifest.extend_from_slice(b"\"}");
    write(&big.join("plugin.json"), &manifest);
    let r = review_json(&env, &big);
    let rejected = r["plugin"]["rejected"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        rejected.contains("plugin.json") && rejected.contains("104857602 bytes"),
        "{rejected}"
    );
}

/// A fresh install with one agent, `helper`; `local_github` adds a local MCP server named
/// `github` (as the exported plugin's is).
fn base_install(env: &TestEnv, dir: &str, local_github: bool) -> PathBuf {
    let root = env.path(dir);
    let mut config = String::from(
        "schema_version = 3\n\n[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n\
         [risk_profiles.default]\n\n[agents.helper]\nmodel_provider = \"anthropic.main\"\n\
         risk_profile = \"default\"\n",
    );
    if local_github {
        config.push_str(
            "\n[[mcp.servers]]\nname = \"github\"\ncommand = \"/usr/local/bin/local-github\"\n",
        );
    }
    write(&root.join("config.toml"), config.as_bytes());
    write(
        &root.join("agents/helper/workspace/IDENTITY.md"),
        b"# helper\n",
    );
    root
}

fn import_plugin(env: &TestEnv, plugin: &Path, install: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<&OsStr> = vec![
        OsStr::new("--json"),
        OsStr::new("import"),
        plugin.as_os_str(),
        OsStr::new("--install"),
        install.as_os_str(),
        OsStr::new("--yes"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    env.run(&args)
}

/// What an import means to ZeroClaw: the typed plugin entries of the loaded config.
fn meaning(root: &Path) -> serde_json::Value {
    let config = crate::import::loads(root);
    let mut servers: Vec<_> = config.mcp.servers.clone();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    serde_json::json!({
        "skill_bundles": serde_json::to_value(&config.skill_bundles).expect("json"),
        "mcp_bundles": serde_json::to_value(&config.mcp_bundles).expect("json"),
        "servers": serde_json::to_value(&servers).expect("json"),
        "helper_skill_bundles": config.agents["helper"].skill_bundles,
        "helper_mcp_bundles": config.agents["helper"].mcp_bundles,
    })
}

/// Export a skill bundle as a plugin, import it into a fresh install (attached to its
/// agent), export that again: the same plugin, byte for byte (`diff` says nothing), and both
/// imports mean the same to ZeroClaw's `Config`.
#[test]
fn plugin_round_trip_export_import_export() {
    let env = TestEnv::new();
    let source = plugin_install(&env);
    let p1 = env.path("p1");
    export_plugin(&env, &source, &p1, &[]).ok();

    let c = base_install(&env, "c", false);
    let run = import_plugin(&env, &p1, &c, &["--attach", "helper"]).ok();
    let report = run.json();
    assert!(
        c.join("shared/plugins/research_tools/skills/web-search/SKILL.md")
            .is_file(),
        "{report}"
    );
    let p2 = env.path("p2");
    let r = env.run(&[
        OsStr::new("export-plugin"),
        OsStr::new("research_tools"),
        OsStr::new("--install"),
        c.as_os_str(),
        OsStr::new("--out"),
        p2.as_os_str(),
    ]);
    r.ok();
    let diff = env.run(&[OsStr::new("diff"), p1.as_os_str(), p2.as_os_str()]);
    assert_eq!(
        diff.code(),
        0,
        "the round trip changed the plugin: {}",
        diff.describe()
    );

    let d = base_install(&env, "d", false);
    import_plugin(&env, &p2, &d, &["--attach", "helper"]).ok();
    let (mc, md) = (meaning(&c), meaning(&d));
    assert_eq!(mc, md, "both imports mean the same to ZeroClaw");
    assert_eq!(
        mc["helper_mcp_bundles"],
        serde_json::json!(["research_tools"])
    );
    assert_eq!(mc["servers"][0]["name"], "github");
    assert_eq!(mc["servers"][0]["tool_timeout_secs"], 30);
    assert_eq!(mc["servers"][1]["url"], "https://search.example.com/mcp");
}

/// A server named like a local one is namespaced, the local one untouched; without
/// `--attach` no agent reaches the plugin; the blanked credentials are the secrets to fill.
#[test]
fn plugin_import_namespaces_a_colliding_server_and_attaches_only_when_asked() {
    let env = TestEnv::new();
    let source = plugin_install(&env);
    let p1 = env.path("p1");
    export_plugin(&env, &source, &p1, &[]).ok();
    let b = base_install(&env, "b", true);
    let run = import_plugin(&env, &p1, &b, &[]).ok();
    let report = run.json();
    let config = crate::import::loads(&b);
    let names: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "github_imported", "search"], "{report}");
    assert_eq!(config.mcp.servers[0].command, "/usr/local/bin/local-github");
    assert_eq!(config.mcp.servers[1].command, "npx");
    assert_eq!(
        config.mcp_bundles["research_tools"].servers,
        ["github_imported", "search"]
    );
    assert!(config.agents["helper"].skill_bundles.is_empty());
    assert!(config.agents["helper"].mcp_bundles.is_empty());
    let text = report.to_string();
    assert!(
        text.contains("mcp.servers.github_imported.env.GITHUB_TOKEN"),
        "{report}"
    );

    // --attach names an agent that exists, or nothing is written.
    let before = std::fs::read(b.join("config.toml")).expect("config");
    import_plugin(&env, &p1, &b, &["--attach", "nobody"]).fails(1, "--attach nobody");
    assert_eq!(
        std::fs::read(b.join("config.toml")).expect("config"),
        before
    );
}

/// A published plugin: its skill is imported; each server ZeroClaw cannot run as the spec
/// means it (a `${PLUGIN_DATA}`, a `cwd`) and each the spec refuses is named, not imported.
/// `--expect` pins the reviewed content.
#[test]
fn plugin_import_of_published_plugins_names_what_it_refuses() {
    let env = TestEnv::new();
    let dir = real_plugin(&env, "core");
    std::fs::create_dir(dir.join("probe-workdir")).expect("mkdir");
    write(&dir.join("probe-workdir/README.md"), b"work dir\n");
    let install = base_install(&env, "i", false);
    import_plugin(&env, &dir, &install, &["--expect", "0000000000000000"]).fails(1, "expect");
    let review = review_json(&env, &dir);
    let root = review["root"].as_str().expect("root").to_string();
    let run = import_plugin(&env, &dir, &install, &["--expect", &root]).ok();
    let report = run.json().to_string();
    for (server, why) in [
        ("default", "PLUGIN_DATA"),
        ("relative", "cwd"),
        ("root", "cwd"),
        ("data", "cwd"),
    ] {
        assert!(
            report.contains(&format!("mcp.json#{server}: ")) && report.contains(why),
            "{server} not named: {report}"
        );
    }
    let config = crate::import::loads(&install);
    assert!(config.mcp.servers.is_empty());
    assert_eq!(
        config.skill_bundles["agent-plugins-conformance"]
            .directory
            .as_deref(),
        Some("shared/plugins/agent-plugins-conformance/skills")
    );
    assert!(install
        .join("shared/plugins/agent-plugins-conformance/skills/conformance-guide/SKILL.md")
        .is_file());

    // The recovery plugin: its one valid server imports, with ${PLUGIN_ROOT} expanded.
    let rec = real_plugin(&env, "recovery");
    std::os::unix::fs::symlink("..", rec.join("escape-link")).expect("symlink");
    let run = import_plugin(&env, &rec, &install, &[]).ok();
    let config = crate::import::loads(&install);
    let names: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["recovery-valid"], "{}", run.stdout());
    let plugin_root = install.join("shared/plugins/agent-plugins-conformance-recovery");
    assert_eq!(
        config.mcp.servers[0].args,
        [format!("{}/dist/probe.mjs", plugin_root.display())]
    );
    assert!(
        !plugin_root.join("escape-link").exists(),
        "a symlink is never carried"
    );
}

/// Hostile plugins at import: nothing outside the install is written, and what cannot be
/// imported is refused clearly with the install unchanged.
#[test]
fn hostile_plugins_at_import() {
    let env = TestEnv::new();
    let install = base_install(&env, "i", false);
    let before = std::fs::read(install.join("config.toml")).expect("config");

    // SKILL.md -> /etc/passwd: the skill is not imported; no byte of the file lands.
    let dir = real_plugin(&env, "core");
    std::fs::create_dir(dir.join("skills/passwd")).expect("mkdir");
    std::os::unix::fs::symlink("/etc/passwd", dir.join("skills/passwd/SKILL.md")).expect("ln");
    let run = import_plugin(&env, &dir, &install, &[]).ok();
    assert!(run.stdout().contains("skills/passwd/"), "{}", run.stdout());
    let passwd = std::fs::read("/etc/passwd").expect("passwd");
    let first = passwd.split(|b| *b == b'\n').next().expect("a line");
    for (path, bytes) in files_under(&install) {
        assert!(!contains(&bytes, first), "/etc/passwd reached {path}");
    }

    // A 100 MB plugin.json: refused whole, the install as it was before this import.
    let after_first = std::fs::read(install.join("config.toml")).expect("config");
    assert_ne!(after_first, before);
    let big = env.path("big");
    let mut manifest = b"{\"$schema\": \"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json\", \"name\": \"big\", \"description\": \"".to_vec();
    manifest.resize(100 << 20, b'a');
    manifest.extend_from_slice(b"\"}");
    write(&big.join("plugin.json"), &manifest);
    import_plugin(&env, &big, &install, &[]).fails(1, "104857602 bytes");
    assert_eq!(
        std::fs::read(install.join("config.toml")).expect("config"),
        after_first
    );
    assert!(!install.join("shared/plugins/big").exists());

    // 10,000 skills: all imported, under the install.
    let many = env.path("many");
    write(
        &many.join("plugin.json"),
        b"{\"$schema\": \"https://agent-plugins.org/schemas/1.0.0/plugin.schema.json\", \"name\": \"many\"}",
    );
    for i in 0..10_000 {
        let name = format!("s{i:05}");
        write(
            &many.join(format!("skills/{name}/SKILL.md")),
            format!("---\nname: {name}\ndescription: skill {i}\n---\n").as_bytes(),
        );
    }
    let mut c = env.cmd();
    c.args([
        OsStr::new("import"),
        many.as_os_str(),
        OsStr::new("--install"),
        install.as_os_str(),
        OsStr::new("--yes"),
    ]);
    run_within(c, std::time::Duration::from_secs(300)).ok();
    let skills = std::fs::read_dir(install.join("shared/plugins/many/skills"))
        .expect("skills")
        .count();
    assert_eq!(skills, 10_000);
    crate::import::loads(&install);

    // Nothing outside the install: the test directory holds only what the test made.
    let mut top: Vec<String> = std::fs::read_dir(env.path(""))
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["big", "i", "many", "plugins", "store"]);
}

/// Host B with plugin version 1 imported (attached to `helper`), a credential filled in and
/// a note added beside a skill; version 2 exported upstream (a changed skill, a new server):
/// (B, version 2).
fn plugin_update_hosts(env: &TestEnv) -> (PathBuf, PathBuf) {
    let source = plugin_install(env);
    let p1 = env.path("p1");
    export_plugin(env, &source, &p1, &[]).ok();
    let b = base_install(env, "b", true);
    import_plugin(env, &p1, &b, &["--attach", "helper"]).ok();
    let tree = b.join("shared/plugins/research_tools");
    // Here: a credential filled in, a note beside a skill.
    let config_path = b.join("config.toml");
    let filled = std::fs::read_to_string(&config_path)
        .expect("config")
        .replacen("GITHUB_TOKEN = \"\"", "GITHUB_TOKEN = \"local-token\"", 1);
    assert!(filled.contains("local-token"), "{filled}");
    write(&config_path, filled.as_bytes());
    write(&tree.join("skills/web-search/NOTES.md"), b"mine\n");

    // Upstream: the skill changes, a server is added.
    let sk = source.join("shared/skills/research_tools/web-search/SKILL.md");
    write(
        &sk,
        b"---\nname: web-search\ndescription: Search the web and cite sources.\n---\n\n# Web search v2\n",
    );
    let text = std::fs::read_to_string(source.join("config.toml")).expect("config");
    let text = text
        .replace(
            "servers = [\"github\", \"search\", \"root-shell\"]",
            "servers = [\"github\", \"search\", \"root-shell\", \"fetch\"]",
        )
        .replace(
            "[agents.researcher]",
            "[[mcp.servers]]\nname = \"fetch\"\ncommand = \"uvx\"\nargs = [\"mcp-server-fetch\"]\n\n[agents.researcher]",
        );
    write(&source.join("config.toml"), text.as_bytes());
    let p2 = env.path("p2");
    export_plugin(env, &source, &p2, &[]).ok();

    (b, p2)
}

/// A second import of a plugin this install imported before is its update in place, never a
/// second copy beside it: the plugin tree merges three ways (a file added here is kept), the
/// entries its import added merge per key (a credential filled here is kept, the namespaced
/// server keeps its local name), a new server waits for `--accept-grants`, the same version
/// again changes nothing, `rollback plugin.ALIAS` gives back the version before byte for
/// byte, and the `update` verb takes a plugin too.
#[test]
fn a_second_import_of_a_plugin_updates_it_in_place_and_rollback_restores_it() {
    let env = TestEnv::new();
    let (b, p2) = plugin_update_hosts(&env);
    let tree = b.join("shared/plugins/research_tools");
    let config_path = b.join("config.toml");
    let before_config = std::fs::read(&config_path).expect("config");
    let skill = tree.join("skills/web-search/SKILL.md");
    let before_skill = std::fs::read(&skill).expect("skill");

    // Review against the install shows the three-way plan, and writes nothing.
    let review = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("review"),
            p2.as_os_str(),
            OsStr::new("--install"),
            b.as_os_str(),
        ])
        .ok()
        .json();
    assert_eq!(
        review["update_plan"]["kept"],
        serde_json::json!(["skills/web-search/NOTES.md"]),
        "{review}"
    );

    // Without --accept-grants: held, nothing written.
    let held = import_plugin(&env, &p2, &b, &[]);
    assert_ne!(held.code(), 0, "{}", held.describe());
    assert!(
        held.stderr().contains("--accept-grants") && held.stdout().contains("mcp.servers.fetch"),
        "{}",
        held.describe()
    );
    assert_eq!(std::fs::read(&config_path).expect("config"), before_config);
    assert_eq!(std::fs::read(&skill).expect("skill"), before_skill);

    let run = import_plugin(&env, &p2, &b, &["--accept-grants"]).ok();
    let report = run.json();
    assert_eq!(report["alias"], "plugin.research_tools", "{report}");
    assert_eq!(
        report["kept"],
        serde_json::json!(["skills/web-search/NOTES.md"])
    );
    let config = crate::import::loads(&b);
    let bundles: Vec<&String> = config.skill_bundles.keys().collect();
    assert_eq!(bundles, ["research_tools"], "no second copy: {report}");
    assert!(std::fs::read_to_string(&skill)
        .expect("skill")
        .contains("v2"));
    assert_eq!(
        std::fs::read(tree.join("skills/web-search/NOTES.md")).expect("note"),
        b"mine\n",
        "a file added here is kept"
    );
    let names: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "github_imported", "search", "fetch"]);
    assert_eq!(
        config.mcp.servers[1].env["GITHUB_TOKEN"], "local-token",
        "a credential filled here is kept"
    );
    assert_eq!(
        config.mcp_bundles["research_tools"].servers,
        ["fetch", "github_imported", "search"]
    );
    assert_eq!(config.agents["helper"].skill_bundles, ["research_tools"]);
    let after_config = std::fs::read(&config_path).expect("config");

    // The same version again: nothing to do.
    let again = import_plugin(&env, &p2, &b, &[]).ok().json();
    assert_eq!(
        again["up_to_date"]["agent"], "plugin.research_tools",
        "{again}"
    );
    assert_eq!(std::fs::read(&config_path).expect("config"), after_config);

    // Rollback: the version before, byte for byte, the note kept.
    env.run(&[
        "rollback",
        "plugin.research_tools",
        "--install",
        &b.to_string_lossy(),
    ])
    .ok();
    assert_eq!(std::fs::read(&config_path).expect("config"), before_config);
    assert_eq!(std::fs::read(&skill).expect("skill"), before_skill);
    assert!(tree.join("skills/web-search/NOTES.md").is_file());

    // The update verb takes a plugin as import does.
    env.run(&[
        OsStr::new("update"),
        p2.as_os_str(),
        OsStr::new("--install"),
        b.as_os_str(),
        OsStr::new("--accept-grants"),
    ])
    .ok();
    assert_eq!(std::fs::read(&config_path).expect("config"), after_config);

    // An edit made since the update: rollback refuses to overwrite it, naming it, and says
    // what to do (rollback has no --conflicts).
    write(&skill, b"edited here after the update\n");
    let refused = env.run(&[
        "rollback",
        "plugin.research_tools",
        "--install",
        &b.to_string_lossy(),
    ]);
    let refused = refused.fails(1, "skills/web-search/SKILL.md");
    assert!(
        refused.stderr().contains("roll back again") && !refused.stderr().contains("--conflicts"),
        "{}",
        refused.describe()
    );
    assert_eq!(std::fs::read(&config_path).expect("config"), after_config);
}

/// Removing a server upstream grants nothing: an update that only takes a server away needs
/// no `--accept-grants` (the MCP bundle's shorter list is no new grant).
#[test]
fn a_plugin_update_that_removes_a_server_grants_nothing() {
    let env = TestEnv::new();
    let (b, _) = plugin_update_hosts(&env);
    let source = env.path("install");
    let text = std::fs::read_to_string(source.join("config.toml")).expect("config");
    // Version 2 (exported, not imported here) added a server: this version has neither it
    // nor `search`.
    let text = text.replace(
        "servers = [\"github\", \"search\", \"root-shell\", \"fetch\"]",
        "servers = [\"github\", \"root-shell\"]",
    );
    assert!(text.contains("servers = [\"github\", \"root-shell\"]"));
    write(&source.join("config.toml"), text.as_bytes());
    let p3 = env.path("p3");
    export_plugin(&env, &source, &p3, &[]).ok();
    let run = import_plugin(&env, &p3, &b, &[]).ok();
    let report = run.json();
    assert_eq!(report["new_grants"], serde_json::json!([]), "{report}");
    let config = crate::import::loads(&b);
    let names: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["github", "github_imported"], "{report}");
    assert_eq!(
        config.mcp_bundles["research_tools"].servers,
        ["github_imported"]
    );
}

/// A plugin update killed inside the publish of the plugin tree, or before `config.toml`, then
/// `recover --install`: the plugin is wholly the new version (tree and config), never a mix,
/// and nothing is left beside the plugin tree.
#[test]
fn a_plugin_update_killed_mid_way_is_finished_by_recover() {
    for (seam, path) in [
        ("before-swap", "research_tools"),
        ("publish-write", "skills/web-search/SKILL.md"),
        ("update-step", "config"),
    ] {
        let env = TestEnv::new();
        let (b, p2) = plugin_update_hosts(&env);
        let hook = [
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", path),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -9 $PPID; sleep 5"),
        ];
        let args = [
            OsStr::new("import"),
            p2.as_os_str(),
            OsStr::new("--install"),
            b.as_os_str(),
            OsStr::new("--yes"),
            OsStr::new("--accept-grants"),
        ];
        let killed = env.run_with(&args, &hook);
        assert_eq!(
            killed.out.status.code(),
            None,
            "{seam} {path}: killed\n{}",
            killed.describe()
        );
        let recovered = env
            .run(&[
                OsStr::new("recover"),
                OsStr::new("--install"),
                b.as_os_str(),
            ])
            .ok();
        assert!(
            recovered.stdout().contains("finished the update"),
            "{seam} {path}: {}",
            recovered.describe()
        );
        let config = crate::import::loads(&b);
        let names: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["github", "github_imported", "search", "fetch"],
            "{seam} {path}"
        );
        let tree = b.join("shared/plugins/research_tools");
        assert!(
            std::fs::read_to_string(tree.join("skills/web-search/SKILL.md"))
                .expect("skill")
                .contains("v2"),
            "{seam} {path}"
        );
        assert!(tree.join("skills/web-search/NOTES.md").is_file());
        let beside: Vec<String> = std::fs::read_dir(b.join("shared/plugins"))
            .expect("plugins")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(beside, ["research_tools"], "{seam} {path}: left beside");
    }
}

/// A plugin imported from a remote is updated from the remote by name (`update REMOTE/ID`),
/// and `sync` (which follows agents) passes over it instead of failing on it.
#[test]
fn a_plugin_from_a_remote_updates_from_it_and_sync_passes_it_over() {
    let env = TestEnv::new();
    let (b, p2) = plugin_update_hosts(&env);
    let remote = env.path("remote");
    let url = format!("file://{}", remote.display());
    env.run(&["remote", "add", "origin", &url]).ok();
    let id = env.snapshot(&p2);
    env.run(&["push", &id, "origin"]).ok();
    let from_remote = format!("origin/{id}");
    env.run(&[
        "update",
        &from_remote,
        "--install",
        &b.to_string_lossy(),
        "--accept-grants",
    ])
    .ok();
    let config = crate::import::loads(&b);
    assert!(config.mcp.servers.iter().any(|s| s.name == "fetch"));
    let sync = env.run(&[
        "sync",
        "--install",
        &b.to_string_lossy(),
        "--allow-unsigned",
    ]);
    assert!(
        !sync.describe().contains("plugin:"),
        "sync must not follow a plugin: {}",
        sync.describe()
    );
}

/// Published plugins mounted for review, from a snapshot and from a pack: the mounted tree is
/// the plugin byte for byte (every file, mode and name), `review` of the mountpoint sees what
/// `review` of the directory sees (the same servers, the same refusals), real tools read it,
/// and an import from the mountpoint lands the same config as one from the directory.
#[test]
fn published_plugins_mount_for_review_from_a_snapshot_and_a_pack() {
    if !crate::mount::fuse_available() {
        return;
    }
    let env = TestEnv::new();
    for name in ["core", "recovery", "invalid-mcp"] {
        let dir = real_plugin(&env, name);
        let id = env.snapshot(&dir);
        let pack = env.path(&format!("{name}.zbp"));
        env.run(&[
            OsStr::new("pack"),
            OsStr::new(&id),
            OsStr::new("--out"),
            pack.as_os_str(),
        ])
        .ok();
        let from_dir = review_json(&env, &dir);
        assert!(from_dir["plugin"]["name"].is_string(), "{from_dir}");
        for (how, what) in [
            ("snapshot", id.clone()),
            ("pack", pack.to_string_lossy().into_owned()),
        ] {
            let at = env.path(&format!("mnt-{name}-{how}"));
            let _mounted = crate::mount::mount_daemon(&env, &what, &at);
            assert_eq!(read_tree(&at), read_tree(&dir), "{name} from a {how}");
            let mounted = review_json(&env, &at);
            assert_eq!(
                mounted["plugin"], from_dir["plugin"],
                "{name} from a {how}: review of the mount"
            );
            let listed = std::process::Command::new("find")
                .arg(&at)
                .arg("-name")
                .arg("SKILL.md")
                .output()
                .expect("find");
            assert!(
                String::from_utf8_lossy(&listed.stdout).contains("/skills/"),
                "{name} from a {how}: find over the mount"
            );
            if name == "core" {
                let via_mount = base_install(&env, &format!("via-{how}"), false);
                import_plugin(&env, &at, &via_mount, &[]).ok();
                let via_dir = base_install(&env, &format!("direct-{how}"), false);
                import_plugin(&env, &dir, &via_dir, &[]).ok();
                // Each install has its own root in the command paths: compare what the
                // config means with that root taken out.
                let strip = |root: &Path| {
                    meaning(root)
                        .to_string()
                        .replace(&root.to_string_lossy().into_owned(), "ROOT")
                };
                assert_eq!(strip(&via_mount), strip(&via_dir), "{how}");
            }
        }
    }
}

/// A newer version whose skill the spec refuses (its `SKILL.md` a symlink to /etc/passwd):
/// the update plan says so in a note, never drops the skill in silence, and nothing outside
/// the install is touched.
#[test]
fn a_plugin_update_names_what_the_new_version_has_refused() {
    let env = TestEnv::new();
    let (b, p2) = plugin_update_hosts(&env);
    let hostile = env.path("hostile");
    copy_tree(&p2, &hostile);
    let skill = hostile.join("skills/web-search/SKILL.md");
    std::fs::remove_file(&skill).expect("rm");
    std::os::unix::fs::symlink("/etc/passwd", &skill).expect("symlink");
    let passwd = std::fs::read("/etc/passwd").expect("passwd");
    // Review first (it shows the update's plan, and its note), then the update itself.
    let human = env.run(&[
        OsStr::new("review"),
        hostile.as_os_str(),
        OsStr::new("--install"),
        b.as_os_str(),
    ]);
    assert!(human.ok().stdout().contains("note: not imported"));
    let run = import_plugin(&env, &hostile, &b, &["--accept-grants"]).ok();
    let report = run.json();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("not imported") && notes.contains("web-search"),
        "{report}"
    );
    assert_eq!(std::fs::read("/etc/passwd").expect("passwd"), passwd);
}

/// Sets the `version` of the exported plugin at `dir` (its `plugin.json`).
fn set_plugin_version(dir: &Path, version: &str) {
    let path = dir.join("plugin.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("plugin.json")).expect("json");
    manifest["version"] = serde_json::json!(version);
    write(
        &path,
        serde_json::to_string_pretty(&manifest)
            .expect("json")
            .as_bytes(),
    );
}

/// An update to an older version of a plugin (by SemVer) is named a downgrade wherever the
/// operator looks before it is applied (review's plan, the update's plan in JSON and text,
/// its first note) and is refused without --allow-downgrade; a newer version is neither.
#[test]
fn a_plugin_update_to_an_older_version_is_named_a_downgrade() {
    let env = TestEnv::new();
    let source = plugin_install(&env);
    let newer = env.path("newer");
    export_plugin(&env, &source, &newer, &[]).ok();
    set_plugin_version(&newer, "1.3.0");
    let b = base_install(&env, "b", true);
    import_plugin(&env, &newer, &b, &["--attach", "helper"]).ok();

    let older = env.path("older");
    export_plugin(&env, &source, &older, &[]).ok();
    set_plugin_version(&older, "1.2.0");
    let expected = serde_json::json!({"imported": "1.3.0", "incoming": "1.2.0"});
    let review = env
        .run(&[
            OsStr::new("--json"),
            OsStr::new("review"),
            older.as_os_str(),
            OsStr::new("--install"),
            b.as_os_str(),
        ])
        .ok()
        .json();
    assert_eq!(review["update_plan"]["downgrade"], expected, "{review}");
    let dry = env.run(&[
        OsStr::new("update"),
        older.as_os_str(),
        OsStr::new("--install"),
        b.as_os_str(),
        OsStr::new("--dry-run"),
    ]);
    assert!(
        dry.stdout()
            .contains("note: a downgrade: version 1.2.0 is older than version 1.3.0"),
        "{}",
        dry.stdout()
    );
    // Not applied without --allow-downgrade (the import's --yes is no allowance): exit 1,
    // the reason named, nothing written.
    let config_before = std::fs::read(b.join("config.toml")).expect("config");
    let tree = b.join("shared/plugins/research_tools");
    let manifest_before = std::fs::read(tree.join("plugin.json")).expect("manifest");
    let nothing_written = || {
        assert_eq!(
            std::fs::read(b.join("config.toml")).expect("config"),
            config_before
        );
        assert_eq!(
            std::fs::read(tree.join("plugin.json")).expect("manifest"),
            manifest_before
        );
    };
    for refused in [dry, import_plugin(&env, &older, &b, &[])] {
        assert_eq!(refused.code(), 1, "{}", refused.stderr());
        assert!(
            refused.stderr().contains("--allow-downgrade"),
            "{}",
            refused.stderr()
        );
    }
    nothing_written();
    // The library refuses on its own, for a program that links it and asks no question:
    // a plan taken without the allowance (grants accepted, so nothing else stops it) is
    // not applied, and nothing is written.
    let bundles = zeroclaw_bundle::Bundles::open(&env.store).expect("store");
    let request = zeroclaw_bundle::UpdateRequest {
        source: older.as_os_str(),
        install: &b,
        alias: None,
        conflicts: zeroclaw_bundle::ConflictPolicy::Refuse,
        accept_grants: true,
        allow_downgrade: false,
        require: None,
    };
    let plan = bundles
        .update_plan(&request, &zeroclaw_bundle::Silent)
        .expect("plan");
    assert!(plan.unallowed_downgrade().is_some(), "{plan:?}");
    let refused = bundles
        .update(&plan, &zeroclaw_bundle::Silent)
        .expect_err("a downgrade without the allowance is refused");
    assert!(format!("{refused:#}").contains("downgrade"), "{refused:#}");
    nothing_written();
    let applied = import_plugin(&env, &older, &b, &["--allow-downgrade"])
        .ok()
        .json();
    assert_eq!(applied["downgrade"], expected, "{applied}");
    assert_eq!(applied["allow_downgrade"], true, "{applied}");
    assert!(
        applied["notes"][0]
            .as_str()
            .unwrap_or("")
            .starts_with("a downgrade"),
        "{applied}"
    );

    // Forward again: no downgrade.
    let newest = env.path("newest");
    export_plugin(&env, &source, &newest, &[]).ok();
    set_plugin_version(&newest, "1.4.0");
    let forward = import_plugin(&env, &newest, &b, &[]).ok().json();
    assert!(forward.get("downgrade").is_none(), "{forward}");
}
