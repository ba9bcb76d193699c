fn main() {
    std::process::exit(nightshift::cli::main());
}
