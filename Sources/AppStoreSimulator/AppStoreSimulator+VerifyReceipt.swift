import Foundation
import HTTPServerKit

extension AppStoreSimulator {
    /// verifyReceipt as Apple documents it: HTTP 200 with `status` in the body; 21007 for a sandbox receipt
    /// sent to production, 21008 the other way; millisecond dates as strings. Codable structs rather than
    /// JSONSerialization: this is the benchmark's hot path.
    func verifyReceipt(_ request: ServerRequest, role: String) -> ServerReply {
        guard let body = try? JSONDecoder().decode(VerifyReceiptRequest.self, from: request.body) else {
            return .json(200, Self.encode(StatusOnly(status: 21000, environment: nil)))
        }
        guard let receiptData = body.receiptData, !receiptData.isEmpty else {
            return .json(200, Self.encode(StatusOnly(status: 21002, environment: nil)))
        }
        let (record, purchases) = state.withLock { state -> (ReceiptRecord?, [Purchase]) in
            guard let record = state.receipts[receiptData] else { return (nil, []) }
            return (record, record.transactionIDs.compactMap { state.purchases[$0] })
        }
        guard let record else { return .json(200, Self.encode(StatusOnly(status: 21002, environment: nil))) }
        if record.environment != role {
            return .json(
                200, Self.encode(StatusOnly(status: record.environment == "Sandbox" ? 21007 : 21008, environment: nil)))
        }
        if let secret = configuration.sharedSecret, !record.ios6, body.password != secret {
            return .json(200, Self.encode(StatusOnly(status: 21004, environment: role)))
        }
        if record.ios6, let purchase = purchases.first {
            return .json(200, Self.encode(IOS6Response(status: 0, environment: role, receipt: IOS6Receipt(purchase))))
        }
        let now = Self.ms(Date())
        var response = AppReceiptResponse(
            status: 0, environment: role,
            receipt: AppReceipt(
                receipt_type: role == "Production" ? "Production" : "ProductionSandbox", bundle_id: record.bundleID,
                application_version: "1", original_application_version: "1", receipt_creation_date_ms: now,
                request_date_ms: now, in_app: purchases.map(InAppEntry.init)))
        let subscriptions = purchases.filter { $0.kind == .subscription }
        if !subscriptions.isEmpty {
            let latest = subscriptions.sorted { $0.purchaseDate > $1.purchaseDate }.map(InAppEntry.init)
            response.latest_receipt_info = body.excludeOldTransactions == true ? Array(latest.prefix(1)) : latest
            response.latest_receipt = receiptData
            response.pending_renewal_info = subscriptions.map {
                PendingRenewal(
                    auto_renew_product_id: $0.productID, product_id: $0.productID,
                    original_transaction_id: $0.originalTransactionID, auto_renew_status: "1")
            }
        }
        return .json(200, Self.encode(response))
    }

    static func encode(_ value: some Encodable) -> Data {
        (try? JSONEncoder().encode(value)) ?? Data("{}".utf8)
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

// The structs below use Apple's field names, snake_case as on the wire, so no CodingKeys are needed.

private struct VerifyReceiptRequest: Decodable {
    let receiptData: String?
    let password: String?
    let excludeOldTransactions: Bool?

    enum CodingKeys: String, CodingKey {
        case receiptData = "receipt-data", password, excludeOldTransactions = "exclude-old-transactions"
    }
}

private struct StatusOnly: Encodable {
    let status: Int
    let environment: String?
}

private struct AppReceiptResponse: Encodable {
    let status: Int
    let environment: String
    let receipt: AppReceipt
    var latest_receipt_info: [InAppEntry]?
    var latest_receipt: String?
    var pending_renewal_info: [PendingRenewal]?
}

private struct AppReceipt: Encodable {
    let receipt_type: String
    let bundle_id: String
    let application_version: String
    let original_application_version: String
    let receipt_creation_date_ms: String
    let request_date_ms: String
    let in_app: [InAppEntry]
}

private struct PendingRenewal: Encodable {
    let auto_renew_product_id: String
    let product_id: String
    let original_transaction_id: String
    let auto_renew_status: String
}

private struct InAppEntry: Encodable {
    let quantity: String
    let product_id: String
    let transaction_id: String
    let original_transaction_id: String
    let purchase_date: String
    let purchase_date_ms: String
    let original_purchase_date_ms: String
    let is_trial_period = "false"
    let in_app_ownership_type = "PURCHASED"
    let expires_date_ms: String?
    let expires_date: String?
    let web_order_line_item_id: String?
    let cancellation_date_ms: String?
    let cancellation_reason: String?
    let app_account_token: String?

    init(_ purchase: Purchase) {
        quantity = String(purchase.quantity)
        product_id = purchase.productID
        transaction_id = purchase.transactionID
        original_transaction_id = purchase.originalTransactionID
        purchase_date = AppStoreSimulator.gmt(purchase.purchaseDate)
        purchase_date_ms = AppStoreSimulator.ms(purchase.purchaseDate)
        original_purchase_date_ms = purchase_date_ms
        expires_date_ms = purchase.expiresDate.map(AppStoreSimulator.ms)
        expires_date = purchase.expiresDate.map(AppStoreSimulator.gmt)
        web_order_line_item_id = purchase.expiresDate == nil ? nil : purchase.transactionID
        cancellation_date_ms = purchase.revocationDate.map(AppStoreSimulator.ms)
        cancellation_reason = purchase.revocationDate == nil ? nil : "0"
        app_account_token = purchase.appAccountToken
    }
}

private struct IOS6Response: Encodable {
    let status: Int
    let environment: String
    let receipt: IOS6Receipt
}

/// The flat `receipt` of an iOS 6 transaction receipt.
private struct IOS6Receipt: Encodable {
    let bid: String
    let bvrs = "1"
    let item_id = "1"
    let product_id: String
    let quantity: String
    let transaction_id: String
    let original_transaction_id: String
    let unique_identifier = "sim-device"
    let purchase_date_ms: String
    let original_purchase_date_ms: String
    let cancellation_date_ms: String?

    init(_ purchase: Purchase) {
        bid = purchase.bundleID
        product_id = purchase.productID
        quantity = String(purchase.quantity)
        transaction_id = purchase.transactionID
        original_transaction_id = purchase.originalTransactionID
        purchase_date_ms = AppStoreSimulator.ms(purchase.purchaseDate)
        original_purchase_date_ms = purchase_date_ms
        cancellation_date_ms = purchase.revocationDate.map(AppStoreSimulator.ms)
    }
}
