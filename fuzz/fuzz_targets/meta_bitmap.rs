//! libFuzzer entry point of the `meta_bitmap` target; the body and its properties are in
//! `tandem_fuzz::meta_bitmap`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::meta_bitmap::run(data));
