@testable import AppleVerification
import Crypto
import Foundation
import Synchronization
import Testing

/// What the revocation check asks, without a network: Apple's own chain names its responders; a chain that names
/// none is known at once (Tests/AppleClientTests/RevocationCheckTests.swift asks real responders).
@Suite("Revocation: what is asked, and of whom")
struct RevocationCheckerTests {
    @Test(
        "Apple's signing chain is asked of Apple's OCSP responders: the leaf's of WWDR G6's, the intermediate's of the root G3's"
    )
    func applesResponders() throws {
        let leaf = try X509Certificate(bytes: try Fixtures.data("chain/real_apple_signing_certificate.der"))
        let intermediate = try X509Certificate(bytes: try Fixtures.data("chain/real_apple_intermediate.der"))
        let root = try X509Certificate(bytes: try Fixtures.data("chain/real_apple_root.der"))
        let leafQuery = try #require(OCSPQuery(certificate: leaf, issuer: intermediate))
        #expect(leafQuery.url == "http://ocsp.apple.com/ocsp03-wwdrg602")
        #expect(!leafQuery.request.isEmpty)
        #expect(OCSPQuery(certificate: intermediate, issuer: root)?.url == "http://ocsp.apple.com/ocsp03-applerootcag3")
        // Not an OCSP response, or nothing at all: never trusted, never good.
        #expect(leafQuery.answer(Data("<html>".utf8), issuer: intermediate, roots: [root]) != .good(nextUpdate: nil))
        if case .good = leafQuery.answer(Data(), issuer: intermediate, roots: [root]) {
            Issue.record("an empty answer was taken for good")
        }
    }

    @Test("a chain whose certificates name no responder verifies at its first sight, and nothing is asked")
    func nothingToAsk() throws {
        let asked = Mutex(0)
        let root = try Fixtures.data("certs/testCA.der")
        var configuration = SignedDataVerifier.Configuration(rootCertificates: [root], bundleID: "com.example")
        configuration.revocation = try RevocationChecker(rootCertificates: [root]) { _, _, _ in
            asked.withLock { $0 += 1 }
            return Data()
        }
        let verifier = try SignedDataVerifier(configuration: configuration)
        let transaction = try verifier.verifyTransaction(try TestChain.sign(TestChain.transaction()))
        #expect(transaction.transactionId == "2000000000000001")
        #expect(asked.withLock { $0 } == 0)
    }
}
