//! cargo-fuzz target: the remote's record check and index parser (`remote::check_record`,
//! `remote::parse_index`, `remote::IndexParser`). Properties: nothing panics; the streaming
//! parser agrees with the whole-file parser however the input is split; a parsed index
//! re-encodes to the same ids; a record is accepted under exactly one id (its blake3).
#![no_main]

use zeroclaw_bundle::fuzzing::{check_record, parse_index, IndexParser};
use zeroclaw_bundle_store::ObjectId;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let whole = parse_index(data);
    // The same bytes, split where the first byte says.
    let cut = usize::from(data.first().copied().unwrap_or(0)) % (data.len() + 1);
    let mut p = IndexParser::default();
    let mut ids = Vec::new();
    let streamed = p
        .feed(&data[..cut], &mut |id| ids.push(id))
        .and_then(|()| p.feed(&data[cut..], &mut |id| ids.push(id)))
        .and_then(|()| p.finish())
        .map(|()| ids);
    assert_eq!(whole.is_ok(), streamed.is_ok(), "chunking changed the verdict");
    if let (Ok(a), Ok(b)) = (&whole, &streamed) {
        assert_eq!(a, b);
        let mut text = String::from("zeroclaw-bundle remote index 1\n");
        for id in a {
            text.push_str(&id.to_hex());
            text.push('\n');
        }
        assert_eq!(text.as_bytes(), data, "an accepted index is canonical");
    }
    let own = ObjectId::of(data);
    assert!(check_record(&own, data).is_ok());
    assert!(check_record(&ObjectId::of(b"other"), data).is_err() || data == b"other");
    if check_record(&own, data).is_ok() {
        let _ = zeroclaw_bundle_store::Snapshot::decode(data);
    }
});
