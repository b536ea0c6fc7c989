/// An App Store Server Notification's `notificationType` (V2). Open: a type Apple adds later still decodes, keeps
/// its raw value, and is counted as `other` in the metrics (``isKnown``).
public struct NotificationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let consumptionRequest = Self(rawValue: "CONSUMPTION_REQUEST")
    public static let didChangeRenewalPref = Self(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didChangeRenewalStatus = Self(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let didFailToRenew = Self(rawValue: "DID_FAIL_TO_RENEW")
    public static let didRenew = Self(rawValue: "DID_RENEW")
    public static let expired = Self(rawValue: "EXPIRED")
    public static let externalPurchaseToken = Self(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let gracePeriodExpired = Self(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let metadataUpdate = Self(rawValue: "METADATA_UPDATE")
    public static let migration = Self(rawValue: "MIGRATION")
    public static let offerRedeemed = Self(rawValue: "OFFER_REDEEMED")
    public static let oneTimeCharge = Self(rawValue: "ONE_TIME_CHARGE")
    public static let priceChange = Self(rawValue: "PRICE_CHANGE")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let refund = Self(rawValue: "REFUND")
    public static let refundDeclined = Self(rawValue: "REFUND_DECLINED")
    public static let refundReversed = Self(rawValue: "REFUND_REVERSED")
    public static let renewalExtended = Self(rawValue: "RENEWAL_EXTENDED")
    public static let renewalExtension = Self(rawValue: "RENEWAL_EXTENSION")
    public static let rescindConsent = Self(rawValue: "RESCIND_CONSENT")
    public static let revoke = Self(rawValue: "REVOKE")
    public static let subscribed = Self(rawValue: "SUBSCRIBED")
    public static let test = Self(rawValue: "TEST")

    /// Every type Apple documents today.
    public static let known: [NotificationType] = [
        .consumptionRequest, .didChangeRenewalPref, .didChangeRenewalStatus, .didFailToRenew, .didRenew, .expired,
        .externalPurchaseToken, .gracePeriodExpired, .metadataUpdate, .migration, .offerRedeemed, .oneTimeCharge,
        .priceChange, .priceIncrease, .refund, .refundDeclined, .refundReversed, .renewalExtended, .renewalExtension,
        .rescindConsent, .revoke, .subscribed, .test,
    ]
    private static let knownSet = Set(known)

    public var isKnown: Bool { Self.knownSet.contains(self) }
}

/// A notification's `subtype`. Open, like ``NotificationType``; only the subtypes a rule reads are named.
public struct NotificationSubtype: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    public static let initialBuy = Self(rawValue: "INITIAL_BUY")
    public static let resubscribe = Self(rawValue: "RESUBSCRIBE")
    public static let upgrade = Self(rawValue: "UPGRADE")
    /// `DID_RENEW`'s: the period a retried payment bought, after a billing issue.
    public static let billingRecovery = Self(rawValue: "BILLING_RECOVERY")
    /// `EXTERNAL_PURCHASE_TOKEN` subtypes: a token created, and a reminder to report an active one. Named for the
    /// contract's table; no rule reads them (such notifications change no purchase).
    public static let created = Self(rawValue: "CREATED")
    public static let activeTokenReminder = Self(rawValue: "ACTIVE_TOKEN_REMINDER")
    /// `RENEWAL_EXTENSION` subtypes: a mass extension is done (its `summary`), or could not extend one
    /// subscription (its `data`).
    public static let summary = Self(rawValue: "SUMMARY")
    public static let failure = Self(rawValue: "FAILURE")
}
