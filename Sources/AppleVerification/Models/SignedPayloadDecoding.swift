import Foundation
import Vocabulary

// The signed payloads read from their JSON with `JSONObjectScanner` and a switch over the keys: JSONDecoder
// took a tenth of the notification receiver's CPU (two payloads per notification). The result is the one
// the models' Decodable conformances give (unknown keys ignored, `null` as absent, a value of the wrong
// type refused), except that an integer field refuses `1.0` and `1e2`, and a key given twice is refused:
// neither is anything Apple sends.

extension JWSTransaction: SignedPayload {
    public init(payloadJSON bytes: [UInt8]) throws(AppleVerificationError) {
        self.init()
        for member in try JSONField.members(of: bytes) {
            switch member.key {
            case "transactionId": transactionId = try JSONField.string(member)
            case "originalTransactionId": originalTransactionId = try JSONField.string(member)
            case "webOrderLineItemId": webOrderLineItemId = try JSONField.string(member)
            case "bundleId": bundleId = try JSONField.string(member)
            case "productId": productId = try JSONField.string(member)
            case "subscriptionGroupIdentifier": subscriptionGroupIdentifier = try JSONField.string(member)
            case "purchaseDate": purchaseDate = try JSONField.double(member)
            case "originalPurchaseDate": originalPurchaseDate = try JSONField.double(member)
            case "expiresDate": expiresDate = try JSONField.double(member)
            case "quantity": quantity = try JSONField.integer(member)
            case "type": type = try JSONField.string(member)
            case "appAccountToken": appAccountToken = try JSONField.string(member)
            case "inAppOwnershipType": inAppOwnershipType = try JSONField.string(member).map(InAppOwnershipType.init)
            case "signedDate": signedDate = try JSONField.double(member)
            case "revocationReason": revocationReason = try JSONField.integer(member).map(RevocationReason.init)
            case "revocationDate": revocationDate = try JSONField.double(member)
            case "revocationType": revocationType = try JSONField.string(member).map(RevocationType.init)
            case "revocationPercentage": revocationPercentage = try JSONField.integer(member)
            case "isUpgraded": isUpgraded = try JSONField.bool(member)
            case "offerType": offerType = try JSONField.integer(member)
            case "offerIdentifier": offerIdentifier = try JSONField.string(member)
            case "environment": environment = try JSONField.string(member).map(AppleEnvironment.init(rawValue:))
            case "storefront": storefront = try JSONField.string(member)
            case "storefrontId": storefrontId = try JSONField.string(member)
            case "transactionReason": transactionReason = try JSONField.string(member)
            case "currency": currency = try JSONField.string(member)
            case "price": price = try JSONField.integer(member)
            case "offerDiscountType": offerDiscountType = try JSONField.string(member)
            case "appTransactionId": appTransactionId = try JSONField.string(member)
            case "offerPeriod": offerPeriod = try JSONField.string(member)
            case "billingPlanType": billingPlanType = try JSONField.string(member)
            case "commitmentInfo": commitmentInfo = try TransactionCommitmentInfo(member)
            default: break
            }
        }
    }

    public var millisecondTimes: [(field: String, milliseconds: Double?)] {
        [
            ("signedDate", signedDate), ("purchaseDate", purchaseDate), ("originalPurchaseDate", originalPurchaseDate),
            ("expiresDate", expiresDate), ("revocationDate", revocationDate),
            ("commitmentInfo.commitmentExpiresDate", commitmentInfo?.commitmentExpiresDate),
        ]
    }
}

extension JWSAppTransaction: SignedPayload {
    public init(payloadJSON bytes: [UInt8]) throws(AppleVerificationError) {
        self.init()
        for member in try JSONField.members(of: bytes) {
            switch member.key {
            case "appTransactionId": appTransactionId = try JSONField.string(member)
            case "bundleId": bundleId = try JSONField.string(member)
            case "appAppleId": appAppleId = try JSONField.integer(member)
            case "receiptType": receiptType = try JSONField.string(member)
            case "originalPurchaseDate": originalPurchaseDate = try JSONField.double(member)
            case "signedDate": signedDate = try JSONField.double(member)
            default: break
            }
        }
    }

    public var millisecondTimes: [(field: String, milliseconds: Double?)] {
        [("signedDate", signedDate), ("originalPurchaseDate", originalPurchaseDate)]
    }
}

extension TransactionCommitmentInfo {
    /// The nested object; `null` is none, anything but an object refused.
    init?(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) {
        if member.raw.elementsEqual("null".utf8) { return nil }
        guard let members = JSONObjectScanner.members(member.raw) else {
            throw AppleVerificationError(.malformed, "the JWS payload does not decode: commitmentInfo is not an object")
        }
        self.init()
        for field in members {
            switch field.key {
            case "billingPeriodNumber": billingPeriodNumber = try JSONField.integer(field)
            case "totalBillingPeriods": totalBillingPeriods = try JSONField.integer(field)
            case "commitmentExpiresDate": commitmentExpiresDate = try JSONField.double(field)
            case "commitmentPrice": commitmentPrice = try JSONField.integer(field)
            default: break
            }
        }
    }
}

extension JWSRenewalInfo: SignedPayload {
    public init(payloadJSON bytes: [UInt8]) throws(AppleVerificationError) {
        for member in try JSONField.members(of: bytes) {
            switch member.key {
            case "originalTransactionId": originalTransactionId = try JSONField.string(member)
            case "autoRenewProductId": autoRenewProductId = try JSONField.string(member)
            case "productId": productId = try JSONField.string(member)
            case "autoRenewStatus": autoRenewStatus = try JSONField.integer(member)
            case "expirationIntent": expirationIntent = try JSONField.integer(member)
            case "isInBillingRetryPeriod": isInBillingRetryPeriod = try JSONField.bool(member)
            case "gracePeriodExpiresDate": gracePeriodExpiresDate = try JSONField.double(member)
            case "signedDate": signedDate = try JSONField.double(member)
            case "environment": environment = try JSONField.string(member).map(AppleEnvironment.init(rawValue:))
            case "recentSubscriptionStartDate": recentSubscriptionStartDate = try JSONField.double(member)
            case "renewalDate": renewalDate = try JSONField.double(member)
            default: break
            }
        }
    }

    public var millisecondTimes: [(field: String, milliseconds: Double?)] {
        [
            ("signedDate", signedDate), ("gracePeriodExpiresDate", gracePeriodExpiresDate),
            ("recentSubscriptionStartDate", recentSubscriptionStartDate), ("renewalDate", renewalDate),
        ]
    }
}

extension NotificationPayload: SignedPayload {
    public var millisecondTimes: [(field: String, milliseconds: Double?)] {
        [
            ("signedDate", signedDate),
            ("externalPurchaseToken.tokenCreationDate", externalPurchaseToken?.tokenCreationDate),
        ]
    }

    public init(payloadJSON bytes: [UInt8]) throws(AppleVerificationError) {
        for member in try JSONField.members(of: bytes) {
            switch member.key {
            case "notificationType": notificationType = try JSONField.string(member)
            case "subtype": subtype = try JSONField.string(member)
            case "notificationUUID": notificationUUID = try JSONField.string(member)
            case "version": version = try JSONField.string(member)
            case "signedDate": signedDate = try JSONField.double(member)
            case "data": data = try AppData(member)
            case "summary": summary = try AppData(member)
            case "appData": appData = try AppData(member)
            case "externalPurchaseToken": externalPurchaseToken = try ExternalPurchaseToken(member)
            default: break
            }
        }
    }
}

extension NotificationPayload.AppData {
    /// `data` or `summary`; nil for `null`.
    fileprivate init?(_ object: JSONObjectScanner.Member) throws(AppleVerificationError) {
        guard let members = try JSONField.object(object) else { return nil }
        for member in members {
            switch member.key {
            case "appAppleId": appAppleId = try JSONField.integer(member)
            case "bundleId": bundleId = try JSONField.string(member)
            case "bundleVersion": bundleVersion = try JSONField.string(member)
            case "environment": environment = try JSONField.string(member).map(AppleEnvironment.init(rawValue:))
            case "signedTransactionInfo": signedTransactionInfo = try JSONField.string(member)
            case "signedRenewalInfo": signedRenewalInfo = try JSONField.string(member)
            case "status": status = try JSONField.integer(member)
            case "consumptionRequestReason": consumptionRequestReason = try JSONField.string(member)
            case "signedAppTransactionInfo": signedAppTransactionInfo = try JSONField.string(member)
            case "productId": productId = try JSONField.string(member)
            case "requestIdentifier": requestIdentifier = try JSONField.string(member)
            case "storefrontCountryCodes": storefrontCountryCodes = try JSONField.strings(member)
            case "succeededCount": succeededCount = try JSONField.integer(member)
            case "failedCount": failedCount = try JSONField.integer(member)
            default: break
            }
        }
    }
}

extension NotificationPayload.ExternalPurchaseToken {
    /// `externalPurchaseToken`; nil for `null`.
    fileprivate init?(_ object: JSONObjectScanner.Member) throws(AppleVerificationError) {
        guard let members = try JSONField.object(object) else { return nil }
        for member in members {
            switch member.key {
            case "externalPurchaseId": externalPurchaseId = try JSONField.string(member)
            case "tokenCreationDate": tokenCreationDate = try JSONField.double(member)
            case "appAppleId": appAppleId = try JSONField.integer(member)
            case "bundleId": bundleId = try JSONField.string(member)
            default: break
            }
        }
    }
}

/// Typed values of scanned members; `null` is nil, as an absent key.
enum JSONField {
    /// `subject` names the document in the errors (a JWS payload, verifyReceipt's answer).
    static func members(of bytes: [UInt8], subject: String = "the JWS payload") throws(AppleVerificationError)
        -> [JSONObjectScanner.Member]
    {
        guard let members = JSONObjectScanner.members(bytes) else {
            throw AppleVerificationError(.malformed, "\(subject) does not decode: not a JSON object")
        }
        return try unique(members, subject: subject)
    }

    /// A key given twice is refused, as the job parser refuses it: this reader would keep the last value,
    /// the app's bundle id peek (AppleApps) the first.
    private static func unique(_ members: [JSONObjectScanner.Member], subject: String = "the JWS payload")
        throws(AppleVerificationError) -> [JSONObjectScanner.Member]
    {
        if let key = JSONObjectScanner.repeatedKey(members) {
            throw AppleVerificationError(
                .malformed, "\(subject) does not decode: \(UTF8Text.prefix(key, bytes: 64)) appears twice")
        }
        return members
    }

    static func string(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) -> String? {
        if isNull(member) { return nil }
        guard member.raw.first == UInt8(ascii: "\""), let text = JSONStringToken.text(member.raw) else {
            throw mistyped(member, "a string")
        }
        return text
    }

    /// Any JSON number that is a finite Double.
    static func double(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) -> Double? {
        if isNull(member) { return nil }
        guard let first = member.raw.first, first == UInt8(ascii: "-") || (0x30...0x39).contains(first),
            let value = Double(String(decoding: member.raw, as: UTF8.self)), value.isFinite
        else { throw mistyped(member, "a number") }
        return value
    }

    /// Digits with an optional minus sign, within `Value`'s range.
    static func integer<Value: FixedWidthInteger>(_ member: JSONObjectScanner.Member) throws(AppleVerificationError)
        -> Value?
    {
        if isNull(member) { return nil }
        let negative = member.raw.first == UInt8(ascii: "-")
        let digits = negative ? member.raw.dropFirst() : member.raw
        guard !digits.isEmpty else { throw mistyped(member, "an integer") }
        var value: Value = 0
        for byte in digits {
            guard (0x30...0x39).contains(byte) else { throw mistyped(member, "an integer") }
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            let digit = Value(byte - 0x30)
            let (next, overflowAdd) =
                negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            guard !overflowShift, !overflowAdd else { throw mistyped(member, "an integer in range") }
            value = next
        }
        return value
    }

    /// An array of strings, at most 1,000 (Apple's storefronts number fewer than 200).
    static func strings(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) -> [String]? {
        if isNull(member) { return nil }
        guard let elements = JSONObjectScanner.elements(member.raw), elements.count <= 1_000 else {
            throw mistyped(member, "a list of strings")
        }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for element in elements {
            guard element.first == UInt8(ascii: "\""), let text = JSONStringToken.text(element) else {
                throw mistyped(member, "a list of strings")
            }
            strings.append(text)
        }
        return strings
    }

    static func bool(_ member: JSONObjectScanner.Member) throws(AppleVerificationError) -> Bool? {
        if isNull(member) { return nil }
        if member.raw.elementsEqual("true".utf8) { return true }
        if member.raw.elementsEqual("false".utf8) { return false }
        throw mistyped(member, "true or false")
    }

    static func object(_ member: JSONObjectScanner.Member) throws(AppleVerificationError)
        -> [JSONObjectScanner.Member]?
    {
        if isNull(member) { return nil }
        guard let members = JSONObjectScanner.members(member.raw) else { throw mistyped(member, "an object") }
        return try unique(members)
    }

    private static func isNull(_ member: JSONObjectScanner.Member) -> Bool { member.raw.elementsEqual("null".utf8) }

    private static func mistyped(_ member: JSONObjectScanner.Member, _ expected: String) -> AppleVerificationError {
        // The key only: a value may be anything, of any length.
        AppleVerificationError(
            .malformed, "the JWS payload does not decode: \(UTF8Text.prefix(member.key, bytes: 64)) is not \(expected)")
    }
}
