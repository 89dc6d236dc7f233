//! The `tilekit` command: see `tilekit --help` and [`tilekit_cli::cli`].

fn main() {
    // Mesa's Vulkan drivers (lavapipe among them) print a warning on every device enumeration
    // when this is unset, which would garble one-line error messages. Set before any thread
    // exists, so the environment is not read concurrently.
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
    }
    // Bad input is reported through `CliError`; a panic is a bug in tilekit, and the person who
    // meets it needs one line to report, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        eprintln!("error: internal error in tilekit: {msg}{at} (please report it)");
    }));
    std::process::exit(tilekit_cli::cli::main_with_args(std::env::args_os()));
}
