//! libFuzzer entry point of the `meta_activity_log` target; the body and its properties are in
//! `tandem_fuzz::meta_activity_log`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::meta_activity_log::run(data));
