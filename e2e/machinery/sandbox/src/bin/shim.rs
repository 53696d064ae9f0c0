//! The shim as its own binary, for this crate's tests (localkube runs `localkube sandbox-shim`).

fn main() -> std::process::ExitCode {
    localkube_sandbox::shim_main(std::env::args_os().skip(1).collect())
}
