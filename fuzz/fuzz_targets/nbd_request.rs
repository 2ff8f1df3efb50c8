//! libFuzzer entry point of the `nbd_request` target; the body and its properties are in
//! `tandem_fuzz::nbd_request`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem_fuzz::nbd_request::run(data));
