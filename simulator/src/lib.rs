//! Simulated cluster and cloud (filled by the simulator issue).
