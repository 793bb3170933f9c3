//! cargo-fuzz target: the `unescape` property of `checks.rs`.
#![no_main]

#[path = "../checks.rs"]
#[allow(dead_code)]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::unescape(data);
});
