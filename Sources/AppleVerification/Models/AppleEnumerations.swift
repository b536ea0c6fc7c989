// Apple's enumerations of a transaction, as open types with raw values (as Apple's App Store Server Library has
// them): a value Apple adds later reads as itself, never as an error, and a rule compares against a named case.

/// `inAppOwnershipType`: who owns the purchase.
public struct InAppOwnershipType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Bought by the account.
    public static let purchased = InAppOwnershipType(rawValue: "PURCHASED")
    /// A family member's access through Family Sharing: no money changed hands.
    public static let familyShared = InAppOwnershipType(rawValue: "FAMILY_SHARED")

    public var description: String { rawValue }
}

/// `revocationType`: how a purchase was taken back.
public struct RevocationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Apple refunded all of it.
    public static let refundFull = RevocationType(rawValue: "REFUND_FULL")
    /// Apple refunded part of it.
    public static let refundProrated = RevocationType(rawValue: "REFUND_PRORATED")
    /// The purchaser stopped sharing it with the family.
    public static let familyRevoke = RevocationType(rawValue: "FAMILY_REVOKE")

    public var description: String { rawValue }
}

/// `revocationReason`: why Apple refunded it.
public struct RevocationReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The customer asked for another reason (an accidental purchase, say).
    public static let other = RevocationReason(rawValue: 0)
    /// The customer reported a problem with the app (content not delivered, say).
    public static let appIssue = RevocationReason(rawValue: 1)

    public var description: String { String(rawValue) }
}

extension InAppOwnershipType: Codable {
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension RevocationType: Codable {
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension RevocationReason: Codable {
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(Int.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
