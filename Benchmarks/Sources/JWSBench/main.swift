import AppleVerification
import Crypto
import Foundation

// Signed-transaction verifications per second on the calling thread (pin it to one core with taskset).
//   jws-bench make --key testLeaf.key --chain testLeaf.pem,testIntermediate.pem,testCA.pem --out FILE
//   jws-bench verify --jws FILE --root testCA.der [--seconds 3] [--no-cache] [--revocation]
//   jws-bench forged --jws FILE --root testCA.der --forger-key KEY [--seconds 3]
//     forgeries: the genuine JWS's chain and payload in a header of their own (a `kid` varied each time),
//     signed with anyone's key: what an unauthenticated sender posts to the notification receiver.
// scripts/bench-jws.sh runs it beside Apple's Python library on the same JWS.

func option(_ name: String, in arguments: [String]) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("jws-bench: \(message)\n".utf8))
    exit(2)
}

/// A transaction with every field Apple's sample carries, so decoding costs what a real one does.
func sampleTransaction() -> JWSTransaction {
    var transaction = JWSTransaction()
    transaction.transactionId = "2000000123456789"
    transaction.originalTransactionId = "2000000123456789"
    transaction.webOrderLineItemId = "34343"
    transaction.bundleId = "com.example"
    transaction.productId = "com.example.coins.1000"
    transaction.purchaseDate = 1_698_148_900_000
    transaction.originalPurchaseDate = 1_698_148_900_000
    transaction.quantity = 1
    transaction.type = "Consumable"
    transaction.appAccountToken = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
    transaction.inAppOwnershipType = "PURCHASED"
    transaction.signedDate = 1_698_148_900_000
    transaction.environment = .sandbox
    transaction.storefront = "USA"
    transaction.storefrontId = "143441"
    transaction.transactionReason = "PURCHASE"
    transaction.currency = "USD"
    transaction.price = 10990
    transaction.appTransactionId = "71134"
    return transaction
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "make":
    guard let keyPath = option("--key", in: arguments), let chain = option("--chain", in: arguments),
        let out = option("--out", in: arguments)
    else { fail("make needs --key, --chain and --out") }
    do {
        let key = try ECPrivateKey(pem: String(contentsOfFile: keyPath, encoding: .utf8))
        let x5c = try chain.split(separator: ",").flatMap {
            try certificatesDER(Data(contentsOf: URL(fileURLWithPath: String($0))))
        }
        let jws = try JWSSigner(key: key, x5c: x5c).sign(sampleTransaction())
        try jws.write(toFile: out, atomically: true, encoding: .utf8)
    } catch {
        fail("\(error)")
    }
case "verify":
    guard let jwsPath = option("--jws", in: arguments), let rootPath = option("--root", in: arguments) else {
        fail("verify needs --jws and --root")
    }
    let seconds = Double(option("--seconds", in: arguments) ?? "3") ?? 3
    do {
        let jws = try String(contentsOfFile: jwsPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try Data(contentsOf: URL(fileURLWithPath: rootPath))], bundleID: "com.example")
        configuration.allowedEnvironments = [.sandbox]
        if arguments.contains("--no-cache") { configuration.chainCacheSize = 0 }
        if arguments.contains("--revocation") {
            // The cached answer's look-up on every verification (the test chain names no responder: never asked).
            configuration.revocation = try RevocationChecker(rootCertificates: configuration.rootCertificates) {
                _, _, _ in fail("the test chain names no OCSP responder")
            }
        }
        let verifier = try SignedDataVerifier(configuration: configuration)
        let expected = try verifier.verifyTransaction(jws)  // warm-up, and the answer every round must give
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .seconds(seconds)
        var count = 0
        while clock.now < deadline {
            for _ in 0..<100 {
                guard try verifier.verifyTransaction(jws) == expected else { fail("a verification disagreed") }
            }
            count += 100
        }
        let elapsed = clock.now - start
        let rate = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        print("\(Int(rate)) verifications/s")
    } catch {
        fail("\(error)")
    }
case "forged":
    guard let jwsPath = option("--jws", in: arguments), let rootPath = option("--root", in: arguments),
        let forgerPath = option("--forger-key", in: arguments)
    else { fail("forged needs --jws, --root and --forger-key") }
    let seconds = Double(option("--seconds", in: arguments) ?? "3") ?? 3
    do {
        let jws = try String(contentsOfFile: jwsPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let parts = jws.split(separator: ".")
        guard parts.count == 3, let header = Base64URL.decodeBytes(parts[0]),
            let x5c = (try JSONSerialization.jsonObject(with: Data(header)) as? [String: Any])?["x5c"] as? [String]
        else { fail("not a JWS with x5c") }
        let chain = x5c.compactMap { Data(base64Encoded: $0) }
        let forger = try ECPrivateKey(pem: String(contentsOfFile: forgerPath, encoding: .utf8))
        let payload = Base64URL.decodeBytes(parts[1]).map { Data($0) } ?? Data()
        // Made before timing: a sender's signing is not the receiver's cost.
        let forgeries = try (0..<5_000).map {
            try JWSSigner(key: forger, headerFields: ["kid": "forged-\($0)"], x5c: chain).sign(payload: payload)
        }
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [try Data(contentsOf: URL(fileURLWithPath: rootPath))], bundleID: "com.example")
        configuration.allowedEnvironments = [.sandbox]
        let verifier = try SignedDataVerifier(configuration: configuration)
        _ = try verifier.verifyTransaction(jws)  // the genuine chain, validated once, as in a running worker
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .seconds(seconds)
        var count = 0
        while clock.now < deadline {
            for forged in forgeries[(count % forgeries.count)..<(count % forgeries.count + 100)] {
                guard (try? verifier.verifyTransaction(forged)) == nil else { fail("a forgery verified") }
            }
            count += 100
        }
        let elapsed = clock.now - start
        let rate = Double(count) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        print("\(Int(rate)) forgeries refused/s, \(verifier.chainValidations) chain validation(s)")
    } catch {
        fail("\(error)")
    }
default:
    fail("usage: jws-bench make|verify|forged ...")
}
