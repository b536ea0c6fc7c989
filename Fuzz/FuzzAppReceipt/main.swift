import AppleVerification
import CLibFuzzer
import Foundation

/// One receipt's bytes, read three ways: as the DER of a PKCS#7 app receipt (what `AppReceipt(base64:)` and
/// its signature check decode), as the receipt's signed content alone (the attribute SET the ASN.1 reader
/// walks, reached directly so mutations need not keep the PKCS#7 around it consistent), and as an iOS 6
/// transaction receipt (a property list). And through the server_api path's verifier: the signer, its chain
/// at the receipt's creation date (Apple's real receipts among the seeds reach it), the signature.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let base64 = Data(buffer: bytes).base64EncodedString()
    _ = AppReceipt(base64: base64)
    _ = AppReceipt.verifySignature(base64: base64, roots: [AppleRootCertificates.appleRootCAG3], checkTime: false)
    _ = AppReceipt(payload: Array(bytes))
    _ = Verifiers.receipts.verify(base64: base64)
    _ = LegacyTransactionReceipt.transactionID(fromBase64: base64)
    return 0
}

/// Apple Root CA, parsed once.
enum Verifiers {
    static let receipts = try! ReceiptSignatureVerifier(rootCertificates: [AppleRootCertificates.appleRootCA])
}

// Made before fuzzing starts, so that no run pays for it (Fuzz/lsan.supp says why LeakSanitizer ignores it).
_ = AppleRootCertificates.appleRootCAG3
_ = Verifiers.receipts
// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
