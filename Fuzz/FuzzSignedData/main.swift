import AppleVerification
import CLibFuzzer
import Foundation

/// The verifier every input goes through. A type's static properties, unlike this file's top-level variables,
/// belong to no actor, so the fuzz function can read them.
enum Harness {
    /// Apple's test root (fixtures/apple/certs/testCA.der): the fixtures' chains verify against it, so mutations
    /// of a payload whose header is intact still walk the chain before the signature refuses them.
    static let testRootBase64 =
        "MIIBgjCCASmgAwIBAgIJALUc5ALiH5pbMAoGCCqGSM49BAMDMDYxCzAJBgNVBAYTAlVTMRMwEQYDVQQIDApDYWxpZm9ybmlhMRIwEAYDVQQH"
        + "DAlDdXBlcnRpbm8wHhcNMjMwMTA1MjEzMDIyWhcNMzMwMTAyMjEzMDIyWjA2MQswCQYDVQQGEwJVUzETMBEGA1UECAwKQ2FsaWZvcm5p"
        + "YTESMBAGA1UEBwwJQ3VwZXJ0aW5vMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEc+/Bl+gospo6tf9Z7io5tdKdrlN1YdVnqEhEDXDS"
        + "hzdAJPQijamXIMHf8xWWTa1zgoYTxOKpbuJtDplz1XriTaMgMB4wDAYDVR0TBAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYwCgYIKoZIzj0E"
        + "AwMDRwAwRAIgemWQXnMAdTad2JDJWng9U4uBBL5mA7WI05H7oH7c6iQCIHiRqMjNfzUAyiu9h6rOU/K+iTR0I/3Y/NSWsXHX+acc"

    /// The fixtures' bundle, every environment allowed (the checks after decoding are reached whatever the
    /// payload says), and no chain cache: a cached header would make one input's outcome depend on the inputs
    /// before it, and libFuzzer could not reproduce a crash from its input alone.
    static let verifier: SignedDataVerifier = {
        guard let root = Data(base64Encoded: testRootBase64) else { fatalError("the test root is not base64") }
        var configuration = SignedDataVerifier.Configuration(rootCertificates: [root], bundleID: "com.example")
        configuration.allowedEnvironments = [.production, .sandbox, .xcode, .localTesting]
        configuration.chainCacheSize = 0
        do {
            return try SignedDataVerifier(configuration: configuration)
        } catch {
            fatalError("the test root does not load: \(error)")
        }
    }()
}

/// One compact JWS, read as each kind of signed data Apple sends: a transaction, renewal info, a notification.
/// Every failure must be a thrown ``AppleVerificationError``.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let jws = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? Harness.verifier.verifyTransaction(jws)
    _ = try? Harness.verifier.verifyRenewalInfo(jws)
    _ = try? Harness.verifier.verifyNotification(jws)
    return 0
}

// Made before fuzzing starts, so that no run pays for it (Fuzz/lsan.supp says why LeakSanitizer ignores it).
_ = Harness.verifier
// SwiftPM makes an executable's `main` of this file's top-level code (on Linux it links `main` to it by name), so
// libFuzzer's own `main` cannot be used: its driver is run from here instead. scripts/fuzz.sh has the recipe.
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, fuzz))
