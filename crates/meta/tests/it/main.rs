//! The crate's one integration-test binary: property tests of the codecs and models of the
//! bitmap and the activity log, driven only through the public API.

mod activity_log_model;
mod bitmap_model;
mod codecs;
mod layout_properties;
