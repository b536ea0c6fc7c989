import Flows
import Foundation
import ReceiptWorker

extension FuzzChecks {
    /// One value of the jobs topic, read as the worker reads it (jobs.max_bytes and
    /// apple.transaction_id_requires_account_token at their defaults). Besides crashes, a job that is read must
    /// keep the promises the ledger relies on: ids within their byte limits and free of control characters.
    @Sendable public static func jobParser(_ value: [UInt8]) -> String? {
        switch JobParser.parse(value, maxBytes: 262_144, transactionIDRequiresAccountToken: true) {
        case .job(let job):
            guard isLedgerKey(job.jobID, 128), isLedgerKey(job.orderID, 128) else {
                return "an id the ledger cannot key"
            }
            guard isLedgerKey(job.userID, 128), isLedgerKey(job.productID, 255) else {
                return "an id the ledger cannot key"
            }
            guard (1...1000).contains(job.quantity) else { return "quantity \(job.quantity) accepted" }
            if let id = job.transactionID, !isLedgerKey(id, 64) { return "transaction_id accepted unchecked" }
        case .invalidJob(let identity, _):
            // An invalid job is recorded under its job_id only when that id is valid, and always under its order_id.
            guard identity.jobID.isEmpty || isLedgerKey(identity.jobID, 128) else { return "invalid job_id kept" }
            guard isLedgerKey(identity.orderID, 128) else { return "invalid order_id kept" }
        case .unreadable:
            break
        }
        return nil
    }

    /// One value of the consumption topic (a grant service's answer to a refund request), read as the worker
    /// reads it. Besides crashes: an answer that is accepted becomes a body Apple can read, a JSON object whose
    /// consumption percentage is in Apple's milliunits (0 to 100,000).
    @Sendable public static func consumptionAnswer(_ value: [UInt8]) -> String? {
        let problem = ConsumptionAnswerCheck.problem(in: value)
        let body = ConsumptionAnswerCheck.appleBody(for: value)
        guard (problem == nil) == (body != nil) else { return "the check and the parse disagree" }
        guard let body else { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else {
            return "an accepted answer became a body that is not a JSON object"
        }
        if let percentage = object["consumptionPercentage"] {
            let milliunits = (percentage as? NSNumber)?.intValue ?? -1
            guard (0...100_000).contains(milliunits) else { return "consumptionPercentage \(percentage) sent" }
        }
        return nil
    }

    /// One properties file's text, read and validated as `ConfigurationLoader.load(file:)` does with no
    /// environment variables and no `--set`. Only crashes are looked for.
    @Sendable public static func properties(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let properties = try? ConfigurationLoader.properties(text: text, source: "fuzz.properties") else {
            return nil
        }
        // Keys that name files are left out: the fuzzer would open whatever path it writes (/dev/zero, a FIFO),
        // and what such a file holds is not properties text.
        let safe = properties.filter { !$0.key.hasSuffix("_file") && $0.key != "apple.root_certificates" }
        // The last value of a key wins, as in `load`.
        var seen: Set<String> = []
        let lastValues = Array(safe.reversed().filter { seen.insert($0.key).inserted }.reversed())
        _ = try? ConfigurationLoader.build(lastValues, purpose: .worker)
        _ = try? ConfigurationLoader.build(lastValues, purpose: .tool)
        // The same lines as OpenTelemetry's variables (OTEL_EXPORTER_OTLP_HEADERS=...): whatever loads sends no header
        // that carries another.
        let variables = Dictionary(lastValues.filter { $0.key.hasPrefix("OTEL_") }) { _, last in last }
        if !variables.isEmpty,
            let tracing = try? ConfigurationLoader.loadWithSources(
                file: nil, overrides: ["apple.bundle_id=com.example"], environment: variables, readsFiles: false
            ).configuration.tracing,
            let smuggled = tracing.headers.first(where: { header in
                (header.0 + header.1).unicodeScalars.contains { $0 == "\r" || $0 == "\n" || $0 == "\0" }
            })
        {
            return "otel.headers loaded a header carrying a line break: \(smuggled.0)"
        }
        return nil
    }

    private static func isLedgerKey(_ text: String, _ maximumBytes: Int) -> Bool {
        (1...maximumBytes).contains(text.utf8.count) && !text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }
}
