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
        switch AppleNotification.verify(body: Data(ticket.message.value), apps: apps) {
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
        // A family member's access revoked is that member's transaction, not the purchaser's purchase.
        let familyShared = notification.type == "REVOKE" || signed.inAppOwnershipType == "FAMILY_SHARED"
        let purchaseID = familyShared ? transactionID : Self.ledgerPurchaseID(transaction.purchaseIdentity)
        let at = notification.notifiedAt
        let change: PurchaseChange =
            switch eventType {
            case NotificationEvent.revokedType: .revoke(purchaseID: purchaseID, transactionID: transactionID, at: at)
            case NotificationEvent.reinstatedType:
                .reinstate(purchaseID: purchaseID, transactionID: transactionID, at: at)
            default:
                .consumptionRequest(
                    transactionID: transactionID,
                    respondBy: at.addingTimeInterval(NotificationEvent.consumptionDeadline))
            }
        // Looked up and recorded together, again from the lookup when a grant of the purchase appeared or
        // changed hands in between (the ledger says so): the event always names the order the ledger holds.
        let handled = await retrying("ledger_record", ticket, stage: metrics.ledgerRecord) {
            () async throws -> (NotificationRecord, granted: Bool) in
            let found = try await self.ledger.grant(purchaseID: purchaseID, transactionID: transactionID)
            let granted = found?.grantedEvent ?? [:]  // read once: environment, user, product, quantity
            let grant = found.flatMap { Self.sameEnvironment(granted, notification) ? $0 : nil }
            let event = grant.map {
                NotificationEvent(
                    type: eventType, notification: notification,
                    grant: Self.grantFields($0, granted, transaction: signed))
            }
            let record = try await self.ledger.recordNotification(
                id: notification.id, change: change, event: event?.json, grantedOrder: grant?.orderID)
            return (record, grant != nil)
        }
        switch handled {
        case .success(let result?):
            switch result.0 {
            case .recorded(let event?):
                metrics.notificationProcessed(type: notification.type, outcome: "published").increment()
                logger.info("purchase event", ["type": eventType, "notification_id": notification.id])
                return await publishNotificationEvent(ticket, event)
            case .recorded(nil):
                // Never granted here (another system's purchase, or refunded before any job presented it: the
                // ledger remembers the refund), or nothing changed (a second refund, a stale change).
                metrics.notificationProcessed(
                    type: notification.type, outcome: result.granted ? "ignored" : "not_granted"
                ).increment()
                return .answered
            case .replay(let stored):
                metrics.notificationProcessed(type: notification.type, outcome: "replayed").increment()
                guard let stored else { return .answered }
                return await publishNotificationEvent(ticket, stored)
            }
        case .success(nil): return .redeliver
        case .failure(let failure):
            return await deadLetter(ticket, reason: "malformed_job", error: failure.reason, attempts: 0)
        }
    }

    /// A Sandbox notification is about a Sandbox grant, a Production one about a Production grant (the same
    /// transaction id in the other environment is another purchase). A grant whose event says nothing passes.
    static func sameEnvironment(_ stored: [String: Any], _ notification: AppleNotification) -> Bool {
        guard let granted = stored["environment"] as? String, let environment = notification.environment else {
            return true
        }
        return granted == environment.rawValue
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
    static func grantFields(_ grant: GrantRecord, _ stored: [String: Any], transaction: JWSTransaction)
        -> NotificationEvent.Grant
    {
        NotificationEvent.Grant(
            orderID: grant.orderID, userID: stored["user_id"] as? String ?? "",
            productID: stored["product_id"] as? String ?? transaction.productId ?? "",
            quantity: stored["quantity"] as? Int ?? transaction.quantity ?? 1)
    }
}

extension GrantRecord {
    /// The grant's event as published (empty for a grant recorded before the ledger kept events).
    var grantedEvent: [String: Any] {
        event.flatMap { (try? JSONSerialization.jsonObject(with: $0)) as? [String: Any] } ?? [:]
    }
}
