import CLibFuzzer
import Foundation
import HTTPServerKit

/// One connection's input buffer, parsed as the server loop parses it: requests are taken off the front
/// until the parser wants more bytes or refuses the rest (pipelined requests arrive in one read).
///
/// Only `HTTPRequestParser.parse(_:)` is called, so a change of the parser's API means a change here alone.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var buffer = Array(UnsafeBufferPointer(start: data, count: size))
    var remaining = buffer.count
    while case .request = HTTPRequestParser.parse(&buffer) {
        // Each request must take its bytes off the buffer, or the server would answer it forever.
        precondition(buffer.count < remaining, "a request was parsed without taking bytes off the buffer")
        remaining = buffer.count
    }
    return 0
}

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
