//! The `dovetail` command line.

fn main() {
    println!("dovetail");
}
