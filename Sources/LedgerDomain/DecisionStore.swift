import Foundation
import Vocabulary

/// The job flow's view: a decision stored once per job, with the claim of its purchase and order.
public protocol DecisionStore: Sendable {
    /// The event stored for this job, if it was decided before: a re-delivered job is answered with it
    /// without asking Apple again. A result stored by a release without job fingerprints answers any
    /// fingerprint of its job id.
    func storedDecision(_ key: DecisionKey) async throws -> StoredEvent?

    /// Records the decision with its event, atomically with the claim. A job already recorded gets
    /// `.replay` with its stored event, whatever the claim now says.
    func record(_ decision: Decision) async throws -> ClaimVerdict

}

/// The ledger's answer to a decision.
public enum ClaimVerdict: Sendable, Equatable {
    /// The decision and its event are stored.
    case recorded
    /// This job was decided before: here is its stored event, to publish again unchanged.
    case replay(StoredEvent)
    /// The purchase is already granted to another order.
    case duplicateTransaction
    /// The order is already granted with another purchase.
    case orderAlreadyFulfilled
    /// The purchase was granted, then refunded or revoked (an App Store notification said so).
    case revoked
    /// The order holds this purchase by a credit the worker made (a subscription's period, or a purchase no job
    /// claimed, tied to the order): the job is that credit, answered with its event id and what the credit counted
    /// as revenue; nothing was recorded.
    case credited(eventID: String, revenue: Int64?)
    /// Recorded, for a purchase Apple refunded in part before any order held it: granted for what the player
    /// kept, and `followUp` (stored with the decision) takes the refunded share back; publish both, in order.
    case recordedPartlyRefunded(followUp: StoredEvent)
    /// The order holds the purchase already, and Apple's proof states a refund of part of it that the ledger never
    /// heard of (its notification lost): the grant answered again, unchanged, and `followUp` (stored with the
    /// decision) takes the refunded share back, as the notification would have; publish both, in order.
    case takenBack(followUp: StoredEvent)
    /// The order holds the purchase by a credit of the worker's, or took it now (a purchase credited unclaimed):
    /// answered with `answer`, made by ``Decision/creditAnswer`` and stored (its follow-ups, when the credit was
    /// refunded in part since, with it); publish it.
    case tied(StoredEvent)
}
