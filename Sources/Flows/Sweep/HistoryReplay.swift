public import AppleVerification
import Events
public import Foundation
package import Messaging
import Observability
public import Vocabulary

/// Apple's notification history brought back onto the notifications topic: each notification of a window, read
/// page by page (Get Notification History, in its own rate lane), verified as the receiver verifies it, and
/// produced as received. What follows is the path of a delivered notification: the workers handle it once
/// (deduplicated by its UUID; one handled before publishes its first event again, with the same event id).
/// `receipt-worker notifications backfill` and the worker's sweep (``NotificationSweeper``) both replay with it.
public struct HistoryReplay: Sendable {
    public struct Counts: Sendable, Equatable {
        public var read = 0
        public var produced = 0
        /// Genuine, of an environment not accepted here.
        public var skipped = 0
        /// Not verified (never produced).
        public var rejected = 0
        /// Handled here before (the sweep produces only what the ledger has not handled).
        public var known = 0
        public var byType: [String: Int] = [:]

        public init() {}
    }

    /// What a replay came to: its counts, and why it stopped short (nil: it read the whole window).
    public struct Report: Sendable {
        public var counts = Counts()
        public var failure: String?
        /// Each notification that did not verify, in words (never its payload).
        public var rejections: [String] = []
    }

    package let apps: AppleApps
    package let retry: RetryPolicy
    /// Where verified notifications go (nil: a dry run, nothing produced).
    package let produce: (@Sendable (OutboundMessage) async throws -> Void)?
    package let topic: String
    /// Whether the ledger handled the notification of this UUID before (nil: produce every one, as a backfill
    /// does: handling it again publishes its first event again, with the same event id).
    package let handledBefore: (@Sendable (String) async throws -> Bool)?
    /// Told each notification produced, by its UUID.
    package let produced: (@Sendable (String) -> Void)?
    /// Where a notification produced is remembered as verified, for this process's own handler of it (nil: a
    /// backfill, a process that handles none): a swept notification is verified once.
    package let recentlyVerified: RecentlyVerifiedNotifications?

    package init(
        apps: AppleApps, retry: RetryPolicy, topic: String,
        produce: (@Sendable (OutboundMessage) async throws -> Void)?,
        handledBefore: (@Sendable (String) async throws -> Bool)? = nil, produced: (@Sendable (String) -> Void)? = nil,
        recentlyVerified: RecentlyVerifiedNotifications? = nil
    ) {
        self.recentlyVerified = recentlyVerified
        self.apps = apps
        self.retry = retry
        self.topic = topic
        self.produce = produce
        self.handledBefore = handledBefore
        self.produced = produced
    }

    /// Every notification `api`'s app had in `environment` from `start` to `end` (`onlyFailures`: only those Apple
    /// could not deliver). Stops at the first page Apple does not answer within `retry.max_attempts`, or the first
    /// notification the broker does not take: what was produced stays, and the same replay again is safe.
    public func replay(
        _ api: AppStoreServerAPIClient, environment: AppleEnvironment, from start: Date, to end: Date,
        onlyFailures: Bool = false
    ) async -> Report {
        var outcome = Report()
        var page: String?
        var pagesAsked: Set<String> = []
        repeat {
            let history: AppStoreServerAPIClient.NotificationHistoryPage
            do {
                history = try await retry.retryingApple {
                    try await api.notificationHistory(
                        environment: environment, start: start, end: end, page: page, onlyFailures: onlyFailures,
                        attempts: &$0)
                }
            } catch {
                outcome.failure = "Get Notification History failed: \(error)"
                return outcome
            }
            for signed in history.signedPayloads {
                outcome.counts.read += 1
                let body = Data("{\"signedPayload\":\(JSONString.quote(signed))}".utf8)
                switch await AppleNotification.verifySettled(body: body, apps: apps) {
                case .unavailable(let reason):
                    // Never counted as read: the window is read again (the sweep's next round, the backfill again).
                    outcome.failure = "a notification's certificates' revocation status is not known: \(reason)"
                    return outcome
                case .rejected(let reason):
                    outcome.counts.rejected += 1
                    outcome.rejections.append(reason)
                case .environmentNotAllowed:
                    outcome.counts.skipped += 1
                case .verified(let notification):
                    let record = BackfilledNotification.Record(notification)
                    // A ledger that does not answer: produced anyway (the workers deduplicate it).
                    if let handledBefore, (try? await handledBefore(record.id)) == true {
                        outcome.counts.known += 1
                        continue
                    }
                    outcome.counts.byType[record.type.rawValue, default: 0] += 1
                    guard let produce else { continue }
                    let value = Array(body)
                    // Remembered before the broker answers: this process's handler may read the record first.
                    recentlyVerified?.remember(value: value, notification)
                    do {
                        try await produce(
                            OutboundMessage(
                                topic: topic, key: Array(record.key.utf8), value: value, headers: record.headers))
                        outcome.counts.produced += 1
                        produced?(record.id)
                    } catch {
                        outcome.failure = "the broker did not take a notification: \(error)"
                        return outcome
                    }
                }
            }
            page = history.nextPage
            // A token given again would read the same pages for ever: the window is not read to its end.
            if let next = page, !pagesAsked.insert(next).inserted {
                outcome.failure =
                    "Get Notification History gave a page's token again: the history was not read to its end"
                return outcome
            }
        } while page != nil
        return outcome
    }
}
