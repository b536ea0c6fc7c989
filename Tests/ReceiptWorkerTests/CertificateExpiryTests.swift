import AppleVerification
import Crypto
import Foundation
@testable import ReceiptWorker
import Testing

/// `receipt_worker_certificate_expiry_timestamp_seconds`: the earliest `notAfter` of each trusted set.
@Suite("Certificate expiry, for its alert")
struct CertificateExpiryTests {
    static func pem(_ der: Data) -> Data {
        let lines = der.base64EncodedString().split(every: 64)
        return Data(
            ("-----BEGIN CERTIFICATE-----\n" + lines.joined(separator: "\n") + "\n-----END CERTIFICATE-----\n").utf8)
    }

    @Test(
        "a bundle's earliest certificate counts; Apple's compiled-in root expires in 2039; a missing file has no series"
    )
    func expiries() throws {
        let root = AppleRootCertificates.appleRootCAG3
        let rootEnd = try #require(try X509Certificate(bytes: root).validity?.upperBound)
        #expect(Calendar(identifier: .gregorian).component(.year, from: Date(timeIntervalSince1970: rootEnd)) == 2039)
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("AppleVerificationTests/Fixtures/certs/testCA.der")
        let testCA = try Data(contentsOf: fixture)
        let testEnd = try #require(try X509Certificate(bytes: testCA).validity?.upperBound)
        let bundle = FileManager.default.temporaryDirectory.appendingPathComponent("bundle-\(UUID()).pem")
        try (Self.pem(root) + Self.pem(testCA)).write(to: bundle)
        defer { try? FileManager.default.removeItem(at: bundle) }
        let expiry = CertificateExpiry([
            ("kafka_ca", .file(bundle.path)), ("ledger_ca", .file("/no/such/file")), ("apple_root", .bytes([root])),
        ])
        let values = Dictionary(uniqueKeysWithValues: expiry.expiries)
        #expect(values["kafka_ca"] == min(rootEnd, testEnd), "the bundle's earliest")
        #expect(values["apple_root"] == rootEnd)
        #expect(values["ledger_ca"] == nil, "an unreadable file has no series")
        #expect(
            CertificateExpiry.sslRootCert("postgresql://u@db/l?sslmode=verify-full&sslrootcert=/run/ca.crt")
                == "/run/ca.crt")
    }
}

extension String {
    fileprivate func split(every length: Int) -> [String] {
        stride(from: 0, to: count, by: length).map {
            let start = index(startIndex, offsetBy: $0)
            return String(self[start..<(index(start, offsetBy: length, limitedBy: endIndex) ?? endIndex)])
        }
    }
}
