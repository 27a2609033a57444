//! Builds the real runner's clock shim (`src/real/clockshim.c`) into a shared object
//! that the `locksim` binary carries (`include_bytes!`) and writes out when a real run
//! moves a Redis server's clock. A C compiler is already needed to link Rust here.

fn main() {
    let src = "src/real/clockshim.c";
    println!("cargo:rerun-if-changed={src}");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let so = out.join("liblocksim_clock.so");
    let compiler = cc::Build::new().pic(true).opt_level(2).get_compiler();
    let status = compiler
        .to_command()
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {src}: {e}"));
    assert!(status.success(), "the C compiler failed on {src}");
}
