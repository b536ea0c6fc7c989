public import Foundation
import HTTPClient
public import Vocabulary

/// Renewal-date extensions: Extend a Subscription Renewal Date (one subscription), Extend Subscription Renewal
/// Dates for All Active Subscribers (a product, in some storefronts or all) and Get Status of Subscription Renewal
/// Date Extensions. A request carries its own identifier, which Apple tells callers to send again unchanged when a
/// request timed out or failed ("To resend the same request due to a timeout or other error, use the same request
/// identifier"; for a mass request: "If you reuse the requestIdentifier to call the endpoint again, the server
/// responds with 200"): these calls are retried like any other, always with the same identifier. Apple's limits
/// (1 to 90 days, a reason 0 to 3, an identifier of at most 128 bytes, a UUID for a mass request) are checked
/// before any call.
extension AppStoreServerAPIClient {
    /// What an extension asks: how many days, why, and the request's identifier.
    public struct RenewalExtension: Sendable, Equatable {
        public var days: Int
        public var reason: ExtendReason
        public var requestIdentifier: String

        public init(days: Int, reason: ExtendReason, requestIdentifier: String) {
            self.days = days
            self.reason = reason
            self.requestIdentifier = requestIdentifier
        }

        /// Apple's bounds: 1 to 90 days; an identifier of 1 to 128 bytes (a UUID for a mass request).
        public var isWithinApplesLimits: Bool {
            (1...90).contains(days) && (1...128).contains(requestIdentifier.utf8.count)
                && !requestIdentifier.unicodeScalars.contains { $0.properties.generalCategory == .control }
        }
    }

    /// Apple's `extendReasonCode`.
    public enum ExtendReason: Int, Sendable, CaseIterable {
        case undeclared = 0
        case customerSatisfaction = 1
        case other = 2
        case serviceIssueOrOutage = 3

        /// The names the command line and the desk take.
        public var name: String {
            switch self {
            case .undeclared: "undeclared"
            case .customerSatisfaction: "customer_satisfaction"
            case .other: "other"
            case .serviceIssueOrOutage: "service_issue"
            }
        }

        public init?(name: String) {
            guard let found = Self.allCases.first(where: { $0.name == name || String($0.rawValue) == name }) else {
                return nil
            }
            self = found
        }
    }

    public enum ExtensionAnswer: Sendable, Equatable {
        /// Extended: the subscription's new expiry (Apple's `effectiveDate`).
        case extended(effectiveDate: Date?, webOrderLineItemID: String?)
        /// Apple answered 200 with `success: false`.
        case notExtended
        /// Refused for good: Apple's error code (4030004 not eligible, 4030005 extended twice in 365 days,
        /// 4030007 a family member's, 4040005 no such subscription, 4000009–4000011 a field out of range).
        case refused(status: Int, errorCode: Int?)
    }

    /// `PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`.
    public func extendRenewalDate(
        originalTransactionID: String, _ ask: RenewalExtension, environment: AppleEnvironment, attempts: inout Int
    ) async throws -> ExtensionAnswer {
        guard Self.isPlainID(originalTransactionID, letters: false) else {
            return .refused(status: 400, errorCode: 4000008)
        }
        guard ask.isWithinApplesLimits else {
            return .refused(status: 400, errorCode: (1...90).contains(ask.days) ? 4000011 : 4000009)
        }
        let body = try JSONEncoder().encode(
            ExtensionBodies.ExtendRequest(
                extendByDays: ask.days, extendReasonCode: ask.reason.rawValue,
                requestIdentifier: ask.requestIdentifier))
        let sandbox = environment == .sandbox
        let response = try await authorized(
            method: .put, url: "\(base(environment))/inApps/v1/subscriptions/extend/\(originalTransactionID)",
            body: body, endpoint: "extendRenewalDate", call: "extend_renewal_\(sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "extend_renewal", sandbox: sandbox), attempts: &attempts)
        if response.status == 200 {
            guard let answer = try? JSONDecoder().decode(ExtensionBodies.ExtendResponse.self, from: response.body)
            else {
                throw AppleVerificationError(
                    .apiError, "extendRenewalDate: HTTP 200 that does not decode", isRetriable: true)
            }
            guard answer.success == true else { return .notExtended }
            return .extended(
                effectiveDate: answer.effectiveDate.flatMap { AppleTimestamp.date(milliseconds: $0) },
                webOrderLineItemID: answer.webOrderLineItemId)
        }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: "extendRenewalDate")
        return .refused(status: response.status, errorCode: code)
    }

    public enum MassExtensionAnswer: Sendable, Equatable {
        /// Apple took the request (or took it before: the same identifier); it runs for hours or days.
        case accepted(requestIdentifier: String)
        case refused(status: Int, errorCode: Int?)
    }

    /// `POST /inApps/v1/subscriptions/extend/mass`. `storefronts`: three-letter storefront codes; nil for all
    /// (an empty list is Apple's error 4000027, refused here without a call).
    public func extendAllRenewalDates(
        productID: String, storefronts: [String]?, _ ask: RenewalExtension, environment: AppleEnvironment,
        attempts: inout Int
    ) async throws -> MassExtensionAnswer {
        guard Self.isProductID(productID) else { return .refused(status: 400, errorCode: 4000023) }
        guard ask.isWithinApplesLimits, UUID(uuidString: ask.requestIdentifier) != nil else {
            return .refused(status: 400, errorCode: (1...90).contains(ask.days) ? 4000011 : 4000009)
        }
        if let storefronts {
            guard !storefronts.isEmpty else { return .refused(status: 400, errorCode: 4000027) }
            guard storefronts.allSatisfy(Self.isStorefront) else { return .refused(status: 400, errorCode: 4000028) }
        }
        let body = try JSONEncoder().encode(
            ExtensionBodies.MassExtendRequest(
                requestIdentifier: ask.requestIdentifier, extendByDays: ask.days,
                extendReasonCode: ask.reason.rawValue, productId: productID, storefrontCountryCodes: storefronts))
        let sandbox = environment == .sandbox
        let response = try await authorized(
            method: .post, url: "\(base(environment))/inApps/v1/subscriptions/extend/mass", body: body,
            endpoint: "massExtendRenewalDate", call: "mass_extend_\(sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "mass_extend", sandbox: sandbox), attempts: &attempts)
        if response.status == 200 { return .accepted(requestIdentifier: ask.requestIdentifier) }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: "massExtendRenewalDate")
        return .refused(status: response.status, errorCode: code)
    }

    /// Where a mass extension stands.
    public struct MassExtensionStatus: Sendable, Equatable {
        public var complete: Bool
        public var completeDate: Date?
        public var succeeded: Int64?
        public var failed: Int64?

        public init(complete: Bool, completeDate: Date?, succeeded: Int64?, failed: Int64?) {
            self.complete = complete
            self.completeDate = completeDate
            self.succeeded = succeeded
            self.failed = failed
        }
    }

    public enum MassExtensionStatusAnswer: Sendable, Equatable {
        case status(MassExtensionStatus)
        /// 404 4040009: no such request for this product.
        case notFound
        case refused(status: Int, errorCode: Int?)
    }

    /// `GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`.
    public func massExtensionStatus(
        productID: String, requestIdentifier: String, environment: AppleEnvironment, attempts: inout Int
    ) async throws -> MassExtensionStatusAnswer {
        guard Self.isProductID(productID) else { return .refused(status: 400, errorCode: 4000023) }
        guard let uuid = UUID(uuidString: requestIdentifier) else { return .refused(status: 400, errorCode: 4000011) }
        let sandbox = environment == .sandbox
        let response = try await authorized(
            method: .get,
            url:
                "\(base(environment))/inApps/v1/subscriptions/extend/mass/\(productID)/\(uuid.uuidString.lowercased())",
            body: nil, endpoint: "massExtensionStatus",
            call: "mass_extension_status_\(sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "mass_extension_status", sandbox: sandbox), attempts: &attempts)
        if response.status == 200 {
            guard let answer = try? JSONDecoder().decode(ExtensionBodies.MassStatusResponse.self, from: response.body),
                let complete = answer.complete
            else {
                throw AppleVerificationError(
                    .apiError, "massExtensionStatus: HTTP 200 without complete", isRetriable: true)
            }
            return .status(
                MassExtensionStatus(
                    complete: complete,
                    completeDate: answer.completeDate.flatMap { AppleTimestamp.date(milliseconds: $0) },
                    succeeded: answer.succeededCount, failed: answer.failedCount))
        }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: "massExtensionStatus")
        if code == 4040009 { return .notFound }
        return .refused(status: response.status, errorCode: code)
    }

    /// A product id as App Store Connect allows it (letters, digits, `.`, `_`, `-`; at most 100): never a path.
    public static func isProductID(_ id: String) -> Bool {
        (1...100).contains(id.utf8.count)
            && id.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
            }
    }

    /// A storefront's three-letter code (ISO 3166-1 alpha-3, upper case).
    public static func isStorefront(_ code: String) -> Bool {
        code.utf8.count == 3 && code.utf8.allSatisfy { $0 >= 0x41 && $0 <= 0x5A }
    }
}

/// Apple's request and response bodies of the three endpoints, in Apple's field names.
private enum ExtensionBodies {
    struct ExtendRequest: Encodable {
        let extendByDays: Int
        let extendReasonCode: Int
        let requestIdentifier: String
    }

    struct ExtendResponse: Decodable {
        let originalTransactionId: String?
        let webOrderLineItemId: String?
        let success: Bool?
        let effectiveDate: Double?
    }

    struct MassExtendRequest: Encodable {
        let requestIdentifier: String
        let extendByDays: Int
        let extendReasonCode: Int
        let productId: String
        let storefrontCountryCodes: [String]?
    }

    struct MassStatusResponse: Decodable {
        let requestIdentifier: String?
        let complete: Bool?
        let completeDate: Double?
        let succeededCount: Int64?
        let failedCount: Int64?
    }
}
