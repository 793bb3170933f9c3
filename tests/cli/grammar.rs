//! One grammar (`src/source.rs`): every verb that takes a reference reads
//! `DIR | PACK | SNAPSHOT | NAME | agent/ALIAS | REMOTE/REF[:PATH]` the same way, with one set of
//! error messages. Pinned as a table, each verb against each form: a cell either works (checked
//! by what it printed, published or mounted) or fails with the one message of its form, which
//! is the same for every verb but for the verb's name: a missing path "does not exist", an
//! unknown remote name "is not a configured remote", an unknown prefix "no snapshot matches",
//! a form the verb does not take "is a directory, which `ls` does not take (it takes ...)",
//! a `:PATH` given to a verb that reads none "`show` takes no :PATH". A refused cell publishes,
//! writes and mounts nothing. The mount column mounts for real (FUSE), unmounted in a guard.

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::mount::{fuse_available, mount_daemon, mounted};
use crate::util::*;

const CONFIG: &str = "schema_version = 3\n\n\
[providers.models.anthropic.main]\nmodel = \"claude-opus-5\"\n\n\
[agents.coder]\nenabled = true\nmodel_provider = \"anthropic.main\"\nrisk_profile = \"default\"\n\n\
[risk_profiles.default]\n";

/// The file every cell that works reads back, and its bytes.
const FILE: &str = "workspace/IDENTITY.md";
const IDENTITY: &[u8] = b"# coder\n";

/// A store holding snapshot `id` of agent `coder` (named `keep`, the agent's latest), the same
/// snapshot as a pack file (`bundle.zbpack`) and pushed to a `file://` remote `origin`, and an
/// exported bundle directory (`bundle`).
struct Fixture {
    env: TestEnv,
    install: PathBuf,
    id: String,
}

fn fixture() -> Fixture {
    let env = TestEnv::new();
    let install = env.path("install");
    write(&install.join("config.toml"), CONFIG.as_bytes());
    write(&install.join("agents/coder").join(FILE), IDENTITY);
    let path = |p: &Path| p.as_os_str().to_owned();
    env.run(&[
        OsStr::new("export"),
        OsStr::new("coder"),
        OsStr::new("--install"),
        &path(&install),
        OsStr::new("--out"),
        &path(&env.path("bundle")),
    ])
    .ok();
    let id = env
        .run(&[
            OsStr::new("snapshot"),
            OsStr::new("coder"),
            OsStr::new("--install"),
            &path(&install),
            OsStr::new("--name"),
            OsStr::new("keep"),
        ])
        .ok()
        .last_line();
    assert_eq!(id.len(), 64, "{id}");
    env.run(&["pack", "keep", "--out", "bundle.zbpack"]).ok();
    let url = format!("file://{}", env.path("remote").display());
    env.run(&["remote", "add", "origin", &url]).ok();
    env.run(&["push", "keep", "origin"]).ok();
    Fixture { env, install, id }
}

/// The forms of the grammar, and the failing arguments each verb must word the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Dir,
    Pack,
    PackPath,
    FullId,
    Prefix,
    Name,
    Agent,
    Remote,
    RemotePath,
    StoredPath,
    Missing,
    UnknownRemote,
    UnknownPrefix,
}

const FORMS: [Form; 13] = [
    Form::Dir,
    Form::Pack,
    Form::PackPath,
    Form::FullId,
    Form::Prefix,
    Form::Name,
    Form::Agent,
    Form::Remote,
    Form::RemotePath,
    Form::StoredPath,
    Form::Missing,
    Form::UnknownRemote,
    Form::UnknownPrefix,
];

impl Form {
    fn arg(self, f: &Fixture) -> String {
        match self {
            Form::Dir => "./bundle".into(),
            Form::Pack => "./bundle.zbpack".into(),
            Form::PackPath => format!("./bundle.zbpack:{FILE}"),
            Form::FullId => f.id.clone(),
            Form::Prefix => f.id[..8].into(),
            Form::Name => "keep".into(),
            Form::Agent => "agent/coder".into(),
            Form::Remote => "origin/agent/coder".into(),
            Form::RemotePath => format!("origin/agent/coder:{FILE}"),
            Form::StoredPath => format!("{}:{FILE}", &f.id[..16]),
            Form::Missing => "./nowhere".into(),
            Form::UnknownRemote => "nosuch/keep".into(),
            Form::UnknownPrefix => "00000000".into(),
        }
    }

    fn has_path(self) -> bool {
        matches!(self, Form::PackPath | Form::RemotePath | Form::StoredPath)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verb {
    Diff,
    Review,
    Import,
    Mount,
    Checkout,
    Ls,
    Cat,
    Show,
    Pack,
}

const VERBS: [Verb; 9] = [
    Verb::Diff,
    Verb::Review,
    Verb::Import,
    Verb::Mount,
    Verb::Checkout,
    Verb::Ls,
    Verb::Cat,
    Verb::Show,
    Verb::Pack,
];

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format!("{self:?}").to_lowercase())
    }
}

enum Expect {
    Works,
    Fails(String),
}

/// What each cell must do: the table.
fn expected(verb: Verb, form: Form) -> Expect {
    use Verb::*;
    let fails = |s: &str| Expect::Fails(s.to_string());
    // The same words whatever the verb.
    match form {
        Form::Missing => return fails("./nowhere does not exist"),
        Form::UnknownRemote => return fails("\"nosuch\" is not a configured remote"),
        Form::UnknownPrefix => return fails("no snapshot matches \"00000000\""),
        _ => {}
    }
    let takes_dir = matches!(verb, Diff | Review | Import);
    let takes_pack_and_remote = verb != Pack;
    let takes_path = matches!(verb, Diff | Ls | Cat);
    match form {
        Form::Dir if !takes_dir => fails(&format!(
            "./bundle is a directory, which `{verb}` does not take (it takes "
        )),
        Form::Pack | Form::PackPath if !takes_pack_and_remote => {
            fails("./bundle.zbpack is a pack file, which `pack` does not take")
        }
        Form::Remote | Form::RemotePath if !takes_pack_and_remote => {
            fails("is a remote ref (REMOTE/REF), which `pack` does not take")
        }
        f if f.has_path() && !takes_path => fails(&format!("`{verb}` takes no :PATH")),
        f if verb == Cat && !f.has_path() => fails("`cat` needs SNAPSHOT:PATH"),
        _ => Expect::Works,
    }
}

/// Runs cell (`verb`, `form`) and checks it against the table; `n` names its outputs apart.
fn check(f: &Fixture, verb: Verb, form: Form, n: usize) {
    let env = &f.env;
    let arg = form.arg(f);
    let install = f.install.to_string_lossy().into_owned();
    let out = env.path(&format!("out-{n}"));
    let out_s = out.to_string_lossy().into_owned();
    let expect = expected(verb, form);
    if verb == Verb::Mount {
        return check_mount(f, &arg, &out, expect);
    }
    let args: Vec<&str> = match verb {
        Verb::Diff => vec!["diff", &arg, &arg],
        Verb::Review => vec!["review", &arg, "--install", &install],
        Verb::Import => vec!["import", "--dry-run", &arg, "--install", &install],
        Verb::Checkout => vec!["checkout", &arg, "--out", &out_s],
        Verb::Ls => vec!["ls", &arg],
        Verb::Cat => vec!["cat", &arg],
        Verb::Show => vec!["--json", "show", &arg],
        Verb::Pack => vec!["pack", &arg, "--out", &out_s],
        Verb::Mount => unreachable!(),
    };
    let r = env.run(&args);
    match expect {
        Expect::Fails(needle) => {
            // diff(1)'s convention: 2 is an error.
            let code = if verb == Verb::Diff { 2 } else { 1 };
            r.fails(code, &needle);
            assert!(!out.exists(), "a refused {verb} wrote {out_s}");
        }
        Expect::Works => {
            let r = r.ok();
            let stdout = r.stdout();
            match verb {
                // Both sides are the same argument: equal, nothing printed.
                Verb::Diff => assert_eq!(stdout, "", "{}", r.describe()),
                Verb::Review | Verb::Import => {
                    assert!(stdout.contains("coder"), "{}", r.describe())
                }
                Verb::Checkout => assert_eq!(fs::read(out.join(FILE)).unwrap(), IDENTITY),
                Verb::Ls => {
                    let shown = if form.has_path() {
                        "IDENTITY.md"
                    } else {
                        "workspace"
                    };
                    assert!(stdout.contains(shown), "{}", r.describe());
                }
                Verb::Cat => assert_eq!(r.out.stdout, IDENTITY, "{}", r.describe()),
                Verb::Show => assert_eq!(r.json()["snapshot"], f.id.as_str(), "{}", r.describe()),
                // The pack carries the snapshot: nothing differs.
                Verb::Pack => assert_eq!(env.run(&["diff", &out_s, &f.id]).ok().stdout(), ""),
                Verb::Mount => unreachable!(),
            }
        }
    }
}

fn check_mount(f: &Fixture, arg: &str, at: &Path, expect: Expect) {
    match expect {
        Expect::Works => {
            let _mounted = mount_daemon(&f.env, arg, at);
            assert_eq!(fs::read(at.join(FILE)).unwrap(), IDENTITY, "mount {arg}");
        }
        Expect::Fails(needle) => {
            fs::create_dir_all(at).unwrap();
            let r = f.env.run(&[
                OsStr::new("mount"),
                OsStr::new(arg),
                at.as_os_str(),
                OsStr::new("--daemon"),
            ]);
            let mounted_now = mounted(at);
            if mounted_now {
                let _ = f.env.run(&[OsStr::new("umount"), at.as_os_str()]);
            }
            r.fails(1, &needle);
            assert!(!mounted_now, "a refused mount of {arg} mounted");
        }
    }
}

#[test]
fn every_verb_reads_every_form_of_the_reference_grammar() {
    let f = fixture();
    let fuse = fuse_available();
    let mut cells = 0;
    // Every cell is run, and every cell that does not do what the table says is listed (each
    // with its command and output above, where it panicked).
    let mut wrong = Vec::new();
    for (v, verb) in VERBS.into_iter().enumerate() {
        if verb == Verb::Mount && !fuse {
            continue;
        }
        for (i, form) in FORMS.into_iter().enumerate() {
            let n = v * FORMS.len() + i;
            let cell =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&f, verb, form, n)));
            if cell.is_err() {
                wrong.push(format!("{verb} {}", form.arg(&f)));
            }
            cells += 1;
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {cells} cells do not do what the table says:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(cells >= (VERBS.len() - 1) * FORMS.len());
}

#[test]
fn a_bare_name_that_is_also_a_path_here_is_read_as_each_verb_takes_it() {
    let f = fixture();
    let env = &f.env;
    // A directory `keep` beside the snapshot named `keep` (a checkout into ./keep, say).
    write(&env.path("keep/other.txt"), b"not the snapshot\n");
    // A verb that takes no directory reads the snapshot.
    env.run(&["checkout", "keep", "--out", "copy"]).ok();
    assert_eq!(fs::read(env.path("copy").join(FILE)).unwrap(), IDENTITY);
    let shown = env.run(&["--json", "show", "keep"]).ok().json();
    assert_eq!(shown["snapshot"], f.id.as_str());
    // Spelled as a path, it is the directory, refused naming its form.
    env.run(&["show", "./keep"])
        .fails(1, "./keep is a directory, which `show` does not take");
    // A verb that takes directories reads the directory: it differs from the snapshot.
    let r = env.run(&["diff", "keep", &f.id]).fails(1, "");
    assert!(r.stdout().contains("other.txt"), "{}", r.describe());
    // A bare word that names a directory and no snapshot: the directory's form is named.
    write(&env.path("notes/a.txt"), b"a\n");
    env.run(&["ls", "notes"])
        .fails(1, "notes is a directory, which `ls` does not take");
    env.run(&["pack", "notes", "--out", "x.zbpack"])
        .fails(1, "capture it first: zeroclaw-bundle snapshot --dir notes");
    // A name may hold a `:` for a verb that reads no path.
    let named = env.path("named");
    write(&named.join("f"), b"f\n");
    let id = env
        .run(&[
            OsStr::new("snapshot"),
            OsStr::new("--dir"),
            named.as_os_str(),
            OsStr::new("--name"),
            OsStr::new("release:1"),
        ])
        .ok()
        .last_line();
    let shown = env.run(&["--json", "show", "release:1"]).ok().json();
    assert_eq!(shown["snapshot"], id.as_str());
}
