//! Generates the protobuf and gRPC code. `protoc` comes from
//! `protoc-bin-vendored` unless the `PROTOC` environment variable names one,
//! so a build needs no system package.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var_os("PROTOC").is_none() {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // SAFETY: build scripts are single-threaded; nothing else reads the
        // environment concurrently.
        unsafe { std::env::set_var("PROTOC", protoc) };
    }
    println!("cargo:rerun-if-env-changed=PROTOC");
    // Printing any rerun-if line replaces cargo's default of rerunning on
    // every change in the package, so the protos are named too.
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(&["proto/ank_base.proto", "proto/control_api.proto", "proto/grpc_api.proto"], &["proto"])?;
    Ok(())
}
