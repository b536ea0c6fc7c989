import Foundation

extension AppStoreSimulator {
    /// verifyReceipt as Apple documents it: HTTP 200 with `status` in the body; 21007 for a sandbox receipt
    /// sent to production, 21008 the other way; millisecond dates as strings.
    func verifyReceipt(_ request: ServerRequest, role: String) -> ServerReply {
        guard let body = try? JSONSerialization.jsonObject(with: request.body) as? [String: Any] else {
            return .json(200, Self.json(["status": 21000]))
        }
        guard let receiptData = body["receipt-data"] as? String, !receiptData.isEmpty else {
            return .json(200, Self.json(["status": 21002]))
        }
        let excludeOld = body["exclude-old-transactions"] as? Bool ?? false
        let (record, purchases) = state.withLock { state -> (ReceiptRecord?, [Purchase]) in
            guard let record = state.receipts[receiptData] else { return (nil, []) }
            return (record, record.transactionIDs.compactMap { state.purchases[$0] })
        }
        guard let record else { return .json(200, Self.json(["status": 21002])) }
        if record.environment != role {
            return .json(200, Self.json(["status": record.environment == "Sandbox" ? 21007 : 21008]))
        }
        if let secret = configuration.sharedSecret, !record.ios6, (body["password"] as? String) != secret {
            return .json(200, Self.json(["status": 21004, "environment": role]))
        }
        if record.ios6, let purchase = purchases.first {
            return .json(200, Self.json(["status": 0, "environment": role, "receipt": ios6Receipt(purchase)]))
        }
        let entries = purchases.map(inAppEntry)
        var response: [String: Any] = [
            "status": 0, "environment": role,
            "receipt": [
                "receipt_type": role == "Production" ? "Production" : "ProductionSandbox",
                "bundle_id": record.bundleID, "application_version": "1", "original_application_version": "1",
                "receipt_creation_date_ms": Self.ms(Date()), "request_date_ms": Self.ms(Date()),
                "in_app": entries,
            ] as [String: Any],
        ]
        let subscriptions = purchases.filter { $0.kind == .subscription }
        if !subscriptions.isEmpty {
            let latest = subscriptions.sorted { $0.purchaseDate > $1.purchaseDate }.map(inAppEntry)
            response["latest_receipt_info"] = excludeOld ? Array(latest.prefix(1)) : latest
            response["latest_receipt"] = receiptData
            response["pending_renewal_info"] = subscriptions.map { purchase in
                ["auto_renew_product_id": purchase.productID, "product_id": purchase.productID,
                 "original_transaction_id": purchase.originalTransactionID, "auto_renew_status": "1"]
            }
        }
        return .json(200, Self.json(response))
    }

    private func inAppEntry(_ purchase: Purchase) -> [String: Any] {
        var entry: [String: Any] = [
            "quantity": String(purchase.quantity), "product_id": purchase.productID,
            "transaction_id": purchase.transactionID, "original_transaction_id": purchase.originalTransactionID,
            "purchase_date": Self.gmt(purchase.purchaseDate), "purchase_date_ms": Self.ms(purchase.purchaseDate),
            "original_purchase_date_ms": Self.ms(purchase.purchaseDate), "is_trial_period": "false",
            "in_app_ownership_type": "PURCHASED",
        ]
        if let expires = purchase.expiresDate {
            entry["expires_date_ms"] = Self.ms(expires)
            entry["expires_date"] = Self.gmt(expires)
            entry["web_order_line_item_id"] = purchase.transactionID
        }
        if let revoked = purchase.revocationDate {
            entry["cancellation_date_ms"] = Self.ms(revoked)
            entry["cancellation_reason"] = "0"
        }
        if let token = purchase.appAccountToken { entry["app_account_token"] = token }
        return entry
    }

    /// The flat `receipt` of an iOS 6 transaction receipt.
    private func ios6Receipt(_ purchase: Purchase) -> [String: Any] {
        var receipt: [String: Any] = [
            "bid": purchase.bundleID, "bvrs": "1", "item_id": "1", "product_id": purchase.productID,
            "quantity": String(purchase.quantity), "transaction_id": purchase.transactionID,
            "original_transaction_id": purchase.originalTransactionID, "unique_identifier": "sim-device",
            "purchase_date_ms": Self.ms(purchase.purchaseDate), "original_purchase_date_ms": Self.ms(purchase.purchaseDate),
        ]
        if let revoked = purchase.revocationDate { receipt["cancellation_date_ms"] = Self.ms(revoked) }
        return receipt
    }

    static func ms(_ date: Date) -> String { String(Int64(date.timeIntervalSince1970 * 1000)) }

    static func gmt(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d Etc/GMT", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
    }
}
