//! Where `import` writes. Pins: a skill `directory` with `..` is refused by its config field
//! even where a symlinked `shared/skills` would send it outside the install, and one that
//! resolves outside `<install>/shared` through a link is refused, while the operator's own
//! link (skills kept on another disk) is followed; a workspace that resolves outside
//! `<install>/agents` is refused; `shared`, `shared/skills` and a directory the import did not
//! publish are never replaced by `--force` (only `--replace PATH` replaces a directory of the
//! operator's, and only one the import publishes into); the refusal to publish over a local
//! agent's workspace that another agent's `workspace.path` points into; a `config.toml` that
//! is a symlink is written through (the link and the target's mode kept, the backup in the
//! install), and the link repointed during the import is a change that stops it; CRLF line
//! endings stay CRLF.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};

use crate::import::{hostile, import, loads, onboarded, our_bundle, state, CROWDED};
use crate::util::{chmod, write, TestEnv};

/// `bundle` with its skill bundle `research_tools` placed at `directory`.
fn skill_at(env: &TestEnv, bundle: &Path, name: &str, directory: &str) -> PathBuf {
    hostile(env, bundle, name, |c, m| {
        let c = c.replace(
            "[skill_bundles.research_tools]\n",
            &format!("[skill_bundles.research_tools]\ndirectory = \"{directory}\"\n"),
        );
        assert!(c.contains(directory), "{c}");
        (c, m)
    })
}

fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir).unwrap().next().is_none()
}

/// ZeroClaw's `validate()` checks a skill directory by its spelling: `shared/skills/../pwned`
/// is "inside `shared`". With `shared/skills` a symlink to another disk, the kernel puts that
/// beside the link's target. The import refuses the `..` by its config field, and a directory
/// that resolves outside `shared` through a link; the operator's own link of `shared/skills`
/// is followed.
#[test]
fn a_skill_directory_with_dotdot_or_resolving_outside_shared_is_refused() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let disk = env.path("disk");
    let elsewhere = env.path("elsewhere");
    fs::create_dir_all(disk.join("skills")).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(y.join("shared")).unwrap();
    symlink(disk.join("skills"), y.join("shared/skills")).unwrap();
    symlink(&elsewhere, y.join("shared/out")).unwrap();
    let before = state(&y);
    for (name, directory, needle) in [
        (
            "dotdot",
            "shared/skills/../pwned",
            "skill_bundles.research_tools.directory = \"shared/skills/../pwned\" holds `..`",
        ),
        (
            "link-out",
            "shared/out/tools",
            "(following the install's symlinks), outside",
        ),
    ] {
        let source = skill_at(&env, &bundle, name, directory);
        import(&env, &source, &y, &["--yes", "--force"]).fails(1, needle);
        assert!(
            !disk.join("pwned").exists(),
            "{name}: published beside the link"
        );
        assert!(
            is_empty_dir(&elsewhere),
            "{name}: published through the link"
        );
        assert!(is_empty_dir(&disk.join("skills")), "{name}");
        assert_eq!(state(&y), before, "{name}: the install changed");
    }
    // Skills kept on another disk: the default directory through the operator's link.
    import(&env, &bundle, &y, &["--yes"]).ok();
    assert!(y.join("shared/skills").is_symlink());
    assert!(disk
        .join("skills/research_tools/web_search/SKILL.md")
        .is_file());
    loads(&y);
}

/// The workspace goes to `agents/<alias>/workspace`; a leftover `agents/<alias>` that is a
/// symlink out of `agents` would publish it elsewhere: refused, nothing written there.
#[test]
fn a_workspace_resolving_outside_agents_is_refused() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let elsewhere = env.path("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::create_dir_all(y.join("agents")).unwrap();
    symlink(&elsewhere, y.join("agents/researcher")).unwrap();
    let before = state(&y);
    import(&env, &bundle, &y, &["--yes", "--force"]).fails(
        1,
        "refusing to publish the workspace of agent researcher at",
    );
    import(&env, &bundle, &y, &["--yes"]).fails(1, "(following the install's symlinks), outside");
    assert!(is_empty_dir(&elsewhere), "published through the link");
    assert_eq!(state(&y), before, "the install changed");
}

/// `directory = "shared"` (or `shared/skills`) with `--force` replaced all of the install's
/// `shared`, files no config names included: refused, `--replace` or not.
#[test]
fn the_install_s_shared_directories_are_never_a_destination() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    write(&y.join("shared/notes.md"), b"the operator's\n");
    write(
        &y.join("shared/skills/loose/SKILL.md"),
        b"# not configured\n",
    );
    let before = state(&y);
    for (name, directory, own) in [
        ("shared", "shared", "the install's shared directory"),
        (
            "skills",
            "shared/skills",
            "the install's shared/skills directory",
        ),
    ] {
        let source = skill_at(&env, &bundle, name, directory);
        let dest = y.join(directory);
        for extra in [vec!["--force"], vec!["--replace", dest.to_str().unwrap()]] {
            let mut args = vec!["--yes"];
            args.extend(extra);
            import(&env, &source, &y, &args).fails(1, &format!("it is or holds {own}"));
            assert_eq!(state(&y), before, "{name} {args:?}: the install changed");
        }
    }
}

/// `--force` (what the README advises after a killed import) replaces only a directory that
/// holds exactly the tree the import publishes; a directory of the operator's there is
/// refused with the `--replace PATH` to pass, and replaced only when named.
#[test]
fn force_replaces_only_an_earlier_import_s_tree_and_replace_names_the_rest() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let dest = y.join("shared/skills/research_tools");
    write(
        &dest.join("mine/SKILL.md"),
        b"# the operator's, in no config\n",
    );
    let before = state(&y);
    let quoted = dest.to_string_lossy().into_owned();
    import(&env, &bundle, &y, &["--yes"])
        .fails(1, "pass --force")
        .fails(1, &format!("pass --replace {quoted}"));
    import(&env, &bundle, &y, &["--yes", "--force"])
        .fails(1, "does not hold the tree this import publishes")
        .fails(1, &format!("pass --replace {quoted}"));
    let other = env.path("other");
    fs::create_dir_all(&other).unwrap();
    import(
        &env,
        &bundle,
        &y,
        &["--yes", "--replace", other.to_str().unwrap()],
    )
    .fails(1, "is not a directory this import publishes into");
    import(&env, &bundle, &y, &["--yes", "--replace", "missing-dir"])
        .fails(1, "--replace missing-dir: names nothing that exists");
    assert_eq!(state(&y), before, "the install changed");

    let run = import(&env, &bundle, &y, &["--yes", "--replace", &quoted]).ok();
    assert!(
        run.stdout().contains("deletes what it holds (--replace)"),
        "{}",
        run.describe()
    );
    assert!(!dest.join("mine").exists());
    assert!(dest.join("web_search/SKILL.md").is_file());
    loads(&y);

    // What a killed import leaves (the trees, no config entry), changed since: not the tree.
    let z = onboarded(&env, "z");
    let killed = env.run_with(
        &[
            "import",
            &bundle.to_string_lossy(),
            "--install",
            &z.to_string_lossy(),
            "--yes",
        ],
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "import-step"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", "provenance"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", "kill -9 $PPID"),
        ],
    );
    assert_ne!(killed.code(), 0, "{}", killed.describe());
    let ws = z.join("agents/researcher/workspace");
    assert!(ws.join("notes.md").is_file(), "{}", killed.describe());
    write(&ws.join("work.md"), b"written since\n");
    import(&env, &bundle, &z, &["--yes", "--force"])
        .fails(1, "does not hold the tree this import publishes");
    assert!(ws.join("work.md").is_file());
    fs::remove_file(ws.join("work.md")).unwrap();
    let run = import(&env, &bundle, &z, &["--yes", "--force"]).ok();
    assert!(
        run.stdout()
            .contains("(--force: it holds this tree already)"),
        "{}",
        run.describe()
    );
    loads(&z);
}

/// A local agent whose `workspace.path` points at (or around) where the import would put the
/// new agent's workspace: publishing there would hand the local agent's files to the new one
/// or delete them. Refused whatever the flags, nothing written.
#[test]
fn a_workspace_another_agent_s_workspace_path_points_into_is_refused() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let dest_of = |y: &Path| y.join("agents/researcher_imported/workspace");
    for (name, points_at, exists) in [
        ("same", "agents/researcher_imported/workspace", true),
        ("around", "agents/researcher_imported", true),
        ("inside", "agents/researcher_imported/workspace/notes", true),
        (
            "not yet made",
            "agents/researcher_imported/workspace",
            false,
        ),
    ] {
        let y = env.path(&format!("y-{}", name.replace(' ', "-")));
        let other = y.join(points_at);
        write(
            &y.join("config.toml"),
            format!(
                "{CROWDED}\n[agents.other]\nmodel_provider = \"anthropic.main\"\n\
                 risk_profile = \"guarded\"\n\n[agents.other.workspace]\npath = \"{}\"\n",
                other.display()
            )
            .as_bytes(),
        );
        let mut args = vec!["--yes".to_string(), "--force".to_string()];
        if exists {
            write(&other.join("theirs.md"), b"other's\n");
            args.push("--replace".to_string());
            args.push(dest_of(&y).to_string_lossy().into_owned());
        }
        let before = state(&y);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        import(&env, &bundle, &y, &args).fails(
            1,
            &format!(
                "would lie inside or hold the workspace of agent other at {}",
                other.display()
            ),
        );
        assert_eq!(state(&y), before, "{name}: the install changed");
    }
}

/// A `config.toml` kept in a dotfiles repository and linked into the install: the import
/// writes the file the link points to (its mode kept), keeps the link, and keeps the backup in
/// the install; a link repointed while the import runs is a change that stops it.
#[test]
fn a_config_that_is_a_symlink_is_written_through() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = onboarded(&env, "y");
    let dotfiles = env.path("dotfiles");
    fs::create_dir_all(&dotfiles).unwrap();
    let real = dotfiles.join("zeroclaw.toml");
    fs::rename(y.join("config.toml"), &real).unwrap();
    chmod(&real, 0o640);
    let link = Path::new("../dotfiles/zeroclaw.toml");
    symlink(link, y.join("config.toml")).unwrap();
    let old = fs::read_to_string(&real).unwrap();
    let before = state(&y);

    // Repointed (to a copy with the same bytes) between the plan and the write: refused.
    let copy = dotfiles.join("copy.toml");
    fs::write(&copy, &old).unwrap();
    let repoint = format!(
        "ln -sfn {} {}",
        copy.display(),
        y.join("config.toml").display()
    );
    let run = env.run_with(
        &[
            "import",
            &bundle.to_string_lossy(),
            "--install",
            &y.to_string_lossy(),
            "--yes",
        ],
        &[
            ("ZEROCLAW_BUNDLE_TEST_HOOK_SEAM", "import-step"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_PATH", "config"),
            ("ZEROCLAW_BUNDLE_TEST_HOOK_CMD", &repoint),
        ],
    );
    run.fails(1, "changed while the import ran");
    assert_eq!(fs::read_to_string(&real).unwrap(), old);
    assert_eq!(fs::read_to_string(&copy).unwrap(), old);
    assert_eq!(state(&y), before, "the install changed");
    fs::remove_file(y.join("config.toml")).unwrap();
    fs::remove_file(&copy).unwrap();
    symlink(link, y.join("config.toml")).unwrap();

    let run = import(&env, &bundle, &y, &["--yes"]).ok();
    assert!(
        run.stdout().contains(&format!(
            "a symlink: written through it to {}",
            fs::canonicalize(&real).unwrap().display()
        )),
        "{}",
        run.describe()
    );
    assert_eq!(fs::read_link(y.join("config.toml")).unwrap(), link);
    let meta = fs::symlink_metadata(&real).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.mode() & 0o7777, 0o640, "the target keeps its mode");
    assert!(fs::read_to_string(&real)
        .unwrap()
        .contains("[agents.researcher]"));
    let in_dotfiles: Vec<_> = fs::read_dir(&dotfiles)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        in_dotfiles,
        ["zeroclaw.toml"],
        "nothing else in the dotfiles"
    );
    let backups: Vec<PathBuf> = fs::read_dir(&y)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".bak"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(fs::read_to_string(&backups[0]).unwrap(), old);
    loads(&y);
}

/// A `config.toml` with CRLF line endings keeps them: every line the import writes (its own
/// and the install's) ends in CRLF, and the install's lines are all still there.
#[test]
fn crlf_line_endings_stay() {
    let env = TestEnv::new();
    let (_x, bundle) = our_bundle(&env);
    let y = env.path("y");
    let old = CROWDED.replace('\n', "\r\n");
    write(&y.join("config.toml"), old.as_bytes());
    import(&env, &bundle, &y, &["--yes"]).ok();
    let new = fs::read_to_string(y.join("config.toml")).unwrap();
    assert!(new.contains("[agents.researcher_imported]\r\n"), "{new:?}");
    let bare = new
        .match_indices('\n')
        .filter(|(i, _)| !new[..*i].ends_with('\r'))
        .count();
    assert_eq!(bare, 0, "bare LF in {new:?}");
    for line in old.split_inclusive("\r\n") {
        assert!(new.contains(line), "lost {line:?} in {new:?}");
    }
    loads(&y);
}
