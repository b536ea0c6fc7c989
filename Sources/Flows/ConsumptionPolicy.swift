/// How a policy answers Apple's consumption requests that no grant service answered in time (an app's
/// `consumption.*` keys).
public struct ConsumptionPolicy: Sendable, Equatable {
    public enum Answer: String, Sendable, CaseIterable {
        case none, decline, grantProrated = "grant_prorated", grantFull = "grant_full"

        /// Apple's `refundPreference`; nil for none.
        public var refundPreference: String? {
            switch self {
            case .none: nil
            case .decline: "DECLINE"
            case .grantProrated: "GRANT_PRORATED"
            case .grantFull: "GRANT_FULL"
            }
        }
    }

    /// `consumption.policy`: none, decline, grant_prorated, grant_full. Default: none.
    public var answer = Answer.none
    /// `consumption.margin_ms`: how long before Apple's deadline the policy answers. Default: 1 hour.
    public var margin: Duration = .seconds(3_600)
    /// `consumption.terms_carry_consent`: the studio's terms carry the player's consent. Default: false.
    public var termsCarryConsent = false

    public init() {}
}
