//! The dovetail.v1 gRPC contract, the one contract every dovetail service speaks.
//!
//! The sources are `proto/dovetail/{cluster,planner,actuator}/v1/*.proto`, all in the one
//! package `dovetail.v1`. `build.rs` compiles them with `tonic-prost-build` and a vendored
//! `protoc` (the `protoc-bin-vendored` crate; set `$PROTOC` to use another), so generated code is
//! reproducible on a fresh machine with nothing installed and is never checked in.
//!
//! Every message also implements serde `Serialize`/`Deserialize` as canonical proto3 JSON
//! (lowerCamelCase names, int64 as strings, enums by name) with default values emitted, generated
//! by `pbjson-build`. That rendering of [`v1::PlanResponse`] is byte for byte what
//! `dovetail plan --output json` prints.

pub mod codec;
mod object;

pub use object::Kind;

/// Package `dovetail.v1`: cluster model, planner and actuator services.
pub mod v1 {
    #![allow(missing_docs, unreachable_pub, clippy::all)] // generated code
    include!(concat!(env!("OUT_DIR"), "/dovetail.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/dovetail.v1.serde.rs"));
}

/// The encoded `FileDescriptorSet` of every dovetail proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/dovetail_descriptor.bin"));
