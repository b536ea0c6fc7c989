import Foundation
import Testing

@testable import ReceiptWorker

@Suite("Worker configuration")
struct ConfigurationTests {
    func load(_ lines: [String], overrides: [String] = []) throws -> WorkerConfiguration {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID()).properties").path
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return try ConfigurationLoader.load(file: path, overrides: overrides)
    }

    @Test("a properties file with comments, then --set overrides")
    func loads() throws {
        let configuration = try load(
            ["# comment", "! also a comment", "", "apple.bundle_id = com.example.game", "worker.max_in_flight=50",
             "kafka.bootstrap.servers=broker:9092", "apple.allow_sandbox=true"],
            overrides: ["worker.max_in_flight=75", "kafka.client.id=w1"])
        #expect(configuration.apple.bundleID == "com.example.game")
        #expect(configuration.maxInFlight == 75)
        #expect(configuration.apple.allowSandbox)
        #expect(configuration.kafka["bootstrap.servers"] == "broker:9092")
        #expect(configuration.kafka["client.id"] == "w1")
        #expect(configuration.apple.rootCertificates.count == 1)  // the compiled-in G3 root by default
    }

    @Test("errors name the key", arguments: [
        (["apple.bundle_id=b", "no.such.key=1"], "no.such.key"),
        (["worker.max_in_flight=1"], "apple.bundle_id"),
        (["apple.bundle_id=b", "worker.max_in_flight=zero"], "worker.max_in_flight"),
        (["apple.bundle_id=b", "apple.allow_sandbox=yes"], "apple.allow_sandbox"),
        (["apple.bundle_id=b", "ledger.url=mysql://x"], "ledger.url"),
        (["apple.bundle_id=b", "apple.verify_receipt.production_url=ftp://x"], "apple.verify_receipt.production_url"),
        (["apple.bundle_id=b", "apple.shared_secret_file=/nonexistent/secret"], "apple.shared_secret_file"),
        (["apple.bundle_id=b", "apple.root_certificates=/nonexistent/root.pem"], "apple.root_certificates"),
        (["apple.bundle_id=b", "apple.api.key_id=K"], "apple.api.key_id"),
        (["apple.bundle_id=b", "retry.initial_backoff_ms=5000", "retry.max_backoff_ms=100"], "retry.initial_backoff_ms"),
        (["apple.bundle_id=b", "metrics.listen=nowhere"], "metrics.listen"),
        (["apple.bundle_id=b", "just a line"], "properties:2"),
    ])
    func errorsNameTheKey(lines: [String], key: String) throws {
        let error = #expect(throws: ConfigurationError.self) { try load(lines) }
        #expect(error?.description.contains(key) == true, "\(error.map { "\($0)" } ?? "no error")")
    }

    @Test("a secret's value never appears in an error")
    func secretsNotEchoed() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try load(["apple.shared_secret=s3cr3t-value", "worker.max_in_flight=-1"])
        }
        #expect(error.map { "\($0)" }?.contains("s3cr3t-value") == false)
    }

    @Test("a missing config file stops start-up naming --config")
    func missingFile() {
        let error = #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(file: "/nonexistent/worker.properties", overrides: [])
        }
        #expect(error?.key == "--config")
    }
}
