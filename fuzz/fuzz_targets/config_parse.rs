//! libFuzzer entry point of the `config_parse` target; the body and its properties are in
//! `tandem_fuzz::config_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::config_parse::run(data));
