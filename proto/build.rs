//! Generates the dovetail.v1 Rust code from `proto/dovetail/**.proto`.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate so that a fresh machine needs nothing
//! installed; `$PROTOC` overrides it. Besides the prost messages and tonic services this writes a
//! file descriptor set (for gRPC reflection) and pbjson serde impls (canonical proto3 JSON).

use std::env;
use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "proto/dovetail/cluster/v1/cluster.proto",
    "proto/dovetail/planner/v1/planner.proto",
    "proto/dovetail/actuator/v1/actuator.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let descriptors = out.join("dovetail_descriptor.bin");

    let mut config = prost_build::Config::new();
    if env::var_os("PROTOC").is_none() {
        config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    }
    // Ordered maps make encoding, JSON and plans deterministic.
    config.btree_map(["."]);
    tonic_prost_build::configure()
        .file_descriptor_set_path(&descriptors)
        // Undecodable messages are INVALID_ARGUMENT (src/codec.rs).
        .codec_path("crate::codec::Codec")
        .compile_with_config(config, PROTOS, &["proto"])?;

    let set = std::fs::read(&descriptors)?;
    pbjson_build::Builder::new()
        .register_descriptors(&set)?
        .emit_fields()
        .btree_map(["."])
        .build(&[".dovetail"])?;

    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
