public import Foundation
import Vocabulary

/// What the support desk keeps in the ledger beside the purchases: the audit of every look and credit (appended,
/// never pruned, never changed), the credits held for a lead's approval, and each day's use of the caps.
public protocol DeskStore: Sendable {
    /// Appends a line; returns its id.
    @discardableResult
    func appendAudit(_ entry: AuditEntry) async throws -> Int64

    /// The lines `filter` selects, newest first.
    func audit(_ filter: AuditFilter) async throws -> [AuditEntry]

    /// Takes one use of each counter for `day`, all or none: false (nothing taken) when any is at its limit.
    /// Atomic across desks: two agents at the last place, one gets it.
    func reserveDailyUse(_ counters: [DailyCounter], day: String) async throws -> Bool

    /// Gives back a use taken by ``reserveDailyUse(_:day:)`` (a credit Apple or the ledger then refused).
    func releaseDailyUse(_ counters: [DailyCounter], day: String) async throws

    /// How many uses of the counter `day` has taken.
    func dailyUse(_ counter: DailyCounter, day: String) async throws -> Int

    /// Keeps a credit for a lead's decision; returns its id.
    func requestApproval(_ held: ApprovalRequest) async throws -> Int64

    /// Holds a credit for a lead unless its agent already has `limit` waiting, with its audit line, in one
    /// transaction that takes the agent's lock first: a burst of credits never leaves more than `limit` waiting.
    /// The line is `held(id)` when it is held, `refused(waiting)` when the agent has too many waiting.
    func holdCredit(
        _ request: ApprovalRequest, limit: Int, held: @escaping @Sendable (Int64) -> AuditEntry,
        refused: @escaping @Sendable (Int) -> AuditEntry
    ) async throws -> HoldDecision

    func approvalRequest(id: Int64) async throws -> ApprovalRequest?

    /// The credits held with `status` (nil: all), newest first, at most `limit`.
    func approvalRequests(status: ApprovalRequest.Status?, limit: Int) async throws -> [ApprovalRequest]

    /// Moves a held credit from `from` to `decision`'s status, with who decided, when, and what came of it:
    /// false when it was not as `from` says (another lead decided first or took it over, or no such credit).
    func decideApproval(id: Int64, from: ApprovalRequest.Precondition, to decision: ApprovalRequest.Decision)
        async throws -> Bool

    // MARK: Console sessions

    /// Keeps a new session.
    func startSession(_ session: DeskSession) async throws

    /// The session of this id (the SHA-256 of its cookie's token), ended or not; nil when none.
    func session(id: String) async throws -> DeskSession?

    /// Remembers that the session was used at `at` (its idle time counts from there).
    func sessionSeen(id: String, at: Date) async throws

    /// Ends one session; false when it had ended, or never was.
    func endSession(id: String, by: String, at: Date) async throws -> Bool

    /// Ends every open session of `subject` (a lead cuts an agent off); how many it ended.
    func endSessions(subject: String, by: String, at: Date) async throws -> Int

    /// The open sessions (not ended, not expired at `now`), newest first, at most `limit`.
    func openSessions(now: Date, limit: Int) async throws -> [DeskSession]
}

extension DeskStore {
    /// Moves a held credit from `from`, whenever its last decision was.
    public func decideApproval(id: Int64, from: ApprovalRequest.Status, to decision: ApprovalRequest.Decision)
        async throws -> Bool
    {
        try await decideApproval(id: id, from: .status(from), to: decision)
    }
}

/// How holding a credit for a lead ended.
public enum HoldDecision: Sendable, Equatable {
    case held(id: Int64)
    /// The agent already has `waiting` credits held (the limit): nothing held.
    case full(waiting: Int)
}
