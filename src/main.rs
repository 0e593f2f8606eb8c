//! The `mcplint` binary: see [`mcplint::cli`].

fn main() {
    std::process::exit(mcplint::cli::main());
}
