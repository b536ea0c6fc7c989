@testable import AppleVerification
import Crypto
import Foundation
import Testing
import Vocabulary

@Suite("Signed data (JWS) verification with Apple's test vectors")
struct SignedDataVerifierTests {
    func verifier(
        environments: Set<AppleEnvironment> = [.sandbox], bundleID: String = "com.example", appAppleID: Int64? = nil
    )
        throws -> SignedDataVerifier
    {
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try Fixtures.data("certs/testCA.der")], bundleID: bundleID)
        configuration.allowedEnvironments = environments
        configuration.appAppleID = appAppleID
        return try SignedDataVerifier(configuration: configuration)
    }

    @Test("transactionInfo verifies for (Sandbox, com.example)")
    func transactionInfo() throws {
        let transaction = try verifier().verifyTransaction(try Fixtures.text("mock_signed_data/transactionInfo"))
        #expect(transaction.environment == .sandbox)
        #expect(transaction.bundleId == "com.example")
        #expect(transaction.signedDate == 1_672_956_154_000)
    }

    @Test("renewalInfo verifies in Sandbox")
    func renewalInfo() throws {
        let info = try verifier().verifyRenewalInfo(try Fixtures.text("mock_signed_data/renewalInfo"))
        #expect(info.environment == .sandbox)
    }

    @Test("testNotification: valid in Sandbox, wrong environment for Production, wrong app for appAppleId 1235")
    func testNotification() throws {
        let jws = try Fixtures.text("mock_signed_data/testNotification")
        let notification = try verifier(appAppleID: 1234).verifyNotification(jws)
        #expect(notification.notificationType == "TEST")
        #expect(notification.data?.appAppleId == 1234)

        let production = #expect(throws: AppleVerificationError.self) {
            try verifier(environments: [.production]).verifyNotification(jws)
        }
        #expect(production?.code == .environmentNotAllowed)
        let otherApp = #expect(throws: AppleVerificationError.self) {
            try verifier(appAppleID: 1235).verifyNotification(jws)
        }
        #expect(otherApp?.code == .bundleMismatch)
    }

    @Test("wrongBundleId is rejected as another app's")
    func wrongBundleID() throws {
        let error = #expect(throws: AppleVerificationError.self) {
            try verifier().verifyNotification(try Fixtures.text("mock_signed_data/wrongBundleId"))
        }
        #expect(error?.code == .bundleMismatch)
    }

    @Test("a header without x5c is rejected")
    func missingX5C() throws {
        let error = #expect(throws: AppleVerificationError.self) {
            try verifier().verifyNotification(try Fixtures.text("mock_signed_data/missingX5CHeaderClaim"))
        }
        #expect(error?.code == .invalidChainLength)
    }

    @Test("a.b.c and a.b.c.d are rejected", arguments: ["a.b.c", "a.b.c.d", "", "..", "only.two"])
    func malformed(jws: String) throws {
        let error = #expect(throws: AppleVerificationError.self) { try verifier().verifyTransaction(jws) }
        #expect(error?.code == .malformed)
    }

    @Test(
        "Xcode StoreKit-testing transactions (1-certificate chain, fractional dates) are rejected",
        arguments: [
            "xcode/xcode-signed-transaction", "xcode/xcode-signed-renewal-info", "xcode/xcode-signed-app-transaction",
        ])
    func xcodeRejected(path: String) throws {
        let jws = try Fixtures.text(path)
        let error = #expect(throws: AppleVerificationError.self) {
            try verifier(environments: [.production, .sandbox, .xcode]).verifiedPayload(jws, as: JWSTransaction.self)
        }
        #expect(error?.code == .invalidChainLength)
    }

    @Test("Apple's test chain is rejected against the real Apple Root CA - G3")
    func testChainAgainstRealRoot() throws {
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [AppleRootCertificates.appleRootCAG3], bundleID: "com.example")
        configuration.allowedEnvironments = [.sandbox]
        let error = #expect(throws: AppleVerificationError.self) {
            try SignedDataVerifier(configuration: configuration).verifyTransaction(
                try Fixtures.text("mock_signed_data/transactionInfo"))
        }
        #expect(error?.code == .invalidChain)
    }

    @Test("the bundled root is Apple Root CA - G3")
    func bundledRoot() throws {
        #expect(AppleRootCertificates.appleRootCAG3 == (try Fixtures.data("chain/real_apple_root.der")))
    }

    @Test("a payload changed after signing is rejected; the same JWS re-signed verifies")
    func tamperedPayload() throws {
        let jws = try Fixtures.text("mock_signed_data/transactionInfo")
        let parts = jws.split(separator: ".")
        let forged = Base64URL.encode(
            Data(#"{"environment":"Production","bundleId":"com.example","signedDate":1672956154000}"#.utf8))
        let error = #expect(throws: AppleVerificationError.self) {
            try verifier(environments: [.production]).verifyTransaction("\(parts[0]).\(forged).\(parts[2])")
        }
        #expect(error?.code == .invalidSignature)
    }
}

@Suite("x5c chain verification with Apple's test chains")
struct ChainVerifierTests {
    /// Apple's test chain (leaf, intermediate, root), verified once by a verifier keeping `cacheSize` chains: what
    /// the cache's tests start from, with the transaction's payload, the leaf's key and the genuine JWS.
    static func verifiedOnce(cacheSize: Int) throws -> (
        chain: [Data], verifier: SignedDataVerifier, payload: Data, leafKey: ECPrivateKey, genuine: String
    ) {
        let chain = try ["chain/leaf_cert.der", "chain/intermediate_ca.der", "chain/root_ca.der"].map(Fixtures.data)
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try Fixtures.data("certs/testCA.der")], bundleID: "com.example")
        configuration.chainCacheSize = cacheSize
        let verifier = try SignedDataVerifier(configuration: configuration)
        let payload = Data(TestChain.transaction().utf8)
        let leafKey = try ECPrivateKey(pem: Fixtures.text("chain/testLeaf.key"))
        let genuine = try JWSSigner(key: leafKey, x5c: chain).sign(payload: payload)
        _ = try verifier.verifyTransaction(genuine)
        return (chain, verifier, payload, leafKey, genuine)
    }

    let date = 1_681_998_624.0  // 2023-04-20, inside the test chain's validity

    func chains(root: String = "chain/root_ca.der") throws -> ChainVerifier {
        ChainVerifier(roots: [try X509Certificate(bytes: try Fixtures.data(root))], cacheLimit: 8)
    }

    func verify(_ paths: [String], at date: Double? = nil, with chains: ChainVerifier? = nil) throws {
        let certificates = try paths.map(Fixtures.x5c)
        _ = try (chains ?? self.chains()).chain(
            header: Substring(UUID().uuidString), certificates: { certificates }, at: date ?? self.date)
    }

    @Test("the valid test chain verifies")
    func validChain() throws {
        try verify(["chain/leaf_cert.der", "chain/intermediate_ca.der", "chain/root_ca.der"])
    }

    @Test(
        "wrong OIDs are rejected",
        arguments: [
            ["chain/leaf_cert_invalid_oid.der", "chain/intermediate_ca.der", "chain/root_ca.der"],
            [
                "chain/leaf_cert_for_intermediate_ca_invalid_oid.der", "chain/intermediate_ca_invalid_oid.der",
                "chain/root_ca.der",
            ],
        ])
    func invalidOIDs(paths: [String]) throws {
        let error = #expect(throws: AppleVerificationError.self) { try verify(paths) }
        #expect(error?.code == .invalidCertificate)
    }

    @Test("a two-certificate chain is rejected")
    func twoCertificates() throws {
        let error = #expect(throws: AppleVerificationError.self) {
            try verify(["chain/leaf_cert.der", "chain/intermediate_ca.der"])
        }
        #expect(error?.code == .invalidChainLength)
    }

    @Test("garbage base64 or DER is an invalid certificate", arguments: ["not base64!", "AAAA"])
    func garbage(certificate: String) throws {
        let valid = try Fixtures.x5c("chain/intermediate_ca.der")
        let error = #expect(throws: AppleVerificationError.self) {
            _ = try chains().chain(header: "g", certificates: { [certificate, valid, valid] }, at: date)
        }
        #expect(error?.code == .invalidCertificate)
    }

    @Test("the test chain is rejected against the real G3 root")
    func realRoot() throws {
        let error = #expect(throws: AppleVerificationError.self) {
            try verify(
                ["chain/leaf_cert.der", "chain/intermediate_ca.der", "chain/root_ca.der"],
                with: try chains(root: "chain/real_apple_root.der"))
        }
        #expect(error?.code == .invalidChain)
    }

    @Test("the chain is expired at a 2042 date, also when it was cached as valid before")
    func expired() throws {
        let chains = try chains()
        let certificates = try ["chain/leaf_cert.der", "chain/intermediate_ca.der", "chain/root_ca.der"].map(
            Fixtures.x5c)
        _ = try chains.chain(header: "same", certificates: { certificates }, at: date)
        let in2042 = 2_272_147_200.0
        let cached = #expect(throws: AppleVerificationError.self) {
            _ = try chains.chain(header: "same", certificates: { certificates }, at: in2042)
        }
        #expect(cached?.code == .invalidChain)
        let fresh = #expect(throws: AppleVerificationError.self) {
            _ = try self.chains().chain(header: "new", certificates: { certificates }, at: in2042)
        }
        #expect(fresh?.code == .invalidChain)
    }

    @Test(
        "forgeries carrying Apple's chain in headers of their own are refused by the signature, validate no path, and never evict the genuine chain"
    )
    func forgedHeadersAroundTheRealChain() throws {
        let (chain, verifier, payload, leafKey, genuine) = try Self.verifiedOnce(cacheSize: 4)
        #expect(verifier.chainValidations == 1)
        // Anyone's key, Apple's public chain, a header varied each time (what a sender controls).
        let forger = try ECPrivateKey(pem: Fixtures.text("chain/testIntermediate.key"))
        for attempt in 0..<200 {
            let forged = try JWSSigner(key: forger, headerFields: ["kid": "forged-\(attempt)"], x5c: chain)
                .sign(payload: payload)
            let error = #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(forged) }
            #expect(error?.code == .invalidSignature)
        }
        #expect(verifier.chainValidations == 1, "the chain was validated once, whatever the headers around it")
        // Apple's own headers, new to the verifier, still meet the validated chain.
        let genuineAgain = try JWSSigner(key: leafKey, headerFields: ["kid": "apple"], x5c: chain)
            .sign(payload: payload)
        _ = try verifier.verifyTransaction(genuineAgain)
        _ = try verifier.verifyTransaction(genuine)
        #expect(verifier.chainValidations == 1)
    }

    @Test(
        "Apple's chain re-encoded by a sender (bytes after a certificate, another third certificate) validates no path and evicts nothing"
    )
    func chainVariantsAroundTheRealChain() throws {
        let (chain, verifier, payload, _, genuine) = try Self.verifiedOnce(cacheSize: 2)
        #expect(verifier.chainValidations == 1)
        let forger = try ECPrivateKey(pem: Fixtures.text("chain/testIntermediate.key"))
        // A third certificate of anything: the path ends at a configured root, so it is the same chain, cached.
        for attempt in 0..<50 {
            let third = [chain[0], chain[1], Data("not a certificate \(attempt)".utf8)]
            let forged = try JWSSigner(key: forger, x5c: third).sign(payload: payload)
            let error = #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(forged) }
            #expect(error?.code == .invalidSignature)
        }
        #expect(verifier.chainValidations == 1, "a path validated again for another third certificate")
        // The leaf with a nonce after its DER (OpenSSL's parser stops at the certificate's end): refused as it is
        // parsed, before any path, and never cached in the genuine chain's place.
        for attempt in 0..<50 {
            let trailing = [chain[0] + Data("nonce-\(attempt)".utf8), chain[1], chain[2]]
            let forged = try JWSSigner(key: forger, x5c: trailing).sign(payload: payload)
            let error = #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(forged) }
            #expect(error?.code == .invalidCertificate)
        }
        let misses = verifier.chainValidations
        _ = try verifier.verifyTransaction(genuine)
        #expect(verifier.chainValidations == misses, "the genuine chain was evicted")
    }

    @Test("chains that do not validate are never kept: each costs its own validation, and the genuine one stays")
    func invalidChainsAreNotCached() throws {
        let (_, verifier, payload, leafKey, genuine) = try Self.verifiedOnce(cacheSize: 2)
        // A chain whose leaf lacks Apple's OID, signed by its own key: refused every time, never cached.
        let wrongOID = try ["chain/leaf_cert_invalid_oid.der", "chain/intermediate_ca.der", "chain/root_ca.der"]
            .map(Fixtures.data)
        let other = try JWSSigner(key: leafKey, x5c: wrongOID).sign(payload: payload)
        for _ in 0..<5 {
            #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(other) }
        }
        #expect(verifier.chainValidations == 6)
        _ = try verifier.verifyTransaction(genuine)
        #expect(verifier.chainValidations == 6, "the genuine chain is still cached")
    }

    @Test("a header with x5c twice, an x5c of four, or a non-string certificate is refused before any validation")
    func hostileHeaders() throws {
        let verifier = try TestChain.verifier()
        let payload = Base64URL.encode(Data(TestChain.transaction().utf8))
        for header in [
            #"{"alg":"ES256","x5c":["a","b","c"],"x5c":["a","b","c"]}"#, #"{"alg":"ES256","x5c":["a","b","c","d"]}"#,
            #"{"alg":"ES256","x5c":["a",1,"c"]}"#, #"{"alg":"none","x5c":["a","b","c"]}"#, #"{"alg":"ES256"}"#,
            #"{"alg":"ES256","x5c":"abc"}"#,
        ] {
            let jws = Base64URL.encode(Data(header.utf8)) + "." + payload + ".AAAA"
            #expect(throws: AppleVerificationError.self) { try verifier.verifyTransaction(jws) }
        }
        #expect(verifier.chainValidations == 0)
    }
}
