import AppleVerification
import CLibFuzzer
import Foundation

/// One verifyReceipt response body, decoded as the client decodes a 200 answer. What the worker then reads
/// from it (`AppleVerifier.verdict(onReceipt:)`) is internal, so only the decoder and the status table are
/// reached here.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let body = Data(bytes: data, count: size)
    guard let response = try? JSONDecoder().decode(VerifyReceiptResponse.self, from: body) else { return 0 }
    _ = VerifyReceiptStatus(status: response.status, isRetryable: response.isRetryable)
    _ = VerifyReceiptStatus.describe(response.status)
    return 0
}

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
