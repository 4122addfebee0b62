// Generated from proto/uidgen/v1/*.proto by build.rs; the documentation is on `mod v1` in lib.rs.

tonic::include_proto!("uidgen.v1");
