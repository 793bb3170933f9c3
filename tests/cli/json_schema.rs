//! `--json` is one vocabulary (issue 22 item 11): every command is run with `--json` and its
//! document is checked against the schema below, which is README's "JSON output" table written
//! as data: the keys each document must have and their types. A snapshot id is `snapshot`
//! everywhere, an object id `object`; no document anywhere has an `id`, `dest`, `forgotten`
//! or `unmounted` key. Names inside a snapshot travel losslessly (`path`, `path_bytes`,
//! `display`). `cat` and `pack --out -` refuse `--json`. Pins: a renamed key, a short id, a
//! TOML text where a JSON value belongs, an escaped name in `path`.

use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::process::Stdio;

use serde_json::Value;

use crate::export::Install;
use crate::util::*;

/// A key's type: `id` is a full 64-hex id, a trailing `?` also allows null.
pub(crate) type Spec = &'static [(&'static str, &'static str)];

const EXPORT: Spec = &[
    ("snapshot", "id"),
    ("agent", "str"),
    ("destination", "str?"),
    ("reused_files", "int?"),
    ("replaced", "any"),
    ("files", "int"),
    ("bytes", "int"),
    ("skills_carried", "int"),
    ("skill_bundles", "arr"),
    ("tallies", "arr"),
    ("skipped", "arr"),
    ("risk_flags", "arr"),
    ("required_secrets", "arr"),
    ("scrubbed_by_name", "arr"),
    ("credential_looking_values", "arr"),
    ("personal_files", "arr"),
    ("skipped_config_sections", "arr"),
    ("skipped_config_reason", "str?"),
    ("unknown_keys", "arr"),
    ("set_secrets", "arr"),
    ("dropped", "arr"),
    ("work", "obj"),
];
const SNAPSHOT_DIR: Spec = &[
    ("snapshot", "id"),
    ("root", "id"),
    ("files", "int"),
    ("bytes", "int"),
    ("report", "obj"),
    ("work", "obj"),
];
const LIST: Spec = &[
    ("snapshot", "id"),
    ("created_unix_ns", "int"),
    ("created", "str"),
    ("kind", "str"),
    ("source", "str"),
    ("agent", "str?"),
    ("agent_latest", "bool"),
    ("name", "str?"),
    ("files", "int"),
    ("bytes", "int"),
    ("root", "id"),
];
const LIST_REMOTE: Spec = &[
    ("snapshot", "id"),
    ("remote", "str"),
    ("created_unix_ns", "int"),
    ("created", "str"),
    ("kind", "str"),
    ("source", "str"),
    ("agent", "str?"),
    ("agent_latest", "bool"),
    ("name", "str?"),
    ("files", "int"),
    ("bytes", "int"),
    ("root", "id"),
];
const SHOW: Spec = &[
    ("snapshot", "id"),
    ("root", "id"),
    ("created_unix_ns", "int"),
    ("created", "str"),
    ("host", "str"),
    ("kind", "str"),
    ("source", "str"),
    ("agent", "str?"),
    ("name", "str?"),
    ("parent", "id?"),
    ("report", "obj"),
];
const LS: Spec = &[
    ("path", "str?"),
    ("display", "str"),
    ("kind", "str"),
    ("mode", "str"),
    ("size", "int"),
    ("object", "id"),
];
const CHECKOUT: Spec = &[
    ("snapshot", "id"),
    ("destination", "str"),
    ("files", "int"),
    ("bytes", "int"),
    ("reused_files", "int"),
    ("replaced", "any"),
];
const MOUNT: Spec = &[("snapshot", "id"), ("mountpoint", "str"), ("pid", "int")];
const UMOUNT: Spec = &[("mountpoint", "str")];
const RECOVER: Spec = &[
    ("destination", "str"),
    ("restored_from", "str?"),
    ("removed_old", "arr"),
    ("removed_staging", "arr"),
    ("left_alone", "arr"),
];
const VERIFY: Spec = &[
    ("objects", "int"),
    ("bytes", "int"),
    ("snapshots", "int"),
    ("tree_indexes", "int"),
    ("tree_indexes_missing", "int"),
    ("problems", "arr"),
];
const GC: Spec = &[
    ("reachable", "int"),
    ("removed", "int"),
    ("freed_bytes", "int"),
    ("young_kept", "int"),
    ("young_kept_bytes", "int"),
    ("temp_removed", "int"),
    ("tree_indexes_removed", "int"),
    ("signatures_removed", "int"),
    ("dest_records_removed", "int"),
    ("duplicates_removed", "int"),
    ("packs_merged", "int"),
];
const REINDEX: Spec = &[
    ("snapshots", "int"),
    ("tree_indexes_written", "int"),
    ("problems", "arr"),
];
const FORGET: Spec = &[("snapshot", "id"), ("served_by_a_mount", "bool")];
const SEMANTIC: Spec = &[
    ("type", "str"),
    ("area", "str"),
    ("item", "str"),
    ("path", "str"),
    ("grant", "bool"),
];
const FILE: Spec = &[
    ("type", "str"),
    ("status", "str"),
    ("path", "str?"),
    ("display", "str"),
];
const FILE_SIDE: Spec = &[
    ("kind", "str"),
    ("mode", "str"),
    ("size", "int"),
    ("object", "id"),
];
const SUMMARY: Spec = &[
    ("type", "str"),
    ("a", "obj"),
    ("b", "obj"),
    ("added", "int"),
    ("deleted", "int"),
    ("modified", "int"),
    ("kind_changed", "int"),
    ("mode_changed", "int"),
    ("renamed", "int"),
    ("bytes_added", "int"),
    ("bytes_removed", "int"),
    ("trees_read", "int"),
    ("new_grants", "bool"),
];
const DIFF_SIDE: Spec = &[("kind", "str"), ("root", "id"), ("label", "str")];
const PACK: Spec = &[
    ("snapshot", "id"),
    ("destination", "str"),
    ("since", "id?"),
    ("trees_only", "bool"),
    ("objects", "int"),
    ("trees", "int"),
    ("blobs", "int"),
    ("bytes", "int"),
    ("pack_bytes", "int"),
];
const UNPACK: Spec = &[
    ("snapshot", "id"),
    ("objects", "int"),
    ("read", "int"),
    ("already_present", "int"),
];
const REMOTE_ADD: Spec = &[("remote", "str"), ("url", "str"), ("endpoint", "str?")];
const REMOTE_REMOVE: Spec = &[("remote", "str")];
const REMOTE_FORGET: Spec = &[("snapshot", "id"), ("remote", "str")];
const REMOTE_GC: Spec = &[
    ("remote", "str"),
    ("snapshots", "int"),
    ("reachable", "int"),
    ("live_packs", "int"),
    ("marked", "int"),
    ("marked_young", "int"),
    ("unmarked", "int"),
    ("deleted_packs", "int"),
    ("deleted_bytes", "int"),
    ("deleted_indexes", "int"),
    ("deleted_trees", "int"),
    ("unwalked", "int"),
];
const PUSH: Spec = &[
    ("snapshot", "id"),
    ("remote", "str"),
    ("already", "bool"),
    ("objects", "int"),
    ("pack_bytes", "int"),
    ("pack", "str?"),
];
const PULL: Spec = &[
    ("snapshot", "id"),
    ("remote", "str"),
    ("packs", "int"),
    ("bytes", "int"),
];

fn is_id(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn type_ok(v: &Value, ty: &str) -> bool {
    let (ty, nullable) = match ty.strip_suffix('?') {
        Some(t) => (t, true),
        None => (ty, false),
    };
    if v.is_null() && (nullable || ty == "any") {
        return true;
    }
    match ty {
        "id" => is_id(v),
        "str" => v.is_string(),
        "int" => v.is_u64() || v.is_i64(),
        "bool" => v.is_boolean(),
        "arr" => v.is_array(),
        "obj" => v.is_object(),
        "any" => true,
        other => panic!("unknown type {other} in the schema"),
    }
}

/// Checks `doc` against `spec`: every key present with its type.
#[track_caller]
pub(crate) fn check(what: &str, doc: &Value, spec: Spec) {
    assert!(doc.is_object(), "{what}: not an object: {doc}");
    for (key, ty) in spec {
        let v = doc
            .get(*key)
            .unwrap_or_else(|| panic!("{what}: no `{key}`: {doc}"));
        assert!(type_ok(v, ty), "{what}: `{key}` is not {ty}: {doc}");
    }
}

#[track_caller]
fn check_array(what: &str, doc: &Value, spec: Spec) {
    let items = doc
        .as_array()
        .unwrap_or_else(|| panic!("{what}: not an array: {doc}"));
    assert!(!items.is_empty(), "{what}: empty, nothing checked");
    for item in items {
        check(what, item, spec);
    }
}

/// Keys the old vocabulary used; none may appear anywhere in any document.
pub(crate) fn no_old_keys(what: &str, v: &Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                assert!(
                    !["id", "dest", "forgotten", "unmounted"].contains(&k.as_str()),
                    "{what}: old key `{k}` in {v}"
                );
                no_old_keys(what, x);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| no_old_keys(what, x)),
        _ => {}
    }
}

/// Runs `args` with `--json` (in `store`), checked: exit `code`, one JSON document on stdout.
#[track_caller]
fn json(env: &TestEnv, store: &str, args: &[&OsStr], code: i32) -> Value {
    let mut full: Vec<&OsStr> = vec![OsStr::new("--store"), OsStr::new(store)];
    full.push(OsStr::new("--json"));
    full.extend_from_slice(args);
    let r = env.run(&full);
    assert_eq!(r.code(), code, "{}", r.describe());
    let v = r.json();
    no_old_keys(&r.cmd, &v);
    v
}

fn s(x: &str) -> &OsStr {
    OsStr::new(x)
}

#[test]
fn every_command_prints_the_documented_json() {
    let env = TestEnv::new();
    let store = env.store.to_string_lossy().into_owned();
    let other = env.path("other-store").to_string_lossy().into_owned();
    let install = Install::new(&env);
    let inst = install.root.as_os_str();

    // export and snapshot ALIAS (after a config change, so the diff below has a semantic
    // section with JSON values).
    let out1 = env.path("out1");
    let v = json(
        &env,
        &store,
        &[
            s("export"),
            s("researcher"),
            s("--install"),
            inst,
            s("--out"),
            out1.as_os_str(),
        ],
        0,
    );
    check("export", &v, EXPORT);
    assert!(v["destination"].is_string(), "{v}");
    let config = fs::read_to_string(install.root.join("config.toml")).unwrap();
    let config = config.replace(
        "servers = [\"github\"]",
        "servers = [\"github\", \"shell\"]",
    )
        + "\n[[mcp.servers]]\nname = \"shell\"\ncommand = \"bash\"\nargs = [\"-c\", \"serve\"]\n";
    fs::write(install.root.join("config.toml"), config).unwrap();
    let v = json(
        &env,
        &store,
        &[s("snapshot"), s("researcher"), s("--install"), inst],
        0,
    );
    check("snapshot ALIAS", &v, EXPORT);
    assert!(v["destination"].is_null(), "{v}");
    let agent2 = v["snapshot"].as_str().unwrap().to_string();

    // snapshot --dir, with a name that is not UTF-8 and one that needs JSON escaping.
    let tree = env.path("tree");
    write(&tree.join("a.md"), b"a\n");
    write(&tree.join(OsStr::from_bytes(b"caf\xe9")), b"latin-1\n");
    write(&tree.join("say \"hi\"\\n"), b"quoted\n");
    let v = json(
        &env,
        &store,
        &[s("snapshot"), s("--dir"), tree.as_os_str()],
        0,
    );
    check("snapshot --dir", &v, SNAPSHOT_DIR);
    let tree_id = v["snapshot"].as_str().unwrap().to_string();

    let v = json(&env, &store, &[s("list")], 0);
    check_array("list", &v, LIST);
    let v = json(&env, &store, &[s("show"), s("agent/researcher")], 0);
    check("show", &v, SHOW);
    assert_eq!(v["snapshot"], agent2.as_str());

    let v = json(&env, &store, &[s("ls"), s("-r"), s(&tree_id)], 0);
    check_array("ls", &v, LS);
    let rows = v.as_array().unwrap();
    let latin = rows
        .iter()
        .find(|r| r["display"] == "caf\\xe9")
        .unwrap_or_else(|| panic!("no caf\\xe9 row: {v}"));
    assert!(latin["path"].is_null(), "{latin}");
    assert_eq!(latin["path_bytes"], "636166e9", "{latin}");
    let quoted = rows
        .iter()
        .find(|r| r["path"] == "say \"hi\"\\n")
        .unwrap_or_else(|| panic!("the real name, not its escaped form, in `path`: {v}"));
    assert_eq!(quoted["display"], "say \"hi\"\\\\n", "{quoted}");
    assert!(quoted.get("path_bytes").is_none(), "{quoted}");

    let r = env.run(&["--json", "cat", &format!("{tree_id}:a.md")]);
    r.fails(1, "never JSON");

    let co = env.path("co");
    let v = json(
        &env,
        &store,
        &[s("checkout"), s(&tree_id), s("--out"), co.as_os_str()],
        0,
    );
    check("checkout", &v, CHECKOUT);
    let v = json(&env, &store, &[s("recover"), co.as_os_str()], 0);
    check("recover", &v, RECOVER);

    // diff: a directory (the first export) against a snapshot (the changed agent).
    let r = env.run(&[s("--json"), s("diff"), out1.as_os_str(), s(&agent2)]);
    assert_eq!(r.code(), 1, "{}", r.describe());
    let lines: Vec<Value> = r
        .stdout()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let mut seen = (0, 0, 0);
    for line in &lines {
        no_old_keys("diff", line);
        match line["type"].as_str() {
            Some("semantic") => {
                seen.0 += 1;
                check("diff semantic", line, SEMANTIC);
            }
            Some("file") => {
                seen.1 += 1;
                check("diff file", line, FILE);
                for side in ["old", "new"] {
                    if let Some(e) = line.get(side) {
                        check("diff file side", e, FILE_SIDE);
                    }
                }
            }
            Some("summary") => {
                seen.2 += 1;
                check("diff summary", line, SUMMARY);
                check("diff side a", &line["a"], DIFF_SIDE);
                check("diff side b", &line["b"], DIFF_SIDE);
                assert_eq!(line["a"]["kind"], "directory", "{line}");
                assert_eq!(line["b"]["kind"], "snapshot", "{line}");
                assert_eq!(line["b"]["snapshot"], agent2.as_str(), "full id: {line}");
            }
            _ => panic!("diff line of no known type: {line}"),
        }
    }
    assert!(seen.0 > 0 && seen.1 > 0 && seen.2 == 1, "{lines:?}");
    let args = lines
        .iter()
        .find(|l| l["path"] == "mcp.servers.shell.args")
        .unwrap_or_else(|| panic!("no args change: {lines:?}"));
    assert_eq!(
        args["new"],
        serde_json::json!(["-c", "serve"]),
        "a JSON value: {args}"
    );

    // pack and unpack (into another store), and pack --out - refusing --json.
    let pack = env.path("p.zcpack");
    let v = json(
        &env,
        &store,
        &[s("pack"), s(&agent2), s("--out"), pack.as_os_str()],
        0,
    );
    check("pack", &v, PACK);
    let r = env.run(&["--json", "pack", &agent2, "--out", "-"]);
    r.fails(1, "stdout carries the pack");
    let v = json(&env, &other, &[s("unpack"), pack.as_os_str()], 0);
    check("unpack", &v, UNPACK);

    // The remote verbs through a file:// remote.
    let url = format!("file://{}", env.path("remote").display());
    fs::create_dir_all(env.path("remote")).unwrap();
    let v = json(
        &env,
        &store,
        &[s("remote"), s("add"), s("origin"), s(&url)],
        0,
    );
    check("remote add", &v, REMOTE_ADD);
    let v = json(&env, &store, &[s("remote"), s("list")], 0);
    check_array("remote list", &v, REMOTE_ADD);
    let v = json(&env, &store, &[s("push"), s(&tree_id), s("origin")], 0);
    check("push", &v, PUSH);
    let v = json(&env, &store, &[s("list"), s("--remote"), s("origin")], 0);
    check_array("list --remote", &v, LIST_REMOTE);
    json(
        &env,
        &other,
        &[s("remote"), s("add"), s("origin"), s(&url)],
        0,
    );
    let v = json(
        &env,
        &other,
        &[s("pull"), s(&format!("origin/{tree_id}"))],
        0,
    );
    check("pull", &v, PULL);
    let v = json(
        &env,
        &store,
        &[s("remote"), s("forget"), s("origin"), s(&tree_id)],
        0,
    );
    check("remote forget", &v, REMOTE_FORGET);
    let v = json(&env, &store, &[s("remote"), s("gc"), s("origin")], 0);
    check("remote gc", &v, REMOTE_GC);
    let v = json(&env, &store, &[s("remote"), s("remove"), s("origin")], 0);
    check("remote remove", &v, REMOTE_REMOVE);

    // mount (foreground and --daemon) and umount, where FUSE can be used.
    if crate::mount::fuse_available() {
        let at = env.path("mnt");
        fs::create_dir_all(&at).unwrap();
        let v = json(
            &env,
            &store,
            &[s("mount"), s(&tree_id), at.as_os_str(), s("--daemon")],
            0,
        );
        check("mount --daemon", &v, MOUNT);
        assert_eq!(v["snapshot"], tree_id.as_str());
        let v = json(&env, &store, &[s("umount"), at.as_os_str()], 0);
        check("umount", &v, UMOUNT);
        let mut child = env
            .cmd()
            .args([s("--json"), s("mount"), s(&tree_id), at.as_os_str()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut doc = String::new();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        while !doc.trim_end().ends_with('}') || doc.trim().is_empty() {
            if reader.read_line(&mut doc).unwrap() == 0 {
                break;
            }
        }
        json(&env, &store, &[s("umount"), at.as_os_str()], 0);
        let status = child.wait().unwrap();
        assert!(status.success(), "foreground mount: {status}");
        let v: Value = serde_json::from_str(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
        check("mount", &v, MOUNT);
    }

    // Maintenance last: forget, gc, reindex, verify.
    let v = json(&env, &store, &[s("forget"), s(&tree_id)], 0);
    check("forget", &v, FORGET);
    let v = json(&env, &store, &[s("gc")], 0);
    check("gc", &v, GC);
    let v = json(&env, &store, &[s("reindex")], 0);
    check("reindex", &v, REINDEX);
    let v = json(&env, &store, &[s("verify")], 0);
    check("verify", &v, VERIFY);
}

const IMPORT: Spec = &[
    ("snapshot", "id"),
    ("root", "id"),
    ("source", "str"),
    ("source_kind", "str"),
    ("agent", "str"),
    ("bundle_agent", "str"),
    ("install", "str"),
    ("config", "str"),
    ("backup", "str"),
    ("entries", "arr"),
    ("notes", "arr"),
    ("trees", "arr"),
    ("config_diff", "str"),
    ("risk_flags", "arr"),
    ("required_secrets", "arr"),
    ("set_secrets", "arr"),
    ("dropped", "arr"),
    ("dry_run", "bool"),
];
const IMPORT_DONE: Spec = &[
    ("secrets_filled", "arr"),
    ("secrets_encrypted", "bool"),
    ("config_mode", "str"),
    ("provenance", "str"),
];
const IMPORT_TREE: Spec = &[
    ("bundle_path", "str"),
    ("destination", "str"),
    ("files", "int"),
    ("bytes", "int"),
];

/// `import --dry-run --json` and `import --yes --json` print the documented plan (and, when
/// applied, what was filled and where provenance went), in the one vocabulary.
#[test]
fn import_prints_the_documented_json() {
    let env = TestEnv::new();
    let store = env.store.to_string_lossy().into_owned();
    let install = Install::new(&env);
    let bundle = env.path("bundle");
    json(
        &env,
        &store,
        &[
            s("export"),
            s("researcher"),
            s("--install"),
            install.root.as_os_str(),
            s("--out"),
            bundle.as_os_str(),
        ],
        0,
    );
    let target = env.path("target-install");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("config.toml"), "schema_version = 3\n").unwrap();
    let args = |extra: &'static str| {
        vec![
            s("import"),
            bundle.as_os_str(),
            s("--install"),
            target.as_os_str(),
            s(extra),
        ]
    };
    let plan = json(&env, &store, &args("--dry-run"), 0);
    check("import --dry-run", &plan, IMPORT);
    assert_eq!(plan["dry_run"], Value::Bool(true), "{plan}");
    check_array("import --dry-run trees", &plan["trees"], IMPORT_TREE);
    let done = json(&env, &store, &args("--yes"), 0);
    check("import", &done, IMPORT);
    check("import", &done, IMPORT_DONE);
    assert_eq!(done["root"], plan["root"], "one content id: {done}");
    assert_eq!(done["dry_run"], Value::Bool(false), "{done}");
}
