@testable import AppleVerification
import Crypto
import Foundation
import Vocabulary

/// Signs payloads the way Apple's servers do, with Apple's test chain and its private key (fixtures/apple/chain:
/// testLeaf.key signs, x5c is [leaf, intermediate, root], each carrying Apple's OIDs where Apple's do). A JWS made
/// here passes the signature and the chain against Apple's test root, so whatever numbers its payload holds
/// reach every conversion after verification. Against the real G3 root the same chain is three certificates
/// anyone could make: what an attacker without Apple's keys can send.
enum TestChain {
    /// 2023-10-19, inside the test chain's validity (2023-01-05 ... 2033-01-01), in milliseconds.
    static let signedDate = 1_697_679_936_000.0

    /// Payload text is signed as given, so it can hold what JSONEncoder would never write (`1e30`, a key twice).
    static func sign(_ payload: String) throws -> String {
        let chain = try ["chain/leaf_cert.der", "chain/intermediate_ca.der", "chain/root_ca.der"].map(Fixtures.data)
        let key = try ECPrivateKey(pem: Fixtures.text("chain/testLeaf.key"))
        return try JWSSigner(key: key, x5c: chain).sign(payload: Data(payload.utf8))
    }

    /// A verifier for bundle `com.example`, trusting Apple's test root, or the real G3 root with `realRoot`.
    static func verifier(environments: Set<AppleEnvironment> = [.production, .sandbox], realRoot: Bool = false)
        throws -> SignedDataVerifier
    {
        let root = realRoot ? AppleRootCertificates.appleRootCAG3 : try Fixtures.data("certs/testCA.der")
        var configuration = SignedDataVerifier.Configuration(rootCertificates: [root], bundleID: "com.example")
        configuration.allowedEnvironments = environments
        configuration.chainCacheSize = 0  // every case walks the chain, as a first sight of a header does
        return try SignedDataVerifier(configuration: configuration)
    }

    /// The fields of a plain signed transaction for `com.example` in Production: JSON values, as text.
    static let transactionFields: [String: String] = [
        "bundleId": #""com.example""#, "environment": #""Production""#, "transactionId": #""2000000000000001""#,
        "originalTransactionId": #""2000000000000001""#, "productId": #""coins.100""#, "quantity": "1",
        "type": #""Consumable""#, "purchaseDate": "1697679930000", "signedDate": "1697679936000",
    ]

    /// A signed transaction payload: ``transactionFields`` with `changes` (a nil value removes the field).
    static func transaction(_ changes: [String: String?] = [:]) -> String {
        var fields = transactionFields
        for (name, value) in changes { fields[name] = value }
        return "{" + fields.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }
}

extension AppleVerdict {
    /// The deny reason of a rejection, or "verified".
    var reason: String {
        switch self {
        case .verified: "verified"
        case .rejected(let rejection, _): rejection.rawValue
        }
    }

    var purchase: VerifiedPurchase? {
        if case .verified(let purchase) = self { return purchase }
        return nil
    }
}
