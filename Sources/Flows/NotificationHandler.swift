import AppleVerification
import Events
import Foundation
package import LedgerDomain
package import Messaging
package import Observability
package import Vocabulary

/// The notifications topic (docs/contract.md section 9): a verified App Store notification becomes an event
/// for the order its purchase was granted to (`receipt.revoked`, `receipt.reinstated`,
/// `receipt.consumption_requested`, and a subscription's `receipt.renewed`, `receipt.expired`,
/// `receipt.billing_issue`, `receipt.renewal_changed`, `receipt.extension_failed`), a notice about no purchase
/// (`receipt.consent_rescinded`, `receipt.extension_completed`), a purchase waiting for a job (`ONE_TIME_CHARGE`,
/// `SUBSCRIBED`: credited by `receipt.unclaimed` if none claims it in time), or nothing.
///
/// A notification's life: verify it again (anyone who can write to the topic could have written it), unless
/// this process's receiver verified these very bytes (``RecentlyVerifiedNotifications``) → a
/// notification handled before publishes its first event again (Apple's retries, re-deliveries and backfills
/// change nothing twice) → the ledger applies what it does to the purchase, in the notification's app and
/// environment (``PurchaseRules``), and keeps the event → publish it.
package struct NotificationHandler: MessageHandler {
    package let apps: AppleApps
    package let purchases: any PurchaseStateStore
    package let resultsTopic: String
    package let eventSource: String
    package let metrics: WorkerMetrics
    package let logger: Logger
    /// `notifications.unclaimed_after_ms`: how long a reported purchase waits for a job; nil: never credited.
    package var unclaimedAfter: Duration? = nil
    /// What this process's receiver verified (nil: verify every record).
    package var recentlyVerified: RecentlyVerifiedNotifications? = nil

    package init(
        apps: AppleApps, purchases: any PurchaseStateStore, resultsTopic: String, eventSource: String,
        metrics: WorkerMetrics, logger: Logger, unclaimedAfter: Duration? = nil,
        recentlyVerified: RecentlyVerifiedNotifications? = nil
    ) {
        self.apps = apps
        self.purchases = purchases
        self.resultsTopic = resultsTopic
        self.eventSource = eventSource
        self.metrics = metrics
        self.logger = logger
        self.unclaimedAfter = unclaimedAfter
        self.recentlyVerified = recentlyVerified
    }

    /// A notification that cannot be read as one is dead-lettered under the jobs' reason, as before.
    package var deadLetterReason: DeadLetterReason { .malformedJob }

    package func isPermanent(_ error: any Error) -> Bool { (error as? LedgerError)?.isPermanent == true }

    /// The notifications' group; the wait from Apple's signing of the notification (the receiver's `signed_date`
    /// header; else the record's time), for the app its `bundle_id` header names (`other` for one no app has).
    package func intake(of message: InboundMessage) -> Intake {
        let signed = message.header("signed_date")?.stringValue.flatMap(Int64.init).map {
            Date(timeIntervalSince1970: Double($0) / 1000)
        }
        guard let at = signed ?? message.timestamp else { return Intake(group: FlowGroup.notifications) }
        let bundleID = message.header("bundle_id")?.stringValue
        return Intake(
            group: FlowGroup.notifications,
            waitStart: WaitStart(flow: "notification", app: apps.app(bundleID: bundleID)?.name ?? "other", at: at))
    }

    package func handle(_ message: InboundMessage, context: any HandlingContext) async throws -> Disposition {
        let notification: AppleNotification
        let isStatusRecord =
            message.header(SubscriptionStatusRecord.sourceHeader)?.stringValue == SubscriptionStatusRecord.source
        if let verifiedHere = recentlyVerified?.take(value: message.value) {
            metrics.notificationsTakenFromReceiver.increment()
            notification = verifiedHere
        } else {
            metrics.notificationsVerifiedAgain.increment()
            // A chain this process meets for the first time (the receiver that asked its OCSP responders was
            // another process) is asked about now and decided once the asks end. While its responders do not
            // answer at all, the record waits, as for a ledger that does not answer: the receiver already answered
            // Apple 200 for it, so a dead letter would leave its news to a replay by hand. An answer that does not
            // settle it (a certificate the responder does not know, an answer that does not verify) may never
            // change: handled again up to `retry.max_attempts` times, then dead-lettered for a replay.
            let apps = self.apps
            let value = message.value
            let bundleID = message.header("bundle_id")?.stringValue
            let verification = try await context.retrying("notification_revocation") {
                let verification = await AppleNotification.settled(apps: apps) {
                    isStatusRecord
                        ? SubscriptionStatusRecord.verify(value: value, bundleID: bundleID, apps: apps)
                        : AppleNotification.verify(body: Data(value), apps: apps)
                }
                if case .unavailable(let error) = verification, error.code == .revocationUnanswered { throw error }
                return verification
            }
            switch verification {
            case .verified(let verified): notification = verified
            case .environmentNotAllowed(let type):
                metrics.notificationProcessed(type: type, outcome: "ignored").increment()
                return .publish([])
            case .rejected(let reason):
                return .deadLetter(DeadLetter(reason: .malformedJob, error: "notification: \(reason)"))
            case .unavailable(let error):
                // Handled again after a backoff (``FailureFate``), never dead-lettered as malformed.
                throw error
            }
        }
        if let handled = try await context.retrying(
            "ledger_lookup", stage: metrics.ledgerLookup,
            { try await purchases.storedNotification(id: notification.id) })
        {
            // Handled before: its event again, unchanged (or nothing, if it had none).
            metrics.notificationProcessed(type: notification.type, outcome: "replayed").increment()
            return .publish(publishing(handled))
        }
        if notification.type == .rescindConsent, notification.appTransaction == nil {
            // A parent's withdrawal the game must act on, without the download it is about: kept in sight.
            return .deadLetter(
                DeadLetter(
                    reason: .malformedJob, error: "notification: RESCIND_CONSENT without a signed app transaction"))
        }
        // A status the worker asked Apple for is not news Apple sent: the sweep must not take it for a delivery.
        let source = isStatusRecord ? SubscriptionStatusRecord.source : nil
        guard let (change, eventType) = change(notification, source: source) else {
            // Kept on the topic for whoever wants it; nothing to do here.
            metrics.notificationProcessed(type: notification.type, outcome: "ignored").increment()
            return .publish([])
        }
        let record = try await context.retrying("ledger_record", stage: metrics.ledgerRecord) {
            try await purchases.apply(change) { holder in
                if case .notice(let event) = change.kind { return event }
                if case .reinstate(_, _, _, let period?) = change.kind, holder.subscription != nil {
                    // A period refunded before any credit, the refund reversed: its credit, as its renewal's.
                    return SubscriptionEvent.make(
                        type: EventType.renewed.rawValue, notification: notification, holder: holder,
                        renewalID: period.renewal?.eventID)
                }
                if case .subscription(let subscription) = change.kind {
                    // A renewal of a period credited before says the subscription's state, never a second credit.
                    return SubscriptionEvent.make(
                        type: holder.stateOnly ? EventType.renewalChanged.rawValue : eventType,
                        notification: notification, holder: holder,
                        renewalID: holder.stateOnly ? nil : subscription.renewal?.eventID)
                }
                return NotificationEvent.make(type: eventType, notification: notification, holder: holder)
            }
        }
        switch record {
        case .recorded(let event?, _):
            metrics.notificationProcessed(type: notification.type, outcome: "published").increment()
            let app = apps.app(bundleID: notification.bundleID)?.name ?? "other"
            metrics.money.count(event.json, app: app)
            if eventType == EventType.consumptionRequested.rawValue {
                metrics.consumptionRequested(app: app).increment()
            }
            logger.info("purchase event", ["type": event.type, "notification_id": notification.id])
            return .publish(publishing(.recorded(event, granted: true)))
        case .recorded(nil, let granted) where eventType == EventType.unclaimed.rawValue:
            // Waits for a job (or a job claimed it already).
            metrics.notificationProcessed(type: notification.type, outcome: granted ? "ignored" : "waiting")
                .increment()
            return .publish([])
        case .recorded(nil, let granted):
            // Never granted here (another system's purchase, or refunded before any job presented it: the
            // ledger remembers the refund), or nothing changed (a second refund, a stale change).
            metrics.notificationProcessed(type: notification.type, outcome: granted ? "ignored" : "not_granted")
                .increment()
            return .publish([])
        case .replay:
            metrics.notificationProcessed(type: notification.type, outcome: "replayed").increment()
            return .publish(publishing(record))
        }
    }

    /// What a notification asks of the ledger, and the type of the event it publishes; nil for a notification
    /// the worker does not act on (kept on the topic for whoever wants it).
    private func change(_ notification: AppleNotification, source: String?) -> (NotificationChange, String)? {
        // Notices about no purchase: a parent's withdrawn consent, a mass extension's summary.
        let notice: (StoredEvent?, EventType)? =
            switch (notification.type, notification.subtype) {
            case (.rescindConsent, _): (ConsentEvent.make(notification), .consentRescinded)
            case (.renewalExtension, .some(.summary)): (ExtensionSummaryEvent.make(notification), .extensionCompleted)
            default: nil
            }
        if let (made, type) = notice {
            guard let event = made, let environment = notification.environment,
                let app = apps.app(bundleID: notification.bundleID)
            else { return nil }
            return (
                NotificationChange(
                    id: notification.id, app: app.scope, environment: environment, kind: .notice(event), source: source),
                type.rawValue
            )
        }
        guard let signed = notification.transaction, let transactionID = signed.transactionId,
            let transaction = try? AppleTransaction(signed), let environment = notification.environment,
            let app = apps.app(bundleID: notification.bundleID)
        else { return nil }
        // A family member's access revoked is that member's transaction, not the purchaser's purchase.
        let familyShared = notification.type == .revoke || signed.inAppOwnershipType == .familyShared
        let purchaseID: PurchaseID = familyShared ? .transaction(transactionID) : transaction.purchaseIdentity
        let at = notification.notifiedAt
        let kind: NotificationChange.Kind
        let eventType: String
        switch notification.type {
        case .refund, .revoke:
            // What Apple refunded of it in all: its percentage in milliunits; a refund or revocation that says
            // none is all of it.
            kind = .revoke(
                purchaseID: purchaseID, transactionID: transactionID, at: at,
                share: signed.revocationPercentage ?? 100_000)
            eventType = EventType.revoked.rawValue
        case .refundReversed:
            // A subscription's later period: credited now if it was refunded before any credit of it.
            let original = transaction.originalTransactionID ?? transactionID
            let period =
                transaction.productType == .autoRenewableSubscription && original != transactionID && !familyShared
                ? SubscriptionChange(
                    originalTransactionID: original,
                    state: SubscriptionEvent.state(notification, transaction: transaction),
                    renewal: renewal(transaction, app: app.scope, environment: environment, purchaseID: purchaseID))
                : nil
            kind = .reinstate(purchaseID: purchaseID, transactionID: transactionID, at: at, period: period)
            eventType = EventType.reinstated.rawValue
        case .consumptionRequest:
            kind = .consumptionRequest(
                transactionID: transactionID, respondBy: at.addingTimeInterval(NotificationEvent.consumptionDeadline))
            eventType = EventType.consumptionRequested.rawValue
        case let type where UnclaimedEvent.reports(type: type, subtype: notification.subtype):
            guard let reported = reported(notification, transaction, app: app.scope, purchaseID: purchaseID),
                !familyShared
            else { return nil }
            kind = .purchased(reported)
            eventType = EventType.unclaimed.rawValue
        case let type:
            guard let (subscriptionType, renewal) = SubscriptionEvent.type(of: type, subtype: notification.subtype),
                transaction.productType == .autoRenewableSubscription
            else { return nil }
            kind = .subscription(
                SubscriptionChange(
                    originalTransactionID: transaction.originalTransactionID ?? transactionID,
                    state: SubscriptionEvent.state(notification, transaction: transaction),
                    renewal: renewal
                        ? self.renewal(transaction, app: app.scope, environment: environment, purchaseID: purchaseID)
                        : nil,
                    // A family member's period is the purchaser's purchase, credited to the purchaser's order:
                    // never a purchase of its own waiting to be credited (the family member paid nothing).
                    unheld: renewal && !familyShared
                        ? reported(notification, transaction, app: app.scope, purchaseID: purchaseID) : nil,
                    recovery: type == .didRenew && notification.subtype == .billingRecovery))
            eventType = subscriptionType
        }
        return (
            NotificationChange(
                id: notification.id, app: app.scope, environment: environment, kind: kind, source: source),
            eventType
        )
    }

    /// A subscription's period as its renewal credits it: its purchase, and the credit's stable `event_id`.
    private func renewal(
        _ transaction: AppleTransaction, app: AppScope, environment: AppleEnvironment, purchaseID: PurchaseID
    ) -> SubscriptionChange.Renewal {
        SubscriptionChange.Renewal(
            purchaseID: purchaseID, transactionID: transaction.transactionID, productID: transaction.productID ?? "",
            quantity: transaction.quantity,
            eventID: SubscriptionEvent.renewalID(app: app, environment: environment, purchaseID: purchaseID),
            revenue: Revenue.ofSale(transaction.value, environment: environment))
    }

    /// A purchase Apple reported, to credit by `receipt.unclaimed` if no job claims it in time; nil when
    /// `notifications.unclaimed_after_ms` is 0.
    private func reported(
        _ notification: AppleNotification, _ transaction: AppleTransaction, app: AppScope, purchaseID: PurchaseID
    ) -> ReportedPurchase? {
        guard let unclaimedAfter else { return nil }
        let dueAt = notification.notifiedAt.addingTimeInterval(Double(unclaimedAfter.milliseconds) / 1000)
        return ReportedPurchase(
            purchaseID: purchaseID, transactionID: transaction.transactionID,
            originalTransactionID: transaction.originalTransactionID, productID: transaction.productID ?? "",
            quantity: transaction.quantity, dueAt: dueAt,
            event: UnclaimedEvent.make(
                notification: notification, transaction: transaction, app: app, purchaseID: purchaseID, dueAt: dueAt),
            revenue: Revenue.ofSale(transaction.value, environment: notification.environment))
    }

    private func publishing(_ record: NotificationRecord) -> [OutboundRecord] {
        let event: StoredEvent? =
            switch record {
            case .recorded(let event, _), .replay(let event): event
            }
        return event.map { [$0.record(topic: resultsTopic, source: eventSource)] } ?? []
    }
}
