import AppleVerification
import Foundation

// Signed-transaction verifications per second on the calling thread (pin it to one core with taskset).
//   jws-bench make --key testLeaf.key --chain testLeaf.pem,testIntermediate.pem,testCA.pem --out FILE
//   jws-bench verify --jws FILE --root testCA.der [--seconds 3] [--no-cache]
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
default:
    fail("usage: jws-bench make|verify ...")
}
