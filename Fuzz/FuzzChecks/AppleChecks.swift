import AppleVerification
import Foundation
import Vocabulary

extension FuzzChecks {
    /// One compact JWS, read as each kind of signed data Apple sends: a transaction, renewal info, a
    /// notification, an app transaction (RESCIND_CONSENT). Every failure must be a thrown error; only crashes are
    /// looked for.
    @Sendable public static func signedData(_ bytes: [UInt8]) -> String? {
        let jws = String(decoding: bytes, as: UTF8.self)
        _ = try? SignedDataHarness.verifier.verifyTransaction(jws)
        _ = try? SignedDataHarness.verifier.verifyRenewalInfo(jws)
        _ = try? SignedDataHarness.verifier.verifyNotification(jws)
        _ = try? SignedDataHarness.verifier.verifyAppTransaction(jws)
        return nil
    }

    /// One verifyReceipt response body, decoded as the client decodes a 200 answer. What the worker then reads
    /// from it (`AppleVerifier.verdict(onReceipt:)`) is internal, so only the decoder and the status table are
    /// reached here.
    @Sendable public static func verifyReceiptResponse(_ bytes: [UInt8]) -> String? {
        guard let response = try? VerifyReceiptResponse(json: Array(bytes)) else {
            return nil
        }
        _ = VerifyReceiptStatus(status: response.status, isRetryable: response.isRetryable)
        _ = VerifyReceiptStatus.describe(response.status)
        return nil
    }

    /// One receipt's bytes, read three ways: as the DER of a PKCS#7 app receipt (what `AppReceipt(base64:)` and
    /// its signature check decode), as the receipt's signed content alone (the attribute SET the ASN.1 reader
    /// walks, reached directly so mutations need not keep the PKCS#7 around it consistent), and as an iOS 6
    /// transaction receipt (a property list). And through the server_api path's verifier: the signer, its
    /// chain at the receipt's creation date (Apple's real receipts among the seeds reach it), the signature.
    @Sendable public static func appReceipt(_ bytes: [UInt8]) -> String? {
        let base64 = Data(bytes).base64EncodedString()
        _ = AppReceipt(base64: base64)
        _ = AppReceipt(payload: bytes)
        _ = ReceiptHarness.verifier.verify(base64: base64)
        _ = LegacyTransactionReceipt.transactionID(fromBase64: base64)
        return nil
    }

    /// Apple's time formats, read from bytes anyone can send: an app receipt's RFC 3339 creation and purchase
    /// dates (read before the receipt's signer is checked), verifyReceipt's millisecond strings, and a
    /// `Retry-After` header in each of its forms. None may trap, whatever the length of a fraction or a number.
    @Sendable public static func appleDates(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        _ = ReceiptSignatureVerifier.seconds(text)
        _ = AppleTimestamp.date(millisecondsText: text)
        _ = AppleHTTP.retryAfter(text, maximum: .seconds(30))
        return nil
    }
}

/// Apple Root CA, parsed once.
enum ReceiptHarness {
    static let verifier: ReceiptSignatureVerifier = {
        do {
            return try ReceiptSignatureVerifier(rootCertificates: [AppleRootCertificates.appleRootCA])
        } catch {
            fatalError("Apple Root CA does not load: \(error)")
        }
    }()
}

/// The verifier every signed-data input goes through.
enum SignedDataHarness {
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
