// Generated from proto/uidgen/v1/uidgen.proto and checked in (`src/generated/`), so that no
// build runs a protobuf compiler; `tests/generated.rs` regenerates it and fails on any
// difference. The documentation is on `mod v1` in lib.rs.

include!("generated/uidgen.v1.rs");
