public import Foundation
public import Vocabulary

/// A subscription whose renewal or expiry is overdue: nothing heard of it since its period (or its grace
/// period) ended.
public struct OverdueSubscription: Sendable, Equatable {
    public var environment: AppleEnvironment
    public var originalTransactionID: String
    /// `active`, `grace_period` or `billing_retry`: what the ledger last knew.
    public var status: SubscriptionStatus
    public var expiresAt: Date

    public init(
        environment: AppleEnvironment, originalTransactionID: String, status: SubscriptionStatus, expiresAt: Date
    ) {
        self.environment = environment
        self.originalTransactionID = originalTransactionID
        self.status = status
        self.expiresAt = expiresAt
    }
}

/// What the subscription status checks read: the subscriptions granted here whose news is overdue.
public protocol SubscriptionCheckStore: Sendable {
    /// The subscriptions of `app` whose period (or grace period) ended before `endedBefore`, that heard nothing
    /// since then, and that were not asked of Apple since `askedBefore` (Apple's answer may not change for days: a
    /// subscription in billing retry, one whose refund was never heard), unless the period they are in now ended
    /// after they were asked (an answer that renewed it: its new period is asked about when it ends). Oldest expiry
    /// first, at most `limit`.
    func overdueSubscriptions(app: AppScope, endedBefore: Date, askedBefore: Date, limit: Int) async throws
        -> [OverdueSubscription]

    /// Remembers that the subscription was asked of Apple at `at`, whatever Apple said: the next ask waits.
    func subscriptionAsked(
        app: AppScope, environment: AppleEnvironment, originalTransactionID: String, at: Date
    ) async throws
}
