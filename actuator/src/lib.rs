//! The dovetail actuator service. Placeholder: see designs/roadmap.md for what it will hold.
