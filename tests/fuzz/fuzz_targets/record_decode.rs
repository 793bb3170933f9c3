//! cargo-fuzz target: the `record_decode` property of `checks.rs`.
#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::record_decode(data);
});
