import Foundation
import Vocabulary

/// Which app a row belongs to: the app's bundle id, or "" for the default app (`apple.bundle_id`), whose rows
/// include those of a ledger written before keys were scoped by app that name no app (older than apps).
public struct AppScope: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public static let defaultApp = AppScope("")
    public var description: String { rawValue.isEmpty ? "default" : rawValue }
}

/// What identifies one job's decision: its app, its `job_id`, and its content's fingerprint, so a `job_id`
/// reused with other content (another order, product or proof) is another job, never the first one's replay.
public struct DecisionKey: Hashable, Sendable {
    public var app: AppScope
    public var jobID: String
    /// Hex SHA-256 of the job's content (the worker computes it); results stored before fingerprints have "".
    public var fingerprint: String

    public init(app: AppScope, jobID: String, fingerprint: String) {
        self.app = app
        self.jobID = jobID
        self.fingerprint = fingerprint
    }
}
