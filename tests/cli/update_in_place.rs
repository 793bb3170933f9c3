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
use crate::util::{write, TestEnv};

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
#[test]
fn an_update_whose_skills_changed_is_refused_naming_them() {
    let h = Hosts::new();
    write(&h.a.ws().join("notes.md"), b"notes, revised upstream\n");
    write(
        &h.a.skills().join("web_search/SKILL.md"),
        b"# web search, revised\n",
    );
    let second = h.export_a("bundle2");
    let before = snapshot_of(&h.b);
    h.update(&second, &["--accept-grants"])
        .fails(1, "skill bundle research_tools changed");
    assert_eq!(snapshot_of(&h.b), before, "nothing written");
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
}
