// PATCH (pure-Rust protoc): the released build script runs `tonic_prost_build`'s
// `compile_protos`, which needs a `protoc` binary on the machine. Here `protox` (a
// protobuf compiler written in Rust) parses the same five files into a descriptor set,
// and `tonic_prost_build` generates the same modules from it: building needs only cargo.

#[cfg(feature = "build-server")]
fn should_build_server() -> bool {
    true
}

#[cfg(not(feature = "build-server"))]
fn should_build_server() -> bool {
    false
}

fn main() {
    let proto_root = "proto";
    println!("cargo:rerun-if-changed={proto_root}");

    let files = [
        "proto/auth.proto",
        "proto/kv.proto",
        "proto/rpc.proto",
        "proto/v3election.proto",
        "proto/v3lock.proto",
    ];
    let descriptors = protox::compile(files, [proto_root]).expect("Failed to parse proto files");
    tonic_prost_build::configure()
        .build_server(should_build_server())
        .compile_fds(descriptors)
        .expect("Failed to compile proto files");
}
