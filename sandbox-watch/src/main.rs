fn main() -> std::process::ExitCode {
    sandbox_watch::cli::main()
}
