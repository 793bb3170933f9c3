//! # Remote stores
//!
//! For a fleet, hosts share a remote store on S3-compatible object storage (AWS S3, MinIO,
//! Garage, Ceph RGW) or a shared directory, through the `object_store` crate (no home-made S3
//! client):
//!
//! ```text
//! zeroclaw-bundle remote add origin s3://fleet-bundles/agents [--endpoint http://HOST:PORT]
//! zeroclaw-bundle push agent/researcher origin      # one pack of what the remote lacks, then the record
//! zeroclaw-bundle list --remote origin
//! zeroclaw-bundle pull origin/agent/researcher      # on another host: fetched, verified, imported
//! ```
//!
//! ## Configuration and credentials
//!
//! Remotes are kept in `<store>/remotes.toml` (name, URL, endpoint; never a credential).
//! Credentials come from the environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` and the other `AWS_*` variables `object_store` reads) or,
//! when it holds no access key, from the standard AWS files as the AWS CLI finds them: the
//! profile `AWS_PROFILE` (else `default`) in `AWS_SHARED_CREDENTIALS_FILE` (else
//! `~/.aws/credentials`, section `[NAME]`) and then `AWS_CONFIG_FILE` (else `~/.aws/config`,
//! section `[profile NAME]`), key by key; a region from the files is used only when neither
//! `AWS_REGION` nor `AWS_DEFAULT_REGION` is set. An `AWS_PROFILE` that no file defines, or a
//! profile with only one of the two keys, is an error naming the file and the profile. A URL
//! or endpoint with `user:secret@`, a query string or fragment (`?x-amz-security-token=...`),
//! or a control character is refused, and no command prints a credential (errors name the
//! file, the profile and the key, never a value). `remote remove NAME` drops an entry from
//! `remotes.toml` (it works on an entry that no longer validates) and never touches the
//! remote's data.
//!
//! ## Layout under the prefix
//!
//! ```text
//! packs/<pack-id>.zcpack         a pack of the objects the remote lacked at that push
//! index/<pack-id>.idx            "zeroclaw-bundle remote index 1", then the hex id of each object in it
//! trees/<snapshot-id>.zcpack     the snapshot's trees-only pack (record and every tree)
//! snapshots/<snapshot-id>        the snapshot record's bytes
//! signatures/<snapshot-id>/<sig-id>.sig   its signatures
//! gc/<pack-id>                   a remote gc's mark: this pack is reached by no snapshot
//! ```
//!
//! `<pack-id>` is the blake3 of the pack file. Anything else under these directories (a
//! `README` under `snapshots/`, a nested key) is ignored and named on stderr; it never hides
//! the rest of the remote.
//!
//! ## Push and pull
//!
//! A push reads every index, writes one pack of the objects no index lists (one request, or one
//! multipart upload past 16 MiB), then its index, then the snapshot's trees-only pack, then the
//! record. Every key is written once, with bytes determined by its name, and nothing is read
//! back and rewritten, so any number of hosts can push at once without coordination. An index
//! appears only after its pack is complete, and a record only after the indexes of all it
//! reaches: a push killed at any point leaves at most an unindexed pack (ignored, re-uploaded by
//! the next push) or indexed objects without a record, never a listed snapshot with missing
//! objects.
//!
//! A push relies on the remote for an object only when an index lists it, that index's pack is
//! present and not marked by a remote gc, and the pack's own index (read with a suffix-range
//! GET and checked as a local pack is) holds it; anything else goes up again. So an index that
//! lies, or one left without its pack, costs a re-upload, never a record nobody can pull; and
//! pushing a snapshot the remote lists already repairs a record whose objects were lost. The
//! pack's object bytes are not re-read (that would transfer what dedup saves): a pack damaged
//! after it was written is caught by the pull's verification.
//!
//! A pull walks the record's trees through the local store and the packs holding what it
//! lacks, downloads those packs into `<store>/tmp/`, imports them through `unpack`'s one
//! verifying pass ([`super::packs`]) and commits the record. It tries every pack whose index
//! lists a missing object. Indexes are parsed as they stream in, keeping only the ids being
//! looked for, so an unrelated large index does not inflate a pull (an index file is refused
//! past 2 GiB). Push and pull hold the store's writer lock (shared) while their temporary packs
//! exist, so a `gc` waits for them. `list --remote` lists every readable record and names each
//! unreadable one on stderr (exit 1).
//!
//! What a SIGKILLed push leaves besides that: on `file://`, the upload's staging file
//! `<key>#<n>` (object_store's local staging name; listings ignore it; remove old ones by hand
//! with no push running: `find REMOTE -name '*#[0-9]*' -mmin +60 -delete`); on S3, an
//! incomplete multipart upload for a pack past 16 MiB (invisible to listings, billed until
//! aborted: set the bucket's `AbortIncompleteMultipartUpload` lifecycle rule).
//!
//! ## Remote refs
//!
//! Remote refs name snapshots as local refs do: `origin/<id or 8+ hex prefix>`,
//! `origin/<name>` (a name given with `snapshot --name`) and `origin/agent/<alias>`, the newest
//! snapshot of that agent on the remote (by the records' creation time, ties by id, so every
//! host picks the same). They work in `pull`, `mount`, `diff` (with `:PATH`), `review`,
//! `import` and `checkout` (which pulls the snapshot, verified, and publishes it from the
//! store). How an argument is told from a path or a local ref: [`super::cli`].
//!
//! `diff` and `mount` take a remote snapshot without pulling it:
//!
//! - **diff** downloads the record and the trees pack (verified whole: trailer, every tree,
//!   and that it is the trees-only pack of that snapshot) and never a blob pack: files are
//!   compared by content id, and the agent section (which needs `manifest.json` and
//!   `config.toml` contents) is left out with a note, as for a digest pack.
//! - **mount** lists directories from the trees pack; a file's content is fetched when it is
//!   read, with one ranged GET of exactly its bytes in the pack that holds it, decompressed with
//!   the cap its index gives, hashed and compared with its id before it is served, and kept in
//!   an unnamed file under `<store>/tmp/` (up to 256 MiB kept for re-reads). Nothing is written
//!   to the store.
//! - A snapshot pushed by an older build has no trees pack: its trees are then fetched one by
//!   one with ranged GETs (mount says so). Pushing it again from a store that holds it adds the
//!   trees pack.
//! - `-v` prints what a command asked of the remote: requests and bytes per key prefix.
//!
//! Not done: the agent section of a remote diff (it would fetch two blobs by range), and a
//! remote mount still loads the remote's whole index map (object to pack) to locate blobs.
//!
//! ## Remote forget and gc
//!
//! `remote forget origin REF` deletes a snapshot's record. `remote gc origin [--grace SECONDS]`
//! (default 86400) deletes what no record reaches, safely while other hosts push, with no lock:
//!
//! - Roots are the records; each record's trees pack (verified) gives every object it reaches.
//!   A pack is live when its index lists one of them. A record that cannot be read stops the gc
//!   (it cannot know what that record needs); a record without a trees pack (an older build's
//!   push) makes the gc keep every pack.
//! - A pack that is not live is first marked (`gc/<pack-id>`, written with a conditional
//!   create: `If-None-Match: *` on S3, object_store's no-replace create on a local directory, so
//!   a second gc never restarts the first one's clock); a later gc deletes it (index first, then
//!   pack, then mark) only if the mark is older than the grace period and the pack is still not
//!   live. A live pack's mark is removed. Ages are measured on the backend's clock (a small
//!   object written for the purpose), never by comparing two hosts' clocks. Trees packs and
//!   signatures whose record is gone go once they are older than the grace period.
//! - A push reads the marks first, relies on no marked pack (and refuses, with a message, to
//!   upload a pack whose name is marked), and writes its record only if less than 6 hours (the
//!   push window) passed since it read them. The grace period must be at least twice that.
//!   Then a gc can never delete a pack a push needs: the pack was marked after the push read the
//!   marks (else the push saw the mark), so the push's record was written before the mark aged
//!   past the grace period, and the gc lists records after it reads the clock, sees that record
//!   and keeps the pack. A pack being uploaded right now is at most marked. The argument rests
//!   on strongly consistent listings (S3, a local directory) and needs no conditional write: on
//!   a backend without them, marks are plain writes and only the liveness changes.
//! - A push that outlasts the window refuses to write its record ("took longer than ... since
//!   it read the remote's gc marks"): push again.
