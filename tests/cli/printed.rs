//! What the tool prints must be true and safe to show. Pins: the import's dry-run config diff
//! shows no byte of an install's secret in any TOML shape (a multi-line basic or literal
//! string, a secret table whose header carries a comment, an inline table inside a non-secret
//! key), in text and in `--json`; a bidi override or a zero-width character reaches neither
//! the terminal (the dry-run diff) nor a `--json` document raw (`ls -r`, `diff`, the dry run),
//! while the JSON values stay exact; `unpack` of a damaged pack whose objects the store
//! already holds says that it read only what the store lacked, in text and JSON; with
//! `secrets.encrypt = false` the import says a typed secret is stored as plain text (and the
//! file's mode), never "encrypted", in text and JSON.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::util::{write, Run, TestEnv, BIN};
use crate::ux::{screen_until, wait_file, Tmux};

/// A small install with one agent needing one secret, exported by us: the bundle's path.
fn bundle(env: &TestEnv) -> PathBuf {
    let root = env.path("source");
    write(
        &root.join("config.toml"),
        b"schema_version = 3\n\n[providers.models.anthropic.main]\napi_key = \"sk-source\"\n\
          model = \"claude-opus-5\"\n\n[risk_profiles.guarded]\nlevel = \"supervised\"\n\n\
          [agents.researcher]\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"guarded\"\n",
    );
    write(
        &root.join("agents/researcher/workspace/notes.md"),
        b"notes\n",
    );
    let out = env.path("bundle");
    env.run(&[
        "export",
        "researcher",
        "--install",
        &root.to_string_lossy(),
        "--out",
        &out.to_string_lossy(),
    ])
    .ok();
    out
}

/// An install whose `config.toml` is `tail` after the schema line: the import appends its
/// entries after it, so `tail`'s last lines are the diff's context.
fn install_with(env: &TestEnv, name: &str, tail: &str) -> PathBuf {
    let root = env.path(name);
    write(
        &root.join("config.toml"),
        format!("schema_version = 3\n\n{tail}\n").as_bytes(),
    );
    root
}

/// `import --dry-run` of `bundle` into `install`, as text and as `--json`.
fn dry_runs(env: &TestEnv, bundle: &Path, install: &Path) -> [Run; 2] {
    let args = |json: bool| {
        let mut a: Vec<String> = Vec::new();
        if json {
            a.push("--json".into());
        }
        a.extend([
            "import".into(),
            bundle.to_string_lossy().into_owned(),
            "--install".into(),
            install.to_string_lossy().into_owned(),
            "--dry-run".into(),
        ]);
        a
    };
    [env.run(&args(false)).ok(), env.run(&args(true)).ok()]
}

/// Every shape the line masker missed: each case is the end of the install's config (the
/// diff's context), its secret bytes marked `LEAK`. The masked value must be shown in their
/// place (so the case really reached the diff), and no `LEAK` anywhere, text or JSON.
#[test]
fn the_dry_run_diff_masks_an_install_secret_in_every_toml_shape() {
    let env = TestEnv::new();
    let bundle = bundle(&env);
    let cases = [
        (
            "multi-line basic string",
            "[providers.models.openai.local]\nmodel = \"gpt-local\"\napi_key = \"\"\"\nsk-LEAK-line-1\nsk-LEAK-line-2\"\"\"",
        ),
        (
            "multi-line literal string",
            "[providers.models.openai.local]\nmodel = \"gpt-local\"\napi_key = '''\nsk-LEAK-literal-1\nsk-LEAK-literal-2'''",
        ),
        (
            "secret table whose header carries a comment",
            "[providers.models.openai.local]\nmodel = \"gpt-local\"\n\n\
             [providers.models.openai.local.extra_headers] # rotated monthly\nX_API = \"hdr-LEAK\"",
        ),
        (
            "inline table inside a non-secret key",
            "[mcp]\nservers = [{ name = \"s\", command = \"c\", env = { TOKEN = \"inline-LEAK\", NESTED = { DEEP = \"deep-LEAK\" } } }]",
        ),
    ];
    for (i, (what, tail)) in cases.iter().enumerate() {
        let install = install_with(&env, &format!("y{i}"), tail);
        let [text, json] = dry_runs(&env, &bundle, &install);
        let diff = json.json()["config_diff"]
            .as_str()
            .expect("config_diff")
            .to_string();
        for out in [text.stdout(), text.stderr(), json.stdout(), json.stderr()] {
            assert!(
                !out.contains("LEAK"),
                "{what}: a secret of the install was shown:\n{out}"
            );
        }
        assert!(
            diff.contains("(not shown: a secret field)"),
            "{what}: the case is not in the diff's context:\n{diff}"
        );
    }
}

/// A bidi override and a zero-width space in the install's config (the diff's context)
/// reach the terminal escaped in the dry run; the `--json` document carries them as `\uXXXX`
/// escapes, never raw, and its value is still the exact text.
#[test]
fn the_dry_run_diff_escapes_bidi_and_zero_width_characters() {
    let env = TestEnv::new();
    let bundle = bundle(&env);
    let install = install_with(
        &env,
        "y",
        "[providers.models.openai.local]\nmodel = \"gpt\u{202e}evil\u{200b}x\"",
    );
    let [text, json] = dry_runs(&env, &bundle, &install);
    for (what, out) in [("text", text.stdout()), ("json", json.stdout())] {
        assert!(
            !out.contains('\u{202e}') && !out.contains('\u{200b}'),
            "{what}: a raw bidi or zero-width character:\n{out}"
        );
    }
    assert!(
        text.stdout()
            .contains("model = \"gpt\\u{202e}evil\\u{200b}x\""),
        "{}",
        text.describe()
    );
    assert!(json.stdout().contains("\\u202e"), "{}", json.describe());
    assert!(
        json.json()["config_diff"]
            .as_str()
            .unwrap()
            .contains("model = \"gpt\u{202e}evil\u{200b}x\""),
        "the JSON value is the exact text: {}",
        json.describe()
    );
}

/// `--json ls -r` of a name holding DEL (0x7F) and `--json diff` of a name holding U+202E:
/// neither byte sequence is on stdout raw, every document parses, and the names in it are
/// exact.
#[test]
fn json_output_carries_no_raw_control_or_bidi_character() {
    let env = TestEnv::new();
    let a = env.path("a");
    let del = "del\u{7f}name";
    let bidi = "bidi\u{202e}txt.md";
    write(&a.join("dir").join(del), b"one\n");
    write(&a.join(bidi), b"one\n");
    let first = env.snapshot(&a);
    write(&a.join(bidi), b"two\n");
    let second = env.snapshot(&a);

    let ls = env.run(&["--json", "ls", "-r", &first]).ok();
    assert!(
        !ls.out.stdout.contains(&0x7f),
        "a raw DEL byte: {}",
        ls.describe()
    );
    let paths: Vec<String> = ls
        .json()
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| e["path"].as_str().expect("path").to_string())
        .collect();
    assert!(paths.contains(&format!("dir/{del}")), "{paths:?}");

    let diff = env.run(&["--json", "diff", &first, &second]);
    assert_eq!(diff.code(), 1, "one change: {}", diff.describe());
    let out = diff.stdout();
    assert!(
        !out.contains('\u{202e}'),
        "a raw U+202E: {}",
        diff.describe()
    );
    let changed: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v: &serde_json::Value| v["type"] == "file")
        .collect();
    assert_eq!(changed.len(), 1, "{out}");
    assert_eq!(changed[0]["path"], bidi, "{out}");
}

/// The pack's last object is damaged (its trailer resealed) and the store already holds
/// every object: nothing damaged is read, so the unpack succeeds, and it says that it read
/// only the snapshot record and that the rest was already there, not "verified". A fresh
/// store then reads everything and says so; the JSON counts agree.
#[test]
fn unpack_says_which_objects_it_read_and_which_the_store_held() {
    let env = TestEnv::new();
    let src = env.path("src");
    for i in 0..6u64 {
        write(
            &src.join(format!("d{}/f{i}.bin", i % 2)),
            &crate::util::bytes(i, 5_000),
        );
    }
    let id = env.snapshot(&src);
    let pack = env.path("p.zcpack");
    env.run(&["pack", &id, "--out", &pack.to_string_lossy()])
        .ok();
    let good = fs::read(&pack).unwrap();
    let fresh = env.path("fresh");
    let v = env
        .run(&[
            "--json",
            "--store",
            &fresh.to_string_lossy(),
            "unpack",
            &pack.to_string_lossy(),
        ])
        .ok()
        .json();
    let total = v["objects"].as_u64().expect("objects");
    assert_eq!(
        (v["read"].as_u64(), v["already_present"].as_u64()),
        (Some(total), Some(0)),
        "a fresh store reads every object: {v}"
    );

    let mut data = good.clone();
    let n = data.len();
    let index_offset = u64::from_le_bytes(data[n - 48..n - 40].try_into().unwrap()) as usize;
    data[index_offset - 1] ^= 0x20;
    let hex = crate::util::blake3_hex(&data[..n - 48]);
    for (i, byte) in data[n - 40..n - 8].iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    fs::write(&pack, &data).unwrap();
    let r = env.run(&["unpack", &pack.to_string_lossy()]).ok();
    assert_eq!(r.last_line(), id);
    let said = r.stderr();
    assert!(
        !said.contains("verified,") && !said.contains(", verified"),
        "{said}"
    );
    assert!(
        said.contains("unpacked 1 object (read from the pack and verified)")
            && said.contains(&format!(
                "{} objects the store already held were not read from the pack",
                total - 1
            )),
        "{}",
        r.describe()
    );
    let v = env
        .run(&["--json", "unpack", &pack.to_string_lossy()])
        .ok()
        .json();
    assert_eq!(
        (v["read"].as_u64(), v["already_present"].as_u64()),
        (Some(1), Some(total - 1)),
        "{v}"
    );
}

/// The whole scrollback of a tmux session, wrapped lines joined.
fn scrollback(t: &Tmux) -> String {
    let out = t
        .command()
        .args(["capture-pane", "-p", "-J", "-S", "-", "-t", &t.name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn send(t: &Tmux, keys: &[&str]) {
    let ok = t
        .command()
        .args(["send-keys", "-t", &t.name])
        .args(keys)
        .status()
        .unwrap()
        .success();
    assert!(ok, "tmux send-keys {keys:?}");
}

/// An install with `secrets.encrypt = false` (ZeroClaw then keeps secrets as typed): a secret
/// typed at the import's prompt lands in `config.toml` as plain text, and the prompt, the
/// closing text and the `--json` report say so, with the file's mode; none says "encrypted".
#[test]
fn with_encryption_off_a_typed_secret_is_said_to_be_plain_text() {
    let env = TestEnv::new();
    let bundle = bundle(&env);
    let secret = "typed-plain-secret-5150";
    for (tag, json) in [("plain-text", false), ("plain-json", true)] {
        let install = install_with(&env, tag, "[secrets]\nencrypt = false");
        fs::set_permissions(
            install.join("config.toml"),
            fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let out = env.path(&format!("{tag}.out"));
        let rc = env.path(&format!("{tag}.rc"));
        let script = env.path(&format!("{tag}.sh"));
        fs::write(
            &script,
            format!(
                "export ZEROCLAW_BUNDLE_STORE={store}\n{bin} {json} import {bundle} --install {install} > {out}\necho $? > {rc}\n",
                store = env.store.display(),
                bin = BIN,
                json = if json { "--json" } else { "" },
                bundle = bundle.display(),
                install = install.display(),
                out = out.display(),
                rc = rc.display(),
            ),
        )
        .unwrap();
        let Some(t) = Tmux::start(tag, &script) else {
            return;
        };
        screen_until(&t, |s| s.contains("[y/N]"));
        send(&t, &["y", "Enter"]);
        screen_until(&t, |s| {
            s.contains("  providers.models.anthropic.main.api_key:")
        });
        send(&t, &[secret, "Enter"]);
        wait_file(&rc);
        let screen = scrollback(&t);
        drop(t);
        assert_eq!(fs::read_to_string(&rc).unwrap().trim(), "0", "{screen}");
        let printed = fs::read_to_string(&out).unwrap();
        assert!(!screen.contains(secret), "the secret was echoed:\n{screen}");
        assert!(
            screen.contains("this install sets secrets.encrypt = false")
                && screen.contains("stored as plain text in")
                && screen.contains("mode 0644: every user of this machine can read it"),
            "the prompt:\n{screen}"
        );
        for said in [&screen, &printed] {
            assert!(
                !said.to_lowercase().contains("stored encrypted"),
                "claims encryption:\n{said}"
            );
        }
        let config = fs::read_to_string(install.join("config.toml")).unwrap();
        assert!(
            config.contains(&format!("api_key = \"{secret}\"")),
            "stored as typed: {config}"
        );
        if json {
            let v: serde_json::Value = serde_json::from_str(&printed).unwrap();
            assert_eq!(v["secrets_encrypted"], false, "{v}");
            assert_eq!(v["config_mode"], "0644", "{v}");
            assert_eq!(
                v["secrets_filled"],
                serde_json::json!(["providers.models.anthropic.main.api_key"])
            );
        } else {
            assert!(
                printed.contains(
                    "Stored as plain text (this install sets secrets.encrypt = false): \
                     providers.models.anthropic.main.api_key, in "
                ) && printed.contains("mode 0644: every user of this machine can read it"),
                "{printed}"
            );
        }
    }
}
