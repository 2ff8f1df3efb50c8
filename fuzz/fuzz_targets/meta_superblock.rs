//! libFuzzer entry point of the `meta_superblock` target; the body and its properties are in
//! `tandem_fuzz::meta_superblock`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::meta_superblock::run(data));
