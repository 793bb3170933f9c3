//! Update in place (`update`, `rollback`): a newer bundle of an imported agent is merged into
//! that agent three ways against the version last imported, not imported beside it. Pins:
//! upstream changes taken, local ones kept, memory never touched, the merged config accepted by
//! ZeroClaw's loader; a conflicting edit refused with exit 4 and nothing written, then kept
//! beside as a `.sync-conflict-` copy under `--conflicts copy`; a new grant refused (exit 3)
//! without `--accept-grants`; `rollback` restoring files and `config.toml` byte for byte; the
//! same bundle twice "up to date" with nothing written.

use std::fs;
use std::path::{Path, PathBuf};

use crate::export::{export, Install};
use crate::import::{import, loads, onboarded};
use crate::oracle::snapshot_of;
use crate::util::{copy_tree, read_tree, write, TestEnv};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// Host A (the standard test install) exported once and imported into a fresh host B.
struct Hosts {
    env: TestEnv,
    a: Install,
    b: PathBuf,
}

impl Hosts {
    fn new() -> Hosts {
        let env = TestEnv::new();
        let a = Install::new(&env);
        let first = env.path("bundle1");
        export(&env, &a, &first, &[], &[]).ok();
        let b = onboarded(&env, "b");
        import(&env, &first, &b, &["--yes"]).ok();
        Hosts { env, a, b }
    }

    fn b_ws(&self) -> PathBuf {
        self.b.join("agents/researcher/workspace")
    }

    /// A's agent exported again, as `name`.
    fn export_a(&self, name: &str) -> PathBuf {
        let out = self.env.path(name);
        export(&self.env, &self.a, &out, &[], &[]).ok();
        out
    }

    fn edit_a_config(&self, from: &str, to: &str) {
        edit(&self.a.root.join("config.toml"), from, to);
    }

    fn update(&self, bundle: &Path, extra: &[&str]) -> crate::util::Run {
        let mut args = vec![
            "update".to_string(),
            s(bundle),
            "--install".to_string(),
            s(&self.b),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        self.env.run(&args)
    }
}

fn edit(file: &Path, from: &str, to: &str) {
    let text = fs::read_to_string(file).unwrap();
    assert!(
        text.contains(from),
        "{} lacks {from:?}:\n{text}",
        file.display()
    );
    fs::write(file, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn an_update_takes_upstream_changes_keeps_local_ones_and_rolls_back_byte_for_byte() {
    let h = Hosts::new();
    // A: a workspace file and a config key of the agent's closure.
    write(&h.a.ws().join("notes.md"), b"notes, revised upstream\n");
    h.edit_a_config("model = \"claude-opus-5\"", "model = \"claude-opus-6\"");
    // B: another workspace file, its memory, a local key.
    write(&h.b_ws().join("notes/plan.md"), b"plan, edited on b\n");
    write(&h.b_ws().join("memory/brain.db"), b"b's own memory");
    edit(
        &h.b.join("config.toml"),
        "model = \"gpt-backup\"",
        "model = \"gpt-local\"",
    );
    let second = h.export_a("bundle2");
    let before = snapshot_of(&h.b);
    let config_before = fs::read(h.b.join("config.toml")).unwrap();

    let run = h.update(&second, &[]).ok();
    assert!(
        !h.b.join("agents/researcher_imported").exists(),
        "an update is not a namespaced copy: {}",
        run.describe()
    );
    let ws = h.b_ws();
    assert_eq!(
        fs::read(ws.join("notes.md")).unwrap(),
        b"notes, revised upstream\n",
        "{}",
        run.describe()
    );
    assert_eq!(
        fs::read(ws.join("notes/plan.md")).unwrap(),
        b"plan, edited on b\n"
    );
    assert_eq!(
        fs::read(ws.join("memory/brain.db")).unwrap(),
        b"b's own memory"
    );
    let config = fs::read_to_string(h.b.join("config.toml")).unwrap();
    assert!(
        config.contains("claude-opus-6"),
        "upstream key taken:\n{config}"
    );
    assert!(config.contains("gpt-local"), "local key kept:\n{config}");
    assert!(!config.contains("researcher_imported"), "{config}");
    loads(&h.b);

    // The same bundle again: up to date, nothing written.
    let after = snapshot_of(&h.b);
    let again = h.update(&second, &[]).ok();
    assert!(
        again.stdout().starts_with("Up to date: agent researcher"),
        "{}",
        again.describe()
    );
    assert_eq!(
        snapshot_of(&h.b),
        after,
        "an up-to-date update writes nothing"
    );

    // Rollback: files and config.toml as before the update, byte for byte.
    h.env
        .run(&["rollback", "researcher", "--install", &s(&h.b)])
        .ok();
    assert_eq!(fs::read(h.b.join("config.toml")).unwrap(), config_before);
    let files = |m: &std::collections::BTreeMap<PathBuf, (Vec<u8>, u32, i64)>| {
        m.iter()
            .filter(|(p, _)| p.starts_with(&ws))
            .map(|(p, (bytes, mode, _))| (p.clone(), bytes.clone(), *mode))
            .collect::<Vec<_>>()
    };
    assert_eq!(files(&snapshot_of(&h.b)), files(&before));
    loads(&h.b);
}

#[test]
fn a_conflicting_edit_is_refused_with_exit_4_then_copied_beside_under_conflicts_copy() {
    let h = Hosts::new();
    write(&h.a.ws().join("notes.md"), b"notes from a\n");
    write(&h.b_ws().join("notes.md"), b"notes from b\n");
    let second = h.export_a("bundle2");
    let before = snapshot_of(&h.b);

    let run = h.update(&second, &[]);
    assert_eq!(run.code(), 4, "{}", run.describe());
    assert!(run.stdout().contains("notes.md"), "{}", run.describe());
    assert_eq!(snapshot_of(&h.b), before, "a refused update writes nothing");

    h.update(&second, &["--conflicts", "copy"]).ok();
    let ws = h.b_ws();
    assert_eq!(fs::read(ws.join("notes.md")).unwrap(), b"notes from b\n");
    let copies: Vec<String> = fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("notes.sync-conflict-") && n.ends_with(".md"))
        .collect();
    assert_eq!(copies.len(), 1, "{copies:?}");
    assert_eq!(fs::read(ws.join(&copies[0])).unwrap(), b"notes from a\n");
    loads(&h.b);
}

#[test]
fn a_new_grant_is_refused_with_exit_3_without_accept_grants() {
    let h = Hosts::new();
    h.edit_a_config(
        "level = \"supervised\"",
        "level = \"supervised\"\nauto_approve = [\"shell\"]",
    );
    let second = h.export_a("bundle2");
    let before = snapshot_of(&h.b);

    let run = h.update(&second, &[]);
    assert_eq!(run.code(), 3, "{}", run.describe());
    assert!(run.stdout().contains("auto_approve"), "{}", run.describe());
    assert_eq!(
        snapshot_of(&h.b),
        before,
        "an unaccepted grant writes nothing"
    );

    h.update(&second, &["--accept-grants"]).ok();
    let config = fs::read_to_string(h.b.join("config.toml")).unwrap();
    assert!(config.contains("auto_approve = [\"shell\"]"), "{config}");
    loads(&h.b);
}

/// `import` of a newer version of an imported agent is its update in place (issue 39 item
/// 1): no `<alias>_imported` copy, the three-way plan in a dry run, exit 3 for a new grant
/// until accepted, "up to date" for the same bundle again. `--as NEW` still imports beside it,
/// and `--update` of an agent made by hand is refused naming it.
#[test]
fn import_of_a_newer_version_updates_the_imported_agent_in_place() {
    let h = Hosts::new();
    write(&h.a.ws().join("notes.md"), b"notes, second version\n");
    h.edit_a_config(
        "level = \"supervised\"",
        "level = \"supervised\"\nauto_approve = [\"shell\"]",
    );
    let second = h.export_a("bundle2");
    let b = s(&h.b);
    let before = snapshot_of(&h.b);

    let dry = h
        .env
        .run(&["import", &s(&second), "--install", &b, "--dry-run"]);
    assert_eq!(dry.code(), 3, "{}", dry.describe());
    assert!(
        dry.stdout().contains("Update of agent researcher")
            && dry.stdout().contains("take     notes.md")
            && dry.stdout().contains("auto_approve"),
        "{}",
        dry.describe()
    );
    let refused = h
        .env
        .run(&["import", &s(&second), "--install", &b, "--yes"]);
    assert_eq!(refused.code(), 3, "{}", refused.describe());
    assert_eq!(
        snapshot_of(&h.b),
        before,
        "nothing written before acceptance"
    );

    let done = h
        .env
        .run(&[
            "import",
            &s(&second),
            "--install",
            &b,
            "--yes",
            "--accept-grants",
        ])
        .ok();
    assert!(
        done.stdout().contains("Updated agent researcher"),
        "{}",
        done.describe()
    );
    assert!(!h.b.join("agents/researcher_imported").exists());
    assert_eq!(
        fs::read(h.b_ws().join("notes.md")).unwrap(),
        b"notes, second version\n"
    );
    let config = fs::read_to_string(h.b.join("config.toml")).unwrap();
    assert!(!config.contains("researcher_imported"), "{config}");
    assert!(config.contains("auto_approve = [\"shell\"]"), "{config}");
    loads(&h.b);

    // The same bundle again: up to date, nothing written.
    let after = snapshot_of(&h.b);
    let again = h
        .env
        .run(&["import", &s(&second), "--install", &b, "--yes"])
        .ok();
    assert!(
        again.stdout().contains("up to date") || again.stdout().contains("Up to date"),
        "{}",
        again.describe()
    );
    assert_eq!(snapshot_of(&h.b), after);

    let import_as = |flag: &str, alias: &str| {
        h.env
            .run(&["import", &s(&second), "--install", &b, "--yes", flag, alias])
    };
    // --as NEW: a second agent beside it, as before.
    import_as("--as", "researcher2").ok();
    assert!(h.b.join("agents/researcher2/workspace/notes.md").exists());
    // --update of an agent no import made: refused, naming it.
    import_as("--update", "nobody").fails(1, "agent nobody");
}

/// A newer version whose skill trees changed is refused, naming the skill bundle, with
/// nothing written: an update in place does not carry skill trees, and taking the rest alone
/// would leave the agent with skills it was not shipped with.
/// The skill bundle the agent's import added is merged three ways like the workspace: a skill
/// changed upstream is taken, a skill file edited here is kept, a file changed both ways is
/// a conflict (refused, then a `.sync-conflict-` copy); `rollback` gives back the skill
/// directory byte for byte, and a second rollback the update.
#[test]
fn an_update_carries_the_skill_trees_three_ways_and_rollback_restores_them() {
    let h = Hosts::new();
    let b_skills = h.b.join("shared/skills/research_tools");
    assert!(
        b_skills.join("web_search/SKILL.md").is_file(),
        "imported skills"
    );
    write(
        &h.a.skills().join("web_search/SKILL.md"),
        b"# web search, revised\n",
    );
    write(&h.a.skills().join("summarize/SKILL.md"), b"# summarize\n");
    write(
        &h.a.skills().join("web_search/run.sh"),
        b"#!/bin/sh\necho a\n",
    );
    write(&b_skills.join("web_search/notes.md"), b"b's own notes\n");
    write(&b_skills.join("web_search/run.sh"), b"#!/bin/sh\necho b\n");
    let second = h.export_a("bundle2");
    let before = snapshot_of(&h.b);
    let agent = |b: &Path| {
        (
            fs::read(b.join("config.toml")).unwrap(),
            read_tree(&b.join("shared/skills/research_tools")),
            read_tree(&b.join("agents/researcher/workspace")),
        )
    };
    let agent_before = agent(&h.b);

    // run.sh changed on both sides: refused, naming it, nothing written.
    let refused = h
        .update(&second, &["--accept-grants"])
        .fails(4, "conflicts refused, nothing was written");
    assert!(
        refused
            .stdout()
            .contains("CONFLICT skill bundle research_tools: web_search/run.sh"),
        "{}",
        refused.describe()
    );
    assert_eq!(snapshot_of(&h.b), before, "nothing written");

    let run = h
        .update(&second, &["--accept-grants", "--conflicts", "copy"])
        .ok();
    let read = |p: &str| fs::read(b_skills.join(p)).unwrap();
    assert_eq!(
        read("web_search/SKILL.md"),
        b"# web search, revised\n",
        "{}",
        run.describe()
    );
    assert_eq!(
        read("summarize/SKILL.md"),
        b"# summarize\n",
        "new skill taken"
    );
    assert_eq!(
        read("web_search/notes.md"),
        b"b's own notes\n",
        "local file kept"
    );
    assert_eq!(
        read("web_search/run.sh"),
        b"#!/bin/sh\necho b\n",
        "local side kept"
    );
    let copies: Vec<_> = fs::read_dir(b_skills.join("web_search"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("run.sync-conflict-") && n.ends_with(".sh"))
        .collect();
    assert_eq!(copies.len(), 1, "one conflict copy: {copies:?}");
    assert_eq!(
        read(&format!("web_search/{}", copies[0])),
        b"#!/bin/sh\necho a\n"
    );
    assert!(
        run.stdout()
            .contains("take     skill bundle research_tools: web_search/SKILL.md"),
        "{}",
        run.describe()
    );
    loads(&h.b);
    let agent_after = agent(&h.b);

    h.env
        .run(&["rollback", "researcher", "--install", &s(&h.b)])
        .ok();
    assert!(
        agent(&h.b) == agent_before,
        "rollback restores config, skills and workspace"
    );
    h.env
        .run(&["rollback", "researcher", "--install", &s(&h.b)])
        .ok();
    assert!(agent(&h.b) == agent_after, "a rollback of the rollback");
}

/// The snapshot an agent was last imported from is its next update's merge base: `forget`
/// refuses it, naming the agent and its provenance file; once an update moves the agent on,
/// the old one may go and the new one is held.
#[test]
fn forget_refuses_the_snapshot_an_imported_agent_was_last_imported_from() {
    let h = Hosts::new();
    let record = fs::read_to_string(h.b.join(".zeroclaw-bundle/imports/researcher.toml")).unwrap();
    let base = record
        .lines()
        .find_map(|l| l.strip_prefix("snapshot = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap()
        .to_string();
    h.env
        .run(&["forget", &base])
        .fails(1, "is what agent researcher of");
    write(&h.a.ws().join("notes.md"), b"notes, revised upstream\n");
    let second = h.export_a("bundle2");
    h.update(&second, &[]).ok();
    h.env.run(&["forget", &base]).ok();
    let record = fs::read_to_string(h.b.join(".zeroclaw-bundle/imports/researcher.toml")).unwrap();
    let now = record
        .lines()
        .find_map(|l| l.strip_prefix("snapshot = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap()
        .to_string();
    assert_ne!(now, base);
    let refused = h.env.run(&["forget", &now]).fails(1, "researcher.toml");
    assert!(
        refused.stderr().contains("imported beside, not updated"),
        "{}",
        refused.describe()
    );
    // The update still has its base.
    write(&h.a.ws().join("notes.md"), b"notes, revised again\n");
    let third = h.export_a("bundle3");
    h.update(&third, &[]).ok();
}

/// A skill bundle the new version adds is written where the install puts skills and rolled
/// back to nothing (no empty directory left); one the next version drops goes with its files.
#[test]
fn an_update_adds_and_drops_whole_skill_bundles_and_rollback_removes_what_it_added() {
    let h = Hosts::new();
    let skills_of = |b: &Path| {
        (
            fs::read(b.join("config.toml")).unwrap(),
            read_tree(&b.join("shared/skills")),
        )
    };
    let before = skills_of(&h.b);
    h.edit_a_config(
        "skill_bundles = [\"research_tools\"]",
        "skill_bundles = [\"research_tools\", \"writing_tools\"]",
    );
    h.edit_a_config(
        "[skill_bundles.research_tools]",
        "[skill_bundles.writing_tools]\n\n[skill_bundles.research_tools]",
    );
    let writing = h.a.root.join("shared/skills/writing_tools");
    write(&writing.join("draft/SKILL.md"), b"# draft\n");
    let second = h.export_a("bundle2");
    let run = h.update(&second, &["--accept-grants"]).ok();
    let added = h.b.join("shared/skills/writing_tools/draft/SKILL.md");
    assert_eq!(
        fs::read(&added).unwrap(),
        b"# draft\n",
        "{}",
        run.describe()
    );
    loads(&h.b);
    let after = skills_of(&h.b);

    h.env
        .run(&["rollback", "researcher", "--install", &s(&h.b)])
        .ok();
    assert!(
        skills_of(&h.b) == before,
        "rollback removes the added bundle"
    );
    assert!(!h.b.join("shared/skills/writing_tools").exists());
    h.env
        .run(&["rollback", "researcher", "--install", &s(&h.b)])
        .ok();
    assert!(skills_of(&h.b) == after, "a rollback of the rollback");

    // The next version drops it again.
    h.edit_a_config(
        "skill_bundles = [\"research_tools\", \"writing_tools\"]",
        "skill_bundles = [\"research_tools\"]",
    );
    h.edit_a_config("[skill_bundles.writing_tools]\n\n", "");
    let third = h.export_a("bundle3");
    let run = h.update(&third, &["--accept-grants"]).ok();
    assert!(
        !h.b.join("shared/skills/writing_tools").exists(),
        "{}",
        run.describe()
    );
    loads(&h.b);
}

/// A skill bundle the install had before the agent came (the first import used it, content
/// equal) is the install's own: an update that changes it is refused, naming it.
#[test]
fn an_update_of_a_skill_bundle_the_install_owns_is_refused_naming_it() {
    let env = TestEnv::new();
    let a = Install::new(&env);
    let first = env.path("bundle1");
    export(&env, &a, &first, &[], &[]).ok();
    // B already has research_tools with the same content: the import uses it.
    let b = onboarded(&env, "b");
    let exported = first.join("skills/research_tools");
    fs::create_dir_all(b.join("shared/skills")).unwrap();
    copy_tree(&exported, &b.join("shared/skills/research_tools"));
    let config = b.join("config.toml");
    let mut text = fs::read_to_string(&config).unwrap();
    text.push_str("\n[skill_bundles.research_tools]\nexclude = [\"internal_only\"]\n");
    fs::write(&config, text).unwrap();
    import(&env, &first, &b, &["--yes"]).ok();
    assert!(!b.join("shared/skills/research_tools_imported").exists());
    write(&a.skills().join("web_search/SKILL.md"), b"# revised\n");
    let second = env.path("bundle2");
    export(&env, &a, &second, &[], &[]).ok();
    let before = snapshot_of(&b);
    env.run(&[
        "update",
        &s(&second),
        "--install",
        &s(&b),
        "--accept-grants",
    ])
    .fails(
        1,
        "skill bundle research_tools changed since the version last imported",
    );
    assert_eq!(snapshot_of(&b), before, "nothing written");
}

/// `review` of a newer version of an imported agent ends with the three-way plan its import
/// would apply (taken, kept, config keys, new grants), and writes nothing to the install.
#[test]
fn review_of_a_newer_version_shows_the_three_way_plan() {
    let h = Hosts::new();
    write(&h.a.ws().join("notes.md"), b"notes, revised upstream\n");
    write(&h.b_ws().join("notes/plan.md"), b"plan, edited on b\n");
    h.edit_a_config("model = \"claude-opus-5\"", "model = \"claude-opus-6\"");
    let second = h.export_a("bundle2");
    let before = snapshot_of(&h.b);
    let run = h
        .env
        .run(&["review", &s(&second), "--install", &s(&h.b)])
        .ok();
    let out = run.stdout();
    assert!(
        out.contains("this is the update in place of agent researcher")
            && out.contains("take     notes.md")
            && out.contains("keep     notes/plan.md")
            && out.contains("config   providers.models.anthropic.main.model (take)"),
        "{}",
        run.describe()
    );
    assert_eq!(snapshot_of(&h.b), before, "review writes nothing");
    // The same plan in the JSON document.
    let json = h
        .env
        .run(&["--json", "review", &s(&second), "--install", &s(&h.b)])
        .ok()
        .json();
    let plan = &json["update_plan"];
    assert_eq!(plan["alias"], "researcher", "{json}");
    assert_eq!(plan["taken"], serde_json::json!(["notes.md"]), "{json}");
    assert_eq!(plan["kept"], serde_json::json!(["notes/plan.md"]), "{json}");
    assert!(
        plan["config_keys"]
            .to_string()
            .contains("providers.models.anthropic.main.model"),
        "{json}"
    );
    assert_eq!(snapshot_of(&h.b), before, "review writes nothing");
}
