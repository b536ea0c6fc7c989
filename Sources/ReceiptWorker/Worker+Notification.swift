import AppleVerification
import Foundation
import Kafka
import Ledger
import Observability

extension Worker {
    /// One record of `topics.notifications`: verified again (anyone who can write to the topic could have
    /// written it), then the purchase's grant is looked up and the notification's change and event are
    /// stored once per notification id; the event is published keyed by the granted order. A notification
    /// handled before publishes its first event again (the same id), so Apple's retries, re-deliveries and
    /// backfills publish nothing new.
    func handleNotification(_ ticket: JobTicket) async -> JobEnd {
        let notification: AppleNotification
        switch AppleNotification.verify(body: Data(ticket.message.value), with: apple.signedData) {
        case .verified(let verified): notification = verified
        case .environmentNotAllowed(let type):
            metrics.notificationProcessed(type: type, outcome: "ignored").increment()
            return .answered
        case .rejected(let reason):
            return await deadLetter(ticket, reason: "malformed_job", error: "notification: \(reason)", attempts: 0)
        }
        switch await retrying(
            "ledger_lookup", ticket, stage: metrics.ledgerLookup,
            { try await self.ledger.storedNotification(id: notification.id) })
        {
        case .failure(let failure):
            return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: 0)
        case .success(let lookup):
            guard let lookup else { return .redeliver }
            if let handled = lookup {
                // Handled before: its event again, unchanged (or nothing, if it had none).
                metrics.notificationProcessed(type: notification.type, outcome: "replayed").increment()
                guard let stored = handled else { return .answered }
                return await publishNotificationEvent(ticket, stored)
            }
        }
        let eventType: String
        switch notification.type {
        case "REFUND", "REVOKE": eventType = NotificationEvent.revokedType
        case "REFUND_REVERSED": eventType = NotificationEvent.reinstatedType
        case "CONSUMPTION_REQUEST": eventType = NotificationEvent.consumptionRequestedType
        default:
            // Kept on the topic for whoever wants it; nothing to do here.
            metrics.notificationProcessed(type: notification.type, outcome: "ignored").increment()
            return .answered
        }
        guard let signed = notification.transaction, let transactionID = signed.transactionId,
            let transaction = try? AppleTransaction(signed)
        else {
            metrics.notificationProcessed(type: notification.type, outcome: "ignored").increment()
            return .answered
        }
        let purchaseID = Self.ledgerPurchaseID(transaction.purchaseIdentity)
        let found: GrantRecord?
        switch await retrying(
            "ledger_lookup", ticket, stage: metrics.ledgerLookup,
            { try await self.ledger.grant(purchaseID: purchaseID, transactionID: transactionID) })
        {
        case .success(let record?): found = record
        case .success(nil): return .redeliver
        case .failure(let failure):
            return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: 0)
        }
        // Never granted here (another system's purchase, or refunded before any job presented it): no event.
        // A reversal of a purchase that is not revoked changes nothing either.
        guard let grant = found, eventType != NotificationEvent.reinstatedType || grant.revoked else {
            logger.info(
                "notification about a purchase not granted here (or not revoked); no event",
                ["notification_id": notification.id, "type": notification.type, "transaction_id": transactionID])
            return await recordNotification(ticket, notification, change: .none, event: nil, outcome: "not_granted")
        }
        let event = NotificationEvent(
            type: eventType, notification: notification, grant: Self.grantFields(grant, transaction: signed))
        let change: PurchaseChange
        switch eventType {
        case NotificationEvent.revokedType: change = .revoke(purchaseID: purchaseID, transactionID: transactionID)
        case NotificationEvent.reinstatedType:
            change = .reinstate(purchaseID: purchaseID, transactionID: transactionID)
        default:
            change = .consumptionRequest(
                transactionID: transactionID,
                respondBy: notification.notifiedAt.addingTimeInterval(NotificationEvent.consumptionDeadline))
        }
        return await recordNotification(ticket, notification, change: change, event: event, outcome: "published")
    }

    /// Stores the notification's change and event once, then publishes the event (or the first handling's).
    private func recordNotification(
        _ ticket: JobTicket, _ notification: AppleNotification, change: PurchaseChange, event: NotificationEvent?,
        outcome: String
    ) async -> JobEnd {
        let json = event?.json
        switch await retrying(
            "ledger_record", ticket, stage: metrics.ledgerRecord,
            { try await self.ledger.recordNotification(id: notification.id, change: change, event: json) })
        {
        case .success(.recorded?):
            metrics.notificationProcessed(type: notification.type, outcome: outcome).increment()
            guard let event else { return .answered }
            logger.info(
                "purchase event", ["type": event.type, "order_id": event.orderID, "notification_id": notification.id])
            return await publishNotificationEvent(
                ticket, event.json, headers: event.headers(source: configuration.eventSource))
        case .success(.replay(let stored)?):
            metrics.notificationProcessed(type: notification.type, outcome: "replayed").increment()
            guard let stored else { return .answered }
            return await publishNotificationEvent(ticket, stored)
        case .success(nil): return .redeliver
        case .failure(let failure):
            return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: 0)
        }
    }

    private func publishNotificationEvent(_ ticket: JobTicket, _ json: Data, headers: [KafkaHeader]? = nil) async
        -> JobEnd
    {
        let key = ((try? JSONSerialization.jsonObject(with: json)) as? [String: Any])?["order_id"] as? String ?? ""
        let headers = headers ?? NotificationEvent.headers(storedJSON: json, source: configuration.eventSource)
        return await publishResult(ticket, json, key: key, headers: headers) ? .answered : .redeliver
    }

    /// The granted order's user, product and quantity, from the grant's stored event; Apple's transaction
    /// (and no user id) for a grant recorded before the ledger kept events.
    static func grantFields(_ grant: GrantRecord, transaction: JWSTransaction) -> NotificationEvent.Grant {
        let stored = grant.event.flatMap { (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any] } ?? [:]
        return NotificationEvent.Grant(
            orderID: grant.orderID, userID: stored["user_id"] as? String ?? "",
            productID: stored["product_id"] as? String ?? transaction.productId ?? "",
            quantity: stored["quantity"] as? Int ?? transaction.quantity ?? 1)
    }
}
