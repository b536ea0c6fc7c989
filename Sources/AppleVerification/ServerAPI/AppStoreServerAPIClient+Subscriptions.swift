import Foundation
import HTTPClient
public import Vocabulary

/// Get All Subscription Statuses: where a subscription stands now, for a subscription whose renewal or expiry was
/// never heard. Its own rate lane; transient failures throw a retriable ``AppleVerificationError``.
extension AppStoreServerAPIClient {
    /// One subscription's latest period as Apple answers it (Apple's `LastTransactionsItem`). Verify both signed values
    /// before reading them: `status` is not signed, and nothing here acts on it.
    public struct LastTransactionsItem: Sendable, Equatable, Decodable {
        /// 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
        public var status: Int?
        public var originalTransactionId: String?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?

        public init(
            status: Int?, originalTransactionId: String?, signedTransactionInfo: String?, signedRenewalInfo: String?
        ) {
            self.status = status
            self.originalTransactionId = originalTransactionId
            self.signedTransactionInfo = signedTransactionInfo
            self.signedRenewalInfo = signedRenewalInfo
        }
    }

    public enum SubscriptionStatusAnswer: Sendable, Equatable {
        /// Every subscription of the customer in the app, in every subscription group.
        case found([LastTransactionsItem])
        /// 404 4040010: Apple knows no such transaction for this app in this environment.
        case notFound
        /// Refused for good: Apple's error code.
        case refused(status: Int, errorCode: Int?)
    }

    /// `GET /inApps/v1/subscriptions/{transactionId}`, from any transaction id of the subscription.
    public func subscriptionStatuses(id: String, environment: AppleEnvironment, attempts: inout Int) async throws
        -> SubscriptionStatusAnswer
    {
        guard Self.isPlainID(id, letters: false) else { return .refused(status: 400, errorCode: 4000006) }
        let sandbox = environment == .sandbox
        let response = try await authorized(
            method: .get, url: "\(base(environment))/inApps/v1/subscriptions/\(id)", body: nil,
            endpoint: "subscriptionStatuses", call: "subscription_status_\(sandbox ? "sandbox" : "production")",
            lane: RateGovernor.Lane(endpoint: "subscription_status", sandbox: sandbox), attempts: &attempts)
        if response.status == 200 {
            guard let body = try? JSONDecoder().decode(StatusResponse.self, from: response.body),
                let groups = body.data
            else {
                throw AppleVerificationError(
                    .apiError, "subscriptionStatuses: HTTP 200 without data", isRetriable: true)
            }
            return .found(groups.flatMap { $0.lastTransactions ?? [] })
        }
        let code = (try? JSONDecoder().decode(APIErrorBody.self, from: response.body))?.errorCode
        try throwIfTransient(response, errorCode: code, endpoint: "subscriptionStatuses")
        if code == Self.transactionNotFound { return .notFound }
        return .refused(status: response.status, errorCode: code)
    }
}

private struct StatusResponse: Decodable {
    struct Group: Decodable {
        let lastTransactions: [AppStoreServerAPIClient.LastTransactionsItem]?
    }
    let data: [Group]?
}
