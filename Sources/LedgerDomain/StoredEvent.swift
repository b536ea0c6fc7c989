public import Foundation
import Vocabulary

/// An event as the ledger keeps it: its JSON exactly as published, and what its Kafka key and CloudEvents
/// headers are made of, so a replay publishes it again unchanged without reading the JSON back.
public struct StoredEvent: Sendable, Equatable {
    public var eventID: String
    /// The CloudEvents `ce_type` (`receipt.granted`, ...).
    public var type: String
    /// The CloudEvents `ce_time`, RFC 3339.
    public var time: String
    /// The Kafka key: the order the event is about.
    public var key: String
    public var json: [UInt8]
    /// Events published right after this one, as part of the same answer: the `receipt.revoked` that takes back
    /// the share Apple refunded of a purchase before it was granted (``Decision/refundFollowUp``).
    public var followUps: [StoredEvent] = []

    public init(eventID: String, type: String, time: String, key: String, json: [UInt8]) {
        self.eventID = eventID
        self.type = type
        self.time = time
        self.key = key
        self.json = json
    }

    /// This event, then its follow-ups, in the order they are published.
    public var published: [StoredEvent] { [self] + followUps }
}

/// What Apple refunded of a purchase before any order held it (a prorated refund: `revocationPercentage` below
/// 100 %), as the ledger remembers it: the share, in milliunits, and Apple's time of the refund.
public struct RefundTaken: Sendable, Equatable {
    public var share: Int
    public var at: Date
    /// The refund's revenue was taken back by an event before (the `receipt.revoked` of a credit the purchase is
    /// tied from): the follow-up takes back the share of the content, and none of the revenue again.
    public var revenueTaken: Bool
    /// Taken back from a grant the ledger held already (a refund Apple's proof states after the grant), with what
    /// that grant's sale counted; nil for one taken back at the grant itself.
    public var fromGrantHeld: GrantHeld? = nil

    /// What the ledger holds of a grant a refund is taken back from.
    public struct GrantHeld: Sendable, Equatable {
        /// What its sale counted as revenue (nil: not known).
        public var revenue: Int64?

        public init(revenue: Int64?) { self.revenue = revenue }
    }

    public init(share: Int, at: Date, revenueTaken: Bool = false, fromGrantHeld: GrantHeld? = nil) {
        self.share = share
        self.at = at
        self.revenueTaken = revenueTaken
        self.fromGrantHeld = fromGrantHeld
    }
}
