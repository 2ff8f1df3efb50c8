//! libFuzzer entry point of the `admin_line` target; the body and its properties are in
//! `tandem_fuzz::admin_line`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::admin_line::run(data));
