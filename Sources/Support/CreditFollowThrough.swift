import AppleVerification
import Foundation
public import Messaging
public import LedgerDomain
public import Vocabulary

/// What follows a credit the ledger recorded, the same for `receipt-worker credit` and the support desk: its
/// event published on `topics.results` (then its follow-up, in order), the transaction finished at Apple (with
/// `apple.finish_transactions`), and the player's app account token set at Apple when the request proved it.
public struct CreditFollowThrough: Sendable {
    /// What each step came to, in support's words.
    public var notes: [String] = []
    /// Where the event went (`topic[partition]`); nil when the broker did not take it.
    public var publishedTo: String?
    /// A step that must be run again (the same request again is safe): nil when every step is done.
    public var unfinished: String?

    public var eventPublished: Bool { publishedTo != nil }
}

extension SupportDesk {
    /// Publishes a credited outcome's events with `send`, then finishes and sets the token. Never throws: each
    /// step's failure is a note, and a failure to publish stops there (the ledger holds the credit; the same
    /// request again publishes the same event).
    public func followThrough(
        _ event: StoredEvent, originalTransactionID: String, environment: AppleEnvironment, setToken: Bool,
        request: CreditRequest, finish: Bool, send: (StoredEvent) async throws -> DeliveryReport
    ) async -> CreditFollowThrough {
        var result = CreditFollowThrough()
        do {
            var report: DeliveryReport?
            for published in event.published { report = try await send(published) }
            result.publishedTo = report.map { "\($0.topic)[\($0.partition)]" } ?? "-"
        } catch {
            result.unfinished =
                "recorded, but the broker did not take the event (\(error)): run the same request again"
            return result
        }
        if finish {
            // As after a job's grant: StoreKit stops delivering the transaction to the app (best effort).
            let finished = try? await self.finish(transactionID: request.transactionID, environment: environment)
            result.notes.append(finished == .done ? "finished at Apple" : "not finished at Apple (the grant stands)")
        }
        guard setToken, let token = request.appAccountToken else {
            if request.appAccountToken == nil {
                result.notes.append(
                    "no app account token given: Apple's later notifications of this purchase will not name the player")
            }
            return result
        }
        do {
            switch try await setAccountToken(
                token, originalTransactionID: originalTransactionID, environment: environment)
            {
            case .done:
                result.notes.append(
                    "Apple's app account token of transaction \(originalTransactionID) set: its notifications name the"
                        + " player")
            case .notFound:
                result.unfinished =
                    "credited; Apple does not know transaction \(originalTransactionID) for Set App Account Token"
            case .refused(_, 4000185):
                // For good: Apple sets no token on a family member's transaction. The credit stands.
                result.notes.append("credited; Apple sets no app account token on a family member's transaction")
            case .refused(let status, let code):
                result.unfinished =
                    "credited; Apple refused Set App Account Token (HTTP \(status), error"
                    + " \(code.map(String.init) ?? "none"))"
            }
        } catch {
            result.unfinished =
                "credited; Apple did not answer Set App Account Token (\(error)): run the same request again"
        }
        return result
    }
}
