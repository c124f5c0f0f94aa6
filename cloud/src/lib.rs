//! The cloud-provider interface (filled by the simulator issue).
