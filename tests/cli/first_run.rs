//! What a new operator tripped over on a first run of the CLI (the demo, its sample install,
//! the first pack, unpack, list and diff). Pins: the demo's sample install passes ZeroClaw's own
//! `validate()` and receives an import of the bundle the demo exports from it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::import::{import, loads};
use crate::util::{run_command, TestEnv};

/// The demo's sample install (`scripts/sample-install.sh`), built at `env`'s `name`.
fn sample_install(env: &TestEnv, name: &str) -> PathBuf {
    let root = env.path(name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/sample-install.sh");
    let mut c = Command::new("bash");
    c.arg(script).arg(&root);
    run_command(c).ok();
    root
}

#[test]
fn the_sample_install_validates_and_receives_the_demos_export() {
    let env = TestEnv::new();
    let install = sample_install(&env, "install");
    // As ZeroClaw 0.8.7 loads it (strictly: no section skipped), then its own validate().
    let text = std::fs::read_to_string(install.join("config.toml")).unwrap();
    let config = zeroclaw_config::migration::migrate_to_current(&text)
        .unwrap_or_else(|e| panic!("the sample install does not load in ZeroClaw: {e:#}"));
    config
        .validate()
        .unwrap_or_else(|e| panic!("the sample install fails ZeroClaw's validate(): {e:#}"));
    // The demo's export, imported back into the install it came from.
    let bundle = env.path("bundle");
    env.run(&[
        "export",
        "researcher",
        "--install",
        &install.to_string_lossy(),
        "--out",
        &bundle.to_string_lossy(),
    ])
    .ok();
    let r = import(&env, &bundle, &install, &["--yes"]).ok();
    assert!(
        r.stdout().contains("Imported agent researcher_imported"),
        "{}",
        r.describe()
    );
    let merged = loads(&install);
    assert!(merged.agents.contains_key("researcher_imported"));
    assert!(install
        .join("agents/researcher_imported/workspace/IDENTITY.md")
        .is_file());
}
