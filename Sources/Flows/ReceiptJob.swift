public import AppleVerification
import Crypto
public import Foundation
import Observability
import Vocabulary

/// A verification job, as a front-end service submits it (docs/contract.md §2), validated.
public struct ReceiptJob: Sendable, Equatable {
    public var jobID: String
    public var orderID: String
    public var userID: String
    public var productID: String
    public var quantity: Int
    /// Lower-cased UUID text, when the order has one.
    public var appAccountToken: String?
    public var proof: PurchaseProof
    /// The id the app reported; beside a receipt it selects the entry to check.
    public var transactionID: String?
    public var submittedAt: Date?
    /// Which configured app the purchase is for (`bundle_id`); nil: the default app.
    public var bundleID: String? = nil

    /// The SHA-256 (hex) of what the job asks: its order, player, product, quantity, account token, proof,
    /// transaction id and app (not its job id or submission time). A job delivered again has the same; a
    /// `job_id` reused for other content has another, and so is another job (docs/contract.md section 2).
    public var fingerprint: String {
        let proofKind: String
        let proofText: String
        switch proof {
        case .receipt(let receipt): (proofKind, proofText) = ("receipt", receipt)
        case .signedTransaction(let jws): (proofKind, proofText) = ("signed_transaction", jws)
        case .transactionID(let id): (proofKind, proofText) = ("transaction_id", id)
        }
        let parts = [
            "job-v1", orderID, userID, productID, String(quantity), appAccountToken ?? "", transactionID ?? "",
            bundleID ?? "", proofKind,
        ]
        // The short fields in one buffer; the proof (a receipt of kilobytes) hashed in place behind them.
        var head: [UInt8] = []
        head.reserveCapacity(parts.reduce(0) { $0 + $1.utf8.count + 1 })
        for part in parts {
            head.append(contentsOf: part.utf8)
            head.append(0)
        }
        return SHA256Digest.hex(head, thenUTF8: proofText)
    }
}

/// The outcome of reading one message of the jobs topic.
public enum JobParseResult: Sendable, Equatable {
    case job(ReceiptJob)
    /// A JSON object with an `order_id` but a missing or invalid field: denied `malformed_job` and copied
    /// to the DLQ. Fields that could be read are kept for the deny event.
    case invalidJob(JobIdentity, reason: String)
    /// Not a JSON object, too large, or without a usable `order_id`: to the DLQ unchanged.
    case unreadable(reason: String)
}

/// What identifies a job in its events, as far as it could be read.
public struct JobIdentity: Sendable, Equatable {
    public var jobID: String
    public var orderID: String
    public var userID: String
    public var productID: String
    public var quantity: Int
    /// The job's `bundle_id` when it could be read (its game's slots serve even a job that is not valid).
    public var bundleID: String? = nil
}

public enum JobParser {
    /// Reads one message value. `maxBytes` is `jobs.max_bytes`; `transactionIDRequiresAccountToken` is
    /// `apple.transaction_id_requires_account_token` (a bare transaction id must come with the order's
    /// `app_account_token`). Error reasons name the field and never repeat a receipt or a signed transaction.
    ///
    /// Lengths are counted in UTF-8 bytes, as the ledger's indexes count them (one letter and 3,000
    /// combining marks is one "character" and 6,001 bytes).
    public static func parse(_ value: [UInt8], maxBytes: Int, transactionIDRequiresAccountToken: Bool = true)
        -> JobParseResult
    {
        guard value.count <= maxBytes else {
            return .unreadable(reason: "the message is \(value.count) bytes, over jobs.max_bytes (\(maxBytes))")
        }
        // One pass of the scanner, which checks JSON's grammar with bounded nesting (a hostile depth never
        // reaches a recursive parser), and UTF-8: what a JSON parser would refuse is refused here too. No second
        // parse into a tree: the fields are read from the members' bytes (JSONSerialization was a tenth of a
        // job's CPU).
        guard let members = JSONObjectScanner.members(value), UTF8Text.isValid(value) else {
            return .unreadable(reason: "the message is not a JSON object (or nests deeper than 64)")
        }
        // A key given twice would be read one way here and another way by whoever reads the job next.
        if let key = JSONObjectScanner.repeatedKey(members) {
            return .unreadable(reason: "the key \(JSONString.quote(UTF8Text.prefix(key, bytes: 64))) appears twice")
        }
        let object = JobFields(members: members)
        guard let orderID = text(object, "order_id", 1...128) else {
            return .unreadable(
                reason: "order_id is missing or not a string of 1 to 128 bytes without control characters")
        }
        // An id that is too long or holds control characters (a NUL above all: database parameters are C
        // strings; PostgreSQL's index rows are limited) is never a ledger key.
        let readJobID = text(object, "job_id", 1...128)
        var identity = JobIdentity(
            jobID: readJobID ?? "", orderID: orderID,
            userID: object.string("user_id") ?? "", productID: object.string("product_id") ?? "", quantity: 1,
            bundleID: text(object, "bundle_id", 1...255))
        func invalid(_ reason: String) -> JobParseResult { .invalidJob(identity, reason: reason) }

        guard let jobID = readJobID else {
            return invalid("job_id must be a string of 1 to 128 bytes without control characters")
        }
        // Reserved for support's credits (`receipt-worker credit`), whose results the ledger keeps for good.
        guard !SupportJobID.isReserved(jobID) else {
            // Not a usable job id: the deny says "", and nothing is kept under it (the ledger keeps support's
            // results for good, so a client could fill it; an event with a support: id would pass for support's).
            identity.jobID = ""
            return invalid("job_id must not start with \(SupportJobID.prefix) (reserved)")
        }
        // Reserved for credits of purchases no job claimed (`receipt.unclaimed`): a job's order must never be one.
        guard !UnclaimedOrderID.isReserved(orderID) else {
            return invalid("order_id must not start with \(UnclaimedOrderID.prefix) (reserved)")
        }
        guard let userID = text(object, "user_id", 1...128) else {
            return invalid("user_id must be a string of 1 to 128 bytes without control characters")
        }
        guard let productID = text(object, "product_id", 1...255) else {
            return invalid("product_id must be a string of 1 to 255 bytes without control characters")
        }
        // The number as written: 1.0, 1e2, true and "1" are not an integer quantity.
        var quantity = 1
        if let raw = object.value("quantity") {
            guard JSONObjectScanner.isPlainInteger(raw), let number = Int(String(decoding: raw, as: UTF8.self)),
                (1...1000).contains(number)
            else { return invalid("quantity must be an integer from 1 to 1000") }
            quantity = number
        }
        identity.quantity = quantity
        var token: String?
        if object.value("app_account_token") != nil {
            guard let text = object.string("app_account_token"), let uuid = UUID(uuidString: text) else {
                return invalid("app_account_token must be a UUID")
            }
            token = uuid.uuidString.lowercased()
        }
        let receipt = object.string("receipt")
        let signed = object.string("signed_transaction")
        let transactionID = object.string("transaction_id")
        for (key, present) in [("receipt", receipt), ("signed_transaction", signed), ("transaction_id", transactionID)]
        where object.value(key) != nil && (present?.isEmpty ?? true) {
            return invalid("\(key) must be a non-empty string")
        }
        // It goes into the App Store Server API's URL path and into the ledger: Apple's ids are digits.
        if let transactionID, transactionID.utf8.count > 64 || !transactionID.utf8.allSatisfy(isIDCharacter) {
            return invalid("transaction_id must be 1 to 64 letters or digits")
        }
        let proof: PurchaseProof
        switch (receipt, signed, transactionID) {
        case (let receipt?, nil, _):
            // Plain base64 (every receipt Apple makes) needs no decoding to be known as base64.
            guard Base64Text.isPlain(receipt) || Data(base64Encoded: receipt, options: .ignoreUnknownCharacters) != nil
            else {
                return invalid("receipt is not base64")
            }
            proof = .receipt(receipt)
        case (nil, let signed?, nil):
            // Two dots, counted in bytes: splitting the String walked a few kilobytes Character by Character.
            var dots = 0
            for byte in signed.utf8 where byte == UInt8(ascii: ".") { dots += 1 }
            guard dots == 2 else {
                return invalid("signed_transaction is not a compact JWS")
            }
            proof = .signedTransaction(signed)
        case (nil, nil, let id?):
            // A transaction id is no proof of ownership (ids are nearly sequential): the order's account
            // token, which Apple keeps on the transaction, must vouch for it.
            guard token != nil || !transactionIDRequiresAccountToken else {
                return invalid(
                    "a transaction_id alone needs app_account_token (apple.transaction_id_requires_account_token)")
            }
            proof = .transactionID(id)
        case (nil, nil, nil):
            return invalid("one of receipt, signed_transaction or transaction_id is required")
        default:
            return invalid(
                "give one of receipt, signed_transaction or transaction_id (transaction_id may go beside receipt)")
        }
        var bundleID: String?
        if object.value("bundle_id") != nil {
            guard let text = text(object, "bundle_id", 1...255) else {
                return invalid("bundle_id must be a string of 1 to 255 bytes without control characters")
            }
            bundleID = text
        }
        var submittedAt: Date?
        if object.value("submitted_at") != nil {
            guard let text = object.string("submitted_at"), let date = RFC3339.parse(text) else {
                return invalid("submitted_at must be an RFC 3339 time")
            }
            submittedAt = date
        }
        return .job(
            ReceiptJob(
                jobID: jobID, orderID: orderID, userID: userID, productID: productID, quantity: quantity,
                appAccountToken: token, proof: proof, transactionID: transactionID, submittedAt: submittedAt,
                bundleID: bundleID))
    }

    private static func text(_ object: JobFields, _ key: String, _ bytes: ClosedRange<Int>) -> String? {
        guard let value = object.string(key), bytes.contains(value.utf8.count), !hasControlCharacters(value)
        else { return nil }
        return value
    }

    private static func isIDCharacter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    package static func hasControlCharacters(_ value: String) -> Bool {
        value.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }
}

/// A job's members, as the scanner read them (each key once): each value's bytes as written. A job has about ten,
/// found by walking them (a dictionary's table and a hash of every key and of every name looked up cost more); a
/// job of many more (a hostile one: thousands of keys walked at each of twenty lookups) is read by a dictionary.
private struct JobFields {
    private let members: [JSONObjectScanner.Member]
    private let byKey: [String: ArraySlice<UInt8>]?

    init(members: [JSONObjectScanner.Member]) {
        self.members = members
        byKey =
            members.count > JSONObjectScanner.fewMembers
            ? Dictionary(members.map { ($0.key, $0.raw) }, uniquingKeysWith: { first, _ in first }) : nil
    }

    private func raw(_ key: String) -> ArraySlice<UInt8>? {
        if let byKey { return byKey[key] }
        return members.first { $0.key == key }?.raw
    }

    /// The value's bytes, nil when absent or `null` (a field given as null is absent).
    func value(_ key: String) -> ArraySlice<UInt8>? {
        guard let bytes = raw(key), !bytes.elementsEqual("null".utf8) else { return nil }
        return bytes
    }

    /// The value when it is a JSON string.
    func string(_ key: String) -> String? {
        guard let bytes = raw(key), bytes.first == UInt8(ascii: "\"") else { return nil }
        return JSONStringToken.text(bytes)
    }
}
