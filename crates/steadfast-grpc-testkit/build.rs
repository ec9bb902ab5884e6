//! Generates the echo service's code from `proto/echo.proto` with protox
//! (a protobuf compiler in Rust: no system `protoc` needed).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = protox::compile(["proto/echo.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(files)?;
    println!("cargo:rerun-if-changed=proto/echo.proto");
    Ok(())
}
