//! Generates the gRPC code from `proto/uidgen/v1/uidgen.proto` with `protoc`, which comes from
//! Debian's `protobuf-compiler` (scripts/test.sh installs it) or from `$PROTOC`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let proto = root.join("uidgen/v1/uidgen.proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed={}", proto.display());
    println!("cargo:rerun-if-env-changed=PROTOC");
    tonic_prost_build::configure()
        // For gRPC reflection: the server describes its own API to grpcurl and friends.
        .file_descriptor_set_path(out.join("uidgen_v1_descriptor.bin"))
        .compile_protos(&[proto], &[root])
        .map_err(|e| {
            format!(
                "cannot compile uidgen.proto: {e}\n\
                 protoc is needed: install Debian's `protobuf-compiler` (scripts/test.sh does) \
                 or point $PROTOC at a protoc binary"
            )
        })?;
    Ok(())
}
