//! A program that links only the public API gets the operator's trust policy: a store whose
//! `trust.toml` requires signatures refuses an unsigned snapshot in checkout, mount, unpack,
//! pull and import, and nothing becomes visible in the store (no snapshot listed, nothing
//! published, nothing mounted, whether the mount names a stored snapshot, a pack or a remote
//! ref); with the policy turned off in code, each succeeds. The store's
//! settings and a `file://` remote are made with the standalone binary (`trust`, `remote add`,
//! `push`), as an operator would.

mod common;

use std::path::Path;
use std::process::Command;

use zeroclaw_bundle::{
    AllowedSigners, Bundles, ErrorKind, ImportRequest, MountOptions, PackInput, Replace,
    SignerTrust, Silent, TrustPolicy,
};

fn zb(store: &Path, args: &[&str]) {
    let out = Command::new(common::standalone())
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .expect("the standalone binary starts");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_store_that_requires_signatures_refuses_unsigned_snapshots_until_code_says_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sample-install.sh");
    assert!(Command::new("bash")
        .arg(script)
        .arg(path("install"))
        .status()
        .unwrap()
        .success());

    // The source host: a snapshot, its pack, an exported bundle, and a push to a remote.
    let tree = path("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("a.txt"), "a\n").unwrap();
    let source = Bundles::create(path("source")).unwrap();
    let snap = source.snapshot_dir(&tree, None, &Silent).unwrap();
    let id = snap.id.to_hex();
    let pack = path("tree.zbpack");
    source
        .pack(&id, &pack, Default::default(), false, &Silent)
        .unwrap();
    let bundle = path("bundle");
    source
        .export(
            &path("install"),
            "researcher",
            &bundle,
            Replace::Nothing,
            &Default::default(),
            &Silent,
        )
        .unwrap();
    std::fs::create_dir(path("remote")).unwrap();
    let url = format!("file://{}", path("remote").display());
    zb(&path("source"), &["remote", "add", "origin", &url]);
    zb(&path("source"), &["push", &id, "origin"]);

    // The target host: its operator requires signatures by the keys in allowed_signers (none).
    let store = path("target");
    Bundles::create(&store).unwrap();
    std::fs::write(path("allowed_signers"), "").unwrap();
    let allowed = path("allowed_signers");
    zb(&store, &["remote", "add", "origin", &url]);
    zb(
        &store,
        &[
            "trust",
            "--allowed-signers",
            allowed.to_str().unwrap(),
            "--require-signed",
            "true",
        ],
    );
    let target = Bundles::open(&store).unwrap();
    assert!(matches!(target.trust_policy(), TrustPolicy::Store));

    let untrusted = |what: &str, err: zeroclaw_bundle::Error| {
        assert_eq!(err.kind(), ErrorKind::Untrusted, "{what}: {err:#}");
    };
    untrusted("unpack", target.unpack(&pack, &Silent).unwrap_err());
    untrusted(
        "pull",
        target.pull(&format!("origin/{id}"), &Silent).unwrap_err(),
    );
    let fresh = path("fresh-install");
    std::fs::create_dir(&fresh).unwrap();
    std::fs::write(fresh.join("config.toml"), "schema_version = 3\n").unwrap();
    let request = ImportRequest {
        source: bundle.as_os_str(),
        install: &fresh,
        ..Default::default()
    };
    untrusted("import", target.import_plan(&request, &Silent).unwrap_err());
    assert!(
        target.list().unwrap().is_empty(),
        "nothing refused became visible: {:?}",
        target.list().unwrap()
    );

    // A snapshot captured here (capture is not gated) is still not published or mounted.
    let local = target
        .snapshot_dir(&tree, None, &Silent)
        .unwrap()
        .id
        .to_hex();
    let out = path("out");
    untrusted(
        "checkout",
        target
            .checkout(&local, &out, Replace::Nothing, &Silent)
            .unwrap_err(),
    );
    assert!(!out.exists(), "a refused checkout publishes nothing");
    let mnt = path("mnt");
    std::fs::create_dir(&mnt).unwrap();
    untrusted(
        "mount",
        target
            .mount(&local, &mnt, MountOptions::default())
            .unwrap_err(),
    );
    assert!(
        !mnt.join("a.txt").exists(),
        "a refused mount serves nothing"
    );
    // A pack and a remote ref are mounted where they are (nothing is unpacked or pulled),
    // and refused alike.
    let remote_ref = format!("origin/{id}");
    let served_in_place = [pack.to_str().unwrap(), remote_ref.as_str()];
    for reference in served_in_place {
        untrusted(
            &format!("mount {reference}"),
            target
                .mount(reference, &mnt, MountOptions::default())
                .unwrap_err(),
        );
        assert!(
            !mnt.join("a.txt").exists(),
            "a refused mount of {reference} serves nothing"
        );
    }

    // An embedder that takes the operator's `--allowed-signers FILE --require-signed` the
    // way the CLI does makes the same policy, and is refused the same way.
    let flagged = SignerTrust::resolve(&store, Some(&allowed), true).unwrap();
    let policy = flagged.policy(&bundle.to_string_lossy()).unwrap();
    assert!(matches!(policy, TrustPolicy::Require(_)), "{policy:?}");
    untrusted(
        "import with the policy the flags make",
        Bundles::open(&store)
            .unwrap()
            .with_trust_policy(policy)
            .import_plan(&request, &Silent)
            .unwrap_err(),
    );
    // Signatures required with no allowed_signers file to check them against: refused, naming
    // what was to be checked, before anything is read.
    let nothing_to_check = SignerTrust::resolve(&path("source"), None, true).unwrap();
    let err = nothing_to_check.policy("the bundle").unwrap_err();
    untrusted("no allowed signers", err);

    // The embedder turns the policy off in code: every verb goes through.
    let open = Bundles::open(&store)
        .unwrap()
        .with_trust_policy(TrustPolicy::Off);
    assert_eq!(open.unpack(&pack, &Silent).unwrap().id, snap.id);
    open.pull(&format!("origin/{id}"), &Silent).unwrap();
    let plan = open.import_plan(&request, &Silent).unwrap();
    open.import(&plan, &[], &Silent).unwrap();
    open.checkout(&local, &out, Replace::Nothing, &Silent)
        .unwrap();
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"a\n");
    let mut mounted = open.mount(&local, &mnt, MountOptions::default()).unwrap();
    assert_eq!(std::fs::read(mnt.join("a.txt")).unwrap(), b"a\n");
    mounted.unmount().unwrap();
    for reference in served_in_place {
        let mut mounted = open
            .mount(reference, &mnt, MountOptions::default())
            .unwrap();
        assert_eq!(
            std::fs::read(mnt.join("a.txt")).unwrap(),
            b"a\n",
            "{reference}"
        );
        mounted.unmount().unwrap();
    }
}

/// The transfer verbs' other ways in: an unpack from a stream, an unpack into a store that is
/// not there yet, and a checkout of a pack file or of a remote ref (pulled or unpacked on the
/// way). Under a policy that requires signatures each is refused, and nothing becomes visible:
/// no snapshot listed, no store made, nothing published. With the policy off in code, each
/// goes through.
#[test]
fn streams_new_stores_and_checkouts_of_packs_and_remote_refs_are_gated_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    let tree = path("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("a.txt"), "a\n").unwrap();
    let source = Bundles::create(path("source")).unwrap();
    let id = source.snapshot_dir(&tree, None, &Silent).unwrap().id;
    let pack = path("tree.zbpack");
    source
        .pack(&id.to_hex(), &pack, Default::default(), false, &Silent)
        .unwrap();
    std::fs::create_dir(path("remote")).unwrap();
    let url = format!("file://{}", path("remote").display());
    source.add_remote("origin", &url, None).unwrap();
    source.push(&id.to_hex(), "origin", &Silent).unwrap();

    std::fs::write(path("allowed_signers"), "").unwrap();
    let nobody = AllowedSigners::load(&path("allowed_signers")).unwrap();
    let store = path("target");
    let target = Bundles::create(&store)
        .unwrap()
        .with_trust_policy(TrustPolicy::Require(nobody.clone()));
    target.add_remote("origin", &url, None).unwrap();
    let untrusted = |what: &str, err: zeroclaw_bundle::Error| {
        assert_eq!(err.kind(), ErrorKind::Untrusted, "{what}: {err:#}");
    };
    let mut stream = std::fs::File::open(&pack).unwrap();
    untrusted(
        "unpack of a stream",
        target.unpack_reader(&mut stream, &Silent).unwrap_err(),
    );
    let fresh = path("hosts/new/store");
    untrusted(
        "unpack into a new store",
        Bundles::unpack_at(
            &fresh,
            PackInput::File(&pack),
            TrustPolicy::Require(nobody.clone()),
            &Silent,
        )
        .unwrap_err(),
    );
    assert!(!path("hosts").exists(), "a refused unpack made a store");
    let out = path("out");
    for reference in [pack.to_str().unwrap(), &format!("origin/{id}")] {
        untrusted(
            reference,
            target
                .checkout(reference, &out, Replace::Nothing, &Silent)
                .unwrap_err(),
        );
        assert!(!out.exists(), "a refused checkout of {reference} published");
    }
    assert!(
        target.list().unwrap().is_empty(),
        "nothing refused became visible: {:?}",
        target.list().unwrap()
    );

    // The embedder turns the policy off in code: each goes through.
    let open = target.with_trust_policy(TrustPolicy::Off);
    let done = open
        .checkout(&format!("origin/{id}"), &out, Replace::Nothing, &Silent)
        .unwrap();
    assert_eq!(done.id, id);
    assert_eq!(std::fs::read(out.join("a.txt")).unwrap(), b"a\n");
    open.forget(&id.to_hex()).unwrap();
    let copy = path("copy");
    let done = open
        .checkout(pack.to_str().unwrap(), &copy, Replace::Nothing, &Silent)
        .unwrap();
    assert_eq!(done.id, id);
    assert_eq!(std::fs::read(copy.join("a.txt")).unwrap(), b"a\n");
    open.forget(&id.to_hex()).unwrap();
    let mut stream = std::fs::File::open(&pack).unwrap();
    assert_eq!(open.unpack_reader(&mut stream, &Silent).unwrap().id, id);
    let made =
        Bundles::unpack_at(&fresh, PackInput::File(&pack), TrustPolicy::Off, &Silent).unwrap();
    assert_eq!(made.id, id);
    assert_eq!(Bundles::open(&fresh).unwrap().list().unwrap().len(), 1);
}
