import AppStoreSimulator
import AppleVerification
import Foundation
import HTTPClient
import Observability
import TestSupport
import Vocabulary

/// A simulator on a loopback socket and the clients pointed at it, for one test.
final class SimulatorHarness: Sendable {
    let simulator: AppStoreSimulator
    let http: HTTPClient
    static let logger = Logger(label: "apple-test", minimumLevel: .warning)
    /// Apple's test API key (testSigningKey.p8), which the simulator trusts by default.
    static let apiKeyPEM: String = {
        let url = Bundle.module.resourceURL!.appendingPathComponent("testSigningKey.p8")
        return (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    }()

    init(sharedSecret: String? = nil) throws {
        var configuration = AppStoreSimulator.Configuration()
        configuration.sharedSecret = sharedSecret
        simulator = try AppStoreSimulator(configuration: configuration)
        simulator.start()
        http = HTTPClient(logger: Self.logger)
    }

    deinit {
        http.shutdown()
        simulator.stop()
    }

    var base: String { simulator.baseURL }

    func receiptClient(
        allowSandbox: Bool = false, secret: String? = nil, timeout: Duration = .seconds(5),
        signatures: ReceiptSignatureVerifier? = nil, breakers: CircuitBreakers? = nil
    ) -> VerifyReceiptClient {
        var configuration = VerifyReceiptClient.Configuration()
        configuration.receiptSignatures = signatures
        configuration.breakers = breakers
        configuration.productionURL = "\(base)/production/verifyReceipt"
        configuration.sandboxURL = "\(base)/sandbox/verifyReceipt"
        configuration.allowSandbox = allowSandbox
        configuration.sharedSecret = secret
        configuration.timeout = timeout
        return VerifyReceiptClient(configuration: configuration, http: http)
    }

    func apiClient(allowSandbox: Bool = false, keyPEM: String = SimulatorHarness.apiKeyPEM) throws
        -> AppStoreServerAPIClient
    {
        var configuration = AppStoreServerAPIClient.Configuration()
        configuration.productionURL = "\(base)/production"
        configuration.sandboxURL = "\(base)/sandbox"
        configuration.allowSandbox = allowSandbox
        let tokens = try APITokenIssuer(
            privateKeyPEM: keyPEM, keyID: "keyId", issuerID: "issuerId", bundleID: "com.example")
        return AppStoreServerAPIClient(configuration: configuration, tokens: tokens, http: http)
    }

    func signedDataVerifier(allowSandbox: Bool = false) throws -> SignedDataVerifier {
        var configuration = SignedDataVerifier.Configuration(
            rootCertificates: [Data(AppStoreSimulator.testRootPEM.utf8)], bundleID: "com.example")
        configuration.allowedEnvironments = allowSandbox ? [.production, .sandbox] : [.production]
        return try SignedDataVerifier(configuration: configuration)
    }

    typealias Purchase = SimulatorAdmin.Purchase

    var admin: SimulatorAdmin { SimulatorAdmin(baseURL: base, http: http) }

    func purchase(_ fields: [String: Any]) async throws -> Purchase { try await admin.purchase(fields) }

    func faults(_ fields: [String: Any]) async throws { try await admin.faults(fields) }
}
