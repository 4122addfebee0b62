//! Generates the gRPC code from `proto/uidgen/v1/uidgen.proto` with `protox`, a protobuf compiler
//! written in Rust, so building uidgen needs nothing but Rust: no system `protoc` (issue 19).
//!
//! protox parses the file into a `FileDescriptorSet`; that set is written to `OUT_DIR` (for gRPC
//! reflection) and handed to `tonic-prost-build` with `skip_protoc_run`, which then generates
//! from the set instead of calling `protoc`.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let proto = root.join("uidgen/v1/uidgen.proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed={}", proto.display());
    let descriptors = protox::compile([&proto], [&root])
        .map_err(|e| format!("cannot compile {}: {e}", proto.display()))?;
    let descriptor_path = out.join("uidgen_v1_descriptor.bin");
    std::fs::write(&descriptor_path, descriptors.encode_to_vec())?;
    tonic_prost_build::configure()
        // For gRPC reflection: the server describes its own API to grpcurl and friends.
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_protos(&[proto], &[root])?;
    Ok(())
}
