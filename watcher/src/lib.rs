//! The dovetail watcher service. Placeholder: see ../shared/docs/roadmap.md for what it will hold.
