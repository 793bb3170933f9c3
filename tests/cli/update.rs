//! Keeping an imported agent in step (the first step): importing the content an install
//! already holds is a no-op. Pins: the same bundle imported again (from its directory, or from
//! a pack of the same content, which is another snapshot with the same content id) writes
//! nothing at all, says "Up to date" naming the agent, and exits 0, in text and `--json`; it
//! is not up to date once the agent is gone from `config.toml`, under another `--as`, or when
//! the content changed.

use std::fs;
use std::path::Path;

use crate::import::onboarded;
use crate::oracle::snapshot_of;
use crate::util::TestEnv;

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn importing_the_same_content_again_changes_nothing_and_says_up_to_date() {
    let env = TestEnv::new();
    let install = crate::export::Install::new(&env);
    let bundle = env.path("bundle");
    crate::export::export(&env, &install, &bundle, &[], &[]).ok();
    let y = onboarded(&env, "y");
    env.run(&["import", &s(&bundle), "--install", &s(&y), "--yes"])
        .ok();
    let before = snapshot_of(&y);

    let again = env
        .run(&["import", &s(&bundle), "--install", &s(&y), "--yes"])
        .ok();
    let text = again.stdout();
    assert!(
        text.starts_with("Up to date: agent researcher in "),
        "{}",
        again.describe()
    );
    assert_eq!(
        snapshot_of(&y),
        before,
        "an up-to-date import writes nothing"
    );

    // The same content as a pack is another snapshot with the same content id.
    let pack = env.path("researcher.zbpack");
    let id = text.lines().last().expect("the content id").to_string();
    let snapshot = env
        .run(&["--json", "snapshot", "--dir", &s(&bundle)])
        .ok()
        .json()["snapshot"]
        .as_str()
        .expect("snapshot id")
        .to_string();
    env.run(&["pack", &snapshot, "--out", &s(&pack)]).ok();
    let json = env
        .run(&["--json", "import", &s(&pack), "--install", &s(&y), "--yes"])
        .ok()
        .json();
    assert_eq!(json["up_to_date"]["agent"], "researcher", "{json}");
    assert_eq!(json["root"], id.as_str(), "{json}");
    assert_eq!(snapshot_of(&y), before);
    // A dry run says so too, and needs no confirmation.
    let dry = env
        .run(&["import", &s(&bundle), "--install", &s(&y), "--dry-run"])
        .ok()
        .stdout();
    assert!(dry.starts_with("Up to date"), "{dry}");

    // Under another alias it is a new agent.
    let other = env
        .run(&[
            "--json",
            "import",
            &s(&bundle),
            "--install",
            &s(&y),
            "--dry-run",
            "--as",
            "other",
        ])
        .ok()
        .json();
    assert!(other["up_to_date"].is_null(), "{other}");
    assert_eq!(other["agent"], "other", "{other}");

    // Changed content is not up to date: it is the agent's update in place (the three-way plan).
    fs::write(
        install.root.join("agents/researcher/workspace/notes.md"),
        b"changed\n",
    )
    .unwrap();
    let changed = env.path("changed");
    crate::export::export(&env, &install, &changed, &[], &[]).ok();
    let plan = env
        .run(&[
            "--json",
            "import",
            &s(&changed),
            "--install",
            &s(&y),
            "--dry-run",
        ])
        .ok()
        .json();
    assert_eq!(plan["up_to_date"], false, "{plan}");
    assert_eq!(plan["taken"], serde_json::json!(["notes.md"]), "{plan}");

    // Once the operator removed the agent from config.toml, the import is a new one again.
    let config = fs::read_to_string(y.join("config.toml")).unwrap();
    let mut doc: toml_edit::DocumentMut = config.parse().unwrap();
    doc["agents"]
        .as_table_mut()
        .expect("agents")
        .remove("researcher");
    fs::write(y.join("config.toml"), doc.to_string()).unwrap();
    let plan = env
        .run(&[
            "--json",
            "import",
            &s(&bundle),
            "--install",
            &s(&y),
            "--dry-run",
            "--force",
        ])
        .ok()
        .json();
    assert!(plan["up_to_date"].is_null(), "{plan}");
    assert_eq!(plan["agent"], "researcher", "{plan}");
}
