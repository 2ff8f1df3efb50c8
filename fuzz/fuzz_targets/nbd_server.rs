//! libFuzzer entry point of the `nbd_server` target; the body and its properties are in
//! `tandem_fuzz::nbd_server`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::nbd_server::run(data));
