import AppleVerification
import CLibFuzzer
import Foundation

/// Apple's time formats, read from bytes anyone can send: an app receipt's RFC 3339 creation and purchase
/// dates (read before the receipt's signer is checked), verifyReceipt's millisecond strings, and a
/// `Retry-After` header in each of its forms. None may trap, whatever the length of a fraction or a number.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = ReceiptSignatureVerifier.seconds(text)
    _ = AppleTimestamp.date(millisecondsText: text)
    _ = AppleHTTP.retryAfter(text, maximum: .seconds(30))
    return 0
}

// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
