public import AppleVerification
import Crypto
import Events
public import Foundation
public import LedgerDomain
import Observability
public import Vocabulary
import Flows

/// Support's credit of a purchase no order holds (`receipt-worker credit`).
extension SupportDesk {
    public struct CreditRequest: Sendable {
        public var transactionID: String
        public var orderID: String
        public var userID: String
        /// Who asked (a support agent's name or id) and why: in the event and, with it, in the ledger.
        public var by: String
        public var reason: String
        /// The proof that the purchase is the player's: the order id on the player's invoice from Apple (it must
        /// list the transaction), or the player's app account token (the transaction's must be it). A transaction
        /// id alone proves nothing: ids are nearly sequential, and a player could quote another's.
        public var appleOrderID: String?
        public var appAccountToken: UUID?

        public init(
            transactionID: String, orderID: String, userID: String, by: String, reason: String,
            appleOrderID: String? = nil, appAccountToken: UUID? = nil
        ) {
            self.transactionID = transactionID
            self.orderID = orderID
            self.userID = userID
            self.by = by
            self.reason = reason
            self.appleOrderID = appleOrderID
            self.appAccountToken = appAccountToken
        }
    }

    /// The note of a credit recorded before by the same request (nothing new recorded; its event again).
    public static let repeatedCredit = "credited before by this same request: its event again (the same event_id)"

    public enum CreditDecision: Sendable, Equatable {
        /// Recorded with its claim: the event to publish (a grant, which grant services already handle; with its
        /// follow-up, publish ``StoredEvent/published`` in order), and the purchase's original transaction and
        /// environment (for Set App Account Token).
        /// `setToken`: the purchase has no app account token yet, and the request gave the player's.
        case credited(
            StoredEvent, originalTransactionID: String, environment: AppleEnvironment, note: String, setToken: Bool)
        /// Refused, and why, in support's words; nothing was recorded.
        case refused(String)
    }

    /// A credit ready for the ledger: Apple verified the purchase and it is the player's; what the claim records.
    public struct PreparedCredit: Sendable {
        let request: CreditRequest
        let decision: Decision
        let originalTransactionID: String
        let environment: AppleEnvironment
        /// The purchase has no app account token yet, and the request proved the player's: set it at Apple.
        let setToken: Bool
    }

    /// What a credit comes to before the ledger's transaction.
    public enum CreditPreparation: Sendable {
        /// Refused, and why; nothing to record.
        case refused(String)
        /// Recorded before by this same request: its outcome again (its event to publish again), nothing new.
        case recordedBefore(CreditDecision)
        /// To record (``SupportStore/recordCredit(_:caps:day:approval:audit:)``).
        case ready(PreparedCredit)
    }

    /// How a credit ended: its outcome, or over a cap (nothing recorded; the caller holds it for a lead), or its
    /// lead's approval decided otherwise meanwhile (nothing recorded).
    public enum CreditResult: Sendable, Equatable {
        case done(CreditDecision)
        case capReached
        case approvalTaken
    }

    /// Verifies the purchase with Apple (Get Transaction Info, its signature and app checked), refuses what must
    /// not be credited, then claims it for the order as a job's grant claims it, with one use of each of `caps`
    /// (nothing when a cap is full: ``CreditResult/capReached``) and its audit line (`audit`, made from the outcome)
    /// in the claim's transaction, and a lead's approval checked and marked in it too (`approval`). A refusal before
    /// the claim, or a request recorded before, has its line written alone; a request recorded before marks the
    /// approval first, only while it is still the lead's claim.
    public func credit(
        _ request: CreditRequest, caps: [DailyCounter] = [], day: String = "", now: Date = Date(),
        approval: ApprovalRequest.Move? = nil,
        audit: @escaping @Sendable (CreditDecision) -> AuditEntry
    ) async throws -> CreditResult {
        let prepared: PreparedCredit
        switch try await prepareCredit(request, now: now) {
        case .refused(let why):
            try await ledger.appendAudit(audit(.refused(why)))
            return .done(.refused(why))
        case .recordedBefore(let outcome):
            // Recorded by another way (the agent's same request again): its event is published now, so the hold is
            // marked as the credit's transaction would mark it, or, rejected or taken over meanwhile, left alone.
            if let approval,
                try await !ledger.decideApproval(id: approval.id, from: .claimed(approval.claim), to: approval.recorded)
            {
                return .approvalTaken
            }
            try await ledger.appendAudit(audit(outcome))
            return .done(outcome)
        case .ready(let ready):
            prepared = ready
        }
        let outcomeOf: @Sendable (ClaimVerdict) -> CreditDecision = { Self.outcome($0, of: prepared) }
        switch try await ledger.recordCredit(
            prepared.decision, caps: caps, day: day, approval: approval, audit: { audit(outcomeOf($0)) })
        {
        case .capReached:
            return .capReached
        case .approvalTaken:
            return .approvalTaken
        case .recorded(.duplicateTransaction, _):
            // Who holds it, for the answer (the audit line says another order does).
            let held = try await ledger.supportRecord(
                app: app.scope, environment: prepared.environment,
                purchaseID: prepared.decision.grant?.purchaseID ?? .transaction(request.transactionID),
                transactionID: prepared.decision.grant?.transactionID ?? request.transactionID
            ).grant
            return .done(
                .refused("already held: granted to order \(held?.orderID ?? "?") of player \(held?.userID ?? "?")"))
        case .recorded(let outcome, _):
            return .done(outcomeOf(outcome))
        }
    }

    /// Everything of a credit before the ledger's transaction: Apple's word on the purchase, and the rules a
    /// credit must pass.
    public func prepareCredit(_ request: CreditRequest, now: Date = Date()) async throws -> CreditPreparation {
        guard !UnclaimedOrderID.isReserved(request.orderID) else {
            return .refused(
                "order ids starting \(UnclaimedOrderID.prefix) are reserved for purchases credited unclaimed: name"
                    + " the player's order")
        }
        let answer = try await retrying { try await api.transactionInfo(id: request.transactionID, attempts: &$0) }
        let signed: String
        switch answer {
        case .found(let jws): signed = jws
        case .notFound:
            return try await refusedByApple(
                request, "Apple knows no transaction \(request.transactionID) of this app: not this app's")
        case .rejected(let code):
            return try await refusedByApple(
                request, "Apple refused transaction id \(request.transactionID) (error \(code))")
        }
        let payload: JWSTransaction
        let transaction: AppleTransaction
        do {
            (payload, transaction) = try await verified(signed)
        } catch  where error.isRetriable {
            // Not Apple's word on the purchase (its chain's revocation status not known yet): asked again, never
            // a refusal, nor a credit recorded before published as one Apple refuses.
            throw error
        } catch {
            let refusal =
                switch error.code {
                case .bundleMismatch: "not this app's: \(error.reason)"
                case .environmentNotAllowed: "Sandbox: a tester's purchase, never credited here"
                default: "the transaction does not verify: \(error.reason)"
                }
            return try await refusedByApple(request, refusal)
        }
        let environment = payload.environment ?? .production
        let key = decisionKey(request, transactionID: transaction.transactionID)
        let original = transaction.originalTransactionID ?? transaction.transactionID
        let wantsToken = transaction.appAccountToken == nil && request.appAccountToken != nil
        let record = try await ledger.supportRecord(
            app: app.scope, environment: environment, purchaseID: transaction.purchaseIdentity,
            transactionID: transaction.transactionID)
        // The same request again (a run cut short before the broker took its event, or before Apple set the
        // token) publishes its event again, whatever changed since (the period ended, a refund: its receipt.revoked
        // went out for this order, and a grant service holds it until the grant comes): it was recorded, and only
        // its event is missing. The proof is checked again, and the token set when it holds.
        if let first = try await ledger.storedDecision(key) {
            // Apple not answering the proof's check fails the run (exit 1, run again): never a rerun that forgets
            // the token.
            let proven = wantsToken ? try await ownershipRefusal(request, transaction, environment) == nil : false
            return .recordedBefore(
                .credited(
                    first, originalTransactionID: original, environment: environment, note: Self.repeatedCredit,
                    setToken: proven))
        }
        if environment == .sandbox && !allowSandbox {
            return .refused("Sandbox: a tester's purchase, never credited here")
        }
        if payload.inAppOwnershipType == .familyShared {
            return .refused(
                "a family member's access (Family Sharing): nothing was paid for it, nothing to credit;"
                    + " the app grants it when it presents the transaction")
        }
        // Refunded in part, the rest is the player's: credited, and the refunded share taken back at once.
        if let revoked = transaction.revocationDate, !transaction.isPartlyRefunded {
            return .refused("refunded or revoked on \(RFC3339.format(revoked)): nothing to credit")
        }
        if transaction.isSubscription, let expires = transaction.expiresDate, expires <= now {
            return .refused("the subscription period expired at \(RFC3339.format(expires)): nothing to credit now")
        }
        if let refusal = try await ownershipRefusal(request, transaction, environment) { return .refused(refusal) }
        // A purchase an order holds already is refused, whichever order (the same one included: nothing to
        // credit).
        if let held = record.grant, held.credit != .unclaimed {
            return .refused("already held: granted to order \(held.orderID) of player \(held.userID)")
        }
        let productID = transaction.productID ?? ""
        let granted = ResultEvent.supportGrant(
            key: key, app: app.scope, bundleID: app.bundleID, orderID: request.orderID, userID: request.userID,
            transaction: transaction, environment: environment, by: request.by, reason: request.reason, at: now)
        let claim = GrantClaim(
            orderID: request.orderID, transactionID: transaction.transactionID,
            purchaseID: transaction.purchaseIdentity, environment: environment, userID: request.userID,
            productID: productID, quantity: transaction.quantity,
            originalTransactionID: transaction.originalTransactionID, revenue: granted.revenue)
        // A purchase credited unclaimed (receipt.unclaimed) is tied to this order, answered with the credit's event
        // id: the grant service credited it once already, and credits nothing twice.
        let decision = Decision(
            key: key, grant: claim, event: granted.stored(),
            refundFollowUp: { RefundFollowUp.make(grant: granted, taken: $0) },
            appleRefund: RefundFollowUp.stated(by: transaction),
            creditAnswer: { creditEventID, revenue in
                var tied = granted
                tied.eventID = creditEventID
                tied.revenue = revenue
                tied.detail = "credited unclaimed before (receipt.unclaimed with this event_id), tied by support"
                return tied.stored()
            })
        return .ready(
            PreparedCredit(
                request: request, decision: decision, originalTransactionID: original, environment: environment,
                setToken: wantsToken))
    }

    /// A purchase Apple now refuses (unknown to it, or no longer verifying here: another app's, or Sandbox turned off
    /// since) is refused, unless this same request was recorded before: its event then goes out again from the
    /// ledger, as any request recorded before, its token not set at Apple. A credit recorded while Apple vouched for it
    /// is never left without its event (and a lead's approval that carried it out never left open).
    private func refusedByApple(_ request: CreditRequest, _ refusal: String) async throws -> CreditPreparation {
        guard let first = try await ledger.storedDecision(decisionKey(request, transactionID: request.transactionID))
        else { return .refused(refusal) }
        // A support credit's event always names its environment; one that did not is refused as before, rather than
        // finished at a guessed one.
        guard let written = TransactionFinisher.fields(first.json), let environment = written.environment else {
            return .refused(refusal)
        }
        let token = request.appAccountToken == nil ? "" : "; the player's app account token is not set at Apple"
        return .recordedBefore(
            .credited(
                first, originalTransactionID: written.originalTransactionID ?? request.transactionID,
                environment: environment,
                note: Self.repeatedCredit + "; Apple now refuses the purchase (\(refusal)): the ledger's event" + token,
                setToken: false))
    }

    /// What the ledger's answer to a prepared credit means, in support's words: pure, so that the credit's audit
    /// line is made in its transaction.
    static func outcome(_ recorded: ClaimVerdict, of prepared: PreparedCredit) -> CreditDecision {
        let request = prepared.request
        func credited(_ stored: StoredEvent, _ note: String) -> CreditDecision {
            .credited(
                stored, originalTransactionID: prepared.originalTransactionID, environment: prepared.environment,
                note: note, setToken: prepared.setToken)
        }
        switch recorded {
        case .recorded:
            return credited(
                prepared.decision.event, "credited to order \(request.orderID) of player \(request.userID)")
        case .recordedPartlyRefunded(let followUp), .takenBack(let followUp):
            // The grant, then the event that takes the refunded share back.
            var stored = prepared.decision.event
            stored.followUps = [followUp]
            let how =
                if case .takenBack = recorded {
                    "order \(request.orderID) holds this purchase already; Apple refunded part of it, which the ledger"
                        + " had not heard of: that share is taken back now"
                } else {
                    "credited to order \(request.orderID) of player \(request.userID); Apple refunded part of it before:"
                        + " that share is taken back at once"
                }
            return credited(stored, how + " (event \(followUp.eventID))")
        case .replay(let first):
            return credited(first, repeatedCredit)
        case .credited(let eventID, _):
            return .refused("order \(request.orderID) holds this purchase already (event \(eventID))")
        case .orderAlreadyFulfilled:
            return .refused("order \(request.orderID) was granted with another purchase: name another order")
        case .tied(let answer):
            return credited(answer, "it was credited unclaimed (event \(answer.eventID)): now tied to this order")
        case .revoked:
            return .refused("the purchase was refunded or revoked after it was granted or credited: nothing to credit")
        case .duplicateTransaction:
            return .refused("already held: granted to another order")
        }
    }

    /// The ledger's key of a credit: the same request (order, player, transaction) is the same decision.
    func decisionKey(_ request: CreditRequest, transactionID: String) -> DecisionKey {
        DecisionKey(
            app: app.scope, jobID: SupportJobID.of(transactionID: transactionID),
            fingerprint: SHA256Digest.hex(
                Array("support-v1\u{0}\(request.orderID)\u{0}\(request.userID)\u{0}\(transactionID)".utf8)))
    }

    /// Whether the ledger recorded this very request before (its event may still need publishing): asking
    /// again is then no new credit, and takes nothing of a cap.
    public func recordedBefore(_ request: CreditRequest) async throws -> Bool {
        try await ledger.storedDecision(decisionKey(request, transactionID: request.transactionID)) != nil
    }

    /// Why the request does not prove the purchase is the player's (nil: it does). The transaction's app account
    /// token, when it has one, must be the one given; without one, the player's invoice (Look Up Order ID, in the
    /// transaction's environment) must list the transaction.
    func ownershipRefusal(_ request: CreditRequest, _ transaction: AppleTransaction, _ environment: AppleEnvironment)
        async throws -> String?
    {
        if let token = transaction.appAccountToken {
            guard let given = request.appAccountToken else {
                return "the purchase carries an app account token: give the player's (--app-account-token) as proof"
            }
            return given.uuidString.lowercased() == token.lowercased()
                ? nil : "the purchase's app account token is not this player's: not theirs to credit"
        }
        guard let orderID = request.appleOrderID else {
            return "no proof the purchase is the player's: give the order id on their invoice (--apple-order-id)"
        }
        guard environment == .production else {
            return
                "Apple's Look Up Order ID answers in Production only: a \(environment.rawValue) purchase is not credited"
        }
        let answer = try await retrying {
            try await api.lookUpOrder(id: orderID, environment: .production, attempts: &$0)
        }
        guard case .found(let signed) = answer else {
            return "Apple knows no order \(orderID) of this app: not this app's, or not an Apple order id"
        }
        var listed = false
        for jws in signed where !listed {
            // A chain whose revocation status is being asked is waited for (``verified(_:)``); still not known
            // (its responder away), the credit fails to be asked again, never "not listed": that is a guess.
            do {
                listed = try await verified(jws).0.transactionId == transaction.transactionID
            } catch  where error.isRetriable {
                throw error
            } catch {
                continue  // an entry that does not verify lists nothing
            }
        }
        return listed
            ? nil : "Apple's order \(orderID) does not list transaction \(transaction.transactionID): not this player's"
    }

    /// Apple's Set App Account Token on the purchase's original transaction, so Apple's later notifications of it
    /// name the player; retried as a job's calls are.
    public func setAccountToken(_ token: UUID, originalTransactionID: String, environment: AppleEnvironment)
        async throws -> AppStoreServerAPIClient.Acknowledgement
    {
        try await retrying {
            try await api.setAppAccountToken(
                originalTransactionID: originalTransactionID, token: token, environment: environment, attempts: &$0)
        }
    }

    /// Finish Transaction, as after a job's grant with `apple.finish_transactions`.
    public func finish(transactionID: String, environment: AppleEnvironment) async throws
        -> AppStoreServerAPIClient.Acknowledgement
    {
        // No Sandbox endpoint is called where Sandbox is not accepted (a credit recorded before it was turned off).
        guard environment == .production || allowSandbox else { return .notFound }
        return try await retrying {
            try await api.finishTransaction(id: transactionID, environment: environment, attempts: &$0)
        }
    }
}
