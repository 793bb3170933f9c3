//! # Signed snapshots
//!
//! A pack or a remote proves that its bytes are the snapshot its id names, not who made it.
//! Snapshots can be signed with the SSH keys operators already have, in OpenSSH's own signature
//! format (`ssh-keygen -Y sign` / `-Y verify`, what git uses with `gpg.format = ssh`), so a tool
//! nobody here wrote can check them. The crypto is RustCrypto's `ssh-key` crate (ed25519, RSA,
//! ECDSA P-256/P-384/P-521; passphrase-protected keys). OpenSSH writes an ECDSA private scalar
//! without its leading zero bytes (one P-256 or P-384 key in 256, one P-521 key in two), which that
//! crate alone refuses; such a key is read with its scalar widened to full width, and all of the
//! crate's checks still run on it. A key this tool still cannot read can sign with `ssh-keygen -Y
//! sign` and `sign --signature`, as the error says.
//!
//! ```text
//! zeroclaw-bundle sign agent/researcher                      # the key git signs with, else ~/.ssh/id_ed25519
//! zeroclaw-bundle sign agent/researcher --key ~/.ssh/release_ed25519
//! zeroclaw-bundle export researcher --out ./b --sign         # also: snapshot --sign, pack --sign, push --sign
//! echo <ID> | ssh-keygen -Y sign -n zeroclaw-bundle@snapshot -f KEY > review.sig
//! zeroclaw-bundle sign <ID> --signature review.sig           # add a signature made elsewhere (a reviewer)
//! zeroclaw-bundle trust --allowed-signers ~/.config/zeroclaw/allowed_signers --require-signed true
//! zeroclaw-bundle show agent/researcher --allowed-signers allowed_signers
//! zeroclaw-bundle unpack bundle.zcpack --require-signed      # also pull, checkout, mount
//! ```
//!
//! - **What is signed.** The snapshot's full id in lowercase hex and a newline (what `echo <ID>`
//!   prints), in the namespace `zeroclaw-bundle@snapshot`. sshsig binds the namespace into the
//!   signed data, so a bundle signature is never valid as a git, file or login signature, nor
//!   the other way round. `ssh-keygen -Y verify -n zeroclaw-bundle@snapshot -f allowed_signers -I
//!   PRINCIPAL -s SIG` over that message checks any signature this tool made.
//! - **Where signatures live.** Beside the snapshot record, never in the content-addressed
//!   objects, so signing never changes an id: `<store>/signatures/<snapshot-id>/<sig-id>.sig`,
//!   named by the blake3 of the signature (adding the same one twice is a no-op; ed25519 and RSA
//!   signatures are deterministic, so signing again with the same key is too). A snapshot may
//!   carry several (the author, a reviewer). `gc` drops the signatures of snapshots it removes;
//!   `reindex` keeps them.
//! - **In packs**, the snapshot's signatures fill a section between the objects and the index,
//!   covered by the trailer checksum (`verify`, `unpack` check it). The pack format version is
//!   unchanged: an older reader only checks that objects lie inside the object area, so it reads
//!   and unpacks a signed pack as before (ignoring the section), and a pack without signatures is
//!   byte for byte what older builds wrote. Digest (`--trees-only`) packs carry none.
//! - **On remotes**, under `signatures/<snapshot-id>/<sig-id>.sig`: unique names, conditional
//!   creates, never read-modify-write, so any number of hosts add signatures at once. `push`
//!   uploads them before the record (and adds new ones when the remote already has the
//!   snapshot); `pull` brings them all; remote `gc` deletes those of a record gone longer than the
//!   grace period.
//! - **Trust** is an allowed_signers file in git's and OpenSSH's format (`man ssh-keygen`,
//!   ALLOWED SIGNERS): `principals [namespaces="...",valid-after="T",valid-before="T"] keytype
//!   key`, read as `ssh-keygen -Y verify` reads it (option values in double quotes; `Z` or `UTC`
//!   for UTC times); a line it refuses is refused here, naming the line.
//!   Given per command with `--allowed-signers FILE`, or once for the store with `trust` (kept in
//!   `<store>/trust.toml`). `cert-authority` lines are left out with a notice (certificates are
//!   not supported). A time without `Z` is local time, which this tool does not read: it is
//!   applied when the answer is the same in every time zone, and refused with a message within 14
//!   hours of it. `show`, `list -v`, `review` (a `Signed:` line), `diff` (a `Signatures:` block
//!   when a side is signed) and a mount's root (the xattr `user.zeroclaw.signatures`: `getfattr -n user.zeroclaw.signatures
//!   MOUNTPOINT`) say who signed, with the key's `SHA256:` fingerprint, or `unsigned`, `signed by
//!   an unknown key`, `bad signature`.
//! - **Enforce.** `--require-signed` on `unpack`, `pull`, `checkout`, `mount` and `import` (or
//!   `trust --require-signed true` for the store) refuses a snapshot unless one of its signatures
//!   verifies, in this namespace, by a key an allowed_signers entry accepts now. Unsigned, a bad
//!   signature, another snapshot's signature, another namespace, an unknown key, an expired
//!   `valid-before`: one error naming the snapshot and why, before anything becomes visible (an
//!   unpack before the store is created or the snapshot listed, a pull before anything is
//!   downloaded, a checkout before the destination is touched). Import checks a pack's or a
//!   remote's signatures the same way before it unpacks or pulls, a stored snapshot's own, and
//!   refuses a bundle directory (which carries none) before capturing it.
//! - **The library applies the policy itself.** A [`Bundles`](crate::Bundles) handle reads the
//!   store's `trust.toml` in every verb that makes a snapshot visible or acts on one (checkout,
//!   mount, unpack, pull, import): [`TrustPolicy::Store`](crate::TrustPolicy::Store) is the
//!   default, so a program that links the library enforces what the operator set with `trust`.
//!   Only code turns it off ([`TrustPolicy::Off`](crate::TrustPolicy::Off) through
//!   [`Bundles::with_trust_policy`](crate::Bundles::with_trust_policy)) or replaces it
//!   ([`TrustPolicy::Require`](crate::TrustPolicy::Require)). Requiring signatures with no
//!   allowed_signers file set, or one that cannot be read, fails closed.
//! - **Keys never leak.** Only public keys and fingerprints are printed or stored. A
//!   passphrase-protected key is asked for on the terminal (not echoed); without one (a pipe, cron)
//!   the command fails saying so. A public key (`--key KEY.pub`, or git's `user.signingkey`
//!   naming one or holding one as `key::ssh-ed25519 AAAA...`) hands the signing to
//!   `ssh-keygen -Y sign`, as git does: the private half may then be in ssh-agent, on a
//!   security key (`sk-ssh-ed25519`) or in a password manager's agent (else the file beside the
//!   `.pub`). The signature it makes is checked (by that key, over this snapshot, in this
//!   namespace) before it is stored.
//! - Cost: signing or verifying a snapshot is a fraction of a millisecond of crypto plus a small
//!   file read or write, the same for any bundle size (it signs the id, not the content).
