//! An update or rollback killed at each of its steps, then `recover --install`: the agent is
//! exactly as before or exactly as after (`config.toml` and every workspace file, byte for
//! byte), never a mix, and ZeroClaw's loader accepts the config. Pins: the intent journal
//! (a kill after it rolls forward, one before it leaves the old state), the refusal of
//! `update`, `rollback` and `import` while a change is pending (with the recover command),
//! `recover --install` with nothing pending (says so, exit 0), a `config.toml` edited since
//! the kill (refused, naming it, not overwritten), and a workspace publish that fails (the
//! intent withdrawn, nothing written, nothing left to recover).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::export::{export, Install};
use crate::import::{import, loads, onboarded};
use crate::util::{read_tree, write, Node, Run, TestEnv};

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// What an update changes and a recover must leave whole: `config.toml` and every file and
/// directory of the agent's workspace and of the skill bundle its import added (bytes and
/// exec bit).
#[derive(Debug, PartialEq)]
struct AgentState {
    config: Vec<u8>,
    workspace: BTreeMap<Vec<u8>, Node>,
    skills: BTreeMap<Vec<u8>, Node>,
}

fn state_of(b: &Path) -> AgentState {
    AgentState {
        config: fs::read(b.join("config.toml")).unwrap(),
        workspace: read_tree(&b.join("agents/researcher/workspace")),
        skills: read_tree(&b.join(SKILLS)),
    }
}

/// Where host B keeps the skill bundle the agent's import added.
const SKILLS: &str = "shared/skills/research_tools";

/// Host A exported twice (the second time with a changed file, a new file and a changed
/// config key); each host B imports the first bundle and edits its own copy.
struct Hosts {
    env: TestEnv,
    first: PathBuf,
    second: PathBuf,
}

impl Hosts {
    fn new() -> Hosts {
        let env = TestEnv::new();
        let a = Install::new(&env);
        let first = env.path("bundle1");
        export(&env, &a, &first, &[], &[]).ok();
        write(&a.ws().join("notes.md"), b"notes, revised upstream\n");
        write(&a.ws().join("notes/new.md"), b"a new page\n");
        write(
            &a.skills().join("web_search/SKILL.md"),
            b"# web search, revised\n",
        );
        write(&a.skills().join("summarize/SKILL.md"), b"# summarize\n");
        let config = a.root.join("config.toml");
        let text = fs::read_to_string(&config).unwrap();
        fs::write(
            &config,
            text.replacen("model = \"claude-opus-5\"", "model = \"claude-opus-6\"", 1),
        )
        .unwrap();
        let second = env.path("bundle2");
        export(&env, &a, &second, &[], &[]).ok();
        Hosts { env, first, second }
    }

    /// A fresh host B: the first bundle imported, then a local file, its memory and a local
    /// key edited.
    fn host_b(&self, name: &str) -> PathBuf {
        let b = onboarded(&self.env, name);
        import(&self.env, &self.first, &b, &["--yes"]).ok();
        let ws = b.join("agents/researcher/workspace");
        write(&ws.join("notes/plan.md"), b"plan, edited on b\n");
        write(&ws.join("memory/brain.db"), b"b's own memory");
        write(&b.join(SKILLS).join("web_search/notes.md"), b"b's notes\n");
        let config = b.join("config.toml");
        let text = fs::read_to_string(&config).unwrap();
        assert!(text.contains("model = \"gpt-backup\""), "{text}");
        fs::write(
            &config,
            text.replacen("model = \"gpt-backup\"", "model = \"gpt-local\"", 1),
        )
        .unwrap();
        b
    }

    fn update(&self, b: &Path, hook: &[(&str, &str)]) -> Run {
        self.env
            .run_with(&["update", &s(&self.second), "--install", &s(b)], hook)
    }

    fn rollback(&self, b: &Path, hook: &[(&str, &str)]) -> Run {
        self.env
            .run_with(&["rollback", "researcher", "--install", &s(b)], hook)
    }

    fn recover(&self, b: &Path) -> Run {
        self.env.run(&["recover", "--install", &s(b)])
    }

    /// The agent before and after the update, each seen once: the update applied, then
    /// rolled back (which must give back the state before, byte for byte).
    fn before_and_after(&self, b: &Path) -> (AgentState, AgentState) {
        let before = state_of(b);
        self.update(b, &[]).ok();
        let after = state_of(b);
        assert_ne!(before, after, "the update changes the agent");
        self.rollback(b, &[]).ok();
        assert_eq!(state_of(b), before, "rollback gives back the state before");
        (before, after)
    }
}

/// A kill at `seam` (at a path ending with `path`), optionally without RENAME_EXCHANGE.
fn kill_at<'a>(seam: &'a str, path: &'a str, no_exchange: bool) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", seam),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", path),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -9 $PPID; sleep 5"),
    ];
    if no_exchange {
        env.push(("ZEROCLAW_BUNDLE_TEST_NO_EXCHANGE", "1"));
    }
    env
}

/// Which state a kill at a step must end in after `recover`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ends {
    Before,
    After,
}

/// Every step of a change where a kill lands: (seam, path, without exchange, where it ends).
const STEPS: &[(&str, &str, bool, Ends)] = &[
    ("update-step", "intent", false, Ends::Before),
    ("update-step", "trees", false, Ends::After),
    ("publish-write", "notes.md", false, Ends::After),
    ("before-swap", "workspace", false, Ends::After),
    ("publish-after-exchange", "workspace", false, Ends::After),
    ("publish-after-retire", "workspace", false, Ends::After),
    ("publish-after-first-rename", "workspace", true, Ends::After),
    (
        "publish-after-second-rename",
        "workspace",
        true,
        Ends::After,
    ),
    ("publish-write", "web_search/SKILL.md", false, Ends::After),
    ("before-swap", "research_tools", false, Ends::After),
    (
        "publish-after-exchange",
        "research_tools",
        false,
        Ends::After,
    ),
    ("update-step", "provenance", false, Ends::After),
    ("update-step", "config", false, Ends::After),
    ("update-step", "states", false, Ends::After),
];

/// After a killed change and `recover`: the state `ends` names, exactly; the config loads;
/// nothing is left beside the workspace or pending; a second recover finds nothing.
#[track_caller]
fn check_recovered(
    h: &Hosts,
    b: &Path,
    what: &str,
    verb: &str,
    ends: Ends,
    states: (&AgentState, &AgentState),
) {
    let run = h.recover(b).ok();
    let out = run.stdout();
    let now = state_of(b);
    assert!(
        now == *states.0 || now == *states.1,
        "{what}: a mix of the state before and the one after:\n{}",
        run.describe()
    );
    let (expected, said) = match ends {
        Ends::Before => (states.0, "nothing to recover in".to_string()),
        Ends::After => (states.1, format!("finished the {verb} of agent researcher")),
    };
    assert!(
        now == *expected,
        "{what}: not the state {ends:?}\n{}",
        run.describe()
    );
    assert!(out.contains(&said), "{what}: {}", run.describe());
    loads(b);
    let beside: Vec<String> = fs::read_dir(b.join("agents/researcher"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["workspace"], "{what}: left beside the workspace");
    let beside: Vec<String> = fs::read_dir(b.join("shared/skills"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["research_tools"], "{what}: left beside the skills");
    assert!(
        !b.join(".zeroclaw-bundle/updates/researcher/pending")
            .exists(),
        "{what}: the intent is still pending"
    );
    let again = h.recover(b).ok();
    assert!(
        again.stdout().contains("nothing to recover in"),
        "{what}: {}",
        again.describe()
    );
}

#[test]
fn an_update_killed_at_each_step_then_recovered_is_exactly_the_old_state_or_the_new_one() {
    let h = Hosts::new();
    for (i, &(seam, path, no_exchange, ends)) in STEPS.iter().enumerate() {
        let what = format!("update killed at {seam} {path}");
        let b = h.host_b(&format!("b{i}"));
        let (before, after) = h.before_and_after(&b);
        let run = h.update(&b, &kill_at(seam, path, no_exchange));
        assert_eq!(
            run.out.status.code(),
            None,
            "{what}: killed\n{}",
            run.describe()
        );
        check_recovered(&h, &b, &what, "update", ends, (&before, &after));
        // The state after is recorded as if the update had not been cut short: a rollback
        // gives back the state before.
        if ends == Ends::After {
            h.rollback(&b, &[]).ok();
            assert_eq!(state_of(&b), before, "{what}: rollback after recover");
        }
    }
}

#[test]
fn a_rollback_killed_at_each_step_then_recovered_is_exactly_the_old_state_or_the_new_one() {
    let h = Hosts::new();
    let steps = STEPS.iter().filter(|(seam, path, _, _)| {
        matches!(
            (*seam, *path),
            ("update-step", _) | ("publish-after-exchange", _) | ("publish-write", _)
        )
    });
    for (i, &(seam, path, no_exchange, ends)) in steps.enumerate() {
        let what = format!("rollback killed at {seam} {path}");
        let b = h.host_b(&format!("b{i}"));
        let (before, after) = h.before_and_after(&b);
        h.update(&b, &[]).ok();
        // The rollback goes from the state after the update to the one before.
        let run = h.rollback(&b, &kill_at(seam, path, no_exchange));
        assert_eq!(
            run.out.status.code(),
            None,
            "{what}: killed\n{}",
            run.describe()
        );
        check_recovered(&h, &b, &what, "rollback", ends, (&after, &before));
    }
}

#[test]
fn a_pending_update_blocks_update_rollback_and_import_until_recover() {
    let h = Hosts::new();
    let b = h.host_b("b");
    let run = h.update(&b, &kill_at("update-step", "provenance", false));
    assert_eq!(run.out.status.code(), None, "{}", run.describe());
    let hint = format!("run `zeroclaw-bundle recover --install {}`", s(&b));
    let mixed = state_of(&b);
    for refused in [
        h.update(&b, &[]),
        h.rollback(&b, &[]),
        import(&h.env, &h.first, &b, &["--yes", "--as", "other"]),
    ] {
        let refused = refused.fails(1, "agent researcher");
        assert!(refused.stderr().contains(&hint), "{}", refused.describe());
    }
    assert_eq!(state_of(&b), mixed, "a refused command writes nothing");

    let done = h.env.run(&["--json", "recover", "--install", &s(&b)]).ok();
    let json = done.json();
    assert_eq!(json["install"], s(&b), "{json}");
    let completed = json["completed"].as_array().expect("completed");
    assert_eq!(completed.len(), 1, "{json}");
    assert_eq!(completed[0]["alias"], "researcher", "{json}");
    assert_eq!(completed[0]["verb"], "update", "{json}");
    assert_eq!(completed[0]["published"], serde_json::json!([]), "{json}");
    assert_eq!(completed[0]["config_written"], true, "{json}");
    loads(&b);
    let again = h.update(&b, &[]).ok();
    assert!(
        again.stdout().starts_with("Up to date: agent researcher"),
        "{}",
        again.describe()
    );
}

#[test]
fn recover_with_nothing_pending_says_so_and_an_edited_config_is_refused_by_name() {
    let h = Hosts::new();
    let b = h.host_b("b");
    let run = h.recover(&b).ok();
    assert!(
        run.stdout()
            .contains(&format!("nothing to recover in {}", s(&b))),
        "{}",
        run.describe()
    );
    let json = h
        .env
        .run(&["--json", "recover", "--install", &s(&b)])
        .ok()
        .json();
    assert_eq!(json["completed"], serde_json::json!([]), "{json}");
    h.env
        .run(&["recover", "--install", &s(&h.env.path("nowhere"))])
        .fails(1, "nowhere/config.toml");

    // Cut short after the workspace, then config.toml edited by hand: recover keeps the edit.
    let run = h.update(&b, &kill_at("update-step", "config", false));
    assert_eq!(run.out.status.code(), None, "{}", run.describe());
    let config = b.join("config.toml");
    let mut text = fs::read(&config).unwrap();
    text.extend_from_slice(b"# an edit made after the kill\n");
    fs::write(&config, &text).unwrap();
    h.recover(&b).fails(1, &s(&config));
    assert_eq!(fs::read(&config).unwrap(), text, "the edit is kept");
    assert!(b
        .join(".zeroclaw-bundle/updates/researcher/pending")
        .exists());
}

#[test]
fn an_update_whose_publish_fails_withdraws_its_intent_and_writes_nothing() {
    let h = Hosts::new();
    let b = h.host_b("b");
    let before = state_of(&b);
    let states = b.join(".zeroclaw-bundle/updates/researcher/states.toml");
    let run = h.update(
        &b,
        &[
            ("ZEROCLAW_BUNDLE_TEST_FAULT", "rename"),
            ("ZEROCLAW_BUNDLE_TEST_FAULT_PATH", "workspace"),
        ],
    );
    let run = run.fails(1, "could not update agent researcher");
    assert!(
        !run.stderr().contains("recover --install"),
        "nothing is left to finish: {}",
        run.describe()
    );
    assert_eq!(state_of(&b), before, "a failed publish writes nothing");
    assert!(
        !b.join(".zeroclaw-bundle/updates/researcher/pending")
            .exists(),
        "the intent is withdrawn"
    );
    assert!(
        !states.exists(),
        "no state is recorded for an update that did not happen"
    );
    h.update(&b, &[]).ok();
    loads(&b);
}

/// Ctrl-C twice during an update past its commit point stops it at once and names the
/// command that finishes it: `recover --install DIR` (not the `recover DEST` of the publish
/// running then), which does.
#[test]
fn a_second_ctrl_c_during_an_update_names_recover_install() {
    let h = Hosts::new();
    let b = h.host_b("b");
    let (_, after) = h.before_and_after(&b);
    let hook = [
        ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "publish-write"),
        ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", "notes.md"),
        (
            "ZEROCLAW_BUNDLE_TEST_HOOK_CMD",
            "kill -INT $PPID; sleep 0.5; kill -INT $PPID; sleep 5",
        ),
    ];
    let run = h.update(&b, &hook);
    assert_eq!(run.code(), 130, "{}", run.describe());
    let hint = format!("recover --install {}", s(&b));
    assert!(run.stderr().contains(&hint), "{}", run.describe());
    h.recover(&b).ok();
    assert_eq!(state_of(&b), after, "recover finished the update");
}
