import AppStoreSimulator
import AppleVerification
import Foundation
import Testing
import TestSupport

@Suite("App Store Server API against the simulator over HTTP", .timeLimit(.minutes(1)))
struct ServerAPIClientTests {
    @Test("Get Transaction Info returns a signed transaction that verifies against the simulator's root")
    func found() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase([
            "product_id": "level.pack", "type": "non_consumable",
            "app_account_token": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
        ])
        var attempts = 0
        let outcome = try await harness.apiClient().transactionInfo(id: purchase.transactionID, attempts: &attempts)
        guard case .found(let jws) = outcome else { Issue.record("not found: \(outcome)"); return }
        let transaction = try harness.signedDataVerifier().verifyTransaction(jws)
        #expect(transaction.transactionId == purchase.transactionID)
        #expect(transaction.productType == .nonConsumable)
        #expect(transaction.appAccountToken == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        #expect(attempts == 1)
    }

    @Test(
        "Apple's retryable errors (4040002, 4040004, 4040006 as 404, 5000001 as 500) are transient, not not-found",
        arguments: [4_040_002, 4_040_004, 4_040_006, 5_000_001])
    func retryableErrors(code: Int) async throws {
        let (harness, transactionID, error) = try await Self.transactionInfoFailing(with: code)
        #expect(error?.isRetriable == true, "\(code): \(String(describing: error))")
        try await harness.faults([:])
        var attempts = 0
        guard case .found = try await harness.apiClient().transactionInfo(id: transactionID, attempts: &attempts)
        else { Issue.record("not found once Apple recovered"); return }
    }

    /// A purchase, then Apple answering each of its transactionInfo calls with the API error `code`: what the
    /// client threw (an issue recorded when it threw nothing).
    static func transactionInfoFailing(with code: Int) async throws -> (
        harness: SimulatorHarness, transactionID: String, error: AppleVerificationError?
    ) {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins"])
        try await harness.faults(["api_error_rate": 1.0, "api_error_code": code])
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.apiClient().transactionInfo(id: purchase.transactionID, attempts: &attempts)
        }
        return (harness, purchase.transactionID, error)
    }

    @Test(
        "an app or account Apple does not know for this key (4040003, 4040001 as 404) is this deployment's configuration: neither retried nor a transaction not found",
        arguments: [4_040_001, 4_040_003])
    func configurationErrors(code: Int) async throws {
        let (_, _, error) = try await Self.transactionInfoFailing(with: code)
        // Not retriable and not Apple's word on the purchase: the job's dead letter says cannot_verify.
        #expect(error?.code == .unauthorized, "\(code): \(String(describing: error))")
        #expect(error?.isRetriable == false)
        #expect(error?.reason.contains("\(code)") == true)
    }

    @Test("an app with no released version: Production answers 401, Sandbox works")
    func unreleasedApp() async throws {
        let harness = try SimulatorHarness()
        try await harness.admin.addApp(["bundle_id": "com.example.new", "app_apple_id": 42, "released": false])
        let purchase = try await harness.purchase([
            "product_id": "coins", "bundle_id": "com.example.new", "environment": "Sandbox",
        ])
        var configuration = AppStoreServerAPIClient.Configuration()
        configuration.productionURL = "\(harness.base)/production"
        configuration.sandboxURL = "\(harness.base)/sandbox"
        let tokens = try APITokenIssuer(
            privateKeyPEM: SimulatorHarness.apiKeyPEM, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example.new"
        )
        let client = AppStoreServerAPIClient(configuration: configuration, tokens: tokens, http: harness.http)
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await client.transactionInfo(id: purchase.transactionID, attempts: &attempts)
        }
        #expect(error?.code == .unauthorized)
        var sandbox = configuration
        sandbox.productionURL = "\(harness.base)/sandbox"  // Sandbox alone answers for an unreleased app
        let sandboxClient = AppStoreServerAPIClient(configuration: sandbox, tokens: tokens, http: harness.http)
        guard case .found = try await sandboxClient.transactionInfo(id: purchase.transactionID, attempts: &attempts)
        else { Issue.record("Sandbox did not answer for the unreleased app"); return }
    }

    @Test("4040010 in production: not found without sandbox; found in the sandbox when allowed")
    func sandboxFallback() async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins", "environment": "Sandbox"])
        var attempts = 0
        let production = try await harness.apiClient(allowSandbox: false).transactionInfo(
            id: purchase.transactionID, attempts: &attempts)
        guard case .notFound = production else { Issue.record("expected notFound, got \(production)"); return }
        #expect(attempts == 1)
        attempts = 0
        let sandbox = try await harness.apiClient(allowSandbox: true).transactionInfo(
            id: purchase.transactionID, attempts: &attempts)
        guard case .found = sandbox else { Issue.record("expected found, got \(sandbox)"); return }
        #expect(attempts == 2)
    }

    @Test(
        "a token signed with another key gets the non-JSON 401: one renewed token, then not retriable (cannot_verify), without the token"
    )
    func unauthorized() async throws {
        let harness = try SimulatorHarness()
        // A throwaway key the simulator does not trust.
        let otherKey = """
            -----BEGIN PRIVATE KEY-----
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg6lkDKqhcH+JLvOMO
            ImOBWFYwXzNeWbJwM8y80CPFpCOhRANCAATDKYBHlTcdNYud8KwkESiT6wf5VxWs
            hh/txCY+xdlu3x1mfNYr6AWydtZCh+zUALEPSd9ngXl4GSfX/pabs67b
            -----END PRIVATE KEY-----
            """
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.apiClient(keyPEM: otherKey).transactionInfo(
                id: "2000000000000001", attempts: &attempts)
        }
        #expect(error?.code == .unauthorized)
        #expect(error?.isRetriable == false)
        #expect(attempts == 2)  // the first token, then a freshly signed one
        #expect(error.map { "\($0)" }?.contains("eyJ") == false)
    }

    @Test(
        "429 and Apple's retryable 5000001 are retriable",
        arguments: [
            ["rate_limit_rate": 1.0], ["status_21005_rate": 1.0],
        ] as [[String: Double]])
    func retriable(faults: [String: Double]) async throws {
        let harness = try SimulatorHarness()
        let purchase = try await harness.purchase(["product_id": "coins"])
        try await harness.faults(faults)
        var attempts = 0
        let error = await #expect(throws: AppleVerificationError.self) {
            _ = try await harness.apiClient().transactionInfo(id: purchase.transactionID, attempts: &attempts)
        }
        #expect(error?.isRetriable == true)
    }

    @Test("an id that is not a number is rejected without a call")
    func invalidID() async throws {
        let harness = try SimulatorHarness()
        var attempts = 0
        let outcome = try await harness.apiClient().transactionInfo(id: "../admin", attempts: &attempts)
        guard case .rejected(4000006) = outcome else { Issue.record("expected 4000006, got \(outcome)"); return }
        #expect(attempts == 0)
    }
}

@Suite("The API token, checked by OpenSSL's command line")
struct APITokenTests {
    @Test("claims as Apple documents them, and an ES256 signature that openssl verifies with the public key")
    func independentVerification() throws {
        let issuer = try APITokenIssuer(
            privateKeyPEM: SimulatorHarness.apiKeyPEM, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example")
        let now = Date()
        let token = try issuer.token(now: now)
        let parts = token.split(separator: ".").map(String.init)
        try #require(parts.count == 3)
        let header = try JSONSerialization.jsonObject(with: base64URL(parts[0])) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: base64URL(parts[1])) as? [String: Any]
        #expect(header?["alg"] as? String == "ES256")
        #expect(header?["kid"] as? String == "keyId")
        #expect(header?["typ"] as? String == "JWT")
        #expect(claims?["iss"] as? String == "issuerId")
        #expect(claims?["aud"] as? String == "appstoreconnect-v1")
        #expect(claims?["bid"] as? String == "com.example")
        let iat = try #require(claims?["iat"] as? Int)
        let exp = try #require(claims?["exp"] as? Int)
        #expect(abs(iat - Int(now.timeIntervalSince1970)) <= 1)
        #expect(exp - iat <= 3600 && exp > iat)

        // OpenSSL wants the signature as DER; the raw r||s is wrapped here by hand, not by our code.
        let raw = [UInt8](try base64URL(parts[2]))
        try #require(raw.count == 64)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data("\(parts[0]).\(parts[1])".utf8).write(to: directory.appendingPathComponent("input"))
        try Data(derSignature(r: Array(raw[0..<32]), s: Array(raw[32..<64]))).write(
            to: directory.appendingPathComponent("sig"))
        try Data(SimulatorHarness.apiKeyPEM.utf8).write(to: directory.appendingPathComponent("key.p8"))
        let publicKey = try run(
            "/usr/bin/openssl", ["pkey", "-in", directory.appendingPathComponent("key.p8").path, "-pubout"])
        try Data(publicKey.output.utf8).write(to: directory.appendingPathComponent("pub.pem"))
        let verified = try run(
            "/usr/bin/openssl",
            [
                "dgst", "-sha256", "-verify", directory.appendingPathComponent("pub.pem").path,
                "-signature", directory.appendingPathComponent("sig").path,
                directory.appendingPathComponent("input").path,
            ])
        #expect(verified.status == 0)
        #expect(verified.output.contains("Verified OK"))
    }

    @Test("the token is reused while it has more than 5 minutes left, then renewed")
    func reuse() throws {
        let issuer = try APITokenIssuer(
            privateKeyPEM: SimulatorHarness.apiKeyPEM, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example",
            lifetime: .seconds(1200))
        let start = Date()
        let clock = ContinuousClock.now
        let first = try issuer.token(now: start, elapsed: clock)
        #expect(try issuer.token(now: start.addingTimeInterval(600), elapsed: clock + .seconds(600)) == first)
        #expect(try issuer.token(now: start.addingTimeInterval(1000), elapsed: clock + .seconds(1000)) != first)
        // The wall clock stepped back an hour: the monotonic clock still renews on time.
        let second = try issuer.token(now: start.addingTimeInterval(1000), elapsed: clock + .seconds(1000))
        #expect(try issuer.token(now: start.addingTimeInterval(-2600), elapsed: clock + .seconds(1950)) != second)
        issuer.invalidate()
        #expect(try issuer.token(now: start.addingTimeInterval(1000), elapsed: clock + .seconds(1000)) != second)
    }

    func base64URL(_ text: String) throws -> Data {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return try #require(Data(base64Encoded: base64))
    }

    func derSignature(r: [UInt8], s: [UInt8]) -> [UInt8] {
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            var value = Array(bytes.drop { $0 == 0 })
            if value.isEmpty { value = [0] }
            if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
            return [0x02, UInt8(value.count)] + value
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }

    func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let (status, output) = runAndRead([tool] + arguments)
        return (status, String(data: output, encoding: .utf8) ?? "")
    }
}
