//! The config-like files an operator points the tool at (`--allowed-signers`, `trust.toml`,
//! `remotes.toml`, the AWS credentials file, `--key`, `--signature`, an install's
//! `config.toml`) are read by one reader. Pins: a FIFO in any of those places is refused at
//! once, naming the path and what it is, instead of blocking in open(2) until a writer comes;
//! a symlink to `/dev/zero` is refused the same way instead of being read until memory runs
//! out. Every run has a deadline, so a regression fails here instead of hanging the suite.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::{run_within, write, Run, TestEnv};

/// Long enough for a loaded CI machine, short of forever.
const DEADLINE: Duration = Duration::from_secs(60);

fn mkfifo(path: &Path) {
    let st = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {}", path.display());
}

fn run(env: &TestEnv, args: &[&str], vars: &[(&str, &str)]) -> Run {
    let mut c = env.cmd();
    c.args(args)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_CONFIG_FILE")
        .env_remove("AWS_SHARED_CREDENTIALS_FILE")
        .env("HOME", env.path("home"));
    for (k, v) in vars {
        c.env(k, v);
    }
    run_within(c, DEADLINE)
}

/// `run` fails with exit code 1, naming `path` and saying it is `what`.
#[track_caller]
fn refused(run: Run, path: &Path, what: &str) {
    let run = run.fails(1, &format!("it is {what}, not a regular file"));
    assert!(
        run.stderr().contains(&path.display().to_string()),
        "the message does not name {}\n{}",
        path.display(),
        run.describe()
    );
}

#[test]
fn signing_and_trust_files_that_are_fifos_or_devices_are_refused_not_waited_on() {
    let env = TestEnv::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a\n");
    let id = env.snapshot(&src);
    let fifo = env.path("fifo");
    mkfifo(&fifo);
    let f = fifo.to_str().unwrap();

    refused(
        run(&env, &["show", &id, "--allowed-signers", f], &[]),
        &fifo,
        "a FIFO",
    );
    refused(
        run(
            &env,
            &[
                "checkout",
                &id,
                "--out",
                "o",
                "--require-signed",
                "--allowed-signers",
                f,
            ],
            &[],
        ),
        &fifo,
        "a FIFO",
    );
    refused(run(&env, &["sign", &id, "--key", f], &[]), &fifo, "a FIFO");
    refused(
        run(&env, &["sign", &id, "--signature", f], &[]),
        &fifo,
        "a FIFO",
    );

    // trust.toml as a FIFO, then as a link to /dev/zero: every verb that reads it stops.
    let trust = env.store.join("trust.toml");
    mkfifo(&trust);
    refused(run(&env, &["trust"], &[]), &trust, "a FIFO");
    refused(
        run(&env, &["checkout", &id, "--out", "o"], &[]),
        &trust,
        "a FIFO",
    );
    std::fs::remove_file(&trust).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &trust).unwrap();
    refused(run(&env, &["trust"], &[]), &trust, "a character device");
    refused(
        run(&env, &["checkout", &id, "--out", "o"], &[]),
        &trust,
        "a character device",
    );
    std::fs::remove_file(&trust).unwrap();
    run(&env, &["checkout", &id, "--out", "o"], &[]).ok();
}

#[test]
fn remote_and_install_config_files_that_are_fifos_are_refused_not_waited_on() {
    let env = TestEnv::new();
    env.run(&["remote", "add", "origin", "file:///nowhere"])
        .ok();
    let remotes = env.store.join("remotes.toml");
    let kept = std::fs::read(&remotes).unwrap();
    std::fs::remove_file(&remotes).unwrap();
    mkfifo(&remotes);
    refused(run(&env, &["remote", "list"], &[]), &remotes, "a FIFO");
    std::fs::remove_file(&remotes).unwrap();
    std::fs::write(&remotes, kept).unwrap();

    // The AWS credentials file, read when an s3:// remote is opened.
    env.run(&[
        "remote",
        "add",
        "s3",
        "s3://bucket/prefix",
        "--endpoint",
        "http://127.0.0.1:9",
    ])
    .ok();
    let creds = env.path("credentials");
    mkfifo(&creds);
    refused(
        run(
            &env,
            &["list", "--remote", "s3"],
            &[("AWS_SHARED_CREDENTIALS_FILE", creds.to_str().unwrap())],
        ),
        &creds,
        "a FIFO",
    );

    // An install whose config.toml is a FIFO.
    let install = env.path("install");
    std::fs::create_dir_all(&install).unwrap();
    let config = install.join("config.toml");
    mkfifo(&config);
    refused(
        run(
            &env,
            &[
                "export",
                "researcher",
                "--install",
                install.to_str().unwrap(),
                "--out",
                "b",
            ],
            &[],
        ),
        &config,
        "a FIFO",
    );
}
