//! # Packs
//!
//! One format serves three uses: a travel pack (`zeroclaw-bundle pack`: a snapshot and every
//! object it reaches, or with `--since` only what a base lacks), a digest pack (`--trees-only`:
//! the record and its trees) and, rooted at a tree instead of a record, the store's tree index
//! ([`super::tree_index`]) and its packed objects ([`super::objects`]). Format version 1,
//! little-endian:
//!
//! ```text
//! header     "ZCBPACK\0" | version u32 = 1 | flags u32 (1: trees only) | root snapshot id [32] | base id [32]
//! objects    the snapshot record, every tree, then every blob; each once; raw, or one zstd frame when that saves space
//! signatures (optional) the snapshot's signatures
//! index      count u64, then sorted by id: id [32] | offset u64 | stored length u64 | length u64 | flags u8 (1: zstd)
//! trailer    index offset u64 | blake3 of every byte before the trailer [32] | "ZCBPEND\0"
//! ```
//!
//! ## Reading
//!
//! An object's id is the blake3 of its uncompressed bytes. The reader checks every length and
//! offset against the file size before it allocates, refuses overlapping, unsorted or
//! duplicated entries, caps decompression at the declared length, and hashes every object it
//! hands out. `mount` and `diff` of a pack file check its trailer first (one sequential read).
//!
//! The signature section lies between the objects and the index, covered by the trailer
//! checksum. The format version is unchanged by it: an older reader only checks that objects
//! lie inside the object area, so it reads and unpacks a signed pack as before (ignoring the
//! section), and a pack without signatures is byte for byte what older builds wrote. Digest
//! packs carry none.
//!
//! ## Writing
//!
//! The writer reads, verifies and compresses blobs ahead on worker threads (4 per core, at most
//! 64 MiB in flight) and writes them strictly in walk order, so a pack's bytes do not depend on
//! the number of workers. It walks the snapshot's trees from its tree index (one read instead of
//! one object per tree). Records and trees are stored raw. A blob up to 128 KiB is compressed
//! (zstd level 3) and kept compressed when smaller; a larger one is compressed only when its
//! first 128 KiB save at least 2% (random data such as images and archives costs no zstd
//! time); a blob over 8 MiB is read and compressed in 1 MiB chunks into one zstd frame, never
//! held whole. A stored zstd frame is copied as it is.
//!
//! Each object is compressed on its own, so `mount`, `diff` and a remote mount read one object
//! with one positioned read or one ranged GET; the price is a pack a few percent larger than a
//! format that compresses small files together in solid blocks (squashfs's fragments).
//!
//! ## Importing (`unpack`, `pull`)
//!
//! One pass: the objects the snapshot needs and the store lacks are taken in file order by one
//! worker per core, each read, decompressed (capped at the length its index declares) and
//! hashed once, and written into a staging directory under `<store>/tmp/` (objects over 8 MiB
//! stream, so no allocation follows a declared length), while one more thread checks the
//! trailer hash. The objects of at most 256 KiB the store has no copy of are appended to one
//! object pack there (the form a capture writes: see the objects chapter), the others are a
//! file each. Only when the trailer and every object passed is that pack fsynced and renamed
//! into `objects/packs/` and are the staged files renamed into `objects/`, then the record and
//! the catalog entry are written (one `syncfs` before the record), and the snapshot's tree
//! index is written from the pack. A store that holds no object yet (a new one) is not asked
//! for each object the snapshot reaches. A failure at any object
//! removes the staging directory; a kill leaves at most that directory, which `gc` removes. What
//! the pack lists beyond what its snapshot reaches is never written.
