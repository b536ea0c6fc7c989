public import AppleVerification
public import Foundation
import LedgerDomain
public import Vocabulary

/// Amends after an outage: one subscription's renewal date moved later (Extend a Subscription Renewal Date), or
/// every active subscriber's of a product (Extend Subscription Renewal Dates for All Active Subscribers), followed
/// to its end (Get Status). Apple's refusals are said in words, with Apple's code. The grant services hear of each
/// subscription extended from Apple's RENEWAL_EXTENDED (`receipt.renewal_changed`, `expires_at` moved), of each
/// one a mass request could not extend (`receipt.extension_failed`), and of a mass request's end
/// (`receipt.extension_completed`, its counts): the worker publishes them, not this desk.
extension SupportDesk {
    public typealias RenewalExtension = AppStoreServerAPIClient.RenewalExtension
    public typealias ExtendReason = AppStoreServerAPIClient.ExtendReason

    /// A reason by its name (`undeclared`, `customer_satisfaction`, `other`, `service_issue`) or code (0 to 3).
    public static func extendReason(named name: String) -> ExtendReason? { ExtendReason(name: name) }

    /// A product id Apple takes (letters, digits, `.`, `_`, `-`; at most 100).
    public static func isProductID(_ id: String) -> Bool { AppStoreServerAPIClient.isProductID(id) }

    /// A storefront's three-letter code, upper case.
    public static func isStorefront(_ code: String) -> Bool { AppStoreServerAPIClient.isStorefront(code) }

    public enum ExtensionOutcome: Sendable, Equatable {
        /// Extended: the subscription's new expiry, and the environment it was found in.
        case extended(effectiveDate: Date?, environment: AppleEnvironment)
        /// Not extended, and why (Apple's reason in words, with its code).
        case refused(String)
    }

    /// Extends one subscription: in Production, else (where Sandbox is accepted) in the Sandbox when Production
    /// knows no such subscription.
    public func extendSubscription(originalTransactionID: String, _ ask: RenewalExtension) async throws
        -> ExtensionOutcome
    {
        let environments: [AppleEnvironment] = allowSandbox ? [.production, .sandbox] : [.production]
        var lastRefusal = ""
        for environment in environments {
            let answer = try await retrying {
                try await api.extendRenewalDate(
                    originalTransactionID: originalTransactionID, ask, environment: environment, attempts: &$0)
            }
            switch answer {
            case .extended(let date, _):
                return .extended(effectiveDate: date, environment: environment)
            case .notExtended:
                return .refused("Apple answered that the renewal date was not extended")
            case .refused(let status, let code):
                lastRefusal = Self.extensionRefusal(status: status, code: code)
                // Not found in Production: perhaps a tester's subscription.
                guard code == 4040005 else { return .refused(lastRefusal) }
            }
        }
        return .refused(lastRefusal)
    }

    public enum MassExtensionOutcome: Sendable, Equatable {
        case started(requestIdentifier: String)
        case refused(String)
    }

    /// Asks Apple to extend every active subscriber of `productID` (in `storefronts`, nil for all) in
    /// `environment`. The same request identifier again is the same request.
    public func extendAllSubscriptions(
        productID: String, storefronts: [String]?, _ ask: RenewalExtension, environment: AppleEnvironment
    ) async throws -> MassExtensionOutcome {
        guard environment == .production || allowSandbox else {
            return .refused("the Sandbox is not accepted for this app (apple.allow_sandbox is false)")
        }
        let answer = try await retrying {
            try await api.extendAllRenewalDates(
                productID: productID, storefronts: storefronts, ask, environment: environment, attempts: &$0)
        }
        switch answer {
        case .accepted(let identifier): return .started(requestIdentifier: identifier)
        case .refused(let status, let code): return .refused(Self.extensionRefusal(status: status, code: code))
        }
    }

    public enum MassExtensionProgress: Sendable, Equatable {
        case status(AppStoreServerAPIClient.MassExtensionStatus)
        case refused(String)
    }

    /// Where a mass extension stands at Apple.
    public func massExtensionStatus(productID: String, requestIdentifier: String, environment: AppleEnvironment)
        async throws -> MassExtensionProgress
    {
        guard environment == .production || allowSandbox else {
            return .refused("the Sandbox is not accepted for this app (apple.allow_sandbox is false)")
        }
        let answer = try await retrying {
            try await api.massExtensionStatus(
                productID: productID, requestIdentifier: requestIdentifier, environment: environment, attempts: &$0)
        }
        switch answer {
        case .status(let status): return .status(status)
        case .notFound:
            return .refused("Apple knows no extension request \(requestIdentifier) for product \(productID)")
        case .refused(let status, let code): return .refused(Self.extensionRefusal(status: status, code: code))
        }
    }

    /// Apple's refusal of an extension, in words.
    static func extensionRefusal(status: Int, code: Int?) -> String {
        let why =
            switch code {
            case 4030004:
                "the subscription is not eligible: expired, in billing retry, in a free offer period, or extended twice"
                    + " in the last 365 days"
            case 4030005: "the subscription was extended twice in the last 365 days: Apple's limit"
            case 4030007: "a family member's subscription: extend the purchaser's, which extends theirs"
            case 4040005: "Apple knows no subscription with this original transaction id in this app"
            case 4000008: "not an original transaction id"
            case 4000009: "days must be 1 to 90"
            case 4000010: "the reason must be 0 to 3"
            case 4000011: "the request identifier must be 1 to 128 bytes (a UUID for all subscribers)"
            case 4000023: "not a product id"
            case 4000027: "the storefront list is empty: name storefronts, or none for all"
            case 4000028: "a storefront code is not one (three capital letters, such as USA)"
            default: "Apple refused the request"
            }
        return "\(why) (Apple error \(code.map(String.init) ?? "none"), HTTP \(status))"
    }
}

extension SupportDesk.MassExtensionProgress {
    /// Whether the request is done (or Apple refused to say where it stands): nothing more to wait for.
    public var isFinal: Bool {
        if case .status(let status) = self { return status.complete }
        return true
    }

    /// One line a person reads: in progress, done with its counts, or why Apple did not say.
    public var line: String {
        switch self {
        case .refused(let why): return why
        case .status(let status) where status.complete:
            let done = status.completeDate.map(RFC3339.format) ?? "an unknown time"
            return "complete at \(done): \(status.succeeded ?? 0) extended, \(status.failed ?? 0) not extended"
        case .status: return "in progress"
        }
    }
}
