import AppleVerification
import Crypto
import Foundation
import Synchronization

/// When the certificates the worker trusts stop being valid: each configured CA file (the brokers', the
/// ledger's, Apple's HTTPS) and Apple's roots, as the earliest `notAfter` among the certificates each holds, for
/// `receipt_worker_certificate_expiry_timestamp_seconds` and its alert. Files are read again every five
/// minutes (a Secret rotated under the pod is seen); a file that cannot be read has no series, and a failing
/// connection says why.
final class CertificateExpiry: Sendable {
    /// A label and the PEM or DER bytes' source.
    enum Source: Sendable {
        case file(String)
        case bytes([Data])
    }

    private let sources: [(label: String, source: Source)]
    private let cache = Mutex<(at: ContinuousClock.Instant, values: [(String, Double)])?>(nil)

    init(_ sources: [(label: String, source: Source)]) { self.sources = sources }

    /// The worker's: `kafka.ssl.ca.location`, the ledger URL's `sslrootcert`, `http.ca_file`, Apple's roots.
    convenience init(_ configuration: WorkerConfiguration) {
        var sources: [(String, Source)] = []
        if let kafka = configuration.kafka["ssl.ca.location"] { sources.append(("kafka_ca", .file(kafka))) }
        if let ledger = configuration.ledgerSSLRootCert ?? Self.sslRootCert(configuration.ledgerURL) {
            sources.append(("ledger_ca", .file(ledger)))
        }
        if let http = configuration.httpCAFile { sources.append(("http_ca", .file(http))) }
        sources.append(("apple_root", .bytes(configuration.apple.rootCertificates)))
        sources.append(("apple_receipt_root", .bytes(configuration.apple.receiptRootCertificates)))
        self.init(sources)
    }

    /// `sslrootcert=PATH` of a PostgreSQL URL's query.
    static func sslRootCert(_ url: String) -> String? {
        URLComponents(string: url)?.queryItems?.first { $0.name == "sslrootcert" }?.value
    }

    /// (label, earliest notAfter in seconds since the epoch), for each source with a certificate.
    var expiries: [(String, Double)] {
        let now = ContinuousClock.now
        if let cached = cache.withLock({ $0 }), now - cached.at < .seconds(300) { return cached.values }
        let values = sources.compactMap { label, source -> (String, Double)? in
            let blobs: [Data]
            switch source {
            case .file(let path):
                guard let data = FileManager.default.contents(atPath: path) else { return nil }
                blobs = Self.certificates(in: data)
            case .bytes(let list):
                blobs = list.flatMap { Self.certificates(in: $0) }
            }
            let ends = blobs.compactMap { try? X509Certificate(bytes: $0).validity?.upperBound }
            return ends.min().map { (label, $0) }
        }
        cache.withLock { $0 = (now, values) }
        return values
    }

    /// Each certificate of a PEM bundle, or the bytes as they are (one DER certificate).
    static func certificates(in data: Data) -> [Data] {
        let text = String(decoding: data, as: UTF8.self)
        let begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----"
        guard text.contains(begin) else { return [data] }
        var found: [Data] = []
        var rest = Substring(text)
        while let start = rest.range(of: begin), let stop = rest.range(of: end, range: start.upperBound..<rest.endIndex)
        {
            found.append(Data(rest[start.lowerBound..<stop.upperBound].utf8))
            rest = rest[stop.upperBound...]
        }
        return found
    }
}
