import AppStoreSimulator
import AppleVerification
import Crypto
import Foundation
import Testing
import Vocabulary
import TestSupport

@Suite("Apple verdicts on every kind of proof, against the simulator", .timeLimit(.minutes(1)))
struct AppleVerifierTests {
    func verifier(_ harness: SimulatorHarness, allowSandbox: Bool = false, bundleID: String = "com.example") throws
        -> AppleVerifier
    {
        var signed = SignedDataVerifier.Configuration(
            rootCertificates: [Data(AppStoreSimulator.testRootPEM.utf8)], bundleID: bundleID)
        signed.allowedEnvironments = allowSandbox ? [.production, .sandbox] : [.production]
        return AppleVerifier(
            bundleID: bundleID, receipts: harness.receiptClient(allowSandbox: allowSandbox),
            api: try harness.apiClient(allowSandbox: allowSandbox),
            signedData: try SignedDataVerifier(configuration: signed))
    }

    @Test("a receipt, a signed transaction and a transaction id of one purchase verify to the same transaction")
    func threeProofs() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "gems.500", "quantity": 2])
        let verifier = try verifier(harness)
        for proof in [
            PurchaseProof.receipt(purchase.receipt), .signedTransaction(purchase.signedTransaction),
            .transactionID(purchase.transactionID),
        ] {
            var attempts = 0
            let verdict = try await verifier.verify(proof, attempts: &attempts)
            guard case .verified(let verified) = verdict else { Issue.record("\(proof): \(verdict)"); continue }
            let transaction = try #require(verified.select(transactionID: nil, productID: "gems.500"))
            #expect(transaction.transactionID == purchase.transactionID)
            #expect(transaction.quantity == 2)
            #expect(verified.environment == .production)
        }
    }

    @Test("sandbox proofs are refused as sandbox_not_allowed whatever their form")
    func sandboxRefused() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "gems.500", "environment": "Sandbox"])
        let verifier = try verifier(harness)
        for proof in [PurchaseProof.receipt(purchase.receipt), .signedTransaction(purchase.signedTransaction)] {
            var attempts = 0
            guard case .rejected(.sandboxNotAllowed, _) = try await verifier.verify(proof, attempts: &attempts) else {
                Issue.record("\(proof) was not refused as sandbox")
                continue
            }
        }
        var attempts = 0
        guard
            case .rejected(.transactionNotFound, _) = try await verifier.verify(
                .transactionID(purchase.transactionID), attempts: &attempts)
        else { Issue.record("a sandbox transaction id was found in production"); return }
    }

    @Test(
        "server_api: a Sandbox app receipt is denied at once where Sandbox is not allowed (no call to Apple); where it is, only the Sandbox is asked"
    )
    func sandboxReceiptsWithServerAPI() async throws {
        let harness = try SimulatorHarness()
        let sandbox = try await harness.purchase(["product_id": "gems.500", "environment": "Sandbox"])
        let production = try await harness.purchase(["product_id": "gems.500"])
        let roots = try ReceiptSignatureVerifier(rootCertificates: [Data(AppStoreSimulator.testRootPEM.utf8)])
        func verifier(allowSandbox: Bool) throws -> AppleVerifier {
            let plain = try self.verifier(harness, allowSandbox: allowSandbox)
            return AppleVerifier(
                bundleID: plain.bundleID, receipts: harness.receiptClient(allowSandbox: allowSandbox),
                api: try harness.apiClient(allowSandbox: allowSandbox), signedData: plain.signedData,
                receiptVerification: .serverAPI(roots))
        }
        let before = try await harness.admin.appleRequests()
        var attempts = 0
        let refused = try await verifier(allowSandbox: false).verify(
            .receipt(sandbox.receipt), selecting: ReceiptSelection(transactionID: nil, productID: "gems.500"),
            attempts: &attempts)
        guard case .rejected(.sandboxNotAllowed, _) = refused else { Issue.record("\(refused)"); return }
        #expect(attempts == 0)
        #expect(try await harness.admin.appleRequests() == before)

        for (purchase, environment) in [(sandbox, AppleEnvironment.sandbox), (production, .production)] {
            attempts = 0
            let verdict = try await verifier(allowSandbox: true).verify(
                .receipt(purchase.receipt), selecting: ReceiptSelection(transactionID: nil, productID: "gems.500"),
                attempts: &attempts)
            guard case .verified(let verified) = verdict else { Issue.record("\(verdict)"); continue }
            #expect(verified.environment == environment)
            #expect(attempts == 1, "one call, to the receipt's own environment")
        }
    }

    @Test("another app's proof is bundle_mismatch; a forged one is invalid_receipt")
    func bundleAndForgery() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "gems.500", "bundle_id": "com.other.game"])
        let verifier = try verifier(harness)
        var attempts = 0
        guard
            case .rejected(.bundleMismatch, _) = try await verifier.verify(
                .receipt(purchase.receipt), attempts: &attempts)
        else {
            Issue.record("receipt of another bundle accepted"); return
        }
        guard
            case .rejected(.bundleMismatch, _) = try await verifier.verify(
                .signedTransaction(purchase.signedTransaction), attempts: &attempts)
        else { Issue.record("signed transaction of another bundle accepted"); return }
        let parts = purchase.signedTransaction.split(separator: ".")
        let forged = "\(parts[0]).\(parts[1]).\(parts[2].dropLast(4))AAAA"
        guard
            case .rejected(.invalidReceipt, _) = try await verifier.verify(
                .signedTransaction(forged), attempts: &attempts)
        else {
            Issue.record("forged signature accepted"); return
        }
    }

    @Test(
        "a signed transaction that names no environment is looked up by its id, never denied as Sandbox; without an API key it is a dead letter"
    )
    func signedWithoutEnvironment() async throws {
        let harness = try SimulatorHarness()
        let production = try await harness.purchase(["product_id": "gems.500"])
        let sandbox = try await harness.purchase(["product_id": "gems.500", "environment": "Sandbox"])
        for (purchase, environment) in [(production, AppleEnvironment.production), (sandbox, .sandbox)] {
            let unplaced = try Self.withoutEnvironment(purchase.signedTransaction)
            var attempts = 0
            let verdict = try await verifier(harness, allowSandbox: true).verify(
                .signedTransaction(unplaced), attempts: &attempts)
            guard case .verified(let verified) = verdict else { Issue.record("\(verdict)"); continue }
            #expect(verified.environment == environment, "the environment of Apple's answer")
            #expect(verified.source == .serverAPI)
            #expect(verified.transactions.map(\.transactionID) == [purchase.transactionID])
            #expect(attempts >= 1)
        }

        // Where Sandbox is not allowed, Apple's Production knows no Sandbox purchase: not found, never a guess.
        var attempts = 0
        let refused = try await verifier(harness).verify(
            .signedTransaction(try Self.withoutEnvironment(sandbox.signedTransaction)), attempts: &attempts)
        guard case .rejected(.transactionNotFound, _) = refused else { Issue.record("\(refused)"); return }

        // Without a key nothing can place it: not a deny of the player's purchase.
        let withKey = try verifier(harness)
        let withoutKey = AppleVerifier(
            bundleID: withKey.bundleID, receipts: harness.receiptClient(allowSandbox: false), api: nil,
            signedData: withKey.signedData)
        let error = await #expect(throws: AppleVerificationError.self) {
            var attempts = 0
            _ = try await withoutKey.verify(
                .signedTransaction(try Self.withoutEnvironment(production.signedTransaction)), attempts: &attempts)
        }
        #expect(error?.isRetriable == false)
        #expect(error?.reason.contains("names no environment") == true)
        #expect(error?.reason.contains("apple.api.") == true)
    }

    /// `jws`'s payload without its `environment`, signed again with the simulator's chain: a transaction signed
    /// before Apple added the field.
    static func withoutEnvironment(_ jws: String) throws -> String {
        let parts = jws.split(separator: ".")
        let payload = try #require(Base64URL.decode(parts[1]))
        var fields = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        #expect(fields.removeValue(forKey: "environment") != nil)
        return try AppStoreSimulator.testSigned(try JSONSerialization.data(withJSONObject: fields))
    }
}
