public import Foundation
import Vocabulary

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

    /// How long an approval may be carried out before another lead may take it over: far past any call it makes to
    /// Apple or the ledger, so that its lead's desk has stopped.
    public static let stalledAfter: TimeInterval = 300

    /// The outcome an approval's credit transaction writes, its status still approving: the credit is in the
    /// ledger, its event perhaps not published yet (the lead's desk may stop between the two). Such a hold, once
    /// stalled, is approved again (which publishes the event), never rejected nor given back to pending; a
    /// takeover keeps the mark.
    public static let recordedOutcome = "recorded"

    /// What a decision moves a held credit from: a compare-and-set in the ledger, so that of two leads deciding at
    /// once one does.
    public enum Precondition: Sendable, Equatable {
        /// In this status, whatever its last decision.
        case status(Status)
        /// Approving, claimed before this time and never finished: stalled, and not taken over since.
        case stalledBefore(Date)
        /// As ``stalledBefore(_:)``, and its credit not recorded (``recordedOutcome``): what a rejection moves from.
        case unrecordedStalledBefore(Date)
        /// Approving under this claim (its lead, its time): nobody has taken it over since.
        case claimed(Decision)
        /// As ``claimed(_:)``, and its credit not recorded (``recordedOutcome``): what a claim given back moves from.
        case claimedUnrecorded(Decision)
    }

    /// A lead's claim checked in the ledger transaction of the credit it approves (``SupportStore``'s
    /// `recordCredit`): the credit is recorded only while the held credit is still this claim, so a rejection or a
    /// takeover in between leaves one of them, never both; a credit that leaves an event to publish marks the claim
    /// ``recordedOutcome`` in the same transaction.
    public struct Move: Sendable, Equatable {
        public var id: Int64
        public var claim: Decision

        public init(id: Int64, claim: Decision) {
            self.id = id
            self.claim = claim
        }

        /// The claim marked: its credit recorded.
        public var recorded: Decision {
            var marked = claim
            marked.outcome = ApprovalRequest.recordedOutcome
            return marked
        }
    }

    /// What a lead's decision at `now` (an approval, a rejection) moves it from: waiting, or stalled and not taken
    /// over since (for a rejection, its credit not recorded either). Nil: decided already, being approved now, or a
    /// rejection of a credit recorded.
    public func decidable(at now: Date, rejecting: Bool = false) -> Precondition? {
        if status == .pending { return .status(.pending) }
        guard isStalled(at: now) else { return nil }
        let before = now.addingTimeInterval(-Self.stalledAfter)
        guard rejecting else { return .stalledBefore(before) }
        return isRecorded ? nil : .unrecordedStalledBefore(before)
    }

    /// Being approved, its credit recorded by the approval's transaction (``recordedOutcome``).
    public var isRecorded: Bool { status == .approving && decision?.outcome == Self.recordedOutcome }

    /// Claimed for approval more than ``stalledAfter`` before `now`, and never finished.
    public func isStalled(at now: Date) -> Bool {
        status == .approving && (decision.map { now.timeIntervalSince($0.at) > Self.stalledAfter } ?? true)
    }
}
