//! # Encrypted packs and remotes
//!
//! A pack mailed or copied to a USB stick, and a remote bucket, can be encrypted on the client
//! to **recipients**: age X25519 recipients (`age1...`, from `age-keygen`) or the SSH public keys
//! operators already sign with (`ssh-ed25519`, `ssh-rsa`), or a file of them, one a line. The
//! format is age's (`age-encryption.org/v1`) through the `age` crate; nothing here is home-made
//! cryptography. Readers give `--identity FILE` (an age identity file or an OpenSSH private
//! key); without it the key `sign` uses is tried (git's SSH signing key, else
//! `~/.ssh/id_ed25519`), and a passphrase is asked on the terminal as for `sign`.
//!
//! ```text
//! zeroclaw-bundle pack agent/researcher --out r.zcpack.age --encrypt-to age1... ~/.ssh/ops.pub
//! zeroclaw-bundle unpack r.zcpack.age --identity ~/.ssh/id_ed25519   # also mount, review, import, diff
//! age -d -i ~/.ssh/id_ed25519 r.zcpack.age > r.zcpack                # by hand: a plain pack
//! zeroclaw-bundle remote add vault s3://bucket/agents --encrypt-to age1... ssh-ed25519 AAAA...
//! zeroclaw-bundle remote add vault s3://bucket/agents --encrypted --identity ~/.ssh/id_ed25519
//! zeroclaw-bundle remote recipients add vault ssh-ed25519 AAAA...
//! zeroclaw-bundle remote recipients remove vault ssh-ed25519 AAAA...
//! ```
//!
//! ## Packs
//!
//! `pack --encrypt-to` writes a standard age file of the plain pack (also to `--out -`), so
//! `age -d` opens it without this tool. `unpack`, `mount`, `review`, `import` and `diff` see the
//! age header and decrypt the whole file into a private temporary copy (`0700` directory,
//! removed afterwards) before they read it: a wrong identity, or a byte changed anywhere
//! (age authenticates the header and every 64 KiB chunk), stops the verb with the file named
//! and nothing imported. `unpack -` decrypts an encrypted stream as it spools it.
//!
//! ## Remotes
//!
//! `remote add NAME URL --encrypt-to ...` makes an empty remote encrypted: a fresh **data key**
//! (an age X25519 identity) is written to `keys/keyring.age`, an age file encrypted to every
//! recipient (restic's key files are the model). From then on every object a push writes (packs,
//! indexes, trees packs, signatures, snapshot records, gc marks) is an age file under the data
//! key, and every name but the top-level directory is a keyed name (a blake3 keyed hash under a
//! key derived from the data key): the bucket holds no blake3 id, no snapshot id, no file name
//! and no byte of content. Inside each object its plaintext key is sealed with its bytes, so an
//! object moved to another name is refused like a changed one. Other hosts add the remote with
//! `--encrypted` and an identity that is one of the recipients; `ZEROCLAW_BUNDLE_IDENTITY`
//! overrides the identity a remote was added with. Everything else works as on a plaintext
//! remote: remote refs, `list --remote`, `diff` (trees only), `mount` (ranged reads: age's chunks
//! have a fixed size, so a range of a file is a range of chunks, fetched and authenticated on
//! their own), `review`, `import`, `sync`, `remote forget` and `remote gc`. Signatures are over
//! the plaintext snapshot id, carried inside the encryption; `--require-signed` works as before.
//! A bucket with a key file never takes a plaintext push, and a remote configured as encrypted
//! whose key file is missing is refused, never read or written in the clear.
//!
//! **What someone who can read the bucket still learns**: the number of pushes and snapshots,
//! the size of each pack (sizes leak at pack granularity, not per file), the size of the trees
//! and records, and the times of writes. Nothing about names or contents, and they cannot
//! confirm that a given file is there by hashing it.
//!
//! **What someone who can write to the bucket can do**: delete or roll back objects (a pull then
//! fails, naming the object, or finds a snapshot missing); not forge or change one, because every
//! object is authenticated and bound to its name. Encrypting to the recipients needs only their
//! public keys, so a replaced key file would be readable by them; `remote add` pins the data
//! key's id in `remotes.toml`, and a key file holding another data key is refused. A former
//! recipient knows the old data keys: with write access to the bucket it could still add
//! objects under them, so take its bucket credentials away too (and use `--require-signed`).
//!
//! ## Changing recipients
//!
//! `remote recipients add` rewraps the data key for one more recipient: nothing is re-uploaded,
//! and the new recipient reads everything already there. `remote recipients remove` rewraps for
//! the others and adds a new data key generation: what is pushed from then on is encrypted to it
//! alone, which the removed recipient never had. The older generations stay in the key file, so
//! the remaining recipients still read what was pushed before. **A removal cannot take back what
//! the removed recipient already downloaded, nor the old data keys it could read**: it can still
//! read the objects pushed before the removal if it kept or can fetch them. When that matters,
//! rotate everything by pushing again to a new encrypted remote (a new bucket or prefix, added
//! with `--encrypt-to` the remaining recipients), then `remote forget` the old snapshots and run
//! `remote gc` on the old remote, or delete its prefix.
//!
//! ## Costs
//!
//! One X25519 operation per object written or first read, 16 bytes per 64 KiB chunk and a
//! header of about 200 bytes per object, and a 256-byte sealed name inside each object. Listing
//! an encrypted remote reads back each listed object's first window (whole, for the small
//! records, indexes and marks; the first 69 KiB of a pack, which only `remote gc` lists).
