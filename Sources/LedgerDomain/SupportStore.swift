public import Foundation
public import Vocabulary

/// What support reads of a purchase (`receipt-worker lookup`): who holds it and since when, and whether Apple
/// reported it unclaimed; and the purchases an order or an app account token leads to. A credit is the same claim
/// as a job's (``DecisionStore``), with its use of the desk's caps and its audit line in its transaction
/// (``recordCredit(_:caps:day:approval:audit:)``).
public protocol SupportStore: Sendable {
    /// A support credit in one transaction: the claim, as a job's (a purchase credited unclaimed tied to the
    /// order), then, when it credits anew, one use of each of `caps` for `day` (all or none), then its audit line,
    /// made from the claim's outcome. A cap at its limit undoes it all: nothing recorded, ``SupportCreditRecord/capReached``.
    /// A lead's approval (`approval`) is checked first, in the same transaction: a held credit no longer that claim
    /// (rejected, or taken over after it stalled) records nothing, ``SupportCreditRecord/approvalTaken``; one whose
    /// credit leaves an event to publish is marked recorded (``ApprovalRequest/recordedOutcome``).
    func recordCredit(
        _ decision: Decision, caps: [DailyCounter], day: String, approval: ApprovalRequest.Move?,
        audit: @escaping @Sendable (ClaimVerdict) -> AuditEntry
    ) async throws -> SupportCreditRecord

    /// The purchase's grant and its unclaimed report, in `app` and `environment`.
    func supportRecord(app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID, transactionID: String)
        async throws -> SupportRecord

    /// The transactions granted to `orderID` in `app` (its job's, and a subscription's renewals), newest last; by
    /// the grants' two order indexes (a job's, a renewal's), never a scan.
    func grantedTransactions(orderID: String, app: AppScope) async throws -> [(AppleEnvironment, String)]

    /// The transactions Apple reported with `appAccountToken` (lower-case UUID) that wait for a job or were
    /// credited unclaimed, in `app`, at most 100. A scan of the reports kept (retention prunes them): for a
    /// support desk, not for a job's path.
    func reportedTransactions(appAccountToken: String, app: AppScope) async throws -> [(AppleEnvironment, String)]

    /// The purchases granted to the player `userID` in `app` (job grants, renewals, support's credits), newest
    /// first, at most `limit`: by the grants' player index.
    func grantedToPlayer(_ userID: String, app: AppScope, limit: Int) async throws -> [PlayerGrant]

    /// Everything the ledger holds about the player `userID` in `app` (``PlayerRecords``), each list at most
    /// `limit`. The grants by the player index; the answers, reports and audit lines by scans (a data request is
    /// rare; the job's path never runs it).
    func playerRecords(_ userID: String, app: AppScope, limit: Int) async throws -> PlayerRecords

    /// The player a job's order was granted to in `app`, if any.
    func player(ofOrder orderID: String, app: AppScope) async throws -> String?

    /// The players whose purchases Apple reported with `appAccountToken` (lower-case UUID) in `app`: a token is the
    /// app's to set, so more than one may answer. At most 10.
    func players(ofToken appAccountToken: String, app: AppScope) async throws -> [String]
}

/// How a support credit's transaction ended.
public enum SupportCreditRecord: Sendable, Equatable {
    /// The claim's outcome, with its audit line's id.
    case recorded(ClaimVerdict, auditID: Int64)
    /// A cap was at its limit: nothing was recorded, no line written.
    case capReached
    /// The lead's approval was no longer theirs to carry out (rejected, or taken over, meanwhile): nothing was
    /// recorded, no line written.
    case approvalTaken
}

extension ClaimVerdict {
    /// Whether the outcome leaves an event for a support credit to publish: a credit anew, one replayed, a credit
    /// unclaimed tied to the order, a refunded share taken back. A refusal leaves none.
    public var leavesAnEvent: Bool {
        switch self {
        case .recorded, .recordedPartlyRefunded, .tied, .replay, .takenBack: true
        case .duplicateTransaction, .orderAlreadyFulfilled, .revoked, .credited: false
        }
    }

    /// Whether the outcome credits the purchase anew (a cap's use is taken for it): recorded, recorded with its
    /// refunded share taken back, or a credit unclaimed tied to the order. A replay, a refusal, or a credit the
    /// order already held takes nothing.
    public var creditsAnew: Bool {
        switch self {
        case .recorded, .recordedPartlyRefunded, .tied: true
        case .replay, .duplicateTransaction, .orderAlreadyFulfilled, .revoked, .credited, .takenBack: false
        }
    }
}

/// A purchase as the ledger holds it.
public struct SupportRecord: Sendable, Equatable {
    public struct Grant: Sendable, Equatable {
        public var orderID: String
        public var userID: String
        public var transactionID: String
        public var grantedAt: Date?
        public var revokedAt: Date?
        public var credit: GrantKind

        public init(
            orderID: String, userID: String, transactionID: String, grantedAt: Date?, revokedAt: Date?,
            credit: GrantKind
        ) {
            self.orderID = orderID
            self.userID = userID
            self.transactionID = transactionID
            self.grantedAt = grantedAt
            self.revokedAt = revokedAt
            self.credit = credit
        }
    }

    public struct Report: Sendable, Equatable {
        /// `waiting`, `claimed`, `refunded`, `credited`, `tied`.
        public var state: String
        public var dueAt: Date?
        public var eventID: String
        public var published: Bool
        public var settledAt: Date?

        public init(state: String, dueAt: Date?, eventID: String, published: Bool, settledAt: Date?) {
            self.state = state
            self.dueAt = dueAt
            self.eventID = eventID
            self.published = published
            self.settledAt = settledAt
        }
    }

    public var grant: Grant?
    public var report: Report?

    public init(grant: Grant? = nil, report: Report? = nil) {
        self.grant = grant
        self.report = report
    }
}

/// How a grant came to be: the column `grants.credit`. Open: a kind a later release writes is kept as it is.
public struct GrantKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// A job's grant, to its order: the order holds it.
    public static let job = GrantKind(rawValue: "job")
    /// A subscription's later period, credited to the subscription's order.
    public static let renewal = GrantKind(rawValue: "renewal")
    /// A purchase Apple reported that no job claimed in time, credited by its own event until a job ties it.
    public static let unclaimed = GrantKind(rawValue: "unclaimed")

    public var description: String { rawValue }
}
