public import Foundation
public import Vocabulary

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
    /// false when it was not in `from` (another lead decided first, or no such credit).
    func decideApproval(id: Int64, from: ApprovalRequest.Status, to decision: ApprovalRequest.Decision) async throws
        -> Bool

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

/// How holding a credit for a lead ended.
public enum HoldDecision: Sendable, Equatable {
    case held(id: Int64)
    /// The agent already has `waiting` credits held (the limit): nothing held.
    case full(waiting: Int)
}

/// A console session of the support desk, kept in the ledger: found by the SHA-256 of the random token its cookie
/// carries, so neither the ledger nor its backups hold what a browser presents.
public struct DeskSession: Sendable, Equatable {
    /// Hex SHA-256 of the cookie's token.
    public var id: String
    public var subject: String
    public var name: String
    /// The roles granted at sign-in (`viewer`, `agent`, `lead`).
    public var roles: [String]
    public var createdAt: Date
    /// The last request it made (its idle time counts from there; updated at most once a minute).
    public var seenAt: Date
    public var expiresAt: Date
    public var endedAt: Date?
    /// Who ended it: its agent's subject at sign-out, a lead's, or `expired`.
    public var endedBy: String?

    public init(
        id: String, subject: String, name: String, roles: [String], createdAt: Date, seenAt: Date, expiresAt: Date,
        endedAt: Date? = nil, endedBy: String? = nil
    ) {
        self.id = id
        self.subject = subject
        self.name = name
        self.roles = roles
        self.createdAt = createdAt
        self.seenAt = seenAt
        self.expiresAt = expiresAt
        self.endedAt = endedAt
        self.endedBy = endedBy
    }
}

/// One line of the desk's audit.
public struct AuditEntry: Sendable, Equatable, Codable {
    public var id: Int64
    public var at: Date
    /// The app's name (`default`, an `apps.NAME`).
    public var app: String
    /// Who: the token's subject (unique at the provider), and the name it gave.
    public var agent: String
    public var agentName: String
    /// The role the request used (viewer, agent, lead).
    public var role: String
    /// `lookup`, `history`, `credit`, `approve`, `reject`.
    public var action: String
    /// `answered`, `not_found`, `credited`, `held`, `refused`, `approved`, `rejected`, `failed`.
    public var outcome: String
    public var ticket: String
    /// The player the request names (a credit's, a lookup by player's), if any.
    public var player: String?
    /// What was asked and what was answered or recorded, as JSON objects.
    public var request: String
    public var answer: String

    public init(
        id: Int64 = 0, at: Date, app: String, agent: String, agentName: String, role: String, action: String,
        outcome: String, ticket: String, player: String?, request: String, answer: String
    ) {
        self.id = id
        self.at = at
        self.app = app
        self.agent = agent
        self.agentName = agentName
        self.role = role
        self.action = action
        self.outcome = outcome
        self.ticket = ticket
        self.player = player
        self.request = request
        self.answer = answer
    }
}

public struct AuditFilter: Sendable, Equatable {
    public var since: Date?
    public var agent: String?
    public var player: String?
    public var limit: Int

    public init(since: Date? = nil, agent: String? = nil, player: String? = nil, limit: Int = 100) {
        self.since = since
        self.agent = agent
        self.player = player
        self.limit = limit
    }
}

/// One of a day's counters: what an agent credited (`kind` agent, `who` the subject), or a player was credited
/// (`kind` player, `who` app and user id).
public struct DailyCounter: Sendable, Equatable {
    public var kind: String
    public var who: String
    public var limit: Int

    public init(kind: String, who: String, limit: Int) {
        self.kind = kind
        self.who = who
        self.limit = limit
    }
}

/// A credit past a cap, kept until a lead approves or rejects it.
public struct ApprovalRequest: Sendable, Equatable {
    public enum Status: String, Sendable, Codable {
        case pending
        /// A lead's approval is being carried out (claimed, so that no second lead carries it out too).
        case approving
        case approved, rejected
    }

    /// A lead's decision.
    public struct Decision: Sendable, Equatable {
        public var status: Status
        public var by: String
        public var byName: String
        public var at: Date
        public var outcome: String

        public init(status: Status, by: String, byName: String, at: Date, outcome: String) {
            self.status = status
            self.by = by
            self.byName = byName
            self.at = at
            self.outcome = outcome
        }
    }

    public var id: Int64
    public var createdAt: Date
    public var app: String
    public var requestedBy: String
    public var requestedName: String
    public var ticket: String
    public var player: String
    /// The credit request, as JSON.
    public var request: String
    public var status: Status
    public var decision: Decision?

    public init(
        id: Int64 = 0, createdAt: Date, app: String, requestedBy: String, requestedName: String, ticket: String,
        player: String, request: String, status: Status = .pending, decision: Decision? = nil
    ) {
        self.id = id
        self.createdAt = createdAt
        self.app = app
        self.requestedBy = requestedBy
        self.requestedName = requestedName
        self.ticket = ticket
        self.player = player
        self.request = request
        self.status = status
        self.decision = decision
    }
}

/// A purchase the ledger granted to a player.
public struct PlayerGrant: Sendable, Equatable {
    public var environment: AppleEnvironment
    public var transactionID: String
    public var orderID: String
    public var grantedAt: Date?

    public init(environment: AppleEnvironment, transactionID: String, orderID: String, grantedAt: Date?) {
        self.environment = environment
        self.transactionID = transactionID
        self.orderID = orderID
        self.grantedAt = grantedAt
    }
}
