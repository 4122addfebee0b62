#![allow(clippy::unwrap_used)]
//! The gRPC code in `src/generated/` is checked in, so that building uidgen runs no protobuf
//! compiler and builds none (issue 34: `protox` and `tonic-prost-build` brought 23 crates to
//! every build). This test regenerates it from `proto/uidgen/v1/uidgen.proto` the way the
//! build script did (protox parses the file, `tonic-prost-build` generates from the parsed set,
//! with the descriptor set written for gRPC reflection) and fails on any difference.
//!
//! After editing the `.proto` file: `UIDGEN_TEST_REGENERATE_PROTO=1 cargo test -p uidgen-proto
//! --test generated` writes the new files in place of the old, then commit them.

use std::path::{Path, PathBuf};

use prost::Message;

const FILES: [&str; 2] = ["uidgen.v1.rs", "uidgen_v1_descriptor.bin"];

/// Generate into `out`: the Rust code and the descriptor set.
fn generate(out: &Path) {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../../proto");
    let proto = root.join("uidgen/v1/uidgen.proto");
    let descriptors = protox::compile([&proto], [&root]).unwrap();
    let descriptor_path = out.join(FILES[1]);
    std::fs::write(&descriptor_path, descriptors.encode_to_vec()).unwrap();
    tonic_prost_build::configure()
        .out_dir(out)
        .file_descriptor_set_path(&descriptor_path)
        .skip_protoc_run()
        .compile_protos(&[proto], &[root])
        .unwrap();
}

#[test]
fn the_checked_in_grpc_code_is_what_the_proto_file_generates() {
    let generated = tempfile::tempdir().unwrap();
    generate(generated.path());
    let checked_in = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/generated");
    let regenerate = std::env::var("UIDGEN_TEST_REGENERATE_PROTO").is_ok_and(|v| v == "1");
    for file in FILES {
        let fresh = std::fs::read(generated.path().join(file)).unwrap();
        let path = checked_in.join(file);
        if regenerate {
            std::fs::write(&path, &fresh).unwrap();
            continue;
        }
        let kept = std::fs::read(&path).unwrap();
        assert!(
            fresh == kept,
            "{} differs from what proto/uidgen/v1/uidgen.proto generates: run \
             `UIDGEN_TEST_REGENERATE_PROTO=1 cargo test -p uidgen-proto --test generated` and \
             commit the result",
            path.display()
        );
    }
}
