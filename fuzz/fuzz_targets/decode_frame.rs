//! Any bytes as a client text frame: decoding never panics, and whatever decodes re-encodes to
//! something that decodes to the same value; a REQUEST's kind check never panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use museum_agent::protocol::{ClientMessage, decode_client};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(frame) = decode_client(text) {
        let again = decode_client(&frame.encode()).expect("an encoded frame decodes");
        assert_eq!(again.message, frame.message);
        if let ClientMessage::Request(r) = &frame.message {
            let _ = r.kind(4000);
        }
    }
});
