//! The dovetail.v1 gRPC contract (filled by the gRPC issue).
