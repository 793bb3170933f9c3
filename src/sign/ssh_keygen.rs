//! Signing handed to OpenSSH's `ssh-keygen -Y sign`, for a key given as its public half: the
//! private half is in ssh-agent (or a password manager's agent), on a security key
//! (`sk-ssh-ed25519@openssh.com`), or in the file beside the `.pub`. This is what git does
//! with `gpg.format = ssh`: ssh-keygen asks the agent first and falls back to the private key
//! file, prompting on the terminal for its passphrase or for a touch of the security key
//! itself. The signature it makes is checked before it is stored: it must be an sshsig by
//! that very public key, verifying over this snapshot's message in [`super::NAMESPACE`].

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use ssh_key::{PublicKey, SshSig};
use zeroclaw_bundle_store::ObjectId;

use super::{canonical, judge, message, now_secs, SignError, Verdict, NAMESPACE};

/// Signs snapshot `id` with the key whose public half is `public`, read by ssh-keygen from
/// `file` (or from a temporary file holding `public` when `None`: a key given as text).
/// `named` is what messages call the key. Returns the signature and its canonical bytes.
pub(super) fn sign(
    public: &PublicKey,
    file: Option<&Path>,
    named: &Path,
    id: &ObjectId,
) -> Result<(SshSig, Vec<u8>), SignError> {
    let key_err = |why: String| SignError::Key {
        path: named.to_path_buf(),
        why,
    };
    // A key given as text goes to ssh-keygen as a file of its own, removed when dropped.
    let held;
    let file = match file {
        Some(f) => f,
        None => {
            let line = public
                .to_openssh()
                .map_err(|e| key_err(format!("could not encode the public key: {e}")))?;
            let mut tmp = tempfile::Builder::new()
                .prefix("zeroclaw-bundle-signing-key")
                .suffix(".pub")
                .tempfile()
                .map_err(|e| key_err(format!("could not write it for ssh-keygen: {e}")))?;
            writeln!(tmp, "{line}")
                .map_err(|e| key_err(format!("could not write it for ssh-keygen: {e}")))?;
            held = tmp;
            held.path()
        }
    };
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            key_err(match e.kind() {
                std::io::ErrorKind::NotFound => "is a public key, and signing with one needs \
                     ssh-keygen (OpenSSH), which is not installed; install openssh-client, or \
                     pass --key with the private key file"
                    .to_string(),
                _ => format!("could not start ssh-keygen: {e}"),
            })
        })?;
    // Its prompts ("Confirm user presence for key ...") reach the operator as they come;
    // the line saying it reads stdin is ours to know, not theirs. Passphrase prompts go to
    // the terminal directly.
    let stderr = child.stderr.take().expect("stderr is piped");
    let relay = std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.trim() == "Signing data on standard input" {
                continue;
            }
            // Relayed as ssh-keygen would print them itself: a prompt the operator must act on
            // (touch the key) cannot wait for the verb to return.
            eprintln!("ssh-keygen: {}", zeroclaw_bundle_store::escape_text(&line));
            said.push(line);
        }
        said
    });
    let fed = child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(&message(id));
    let out = child
        .wait_with_output()
        .map_err(|e| key_err(format!("could not run ssh-keygen: {e}")))?;
    let said = relay.join().unwrap_or_default();
    if !out.status.success() {
        return Err(key_err(format!(
            "ssh-keygen -Y sign could not sign with it ({}{}); is the key loaded in ssh-agent \
             (`ssh-add -l`), or its private key file beside it?",
            out.status,
            said.last().map(|l| format!(": {l}")).unwrap_or_default()
        )));
    }
    fed.map_err(|e| key_err(format!("could not hand the message to ssh-keygen: {e}")))?;
    let (sig, bytes) = canonical(&out.stdout)
        .map_err(|why| key_err(format!("ssh-keygen wrote no signature ({why})")))?;
    if sig.public_key() != public.key_data() {
        return Err(key_err(
            "ssh-keygen signed with another key than this one; nothing was stored".into(),
        ));
    }
    if let Verdict::Bad { why, .. } = judge(id, &sig, None, now_secs()) {
        return Err(key_err(format!(
            "the signature ssh-keygen made does not verify ({why}); nothing was stored"
        )));
    }
    Ok((sig, bytes))
}
