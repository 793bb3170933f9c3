//! cargo-fuzz target: the `pack_read` property of `checks.rs` (the pack layout check and the
//! capped object decoder).
#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::pack_read(data);
});
