import Foundation
import HTTPServerKit
import Synchronization

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
        // The receipt's app's shared secret (an app the simulator does not know has none).
        if let secret = app(record.bundleID)?.sharedSecret, !record.ios6, body.password != secret {
            return .json(200, Self.encode(StatusOnly(status: 21004, environment: role)))
        }
        if record.ios6, let purchase = purchases.first {
            return .json(200, Self.encode(IOS6Response(status: 0, environment: role, receipt: IOS6Receipt(purchase))))
        }
        let now = Self.ms(Date())
        var response = AppReceiptResponse(
            status: 0, environment: role,
            receipt: AppReceipt(
                receiptType: role == "Production" ? "Production" : "ProductionSandbox", bundleId: record.bundleID,
                applicationVersion: "1", originalApplicationVersion: "1", receiptCreationDateMs: now,
                requestDateMs: now, inApp: purchases.map(InAppEntry.init)))
        let subscriptions = purchases.filter { $0.kind == .subscription }
        if !subscriptions.isEmpty {
            let latest = subscriptions.sorted { $0.purchaseDate > $1.purchaseDate }.map(InAppEntry.init)
            response.latestReceiptInfo = body.excludeOldTransactions == true ? Array(latest.prefix(1)) : latest
            response.latestReceipt = receiptData
            response.pendingRenewalInfo = subscriptions.map {
                PendingRenewal(
                    autoRenewProductId: $0.productID, productId: $0.productID,
                    originalTransactionId: $0.originalTransactionID, autoRenewStatus: "1")
            }
        }
        return .json(200, Self.encode(response))
    }

    static func encode(_ value: some Encodable) -> Data {
        // Apple's keys are snake_case: each body spells them in CodingKeys (convertToSnakeCase cost 4x the CPU).
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

// The structs below spell Apple's snake_case field names in their CodingKeys.

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

    enum CodingKeys: String, CodingKey {
        case status
        case environment
    }
}

private struct AppReceiptResponse: Encodable {
    let status: Int
    let environment: String
    let receipt: AppReceipt
    var latestReceiptInfo: [InAppEntry]?
    var latestReceipt: String?
    var pendingRenewalInfo: [PendingRenewal]?

    enum CodingKeys: String, CodingKey {
        case status
        case environment
        case receipt
        case latestReceiptInfo = "latest_receipt_info"
        case latestReceipt = "latest_receipt"
        case pendingRenewalInfo = "pending_renewal_info"
    }
}

private struct AppReceipt: Encodable {
    let receiptType: String
    let bundleId: String
    let applicationVersion: String
    let originalApplicationVersion: String
    let receiptCreationDateMs: String
    let requestDateMs: String
    let inApp: [InAppEntry]

    enum CodingKeys: String, CodingKey {
        case receiptType = "receipt_type"
        case bundleId = "bundle_id"
        case applicationVersion = "application_version"
        case originalApplicationVersion = "original_application_version"
        case receiptCreationDateMs = "receipt_creation_date_ms"
        case requestDateMs = "request_date_ms"
        case inApp = "in_app"
    }
}

private struct PendingRenewal: Encodable {
    let autoRenewProductId: String
    let productId: String
    let originalTransactionId: String
    let autoRenewStatus: String

    enum CodingKeys: String, CodingKey {
        case autoRenewProductId = "auto_renew_product_id"
        case productId = "product_id"
        case originalTransactionId = "original_transaction_id"
        case autoRenewStatus = "auto_renew_status"
    }
}

private struct InAppEntry: Encodable {
    let quantity: String
    let productId: String
    let transactionId: String
    let originalTransactionId: String
    let purchaseDate: String
    let purchaseDateMs: String
    let originalPurchaseDateMs: String
    let isTrialPeriod = "false"
    let inAppOwnershipType = "PURCHASED"
    let expiresDateMs: String?
    let expiresDate: String?
    let webOrderLineItemId: String?
    let cancellationDateMs: String?
    let cancellationReason: String?
    let appAccountToken: String?

    init(_ purchase: Purchase) {
        quantity = String(purchase.quantity)
        productId = purchase.productID
        transactionId = purchase.transactionID
        originalTransactionId = purchase.originalTransactionID
        purchaseDate = AppStoreSimulator.gmt(purchase.purchaseDate)
        purchaseDateMs = AppStoreSimulator.ms(purchase.purchaseDate)
        originalPurchaseDateMs = purchaseDateMs
        expiresDateMs = purchase.expiresDate.map(AppStoreSimulator.ms)
        expiresDate = purchase.expiresDate.map(AppStoreSimulator.gmt)
        webOrderLineItemId = purchase.expiresDate == nil ? nil : purchase.webOrderLineItemID
        cancellationDateMs = purchase.revocationDate.map(AppStoreSimulator.ms)
        cancellationReason = purchase.revocationDate == nil ? nil : String(purchase.revocationReason ?? 0)
        appAccountToken = purchase.appAccountToken
    }

    enum CodingKeys: String, CodingKey {
        case quantity
        case productId = "product_id"
        case transactionId = "transaction_id"
        case originalTransactionId = "original_transaction_id"
        case purchaseDate = "purchase_date"
        case purchaseDateMs = "purchase_date_ms"
        case originalPurchaseDateMs = "original_purchase_date_ms"
        case isTrialPeriod = "is_trial_period"
        case inAppOwnershipType = "in_app_ownership_type"
        case expiresDateMs = "expires_date_ms"
        case expiresDate = "expires_date"
        case webOrderLineItemId = "web_order_line_item_id"
        case cancellationDateMs = "cancellation_date_ms"
        case cancellationReason = "cancellation_reason"
        case appAccountToken = "app_account_token"
    }
}

private struct IOS6Response: Encodable {
    let status: Int
    let environment: String
    let receipt: IOS6Receipt

    enum CodingKeys: String, CodingKey {
        case status
        case environment
        case receipt
    }
}

/// The flat `receipt` of an iOS 6 transaction receipt.
private struct IOS6Receipt: Encodable {
    let bid: String
    let bvrs = "1"
    let itemId = "1"
    let productId: String
    let quantity: String
    let transactionId: String
    let originalTransactionId: String
    let uniqueIdentifier = "sim-device"
    let purchaseDateMs: String
    let originalPurchaseDateMs: String
    let cancellationDateMs: String?

    init(_ purchase: Purchase) {
        bid = purchase.bundleID
        productId = purchase.productID
        quantity = String(purchase.quantity)
        transactionId = purchase.transactionID
        originalTransactionId = purchase.originalTransactionID
        purchaseDateMs = AppStoreSimulator.ms(purchase.purchaseDate)
        originalPurchaseDateMs = purchaseDateMs
        cancellationDateMs = purchase.revocationDate.map(AppStoreSimulator.ms)
    }

    enum CodingKeys: String, CodingKey {
        case bid
        case bvrs
        case itemId = "item_id"
        case productId = "product_id"
        case quantity
        case transactionId = "transaction_id"
        case originalTransactionId = "original_transaction_id"
        case uniqueIdentifier = "unique_identifier"
        case purchaseDateMs = "purchase_date_ms"
        case originalPurchaseDateMs = "original_purchase_date_ms"
        case cancellationDateMs = "cancellation_date_ms"
    }
}
