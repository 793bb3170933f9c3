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
