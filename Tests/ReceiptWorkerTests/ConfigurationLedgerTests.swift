import Foundation
import Testing

@testable import ReceiptWorker

/// `ledger.ssl_root_cert_file`: PostgreSQL's CA, given apart from a URL that pods mounting their files at different
/// paths share, reaches libpq as the URL's `sslrootcert`, wherever the URL came from.
@Suite("The ledger's TLS CA")
struct ConfigurationLedgerTests {
    static let ca: String = {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("postgres-ca-\(UUID()).crt").path
        _ = FileManager.default.createFile(atPath: path, contents: Data("-----BEGIN CERTIFICATE-----\n".utf8))
        return path
    }()

    func load(_ url: String, ca: String = ConfigurationLedgerTests.ca) throws -> WorkerConfiguration {
        try ConfigurationLoader.load(
            file: nil,
            overrides: ["apple.bundle_id=com.example.game", "ledger.url=\(url)", "ledger.ssl_root_cert_file=\(ca)"],
            environment: [:])
    }

    @Test("the CA is added to the URL as sslrootcert, after the URL's own parameters")
    func added() throws {
        let escaped = try #require(Self.ca.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed))
        #expect(try load("postgresql://app@db/ledger").ledgerURL == "postgresql://app@db/ledger?sslrootcert=\(escaped)")
        #expect(
            try load("postgresql://app@db/ledger?sslmode=verify-full").ledgerURL
                == "postgresql://app@db/ledger?sslmode=verify-full&sslrootcert=\(escaped)")
    }

    @Test("a tool never opens the ledger: its configuration loads where neither the URL's file nor the CA is mounted")
    func tools() throws {
        let tool = try ConfigurationLoader.load(
            file: nil,
            overrides: [
                "apple.bundle_id=com.example.game", "ledger.url_file=/nonexistent/ledger-url",
                "ledger.ssl_root_cert_file=/nonexistent/postgres-ca.crt",
            ], environment: [:], purpose: .tool)
        #expect(tool.ledgerSSLRootCert == nil)
    }

    @Test("refused, naming the key: a SQLite ledger, a URL with its own sslrootcert, a file that cannot be read")
    func refused() {
        for (url, ca) in [
            ("sqlite:ledger.sqlite", Self.ca), ("postgresql://app@db/ledger?sslrootcert=/etc/ca.crt", Self.ca),
            ("postgresql://app@db/ledger", "/nonexistent/postgres-ca.crt"),
        ] {
            let error = #expect(throws: ConfigurationError.self) { try load(url, ca: ca) }
            #expect(error?.key == "ledger.ssl_root_cert_file", "\(url): \(String(describing: error))")
        }
    }
}
