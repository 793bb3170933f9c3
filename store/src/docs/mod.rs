//! Long-form documentation of the store: chapters that hold only text, shown by `cargo doc`
//! beside the code they describe.
//!
//! - [`layout`]: the files of a store directory, the store lock, the write order, the
//!   catalog and how it is rebuilt.
//! - [`objects`]: blobs, trees and records; file modes; compressed and packed objects; older
//!   formats.
//! - [`packs`]: the pack format (travel packs, digest packs, the tree index), its reader, its
//!   writer and the one-pass import.
//! - [`tree_index`]: the tree index and the expansion record a mount and a diff read.

pub mod layout;
pub mod objects;
pub mod packs;
pub mod tree_index;
