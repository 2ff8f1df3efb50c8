//! libFuzzer entry point of the `wire_message` target; the body and its properties are in
//! `tandem_fuzz::wire_message`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::wire_message::run(data));
