import AppleVerification
import Foundation
import HTTPServerKit
import Synchronization
import Vocabulary

extension AppStoreSimulator {
    /// The admin API, for tests, benchmarks and the demo:
    ///   POST /admin/purchases {product_id, type: consumable|non_consumable|subscription,
    ///        environment: Production|Sandbox, quantity, app_account_token, bundle_id, receipt_style: app|ios6,
    ///        expires_in_seconds, restore_of, notify}  → {transaction_id, original_transaction_id, receipt,
    ///        signed_transaction}; notify: true also sends the purchase's ONE_TIME_CHARGE or SUBSCRIBED, as Apple
    ///        reports a purchase to the server whether or not the app ever tells its backend
    ///        restore_of: a transaction id; the new purchase is its StoreKit 1 restore on another device (a new
    ///        transaction id, the same original transaction, product, type and billing period)
    ///   POST /admin/notifications/config {url, retry_delays_ms, app_apple_id, history_page_size} (GET reads it)
    ///   POST /admin/refund {transaction_id, percentage: 0-100 (100), reason: 0|1 (0)} → sends REFUND
    ///   POST /admin/refunds {transaction_id}: a full refund (the older spelling)
    ///   POST /admin/reverse-refund {transaction_id} → sends REFUND_REVERSED
    ///   POST /admin/revoke {transaction_id}: Family Sharing revocation → sends REVOKE
    ///   POST /admin/consumption-request {transaction_id, reason} → sends CONSUMPTION_REQUEST
    ///   POST /admin/notify {type, subtype, transaction_id, environment} → sends any notification
    ///   POST /admin/rescind-consent {app_transaction_id, environment, bundle_id} → sends RESCIND_CONSENT
    ///   POST /admin/renew {transaction_id, period_seconds} → a new period of the subscription; sends DID_RENEW
    ///   POST /admin/fail-renewal {transaction_id, grace_period_seconds} → sends DID_FAIL_TO_RENEW
    ///   POST /admin/expire {transaction_id, subtype} → sends EXPIRED (GRACE_PERIOD_EXPIRED in a grace period)
    ///   POST /admin/renewal-status {transaction_id, auto_renew} → sends DID_CHANGE_RENEWAL_STATUS
    ///        (each sender answers {notification_uuid})
    ///   POST /admin/extensions/config {mass_delay_ms}: how long a mass extension runs before its subscribers are
    ///        extended and its summary sent (500 ms)
    ///   GET  /admin/notifications → [{notification_uuid, type, subtype, environment, transaction_id,
    ///        signed_payload, attempts: [{at, status, error}], delivered}]
    ///   GET  /admin/consumption → [{transaction_id, environment, body, status}]
    ///   GET  /admin/transactions/{id} → {transaction_id, order_id, app_account_token, finished}: what Set App
    ///        Account Token and Finish Transaction left
    ///   (POST /admin/purchases also takes customer (the Apple Account: Get Transaction History's scope; else one
    ///        of its own), order_id (else one is made up, as on an invoice), price (milliunits,
    ///        990), currency (USD), storefront (USA), offer_type, offer_identifier, offer_discount_type,
    ///        offer_period, billing_plan_type, commitment_periods and commitment_price (a monthly subscription within a
    ///        commitment); and answers order_id)
    ///   PUT  /admin/faults {latency_ms, latency_jitter_ms, error_rate, error_status, status_21005_rate, bundle_id,
    ///        rate_limit_rate, retry_after_seconds, retry_after_header, garbage_rate, drop_rate, api_error_rate,
    ///        api_error_code (4040002|4040004|4040006|5000001), outage_start_in_ms,
    ///        outage_seconds, outage_mode}
    ///   POST /admin/apps {bundle_id, app_apple_id, shared_secret, released (true)}: another app (Server API
    ///        tokens, limits, notifications and history are per app; an unreleased app's Production token: 401)
    ///   GET  /admin/stats → requests per endpoint; GET /admin/stats/times → when each Server API request
    ///   was taken, per environment and endpoint (ms), another app's lanes suffixed `@bundle_id`
    func admin(_ request: ServerRequest, segments: [String]) -> ServerReply {
        let body = (try? JSONSerialization.jsonObject(with: request.body) as? [String: Any]) ?? [:]
        switch (request.method, segments) {
        case ("POST", ["purchases"]):
            return createPurchase(body)
        case ("POST", ["notifications", "config"]), ("GET", ["notifications", "config"]):
            return notificationConfig(request, body: body)
        case ("POST", ["refund"]):
            return refund(body)
        case ("POST", ["refunds"]):
            // The older spelling: a full refund, answered as it always was (plus the notification's id).
            guard let id = body["transaction_id"] as? String else {
                return .json(400, Self.error(4000000, "transaction_id"))
            }
            let reply = refund(["transaction_id": id])
            guard case .respond(200, _, let answer, _) = reply,
                let fields = try? JSONSerialization.jsonObject(with: answer) as? [String: Any]
            else { return reply }
            return .json(
                200, Self.json(["refunded": id, "notification_uuid": fields["notification_uuid"] ?? NSNull()]))
        case ("POST", ["reverse-refund"]):
            return reverseRefund(body)
        case ("POST", ["revoke"]):
            return revoke(body)
        case ("POST", ["consumption-request"]):
            return consumptionRequest(body)
        case ("POST", ["rescind-consent"]):
            return rescindConsent(body)
        case ("POST", ["notify"]):
            return notify(body)
        case ("POST", ["renew"]):
            return renew(body)
        case ("POST", ["fail-renewal"]):
            return failRenewal(body)
        case ("POST", ["expire"]):
            return expire(body)
        case ("POST", ["renewal-status"]):
            return renewalStatus(body)
        case ("POST", ["extensions", "config"]):
            guard let delay = body["mass_delay_ms"].flatMap(Self.integer), (0...600_000).contains(delay) else {
                return .json(400, Self.error(4000000, "mass_delay_ms is 0 to 600000"))
            }
            state.withLock { $0.massExtensionDelay = .milliseconds(delay) }
            return .json(200, Self.json(["mass_delay_ms": delay]))
        case ("GET", ["notifications"]):
            return notificationList()
        case ("GET", ["consumption"]):
            return consumptionList()
        case (_, _) where segments.count == 2 && segments[0] == "transactions":  // GET (POST reads it too)
            return purchaseState(segments[1])
        case ("PUT", ["faults"]):
            var plan = FaultPlan()
            plan.latencyMs = body["latency_ms"] as? Double ?? 0
            plan.latencyJitterMs = body["latency_jitter_ms"] as? Double ?? 0
            plan.errorRate = body["error_rate"] as? Double ?? 0
            plan.errorStatus = body["error_status"] as? Int ?? 503
            plan.status21005Rate = body["status_21005_rate"] as? Double ?? 0
            plan.rateLimitRate = body["rate_limit_rate"] as? Double ?? 0
            plan.retryAfterSeconds = body["retry_after_seconds"] as? Double ?? 1
            plan.dropRate = body["drop_rate"] as? Double ?? 0
            plan.rateLimitPerSecond = body["rate_limit_per_second"] as? Int
            plan.retryAfterHeader = body["retry_after_header"] as? String
            plan.garbageRate = body["garbage_rate"] as? Double ?? 0
            plan.apiErrorRate = body["api_error_rate"] as? Double ?? 0
            plan.apiErrorCode = body["api_error_code"] as? Int ?? 4040004
            plan.bundleID = body["bundle_id"] as? String
            if let startIn = body["outage_start_in_ms"] as? Double {
                plan.outageStart = Date().addingTimeInterval(startIn / 1000)
                plan.outageSeconds = body["outage_seconds"] as? Double ?? 0
                plan.outageMode = body["outage_mode"] as? String ?? "http_5xx"
            }
            state.withLock { $0.faults = plan }
            return .json(200, (try? JSONEncoder().encode(plan)) ?? Data("{}".utf8))
        case ("POST", ["apps"]):
            return addApp(body)
        case ("GET", ["stats"]):
            return .json(200, Self.json(state.withLock { $0.requests }))
        case ("GET", ["stats", "times"]):
            // When each Server API request was taken (ms), per `production.transactionInfo`, ...
            return .json(200, Self.json(state.withLock { $0.served }))
        default:
            return .json(404, Self.error(4040000, "not found"))
        }
    }

    private func createPurchase(_ body: [String: Any]) -> ServerReply {
        guard let productID = body["product_id"] as? String, !productID.isEmpty else {
            return .json(400, Self.error(4000000, "product_id is required"))
        }
        guard let kind = Purchase.Kind(rawValue: body["type"] as? String ?? "consumable") else {
            return .json(400, Self.error(4000000, "type is consumable, non_consumable or subscription"))
        }
        let environment = body["environment"] as? String ?? "Production"
        guard environment == "Production" || environment == "Sandbox" else {
            return .json(400, Self.error(4000000, "environment is Production or Sandbox"))
        }
        let now = Date()
        let ios6 = body["receipt_style"] as? String == "ios6"
        let restoreOf = body["restore_of"] as? String
        let purchase = state.withLock { state -> Purchase? in
            state.nextTransaction += 1
            let id = String(state.nextTransaction)
            if let restoreOf {
                guard let restored = state.purchases[restoreOf] else { return nil }
                let purchase = Purchase(
                    transactionID: id, originalTransactionID: restored.originalTransactionID,
                    bundleID: restored.bundleID, productID: restored.productID, kind: restored.kind,
                    environment: restored.environment, quantity: restored.quantity,
                    appAccountToken: restored.appAccountToken, purchaseDate: restored.purchaseDate,
                    expiresDate: restored.expiresDate, revocationDate: restored.revocationDate,
                    revocationReason: restored.revocationReason, revocationType: restored.revocationType,
                    revocationPercentage: restored.revocationPercentage,
                    webOrderLineItemID: restored.webOrderLineItemID)
                var restore = purchase
                restore.orderID = restored.orderID
                restore.customer = restored.customer
                restore.price = restored.price
                restore.currency = restored.currency
                restore.storefront = restored.storefront
                state.purchases[id] = restore
                return restore
            }
            var purchase = Purchase(
                transactionID: id, originalTransactionID: id,
                bundleID: body["bundle_id"] as? String ?? configuration.bundleID,
                productID: productID, kind: kind, environment: environment, quantity: body["quantity"] as? Int ?? 1,
                appAccountToken: body["app_account_token"] as? String, purchaseDate: now,
                expiresDate: kind == .subscription
                    ? now.addingTimeInterval(body["expires_in_seconds"] as? Double ?? 2_592_000) : nil,
                revocationDate: nil, webOrderLineItemID: kind == .subscription ? id : nil)
            if body["family_shared"] as? Bool == true { purchase.ownership = "FAMILY_SHARED" }
            purchase.orderID = body["order_id"] as? String ?? Self.appleOrderID(id)
            // One customer per purchase unless named: a customer's history is what the test says they bought.
            purchase.customer = body["customer"] as? String ?? "customer-\(id)"
            if let price = (body["price"] as? NSNumber)?.int64Value { purchase.price = price }
            purchase.currency = body["currency"] as? String ?? purchase.currency
            purchase.storefront = body["storefront"] as? String ?? purchase.storefront
            purchase.offerType = body["offer_type"] as? Int
            purchase.offerIdentifier = body["offer_identifier"] as? String
            purchase.offerDiscountType = body["offer_discount_type"] as? String
            purchase.offerPeriod = body["offer_period"] as? String
            // A monthly subscription with a commitment: billing_plan_type MONTHLY, commitment_periods instalments
            // (12), commitment_price the price after it; the first instalment now.
            purchase.billingPlanType = body["billing_plan_type"] as? String
            if let periods = body["commitment_periods"] as? Int, (1...36).contains(periods) {
                let month = 2_592_000.0
                purchase.commitment = TransactionCommitmentInfo(
                    billingPeriodNumber: 1, totalBillingPeriods: periods,
                    commitmentExpiresDate: ((now.timeIntervalSince1970 + Double(periods) * month) * 1000).rounded(),
                    commitmentPrice: (body["commitment_price"] as? NSNumber)?.int64Value)
            }
            state.purchases[id] = purchase
            return purchase
        }
        guard let purchase else { return .json(404, Self.error(4040010, "restore_of: no such transaction")) }
        // The receipt as Apple makes it: a PKCS#7 app receipt signed by the test chain (an iOS 6 one: a
        // plist), known to verifyReceipt by its text.
        let receiptToken: String
        do {
            receiptToken =
                ios6
                ? SimulatedReceipts.transactionReceipt(purchase)
                : try SimulatedReceipts.appReceipt(
                    bundleID: purchase.bundleID, environment: purchase.environment, purchases: [purchase],
                    created: now, signer: receiptSigner)
        } catch {
            return .json(500, Self.error(5000000, "signing the receipt failed"))
        }
        state.withLock { state in
            state.receipts[receiptToken] = ReceiptRecord(
                environment: purchase.environment, bundleID: purchase.bundleID,
                transactionIDs: [purchase.transactionID],
                ios6: ios6)
        }
        guard let signed = try? signedTransaction(purchase) else {
            return .json(500, Self.error(5000000, "signing failed"))
        }
        var answer: [String: Any] = [
            "transaction_id": purchase.transactionID, "original_transaction_id": purchase.originalTransactionID,
            "receipt": receiptToken, "signed_transaction": signed, "environment": environment,
            "order_id": purchase.orderID,
        ]
        if body["notify"] as? Bool == true { answer["notification_uuid"] = reportPurchase(purchase) ?? NSNull() }
        return .json(201, Self.json(answer))
    }

    /// GET /admin/notifications: every notification made, oldest first, with its delivery attempts.
    func notificationList() -> ServerReply {
        let list: [[String: Any]] = sender.records.map { record in
            [
                "notification_uuid": record.uuid, "type": record.type, "subtype": record.subtype ?? NSNull(),
                "environment": record.environment, "transaction_id": record.transactionID ?? NSNull(),
                "signed_payload": record.signedPayload, "delivered": record.delivered,
                "attempts": record.attempts.map { attempt -> [String: Any] in
                    var entry: [String: Any] = [
                        "at": RFC3339.format(attempt.at), "status": attempt.status.map { $0 as Any } ?? NSNull(),
                    ]
                    if let error = attempt.error { entry["error"] = error }
                    return entry
                },
            ]
        }
        return .json(200, Self.json(list))
    }

    /// GET /admin/consumption: every Send Consumption Information request accepted (202), oldest first.
    func consumptionList() -> ServerReply {
        let list: [[String: Any]] = state.withLock { $0.consumption }.map { record in
            [
                "transaction_id": record.transactionID, "environment": record.environment,
                "body": (try? JSONSerialization.jsonObject(with: record.body)) ?? NSNull(), "status": record.status,
            ]
        }
        return .json(200, Self.json(list))
    }
}
