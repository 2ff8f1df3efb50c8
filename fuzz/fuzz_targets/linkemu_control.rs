//! libFuzzer entry point of the `linkemu_control` target; the body and its properties are in
//! `tandem_fuzz::linkemu_control`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::linkemu_control::run(data));
