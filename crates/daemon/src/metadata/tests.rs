//! Tests of the metadata I/O layer against temporary files.
