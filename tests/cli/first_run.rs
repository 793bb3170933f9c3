//! What a new operator tripped over on a first run of the CLI (the demo, its sample install,
//! the first pack, unpack, list and diff). Pins: the demo's sample install passes ZeroClaw's own
//! `validate()` and receives an import of the bundle the demo exports from it; an unpack that
//! fails creates no store (nor the directories above it, nor anything in an empty one).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::import::{import, loads};
use crate::util::{run_command, write, Run, TestEnv};

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

/// Two snapshots of one tree and a `--since` pack of the second on the first: unpacked into
/// a store without the base, it must fail.
fn incremental_pack(env: &TestEnv) -> PathBuf {
    let src = env.path("src");
    write(&src.join("a"), b"a\n");
    let base = env.snapshot(&src);
    write(&src.join("b"), b"b\n");
    let next = env.snapshot(&src);
    let pack = env.path("update.zcpack");
    env.run(&[
        "pack",
        &next,
        "--since",
        &base,
        "--out",
        &pack.to_string_lossy(),
    ])
    .ok();
    pack
}

/// The names in `dir` (sorted).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_unpack_creates_no_store() {
    let env = TestEnv::new();
    let pack = incremental_pack(&env);
    let pack_arg = pack.to_string_lossy().into_owned();
    let before = names(env.dir.path());
    // A store path that does not exist, nor do the directories above it.
    let deep = env.path("other/host/store");
    env.run(&["--store", &deep.to_string_lossy(), "unpack", &pack_arg])
        .fails(1, "unpack a pack of the base first");
    assert!(
        !env.path("other").exists(),
        "the failed unpack created {}",
        deep.display()
    );
    assert_eq!(
        names(env.dir.path()),
        before,
        "the failed unpack left something behind"
    );
    // The same pack from stdin (spooled into the store that was to be made).
    let mut c = env.cmd();
    c.args(["--store", &deep.to_string_lossy(), "unpack", "-"])
        .stdin(fs::File::open(&pack).unwrap());
    run_command(c).fails(1, "unpack a pack of the base first");
    assert!(
        !env.path("other").exists(),
        "the failed unpack created {}",
        deep.display()
    );
    assert_eq!(
        names(env.dir.path()),
        before,
        "the failed unpack left something behind"
    );
    // An empty directory stays empty.
    let empty = env.path("empty");
    fs::create_dir(&empty).unwrap();
    env.run(&["--store", &empty.to_string_lossy(), "unpack", &pack_arg])
        .fails(1, "unpack a pack of the base first");
    assert!(
        names(&empty).is_empty(),
        "left in {}: {:?}",
        empty.display(),
        names(&empty)
    );
    // A pack that unpacks makes the store where it was asked for, and nothing else.
    fs::remove_dir(&empty).unwrap();
    let full = env.path("full.zcpack");
    let id = env.snapshot(&env.path("src"));
    env.run(&["pack", &id, "--out", &full.to_string_lossy()])
        .ok();
    let before = names(env.dir.path());
    let got = env
        .run(&[
            "--store",
            &deep.to_string_lossy(),
            "unpack",
            &full.to_string_lossy(),
        ])
        .ok()
        .last_line();
    assert_eq!(got, id);
    assert_eq!(names(&env.path("other/host")), ["store"]);
    let mut after = before.clone();
    after.push("other".into());
    after.sort();
    assert_eq!(names(env.dir.path()), after);
    env.run(&["--store", &deep.to_string_lossy(), "verify"])
        .ok();
}

/// Every command a message names in backquotes (`zeroclaw-bundle VERB ...` or `VERB`, other
/// than the `names` it quotes) exists: its `--help` succeeds.
#[track_caller]
fn named_commands_exist(env: &TestEnv, message: &str, names: &[&str]) {
    let mut verbs = Vec::new();
    for quoted in message.split('`').skip(1).step_by(2) {
        let mut words = quoted.split_whitespace();
        let first = words.next().unwrap_or("");
        let verb = if first == "zeroclaw-bundle" {
            words.next().unwrap_or("")
        } else {
            first
        };
        if verb.chars().all(|c| c.is_ascii_lowercase())
            && !verb.is_empty()
            && !names.contains(&verb)
        {
            verbs.push(verb.to_string());
        }
    }
    assert!(!verbs.is_empty(), "no command named in: {message}");
    for verb in verbs {
        let r = env.run(&[verb.as_str(), "--help"]);
        assert!(
            r.out.status.success(),
            "the message suggests `{verb}`, which is no command:\n{message}\n{}",
            r.describe()
        );
    }
}

#[test]
fn an_unpack_refused_over_a_local_name_suggests_commands_that_exist() {
    let env = TestEnv::new();
    let (a, b) = (env.path("a"), env.path("b"));
    write(&a.join("f"), b"a\n");
    write(&b.join("f"), b"b\n");
    let other = env.path("other-store").to_string_lossy().into_owned();
    let theirs = env
        .run(&[
            "--store",
            &other,
            "-q",
            "snapshot",
            "--dir",
            &a.to_string_lossy(),
            "--name",
            "nightly",
        ])
        .ok()
        .last_line();
    let pack = env.path("nightly.zcpack").to_string_lossy().into_owned();
    env.run(&["--store", &other, "pack", &theirs, "--out", &pack])
        .ok();
    env.snapshot_with(&b, &["--name", "nightly"]).ok();
    let r = env
        .run(&["unpack", &pack])
        .fails(1, "already names snapshot");
    let err = r.stderr();
    assert!(
        !err.contains("rename"),
        "there is no rename command:\n{err}"
    );
    assert!(err.contains("zeroclaw-bundle forget nightly"), "{err}");
    named_commands_exist(&env, &err, &["nightly"]);
    // What it suggests works.
    env.run(&["forget", "nightly"]).ok();
    assert_eq!(env.run(&["unpack", &pack]).ok().last_line(), theirs);
}

/// `pack SNAPSHOT --out -` with a reader that takes `take` bytes (all when `None`) and then
/// closes the pipe.
fn pack_into_reader(env: &TestEnv, id: &str, take: Option<usize>) -> (Run, usize) {
    use std::io::Read;
    use std::process::Stdio;
    let mut c = env.cmd();
    c.args(["pack", id, "--out", "-"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let cmd = format!("{c:?} | head -c {take:?}");
    let mut child = c.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut got = Vec::new();
    match take {
        Some(n) => {
            let mut buf = vec![0; n];
            stdout.read_exact(&mut buf).unwrap();
            got = buf;
        }
        None => {
            stdout.read_to_end(&mut got).unwrap();
        }
    }
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    (Run { cmd, out }, got.len())
}

#[test]
fn a_pack_to_a_reader_that_stops_early_fails() {
    let env = TestEnv::new();
    let small = env.path("small");
    write(&small.join("f"), b"a few bytes\n");
    let big = env.path("big");
    write(&big.join("f"), &crate::util::bytes(3, 2 << 20));
    for dir in [&small, &big] {
        let id = env.snapshot(dir);
        // The whole pack: a reader that takes every byte is a success.
        let (r, whole) = pack_into_reader(&env, &id, None);
        let r = r.ok();
        assert!(r.stderr().contains("packed"), "{}", r.describe());
        // A small pack fits in the pipe's buffer (every write succeeds), a big one does not
        // (a write fails with EPIPE); both must fail, and never say "packed". So must a
        // reader that takes all but the last byte.
        for take in [100, whole - 1] {
            let (r, _) = pack_into_reader(&env, &id, Some(take));
            assert_eq!(r.code(), 1, "{}", r.describe());
            assert!(!r.stderr().contains("packed"), "{}", r.describe());
            assert!(
                r.stderr().contains("its reader closed the pipe")
                    && r.stderr().contains("not a whole pack"),
                "{}",
                r.describe()
            );
        }
    }
}

/// The cells of `list`'s text table, cut at the header's column starts, keyed by header.
fn table_rows(text: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let mut lines = text.lines();
    let header = lines.next().expect("a header");
    let starts: Vec<(usize, &str)> = header
        .split_whitespace()
        .map(|h| (header.find(h).unwrap(), h))
        .collect();
    lines
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            starts
                .iter()
                .enumerate()
                .map(|(i, (at, h))| {
                    // Right-aligned counts end where the next column starts.
                    let from = if i > 0 {
                        starts[i - 1].0 + starts[i - 1].1.len()
                    } else {
                        0
                    };
                    let to = starts
                        .get(i + 1)
                        .map_or(chars.len(), |n| n.0)
                        .min(chars.len());
                    let from = if ["FILES", "SIZE"].contains(h) {
                        from
                    } else {
                        *at
                    };
                    let cell: String = chars[from.min(to)..to].iter().collect();
                    (h.to_string(), cell.trim().to_string())
                })
                .collect()
        })
        .collect()
}

#[test]
fn list_says_in_text_what_its_json_says() {
    let env = TestEnv::new();
    let install = sample_install(&env, "install");
    let export = |out: &str| {
        env.run(&[
            "-q",
            "export",
            "researcher",
            "--install",
            &install.to_string_lossy(),
            "--out",
            &env.path(out).to_string_lossy(),
        ])
        .ok()
        .last_line()
    };
    let older = export("b1");
    std::fs::write(
        install.join("agents/researcher/workspace/IDENTITY.md"),
        "# changed\n",
    )
    .unwrap();
    let newer = export("b2");
    let src = env.path("src");
    write(&src.join("f"), b"f\n");
    env.snapshot_with(&src, &["--name", "nightly"]).ok();
    let json = env.run(&["--json", "list"]).ok().json();
    let text = env.run(&["list"]).ok().stdout();
    let rows = table_rows(&text);
    let json = json.as_array().unwrap();
    assert_eq!(rows.len(), json.len(), "{text}");
    for (row, doc) in rows.iter().zip(json) {
        let what = format!("{text}\n{doc}");
        assert!(
            doc["snapshot"]
                .as_str()
                .unwrap()
                .starts_with(&row["SNAPSHOT"]),
            "{what}"
        );
        let name = doc["name"].as_str().unwrap_or("-");
        assert_eq!(row["NAME"], name, "NAME says what `name` says\n{what}");
        let agent = match (doc["agent"].as_str(), doc["agent_latest"].as_bool()) {
            (Some(a), Some(true)) => format!("{a} (latest)"),
            (Some(a), Some(false)) => a.to_string(),
            (None, Some(false)) => "-".to_string(),
            other => panic!("agent and agent_latest disagree: {other:?}\n{what}"),
        };
        assert_eq!(row["AGENT"], agent, "AGENT says what `agent` says\n{what}");
    }
    // The latest is the one `agent/researcher` names.
    let latest: Vec<&str> = json
        .iter()
        .filter(|d| d["agent_latest"] == true)
        .map(|d| d["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(latest, [newer.as_str()]);
    assert_ne!(older, newer);
    let shown = env.run(&["--json", "show", "agent/researcher"]).ok().json();
    assert_eq!(shown["snapshot"], newer.as_str());
}

/// What `VERB --help` says `--install` defaults to (the text inside its `[default: ...]`).
fn install_default_in_help(env: &TestEnv, verb: &str) -> String {
    let help = env.run(&[verb, "--help"]).ok().stdout();
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("--install"))
        .unwrap_or_else(|| panic!("`{verb} --help` has no --install:\n{help}"));
    let at = line.find("[default: ").expect("a [default: ...]") + "[default: ".len();
    let end = line.rfind(']').expect("the default's ]");
    line[at..end].to_string()
}

#[test]
fn every_place_that_names_the_install_default_says_it_one_way() {
    let env = TestEnv::new();
    let default = install_default_in_help(&env, "export");
    for verb in ["import", "snapshot", "review"] {
        assert_eq!(
            install_default_in_help(&env, verb),
            default,
            "`{verb} --help`"
        );
    }
    // The error when there is no install there says the same, for export and for import,
    // whether the install came from the default or from --install.
    let home = env.path("home");
    fs::create_dir_all(&home).unwrap();
    let bundle = env.path("bundle");
    fs::create_dir_all(&bundle).unwrap();
    let runs = [
        vec!["export", "researcher", "--out", "b"],
        vec!["import", "bundle", "--dry-run"],
        vec!["export", "researcher", "--out", "b", "--install", "nowhere"],
        vec!["import", "bundle", "--dry-run", "--install", "nowhere"],
    ];
    for args in runs {
        let r = env
            .run_with(&args, &[("HOME", home.to_str().unwrap())])
            .fails(1, "no ZeroClaw install at");
        assert!(
            r.stderr()
                .contains(&format!("without it, the install is {default})")),
            "the error says the default another way than --help ({default}):\n{}",
            r.describe()
        );
    }
}

#[test]
fn an_export_names_the_keys_zeroclaw_does_not_know() {
    let env = TestEnv::new();
    let install = sample_install(&env, "install");
    let export = |out: &str, json: bool| {
        let mut args = vec![
            "export".to_string(),
            "researcher".into(),
            "--install".into(),
            install.to_string_lossy().into_owned(),
            "--out".into(),
            env.path(out).to_string_lossy().into_owned(),
        ];
        if json {
            args.insert(0, "--json".into());
        }
        env.run(&args).ok()
    };
    // The sample install as written: every key is one ZeroClaw knows.
    let clean = export("clean", true).json();
    assert_eq!(clean["unknown_keys"], serde_json::json!([]), "{clean}");
    // A typo, and the name another tool uses for what ZeroClaw calls `uri`.
    let config = install.join("config.toml");
    let text = fs::read_to_string(&config).unwrap();
    let text = text
        .replace(
            "model = \"claude-opus-5\"\n",
            "model = \"claude-opus-5\"\nbase_urll = \"https://llm.example/v1\"\n",
        )
        .replace(
            "model = \"gpt-backup\"\n",
            "model = \"gpt-backup\"\nbase_url = \"https://backup.example/v1\"\n",
        );
    fs::write(&config, text).unwrap();
    let expected = [
        "providers.models.anthropic.main.base_urll",
        "providers.models.openai.backup.base_url",
    ];
    let report = export("typo", false);
    let out = report.stdout();
    let section = out
        .split("Keys ZeroClaw's schema does not know")
        .nth(1)
        .unwrap_or_else(|| panic!("the report does not name them\n{}", report.describe()));
    for key in expected {
        assert!(
            section.contains(&format!("  - {key}\n")),
            "{}",
            report.describe()
        );
    }
    let json = export("typo-json", true).json();
    assert_eq!(json["unknown_keys"], serde_json::json!(expected), "{json}");
    // They were left out of the bundle (ZeroClaw's serde ignores them).
    let bundle = fs::read_to_string(env.path("typo/config.toml")).unwrap();
    assert!(!bundle.contains("example/v1"), "{bundle}");
}

/// The linking example (tests/zeroclaw-link, its own workspace) has its own Cargo.lock, which
/// a change of this crate's dependencies makes stale: `scripts/test.sh` then rewrote it and
/// left the tree modified. It must resolve as committed (`--locked` refuses to write it).
#[test]
fn the_linking_examples_lock_is_in_step_with_the_manifests() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.args([
        "tree",
        "--locked",
        "--offline",
        "-e",
        "normal",
        "--manifest-path",
    ])
    .arg(here.join("tests/zeroclaw-link/Cargo.toml"));
    run_command(c).ok();
}

/// Runs `scripts/demo.sh` from a copy of the scripts, with a stand-in cargo that reports the
/// real binary (and logs whether the demo said what it was doing before the build), stdout
/// and stderr to files of their own. Returns the run, its stdout, its stderr and the log.
fn run_demo(env: &TestEnv) -> (Run, String, String, String) {
    use std::os::unix::fs::PermissionsExt;
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = env.path("checkout");
    fs::create_dir_all(root.join("scripts")).unwrap();
    for s in ["demo.sh", "setup.sh", "sample-install.sh"] {
        fs::copy(here.join("scripts").join(s), root.join("scripts").join(s)).unwrap();
    }
    let bin = env.path("stub-bin");
    fs::create_dir_all(&bin).unwrap();
    let (out, err, log) = (
        env.path("demo.out"),
        env.path("demo.err"),
        env.path("cargo.log"),
    );
    let cargo = bin.join("cargo");
    fs::write(
        &cargo,
        format!(
            "#!/bin/sh\n[ \"$1\" = build ] || exit 0\n\
             if grep -q 'demo: building' '{out}'; then echo said-first >> '{log}'; \
             else echo silent-before-build >> '{log}'; fi\n\
             echo '{{\"reason\":\"compiler-artifact\",\"executable\":\"{BIN}\"}}'\n",
            out = out.display(),
            log = log.display(),
            BIN = crate::util::BIN,
        ),
    )
    .unwrap();
    fs::set_permissions(&cargo, fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = Command::new("bash");
    c.arg(root.join("scripts/demo.sh"))
        .env(
            "PATH",
            format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display()),
        )
        .env("TMPDIR", env.dir.path())
        .env_remove("ZEROCLAW_BUNDLE_STORE")
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap());
    let status = c.status().unwrap();
    let read = |p: &Path| fs::read_to_string(p).unwrap_or_default();
    let run = Run {
        cmd: "scripts/demo.sh".into(),
        out: std::process::Output {
            status,
            stdout: read(&out).into_bytes(),
            stderr: read(&err).into_bytes(),
        },
    };
    let (o, e) = (read(&out), read(&err));
    (run, o, e, read(&log))
}

#[test]
fn the_demo_says_what_it_does_first_and_keeps_notes_with_their_steps() {
    let env = TestEnv::new();
    let (run, out, err, log) = run_demo(&env);
    assert_eq!(run.code(), 0, "{}", run.describe());
    assert_eq!(
        log.trim(),
        "said-first",
        "the demo built before saying so\n{}",
        run.describe()
    );
    assert!(
        err.is_empty(),
        "notes went to stderr, away from their steps:\n{err}"
    );
    // Each step's notes are between its line and the next step's.
    let section = |step: &str| -> String {
        let at = out
            .find(&format!("$ {step}"))
            .unwrap_or_else(|| panic!("no step {step:?}\n{out}"));
        let rest = &out[at + 2..];
        let end = rest.find("\n$ ").unwrap_or(rest.len());
        rest[..end].to_string()
    };
    for (step, note) in [
        ("zeroclaw-bundle pack", "packed "),
        ("zeroclaw-bundle --store other-host unpack", "unpacked "),
    ] {
        let s = section(step);
        assert!(
            s.contains(note),
            "the note {note:?} is not under {step:?}:\n{s}\n---\n{out}"
        );
    }
}

#[test]
fn a_patch_of_two_manifests_shows_the_paths_required_secrets_lists() {
    let env = TestEnv::new();
    let one = sample_install(&env, "one");
    let two = env.path("two");
    crate::util::copy_tree(&one, &two);
    let config = two.join("config.toml");
    let text = fs::read_to_string(&config).unwrap().replace(
        "servers = [\"github\"]",
        "servers = [\"github\", \"shell\"]",
    ) + "\n[[mcp.servers]]\nname = \"shell\"\ncommand = \"bash\"\n\n[mcp.servers.env]\nSHELL_TOKEN = \"tok-SECRET-VALUE\"\n";
    fs::write(&config, text).unwrap();
    for (install, out) in [(&one, "b1"), (&two, "b2")] {
        env.run(&[
            "export",
            "researcher",
            "--install",
            &install.to_string_lossy(),
            "--out",
            &env.path(out).to_string_lossy(),
        ])
        .ok();
    }
    let r = env.run(&["diff", "-p", "b1", "b2"]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    let out = r.stdout();
    let manifest = out
        .split("+++ b/zeroclaw-agent.toml")
        .nth(1)
        .unwrap_or_else(|| panic!("no manifest patch\n{out}"));
    assert!(
        manifest.contains("+    \"mcp.servers.shell.env.SHELL_TOKEN\",")
            && manifest.contains("     \"providers.models.anthropic.main.api_key\","),
        "required_secrets lists paths; a patch shows them\n{out}"
    );
    assert!(!manifest.contains("not shown"), "{out}");
    // Secret values stay masked: the two installs' own config.toml, side by side.
    let r = env.run(&["diff", "-p", "one", "two"]);
    assert!(
        r.stdout()
            .contains("SHELL_TOKEN = \"(not shown: a secret field)\"")
            && !r.stdout().contains("tok-SECRET-VALUE"),
        "{}",
        r.describe()
    );
}
